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
MEASURED: dict[str, tuple[int, int]] = {}
POSITIONS: dict[str, tuple[int, int]] = {}
SOURCE = "not measured yet"
# hit-rates:end


def hit_rate(cls: str, *, positions: bool = False) -> tuple[int, int] | None:
    """(right, guessed) measured for the class ``cls`` (with or without the ``guess:`` prefix); None when
    it was never measured."""
    key = cls.removeprefix("guess:")
    return (POSITIONS if positions else MEASURED).get(key)
