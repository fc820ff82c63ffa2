"""What the solution itself tells the coordinator.

At the optimum the coordinator holds u and each party's y_j (it computed them), so for every
party it knows the row activity A_j x_j = M_j u + S_j y_j (the dense part M_j u = A_d B_d' u =
A_d x_d, the monomial part S_j y_j = A_b D P y_j = A_b x_b) without any attack: how much of
each constraint the party's columns use. When the party reveals x_j (the default agreement),
x_j itself arrives. Matching the revealed x_j to recovered columns (x_b = D P y for monomial
columns, x_d = B_d' u for dense ones) gives scales and original positions; those attacks live
with the columns they complete (``monomial_positions``, ``dense_costs``).
"""

from __future__ import annotations

import time

import numpy as np

from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, not_applicable
from securelp.coordinator.audit.view import PartyView

FAMILY = "solution"


def row_activity(view: PartyView) -> np.ndarray | None:
    """A_j x_j at the optimum as the coordinator computes it (None without an optimal solution)."""
    if view.u is None and view.y is None:
        return None
    act = np.zeros(view.n_rows)
    if view.masked_a.shape[1] and view.u is not None and view.u.size == view.masked_a.shape[1]:
        act += view.masked_a @ view.u
    if view.n_monomial and view.y is not None:
        act += view.scaled_a @ view.y
    return act


def attack_solution(view: PartyView) -> list[AttackOutcome]:
    """``solution_row_activity`` and ``solution_revealed`` for one party."""
    parties = (view.party_id,)
    t0 = time.perf_counter()
    act = row_activity(view)
    if act is None:
        activity = not_applicable("solution_row_activity", FAMILY, parties, "no optimal solution was sent")
    else:
        activity = AttackOutcome("solution_row_activity", FAMILY, parties, AttackStatus.RAN, columns=view.n_cols,
                                 figures={"rows": view.n_rows, "active_rows": int(np.count_nonzero(np.abs(act) > 1e-12))},
                                 seconds=time.perf_counter() - t0)
        activity.artifacts["activity"] = act
    if view.x is None:
        revealed = not_applicable("solution_revealed", FAMILY, parties,
                                  "x_j was kept by the party" if view.status else "the session sent no solution")
    else:
        revealed = AttackOutcome("solution_revealed", FAMILY, parties, AttackStatus.RAN, columns=view.n_cols,
                                 figures={"nonzero": int(np.count_nonzero(view.x))})
    return [activity, revealed]
