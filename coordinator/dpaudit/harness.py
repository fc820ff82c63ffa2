"""The distinguishing test and its Clopper-Pearson lower bound on eps.

A mechanism M is eps-DP when for neighbouring inputs D0, D1 and every event E of its output
(here: the coordinator's whole view), ``P[M(D0) in E] <= e^eps P[M(D1) in E]`` and the same with
D0 and D1 swapped. So for any event E fixed *before* the evaluation runs are seen,

    eps >= ln( P0(E) / P1(E) )   and   eps >= ln( P1(E) / P0(E) ),

and with one-sided exact (Clopper-Pearson) bounds from ``n`` runs of each input,
``p_a_lo <= P_a(E)`` and ``P_b(E) <= p_b_hi``, each holding with probability ``1 - alpha/2``,

    eps_lb = ln( p_a_lo / p_b_hi )

is a lower bound on the true eps with confidence ``1 - alpha`` (union bound). This is the method of
LDP-Audit (Arcolezi, Gambs, *Revealing the True Cost of Locally Differentially Private
Protocols: An Auditing Perspective*, PETS 2024), DP-Sniper (Bichsel, Steffen, Bogunovic, Vechev,
*DP-Sniper: Black-Box Discovery of Differential Privacy Violations using Classifiers*, IEEE S&P
2021) and Delta-Siege (Lokna, Paradis, Dimitrov, Vechev, *Group and Attack: Auditing Differential
Privacy*, CCS 2023): choose the event on one half of the runs, evaluate it on the other.

The training half (each input's first ``n/2`` runs) is split again: its first half *fits* the
scores, its second half *selects* the event (so a score fitted to noise, such as a log-ratio table
of a feature that does not differ, does not look better than it is). The event family:

1. *screening*: every feature gets a two-sample p-value on the fitting quarter (chi-square of
   homogeneity for a feature with at most :data:`DISCRETE_MAX` distinct values; else the smaller of
   Welch's t and Kolmogorov-Smirnov), the :data:`TOP_FEATURES` smallest are kept;
2. *scores*: each kept feature's value; for a discrete feature its log-ratio table
   ``ln((c1(v) + 1/2) / (c0(v) + 1/2))`` (unseen values 0); and, over the kept features whose
   p-value is below ``COMBINE_P / features`` (a feature that does not differ only adds noise to a
   sum): the diagonal linear discriminant ``sum_f (mean1_f - mean0_f) x_f / var_f`` (a
   likelihood-ratio score for independent Gaussian-like coordinates); the Laplace likelihood
   ratio ``sum_f (|x_f - med0_f| - |x_f - med1_f|) / b_f`` (medians per input, ``b_f`` the mean
   absolute deviation: the exact log-likelihood ratio of independent Laplace or two-sided
   geometric noise shifted between the inputs, whose largest value marks the event where every
   shifted coordinate lies on the far side, the event that shows a pure-DP loss best); the sum of
   the log-ratio tables (naive Bayes);
3. *events*: ``{score >= t}`` and ``{score < t}`` for thresholds ``t`` midway between the
   selecting runs' neighbouring distinct scores (at most :data:`MAX_THRESHOLDS` quantiles), in
   both directions (D0 over D1, D1 over D0).

The event with the largest ``eps_lb`` on the selecting quarter (the same Clopper-Pearson bound, so a
lucky event with few hits loses to a robust one; ties, as when the selecting runs are too few for
any bound above 0, go to the largest gap between the two inputs' rates, then to the threshold in
the widest gap between observed scores) is evaluated once on the held-out half; only
that evaluation gives the reported bound. It is a *lower* bound: a protocol it does not flag may
still violate its claim through an event outside this family or beyond the runs' resolution
(:func:`max_detectable_eps`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from securelp.coordinator.dpaudit.views import ViewBatch
from securelp.solvers.errors import InputError

__all__ = ["DISCRETE_MAX", "MAX_THRESHOLDS", "TOP_FEATURES", "ChosenEvent", "DistinguishingResult", "cp_lower",
           "cp_upper", "distinguish", "eps_lower_bound", "max_detectable_eps"]

#: a feature with at most this many distinct training values is treated as categorical
DISCRETE_MAX = 32
#: features kept by the screening
TOP_FEATURES = 8
#: thresholds tried per score
MAX_THRESHOLDS = 256
#: family-wise screening level: a feature joins the combined scores when its p-value is below
#: ``COMBINE_P / features`` (Bonferroni)
COMBINE_P = 0.05


def cp_lower(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound on a binomial proportion: P[p >= bound] >= 1 - alpha."""
    from scipy.stats import beta

    k = np.asarray(k, dtype=np.float64)
    out = np.zeros_like(k)
    ok = k > 0
    out[ok] = beta.ppf(alpha, k[ok], n - k[ok] + 1)
    return out


def cp_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound on a binomial proportion: P[p <= bound] >= 1 - alpha."""
    from scipy.stats import beta

    k = np.asarray(k, dtype=np.float64)
    out = np.ones_like(k)
    ok = k < n
    out[ok] = beta.ppf(1.0 - alpha, k[ok] + 1, n - k[ok])
    return out


def eps_lower_bound(k_num: np.ndarray | int, n_num: int, k_den: np.ndarray | int, n_den: int,
                    confidence: float) -> np.ndarray:
    """``ln(cp_lower(k_num) / cp_upper(k_den))``, each bound at ``1 - alpha/2`` (``alpha = 1 -
    confidence``), so the bound on eps holds with ``confidence``; 0 where the lower bound is 0 or
    the ratio is below 1 (a lower bound below 0 says nothing)."""
    alpha = 1.0 - confidence
    lo = cp_lower(k_num, n_num, alpha / 2)
    hi = cp_upper(k_den, n_den, alpha / 2)
    with np.errstate(divide="ignore"):
        out = np.log(lo) - np.log(hi)
    return np.maximum(np.nan_to_num(out, nan=0.0, neginf=0.0), 0.0)


def max_detectable_eps(n_test: int, confidence: float) -> float:
    """The largest ``eps_lb`` ``n_test`` held-out runs per input can show (an event that holds on
    every run of one input and none of the other): a claim at or above it cannot be flagged."""
    return float(eps_lower_bound(n_test, n_test, 0, n_test, confidence))


@dataclass(frozen=True)
class ChosenEvent:
    """The event chosen on the training half: ``score >= threshold`` (or ``<``), more likely under
    input ``favours`` (0 or 1)."""

    score: str
    features: tuple[str, ...]
    above: bool
    threshold: float
    favours: int
    train_eps_lb: float
    train_gap: float = 0.0

    def describe(self) -> str:
        op = ">=" if self.above else "<"
        return f"{self.score} {op} {self.threshold:.6g} (more likely under D{self.favours})"


@dataclass(frozen=True)
class DistinguishingResult:
    """The held-out evaluation of the chosen event."""

    event: ChosenEvent
    eps_lb: float
    confidence: float
    n_train: int
    n_test: int
    hits: tuple[int, int]  # held-out runs of D0 and D1 in the event
    max_detectable_eps: float
    screened: tuple[tuple[str, float], ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        e = self.event
        return {"eps_lower_bound": self.eps_lb, "confidence": self.confidence, "runs_train_per_input": self.n_train,
                "runs_test_per_input": self.n_test, "max_detectable_eps": self.max_detectable_eps,
                "event": {"description": e.describe(), "score": e.score, "features": list(e.features),
                          "direction": ">=" if e.above else "<", "threshold": e.threshold,
                          "favours": f"D{e.favours}", "train_eps_lower_bound": e.train_eps_lb},
                "held_out_hits": {"D0": self.hits[0], "D1": self.hits[1]},
                "screened_features": [{"feature": n, "p_value": p} for n, p in self.screened]}


@dataclass(frozen=True)
class _Score:
    name: str
    features: tuple[str, ...]
    kind: str  # "value", "table", "linear", "laplace", "bayes"
    index: tuple[int, ...]
    weights: np.ndarray | None = None
    tables: tuple[dict[float, float], ...] = ()

    def __call__(self, X: np.ndarray) -> np.ndarray:
        if self.kind == "value":
            return X[:, self.index[0]]
        if self.kind == "linear":
            assert self.weights is not None
            return X[:, list(self.index)] @ self.weights
        if self.kind == "laplace":
            assert self.weights is not None
            centre0, centre1, scale = self.weights
            Z = X[:, list(self.index)]
            return ((np.abs(Z - centre0) - np.abs(Z - centre1)) / scale).sum(axis=1)
        total = np.zeros(X.shape[0])
        for j, table in zip(self.index, self.tables):
            total += np.array([table.get(v, 0.0) for v in X[:, j].tolist()])
        return total


def _p_value(a: np.ndarray, b: np.ndarray, discrete: bool) -> float:
    from scipy import stats

    if discrete:
        vals, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
        if vals.size < 2:
            return 1.0
        table = np.zeros((2, vals.size))
        np.add.at(table[0], inv[:a.size], 1)
        np.add.at(table[1], inv[a.size:], 1)
        return float(stats.chi2_contingency(table, correction=False)[1])
    va, vb = a.var(), b.var()
    if va == 0 and vb == 0:
        return 1.0 if a[0] == b[0] else 0.0
    with np.errstate(all="ignore"):
        pt = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    pk = float(stats.ks_2samp(a, b).pvalue)
    return min(p for p in (pt, pk) if not math.isnan(p)) if not (math.isnan(pt) and math.isnan(pk)) else 1.0


def _log_ratio_table(a: np.ndarray, b: np.ndarray) -> dict[float, float]:
    vals = np.unique(np.concatenate([a, b]))
    ca = {v: 0 for v in vals.tolist()}
    cb = dict(ca)
    for v in a.tolist():
        ca[v] += 1
    for v in b.tolist():
        cb[v] += 1
    na, nb = a.size, b.size
    return {v: math.log((cb[v] + 0.5) / (nb + 0.5)) - math.log((ca[v] + 0.5) / (na + 0.5)) for v in ca}


def _scores(names: tuple[str, ...], X0: np.ndarray, X1: np.ndarray,
            top: int) -> tuple[list[_Score], list[tuple[str, float]]]:
    n_feat = X0.shape[1]
    discrete = [np.unique(np.concatenate([X0[:, j], X1[:, j]])).size <= DISCRETE_MAX for j in range(n_feat)]
    pvals = np.array([_p_value(X0[:, j], X1[:, j], discrete[j]) for j in range(n_feat)])
    order = [int(j) for j in np.argsort(pvals, kind="stable")[:top]]
    screened = [(names[j], float(pvals[j])) for j in order]
    scores: list[_Score] = []
    tables: dict[int, dict[float, float]] = {}
    for j in order:
        scores.append(_Score(f"value of {names[j]}", (names[j],), "value", (j,)))
        if discrete[j]:
            tables[j] = _log_ratio_table(X0[:, j], X1[:, j])
            scores.append(_Score(f"log-ratio table of {names[j]}", (names[j],), "table", (j,), tables=(tables[j],)))
    joint = [j for j in order if pvals[j] < COMBINE_P / n_feat]
    if len(joint) > 1:
        diff = X1[:, joint].mean(axis=0) - X0[:, joint].mean(axis=0)
        var = (X0[:, joint].var(axis=0) + X1[:, joint].var(axis=0)) / 2
        weights = diff / np.maximum(var, 1e-12)
        if np.all(np.isfinite(weights)) and np.any(weights != 0):
            scores.append(_Score(f"linear discriminant of {len(joint)} features",
                                 tuple(names[j] for j in joint), "linear", tuple(joint), weights=weights))
        med0, med1 = np.median(X0[:, joint], axis=0), np.median(X1[:, joint], axis=0)
        spread = (np.abs(X0[:, joint] - med0).mean(axis=0) + np.abs(X1[:, joint] - med1).mean(axis=0)) / 2
        scores.append(_Score(f"Laplace likelihood ratio of {len(joint)} features", tuple(names[j] for j in joint),
                             "laplace", tuple(joint), weights=np.vstack([med0, med1, np.maximum(spread, 1e-12)])))
    idx = tuple(j for j in joint if j in tables)
    if len(idx) > 1:
        scores.append(_Score(f"naive Bayes of {len(idx)} discrete features", tuple(names[j] for j in idx), "bayes",
                             idx, tables=tuple(tables[j] for j in idx)))
    return scores, screened


def _best_event(score: _Score, s0: np.ndarray, s1: np.ndarray, confidence: float) -> ChosenEvent:
    values = np.unique(np.concatenate([s0, s1]))
    if values.size > MAX_THRESHOLDS:
        values = np.unique(np.quantile(values, np.linspace(0, 1, MAX_THRESHOLDS)))
    # midpoints between neighbouring values: the same events on these runs, and a margin on new runs
    # (a float that varies in its last bits from run to run stays on its side)
    both = np.concatenate([values[:1], (values[:-1] + values[1:]) / 2]) if values.size > 1 else values
    margin = np.concatenate([[0.0], np.diff(values)])  # the gap each threshold sits in
    n0, n1 = s0.size, s1.size
    k0 = np.array([(s0 >= t).sum() for t in both])
    k1 = np.array([(s1 >= t).sum() for t in both])
    # (above, favours): events {s >= t} and {s < t}, each in both directions
    cands = {(True, 0): eps_lower_bound(k0, n0, k1, n1, confidence),
             (True, 1): eps_lower_bound(k1, n1, k0, n0, confidence),
             (False, 0): eps_lower_bound(n0 - k0, n0, n1 - k1, n1, confidence),
             (False, 1): eps_lower_bound(n1 - k1, n1, n0 - k0, n0, confidence)}
    # ties (all bounds 0 when the selecting runs are few) go to the largest gap between the two rates,
    # then to the threshold in the widest gap between observed scores
    gap = {(True, 0): k0 / n0 - k1 / n1, (True, 1): k1 / n1 - k0 / n0}
    gap[(False, 0)], gap[(False, 1)] = -gap[(True, 0)], -gap[(True, 1)]
    best_key, best = (-1.0, -2.0, -1.0), ((True, 0), 0)
    for key, vals in cands.items():
        i = int(np.lexsort((margin, gap[key], vals))[-1])
        if (float(vals[i]), float(gap[key][i]), float(margin[i])) > best_key:
            best_key, best = (float(vals[i]), float(gap[key][i]), float(margin[i])), (key, i)
    (above, favours), i = best
    return ChosenEvent(score.name, score.features, above, float(both[i]), favours, best_key[0], best_key[1])


def distinguish(d0: ViewBatch, d1: ViewBatch, confidence: float = 0.95, *, top: int = TOP_FEATURES
                ) -> DistinguishingResult:
    """Choose an event on the first half of each input's runs and bound eps on the second half.

    Parameters
    ----------
    d0, d1:
        The views of the runs of D0 and D1, with the same features (``flatten_views(..., names=)``).
    confidence:
        The confidence of the lower bound (``1 - alpha``), in (0, 1).
    top:
        Features kept by the screening.

    Raises
    ------
    InputError
        Fewer than 8 runs of an input, features that do not line up, or a confidence outside (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise InputError(f"the confidence must be in (0, 1), got {confidence}", parameter="confidence")
    if d0.names != d1.names:
        raise InputError("the two inputs' views have different features; flatten D1's with D0's names")
    n = min(d0.runs, d1.runs)
    if n < 8:
        raise InputError(f"the audit needs at least 8 runs of each input (a quarter to fit the scores, a quarter "
                         f"to choose the event, half to evaluate it), got {n}", parameter="runs")
    if not d0.names:
        raise InputError("the views hold no feature: nothing the coordinator saw to test")
    h = n // 2
    f = h // 2
    X0, X1 = d0.values[:n], d1.values[:n]
    scores, screened = _scores(d0.names, X0[:f], X1[:f], top)
    best: ChosenEvent | None = None
    best_score: _Score | None = None
    for score in scores:
        ev = _best_event(score, score(X0[f:h]), score(X1[f:h]), confidence)
        if best is None or (ev.train_eps_lb, ev.train_gap) > (best.train_eps_lb, best.train_gap):
            best, best_score = ev, score
    assert best is not None and best_score is not None
    t0, t1 = best_score(X0[h:]), best_score(X1[h:])
    m = n - h
    in0 = int((t0 >= best.threshold).sum()) if best.above else int((t0 < best.threshold).sum())
    in1 = int((t1 >= best.threshold).sum()) if best.above else int((t1 < best.threshold).sum())
    k_num, k_den = (in0, in1) if best.favours == 0 else (in1, in0)
    eps_lb = float(eps_lower_bound(k_num, m, k_den, m, confidence))
    return DistinguishingResult(best, eps_lb, confidence, h, m, (in0, in1), max_detectable_eps(m, confidence),
                                tuple(screened))
