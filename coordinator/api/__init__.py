"""The Python API: each function runs what a CLI command runs and returns a typed, frozen result;
the commands are thin layers over it (argument parsing, printing, exit codes). Errors are the
typed errors of :mod:`securelp.solvers.errors`, which the CLI maps to exit codes."""
