"""Baselines: the relaxed QPs M_H^r / M_c^r (rounded) and the Census TopDown scheme.

M_H^r and M_c^r (Fioretto, Van Hentenryck, Zhu, AIJ 2021) solve the continuous relaxations of
Model 1 and Model 3 (:mod:`.relaxation`) and round each value to the nearest integer; rounding
can break consistency (and M_c^r can produce inconsistent counts), which the report counts.

TopDown (Abowd et al., "The 2020 Census Disclosure Avoidance System TopDown Algorithm",
HDSR 2022), two levels at a time: the root's noisy histogram is projected onto
{x >= 0, sum_s x_s = G} (least squares) and rounded keeping the sum; then, for each parent
with its integer counts fixed, the children's noisy counts are projected, size by size, onto
{x >= 0, sum_children x = parent count} and rounded keeping the parent sums (largest
remainders). For these constraint sets the least-squares step is an exact Euclidean
projection onto a scaled simplex (Held, Wolfe, Crowder 1974; Duchi et al. 2008) and the
rounding step (floor, then +1 to the largest fractional parts) is the closest integer point
keeping the sums, so both steps are solved exactly in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import ResourceError
from securelp.solvers.hierarchy.errors import check_option
from securelp.solvers.hierarchy.model import Hierarchy, from_cumulative
from securelp.solvers.hierarchy.relaxation import (
    MODEL3_QP_MAX_VARIABLES,
    model1_relaxation,
    model1_relaxation_tree,
    model3_relaxation,
    model3_relaxation_dykstra,
)


@dataclass(frozen=True)
class HqpOptions:
    """Which solver M_H^r's relaxation uses.

    HiGHS's QP for models up to ``highs_max_variables`` variables whose values (noisy counts, G)
    stay within ``highs_max_scale``; the exact tree algorithm (tested equal to HiGHS) otherwise.
    HiGHS's active-set QP took 3.5 s on 1,550 variables and ended with "Solve error" after 442 s
    on the 152,489-variable taxi instance; at tolerances near 1e-7 relative it would move counts
    of 2**20 by about 0.1, and on values near 1e15 it ran for more than 15 minutes, where the tree
    algorithm takes under 1 ms.
    """

    highs_max_variables: int = 2000
    highs_max_scale: float = 2.0**20

    def __post_init__(self) -> None:
        check_option(self, "highs_max_variables", self.highs_max_variables >= 0, "an integer >= 0")
        check_option(self, "highs_max_scale", self.highs_max_scale > 0, "a positive number")


@dataclass(frozen=True)
class CqpOptions:
    """Which solver M_c^r's relaxation uses, and when it is refused.

    HiGHS's QP up to ``highs_max_cells``; above, up to ``dykstra_max_cells``, Dykstra's alternating
    projections to a max-norm residual of ``dykstra_tol`` (at most ``dykstra_max_iterations``);
    larger models are refused (ResourceError).
    """

    highs_max_cells: int = MODEL3_QP_MAX_VARIABLES
    dykstra_max_cells: int = 500_000
    dykstra_tol: float = 1e-3
    dykstra_max_iterations: int = 3000

    def __post_init__(self) -> None:
        check_option(self, "highs_max_cells", self.highs_max_cells >= 0, "an integer >= 0")
        check_option(self, "dykstra_max_cells", self.dykstra_max_cells >= 0, "an integer >= 0")
        check_option(self, "dykstra_tol", self.dykstra_tol > 0, "a positive number")
        check_option(self, "dykstra_max_iterations", self.dykstra_max_iterations >= 1, "an integer >= 1")


def hqp(hier: Hierarchy, y: np.ndarray, total: int, options: HqpOptions = HqpOptions()) -> tuple[np.ndarray, str]:
    """M_H^r: the relaxed Model 1 QP, rounded to the nearest integers; returns (counts, backend)."""
    scale = max(float(np.max(np.abs(y))) if np.asarray(y).size else 0.0, float(total))
    if np.asarray(y).size <= options.highs_max_variables and scale <= options.highs_max_scale:
        x, _ = model1_relaxation(hier, y, total)
        backend = "highs-qp"
    else:
        x = model1_relaxation_tree(hier, y, total)
        backend = "tree"
    return np.rint(x).astype(np.int64), backend


def cqp(hier: Hierarchy, noisy_cum: np.ndarray, total: int, options: CqpOptions = CqpOptions()
        ) -> tuple[np.ndarray, np.ndarray, dict[str, object]]:
    """M_c^r: the relaxed Model 3 QP, rounded; returns (rounded cumulative, counts, details).

    Raises
    ------
    ResourceError
        More cells than ``options.dykstra_max_cells``.
    """
    size = np.asarray(noisy_cum).size
    if size <= options.highs_max_cells:
        c, _ = model3_relaxation(hier, noisy_cum, total, max_variables=options.highs_max_cells)
        details: dict[str, object] = {"qp_backend": "highs-qp"}
    elif size <= options.dykstra_max_cells:
        c, residual, iters = model3_relaxation_dykstra(hier, noisy_cum, total, tol=options.dykstra_tol,
                                                       max_iter=options.dykstra_max_iterations)
        details = {"qp_backend": "dykstra", "relaxation_residual": residual, "relaxation_iterations": iters}
    else:
        raise ResourceError(
            f"cqp: the Model 3 relaxation has {size:,} cells; HiGHS's QP is used up to {options.highs_max_cells:,} "
            f"and Dykstra's projections up to {options.dykstra_max_cells:,}"
        )
    cum = np.rint(c).astype(np.int64)
    return cum, from_cumulative(cum), details


def project_simplex_columns(v: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Column-wise Euclidean projection of v (k x m) onto {x >= 0, sum_rows x = totals[j]}."""
    v = np.asarray(v, dtype=np.float64)
    k = v.shape[0]
    u = -np.sort(-v, axis=0)
    css = np.cumsum(u, axis=0) - totals[None, :]
    ind = np.arange(1, k + 1, dtype=np.float64)[:, None]
    cond = (u - css / ind) > 0
    rho = k - 1 - np.argmax(cond[::-1], axis=0)
    theta = css[rho, np.arange(v.shape[1])] / (rho + 1.0)
    x = np.maximum(v - theta[None, :], 0.0)
    x[:, totals <= 0] = 0.0
    return x


def round_keep_sums(x: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Column-wise: floor, then +1 to the largest fractional parts until each column sums to totals[j]."""
    fl = np.floor(x + 1e-12)
    rem = (totals - fl.sum(axis=0)).astype(np.int64)
    frac = x - fl
    order = np.argsort(-frac, axis=0, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(x.shape[0])[:, None].repeat(x.shape[1], axis=1), axis=0)
    out = fl.astype(np.int64) + (rank < rem[None, :]).astype(np.int64)
    return out


def topdown(hier: Hierarchy, y: np.ndarray, total: int) -> np.ndarray:
    """Census TopDown (least squares then sum-preserving rounding, two levels at a time)."""
    yf = np.asarray(y, dtype=np.float64)
    x = np.zeros(yf.shape, dtype=np.int64)
    root = project_simplex_columns(yf[0][:, None], np.array([float(total)]))
    x[0] = round_keep_sums(root, np.array([total]))[:, 0]
    for r in hier.internal:
        kids = list(hier.children[r])
        parent = x[r].astype(np.float64)
        proj = project_simplex_columns(yf[kids], parent)
        x[kids] = round_keep_sums(proj, x[r])
    return x
