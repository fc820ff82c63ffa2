"""The exponential mechanism baseline for mDP (Qiu Eq. 47).

``z_ik = exp(-eps d(x_i, y_k) / 2) / sum_l exp(-eps d(x_i, y_l) / 2)``: for any records
``i, j`` and output ``k``, the triangle inequality gives ``z_ik / z_jk <= exp(eps d_ij / 2)
* (Z_j / Z_i) <= exp(eps d_ij)``, so it is ``eps``-mDP on *every* pair (not only
neighbours). The matrix is computed in a numerically stable way (row-wise log-sum-exp)
and verified like every other mechanism.
"""

from __future__ import annotations

import time

import numpy as np

from securelp.solvers.errors import VerificationError
from securelp.solvers.mdp.pmo import PMOProblem
from securelp.solvers.mdp.report import IterationRecord, MechanismResult
from securelp.solvers.mdp.verify import MAX_EXPONENT, verify_mechanism

__all__ = ["exponent_spread", "exponential_mechanism", "private_exponential_mechanism", "solve_expmech"]


def exponential_mechanism(distance_to_outputs: np.ndarray, eps: float) -> np.ndarray:
    """Rows ``softmax(-eps d(x_i, y_.) / 2)`` of the ``(n, K)`` record-to-output distances."""
    logits = -0.5 * float(eps) * np.asarray(distance_to_outputs, dtype=float)
    logits -= logits.max(axis=1, keepdims=True)
    Z = np.exp(logits)
    return Z / Z.sum(axis=1, keepdims=True)


def exponent_spread(distance_to_outputs: np.ndarray, eps: float) -> float:
    """The largest spread of ``eps d / 2`` within a row: above :data:`~securelp.solvers.mdp.verify.MAX_EXPONENT`
    a row's far outputs would get ``exp(-eps d / 2) = 0`` beside positive entries of a neighbour's
    row, an unbounded ratio, so the mechanism is not private as computed."""
    D = np.asarray(distance_to_outputs, dtype=float)
    return 0.5 * float(eps) * (float(np.max(D.max(axis=1) - D.min(axis=1))) if D.size else 0.0)


def private_exponential_mechanism(distance_to_outputs: np.ndarray, eps: float) -> np.ndarray | None:
    """:func:`exponential_mechanism`, or ``None`` where :func:`exponent_spread` exceeds
    :data:`~securelp.solvers.mdp.verify.MAX_EXPONENT` (its far entries would underflow beside a neighbour's
    positive ones, so it would not be private as computed). Its rows are independent: the rows of
    some records only (a component's) are these rows of the whole."""
    if exponent_spread(distance_to_outputs, eps) > MAX_EXPONENT:
        return None
    return exponential_mechanism(distance_to_outputs, eps)


def solve_expmech(problem: PMOProblem) -> MechanismResult:
    """The exponential mechanism on ``problem``'s records and outputs, verified; its loss is the objective."""
    t0 = time.perf_counter()
    D = np.asarray(problem.dataset.distance)[:, problem.outputs]
    X = private_exponential_mechanism(D, problem.eps)
    if X is None:
        # the verifier would reject it (as ldp's em refuses it up front)
        raise VerificationError(
            f"expmech: exp(-eps d / 2) underflows on this dataset (eps * d / 2 spans {exponent_spread(D, problem.eps):.3g} "
            f"> {MAX_EXPONENT:.0f} within a row): far outputs would get probability 0 and break the ratio bound; "
            f"lower eps", parameter="eps")
    report = verify_mechanism(X, problem.dataset.distance, problem.eps, eta=problem.eta)
    obj = problem.objective_of(X)
    elapsed = time.perf_counter() - t0
    return MechanismResult(method="expmech", status="feasible", mechanism=X, objective=obj, lower_bound=float("nan"),
                           upper_bound=obj, rel_gap=float("nan"), iterations=0, time_s=elapsed, verification=report,
                           history=(IterationRecord(0, float("nan"), obj, elapsed),))
