"""Local (d-)privacy mechanisms on a finite domain, their estimators and a user simulation.

References: X. Gu, M. Li, Y. Cao, L. Xiong, "Supporting both Range Queries and Frequency
Estimation with Local Differential Privacy" (IEEE CNS 2019) -- the LE mechanism
(:mod:`securelp.solvers.mdp.le`) and the metrics; T. Wang, J. Blocki, N. Li, S. Jha, "Locally
Differentially Private Protocols for Frequency Estimation" (USENIX Security 2017) -- GRR
and OUE closed forms; M. E. Andres et al., "Geo-Indistinguishability" (CCS 2013) --
planar Laplace (:mod:`securelp.solvers.mdp.planar_laplace`).

Mechanisms (``m`` domain values, privacy parameter ``eps``):

* ``le``   -- Linear Equations, ``P = E diag(p)``, ``E p = 1`` (eps-d-private);
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

Metrics (for every mechanism, theory and simulation):

* ``Error_range(r)`` = probability that a report lies farther than ``r`` from the true
  value: theory ``sum_j pi_j sum_{k: d_jk > r} P_jk``; empirical: the fraction of the
  ``N`` simulated users whose report is farther than ``r``.
* ``MSE_freq`` = ``(1/m) sum_v (c_hat_v - c_v)^2`` with ``c`` the users' true frequency
  vector; theory = its expectation ``(1/(m N)) (tr(P^{-T} diag(P^T pi) P^{-1}) - 1)``
  (closed forms for GRR and OUE).

Users' true values are drawn from the prior with the exact row sampler; reports are
drawn from the rows of the verified matrix with the exact row sampler (OUE: exact
dyadic Bernoulli bits).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import scipy.linalg as sla

from securelp.solvers.errors import InputError, ResourceError, VerificationError
from securelp.solvers.mdp.le import (
    FULL_VERIFY_MAX,
    MAX_EXPONENT,
    Domain,
    GridDomain,
    KernelOperator,
    LdpVerification,
    check_eps,
    exponential_mechanism,
    linear_equations_mechanism,
    verify_dense,
)
from securelp.solvers.mdp.sampling import RowSampler, bernoulli_dyadic, sample_from_rows
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)

MECHANISMS = ("le", "grr", "oue", "em", "pl")
#: planar Laplace is an explicit matrix verified on every (pair, output): O(m^3), ~6 s at 900 cells
PL_MAX_CELLS = 900


def check_ratio_eps(name: str, eps: float) -> float:
    """A valid eps (:func:`check_eps`) of at most :data:`~securelp.solvers.mdp.le.MAX_EXPONENT` for the
    mechanisms whose privacy ratio is ``e^eps`` itself (GRR, OUE): above it GRR's float weight
    ``e^eps`` overflows and the exact arithmetic of both does too (stop 35: ``--eps 1e6`` and
    ``1e300`` ended in tracebacks)."""
    eps = check_eps(eps)
    if eps > MAX_EXPONENT:
        raise InputError(f"{name} supports eps up to {MAX_EXPONENT:.0f} (e^eps must fit a double), got {eps:g}")
    return eps


def exp_decimal(eps: float, digits: int = 50) -> Decimal:
    """``e^eps`` to ``digits`` significant digits (eps taken at its exact binary value)."""
    with localcontext() as ctx:
        ctx.prec = digits
        return Decimal(eps).exp()


def _ratio_within(ratio: Fraction, eps: float, tol: float) -> float:
    """Relative excess of an exact ratio over ``e^eps`` (<= 0 means within)."""
    with localcontext() as ctx:
        ctx.prec = 50
        bound = exp_decimal(eps)
        value = Decimal(ratio.numerator) / Decimal(ratio.denominator)
        return float((value - bound) / bound)


# --------------------------------------------------------------------------- GRR
class GeneralizedRandomizedResponse:
    """GRR over ``m`` values; closed forms, rows as exact weights ``(1, .., e^eps, .., 1)``."""

    name = "grr"

    def __init__(self, m: int, eps: float, domain: Domain | None = None, tol: float = 1e-9) -> None:
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
        excess = _ratio_within(Fraction(self.e), self.eps, tol)
        if excess > tol:
            raise VerificationError(f"GRR column ratio exceeds e^eps by {excess:.3g}")
        row_err = abs(self.a + (self.m - 1) * self.b - 1.0)
        details = {"ldp_ratio": self.e}
        if self.m <= FULL_VERIFY_MAX:
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
        counts = KernelOperator(self.domain, 0.0).masked_matvec(radius, np.ones(self.m))  # |{k: d_jk <= r}|
        inside = self.a + (counts - 1) * self.b
        return float(max(0.0, 1.0 - np.dot(prior, inside)))


# --------------------------------------------------------------------------- OUE
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
        excess = _ratio_within(worst, self.eps, tol)
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


# --------------------------------------------------------------------------- dense P
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


def planar_laplace_mechanism(domain: GridDomain, eps: float, *, rng: SecureRandom | None = None) -> DenseMechanism:
    """Planar Laplace remapped to the grid as an explicit, verified matrix."""
    from securelp.solvers.mdp.planar_laplace import planar_laplace_matrix

    if not isinstance(domain, GridDomain):
        raise InputError("planar Laplace (pl) needs a 2-D grid domain")
    eps = check_eps(eps)
    if domain.m > PL_MAX_CELLS:
        raise ResourceError(
            f"pl builds and verifies (all m^3 pair/output triples) an explicit {domain.m} x {domain.m} matrix; "
            f"at most {PL_MAX_CELLS} cells (e.g. 30 x 30) are supported"
        )
    P, quad_err = planar_laplace_matrix(domain.rows, domain.cols, domain.cell, eps, max_cells=PL_MAX_CELLS)
    if quad_err > 1e-9:
        raise VerificationError(f"planar Laplace quadrature lost {quad_err:.3g} of mass in a row (> 1e-9)")
    mech = DenseMechanism("pl", P, domain, eps)
    mech.verification = LdpVerification(
        mech.verification.method, mech.verification.max_row_sum_error, mech.verification.min_entry,
        mech.verification.max_mdp_violation, details={"quadrature_max_row_sum_error": quad_err},
    )
    return mech


# --------------------------------------------------------------------------- driver
@dataclass(frozen=True)
class LdpResult:
    """One simulated collection: metrics (theory and empirical), verification, timing."""

    mechanism: str
    eps: float
    m: int
    users: int
    range_r: float
    error_range: float | None
    error_range_theory: float | None
    mse_freq: float
    mse_freq_theory: float
    mse_freq_theory_stderr: float
    mse_freq_theory_method: str
    verification: dict
    time_s: float
    timings: dict
    reproducible: bool

    def as_dict(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "eps": self.eps,
            "m": self.m,
            "users": self.users,
            "range": self.range_r,
            "error_range": self.error_range,
            "error_range_theory": self.error_range_theory,
            "mse_freq": self.mse_freq,
            "mse_freq_theory": self.mse_freq_theory,
            "mse_freq_theory_stderr": self.mse_freq_theory_stderr,
            "mse_freq_theory_method": self.mse_freq_theory_method,
            "verification": self.verification,
            "time_s": self.time_s,
            "timings": self.timings,
            "reproducible": self.reproducible,
        }


def build_mechanism(name: str, domain: Domain, eps: float, *, rng: SecureRandom | None = None):
    """Construct and verify mechanism ``name`` on ``domain`` (raises on failure)."""
    eps = check_eps(eps)
    if name == "le":
        return linear_equations_mechanism(domain, eps, rng=rng)
    if name == "em":
        return exponential_mechanism(domain, eps, rng=rng)
    if name == "grr":
        return GeneralizedRandomizedResponse(domain.m, eps, domain)
    if name == "oue":
        return OptimizedUnaryEncoding(domain.m, eps)
    if name == "pl":
        return planar_laplace_mechanism(domain, eps, rng=rng)
    raise InputError(f"unknown mechanism {name!r}; choose one of {', '.join(MECHANISMS)}")


def _distance_pairs(domain: Domain, j: np.ndarray, k: np.ndarray) -> np.ndarray:
    if isinstance(domain, GridDomain):
        rj, cj = np.divmod(j, domain.cols)
        rk, ck = np.divmod(k, domain.cols)
        return domain.cell * np.hypot(rj - rk, cj - ck)
    return np.asarray(domain.distance)[j, k]


#: bytes of memory per simulated user (each user's true value, report and distance, the samplers'
#: draws; measured: 807 MB of peak RSS for 10^7 users, 144 MB for 10^6)
BYTES_PER_USER = 80
#: the simulation may take this share of the memory available
USERS_MEMORY_SHARE = 0.8


def require_memory_for_users(users: int) -> None:
    """Refuse, before any allocation, a simulation whose per-user arrays would not fit in
    :data:`USERS_MEMORY_SHARE` of the memory available.

    Raises
    ------
    ResourceError
        Saying how much the users need, how much there is, and how many users fit.
    """
    from securelp.solvers.resources import available_memory, memory_shortfall

    avail = available_memory()
    if avail is not None and (short := memory_shortfall(users * BYTES_PER_USER, avail, USERS_MEMORY_SHARE)):
        fit = int(USERS_MEMORY_SHARE * avail // BYTES_PER_USER)
        raise ResourceError(f"{users:,} simulated users need about {short}; at {BYTES_PER_USER} bytes each, "
                            f"simulate at most {fit:,} (the empirical errors' spread falls as 1/sqrt(users))")


#: bytes of memory per domain value a mechanism's computation holds at most (``le`` and ``em`` on a
#: grid, whose rows are built one at a time: 595 MB of peak RSS at 150 x 150 cells, 1.89 GB at
#: 300 x 300, stop 47; ``grr`` and ``oue`` 75-150 MB at both sizes). Until stop 47 a 100,000 x
#: 100,000 grid ended in numpy's MemoryError traceback
BYTES_PER_VALUE = {"le": 24_000, "em": 24_000, "pl": 24_000, "grr": 64, "oue": 64}


def require_memory_for_domain(m: int, mechanism: str) -> None:
    """Refuse, before any allocation, a domain of ``m`` values whose computation under ``mechanism``
    would not fit in :data:`USERS_MEMORY_SHARE` of the memory available.

    Raises
    ------
    ResourceError
        Saying how much the domain needs and how much there is.
    """
    from securelp.solvers.resources import available_memory, memory_shortfall

    need = m * BYTES_PER_VALUE.get(mechanism, 24_000)
    if short := memory_shortfall(need, available_memory(), USERS_MEMORY_SHARE):
        raise ResourceError(f"{mechanism} on a domain of {m:,} values needs about {short}")


def simulate(
    domain: Domain,
    mechanism: str,
    eps: float,
    users: int,
    *,
    prior: np.ndarray | None = None,
    radius: float | None = None,
    seed: int | str | None = None,
) -> LdpResult:
    """Build, verify and run one mechanism on ``users`` simulated users.

    Parameters
    ----------
    domain:
        The value domain (grid or dense metric).
    mechanism:
        One of :data:`MECHANISMS`.
    eps:
        Privacy parameter per distance unit (> 0).
    users:
        Number of simulated users (>= 1).
    prior:
        Distribution the users' true values are drawn from (default uniform).
    radius:
        Range ``r`` of ``Error_range`` (default: one grid cell / the median nearest-neighbour distance).
    seed:
        ``None``: fresh OS entropy; otherwise the flagged reproducible mode.
    """
    t0 = time.perf_counter()
    eps = check_eps(eps)
    if int(users) < 1:
        raise InputError(f"users must be >= 1, got {users}")
    users = int(users)
    require_memory_for_users(users)
    m = domain.m
    require_memory_for_domain(m, mechanism)
    if prior is None:
        prior = np.full(m, 1.0 / m)
    prior = np.asarray(prior, float)
    if prior.shape != (m,):
        raise InputError(f"prior has {prior.size} entries but the domain has {m} values")
    if np.any(prior < 0) or not np.all(np.isfinite(prior)) or abs(prior.sum() - 1.0) > 1e-9:
        raise InputError(f"prior must be non-negative and sum to 1 (sums to {prior.sum():.12g})")
    if radius is None:
        radius = domain.cell if isinstance(domain, GridDomain) else float(np.median(np.where(np.eye(m, dtype=bool), np.inf, domain.distance).min(axis=1)))
    if not (math.isfinite(radius) and radius >= 0):
        raise InputError(f"range must be >= 0, got {radius}")
    root = SecureRandom(seed, label="ldp")
    timings: dict[str, float] = {}

    t = time.perf_counter()
    mech = build_mechanism(mechanism, domain, eps, rng=root.spawn("verify"))
    timings["build_and_verify_s"] = time.perf_counter() - t

    t = time.perf_counter()
    true_values = RowSampler(prior).sample(users, root.spawn("users"))
    c_true = np.bincount(true_values, minlength=m) / users
    rng_mech = root.spawn("mechanism")
    error_range = None
    if isinstance(mech, OptimizedUnaryEncoding):
        y = mech.perturb_counts(true_values, rng_mech) / users
    else:
        reports = sample_from_rows(mech.row, true_values, rng_mech)
        y = np.bincount(reports, minlength=m) / users
        d = _distance_pairs(domain, true_values, reports)
        error_range = float(np.mean(d > radius * (1 + 1e-12)))
    timings["simulate_s"] = time.perf_counter() - t

    t = time.perf_counter()
    c_hat = mech.estimate(y)
    mse = float(np.mean((c_hat - c_true) ** 2))
    timings["estimate_s"] = time.perf_counter() - t

    t = time.perf_counter()
    mse_th, mse_se, mse_method = mech.mse_theory(prior, users, root.spawn("hutchinson"))
    err_th = mech.range_error_theory(prior, radius)
    timings["theory_s"] = time.perf_counter() - t

    ver = mech.verification.as_dict() if mech.verification is not None else {"method": "none"}
    return LdpResult(
        mechanism=mechanism, eps=eps, m=m, users=users, range_r=float(radius),
        error_range=error_range, error_range_theory=err_th,
        mse_freq=mse, mse_freq_theory=float(mse_th), mse_freq_theory_stderr=float(mse_se),
        mse_freq_theory_method=mse_method, verification=ver,
        time_s=time.perf_counter() - t0, timings=timings, reproducible=root.reproducible,
    )
