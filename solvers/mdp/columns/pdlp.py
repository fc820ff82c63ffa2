"""HiGHS's first-order PDLP on a component's PMO, and the screen of the outputs a certificate marks as used.

PDLP (a primal-dual hybrid gradient method with restarts; Applegate et al. 2021, HiGHS's cuPDLP-C)
solves the whole component LP approximately; nothing it returns is trusted: the lower bound is
recomputed from the clipped duals (``sum_i min_k Q_ik``, :mod:`~securelp.solvers.mdp.columns.bounds`),
the primal columns are repaired before they enter the master, and the master's mechanism is
verified as always.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import new_highs, pass_lp
from securelp.solvers.lp.model import LinearProgram
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = ["PDLP_BYTES_PER_NONZERO", "FirstOrderStart", "component_lp_colwise", "expected_pdlp_iterations",
           "pdlp_start", "pdlp_too_large", "screen_outputs"]

#: peak resident bytes of the PDLP start per nonzero of the component LP: the scipy construction,
#: HiGHS's copy of the model and PDLP's own copies (measured)
PDLP_BYTES_PER_NONZERO = 200


@dataclasses.dataclass
class FirstOrderStart:
    """What :func:`pdlp_start` hands the column generation of one component.

    ``Q`` (records x outputs) is ``G + A'Y`` for the clipped mDP-row duals ``Y >= 0``, a valid
    certificate whatever the solver's accuracy; ``mu`` the unit-row duals (a stability centre,
    no guarantee attached); ``Z`` the primal iterate (records x outputs, clipped at 0), whose
    columns, repaired (:meth:`~securelp.solvers.mdp.columns.component.ComponentCG.add_primal_columns`),
    become restricted-master columns.
    ``Y`` (outputs x mDP rows) the clipped duals themselves, where the smoothed ascent goes on from.
    """

    Q: np.ndarray
    mu: np.ndarray
    Z: np.ndarray
    iterations: int
    status: str
    Y: np.ndarray | None = None


def component_lp_colwise(G: np.ndarray, A: sp.csr_matrix) -> sp.csc_matrix:
    """The whole component LP's matrix, column ``j*m + i`` for ``z[i, j]``: the ``m`` unit rows, then
    output ``j``'s ``E`` mDP rows at ``m + j*E``."""
    m, K = G.shape
    unit = sp.kron(np.ones((1, K)), sp.identity(m, format="csc"), format="csc")
    blocks = sp.kron(sp.identity(K, format="csc"), sp.csc_matrix(A), format="csc")
    return sp.vstack([unit, blocks], format="csc")


def pdlp_start(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, tolerance: float = 1e-7,
               iteration_limit: int | None = None) -> FirstOrderStart | None:
    """Solve the component's PMO approximately with HiGHS's first-order PDLP solver (cuPDLP-C).

    A primal-dual hybrid gradient method with restarts (Applegate et al. 2021; HiGHS's
    implementation); it runs until ``tolerance`` (HiGHS's relative PDLP optimality tolerance;
    :func:`~securelp.solvers.mdp.columns.driver.solve_colgen` passes its target gap) or ``deadline``. Nothing it returns is trusted:
    the lower bound is recomputed from the clipped duals (``sum_i min_k Q_ik``, module
    docstring), the primal columns are repaired before they enter the master
    (:meth:`~securelp.solvers.mdp.columns.component.ComponentCG.add_primal_columns`), and the master's mechanism is verified as always.
    Returns ``None`` when there is no time left or HiGHS returns no solution.

    Raises
    ------
    SolverError
        HiGHS refuses the component LP.
    """
    import highspy

    t_enter = time.perf_counter()
    m, K = G.shape
    E = A.shape[0]
    left = deadline - t_enter
    if E == 0 or m == 0 or K == 0 or left <= 0.0:
        return None
    # cuPDLP-C: returns its iterate at the time limit (HiPDLP returns none)
    h = new_highs({"solver": "pdlp", "pdlp_optimality_tolerance": float(tolerance)}, tight=True)
    if iteration_limit is not None:
        h.setOptionValue("pdlp_iteration_limit", int(iteration_limit))
    lp = LinearProgram(c=np.ascontiguousarray(G.T).ravel(), A=component_lp_colwise(G, A),
                       row_lower=np.concatenate([np.ones(m), np.full(E * K, -np.inf)]),
                       row_upper=np.concatenate([np.ones(m), np.zeros(E * K)]),
                       col_lower=np.zeros(m * K), col_upper=np.ones(m * K))
    if not pass_lp(h, lp):
        raise SolverError("HiGHS rejected the component LP for the PDLP start (passModel failed)")
    del lp
    # the time after the run (solution copies, the bound's Q) is about the time before it (model
    # build, copies): reserve as much again
    now = time.perf_counter()
    h.setOptionValue("time_limit", max(0.01, deadline - now - (now - t_enter)))
    if h.run() == highspy.HighsStatus.kError:
        return None
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    if not sol.value_valid or not sol.dual_valid:
        return None
    x = np.asarray(sol.col_value, dtype=float)
    duals = np.asarray(sol.row_dual, dtype=float)
    iterations = int(h.getInfo().pdlp_iteration_count)
    h.clear()
    Y = np.maximum(0.0, -duals[m:]).reshape(K, E)
    Q = np.asarray(G, dtype=float) + np.asarray(A.T @ Y.T)
    Z = np.clip(x.reshape(K, m).T, 0.0, None)
    return FirstOrderStart(Q=Q, mu=duals[:m].copy(), Z=np.ascontiguousarray(Z), iterations=iterations, status=status, Y=Y)


def screen_outputs(Q: np.ndarray, n: int, temperature: float = 1e-3) -> np.ndarray:
    """The ``n`` outputs (columns of ``Q``, records x outputs) that a certificate ``Q = G + A'Y``
    marks as most used, in increasing order. At an optimal ``Y`` an output in use attains the row
    minimum in every record it serves; so each record spreads a unit of weight over the outputs by a
    softmin of its row at ``temperature`` x its row minimum, and the outputs with the most weight are
    kept (ties, e.g. outputs far from every minimum, by the smallest relative distance to some row's
    minimum). A poorly converged ``Q`` has many row minima, so "near some minimum" alone does not rank."""
    rmin = Q.min(axis=1, keepdims=True)
    scale = np.abs(rmin) + 1e-12 * max(float(np.abs(rmin).mean()), 1e-300)
    with np.errstate(over="ignore"):  # a row minimum near 0: rel overflows to inf, its weight to 0
        rel = (Q - rmin) / scale
        w = np.exp(-rel / temperature)
    mass = (w / w.sum(axis=1, keepdims=True)).sum(axis=0)
    order = np.lexsort((rel.min(axis=0), -mass))
    return np.sort(order[:max(1, min(int(n), Q.shape[1]))])


def pdlp_too_large(nnz: int, max_nonzeros: int, memory_share: float) -> str:
    """Why a PDLP start on a component LP of ``nnz`` nonzeros must not run ('' when it may): more than
    ``max_nonzeros``, or more than ``memory_share`` of the memory available at
    :data:`PDLP_BYTES_PER_NONZERO`."""
    if nnz > max_nonzeros:
        return f"{nnz:,} nonzeros > {max_nonzeros:,}"
    short = memory_shortfall(nnz * PDLP_BYTES_PER_NONZERO, available_memory(), memory_share)
    return f"{nnz:,} nonzeros need about {short}" if short else ""


def expected_pdlp_iterations(seconds: float, nnz: int, seconds_per_nonzero_iteration: float) -> float:
    """PDLP iterations expected in ``seconds`` on an LP of ``nnz`` nonzeros (setup not counted)."""
    return seconds / (nnz * seconds_per_nonzero_iteration)
