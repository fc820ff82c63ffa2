"""The blocks of Qiu's record decomposition: one per subset, over its internal records (Qiu Sec. 4).

Block ``m`` holds the internal variables ``z_i`` (``i in I_m``, records whose every mDP neighbour is
in subset ``m``) with the mDP rows among ``I_m`` and between ``I_m`` and the boundary records ``B``,
which read ``z_ik <= e^{eps d} z_bk`` and ``-z_ik <= -z_bk / e^{eps d}``: their right-hand sides are
linked to the master's ``z_bk``. ``theta_m`` starts at the trivial bound
``sum_{i in I_m} p_i min_k c_ik``.
"""

from __future__ import annotations

import numpy as np

from securelp.solvers.benders import LinkedRows, SubproblemSpec
from securelp.solvers.mdp.pmo import PMOProblem
from securelp.solvers.mdp.records.master import rowblock_from_coo
from securelp.solvers.mdp.records.partition import Partition

__all__ = ["block_spec", "build_blocks"]


def block_spec(problem: PMOProblem, m: int, Im: np.ndarray, bmask: np.ndarray, posB: np.ndarray, w: np.ndarray
               ) -> SubproblemSpec:
    """Subset ``m``'s block over its internal records ``Im`` (``bmask``: the boundary records;
    ``posB``: their positions in the master; ``w``: ``exp(eps d)`` of the PMO's LP edges)."""
    n, K = problem.n, problem.K
    er, ec = problem.lp_edges
    kk = np.arange(K)
    posI = np.full(n, -1, dtype=np.int64)
    posI[Im] = np.arange(Im.size)
    inI_r, inI_c = posI[er] >= 0, posI[ec] >= 0
    rr: list[np.ndarray] = []
    cc: list[np.ndarray] = []
    vv: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    up: list[np.ndarray] = []
    nr = 0
    # internal-internal
    sel = inI_r & inI_c
    a, b_, ww = posI[er[sel]], posI[ec[sel]], w[sel]
    Ei = a.size
    if Ei:
        rid = (np.arange(Ei)[:, None] * K + kk).ravel()
        rr += [rid, rid]
        cc += [(a[:, None] * K + kk).ravel(), (b_[:, None] * K + kk).ravel()]
        vv += [np.ones(Ei * K), -np.repeat(ww, K)]
        lo.append(np.full(Ei * K, -np.inf))
        up.append(np.zeros(Ei * K))
        nr += Ei * K
    link_rows: list[np.ndarray] = []
    link_var: list[np.ndarray] = []
    link_gamma: list[np.ndarray] = []
    # internal -> boundary: z_ik - w x_bk <= 0, i.e. z_ik <= w x_bk
    sel = inI_r & bmask[ec]
    a, bb_, ww = posI[er[sel]], posB[ec[sel]], w[sel]
    if a.size:
        rid = nr + (np.arange(a.size)[:, None] * K + kk).ravel()
        rr.append(rid)
        cc.append((a[:, None] * K + kk).ravel())
        vv.append(np.ones(a.size * K))
        lo.append(np.full(a.size * K, -np.inf))
        up.append(np.zeros(a.size * K))
        link_rows.append(rid)
        link_var.append((bb_[:, None] * K + kk).ravel())
        link_gamma.append(np.repeat(ww, K))
        nr += a.size * K
    # boundary -> internal: x_bk - w z_ik <= 0, scaled by 1/w: -z_ik <= -x_bk / w (a unit coefficient
    # on the block variable)
    sel = bmask[er] & inI_c
    bb_, a, ww = posB[er[sel]], posI[ec[sel]], w[sel]
    if a.size:
        rid = nr + (np.arange(a.size)[:, None] * K + kk).ravel()
        rr.append(rid)
        cc.append((a[:, None] * K + kk).ravel())
        vv.append(-np.ones(a.size * K))
        lo.append(np.full(a.size * K, -np.inf))
        up.append(np.zeros(a.size * K))
        link_rows.append(rid)
        link_var.append((bb_[:, None] * K + kk).ravel())
        link_gamma.append(-np.repeat(1.0 / ww, K))
        nr += a.size * K
    # unit rows
    rr.append(nr + np.repeat(np.arange(Im.size), K))
    cc.append(np.arange(Im.size * K))
    vv.append(np.ones(Im.size * K))
    lo.append(np.ones(Im.size))
    up.append(np.ones(Im.size))
    nr += Im.size
    rows = rowblock_from_coo(np.concatenate(rr), np.concatenate(cc), np.concatenate(vv), nr, Im.size * K,
                             np.concatenate(lo), np.concatenate(up))
    if link_rows:
        linked = LinkedRows(np.concatenate(link_rows), np.concatenate(link_var), np.concatenate(link_gamma))
    else:
        linked = LinkedRows(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    c_m = problem.cost[Im]
    return SubproblemSpec(f"subset{m}", c_m.ravel(), np.ones(Im.size * K), rows, linked,
                          theta_lower=float(c_m.min(axis=1).sum()), unit_rows=np.arange(nr - Im.size, nr))


def build_blocks(problem: PMOProblem, partition: Partition, posB: np.ndarray, w: np.ndarray
                 ) -> tuple[list[SubproblemSpec], list[np.ndarray]]:
    """Every subset's block (:func:`block_spec`; subsets without internal records have none) and its
    internal records."""
    blocks: list[SubproblemSpec] = []
    internal_ids: list[np.ndarray] = []
    bmask = partition.boundary
    for m in range(partition.n_subsets):
        Im = np.flatnonzero((partition.labels == m) & ~bmask)
        if Im.size == 0:
            continue
        blocks.append(block_spec(problem, m, Im, bmask, posB, w))
        internal_ids.append(Im)
    return blocks, internal_ids
