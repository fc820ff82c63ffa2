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
    'ambiguous': (29, 396),
    'dense_x_ambiguous': (12, 140),
    'dense_x_partly_round': (5, 5),
    'dense_x_round': (115, 115),
    'dense_x_weak': (0, 13),
    'learnt': (127, 128),
    'partly_round': (147, 231),
    'round': (1651, 1708),
    'round_alternatives': (418, 580),
    'single_dense_x_round': (1, 1),
    'sparsest_decomposition': (1935, 1986),
    'sparsest_unchecked': (49, 172),
    'weak': (0, 18),
    'x_ambiguous': (33, 135),
    'x_partly_round': (38, 38),
    'x_round': (1254, 1254),
    'x_round_alternatives': (585, 586),
    'x_weak': (123, 123),
}
POSITIONS: dict[str, tuple[int, int]] = {
    'bound_rows_x': (698, 747),
    'column_order': (786, 3855),
    'dense_x_scale': (132, 273),
    'x_scale': (1310, 1343),
}
SOURCE = 'benchmarks/results/leakage.jsonl: 100 runs (commit 84b137e, 2026-12-06, vm (x86_64, Linux); commit 84b137e+uncommitted, 2026-12-06, vm (x86_64, Linux))'
# hit-rates:end


def hit_rate(cls: str, *, positions: bool = False) -> tuple[int, int] | None:
    """(right, guessed) measured for the class ``cls`` (with or without the ``guess:`` prefix); None when
    it was never measured."""
    key = cls.removeprefix("guess:")
    return (POSITIONS if positions else MEASURED).get(key)
