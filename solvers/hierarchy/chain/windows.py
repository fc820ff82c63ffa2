"""Where ``chain``'s windows sit: the centre, which cells widen together, and the size blocks.

The centre is a feasible integer Model 3 point near the approximate projection of the noisy
values (Fioretto, Van Hentenryck, Zhu, AIJ 2021, Model 3; :mod:`securelp.solvers.hierarchy.relaxation`)
and stays fixed: :func:`consistent_rounding` splits each parent's rounded chain among its
children top-down, so every cell stays within a few units of the projection. Each cell's window
[centre - d, centre + u] within [0, G] starts small; cells whose check fails widen x4 with
their chain neighbours and ancestors (:func:`spread`), with the rest of their plateau
(:func:`plateaus`), and near a fractional LP point also with their siblings
(:func:`with_siblings`).

Size blocks. If at some size boundary s | s+1 every leaf has c_s^l - c_{s+1}^l >= 1 on the
windows, the LP may be split there: the certificate is checked on the assembled point with
mu = 0 on those rows, which complementary slackness allows because they are slack. So the
sizes are solved in independent blocks (each its own LP), and the check is global. The blocks
are chosen from the first windows (:func:`size_blocks`). When windows widen, a cut is kept as
long as the assembled LP point satisfies the C8 rows it drops (:func:`boundary_violations`):
the blocks' optima are then an optimum of the joined LP with mu = 0 on those rows (a
relaxation's optimum that is feasible); otherwise the two blocks are merged.
"""

from __future__ import annotations

import itertools

import numpy as np

from securelp.solvers.errors import VerificationError
from securelp.solvers.hierarchy.chain.tails import fixed_cells, ladder_starts
from securelp.solvers.hierarchy.model import Hierarchy


def projection_multipliers(hier: Hierarchy, approx: np.ndarray, noisy_cum: np.ndarray) -> np.ndarray:
    """C7 multipliers (regions x sizes, leaf rows 0) read off an approximate projection ``approx``.

    At the projection x of the noisy values onto Model 3's relaxation, an internal cell that is
    not at a bound has g = 2 (x - ct) (stationarity), and g = lam[r] - lam[parent r] there, so
    lam[r] = lam[parent r] + 2 (x_r - ct_r), parents first. Only an estimate (used to propose
    zero tails); nothing is certified with it.
    """
    x = np.asarray(approx, dtype=np.float64)
    y = np.asarray(noisy_cum, dtype=np.float64)
    par = np.asarray(hier.parent, dtype=np.int64)
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
    as rounding the leaves and summing them up (:func:`round_to_feasible`) does: hundreds of
    units at the census root, which puts the optimum far outside the first windows.
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


def centre_and_tails(hier: Hierarchy, y: np.ndarray, total: int, approx: np.ndarray, tail_threshold: float
                     ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The LP centre and first zero tails of the rounds, from the approximate projection ``approx``.

    Tails: :func:`.tails.ladder_starts` on the cells whose projection is below ``tail_threshold``,
    with the C7 multipliers read off the projection (:func:`projection_multipliers`, rounded) for
    the parents' terms. Centre: :func:`consistent_rounding` of the projection, 0 on those tails.
    (None, None) when no such centre exists. Only proposals: the certificate decides, and failing
    tails are shortened by the rounds.
    """
    n_sizes = approx.shape[1]
    if n_sizes < 2:
        return consistent_rounding(hier, approx, total, np.zeros(approx.shape, dtype=bool)), None
    lam = np.rint(projection_multipliers(hier, approx, y))
    if np.issubdtype(np.asarray(y).dtype, np.integer):
        lam = lam.astype(np.int64)
    near_zero = np.where(approx < tail_threshold, 0, 1)
    starts = ladder_starts(hier, y, near_zero, lam)
    center = consistent_rounding(hier, approx, total, fixed_cells(hier, starts, n_sizes))
    return (center, starts) if center is not None else (None, None)


def spread(hier: Hierarchy, cells: np.ndarray) -> np.ndarray:
    """The cells, their chain neighbours (sizes s +- 1) and all their ancestors."""
    out = cells.copy()
    out[:, 1:] |= cells[:, :-1]
    out[:, :-1] |= cells[:, 1:]
    par = np.asarray(hier.parent, dtype=np.int64)
    for r in reversed(range(1, hier.size)):
        out[par[r]] |= out[r]
    return out


def plateaus(cum: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The cells and the rest of their plateaus: the runs of one positive value in their chains.

    A failing cell on a plateau (e.g. one group whose size the noise blurs over hundreds of
    sizes: the chain stays at 1) usually needs the whole run to move: widening only its
    neighbours moves the failure two sizes per round.
    """
    n, k = cum.shape
    starts = np.ones((n, k), dtype=bool)
    starts[:, 1:] = cum[:, 1:] != cum[:, :-1]
    run = np.cumsum(starts.ravel()).reshape(n, k)  # one id per run (every row starts a run)
    hit = np.unique(run[cells & (cum > 0)])
    return cells | np.isin(run, hit)


def with_siblings(hier: Hierarchy, cells: np.ndarray) -> np.ndarray:
    """The cells and the same sizes in the children of every non-root region holding one.

    After :func:`spread` (which holds every ancestor) these are the siblings of the held cells: a
    count can then move between the children of one parent. The root's children are left out
    (a fractional nation cell would free its size in every state).
    """
    par = np.asarray(hier.parent, dtype=np.int64)
    out = cells.copy()
    below_root = np.flatnonzero(par[1:] > 0) + 1  # regions whose parent is not the root
    out[below_root] |= cells[par[below_root]]
    return out


def size_blocks(lo: np.ndarray, hi: np.ndarray, leaves: np.ndarray, min_share: float) -> list[tuple[int, int]]:
    """Split sizes where every leaf's windows make C8 redundant (lo[l, s] >= hi[l, s+1]).

    Blocks with fewer than ``min_share`` of the segment columns (hi - lo) join their larger
    neighbour (``ChainOptions.min_block_share``).
    """
    n_sizes = lo.shape[1]
    if n_sizes == 1:
        return [(0, 1)]
    cut = np.all(lo[leaves, :-1] >= hi[leaves, 1:], axis=0)
    bounds = [0] + [int(s) + 1 for s in np.nonzero(cut)[0]] + [n_sizes]
    per_size = (hi - lo).sum(axis=0)
    floor = min_share * float(per_size.sum())
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


def boundary_violations(x: np.ndarray, blocks: list[tuple[int, int]], leaves: np.ndarray) -> list[int]:
    """Indices j such that some leaf breaks C8 between block j and block j + 1 (c_s < c_{s+1})."""
    return [j for j, (_a, b) in enumerate(blocks[:-1]) if np.any(x[leaves, b - 1] < x[leaves, b] - 1e-9)]
