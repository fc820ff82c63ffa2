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

Multipliers that are multiples of 1/D (a degenerate LP vertex gives half-integral duals) are
checked exactly too: ``check_certificate(..., scale=D)`` takes D times them and multiplies every
test by D.

Such (c, pi) is found by linear programming. The centre is a feasible integer point near the
approximate projection and stays fixed: ``consistent_rounding`` splits each parent's rounded
chain among its children top-down, so every cell stays within a few units of the projection
(rounding the leaves and summing them up, ``round_to_feasible``, drifted by 100-300 at the
census root and states, so their optimum lay outside the first windows: the seed-1, eps = 1
census draw, N = 1,000, took 13 rounds and 1,195 s of LPs; with this centre and the first tails
of ``cumulative._centre_and_tails``, 4 rounds and 22 s); each cell gets a window of integers
[centre - d, centre + u] within [0, G] (initially u = d = 2), on which its square is replaced
by the piecewise-linear interpolation at the integers (exact at every integer): the cell's
value is centre + (sum of its "up" unit segments) - (sum of its "down" unit segments), up
segment t costing 2(centre + t - 1 - y) + 1 and down segment t costing 2(y - centre + t) - 1,
so an optimum fills each side in order (``_BlockLP``). Rows: C7 per internal region and size,
C8 per leaf and adjacent size pair, with the centre's activities in the row bounds. The
constraint matrix had integral optima on every small instance tested (not in general: see
below), and the release does not rely on it: the LP's rounded point and rounded duals are
handed to the certificate check, and a release is made only if the check passes.

Rounds are incremental. Each block's LP stays alive in HiGHS; cells whose check fails
(normally on an artificial window bound: a lower end > 0 or an upper end < G), with their
chain neighbours and ancestors, get both sides widened x4, which only adds segment columns
(``addCols``; the row bounds never change). New columns start nonbasic at 0, or at 1 when
their reduced cost under the last duals is negative, so the basis stays dual feasible and
the dual simplex (Devex pricing after the first solve, dual steepest edge after a round that
added ``WARM_STEEPEST_EDGE_COLUMNS`` or more columns) re-solves from it (taxi instance:
at most a few thousand iterations, about 1 s per round against 16-30 s for a cold solve).
Once a warm re-solve of a block has taken longer than its cold build, a later round that adds
more than ``REBUILD_GROWTH`` (5 %) of its segment columns rebuilds it instead (cold, with the
chunked start below): at census scale (N = 1,000) warm re-solves after such growth took
400-550 s each at about 4 ms per dual simplex iteration, rebuilds 90-165 s; on the taxi
instance warm re-solves stay cheaper than a rebuild, and rebuilding every grown block there
doubled the time. A warm re-solve also has a budget: once it has run ``WARM_BUDGET_FACTOR``
(1x) its block's last cold build, it is stopped and the block rebuilt, so a slow warm
re-solve costs at most about two builds (the first warm re-solve at census scale had taken
384 s against a 66 s build). Windows needing more segment columns than the limits, or no passing
check within the round limit, are a ResourceError. Cells failing off their window bounds
mean the LP's multipliers did not round to a certificate (seen once in tuning runs:
half-integral duals of an integral point, taxi eps = 0.1, after warm starts); the same
multipliers' exact Lagrangian bound L is tried first (U - L < 1 proves the LP point:
``lagrangian-bound``), else a block with fractional duals is rebuilt once and solved from the
slack basis (other duals), and such cells are widened like the rest. A failing cell on a
plateau of its chain (a run of one positive value) widens the whole run (``_plateaus``).
A fractional LP optimum (a half-integral vertex: the matrix is not totally unimodular; Kuo
taxi, about 1 in 30 draws at eps = 0.5 and 1 in 4 at eps = 0.1) admits no such certificate:
the integer optimum lies above the LP bound. Then the LP's multipliers give the exact
Lagrangian bound L and the level set W_T of ``securelp.solvers.hierarchy.window_bound`` (per cell, the
integers whose Lagrangian excess is <= T: one or two values for most cells), which contains
every feasible point with objective <= L + T. First a local branch and bound near the LP
point (``_local_integer_point``: the fractional cells' chains and ancestors, then their
siblings too) gives an integer point U; U - L < 1 proves it (``lagrangian-bound``). Else HiGHS
branch and bound over W_T with T = U - 1 - L (a fresh ``_BlockLP`` with integer segments and
a row f <= U - 1) finds any better point; the best U with U - 1 <= L + T (checked in
integers) is the optimum of Model 3 (``_level_set_search``). Optimality inside W_T rests on
HiGHS's branch and bound (absolute gap < 1 on an integral objective); the report says which
certificate was used (``certificate``: ``lagrangian``, ``lagrangian-bound`` or
``level-set+branch-and-bound``). With
decimal noisy values, or a level set beyond ``MAX_LEVEL_SET_SEGMENTS``, the LP windows are
widened instead, and after ``MAX_MIP_ROUNDS`` such rounds the release is refused
(ResourceError).

First solve of a block. The block's sizes are cut into chunks of about
``START_CHUNK_SEGMENTS`` segment columns, each chunk's LP (without the C8 rows to its
neighbours) is solved cold, and their optimal bases, with the dropped rows' slacks basic,
are the starting basis of the whole block's LP (dual feasible; only the dropped rows can be
violated). This only changes the starting point of the dual simplex, not the LP: the many
small LPs are much cheaper per iteration than the whole block (taxi eps = 1: 16 s -> 9 s).

Zero tails (``securelp.solvers.hierarchy.zero_tail``). Leaf suffixes where the centre is 0 and the
isotonic partial-sum condition holds get the window [0, 0] and stay out of the LPs (rows that
touch only such cells are dropped); their multipliers are completed in closed form before the
same certificate is checked over every cell. Failing tail cells shorten their tail; the freed
cells' rows are added to the live model (``addRows``, empty, basic slacks) with their columns.

Size blocks. If at some size boundary s | s+1 every leaf has c_s^l - c_{s+1}^l >= 1 at the
centre, the LP may be split there: the certificate is checked on the assembled point with
mu = 0 on those rows, which complementary slackness allows because they are slack. So the
sizes are solved in independent blocks (each its own LP), and the check is global. The
blocks are chosen from the first windows (where every leaf's windows make C8 redundant at
the cut). When windows widen, a cut is kept as long as the assembled LP point satisfies the
C8 rows it drops: the blocks' optima are then an optimum of the joined LP with mu = 0 on
those rows (a relaxation's optimum that is feasible). Otherwise the two blocks are merged and
the merged block is solved anew (same round).
"""

from __future__ import annotations

import itertools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import ResourceError, SolverError, VerificationError
from securelp.solvers.hierarchy.cumulative import _model3_feasible
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.hierarchy.window_bound import (
    WindowBound,
    binding_cells,
    level_windows,
    proves_optimal,
    scaled_multipliers,
    window_bound,
)
from securelp.solvers.hierarchy.zero_tail import (
    complete_multipliers,
    fixed_cells,
    ladder_starts,
    restart_after,
)
from securelp.solvers.lp.highs import new_highs, set_time_left

logger = logging.getLogger(__name__)

#: Most segment columns one LP (one size block) may use.
MAX_BLOCK_SEGMENTS = 6_000_000
#: Most segment columns over all blocks of one round.
MAX_TOTAL_SEGMENTS = 40_000_000
#: Rounds with a fractional LP optimum whose binding windows are widened before the level-set
#: branch and bound (``securelp.solvers.hierarchy.window_bound``) is tried anyway.
MAX_MIP_ROUNDS = 20
#: Time limit (s) of one HiGHS branch and bound over a level set (``_level_set_search``).
MIP_TIME_LIMIT = 900.0
#: Segment columns per chunk of sizes whose cold solves assemble a block's starting basis
#: (``_chunked_start``); 0 turns it off. Census N = 1,000, seed 1, first LP (chunks + the block's
#: parallel dual simplex), 10,000 / 40,000 / 80,000: eps 1 14.1 / 11.6 / 14.8 s, eps 0.5
#: 35.0 / 25.5 / 29.8 s, eps 0.1 46.0 / 43.0 s (2026-11-25).
START_CHUNK_SEGMENTS = 40_000
#: A live block model is rebuilt (cold, with the chunked start) instead of re-solved warm when a
#: round adds more than this fraction of its segment columns, once a warm re-solve of that block
#: has taken longer than its cold build (0: always warm).
REBUILD_GROWTH = 0.05
#: A warm re-solve is stopped once it has taken this many times the block's last cold build (and
#: at least WARM_BUDGET_MIN_S seconds), and the block is rebuilt cold: a warm re-solve that is
#: slower than a build costs at most about two builds (0: no budget).
WARM_BUDGET_FACTOR = 1.0
WARM_BUDGET_MIN_S = 1.0
#: Threads that solve the chunks of ``_chunked_start`` (HiGHS releases the GIL while it runs).
CHUNK_THREADS = 2
#: HiGHS simplex strategy of a block's LP: 2 is the parallel dual simplex (PAMI); census
#: eps = 0.5, N = 1,000, first LP from the chunked start: 38.6 s against 52.5 s for the serial
#: dual simplex (1), same 96,055 iterations; the SIP variant (3) took 60.3 s. The chunks of the
#: chunked start, small and solved two at a time, keep the serial dual simplex.
SIMPLEX_STRATEGY = 2
#: Largest denominator D of LP duals checked exactly as multiples of 1/D (``check_certificate``'s scale).
MAX_DUAL_SCALE = 4
#: HiGHS LP algorithm for the windowed LPs (a basic solution; dual simplex when cold).
_LP_SOLVER = "simplex"
#: HiGHS dual edge weights for the re-solves after the first (1: Devex) ...
_WARM_EDGE_WEIGHTS = 1
#: ... unless the round added at least this many segment columns: then dual steepest edge (2).
#: Steepest edge recomputes its weights from scratch after the basis change (about 2-6 s at
#: census scale, N = 1,000, even for a 2-iteration re-solve), which pays only when many columns
#: came in: census eps = 1, round 2 (about 5,000 new columns of freed zero tails), 10.0 s with
#: Devex against 2.8 s with steepest edge.
WARM_STEEPEST_EDGE_COLUMNS = 1000


class ChainTimeLimit(ResourceError):
    """The caller's time limit ran out before a certified release (the message says where)."""


def _remaining(deadline: float | None, where: str) -> float:
    """Seconds left before ``deadline`` (``time.perf_counter`` clock; inf without one); ChainTimeLimit if none."""
    if deadline is None:
        return float("inf")
    left = deadline - time.perf_counter()
    if left <= 0:
        raise ChainTimeLimit(where)
    return left


def _warm_budget(build_seconds: float | None) -> float | None:
    """Seconds a block's warm re-solve may take before it is stopped and the block rebuilt cold:
    ``WARM_BUDGET_FACTOR`` x its last cold build (at least ``WARM_BUDGET_MIN_S``); None (no budget)
    when the build time is unknown or the factor is 0."""
    if build_seconds is None or WARM_BUDGET_FACTOR <= 0:
        return None
    return max(WARM_BUDGET_MIN_S, WARM_BUDGET_FACTOR * build_seconds)


def _warm_is_slow(warm_seconds: float, build_seconds: float | None) -> bool:
    """Whether a block's warm re-solve took longer than its last cold build (then grown rounds rebuild it)."""
    return build_seconds is not None and warm_seconds > build_seconds


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
    hier: Hierarchy, cum: np.ndarray, noisy_cum: np.ndarray, total: int, lam: np.ndarray, mu: np.ndarray,
    scale: int = 1,
) -> ChainCertificate:
    """Check the Lagrangian optimality certificate of ``cum`` (module docstring).

    Exact integer arithmetic when ``noisy_cum``, ``lam`` and ``mu`` are integer arrays;
    otherwise floating point with relative tolerance 1e-9. ``scale`` D (a positive integer):
    ``lam`` and ``mu`` hold D times the multipliers, so multipliers that are multiples of 1/D
    (e.g. the half-integral duals of a degenerate LP vertex) are checked exactly, every test
    multiplied by D. ``min_slack`` is reported unscaled.
    """
    scale = int(scale)
    if scale < 1:
        raise ValueError(f"certificate scale must be a positive integer, got {scale}")
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
        tol = 1e-9 * scale * max(1.0, float(np.abs(y64).max(initial=0.0)), float(total))
    mu_l = mu64[leaves]
    if np.any(mu_l < -tol):
        return ChainCertificate(False, exact, -np.inf, none, "a C8 multiplier is negative")
    if mu_l.shape[1] > 0:
        gaps = c64[leaves, :-1] - c64[leaves, 1:]
        if np.any((np.abs(mu_l) > tol) & (gaps != 0)):
            return ChainCertificate(False, exact, -np.inf, none, "complementary slackness fails")
    g = multiplier_sums(hier, lam64, mu64)  # D * g
    fwd = scale * (2 * (c64 - y64) + 1) - g  # must be >= 0 where c < G
    bwd = -(scale * (2 * (c64 - y64) - 1) - g)  # must be >= 0 where c > 0
    fwd = np.where(c64 < total, fwd, np.inf if not exact else np.iinfo(np.int64).max)
    bwd = np.where(c64 > 0, bwd, np.inf if not exact else np.iinfo(np.int64).max)
    slack = np.minimum(fwd, bwd)
    slack[0, 0] = np.iinfo(np.int64).max if exact else np.inf  # fixed at G (C6)
    failing = slack < -tol
    min_slack = float(slack.min()) / scale
    if failing.any():
        return ChainCertificate(False, exact, min_slack, failing, f"{int(failing.sum())} cells not Lagrangian-optimal")
    return ChainCertificate(True, exact, min_slack, none, "ok")


class _BlockLP:
    """One size block's windowed PWL LP, kept alive in HiGHS across rounds (module docstring).

    Cell i's value is ``centre_i + sum(up segments) - sum(down segments)``; up segment t
    (centre + t - 1 -> centre + t) costs 2(centre + t - 1 - y) + 1, down segment t
    (centre - t + 1 -> centre - t) costs 2(y - centre + t) - 1. Both increase with t and the
    first up and first down segment cost 2 together, so an optimum fills each side in order
    and never both sides. A segment column is its cell's column of [C7; C8] (up) or its
    negative (down). The row bounds depend only on the fixed centre, so widening a window is
    ``addCols`` of new segment columns, and the next ``run`` starts from the last basis.
    """

    def __init__(self, hier: Hierarchy, y: np.ndarray, centre: np.ndarray, n_up: np.ndarray, n_down: np.ndarray,
                 simplex_strategy: int | None = None):
        import highspy

        from securelp.solvers.hierarchy.cumulative import consistency_rows

        self._highspy = highspy
        self.hier = hier
        self.shape = y.shape
        n_regions, k = y.shape
        nv = n_regions * k
        self.y = np.asarray(y, dtype=np.float64).ravel()
        self.centre = np.asarray(centre, dtype=np.int64).ravel()
        cons = consistency_rows(hier, k)
        leaves = np.asarray(hier.leaves, dtype=np.int64)
        if k >= 2:
            ll, ss = np.meshgrid(leaves, np.arange(k - 1), indexing="ij")
            base = (ll * k + ss).ravel()
            m = base.size
            mono = sp.csr_matrix(
                (np.r_[np.ones(m), -np.ones(m)], (np.r_[np.arange(m), np.arange(m)], np.r_[base, base + 1])),
                shape=(m, nv),
            )
        else:
            mono = sp.csr_matrix((0, nv))
        self.n_cons, self.n_mono = cons.shape[0], mono.shape[0]
        a3 = sp.vstack([cons, mono]).tocsr()
        # c = centre + (segments): the centre's row activities move into the row bounds
        offset = a3 @ self.centre.astype(np.float64)
        row_lo = -offset
        row_hi = np.concatenate([np.zeros(self.n_cons), np.full(self.n_mono, np.inf)]) - offset
        # rows on cells without any segment (zero tails, ``securelp.solvers.hierarchy.zero_tail``) hold for
        # the centre and stay out of the model; their multipliers are completed in closed form
        movable = (np.asarray(n_up).ravel() + np.asarray(n_down).ravel()) > 0
        self._a3_full, self._abs_full = a3, abs(a3)
        self._row_lo_full, self._row_hi_full = row_lo, row_hi
        self.row_ids = np.flatnonzero(self._abs_full @ movable.astype(np.float64) > 0)
        self.a3 = a3[self.row_ids].tocsc()
        row_lo, row_hi = row_lo[self.row_ids], row_hi[self.row_ids]
        self.n_up = np.zeros(nv, dtype=np.int64)
        self.n_down = np.zeros(nv, dtype=np.int64)
        self.owner = np.zeros(0, dtype=np.int64)  # cell (flat index in the block) of each column
        self.sign = np.zeros(0, dtype=np.float64)  # +1 up, -1 down
        self.step = np.zeros(0, dtype=np.int64)  # segment number t on its side
        self.row_dual: np.ndarray | None = None  # of the last solve (kept rows)
        # cells whose rows may be missing: only the cells movable at construction may grow
        self.fixed_cells: np.ndarray | None = None
        self.iterations = 0  # simplex iterations of the last solve
        self.added = 0  # segment columns added since the last solve
        strategy = SIMPLEX_STRATEGY if simplex_strategy is None else simplex_strategy
        self.h = new_highs({"solver": _LP_SOLVER, "simplex_strategy": strategy})
        lp = highspy.HighsLp()
        lp.num_row_ = int(row_lo.size)
        lp.row_lower_ = row_lo
        lp.row_upper_ = row_hi
        if self.h.passModel(lp) == highspy.HighsStatus.kError:  # pragma: no cover
            raise SolverError(f"HiGHS refused the chain LP ({lp.num_row_} rows)")
        self.extend(n_up, n_down)
        self.fixed_cells = ~movable if not movable.all() else None

    @property
    def segments(self) -> int:
        return int(self.owner.size)

    def new_segments(self, n_up: np.ndarray, n_down: np.ndarray) -> int:
        """Segment columns that ``extend(n_up, n_down)`` would add."""
        return int(self._growth(self.n_up, n_up).sum() + self._growth(self.n_down, n_down).sum())

    @staticmethod
    def _growth(old: np.ndarray, new: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(new, dtype=np.int64).ravel() - old, 0)

    def _new_columns(self, old: np.ndarray, new: np.ndarray, up: bool):
        cnt = self._growth(old, new)
        owner = np.repeat(np.arange(cnt.size), cnt)
        start = np.repeat(np.cumsum(cnt) - cnt, cnt)
        t = np.repeat(old, cnt) + (np.arange(owner.size) - start) + 1
        centre, y = self.centre[owner], self.y[owner]
        cost = 2.0 * (centre + t - 1 - y) + 1.0 if up else 2.0 * (y - centre + t) - 1.0
        return owner, t, cost, old + cnt

    def extend(self, n_up: np.ndarray, n_down: np.ndarray) -> int:
        """Grow the windows to ``n_up`` / ``n_down`` segments per side (never shrinks); returns columns added.

        HiGHS adds the columns nonbasic at 0, which keeps the basis valid and primal feasible;
        those with a negative reduced cost under the last duals are set nonbasic at their
        upper bound 1 instead (dual feasible), so the dual simplex only repairs the rows they
        disturb (left at 0, HiGHS runs a long dual phase 1 on such a basis).
        """
        highspy = self._highspy
        ou, tu, cu, self.n_up = self._new_columns(self.n_up, n_up, True)
        od, td, cd, self.n_down = self._new_columns(self.n_down, n_down, False)
        owner = np.concatenate([ou, od])
        n = int(owner.size)
        if n == 0:
            return 0
        sign = np.concatenate([np.ones(ou.size), -np.ones(od.size)])
        cost = np.concatenate([cu, cd])
        if self.fixed_cells is not None and self.fixed_cells[owner].any():
            self._add_rows_of(np.unique(owner[self.fixed_cells[owner]]))
        cols = (self.a3[:, owner] @ sp.diags(sign)).tocsc()
        status = self.h.addCols(
            n, cost, np.zeros(n), np.ones(n), int(cols.nnz),
            cols.indptr[:-1].astype(np.int32), cols.indices.astype(np.int32), np.asarray(cols.data, dtype=np.float64),
        )
        if status == highspy.HighsStatus.kError:  # pragma: no cover
            raise SolverError(f"HiGHS refused {n} new chain LP segment columns")
        n_old = self.segments
        self.added += n
        self.owner = np.concatenate([self.owner, owner])
        self.sign = np.concatenate([self.sign, sign])
        self.step = np.concatenate([self.step, tu, td])
        if self.row_dual is not None:
            attractive = np.nonzero(cost - cols.T @ self.row_dual < -1e-9)[0]
            if attractive.size:
                basis = self.h.getBasis()
                col_status = list(basis.col_status)
                for j in attractive.tolist():
                    col_status[n_old + j] = highspy.HighsBasisStatus.kUpper
                basis.col_status = col_status
                if self.h.setBasis(basis) == highspy.HighsStatus.kError:  # pragma: no cover
                    raise SolverError("HiGHS refused the chain LP's warm-start basis")
        return n

    def _add_rows_of(self, cells: np.ndarray) -> None:
        """Add the rows of ``cells`` (cells of a zero tail that get segments) not yet in the model.

        Such rows only touch cells without columns so far (a row with a movable cell is in the
        model), so they are added empty, with basic slacks (the basis stays valid), and the new
        columns then fill them.
        """
        mark = np.zeros(self._a3_full.shape[1])
        mark[cells] = 1.0
        touched = np.flatnonzero(self._abs_full @ mark > 0)
        new = np.setdiff1d(touched, self.row_ids, assume_unique=True)
        self.fixed_cells[cells] = False
        if new.size == 0:
            return
        status = self.h.addRows(int(new.size), self._row_lo_full[new], self._row_hi_full[new], 0,
                                np.zeros(new.size, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
        if status == self._highspy.HighsStatus.kError:  # pragma: no cover
            raise SolverError(f"HiGHS refused {new.size} new chain LP rows")
        self.row_ids = np.concatenate([self.row_ids, new])
        self.a3 = self._a3_full[self.row_ids].tocsc()
        if self.row_dual is not None:
            self.row_dual = np.concatenate([self.row_dual, np.zeros(new.size)])

    def dropped_rows_hold(self) -> bool:
        """Whether the rows left out of the model (no movable cell) hold at the centre."""
        out = np.setdiff1d(np.arange(self._row_lo_full.size), self.row_ids, assume_unique=True)
        return bool(np.all(self._row_lo_full[out] <= 1e-9) and np.all(self._row_hi_full[out] >= -1e-9))

    def solve_integer(self, time_limit: float, deadline: float | None = None,
                      at_most: int | None = None) -> tuple[np.ndarray | None, str]:
        """Integer optimum on the current windows by HiGHS branch and bound (a copy of the model).

        The segment columns become integer (binary); the live LP model is left as it is. The
        objective (sum of segment costs, odd integers when the noisy values are integers) is
        integral at every integer point, so an absolute gap below 1 proves optimality; the
        gap HiGHS reports is returned with the point (c integer; None if infeasible). The
        search stops at ``time_limit`` seconds or at ``deadline`` (ChainTimeLimit), if sooner.
        With ``at_most`` only points with f <= at_most are sought (a row of the objective's
        segment costs is added; None, "infeasible" when there is none).
        """
        highspy = self._highspy
        if self.segments == 0:
            return self.centre.reshape(self.shape).copy(), "no segments"
        time_limit = min(float(time_limit), _remaining(deadline, "before the branch and bound over a level set of"))
        m = new_highs({"mip_rel_gap": 0.0, "mip_abs_gap": 0.99, "time_limit": float(time_limit)})
        lp = self.h.getLp()
        if m.passModel(lp) == highspy.HighsStatus.kError:  # pragma: no cover
            raise SolverError("HiGHS refused the chain MIP")
        n = self.segments
        if at_most is not None:  # a row: the objective is f - f(centre), an integer at integer points
            limit = int(at_most) - _objective(self.centre, self.y)
            m.addRow(-highspy.kHighsInf, float(limit) + 0.5, n, np.arange(n, dtype=np.int32),
                     np.asarray(lp.col_cost_, dtype=np.float64))
        m.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
        m.run()
        status = m.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return None, "infeasible"
        if status == highspy.HighsModelStatus.kTimeLimit and deadline is not None and time.perf_counter() >= deadline:
            raise ChainTimeLimit("during the branch and bound over a level set of")
        if status != highspy.HighsModelStatus.kOptimal:
            raise ResourceError(
                f"chain: the integer program on the level set (fractional LP optimum) ended with "
                f"{m.modelStatusToString(status)!r} (time limit {time_limit:g} s); no certified release"
            )
        info = m.getInfo()
        seg = np.rint(np.asarray(m.getSolution().col_value, dtype=np.float64)).astype(np.int64)
        x = self.centre + np.bincount(self.owner, weights=self.sign * seg, minlength=self.centre.size).astype(np.int64)
        gap = f"objective {info.objective_function_value:.6g}, bound {info.mip_dual_bound:.6g}, {info.mip_node_count} nodes"
        return x.reshape(self.shape), gap

    def solve(self, deadline: float | None = None, budget: float | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(c float, lam, mu) on the current windows, from the current basis (if any).

        HiGHS stops at ``deadline`` (``time.perf_counter`` clock), which raises ChainTimeLimit.
        With a ``budget`` (seconds) that ends before the deadline, a solve that reaches it
        returns None (``iterations`` says how far it got) and the model should be dropped.
        """
        highspy = self._highspy
        n_regions, k = self.shape
        lam = np.zeros((n_regions, k))
        mu = np.zeros((n_regions, max(k - 1, 0)))
        if self.segments == 0:  # nothing can move: the centre, zero multipliers
            self.iterations = 0
            return self.centre.astype(np.float64).reshape(self.shape), lam, mu
        left = _remaining(deadline, "before an LP solve of")
        budgeted = budget is not None and budget < left
        if self.row_dual is not None:  # a warm re-solve (module docstring: edge weights)
            weights = 2 if self.added >= WARM_STEEPEST_EDGE_COLUMNS else _WARM_EDGE_WEIGHTS
            self.h.setOptionValue("simplex_dual_edge_weight_strategy", weights)
        self.added = 0
        set_time_left(self.h, budget if budgeted else left)
        run = self.h.run()
        model_status = self.h.getModelStatus()
        if model_status == highspy.HighsModelStatus.kTimeLimit and budgeted:
            self.iterations = int(self.h.getInfo().simplex_iteration_count)
            return None
        if model_status == highspy.HighsModelStatus.kTimeLimit and deadline is not None:
            raise ChainTimeLimit("during an LP solve of")
        if run == highspy.HighsStatus.kError or model_status != highspy.HighsModelStatus.kOptimal:
            text = self.h.modelStatusToString(model_status)
            raise SolverError(f"HiGHS did not reach an optimum of the chain LP: run status {run}, model status {text!r}")
        self.iterations = int(self.h.getInfo().simplex_iteration_count)
        sol = self.h.getSolution()
        seg = np.asarray(sol.col_value, dtype=np.float64)
        x = self.centre.astype(np.float64) + np.bincount(self.owner, weights=self.sign * seg, minlength=self.centre.size)
        self.row_dual = np.asarray(sol.row_dual, dtype=np.float64)
        duals = np.zeros(self.n_cons + self.n_mono)
        duals[self.row_ids] = self.row_dual
        internal = np.asarray(self.hier.internal, dtype=np.int64)
        leaves = np.asarray(self.hier.leaves, dtype=np.int64)
        lam[internal] = duals[: self.n_cons].reshape(internal.size, k)
        if k >= 2:
            mu[leaves] = duals[self.n_cons : self.n_cons + self.n_mono].reshape(leaves.size, k - 1)
        return x.reshape(self.shape), lam, mu


def _solve_block_lp(
    hier: Hierarchy, y: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Windowed PWL LP on the windows [lo, hi] of one block of sizes, solved cold: (c float, lam, mu).

    The ``_BlockLP`` model with centre ``lo`` and up segments only.
    """
    solved = _BlockLP(hier, y, lo, hi - lo, np.zeros_like(lo)).solve()
    assert solved is not None  # no budget: it cannot stop early
    return solved


def _chunked_start(model: _BlockLP, hier: Hierarchy, y: np.ndarray, centre: np.ndarray,
                   n_up: np.ndarray, n_down: np.ndarray, chunk_segments: int,
                   deadline: float | None = None) -> tuple[int, int]:
    """Give a new ``model`` a starting basis assembled from cold solves of consecutive size chunks.

    A chunk (about ``chunk_segments`` segment columns) is the block's LP on its sizes without
    the C8 rows to the neighbouring chunks. The chunks' optimal bases, with those C8 rows'
    slacks basic, form a basis of the whole block's LP that is dual feasible and violates at
    most the dropped rows; the dual simplex on the whole block then starts from it. Only the
    starting point changes (the optimum is the whole block's); small LPs cost much less per
    simplex iteration than one large one. Returns the number of chunks (1: nothing done) and
    their simplex iterations.
    """
    if chunk_segments <= 0:
        return 1, 0
    k = y.shape[1]
    per_size = (n_up + n_down).sum(axis=0)
    total_seg = int(per_size.sum())
    n_chunks = min(k, total_seg // int(chunk_segments))
    if n_chunks < 2:
        return 1, 0
    cuts = np.searchsorted(np.cumsum(per_size), total_seg * np.arange(1, n_chunks) / n_chunks, side="right")
    bounds = [0, *sorted({int(c) for c in cuts if 0 < c < k}), k]
    if len(bounds) < 3:
        return 1, 0

    def solve_chunk(p: int, q: int) -> tuple[int, int, _BlockLP | None]:
        sub = _BlockLP(hier, y[:, p:q], centre[:, p:q], n_up[:, p:q], n_down[:, p:q], simplex_strategy=1)
        if sub.segments == 0:
            return p, q, None  # its rows keep basic slacks
        sub.solve(deadline)
        return p, q, sub

    # the chunks are independent LPs, and HiGHS releases the GIL while it solves: two threads
    # use both cores (census N = 1,000, seed 1: the chunk solves of the first LP took about 5 s
    # instead of 6.4 s at eps = 1 and 8.5 s at eps = 0.5). Merging neighbouring chunks pairwise
    # (each merged LP warm from its halves) before the whole block was measured and dropped:
    # census eps = 0.1, seed 1, first LP 61.6 s against 41.5 s (451,524 simplex iterations in
    # the chunks and merges against 325,279, then 22,276 in the block against 124,222)
    with ThreadPoolExecutor(max_workers=CHUNK_THREADS) as pool:
        parts = list(pool.map(lambda pq: solve_chunk(*pq), itertools.pairwise(bounds)))
    iterations = sum(sub.iterations for _, _, sub in parts if sub is not None)
    _assemble_basis(model, parts)
    return len(bounds) - 1, iterations


def _assemble_basis(model: _BlockLP, parts: list[tuple[int, int, _BlockLP | None]]) -> None:
    """Set ``model``'s basis from solved LPs (p, q, LP) of its consecutive size ranges [p, q).

    Each part's optimal basis, with the slacks of the C8 rows between parts basic, gives a basis
    of the whole model that is dual feasible and violates at most those rows.
    """
    import highspy

    k = model.shape[1]
    row_status = np.full(model.n_cons + model.n_mono, highspy.HighsBasisStatus.kBasic, dtype=object)  # full rows
    keys, col_status = [], []
    for p, q, sub in parts:
        if sub is None:
            continue
        kc = q - p
        basis = sub.h.getBasis()
        r, s = np.divmod(sub.owner, kc)
        keys.append(np.stack([sub.sign < 0, r, s + p, sub.step]))
        col_status.append(np.array(basis.col_status, dtype=object))
        sub_rows = np.full(sub.n_cons + sub.n_mono, highspy.HighsBasisStatus.kBasic, dtype=object)
        sub_rows[sub.row_ids] = np.array(basis.row_status, dtype=object)
        qq, ss = np.divmod(np.arange(sub.n_cons), kc)  # C7 row (internal region qq, size ss)
        row_status[qq * k + ss + p] = sub_rows[: sub.n_cons]
        if kc >= 2:
            ll, ss = np.divmod(np.arange(sub.n_mono), kc - 1)  # C8 row (leaf ll, sizes ss | ss + 1)
            row_status[model.n_cons + ll * (k - 1) + ss + p] = sub_rows[sub.n_cons :]
    # the same columns (side, region, size, step) in the model's order
    r, s = np.divmod(model.owner, k)
    mine = np.lexsort((model.step, s, r, model.sign < 0))
    cat = np.concatenate(keys, axis=1)
    theirs = np.lexsort((cat[3], cat[2], cat[1], cat[0]))
    status = np.empty(model.segments, dtype=object)
    status[mine] = np.concatenate(col_status)[theirs]
    basis = highspy.HighsBasis()
    basis.col_status = status.tolist()
    basis.row_status = row_status[model.row_ids].tolist()
    basis.valid = True
    if model.h.setBasis(basis) == highspy.HighsStatus.kError:  # pragma: no cover
        raise SolverError("HiGHS refused the chain LP's assembled starting basis")


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
    integer_program: str | None = None  # fractional LP optimum: HiGHS branch and bound on the windows
    integrality_gap: float = 0.0  # U - L of the window bound (0 with the LP certificate)
    mip_time_s: float = 0.0
    #: "lagrangian" (the per-cell certificate), "lagrangian-bound" (fractional LP: an integer point
    #: within 1 of the exact Lagrangian bound) or "level-set+branch-and-bound"
    certificate_kind: str = "lagrangian"


def _objective(x: np.ndarray, y: np.ndarray) -> int:
    """Model 3's objective sum (x - y)^2 at an integer point x, for integer-valued y, exactly."""
    d = np.asarray(x, dtype=np.int64) - np.rint(np.asarray(y)).astype(np.int64)
    return int(np.sum(d * d, dtype=np.int64))


def _spread(hier: Hierarchy, cells: np.ndarray) -> np.ndarray:
    """The cells, their chain neighbours (sizes s +- 1) and all their ancestors."""
    out = cells.copy()
    out[:, 1:] |= cells[:, :-1]
    out[:, :-1] |= cells[:, 1:]
    par = _parent_index(hier)
    for r in reversed(range(1, hier.size)):
        out[par[r]] |= out[r]
    return out


def _plateaus(cum: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The cells and the rest of their plateaus: the runs of one positive value in their chains.

    A failing cell on a plateau (e.g. one group whose size the noise blurs over hundreds of
    sizes: the chain stays at 1) usually needs the whole run to move; widening only its
    neighbours moved the failure two sizes per round (census N = 1,000, eps = 0.1, windows of
    half-width 1: 100 rounds without a certificate).
    """
    n, k = cum.shape
    starts = np.ones((n, k), dtype=bool)
    starts[:, 1:] = cum[:, 1:] != cum[:, :-1]
    run = np.cumsum(starts.ravel()).reshape(n, k)  # one id per run (every row starts a run)
    hit = np.unique(run[cells & (cum > 0)])
    return cells | np.isin(run, hit)


#: A size block with fewer than this share of the round's segment columns is not split off (it
#: joins its larger neighbour): tiny blocks save nothing, and when a later round breaks the C8
#: row at their cut, the merge rebuilds the big neighbour cold (census eps = 0.5, seed 2: the
#: one-size blocks 997..1000 of the outlier groups merged back one by one, three cold rebuilds
#: of the 450,000-column block, 150 s).
MIN_BLOCK_SHARE = 0.02


def _blocks(lo: np.ndarray, hi: np.ndarray, leaves: np.ndarray) -> list[tuple[int, int]]:
    """Split sizes where every leaf's windows make C8 redundant (lo[l, s] >= hi[l, s+1]).

    Blocks with fewer than ``MIN_BLOCK_SHARE`` of the segment columns (hi - lo) join their
    larger neighbour.
    """
    n_sizes = lo.shape[1]
    if n_sizes == 1:
        return [(0, 1)]
    cut = np.all(lo[leaves, :-1] >= hi[leaves, 1:], axis=0)
    bounds = [0] + [int(s) + 1 for s in np.nonzero(cut)[0]] + [n_sizes]
    per_size = (hi - lo).sum(axis=0)
    floor = MIN_BLOCK_SHARE * float(per_size.sum())
    while len(bounds) > 2:
        sizes = [float(per_size[a:b].sum()) for a, b in itertools.pairwise(bounds)]
        j = int(np.argmin(sizes))
        if sizes[j] >= floor:
            break
        # drop the cut on the side of the larger neighbour (the first or last block has one side)
        left = sizes[j - 1] if j > 0 else -1.0
        right = sizes[j + 1] if j + 1 < len(sizes) else -1.0
        del bounds[j if left >= right else j + 1]
    return list(itertools.pairwise(bounds))


def _boundary_violations(x: np.ndarray, blocks: list[tuple[int, int]], leaves: np.ndarray) -> list[int]:
    """Indices j such that some leaf breaks C8 between block j and block j + 1 (c_s < c_{s+1})."""
    return [j for j, (_a, b) in enumerate(blocks[:-1]) if np.any(x[leaves, b - 1] < x[leaves, b] - 1e-9)]


def _fractional_duals(lam: np.ndarray, mu: np.ndarray) -> bool:
    return bool(np.any(np.abs(lam - np.rint(lam)) > 1e-6) or np.any(np.abs(mu - np.rint(mu)) > 1e-6))


#: First slack T of the level-set search (objective units).
LEVEL_SET_START = Fraction(4)
#: Most segment columns of a level-set branch and bound. Measured: W_4 with 364,589 columns
#: (taxi, eps 0.5) proved in under a minute; W_1/2 with 1,592,411 binary columns (census N = 500,
#: eps 1, one column on every cell: quarter-integral multipliers) ran past HiGHS's time limit
#: (over 330 s on a 300 s limit, and 1,000 s on 900 s) without a result.
MAX_LEVEL_SET_SEGMENTS = 1_000_000


@dataclass(frozen=True)
class _LevelSetOptimum:
    cumulative: np.ndarray
    upper: int
    gap: Fraction  # U - L
    slack: Fraction  # T with U <= L + T
    note: str


#: Cells around a fractional LP optimum that the local branch and bound may move, and how far.
LOCAL_MIP_SPREAD = 2
LOCAL_MIP_HALFWIDTH = 1


def _with_siblings(hier: Hierarchy, cells: np.ndarray) -> np.ndarray:
    """The cells and the same sizes in the children of every non-root region holding one.

    After ``_spread`` (which holds every ancestor) these are the siblings of the held cells: a
    count can then move between the children of one parent. The root's children are left out
    (a fractional nation cell would free its size in every state).
    """
    par = _parent_index(hier)
    out = cells.copy()
    below_root = np.flatnonzero(par[1:] > 0) + 1  # regions whose parent is not the root
    out[below_root] |= cells[par[below_root]]
    return out


def _local_integer_point(hier: Hierarchy, y: np.ndarray, total: int, x: np.ndarray,
                         deadline: float | None = None, siblings: bool = False) -> tuple[np.ndarray, int, str] | None:
    """A good integer point near a fractional LP optimum x: (point, f(point), note), or None.

    HiGHS branch and bound with every cell fixed at its LP value except the fractional cells and
    their neighbourhood (``_spread``: chain neighbours and ancestors, ``LOCAL_MIP_SPREAD`` times;
    with ``siblings`` also the same sizes in the sibling regions, so that a count can move between
    the children of one parent), which get [floor - 1, ceil + 1]. (With all descendants, one
    fractional root cell would free every cell of its size: 1.2 M cells on a census draw.)
    Nothing here is trusted: the caller proves the point optimal against the exact Lagrangian
    bound L (U - L < 1, f being an integer) or uses U to shrink the level set it searches.
    """
    frac = np.abs(x - np.rint(x)) > 1e-6
    near = frac
    for _ in range(LOCAL_MIP_SPREAD):
        near = _spread(hier, near)
        if siblings:
            near = _with_siblings(hier, near)
    near[0, 0] = False  # c_1^root = G (C6)
    base = np.rint(x).astype(np.int64)
    lo = np.where(near, np.clip(np.floor(x).astype(np.int64) - LOCAL_MIP_HALFWIDTH, 0, total), base)
    hi = np.where(near, np.clip(np.ceil(x).astype(np.int64) + LOCAL_MIP_HALFWIDTH, 0, total), base)
    model = _BlockLP(hier, np.asarray(y, dtype=np.float64), lo, hi - lo, np.zeros_like(lo))
    if not model.dropped_rows_hold():  # pragma: no cover - the LP point satisfies every row
        return None
    point, note = model.solve_integer(MIP_TIME_LIMIT, deadline)
    if point is None or not _model3_feasible(hier, point, total):
        return None
    upper = _objective(point, y)
    kind = "with siblings " if siblings else ""
    return point, upper, f"local branch and bound {kind}over {int(near.sum()):,} cells ({model.segments:,} segments): {note}"


def _level_set_search(hier: Hierarchy, y: np.ndarray, total: int, wb: WindowBound,
                      deadline: float | None = None,
                      incumbent: tuple[np.ndarray, int] | None = None) -> _LevelSetOptimum | str:
    """Optimum of Model 3 by branch and bound over the level set W_T of the multipliers' bound.

    ``securelp.solvers.hierarchy.window_bound``: every point with f <= L + T lies in W_T. With U the
    best known value (the optimum over a box containing W_T, or an incumbent), a better point
    has f <= U - 1 (f is an integer); if U - 1 <= L + T it would lie in the box, where nothing
    beats U: U is the optimum of Model 3, checked exactly. Without an incumbent T starts at
    ``LEVEL_SET_START``; an empty W_T raises it x4, a point with U - 1 > L + T raises it to
    U - 1 - L. With a feasible incumbent U0 (from the local search) T starts at U0 - 1 - L and
    the branch and bound only seeks points with f <= U0 - 1 ("infeasible" proves U0). ``wb`` is
    the bound of the LP's multipliers. Returns the optimum, or why none was proved.
    """
    yf = np.asarray(y, dtype=np.float64)
    best: tuple[np.ndarray, int] | None = None
    slack = LEVEL_SET_START
    if incumbent is not None:
        best = (incumbent[0], int(incumbent[1]))
        slack = Fraction(best[1]) - 1 - wb.lower
        if slack < 0:  # U0 < L + 1: the incumbent is optimal already
            return _LevelSetOptimum(best[0], best[1], Fraction(best[1]) - wb.lower, Fraction(0), "incumbent within 1 of L")
    notes = []
    for _ in range(8):
        wlo, whi = level_windows(wb, y, total, slack)
        seg = int((whi - wlo).sum())
        if seg > MAX_LEVEL_SET_SEGMENTS:
            return f"the level set for T = {slack} needs {seg:,} segment columns (> {MAX_LEVEL_SET_SEGMENTS:,})"
        logger.info("chain: branch and bound over the level set T = %s (%d segment columns on %d cells)", slack, seg,
                    int((whi > wlo).sum()))
        model = _BlockLP(hier, yf, wlo, whi - wlo, np.zeros_like(wlo))
        below = None if best is None else best[1] - 1  # only a better point matters
        x, note = (model.solve_integer(MIP_TIME_LIMIT, deadline, at_most=below) if model.dropped_rows_hold()
                   else (None, "empty box"))
        notes.append(f"T = {slack}: {seg:,} segments, {note}")
        logger.info("chain: level set %s", notes[-1])
        if x is not None:
            if not _model3_feasible(hier, x, total):  # pragma: no cover - HiGHS returned an infeasible point
                raise VerificationError("chain: the branch-and-bound point fails Model 3 feasibility")
            upper = _objective(x, y)
            if best is None or upper < best[1]:
                best = (x, upper)
        # best = min(incumbent, box optimum). A better point z has f(z) <= best - 1; if that is
        # <= L + T, z lies in W_T (inside the box) and so f(z) >= box optimum >= best: none exists
        if best is not None and proves_optimal(wb, best[1] - 1, slack):
            return _LevelSetOptimum(best[0], best[1], Fraction(best[1]) - wb.lower, slack, "; ".join(notes))
        slack = slack * 4 if best is None else Fraction(best[1]) - 1 - wb.lower
    return "no level set proved the optimum in 8 tries"


def solve_model3_certified(
    hier: Hierarchy,
    noisy_cum: np.ndarray,
    total: int,
    center: np.ndarray,
    *,
    initial_halfwidth: int = 2,
    max_rounds: int = 100,
    zero_tails: bool = True,
    tail_starts: np.ndarray | None = None,
    deadline: float | None = None,
) -> ChainLPResult:
    """Exact Model 3 optimum by windowed PWL LPs and the Lagrangian certificate (module docstring).

    ``center`` is a feasible integer Model 3 point (e.g. the M_c^dp release, cumulative).
    ``tail_starts`` (per leaf, in ``hier.leaves`` order; N = no tail) proposes the first zero
    tails; ``center`` must be 0 on them. Default: ``zero_tail.ladder_starts`` on the centre.
    ``deadline`` (``time.perf_counter`` clock) bounds the whole search: past it the LP and
    branch-and-bound solves stop and ChainTimeLimit (a ResourceError) says in which round.

    Raises
    ------
    ResourceError
        The windows needed exceed the segment limits, the round limit was reached, or an LP
        optimum was fractional.
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
    center[0, 0] = total  # fixed (C6); the LP rows hold for any centre, the bounds carry its activities
    # halfwidth per cell and side; the window is [centre - half_down, centre + half_up] within [0, G]
    h0 = max(1, int(initial_halfwidth))
    half_up = np.full((n_regions, n_sizes), h0, dtype=np.int64)
    half_down = half_up.copy()
    # zero tails (securelp.solvers.hierarchy.zero_tail): leaf suffixes where the centre is 0 and the
    # isotonic condition holds stay at 0 outside the LPs (window [0, 0], rows dropped)
    if not zero_tails or n_sizes < 2:
        starts = np.full(leaves.size, n_sizes)
    elif tail_starts is not None:
        starts = np.minimum(np.asarray(tail_starts, dtype=np.int64), n_sizes)
        if starts.shape != leaves.shape:
            raise ValueError(f"tail_starts has shape {starts.shape}, expected ({leaves.size},)")
    else:
        starts = ladder_starts(hier, y, center)
    fixed = fixed_cells(hier, starts, n_sizes)
    if np.any(center[fixed] != 0):
        raise ValueError("the centre is not 0 on the proposed zero tails")
    half_up[fixed] = 0
    half_down[fixed] = 0
    if fixed.any():
        logger.info("chain: zero tails fix %d of %d cells at 0", int(fixed.sum()), fixed.size)
    lp_time = mip_time = 0.0
    fractional_rounds = 0

    def free_tails(cells: np.ndarray, lam_now: np.ndarray) -> np.ndarray:
        """Shorten the zero tails holding ``cells`` (fixed cells); returns the freed cells."""
        nonlocal starts, fixed
        down = cells.copy()
        par = _parent_index(hier)
        for r in range(1, hier.size):  # parents first: an internal fixed cell fixes its leaves' cells
            down[r] |= down[par[r]] & fixed[r]
        fail_leaf = down[leaves]
        last = np.where(fail_leaf.any(axis=1), n_sizes - 1 - np.argmax(fail_leaf[:, ::-1], axis=1), -1)
        starts = restart_after(hier, y, center, lam_now, starts, last)
        new_fixed = fixed_cells(hier, starts, n_sizes)
        if not (fixed & ~new_fixed).any():  # not expected: no tails at all
            starts = np.full(leaves.size, n_sizes)
            new_fixed = np.zeros_like(fixed)
        freed = fixed & ~new_fixed
        fixed = new_fixed
        return freed

    blocks: list[tuple[int, int]] = []
    models: list[_BlockLP | None] = []
    cold: set[tuple[int, int]] = set()  # blocks to (re)build from the slack basis, no chunked start
    recold: set[tuple[int, int]] = set()  # blocks already rebuilt cold for fractional multipliers
    build_seconds: dict[tuple[int, int], float] = {}  # last cold build + solve of a block
    slow_warm: set[tuple[int, int]] = set()  # blocks whose warm re-solve took longer than a build
    pending = 0  # cells whose check failed in the last round (for a time-limit message)
    rounds = 1

    def bound_proof(point: np.ndarray, upper: int, gap: Fraction, what: str, note: str | None = None) -> ChainLPResult:
        """The result for an integer point with U - L < 1 against the exact Lagrangian bound L."""
        cert = ChainCertificate(True, True, float(1 - gap), np.zeros(point.shape, dtype=bool),
                                f"Lagrangian bound L and {what} with U - L = {gap} < 1")
        return ChainLPResult(point, float(upper), rounds, len(blocks), segments,
                             int(max(half_up.max(), half_down.max())), cert, lp_time, integer_program=note,
                             integrality_gap=float(gap), mip_time_s=mip_time, certificate_kind="lagrangian-bound")

    def build(a: int, b: int) -> _BlockLP:
        """A cold model of the block of sizes a+1..b on the current windows (chunked start unless cold)."""
        args = (hier, yf[:, a:b], center[:, a:b], n_up[:, a:b], n_down[:, a:b])
        model = _BlockLP(*args)
        if (a, b) not in cold:
            chunks, chunk_it = _chunked_start(model, *args, START_CHUNK_SEGMENTS, deadline)
            if chunks > 1:
                logger.info("chain round %d: sizes %d..%d start from the bases of %d chunks (%d simplex iterations)",
                            rounds, a + 1, b, chunks, chunk_it)
        return model

    try:
        for rounds in range(1, max_rounds + 1):
            _remaining(deadline, "before")
            n_up = np.minimum(half_up, total - center)
            n_down = np.minimum(half_down, center)
            n_up[0, 0] = n_down[0, 0] = 0  # c_1^root = G (C6)
            lo, hi = center - n_down, center + n_up
            segments = int((n_up + n_down).sum())
            if segments > MAX_TOTAL_SEGMENTS:
                raise ResourceError(
                    f"chain: the certified windows need {segments:,} LP segment columns (> {MAX_TOTAL_SEGMENTS:,}); "
                    f"the exact Model 3 solve does not fit this instance"
                )
            if not blocks:
                blocks = _blocks(lo, hi, leaves)
                models = [None] * len(blocks)
            x = np.zeros((n_regions, n_sizes))
            lam = np.zeros((n_regions, n_sizes))
            mu = np.zeros((n_regions, max(n_sizes - 1, 0)))
            t0 = time.perf_counter()
            iterations = 0
            todo = list(range(len(blocks)))
            while todo:
                for j in todo:
                    a, b = blocks[j]
                    seg_b = int((n_up[:, a:b] + n_down[:, a:b]).sum())
                    if seg_b > MAX_BLOCK_SEGMENTS:
                        raise ResourceError(
                            f"chain: one block of sizes {a + 1}..{b} needs {seg_b:,} LP segment columns "
                            f"(> {MAX_BLOCK_SEGMENTS:,}); the exact Model 3 solve does not fit this instance"
                        )
                    model = models[j]
                    if model is not None and (a, b) in slow_warm and REBUILD_GROWTH > 0:
                        grow = model.new_segments(n_up[:, a:b], n_down[:, a:b])
                        if grow > REBUILD_GROWTH * model.segments:
                            logger.info("chain round %d: sizes %d..%d gain %d segment columns (%d now): rebuilt",
                                        rounds, a + 1, b, grow, model.segments)
                            model = models[j] = None
                    t_start = time.perf_counter()
                    built = model is None
                    if model is None:
                        model = models[j] = build(a, b)
                        solved = model.solve(deadline)
                    else:
                        model.extend(n_up[:, a:b], n_down[:, a:b])
                        budget = _warm_budget(build_seconds.get((a, b)))
                        solved = model.solve(deadline, budget)
                        if solved is None:  # slower than a cold build: stop it and rebuild
                            iterations += model.iterations
                            logger.info("chain round %d: sizes %d..%d: warm re-solve stopped after %.1f s (%d simplex "
                                        "iterations; the block's cold build took %.1f s): rebuilt", rounds, a + 1, b,
                                        time.perf_counter() - t_start, model.iterations, build_seconds[(a, b)])
                            slow_warm.add((a, b))
                            t_start = time.perf_counter()
                            built = True
                            model = models[j] = build(a, b)
                            solved = model.solve(deadline)
                    assert solved is not None  # only a budgeted (warm) solve stops early
                    xb, lb, mb = solved
                    iterations += model.iterations
                    elapsed = time.perf_counter() - t_start
                    if built:
                        build_seconds[(a, b)] = elapsed
                    elif _warm_is_slow(elapsed, build_seconds.get((a, b))):
                        slow_warm.add((a, b))
                    x[:, a:b] = xb
                    lam[:, a:b] = lb
                    mu[:, a : b - 1] = mb
                    if a > 0:
                        mu[:, a - 1] = 0  # the C8 rows between blocks are not in any LP
                # a split is kept while the assembled point satisfies the C8 rows it drops (then
                # mu = 0 on them is exact, module docstring); otherwise the two blocks are merged
                todo = []
                for j in reversed(_boundary_violations(x, blocks, leaves)):
                    (a, cut), (_, b) = blocks[j], blocks[j + 1]
                    logger.info("chain round %d: C8 broken between sizes %d and %d: merging two blocks", rounds, cut, cut + 1)
                    blocks[j : j + 2] = [(a, b)]
                    models[j : j + 2] = [None]
                    todo = sorted({i - 1 if i > j else i for i in todo} | {j})
            lp_round = time.perf_counter() - t0
            lp_time += lp_round
            cum = np.rint(x).astype(np.int64)
            frac = np.abs(x - cum)
            fractional = frac > 1e-6
            if fractional.any():
                fractional_rounds += 1
                logger.info("chain round %d: fractional LP optimum on %d cells", rounds, int(fractional.sum()))
                if not integral:
                    raise ResourceError(
                        f"chain: the windowed LP has a fractional optimum ({int(fractional.sum())} cells, largest "
                        f"distance to an integer {frac.max():.3g}) and the noisy values are not integers (no exact "
                        f"level-set bound); no certificate is available for this instance"
                    )
                # the LP's multipliers confine every good integer point to small windows (the level
                # set W_T of securelp.solvers.hierarchy.window_bound); branch and bound over them
                lam_f, mu_f = complete_multipliers(hier, yf, fixed, lam, mu) if fixed.any() else (lam, mu)
                # first make the bound as tight as these windows allow: cells whose window binds
                # (their Lagrangian best lies outside) are widened, tails freed, and the LP re-solved
                wb = window_bound(hier, y, total, lam_f, mu_f)
                bind = binding_cells(wb, y, lo, hi)
                if bind.any() and fractional_rounds <= MAX_MIP_ROUNDS:
                    freed = free_tails(bind & fixed, lam_f) if (bind & fixed).any() else np.zeros_like(bind)
                    widen = _spread(hier, bind & ~fixed)
                    logger.info("chain round %d: fractional LP; %d cells bind their windows: widening %d, %d leave "
                                "the tails", rounds, int(bind.sum()), int(widen.sum()), int(freed.sum()))
                    half_up = np.where(freed, h0, np.where(widen, half_up * 4, half_up))
                    half_down = np.where(freed, h0, np.where(widen, half_down * 4, half_down))
                    continue
                # a good integer point U near the LP optimum: U - L < 1 proves it (f is an integer);
                # else it shrinks the level set to T = U - 1 - L. First the fractional cells'
                # chains and ancestors, then also their siblings (counts move between children)
                incumbent, found = None, "no integer point was found near the LP optimum"
                for siblings in (False, True):
                    t1 = time.perf_counter()
                    local = _local_integer_point(hier, y, total, x, deadline, siblings=siblings)
                    mip_time += time.perf_counter() - t1
                    if local is not None and (incumbent is None or local[1] < incumbent[1]):
                        incumbent = local
                    if incumbent is None:
                        continue
                    point, upper, note = incumbent
                    gap = Fraction(upper) - wb.lower
                    if gap < 1:
                        logger.info("chain round %d: %s; U - L = %s < 1 proves it optimal", rounds, note, gap)
                        return bound_proof(point, upper, gap, "an integer point", note)
                    logger.info("chain round %d: %s; U = %d, L = %s: searching the level set below U", rounds,
                                note, upper, wb.lower)
                    t1 = time.perf_counter()
                    found = _level_set_search(hier, y, total, wb, deadline, incumbent=(point, upper))
                    mip_time += time.perf_counter() - t1
                    if isinstance(found, _LevelSetOptimum):
                        break
                if isinstance(found, str) and incumbent is None:
                    t1 = time.perf_counter()
                    found = _level_set_search(hier, y, total, wb, deadline)
                    mip_time += time.perf_counter() - t1
                if isinstance(found, _LevelSetOptimum):
                    margin = found.slack - (found.gap - 1)  # L + T - (U - 1) >= 0: no better point
                    cert = ChainCertificate(True, True, float(margin), np.zeros(cum.shape, dtype=bool),
                                            f"level-set bound (U - L = {found.gap}, T = {found.slack}) + HiGHS "
                                            f"branch and bound")
                    note = found.note if incumbent is None else f"{incumbent[2]}; level set: {found.note}"
                    return ChainLPResult(found.cumulative, float(found.upper), rounds, len(blocks), segments,
                                         int(max(half_up.max(), half_down.max())), cert, lp_time,
                                         integer_program=note, integrality_gap=float(found.gap), mip_time_s=mip_time,
                                         certificate_kind="level-set+branch-and-bound")
                raise ResourceError(f"chain: the windowed LP optimum is fractional and {found}; no certified release")
            scale = 1
            if integral:
                # duals that are multiples of 1/D (degenerate vertices give half-integers) are
                # checked exactly in D-scaled integers; others are rounded to integers
                scale, lam_c, mu_c, on_grid = scaled_multipliers(lam, mu, MAX_DUAL_SCALE)
                if not on_grid:
                    scale, lam_c, mu_c = 1, np.rint(lam).astype(np.int64), np.rint(mu).astype(np.int64)
            else:
                lam_c, mu_c = lam, mu
            if fixed.any():
                lam_c, mu_c = complete_multipliers(hier, y, fixed, lam_c, mu_c, scale)
            cert = check_certificate(hier, cum, y, total, lam_c, mu_c, scale)
            logger.info(
                "chain round %d: %d blocks, %d segments, LP %.2fs (%d simplex iterations), total LP %.2fs, certificate %s",
                rounds, len(blocks), segments, lp_round, iterations, lp_time, cert.reason,
            )
            if cert.ok:
                from securelp.solvers.hierarchy.hdp import squared_distance

                return ChainLPResult(cum, squared_distance(cum, y), rounds, len(blocks), segments,
                                     int(max(half_up.max(), half_down.max())), cert, lp_time)
            if not cert.failing.any():
                raise VerificationError(f"chain: certificate check failed: {cert.reason}")
            fail = cert.failing
            pending = int(fail.sum())
            tail_fail = fail & fixed
            if tail_fail.any():
                # a zero tail is not optimal as proposed: restart those leaves' tails after their last
                # failing size (with the current multipliers); the freed cells get windows again
                freed = free_tails(tail_fail, lam_c / scale)
                logger.info("chain round %d: %d zero-tail cells fail; %d cells leave the tails", rounds,
                            int(tail_fail.sum()), int(freed.sum()))
                half_up = np.where(freed, h0, half_up)
                half_down = np.where(freed, h0, half_down)
                fail = fail & ~tail_fail  # the models add the freed cells' rows and columns when extended
                if not fail.any():
                    continue
            away = fail & ~(((cum == lo) & (lo > 0)) | ((cum == hi) & (hi < total)))
            if away.any() and not (fail & ~away).any() and integral and _model3_feasible(hier, cum, total):
                # every failing cell is inside its window (wider windows change nothing), but the
                # same multipliers' exact Lagrangian bound L (duals to 1/64, else rounded: any
                # mu >= 0 gives a valid bound) may be within 1 of this integer point's U, which
                # proves it (f is an integer)
                lam_f, mu_f = complete_multipliers(hier, yf, fixed, lam, mu) if fixed.any() else (lam, mu)
                wb = window_bound(hier, y, total, lam_f, mu_f)
                upper = _objective(cum, y)
                gap = Fraction(upper) - wb.lower
                if gap < 1:
                    logger.info("chain round %d: %d cells fail the per-cell test, but U - L = %s < 1 proves the "
                                "LP point optimal", rounds, int(cert.failing.sum()), gap)
                    return bound_proof(cum, upper, gap, "the LP point")
            if away.any():
                # cells fail off their window bounds: the LP's multipliers did not round to a
                # certificate (seen: half-integral duals of an integral point). Wider windows do
                # not change them; a block with fractional duals is rebuilt once and solved from
                # the slack basis, which gives other duals. Otherwise widen as below (bounded by
                # max_rounds); never a release without a passing check.
                logger.info("chain round %d: %d cells fail away from window bounds", rounds, int(away.sum()))
                for j, (a, b) in enumerate(blocks):
                    if away[:, a:b].any() and (a, b) not in recold and _fractional_duals(lam[:, a:b], mu[:, a : b - 1]):
                        logger.info("chain round %d: fractional multipliers in sizes %d..%d: re-solving cold", rounds, a + 1, b)
                        models[j] = None
                        cold.add((a, b))
                        recold.add((a, b))
            # widen the failing cells, their chain neighbours and ancestors (x4, both sides); the
            # centre stays, so the models only gain columns
            widen = _spread(hier, _plateaus(cum, fail))
            logger.info("chain round %d: widening %d cells", rounds, int(widen.sum()))
            half_up = np.where(widen, half_up * 4, half_up)
            half_down = np.where(widen, half_down * 4, half_down)
    except ChainTimeLimit as exc:
        after = f" ({pending} cells not yet certified after round {rounds - 1})" if rounds > 1 else ""
        raise ChainTimeLimit(f"{exc} LP round {rounds}{after}") from None
    raise ResourceError(f"chain: no certificate after {max_rounds} widening rounds")


def projection_multipliers(hier: Hierarchy, approx: np.ndarray, noisy_cum: np.ndarray) -> np.ndarray:
    """C7 multipliers (regions x sizes, leaf rows 0) read off an approximate projection ``approx``.

    At the projection x of the noisy values onto Model 3's relaxation, an internal cell that is
    not at a bound has g = 2 (x - ct) (stationarity), and g = lam[r] - lam[parent r] there, so
    lam[r] = lam[parent r] + 2 (x_r - ct_r), parents first. Only an estimate (used to propose
    zero tails); nothing is certified with it.
    """
    x = np.asarray(approx, dtype=np.float64)
    y = np.asarray(noisy_cum, dtype=np.float64)
    par = _parent_index(hier)
    lam = np.zeros(x.shape)
    for r in hier.internal:  # parents first
        lam[r] = (lam[par[r]] if par[r] >= 0 else 0.0) + 2.0 * (x[r] - y[r])
    return lam


def consistent_rounding(hier: Hierarchy, approx: np.ndarray, total: int, fixed: np.ndarray) -> np.ndarray | None:
    """A feasible integer Model 3 point close to ``approx`` in every cell, 0 on ``fixed`` cells.

    Top-down: the root chain is rounded (c_1 = G, made non-increasing); each internal region's
    integer chain is then split among its children, sizes from N down to 1: at size s the
    parent's new groups P_s - P_{s+1} (>= 0) go to the children that are not fixed there, in
    proportion to how far each child's running value lies below its target ``approx``, rounded
    by largest remainders. Every child's chain is therefore non-increasing, the children sum to
    the parent at every size, and each cell stays near its target (within a few units where
    ``approx`` is nearly consistent) instead of accumulating the rounding errors of its leaves,
    as rounding the leaves and summing them up does (hundreds of units at the census root).
    Returns None if some positive parent value has no child left to take it (only possible when
    ``fixed`` marks every leaf at size 1 while G > 0).
    """
    x = np.clip(np.nan_to_num(np.asarray(approx, dtype=np.float64)), 0.0, float(total))
    n_regions, n_sizes = x.shape
    c = np.zeros((n_regions, n_sizes), dtype=np.int64)
    root = np.rint(x[0]).astype(np.int64)
    root[0] = total
    root = np.minimum.accumulate(root)
    root[fixed[0]] = 0
    c[0] = root
    for p in hier.internal:  # parents first
        kids = np.asarray(hier.children[p], dtype=np.int64)
        allowed = ~fixed[kids]
        target = x[kids]
        new = c[p] - np.append(c[p, 1:], 0)
        run = np.zeros(kids.size, dtype=np.int64)
        for s in range(n_sizes - 1, -1, -1):
            d = int(new[s])
            if d > 0:
                ok = allowed[:, s]
                if not ok.any():
                    return None
                w = np.where(ok, np.maximum(target[:, s] - run, 0.0), 0.0)
                if w.sum() <= 0:
                    w = ok.astype(np.float64)
                want = w * (d / w.sum())
                add = np.floor(want).astype(np.int64)
                rest = d - int(add.sum())
                if rest > 0:
                    order = np.argsort(-np.where(ok, want - add, -1.0), kind="stable")
                    add[order[:rest]] += 1
                run = run + add
            c[kids, s] = run
    return c


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
