"""Attacks on the positive monomial transform of bounded columns.

In the default (monomial) mode party j sends, for its bounded columns, S = A_b D P (m x n_b),
c~ = P'D c_b and the bounds P'D^-1 l_b, P'D^-1 u_b, where D is a private positive diagonal
(scales log-uniform in [1/s, s], s = ``SCALE_SPREAD`` = 8, public in party/session.py) and P a
private permutation (Bednarz, Bean, Roughan, *Hiccups on the road to privacy-preserving linear
programming*, WPES 2009, propose the transform; Mangasarian 2011 the protocol). Column t of S
is d_t a_pi(t): the direction of every bounded column (its zero pattern, signs, ratios, and its
cost and bounds in the same ratios) is revealed exactly, and only one positive number per column
is hidden. Two attacks recover it:

``monomial_normalization``
    Real data are round: an entry of magnitude 1 in most columns, few significant digits
    everywhere (:mod:`securelp.coordinator.audit.numbers`). Candidates for d_t: every entry's
    magnitude (the entry is +-1), the cost's, 1 over each finite bound's (the cost or bound is
    +-1), and, with the revealed x_j, x_i / y_t; if none makes the column round, two-digit round
    values of its first entries. Only candidates inside the public range [1/s, s] count. Each is
    scored by how many of the column's entries, its cost and its finite nonzero bounds become
    round numbers; ties go to more values of size 1 (an entry counting twice a cost or bound),
    then fewer digits, then the scale nearest 1. The best candidate is *confirmed* when it makes
    every value round or, with x_j revealed and y_t != 0, puts d_t y_t on an entry of x_j (as it
    must: x_b = D P y) and makes at least two values round; a scale that puts d_t y_t on no entry
    of x_j is never confirmed. The attack claims a confirmed column unless another scale is as
    good on those keys (then the column is *ambiguous*: known up to a few round factors).
``monomial_positions``
    With x_j revealed, x_pi(t) = d_t y_t: a column with y_t != 0 whose d_t y_t equals exactly one
    entry of x_j is placed at that entry's position.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.numbers import MAX_DIGITS, REL_TOL, significant_digits
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns, not_applicable
from securelp.party.session import SCALE_SPREAD

FAMILY = "monomial"
#: entries per column (its first, in row order) whose magnitudes are tried as "this entry is +-1"
ENTRY_CANDIDATES = 12
#: values per column scored for each candidate (all of them are checked for the winner)
SCORED_VALUES = 32
#: x_i / y_t candidates per column at most (more: the column takes none from x)
X_CANDIDATES = 64
#: values of a column from which round two-digit guesses are made when nothing else fits
GUESS_VALUES = 3
#: scales closer than this (relative) are the same scale
SAME_SCALE = 1e-6
#: round values a scale proposed by x must make to be confirmed
X_CONFIRM_ROUND = 2
#: relative tolerance of "d y_t is an entry of x_j"
X_MATCH_TOL = 1e-9
#: candidate-value pairs scored per chunk (memory bound of the vectorized scoring)
CHUNK_PAIRS = 2_000_000
_ROUND_MANTISSAS = np.round(np.arange(10, 100) / 10.0, 1)  # 1.0, 1.1, ..., 9.9


class _Values:
    """The values of each column that a scale acts on, flattened: entries and cost are divided
    by d, finite nonzero bounds multiplied by it."""

    def __init__(self, S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, *,
                 max_digits: int = MAX_DIGITS, rel_tol: float = REL_TOL) -> None:
        self.max_digits, self.rel_tol = max_digits, rel_tol
        n = S.shape[1]
        cols = [np.repeat(np.arange(n), np.diff(S.indptr)), np.arange(n), np.arange(n), np.arange(n)]
        vals = [S.data, cost, lower, upper]
        power = [np.full(S.nnz, -1), np.full(n, -1), np.ones(n), np.ones(n)]
        col = np.concatenate(cols)
        val = np.concatenate(vals)
        pw = np.concatenate(power).astype(np.int8)
        entry = np.concatenate([np.ones(S.nnz, dtype=bool), np.zeros(3 * n, dtype=bool)])
        keep = np.isfinite(val) & (val != 0)
        col, val, pw, entry = col[keep], val[keep], pw[keep], entry[keep]
        order = np.argsort(col, kind="stable")  # entries first within a column, then cost, bounds
        self.col, self.val, self.power, self.entry = col[order], val[order], pw[order], entry[order]
        self.ptr = np.concatenate([[0], np.cumsum(np.bincount(self.col, minlength=n))]).astype(np.int64)
        self.count = np.diff(self.ptr)
        self.rank = np.arange(self.col.size) - self.ptr[self.col]

    def digits_under(self, cand_col: np.ndarray, cand_d: np.ndarray, cap: int | None) -> tuple[np.ndarray, ...]:
        """(round values, values equal to +-1 (an entry counting 2, a cost or bound 1), digit sum, values
        scored) per candidate, over at most ``cap`` values of its column."""
        per = self.count[cand_col] if cap is None else np.minimum(self.count[cand_col], cap)
        score = np.zeros(cand_col.size, dtype=np.int64)
        ones = np.zeros(cand_col.size, dtype=np.int64)
        digit_sum = np.zeros(cand_col.size, dtype=np.int64)
        start = 0
        while start < cand_col.size:  # chunks keep the pair arrays small
            cum = np.cumsum(per[start:])
            stop = start + max(1, int(np.searchsorted(cum, CHUNK_PAIRS, side="right")))
            sl = slice(start, stop)
            reps = per[sl]
            owner = np.repeat(np.arange(start, stop), reps)
            offset = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
            idx = self.ptr[cand_col[owner]] + offset
            w = self.val[idx] * np.power(cand_d[owner], self.power[idx].astype(np.float64))
            dg = significant_digits(w, self.max_digits, self.rel_tol).astype(np.int64)
            score[sl] = np.bincount(owner - start, weights=(dg <= self.max_digits), minlength=stop - start)
            # a unit entry counts twice a unit cost or bound: the hypothesis is an entry of size 1
            unit = (np.abs(np.abs(w) - 1.0) <= self.rel_tol) * np.where(self.entry[idx], 2.0, 1.0)
            ones[sl] = np.bincount(owner - start, weights=unit, minlength=stop - start)
            digit_sum[sl] = np.bincount(owner - start, weights=np.minimum(dg, self.max_digits + 1),
                                        minlength=stop - start)
            start = stop
        return score, ones, digit_sum, per


def _in_range(d: np.ndarray, spread: float) -> np.ndarray:
    return (d >= (1 - 1e-12) / spread) & (d <= spread * (1 + 1e-12)) & (d > 0) & np.isfinite(d)


def _dedupe(col: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((d, col))
    col, d = col[order], d[order]
    keep = np.ones(col.size, dtype=bool)
    keep[1:] = (col[1:] != col[:-1]) | (np.abs(d[1:] - d[:-1]) > 1e-12 * d[1:])
    return col[keep], d[keep]


def _basic_candidates(S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                      spread: float) -> tuple[np.ndarray, np.ndarray]:
    """"This value is +-1" for entries (the first :data:`ENTRY_CANDIDATES` of each column), cost, bounds."""
    n = S.shape[1]
    ent_col = np.repeat(np.arange(n), np.diff(S.indptr))
    ent_rank = np.arange(S.nnz) - S.indptr[ent_col]
    pick = (ent_rank < ENTRY_CANDIDATES) & (S.data != 0)
    cols = [ent_col[pick], np.arange(n), np.arange(n), np.arange(n)]
    with np.errstate(divide="ignore"):
        ds = [np.abs(S.data[pick]), np.abs(cost), 1.0 / np.abs(lower), 1.0 / np.abs(upper)]
    col = np.concatenate(cols)
    d = np.concatenate(ds)
    ok = _in_range(d, spread)
    return col[ok], d[ok]


def _x_candidates(y: np.ndarray, x: np.ndarray, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """d = x_i / y_t for the entries of x in the public range of y_t (at most X_CANDIDATES each)."""
    xs = np.sort(x[x != 0])
    cols, ds = [], []
    for t in np.flatnonzero(y):
        yt = y[t]
        lo, hi = sorted((yt / spread, yt * spread)) if np.isfinite(spread) else sorted((0.0, np.inf * yt))
        a, b = np.searchsorted(xs, lo * (1 - 1e-12)), np.searchsorted(xs, hi * (1 + 1e-12), side="right")
        if 0 < b - a <= X_CANDIDATES:
            cols.append(np.full(b - a, t))
            ds.append(xs[a:b] / yt)
    if not cols:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    d = np.concatenate(ds)
    col = np.concatenate(cols)
    ok = _in_range(d, spread)
    return col[ok], d[ok]


def _guess_candidates(values: _Values, columns: np.ndarray, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-digit round guesses r * 10^e for the first GUESS_VALUES values of each column."""
    cols, ds = [], []
    for j in range(GUESS_VALUES):
        has = values.count[columns] > j
        c = columns[has]
        v = np.abs(values.val[values.ptr[c] + j])
        pw = values.power[values.ptr[c] + j].astype(np.float64)
        for e in range(-4, 5):  # values 1e-4 .. 9.9e4; the scale range filters below
            mant = _ROUND_MANTISSAS * 10.0 ** e
            # value / d = mant (entry, cost) or value * d = mant (bound)
            d = np.where(pw[:, None] < 0, v[:, None] / mant[None, :], mant[None, :] / v[:, None])
            cols.append(np.repeat(c, mant.size))
            ds.append(d.ravel())
    if not cols:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    col, d = np.concatenate(cols), np.concatenate(ds)
    ok = _in_range(d, spread)
    return col[ok], d[ok]


def _x_consistent(cand_col: np.ndarray, cand_d: np.ndarray, y: np.ndarray | None,
                  x: np.ndarray | None) -> np.ndarray:
    """Whether d y_t is an entry of x (False where y_t = 0 or nothing is revealed)."""
    out = np.zeros(cand_col.size, dtype=bool)
    if y is None or x is None or not cand_col.size:
        return out
    xs = np.sort(x)
    if not xs.size:
        return out
    target = cand_d * y[cand_col]
    live = target != 0
    pos = np.searchsorted(xs, target[live])
    above = xs[np.minimum(pos, xs.size - 1)]
    below = xs[np.maximum(pos - 1, 0)]
    near = np.minimum(np.abs(above - target[live]), np.abs(below - target[live]))
    out[live] = near <= X_MATCH_TOL * np.abs(target[live])
    return out


class _Candidates:
    """Candidate scales (column, d) with their scores."""

    def __init__(self) -> None:
        self.col = np.zeros(0, dtype=np.int64)
        self.d = np.zeros(0)
        self.score = np.zeros(0, dtype=np.int64)
        self.ones = np.zeros(0, dtype=np.int64)
        self.digits = np.zeros(0, dtype=np.int64)
        self.scored = np.zeros(0, dtype=np.int64)
        self.xcons = np.zeros(0, dtype=bool)

    def add(self, values: _Values, col: np.ndarray, d: np.ndarray, y: np.ndarray | None,
            x: np.ndarray | None) -> None:
        col, d = _dedupe(col, d)
        score, ones, digits, scored = values.digits_under(col, d, SCORED_VALUES)
        xcons = _x_consistent(col, d, y, x)
        for name, arr in (("col", col), ("d", d), ("score", score), ("ones", ones), ("digits", digits),
                          ("scored", scored), ("xcons", xcons)):
            setattr(self, name, np.concatenate([getattr(self, name), arr]))

    def best(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per column: the best candidate's index (-1: none), and whether another candidate at
        another scale is as good on every key that decides a claim (x consistency, round values,
        values equal to +-1): the column is then ambiguous."""
        best = np.full(n, -1, dtype=np.int64)
        ambiguous = np.zeros(n, dtype=bool)
        if not self.col.size:
            return best, ambiguous
        # prefer: consistent with x, more round values, more values +-1, fewer digits, the scale
        # nearest 1 (the centre of the log-uniform prior)
        order = np.lexsort((np.abs(np.log(self.d)), self.digits, -self.ones, -self.score, ~self.xcons, self.col))
        c_sorted = self.col[order]
        first = np.ones(order.size, dtype=bool)
        first[1:] = c_sorted[1:] != c_sorted[:-1]
        best[c_sorted[first]] = order[first]
        # the same column's candidates as good as its best on those keys, at a scale that differs
        # by more than rounding (candidates of different stages can repeat a scale)
        top = order[first]
        lead = np.repeat(top, np.diff(np.concatenate([np.flatnonzero(first), [order.size]])))
        same = ((self.xcons[order] == self.xcons[lead]) & (self.score[order] == self.score[lead])
                & (self.ones[order] == self.ones[lead]))
        other = np.abs(self.d[order] - self.d[lead]) > SAME_SCALE * self.d[lead]
        ambiguous[self.col[order[same & other]]] = True
        return best, ambiguous


@dataclass(frozen=True, eq=False)
class ScaleFit:
    """The normalization's result for n columns: the best scale of each, whether it is confirmed
    (``every_round``: it makes every value round or, where x is revealed and y_t != 0, it puts
    d_t y_t on an entry of x and makes X_CONFIRM_ROUND values round), whether another scale is as good
    (ambiguous), and whether it agrees with x."""

    scale: np.ndarray
    every_round: np.ndarray
    ambiguous: np.ndarray
    x_consistent: np.ndarray
    candidates: int
    guess_columns: int
    guessed: int

    @property
    def claimed(self) -> np.ndarray:
        return self.every_round & ~self.ambiguous


def fit_scales(S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, y: np.ndarray | None,
               x: np.ndarray | None, budget: Budget, *, spread: float = SCALE_SPREAD, max_digits: int = MAX_DIGITS,
               rel_tol: float = REL_TOL) -> ScaleFit:
    """Guess d_t for every column t of S = A D (true column a_t = s_t / d_t) from round numbers.

    Parameters
    ----------
    S, cost, lower, upper : the scaled columns, costs (divided by d to undo) and bounds
        (multiplied by d to undo); non-finite or zero values carry no information.
    y, x : when both are given, x_pi(t) = d_t y_t must hold for some entry of x (y_t != 0).
    spread : scales lie in [1/spread, spread] (``np.inf``: anywhere).
    max_digits, rel_tol : what counts as round (looser for values computed through a
        factorization, which carry errors of 1e-12 and more).
    """
    n = S.shape[1]
    S = sp.csc_matrix(S)
    S.sort_indices()
    values = _Values(S, cost, lower, upper, max_digits=max_digits, rel_tol=rel_tol)
    reveal = x is not None and y is not None
    ys, xs = (y, x) if reveal else (None, None)
    cands = _Candidates()
    col, d = _basic_candidates(S, cost, lower, upper, spread)
    if reveal:
        xc, xd = _x_candidates(y, x, spread)
        col, d = np.concatenate([col, xc]), np.concatenate([d, xd])
    cands.add(values, col, d, ys, xs)
    best, ambiguous = cands.best(n)
    ok = best >= 0
    all_round = np.zeros(n, dtype=bool)
    all_round[ok] = cands.score[best[ok]] == cands.scored[best[ok]]
    # two-digit round guesses for what the +-1 hypotheses left unexplained or ambiguous, as far
    # as the budget reaches
    guess_cols = np.flatnonzero((~all_round | ambiguous) & (values.count > 0))
    guessed = 0
    for chunk in np.array_split(guess_cols, max(1, guess_cols.size // 2000)) if guess_cols.size else []:
        if budget.expired():
            break
        gc, gd = _guess_candidates(values, chunk, spread)
        cands.add(values, gc, gd, ys, xs)
        guessed += int(chunk.size)
    if guessed:
        best, ambiguous = cands.best(n)
    has = best >= 0
    scale = np.ones(n)
    scale[has] = cands.d[best[has]]
    # the winner is checked on all of its column's values, not only the scored ones
    full_score, _, _, full_count = values.digits_under(np.arange(n), scale, None)
    every_round = has & (full_score == full_count) & (full_count > 0)
    xcons = np.zeros(n, dtype=bool)
    xcons[has] = cands.xcons[best[has]]
    confirmed = every_round
    if reveal:
        # x_b = D P y: a scale that puts d_t y_t on no entry of x is wrong; one that does and makes
        # X_CONFIRM_ROUND values round has two independent confirmations (x proposes it among
        # n_j candidates, and a wrong scale makes a value round with probability about 2e-5)
        live = y != 0
        confirmed = np.where(live, xcons & (every_round | (full_score >= X_CONFIRM_ROUND)), every_round)
    return ScaleFit(scale, confirmed, ambiguous & confirmed, xcons, int(cands.col.size), int(guess_cols.size),
                    guessed)


def attack_monomial(party: str, S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    y: np.ndarray | None, x: np.ndarray | None, budget: Budget) -> list[AttackOutcome]:
    """Run ``monomial_normalization`` and ``monomial_positions`` on one party's monomial part.

    Parameters
    ----------
    S, cost, lower, upper : what the coordinator received: A_b D P, P'D c_b and the scaled bounds.
    y : the party's monomial variables of the solution (None: no optimal solution).
    x : x_j as revealed by the party (None: kept).
    budget : the audit's time budget.

    Returns
    -------
    Two outcomes. A column is *claimed* (values recovered exactly, by the attack's own judgement)
    when its best scale makes every value round, no other scale tried is as good, and (with x_j
    revealed and y_t != 0) d_t y_t is an entry of x_j. A column whose best scale ties with another
    is *ambiguous*: its values are known up to a choice among a few round scales (often a power
    of 10); the figure ``ambiguous`` counts them, and the best guess is kept for the evaluation.
    """
    parties = (party,)
    n = S.shape[1]
    if n == 0:
        reason = "no bounded column under a monomial transform"
        return [not_applicable("monomial_normalization", FAMILY, parties, reason),
                not_applicable("monomial_positions", FAMILY, parties, reason)]
    t0 = time.perf_counter()
    S = sp.csc_matrix(S)
    reveal = x is not None and y is not None
    fit = fit_scales(S, cost, lower, upper, y, x, budget)
    claimed = fit.claimed
    A_hat = sp.csc_matrix(S @ sp.diags(1.0 / fit.scale))
    c_hat = cost / fit.scale
    position = _positions(fit.scale, y, x, claimed) if reveal else np.full(n, -1, dtype=np.int64)
    placed = int((position >= 0).sum())
    rec = RecoveredColumns(A_hat, c_hat, claimed, position, signed_scale=False)
    figures = {"candidates": fit.candidates, "ambiguous": int(fit.ambiguous.sum()),
               "not_round": int((~fit.every_round).sum()), "round_guess_columns": fit.guess_columns,
               "round_guess_done": fit.guessed, "scale_range": [1.0 / SCALE_SPREAD, SCALE_SPREAD]}
    norm = AttackOutcome("monomial_normalization", FAMILY, parties, AttackStatus.RAN, columns=n,
                         claimed=int(claimed.sum()), up_to_scale=n, positions=placed, figures=figures,
                         seconds=time.perf_counter() - t0, recovered=rec)
    if fit.guessed < fit.guess_columns:
        norm.reason = (f"the budget ended the round-number guesses after {fit.guessed} of {fit.guess_columns} "
                       "columns")
    if reveal:
        pos = AttackOutcome("monomial_positions", FAMILY, parties, AttackStatus.RAN, columns=n,
                            claimed=int(claimed.sum()), up_to_scale=n, positions=placed,
                            figures={"nonzero_in_solution": int(np.count_nonzero(y))}, recovered=rec)
    else:
        pos = not_applicable("monomial_positions", FAMILY, parties,
                             "x_j was not revealed" if x is None else "no optimal solution was sent")
    return [norm, pos]


def _positions(scale: np.ndarray, y: np.ndarray, x: np.ndarray, claimed: np.ndarray) -> np.ndarray:
    """Original positions: the unique entry of x equal to d_t y_t (columns with y_t != 0)."""
    position = np.full(scale.size, -1, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    taken: dict[int, int] = {}
    for t in np.flatnonzero((y != 0) & claimed):
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

