"""Benders cuts: their value at a master point, their safe cleaning and scaling, and better duals
for a certificate or a cut that falls short (J. F. Benders 1962; Qiu Sec. 4).

A cut is ``theta_b >= alpha + beta' x[vars]`` (optimality) or ``alpha + beta' x[vars] <= 0``
(feasibility). Any positive multiple of a valid cut is valid, and a term ``beta_v x_v`` with
``x_v`` in ``[0, u_v]`` may be replaced by its least (or largest) value over the box, moved into
the constant: both keep a cut valid while bringing it within what HiGHS represents exactly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.benders.highs_calls import rescaled_duals
from securelp.solvers.benders.options import BendersOptions
from securelp.solvers.lp.highs import signed_duals

__all__ = ["bound_term", "cut_at", "drop_tiny", "fit_cut_row", "recertify"]

logger = logging.getLogger(__name__)


def cut_at(alpha: float, vars_: np.ndarray, beta: np.ndarray, x: np.ndarray) -> float:
    """A cut's left side ``alpha + beta' x[vars_]`` at the master point ``x``."""
    return alpha + (float(beta @ x[vars_]) if vars_.size else 0.0)


def bound_term(pi: np.ndarray, lower: np.ndarray, upper: np.ndarray, AT: sp.csr_matrix, cost: np.ndarray,
               col_upper: np.ndarray) -> tuple[np.ndarray, float]:
    """``pi`` clipped to valid signs, and the weak-duality term ``sum_j min(0, r_j) u_j`` of its reduced
    costs ``r = cost - A' pi`` over the box ``[0, u]``: with it the cut is valid for any duals."""
    pi = signed_duals(pi, lower, upper)
    reduced = cost - AT @ pi
    return pi, float(np.sum(np.minimum(reduced, 0.0) * col_upper))


def drop_tiny(idx: np.ndarray, coef: np.ndarray, box: np.ndarray, below: float
              ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The linear term ``sum_v coef_v x_v`` (``x_v`` in ``[0, box_v]``) without its coefficients below
    ``below``: the kept ``(idx, coef)`` and the dropped terms' least and largest value over the box,
    which the caller moves into the cut's constant so the cut stays valid."""
    small = np.abs(coef) < below
    if not np.any(small):
        return idx, coef, 0.0, 0.0
    dropped, b = coef[small], box[small]
    return (idx[~small], coef[~small], float(np.sum(np.minimum(dropped, 0.0) * b)),
            float(np.sum(np.maximum(dropped, 0.0) * b)))


def fit_cut_row(idx: np.ndarray, vals: np.ndarray, rhs: float, violation: float, col_upper: np.ndarray,
                optimality: bool, options: BendersOptions) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """A master row ``vals' x[idx] <= rhs`` (feasibility) or ``vals' x[idx] + theta >= rhs`` (optimality)
    as HiGHS will see it: ``(idx, vals, rhs, theta_coef)``, or ``None`` for an optimality cut that cannot
    be represented (its theta coefficient would fall below ``options.cut_clean_below``).

    A row that cuts off the master's point by ``violation`` less than ``options.visible_violation`` is
    scaled up until it does by that much, within ``options.cut_max_upscale`` and
    ``options.cut_max_coefficient`` (HiGHS judges a row's feasibility in its own units); a row with
    coefficients above ``options.cut_max_coefficient`` is scaled down to it, and the coefficients
    that then fall below ``options.cut_clean_below`` are dropped safely (``col_upper``: the boxes of
    ``x[idx]``)."""
    theta_coef = 1.0
    big = float(np.abs(vals).max()) if vals.size else 0.0
    if 0.0 < violation < options.visible_violation:
        up = min(options.visible_violation / violation, options.cut_max_upscale,
                 options.cut_max_coefficient / max(big, 1.0))
        if up > 1.0:
            vals, rhs, theta_coef, big = vals * up, rhs * up, theta_coef * up, big * up
    if big > options.cut_max_coefficient and np.isfinite(big):
        scale = options.cut_max_coefficient / big
        if optimality and scale < options.cut_clean_below:
            logger.info("Benders: a cut with coefficients up to %.3g left out", big)
            return None
        vals, rhs, theta_coef = vals * scale, rhs * scale, scale
        idx, vals, least, most = drop_tiny(idx, vals, col_upper, options.cut_clean_below)
        rhs -= most if optimality else least
    return idx, vals, rhs, theta_coef


def recertify(owner: Any, best: Any, score: float, objective: float,
              from_duals: Callable[[np.ndarray], tuple[Any, float]], scales: tuple[int, ...]) -> Any:
    """``best`` (a certificate or a cut, worth ``score``), or what ``from_duals`` makes of the duals
    of ``owner.h``'s LP re-solved with the costs scaled by each of ``scales`` in turn
    (:func:`~securelp.solvers.benders.highs_calls.rescaled_duals`) where that is worth more, while the
    score falls short of HiGHS's ``objective`` by more than ``owner.recertify_shortfall`` (relative);
    ``owner``: a master component or a block (its ``h``, ``deadline``, ``recertify_solves`` count and
    ``recertify_seconds``)."""
    for k in scales:
        if score >= objective - owner.recertify_shortfall * abs(objective):
            break
        t = time.perf_counter()
        owner.recertify_solves += 1
        pi = rescaled_duals(owner.h, k, owner.deadline)
        if pi is not None:
            candidate, value = from_duals(pi)
            if value > score:
                best, score = candidate, value
        owner.recertify_seconds += time.perf_counter() - t
    return best
