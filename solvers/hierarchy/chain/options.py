"""The tunables of the exact Model 3 solve (``chain``), in one frozen dataclass validated once.

Each default is the value the method was measured with (docs/benchmarks/census.md); a value
only changes how fast a certified optimum is found, or when the search gives up (no release),
never which release is made: every release passes the Lagrangian certificate or its bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from securelp.solvers.hierarchy.errors import check_option


@dataclass(frozen=True)
class ChainOptions:
    """Options of :func:`securelp.solvers.hierarchy.chain.solve_model3`.

    Attributes
    ----------
    time_limit:
        Seconds for the whole solve (None: no limit); past it, no release (TimeLimitReached).
    projection_tol, projection_max_iterations:
        The approximate projection that gives the first centre and tails: max-norm residual and
        iteration limit of the accelerated dual ascent.
    tail_threshold:
        A leaf cell whose approximate projection is below this may start a proposed zero tail.
    zero_tails:
        Keep proposed zero tails out of the LPs (their multipliers completed in closed form).
    initial_halfwidth:
        First window half-width per cell and side (then widened x4 where the check fails).
    max_rounds:
        Rounds of windowed LPs before the search gives up (ChainLimitError).
    max_block_segments, max_total_segments:
        Most segment columns in one size block's LP, and in all blocks of a round.
    min_block_share:
        A size block with fewer than this share of the round's segment columns joins its larger
        neighbour (tiny blocks save nothing, and a merge later rebuilds the big neighbour cold).
    start_chunk_segments:
        Segment columns per chunk of sizes whose cold solves assemble a block's starting basis
        (0: no chunked start).
    chunk_threads:
        Threads that solve those chunks (HiGHS releases the GIL while it runs).
    simplex_strategy:
        HiGHS's simplex strategy for a block's LP (2: the parallel dual simplex; the chunks keep 1).
    steepest_edge_columns:
        A warm re-solve uses dual steepest edge pricing after a round that added at least this many
        segment columns, Devex otherwise.
    rebuild_growth:
        Once a block's warm re-solve has taken longer than its cold build, a round that adds more
        than this share of its segment columns rebuilds it cold (0: always warm).
    warm_budget_factor, warm_budget_min_s:
        A warm re-solve is stopped, and the block rebuilt cold, after this factor times the block's
        last cold build (at least ``warm_budget_min_s`` seconds; factor 0: no budget).
    max_dual_scale:
        Largest denominator D of LP duals checked exactly as multiples of 1/D by the certificate.
    bound_max_scale:
        Largest denominator tried when rounding the LP duals for the exact Lagrangian bound.
    max_fractional_rounds:
        Rounds with a fractional LP optimum whose binding windows are widened before the
        branch and bound over a level set runs anyway.
    mip_time_limit:
        Seconds of one HiGHS branch and bound (local point or level set).
    local_spread, local_halfwidth:
        The local branch and bound near a fractional LP point frees the fractional cells'
        neighbourhood (chain neighbours and ancestors, ``local_spread`` times) within
        [floor - ``local_halfwidth``, ceil + ``local_halfwidth``].
    level_set_start:
        First slack T of the level-set search (objective units).
    max_level_set_segments:
        Most segment columns of a level-set branch and bound.
    level_set_tries:
        Level sets tried before the search gives up.
    """

    time_limit: float | None = None
    projection_tol: float = 0.05
    projection_max_iterations: int = 5000
    tail_threshold: float = 0.1
    zero_tails: bool = True
    initial_halfwidth: int = 2
    max_rounds: int = 100
    max_block_segments: int = 6_000_000
    max_total_segments: int = 40_000_000
    min_block_share: float = 0.02
    start_chunk_segments: int = 40_000
    chunk_threads: int = 2
    simplex_strategy: int = 2
    steepest_edge_columns: int = 1000
    rebuild_growth: float = 0.05
    warm_budget_factor: float = 1.0
    warm_budget_min_s: float = 1.0
    max_dual_scale: int = 4
    bound_max_scale: int = 64
    max_fractional_rounds: int = 20
    mip_time_limit: float = 900.0
    local_spread: int = 2
    local_halfwidth: int = 1
    level_set_start: Fraction = Fraction(4)
    max_level_set_segments: int = 1_000_000
    level_set_tries: int = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "level_set_start", Fraction(self.level_set_start))
        limit = self.time_limit
        check_option(self, "time_limit", limit is None or (math.isfinite(limit) and limit > 0),
                     "None or a positive number of seconds")
        check_option(self, "projection_tol", self.projection_tol > 0, "a positive number")
        for name in ("projection_max_iterations", "initial_halfwidth", "max_rounds", "max_block_segments",
                     "max_total_segments", "chunk_threads", "max_dual_scale", "bound_max_scale", "level_set_tries"):
            check_option(self, name, int(getattr(self, name)) >= 1, "an integer >= 1")
        for name in ("start_chunk_segments", "steepest_edge_columns", "max_fractional_rounds", "local_spread",
                     "local_halfwidth", "max_level_set_segments"):
            check_option(self, name, int(getattr(self, name)) >= 0, "an integer >= 0")
        for name in ("tail_threshold", "min_block_share", "rebuild_growth", "warm_budget_factor", "warm_budget_min_s"):
            check_option(self, name, float(getattr(self, name)) >= 0, "a number >= 0")
        check_option(self, "simplex_strategy", self.simplex_strategy in (0, 1, 2, 3, 4), "a HiGHS simplex strategy 0-4")
        check_option(self, "mip_time_limit", self.mip_time_limit > 0, "a positive number of seconds")
        check_option(self, "level_set_start", self.level_set_start > 0, "a positive fraction")
