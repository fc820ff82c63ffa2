"""The windowed piecewise-linear LP of one size block of Model 3 (``chain``), kept alive across rounds.

Every cell i of the block gets a window of integers [centre_i - d_i, centre_i + u_i] within
[0, G] around a fixed feasible integer centre, on which its square (c_i - y_i)^2 is replaced by
the piecewise-linear interpolation at the integers (exact at every integer): the cell's value
is centre + (sum of its "up" unit segments) - (sum of its "down" unit segments), up segment t
costing 2(centre + t - 1 - y) + 1 and down segment t costing 2(y - centre + t) - 1, so an
optimum fills each side in order. Rows: C7 per internal region and size, C8 per leaf and
adjacent size pair, with the centre's activities in the row bounds (Fioretto, Van Hentenryck,
Zhu, AIJ 2021, Model 3; :mod:`.certificate` for what the LP's point and duals prove).

Rounds are incremental: widening a window only adds segment columns (``addCols``; the row
bounds never change), new columns start nonbasic at 0, or at 1 when their reduced cost under
the last duals is negative, so the basis stays dual feasible and the dual simplex re-solves from
it (Devex pricing, or dual steepest edge after a round that added many columns, where its fresh
weights pay). Cells of zero tails (:mod:`.tails`) have no columns and their rows stay out of the
model until a tail is shortened (``addRows``, empty, basic slacks).

First solve of a block (:func:`chunked_start`): the block's sizes are cut into chunks, each
chunk's LP (without the C8 rows to its neighbours) is solved cold, and their optimal bases, with
the dropped rows' slacks basic, are the starting basis of the whole block's LP (dual feasible;
only the dropped rows can be violated). Only the starting point changes, not the LP; the small
LPs cost much less per simplex iteration than the whole block.
"""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import SolverError
from securelp.solvers.hierarchy.chain.options import ChainOptions
from securelp.solvers.hierarchy.consistency import consistency_rows
from securelp.solvers.hierarchy.errors import NoCertificateError, TimeLimitReached
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.lp.highs import new_highs, set_time_left

#: HiGHS LP algorithm for the windowed LPs (a basic solution; dual simplex when cold).
LP_SOLVER = "simplex"
#: HiGHS dual edge weight strategies of warm re-solves (``ChainOptions.steepest_edge_columns``).
DEVEX, STEEPEST_EDGE = 1, 2


def time_left(deadline: float | None, where: str) -> float:
    """Seconds left before ``deadline`` (``time.perf_counter`` clock; inf without one).

    Raises
    ------
    TimeLimitReached
        The deadline has passed (``where`` says where the search stopped).
    """
    if deadline is None:
        return float("inf")
    left = deadline - time.perf_counter()
    if left <= 0:
        raise TimeLimitReached(where)
    return left


def integer_objective(x: np.ndarray, y: np.ndarray) -> int:
    """Model 3's objective sum (x - y)^2 at an integer point x, for integer-valued y, exactly."""
    d = np.asarray(x, dtype=np.int64) - np.rint(np.asarray(y)).astype(np.int64)
    return int(np.sum(d * d, dtype=np.int64))



def block_rows(hier: Hierarchy, k: int) -> tuple[sp.csr_matrix, int, int]:
    """The rows of a block of ``k`` sizes: C7 per internal region and size, then C8 per leaf and
    adjacent size pair (cells indexed r * k + s); returns (rows, number of C7 rows, of C8 rows)."""
    nv = hier.size * k
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
    return sp.vstack([cons, mono]).tocsr(), cons.shape[0], mono.shape[0]


class BlockLP:
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
                 options: ChainOptions, simplex_strategy: int | None = None):
        import highspy

        self._highspy = highspy
        self.options = options
        self.hier = hier
        self.shape = y.shape
        n_regions, k = y.shape
        nv = n_regions * k
        self.y = np.asarray(y, dtype=np.float64).ravel()
        self.centre = np.asarray(centre, dtype=np.int64).ravel()
        a3, self.n_cons, self.n_mono = block_rows(hier, k)
        # c = centre + (segments): the centre's row activities move into the row bounds
        offset = a3 @ self.centre.astype(np.float64)
        row_lo = -offset
        row_hi = np.concatenate([np.zeros(self.n_cons), np.full(self.n_mono, np.inf)]) - offset
        # rows on cells without any segment (zero tails, :mod:`.tails`) hold for
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
        strategy = options.simplex_strategy if simplex_strategy is None else simplex_strategy
        self.h = new_highs({"solver": LP_SOLVER, "simplex_strategy": strategy})
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
        search stops at ``time_limit`` seconds or at ``deadline`` (TimeLimitReached), if sooner.
        With ``at_most`` only points with f <= at_most are sought (a row of the objective's
        segment costs is added; None, "infeasible" when there is none).
        """
        highspy = self._highspy
        if self.segments == 0:
            return self.centre.reshape(self.shape).copy(), "no segments"
        time_limit = min(float(time_limit), time_left(deadline, "before the branch and bound over a level set of"))
        m = new_highs({"mip_rel_gap": 0.0, "mip_abs_gap": 0.99, "time_limit": float(time_limit)})
        lp = self.h.getLp()
        if m.passModel(lp) == highspy.HighsStatus.kError:  # pragma: no cover
            raise SolverError("HiGHS refused the chain MIP")
        n = self.segments
        if at_most is not None:  # a row: the objective is f - f(centre), an integer at integer points
            limit = int(at_most) - integer_objective(self.centre, self.y)
            m.addRow(-highspy.kHighsInf, float(limit) + 0.5, n, np.arange(n, dtype=np.int32),
                     np.asarray(lp.col_cost_, dtype=np.float64))
        m.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
        m.run()
        status = m.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return None, "infeasible"
        if status == highspy.HighsModelStatus.kTimeLimit and deadline is not None and time.perf_counter() >= deadline:
            raise TimeLimitReached("during the branch and bound over a level set of")
        if status != highspy.HighsModelStatus.kOptimal:
            raise NoCertificateError(f"the integer program on the level set (fractional LP optimum) ended with "
                                     f"{m.modelStatusToString(status)!r} (time limit {time_limit:g} s); no certified "
                                     f"release")
        info = m.getInfo()
        seg = np.rint(np.asarray(m.getSolution().col_value, dtype=np.float64)).astype(np.int64)
        x = self.centre + np.bincount(self.owner, weights=self.sign * seg, minlength=self.centre.size).astype(np.int64)
        gap = f"objective {info.objective_function_value:.6g}, bound {info.mip_dual_bound:.6g}, {info.mip_node_count} nodes"
        return x.reshape(self.shape), gap

    def solve(self, deadline: float | None = None, budget: float | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(c float, lam, mu) on the current windows, from the current basis (if any).

        HiGHS stops at ``deadline`` (``time.perf_counter`` clock), which raises TimeLimitReached.
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
        left = time_left(deadline, "before an LP solve of")
        budgeted = budget is not None and budget < left
        if self.row_dual is not None:  # a warm re-solve (module docstring: edge weights)
            weights = STEEPEST_EDGE if self.added >= self.options.steepest_edge_columns else DEVEX
            self.h.setOptionValue("simplex_dual_edge_weight_strategy", weights)
        self.added = 0
        set_time_left(self.h, budget if budgeted else left)
        run = self.h.run()
        model_status = self.h.getModelStatus()
        if model_status == highspy.HighsModelStatus.kTimeLimit and budgeted:
            self.iterations = int(self.h.getInfo().simplex_iteration_count)
            return None
        if model_status == highspy.HighsModelStatus.kTimeLimit and deadline is not None:
            raise TimeLimitReached("during an LP solve of")
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


def chunked_start(model: BlockLP, hier: Hierarchy, y: np.ndarray, centre: np.ndarray,
                  n_up: np.ndarray, n_down: np.ndarray, deadline: float | None = None) -> tuple[int, int]:
    """Give a new ``model`` a starting basis assembled from cold solves of consecutive size chunks.

    A chunk (about ``ChainOptions.start_chunk_segments`` segment columns; 0: nothing done) is the block's LP on its sizes without
    the C8 rows to the neighbouring chunks. The chunks' optimal bases, with those C8 rows'
    slacks basic, form a basis of the whole block's LP that is dual feasible and violates at
    most the dropped rows; the dual simplex on the whole block then starts from it. Only the
    starting point changes (the optimum is the whole block's); small LPs cost much less per
    simplex iteration than one large one. Returns the number of chunks (1: nothing done) and
    their simplex iterations.
    """
    chunk_segments = model.options.start_chunk_segments
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

    def solve_chunk(p: int, q: int) -> tuple[int, int, BlockLP | None]:
        sub = BlockLP(hier, y[:, p:q], centre[:, p:q], n_up[:, p:q], n_down[:, p:q], model.options, simplex_strategy=1)
        if sub.segments == 0:
            return p, q, None  # its rows keep basic slacks
        sub.solve(deadline)
        return p, q, sub

    # the chunks are independent LPs, and HiGHS releases the GIL while it solves: threads use all cores
    with ThreadPoolExecutor(max_workers=model.options.chunk_threads) as pool:
        parts = list(pool.map(lambda pq: solve_chunk(*pq), itertools.pairwise(bounds)))
    iterations = sum(sub.iterations for _, _, sub in parts if sub is not None)
    _assemble_basis(model, parts)
    return len(bounds) - 1, iterations


def _assemble_basis(model: BlockLP, parts: list[tuple[int, int, BlockLP | None]]) -> None:
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


