"""The tunables of Qiu's record decomposition (:class:`RecordOptions`), passed to
:func:`securelp.solvers.mdp.records.driver.solve_records`."""

from __future__ import annotations

from dataclasses import dataclass, field

from securelp.solvers.benders.options import BendersOptions
from securelp.solvers.options import at_least, fraction, nested, option, positive, validate

__all__ = ["RecordOptions"]


@dataclass(frozen=True)
class RecordOptions:
    """Tunables of Qiu's Benders decomposition over a record partition (solvers/mdp/records)."""

    in_out: float = option(
        0.5, "the blocks are solved at in_out x the master's point plus the rest x the core (the "
        "exponential mechanism's boundary rows, then where cuts were found): deeper cuts nearer the "
        "feasible region (0: at the master's point, no in-out separation)", fraction())
    initial_cut_max_factor: float = option(
        1e8, "Property 3.2's initial rows z_bk <= exp(eps delta) z_b'k are added only up to this factor: "
        "fewer feasibility cuts against a worse-conditioned master", positive())
    master_warn_share: float = option(
        0.8, "a warning when the master holds at least this share of the PMO's mDP rows (and "
        "master_warn_rows of them): its solves are then nearly the whole LP's", fraction())
    master_warn_rows: int = option(1_000_000, "... and at least this many", at_least(0))
    benders: BendersOptions = field(default_factory=BendersOptions,
                                    metadata=nested(BendersOptions, "the Benders engine's own tunables"))

    def __post_init__(self) -> None:
        validate(self)
