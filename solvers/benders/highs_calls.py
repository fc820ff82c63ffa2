"""HiGHS as the Benders engine calls it: models from row blocks, runs that retry and keep to a
deadline, and re-solves with scaled costs for finer duals."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from securelp.solvers.benders.model import RowBlock
from securelp.solvers.errors import SolverError
from securelp.solvers.lp.highs import new_highs, set_time_left

__all__ = ["RETRY_LOCK", "TimeUp", "pass_model", "rescaled_duals", "run_highs"]

logger = logging.getLogger(__name__)

INF = np.inf

#: retries of an inconclusive run take this lock: such ends were seen under concurrent HiGHS runs
RETRY_LOCK = threading.Lock()


class TimeUp(Exception):
    """A HiGHS solve reached the run's deadline (the iteration it belongs to is abandoned)."""


def pass_model(h: Any, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, rows: RowBlock) -> None:
    """Load ``min cost' v  s.t.  rows, lower <= v <= upper`` into the ``highspy.Highs`` ``h``.

    Raises
    ------
    SolverError
        HiGHS refuses the model.
    """
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = int(cost.size)
    lp.num_row_ = rows.n_rows
    lp.col_cost_ = np.ascontiguousarray(cost, dtype=float)
    lp.col_lower_ = np.ascontiguousarray(lower, dtype=float)
    lp.col_upper_ = np.ascontiguousarray(upper, dtype=float)
    lp.row_lower_ = np.ascontiguousarray(rows.lower, dtype=float)
    lp.row_upper_ = np.ascontiguousarray(rows.upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = np.ascontiguousarray(rows.starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.ascontiguousarray(rows.index, dtype=np.int32)
    lp.a_matrix_.value_ = np.ascontiguousarray(rows.value, dtype=float)
    if h.passModel(lp) == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected a Benders model (passModel failed)")


def run_highs(h: Any, what: str, deadline: float = INF) -> str:
    """Run HiGHS; on a numerically inconclusive end, retry cold, then with the interior-point solver.

    ``deadline`` (a ``time.perf_counter`` value): HiGHS gets the time left as its own time limit, and
    :class:`TimeUp` is raised when it is reached (before the solve or during it). Returns the model
    status text, ``Optimal`` or ``Infeasible`` when conclusive.

    Raises
    ------
    SolverError
        The last retry failed, or an optimal end came without a valid dual solution.
    """
    import highspy

    status = ""
    for attempt in range(3):
        left = deadline - time.perf_counter()
        if left <= 0.0:
            raise TimeUp(what)
        set_time_left(h, left)  # HiGHS's limit counts the object's earlier runs too; inf: none
        if attempt == 0 and h.getOptionValue("solver")[1] != "choose":
            h.setOptionValue("solver", "choose")  # undo a previous fallback before the warm run
        if attempt == 1:
            h.clearSolver()
        elif attempt == 2:
            h.clearSolver()
            h.setOptionValue("solver", "ipm")
        if attempt == 0:
            run_status = h.run()
        else:
            with RETRY_LOCK:
                run_status = h.run()
        if run_status == highspy.HighsStatus.kError and attempt == 2:
            raise SolverError(f"HiGHS failed on {what} (model status {h.modelStatusToString(h.getModelStatus())})")
        status = h.modelStatusToString(h.getModelStatus())
        if status in ("Optimal", "Infeasible"):
            break
        if status == "Time limit reached":
            raise TimeUp(what)
        logger.debug("HiGHS ended %s with %s (attempt %d); retrying", what, status, attempt + 1)
    if status == "Optimal" and not h.getSolution().dual_valid:
        raise SolverError(f"HiGHS reported {what} optimal without a valid dual solution")
    return status


def rescaled_duals(h: Any, k: int, deadline: float) -> np.ndarray | None:
    """Row duals of the LP that ``h`` holds, re-solved from ``h``'s basis by a new HiGHS with the
    costs times 2^k (``user_objective_scale``), so with a dual tolerance k halvings finer; ``None``
    when that solve does not end optimal with valid duals or the deadline has passed. ``h`` itself
    is not touched: changing its scale in place and back leaves a model 'Not Set' for later solves."""
    import highspy

    left = deadline - time.perf_counter()
    if left <= 0.0:
        return None
    h2 = new_highs({"user_objective_scale": int(k)}, tight=True)
    if h2.passModel(h.getLp()) == highspy.HighsStatus.kError:
        return None
    h2.setBasis(h.getBasis())
    set_time_left(h2, left)
    if (h2.run() == highspy.HighsStatus.kError or h2.modelStatusToString(h2.getModelStatus()) != "Optimal"
            or not h2.getSolution().dual_valid):
        return None
    return np.asarray(h2.getSolution().row_dual, dtype=float)
