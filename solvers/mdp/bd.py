"""Qiu's Benders decomposition (BD) of the PMO over a partitioned secret dataset.

Qiu, "Enhancing Scalability of Metric Differential Privacy via Secret Dataset
Partitioning and Benders Decomposition", Sec. 4-5. With a partition into subsets
(:mod:`securelp.solvers.mdp.partition`), boundary records ``B`` (a neighbour in another subset)
and internal records ``I_m``:

* master: the boundary variables ``z_b`` (``b in B``) with their own mDP rows
  (boundary-boundary pairs) and unit-measure rows, ``theta_m`` per subset, and cuts;
* block ``m``: the internal variables ``z_i`` (``i in I_m``) with the mDP rows among
  ``I_m`` and between ``I_m`` and ``B``, which read ``z_ik <= e^{eps d} z_bk`` and
  ``-e^{eps d} z_ik <= -z_bk`` -- their right-hand sides are linked to the master;
* Property 3.1: the master splits into independent components (variables linked by a
  master row or by one block), each solved on its own (:class:`securelp.solvers.benders.BendersEngine`);
* Property 3.2 (initial cuts): for boundary records ``b, b'`` of the same subset joined by a
  path through that subset, ``z_bk <= exp(eps delta_m(b, b')) z_b'k`` holds for every
  feasible mechanism (chain the mDP rows along the shortest path, length ``delta_m``); these
  rows are added to the master up front (when not implied by master rows alone,
  ``delta_m <= 2 eta`` and ``exp(eps delta_m) <= 1e8``), removing most feasibility cuts;
* ``theta_m`` starts at the trivial bound ``sum_{i in I_m} p_i min_k c_ik``;
* feasibility cuts come from normalised Farkas rays (phase-1 duals), optimality cuts from
  the blocks' duals, both with the weak-duality bound term (valid for any duals).

Every upper bound is the loss of an assembled full ``n x K`` mechanism after the exact
repair and verification of :mod:`securelp.solvers.mdp.pmo`; the returned mechanism is the best one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from securelp.solvers.benders import (
    BendersEngine,
    BendersOptions,
    BendersIteration,
    LinkedRows,
    MasterSpec,
    RowBlock,
    SubproblemSpec,
)
from securelp.solvers.errors import InputError, VerificationError
from securelp.solvers.mdp.partition import Partition, partition_records
from securelp.solvers.mdp.records.options import RecordOptions
from securelp.solvers.mdp.pmo import (
    UNREPAIRED,
    IterationRecord,
    MechanismResult,
    PMOProblem,
    finalize_mechanism,
    refuse_lp_too_large,
    require_lp_factors,
)

__all__ = ["build_bd_model", "solve_bd"]

logger = logging.getLogger(__name__)

#: Property 3.2 rows ``z_bk <= exp(eps delta) z_b'k`` are added only up to this factor
INITIAL_CUT_MAX_FACTOR = 1e8


def _rowblock_from_coo(r: np.ndarray, c: np.ndarray, v: np.ndarray, n_rows: int, n_cols: int,
                       lower: np.ndarray, upper: np.ndarray) -> RowBlock:
    A = sp.csr_matrix((v, (r, c)), shape=(n_rows, n_cols))
    A.sort_indices()
    return RowBlock(A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data.astype(float),
                    np.asarray(lower, dtype=float), np.asarray(upper, dtype=float))


#: memory of a record-BD run per nonzero of its LPs (every mDP row, unit row and initial cut row of
#: the master and the blocks; HiGHS's models and factorisations, the models' arrays as built, the
#: engine's copies), measured as max RSS over those nonzeros (stop 44): Rome 743 B after 2 iterations
#: (5.70 M nonzeros, 4.24 GB), the 30x30 grid at eps 1/km 424 B at the end of a 90 s run spent in its
#: first master (14.8 M, 6.30 GB). The cut pool grows from there (Rome: 7.3 GB after 21
#: iterations); the engine stops a run before it runs out (``memory_limit``)
MASTER_BYTES_PER_NONZERO = 700
#: a warning when Qiu's master holds at least this share of the PMO's mDP rows and this many: the
#: 20x20 grid at eps 1/km, eta 2 km with the default 25 subsets has 373 of 400 records on the
#: boundary, 91 % of the rows (1.08 M) in the master, whose first solve had not ended after 15
#: minutes (stop 44); the 20x25 grid at eps 10/km 84 % (1.56 M); Rome 55 %
MASTER_WARN_SHARE = 0.8
MASTER_WARN_ROWS = 1_000_000


def record_bd_memory_check(E: int, n: int, K: int, E_master: int, n_boundary: int, n_initial: int = 0) -> None:
    """Refuse (:class:`ResourceError`) a record decomposition whose LPs would not fit in memory at
    :data:`MASTER_BYTES_PER_NONZERO` (:func:`securelp.solvers.mdp.pmo.refuse_lp_too_large`). Every mDP row of
    the PMO (``E`` pairs x ``K`` outputs) is in the master (the ``E_master`` pairs between boundary
    records) or in a block (the others: between its internal records, or linking one to a boundary
    record), every unit row too, and the master adds its ``n_initial`` Property 3.2 pairs (``x K``
    rows): the master and the blocks together hold the whole PMO and more, and each keeps its HiGHS
    model for warm re-solves. On a complete mDP graph every record is a boundary record and the
    master is the whole PMO (the text dataset's 500 records: 250 M nonzeros; the run sat in the
    master's set-up for minutes past a 60 s limit at 7 GB, stop 34). Until stop 44 only the master's
    mDP rows were counted, at the ``direct`` LP's bytes: the 50x50 grid at eps 1/km (a master of
    21.2 M rows, 1.1 M of them initial) passed the check and was killed by the kernel at 24 GB, and
    the 60x60 grid with 4 subsets (a master of 10.8 M rows, blocks of about 790 records each) was at
    15 GB and rising after 60 s of a 60 s limit."""
    refuse_lp_too_large(2 * (E + n_initial) * K + n * K,
                        f"bd: Qiu's record decomposition (a master over {n_boundary:,} boundary records with"
                        f" {E_master * K:,} mDP rows" + (f" and {n_initial * K:,} initial cut rows" if n_initial else "")
                        + f", and blocks) holds all {E * K:,} mDP rows of the PMO",
                        "; use --decomposition columns",
                        bytes_per_nonzero=MASTER_BYTES_PER_NONZERO)


def _expmech_incumbent(problem: PMOProblem) -> tuple[float, Any] | None:
    """The exponential mechanism (Qiu Eq. 47), verified, as the record BD's first incumbent: private on
    every pair, so feasible for the PMO. Where the assembled masters' repairs are poor it is the
    better mechanism (Rome at eps 10/km: loss 0.0745 against the 0.327 that 22 iterations of repaired
    master solutions reached, stop 35); ``None`` where it cannot be built (its far outputs underflow)."""
    from securelp.solvers.mdp.expmech import solve_expmech

    try:
        r = solve_expmech(problem)
    except VerificationError as exc:
        logger.info("BD: no exponential-mechanism incumbent (%s)", exc)
        return None
    return r.objective, (r.mechanism, r.verification, dict(UNREPAIRED))


def _on_cheapest_outputs(loss: np.ndarray) -> np.ndarray:
    """Each row of ``loss`` (records x outputs) as a 0/1 row with its 1 on its cheapest output.

    Given the loss ``c``, not the objective's ``p * c``: the two agree where ``p_i > 0``, and a record
    of prior 0 goes to its nearest output instead of output 0 (every ``p_i c_ik`` is 0 there), whose
    mass the repair's closure would spread onto its neighbours (a 20x20 grid at eps 1/km with 80 %
    of the prior zero: 1.669 against 3.418 after the repair, stop 46)."""
    Z = np.zeros(loss.shape)
    Z[np.arange(loss.shape[0]), np.argmin(loss, axis=1)] = 1.0
    return Z


def _cheapest_incumbent(problem: PMOProblem) -> tuple[float, Any]:
    """Every record on its cheapest output, repaired exactly (the upward closure spreads each row
    over its neighbours' outputs at ``exp(-eps d)``) and verified: the record BD's other first
    incumbent, the better of the two kept. Measured against the exponential mechanism (stop 45):
    the 20x25 grid at eps 1/km 1.675 against 3.433 (optimum 1.638), at eps 10/km 1.77134e-4
    against 0.0298 (optimum 1.77133e-4), Rome at eps 10/km 0.01395 against 0.0745, gaussian 500
    1.598 against 1.870; one repair, 0.6-4.3 s there."""
    X, report, info = finalize_mechanism(_on_cheapest_outputs(problem.loss), problem)
    return problem.objective_of(X), (X, report, info)


def build_bd_model(problem: PMOProblem, partition: Partition, *, initial_cuts: bool = True
                   ) -> tuple[MasterSpec, list[SubproblemSpec], np.ndarray, list[np.ndarray], int]:
    """Build the master and blocks. Returns ``(master, blocks, boundary_ids, block_internal_ids, n_initial_cuts)``."""
    n, K = problem.n, problem.K
    eps = problem.eps
    D = np.asarray(problem.dataset.distance)
    cost = problem.cost
    labels, bmask = partition.labels, partition.boundary
    B = np.flatnonzero(bmask)
    posB = np.full(n, -1, dtype=np.int64)
    posB[B] = np.arange(B.size)
    er, ec = problem.lp_edges
    w = np.exp(eps * D[er, ec])
    kk = np.arange(K)

    # ---- master: boundary-boundary mDP rows, unit rows, Property 3.2 rows
    mr_rows: list[np.ndarray] = []
    mr_cols: list[np.ndarray] = []
    mr_vals: list[np.ndarray] = []
    n_rows = 0
    bb = bmask[er] & bmask[ec]
    ebr, ebc, ebw = posB[er[bb]], posB[ec[bb]], w[bb]
    E = ebr.size
    record_bd_memory_check(er.size, n, K, E, B.size)
    if E:
        row_id = (np.arange(E)[:, None] * K + kk[None, :]).ravel()
        mr_rows += [row_id, row_id]
        mr_cols += [(ebr[:, None] * K + kk).ravel(), (ebc[:, None] * K + kk).ravel()]
        mr_vals += [np.ones(E * K), -np.repeat(ebw, K)]
        n_rows += E * K
    lower_list = [np.full(E * K, -np.inf)]
    upper_list = [np.zeros(E * K)]
    n_init = 0
    if initial_cuts and B.size:
        full_w = D[problem.graph.rows, problem.graph.cols]
        Bgraph = sp.csr_matrix((full_w[bmask[problem.graph.rows] & bmask[problem.graph.cols]],
                                (problem.graph.rows[bmask[problem.graph.rows] & bmask[problem.graph.cols]],
                                 problem.graph.cols[bmask[problem.graph.rows] & bmask[problem.graph.cols]])), shape=(n, n))
        # rows with exp(eps delta) above 1e8 are left out: HiGHS refuses matrix values >= 1e15
        # and such weak rows only hurt the master's conditioning
        limit = min(2.0 * problem.eta, np.log(INITIAL_CUT_MAX_FACTOR) / eps)
        pr, pc, pd = [], [], []
        for m in range(partition.n_subsets):
            members = np.flatnonzero(labels == m)
            Bm = members[bmask[members]]
            if Bm.size < 2 or not np.any(~bmask[members]):
                continue
            inm = labels == m
            sel = inm[problem.graph.rows] & inm[problem.graph.cols]
            G = sp.csr_matrix((full_w[sel], (problem.graph.rows[sel], problem.graph.cols[sel])), shape=(n, n))
            dm = dijkstra(G, directed=False, indices=Bm, limit=limit)[:, Bm]
            dB = dijkstra(Bgraph, directed=False, indices=Bm, limit=limit)[:, Bm]
            ii, jj = np.nonzero(np.isfinite(dm) & (dm < dB * (1 - 1e-12)))
            keep = ii != jj
            pr.append(Bm[ii[keep]]); pc.append(Bm[jj[keep]]); pd.append(dm[ii[keep], jj[keep]])
        if pr:
            pr_a, pc_a, pd_a = np.concatenate(pr), np.concatenate(pc), np.concatenate(pd)
            # one row per (pair, k); the same pair may come from two subsets -- keep the shortest
            key = pr_a * n + pc_a
            order = np.lexsort((pd_a, key))
            key, pr_a, pc_a, pd_a = key[order], pr_a[order], pc_a[order], pd_a[order]
            first = np.ones(key.size, dtype=bool)
            first[1:] = key[1:] != key[:-1]
            pr_a, pc_a, pd_a = pr_a[first], pc_a[first], pd_a[first]
            P = pr_a.size
            record_bd_memory_check(er.size, n, K, E, B.size, P)
            n_init = P * K
            row_id = n_rows + (np.arange(P)[:, None] * K + kk[None, :]).ravel()
            mr_rows += [row_id, row_id]
            mr_cols += [(posB[pr_a][:, None] * K + kk).ravel(), (posB[pc_a][:, None] * K + kk).ravel()]
            mr_vals += [np.ones(P * K), -np.repeat(np.exp(eps * pd_a), K)]
            n_rows += P * K
            lower_list.append(np.full(P * K, -np.inf))
            upper_list.append(np.zeros(P * K))
    # unit rows
    if B.size:
        row_id = n_rows + np.repeat(np.arange(B.size), K)
        mr_rows.append(row_id)
        mr_cols.append(np.arange(B.size * K))
        mr_vals.append(np.ones(B.size * K))
        n_rows += B.size
        lower_list.append(np.ones(B.size))
        upper_list.append(np.ones(B.size))
    nx = B.size * K
    if mr_rows:
        mrows = _rowblock_from_coo(np.concatenate(mr_rows), np.concatenate(mr_cols), np.concatenate(mr_vals),
                                   n_rows, nx, np.concatenate(lower_list), np.concatenate(upper_list))
    else:
        mrows = RowBlock.empty()
    master = MasterSpec(cost[B].ravel(), np.zeros(nx), np.ones(nx), mrows)

    # ---- blocks
    blocks: list[SubproblemSpec] = []
    internal_ids: list[np.ndarray] = []
    for m in range(partition.n_subsets):
        Im = np.flatnonzero((labels == m) & ~bmask)
        if Im.size == 0:
            continue
        posI = np.full(n, -1, dtype=np.int64)
        posI[Im] = np.arange(Im.size)
        inI_r, inI_c = posI[er] >= 0, posI[ec] >= 0
        rr, cc, vv = [], [], []
        lo, up = [], []
        nr = 0
        # internal-internal
        sel = inI_r & inI_c
        a, b_, ww = posI[er[sel]], posI[ec[sel]], w[sel]
        Ei = a.size
        if Ei:
            rid = (np.arange(Ei)[:, None] * K + kk).ravel()
            rr += [rid, rid]; cc += [(a[:, None] * K + kk).ravel(), (b_[:, None] * K + kk).ravel()]
            vv += [np.ones(Ei * K), -np.repeat(ww, K)]
            lo.append(np.full(Ei * K, -np.inf)); up.append(np.zeros(Ei * K))
            nr += Ei * K
        link_rows, link_var, link_gamma = [], [], []
        # internal -> boundary: z_ik - w x_bk <= 0  =>  z_ik <= w x_bk
        sel = inI_r & bmask[ec]
        a, bb_, ww = posI[er[sel]], posB[ec[sel]], w[sel]
        Eb = a.size
        if Eb:
            rid = nr + (np.arange(Eb)[:, None] * K + kk).ravel()
            rr.append(rid); cc.append((a[:, None] * K + kk).ravel()); vv.append(np.ones(Eb * K))
            lo.append(np.full(Eb * K, -np.inf)); up.append(np.zeros(Eb * K))
            link_rows.append(rid); link_var.append((bb_[:, None] * K + kk).ravel()); link_gamma.append(np.repeat(ww, K))
            nr += Eb * K
        # boundary -> internal: x_bk - w z_ik <= 0
        sel = bmask[er] & inI_c
        bb_, a, ww = posB[er[sel]], posI[ec[sel]], w[sel]
        Eb2 = a.size
        if Eb2:
            rid = nr + (np.arange(Eb2)[:, None] * K + kk).ravel()
            # scaled by 1/w: -z_ik <= -x_bk / w (unit coefficient on the block variable)
            rr.append(rid); cc.append((a[:, None] * K + kk).ravel()); vv.append(-np.ones(Eb2 * K))
            lo.append(np.full(Eb2 * K, -np.inf)); up.append(np.zeros(Eb2 * K))
            link_rows.append(rid); link_var.append((bb_[:, None] * K + kk).ravel()); link_gamma.append(-np.repeat(1.0 / ww, K))
            nr += Eb2 * K
        # unit rows
        rid = nr + np.repeat(np.arange(Im.size), K)
        rr.append(rid); cc.append(np.arange(Im.size * K)); vv.append(np.ones(Im.size * K))
        lo.append(np.ones(Im.size)); up.append(np.ones(Im.size))
        nr += Im.size
        rows = _rowblock_from_coo(np.concatenate(rr), np.concatenate(cc), np.concatenate(vv), nr, Im.size * K,
                                  np.concatenate(lo), np.concatenate(up))
        if link_rows:
            linked = LinkedRows(np.concatenate(link_rows), np.concatenate(link_var), np.concatenate(link_gamma))
        else:
            linked = LinkedRows(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
        c_m = cost[Im]
        blocks.append(SubproblemSpec(f"subset{m}", c_m.ravel(), np.ones(Im.size * K), rows, linked,
                                     theta_lower=float(c_m.min(axis=1).sum()),
                                     unit_rows=np.arange(nr - Im.size, nr)))
        internal_ids.append(Im)
    return master, blocks, B, internal_ids, n_init


def solve_bd(problem: PMOProblem, *, partitioner: str = "kmdv", n_subsets: int = 25, gap: float = 1e-4,
             decomposition: str = "records", max_iterations: int = 500, time_limit: float = float("inf"), workers: int = 2, seed: int = 0,
             initial_cuts: bool = True, partition: Partition | None = None, exact_check: bool = False,
             dual_ascent: float | None = None, first_order: str = "auto",
             progress: Callable[[IterationRecord], None] | None = None,
             status: Callable[[str], None] | None = None, options: RecordOptions | None = None) -> MechanismResult:
    """Solve the PMO by Benders decomposition; returns a verified mechanism.

    ``decomposition="records"`` (default) is Qiu's BD over a record partition. ``"columns"`` is
    Benders decomposition of the PMO's *dual* with the unit-row duals as master variables and one
    subproblem per output column -- in primal terms column generation per mDP-graph component
    (:func:`securelp.solvers.mdp.colgen.solve_colgen`, see docs/mdp_design.md for the equivalence); the partitioner
    is not used then and ``partition`` reports the components; ``dual_ascent`` (seconds of the
    first-order start per large component, ``None`` automatic, ``0`` off) and ``first_order``
    (``"auto"``, ``"pdlp"``, ``"smoothed"``, ``"screened"`` or ``"ipm"``) and ``status`` (notes on
    the slow phases before the first iteration) are passed on; the record BD sends ``status`` one
    note, the master's size, before its first iteration. The record BD stops
    ``no_progress`` when the last ``pace_window`` iterations, or more until they span a minute,
    closed too little of the gap to reach ``gap`` within the iterations and time left at that pace
    (``0``: never; see
    :func:`securelp.solvers.benders.engine.too_slow`), and ``memory_limit`` when an iteration left too little
    memory for another (:func:`securelp.solvers.benders.engine.memory_running_out`).

    Raises
    ------
    InputError
        ``gap`` outside ``(0, 1)``, ``n_subsets < 1``, unknown partitioner, ``max_iterations < 1``.
    SolverError
        From the column decomposition (:func:`securelp.solvers.mdp.colgen.solve_colgen`). The record BD always
        has a verified mechanism (its first incumbents); HiGHS's failures end it with a status.
    VerificationError
        A mechanism failed verification.
    ResourceError
        The record decomposition's LPs would not fit in memory (:func:`record_bd_memory_check`).
    """
    if not (0 < gap < 1):
        raise InputError(f"the relative gap must be in (0, 1), got {gap}")
    if decomposition not in ("records", "columns"):
        raise InputError(f"unknown decomposition {decomposition!r}: use records or columns")
    if decomposition == "columns":
        from securelp.solvers.mdp.colgen import solve_colgen

        r = solve_colgen(problem, gap=gap, max_iterations=max_iterations, time_limit=time_limit, workers=workers,
                         exact_check=exact_check, method_name="bd", dual_ascent=dual_ascent, first_order=first_order,
                         progress=progress, status=status)
        sizes = r.details["component_sizes"]
        part = {"method": None, "decomposition": "columns", "sizes": sizes, "n_boundary": 0,
                "mp_component_sizes": [], "kept_outputs": r.details["kept_outputs"]}
        return dataclasses.replace(r, partition=part)
    if int(max_iterations) < 1:
        raise InputError(f"the iteration cap must be >= 1, got {max_iterations}")
    require_lp_factors(problem)  # (solve_colgen checks its own)
    options = options or RecordOptions()
    in_out = options.in_out
    t0 = time.perf_counter()
    n, K = problem.n, problem.K
    if partition is None:
        partition = partition_records(partitioner, problem.dataset.distance, problem.graph.rows, problem.graph.cols,
                                      n_subsets, coords=problem.dataset.coords, eps=problem.eps, seed=seed)
    t_part = time.perf_counter() - t0
    master, blocks, B, internal_ids, n_init = build_bd_model(problem, partition, initial_cuts=initial_cuts)
    t_build = time.perf_counter() - t0 - t_part
    logger.info("BD: %d boundary records, %d blocks, %d initial cut rows, master %d x %d", B.size, len(blocks), n_init,
                master.rows.n_rows, master.n)
    n_master_mdp = master.rows.n_rows - n_init - B.size
    n_mdp = problem.lp_edges[0].size * K
    if n_master_mdp >= MASTER_WARN_ROWS and n_master_mdp >= MASTER_WARN_SHARE * n_mdp:
        logger.warning(f"bd: {B.size:,} of {n:,} records are boundary records, and Qiu's master holds "
                       f"{100.0 * n_master_mdp / n_mdp:.0f} % of the PMO's mDP rows ({n_master_mdp:,} rows): its solves "
                       "are nearly the whole LP's (--subsets is small next to eta, or the mDP graph is dense); "
                       "--decomposition columns is usually far faster")
    if status is not None:
        # the first master solve is a PMO over the boundary records and can take minutes (Rome: 42 s;
        # gaussian 500, 1.2 M rows: not solved in 10 minutes, stop 41), with no iteration to show
        status(f"Qiu's master over {B.size:,} boundary records x {K:,} outputs ({master.rows.n_rows:,} rows) "
               f"and {len(blocks)} blocks: first iteration")
    state: dict[str, Any] = {"best": np.inf, "verified": 0}

    def assemble(x: np.ndarray, ys: list[np.ndarray]) -> np.ndarray:
        """The full ``n x K`` matrix of the master's ``x`` and the blocks' ``ys``."""
        Z = np.zeros((n, K))
        if B.size:
            Z[B] = x.reshape(B.size, K)
        for Im, y in zip(internal_ids, ys):
            Z[Im] = y.reshape(Im.size, K)
        return Z

    def verified(Z: np.ndarray) -> tuple[float, Any]:
        X, report, info = finalize_mechanism(Z, problem)
        state["verified"] += 1
        value = problem.objective_of(X)
        state["best"] = min(state["best"], value)
        return value, (X, report, info)

    def upper_bound(x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, Any]:
        # an assembly whose raw loss is not below the best verified one is not repaired (until stop
        # 43 not below the lowest raw loss so far: an assembly at the master's point, raw near the
        # lower bound but repaired far above it, then kept every later one out; the 5x5 grid at eps
        # 10/km ended 8e-6 above its optimum)
        Z = assemble(x, ys)
        if problem.objective_of(Z) >= state["best"]:
            return np.inf, None
        return verified(Z)

    def repaired_upper_bound(x: np.ndarray, ys: list[np.ndarray | None], feasible: list[bool]) -> tuple[float, Any]:
        # an iteration with infeasible blocks: the master's x and the feasible blocks' solutions
        # with, for the infeasible ones, (a) each record on its cheapest output or (b) their
        # phase-1 solutions, each assembly repaired exactly and verified; the better is kept. (a)
        # is near-optimal at large eps d (a 5x5 grid at eps 10: 1.47881e-4 at iteration 1, optimum
        # 1.47879e-4); (b) ignores the loss (0.217 there) and is kept for small eps d.
        a = verified(assemble(x, [y if ok else _on_cheapest_outputs(problem.loss[Im])
                                  for Im, y, ok in zip(internal_ids, ys, feasible)]))
        if all(y is None for y, ok in zip(ys, feasible) if not ok):
            return a
        b = verified(assemble(x, [_on_cheapest_outputs(problem.loss[Im]) if y is None else y
                                  for Im, y in zip(internal_ids, ys)]))
        return min(a, b, key=lambda candidate: candidate[0])

    # every record on its cheapest output: a lower bound before any master solve has given one (an
    # iteration cut short by the time limit showed "lower -inf" on the terminal and null in the JSON)
    trivial = float(problem.cost.min(axis=1).sum())

    # the record BD's first incumbents, both private mechanisms, verified: the exponential mechanism
    # and every record on its cheapest output repaired exactly. The engine runs from the exponential
    # mechanism alone, as before stop 45: its in-out separation judges cuts against U - L, and given
    # the cheapest one's U from the start the 5x5 grid at eps 10/km (kmrec, M = 2, gap 1e-9) stalled
    # 8.7e-6 above its optimum instead of 1.7e-7. The cheapest one, known before the first iteration,
    # is an upper bound at every iteration all the same, and is returned where it is the best.
    em_incumbent = _expmech_incumbent(problem)
    cheap_incumbent = _cheapest_incumbent(problem)
    cheap_value = cheap_incumbent[0]

    def on_iteration(rec: BendersIteration) -> None:
        if progress is not None:
            progress(IterationRecord(rec.iteration, max(rec.lower, trivial), min(rec.upper, cheap_value), rec.seconds))

    engine = BendersEngine(master, blocks, upper_bound_fn=upper_bound, repair_upper_bound_fn=repaired_upper_bound,
                           options=options.benders,
                           workers=workers)
    # the time limit counts from the call: the partition, the model building and the incumbents are
    # part of it. The in-out separation's first core: the exponential mechanism's boundary rows (it is
    # feasible, so every block is feasible there)
    core = None if em_incumbent is None or not in_out or not B.size else np.asarray(em_incumbent[1][0])[B].ravel()
    res = engine.run(gap=gap, max_iterations=int(max_iterations), time_limit=time_limit - (time.perf_counter() - t0),
                     progress=on_iteration, incumbent=em_incumbent, core=core,
                     in_out=float(in_out or 0.0))
    payload = res.best_payload
    if payload is None or cheap_value < res.upper_bound:  # the engine's upper bound is its payload's loss
        payload = cheap_incumbent[1]
    X, report, info = payload
    returned_expmech = em_incumbent is not None and payload is em_incumbent[1]
    returned_cheapest = payload is cheap_incumbent[1]
    if exact_check:
        X, report, info = finalize_mechanism(X, problem, exact=True)
    upper = problem.objective_of(X)
    # the trivial bound (every record on its cheapest output) stands when the time limit came
    # before the first master solve
    lower = min(max(res.lower_bound, trivial), upper)
    rel_gap = (upper - lower) / max(abs(upper), 1e-300)
    status = "optimal" if rel_gap <= gap else res.status
    history = tuple(IterationRecord(h.iteration, max(h.lower, trivial), min(h.upper, cheap_value), h.seconds)
                    for h in res.history)
    part = {
        "method": partition.method,
        "decomposition": "records",
        "sizes": partition.sizes,
        "n_boundary": partition.n_boundary,
        "internal_sizes": partition.internal_sizes(),
        "mp_component_sizes": [s // K for s in res.master_component_sizes],
        "labels": partition.labels.tolist(),
        "boundary": partition.boundary.tolist(),
    }
    return MechanismResult(
        method="bd", status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
        rel_gap=rel_gap, iterations=res.iterations, time_s=time.perf_counter() - t0, verification=report,
        history=history, partition=part,
        details={"partition_seconds": t_part, "build_seconds": t_build, "initial_cut_rows": n_init,
                 "total_cuts": res.total_cuts, "n_blocks": len(blocks), "verified_upper_bounds": state["verified"],
                 "engine_status": res.status,
                 "expmech_incumbent": None if em_incumbent is None else em_incumbent[0],
                 "returned_expmech": returned_expmech, "cheapest_incumbent": cheap_incumbent[0],
                 "returned_cheapest": returned_cheapest, **res.details, **info},
    )
