"""The Linear-Equations (LE) mechanism for local d-privacy and its inversion estimator.

Reference: X. Gu, M. Li, Y. Cao, L. Xiong, "Supporting both Range Queries and
Frequency Estimation with Local Differential Privacy" (IEEE CNS 2019).

Domain ``x_1..x_m`` with metric ``d``; a mechanism is a row-stochastic ``P`` with
``P_jk = Pr[report x_k | true x_j]``; it is ``eps``-d-private (local d-privacy) when
``P_jk <= exp(eps d(x_j, x_l)) P_lk`` for every ``j, l, k``.

**LE.** Put ``E_jk = exp(-eps d_jk)`` and look for ``P_jk = E_jk p_k`` (``p_k = P_kk``,
the "diagonal"). Row sums equal one iff

    E p = 1.                                                              (LE)

If the solution has ``p >= 0`` then ``P = E diag(p)`` is a mechanism and it is
``eps``-d-private *by the triangle inequality*: ``P_jk / P_lk = exp(-eps (d_jk - d_lk))
<= exp(eps d_jl)``. A negative ``p_k`` means LE has no valid mechanism for this
(domain, eps): an :class:`~securelp.solvers.errors.InputError` says so (raise eps or coarsen
the domain).

**Inversion estimator.** With ``N`` users and observed output frequencies ``y``
(``E[y] = P^T c`` for the true frequencies ``c``), the unbiased estimate is
``c_hat = (P^T)^{-1} y``. Since ``P^T = diag(p) E`` (``E`` symmetric),
``c_hat = E^{-1} (y / p)``: one solve with the factorization (or the structured
solver) of ``E`` -- no inverse is ever formed for the estimate.

**Theory.** For a kernel mechanism ``P = diag(a) K diag(b)`` (LE: ``K = E, a = 1, b = p``;
the exponential mechanism: ``K = exp(-eps d / 2), a = 1/Z, b = 1``):

* ``Error_range(r) = sum_j pi_j sum_{k: d_jk > r} P_jk`` -- the probability that a
  user's report lies farther than ``r`` from the true value (Gu Eq. 6, as read here);
* ``MSE_freq = (1/m) E||c_hat - c||^2 = (1/(m N)) (tr(P^{-T} diag(q) P^{-1}) - 1)`` with
  ``q = P^T pi`` (Gu Eq. 20: the variance of the inversion estimator, conditional on the
  users' true values drawn from the prior ``pi``; averaged over the ``m`` items). The
  trace is ``sum_{k,i} (q_k / b_k^2) (K^{-1})_{ki}^2 / a_i^2``.

**Structure.** On a ``R x C`` grid with Euclidean cell-centre distances, ``K`` is
block-Toeplitz with Toeplitz blocks (BTTB): ``K x`` costs two FFTs of size
``2R x 2C``, and ``K x = b`` is solved by preconditioned conjugate gradients (``K`` is
positive definite: ``exp(-lambda ||u - v||)`` is a positive-definite kernel on R^n) with
T. Chan's optimal block-circulant preconditioner. Memory is ``O(m)``, so the LE
mechanism and its estimator on a 100 x 100 grid (m = 10,000) take well under a
second instead of an 800 MB matrix and a 15 s Cholesky factorisation. Small domains
(and every non-grid metric) use a dense Cholesky (LU if ``K`` is not numerically
positive definite). The exact trace needs ``K^{-1}``: dense up to ``DENSE_MAX`` grid cells; above
it a Hutchinson estimate with Rademacher probes, reported with its standard error.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from securelp.solvers.errors import InputError, ResourceError, SolverError, VerificationError
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)

#: largest *grid* handled with dense matrices (Cholesky, explicit P, exact trace); larger
#: grids use the structured BTTB operator. Dataset metrics are always dense.
DENSE_MAX = 400
#: largest *grid* verified with the full all-pairs ``verify_mechanism`` (O(m^3)); larger
#: grids are verified structurally (p >= 0, every row sum, Euclidean triangle inequality).
#: Dense (dataset) metrics are always verified in full.
FULL_VERIFY_MAX = 400
#: PCG stopping tolerance (relative 2-norm residual)
PCG_TOL = 1e-13
#: exponents below this underflow towards subnormals: refuse (ratios would be lost)
MAX_EXPONENT = 650.0


# --------------------------------------------------------------------------- domains
@dataclass(frozen=True)
class GridDomain:
    """``rows x cols`` cells of ``cell`` distance units; index ``r * cols + c``.

    Cell centres ``((c + 0.5) cell, (r + 0.5) cell)``, Euclidean distance (the same
    convention as :func:`securelp.solvers.mdp.datasets.grid_dataset`).
    """

    rows: int
    cols: int
    cell: float = 1.0

    def __post_init__(self) -> None:
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise InputError(f"grid needs rows >= 1 and cols >= 1, got {self.rows} x {self.cols}")
        if not (math.isfinite(self.cell) and self.cell > 0):
            raise InputError(f"grid cell size must be > 0, got {self.cell}")

    @property
    def m(self) -> int:
        return int(self.rows) * int(self.cols)

    @property
    def coords(self) -> np.ndarray:
        yy, xx = np.divmod(np.arange(self.m), self.cols)
        return np.column_stack([(xx + 0.5) * self.cell, (yy + 0.5) * self.cell])

    def offset_table(self) -> np.ndarray:
        """``T[u, v]`` = distance between cells ``u`` rows and ``v`` columns apart."""
        u = np.arange(self.rows, dtype=float)[:, None]
        v = np.arange(self.cols, dtype=float)[None, :]
        return self.cell * np.sqrt(u * u + v * v)

    def distance_row(self, j: int) -> np.ndarray:
        r, c = divmod(int(j), self.cols)
        table = self.offset_table()
        du = np.abs(np.arange(self.rows) - r)
        dv = np.abs(np.arange(self.cols) - c)
        return table[du[:, None], dv[None, :]].ravel()

    def distance_matrix(self) -> np.ndarray:
        if self.m > 20000:
            raise ResourceError(f"a dense {self.m} x {self.m} distance matrix is too large")
        yy, xx = np.divmod(np.arange(self.m), self.cols)
        table = self.offset_table()
        return table[np.abs(yy[:, None] - yy[None, :]), np.abs(xx[:, None] - xx[None, :])]

    @property
    def diameter(self) -> float:
        return float(self.cell * math.hypot(self.rows - 1, self.cols - 1))


@dataclass(frozen=True)
class DenseDomain:
    """A finite metric space given by its distance matrix (records of a SecretDataset)."""

    distance: np.ndarray
    name: str = "points"

    def __post_init__(self) -> None:
        d = np.asarray(self.distance, dtype=float)
        if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] == 0:
            raise InputError(f"distance matrix must be square and non-empty, got shape {d.shape}")
        if not np.all(np.isfinite(d)) or np.any(d < 0) or np.any(np.diag(d) != 0):
            raise InputError("distances must be finite, >= 0, with a zero diagonal")
        if not np.allclose(d, d.T, rtol=1e-12, atol=1e-12):
            raise InputError("distance matrix is not symmetric")
        off = d + np.eye(d.shape[0])
        dup = np.argwhere(np.triu(off == 0, 1))
        if dup.size:
            i, j = (int(v) for v in dup[0])
            raise InputError(f"records {i} and {j} are at distance 0: d-privacy cannot separate them; merge duplicates")

    @property
    def m(self) -> int:
        return int(self.distance.shape[0])

    def distance_row(self, j: int) -> np.ndarray:
        return np.asarray(self.distance[int(j)], dtype=float)

    def distance_matrix(self) -> np.ndarray:
        return np.asarray(self.distance, dtype=float)

    @property
    def diameter(self) -> float:
        return float(np.max(self.distance))


Domain = GridDomain | DenseDomain


def check_eps(eps: float) -> float:
    """Validate a privacy parameter (finite, > 0)."""
    try:
        value = float(eps)
    except (TypeError, ValueError):
        raise InputError(f"eps must be a number, got {eps!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"eps must be finite and > 0, got {eps}")
    return value


# --------------------------------------------------------------------------- kernels
class KernelOperator:
    """``K = exp(-lam * d)`` on a domain: products, solves, rows, range-masked products.

    Grid domains larger than ``DENSE_MAX`` use the BTTB/FFT representation; all other
    domains a dense matrix with a Cholesky (or LU) factorization, computed lazily.
    """

    def __init__(self, domain: Domain, lam: float) -> None:
        self.domain = domain
        self.lam = float(lam)
        self.m = domain.m
        if self.lam * domain.diameter > MAX_EXPONENT:
            raise VerificationError(
                f"exp(-{self.lam:g} * d) underflows on this domain (lam * diameter = {self.lam * domain.diameter:.0f} "
                f"> {MAX_EXPONENT:.0f}): far entries would round to 0 and break the ratio bound; lower eps or use a "
                f"smaller domain"
            )
        self.structured = isinstance(domain, GridDomain) and self.m > DENSE_MAX
        self._dense: np.ndarray | None = None
        self._factor: tuple | None = None
        self._fft_kernel: np.ndarray | None = None
        self._precond: np.ndarray | None = None
        self.pcg_iterations: list[int] = []

    # -- dense ----------------------------------------------------------------------
    def dense(self) -> np.ndarray:
        if self.structured:
            raise ResourceError(f"refusing a dense {self.m} x {self.m} kernel (structured grid operator)")
        if self._dense is None:
            self._dense = np.exp(-self.lam * self.domain.distance_matrix())
        return self._dense

    def _dense_factor(self) -> tuple:
        if self._factor is None:
            K = self.dense()
            try:
                self._factor = ("chol", sla.cho_factor(K, lower=True, check_finite=False))
            except np.linalg.LinAlgError:
                with warnings.catch_warnings():  # a singular kernel is refused below, in one line
                    warnings.simplefilter("ignore", sla.LinAlgWarning)
                    lu = sla.lu_factor(K, check_finite=False)
                if np.any(np.diag(lu[0]) == 0):
                    raise InputError("the kernel exp(-eps d) is singular on this domain: LE has no solution") from None
                self._factor = ("lu", lu)
        return self._factor

    # -- structured grid --------------------------------------------------------------
    def _table(self, radius: float | None = None) -> np.ndarray:
        dist = self.domain.offset_table()
        t = np.exp(-self.lam * dist)
        if radius is not None:
            t = np.where(dist <= radius * (1 + 1e-12), t, 0.0)
        return t

    def _embed(self, table: np.ndarray) -> np.ndarray:
        R, C = table.shape
        big = np.zeros((2 * R, 2 * C))
        big[:R, :C] = table
        big[R + 1 :, :C] = table[1:][::-1]
        big[:R, C + 1 :] = table[:, 1:][:, ::-1]
        big[R + 1 :, C + 1 :] = table[1:, 1:][::-1, ::-1]
        return np.fft.rfft2(big)

    def _grid_matvec(self, fk: np.ndarray, x: np.ndarray) -> np.ndarray:
        R, C = self.domain.rows, self.domain.cols
        single = x.ndim == 1
        X = x.reshape(R, C, -1).transpose(2, 0, 1)  # (K, R, C)
        out = np.fft.irfft2(np.fft.rfft2(X, s=(2 * R, 2 * C)) * fk, s=(2 * R, 2 * C))[:, :R, :C]
        out = out.transpose(1, 2, 0).reshape(self.m, -1)
        return out[:, 0] if single else out

    def _preconditioner(self) -> np.ndarray:
        if self._precond is None:
            t = self._table()
            R, C = t.shape
            # T. Chan's optimal circulant weights per dimension
            wr = (R - np.arange(R)) / R
            wc = (C - np.arange(C)) / C
            c = np.zeros((R, C))
            # c(u, v) = sum over wrap choices of weight * t(|a|, |b|)
            for su in (0, 1):
                for sv in (0, 1):
                    au = np.arange(R) if su == 0 else (R - np.arange(R)) % R
                    av = np.arange(C) if sv == 0 else (C - np.arange(C)) % C
                    fu = wr if su == 0 else 1 - wr
                    fv = wc if sv == 0 else 1 - wc
                    if su == 1:
                        fu = np.where(np.arange(R) == 0, 0.0, fu)
                    if sv == 1:
                        fv = np.where(np.arange(C) == 0, 0.0, fv)
                    c += fu[:, None] * fv[None, :] * t[au[:, None], av[None, :]]
            eig = np.fft.rfft2(c).real  # c(u, v) = c(-u, -v): a real, symmetric spectrum
            if np.min(eig) <= 0:
                eig = np.maximum(eig, np.max(eig) * 1e-12)
            self._precond = eig
        return self._precond

    def _apply_precond(self, r: np.ndarray) -> np.ndarray:
        R, C = self.domain.rows, self.domain.cols
        eig = self._preconditioner()
        single = r.ndim == 1
        X = r.reshape(R, C, -1).transpose(2, 0, 1)
        out = np.fft.irfft2(np.fft.rfft2(X) / eig, s=(R, C))
        out = out.transpose(1, 2, 0).reshape(self.m, -1)
        return out[:, 0] if single else out

    def _pcg(self, b: np.ndarray) -> np.ndarray:
        if self._fft_kernel is None:
            self._fft_kernel = self._embed(self._table())
        fk = self._fft_kernel
        B = b.reshape(self.m, -1).astype(float)
        x = np.zeros_like(B)
        r = B.copy()
        z = self._apply_precond(r)
        p = z.copy()
        rz = np.sum(r * z, axis=0)
        bnorm = np.linalg.norm(B, axis=0)
        bnorm[bnorm == 0] = 1.0
        for it in range(1, 5001):
            Ap = self._grid_matvec(fk, p)
            denom = np.sum(p * Ap, axis=0)
            alpha = np.divide(rz, denom, out=np.zeros_like(rz), where=denom > 0)  # converged columns stay put
            x += alpha * p
            r -= alpha * Ap
            if np.all(np.linalg.norm(r, axis=0) <= PCG_TOL * bnorm):
                break
            z = self._apply_precond(r)
            rz_new = np.sum(r * z, axis=0)
            p = z + np.divide(rz_new, rz, out=np.zeros_like(rz), where=rz > 0) * p
            rz = rz_new
        else:
            raise SolverError(f"conjugate gradients on the {self.m}-cell grid kernel did not converge in 5000 iterations")
        self.pcg_iterations.append(it)
        return x.reshape(b.shape) if b.ndim == 1 else x

    # -- public -----------------------------------------------------------------------
    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``K x`` (``x`` of shape (m,) or (m, k))."""
        if self.structured:
            if self._fft_kernel is None:
                self._fft_kernel = self._embed(self._table())
            return self._grid_matvec(self._fft_kernel, x)
        return self.dense() @ x

    def masked_matvec(self, radius: float, x: np.ndarray) -> np.ndarray:
        """``K_r x`` with ``K_r[j, k] = K[j, k] if d_jk <= radius else 0``."""
        if self.structured:
            return self._grid_matvec(self._embed(self._table(radius)), x)
        d = self.domain.distance_matrix()
        return np.where(d <= radius * (1 + 1e-12), self.dense(), 0.0) @ x

    def solve(self, b: np.ndarray) -> np.ndarray:
        """``K^{-1} b`` by factorization / PCG (never an explicit inverse)."""
        if self.structured:
            return self._pcg(b)
        kind, fac = self._dense_factor()
        if kind == "chol":
            return sla.cho_solve(fac, b, check_finite=False)
        return sla.lu_solve(fac, b, check_finite=False)

    def row(self, j: int) -> np.ndarray:
        """Row ``j`` of ``K``."""
        return np.exp(-self.lam * self.domain.distance_row(j))

    def weighted_inverse_square_trace(
        self, w: np.ndarray, v: np.ndarray, rng: SecureRandom | None = None, probes: int = 128
    ) -> tuple[float, float, str]:
        """``sum_{k,i} w_k (K^{-1})_{ki}^2 v_i`` for ``w, v >= 0``.

        Returns ``(value, standard_error, method)``: exact (dense) or Hutchinson.
        """
        if not self.structured:
            kind, fac = self._dense_factor()
            ident = np.eye(self.m)
            inv = sla.cho_solve(fac, ident) if kind == "chol" else sla.lu_solve(fac, ident)
            return float(w @ (inv * inv) @ v), 0.0, "exact"
        rng = rng or SecureRandom(label="hutchinson")
        # tr(V^1/2 K^-1 W K^-1 V^1/2) = E ||W^1/2 K^-1 V^1/2 z||^2, z Rademacher
        z = (rng.integers(0, 2, (self.m, probes)) * 2 - 1).astype(float)
        y = self.solve(np.sqrt(v)[:, None] * z)
        vals = np.sum(w[:, None] * y * y, axis=0)
        return float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(probes)), f"hutchinson({probes})"


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class LdpVerification:
    """How a local mechanism was verified (figures for the JSON report).

    ``method``: ``"verify_mechanism"`` (every pair, every output, via
    :func:`securelp.solvers.mdp.verify.verify_mechanism`), ``"ldp-columns"`` (eps-LDP by the
    column max/min ratio), ``"oue-exact"`` (the per-bit ratio in rational arithmetic), or
    ``"structural"`` (large LE/EM: ``p >= 0`` and all row sums checked, the ratio bound
    holds by the triangle inequality; ``max_mdp_violation`` is measured on
    ``n_sampled`` random (j, l, k) triples).
    """

    method: str
    max_row_sum_error: float
    min_entry: float
    max_mdp_violation: float
    n_sampled: int = 0
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {
            "method": self.method,
            "max_row_sum_error": float(self.max_row_sum_error),
            "min_entry": float(self.min_entry),
            "max_mdp_violation": float(self.max_mdp_violation),
        }
        if self.n_sampled:
            out["n_sampled"] = int(self.n_sampled)
        out.update(self.details)
        return out


def verify_dense(P: np.ndarray, distance: np.ndarray, eps: float, tol: float = 1e-9) -> LdpVerification:
    """Full local d-privacy check with the shared verifier (raises VerificationError)."""
    from securelp.solvers.mdp.verify import verify_mechanism

    rep = verify_mechanism(P, distance, eps, eta=None, tol=tol)
    return LdpVerification("verify_mechanism", rep.max_row_sum_error, rep.min_entry, rep.max_mdp_violation)


def sampled_ratio_violation(
    entry: Callable[[np.ndarray, np.ndarray], np.ndarray],
    distance: Callable[[np.ndarray, np.ndarray], np.ndarray],
    m: int,
    eps: float,
    rng: SecureRandom,
    n: int = 200_000,
) -> float:
    """Largest relative ratio violation on ``n`` random triples (j, l, k)."""
    j = rng.integers(0, m, n)
    l = rng.integers(0, m, n)
    k = rng.integers(0, m, n)
    pj = entry(j, k)
    pl = entry(l, k)
    with np.errstate(over="ignore", invalid="ignore"):
        bound = np.where(pl > 0, np.exp(eps * distance(j, l)) * pl, 0.0)  # no inf * 0 = NaN
        v = np.where(pj > 0, (pj - bound) / np.where(pj > 0, pj, 1.0), 0.0)
    if np.any(np.isnan(v)):  # a NaN entry: nothing is certified (max() would have dropped it)
        return math.inf
    return float(max(0.0, np.max(v)))


class KernelMechanism:
    """``P = diag(a) K diag(b)`` with ``K = exp(-lam d)`` (LE and the exponential mechanism)."""

    def __init__(self, name: str, kernel: KernelOperator, a: np.ndarray, b: np.ndarray, eps: float) -> None:
        self.name = name
        self.kernel = kernel
        self.a = a
        self.b = b
        self.eps = eps
        self.m = kernel.m
        self.verification: LdpVerification | None = None

    def row(self, j: int) -> np.ndarray:
        """Row ``j`` of ``P`` (float64 weights)."""
        return self.a[j] * self.kernel.row(j) * self.b

    def entries(self, j: np.ndarray, k: np.ndarray) -> np.ndarray:
        dom = self.kernel.domain
        if isinstance(dom, GridDomain):
            rj, cj = np.divmod(j, dom.cols)
            rk, ck = np.divmod(k, dom.cols)
            d = dom.cell * np.hypot(rj - rk, cj - ck)
        else:
            d = dom.distance[j, k]
        return self.a[j] * np.exp(-self.kernel.lam * d) * self.b[k]

    def matrix(self) -> np.ndarray:
        """The dense ``P`` (small domains only)."""
        return self.a[:, None] * self.kernel.dense() * self.b[None, :]

    def row_sums(self) -> np.ndarray:
        return self.a * self.kernel.matvec(self.b)

    def estimate(self, y: np.ndarray) -> np.ndarray:
        """Inversion estimator ``(P^T)^{-1} y = diag(1/a) K^{-1} (y / b)`` (solves only).

        ``P^T = diag(b) K diag(a)`` because ``K`` is symmetric.
        """
        if np.any(self.b <= 0) or np.any(self.a <= 0):
            raise InputError(f"{self.name}: P is singular (a zero diagonal entry); the inversion estimator is undefined")
        return self.kernel.solve(np.asarray(y, float) / self.b) / self.a

    def output_distribution(self, prior: np.ndarray) -> np.ndarray:
        """``q = P^T pi``."""
        return self.b * self.kernel.matvec(self.a * prior)

    def mse_theory(self, prior: np.ndarray, users: int, rng: SecureRandom | None = None) -> tuple[float, float, str]:
        """Theoretical ``MSE_freq`` (per item) and its standard error (0 if exact)."""
        q = self.output_distribution(prior)
        w = q / self.b**2
        v = 1.0 / self.a**2
        tr, se, method = self.kernel.weighted_inverse_square_trace(w, v, rng)
        return (tr - 1.0) / (self.m * users), se / (self.m * users), method

    def range_error_theory(self, prior: np.ndarray, radius: float) -> float:
        """``sum_j pi_j sum_{k: d_jk > r} P_jk``."""
        inside = self.a * self.kernel.masked_matvec(radius, self.b)
        return float(max(0.0, 1.0 - np.dot(prior, inside)))

    def verify(self, rng: SecureRandom, tol: float = 1e-9) -> LdpVerification:
        """Verify before use: full ``verify_mechanism`` when small, else structural + sampled."""
        if np.any(self.b < 0) or np.any(self.a < 0):
            raise VerificationError(f"{self.name}: negative entries")
        dense_metric = isinstance(self.kernel.domain, DenseDomain)
        if dense_metric or (self.m <= FULL_VERIFY_MAX and not self.kernel.structured):
            # a user-supplied metric may violate the triangle inequality, so the structural
            # argument is only used on grids (Euclidean by construction): check every triple
            rep = verify_dense(self.matrix(), self.kernel.domain.distance_matrix(), self.eps, tol)
        else:
            sums = self.row_sums()
            err = float(np.max(np.abs(sums - 1.0)))
            if err > tol:
                raise VerificationError(f"{self.name}: row sums off by {err:.3g} > {tol:g}")
            dom = self.kernel.domain

            def dist(j: np.ndarray, l: np.ndarray) -> np.ndarray:
                if isinstance(dom, GridDomain):
                    rj, cj = np.divmod(j, dom.cols)
                    rl, cl = np.divmod(l, dom.cols)
                    return dom.cell * np.hypot(rj - rl, cj - cl)
                return dom.distance[j, l]

            viol = sampled_ratio_violation(self.entries, dist, self.m, self.eps, rng)
            if viol > tol:
                raise VerificationError(f"{self.name}: sampled d-privacy ratio violated by {viol:.3g} > {tol:g}")
            # smallest entry: P_jk = a_j K_jk b_k is smallest at the cell farthest from k (or j)
            if isinstance(dom, GridDomain):
                r, c = np.divmod(np.arange(self.m), dom.cols)
                far = dom.cell * np.hypot(np.maximum(r, dom.rows - 1 - r), np.maximum(c, dom.cols - 1 - c))
            else:
                far = np.max(dom.distance, axis=1)
            kmin = np.exp(-self.kernel.lam * far)
            if np.all(self.a == self.a[0]):
                min_entry = float(self.a[0] * np.min(self.b * kmin))
            elif np.all(self.b == self.b[0]):
                min_entry = float(self.b[0] * np.min(self.a * kmin))
            else:  # a lower bound
                min_entry = float(np.min(self.a) * np.min(self.b) * np.min(kmin))
            rep = LdpVerification("structural", err, min_entry, viol, n_sampled=200_000)
        self.verification = rep
        return rep


def linear_equations_mechanism(domain: Domain, eps: float, *, rng: SecureRandom | None = None) -> KernelMechanism:
    """Gu et al.'s LE mechanism: solve ``E p = 1``; ``P = E diag(p)``; verified.

    Raises
    ------
    InputError
        ``eps <= 0``, or LE has no non-negative solution (the offending diagonal entry
        and the remedy are named).
    VerificationError
        The built matrix fails its privacy/row-sum verification.
    """
    eps = check_eps(eps)
    kernel = KernelOperator(domain, eps)
    p = kernel.solve(np.ones(domain.m))
    if not np.all(np.isfinite(p)):
        raise InputError("LE: the linear system E p = 1 is numerically singular on this domain")
    if np.any(p < 0):
        k = int(np.argmin(p))
        raise InputError(
            f"LE has no non-negative solution for eps={eps:g} on this domain: p[{k}] = {p[k]:.3g} < 0 "
            f"({int(np.sum(p < 0))} of {domain.m} diagonal entries negative); increase eps or use a coarser domain"
        )
    mech = KernelMechanism("le", kernel, np.ones(domain.m), p, eps)
    mech.verify(rng or SecureRandom(label="le-verify"))
    logger.info("LE mechanism on %d values: verified (%s)", domain.m, mech.verification.method)
    return mech


def exponential_mechanism(domain: Domain, eps: float, *, rng: SecureRandom | None = None) -> KernelMechanism:
    """``P_jk = exp(-eps d_jk / 2) / Z_j`` (eps-d-private by the triangle inequality); verified."""
    eps = check_eps(eps)
    kernel = KernelOperator(domain, eps / 2.0)
    z = kernel.matvec(np.ones(domain.m))
    mech = KernelMechanism("em", kernel, 1.0 / z, np.ones(domain.m), eps)
    mech.verify(rng or SecureRandom(label="em-verify"))
    return mech
