"""The block-ladder LP the Benders engine takes, and what it returns.

Problem (all variables bounded, block variables in ``[0, u]`` with ``u`` finite)::

    min  c0' x + sum_m c_m' y_m
    s.t. L0 <= A0 x <= U0,            lx <= x <= ux                       (master rows)
         L_m <= W_m y_m <= U_m(x),    0 <= y_m <= u_m                      (block m)

where the *linked* rows of block ``m`` have upper bound ``U_r(x) = base_r + gamma_r x_{v(r)}`` (one
master variable per linked row; their lower bound is ``-inf``) and every other row is constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["BendersIteration", "BendersResult", "LinkedRows", "MasterSpec", "RowBlock", "SubproblemSpec"]


@dataclass(frozen=True)
class RowBlock:
    """Row-wise sparse constraint rows ``lower <= A v <= upper`` (CSR arrays)."""

    starts: np.ndarray
    index: np.ndarray
    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.lower.size)

    def matrix(self, n_cols: int) -> sp.csr_matrix:
        return sp.csr_matrix((self.value, self.index, self.starts), shape=(self.n_rows, n_cols))

    @staticmethod
    def empty() -> RowBlock:
        z = np.zeros(0)
        return RowBlock(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), z, z, z)


@dataclass(frozen=True)
class LinkedRows:
    """Rows of a block whose upper bound is ``base + gamma * x[var]``."""

    rows: np.ndarray
    var: np.ndarray
    gamma: np.ndarray


@dataclass(frozen=True)
class MasterSpec:
    """The master part: variables ``x`` with cost, bounds and constant rows."""

    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    rows: RowBlock

    @property
    def n(self) -> int:
        return int(self.cost.size)


@dataclass(frozen=True)
class SubproblemSpec:
    """One block ``m``: ``min c' y`` s.t. rows (some linked to ``x``), ``0 <= y <= upper``.

    ``unit_rows`` optionally lists equality rows ``sum_{j in S_r} y_j = b_r`` (coefficients 1,
    disjoint ``S_r``). Their free duals are shifted down by ``max_j (-reduced_j)^+`` before a
    cut is formed, which makes every reduced cost in ``S_r`` non-negative at a cost of one
    ``delta_r b_r`` instead of ``sum_j min(0, reduced_j) u_j``: a much tighter valid cut when
    the solver's duals are slightly infeasible.
    """

    name: str
    cost: np.ndarray
    upper: np.ndarray
    rows: RowBlock
    linked: LinkedRows
    theta_lower: float = 0.0
    unit_rows: np.ndarray | None = None


@dataclass(frozen=True)
class BendersIteration:
    """Bounds after one iteration (``upper`` is ``inf`` until a feasible solution is found)."""

    iteration: int
    lower: float
    upper: float
    seconds: float
    n_optimality_cuts: int
    n_feasibility_cuts: int
    n_failed_blocks: int = 0  # blocks on which every HiGHS fallback failed (no cut from them)
    #: seconds of this iteration by part (:data:`securelp.solvers.benders.driver.PARTS`)
    parts: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class BendersResult:
    """Outcome of :meth:`securelp.solvers.benders.driver.BendersEngine.run`.

    ``status``: ``optimal`` (gap reached), ``iteration_limit``, ``time_limit``, ``stalled`` (no cut
    left), ``no_progress`` (a pace too slow for the budget), ``numerical_trouble`` or ``memory_limit``.
    """

    status: str
    lower_bound: float
    upper_bound: float
    rel_gap: float
    iterations: int
    history: tuple[BendersIteration, ...]
    best_payload: Any
    n_master_components: int
    master_component_sizes: tuple[int, ...]
    total_cuts: int
    details: dict[str, Any] = field(default_factory=dict)
