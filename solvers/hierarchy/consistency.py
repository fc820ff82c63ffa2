"""The constraints every PGSR post-processing shares, and the checks of its outputs.

Fioretto, Van Hentenryck, Zhu (AIJ 2021). Model 1 (counts x, noisy counts y):

    minimise sum_{r,s} (x_s^r - y_s^r)^2   s.t. (H1) sum_{c child of r} x_s^c = x_s^r,
    (H2) sum_s x_s^root = G, (H3) x >= 0, (H4) x integer.

Model 3 (cumulative counts c, noisy cumulative counts ct; :mod:`.model` for the convention):

    minimise sum_{r,s} (c_s^r - ct_s^r)^2   s.t. (C6) c_1^root = G, (C7) c_s^r = sum_{child q} c_s^q,
    (C8) c_s^r >= c_{s+1}^r, (C9) c_N^r >= 0, (C10) c integer.

Here: the rows of H1/C7 and C8 as sparse matrices (variables indexed r * N + s), the closed-form
least-squares projection onto H1 (+ H2) on a tree, the feasibility checks of a release, and the
squared distance that every mechanism reports as its objective.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError, VerificationError
from securelp.solvers.hierarchy.model import Hierarchy


def check_noisy_inputs(hier: Hierarchy, y: np.ndarray, total: int) -> None:
    """InputError unless ``y`` is a finite regions x sizes array and G a non-negative integer."""
    if y.ndim != 2 or y.shape[0] != hier.size:
        raise InputError(f"noisy values must be regions x sizes, got shape {y.shape}")
    if int(total) != total or total < 0:
        raise InputError(f"the public total G must be a non-negative integer, got {total}")
    if not np.all(np.isfinite(y)):
        raise InputError("noisy values must be finite")


def consistency_rows(hier: Hierarchy, n_sizes: int) -> sp.csr_matrix:
    """Rows x_{r,s} - sum_c x_{c,s} = 0 for internal r (H1 / C7; variables indexed r*N + s)."""
    rows, cols, vals = [], [], []
    k = 0
    s = np.arange(n_sizes)
    for r in hier.internal:
        row_ids = k + s
        rows.append(row_ids)
        cols.append(r * n_sizes + s)
        vals.append(np.ones(n_sizes))
        for c in hier.children[r]:
            rows.append(row_ids)
            cols.append(c * n_sizes + s)
            vals.append(-np.ones(n_sizes))
        k += n_sizes
    if not rows:
        return sp.csr_matrix((0, hier.size * n_sizes))
    return sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(k, hier.size * n_sizes)
    )


def monotone_rows(n_regions: int, n_sizes: int) -> sp.csr_matrix:
    """Rows c_{r,s} - c_{r,s+1} >= 0 (C8)."""
    if n_sizes < 2:
        return sp.csr_matrix((0, n_regions * n_sizes))
    r, s = np.meshgrid(np.arange(n_regions), np.arange(n_sizes - 1), indexing="ij")
    base = (r * n_sizes + s).ravel()
    m = base.size
    rows = np.concatenate([np.arange(m), np.arange(m)])
    cols = np.concatenate([base, base + 1])
    vals = np.concatenate([np.ones(m), -np.ones(m)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(m, n_regions * n_sizes))


def model3_constraints(hier: Hierarchy, n_sizes: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Rows of C7 and C8 with their bounds."""
    cons = consistency_rows(hier, n_sizes)
    mono = monotone_rows(hier.size, n_sizes)
    a = sp.vstack([cons, mono]).tocsr()
    lower = np.concatenate([np.zeros(cons.shape[0]), np.zeros(mono.shape[0])])
    upper = np.concatenate([np.zeros(cons.shape[0]), np.full(mono.shape[0], np.inf)])
    return a, lower, upper


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


def squared_distance(x: np.ndarray, y: np.ndarray) -> float:
    """sum (x - y)^2, exact for integer inputs (Python integers), float otherwise."""
    if np.issubdtype(np.asarray(y).dtype, np.integer) and np.issubdtype(np.asarray(x).dtype, np.integer):
        d = np.asarray(x, dtype=np.int64) - np.asarray(y, dtype=np.int64)
        if np.abs(d).max(initial=0) < 2**31:
            return float(int(np.sum(d * d, dtype=np.int64)))
        return float(sum(int(v) * int(v) for v in d.ravel()))
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    return float(np.sum(d * d))


def check_model1_feasible(hier: Hierarchy, x: np.ndarray, total: int) -> None:
    """Raise VerificationError unless x satisfies H1-H4."""
    if np.any(x < 0):
        raise VerificationError("release has negative counts")
    for r in hier.internal:
        if np.any(x[list(hier.children[r])].sum(axis=0) != x[r]):
            raise VerificationError(f"release is inconsistent at region {hier.ids[r]!r}")
    if int(x[0].sum()) != int(total):
        raise VerificationError(f"release root total {int(x[0].sum())} != G = {total}")


def model3_feasible(hier: Hierarchy, cum: np.ndarray, total: int) -> bool:
    """Whether integer cumulative counts satisfy C6-C9 (C8 at every region)."""
    if int(cum[0, 0]) != int(total) or np.any(cum < 0):
        return False
    if np.any(np.diff(cum, axis=1) > 0):
        return False
    for r in hier.internal:
        if np.any(cum[list(hier.children[r])].sum(axis=0) != cum[r]):
            return False
    return True
