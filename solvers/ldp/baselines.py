"""The baselines of local d-privacy: GRR, OUE, the exponential mechanism and planar Laplace.

References: T. Wang, J. Blocki, N. Li, S. Jha, "Locally Differentially Private Protocols for Frequency
Estimation" (USENIX Security 2017) -- GRR and OUE closed forms; M. E. Andres et al.,
"Geo-Indistinguishability" (CCS 2013) -- planar Laplace (:mod:`~securelp.solvers.ldp.planar_laplace`);
X. Gu, M. Li, Y. Cao, L. Xiong (IEEE CNS 2019) use them as baselines of the LE mechanism.

* ``grr``  -- generalized randomized response: ``P_jj = e^eps / (e^eps + m - 1)``, else
  ``1 / (e^eps + m - 1)`` (Gu's text prints ``+ 1``: a typo; rows must sum to one);
  eps-LDP. Estimator ``c_hat = (y - b) / (a - b)`` (equal to the inversion estimator);
* ``oue``  -- optimized unary encoding: bit ``v`` of the report is 1 w.p. ``p = 1/2`` if
  ``v`` is the true value, else w.p. ``q = 1/(e^eps + 1)``; ``q`` is rounded *up* to a
  multiple of ``2^-61`` so bits are sampled exactly (this only lowers the per-pair
  ratio ``p (1 - q) / ((1 - p) q) = (1 - q)/q``, which is checked exactly against
  ``e^eps``). ``c_hat_v = (y_v - q) / (p - q)``. It reports a bit vector, not a value, so
  ``Error_range`` does not apply (``None``);
* ``em``   -- exponential mechanism ``P_jk ~ exp(-eps d_jk / 2)`` (eps-d-private);
* ``pl``   -- planar Laplace remapped to the grid (eps-d-private; grid only).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import scipy.linalg as sla

from securelp.solvers.errors import InputError, ResourceError, VerificationError
from securelp.solvers.ldp.domains import Domain, GridDomain, check_eps
from securelp.solvers.ldp.kernel import KernelOperator
from securelp.solvers.ldp.le import KernelMechanism
from securelp.solvers.ldp.options import LdpOptions
from securelp.solvers.ldp.planar_laplace import planar_laplace_matrix
from securelp.solvers.ldp.verification import LdpVerification, check_ratio_eps, exp_decimal, ratio_excess, verify_dense
from securelp.solvers.mdp.sampling import bernoulli_dyadic
from securelp.solvers.randomness import SecureRandom

__all__ = ["DenseMechanism", "GeneralizedRandomizedResponse", "OptimizedUnaryEncoding", "exponential_mechanism",
           "planar_laplace_mechanism"]


class GeneralizedRandomizedResponse:
    """GRR over ``m`` values; closed forms, rows as exact weights ``(1, .., e^eps, .., 1)``."""

    name = "grr"

    def __init__(self, m: int, eps: float, domain: Domain | None = None, tol: float = 1e-9,
                 options: LdpOptions | None = None) -> None:
        self.options = options or LdpOptions()
        self.eps = check_ratio_eps("GRR", eps)
        if m < 2:
            raise InputError(f"GRR needs at least 2 values, got {m}")
        self.m = int(m)
        self.domain = domain
        # the float64 weight actually used: the largest double not above e^eps, so the
        # column ratio e never exceeds e^eps (checked exactly in verify)
        exact = exp_decimal(self.eps)
        e = float(exact)
        if Decimal(e) > exact:
            e = float(np.nextafter(e, 0.0))
        self.e = e
        self.a = self.e / (self.e + self.m - 1)
        self.b = 1.0 / (self.e + self.m - 1)
        self.verification = self.verify(tol)

    def row(self, j: int) -> np.ndarray:
        w = np.ones(self.m)
        w[j] = self.e
        return w  # sampled exactly as w / sum(w): P_jj = e / (e + m - 1)

    def matrix(self) -> np.ndarray:
        P = np.full((self.m, self.m), self.b)
        np.fill_diagonal(P, self.a)
        return P

    def verify(self, tol: float) -> LdpVerification:
        # eps-LDP: in every column the largest/smallest entry ratio is e (float) vs e^eps
        excess = ratio_excess(Fraction(self.e), self.eps, tol)
        if excess > tol:
            raise VerificationError(f"GRR column ratio exceeds e^eps by {excess:.3g}")
        row_err = abs(self.a + (self.m - 1) * self.b - 1.0)
        details = {"ldp_ratio": self.e}
        if self.m <= self.options.full_verify_max:
            discrete = 1.0 - np.eye(self.m)
            full = verify_dense(self.matrix(), discrete, self.eps, tol)
            row_err = max(row_err, full.max_row_sum_error)
            details["verify_mechanism_discrete_metric"] = True
        return LdpVerification("ldp-columns", row_err, self.b, max(0.0, excess), details=details)

    def estimate(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, float) - self.b) / (self.a - self.b)

    def mse_theory(self, prior: np.ndarray, users: int, rng=None) -> tuple[float, float, str]:
        a, b, n = self.a, self.b, users
        per_item = b * (1 - b) / (n * (a - b) ** 2) + (1 - a - b) / (self.m * n * (a - b))
        return per_item, 0.0, "closed-form"

    def range_error_theory(self, prior: np.ndarray, radius: float) -> float | None:
        if self.domain is None:
            return None
        counts = KernelOperator(self.domain, 0.0, self.options).masked_matvec(radius, np.ones(self.m))  # |{k: d_jk <= r}|
        inside = self.a + (counts - 1) * self.b
        return float(max(0.0, 1.0 - np.dot(prior, inside)))


class OptimizedUnaryEncoding:
    """OUE with exact dyadic bits: ``p = 1/2``, ``q`` = ``1/(e^eps+1)`` rounded up to 2^-61."""

    name = "oue"

    def __init__(self, m: int, eps: float, tol: float = 1e-9) -> None:
        self.eps = check_ratio_eps("OUE", eps)
        if m < 2:
            raise InputError(f"OUE needs at least 2 values, got {m}")
        self.m = int(m)
        self.p_frac = Fraction(1, 2)
        # q = 1/(e^eps + 1) to 50 digits, nudged up by 1e-40 and rounded up to the 2^-61 grid:
        # never below the true q, so the exact ratio (1 - q)/q never exceeds e^eps.
        with localcontext() as ctx:
            ctx.prec = 50
            q_dec = Decimal(1) / (exp_decimal(self.eps) + 1) + Decimal("1e-40")
            num = int((q_dec * (1 << 61)).to_integral_value(rounding="ROUND_CEILING"))
        self.q_frac = Fraction(min(num, 1 << 60), 1 << 61)
        self.p = float(self.p_frac)
        self.q = float(self.q_frac)
        self.verification = self.verify(tol)

    def verify(self, tol: float) -> LdpVerification:
        """eps-LDP of OUE, exactly: for inputs v != v' every output bit vector B has
        Pr[B|v]/Pr[B|v'] = (bit v term)(bit v' term) <= p(1-q) / ((1-p) q)."""
        p, q = self.p_frac, self.q_frac
        worst = max(p * (1 - q) / ((1 - p) * q), (1 - p) * q / (p * (1 - q)), Fraction(1))
        excess = ratio_excess(worst, self.eps, tol)
        if excess > tol:
            raise VerificationError(f"OUE per-pair ratio exceeds e^eps by {excess:.3g}")
        eff = math.log((1 - q) / q) if q > 0 else float("inf")
        return LdpVerification(
            "oue-exact", 0.0, float(min(q, 1 - p)), max(0.0, excess),
            details={"q": float(q), "eps_effective": eff, "ratio_exact": f"{worst.numerator}/{worst.denominator}"},
        )

    def perturb_counts(self, true_values: np.ndarray, rng: SecureRandom) -> np.ndarray:
        """Number of users whose report has bit ``v`` set, for each ``v`` (exact bits)."""
        counts = np.zeros(self.m, dtype=np.int64)
        n = true_values.size
        chunk = max(1, int(2e7 // self.m))
        for start in range(0, n, chunk):
            tv = true_values[start : start + chunk]
            bits = bernoulli_dyadic(self.q_frac, (tv.size, self.m), rng)
            own = bernoulli_dyadic(self.p_frac, tv.size, rng)
            bits[np.arange(tv.size), tv] = own
            counts += bits.sum(axis=0, dtype=np.int64)
        return counts

    def estimate(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, float) - self.q) / (self.p - self.q)

    def mse_theory(self, prior: np.ndarray, users: int, rng=None) -> tuple[float, float, str]:
        p, q, n = self.p, self.q, users
        per_item = q * (1 - q) / (n * (p - q) ** 2) + (1 - p - q) / (self.m * n * (p - q))
        return per_item, 0.0, "closed-form"

    def range_error_theory(self, prior: np.ndarray, radius: float) -> None:
        return None


class DenseMechanism:
    """An explicit verified matrix (planar Laplace); inversion via an LU of ``P^T``."""

    def __init__(self, name: str, P: np.ndarray, domain: Domain, eps: float, tol: float = 1e-9) -> None:
        self.name = name
        self.P = P
        self.domain = domain
        self.eps = eps
        self.m = P.shape[0]
        self._lu = None
        self.verification = verify_dense(P, domain.distance_matrix(), eps, tol)

    def row(self, j: int) -> np.ndarray:
        return self.P[j]

    def _factor(self):
        if self._lu is None:
            self._lu = sla.lu_factor(self.P.T, check_finite=False)
        return self._lu

    def estimate(self, y: np.ndarray) -> np.ndarray:
        return sla.lu_solve(self._factor(), np.asarray(y, float), check_finite=False)

    def mse_theory(self, prior: np.ndarray, users: int, rng=None) -> tuple[float, float, str]:
        q = self.P.T @ prior
        inv = sla.lu_solve(self._factor(), np.eye(self.m), trans=1)  # rows of P^{-1}... (P^T)^T = P
        # inv = P^{-1}; tr(P^{-T} diag(q) P^{-1}) = sum_k q_k ||row k of P^{-1}||^2
        tr = float(np.dot(q, np.sum(inv * inv, axis=1)))
        return (tr - 1.0) / (self.m * users), 0.0, "exact"

    def range_error_theory(self, prior: np.ndarray, radius: float) -> float:
        d = self.domain.distance_matrix()
        inside = np.sum(np.where(d <= radius * (1 + 1e-12), self.P, 0.0), axis=1)
        return float(max(0.0, 1.0 - np.dot(prior, inside)))


def planar_laplace_mechanism(domain: GridDomain, eps: float, *, options: LdpOptions | None = None) -> DenseMechanism:
    """Planar Laplace remapped to the grid as an explicit, verified matrix
    (:func:`~securelp.solvers.ldp.planar_laplace.planar_laplace_matrix`).

    Raises
    ------
    InputError
        Not a grid (``parameter`` "domain").
    ResourceError
        More than ``options.pl_max_cells`` cells.
    VerificationError
        The quadrature lost mass, or the matrix fails its verification.
    """
    options = options or LdpOptions()
    if not isinstance(domain, GridDomain):
        raise InputError("planar Laplace (pl) needs a 2-D grid domain", parameter="domain")
    eps = check_eps(eps)
    if domain.m > options.pl_max_cells:
        raise ResourceError(
            f"pl builds and verifies (all m^3 pair/output triples) an explicit {domain.m} x {domain.m} matrix; "
            f"at most {options.pl_max_cells} cells (e.g. 30 x 30) are supported", parameter="domain")
    P, quad_err = planar_laplace_matrix(domain.rows, domain.cols, domain.cell, eps, max_cells=options.pl_max_cells)
    if quad_err > 1e-9:
        raise VerificationError(f"planar Laplace quadrature lost {quad_err:.3g} of mass in a row (> 1e-9)")
    mech = DenseMechanism("pl", P, domain, eps)
    mech.verification = LdpVerification(
        mech.verification.method, mech.verification.max_row_sum_error, mech.verification.min_entry,
        mech.verification.max_mdp_violation, details={"quadrature_max_row_sum_error": quad_err},
    )
    return mech


def exponential_mechanism(domain: Domain, eps: float, *, rng: SecureRandom | None = None,
                          options: LdpOptions | None = None) -> KernelMechanism:
    """``P_jk = exp(-eps d_jk / 2) / Z_j`` (eps-d-private by the triangle inequality); verified."""
    eps = check_eps(eps)
    kernel = KernelOperator(domain, eps / 2.0, options)
    z = kernel.matvec(np.ones(domain.m))
    mech = KernelMechanism("em", kernel, 1.0 / z, np.ones(domain.m), eps)
    mech.verify(rng or SecureRandom(label="em-verify"))
    return mech
