"""Exact Model 3 (M_c^ch) at scale: windowed piecewise-linear LP with a Lagrangian certificate.

Model 3 (statement in ``cumulative.py``) with leaf variables: every leaf carries a
non-increasing non-negative integer chain, parents are sums of children (so C8 only needs to
hold at the leaves), the root's c_1 is G, and the objective is the separable sum over all
(region, size) cells of (c_s^r - ct_s^r)^2 when every cell is a variable tied to its children
by the consistency rows C7.

Certificate (checked in code, ``check_certificate``). Write the rows as A c = 0 (C7, one
row per internal region and size, multiplier lambda free) and c_s^l - c_{s+1}^l >= 0 (C8 at
the leaves, multiplier mu >= 0), and g = A' pi for pi = (lambda, mu). If an integer point c
satisfies C6-C10, mu >= 0, mu_j (A_j c) = 0 for every C8 row (complementary slackness), and
every cell value c_i (except the fixed root size-1 cell) minimises (v - ct_i)^2 - g_i v over
the integers v in [0, G], then c is optimal: for any feasible integer c',

    f(c') >= f(c') - pi'(A c') = sum_i [(c'_i - ct_i)^2 - g_i c'_i]
          >= sum_i [(c_i - ct_i)^2 - g_i c_i] = f(c) - pi'(A c) = f(c)

(every feasible point has 0 <= c'_i <= G, since c_s^r <= c_1^r <= c_1^root = G). The
per-cell test is two integer inequalities: 2(c_i - ct_i) + 1 - g_i >= 0 when c_i < G and
2(c_i - ct_i) - 1 - g_i <= 0 when c_i > 0. With integer noisy values and integer
multipliers the whole check is exact integer arithmetic; with decimal inputs it runs in
floating point with a relative tolerance of 1e-9 (stated in the report).

Such (c, pi) is found by linear programming: on a window [lo_i, hi_i] of integers per cell,
each square is replaced by its piecewise-linear interpolation at the integers (unit segments,
slopes 2(v - ct) + 1), which agrees with it at every integer. The constraint matrix of this
model had integral optima on every small instance tested (not in general: see below), and
the release does not rely on it: the LP's rounded point and rounded duals are handed to the certificate check, and a
release is made only if the check passes. Cells whose check fails on an artificial window
bound (a lower end > 0 or an upper end < G) get their size's window re-centred on the LP
point and widened (x4); a window of width >= G is the full domain, so a failure elsewhere is
a VerificationError, and a window needing more segment columns than the limit is a
ResourceError. A fractional LP optimum (seen: a half-integral vertex on the Kuo taxi
instance at eps = 0.1, so the matrix is not totally unimodular in general) leaves no
certificate: ResourceError, no release (``MAX_FRACTIONAL_RETRIES`` > 0 retries with the
fractional cells' windows widened; on that instance one retry was fractional again). The initial window is centred on a feasible integer
point (the rounded approximate projection).

Size blocks. If at some size boundary s | s+1 every leaf has c_s^l - c_{s+1}^l >= 1 at the
centre, the LP may be split there: the certificate is checked on the assembled point with
mu = 0 on those rows, which complementary slackness allows because they are slack. So the
sizes are solved in independent blocks (each its own LP), and the check is global.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.errors import ResourceError, VerificationError
from solvers.hierarchy.model import Hierarchy
from solvers.hierarchy.qp import solve_highs

logger = logging.getLogger(__name__)

#: Most segment columns one LP (one size block) may use.
MAX_BLOCK_SEGMENTS = 6_000_000
#: Most segment columns over all blocks of one round.
MAX_TOTAL_SEGMENTS = 40_000_000
#: Rounds with a fractional LP optimum tolerated (each retried with wider windows). 0: on the
#: one instance seen (taxi, eps = 0.1) a retry cost another LP and was fractional again.
MAX_FRACTIONAL_RETRIES = 0
#: HiGHS LP algorithm for the windowed LPs (crossover gives a basic, integral solution).
_LP_SOLVER = "simplex"


@dataclass(frozen=True)
class ChainCertificate:
    """Outcome of the Lagrangian optimality check of a Model 3 point."""

    ok: bool
    integral_arithmetic: bool
    min_slack: float
    failing: np.ndarray  # boolean mask (regions x sizes): cells whose per-cell test fails
    reason: str


def _parent_index(hier: Hierarchy) -> np.ndarray:
    return np.asarray(hier.parent, dtype=np.int64)


def multiplier_sums(hier: Hierarchy, lam: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """g = A' pi: for cell (r, s), lam[r, s] (internal r) - lam[parent r, s] (r not root) + leaf mu terms.

    ``lam`` is regions x sizes (rows of leaves unused, zero); ``mu`` is regions x (sizes - 1)
    (only leaf rows used): multiplier of c_s^l - c_{s+1}^l >= 0.
    """
    par = _parent_index(hier)
    internal = np.zeros(hier.size, dtype=bool)
    internal[hier.internal] = True
    g = np.where(internal[:, None], lam, 0)
    nonroot = np.nonzero(par >= 0)[0]
    g = g.copy()
    g[nonroot] -= lam[par[nonroot]]
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    if mu.shape[1] > 0:
        g[leaves, :-1] += mu[leaves]
        g[leaves, 1:] -= mu[leaves]
    return g


def check_certificate(
    hier: Hierarchy, cum: np.ndarray, noisy_cum: np.ndarray, total: int, lam: np.ndarray, mu: np.ndarray
) -> ChainCertificate:
    """Check the Lagrangian optimality certificate of ``cum`` (module docstring).

    Exact integer arithmetic when ``noisy_cum``, ``lam`` and ``mu`` are integer arrays;
    otherwise floating point with relative tolerance 1e-9.
    """
    c = np.asarray(cum)
    y = np.asarray(noisy_cum)
    none = np.zeros(c.shape, dtype=bool)
    if not np.issubdtype(c.dtype, np.integer):
        return ChainCertificate(False, False, -np.inf, none, "point is not integer")
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    # feasibility: C6, C7, C8 (leaves; implied above), C9
    if int(c[0, 0]) != int(total):
        return ChainCertificate(False, False, -np.inf, none, "root c_1 != G")
    if np.any(c < 0):
        return ChainCertificate(False, False, -np.inf, none, "negative cumulative count")
    if np.any(np.diff(c[leaves], axis=1) > 0):
        return ChainCertificate(False, False, -np.inf, none, "a leaf chain increases")
    for r in hier.internal:
        if np.any(c[list(hier.children[r])].sum(axis=0) != c[r]):
            return ChainCertificate(False, False, -np.inf, none, f"inconsistent at region index {r}")
    exact = all(np.issubdtype(np.asarray(a).dtype, np.integer) for a in (y, lam, mu))
    if exact:
        c64 = c.astype(np.int64)
        y64 = y.astype(np.int64)
        lam64 = np.asarray(lam, dtype=np.int64)
        mu64 = np.asarray(mu, dtype=np.int64)
        if np.abs(lam64).max(initial=0) > 2**60 // 8 or np.abs(mu64).max(initial=0) > 2**60 // 8:
            return ChainCertificate(False, True, -np.inf, none, "multipliers too large for int64 checking")
        tol = 0
    else:
        c64 = c.astype(np.float64)
        y64 = y.astype(np.float64)
        lam64 = np.asarray(lam, dtype=np.float64)
        mu64 = np.asarray(mu, dtype=np.float64)
        tol = 1e-9 * max(1.0, float(np.abs(y64).max(initial=0.0)), float(total))
    mu_l = mu64[leaves]
    if np.any(mu_l < -tol):
        return ChainCertificate(False, exact, -np.inf, none, "a C8 multiplier is negative")
    if mu_l.shape[1] > 0:
        gaps = c64[leaves, :-1] - c64[leaves, 1:]
        if np.any((np.abs(mu_l) > tol) & (gaps != 0)):
            return ChainCertificate(False, exact, -np.inf, none, "complementary slackness fails")
    g = multiplier_sums(hier, lam64, mu64)
    fwd = 2 * (c64 - y64) + 1 - g  # must be >= 0 where c < G
    bwd = -(2 * (c64 - y64) - 1 - g)  # must be >= 0 where c > 0
    fwd = np.where(c64 < total, fwd, np.inf if not exact else np.iinfo(np.int64).max)
    bwd = np.where(c64 > 0, bwd, np.inf if not exact else np.iinfo(np.int64).max)
    slack = np.minimum(fwd, bwd)
    slack[0, 0] = np.iinfo(np.int64).max if exact else np.inf  # fixed at G (C6)
    failing = slack < -tol
    min_slack = float(slack.min())
    if failing.any():
        return ChainCertificate(False, exact, min_slack, failing, f"{int(failing.sum())} cells not Lagrangian-optimal")
    return ChainCertificate(True, exact, min_slack, none, "ok")


def _solve_block_lp(
    hier: Hierarchy, y: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Windowed PWL LP on one block of sizes: (c float, lam, mu) with HiGHS's simplex.

    Columns: unit segments only (cell i's value is ``lo_i`` plus the sum of its segments in
    [0, 1], each costing the square's slope on that unit). Rows: C7 per internal region and
    size, C8 per leaf and adjacent size pair in the block, with the ``lo`` offsets moved into
    the row bounds.
    """
    from solvers.hierarchy.cumulative import consistency_rows

    n_regions, k = y.shape
    nv = n_regions * k
    cons = consistency_rows(hier, k)
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    if k >= 2:
        ll, ss = np.meshgrid(leaves, np.arange(k - 1), indexing="ij")
        base = (ll * k + ss).ravel()
        m = base.size
        mono = sp.csr_matrix(
            (np.r_[np.ones(m), -np.ones(m)], (np.r_[np.arange(m), np.arange(m)], np.r_[base, base + 1])), shape=(m, nv)
        )
    else:
        mono = sp.csr_matrix((0, nv))
    widths = (hi - lo).ravel().astype(np.int64)
    segments = int(widths.sum())
    owner = np.repeat(np.arange(nv), widths)
    start = np.repeat(np.cumsum(widths) - widths, widths)
    kk = np.arange(segments) - start
    vals = lo.ravel()[owner] + kk
    cost = 2.0 * (vals - y.ravel()[owner]) + 1.0
    # c = lo + sum of the cell's segments: each segment column is its cell's column of [C7; C8]
    n_cons, n_mono = cons.shape[0], mono.shape[0]
    a3 = sp.vstack([cons, mono]).tocsc()
    a = a3[:, owner].tocsc()
    base = a3 @ lo.ravel().astype(np.float64)
    row_lo = -base
    row_hi = np.concatenate([np.zeros(n_cons), np.full(n_mono, np.inf)]) - base
    out = solve_highs(cost, a, row_lo, row_hi, np.zeros(segments), np.ones(segments),
                      options={"solver": _LP_SOLVER}, label="chain LP")
    x = lo.astype(np.float64).ravel() + np.bincount(owner, weights=out.x, minlength=nv)
    x = x.reshape(n_regions, k)
    duals = out.row_dual
    lam = np.zeros((n_regions, k))
    internal = np.asarray(hier.internal, dtype=np.int64)
    lam[internal] = duals[:n_cons].reshape(internal.size, k)
    mu = np.zeros((n_regions, max(k - 1, 0)))
    if k >= 2:
        mu[leaves] = duals[n_cons : n_cons + n_mono].reshape(leaves.size, k - 1)
    return x, lam, mu


@dataclass(frozen=True)
class ChainLPResult:
    """Certified exact optimum of Model 3."""

    cumulative: np.ndarray
    objective: float
    rounds: int
    blocks: int
    segments: int
    max_halfwidth: int
    certificate: ChainCertificate
    lp_time_s: float


def _spread(hier: Hierarchy, cells: np.ndarray) -> np.ndarray:
    """The cells, their chain neighbours (sizes s +- 1) and all their ancestors."""
    out = cells.copy()
    out[:, 1:] |= cells[:, :-1]
    out[:, :-1] |= cells[:, 1:]
    par = _parent_index(hier)
    for r in reversed(range(1, hier.size)):
        out[par[r]] |= out[r]
    return out


def _blocks(lo: np.ndarray, hi: np.ndarray, leaves: np.ndarray) -> list[tuple[int, int]]:
    """Split sizes where every leaf's windows make C8 redundant (lo[l, s] >= hi[l, s+1])."""
    n_sizes = lo.shape[1]
    if n_sizes == 1:
        return [(0, 1)]
    cut = np.all(lo[leaves, :-1] >= hi[leaves, 1:], axis=0)
    bounds = [0] + [int(s) + 1 for s in np.nonzero(cut)[0]] + [n_sizes]
    return list(itertools.pairwise(bounds))


def solve_model3_certified(
    hier: Hierarchy,
    noisy_cum: np.ndarray,
    total: int,
    center: np.ndarray,
    *,
    initial_halfwidth: int = 2,
    max_rounds: int = 30,
) -> ChainLPResult:
    """Exact Model 3 optimum by windowed PWL LPs and the Lagrangian certificate (module docstring).

    ``center`` is a feasible integer Model 3 point (e.g. the M_c^dp release, cumulative).

    Raises
    ------
    ResourceError
        The windows needed exceed the segment limits, or the round limit was reached.
    VerificationError
        The certificate failed with full windows (never expected).
    """
    y = np.asarray(noisy_cum)
    yf = y.astype(np.float64)
    integral = np.issubdtype(y.dtype, np.integer)
    total = int(total)
    n_regions, n_sizes = y.shape
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    center = np.asarray(center, dtype=np.int64).copy()
    half = np.full((n_regions, n_sizes), max(1, int(initial_halfwidth)), dtype=np.int64)
    lp_time = 0.0
    cum = center
    fractional_rounds = 0
    for rounds in range(1, max_rounds + 1):
        lo = np.clip(center - half, 0, total)
        hi = np.clip(center + half, 0, total)
        lo[0, 0] = hi[0, 0] = total
        segments = int((hi - lo).sum())
        if segments > MAX_TOTAL_SEGMENTS:
            raise ResourceError(
                f"chain: the certified windows need {segments:,} LP segment columns (> {MAX_TOTAL_SEGMENTS:,}); "
                f"the exact Model 3 solve does not fit this instance"
            )
        blocks = _blocks(lo, hi, leaves)
        x = np.zeros((n_regions, n_sizes))
        lam = np.zeros((n_regions, n_sizes))
        mu = np.zeros((n_regions, max(n_sizes - 1, 0)))
        t0 = time.perf_counter()
        for a, b in blocks:
            seg_b = int((hi[:, a:b] - lo[:, a:b]).sum())
            if seg_b > MAX_BLOCK_SEGMENTS:
                raise ResourceError(
                    f"chain: one block of sizes {a + 1}..{b} needs {seg_b:,} LP segment columns "
                    f"(> {MAX_BLOCK_SEGMENTS:,}); the exact Model 3 solve does not fit this instance"
                )
            if seg_b == 0:
                x[:, a:b] = lo[:, a:b]
                continue
            xb, lb, mb = _solve_block_lp(hier, yf[:, a:b], lo[:, a:b], hi[:, a:b])
            x[:, a:b] = xb
            lam[:, a:b] = lb
            if b - a >= 2:
                mu[:, a : b - 1] = mb
        lp_time += time.perf_counter() - t0
        cum = np.rint(x).astype(np.int64)
        frac = np.abs(x - cum)
        fractional = frac > 1e-6
        if fractional.any():
            fractional_rounds += 1
            logger.info("chain round %d: fractional LP optimum on %d cells", rounds, int(fractional.sum()))
            if fractional_rounds > MAX_FRACTIONAL_RETRIES:
                raise ResourceError(
                    f"chain: the windowed LP has a fractional optimum ({int(fractional.sum())} cells, largest "
                    f"distance to an integer {frac.max():.3g}) after {fractional_rounds - 1} retries with wider "
                    f"windows; no certificate is available for this instance"
                )
            # retry with the fractional cells' windows widened around the (feasible) centre
            half = np.where(_spread(hier, fractional), half * 4, half)
            continue
        if integral:
            lam_c, mu_c = np.rint(lam).astype(np.int64), np.rint(mu).astype(np.int64)
        else:
            lam_c, mu_c = lam, mu
        cert = check_certificate(hier, cum, y, total, lam_c, mu_c)
        logger.info(
            "chain round %d: %d blocks, %d segments, LP %.2fs, certificate %s",
            rounds, len(blocks), segments, lp_time, cert.reason,
        )
        if cert.ok:
            from solvers.hierarchy.hdp import squared_distance

            return ChainLPResult(cum, squared_distance(cum, y), rounds, len(blocks), segments,
                                 int(half.max()), cert, lp_time)
        if not cert.failing.any():
            raise VerificationError(f"chain: certificate check failed: {cert.reason}")
        fail = cert.failing
        on_bound = fail & (((cum == lo) & (lo > 0)) | ((cum == hi) & (hi < total)))
        if np.any(fail & ~on_bound):
            # not expected when the LP is integral with integral duals; widen those cells too
            # (bounded by max_rounds), never release without a passing check
            logger.info("chain round %d: %d cells fail away from window bounds", rounds, int((fail & ~on_bound).sum()))
        # trust region: re-centre on the windowed optimum, widen the failing cells and their
        # chain neighbours and ancestors (x4)
        widen = _spread(hier, fail)
        logger.info("chain round %d: widening %d cells", rounds, int(widen.sum()))
        center = cum
        half = np.where(widen, half * 4, half)
    raise ResourceError(f"chain: no certificate after {max_rounds} widening rounds")


def round_to_feasible(hier: Hierarchy, approx: np.ndarray, total: int) -> np.ndarray:
    """A feasible integer Model 3 point near a real-valued approximate solution.

    Leaf chains are made non-increasing and clipped to [0, G] (running minimum), rounded to
    the nearest integer (rounding keeps them non-increasing), parents are the sums of their
    children, and the root's c_1 is brought to G by moving leaf c_1 values one unit at a time
    (up: any leaf; down: a leaf whose c_1 exceeds its c_2).
    """
    p = np.asarray(approx, dtype=np.float64)
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    cum = np.zeros(p.shape, dtype=np.int64)
    lp = np.minimum.accumulate(np.clip(p[leaves], 0.0, float(total)), axis=1)
    cum[leaves] = np.rint(lp).astype(np.int64)
    excess = int(cum[leaves, 0].sum()) - int(total)
    if excess < 0:
        frac = p[leaves, 0] - cum[leaves, 0]
        order = np.argsort(-frac, kind="stable")
        cum[leaves[order[0]], 0] += -excess  # one leaf takes the shortfall (chain stays non-increasing)
    while excess > 0:
        # lower the top plateau of the leaf with the largest c_1 by one (stays non-increasing)
        k = int(np.argmax(cum[leaves, 0]))
        top = int(cum[leaves[k], 0])
        if top <= 0:  # pragma: no cover - sum c_1 > G >= 0 means some leaf has c_1 > 0
            raise VerificationError("round_to_feasible: cannot lower the root total")
        cum[leaves[k]] = np.minimum(cum[leaves[k]], top - 1)
        excess -= 1
    for r in reversed(range(hier.size)):
        kids = list(hier.children[r])
        if kids:
            cum[r] = cum[kids].sum(axis=0)
    return cum
