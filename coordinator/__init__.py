"""Session orchestration, aggregation, solving, reports and the ``securelp`` CLI."""
