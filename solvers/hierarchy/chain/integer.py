"""``chain`` when the windowed LP optimum is fractional: an integer point and its proof.

Model 3's constraint matrix is not totally unimodular (Fioretto, Van Hentenryck, Zhu, AIJ 2021,
Model 3): on some noise draws the windowed LP's optimum is half-integral, and no Lagrangian
certificate exists (the integer optimum lies above the LP bound). The LP's multipliers still give
the exact Lagrangian bound L and confine every good integer point to the level set W_T
(:mod:`.certificate`). First a local branch and bound near the LP point
(:func:`local_integer_point`) gives an integer point U; U - L < 1 proves it (f is an integer).
Else HiGHS branch and bound over W_T with T = U - 1 - L (a fresh :class:`.lp.BlockLP` with
integer segments and a row f <= U - 1) finds any better point; the best U with U - 1 <= L + T
(checked in integers) is the optimum of Model 3 (:func:`level_set_search`). Optimality inside
W_T rests on HiGHS's branch and bound (absolute gap < 1 on an integral objective); the report
says which certificate was used.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import VerificationError
from securelp.solvers.hierarchy.chain.certificate import WindowBound, level_windows, proves_optimal
from securelp.solvers.hierarchy.chain.lp import BlockLP, integer_objective
from securelp.solvers.hierarchy.chain.options import ChainOptions
from securelp.solvers.hierarchy.chain.windows import spread, with_siblings
from securelp.solvers.hierarchy.consistency import model3_feasible
from securelp.solvers.hierarchy.model import Hierarchy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LevelSetOptimum:
    """The optimum of Model 3 proved by a level set: U <= L + T (checked in integers)."""

    cumulative: np.ndarray
    upper: int
    gap: Fraction  # U - L
    slack: Fraction  # T with U <= L + T
    note: str


def local_integer_point(hier: Hierarchy, y: np.ndarray, total: int, x: np.ndarray, options: ChainOptions,
                        deadline: float | None = None, siblings: bool = False) -> tuple[np.ndarray, int, str] | None:
    """A good integer point near a fractional LP optimum x: (point, f(point), note), or None.

    HiGHS branch and bound with every cell fixed at its LP value except the fractional cells and
    their neighbourhood (:func:`.windows.spread`: chain neighbours and ancestors, ``options.local_spread`` times;
    with ``siblings`` also the same sizes in the sibling regions, so that a count can move between
    the children of one parent), which get [floor - h, ceil + h], h = ``options.local_halfwidth``. (With all descendants, one
    fractional root cell would free every cell of its size: 1.2 M cells on a census draw.)
    Nothing here is trusted: the caller proves the point optimal against the exact Lagrangian
    bound L (U - L < 1, f being an integer) or uses U to shrink the level set it searches.
    """
    frac = np.abs(x - np.rint(x)) > 1e-6
    near = frac
    for _ in range(options.local_spread):
        near = spread(hier, near)
        if siblings:
            near = with_siblings(hier, near)
    near[0, 0] = False  # c_1^root = G (C6)
    base = np.rint(x).astype(np.int64)
    lo = np.where(near, np.clip(np.floor(x).astype(np.int64) - options.local_halfwidth, 0, total), base)
    hi = np.where(near, np.clip(np.ceil(x).astype(np.int64) + options.local_halfwidth, 0, total), base)
    model = BlockLP(hier, np.asarray(y, dtype=np.float64), lo, hi - lo, np.zeros_like(lo), options)
    if not model.dropped_rows_hold():  # pragma: no cover - the LP point satisfies every row
        return None
    point, note = model.solve_integer(options.mip_time_limit, deadline)
    if point is None or not model3_feasible(hier, point, total):
        return None
    upper = integer_objective(point, y)
    kind = "with siblings " if siblings else ""
    return point, upper, f"local branch and bound {kind}over {int(near.sum()):,} cells ({model.segments:,} segments): {note}"


def level_set_search(hier: Hierarchy, y: np.ndarray, total: int, wb: WindowBound, options: ChainOptions,
                     deadline: float | None = None,
                     incumbent: tuple[np.ndarray, int] | None = None) -> LevelSetOptimum | str:
    """Optimum of Model 3 by branch and bound over the level set W_T of the multipliers' bound.

    :mod:`.certificate`: every point with f <= L + T lies in W_T. With U the
    best known value (the optimum over a box containing W_T, or an incumbent), a better point
    has f <= U - 1 (f is an integer); if U - 1 <= L + T it would lie in the box, where nothing
    beats U: U is the optimum of Model 3, checked exactly. Without an incumbent T starts at
    ``options.level_set_start``; an empty W_T raises it x4, a point with U - 1 > L + T raises it to
    U - 1 - L. With a feasible incumbent U0 (from the local search) T starts at U0 - 1 - L and
    the branch and bound only seeks points with f <= U0 - 1 ("infeasible" proves U0). ``wb`` is
    the bound of the LP's multipliers. At most ``options.level_set_tries`` level sets, each with at
    most ``options.max_level_set_segments`` columns. Returns the optimum, or why none was proved.
    """
    yf = np.asarray(y, dtype=np.float64)
    best: tuple[np.ndarray, int] | None = None
    slack = options.level_set_start
    if incumbent is not None:
        best = (incumbent[0], int(incumbent[1]))
        slack = Fraction(best[1]) - 1 - wb.lower
        if slack < 0:  # U0 < L + 1: the incumbent is optimal already
            return LevelSetOptimum(best[0], best[1], Fraction(best[1]) - wb.lower, Fraction(0), "incumbent within 1 of L")
    notes = []
    for _ in range(options.level_set_tries):
        wlo, whi = level_windows(wb, y, total, slack)
        seg = int((whi - wlo).sum())
        if seg > options.max_level_set_segments:
            return f"the level set for T = {slack} needs {seg:,} segment columns (> {options.max_level_set_segments:,})"
        logger.info("chain: branch and bound over the level set T = %s (%d segment columns on %d cells)", slack, seg,
                    int((whi > wlo).sum()))
        model = BlockLP(hier, yf, wlo, whi - wlo, np.zeros_like(wlo), options)
        below = None if best is None else best[1] - 1  # only a better point matters
        x, note = (model.solve_integer(options.mip_time_limit, deadline, at_most=below) if model.dropped_rows_hold()
                   else (None, "empty box"))
        notes.append(f"T = {slack}: {seg:,} segments, {note}")
        logger.info("chain: level set %s", notes[-1])
        if x is not None:
            if not model3_feasible(hier, x, total):  # pragma: no cover - HiGHS returned an infeasible point
                raise VerificationError("chain: the branch-and-bound point fails Model 3 feasibility")
            upper = integer_objective(x, y)
            if best is None or upper < best[1]:
                best = (x, upper)
        # best = min(incumbent, box optimum). A better point z has f(z) <= best - 1; if that is
        # <= L + T, z lies in W_T (inside the box) and so f(z) >= box optimum >= best: none exists
        if best is not None and proves_optimal(wb, best[1] - 1, slack):
            return LevelSetOptimum(best[0], best[1], Fraction(best[1]) - wb.lower, slack, "; ".join(notes))
        slack = slack * 4 if best is None else Fraction(best[1]) - 1 - wb.lower
    return f"no level set proved the optimum in {options.level_set_tries} tries"
