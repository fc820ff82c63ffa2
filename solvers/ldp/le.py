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
"""

from __future__ import annotations

import logging

import numpy as np

from securelp.solvers.errors import InputError, VerificationError
from securelp.solvers.ldp.domains import DenseDomain, Domain, GridDomain, check_eps
from securelp.solvers.ldp.kernel import KernelOperator
from securelp.solvers.ldp.options import LdpOptions
from securelp.solvers.ldp.verification import LdpVerification, sampled_ratio_violation, verify_dense
from securelp.solvers.randomness import SecureRandom

__all__ = ["KernelMechanism", "linear_equations_mechanism"]

logger = logging.getLogger(__name__)


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
        """Verify before use: full ``verify_mechanism`` when small (the kernel's ``options.full_verify_max``),
        else structural (every row sum, ``p >= 0``, the triangle inequality) and ``options.sampled_triples``
        sampled triples.

        Raises
        ------
        VerificationError
            A negative entry, a row sum off by more than ``tol``, or a ratio violated.
        """
        options = self.kernel.options
        if np.any(self.b < 0) or np.any(self.a < 0):
            raise VerificationError(f"{self.name}: negative entries")
        dense_metric = isinstance(self.kernel.domain, DenseDomain)
        if dense_metric or (self.m <= options.full_verify_max and not self.kernel.structured):
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

            viol = sampled_ratio_violation(self.entries, dist, self.m, self.eps, rng, options.sampled_triples)
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
            rep = LdpVerification("structural", err, min_entry, viol, n_sampled=options.sampled_triples)
        self.verification = rep
        return rep


def linear_equations_mechanism(domain: Domain, eps: float, *, rng: SecureRandom | None = None,
                               options: LdpOptions | None = None) -> KernelMechanism:
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
    kernel = KernelOperator(domain, eps, options)
    p = kernel.solve(np.ones(domain.m))
    if not np.all(np.isfinite(p)):
        raise InputError("LE: the linear system E p = 1 is numerically singular on this domain")
    if np.any(p < 0):
        k = int(np.argmin(p))
        raise InputError(
            f"LE has no non-negative solution for eps={eps:g} on this domain: p[{k}] = {p[k]:.3g} < 0 "
            f"({int(np.sum(p < 0))} of {domain.m} diagonal entries negative); increase eps or use a coarser domain",
            parameter="eps")
    mech = KernelMechanism("le", kernel, np.ones(domain.m), p, eps)
    mech.verify(rng or SecureRandom(label="le-verify"))
    logger.info("LE mechanism on %d values: verified (%s)", domain.m, mech.verification.method)
    return mech
