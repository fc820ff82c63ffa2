"""The Benders engine's tunables (:class:`BendersOptions`), passed to :meth:`BendersEngine.run
<securelp.solvers.benders.driver.BendersEngine.run>`."""

from __future__ import annotations

from dataclasses import dataclass

from securelp.solvers.options import at_least, fraction, non_negative, option, positive, tuple_of, validate

__all__ = ["BendersOptions"]


@dataclass(frozen=True)
class BendersOptions:
    """Tunables of the generic Benders engine (solvers/benders)."""

    pace_window: int = option(
        20, "iterations over which the pace of the bounds is judged (0: never stop for a slow pace); "
        "shorter stops stalled runs sooner, and runs whose bounds move in bursts too early", at_least(0))
    pace_min_seconds: float = option(
        60.0, "the pace window grows back until it spans this many seconds, and a younger run is never "
        "judged: cheap iterations whose bounds move in bursts are not stopped", non_negative())
    wide_row_ratios: tuple[float, ...] = option(
        (1e8, 1e6, 1e4), "the last fallback for a block HiGHS fails on frees its constant rows whose "
        "coefficients span more than each ratio in turn: a weaker but valid cut instead of none", tuple_of(positive()))
    cut_clean_below: float = option(
        1e-9, "cut coefficients below this are moved into the cut's constant (HiGHS's small_matrix_value "
        "would drop them unsafely): a slightly weaker cut that HiGHS keeps exact", positive())
    cut_max_coefficient: float = option(
        1e12, "a cut with larger coefficients is scaled down to this (HiGHS refuses 1e15); smaller loses "
        "more small coefficients to the cleaning", positive())
    in_out_patience: int = option(
        5, "iterations without a rise of the lower bound after which the in-out separation solves the "
        "blocks at the master's own point", at_least(1))
    in_out_weak_share: float = option(
        1e-3, "optimality cuts that cut off the thetas by less than this share of the gap in all count as "
        "weak, and the blocks are then solved at the master's point too (0: never)", fraction())
    at_x_slowest_factor: float = option(
        20.0, "a block solve at the master's point longer than this many times the slowest block solve so "
        "far is given up (no cut from it that time)", non_negative())
    at_x_min_seconds: float = option(
        30.0, "... and never before this many seconds", non_negative())
    memory_growth_factor: float = option(
        2.0, "the run stops (memory_limit) when the memory left is below this many times what the last "
        "iteration took", non_negative())
    memory_floor: int = option(
        1 << 30, "... or below this many bytes (at most memory_floor_share of the memory at the start)",
        at_least(0))
    memory_floor_share: float = option(0.05, "the floor's cap, as a share of the memory at the start", fraction())
    recertify_share: float = option(
        0.1, "a certificate or cut that falls short of HiGHS's objective by more than this share of the "
        "target gap is recomputed from a re-solve with scaled costs: tighter bounds for extra solves",
        non_negative())
    recertify_scales: tuple[int, ...] = option(
        (24,), "exponents k of the cost scalings 2^k tried by that re-solve, in turn (each a warm solve)", tuple_of(at_least(0)))
    visible_violation: float = option(
        1e-7, "a cut that cuts off the master's point by less is scaled up until it does by this much in its "
        "row's units, so that HiGHS (tolerance 1e-9) sees it (0: cuts as they come)", non_negative())
    cut_max_upscale: float = option(1e6, "... by at most this factor", positive())

    def __post_init__(self) -> None:
        validate(self)
