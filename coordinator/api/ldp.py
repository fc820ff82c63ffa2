"""Local d-privacy in three calls: a verified mechanism, users' reports, the collector's estimate.

Each user perturbs its own value ``x`` with one exact draw from row ``x`` of a matrix ``P`` that
satisfies ``P[x, y] <= exp(eps d(x, x')) P[x', y]`` for all values (local d-privacy; the
Linear-Equations mechanism of X. Gu, M. Li, Y. Cao, L. Xiong, *Supporting both range queries and
frequency estimation with local differential privacy*, IEEE CNS 2019, and its baselines). The
collector sees only the reports and estimates the value frequencies by inverting ``P^T``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.ldp import MECHANISMS, DenseDomain, GridDomain, LdpOptions, build_mechanism
from securelp.solvers.ldp.estimator import Mechanism
from securelp.solvers.mdp.sampling import sample_from_rows
from securelp.solvers.randomness import SecureRandom

__all__ = ["MECHANISMS", "estimate", "ldp_estimate", "ldp_mechanism", "ldp_perturb", "mechanism", "perturb"]


def ldp_mechanism(domain: GridDomain | DenseDomain, eps: float, mechanism: str = "le", *,
                  options: LdpOptions | None = None) -> Mechanism:
    """A verified local d-privacy mechanism on ``domain``.

    Parameters
    ----------
    domain:
        ``GridDomain(rows, cols, cell_km)`` or ``DenseDomain(distance, name)`` (any finite metric).
    eps:
        Privacy per distance unit (> 0).
    mechanism:
        One of :data:`MECHANISMS` (``le`` the Linear-Equations mechanism; ``em``, ``grr``, ``oue``,
        ``pl`` the baselines).

    Raises
    ------
    InputError
        An unknown mechanism (``parameter="mechanism"``) or ``eps``.
    VerificationError
        The mechanism fails its check against the definition (never returned).
    """
    return build_mechanism(mechanism, domain, eps, options=options)


def ldp_perturb(mechanism: Mechanism, values: Any, *, seed: int | str | None = None) -> np.ndarray:
    """The users' reports: for each true value ``x`` (an index into the domain) one exact draw from
    row ``x`` of the mechanism (no floating-point sampling bias, :mod:`securelp.solvers.mdp.sampling`).

    ``seed=None`` draws from the operating system's entropy; a seed makes the reports reproducible
    and is NOT private (simulations only).
    """
    m = _domain_size(mechanism)
    x = np.asarray(values)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
        raise InputError(f"values must be a 1-D array of integer value indices, got dtype {x.dtype} and shape "
                         f"{x.shape}", parameter="values")
    if x.size and (int(x.min()) < 0 or int(x.max()) >= m):
        raise InputError(f"values must be indices in 0..{m - 1} of the mechanism's domain", parameter="values")
    if not hasattr(mechanism, "row"):
        raise InputError(f"mechanism {mechanism.name!r} reports bit vectors, not values: use its perturb_counts",
                         parameter="mechanism")
    return sample_from_rows(mechanism.row, x.astype(np.int64), SecureRandom(seed, label="ldp/perturb"), m=m)


def ldp_estimate(mechanism: Mechanism, reports: Any) -> np.ndarray:
    """The collector's estimate of the value frequencies from the reports alone: ``(P^T)^{-1} y``,
    ``y`` the reports' empirical distribution (unbiased; entries may be negative)."""
    m = _domain_size(mechanism)
    r = np.asarray(reports)
    if r.ndim != 1 or r.size == 0 or not np.issubdtype(r.dtype, np.integer):
        raise InputError("reports must be a non-empty 1-D array of integer value indices", parameter="reports")
    if int(r.min()) < 0 or int(r.max()) >= m:
        raise InputError(f"reports must be indices in 0..{m - 1} of the mechanism's domain", parameter="reports")
    return mechanism.estimate(np.bincount(r, minlength=m) / r.size)


def _domain_size(mechanism: Mechanism) -> int:
    m = getattr(mechanism, "m", None)
    if not isinstance(m, int):
        raise InputError(f"{type(mechanism).__name__} is not a mechanism of ldp_mechanism", parameter="mechanism")
    return m


#: the names ``securelp.ldp.mechanism``, ``.perturb``, ``.estimate`` give these calls
mechanism = ldp_mechanism
perturb = ldp_perturb
estimate = ldp_estimate
