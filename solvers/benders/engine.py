"""Benders decomposition for block-ladder LPs with HiGHS.

Problem (all variables bounded, subproblem variables in ``[0, u]`` with ``u`` finite)::

    min  c0' x + sum_m c_m' y_m
    s.t. L0 <= A0 x <= U0,            lx <= x <= ux                       (master rows)
         L_m <= W_m y_m <= U_m(x),    0 <= y_m <= u_m                      (block m)

where the *linked* rows of block ``m`` have upper bound ``U_r(x) = base_r + gamma_r x_{v(r)}``
(one master variable per linked row; their lower bound is ``-inf``) and every other row is
constant. Benders (J. F. Benders 1962; Qiu Sec. 4) replaces block ``m`` by ``theta_m >=
Q_m(x)``, the block's optimal value as a function of ``x``, approximated from below by cuts:

* optimality cut from any row-dual vector ``pi`` of block ``m`` at ``x^``: by weak duality
  ``Q_m(x) >= sum_r pi_r b_r(x) + sum_j min(0, c_j - (W' pi)_j) u_j`` where ``b_r`` is the
  active bound (``L_r`` for ``pi_r > 0``, ``U_r(x)`` for ``pi_r < 0``; wrong-signed duals are
  set to 0). The bound term makes the cut valid for *any* ``pi`` -- a solver's slightly
  dual-infeasible duals give a slightly weaker, still valid cut (certified lower bounds);
* feasibility cut when block ``m`` is infeasible at ``x^``: the same bound on the phase-1 LP
  ``min 1's s.t. W y - s <= U(x)`` (slack on the linked rows), whose optimal duals are a
  normalised Farkas dual ray; its value is positive at ``x^`` and must be ``<= 0``.

The master is split into the connected components of its variables (linked through a
master row or through one block's linked variables; Qiu's Property 3.1), each an
independent HiGHS LP that grows its cut pool with ``addRows`` and re-solves from the
previous basis (warm start). Blocks are solved in parallel (threads; HiGHS releases the
GIL), each from its previous basis after ``changeRowsBounds``. The lower bound is weak duality
on the master's row duals (valid for any duals), not HiGHS's objective, which a badly scaled
master can overstate; the upper bound comes from a caller-supplied function that turns
``(x^, y^)`` into a feasible, verified solution and returns its objective. Optionally a second
function does the same on iterations with infeasible blocks, from their phase-1 solutions
(a caller with an exact repair, such as the mDP engine's, then has an upper bound from the first
iteration on). The last fallback for a block frees its constant rows with the widest coefficient
ratios, a relaxation whose duals (0 on the freed rows) still give a valid cut. A block on which
every HiGHS fallback fails gives no cut in that iteration; the
run goes on with the other blocks' cuts and stops (``numerical_trouble``) only when no block
gives one.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import dual_bound, new_highs, set_time_left, signed_duals
from securelp.solvers.resources import available_memory

__all__ = ["BendersEngine", "BendersIteration", "BendersResult", "LinkedRows", "MasterSpec", "RowBlock", "SubproblemSpec"]

logger = logging.getLogger(__name__)

INF = np.inf
_RETRY_LOCK = threading.Lock()
# the last fallback frees the block's constant rows whose coefficients span more than this ratio,
# then the next one: HiGHS ends some blocks "Unbounded" or "Solve error" (Rome at eps 10/km: rows
# z_i <= e^20 z_j) and solves them once those rows are free
WIDE_ROW_RATIOS = (1e8, 1e6, 1e4)
#: iterations over which the pace of the bounds is judged (:func:`too_slow`); 0 turns the rule off
PACE_WINDOW = 20
#: ... and at least this many seconds: the window grows back until it spans them, and a run younger
#: than this is never judged. Benders bounds move in bursts: with 20 iterations alone the 8x8 grid at
#: eps 10/km (kmdv, M = 6) stopped `no_progress` at a gap of 0.026 after 24 iterations, under a
#: second, where running on reached 2.5e-6 in 7 s; at eps 7 and 8 it was certified in about 250
#: iterations, 4.5 s (stop 42)
PACE_MIN_SECONDS = 60.0
#: cut coefficients below this are dropped safely (HiGHS's ``small_matrix_value``, which it would
#: drop without the correction). Until stop 41 everything below 1e-7 of a cut's largest coefficient
#: was: with duals near 100 and link factors e^6 that dropped coefficients near 1e-3, and a cut at
#: the master's point lost 4 % of the block's value (the 5x5 grid at eps 4/km: a block worth
#: 0.0069322 gave a cut of 0.0066423 there, no cut was violated, and the record BD stalled at a gap
#: of 0.133 for 2,000 iterations)
CUT_CLEAN_BELOW = 1e-9
#: a cut whose coefficients exceed this is scaled down to it (HiGHS refuses rows with 1e15 or more:
#: Rome at eps 10/km with the in-out separation gave cuts up to 3.4e18, stop 41)
CUT_MAX_COEFFICIENT = 1e12
#: the in-out separation solves the blocks at the master's own point once the lower bound has not
#: risen for this many iterations (:meth:`BendersEngine.run`)
IN_OUT_PATIENCE = 5
#: ... and, as when no cut enters, when the cuts that entered are weak: only optimality cuts that cut
#: off the master's thetas by less than this share of the gap ``U - L`` in all. On Rome at eps 10/km
#: (stop 43) iterations 8-10 each added one or two cuts from the in-out point, violated by 2.5e-12 to
#: 4.8e-12 at the master's point (values near 1e-4), which left the master (and the lower bound) as
#: it was; the master's point itself, reached at iteration 11, had 16 blocks infeasible
IN_OUT_WEAK_SHARE = 1e-3
#: a block solve at the master's point (the blocks' feasibility boundary, where HiGHS can take very
#: long) that runs longer than this many times the slowest block solve of the run so far, and at
#: least :data:`AT_X_MIN_SECONDS`, is given up: that block gives no cut this time (Rome at eps 10/km,
#: stop 42: one block's first HiGHS solve there ran 400 s where the others took at most 1 s)
AT_X_SLOWEST_FACTOR = 20.0
AT_X_MIN_SECONDS = 30.0
#: the run stops (``memory_limit``) when the memory left after an iteration is below this many
#: times what that iteration took, or below :data:`MEMORY_FLOOR` bytes (at most
#: :data:`MEMORY_FLOOR_SHARE` of what was left when the run began, for small machines): the cut pool
#: and HiGHS's models grow every iteration (Rome at eps 10/km: 7.3 GB after 21 iterations, stop 43),
#: and a run that the kernel kills returns nothing
MEMORY_GROWTH_FACTOR = 2.0
MEMORY_FLOOR = 1 << 30
MEMORY_FLOOR_SHARE = 0.05
#: a master whose certified bound falls short of HiGHS's objective by more than this share of the
#: run's gap (relative), or a block whose cut at the point does, is re-solved from its basis by a
#: copy with HiGHS's ``user_objective_scale`` set to each of these exponents in turn (the costs, so
#: the duals, times 2^k, and HiGHS's absolute dual tolerance k halvings finer), and the better
#: certificate or cut is kept (:func:`_rescaled_duals`). Wrong-signed duals of 6e-10 on rows with
#: coefficients up to e^20 took the 20x25 grid's certificate at eps 10/km to -0.049 against HiGHS's
#: 1.676e-4; a copy re-solved at 2^12 certified 1.67586e-4 (2.7 s), at 2^24 1.676253e-4 (12.8 s;
#: stop 42), so only 2^24 is tried. The master's point and thetas stay those of its own solve.
RECERTIFY_SHARE = 0.1
RECERTIFY_SCALES = (24,)
#: a cut that cuts off the master's point by less than this is scaled up (a positive multiple) so
#: that it does by this much in its row's units: 100 times HiGHS's feasibility tolerance
VISIBLE_VIOLATION = 1e-7
#: ... by at most this factor (a violation at rounding level is no reason for coefficients of 1e12;
#: the 8x8 grid's cuts needed about 560)
CUT_MAX_UPSCALE = 1e6


@dataclass(frozen=True)
class RowBlock:
    """Row-wise sparse constraint rows ``lower <= A v <= upper`` (CSR arrays)."""

    starts: np.ndarray
    index: np.ndarray
    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.lower.size)

    def matrix(self, n_cols: int) -> sp.csr_matrix:
        return sp.csr_matrix((self.value, self.index, self.starts), shape=(self.n_rows, n_cols))

    @staticmethod
    def empty() -> RowBlock:
        z = np.zeros(0)
        return RowBlock(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), z, z, z)


@dataclass(frozen=True)
class LinkedRows:
    """Rows of a block whose upper bound is ``base + gamma * x[var]``."""

    rows: np.ndarray
    var: np.ndarray
    gamma: np.ndarray


@dataclass(frozen=True)
class MasterSpec:
    """The master part: variables ``x`` with cost, bounds and constant rows."""

    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    rows: RowBlock

    @property
    def n(self) -> int:
        return int(self.cost.size)


@dataclass(frozen=True)
class SubproblemSpec:
    """One block ``m``: ``min c' y`` s.t. rows (some linked to ``x``), ``0 <= y <= upper``.

    ``unit_rows`` optionally lists equality rows ``sum_{j in S_r} y_j = b_r`` (coefficients 1,
    disjoint ``S_r``). Their free duals are shifted down by ``max_j (-reduced_j)^+`` before a
    cut is formed, which makes every reduced cost in ``S_r`` non-negative at a cost of one
    ``delta_r b_r`` instead of ``sum_j min(0, reduced_j) u_j``: a much tighter valid cut when
    the solver's duals are slightly infeasible.
    """

    name: str
    cost: np.ndarray
    upper: np.ndarray
    rows: RowBlock
    linked: LinkedRows
    theta_lower: float = 0.0
    unit_rows: np.ndarray | None = None


@dataclass(frozen=True)
class BendersIteration:
    """Bounds after one iteration (``upper`` is ``inf`` until a feasible solution is found)."""

    iteration: int
    lower: float
    upper: float
    seconds: float
    n_optimality_cuts: int
    n_feasibility_cuts: int
    n_failed_blocks: int = 0  # blocks on which every HiGHS fallback failed (no cut from them)


def memory_taken(before: int | None, after: int | None) -> int:
    """Bytes of available memory an iteration used up (``before`` and ``after`` it; 0 when unknown)."""
    return max(0, before - after) if before is not None and after is not None else 0


def memory_running_out(before: int | None, after: int | None, at_start: int | None) -> bool:
    """Whether the memory left after an iteration (``after`` bytes; ``before`` it, ``at_start`` when
    the run began) is below :data:`MEMORY_GROWTH_FACTOR` times what the iteration took, or below
    :data:`MEMORY_FLOOR` (at most :data:`MEMORY_FLOOR_SHARE` of ``at_start``); False when unknown."""
    if after is None:
        return False
    took = memory_taken(before, after)
    floor = MEMORY_FLOOR if at_start is None else min(MEMORY_FLOOR, MEMORY_FLOOR_SHARE * at_start)
    return after < max(floor, MEMORY_GROWTH_FACTOR * took)


@dataclass(frozen=True)
class BendersResult:
    """Outcome of :meth:`BendersEngine.run`."""

    status: str  # "optimal" (gap reached), "iteration_limit", "time_limit", "stalled", "no_progress",
    # "numerical_trouble", "memory_limit"
    lower_bound: float
    upper_bound: float
    rel_gap: float
    iterations: int
    history: tuple[BendersIteration, ...]
    best_payload: Any
    n_master_components: int
    master_component_sizes: tuple[int, ...]
    total_cuts: int
    details: dict[str, Any] = field(default_factory=dict)


def _pass_model(h: Any, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, rows: RowBlock) -> None:
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = int(cost.size)
    lp.num_row_ = rows.n_rows
    lp.col_cost_ = np.ascontiguousarray(cost, dtype=float)
    lp.col_lower_ = np.ascontiguousarray(lower, dtype=float)
    lp.col_upper_ = np.ascontiguousarray(upper, dtype=float)
    lp.row_lower_ = np.ascontiguousarray(rows.lower, dtype=float)
    lp.row_upper_ = np.ascontiguousarray(rows.upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = np.ascontiguousarray(rows.starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.ascontiguousarray(rows.index, dtype=np.int32)
    lp.a_matrix_.value_ = np.ascontiguousarray(rows.value, dtype=float)
    if h.passModel(lp) == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected a Benders model (passModel failed)")


def gap_closed(history: Sequence[BendersIteration], window: int) -> float:
    """How much of the absolute gap the last ``window`` iterations closed (lower bound raised plus
    upper bound lowered); infinite, no pace to judge, where either bound was still infinite
    ``window`` iterations ago."""
    then, now = history[-1 - window], history[-1]
    if not (np.isfinite(then.lower) and np.isfinite(then.upper)):
        return INF
    return (now.lower - then.lower) + (then.upper - now.upper)


def pace_window_for(history: Sequence[BendersIteration], window: int, min_seconds: float) -> int:
    """The iterations the pace is judged over: the last ``window``, or more until they span
    ``min_seconds``; 0 when the history is too short for either (no judgement yet)."""
    if window <= 0 or len(history) <= window:
        return 0
    now = history[-1].seconds
    w = window
    while now - history[-1 - w].seconds < min_seconds:
        w += 1
        if w >= len(history):
            return 0
    return w


def too_slow(history: Sequence[BendersIteration], window: int, gap: float, max_iterations: int,
             time_limit: float, min_seconds: float | None = None) -> bool:
    """True when, at the pace of the last ``window`` iterations (at least ``min_seconds`` of them,
    :func:`pace_window_for`: the gap they closed, their mean time), the iterations and seconds
    left could not close the gap down to ``gap``.

    The extrapolation is linear, which overstates what a tailing run will still do, so a run whose
    bounds keep moving is not stopped early by it; one whose bounds have stopped moving (Qiu's
    record BD at eps 10/km: both bounds fixed from iteration 2 on on the 20x25 grid, from
    iteration 8 on Rome) is stopped about ``window`` iterations later instead of running to the
    iteration cap (hours there). A cheap run whose bounds move in bursts is not judged on a
    window of under ``min_seconds`` (``None``: :data:`PACE_MIN_SECONDS`)."""
    w = pace_window_for(history, window, PACE_MIN_SECONDS if min_seconds is None else min_seconds)
    if w == 0:
        return False
    now = history[-1]
    if not np.isfinite(now.upper):
        return False
    need = (now.upper - now.lower) - gap * abs(now.upper)
    closed = gap_closed(history, w)
    if need <= 0 or not np.isfinite(closed):
        return False
    left = float(max_iterations - len(history))
    per_iteration = (now.seconds - history[-1 - w].seconds) / w
    if np.isfinite(time_limit) and per_iteration > 0:
        left = min(left, max(time_limit - now.seconds, 0.0) / per_iteration)
    return closed / w * left < need


class _TimeUp(Exception):
    """A HiGHS solve reached the run's deadline (the iteration it belongs to is abandoned)."""


def _run(h: Any, what: str, deadline: float = INF) -> str:
    """Run HiGHS; on a numerically inconclusive end, retry cold, then with the interior-point solver.

    ``deadline`` (a ``time.perf_counter`` value): HiGHS gets the time left as its own time limit, and
    :class:`_TimeUp` is raised when it is reached (before the solve or during it)."""
    import highspy

    status = ""
    for attempt in range(3):
        left = deadline - time.perf_counter()
        if left <= 0.0:
            raise _TimeUp(what)
        set_time_left(h, left)  # HiGHS's limit counts the object's earlier runs too; inf: none
        if attempt == 0 and h.getOptionValue("solver")[1] != "choose":
            h.setOptionValue("solver", "choose")  # undo a previous fallback before the warm run
        if attempt == 1:
            h.clearSolver()
        elif attempt == 2:
            h.clearSolver()
            h.setOptionValue("solver", "ipm")
        if attempt == 0:
            run_status = h.run()
        else:  # retries run alone: inconclusive ends were seen under concurrent HiGHS runs
            with _RETRY_LOCK:
                run_status = h.run()
        if run_status == highspy.HighsStatus.kError and attempt == 2:
            raise SolverError(f"HiGHS failed on {what} (model status {h.modelStatusToString(h.getModelStatus())})")
        status = h.modelStatusToString(h.getModelStatus())
        if status in ("Optimal", "Infeasible"):
            break
        if status == "Time limit reached":
            raise _TimeUp(what)
        logger.debug("HiGHS ended %s with %s (attempt %d); retrying", what, status, attempt + 1)
    if status == "Optimal" and not h.getSolution().dual_valid:
        raise SolverError(f"HiGHS reported {what} optimal without a valid dual solution")
    return status


def _dual_bound(pi: np.ndarray, lower: np.ndarray, upper: np.ndarray, AT: sp.csr_matrix, cost: np.ndarray,
                col_upper: np.ndarray) -> tuple[np.ndarray, float]:
    """Clip ``pi`` to valid signs; return it and the bound term ``sum_j min(0, r_j) u_j``."""
    pi = signed_duals(pi, lower, upper)
    reduced = cost - AT @ pi
    return pi, float(np.sum(np.minimum(reduced, 0.0) * col_upper))


def _rescaled_duals(h: Any, k: int, deadline: float) -> np.ndarray | None:
    """Row duals of the LP that ``h`` holds, re-solved from ``h``'s basis by a new HiGHS with the
    costs times 2^k (``user_objective_scale``), so with a dual tolerance k halvings finer; ``None``
    when that solve does not end optimal with valid duals or the deadline has passed. ``h`` itself
    is not touched: changing its scale in place and back left the 20x25 grid's master "Not Set" for
    every later solve, retries included (stop 42)."""
    import highspy

    left = deadline - time.perf_counter()
    if left <= 0.0:
        return None
    h2 = new_highs({"user_objective_scale": int(k)}, tight=True)
    if h2.passModel(h.getLp()) == highspy.HighsStatus.kError:
        return None
    h2.setBasis(h.getBasis())
    set_time_left(h2, left)
    if (h2.run() == highspy.HighsStatus.kError or h2.modelStatusToString(h2.getModelStatus()) != "Optimal"
            or not h2.getSolution().dual_valid):
        return None
    return np.asarray(h2.getSolution().row_dual, dtype=float)


def _recertify(owner: Any, best: Any, score: float, objective: float,
               from_duals: Callable[[np.ndarray], tuple[Any, float]]) -> Any:
    """``best`` (a certificate or a cut, worth ``score``), or what ``from_duals`` makes of the duals
    of ``owner.h``'s LP re-solved with the costs scaled by each of :data:`RECERTIFY_SCALES` in turn
    (:func:`_rescaled_duals`) where that is worth more, while the score falls short of HiGHS's
    ``objective`` by more than ``owner.recertify_shortfall`` (relative); ``owner``: a master
    component or a block (its ``h``, ``deadline`` and ``recertify_solves`` count)."""
    for k in RECERTIFY_SCALES:
        if score >= objective - owner.recertify_shortfall * abs(objective):
            break
        owner.recertify_solves += 1
        pi = _rescaled_duals(owner.h, k, owner.deadline)
        if pi is not None:
            candidate, value = from_duals(pi)
            if value > score:
                best, score = candidate, value
    return best


def _cut_at(alpha: float, vars_: np.ndarray, beta: np.ndarray, x: np.ndarray) -> float:
    """A cut's left side ``alpha + beta' x[vars_]`` at the master point ``x``."""
    return alpha + (float(beta @ x[vars_]) if vars_.size else 0.0)


def _drop_tiny(idx: np.ndarray, coef: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The linear term ``sum_v coef_v x_v`` (``x_v`` in ``[0, box_v]``) without its coefficients below
    :data:`CUT_CLEAN_BELOW`: the kept ``(idx, coef)`` and the dropped terms' least and largest value
    over the box, which the caller moves into the cut's constant so the cut stays valid."""
    small = np.abs(coef) < CUT_CLEAN_BELOW
    if not np.any(small):
        return idx, coef, 0.0, 0.0
    dropped, b = coef[small], box[small]
    return (idx[~small], coef[~small], float(np.sum(np.minimum(dropped, 0.0) * b)),
            float(np.sum(np.maximum(dropped, 0.0) * b)))


class _Block:
    """A block's HiGHS models (optimality and, lazily, phase-1) and cut generation."""

    def __init__(self, spec: SubproblemSpec, x_upper: np.ndarray):
        self.spec = spec
        self.x_upper = x_upper
        n_y = spec.cost.size
        self.n_y = n_y
        self.A = spec.rows.matrix(n_y)
        self.AT = self.A.T.tocsr()
        self.h = new_highs(tight=True)
        _pass_model(self.h, spec.cost, np.zeros(n_y), spec.upper, spec.rows)
        self.h1: Any = None
        self.h2: Any = None
        self.h3: Any = None  # the elastic LP whose widest constant rows may be freed
        self.freed_ratio: float | None = None  # the ratio above which rows were freed last time
        self.big_m = 1e4 * (float(np.abs(spec.cost).sum()) + 1.0)
        self.linked_rows = spec.linked.rows.astype(np.int32)
        self.base_upper = spec.rows.upper.copy()
        self.nonlinked = np.ones(spec.rows.n_rows, dtype=bool)
        self.nonlinked[spec.linked.rows] = False
        self.solve_seconds = 0.0
        self.recertify_solves = 0  # re-solves by :meth:`_recertified_cut`
        self.recertify_shortfall = 1e-7  # set by BendersEngine.run from its gap (RECERTIFY_SHARE)
        self.deadline = INF  # set by BendersEngine.run from its time limit
        if spec.unit_rows is not None and spec.unit_rows.size:
            # column -> position of its unit row (-1 if none)
            pos = np.full(n_y, -1, dtype=np.int64)
            U = self.A[spec.unit_rows]
            for t in range(U.shape[0]):
                pos[U.indices[U.indptr[t] : U.indptr[t + 1]]] = t
            self.unit_col_mask = pos >= 0
            self.unit_row_pos = pos

    @functools.cached_property
    def row_ratio(self) -> np.ndarray:
        """Each row's largest over smallest coefficient (1 for empty rows); only the last fallback
        (:meth:`_freed_elastic`) needs it."""
        absv = np.abs(self.A.data)
        nz = np.diff(self.A.indptr) > 0
        ratio = np.ones(self.A.shape[0])
        if absv.size:
            starts = self.A.indptr[:-1][nz]
            ratio[nz] = np.maximum.reduceat(absv, starts) / np.minimum.reduceat(absv, starts)
        return ratio

    def _linked_upper(self, x: np.ndarray) -> np.ndarray:
        L = self.spec.linked
        return self.base_upper[L.rows] + L.gamma * x[L.var]

    def _cut(self, pi: np.ndarray, upper_now: np.ndarray, cost: np.ndarray, col_upper: np.ndarray, AT: sp.csr_matrix,
             pi_floor: float | None = None) -> tuple[float, np.ndarray, np.ndarray]:
        """Cut ``alpha + beta' x`` from duals ``pi`` (linked rows first clipped to ``[pi_floor, 0]``)."""
        lower = self.spec.rows.lower
        if pi_floor is not None:
            lr = self.spec.linked.rows
            pi = pi.copy()
            pi[lr] = np.clip(pi[lr], pi_floor, 0.0)
        if self.spec.unit_rows is not None and self.spec.unit_rows.size:
            pi = signed_duals(pi, lower, upper_now)
            reduced = cost - AT @ pi
            ur = self.spec.unit_rows
            neg = np.maximum(-reduced, 0.0)
            # per unit row: the largest negative reduced cost among its columns
            shift = np.zeros(ur.size)
            np.maximum.at(shift, self.unit_row_pos[self.unit_col_mask], neg[self.unit_col_mask])
            pi[ur] -= shift
        pi, bound_term = _dual_bound(pi, lower, upper_now, AT, cost, col_upper)
        alpha = bound_term
        pos = pi > 0
        alpha += float(np.sum(pi[pos] * lower[pos]))
        neg = (pi < 0) & self.nonlinked
        alpha += float(np.sum(pi[neg] * self.base_upper[neg]))
        L = self.spec.linked
        pl = pi[L.rows]
        alpha += float(np.sum(pl * self.base_upper[L.rows]))
        coef = pl * L.gamma
        nz = coef != 0
        vars_, inv = np.unique(L.var[nz], return_inverse=True)
        beta = np.bincount(inv, weights=coef[nz], minlength=vars_.size) if vars_.size else np.zeros(0)
        if beta.size:
            # safe cleaning: drop the coefficients HiGHS would drop itself (below its
            # small_matrix_value), replacing beta_v x_v by its minimum over the variable's box
            # [lx, ux] (here lx = 0), so the cut stays valid
            vars_, beta, least, _ = _drop_tiny(vars_, beta, self.x_upper[vars_])
            alpha += least
        return alpha, vars_.astype(np.int64), beta

    def _recertified_cut(self, cut: tuple[float, np.ndarray, np.ndarray], x: np.ndarray, upper_now: np.ndarray,
                         objective: float) -> tuple[float, np.ndarray, np.ndarray]:
        """``cut``, or a cut that is higher at ``x``, from warm re-solves with the costs scaled
        (:data:`RECERTIFY_SCALES`, :func:`_rescaled_duals`) while the cut at ``x`` falls short of
        HiGHS's ``objective`` by more than ``recertify_shortfall`` (relative), as the master's certificate
        (:meth:`_MasterComponent._recertified`)."""

        def at_x(c: tuple[float, np.ndarray, np.ndarray]) -> float:
            return _cut_at(*c, x)

        def from_duals(pi: np.ndarray) -> tuple[tuple[float, np.ndarray, np.ndarray], float]:
            c = self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT)
            return c, at_x(c)

        return _recertify(self, cut, at_x(cut), objective, from_duals)

    def solve(self, x: np.ndarray) -> dict[str, Any]:
        t0 = time.perf_counter()
        L = self.spec.linked
        ub = self._linked_upper(x)
        n_l = self.linked_rows.size
        lo = np.full(n_l, -INF)
        if n_l:
            self.h.changeRowsBounds(n_l, self.linked_rows, lo, ub)
        status = _run(self.h, f"Benders block {self.spec.name}", self.deadline)
        upper_now = self.base_upper.copy()
        upper_now[L.rows] = ub
        if status == "Optimal":
            sol = self.h.getSolution()
            y = np.asarray(sol.col_value, dtype=float)
            pi = np.asarray(sol.row_dual, dtype=float)
            value = float(self.spec.cost @ y)
            alpha, vars_, beta = self._recertified_cut(
                self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT), x, upper_now,
                float(self.h.getInfo().objective_function_value))
            self.solve_seconds += time.perf_counter() - t0
            return {"feasible": True, "y": y, "value": value, "alpha": alpha, "vars": vars_, "beta": beta}
        # phase 1: min sum of slacks on the linked rows
        if self.h1 is None:
            self.h1 = self._build_phase1()
        if n_l:
            self.h1.changeRowsBounds(n_l, self.linked_rows, lo, ub)
        status1 = _run(self.h1, f"phase-1 of Benders block {self.spec.name}", self.deadline)
        violation = 0.0
        y1: np.ndarray | None = None  # the phase-1 solution: a best-effort y for an upper bound
        if status1 == "Optimal":
            sol = self.h1.getSolution()
            y1 = np.clip(np.asarray(sol.col_value, dtype=float)[: self.n_y], 0.0, self.spec.upper)
            pi = np.asarray(sol.row_dual, dtype=float)
            cost1 = np.zeros(self.n_y)
            alpha, vars_, beta = self._cut(pi, upper_now, cost1, self.spec.upper, self.AT, pi_floor=-1.0)
            violation = _cut_at(alpha, vars_, beta, x)
            scale = abs(alpha) + (float(np.abs(beta) @ np.abs(x[vars_])) if vars_.size else 0.0)
        else:
            scale = 0.0
        # the Farkas value is relative to the size of its terms (x^ may live at 1e-9 scales)
        if violation > 1e-9 * scale and violation > 0:
            self.solve_seconds += time.perf_counter() - t0
            return {"feasible": False, "alpha": alpha, "vars": vars_, "beta": beta, "violation": violation, "y": y1}
        # Infeasible only within the solvers' tolerances (x^ sits on the feasibility boundary):
        # first re-solve with the linked bounds relaxed by a hair (the cut below still uses the
        # exact bounds, so it stays valid; the caller repairs the solution exactly).
        for relax in (0.0, 1e-10, 1e-8):
            self.h.changeRowsBounds(n_l, self.linked_rows, lo, ub + relax * np.maximum(np.abs(ub), 1e-3))
            if relax == 0.0:  # HiGHS's "infeasible" may be a presolve artefact: cold, without presolve
                self.h.clearSolver()
                self.h.setOptionValue("presolve", "off")
            try:
                st = _run(self.h, f"relaxed Benders block {self.spec.name}", self.deadline)
            finally:
                self.h.setOptionValue("presolve", "choose")
            if st == "Optimal":
                sol = self.h.getSolution()
                y = np.asarray(sol.col_value, dtype=float)
                pi = np.asarray(sol.row_dual, dtype=float)
                alpha, vars_, beta = self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT)
                self.solve_seconds += time.perf_counter() - t0
                return {"feasible": True, "y": y, "value": float(self.spec.cost @ y), "alpha": alpha, "vars": vars_,
                        "beta": beta}
        # then the elastic block (slack on the linked rows at a large price): its solution is
        # feasible up to tolerance (the caller repairs exactly) and its duals give a valid
        # optimality cut; once it needed its widest rows freed, it goes there first
        res = self._freed_elastic(upper_now) if self.freed_ratio is not None else None
        failure = ""
        if res is None:
            if self.h2 is None:
                self.h2 = self._build_phase1(elastic=True)
            if n_l:
                self.h2.changeRowsBounds(n_l, self.linked_rows, lo, ub)
            try:
                status2 = _run(self.h2, f"elastic Benders block {self.spec.name}", self.deadline)
                if status2 != "Optimal":
                    raise SolverError(f"elastic LP of block {self.spec.name} ended with status {status2}")
                res = self._elastic_result(self.h2, upper_now)
            except SolverError as exc:
                failure = str(exc)
                res = self._freed_elastic(upper_now)
        self.solve_seconds += time.perf_counter() - t0
        # every fallback failed: no cut from this block this time; the phase-1 solution still
        # serves the upper bound
        return res if res is not None else {"feasible": False, "failed": failure, "y": y1}

    def _elastic_result(self, h: Any, upper_now: np.ndarray, freed: np.ndarray | None = None) -> dict[str, Any]:
        """The elastic LP's solution (feasible up to tolerance; the caller repairs it exactly) and
        the optimality cut from its duals (``freed`` rows: dual 0)."""
        sol = h.getSolution()
        y = np.asarray(sol.col_value, dtype=float)[: self.n_y]
        pi = np.asarray(sol.row_dual, dtype=float)
        if freed is not None:
            pi[freed] = 0.0
        alpha, vars_, beta = self._cut(pi, upper_now, self.spec.cost, self.spec.upper, self.AT, pi_floor=-self.big_m)
        return {"feasible": True, "y": y, "value": float(self.spec.cost @ y), "alpha": alpha, "vars": vars_, "beta": beta}

    def _freed_elastic(self, upper_now: np.ndarray) -> dict[str, Any] | None:
        """The elastic LP with its widest constant rows free (``WIDE_ROW_RATIOS``, widest first).

        Freeing rows relaxes the block, so its duals, with 0 on the freed rows, are dual feasible
        for the block itself and give a valid (possibly weaker) cut. ``None`` when no ratio
        helps."""
        first = () if self.freed_ratio is None else (self.freed_ratio,)
        tried: set[int] = {0}  # the freed sets are nested, so their sizes tell them apart
        for ratio in first + tuple(r for r in WIDE_ROW_RATIOS if r != self.freed_ratio):
            freed = self.nonlinked & (self.row_ratio > ratio)
            if int(freed.sum()) in tried:
                continue
            tried.add(int(freed.sum()))
            if self.h3 is None:
                self.h3 = self._build_phase1(elastic=True)
            lower = np.where(freed, -INF, self.spec.rows.lower)
            upper = np.where(freed, INF, upper_now)  # the linked rows at this x (never freed)
            rows = np.arange(lower.size, dtype=np.int32)
            self.h3.changeRowsBounds(rows.size, rows, lower, upper)
            try:
                status = _run(self.h3, f"elastic Benders block {self.spec.name} ({int(freed.sum())} rows freed)",
                              self.deadline)
            except SolverError:
                continue
            if status == "Optimal":
                if self.freed_ratio != ratio:
                    logger.info("elastic LP of Benders block %s solved with its %d rows wider than %g freed",
                                self.spec.name, int(freed.sum()), ratio)
                self.freed_ratio = ratio
                return self._elastic_result(self.h3, upper_now, freed)
        return None

    def _build_phase1(self, elastic: bool = False) -> Any:
        spec = self.spec
        n_l = spec.linked.rows.size
        # add one slack column (coefficient -1) per linked row
        A = self.A
        S = sp.csr_matrix((-np.ones(n_l), (spec.linked.rows, np.arange(n_l))), shape=(spec.rows.n_rows, n_l))
        A1 = sp.hstack([A, S], format="csr")
        rows = RowBlock(A1.indptr, A1.indices, A1.data, spec.rows.lower, spec.rows.upper)
        if elastic:
            cost = np.concatenate([spec.cost, np.full(n_l, self.big_m)])
        else:
            cost = np.concatenate([np.zeros(self.n_y), np.ones(n_l)])
        upper = np.concatenate([spec.upper, np.full(n_l, INF)])
        h = new_highs(tight=True)
        _pass_model(h, cost, np.zeros(cost.size), upper, rows)
        return h


class _MasterComponent:
    """One independent component of the master LP (its x variables and its blocks' thetas)."""

    def __init__(self, master: MasterSpec, xvars: np.ndarray, row_ids: np.ndarray, blocks: list[int],
                 theta_lower: list[float]):
        self.xvars = xvars
        self.blocks = blocks
        self.local = {int(v): i for i, v in enumerate(xvars)}
        self.n_x = xvars.size
        self.theta_col = {b: self.n_x + t for t, b in enumerate(blocks)}
        A = master.rows.matrix(master.n)[row_ids][:, xvars].tocsr() if row_ids.size else sp.csr_matrix((0, xvars.size))
        n_cols = self.n_x + len(blocks)
        A = sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], n_cols))
        rows = RowBlock(A.indptr, A.indices, A.data,
                        master.rows.lower[row_ids] if row_ids.size else np.zeros(0),
                        master.rows.upper[row_ids] if row_ids.size else np.zeros(0))
        cost = np.concatenate([master.cost[xvars], np.ones(len(blocks))])
        lower = np.concatenate([master.lower[xvars], np.asarray(theta_lower, dtype=float)])
        upper = np.concatenate([master.upper[xvars], np.full(len(blocks), INF)])
        self.h = new_highs(tight=True)
        _pass_model(self.h, cost, lower, upper, rows)
        self.n_cuts = 0
        self.recertify_solves = 0  # re-solves by :meth:`_recertified`
        self.recertify_shortfall = 1e-7  # set by BendersEngine.run from its gap (RECERTIFY_SHARE)
        self.deadline = INF  # set by BendersEngine.run from its time limit
        # the LP as passed, for the certified bound (the cuts are kept apart as they come: the base
        # rows, 1.5 M on Rome, are transposed once, not restacked with the cuts every iteration)
        self.AT_base = A.T.tocsr()
        self.cost, self.col_lower, self.col_upper = cost, lower, upper
        self.row_lower, self.row_upper = rows.lower, rows.upper
        self.cut_rows: list[tuple[np.ndarray, np.ndarray]] = []
        self.cut_lower: list[float] = []
        self.cut_upper: list[float] = []

    def add_cut(self, block: int | None, alpha: float, vars_: np.ndarray, beta: np.ndarray,
                violation: float = INF) -> None:
        """Optimality cut ``theta_b - beta' x >= alpha`` or, with ``block`` None, feasibility ``beta' x <= -alpha``.

        ``violation``: by how much the cut cuts off the master's point; a row whose violation HiGHS
        would not see (below :data:`VISIBLE_VIOLATION`) is scaled up until it would, by at most
        :data:`CUT_MAX_UPSCALE` and within :data:`CUT_MAX_COEFFICIENT`."""
        import highspy

        idx = np.fromiter((self.local[int(v)] for v in vars_), dtype=np.int32, count=vars_.size)
        # the row's x part and its constant: beta' x <= -alpha, or -beta' x + theta >= alpha
        vals = np.asarray(beta if block is None else -beta, dtype=float)
        rhs, theta_coef = (-alpha if block is None else alpha), 1.0
        big = float(np.abs(vals).max()) if vals.size else 0.0
        if 0.0 < violation < VISIBLE_VIOLATION:
            # a positive multiple of a valid cut is one: HiGHS judges a row's feasibility in the
            # row's own units (1e-9), and a cut violated by 1.8e-10 left the master where it was
            # (the 8x8 grid at eps 10/km, from iteration 378 on, stop 42)
            up = min(VISIBLE_VIOLATION / violation, CUT_MAX_UPSCALE, CUT_MAX_COEFFICIENT / max(big, 1.0))
            if up > 1.0:
                vals, rhs, theta_coef, big = vals * up, rhs * up, theta_coef * up, big * up
        if big > CUT_MAX_COEFFICIENT and np.isfinite(big):
            # a positive multiple of a valid cut is one: scaled below HiGHS's limit (1e15), and the
            # coefficients that fall below HiGHS's small_matrix_value dropped safely (each term
            # replaced by its extreme over the variable's box); an optimality cut whose theta
            # coefficient would fall below it is left out (theta has no upper bound)
            scale = CUT_MAX_COEFFICIENT / big
            if block is not None and scale < CUT_CLEAN_BELOW:
                logger.info("Benders: a cut with coefficients up to %.3g left out", big)
                return
            vals, rhs, theta_coef = vals * scale, rhs * scale, scale
            idx, vals, least, most = _drop_tiny(idx, vals, self.col_upper[idx])
            rhs -= least if block is None else most
        if block is None:
            lo, up = -INF, rhs
        else:
            idx = np.concatenate([idx, np.array([self.theta_col[block]], dtype=np.int32)])
            vals, lo, up = np.concatenate([vals, [theta_coef]]), rhs, INF
        if self.h.addRows(1, np.array([lo]), np.array([up]), int(idx.size), np.array([0], dtype=np.int32), idx,
                          vals) == highspy.HighsStatus.kError:
            # a row HiGHS refuses (a coefficient of 1e15 or more: Rome at eps 10/km with the in-out
            # separation, stop 41) is left out: the master stays a relaxation, and the rows the
            # certified bound adds up must be the rows HiGHS holds (until stop 41 it recorded them
            # anyway, and the bound's arrays no longer matched HiGHS's duals)
            logger.info("Benders: HiGHS refused a cut (largest coefficient %.3g); left out", float(np.abs(vals).max()))
            return
        self.n_cuts += 1
        self.cut_rows.append((idx, np.asarray(vals, dtype=float)))
        self.cut_lower.append(lo)
        self.cut_upper.append(up)

    def solve(self) -> tuple[float, np.ndarray, dict[int, float]]:
        """Solve; returns the certified lower bound (:meth:`certified_bound`), ``x`` and the thetas."""
        status = _run(self.h, "Benders master", self.deadline)
        if status != "Optimal":
            raise SolverError(f"Benders master component ended with status {status}; the PMO may be infeasible")
        sol = self.h.getSolution()
        v = np.asarray(sol.col_value, dtype=float)
        bound = self.certified_bound(np.asarray(sol.row_dual, dtype=float))
        bound = self._recertified(bound, float(self.h.getInfo().objective_function_value))
        return bound, v[: self.n_x], {b: float(v[c]) for b, c in self.theta_col.items()}

    def _recertified(self, bound: float, objective: float) -> float:
        """``bound``, or a better certificate from warm re-solves with the costs scaled
        (:func:`_recertify`) while it falls short of HiGHS's ``objective``."""

        def from_duals(pi: np.ndarray) -> tuple[float, float]:
            b = self.certified_bound(pi)
            return b, b

        return _recertify(self, bound, bound, objective, from_duals)

    def certified_bound(self, pi: np.ndarray) -> float:
        """A lower bound on this component's LP from any row duals ``pi``, by weak duality.

        HiGHS's objective is not one: on Rome's record BD at eps 10/km (1.5 M master rows spanning
        1 to e^20) HiGHS reported "optimal" 0.0131 for a component whose LP has a solution below
        0.0126 (the optimal mechanism's boundary rows and block values), and the run's lower bound
        rose 8 % above the optimum. Wrong-signed duals are set to 0, and the duals of a block's
        optimality cuts are scaled down where they would make its theta's reduced cost negative
        (theta has no upper bound); then :func:`securelp.solvers.lp.highs.dual_bound`.
        """
        ncut, nb = len(self.cut_lower), self.row_lower.size
        ptr = np.concatenate([[0], np.cumsum([i.size for i, _ in self.cut_rows], dtype=np.int64)])
        CT = sp.csr_matrix((np.concatenate([v for _, v in self.cut_rows]) if ncut else np.zeros(0),
                            np.concatenate([i for i, _ in self.cut_rows]) if ncut else np.zeros(0, dtype=np.int32),
                            ptr), shape=(ncut, self.cost.size)).T.tocsr()
        AT = LinearOperator((self.cost.size, nb + ncut), dtype=float,
                            matvec=lambda p: self.AT_base @ p[:nb] + CT @ p[nb:])  # [A; cuts]'
        lower = np.concatenate([self.row_lower, np.asarray(self.cut_lower, dtype=float)])
        upper = np.concatenate([self.row_upper, np.asarray(self.cut_upper, dtype=float)])
        pi = signed_duals(pi, lower, upper)
        reduced = self.cost - AT @ pi
        for c in self.theta_col.values():  # theta in [theta_lower, inf): its reduced cost must be >= 0
            if reduced[c] < 0.0:
                rows = nb + CT.indices[CT.indptr[c] : CT.indptr[c + 1]]  # its optimality cuts (coefficient 1)
                pi[rows] *= (1.0 - 1e-12) * self.cost[c] / (self.cost[c] - reduced[c])  # a hair below, for rounding
        return dual_bound(AT, self.cost, self.col_lower, self.col_upper, lower, upper, pi)


class BendersEngine:
    """Benders decomposition of a block-ladder LP (see the module docstring).

    Parameters
    ----------
    master, blocks:
        The problem.
    upper_bound_fn:
        ``f(x, ys) -> (objective, payload)`` turning a master solution and the blocks'
        optimal solutions into a feasible, verified solution; called whenever every block
        is feasible. It may raise to signal a failed verification.
    repair_upper_bound_fn:
        Optional ``f(x, ys, feasible) -> (objective, payload)`` for the other iterations: ``ys``
        holds the feasible blocks' solutions and, for an infeasible block (``feasible[b]`` False),
        its phase-1 solution (``None`` when there is none); the function must repair them into a
        feasible solution. Without it no upper bound is found until an iteration has every block
        feasible.
    workers:
        Threads for the blocks.
    """

    def __init__(self, master: MasterSpec, blocks: Sequence[SubproblemSpec], *,
                 upper_bound_fn: Callable[[np.ndarray, list[np.ndarray]], tuple[float, Any]],
                 repair_upper_bound_fn: Callable[[np.ndarray, list[np.ndarray | None], list[bool]], tuple[float, Any]]
                 | None = None,
                 workers: int = 2):
        self.master = master
        self.specs = list(blocks)
        self.upper_bound_fn = upper_bound_fn
        self.repair_upper_bound_fn = repair_upper_bound_fn
        self.workers = max(1, int(workers))

    def _components(self) -> list[tuple[np.ndarray, np.ndarray, list[int]]]:
        """The master's independent components (Property 3.1): its variables joined by a master row
        or by a block that links them, as ``(variables, master rows, blocks)``, ordered by their
        smallest variable. One sparse graph (each row and each block a star on its variables) and
        its connected components: a union-find row by row in Python took minutes on a master of
        125 M rows (the text dataset's record BD, stop 34)."""
        from scipy.sparse.csgraph import connected_components

        n = self.master.n
        if n == 0:
            return []
        R = self.master.rows
        starts = np.asarray(R.starts, dtype=np.int64)
        index = np.asarray(R.index, dtype=np.int64)
        lens = np.diff(starts)
        src = [index[np.repeat(starts[:-1], lens)]]  # each row's first variable ...
        dst = [index]  # ... to each of its variables
        for spec in self.specs:
            v = np.unique(spec.linked.var)
            if v.size:
                src.append(np.full(v.size, v[0], dtype=np.int64))
                dst.append(v.astype(np.int64))
        a, b = np.concatenate(src), np.concatenate(dst)
        g = sp.csr_matrix((np.ones(a.size, dtype=np.int8), (a, b)), shape=(n, n))
        _, label = connected_components(g, directed=False)
        row_label = np.full(lens.size, -1, dtype=np.int64)
        row_label[lens > 0] = label[index[starts[:-1][lens > 0]]]
        block_label = [int(label[spec.linked.var[0]]) if spec.linked.var.size else -1 for spec in self.specs]
        order = np.argsort(label, kind="stable")  # members of each label in increasing order
        bounds = np.searchsorted(label[order], np.arange(label.max() + 2))
        comps = [(order[bounds[c]:bounds[c + 1]], c) for c in range(bounds.size - 1) if bounds[c + 1] > bounds[c]]
        comps.sort(key=lambda mc: int(mc[0][0]))
        return [(members, np.flatnonzero(row_label == c), [bi for bi, bl in enumerate(block_label) if bl == c])
                for members, c in comps]

    def run(self, *, gap: float = 1e-4, max_iterations: int = 200, time_limit: float = float("inf"),
            progress: Callable[[BendersIteration], None] | None = None,
            pace_window: int = PACE_WINDOW, incumbent: tuple[float, Any] | None = None,
            core: np.ndarray | None = None, in_out: float = 0.5) -> BendersResult:
        """Iterate until ``(UB - LB) / |UB| <= gap``, the iteration cap, the time limit, no new cut
        (``stalled``), or a pace too slow for the budget (``no_progress``, see :func:`too_slow`;
        ``pace_window`` 0: never). ``incumbent``: ``(value, payload)`` of a solution known before the
        first iteration (the caller's, already verified); it is the upper bound until a better one.

        ``core``: a master point at which every block is feasible (the ``x`` of a known feasible
        solution). With it the blocks are solved at ``in_out * x + (1 - in_out) * core`` instead of
        at the master's ``x`` (the in-out separation of Ben-Ameur and Neto 2007, as in Fischetti,
        Ljubic and Sinnl 2017), and a cut enters only where it cuts off the master's ``(x, theta)``:
        a feasibility cut found there always does (the cut holds at the core and fails at the
        point between). When no cut enters, or only weak ones (:data:`IN_OUT_WEAK_SHARE`), the core
        moves to that point and the blocks are solved at ``x`` itself, as without a core (a block
        slow there is given up, :data:`AT_X_SLOWEST_FACTOR`). Cuts from points nearer the feasible
        region are deeper, and the master's ``x`` stops zig-zagging across the feasibility boundary."""
        t0 = time.perf_counter()
        if np.any(self.master.lower != 0) or not np.all(np.isfinite(self.master.upper)):
            raise SolverError("the Benders engine needs master variables in [0, finite upper]")
        # the time limit also holds inside an iteration: every HiGHS solve gets the time left (an
        # iteration of Rome's record BD takes about 110 s)
        deadline = t0 + time_limit
        blocks = [_Block(s, self.master.upper) for s in self.specs]
        x_all = np.zeros(self.master.n)
        # blocks with no link to the master are solved once
        const = 0.0
        fixed_y: dict[int, np.ndarray] = {}
        linked_ids = []
        for b, blk in enumerate(blocks):
            if blk.spec.linked.var.size == 0:
                res = blk.solve(x_all)  # without the deadline: every solution needs them
                if not res["feasible"]:
                    raise SolverError(f"block {blk.spec.name} is infeasible on its own; the PMO is infeasible")
                const += res["value"]
                fixed_y[b] = res["y"]
            else:
                linked_ids.append(b)
                blk.deadline = deadline
                blk.recertify_shortfall = RECERTIFY_SHARE * gap
        comps = []
        for xvars, row_ids, bl in self._components():
            bl = [b for b in bl if b in set(linked_ids)]
            comps.append(_MasterComponent(self.master, xvars, row_ids, bl, [blocks[b].spec.theta_lower for b in bl]))
            comps[-1].deadline = deadline
            comps[-1].recertify_shortfall = RECERTIFY_SHARE * gap
        comp_of_block = {b: ci for ci, c in enumerate(comps) for b in c.blocks}
        logger.info("Benders: %d master components (sizes %s), %d linked blocks, %d independent",
                    len(comps), sorted((c.n_x for c in comps), reverse=True)[:10], len(linked_ids), len(fixed_y))
        history: list[BendersIteration] = []
        lower, upper = -INF, INF
        best_payload: Any = None
        if incumbent is not None:
            upper, best_payload = incumbent
        status = "iteration_limit"
        total_cuts = 0
        master_seconds = 0.0
        ub_seconds = 0.0
        error_text = ""
        failed_solves = 0
        pool = ThreadPoolExecutor(max_workers=self.workers) if self.workers > 1 else None
        patience_from = 0  # the in-out separation's patience counts from this iteration

        def repaired(by_id: dict[int, dict[str, Any]], x: np.ndarray) -> tuple[float, Any]:
            """The repair function on the master point ``x`` the blocks were solved at and their
            solutions (``by_id``: this iteration's results of the linked blocks, empty when it was
            cut short)."""
            ys = [fixed_y[b] if b in fixed_y else by_id.get(b, {}).get("y") for b in range(len(blocks))]
            feasible = [b in fixed_y or bool(by_id.get(b, {}).get("feasible")) for b in range(len(blocks))]
            return self.repair_upper_bound_fn(x.copy(), ys, feasible)

        slowest = [0.0]  # the longest block solve so far (a solve at the master's point is capped by it)

        def solve_one(b: int, x: np.ndarray, cap: float | None) -> dict[str, Any]:
            blk = blocks[b]
            t = time.perf_counter()
            if cap is not None:
                blk.deadline = min(deadline, t + cap)
            try:
                res = blk.solve(x)
            except _TimeUp:
                if cap is None or time.perf_counter() >= deadline:
                    raise
                logger.info("Benders: block %s at the master's point given up after %.0f s", blk.spec.name, cap)
                return {"feasible": False, "failed": f"block {blk.spec.name} given up after {cap:.0f} s",
                        "capped": True, "y": None}
            finally:
                blk.deadline = deadline
            slowest[0] = max(slowest[0], time.perf_counter() - t)
            return res

        def solve_blocks(x: np.ndarray, capped: bool = False) -> list[dict[str, Any]]:
            cap = max(AT_X_MIN_SECONDS, AT_X_SLOWEST_FACTOR * slowest[0]) if capped else None
            if pool is not None:
                return list(pool.map(lambda b: solve_one(b, x, cap), linked_ids))
            return [solve_one(b, x, cap) for b in linked_ids]

        cut_gain = [0.0]  # what the last add_cuts' optimality cuts cut off the thetas by, in all

        def add_cuts(it: int, results: list[dict[str, Any]], thetas: dict[int, float]) -> tuple[int, int, int]:
            """Add the cuts of ``results`` that cut off the master's ``(x, theta)``; returns the
            numbers of optimality cuts, feasibility cuts and failed blocks (``cut_gain``: the sum of
            the optimality cuts' violations)."""
            nonlocal error_text
            n_opt = n_feas = n_failed = 0
            cut_gain[0] = 0.0
            for b, res in zip(linked_ids, results):
                comp = comps[comp_of_block[b]]
                if res.get("failed"):
                    n_failed += 1
                    error_text = res["failed"]
                    (logger.info if res.get("capped") else logger.warning)(
                        "Benders iteration %d: no cut from block %s: %s", it, blocks[b].spec.name, res["failed"])
                    continue
                cut_at_x = _cut_at(res["alpha"], res["vars"], res["beta"], x_all)
                if res["feasible"]:
                    if cut_at_x > thetas[b] + 1e-12 + 1e-9 * abs(cut_at_x):
                        comp.add_cut(b, res["alpha"], res["vars"], res["beta"], violation=cut_at_x - thetas[b])
                        cut_gain[0] += cut_at_x - thetas[b]
                        n_opt += 1
                elif core is None or cut_at_x > 0.0:
                    comp.add_cut(None, res["alpha"], res["vars"], res["beta"], violation=cut_at_x)
                    n_feas += 1
            return n_opt, n_feas, n_failed

        def record(rec: BendersIteration) -> None:
            history.append(rec)
            if progress is not None:
                progress(rec)

        memory_at_start = memory_before = available_memory()
        try:
            for it in range(1, max_iterations + 1):
                tm = time.perf_counter()
                lb_it = const
                thetas: dict[int, float] = {}
                try:
                    for comp in comps:
                        obj, xv, th = comp.solve()
                        lb_it += obj
                        x_all[comp.xvars] = xv
                        thetas.update(th)
                    master_seconds += time.perf_counter() - tm
                    lower = max(lower, lb_it)
                    # in-out: between the master's point and the core, unless the lower bound has not
                    # risen for IN_OUT_PATIENCE iterations: then at the master's point (a converged
                    # master's point gives the upper bound that closes the gap)
                    lower_then = history[-IN_OUT_PATIENCE].lower if len(history) >= IN_OUT_PATIENCE else -INF
                    stuck = lower <= lower_then + 1e-12 * abs(lower) and len(history) >= patience_from + IN_OUT_PATIENCE
                    x_sep = None if core is None else in_out * x_all + (1.0 - in_out) * core
                    x_eval = x_all if x_sep is None or stuck else x_sep
                    try:
                        results = solve_blocks(x_eval)
                    except SolverError as exc:
                        if x_sep is None or x_eval is x_sep:
                            raise
                        # HiGHS failed at the master's point (the blocks' feasibility boundary):
                        # between it and the core instead, and the master's point is not tried
                        # again for IN_OUT_PATIENCE iterations (each failure takes HiGHS's retries:
                        # 3 minutes on the 20x25 grid at eps 10/km)
                        logger.info("Benders iteration %d: at the master's point %s; between it and the core", it, exc)
                        patience_from = len(history)
                        x_eval = x_sep
                        results = solve_blocks(x_eval)
                except SolverError as exc:
                    # numerical trouble: stop, keeping the bounds (and best verified solution) so far
                    logger.warning("Benders stopped at iteration %d: %s", it, exc)
                    status = "numerical_trouble"
                    error_text = str(exc)
                    break
                except _TimeUp as exc:
                    # the time limit inside the iteration: the bounds so far stand (a lower bound from
                    # this iteration's master counts); without any upper bound yet, the master's x is
                    # repaired once with every record of the blocks on its cheapest output
                    logger.info("Benders: time limit reached at iteration %d (in %s)", it, exc)
                    status = "time_limit"
                    if not np.isfinite(upper) and self.repair_upper_bound_fn is not None:
                        tu = time.perf_counter()
                        upper, best_payload = repaired({}, x_all)
                        ub_seconds += time.perf_counter() - tu
                    record(BendersIteration(it, lower, upper, time.perf_counter() - t0, 0, 0, 0))
                    break
                n_opt, n_feas, n_failed = add_cuts(it, results, thetas)
                core_moved = False
                sep_results = None  # the solutions at the point between, when the master's point follows
                weak = (n_feas == 0 and np.isfinite(upper) and np.isfinite(lower)
                        and cut_gain[0] < IN_OUT_WEAK_SHARE * (upper - lower))
                if x_sep is not None and (n_opt + n_feas == 0 or weak) and x_eval is x_sep:
                    # nothing (or only weak cuts) cuts off the master's point: the core moves to where
                    # the blocks were solved, and they are solved at the master's point itself
                    core, core_moved = x_sep, True
                    try:
                        # (where it failed lately only the core moves)
                        at_x = solve_blocks(x_all, capped=True) if len(history) >= patience_from else None
                        gave_up = at_x is not None and any(r.get("capped") for r in at_x)
                        if gave_up:
                            patience_from = len(history) + IN_OUT_PATIENCE
                    except SolverError as exc:
                        # HiGHS failed at the master's point: the next iteration separates between
                        # it and the moved core (the master is unchanged, the point nearer to it)
                        logger.info("Benders iteration %d: at the master's point %s", it, exc)
                        patience_from = len(history) + IN_OUT_PATIENCE
                    except _TimeUp as exc:
                        logger.info("Benders: time limit reached at iteration %d (in %s)", it, exc)
                        status = "time_limit"
                        record(BendersIteration(it, lower, upper, time.perf_counter() - t0, 0, 0, 0))
                        break
                    else:
                        if at_x is not None:
                            n_opt0, n_feas0, sep_results = n_opt, n_feas, results
                            x_eval, results = x_all, at_x
                            n_opt, n_feas, n_failed = add_cuts(it, results, thetas)
                            n_opt, n_feas = n_opt + n_opt0, n_feas + n_feas0
                            if n_opt + n_feas == 0 and gave_up:
                                # a block given up at the master's point and no cut from the others:
                                # the next iteration separates between it and the moved core (the
                                # upper bound comes from the solutions there)
                                x_eval, results = x_sep, sep_results
                total_cuts += n_opt + n_feas
                failed_solves += n_failed
                # upper bounds: from the blocks' solutions where they were solved, and from those at
                # the point between when the blocks were then solved at the master's point too (all
                # feasible there, their assembly is a solution)
                points = [(x_eval, results)]
                if x_eval is x_all and sep_results is not None and x_sep is not None:
                    points.append((x_sep, sep_results))
                candidates: list[tuple[float, Any]] = []
                tu = time.perf_counter()
                for xp, res in points:
                    by_id = dict(zip(linked_ids, res))
                    if all(r["feasible"] for r in res):
                        ys = [fixed_y[b] if b in fixed_y else by_id[b]["y"] for b in range(len(blocks))]
                        candidates.append(self.upper_bound_fn(xp.copy(), ys))
                    elif self.repair_upper_bound_fn is not None:
                        candidates.append(repaired(by_id, xp))
                if x_eval is not x_all and self.repair_upper_bound_fn is not None:
                    # the blocks were solved between the master's point and the core: the master's
                    # own point, repaired without block solutions, is often better (at large eps d
                    # every block record on its cheapest output is near-optimal)
                    candidates.append(repaired({}, x_all))
                ub_seconds += time.perf_counter() - tu
                for ub_val, payload in candidates:
                    if ub_val < upper:
                        upper, best_payload = ub_val, payload
                elapsed = time.perf_counter() - t0
                record(BendersIteration(it, lower, upper, elapsed, n_opt, n_feas, n_failed))
                rel = (upper - lower) / max(abs(upper), 1e-300) if np.isfinite(upper) else INF
                if rel <= gap:
                    status = "optimal"
                    break
                if n_opt + n_feas == 0 and not (core_moved and x_eval is x_sep):
                    status = "numerical_trouble" if n_failed else "stalled"
                    break
                if elapsed > time_limit:
                    status = "time_limit"
                    break
                memory_after = available_memory()
                if memory_running_out(memory_before, memory_after, memory_at_start):
                    logger.warning("Benders: stopping at iteration %d: %.1f GiB of memory left, and the iteration "
                                   "took %.1f GiB", it, memory_after / 2**30,
                                   memory_taken(memory_before, memory_after) / 2**30)
                    status = "memory_limit"
                    break
                memory_before = memory_after
                if too_slow(history, pace_window, gap, max_iterations, time_limit):
                    w = pace_window_for(history, pace_window, PACE_MIN_SECONDS)  # what too_slow judged
                    logger.info("Benders: the last %d iterations closed %.3g of the gap %.3g; at that pace "
                                "the budget left would not reach the target", w, gap_closed(history, w), upper - lower)
                    status = "no_progress"
                    break
        except BaseException:
            # an interrupt (or an error) while blocks are solved: do not wait for their HiGHS calls
            # (up to about a minute each on Rome); the CLI ends the process if they hold its exit
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
                pool = None
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        rel_gap = (upper - lower) / max(abs(upper), 1e-300) if np.isfinite(upper) else INF
        return BendersResult(
            status=status, lower_bound=lower, upper_bound=upper, rel_gap=rel_gap, iterations=len(history),
            history=tuple(history), best_payload=best_payload, n_master_components=len(comps),
            master_component_sizes=tuple(sorted((int(c.n_x) for c in comps), reverse=True)), total_cuts=total_cuts,
            details={"master_seconds": master_seconds, "block_seconds": sum(b.solve_seconds for b in blocks),
                     "upper_bound_seconds": ub_seconds, "n_blocks": len(blocks), "n_independent_blocks": len(fixed_y),
                     "failed_block_solves": failed_solves, "error": error_text,
                     # copies re-solved with scaled costs for a better certificate or cut (_recertify)
                     "recertify_solves": sum(c.recertify_solves for c in comps) + sum(b.recertify_solves for b in blocks)},
        )
