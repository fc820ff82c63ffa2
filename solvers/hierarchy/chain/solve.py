"""M_c^ch: the exact optimum of Model 3 on the noisy cumulative counts, with a checked certificate.

Fioretto, Van Hentenryck, Zhu (AIJ 2021), Model 3 (C6-C10, :mod:`securelp.solvers.hierarchy.consistency`).
An approximate projection of the noisy values onto the relaxation (FISTA with restarts on its
dual, :func:`~securelp.solvers.hierarchy.relaxation.model3_relaxation_accelerated`) gives the first
zero tails, with the C7 multipliers read off it, and, split top-down, a feasible integer centre
within a few units of it in every cell (:mod:`.windows`); windowed piecewise-linear LPs around it
give an integer point and multipliers that the Lagrangian certificate proves optimal over the
whole domain (:mod:`.rounds`, :mod:`.certificate`), or, when the LP optimum is fractional, an
integer point proved by the exact Lagrangian bound or a level-set branch and bound
(:mod:`.integer`). There is never an uncertified release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import VerificationError
from securelp.solvers.hierarchy.chain.options import ChainOptions
from securelp.solvers.hierarchy.chain.rounds import solve_model3_certified
from securelp.solvers.hierarchy.chain.windows import centre_and_tails, round_to_feasible
from securelp.solvers.hierarchy.consistency import check_noisy_inputs, model3_feasible, squared_distance
from securelp.solvers.hierarchy.errors import TimeLimitReached
from securelp.solvers.hierarchy.model import Hierarchy, from_cumulative
from securelp.solvers.hierarchy.relaxation import model3_relaxation_accelerated


@dataclass(frozen=True)
class ChainResult:
    """Exact Model 3 solution and how it was found (the report's ``details``)."""

    cumulative: np.ndarray
    counts: np.ndarray
    objective: float
    projection_objective: float  # of the approximate projection (not a bound)
    incumbent_objective: float  # of the centre
    box_radius: float  # largest window half-width
    segments: int
    rounds: int = 0
    blocks: int = 0
    certificate_min_slack: float = 0.0
    certificate_exact_arithmetic: bool = True
    lp_time_s: float = 0.0
    integer_program: str | None = None  # set when the LP optimum was fractional
    integrality_gap: float = 0.0
    mip_time_s: float = 0.0
    certificate_kind: str = "lagrangian"  # as ChainLPResult.certificate_kind


def solve_model3(hier: Hierarchy, noisy_cum: np.ndarray, total: int, options: ChainOptions | None = None
                 ) -> ChainResult:
    """Exact optimum of Model 3 (C6-C10) with a checked Lagrangian certificate (module docstring).

    ``options`` default to ``ChainOptions()``; ``options.time_limit`` (seconds, None: no limit) bounds the whole solve; when it runs out there
    is no release (TimeLimitReached saying where it stopped), never an uncertified one.

    Raises
    ------
    InputError
        Shapes or G invalid.
    TimeLimitReached
        ``options.time_limit`` ran out.
    ChainLimitError, NoCertificateError
        The windows needed exceed the LP size limits, no certificate within the round limit, or a
        fractional LP optimum without a proof (decimal inputs, level set too large, branch-and-bound
        time limit).
    VerificationError
        The final check failed (never expected).
    """
    options = ChainOptions() if options is None else options
    deadline = None if options.time_limit is None else time.perf_counter() + float(options.time_limit)
    y = np.asarray(noisy_cum)
    check_noisy_inputs(hier, y, total)
    total = int(total)
    yf = y.astype(np.float64)
    try:
        approx, _, _ = model3_relaxation_accelerated(hier, yf, total, tol=options.projection_tol,
                                                     max_iter=options.projection_max_iterations, deadline=deadline)
        center, starts = centre_and_tails(hier, y, total, approx, options.tail_threshold)
        if center is None:  # no consistent rounding with these tails: the plain centre, default tails
            center = round_to_feasible(hier, approx, total)
        res = solve_model3_certified(hier, y, total, center, options, tail_starts=starts, deadline=deadline)
    except TimeLimitReached as exc:
        assert options.time_limit is not None  # without a deadline nothing stops on time
        raise exc.limited(options.time_limit) from None
    if not model3_feasible(hier, res.cumulative, total) or not res.certificate.ok:  # pragma: no cover
        raise VerificationError("chain: the certified point fails Model 3 feasibility")
    return ChainResult(
        cumulative=res.cumulative,
        counts=from_cumulative(res.cumulative),
        objective=res.objective,
        projection_objective=float(np.sum((approx - yf) ** 2)),
        incumbent_objective=squared_distance(center, y),
        box_radius=float(res.max_halfwidth),
        segments=res.segments,
        rounds=res.rounds,
        blocks=res.blocks,
        certificate_min_slack=res.certificate.min_slack,
        certificate_exact_arithmetic=res.certificate.integral_arithmetic,
        lp_time_s=res.lp_time_s,
        integer_program=res.integer_program,
        certificate_kind=res.certificate_kind,
        integrality_gap=res.integrality_gap,
        mip_time_s=res.mip_time_s,
    )
