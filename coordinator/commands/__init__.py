"""One module per ``securelp`` subcommand; each exposes ``register(subparsers)``.

``register`` adds its parser and sets ``func`` to a callable ``(args) -> int``.
"""
