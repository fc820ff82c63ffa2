"""The privacy-preserving mechanism optimisation (PMO) LP and its direct solution.

Qiu, "Enhancing Scalability of Metric Differential Privacy via Secret Dataset
Partitioning and Benders Decomposition", Eq. 4-7: with records ``i`` (prior ``p_i``),
outputs ``k`` and loss ``c_ik``,

    min   sum_i p_i sum_k c_ik z_ik                                   (Eq. 4)
    s.t.  z_ik - exp(eps d_ij) z_jk <= 0   for every ordered neighbour pair (d_ij <= eta), every k   (Eq. 5)
          sum_k z_ik = 1                   for every record i                                        (Eq. 6)
          z_ik >= 0                                                                                 (Eq. 7)

Loss: ``c_ik = d(x_i, y_k)`` (default, outputs ``y_k`` are records) or Qiu's travel-cost
loss (Eq. 48), which we read as the mean, over ``T`` random destinations ``t``, of the
travel-cost estimation error ``|d(x_i, t) - d(y_k, t)|``.

Exactness. An LP solver returns a vertex up to its feasibility tolerance; we never
return that raw. :func:`repair_mechanism` turns it into a matrix that satisfies the
constraints up to a relative 1e-13 (``_RATIO_SLACK``): (1) clip negatives to 0; (2) the *upward
closure* ``z_jk <- max(z_jk, z_ik / exp(eps d_ij))`` over the neighbour graph until no entry
changes (so every ratio holds); (3) divide each row by its sum, and repeat from (2) until no
row sum was off by more than 5e-14 (then no ratio moved by more than 1e-13); (4) if that did
not happen within :data:`REPAIR_MAX_ROUNDS` rounds, or the rounds stopped converging, or the
caller's deadline passed, mix with an exactly private mechanism: a record-independent
distribution ``u`` over the outputs, ``(1 - lam) z + lam u``, with ``u`` weighted by each
output's largest ratio error from step (3) and the ``lam`` that absorbs every one of them (a
constant mechanism meets the mDP row of output ``k`` with slack ``(exp(eps d) - 1) u_k``), or,
where the problem knows its outputs and costs, the exponential mechanism (Qiu Eq. 47) with the
``lam`` its slack on the broken rows needs; the mix of lower loss is kept. The result is then
verified (:mod:`securelp.solvers.mdp.verify`); its loss (not the solver's objective) is the reported
objective and upper bound.
Implied constraints (:func:`securelp.solvers.mdp.graph.essential_edges`) are left out of the LP
(same feasible set); the verifier checks all pairs.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError, ResourceError, SolverError, VerificationError
from securelp.solvers.lp.highs import dual_bound, new_highs
from securelp.solvers.mdp.datasets import SecretDataset
from securelp.solvers.mdp.graph import NeighbourGraph, build_graph, essential_edges
from securelp.solvers.mdp.verify import VerificationReport, verify_mechanism
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = [
    "UNREPAIRED",
    "IterationRecord",
    "MechanismResult",
    "PMOProblem",
    "build_block_lp",
    "build_pmo",
    "finalize_mechanism",
    "highs_solve_lp",
    "repair_mechanism",
    "solve_direct",
    "travel_cost_loss",
]

logger = logging.getLogger(__name__)

#: :func:`solve_direct` refuses an LP whose nonzeros times this exceed the memory available: a floor
#: (max RSS per nonzero of the whole run, HiGHS's "choose": Rome 4.70 GB / 5.7 M = 820 B, stop 31;
#: gaussian 1,000 13.5 GB / 23.3 M = 580 B at its 1,800 s limit, stop 27), so that only LPs that
#: cannot fit are refused
DIRECT_BYTES_PER_NONZERO = 500
#: the repair's rounding allowance: a ratio broken by at most this much (relative) is left as it is
#: (the verifier allows 1e-9)
_RATIO_SLACK = 1e-13
#: :func:`_upward_closure`: entries (pairs x outputs) gathered at once (8 MB, below the size from
#: which the allocator maps fresh pages for every block)
_CLOSURE_CHUNK = 1 << 20
#: :func:`repair_mechanism`'s closure rounds (closure, then row normalisation) at most before the
#: mix. Each round shrinks the rows' deviation from 1 by about half on Rome's record-BD points
#: (eps 10/km): the master's point with every block record on its cheapest output was off by 1e-3
#: after the 8 rounds allowed until stop 43, whose mix cost 0.038 against the optimum 0.01355;
#: after 46 rounds it settled at 0.013683 with no mix. Rounds after the first are cheap (only
#: what grew is swept again): 8 more took 0.12 s there
REPAIR_MAX_ROUNDS = 64
#: ... and they stop (to the mix) once the deviation has not halved over this many rounds
REPAIR_STALL_ROUNDS = 4
#: the mix tries the exponential mechanism up to this many entries (records x outputs; it and the
#: costs are two more such arrays: 128 MB each at this size, the 100x100 grid's 1e8 would take GBs)
REPAIR_REFERENCE_MAX_ENTRIES = 1 << 24


@dataclass(frozen=True)
class PMOProblem:
    """A PMO instance (Qiu Eq. 4-7).

    Attributes
    ----------
    dataset:
        The secret dataset.
    eps, eta:
        Privacy parameter per unit and neighbourhood radius.
    outputs:
        ``(K,)`` record indices used as outputs.
    loss:
        ``(n, K)`` loss ``c_ik``.
    loss_name:
        ``"distance"`` or ``"travel"``.
    graph:
        The mDP neighbour graph.
    lp_edges:
        Ordered pairs kept in the LP (implied ones pruned), as ``(rows, cols)``.
    """

    dataset: SecretDataset
    eps: float
    eta: float
    outputs: np.ndarray
    loss: np.ndarray
    loss_name: str
    graph: NeighbourGraph
    lp_edges: tuple[np.ndarray, np.ndarray]

    @property
    def n(self) -> int:
        return self.dataset.n

    @property
    def K(self) -> int:
        return int(self.outputs.size)

    @property
    def cost(self) -> np.ndarray:
        """Objective coefficients ``p_i c_ik`` as an ``(n, K)`` array."""
        return self.dataset.prior[:, None] * self.loss

    def objective_of(self, Z: np.ndarray) -> float:
        """Expected loss ``sum_ik p_i c_ik z_ik`` of a mechanism."""
        return float(np.sum(self.cost * Z))


@dataclass(frozen=True)
class IterationRecord:
    """Bounds after one iteration of an iterative method."""

    iteration: int
    lower: float
    upper: float
    seconds: float


@dataclass(frozen=True)
class MechanismResult:
    """A verified mechanism and how it was obtained (fixed shape; see docs/mdp.md)."""

    method: str
    status: str
    mechanism: np.ndarray
    objective: float
    lower_bound: float
    upper_bound: float
    rel_gap: float
    iterations: int
    time_s: float
    verification: VerificationReport
    history: tuple[IterationRecord, ...] = ()
    partition: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def travel_cost_loss(distance: np.ndarray, outputs: np.ndarray, *, n_destinations: int = 50,
                     seed: int | str | None = None) -> np.ndarray:
    """Qiu's travel-cost loss (Eq. 48): mean over random destinations ``t`` of ``|d(i,t) - d(k,t)|``.

    Destinations are records drawn uniformly without replacement (public randomness, not
    a privacy-relevant sample; :class:`SecureRandom` so a seed reproduces them).
    """
    from securelp.solvers.randomness import SecureRandom

    n = distance.shape[0]
    T = min(int(n_destinations), n)
    rng = SecureRandom(seed, label="mdp-travel-destinations")
    dest = np.sort(rng.permutation(n)[:T])
    di = distance[:, dest]  # (n, T)
    dk = distance[outputs][:, dest]  # (K, T)
    return np.abs(di[:, None, :] - dk[None, :, :]).mean(axis=2)


#: the largest factor ``exp(eps d)`` an mDP row may carry: HiGHS treats matrix entries above 1e15
#: (its ``large_matrix_value``) as infinite and refuses the model
MAX_FACTOR = 1e15


def require_lp_factors(problem: PMOProblem) -> None:
    """Refuse, with what to change, a PMO whose mDP rows would carry a factor ``exp(eps d)`` above
    :data:`MAX_FACTOR`: no LP solver takes it (HiGHS calls it infinite), and such a row only says
    that the two records' supports must match. ``expmech`` needs no LP and is not limited.

    Raises
    ------
    InputError
        Naming the largest ``eps d`` on an mDP edge, the records and the largest ``eta`` that fits.
    """
    rows, cols = problem.lp_edges
    if rows.size == 0:
        return
    d = np.asarray(problem.dataset.distance)[rows, cols]
    worst = int(np.argmax(d))
    limit = math.log(MAX_FACTOR)
    if problem.eps * float(d[worst]) <= limit:
        return
    ds = problem.dataset
    unit = ds.unit or "units"
    names = ds.labels[int(rows[worst])], ds.labels[int(cols[worst])]
    raise InputError(
        f"eps * d reaches {problem.eps * float(d[worst]):.4g} on the mDP edge between records {names[0]} and "
        f"{names[1]} (d = {float(d[worst]):.4g} {unit}, eps = {problem.eps:g} per {unit.rstrip('s')}, "
        f"eta = {problem.eta:.4g}): its factor exp(eps d) exceeds {MAX_FACTOR:.0e}, the largest an LP solver "
        f"takes. Choose eps * eta <= {limit:.1f}, e.g. --eta {limit / problem.eps:.4g} or --eps "
        f"{limit / problem.eta:.4g} (mind the distances' unit), or --method expmech")


def choose_outputs(n: int, n_outputs: int | None = None, seed: int | str | None = None) -> np.ndarray:
    """The record indices used as outputs, sorted: every record (``n_outputs`` ``None`` or ``n``), or
    ``n_outputs`` of them drawn with ``seed`` (fresh OS entropy when ``None``, so only a seeded draw
    can be made again, e.g. by ``securelp perturb``).

    Raises
    ------
    InputError
        ``K <= 0`` or ``K > n``.
    """
    if n_outputs is None:
        return np.arange(n)
    K = int(n_outputs)
    if K <= 0:
        raise InputError(f"the number of outputs K must be >= 1, got {n_outputs}")
    if K > n:
        raise InputError(f"the number of outputs K = {K} exceeds the {n} records they are drawn from")
    if K == n:
        return np.arange(n)
    from securelp.solvers.randomness import SecureRandom

    return np.sort(SecureRandom(seed, label="mdp-outputs").permutation(n)[:K])


def build_pmo(dataset: SecretDataset, eps: float | None = None, eta: float | None = None, *,
              n_outputs: int | None = None, loss: str = "distance", seed: int | str | None = None,
              prune: bool = True) -> PMOProblem:
    """Validate parameters and build a :class:`PMOProblem`.

    Raises
    ------
    InputError
        ``eps <= 0``, ``eta <= 0``, ``K <= 0`` or ``K > n``, unknown loss.
    """
    eps = dataset.default_eps if eps is None else eps
    eta = dataset.default_eta if eta is None else eta
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise InputError(f"eps must be a finite number > 0 (per {dataset.unit or 'unit'}), got {eps}")
    if not (isinstance(eta, (int, float)) and math.isfinite(eta) and eta > 0):
        raise InputError(f"eta must be a finite number > 0 ({dataset.unit or 'units'}), got {eta}")
    outputs = choose_outputs(dataset.n, n_outputs, seed)
    if loss == "distance":
        c = np.asarray(dataset.distance)[:, outputs].astype(float)
    elif loss == "travel":
        c = travel_cost_loss(np.asarray(dataset.distance), outputs, seed=seed)
    else:
        raise InputError(f"unknown loss {loss!r}: use distance or travel")
    graph = build_graph(dataset.distance, float(eta))
    rows, cols = graph.rows, graph.cols
    if prune and rows.size:
        keep = essential_edges(np.asarray(dataset.distance), rows, cols)
        rows, cols = rows[keep], cols[keep]
    c.setflags(write=False)
    outputs.setflags(write=False)
    return PMOProblem(dataset, float(eps), float(eta), outputs, c, loss, graph, (rows, cols))


# ----------------------------------------------------------------------------------------
# HiGHS plumbing


def highs_solve_lp(cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, row_lower: np.ndarray,
                   row_upper: np.ndarray, starts: np.ndarray, index: np.ndarray, value: np.ndarray, *,
                   solver: str = "choose", threads: int = 1, keep: bool = False, time_limit: float | None = None) -> tuple[str, np.ndarray, np.ndarray, float, Any]:
    """Solve a row-wise LP with HiGHS; returns ``(status, x, row_duals, objective, highs_or_None)``.

    ``status`` is HiGHS's model-status text (``Optimal``, ``Infeasible``, ...). A failure of
    the call itself (not of the model) raises :class:`SolverError`.
    """
    import highspy

    options: dict[str, object] = {} if solver == "choose" else {"solver": solver}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    h = new_highs(options, tight=True)
    lp = highspy.HighsLp()
    lp.num_col_ = int(cost.size)
    lp.num_row_ = int(row_lower.size)
    lp.col_cost_ = np.ascontiguousarray(cost, dtype=float)
    lp.col_lower_ = np.ascontiguousarray(lower, dtype=float)
    lp.col_upper_ = np.ascontiguousarray(upper, dtype=float)
    lp.row_lower_ = np.ascontiguousarray(row_lower, dtype=float)
    lp.row_upper_ = np.ascontiguousarray(row_upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = np.ascontiguousarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.ascontiguousarray(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.ascontiguousarray(value, dtype=float)
    if h.passModel(lp) == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected the LP model (passModel failed)")
    run_status = h.run()
    if run_status == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS run failed (model status {h.modelStatusToString(h.getModelStatus())})")
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    x = np.asarray(sol.col_value, dtype=float)
    duals = np.asarray(sol.row_dual, dtype=float)
    obj = float(h.getInfo().objective_function_value)
    return status, x, duals, obj, (h if keep else None)


def build_block_lp(cost: np.ndarray, weights_rows: np.ndarray, weights_cols: np.ndarray, weights: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise arrays of the PMO restricted to ``m`` records (local indices) and ``K`` outputs.

    Variables ``z[i, k]`` at column ``i*K + k``. Rows: for each pair ``e`` and output ``k``,
    ``z[r_e, k] - w_e z[c_e, k] <= 0`` (row ``e*K + k``), then ``m`` unit-measure rows.

    Returns ``(cost, lower, upper, row_lower, row_upper, starts, index, value)``.
    """
    m, K = cost.shape
    E = weights_rows.size
    k = np.arange(K)
    # mDP rows: two nonzeros each
    a = (weights_rows[:, None] * K + k[None, :]).ravel()
    b = (weights_cols[:, None] * K + k[None, :]).ravel()
    idx_mdp = np.column_stack([a, b]).ravel()
    val_mdp = np.column_stack([np.ones(E * K), -np.repeat(weights, K)]).ravel()
    idx_unit = np.arange(m * K)
    val_unit = np.ones(m * K)
    starts = np.concatenate([np.arange(0, 2 * E * K, 2), 2 * E * K + np.arange(0, m * K + 1, K)])
    index = np.concatenate([idx_mdp, idx_unit])
    value = np.concatenate([val_mdp, val_unit])
    row_lower = np.concatenate([np.full(E * K, -np.inf), np.ones(m)])
    row_upper = np.concatenate([np.zeros(E * K), np.ones(m)])
    return (cost.ravel().astype(float), np.zeros(m * K), np.ones(m * K), row_lower, row_upper, starts, index, value)


# ----------------------------------------------------------------------------------------
# Exact repair and verification


def _upward_closure(Z: np.ndarray, rows: np.ndarray, cols: np.ndarray, inv_w: np.ndarray, max_passes: int = 200) -> int:
    """In place: ``Z[j] = max(Z[j], Z[i] * inv_w)`` over pairs ``(i, j)`` until stable; returns passes.

    The pairs are taken by target, a block of targets at a time (at most :data:`_CLOSURE_CHUNK`
    entries gathered at once), and each block writes its targets before the next block reads
    them (a Gauss-Seidel sweep). A pair can be violated after a pass only in an output where its
    source grew during the pass, so the next pass takes only the pairs whose source grew, in the
    outputs where anything grew. The result is the least fixed point above ``Z`` of the rounded
    map, whatever the order of the sweeps (every value written is some ``Z[i] * inv_w`` on the way
    to it), so it equals what full sweeps until nothing changes give, bit for bit. Of the pairs
    whose source grew, those whose target's block came after the source's in the pass read its
    final value then and are not swept again (stop 36: about half of them after a full pass).

    Measured (2026-11-27, the text dataset's 500 records, all 249,500 pairs, 500 outputs, two
    passes a call): 2.2-9.0 s a call with whole-pass gathers of ``pairs x outputs`` (1 GB each,
    fresh pages every time), 0.4-1.8 s in blocks. On gaussian 500's PDLP start (144 passes) the
    restriction to what grew took 2.64 s down to 1.40 s (2026-11-24). Every other pass sweeps the
    blocks backwards (stop 35): on the 50x50 grid's first master rows (2,500 x 2,500, tiny
    violations at HiGHS's tolerance) the first three rounds took 31/42/37 passes instead of
    31/50/50 (10.7/9.5/8.0 s against 13.2/11.7/10.9 s), the same matrices bit for bit; text 500,
    Rome and the 20x25 grid at eps 1 ran as fast as before with the same objectives.
    """
    if rows.size == 0:
        return 0
    order = np.argsort(cols, kind="stable")
    r, c, iw = rows[order], cols[order], inv_w[order]
    sel: np.ndarray | None = None  # pairs to sweep (None: all)
    ks: np.ndarray | None = None  # outputs to sweep (None: all)
    for passes in range(1, max_passes + 1):
        rs, cs, ws = (r, c, iw) if sel is None else (r[sel], c[sel], iw[sel])
        targets, first = np.unique(cs, return_index=True)
        nk = Z.shape[1] if ks is None else ks.size
        bounds = np.append(first, cs.size)
        grown_rows = np.zeros(targets.size, dtype=bool)
        grown_cols = np.zeros(nk, dtype=bool)
        # the blocks of targets: the largest whose pairs fit in the chunk (at least one target each)
        blocks = []
        t0 = 0
        while t0 < targets.size:
            t1 = max(t0 + 1, int(np.searchsorted(bounds, bounds[t0] + max(1, _CLOSURE_CHUNK // nk), side="right")) - 1)
            t1 = min(t1, targets.size)
            blocks.append((t0, t1))
            t0 = t1
        if passes % 2 == 0:
            # every other pass sweeps the blocks backwards (a symmetric Gauss-Seidel): growth then
            # travels both ways along the records' order in one pair of passes
            blocks.reverse()
        when = np.full(Z.shape[0], -1, dtype=np.int64)  # the slot of each record's block in this pass
        for slot, (t0, t1) in enumerate(blocks):
            when[targets[t0:t1]] = slot
        for t0, t1 in blocks:
            a, b = int(bounds[t0]), int(bounds[t1])
            tg = targets[t0:t1]
            if ks is None:
                cand, cur = Z[rs[a:b]], Z[tg]
            else:
                cand, cur = Z[np.ix_(rs[a:b], ks)], Z[np.ix_(tg, ks)]
            cand *= ws[a:b, None]
            best = np.maximum.reduceat(cand, first[t0:t1] - a, axis=0)
            grew = best > cur
            if np.any(grew):
                np.maximum(cur, best, out=cur)
                if ks is None:
                    Z[tg] = cur
                else:
                    Z[np.ix_(tg, ks)] = cur
                grown_rows[t0:t1] = np.any(grew, axis=1)
                grown_cols |= np.any(grew, axis=0)
        if not np.any(grown_rows):
            return passes
        ks = np.flatnonzero(grown_cols) if ks is None else ks[grown_cols]
        # a pair swept in this pass whose source grew in a block before its target's block read the
        # source's final value of this pass and holds: every other pair whose source grew is swept again
        grown = np.zeros(Z.shape[0], dtype=bool)
        grown[targets[grown_rows]] = True
        again = grown[r]
        if sel is None:
            again &= when[r] >= when[c]
        else:
            again[sel] &= when[r[sel]] >= when[c[sel]]
        sel = np.flatnonzero(again)
    raise SolverError(f"mechanism repair did not converge in {max_passes} passes")


def _mix_into_cone(X: np.ndarray, rows: np.ndarray, cols: np.ndarray, d: np.ndarray, eps: float,
                   reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, float]:
    """Step (4) of the repair on a row-stochastic ``X``: returns ``(mixed X, lam)``.

    ``reference``: ``(M, cost)``, an exactly private mechanism of ``X``'s shape (the exponential
    mechanism) and the loss per entry; the mix with ``M`` that absorbs every broken ratio is
    also formed, and the mix of lower loss is returned."""
    # (4) the mix: a record-independent distribution u meets the mDP row (i, j, k) with slack
    # (exp(eps d_ij) - 1) u_k, so u_k in proportion to column k's largest need v_k = max a/(w - 1)
    # absorbs every violation a with lam = V / (1 + V), V = sum v (x2 margin for rounding); the
    # uniform u needs V = K max v: on gaussian 500's PDLP start (463 outputs) lam 0.88 and loss
    # 1.513 with the uniform u, lam 0.068 and loss 0.934 with this one (PDLP's bound 0.877)
    # The exponential mechanism M meets the row (i, j, k) with slack s = exp(eps d_ij) M_jk - M_ik, so
    # the mix (1 - lam) X + lam M holds where lam >= a / (a + s) on every broken row. Where the
    # broken ratios sit between records whose mass is near each other (Rome's record-BD points at
    # eps 10/km) its mass is where theirs is, and a uniform-per-output top-up is far costlier
    X = np.asarray(X, dtype=float)
    K = X.shape[1]
    lam = 0.0
    if rows.size:
        w = np.exp(eps * d)
        v = np.zeros(K)
        need_ref = 0.0  # the largest a / (a + s) for the reference mechanism (inf: it cannot absorb)
        chunk = max(1, _CLOSURE_CHUNK // K)
        for start in range(0, rows.size, chunk):
            sl = slice(start, start + chunk)
            xi = X[rows[sl]]
            a = xi - w[sl, None] * X[cols[sl]]
            e, k = np.nonzero(a > _RATIO_SLACK * xi)  # after the closure, usually none
            if e.size:
                ae = a[e, k]
                with np.errstate(divide="ignore", invalid="ignore"):
                    np.maximum.at(v, k, ae / (w[sl][e] - 1.0))
                if reference is not None and np.isfinite(need_ref):
                    M = reference[0]
                    slack = w[sl][e] * M[cols[sl][e], k] - M[rows[sl][e], k]
                    need_ref = max(need_ref, float(np.max(ae / (ae + slack)))) if np.all(slack > 0) else math.inf
        V = 2.0 * float(v.sum())
        if V > 0:
            if math.isfinite(V):
                lam, u = V / (1.0 + V), v / v.sum()
            else:
                lam, u = 1.0, np.full(K, 1.0 / K)
            mixed = (1.0 - lam) * X + lam * u[None, :]
            if reference is not None and need_ref * (1.0 + 1e-6) < lam:
                # the margin covers rounding (a ratio is then kept to about 1e-16 of its need)
                lam_ref = need_ref * (1.0 + 1e-6)
                by_ref = (1.0 - lam_ref) * X + lam_ref * reference[0]
                if float(np.sum(reference[1] * by_ref)) < float(np.sum(reference[1] * mixed)):
                    mixed, lam = by_ref, lam_ref
            X = mixed
            X /= X.sum(axis=1)[:, None]
    return X, lam


def _repair_reference(problem: Any, K: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The exponential mechanism on ``problem``'s records and outputs and the loss per entry, for
    the repair's mix: ``None`` where the problem does not give its distances to the outputs
    (``to_outputs``, or the dataset's distances and ``outputs``) and its costs (for a matrix over
    the outputs ``kept``, those columns of them), or where
    ``exp(-eps d / 2)`` would underflow within a row (then it is not private as computed)."""
    from securelp.solvers.mdp.expmech import private_exponential_mechanism

    cost = getattr(problem, "cost", None)
    D = getattr(problem, "to_outputs", None)
    if D is None and getattr(problem, "outputs", None) is not None:
        D = np.asarray(problem.dataset.distance)[:, problem.outputs]
    if cost is None or D is None or np.shape(cost) != np.shape(D):
        return None
    kept = getattr(problem, "kept", None)
    if D.shape[1] != K and kept is not None and np.size(kept) == K:
        # a matrix over a subset of the outputs: the exponential mechanism on them is private too
        D, cost = D[:, kept], np.asarray(cost)[:, kept]
    if D.shape[1] != K:
        return None
    X = private_exponential_mechanism(D, problem.eps)
    return None if X is None else (X, np.asarray(cost))


def repair_mechanism(Z: np.ndarray, problem: PMOProblem, deadline: float = math.inf
                     ) -> tuple[np.ndarray, dict[str, float]]:
    """Make a solver's approximate PMO solution exactly feasible (see module docstring).

    Returns the repaired ``(n, K)`` matrix and figures on how much was changed
    (``max_abs_change``, ``mix_lambda``, ``closure_passes``, ``closure_rounds``).

    ``deadline`` (``time.perf_counter()`` seconds): once it has passed, no further closure round
    starts and the mix finishes the repair. The result is as private, its loss a little higher
    (on the 50x50 grid's first master rows: 1.8e-5 of the loss after one round, against eight
    rounds and 69 s; stop 35).
    """
    Z0 = np.asarray(Z, dtype=float)
    X = np.clip(Z0, 0.0, None)
    rows, cols = problem.graph.rows, problem.graph.cols
    d = np.asarray(problem.dataset.distance)[rows, cols]
    inv_w = np.exp(-problem.eps * d)
    passes = 0
    settled = False
    deviations: list[float] = []
    for _round in range(REPAIR_MAX_ROUNDS):
        passes += _upward_closure(X, rows, cols, inv_w)
        s = X.sum(axis=1)
        if np.any(s <= 0):
            i = int(np.argmin(s))
            raise SolverError(f"solver returned an all-zero row for record {i}; cannot repair")
        X /= s[:, None]
        # rows rescaled by at most 1 +- _RATIO_SLACK / 2 move a ratio of the closed matrix by at most
        # _RATIO_SLACK, which the mix would leave alone: neither another closure (on the text
        # dataset a second full one in most repairs) nor the mix's pass over every pair is needed
        deviations.append(float(np.max(np.abs(s - 1.0))))
        if deviations[-1] <= 0.5 * _RATIO_SLACK:
            settled = True
            break
        if time.perf_counter() > deadline:
            break
        if len(deviations) > REPAIR_STALL_ROUNDS and deviations[-1] > 0.5 * deviations[-1 - REPAIR_STALL_ROUNDS]:
            break
    lam = 0.0
    if not settled:
        reference = _repair_reference(problem, X.shape[1]) if X.size <= REPAIR_REFERENCE_MAX_ENTRIES else None
        X, lam = _mix_into_cone(X, rows, cols, d, problem.eps, reference)
    return X, {"max_abs_change": float(np.max(np.abs(X - Z0))), "mix_lambda": lam, "closure_passes": float(passes),
               "closure_rounds": float(_round + 1)}


#: :func:`repair_mechanism`'s figures for a mechanism returned as it came (nothing changed)
UNREPAIRED = {"max_abs_change": 0.0, "mix_lambda": 0.0, "closure_passes": 0.0, "closure_rounds": 0.0}


def finalize_mechanism(Z: np.ndarray, problem: PMOProblem, *, exact: bool = False, verified_parts: bool = False
                       ) -> tuple[np.ndarray, VerificationReport, dict[str, float]]:
    """Repair then verify; a failed verification raises :class:`VerificationError`.

    ``verified_parts``: ``Z`` is assembled from rows that were repaired and verified already (the
    column decomposition's components): it is verified as it is and returned unchanged when it
    passes, else repaired and verified as any other. The repair of such a matrix changes entries
    by rounding only, and costs two closure passes over every pair and output (text 1,000: 7.7 s,
    against 3.5 s for the verification; stop 36).
    """
    if verified_parts:
        try:
            report = verify_mechanism(Z, problem.dataset.distance, problem.eps, eta=problem.eta, exact=exact)
            return np.asarray(Z, dtype=float), report, dict(UNREPAIRED)
        except VerificationError as exc:  # not expected: the parts passed the same check
            logger.warning("the assembled mechanism failed its verification (%s); repairing it", exc)
    X, info = repair_mechanism(Z, problem)
    report = verify_mechanism(X, problem.dataset.distance, problem.eps, eta=problem.eta, exact=exact)
    return X, report, info


def refuse_lp_too_large(nnz: int, what: str, advice: str, bytes_per_nonzero: float = DIRECT_BYTES_PER_NONZERO
                        ) -> None:
    """Raise :class:`ResourceError` when an LP of ``nnz`` nonzeros needs more than the memory
    available at ``bytes_per_nonzero`` (:data:`DIRECT_BYTES_PER_NONZERO` by default); ``what``
    describes the LP ("... has N rows"), ``advice`` ends the message."""
    if short := memory_shortfall(bytes_per_nonzero * nnz, available_memory()):
        raise ResourceError(f"{what} and {nnz:,} nonzeros; HiGHS needs at least about {short}{advice}")


def direct_memory_check(E: int, n: int, K: int) -> None:
    """Refuse (:class:`ResourceError`) a whole PMO LP of ``E`` mDP pairs, ``n`` records and ``K``
    outputs that HiGHS could not hold in the memory available: at least
    :data:`DIRECT_BYTES_PER_NONZERO` per nonzero. Gaussian 2,000 (178 M nonzeros) was killed by
    the kernel after 3 minutes at 24 GB before this check (2026-11-27)."""
    refuse_lp_too_large(2 * E * K + n * K, f"direct: the whole PMO LP has {E * K + n:,} rows",
                        "; use --method bd --decomposition columns")


def _constant_mechanism(problem: PMOProblem, exact: bool) -> tuple[np.ndarray, VerificationReport, dict[str, float]]:
    """Every record to the output of least total loss: private at any eps; verified."""
    Z = np.zeros((problem.n, problem.K))
    Z[:, int(np.argmin(problem.cost.sum(axis=0)))] = 1.0
    return finalize_mechanism(Z, problem, exact=exact)


def solve_direct(problem: PMOProblem, *, gap: float = 1e-4, threads: int = 1, exact_check: bool = False,
                 solver: str = "choose", time_limit: float | None = None) -> MechanismResult:
    """Solve the whole PMO with HiGHS (``direct``); returns a verified mechanism.

    The lower bound is weak duality on HiGHS's row duals; the upper bound and the objective are
    the loss of the repaired, verified mechanism. The status is ``optimal`` when their relative
    gap is at most ``gap``, else ``numerical_trouble`` (HiGHS's duals do not certify its solution).

    ``time_limit`` (seconds, counted from the call) is HiGHS's time limit on the rest after the LP
    is built. When it stops HiGHS first, the status is ``time_limit``: the mechanism is the better
    of HiGHS's last iterate (when it has one), repaired exactly, and the best constant mechanism
    (every record to the output of least total loss, private at any eps), both verified; the lower
    bound is weak duality on HiGHS's last duals when they are valid, and at least the trivial bound
    (every record on its cheapest output). The repair and verification run after the limit.
    """
    require_lp_factors(problem)
    if not 0 < gap < 1:
        raise InputError(f"the relative gap must be in (0, 1), got {gap}")
    if time_limit is not None and not (time_limit > 0):
        raise InputError(f"the time limit must be a positive number of seconds, got {time_limit}")
    t0 = time.perf_counter()
    n, K = problem.n, problem.K
    rows, cols = problem.lp_edges
    direct_memory_check(rows.size, n, K)
    w = np.exp(problem.eps * np.asarray(problem.dataset.distance)[rows, cols])
    arrays = build_block_lp(problem.cost, rows, cols, w)
    logger.info("direct PMO: %d records x %d outputs, %d rows", n, K, arrays[3].size)
    left = None if time_limit is None else max(0.01, time_limit - (time.perf_counter() - t0))
    status, x, duals, obj, h = highs_solve_lp(*arrays, solver=solver, threads=threads, time_limit=left, keep=True)
    sol = h.getSolution()
    has_x, has_duals = bool(sol.value_valid), bool(sol.dual_valid)
    del h, sol  # HiGHS's copy of the LP is not needed for the repair and the bound
    c, lo, up, rlo, rup, starts, index, value = arrays
    AT = sp.csr_matrix((value, index, starts), shape=(rlo.size, c.size)).T
    trivial = float(problem.cost.min(axis=1).sum())
    if status == "Time limit reached":
        X, report, info = _constant_mechanism(problem, exact_check)
        upper = problem.objective_of(X)
        if has_x and np.all(np.clip(x, 0.0, None).reshape(n, K).sum(axis=1) > 0):
            X2, report2, info2 = finalize_mechanism(x.reshape(n, K), problem, exact=exact_check)
            if problem.objective_of(X2) < upper:
                X, report, info, upper = X2, report2, info2, problem.objective_of(X2)
        lower = trivial
        if has_duals:
            lower = max(lower, dual_bound(AT, c, lo, up, rlo, rup, duals))
        lower = min(lower, upper)
        status = "time_limit"
        logger.info("direct: HiGHS stopped at the time limit (%.0f s for the LP)", left)
    elif status != "Optimal":
        raise SolverError(f"HiGHS did not solve the PMO LP to optimality (model status: {status})")
    else:
        Z = x.reshape(n, K)
        X, report, info = finalize_mechanism(Z, problem, exact=exact_check)
        upper = problem.objective_of(X)
        # the lower bound is weak duality on HiGHS's duals: its objective overstates the optimum on
        # badly scaled instances (Rome at eps 10/km: "optimal" 0.0135915, a verified mechanism 0.0135488)
        lower = min(max(dual_bound(AT, c, lo, up, rlo, rup, duals), trivial), upper)
    rel_gap = (upper - lower) / max(abs(upper), 1e-300)
    if status != "time_limit":
        status = "optimal" if rel_gap <= gap else "numerical_trouble"
        if status != "optimal":
            logger.info("direct: HiGHS reported the PMO optimal, but its duals certify a gap of only %.3g", rel_gap)
    elapsed = time.perf_counter() - t0
    return MechanismResult(
        method="direct", status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
        rel_gap=rel_gap, iterations=1, time_s=elapsed, verification=report,
        history=(IterationRecord(1, lower, upper, elapsed),),
        details={"lp_rows": int(arrays[3].size), "lp_cols": int(n * K), "solver_objective": obj, **info},
    )
