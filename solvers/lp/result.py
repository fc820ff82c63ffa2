"""Solve results: one status enum, one frozen result shape."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class SolveStatus(enum.Enum):
    """What happened to the model (not whether the backend call worked)."""

    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
    LIMIT = "limit"
    ERROR = "error"


@dataclass(frozen=True, eq=False)
class LPResult:
    """The result of one LP solve.

    ``objective`` includes the model's offset and is NaN unless the status is optimal.
    ``x``, ``row_duals`` and ``col_duals`` are None where the backend has no solution;
    ``dual_ray`` is set when the backend proves infeasibility with a ray.
    """

    status: SolveStatus
    objective: float
    x: np.ndarray | None
    row_duals: np.ndarray | None
    col_duals: np.ndarray | None
    dual_ray: np.ndarray | None
    iterations: int
    solve_time_s: float
    backend_status: str

    @property
    def is_optimal(self) -> bool:
        return self.status is SolveStatus.OPTIMAL
