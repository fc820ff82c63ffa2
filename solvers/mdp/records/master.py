"""The master of Qiu's record decomposition: the boundary records' variables, their rows, and the
initial cuts of Property 3.2 (Qiu Sec. 4-5).

The master holds ``z_b`` for every boundary record ``b`` (a record with an mDP neighbour in another
subset) with the mDP rows between boundary records (Eq. 5) and their unit rows (Eq. 6). Property 3.2:
for boundary records ``b, b'`` of the same subset joined by a path through that subset,
``z_bk <= exp(eps delta_m(b, b')) z_b'k`` holds for every feasible mechanism (chain the mDP rows
along the shortest path, of length ``delta_m``); these rows are added up front (when not implied by
master rows alone, ``delta_m <= 2 eta`` and ``exp(eps delta_m)`` at most the options' factor),
removing most feasibility cuts.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from securelp.solvers.benders import MasterSpec, RowBlock
from securelp.solvers.mdp.direct import refuse_lp_too_large
from securelp.solvers.mdp.pmo import PMOProblem
from securelp.solvers.mdp.records.partition import Partition

__all__ = ["MASTER_BYTES_PER_NONZERO", "build_master", "initial_cut_pairs", "record_bd_memory_check",
           "rowblock_from_coo"]

#: memory of a record-BD run per nonzero of its LPs (every mDP row, unit row and initial cut row of
#: the master and the blocks; HiGHS's models and factorisations, the models' arrays as built, the
#: engine's copies), measured as the peak over those nonzeros on the benchmark's instances; the cut
#: pool grows from there, and the engine stops a run before it runs out (``memory_limit``)
MASTER_BYTES_PER_NONZERO = 700


def record_bd_memory_check(E: int, n: int, K: int, E_master: int, n_boundary: int, n_initial: int = 0) -> None:
    """Refuse (:class:`~securelp.solvers.errors.ResourceError`, ``parameter`` "decomposition") a record
    decomposition whose LPs would not fit in memory at :data:`MASTER_BYTES_PER_NONZERO`. Every mDP row
    of the PMO (``E`` pairs x ``K`` outputs) is in the master (the ``E_master`` pairs between boundary
    records) or in a block (the others), every unit row too, and the master adds its ``n_initial``
    Property 3.2 pairs (``x K`` rows): the master and the blocks together hold the whole PMO and
    more, and each keeps its HiGHS model for warm re-solves. On a complete mDP graph every record is a
    boundary record and the master is the whole PMO."""
    refuse_lp_too_large(2 * (E + n_initial) * K + n * K,
                        f"bd: Qiu's record decomposition (a master over {n_boundary:,} boundary records with"
                        f" {E_master * K:,} mDP rows" + (f" and {n_initial * K:,} initial cut rows" if n_initial else "")
                        + f", and blocks) holds all {E * K:,} mDP rows of the PMO",
                        "; the column decomposition needs far less", "decomposition",
                        bytes_per_nonzero=MASTER_BYTES_PER_NONZERO)


def rowblock_from_coo(r: np.ndarray, c: np.ndarray, v: np.ndarray, n_rows: int, n_cols: int,
                      lower: np.ndarray, upper: np.ndarray) -> RowBlock:
    """Rows given as coordinates ``(r, c, v)`` as a :class:`~securelp.solvers.benders.RowBlock`."""
    A = sp.csr_matrix((v, (r, c)), shape=(n_rows, n_cols))
    A.sort_indices()
    return RowBlock(A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data.astype(float),
                    np.asarray(lower, dtype=float), np.asarray(upper, dtype=float))


def initial_cut_pairs(problem: PMOProblem, partition: Partition, max_factor: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Property 3.2's pairs ``(b, b', delta_m)``: boundary records of one subset joined by a shortest
    path through it that no path through boundary records alone matches, up to ``2 eta`` and
    ``log(max_factor) / eps`` (rows with larger factors only hurt the master's conditioning, and HiGHS
    refuses matrix values of 1e15 or more); of a pair found in two subsets the shorter path. ``None``
    when there is none."""
    n, eps = problem.n, problem.eps
    D = np.asarray(problem.dataset.distance)
    labels, bmask = partition.labels, partition.boundary
    gr, gc = problem.graph.rows, problem.graph.cols
    full_w = D[gr, gc]
    both = bmask[gr] & bmask[gc]
    Bgraph = sp.csr_matrix((full_w[both], (gr[both], gc[both])), shape=(n, n))
    limit = min(2.0 * problem.eta, np.log(max_factor) / eps)
    pr, pc, pd = [], [], []
    for m in range(partition.n_subsets):
        members = np.flatnonzero(labels == m)
        Bm = members[bmask[members]]
        if Bm.size < 2 or not np.any(~bmask[members]):
            continue
        inm = labels == m
        sel = inm[gr] & inm[gc]
        G = sp.csr_matrix((full_w[sel], (gr[sel], gc[sel])), shape=(n, n))
        dm = dijkstra(G, directed=False, indices=Bm, limit=limit)[:, Bm]
        dB = dijkstra(Bgraph, directed=False, indices=Bm, limit=limit)[:, Bm]
        ii, jj = np.nonzero(np.isfinite(dm) & (dm < dB * (1 - 1e-12)))
        keep = ii != jj
        pr.append(Bm[ii[keep]])
        pc.append(Bm[jj[keep]])
        pd.append(dm[ii[keep], jj[keep]])
    if not pr:
        return None
    pr_a, pc_a, pd_a = np.concatenate(pr), np.concatenate(pc), np.concatenate(pd)
    # one row per (pair, k); the same pair may come from two subsets: keep the shortest
    key = pr_a * n + pc_a
    order = np.lexsort((pd_a, key))
    key, pr_a, pc_a, pd_a = key[order], pr_a[order], pc_a[order], pd_a[order]
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    return pr_a[first], pc_a[first], pd_a[first]


def build_master(problem: PMOProblem, partition: Partition, w: np.ndarray, posB: np.ndarray, *,
                 initial_cuts: bool, max_factor: float) -> tuple[MasterSpec, int]:
    """The master over the boundary records ``B`` (``posB``: each record's position among them, -1 for
    internal records; ``w``: ``exp(eps d)`` of the PMO's LP edges): its mDP rows between boundary
    records, Property 3.2's rows (``initial_cuts``; :func:`initial_cut_pairs`) and its unit rows.
    Returns the master and its number of initial cut rows.

    Raises
    ------
    ResourceError
        The decomposition's LPs would not fit in memory (:func:`record_bd_memory_check`).
    """
    n, K, eps = problem.n, problem.K, problem.eps
    bmask = partition.boundary
    B = np.flatnonzero(bmask)
    er, ec = problem.lp_edges
    kk = np.arange(K)
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
    pairs = initial_cut_pairs(problem, partition, max_factor) if initial_cuts and B.size else None
    if pairs is not None:
        pr_a, pc_a, pd_a = pairs
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
    if B.size:  # unit rows
        row_id = n_rows + np.repeat(np.arange(B.size), K)
        mr_rows.append(row_id)
        mr_cols.append(np.arange(B.size * K))
        mr_vals.append(np.ones(B.size * K))
        n_rows += B.size
        lower_list.append(np.ones(B.size))
        upper_list.append(np.ones(B.size))
    nx = B.size * K
    if mr_rows:
        mrows = rowblock_from_coo(np.concatenate(mr_rows), np.concatenate(mr_cols), np.concatenate(mr_vals),
                                  n_rows, nx, np.concatenate(lower_list), np.concatenate(upper_list))
    else:
        mrows = RowBlock.empty()
    return MasterSpec(problem.cost[B].ravel(), np.zeros(nx), np.ones(nx), mrows), n_init
