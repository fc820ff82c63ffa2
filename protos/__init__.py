"""Protocol buffer definitions (package ``securelp.v1``) and their committed generated code."""
