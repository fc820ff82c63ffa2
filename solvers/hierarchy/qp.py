"""HiGHS wrappers for the relaxed QPs (M_H^r, M_c^r) and the exact Model 3 MIP.

HiGHS minimises c'x + 1/2 x'Qx; squared distances sum (x - y)^2 become Q = 2I, c = -2y.
``run()`` says whether the call worked, ``getModelStatus()`` what happened to the model;
the two are kept apart. The solver is imported lazily.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import new_highs

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HighsOutcome:
    """Solution of one HiGHS call."""

    x: np.ndarray
    objective: float
    status: str
    mip_dual_bound: float
    row_dual: np.ndarray


def solve_highs(
    cost: np.ndarray,
    a: sp.spmatrix,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    col_lower: np.ndarray,
    col_upper: np.ndarray,
    hessian_diag: np.ndarray | None = None,
    integer: np.ndarray | None = None,
    options: dict[str, object] | None = None,
    label: str = "model",
) -> HighsOutcome:
    """Solve min c'x (+ 1/2 sum_i q_i x_i^2) s.t. row and column bounds, optionally integer.

    Raises
    ------
    SolverError
        HiGHS failed or did not reach an optimum (the model is always feasible here).
    """
    import highspy

    n = int(cost.size)
    csc = sp.csc_matrix(a)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = int(csc.shape[0])
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
    lp.a_matrix_.index_ = csc.indices.astype(np.int32)
    lp.a_matrix_.value_ = np.asarray(csc.data, dtype=np.float64)
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = int(csc.shape[0])
    if integer is not None:
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous for flag in integer
        ]
    h = new_highs(options)
    if hessian_diag is not None:
        model = highspy.HighsModel()
        model.lp_ = lp
        hess = highspy.HighsHessian()
        hess.dim_ = n
        hess.format_ = highspy.HessianFormat.kTriangular
        hess.start_ = np.arange(n + 1, dtype=np.int32)
        hess.index_ = np.arange(n, dtype=np.int32)
        hess.value_ = np.asarray(hessian_diag, dtype=np.float64)
        model.hessian_ = hess
        status = h.passModel(model)
    else:
        status = h.passModel(lp)
    if status == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS refused the {label} ({lp.num_row_} rows, {n} columns)")
    run = h.run()
    model_status = h.getModelStatus()
    text = h.modelStatusToString(model_status)
    if run == highspy.HighsStatus.kError or model_status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS did not reach an optimum of the {label}: run status {run}, model status {text!r}")
    sol = h.getSolution()
    info = h.getInfo()
    bound = float(getattr(info, "mip_dual_bound", float("nan"))) if integer is not None else float("nan")
    return HighsOutcome(
        x=np.array(sol.col_value, dtype=np.float64),
        objective=float(info.objective_function_value),
        status=text,
        mip_dual_bound=bound,
        row_dual=np.array(sol.row_dual, dtype=np.float64),
    )
