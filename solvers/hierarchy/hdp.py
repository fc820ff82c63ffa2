"""Exact dynamic programming for Model 1 (M_H^dp) with a certified domain.

Model 1 (Fioretto, Van Hentenryck, Zhu, AIJ 2021), for noisy counts y_s^r:

    minimise   sum_{r, s} (x_s^r - y_s^r)^2
    (H1)       sum_{c child of r} x_s^c = x_s^r     for every internal r and size s
    (H2)       sum_s x_s^root = G                   (public number of groups)
    (H3, H4)   x_s^r >= 0 integer.

Cost tables (Algorithm 1). For a node r and size s let C_r(v) be the least cost of r's
subtree when x_s^r = v. Every C_r is discrete convex, so it is stored as its value range
[lo, hi] and its slopes d_r[k] = C_r(lo+k+1) - C_r(lo+k), an increasing sequence. A leaf has
d[k] = 2(lo + k - y) + 1. The infimal convolution of the children's tables (their values
summing to v) has as slopes the children's slopes merged in increasing order; adding
(v - y_r)^2 adds 2(v - y_r) + 1 slope by slope. At the root the G cheapest slopes over all
sizes are chosen (H2); going down, a parent's value is split by taking the cheapest merged
slopes, each child receiving as many units as it contributed.

Exactness (our certificate; the paper truncates to y +- 3 variances, a heuristic). The
objective is a laminar convex function of the leaf variables (the sets "leaves of r, size
s" and the whole set form a laminar family), hence M-natural-convex, and with H2 it is
M-convex (Murota, *Discrete Convex Analysis*, SIAM 2003, Sec. 6.3 and Thm 6.26): a
feasible point that no single exchange x - e_u + e_v improves is a global minimum. We run
the DP on windows [lo, hi] per node (centred on a feasible point) and
obtain the exact optimum of the windowed problem. If no node's value sits on an
artificial window bound (a lower bound > 0, or an upper bound < G), every exchange move
stays inside the windows, so the windowed optimum is exchange-optimal for the unrestricted
problem and therefore globally optimal. Otherwise the windows of the sizes concerned are
widened (x4) and the DP re-run; windows of width >= G are the whole domain, so the loop
ends. Independently, ``exchange_optimality_gap`` re-checks the returned point by computing
the best exchange move in O(regions x sizes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import VerificationError
from securelp.solvers.hierarchy.baselines import topdown
from securelp.solvers.hierarchy.consistency import check_model1_feasible, check_noisy_inputs, squared_distance
from securelp.solvers.hierarchy.errors import TableLimitError, check_option
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.resources import available_memory, memory_shortfall

logger = logging.getLogger(__name__)

#: Peak bytes per table cell held, measured on a 3-region hierarchy with noise near 1e15 (25 M cells
#: 0.73 GB, 50 M 1.32 GB, 101 M 3.9 GB of peak RSS): the tables a round holds must fit in
#: ``HdpOptions.table_memory_share`` of the memory available.
BYTES_PER_TABLE_CELL = 40


@dataclass(frozen=True)
class HdpOptions:
    """Tunables of the exact Model 1 DP (``hdp``, and ``cdp`` after Algorithm 2).

    Attributes
    ----------
    initial_halfwidth:
        Starting window half-width around the TopDown point (then re-centred and widened x4 as needed).
    batch_memory_bytes:
        Memory budget of one batch of merge arrays (sizes are processed in batches).
    max_table_cells:
        Most slope cells (regions x sizes x window) one round may hold (TableLimitError above).
    table_memory_share:
        Share of the available memory the tables of a round may hold (TableLimitError above).
    """

    initial_halfwidth: int = 16
    batch_memory_bytes: int = 1 << 30
    max_table_cells: int = 1_500_000_000
    table_memory_share: float = 0.7

    def __post_init__(self) -> None:
        check_option(self, "initial_halfwidth", self.initial_halfwidth >= 1, "an integer >= 1")
        check_option(self, "batch_memory_bytes", self.batch_memory_bytes >= 1, "a positive number of bytes")
        check_option(self, "max_table_cells", self.max_table_cells >= 1, "a positive integer")
        check_option(self, "table_memory_share", 0 < self.table_memory_share <= 1, "in (0, 1]")


@dataclass(frozen=True)
class DPResult:
    """Result of the exact Model 1 DP.

    Attributes
    ----------
    x:
        Optimal counts (regions x sizes, int64).
    objective:
        sum (x - y)^2 at x.
    rounds:
        DP rounds (1 + number of widenings).
    max_halfwidth:
        Largest window half-width used.
    exchange_gap:
        Best exchange improvement found by the independent check (>= 0 means optimal).
    """

    x: np.ndarray
    objective: float
    rounds: int
    max_halfwidth: int
    exchange_gap: float


class _Windows:
    """Per-size window DP for a batch of sizes with one common half-width."""

    def __init__(self, hier: Hierarchy, y: np.ndarray, center: np.ndarray, total: int, h: int) -> None:
        self.hier = hier
        self.y = y  # regions x batch (float64)
        self.total = total
        self.m = 2 * h  # slopes per node (window of 2h+1 values)
        self.lo_own = np.clip(np.clip(np.rint(center), 0, total) - h, 0, total).astype(np.int64)
        self.lo = self.lo_own.copy()  # effective lower ends (filled bottom-up)
        self.slopes: dict[int, np.ndarray] = {}

    def subset(self, keep: np.ndarray) -> _Windows:
        """The same tables restricted to the batch columns ``keep`` (a boolean mask)."""
        out = _Windows.__new__(_Windows)
        out.hier = self.hier
        out.y = self.y[:, keep]
        out.total = self.total
        out.m = self.m
        out.lo_own = self.lo_own[:, keep]
        out.lo = self.lo[:, keep]
        out.slopes = {r: d[keep] for r, d in self.slopes.items()}
        return out

    def leaf_slopes(self, r: int) -> np.ndarray:
        lo = self.lo[r]
        v = lo[:, None] + np.arange(self.m)[None, :]
        d = 2.0 * (v - self.y[r][:, None]) + 1.0
        d[v + 1 > self.total] = np.inf
        return d

    def node_slopes(self, r: int) -> np.ndarray:
        return self.slopes[r] if self.hier.children[r] else self.leaf_slopes(r)

    def bottom_up(self) -> None:
        hier = self.hier
        for r in reversed(range(hier.size)):
            kids = list(hier.children[r])
            if not kids:
                continue
            merged = np.sort(np.concatenate([self.node_slopes(c) for c in kids], axis=1), axis=1)
            a = self.lo[kids].sum(axis=0)
            finite = np.isfinite(merged).sum(axis=1)
            b = a + finite
            lo = np.maximum(self.lo_own[r], a)
            lo = np.where(lo > b, np.maximum(a, b - self.m), lo)
            lo = np.maximum(np.minimum(lo, self.total), a)
            self.lo[r] = lo
            idx = (lo - a)[:, None] + np.arange(self.m)[None, :]
            inside = idx < merged.shape[1]
            take = np.take_along_axis(merged, np.minimum(idx, merged.shape[1] - 1), axis=1)
            take[~inside] = np.inf
            v = lo[:, None] + np.arange(self.m)[None, :]
            d = take + 2.0 * (v - self.y[r][:, None]) + 1.0
            d[v + 1 > self.total] = np.inf
            self.slopes[r] = d
            # children slopes no longer needed once merged, except for the top-down split

    def top_down(self, root_value: np.ndarray) -> np.ndarray:
        hier = self.hier
        x = np.zeros((hier.size, root_value.size), dtype=np.int64)
        x[0] = root_value
        for r in range(hier.size):
            kids = list(hier.children[r])
            if not kids:
                continue
            cat = np.concatenate([self.node_slopes(c) for c in kids], axis=1)
            a = self.lo[kids].sum(axis=0)
            t = x[r] - a
            order = np.argsort(cat, axis=1, kind="stable")
            chosen = np.zeros(cat.shape, dtype=bool)
            pick = np.arange(cat.shape[1])[None, :] < t[:, None]
            np.put_along_axis(chosen, order, pick, axis=1)
            per_child = chosen.reshape(cat.shape[0], len(kids), self.m).sum(axis=2)
            x[kids] = self.lo[kids] + per_child.T
        return x

    def flags(self, x: np.ndarray) -> np.ndarray:
        """Per size: True if some node sits on an artificial window bound."""
        bad = np.zeros(x.shape[1], dtype=bool)
        for r in range(self.hier.size):
            d = self.node_slopes(r)
            lo = self.lo[r]
            hi = lo + np.isfinite(d).sum(axis=1)
            bad |= (x[r] == lo) & (lo > 0)
            bad |= (x[r] == hi) & (hi < self.total)
        return bad


def _select_root(
    lows: np.ndarray, slopes: list[np.ndarray], owners: list[np.ndarray], total: int, n_sizes: int
) -> tuple[np.ndarray | None, np.ndarray]:
    """Choose root values: lo_s plus the (G - sum lo) cheapest root slopes over all sizes.

    Returns (values or None, sizes to widen).
    """
    need = total - int(lows.sum())
    flat = np.concatenate([s.ravel() for s in slopes]) if slopes else np.zeros(0)
    own = np.concatenate([o.ravel() for o in owners]) if owners else np.zeros(0, dtype=np.int64)
    finite = np.isfinite(flat)
    if need < 0:
        return None, lows > 0
    if need > int(finite.sum()):
        counts = np.bincount(own[finite], minlength=n_sizes)
        return None, (lows + counts) < total
    flat_f = flat[finite]
    own_f = own[finite]
    order = np.argsort(flat_f, kind="stable")[:need]
    add = np.bincount(own_f[order], minlength=n_sizes)
    return lows + add, np.zeros(n_sizes, dtype=bool)


class _WindowedDP:
    """The rounds of the windowed DP over all sizes (:func:`solve_model1`).

    Sizes are processed in batches of one common half-width; a round rebuilds the bottom-up
    tables of the sizes widened in the last round (``stale``) only, and redoes the top-down split
    only of the sizes whose root value changed.
    """

    def __init__(self, hier: Hierarchy, yf: np.ndarray, total: int, options: HdpOptions) -> None:
        self.hier, self.yf, self.total, self.options = hier, yf, total, options
        n_sizes = yf.shape[1]
        self.n_sizes = n_sizes
        # a feasible integer point as the first window centre (TopDown); windows around a feasible
        # point always contain it, so the windowed problem is feasible in every round
        self.center = topdown(hier, yf, total).astype(np.float64)
        self.half = np.full(n_sizes, max(1, int(options.initial_halfwidth)), dtype=np.int64)
        self.max_children = max((len(c) for c in hier.children), default=1)
        self.batches: list[tuple[np.ndarray, _Windows]] = []
        self.stale = np.ones(n_sizes, dtype=bool)
        self.x = np.zeros((hier.size, n_sizes), dtype=np.int64)
        self.cached_root = np.full(n_sizes, -1, dtype=np.int64)
        self.cached_flags = np.zeros(n_sizes, dtype=bool)
        self.stale_td = np.ones(n_sizes, dtype=bool)

    def solve(self) -> tuple[np.ndarray, int]:
        """The optimum and the number of rounds."""
        rounds = 0
        while True:
            rounds += 1
            self._keep_fresh_batches()
            self._build_stale_tables()
            root, widen = self._choose_root()
            if root is not None:
                widen = self._split_down(root)
                if not widen.any():
                    return self.x, rounds
            widen &= self.half <= self.total
            if not widen.any():  # pragma: no cover - windows already span [0, G]
                raise VerificationError("Model 1 DP: window certificate failed with full windows")
            logger.info("hdp round %d: widening %d of %d sizes", rounds, int(widen.sum()), self.n_sizes)
            if root is not None:
                self.center[:, widen] = self.x[:, widen]  # re-centre on the windowed optimum (trust region)
            self.half = np.where(widen, self.half * 4, self.half)
            self.stale = widen
            self.stale_td |= widen

    def _keep_fresh_batches(self) -> None:
        kept: list[tuple[np.ndarray, _Windows]] = []
        for idx, w in self.batches:
            keep = ~self.stale[idx]
            if keep.all():
                kept.append((idx, w))
            elif keep.any():
                kept.append((idx[keep], w.subset(keep)))
        self.batches = kept

    def _build_stale_tables(self) -> None:
        """The bottom-up tables of the stale sizes, in batches of equal half-width."""
        hier, options = self.hier, self.options
        for h in np.unique(self.half[self.stale]).tolist():
            h_eff = int(min(h, self.total + 1))
            sizes = np.nonzero(self.stale & (self.half == h))[0]
            cells = hier.size * sizes.size * 2 * h_eff
            if cells > options.max_table_cells:
                raise TableLimitError(h_eff, int(sizes.size), cells, limit=options.max_table_cells)
            held = cells + sum(hier.size * i.size * w.m for i, w in self.batches)
            short = memory_shortfall(held * BYTES_PER_TABLE_CELL, available_memory(), options.table_memory_share)
            if short:
                raise TableLimitError(h_eff, int(sizes.size), held, shortfall=short)
            per_size = max(1, 3 * 8 * self.max_children * 2 * h_eff)
            batch = max(1, int(options.batch_memory_bytes // per_size))
            for k in range(0, sizes.size, batch):
                idx = sizes[k : k + batch]
                w = _Windows(hier, self.yf[:, idx], self.center[:, idx], self.total, h_eff)
                w.bottom_up()
                self.batches.append((idx, w))

    def _choose_root(self) -> tuple[np.ndarray | None, np.ndarray]:
        lows = np.zeros(self.n_sizes, dtype=np.int64)
        slopes: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        for idx, w in self.batches:
            lows[idx] = w.lo[0]
            d = w.node_slopes(0)
            slopes.append(d)
            owners.append(np.broadcast_to(idx[:, None], d.shape))
        return _select_root(lows, slopes, owners, self.total, self.n_sizes)

    def _split_down(self, root: np.ndarray) -> np.ndarray:
        """Split the root values down the tree (sizes whose root value changed); the sizes to widen."""
        widen = np.zeros(self.n_sizes, dtype=bool)
        for idx, w in self.batches:
            changed = (self.cached_root[idx] != root[idx]) | self.stale_td[idx]
            if changed.all():
                xb = w.top_down(root[idx])
                self.x[:, idx] = xb
                widen[idx] = w.flags(xb)
            elif changed.any():
                sub = w.subset(changed)
                xb = sub.top_down(root[idx[changed]])
                self.x[:, idx[changed]] = xb
                widen[idx[changed]] = sub.flags(xb)
                widen[idx[~changed]] = self.cached_flags[idx[~changed]]
            else:
                widen[idx] = self.cached_flags[idx]
        self.cached_root = root.copy()
        self.cached_flags = widen.copy()
        self.stale_td = np.zeros(self.n_sizes, dtype=bool)
        return widen


def solve_model1(hier: Hierarchy, y: np.ndarray, total: int, options: HdpOptions = HdpOptions()) -> DPResult:
    """Exact optimum of Model 1 (H1-H4) by the windowed cost-table DP with certificate.

    Parameters
    ----------
    hier:
        The hierarchy.
    y:
        Noisy counts, regions x sizes (integers or reals).
    total:
        G, the public number of groups.
    options:
        The DP's tunables (:class:`HdpOptions`).

    Raises
    ------
    InputError
        Shapes or G invalid.
    TableLimitError
        The windows needed would not fit the table-cell limit or the memory.
    VerificationError
        The independent optimality check failed (a bug, never expected).
    """
    y = np.asarray(y)
    check_noisy_inputs(hier, y, total)
    total = int(total)
    yf = y.astype(np.float64)
    dp = _WindowedDP(hier, yf, total, options)
    x, rounds = dp.solve()
    objective = squared_distance(x, y)
    gap = exchange_optimality_gap(hier, x, yf)
    tol = 1e-9 * max(1.0, float(np.abs(yf).max(initial=0.0)))
    check_model1_feasible(hier, x, total)
    if gap < -tol:
        raise VerificationError(f"Model 1 DP: an exchange move improves the result by {-gap}")
    return DPResult(x=x, objective=objective, rounds=rounds, max_halfwidth=int(dp.half.max()), exchange_gap=float(gap))


def _min_pair(best_inc: np.ndarray, best_dec: np.ndarray) -> np.ndarray:
    """min over c1 != c2 of best_inc[c1] + best_dec[c2], column-wise (rows = candidates)."""
    k = best_inc.shape[0]
    if k < 2:
        return np.full(best_inc.shape[1:], np.inf)
    cols = np.arange(best_inc.shape[1])
    i1 = np.argmin(best_inc, axis=0)
    d1 = np.argmin(best_dec, axis=0)
    inc_sorted = np.sort(best_inc, axis=0)
    dec_sorted = np.sort(best_dec, axis=0)
    same = i1 == d1
    a = best_inc[i1, cols] + best_dec[d1, cols]
    b = np.minimum(inc_sorted[0] + dec_sorted[1], inc_sorted[1] + dec_sorted[0])
    return np.where(same, b, a)


def exchange_optimality_gap(hier: Hierarchy, x: np.ndarray, y: np.ndarray) -> float:
    """The most negative change of sum (x - y)^2 over all single exchanges x - e_u + e_v.

    u and v range over (leaf, size) cells with x_u >= 1; each exchange changes the counts of
    the regions on u's path and v's path below their lowest common ancestor (or the whole
    paths when the sizes differ). Returns min(0-or-more) value; negative means not optimal.
    """
    xf = x.astype(np.float64)
    yf = np.asarray(y, dtype=np.float64)
    inc = 2.0 * (xf - yf) + 1.0
    dec = 1.0 - 2.0 * (xf - yf)
    dec = np.where(xf >= 1, dec, np.inf)
    best_inc = inc.copy()
    best_dec = dec.copy()
    worst = np.inf
    for r in reversed(range(hier.size)):
        kids = list(hier.children[r])
        if not kids:
            continue
        bi = best_inc[kids]
        bd = best_dec[kids]
        worst = min(worst, float(_min_pair(bi, bd).min(initial=np.inf)))
        best_inc[r] = inc[r] + bi.min(axis=0)
        best_dec[r] = dec[r] + bd.min(axis=0)
    worst = min(worst, float(_min_pair(best_inc[0][:, None], best_dec[0][:, None]).min(initial=np.inf)))
    return worst if np.isfinite(worst) else 0.0
