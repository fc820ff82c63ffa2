"""Pure computation for securelp: LP models and backends, Benders decomposition,
metric differential privacy and hierarchical differential privacy engines.

Nothing in this package performs network I/O or imports ``grpc``; ``coordinator``
and ``party`` build on it, never the reverse.
"""
