"""The PGSR mechanisms end to end: noise, post-processing and the figures a release may carry.

Fioretto, Van Hentenryck, Zhu (AIJ 2021). Counting mechanisms add Geom(2L/eps) to every
count n_s^r (M_H); cumulative mechanisms add Geom(L/eps) to every cumulative count c_s^r
(M_c); the post-processing steps are

- ``hdp``     M_H^dp: exact Model 1 DP (:mod:`.hdp`)
- ``hqp``     M_H^r: relaxed Model 1 QP, rounded (:mod:`.baselines`)
- ``topdown`` Census TopDown on the noisy counts (:mod:`.baselines`)
- ``cdp``     M_c^dp: Algorithm 2 on the noisy cumulative counts, then the Model 1 DP (:mod:`.cdp`)
- ``chain``   M_c^ch: exact Model 3 (:mod:`.chain`)
- ``cqp``     M_c^r: relaxed Model 3 QP, rounded, differenced into counts (:mod:`.baselines`)

Post-processing never touches the true data, so every release is eps-DP (the noise is the
only access to the data; the public total G is an invariant, as in the paper).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.baselines import CqpOptions, HqpOptions, cqp, hqp, topdown
from securelp.solvers.hierarchy.cdp import solve_cdp
from securelp.solvers.hierarchy.chain import ChainOptions, ChainResult, solve_model3
from securelp.solvers.hierarchy.consistency import squared_distance
from securelp.solvers.hierarchy.hdp import HdpOptions, solve_model1
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy, to_cumulative
from securelp.solvers.hierarchy.noise import add_geometric_noise
from securelp.solvers.randomness import SecureRandom

MECHANISMS: tuple[str, ...] = ("hdp", "cdp", "chain", "hqp", "cqp", "topdown")
CUMULATIVE: frozenset[str] = frozenset({"cdp", "chain", "cqp"})
#: mechanisms whose output is guaranteed consistent, non-negative and integral
EXACT_DP: frozenset[str] = frozenset({"hdp", "cdp", "chain"})
#: Estimated peak memory of one ``census release`` / ``postprocess`` per (region, size) cell, checked
#: against the available memory before the data are allocated. Measured as peak RSS
#: (``/usr/bin/time -f %M``, minus the 60 MB of the interpreter, per cell; eps = 1) on 3 regions x
#: 10**6 sizes, 2 x 10**7, 1,001 x 1,000, the taxi (152,489 cells) and census (3,194,000)
#: instances, rounded up from the largest value seen on instances of 10**6 cells or more: topdown
#: 98-126, hqp 101-181, hdp 137-700, cdp 376-714 (slope tables of the first window, half-width 16,
#: plus merge batches), cqp 348 (taxi; refused above 500,000 cells anyway), chain 471-744 (4,090 on
#: the small taxi instance, where HiGHS's fixed memory dominates). Wider hdp windows (small eps)
#: and more chain LP rounds need more; those steps have their own limits (``HdpOptions``,
#: ``ChainOptions``).
BYTES_PER_CELL: dict[str, int] = {"hdp": 768, "cdp": 768, "chain": 1024, "hqp": 256, "cqp": 512, "topdown": 160}


@dataclass(frozen=True)
class PostprocessOptions:
    """The options of every mechanism's post-processing (``cdp`` uses ``hdp``'s)."""

    hdp: HdpOptions = field(default_factory=HdpOptions)
    chain: ChainOptions = field(default_factory=ChainOptions)
    hqp: HqpOptions = field(default_factory=HqpOptions)
    cqp: CqpOptions = field(default_factory=CqpOptions)


def check_mechanism(name: str) -> str:
    """InputError unless ``name`` is a known mechanism."""
    if name not in MECHANISMS:
        raise InputError(f"unknown mechanism {name!r}; choose one of {', '.join(MECHANISMS)}")
    return name


def noise_scale(mechanism: str, levels: int, eps: Fraction) -> Fraction:
    """b = 2L/eps for count mechanisms, L/eps for cumulative ones."""
    check_mechanism(mechanism)
    if eps <= 0:
        raise InputError(f"eps must be > 0, got {eps}")
    sens = 1 if mechanism in CUMULATIVE else 2
    return Fraction(sens * levels) / eps


@dataclass(frozen=True)
class PostProcessed:
    """A post-processed release: counts (regions x sizes), the mechanism's own objective, details."""

    mechanism: str
    counts: np.ndarray
    objective: float
    time_s: float
    details: dict[str, object] = field(default_factory=dict)


def postprocess(mechanism: str, hier: Hierarchy, noisy: np.ndarray, total: int,
                options: PostprocessOptions = PostprocessOptions()) -> PostProcessed:
    """Run one mechanism's post-processing on noisy values (counts, or cumulative counts).

    The objective is the mechanism's own squared distance: to the noisy counts (hdp, hqp,
    topdown), to the Algorithm-2 counts (cdp), to the noisy cumulative counts (chain, cqp).
    ``options.chain.time_limit`` bounds ``chain``'s exact search (TimeLimitReached when it runs
    out, no release); the other mechanisms run in a bounded number of steps.
    """
    check_mechanism(mechanism)
    if int(total) != total or total < 0:
        raise InputError(f"the public total G must be a non-negative integer, got {total}")
    total = int(total)
    start = time.perf_counter()
    details: dict[str, object] = {}
    if mechanism in ("hdp", "cdp"):
        res = (solve_model1 if mechanism == "hdp" else solve_cdp)(hier, noisy, total, options.hdp)
        counts, objective = res.x, res.objective
        details = {"dp_rounds": res.rounds, "max_window_halfwidth": res.max_halfwidth, "exchange_gap": res.exchange_gap}
    elif mechanism == "chain":
        ch = solve_model3(hier, noisy, total, options.chain)
        counts, objective = ch.counts, ch.objective
        details = _chain_details(ch)
    elif mechanism == "hqp":
        counts, backend = hqp(hier, noisy, total, options.hqp)
        objective = squared_distance(counts, np.asarray(noisy))
        details = {"qp_backend": backend}
    elif mechanism == "cqp":
        cum, counts, details = cqp(hier, noisy, total, options.cqp)
        objective = squared_distance(cum, np.asarray(noisy))
    else:
        counts = topdown(hier, noisy, total)
        objective = squared_distance(counts, np.asarray(noisy))
    return PostProcessed(mechanism, counts, float(objective), time.perf_counter() - start, details)


def _chain_details(ch: ChainResult) -> dict[str, object]:
    """The report's ``details`` of a chain release."""
    return {
        "certificate": ch.certificate_kind,
        "integer_program": ch.integer_program,
        "integrality_gap": ch.integrality_gap,
        "mip_time_s": ch.mip_time_s,
        "certificate_exact_arithmetic": ch.certificate_exact_arithmetic,
        "certificate_min_slack": ch.certificate_min_slack,
        "approx_relaxation_objective": ch.projection_objective,
        "centre_objective": ch.incumbent_objective,
        "lp_rounds": ch.rounds,
        "lp_blocks": ch.blocks,
        "lp_segments": ch.segments,
        "max_window_halfwidth": int(ch.box_radius),
        "lp_time_s": ch.lp_time_s,
    }


def add_noise(mechanism: str, data: GroupSizeData, eps: Fraction, rng: SecureRandom) -> np.ndarray:
    """The mechanism's noisy measurements: counts + Geom(2L/eps) or cumulative + Geom(L/eps)."""
    scale = noise_scale(mechanism, data.hierarchy.depth, eps)
    base = to_cumulative(data.counts) if mechanism in CUMULATIVE else data.counts
    return add_geometric_noise(rng, base, scale)


def release_metrics(hier: Hierarchy, counts: np.ndarray, total: int) -> dict[str, object]:
    """Properties of a release that depend on the released counts and the public total G only.

    ``constraint_violations`` counts (internal region, size) pairs whose children do not sum
    to the parent; ``negative_counts`` and ``non_integer_counts`` count cells; ``total_matches``
    says whether the root sums to G. Nothing here sees the true counts, so a release may carry
    these figures (errors against the truth are :func:`l1_error_by_level`, for evaluations).
    """
    c = np.asarray(counts)
    violations = 0
    for r in hier.internal:
        s = c[list(hier.children[r])].sum(axis=0)
        violations += int(np.count_nonzero(np.abs(s - c[r]) > 1e-9))
    return {
        "constraint_violations": violations,
        "negative_counts": int(np.count_nonzero(c < 0)),
        "non_integer_counts": int(np.count_nonzero(np.abs(c - np.rint(c)) > 1e-9)),
        "total_matches": (int(c[0].sum()) == int(total) if np.issubdtype(c.dtype, np.integer)
                          else bool(abs(float(c[0].sum()) - total) < 1e-9)),
    }


def l1_error_by_level(hier: Hierarchy, counts: np.ndarray, true_counts: np.ndarray) -> dict[str, float]:
    """Per level, the sum over its regions and sizes of |released - true|.

    NOT PRIVATE: computed from the true counts, so it belongs to evaluations
    (``securelp census evaluate``, the benchmarks), never to a release.
    """
    err = np.abs(np.asarray(counts, dtype=np.float64) - np.asarray(true_counts, dtype=np.float64)).sum(axis=1)
    return {str(lev): float(err[idx].sum()) for lev, idx in sorted(hier.levels().items())}
