"""Zero tails of Model 3 (``chain``): leaf cells fixed at 0 outside the LPs, multipliers in closed form.

At census scale most leaf chains are 0 from some size on (c_s^l = 0 for s >= t_l), and a
windowed LP over those millions of cells is what does not fit. A *zero tail* is such a suffix
taken out of the LP: its cells get the window [0, 0] (no segment column) and the Lagrange
multipliers of the rows that only touch fixed cells are completed here, in closed form, so the
Lagrangian certificate (:func:`.certificate.check_certificate`) still covers every cell of the domain. The
certificate decides; this module only proposes tails and multipliers, so a bad proposal costs a
round (the failing tails are shortened), never a wrong release.

Notation (0-based sizes s = 0..N-1; ``mu[l, s]`` is the multiplier of c_s^l - c_{s+1}^l >= 0,
``lam[r, s]`` that of the consistency row of internal region r at size s). A cell at value 0 has
only the upward test 2(0 - y) + 1 - g >= 0, i.e. ``g <= b := 1 - 2y`` with
``g = lam[r, s] - lam[parent r, s]`` (internal) or ``-lam[parent l, s] + mu[l, s] - mu[l, s-1]``
(leaf).

* An internal region r is fixed at size s when all its leaf descendants are (then C7 forces
  c_s^r = 0). Its test only bounds ``lam[r, s]`` from above, and a larger ``lam[r, s]`` only helps
  its children, so ``lam[r, s] = b[r, s] + lam[parent r, s]`` (parents first) is the best choice.
* A leaf tail [t, N): with ``h_s = b[l, s] + lam[parent l, s]`` the tests read
  ``mu_s <= mu_{s-1} + h_s`` (s < N-1) and ``0 <= mu_{N-2} + h_{N-1}``, with ``mu_s >= 0``;
  all rows inside a zero tail are tight, so complementary slackness allows any ``mu_s >= 0``. The
  largest choice ``mu_s = max(0, mu_{s-1} + h_s)`` (starting from the LP's multiplier of the
  boundary row t-1) satisfies all of them iff every partial sum ``mu_{t-1} + h_t + ... + h_s``
  is >= 0 -- the optimality condition of a zero suffix in isotonic regression.
* Proposal (``ladder_starts``): the smallest t such that the centre is 0 on [t, N) and the
  partial sums of ``h`` from t are all >= 0 (with the multipliers known so far, 0 at first).
"""

from __future__ import annotations

import numpy as np

from securelp.solvers.hierarchy.model import Hierarchy

__all__ = ["complete_multipliers", "fixed_cells", "ladder_starts", "restart_after"]


def _ladder_ok(h: np.ndarray, center_zero: np.ndarray) -> np.ndarray:
    """``ok[l, t]``: the centre is 0 on [t, N) and every partial sum of h from t is >= 0 (t in 0..N-1)."""
    n_leaves, n = h.shape
    s0 = np.zeros((n_leaves, n + 1), dtype=h.dtype)
    np.cumsum(h, axis=1, out=s0[:, 1:])
    # suffix minimum of s0 over indices >= t + 1
    sufmin = np.minimum.accumulate(s0[:, ::-1], axis=1)[:, ::-1]
    zsuf = np.flip(np.logical_and.accumulate(np.flip(center_zero, axis=1), axis=1), axis=1)
    return zsuf & (s0[:, :n] <= sufmin[:, 1:])


def _leaf_h(hier: Hierarchy, y: np.ndarray, lam: np.ndarray | None, scale: int = 1) -> np.ndarray:
    """``scale * (1 - 2y) + lam[parent]`` per leaf cell (``lam`` already scaled)."""
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    b = scale * (1 - 2 * np.asarray(y)[leaves])
    if lam is not None:
        b = b + np.asarray(lam)[np.asarray(hier.parent, dtype=np.int64)[leaves]]
    return b


def ladder_starts(hier: Hierarchy, y: np.ndarray, center: np.ndarray, lam: np.ndarray | None = None) -> np.ndarray:
    """Proposed tail start ``t_l`` per leaf (in ``hier.leaves`` order; N = no tail)."""
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    n = np.asarray(y).shape[1]
    ok = _ladder_ok(_leaf_h(hier, y, lam), np.asarray(center)[leaves] == 0)
    return np.where(ok.any(axis=1), ok.argmax(axis=1), n).astype(np.int64)


def restart_after(hier: Hierarchy, y: np.ndarray, center: np.ndarray, lam: np.ndarray, starts: np.ndarray,
                  failing_leaf_size: np.ndarray) -> np.ndarray:
    """New tail starts after the certificate failed at fixed leaf cells.

    ``failing_leaf_size[j]`` is the largest failing size of leaf j (-1: none). A failing leaf's tail
    restarts at the first ladder point after that size, with the current multipliers.
    """
    n = np.asarray(y).shape[1]
    out = np.asarray(starts, dtype=np.int64).copy()
    bad = np.flatnonzero(failing_leaf_size >= 0)
    if bad.size == 0:
        return out
    ok = _ladder_ok(_leaf_h(hier, y, lam), np.asarray(center)[np.asarray(hier.leaves, dtype=np.int64)] == 0)
    cols = np.arange(n)
    for j in bad:
        cand = np.flatnonzero(ok[j] & (cols > failing_leaf_size[j]))
        out[j] = int(cand[0]) if cand.size else n
    return out


def fixed_cells(hier: Hierarchy, starts: np.ndarray, n_sizes: int) -> np.ndarray:
    """Boolean regions x sizes: leaf cells at sizes >= their start, internal cells whose leaves all are.

    The root's size-1 cell (fixed at G by C6) is never marked.
    """
    par = np.asarray(hier.parent, dtype=np.int64)
    t = np.zeros(hier.size, dtype=np.int64)
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    t[leaves] = starts
    for r in reversed(range(1, hier.size)):  # children after parents: bottom-up maximum
        t[par[r]] = max(t[par[r]], t[r])
    fixed = np.arange(n_sizes)[None, :] >= t[:, None]
    fixed[0, 0] = False
    return fixed


def complete_multipliers(hier: Hierarchy, y: np.ndarray, fixed: np.ndarray, lam: np.ndarray,
                         mu: np.ndarray, scale: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Multipliers of the rows inside zero tails (module docstring); the others are kept.

    ``lam`` is regions x N, ``mu`` regions x (N - 1) (leaf rows used), as in :func:`.certificate.check_certificate`;
    with ``scale`` D both hold D times the multipliers (so half-integral duals stay integers).
    Integer inputs give integer outputs.
    """
    y = np.asarray(y)
    lam = np.array(lam, copy=True)
    mu = np.array(mu, copy=True)
    par = np.asarray(hier.parent, dtype=np.int64)
    for r in hier.internal:  # parents first
        f = fixed[r]
        if f.any():
            base = scale * (1 - 2 * y[r]) + (lam[par[r]] if par[r] >= 0 else 0)
            lam[r, f] = base[f]
    n = y.shape[1]
    if n < 2:
        return lam, mu
    leaves = np.asarray(hier.leaves, dtype=np.int64)
    h = _leaf_h(hier, y, lam, scale)
    fl = fixed[leaves]
    starts = np.where(fl.any(axis=1), fl.argmax(axis=1), n)
    zero = np.zeros(leaves.size, dtype=mu.dtype)
    prev = zero
    for s in range(n - 1):
        inside = starts <= s
        if inside.any():
            cur = np.maximum(zero, prev + h[:, s])
            mu[leaves[inside], s] = cur[inside]
        prev = mu[leaves, s]
    return lam, mu
