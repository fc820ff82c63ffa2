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

from securelp.solvers.errors import InputError, ResourceError, VerificationError
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.resources import available_memory, memory_shortfall

logger = logging.getLogger(__name__)

#: Bytes the DP may use for one batch of merge arrays.
DEFAULT_MEMORY_BYTES = 1 << 30
#: Largest number of slope cells (regions x sizes x window) accepted in one round.
MAX_TABLE_CELLS = 1_500_000_000
#: peak bytes per table cell held (measured at stop 47 on a 3-region hierarchy with noise near 1e15:
#: 25 M cells 0.73 GB, 50 M 1.32 GB, 101 M 3.9 GB of peak RSS); the tables a round holds must fit in
#: :data:`TABLE_MEMORY_SHARE` of the memory available. Until stop 47 only MAX_TABLE_CELLS bounded
#: them, and such a run grew to 20.5 GB before it was refused
BYTES_PER_TABLE_CELL = 40
TABLE_MEMORY_SHARE = 0.7


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
    certified:
        True when the M-convex exchange certificate held (always, unless an error is raised).
    exchange_gap:
        Best exchange improvement found by the independent check (>= 0 means optimal).
    """

    x: np.ndarray
    objective: float
    rounds: int
    max_halfwidth: int
    certified: bool
    exchange_gap: float


def least_squares_consistent(hier: Hierarchy, y: np.ndarray, total: float | None) -> np.ndarray:
    """Least-squares consistent estimate (no sign or integrality constraint).

    Minimises sum (x - y)^2 subject to H1 (and H2 when ``total`` is given) in closed form:
    each subtree's cost is a(v - m)^2 + const, combined bottom-up (harmonic sum of the
    children's curvatures, then plus the node's own term) and split top-down in proportion
    to 1/a (Hay, Rastogi, Miklau, Suciu, VLDB 2010, generalised to any tree).
    """
    y = np.asarray(y, dtype=np.float64)
    a = np.ones_like(y)
    m = y.copy()
    for r in reversed(range(hier.size)):
        kids = list(hier.children[r])
        if not kids:
            continue
        inv = (1.0 / a[kids]).sum(axis=0)
        big_a = 1.0 / inv
        big_m = m[kids].sum(axis=0)
        a[r] = 1.0 + big_a
        m[r] = (y[r] + big_a * big_m) / a[r]
    x = np.empty_like(y)
    if total is None:
        x[0] = m[0]
    else:
        inv_root = 1.0 / a[0]
        lam = (float(total) - m[0].sum()) / inv_root.sum()
        x[0] = m[0] + lam * inv_root
    for r in range(hier.size):
        kids = list(hier.children[r])
        if not kids:
            continue
        inv = 1.0 / a[kids]
        x[kids] = m[kids] + (x[r] - m[kids].sum(axis=0)) * inv / inv.sum(axis=0)
    return x


def _check_inputs(hier: Hierarchy, y: np.ndarray, total: int) -> None:
    if y.ndim != 2 or y.shape[0] != hier.size:
        raise InputError(f"noisy values must be regions x sizes, got shape {y.shape}")
    if int(total) != total or total < 0:
        raise InputError(f"the public total G must be a non-negative integer, got {total}")
    if not np.all(np.isfinite(y)):
        raise InputError("noisy values must be finite")


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


def solve_model1(
    hier: Hierarchy,
    y: np.ndarray,
    total: int,
    *,
    initial_halfwidth: int = 16,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    verify: bool = True,
) -> DPResult:
    """Exact optimum of Model 1 (H1-H4) by the windowed cost-table DP with certificate.

    Parameters
    ----------
    hier:
        The hierarchy.
    y:
        Noisy counts, regions x sizes (integers or reals).
    total:
        G, the public number of groups.
    initial_halfwidth:
        Starting window half-width around the TopDown point (then re-centred and widened x4 as needed).
    memory_bytes:
        Memory budget for one batch of merge arrays (sizes are processed in batches).
    verify:
        Re-check the result with the independent exchange-optimality test.

    Raises
    ------
    InputError
        Shapes or G invalid.
    ResourceError
        The windows needed would not fit the table-cell limit.
    VerificationError
        The independent optimality check failed (a bug, never expected).
    """
    y = np.asarray(y)
    _check_inputs(hier, y, total)
    total = int(total)
    n_sizes = y.shape[1]
    yf = y.astype(np.float64)
    # a feasible integer point as the first window centre (TopDown); windows around a feasible
    # point always contain it, so the windowed problem is feasible in every round
    from securelp.solvers.hierarchy.baselines import topdown

    center = topdown(hier, yf, total).astype(np.float64)
    half = np.full(n_sizes, max(1, int(initial_halfwidth)), dtype=np.int64)
    max_children = max((len(c) for c in hier.children), default=1)
    batches: list[tuple[np.ndarray, _Windows]] = []
    stale = np.ones(n_sizes, dtype=bool)
    x = np.zeros((hier.size, n_sizes), dtype=np.int64)
    cached_root = np.full(n_sizes, -1, dtype=np.int64)
    cached_flags = np.zeros(n_sizes, dtype=bool)
    stale_td = np.ones(n_sizes, dtype=bool)
    rounds = 0
    x_final: np.ndarray | None = None
    while True:
        rounds += 1
        kept: list[tuple[np.ndarray, _Windows]] = []
        for idx, w in batches:
            keep = ~stale[idx]
            if keep.all():
                kept.append((idx, w))
            elif keep.any():
                kept.append((idx[keep], w.subset(keep)))
        batches = kept
        # (re)compute the bottom-up tables of stale sizes, in batches of equal half-width
        for h in np.unique(half[stale]).tolist():
            h_eff = int(min(h, total + 1))
            sizes = np.nonzero(stale & (half == h))[0]
            cells = hier.size * sizes.size * 2 * h_eff
            if cells > MAX_TABLE_CELLS:
                raise ResourceError(
                    f"the exact DP needs windows of half-width {h_eff} for {sizes.size} sizes "
                    f"({cells:,} table cells > {MAX_TABLE_CELLS:,}); the noise is too large for this "
                    f"hierarchy/total at this memory limit"
                )
            held = cells + sum(hier.size * i.size * w.m for i, w in batches)
            if short := memory_shortfall(held * BYTES_PER_TABLE_CELL, available_memory(), TABLE_MEMORY_SHARE):
                raise ResourceError(
                    f"the exact DP needs windows of half-width {h_eff} for {sizes.size} sizes ({held:,} table "
                    f"cells held): {short}; the noise is too large for this hierarchy/total"
                )
            per_size = max(1, 3 * 8 * max_children * 2 * h_eff)
            batch = max(1, int(memory_bytes // per_size))
            for k in range(0, sizes.size, batch):
                idx = sizes[k : k + batch]
                w = _Windows(hier, yf[:, idx], center[:, idx], total, h_eff)
                w.bottom_up()
                batches.append((idx, w))
        lows = np.zeros(n_sizes, dtype=np.int64)
        slopes: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        for idx, w in batches:
            lows[idx] = w.lo[0]
            d = w.node_slopes(0)
            slopes.append(d)
            owners.append(np.broadcast_to(idx[:, None], d.shape))
        root, widen = _select_root(lows, slopes, owners, total, n_sizes)
        if root is not None:
            widen = np.zeros(n_sizes, dtype=bool)
            for idx, w in batches:
                changed = (cached_root[idx] != root[idx]) | stale_td[idx]
                if changed.all():
                    xb = w.top_down(root[idx])
                    x[:, idx] = xb
                    widen[idx] = w.flags(xb)
                elif changed.any():
                    sub = w.subset(changed)
                    xb = sub.top_down(root[idx[changed]])
                    x[:, idx[changed]] = xb
                    widen[idx[changed]] = sub.flags(xb)
                    widen[idx[~changed]] = cached_flags[idx[~changed]]
                else:
                    widen[idx] = cached_flags[idx]
            cached_root = root.copy()
            cached_flags = widen.copy()
            stale_td = np.zeros(n_sizes, dtype=bool)
            if not widen.any():
                x_final = x
                break
        widen &= half <= total
        if not widen.any():  # pragma: no cover - windows already span [0, G]
            raise VerificationError("Model 1 DP: window certificate failed with full windows")
        logger.info("hdp round %d: widening %d of %d sizes", rounds, int(widen.sum()), n_sizes)
        if root is not None:
            center[:, widen] = x[:, widen]  # re-centre on the windowed optimum (trust region)
            half = np.where(widen, half * 4, half)
        else:  # pragma: no cover - cannot happen with feasible centres
            half = np.where(widen, half * 4, half)
        stale = widen
        stale_td |= widen
    objective = squared_distance(x_final, y)
    gap = exchange_optimality_gap(hier, x_final, yf) if verify else 0.0
    tol = 1e-9 * max(1.0, float(np.abs(yf).max(initial=0.0)))
    if verify:
        check_feasible(hier, x_final, total)
        if gap < -tol:
            raise VerificationError(f"Model 1 DP: an exchange move improves the result by {-gap}")
    return DPResult(
        x=x_final,
        objective=objective,
        rounds=rounds,
        max_halfwidth=int(half.max()),
        certified=True,
        exchange_gap=float(gap),
    )


def squared_distance(x: np.ndarray, y: np.ndarray) -> float:
    """sum (x - y)^2, exact for integer inputs (Python integers), float otherwise."""
    if np.issubdtype(np.asarray(y).dtype, np.integer) and np.issubdtype(np.asarray(x).dtype, np.integer):
        d = np.asarray(x, dtype=np.int64) - np.asarray(y, dtype=np.int64)
        if np.abs(d).max(initial=0) < 2**31:
            return float(int(np.sum(d * d, dtype=np.int64)))
        return float(sum(int(v) * int(v) for v in d.ravel()))
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    return float(np.sum(d * d))


def check_feasible(hier: Hierarchy, x: np.ndarray, total: int) -> None:
    """Raise VerificationError unless x satisfies H1-H4."""
    if np.any(x < 0):
        raise VerificationError("release has negative counts")
    for r in hier.internal:
        if np.any(x[list(hier.children[r])].sum(axis=0) != x[r]):
            raise VerificationError(f"release is inconsistent at region {hier.ids[r]!r}")
    if int(x[0].sum()) != int(total):
        raise VerificationError(f"release root total {int(x[0].sum())} != G = {total}")


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
