"""Measured hit rates of the audit's best guesses, per class, for the reports' statements.

A best guess (values or a position the attacks do not claim, :mod:`securelp.coordinator.audit.scales`)
is only as good as it was where it could be checked. ``benchmarks/bench_leakage.py`` scores every
guess of every run against the real data and ``--render-hit-rates`` writes the sums over its
newest runs here (LPs and modes of docs/threat_model.md); tests/unit/test_audit_report.py
fails when this table differs from what the results file gives.

``MEASURED[class] = (right, guessed)``; ``POSITIONS`` the same for guesses of positions.
"""

from __future__ import annotations

# hit-rates:begin
MEASURED: dict[str, tuple[int, int]] = {
    'ambiguous': (29, 382),
    'dense_x_ambiguous': (12, 140),
    'dense_x_partly_round': (5, 5),
    'dense_x_round': (115, 115),
    'dense_x_weak': (0, 13),
    'learnt': (127, 128),
    'partly_round': (147, 244),
    'round': (1667, 1733),
    'round_alternatives': (392, 550),
    'single_dense_x_round': (1, 1),
    'sparsest_decomposition': (1935, 1990),
    'sparsest_unchecked': (45, 168),
    'weak': (0, 14),
    'x_ambiguous': (30, 134),
    'x_partly_round': (36, 36),
    'x_round': (1253, 1253),
    'x_round_alternatives': (603, 605),
    'x_weak': (121, 121),
}
POSITIONS: dict[str, tuple[int, int]] = {
    'bound_rows_x': (669, 714),
    'column_order': (788, 3860),
    'dense_x_scale': (132, 273),
    'x_scale': (1310, 1338),
}
SOURCE = 'benchmarks/results/leakage.jsonl: 100 runs (commit 42122a2, 2026-12-06, vm (x86_64, Linux))'
# hit-rates:end


def hit_rate(cls: str, *, positions: bool = False) -> tuple[int, int] | None:
    """(right, guessed) measured for the class ``cls`` (with or without the ``guess:`` prefix); None when
    it was never measured."""
    key = cls.removeprefix("guess:")
    return (POSITIONS if positions else MEASURED).get(key)
