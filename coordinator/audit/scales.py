"""Guessing the one hidden factor of a column known up to scale, from round numbers.

A column known up to a factor (a monomial column d_t a_pi(t), Bednarz, Bean, Roughan, WPES 2009;
a dense column found up to scale) has all its values once one factor is known. Real data are
round (:mod:`securelp.coordinator.audit.numbers`), so candidates for the factor come from
hypotheses about the data, each a *family*:

``entry``    an entry is +-1 (the first :data:`ENTRY_CANDIDATES` of each column, each with its row);
``cost``, ``lower``, ``upper``  the cost or a finite bound is +-1 (an upper bound of 1 in 0-1 relaxations);
``integer``  the column's entries and cost are integers with no common divisor (primitive
             integers: continued fractions of the ratios to the smallest value);
``x``        a number the revealed solution allows (given by the caller);
``guess``    two-digit round values r * 10^e of the column's first values, when nothing else fits.

Each candidate is scored by how many of the column's values (entries, cost, finite nonzero bounds)
it makes round, how many it makes +-1, and the digits they need. None of this *confirms* a
factor: a rational multiple of a round column is round too (integer data 2..20 normalized on an
entry of 2 reads 1, 1.5, 2.5). So the result is a **best guess** with a class saying how strong
its evidence is (every value round, some, one), and the hit rate of each class is measured, not
assumed (:mod:`securelp.coordinator.audit.hit_rates`). A factor is claimed only by the checks of
the attacks that call this module (the revealed solution, known rows), never by roundness.

Between candidates that make equally many values round, *priors* decide: which hypothesis held on
the columns whose factor a check did confirm (learnt per session by :func:`learn_priors`: a row
whose entries are +-1 in every confirmed column, upper bounds of 1, integer data), or, without
confirmed columns, defaults (an entry of +-1 first; integers first when entries of +-1 leave most
columns with values that are not round, as integer data without unit entries do).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.numbers import MAX_DIGITS, REL_TOL, significant_digits
from securelp.coordinator.audit.results import GUESS

#: entries per column (its first, in row order) whose magnitudes are tried as "this entry is +-1"
ENTRY_CANDIDATES = 12
#: values per column scored for each candidate (all of them are checked for the winner)
SCORED_VALUES = 32
#: values of a column from which round two-digit guesses are made when nothing else fits
GUESS_VALUES = 3
#: scales closer than this (relative) are the same scale
SAME_SCALE = 1e-6
#: candidate-value pairs scored per chunk (memory bound of the vectorized scoring)
CHUNK_PAIRS = 2_000_000
#: the largest denominator of a ratio that the primitive-integer normalization accepts
INTEGER_MAX_DENOMINATOR = 1000
#: relative agreement of a continued fraction with the ratio it approximates
INTEGER_REL_TOL = 1e-9
#: confirmed columns a learnt prior needs before it replaces the default
MIN_LEARNT = 3
#: weight of the default in a learnt frequency (shrinkage towards it, in columns)
PRIOR_SHRINK = 2.0
_ROUND_MANTISSAS = np.round(np.arange(10, 100) / 10.0, 1)  # 1.0, 1.1, ..., 9.9

ENTRY, COST, LOWER, UPPER, INTEGER, X, GUESS_FAMILY = range(7)
FAMILY_NAMES = ("entry", "cost", "lower", "upper", "integer", "x", "guess")
#: default priors (no confirmed column to learn from): a unit entry first, as in real LPs
DEFAULT_PRIOR = {ENTRY: 0.5, UPPER: 0.35, LOWER: 0.3, COST: 0.3, INTEGER: 0.4, X: 0.5, GUESS_FAMILY: 0.0}
#: a row touching at least this share of a party's columns (a budget or convexity row) is assumed a
#: row of +-1 before other rows when nothing is learnt
DENSE_ROW_SHARE = 0.9
DENSE_ROW_PRIOR = 0.55


@dataclass(frozen=True)
class Priors:
    """How plausible each hypothesis is, per family and per row (entry hypotheses).

    ``learnt`` says whether they come from confirmed columns (and from how many)."""

    family: dict[int, float] = field(default_factory=lambda: dict(DEFAULT_PRIOR))
    row: dict[int, float] = field(default_factory=dict)
    learnt: int = 0
    source: str = "default"

    def of(self, fam: np.ndarray, row: np.ndarray) -> np.ndarray:
        out = np.array([self.family.get(int(f), 0.0) for f in fam]) if fam.size else np.zeros(0)
        if self.row and fam.size:
            is_entry = fam == ENTRY
            out[is_entry] = [self.row.get(int(r), out[i]) for i, r in zip(np.flatnonzero(is_entry), row[is_entry])]
        return out


class ColumnValues:
    """The values of each column that a scale acts on, flattened: entries and cost are divided by d,
    finite nonzero bounds multiplied by it."""

    def __init__(self, S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, *,
                 max_digits: int = MAX_DIGITS, rel_tol: float = REL_TOL) -> None:
        self.max_digits, self.rel_tol = max_digits, rel_tol
        n = S.shape[1]
        self.n = n
        cols = [np.repeat(np.arange(n), np.diff(S.indptr)), np.arange(n), np.arange(n), np.arange(n)]
        vals = [S.data, cost, lower, upper]
        power = [np.full(S.nnz, -1), np.full(n, -1), np.ones(n), np.ones(n)]
        kind = [np.full(S.nnz, ENTRY), np.full(n, COST), np.full(n, LOWER), np.full(n, UPPER)]
        rows = [S.indices.astype(np.int64), np.full(n, -1), np.full(n, -1), np.full(n, -1)]
        col = np.concatenate(cols)
        val = np.concatenate(vals).astype(np.float64)
        keep = np.isfinite(val) & (val != 0)
        order = np.argsort(col[keep], kind="stable")  # entries first within a column, then cost, bounds
        self.col = col[keep][order]
        self.val = val[keep][order]
        self.power = np.concatenate(power).astype(np.int8)[keep][order]
        self.kind = np.concatenate(kind).astype(np.int8)[keep][order]
        self.row = np.concatenate(rows)[keep][order]
        self.entry = self.kind == ENTRY
        self.ptr = np.concatenate([[0], np.cumsum(np.bincount(self.col, minlength=n))]).astype(np.int64)
        self.count = np.diff(self.ptr)

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
            unit = (np.abs(np.abs(w) - 1.0) <= self.rel_tol) * np.where(self.entry[idx], 2.0, 1.0)
            ones[sl] = np.bincount(owner - start, weights=unit, minlength=stop - start)
            digit_sum[sl] = np.bincount(owner - start, weights=np.minimum(dg, self.max_digits + 1),
                                        minlength=stop - start)
            start = stop
        return score, ones, digit_sum, per


def in_range(d: np.ndarray, spread: float) -> np.ndarray:
    return (d >= (1 - 1e-12) / spread) & (d <= spread * (1 + 1e-12)) & (d > 0) & np.isfinite(d)


def _unit_candidates(values: ColumnValues, spread: float) -> tuple[np.ndarray, ...]:
    """"This value is +-1" for the first ENTRY_CANDIDATES entries of each column, its cost and bounds:
    (column, d, family, row)."""
    rank = np.arange(values.col.size) - values.ptr[values.col]
    pick = ~values.entry | (rank < ENTRY_CANDIDATES)
    v = np.abs(values.val[pick])
    d = np.where(values.power[pick] < 0, v, 1.0 / v)
    ok = in_range(d, spread)
    return values.col[pick][ok], d[ok], values.kind[pick][ok].astype(np.int64), values.row[pick][ok]


def _continued_fraction_denominators(r: np.ndarray, max_den: int, rel_tol: float) -> np.ndarray:
    """Denominator of the simplest fraction within ``rel_tol`` of each ratio (0 where none with a
    denominator up to ``max_den``), by continued fractions, vectorized."""
    x = r.astype(np.float64).copy()
    a = np.floor(x)
    h_prev, h = np.ones_like(x), a.copy()
    k_prev, k = np.zeros_like(x), np.ones_like(x)
    frac = x - a
    done = np.abs(h / k - r) <= rel_tol * np.abs(r)
    for _ in range(40):
        active = ~done & (frac > 1e-15) & (k <= max_den)
        if not active.any():
            break
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x_new = np.where(active, 1.0 / np.where(active, frac, 1.0), 0.0)
        a = np.floor(x_new)
        frac = np.where(active, x_new - a, frac)
        h_new = np.where(active, a * h + h_prev, h)
        k_new = np.where(active, a * k + k_prev, k)
        h_prev, h = np.where(active, h, h_prev), h_new
        k_prev, k = np.where(active, k, k_prev), k_new
        done |= active & (np.abs(h / k - r) <= rel_tol * np.abs(r))
    return np.where(done & (k <= max_den), k, 0).astype(np.int64)


def integer_candidates(values: ColumnValues, spread: float, max_den: int = INTEGER_MAX_DENOMINATOR
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The primitive-integer normalization: per column, the d that makes its entries and cost integers
    with greatest common divisor 1 (where the ratios are fractions with denominators up to
    ``max_den``). Returns (column, d) for the columns where it exists and lies in the public range."""
    sel = values.power < 0  # entries and cost
    col, v = values.col[sel], np.abs(values.val[sel])
    if not col.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    n = values.n
    counts = np.bincount(col, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    live = counts > 0
    base = np.full(n, np.inf)
    np.minimum.at(base, col, v)
    r = v / base[col]
    den = _continued_fraction_denominators(r, max_den, INTEGER_REL_TOL)
    bad = np.zeros(n, dtype=bool)
    np.logical_or.at(bad, col, den == 0)
    den = np.maximum(den, 1)
    lcm = np.ones(n, dtype=np.int64)
    lcm[live] = np.lcm.reduceat(den, starts[live])
    bad |= (lcm > max_den * max_den) | (lcm <= 0)  # lcm <= 0: the int64 product wrapped around
    scaled = r * lcm[col]
    fits = np.isfinite(scaled) & (np.abs(scaled) < 2.0**62)  # ratios too large for an int64 are no small integers
    np.logical_or.at(bad, col, ~fits)
    q = np.round(np.where(fits, scaled, 1.0)).astype(np.int64)
    bad_q = np.abs(q - scaled) > INTEGER_REL_TOL * np.maximum(1.0, scaled)
    np.logical_or.at(bad, col, bad_q)
    g = np.ones(n, dtype=np.int64)
    g[live] = np.gcd.reduceat(np.maximum(q, 1), starts[live])
    d = base * g / lcm
    ok = live & ~bad & in_range(d, spread)
    return np.flatnonzero(ok), d[ok]


def round_guess_candidates(values: ColumnValues, columns: np.ndarray, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-digit round guesses r * 10^e for the first GUESS_VALUES values of each column."""
    cols, ds = [], []
    for j in range(GUESS_VALUES):
        has = values.count[columns] > j
        c = columns[has]
        v = np.abs(values.val[values.ptr[c] + j])
        pw = values.power[values.ptr[c] + j].astype(np.float64)
        for e in range(-4, 5):  # values 1e-4 .. 9.9e4; the scale range filters below
            mant = _ROUND_MANTISSAS * 10.0 ** e
            d = np.where(pw[:, None] < 0, v[:, None] / mant[None, :], mant[None, :] / v[:, None])
            cols.append(np.repeat(c, mant.size))
            ds.append(d.ravel())
    if not cols:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    col, d = np.concatenate(cols), np.concatenate(ds)
    ok = in_range(d, spread)
    return col[ok], d[ok]


def dense_rows(S: sp.csc_matrix) -> np.ndarray:
    """Rows touching at least DENSE_ROW_SHARE of the columns (at least 3 columns)."""
    n = S.shape[1]
    if n < 3:
        return np.zeros(0, dtype=np.int64)
    per_row = np.bincount(S.indices, minlength=S.shape[0])
    return np.flatnonzero(per_row >= max(3, DENSE_ROW_SHARE * n))


@dataclass(eq=False)
class Candidates:
    """Candidate scales (column, d, family, row) with their scores."""

    col: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    d: np.ndarray = field(default_factory=lambda: np.zeros(0))
    fam: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    score: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ones: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    digits: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    scored: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def add(self, values: ColumnValues, col: np.ndarray, d: np.ndarray, fam: int | np.ndarray,
            row: np.ndarray | None = None) -> None:
        col = np.asarray(col, dtype=np.int64)
        d = np.asarray(d, dtype=np.float64)
        fam_arr = np.broadcast_to(np.asarray(fam, dtype=np.int64), col.shape).copy()
        row_arr = np.full(col.size, -1, dtype=np.int64) if row is None else np.asarray(row, dtype=np.int64)
        score, ones, digits, scored = values.digits_under(col, d, SCORED_VALUES)
        for name, arr in (("col", col), ("d", d), ("fam", fam_arr), ("row", row_arr), ("score", score),
                          ("ones", ones), ("digits", digits), ("scored", scored)):
            setattr(self, name, np.concatenate([getattr(self, name), arr]))

    def keep(self, mask: np.ndarray) -> None:
        for name in ("col", "d", "fam", "row", "score", "ones", "digits", "scored"):
            setattr(self, name, getattr(self, name)[mask])


@dataclass(frozen=True, eq=False)
class ScaleGuess:
    """The best scale of each column and the evidence behind it.

    ``scale`` (1 where there is no candidate), ``has`` (a candidate exists), ``every_round`` (the best
    scale makes every value of the column round), ``round_values`` (values it makes round),
    ``ambiguous`` (another scale is as good on round values, prior and values of +-1), ``family``
    (the winner's family), ``prior`` (its prior), ``restricted`` (the candidates were restricted by
    the caller, e.g. to what the revealed solution allows)."""

    scale: np.ndarray
    has: np.ndarray
    every_round: np.ndarray
    round_values: np.ndarray
    ambiguous: np.ndarray
    family: np.ndarray
    prior: np.ndarray
    restricted: np.ndarray
    candidates: int
    guess_columns: int
    guessed: int
    alternatives: np.ndarray

    def classes(self, learnt: bool) -> np.ndarray:
        """The best-guess class of each column (``guess:...``; ``""`` without a candidate): ``round``
        (the best scale makes every value round and no other candidate does), ``round_alternatives``
        (other scales make every value round too, such as a rational multiple of integer data),
        ``partly_round`` (two or more values round), ``learnt`` (one value round, on a hypothesis
        that held on the session's confirmed columns), ``weak`` (one value round), ``ambiguous``
        (another scale is as good on every key); prefixed ``x_`` where the revealed solution
        restricted the candidates."""
        out = np.full(self.scale.size, "", dtype=object)
        strong = self.every_round
        some = ~strong & (self.round_values >= 2)
        prefix = np.where(self.restricted, "x_", "")
        learnt_prior = (self.prior >= 0.8) & learnt
        for i in np.flatnonzero(self.has):
            if self.ambiguous[i]:
                kind = "ambiguous"
            elif strong[i] and self.alternatives[i]:
                kind = "round_alternatives"
            elif strong[i]:
                kind = "round"
            elif some[i]:
                kind = "partly_round"
            elif learnt_prior[i]:
                kind = "learnt"
            else:
                kind = "weak"
            out[i] = GUESS + prefix[i] + kind
        return out


def _rank_order(c: Candidates, prior: np.ndarray) -> np.ndarray:
    # prefer: more round values, a likelier hypothesis, more values +-1, fewer digits, the scale nearest 1
    q = np.round(prior, 2)
    return np.lexsort((np.abs(np.log(c.d)), c.digits, -c.ones, -q, -c.score, c.col))


def best_scales(values: ColumnValues, cands: Candidates, priors: Priors, restricted: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per column: the best candidate's index (-1: none), whether another candidate at another scale ties
    with it on round values, prior and values of +-1 (ambiguous), and the winner's prior."""
    n = values.n
    best = np.full(n, -1, dtype=np.int64)
    ambiguous = np.zeros(n, dtype=bool)
    prior = priors.of(cands.fam, cands.row)
    if not cands.col.size:
        return best, ambiguous, np.zeros(n)
    order = _rank_order(cands, prior)
    c_sorted = cands.col[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = c_sorted[1:] != c_sorted[:-1]
    best[c_sorted[first]] = order[first]
    top = order[first]
    lead = np.repeat(top, np.diff(np.concatenate([np.flatnonzero(first), [order.size]])))
    q = np.round(prior, 2)
    same = (cands.score[order] == cands.score[lead]) & (q[order] == q[lead]) & (cands.ones[order] == cands.ones[lead])
    other = np.abs(cands.d[order] - cands.d[lead]) > SAME_SCALE * cands.d[lead]
    ambiguous[cands.col[order[same & other]]] = True
    win_prior = np.zeros(n)
    win_prior[best >= 0] = prior[best[best >= 0]]
    return best, ambiguous, win_prior


def fit_scales(S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray, budget: Budget, *,
               spread: float, allowed: tuple[np.ndarray, np.ndarray] | None = None, priors: Priors | None = None,
               max_digits: int = MAX_DIGITS, rel_tol: float = REL_TOL) -> ScaleGuess:
    """The best guess of d_t for every column t of S = A D (true column a_t = s_t / d_t).

    Parameters
    ----------
    S, cost, lower, upper : the scaled columns, costs (divided by d to undo) and bounds (multiplied by
        d to undo); non-finite or zero values carry no information.
    spread : scales lie in [1/spread, spread] (``np.inf``: anywhere).
    allowed : (column, d) pairs: for the columns named there, the only scales possible (what the
        revealed solution allows); their candidates are these, scored like the others.
    priors : the plausibility of each hypothesis (:func:`learn_priors`; None: the defaults).
    max_digits, rel_tol : what counts as round (looser for values computed through a factorization).
    """
    n = S.shape[1]
    S = sp.csc_matrix(S)
    S.sort_indices()
    values = ColumnValues(S, cost, lower, upper, max_digits=max_digits, rel_tol=rel_tol)
    priors = priors or default_priors(S)
    restricted = np.zeros(n, dtype=bool)
    cands = Candidates()
    col, d, fam, row = _unit_candidates(values, spread)
    cands.add(values, col, d, fam, row)
    ic, idd = integer_candidates(values, spread)
    cands.add(values, ic, idd, INTEGER)
    if not priors.learnt:
        priors = _integer_first_if_fewer_digits(cands, priors)
    if allowed is not None and allowed[0].size:
        restricted[allowed[0]] = True
        cands.keep(~restricted[cands.col])
        cands.add(values, allowed[0], allowed[1], X)
    best, ambiguous, _ = best_scales(values, cands, priors, restricted)
    ok = best >= 0
    all_round = np.zeros(n, dtype=bool)
    all_round[ok] = cands.score[best[ok]] == cands.scored[best[ok]]
    guess_cols = np.flatnonzero((~all_round | ambiguous) & (values.count > 0) & ~restricted)
    guessed = 0
    for chunk in np.array_split(guess_cols, max(1, guess_cols.size // 2000)) if guess_cols.size else []:
        if budget.expired():
            break
        gc, gd = round_guess_candidates(values, chunk, spread)
        cands.add(values, gc, gd, GUESS_FAMILY)
        guessed += int(chunk.size)
    if guessed:
        best, ambiguous, _ = best_scales(values, cands, priors, restricted)
    best, ambiguous, win_prior = best_scales(values, cands, priors, restricted)
    has = best >= 0
    scale = np.ones(n)
    scale[has] = cands.d[best[has]]
    full_score, _, _, full_count = values.digits_under(np.arange(n), scale, None)
    every_round = has & (full_score == full_count) & (full_count > 0)
    family = np.full(n, -1, dtype=np.int64)
    family[has] = cands.fam[best[has]]
    # other scales that make every scored value round: the winner is one of several round readings
    full = cands.score == cands.scored
    other = np.abs(cands.d - scale[cands.col]) > SAME_SCALE * scale[cands.col]
    alternatives = np.zeros(n, dtype=bool)
    alternatives[cands.col[full & other]] = True
    return ScaleGuess(scale, has, every_round, np.where(has, full_score, 0), ambiguous & has, family, win_prior,
                      restricted & has, int(cands.col.size), int(guess_cols.size), guessed, alternatives & has)


def _integer_first_if_fewer_digits(cands: Candidates, priors: Priors) -> Priors:
    """Without learnt priors: put the primitive-integer reading before an entry of +-1 when, on the
    columns where both make every value round at different scales, the integer reading needs fewer
    digits in most of them, or when it makes every value round on a third more columns. Integer
    data without unit entries (2..20) read on an entry of 2 give
    1, 1.5, 2.5 (more digits than 2, 3, 5); decimal data with a unit entry (0.5, 1, 2.3) read as
    integers give 5, 10, 23, no fewer digits, and keep the entry reading first."""
    full = cands.score == cands.scored
    best: dict[int, dict[int, tuple[int, float]]] = {ENTRY: {}, INTEGER: {}}
    for f in (ENTRY, INTEGER):
        sel = np.flatnonzero(full & (cands.fam == f))
        for i in sel[np.argsort(cands.digits[sel], kind="stable")][::-1]:
            best[f][int(cands.col[i])] = (int(cands.digits[i]), float(cands.d[i]))
    both = [c for c in best[INTEGER] if c in best[ENTRY]
            and abs(best[INTEGER][c][1] - best[ENTRY][c][1]) > SAME_SCALE * best[ENTRY][c][1]]
    fewer = sum(best[INTEGER][c][0] < best[ENTRY][c][0] for c in both)
    more = sum(best[INTEGER][c][0] > best[ENTRY][c][0] for c in both)
    # or: the integer reading makes every value round on a third more columns
    wider = len(best[INTEGER]) >= 3 and 4 * len(best[ENTRY]) <= 3 * len(best[INTEGER])
    if (fewer >= 3 and fewer > 2 * more) or wider:
        family = dict(priors.family)
        family[INTEGER] = max(family.get(ENTRY, 0.0), max(priors.row.values(), default=0.0)) + 0.05
        return Priors(family, priors.row, priors.learnt, priors.source + "; integers first (fewer digits)")
    return priors


def default_priors(S: sp.csc_matrix) -> Priors:
    """Priors without confirmed columns: the defaults, with a dense row of S (a budget or convexity
    row) first among the entry hypotheses."""
    return Priors(dict(DEFAULT_PRIOR), {int(r): DENSE_ROW_PRIOR for r in dense_rows(S)}, 0, "default")


def single_round_reading(S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                         allowed: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The columns for which exactly one of the ``allowed`` scales (what the revealed solution leaves)
    makes the most values round, at least one (a wrong scale makes a value round with probability
    about 2e-5), with that scale: the readings the solution narrows down to one."""
    col, d = allowed
    if not col.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    S = sp.csc_matrix(S)
    S.sort_indices()
    values = ColumnValues(S, cost, lower, upper)
    score, _, _, _ = values.digits_under(col, d, None)
    n = S.shape[1]
    top = np.zeros(n, dtype=np.int64)
    np.maximum.at(top, col, score)
    ok = (score == top[col]) & (score > 0)
    hits = np.bincount(col[ok], minlength=n)
    pick = ok & (hits[col] == 1)
    return col[pick], d[pick]


def learn_priors(S: sp.csc_matrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                 confirmed: np.ndarray) -> Priors:
    """Priors learnt from columns whose factor a check confirmed (S = A D as received, ``confirmed``
    their true factors d): for each family, how often its best candidate (by round values, values of
    +-1, digits) is the confirmed factor; for each row, how often its entry is +-1. Shrunk towards the
    defaults by PRIOR_SHRINK columns; rows need MIN_LEARNT columns."""
    S = sp.csc_matrix(S)
    S.sort_indices()
    n = S.shape[1]
    if n < MIN_LEARNT:
        return Priors()
    values = ColumnValues(S, cost, lower, upper)
    cands = Candidates()
    col, d, fam, row = _unit_candidates(values, np.inf)
    cands.add(values, col, d, fam, row)
    ic, idd = integer_candidates(values, np.inf)
    cands.add(values, ic, idd, INTEGER)
    family = dict(DEFAULT_PRIOR)
    for f in (ENTRY, COST, LOWER, UPPER, INTEGER):
        sel = np.flatnonzero(cands.fam == f)
        if not sel.size:
            continue
        order = sel[np.lexsort((np.abs(np.log(cands.d[sel])), cands.digits[sel], -cands.ones[sel], -cands.score[sel],
                                cands.col[sel]))]
        first = np.ones(order.size, dtype=bool)
        first[1:] = cands.col[order][1:] != cands.col[order][:-1]
        top = order[first]
        right = np.abs(cands.d[top] / confirmed[cands.col[top]] - 1.0) <= SAME_SCALE
        family[f] = (float(right.sum()) + PRIOR_SHRINK * DEFAULT_PRIOR[f]) / (top.size + PRIOR_SHRINK)
    # per row: is its entry +-1 under the confirmed factor
    ent_col = np.repeat(np.arange(n), np.diff(S.indptr))
    unit = np.abs(np.abs(S.data / confirmed[ent_col]) - 1.0) <= 1e-9
    per_entry = (float(unit.sum()) + 1.0) / (S.nnz + 2.0)
    hits = np.bincount(S.indices, weights=unit.astype(float), minlength=S.shape[0])
    seen = np.bincount(S.indices, minlength=S.shape[0]).astype(float)
    rows = {int(r): float((hits[r] + PRIOR_SHRINK * per_entry) / (seen[r] + PRIOR_SHRINK))
            for r in np.flatnonzero(seen >= MIN_LEARNT)}
    return Priors(family, rows, n, f"learnt from {n} columns confirmed by the revealed solution")
