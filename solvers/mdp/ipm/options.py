"""The structured interior-point method's tunables (:class:`IPMOptions`)."""

from __future__ import annotations

from dataclasses import dataclass

from securelp.solvers.options import at_least, fraction, non_negative, option, positive, validate

__all__ = ["IPMOptions"]


@dataclass(frozen=True)
class IPMOptions:
    """Tunables of the structured interior-point method (solvers/mdp/ipm)."""

    correctors: int = option(
        3, "Gondzio centrality correctors per iteration, each two solves and no factorisation: longer "
        "steps for more solves", at_least(0))
    refinements: int = option(
        1, "steps of iterative refinement of every Newton direction: without them the dual residual grows "
        "near the boundary and the bound stalls", at_least(0))
    step_fraction: float = option(0.995, "fraction of the step to the boundary taken", fraction(open_low=True))
    stall_iterations: int = option(
        15, "stop (stalled) when the distance of primal and bound has not shrunk by a tenth over this many "
        "iterations: the arithmetic's limit reached, not more iterations", at_least(1))
    drop_below: float = option(
        1e-7, "an output whose largest entry falls below this leaves the iteration (its last multipliers "
        "stay as its certificate): cheaper iterations", non_negative())
    dissect_min_records: int = option(
        300, "the nested-dissection form of the inverses from this many records on (below it the dense "
        "inverse is as fast)", at_least(0))
    dissect_max_cost: float = option(
        0.6, "... and only when its estimated flops are at most this share of the dense inverse's", positive())

    def __post_init__(self) -> None:
        validate(self)
