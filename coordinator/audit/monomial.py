"""Attacks on the positive monomial transform of bounded columns.

In the default (monomial) mode party j sends, for its bounded columns, S = A_b D P (m x n_b),
c~ = P'D c_b and the bounds P'D^-1 l_b, P'D^-1 u_b, where D is a private positive diagonal
(scales log-uniform in [1/s, s], s = ``SCALE_SPREAD`` = 8, public in party/session.py) and P a
private permutation (Bednarz, Bean, Roughan, *Hiccups on the road to privacy-preserving linear
programming*, WPES 2009, propose the transform; Mangasarian 2011 the protocol). Column t of S
is d_t a_pi(t): the direction of every bounded column (its zero pattern, signs, ratios, and its
cost and bounds in the same ratios) is revealed exactly, and only one positive number per column
is hidden. Anyone who knows one number of a column (an entry, its cost, a bound) has all of it.

``monomial_positions`` (matching to the revealed solution; certain)
    With x_j revealed, x_pi(t) = d_t y_t exactly, d_t in [1/s, s]: column t may take an entry x_i
    only when x_i / y_t lies in that range, each entry is taken once, and the party's dense columns
    take the entries left (:mod:`securelp.coordinator.audit.matching`). Where a column can take a
    single value in every complete assignment, its factor d_t = x_i / y_t is **certain** (no other
    reading of the transcript exists), and where that value occurs once in x_j, so is its position.
    Columns with y_t = 0 have x = 0 whatever d_t is. The values the dense columns can take are
    passed on to the dense attacks.
``monomial_normalization`` (best guesses)
    For the other columns, the factor that makes the column's numbers round
    (:mod:`securelp.coordinator.audit.scales`: an entry, the cost or a bound of +-1, primitive
    integers, two-digit round values; with x_j revealed only among the values the matching
    allows), between equally round candidates the hypothesis that held on the confirmed columns of
    the session. Roundness does not confirm a factor (any rational multiple of a round column is
    round), so these are best guesses, with a class and the hit rate measured for it; never claims.
``monomial_column_order`` (best guesses of positions)
    MPS files usually list columns in the order of the first row they touch (staircase and
    block structure): sorting the shuffled columns by their row pattern guesses their order.
    Scored on the columns whose positions are certain, in the run itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.matching import MAX_EDGES, complete_assignments, group_values
from securelp.coordinator.audit.results import (
    GUESS,
    AttackOutcome,
    AttackStatus,
    RecoveredColumns,
    not_applicable,
    skipped,
)
from securelp.coordinator.audit.scales import Priors, fit_scales
from securelp.party.session import SCALE_SPREAD

FAMILY = "monomial"
#: relative tolerance of "x_i / y_t is in the public range" and of "two entries of x are equal"
X_MATCH_TOL = 1e-9
#: rows of a column's pattern compared when sorting columns by row pattern
ORDER_DEPTH = 8


@dataclass(frozen=True, eq=False)
class SolutionMatch:
    """What the revealed x_j fixes for a party's monomial columns (and leaves to its dense ones).

    ``ran`` is False when nothing could be matched (``reason`` says why). Per column t: ``certain``
    (one value possible: d_t known), ``scale`` (that d_t, 1 elsewhere), ``position`` (certain original
    position or -1), ``zero`` (y_t = 0: x = 0). ``allowed`` the (column, d) pairs every complete
    assignment allows (the candidates of the columns with y_t != 0). ``dense_values`` the values the
    dense columns can take (one per group, with ``dense_counts`` entries of x_j each, ``dense_only``
    where no monomial column can take them), ``dense_slots`` how many nonzero entries they take.
    """

    ran: bool
    reason: str
    certain: np.ndarray
    scale: np.ndarray
    position: np.ndarray
    zero: np.ndarray
    allowed: tuple[np.ndarray, np.ndarray]
    dense_values: np.ndarray
    dense_counts: np.ndarray
    dense_only: np.ndarray
    dense_index: np.ndarray  # per dense value: the index of its entry in x_j when it occurs once, else -1
    dense_slots: int
    edges: int

    @staticmethod
    def none(n: int, reason: str, zero: np.ndarray | None = None) -> SolutionMatch:
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0))
        return SolutionMatch(False, reason, np.zeros(n, dtype=bool), np.ones(n), np.full(n, -1, dtype=np.int64),
                             np.zeros(n, dtype=bool) if zero is None else zero, empty, np.zeros(0), np.zeros(0, dtype=np.int64),
                             np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64), 0, 0)


def match_solution(y: np.ndarray, x: np.ndarray, n_dense: int, spread: float = SCALE_SPREAD) -> SolutionMatch:
    """Match the revealed x_j to the monomial columns (see the module docstring).

    Parameters
    ----------
    y : the party's monomial variables (one per scaled column).
    x : the revealed x_j (original order, all of the party's columns).
    n_dense : the party's dense-masked columns (free slots).
    spread : the public scale range [1/spread, spread].
    """
    n = y.size
    zero = y == 0
    if x.size != n + n_dense:
        return SolutionMatch.none(n, f"x_j has {x.size} entries, the party {n + n_dense} columns", zero)
    live_t = np.flatnonzero(~zero)
    live_x = np.flatnonzero(x != 0)
    slots = live_x.size - live_t.size
    if slots < 0 or slots > n_dense:
        return SolutionMatch.none(n, f"{live_t.size} columns are nonzero in y but {live_x.size} entries of x_j, with "
                                     f"{n_dense} dense columns: no assignment fits", zero)
    reps, counts, group = group_values(x[live_x], X_MATCH_TOL)
    # edges: t may take group g when x_g / y_t lies in [1/s, s] (same sign)
    yt = y[live_t]
    lo = np.where(yt > 0, yt / spread, yt * spread) * (1 - X_MATCH_TOL * np.sign(yt))
    hi = np.where(yt > 0, yt * spread, yt / spread) * (1 + X_MATCH_TOL * np.sign(yt))
    a = np.searchsorted(reps, np.minimum(lo, hi), side="left")
    b = np.searchsorted(reps, np.maximum(lo, hi), side="right")
    per = np.maximum(b - a, 0)
    edges = int(per.sum())
    if edges > MAX_EDGES:
        return SolutionMatch.none(n, f"{edges:,} possible pairs of columns and entries of x_j (limit {MAX_EDGES:,})",
                                  zero)
    e_left = np.repeat(np.arange(live_t.size), per)
    e_group = a[e_left] + (np.arange(edges) - np.repeat(np.cumsum(per) - per, per))
    fit = complete_assignments(live_t.size, e_left, e_group, counts, slots)
    if not fit.feasible:
        return SolutionMatch.none(n, "no assignment of x_j to the columns fits the public scale range", zero)
    use = fit.usable
    u_left, u_group = e_left[use], e_group[use]
    n_usable = np.bincount(u_left, minlength=live_t.size)
    certain = np.zeros(n, dtype=bool)
    scale = np.ones(n)
    position = np.full(n, -1, dtype=np.int64)
    one = np.flatnonzero(n_usable == 1)
    first_of = np.full(live_t.size, -1, dtype=np.int64)
    first_of[u_left[::-1]] = u_group[::-1]
    t_one = live_t[one]
    g_one = first_of[one]
    certain[t_one] = True
    scale[t_one] = reps[g_one] / y[t_one]
    index_of_group = np.full(reps.size, -1, dtype=np.int64)
    single = counts == 1
    index_of_group[group[single[group]]] = live_x[single[group]]
    position[t_one] = index_of_group[g_one]
    allowed = (live_t[u_left], reps[u_group] / y[live_t[u_left]])
    dense = np.flatnonzero(fit.slots_usable)
    return SolutionMatch(True, "", certain, scale, position, zero, allowed, reps[dense], counts[dense],
                         fit.slots_only[dense], index_of_group[dense], slots, edges)


def column_order(S: sp.csc_matrix) -> np.ndarray:
    """The guessed original order of the columns: sorted by their row pattern (the rows they touch,
    first to last, up to ORDER_DEPTH rows, then their count). Returns the rank of each column."""
    S = sp.csc_matrix(S)
    S.sort_indices()
    n, m = S.shape[1], S.shape[0]
    counts = np.diff(S.indptr)
    keys = []
    for j in range(ORDER_DEPTH):
        has = counts > j
        k = np.full(n, m + 1, dtype=np.int64)
        k[has] = S.indices[S.indptr[:-1][has] + j]
        keys.append(k)
    order = np.lexsort([counts] + keys[::-1])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return rank


def attack_monomial(party: str, S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    y: np.ndarray | None, x: np.ndarray | None, budget: Budget, *, n_dense: int = 0,
                    match: SolutionMatch | None = None, priors: Priors | None = None) -> list[AttackOutcome]:
    """Run ``monomial_positions``, ``monomial_normalization`` and ``monomial_column_order`` on one
    party's monomial part.

    Parameters
    ----------
    S, cost, lower, upper : what the coordinator received: A_b D P, P'D c_b and the scaled bounds.
    y : the party's monomial variables of the solution (None: no optimal solution).
    x : x_j as revealed by the party (None: kept).
    budget : the audit's time budget.
    n_dense : the party's dense-masked columns.
    match : the matching of x_j (computed here when None and x_j is revealed).
    priors : the session's priors for the best guesses (None: the defaults).

    Returns
    -------
    Three outcomes. Claimed columns (values exactly, position where it is certain) are those the
    matching confirms; every other column gets a best guess with its class (``basis``), and best
    guesses of positions (from a guessed factor whose d_t y_t occurs once in x_j, else from the
    column order when the party has no dense column).
    """
    parties = (party,)
    n = S.shape[1]
    names = ("monomial_positions", "monomial_normalization", "monomial_column_order")
    if n == 0:
        reason = "no bounded column under a monomial transform"
        return [not_applicable(a, FAMILY, parties, reason) for a in names]
    t0 = time.perf_counter()
    S = sp.csc_matrix(S)
    reveal = x is not None and y is not None
    if match is None:
        match = match_solution(y, x, n_dense) if reveal else SolutionMatch.none(n, "x_j was not revealed")  # type: ignore[arg-type]
    out: list[AttackOutcome] = []
    if not reveal:
        out.append(not_applicable("monomial_positions", FAMILY, parties,
                                  "x_j was not revealed" if x is None else "no optimal solution was sent"))
    elif not match.ran:
        out.append(skipped("monomial_positions", FAMILY, parties, match.reason, n) if "limit" in match.reason
                   else AttackOutcome("monomial_positions", FAMILY, parties, AttackStatus.RAN, reason=match.reason,
                                      columns=n, seconds=time.perf_counter() - t0))
    allowed = match.allowed if match.ran else None
    fit = fit_scales(S, cost, lower, upper, budget, spread=SCALE_SPREAD, allowed=allowed, priors=priors)
    certain = match.certain
    scale = np.where(certain, match.scale, fit.scale)
    basis = fit.classes(learnt=priors is not None and priors.learnt > 0)
    basis[certain] = "solution_matching"
    A_hat = sp.csc_matrix(S @ sp.diags(1.0 / scale))
    c_hat = cost / scale
    position = match.position.copy()
    guess_pos = np.full(n, -1, dtype=np.int64)
    guess_basis = np.full(n, "", dtype=object)
    if reveal:
        xs = _x_positions(scale, y, x)  # type: ignore[arg-type]
        pick = (position < 0) & (xs >= 0) & fit.has
        guess_pos[pick] = xs[pick]
        guess_basis[pick] = GUESS + "x_scale"
    order_fig: dict = {}
    if n_dense == 0:
        rank = column_order(S)
        pick = (position < 0) & (guess_pos < 0)
        guess_pos[pick] = rank[pick]
        guess_basis[pick] = GUESS + "column_order"
        known = position >= 0
        order_fig = {"checked_on_certain_positions": int(known.sum()),
                     "right_on_certain_positions": int(np.sum(rank[known] == position[known]))}
    rec = RecoveredColumns(A_hat, c_hat, certain.copy(), position, signed_scale=False, basis=basis,
                           position_guess=guess_pos, position_basis=guess_basis)
    if reveal and match.ran:
        out.append(AttackOutcome("monomial_positions", FAMILY, parties, AttackStatus.RAN, columns=n,
                                 claimed=int(certain.sum()), up_to_scale=n, positions=int((position >= 0).sum()),
                                 figures={"nonzero_in_solution": int((~match.zero).sum()), "pairs": match.edges,
                                          "dense_values": int(match.dense_values.size)},
                                 seconds=time.perf_counter() - t0, recovered=rec))
    classes = {str(k): int(v) for k, v in zip(*np.unique(basis[~certain].astype(str), return_counts=True))}
    figures = {"candidates": fit.candidates, "ambiguous": int((fit.ambiguous & ~certain).sum()),
               "not_round": int((~fit.every_round & ~certain).sum()), "round_guess_columns": fit.guess_columns,
               "round_guess_done": fit.guessed, "scale_range": [1.0 / SCALE_SPREAD, SCALE_SPREAD],
               "best_guess": int((~certain & fit.has).sum()), "classes": classes,
               "priors": priors.source if priors is not None else "default"}
    norm = AttackOutcome("monomial_normalization", FAMILY, parties, AttackStatus.RAN, columns=n,
                         claimed=int(certain.sum()), up_to_scale=n, positions=int((position >= 0).sum()),
                         figures=figures, seconds=time.perf_counter() - t0, recovered=rec)
    if fit.guessed < fit.guess_columns:
        norm.reason = (f"the budget ended the round-number guesses after {fit.guessed} of {fit.guess_columns} "
                       "columns")
    out.append(norm)
    if n_dense == 0:
        out.append(AttackOutcome("monomial_column_order", FAMILY, parties, AttackStatus.RAN, columns=n,
                                 figures={"guessed": int(np.sum(guess_basis == GUESS + "column_order")), **order_fig},
                                 recovered=rec))
    else:
        out.append(not_applicable("monomial_column_order", FAMILY, parties,
                                  "the party's dense columns sit at unknown positions among its bounded ones"))
    return out


def _x_positions(scale: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per column with y_t != 0: the index of the single entry of x equal to d_t y_t (-1: none or several)."""
    position = np.full(scale.size, -1, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    taken: dict[int, int] = {}
    for t in np.flatnonzero(y != 0):
        target = scale[t] * y[t]
        tol = X_MATCH_TOL * abs(target)
        a, b = np.searchsorted(xs, target - tol), np.searchsorted(xs, target + tol, side="right")
        if b - a == 1:
            i = int(order[a])
            if i in taken:  # two columns on one entry: neither is placed
                position[taken[i]] = -1
                continue
            taken[i] = int(t)
            position[t] = i
    return position
