"""What a metric-DP solve reports: the verified mechanism, its certified bounds and how they moved.

Every method (``direct``, Qiu's record decomposition, the column decomposition, the exponential
mechanism) returns a :class:`MechanismResult` of one fixed shape; its mechanism has passed
:func:`securelp.solvers.mdp.verify.verify_mechanism`, and its objective is that mechanism's
expected loss (Qiu Eq. 4), not a solver's objective.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from securelp.solvers.mdp.verify import VerificationReport

__all__ = ["IterationRecord", "MechanismResult"]


@dataclass(frozen=True)
class IterationRecord:
    """Bounds after one iteration of an iterative method."""

    iteration: int
    lower: float
    upper: float
    seconds: float


@dataclass(frozen=True)
class MechanismResult:
    """A verified mechanism and how it was obtained (fixed shape; see docs/reference/reports.md)."""

    method: str
    status: str
    mechanism: np.ndarray
    objective: float
    lower_bound: float
    upper_bound: float
    rel_gap: float
    iterations: int
    time_s: float
    verification: VerificationReport
    history: tuple[IterationRecord, ...] = ()
    partition: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
