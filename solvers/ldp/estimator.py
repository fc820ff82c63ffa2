"""A simulated local-privacy collection: the mechanism, the users' reports, the estimators, the metrics.

Mechanisms (``m`` domain values, privacy parameter ``eps``): ``le`` (Linear Equations,
:mod:`~securelp.solvers.ldp.le`; X. Gu, M. Li, Y. Cao, L. Xiong, "Supporting both Range Queries and
Frequency Estimation with Local Differential Privacy", IEEE CNS 2019) and the baselines ``grr``,
``oue``, ``em`` and ``pl`` (:mod:`~securelp.solvers.ldp.baselines`).

Metrics (for every mechanism, theory and simulation):

* ``Error_range(r)`` = probability that a report lies farther than ``r`` from the true
  value: theory ``sum_j pi_j sum_{k: d_jk > r} P_jk``; empirical: the fraction of the
  ``N`` simulated users whose report is farther than ``r``.
* ``MSE_freq`` = ``(1/m) sum_v (c_hat_v - c_v)^2`` with ``c`` the users' true frequency
  vector; theory = its expectation ``(1/(m N)) (tr(P^{-T} diag(P^T pi) P^{-1}) - 1)``
  (closed forms for GRR and OUE).

Users' true values are drawn from the prior with the exact row sampler; reports are drawn from the
rows of the verified matrix with the exact row sampler (OUE: exact dyadic Bernoulli bits;
:mod:`securelp.solvers.mdp.sampling`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import InputError, ResourceError
from securelp.solvers.ldp.baselines import (
    DenseMechanism,
    GeneralizedRandomizedResponse,
    OptimizedUnaryEncoding,
    exponential_mechanism,
    planar_laplace_mechanism,
)
from securelp.solvers.ldp.domains import Domain, GridDomain, check_eps
from securelp.solvers.ldp.le import KernelMechanism, linear_equations_mechanism
from securelp.solvers.ldp.options import LdpOptions
from securelp.solvers.mdp.sampling import RowSampler, sample_from_rows
from securelp.solvers.randomness import SecureRandom
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = ["MECHANISMS", "LdpResult", "build_mechanism", "simulate"]

#: the mechanisms :func:`simulate` builds
MECHANISMS = ("le", "grr", "oue", "em", "pl")

Mechanism = KernelMechanism | GeneralizedRandomizedResponse | OptimizedUnaryEncoding | DenseMechanism


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


def build_mechanism(name: str, domain: Domain, eps: float, *, rng: SecureRandom | None = None,
                    options: LdpOptions | None = None) -> Mechanism:
    """Construct and verify mechanism ``name`` on ``domain``.

    Raises
    ------
    InputError
        An unknown mechanism (``parameter`` "mechanism") or eps, or what the mechanism refuses.
    VerificationError
        The mechanism fails its verification.
    """
    eps = check_eps(eps)
    if name == "le":
        return linear_equations_mechanism(domain, eps, rng=rng, options=options)
    if name == "em":
        return exponential_mechanism(domain, eps, rng=rng, options=options)
    if name == "grr":
        return GeneralizedRandomizedResponse(domain.m, eps, domain, options=options)
    if name == "oue":
        return OptimizedUnaryEncoding(domain.m, eps)
    if name == "pl":
        return planar_laplace_mechanism(domain, eps, options=options)
    raise InputError(f"unknown mechanism {name!r}; choose one of {', '.join(MECHANISMS)}", parameter="mechanism")


def _distance_pairs(domain: Domain, j: np.ndarray, k: np.ndarray) -> np.ndarray:
    if isinstance(domain, GridDomain):
        rj, cj = np.divmod(j, domain.cols)
        rk, ck = np.divmod(k, domain.cols)
        return domain.cell * np.hypot(rj - rk, cj - ck)
    return np.asarray(domain.distance)[j, k]


#: bytes of memory per simulated user (each user's true value, report and distance, the samplers'
#: draws; measured peak)
BYTES_PER_USER = 80

#: bytes of memory per domain value a mechanism's computation holds at most (``le`` and ``em`` on a
#: grid, whose rows are built one at a time; ``grr`` and ``oue`` hold far less; measured peaks)
BYTES_PER_VALUE = {"le": 24_000, "em": 24_000, "pl": 24_000, "grr": 64, "oue": 64}


def require_memory_for_users(users: int, share: float = 0.8) -> None:
    """Refuse, before any allocation, a simulation whose per-user arrays would not fit in ``share`` of
    the memory available.

    Raises
    ------
    ResourceError
        Saying how much the users need, how much there is, and how many users fit (``parameter``
        "users").
    """
    avail = available_memory()
    if avail is not None and (short := memory_shortfall(users * BYTES_PER_USER, avail, share)):
        fit = int(share * avail // BYTES_PER_USER)
        raise ResourceError(f"{users:,} simulated users need about {short}; at {BYTES_PER_USER} bytes each, "
                            f"simulate at most {fit:,} (the empirical errors' spread falls as 1/sqrt(users))",
                            parameter="users")


def require_memory_for_domain(m: int, mechanism: str, share: float = 0.8) -> None:
    """Refuse, before any allocation, a domain of ``m`` values whose computation under ``mechanism``
    would not fit in ``share`` of the memory available.

    Raises
    ------
    ResourceError
        Saying how much the domain needs and how much there is (``parameter`` "domain").
    """
    need = m * BYTES_PER_VALUE.get(mechanism, 24_000)
    if short := memory_shortfall(need, available_memory(), share):
        raise ResourceError(f"{mechanism} on a domain of {m:,} values needs about {short}", parameter="domain")


def _checked(domain: Domain, mechanism: str, eps: float, users: int, prior: np.ndarray | None,
             radius: float | None, options: LdpOptions) -> tuple[float, int, np.ndarray, float]:
    """``simulate``'s inputs checked: eps, users, the prior (uniform by default) and the range (one grid
    cell, or the median nearest-neighbour distance), with the memory they need.

    Raises
    ------
    InputError
        Naming the parameter that is wrong.
    ResourceError
        The users or the domain would not fit in memory.
    """
    eps = check_eps(eps)
    if int(users) < 1:
        raise InputError(f"users must be >= 1, got {users}", parameter="users")
    users = int(users)
    require_memory_for_users(users, options.users_memory_share)
    m = domain.m
    require_memory_for_domain(m, mechanism, options.users_memory_share)
    if prior is None:
        prior = np.full(m, 1.0 / m)
    prior = np.asarray(prior, float)
    if prior.shape != (m,):
        raise InputError(f"prior has {prior.size} entries but the domain has {m} values", parameter="prior")
    if np.any(prior < 0) or not np.all(np.isfinite(prior)) or abs(prior.sum() - 1.0) > 1e-9:
        raise InputError(f"prior must be non-negative and sum to 1 (sums to {prior.sum():.12g})", parameter="prior")
    if radius is None:
        radius = domain.cell if isinstance(domain, GridDomain) else float(
            np.median(np.where(np.eye(m, dtype=bool), np.inf, domain.distance).min(axis=1)))
    if not (math.isfinite(radius) and radius >= 0):
        raise InputError(f"range must be >= 0, got {radius}", parameter="radius")
    return eps, users, prior, float(radius)


def simulate(domain: Domain, mechanism: str, eps: float, users: int, *, prior: np.ndarray | None = None,
             radius: float | None = None, seed: int | str | None = None,
             options: LdpOptions | None = None) -> LdpResult:
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
    options:
        The tunables (:class:`~securelp.solvers.ldp.options.LdpOptions`).

    Raises
    ------
    InputError, ResourceError
        From the inputs' checks (:func:`_checked`) or the mechanism's construction.
    VerificationError
        The mechanism fails its verification.
    """
    t0 = time.perf_counter()
    options = options or LdpOptions()
    eps, users, prior, radius = _checked(domain, mechanism, eps, users, prior, radius, options)
    m = domain.m
    root = SecureRandom(seed, label="ldp")
    timings: dict[str, float] = {}

    t = time.perf_counter()
    mech = build_mechanism(mechanism, domain, eps, rng=root.spawn("verify"), options=options)
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
