"""How a local mechanism is verified before use, and the figures its report carries.

A mechanism ``P`` (``P_jk = Pr[report x_k | true x_j]``) is ``eps``-d-private when
``P_jk <= exp(eps d(x_j, x_l)) P_lk`` for every ``j, l, k`` (Gu, Li, Cao, Xiong, IEEE CNS 2019); with
the discrete metric this is ``eps``-LDP. Small dense matrices are verified on every triple by the
shared verifier (:func:`securelp.solvers.mdp.verify.verify_mechanism`, every pair a neighbour); kernel
mechanisms on large grids structurally, with a sampled check; GRR and OUE by their exact ratios.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.ldp.domains import check_eps
from securelp.solvers.mdp.verify import MAX_EXPONENT, verify_mechanism
from securelp.solvers.randomness import SecureRandom

__all__ = ["LdpVerification", "check_ratio_eps", "exp_decimal", "ratio_excess", "sampled_ratio_violation",
           "verify_dense"]


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


def check_ratio_eps(name: str, eps: float) -> float:
    """A valid eps (:func:`~securelp.solvers.ldp.domains.check_eps`) of at most
    :data:`~securelp.solvers.mdp.verify.MAX_EXPONENT` for the mechanisms whose privacy ratio is ``e^eps``
    itself (GRR, OUE): above it GRR's float weight ``e^eps`` overflows and the exact arithmetic of both
    does too.

    Raises
    ------
    InputError
        Naming the mechanism and the largest eps (``parameter`` "eps").
    """
    eps = check_eps(eps)
    if eps > MAX_EXPONENT:
        raise InputError(f"{name} supports eps up to {MAX_EXPONENT:.0f} (e^eps must fit a double), got {eps:g}",
                         parameter="eps")
    return eps


def exp_decimal(eps: float, digits: int = 50) -> Decimal:
    """``e^eps`` to ``digits`` significant digits (eps taken at its exact binary value)."""
    with localcontext() as ctx:
        ctx.prec = digits
        return Decimal(eps).exp()


def ratio_excess(ratio: Fraction, eps: float, tol: float) -> float:
    """Relative excess of an exact ratio over ``e^eps`` (<= 0 means within)."""
    with localcontext() as ctx:
        ctx.prec = 50
        bound = exp_decimal(eps)
        value = Decimal(ratio.numerator) / Decimal(ratio.denominator)
        return float((value - bound) / bound)
