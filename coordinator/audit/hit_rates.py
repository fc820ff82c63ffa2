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
    'ambiguous': (29, 399),
    'dense_x_ambiguous': (12, 140),
    'dense_x_partly_round': (5, 5),
    'dense_x_round': (115, 115),
    'dense_x_weak': (0, 13),
    'learnt': (127, 128),
    'partly_round': (147, 227),
    'round': (1675, 1735),
    'round_alternatives': (381, 553),
    'single_dense_x_round': (1, 1),
    'sparsest_decomposition': (1935, 1986),
    'sparsest_unchecked': (48, 172),
    'weak': (0, 16),
    'x_ambiguous': (27, 131),
    'x_partly_round': (37, 37),
    'x_round': (1245, 1245),
    'x_round_alternatives': (608, 609),
    'x_weak': (125, 125),
}
POSITIONS: dict[str, tuple[int, int]] = {
    'bound_rows_x': (708, 757),
    'column_order': (790, 3864),
    'dense_x_scale': (132, 273),
    'x_scale': (1306, 1335),
}
SOURCE = 'benchmarks/results/leakage.jsonl: 100 runs (commit 4e0109f, 2026-12-06, vm (x86_64, Linux); commit 4e0109f+uncommitted, 2026-12-06, vm (x86_64, Linux))'
# hit-rates:end


def hit_rate(cls: str, *, positions: bool = False) -> tuple[int, int] | None:
    """(right, guessed) measured for the class ``cls`` (with or without the ``guess:`` prefix); None when
    it was never measured."""
    key = cls.removeprefix("guess:")
    return (POSITIONS if positions else MEASURED).get(key)
