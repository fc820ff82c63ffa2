"""Decoy columns against the monomial transform: measured, not adopted.

In the default bounds mode a party sends each bounded column as ``d_t a_pi(t)`` (a positive monomial
map D P; Mangasarian, *Privacy-Preserving Linear Programming*, Optim. Lett. 2011; docs/threat_model.md):
the direction of every column is revealed, one positive factor is hidden. The hardening tried here: the
party appends ``d`` decoy columns to its block before masking, so that the coordinator sees ``n_j + d``
scaled columns and, ideally, cannot tell which ``n_j`` are real. A decoy must be unused at every optimum
and must not change the optimum, although the party does not know the optimal row duals ``pi``:

* ``resampled``: the sparsity pattern and signs of one of the party's columns with ``x >= 0``, magnitudes
  drawn from the party's own nonzeros, ``x >= 0`` (upper bound copied from the template), and a cost
  drawn from the party's costs plus a margin of ``margin * max|c_j|``. Its reduced cost
  ``c - a'pi`` is positive for every ``pi`` with ``a'pi < c``; nothing guarantees it, so the benchmark
  measures how often a decoy enters the solution and whether the objective moves.
* ``dominated``: ``a_i + a_k`` for two of the party's columns with ``0 <= x`` and no upper bound, cost
  ``c_i + c_k + delta`` (``delta = margin / 10 * max|c_j|``). At every dual optimum ``c_i - a_i'pi >= 0``
  and ``c_k - a_k'pi >= 0``, so the decoy's reduced cost is at least ``delta > 0``: it is zero at every
  primal optimum, and any point using it is beaten by moving its value onto ``x_i`` and ``x_k``; the
  optimum is unchanged exactly.

Decoys take random positions in the block (the real columns keep their order). The party's decoded
solution drops them (``drop_decoys``); a revealed ``x_j`` has ``n_j + d`` entries, zero at every decoy.

For each LP, variant, decoy ratio ``d / n_j`` and with and without ``--reveal``, one session runs
in-process with every message recorded, the audit's attacks run on the transcript
(:func:`securelp.coordinator.audit.audit_transcript`), and the benchmark scores:

(a) the party's *real* columns recovered by ``monomial_normalization`` (values exactly, and up to scale)
    and placed (claimed or guessed positions), scored against the real columns only;
(b) how well an attacker picks the real columns among the ``n_j + d``, as precision and recall of the
    set it calls real and the area under the ROC curve of its score (0.5: chance): by the solution
    (``y_t > 0``: the coordinator holds ``y`` in every session), by the reduced costs of its own solve
    (``(c_t - a_t'pi) / ||a_t||``, invariant to the hidden factor; real := below an Otsu threshold), by
    dominance (a column that is a nonnegative combination of columns on its support, with a higher cost,
    is never used: called decoy), and by the entries (a logistic regression on scale-invariant features
    of each column: nonzeros, spread and signs of its entries, its cost and bounds; two-fold
    cross-validation over the run's columns, a proxy for an attacker who knows the recipe and trains it
    on LPs of its own); and ``all``, the same classifier with the solution and reduced cost added;
(c) the cost: bytes the parties send, session and solve seconds.

The optimum is checked: the central solve of the LP with decoys against the central solve without them
(relative 1e-9), and the secure solve against the latter.

    python -m benchmarks.bench_decoys --netlib ../shared/data/netlib
    python -m benchmarks.render          # the table in docs/threat_model.md
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks.results import append_run, results_path, run_context, shared_data
from securelp.solvers.lp import LinearProgram, read_mps
from securelp.solvers.lp.partition import ColumnBlock, parse_split, split_columns

REPO = Path(__file__).resolve().parents[1]
NETLIB = ("afiro", "sc50b", "kb2", "adlittle", "blend", "sc105", "sc205", "scagr7", "share2b", "stocfor1", "e226")
VARIANTS = ("resampled", "dominated")
RATIOS = (0.0, 0.5, 1.0, 2.0)
#: cost margins of the resampled decoys (units of max|c_j|): a large one keeps them out of the solution,
#: a small one makes their costs look like the party's own
MARGINS = (1.0, 0.1)
DISTINGUISHERS = ("solution", "reduced_cost", "dominance", "entries", "all")
#: a decoy has entered the solution when its decoded value exceeds this
ENTERED_TOL = 1e-9
#: the optimum is unchanged when the objectives agree to this, relative to max(1, |objective|)
OBJECTIVE_TOL = 1e-9


# -- the party's side: building decoys -------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class DecoyBlock:
    """A party's block with decoys: ``block`` is what it masks, ``real[i]`` the position of its i-th
    real column there, ``decoy`` the positions of the decoys."""

    block: ColumnBlock
    real: np.ndarray
    decoy: np.ndarray

    @property
    def is_real(self) -> np.ndarray:
        out = np.zeros(self.block.n_cols, dtype=bool)
        out[self.real] = True
        return out


def add_decoys(block: ColumnBlock, count: int, variant: str, rng: np.random.Generator,
               margin: float = 1.0) -> DecoyBlock:
    """``block`` with ``count`` decoy columns at random positions (see the module docstring).

    Parameters
    ----------
    block : the party's real block.
    count : decoys to add (fewer when the block has no column to draw them from: none with ``x >= 0``,
        for ``dominated`` none with ``0 <= x`` and no upper bound).
    variant : ``resampled`` or ``dominated``.
    rng : the party's random generator.
    margin : the cost margin in units of ``max|c_j|`` (1 when every cost is 0).

    Returns
    -------
    DecoyBlock
    """
    if variant not in VARIANTS:
        raise ValueError(f"decoy variant {variant!r} is not one of {', '.join(VARIANTS)}")
    A = sp.csc_matrix(block.A)
    n = block.n_cols
    lower, upper, c = block.col_lower, block.col_upper, np.asarray(block.c, dtype=float)
    if variant == "resampled":
        eligible = np.flatnonzero(lower == 0)
    else:
        eligible = np.flatnonzero((lower == 0) & np.isinf(upper))
    if variant == "dominated" and eligible.size < 2:
        eligible = eligible[:0]
    if not eligible.size or count <= 0:
        return DecoyBlock(block, np.arange(n), np.zeros(0, dtype=np.int64))
    scale = float(np.abs(c).max()) if np.abs(c).max() > 0 else 1.0
    magnitudes = np.abs(A.data) if A.nnz else np.ones(1)
    cols, costs, ups = [], [], []
    for _ in range(count):
        if variant == "resampled":
            i = int(rng.choice(eligible))
            lo, hi = A.indptr[i], A.indptr[i + 1]
            rows = A.indices[lo:hi]
            vals = np.sign(A.data[lo:hi]) * rng.choice(magnitudes, rows.size)
            cols.append(sp.csc_matrix((vals, (rows, np.zeros(rows.size, dtype=np.int64))), shape=(A.shape[0], 1)))
            costs.append(max(float(rng.choice(c)), 0.0) + margin * scale)
            ups.append(float(upper[i]))
        else:
            i, k = (int(v) for v in rng.choice(eligible, 2, replace=False))
            cols.append(A[:, [i]] + A[:, [k]])
            costs.append(float(c[i] + c[k]) + margin / 10 * scale)
            ups.append(np.inf)
    total = n + count
    decoy = np.sort(rng.choice(total, count, replace=False))
    real = np.setdiff1d(np.arange(total), decoy)
    order = np.empty(total, dtype=np.int64)  # order[p]: the column of [A, decoys] at position p
    order[real] = np.arange(n)
    order[decoy] = n + np.arange(count)
    A_aug = sp.hstack([A, *cols], format="csc")[:, order]
    aug = ColumnBlock(block.party_id, A_aug, np.concatenate([c, costs])[order],
                      np.concatenate([lower, np.zeros(count)])[order], np.concatenate([upper, ups])[order],
                      split_id=block.split_id)
    return DecoyBlock(aug, real, decoy)


def drop_decoys(x: np.ndarray, decoys: DecoyBlock) -> np.ndarray:
    """The party's own solution: its decoded ``x`` without the decoys' entries."""
    return np.asarray(x)[decoys.real]


def lp_with_decoys(lp: LinearProgram, parties: int, ratio: float, variant: str, seed: int,
                   margin: float = 1.0) -> tuple[LinearProgram, list[DecoyBlock]]:
    """``lp`` split into ``parties`` contiguous blocks, each with ``round(ratio * n_j)`` decoys; the LP
    every party's block with decoys makes, and the blocks."""
    sizes = parse_split(None, lp.n_cols, parties)
    _, blocks = split_columns(lp, sizes, ids=[f"party{i + 1}" for i in range(parties)])
    rng = np.random.default_rng(seed)
    aug = [add_decoys(b, round(ratio * b.n_cols), variant, rng, margin) for b in blocks]
    full = LinearProgram(c=np.concatenate([d.block.c for d in aug]),
                         A=sp.hstack([d.block.A for d in aug], format="csc"),
                         row_lower=lp.row_lower, row_upper=lp.row_upper,
                         col_lower=np.concatenate([d.block.col_lower for d in aug]),
                         col_upper=np.concatenate([d.block.col_upper for d in aug]), sense=lp.sense,
                         offset=lp.offset, name=f"{lp.name}+{variant}{ratio:g}")
    return full, aug


# -- the attacker's side: telling real from decoy columns ------------------------------------------
def otsu_threshold(values: np.ndarray) -> float:
    """The threshold splitting ``values`` into two groups of largest between-group variance."""
    v = np.sort(np.asarray(values, dtype=float))
    if v.size < 2 or v[0] == v[-1]:
        return float(v[-1]) if v.size else 0.0
    csum = np.cumsum(v)
    k = np.arange(1, v.size)
    w0, w1 = k / v.size, 1 - k / v.size
    m0 = csum[:-1] / k
    m1 = (csum[-1] - csum[:-1]) / (v.size - k)
    between = w0 * w1 * (m0 - m1) ** 2
    between[v[1:] == v[:-1]] = -1.0  # split only between distinct values
    best = int(np.argmax(between))
    return float(0.5 * (v[best] + v[best + 1]))


def auc(score: np.ndarray, positive: np.ndarray) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half); None
    without both classes."""
    score, positive = np.asarray(score, dtype=float), np.asarray(positive, dtype=bool)
    npos, nneg = int(positive.sum()), int((~positive).sum())
    if not npos or not nneg:
        return None
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(score.size)
    sorted_scores = score[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[positive].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def column_features(A: sp.csc_matrix, c: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Features of each column invariant to a positive factor per column: nonzeros, log spread of
    magnitudes, share of positive entries, distinct magnitudes per nonzero, the cost relative to the
    largest entry (asinh), whether the lower bound is 0 and the upper bound finite, the upper bound
    times the largest entry (asinh)."""
    A = sp.csc_matrix(A)
    n = A.shape[1]
    out = np.zeros((n, 8))
    for t in range(n):
        v = A.data[A.indptr[t]:A.indptr[t + 1]]
        v = v[v != 0]
        big = float(np.abs(v).max()) if v.size else 1.0
        small = float(np.abs(v).min()) if v.size else 1.0
        out[t, 0] = v.size
        out[t, 1] = np.log(big / small)
        out[t, 2] = float((v > 0).mean()) if v.size else 0.0
        out[t, 3] = np.unique(np.round(np.abs(v) / big, 9)).size / max(v.size, 1)
        out[t, 4] = np.arcsinh(c[t] / big)
        out[t, 5] = float(lower[t] == 0)
        out[t, 6] = float(np.isfinite(upper[t]))
        out[t, 7] = np.arcsinh(upper[t] * big) if np.isfinite(upper[t]) else 0.0
    return out


def logistic_fit(X: np.ndarray, y: np.ndarray, l2: float = 1e-2, iterations: int = 50) -> np.ndarray:
    """Weights (last: intercept) of an L2-regularized logistic regression by Newton's method."""
    Z = np.hstack([X, np.ones((X.shape[0], 1))])
    w = np.zeros(Z.shape[1])
    reg = np.full(Z.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ w, -30, 30)))
        grad = Z.T @ (p - y) + reg * w
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(reg + 1e-9)
        step = np.linalg.solve(H, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def cross_validated_scores(X: np.ndarray, real: np.ndarray, seed: int = 0) -> np.ndarray:
    """P(real) of each column from a logistic regression trained on the other half (two folds,
    stratified); features standardized on the training half."""
    rng = np.random.default_rng(seed)
    fold = np.zeros(real.size, dtype=np.int64)
    for cls in (True, False):
        idx = np.flatnonzero(real == cls)
        fold[rng.permutation(idx)[: idx.size // 2]] = 1
    scores = np.full(real.size, 0.5)
    for f in (0, 1):
        train, test = fold != f, fold == f
        if not test.any() or np.unique(real[train]).size < 2:
            continue
        mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
        sd[sd == 0] = 1.0
        w = logistic_fit((X[train] - mu) / sd, real[train].astype(float))
        Z = np.hstack([(X[test] - mu) / sd, np.ones((int(test.sum()), 1))])
        scores[test] = 1.0 / (1.0 + np.exp(-np.clip(Z @ w, -30, 30)))
    return scores


def dominated_columns(A: sp.csc_matrix, c: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                      tol: float = 1e-9) -> np.ndarray:
    """Columns (with ``0 <= x``, no upper bound) that equal a nonnegative combination of other such
    columns whose rows lie in their support, at a strictly lower cost: such a column is zero at every
    optimum (its reduced cost is positive at every dual optimum), whatever its positive factor. One
    small LP per column: the cheapest such combination (HiGHS through scipy)."""
    from scipy.optimize import linprog

    A = sp.csc_matrix(A)
    n = A.shape[1]
    ok = (lower == 0) & np.isinf(upper)
    supports = [frozenset(A.indices[A.indptr[t]:A.indptr[t + 1]].tolist()) for t in range(n)]
    out = np.zeros(n, dtype=bool)
    eligible = np.flatnonzero(ok)
    for t in eligible:
        if not supports[t]:
            continue
        cand = [s for s in eligible if s != t and supports[s] and supports[s] <= supports[t]]
        if not cand:
            continue
        rows = sorted(supports[t])
        B = A[rows][:, cand].toarray()
        b = A[rows][:, [t]].toarray().ravel()
        res = linprog(c[cand], A_eq=B, b_eq=b, bounds=(0, None), method="highs")
        if res.status == 0 and res.fun < c[t] - tol * max(1.0, abs(c[t])):
            out[t] = True
    return out


def pick_figures(called_real: np.ndarray, real: np.ndarray, score: np.ndarray) -> dict[str, Any]:
    """True/false positives of the set called real, and the AUC of ``score`` (higher: more real)."""
    return {"tp": int((called_real & real).sum()), "fp": int((called_real & ~real).sum()),
            "fn": int((~called_real & real).sum()), "auc": auc(score, real)}


# -- one run ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One run: an LP (by name and path), the decoy variant and ratio, and whether x_j is revealed."""

    path: Path
    variant: str
    ratio: float
    reveal: bool
    parties: int = 3
    seed: int = 0
    margin: float = 1.0


def _central(lp: LinearProgram) -> tuple[str, float]:
    from securelp.solvers.lp.highs import HighsBackend

    r = HighsBackend().solve(lp)
    return r.status.value, float(r.objective)


def run_case(case: Case, budget: float = 60.0) -> dict[str, Any]:
    """One session with decoys, its audit, and the figures of one JSON line."""
    from securelp.coordinator.audit import audit_transcript
    from securelp.coordinator.audit.truth import TruthColumns, score_columns
    from securelp.coordinator.protocol import SessionConfig
    from securelp.coordinator.simulation import owners_consent
    from securelp.coordinator.transcript import run_recorded
    from securelp.coordinator.transport import InProcessLink
    from securelp.party.session import PartySession

    lp = read_mps(case.path)
    aug_lp, decoys = lp_with_decoys(lp, case.parties, case.ratio, case.variant, case.seed, case.margin)
    public, blocks = split_columns(aug_lp, [d.block.n_cols for d in decoys], ids=[d.block.party_id for d in decoys])
    config = SessionConfig(reveal=case.reveal)
    sessions = [PartySession(b, policy=owners_consent(config)) for b in blocks]
    status0, obj0 = _central(lp)
    status1, obj1 = _central(aug_lp)
    t0 = time.perf_counter()
    outcome, transcript = run_recorded(public, [InProcessLink(s) for s in sessions], config)
    session_s = time.perf_counter() - t0
    audit = audit_transcript(transcript, budget_s=budget, seed=0)
    scale = max(1.0, abs(obj0))
    entered = 0
    for s, d in zip(sessions, decoys):
        if s.outcome is not None and s.outcome.x is not None and d.decoy.size:
            entered += int((s.outcome.x[d.decoy] > ENTERED_TOL).sum())
    fig: dict[str, Any] = {
        "problem": lp.name or case.path.stem, "variant": case.variant if case.ratio else "none", "ratio": case.ratio,
        "margin": case.margin,
        "reveal": case.reveal, "parties": case.parties, "m": lp.n_rows, "n": lp.n_cols,
        "decoys": int(sum(d.decoy.size for d in decoys)), "status": outcome.status.value,
        "central_status": status0, "central_with_decoys_status": status1,
        "central_rel_diff": abs(obj1 - obj0) / scale, "secure_rel_diff": abs(outcome.objective - obj0) / scale,
        "decoys_entered": entered,
        "bytes_sent": int(sum(p.bytes_sent for p in outcome.parties)), "session_s": session_s,
        "solve_s": float(outcome.timings_s.get("solve", float("nan"))), "audit_s": audit.seconds}
    fig["optimum_unchanged"] = bool(fig["central_rel_diff"] <= OBJECTIVE_TOL)
    for key in ("central_rel_diff", "secure_rel_diff", "solve_s"):
        if not np.isfinite(fig[key]):
            fig[key] = None  # no optimum (the status says why): JSON has no NaN
    # (a) the real columns recovered, (b) real against decoy
    real_cols = exact = up = placed = 0
    labels: list[np.ndarray] = []
    feats: list[np.ndarray] = []
    y_pos: list[np.ndarray] = []
    rc_norm: list[np.ndarray] = []
    dominated: list[np.ndarray] = []
    blocks_seen: list[tuple[sp.csc_matrix, np.ndarray]] = []  # per party: its scaled columns, their real index
    pi = outcome.row_duals
    for s, d in zip(sessions, decoys):
        pa = audit.parties[s.party_id]
        v = pa.view
        bounded = d.block.bounded_mask()
        real_bounded = d.real[bounded[d.real]]
        real_cols += int(real_bounded.size)
        norm = pa.outcome("monomial_normalization")
        if norm is not None and norm.recovered is not None and real_bounded.size:
            A_blk = sp.csc_matrix(d.block.A)
            t = score_columns(norm.recovered, TruthColumns(A_blk[:, real_bounded], d.block.c[real_bounded],
                                                           real_bounded))
            exact += t["recovered_exact"]
            up += t["recovered_up_to_scale"]
            placed += t["positions_right"] + sum(e["right"] for e in t["position_guesses"].values())
        perm = s._perm  # evaluation only: which column each scaled column is (the truth)
        if perm is None or not perm.size:
            continue
        labels.append(d.is_real[perm])
        S = sp.csc_matrix(v.scaled_a)
        # the index of each scaled column among the party's real columns (-1: a decoy)
        real_index = np.where(d.is_real[perm], np.searchsorted(d.real, perm), -1)
        blocks_seen.append((S, real_index))
        feats.append(column_features(S, v.scaled_c, v.scaled_lower, v.scaled_upper))
        y = v.y if v.y is not None else np.zeros(perm.size)
        y_pos.append(np.abs(y) > ENTERED_TOL)
        norms = np.sqrt(np.asarray(S.multiply(S).sum(axis=0)).ravel())
        norms[norms == 0] = 1.0
        rc = (v.scaled_c - S.T @ pi) / norms if pi is not None else np.zeros(perm.size)
        rc_norm.append(np.asarray(rc, dtype=float))
        dominated.append(dominated_columns(S, v.scaled_c, v.scaled_lower, v.scaled_upper))
    fig.update({"real_columns": real_cols, "real_exact": exact, "real_up_to_scale": up, "real_placed": placed})
    if labels:
        real = np.concatenate(labels)
        X = np.vstack(feats)
        ypos = np.concatenate(y_pos)
        rcv = np.concatenate(rc_norm)
        dom = np.concatenate(dominated)
        rc_score = -np.arcsinh(rcv)
        entries = cross_validated_scores(X, real, case.seed)
        both = cross_validated_scores(np.hstack([X, ypos[:, None].astype(float), rc_score[:, None]]), real, case.seed)
        fig["monomial_columns"] = int(real.size)
        fig["order_right"], fig["order_right_filtered"] = _order_figures(blocks_seen, both >= 0.5)
        fig["distinguishers"] = {
            "solution": pick_figures(ypos, real, ypos.astype(float)),
            "reduced_cost": pick_figures(rc_score >= otsu_threshold(rc_score), real, rc_score),
            "dominance": pick_figures(~dom, real, (~dom).astype(float)),
            "entries": pick_figures(entries >= 0.5, real, entries),
            "all": pick_figures(both >= 0.5, real, both)}
    return fig


def _order_figures(blocks: Sequence[tuple[sp.csc_matrix, np.ndarray]], called_real: np.ndarray) -> tuple[int, int]:
    """Real columns the audit's column-order guess (:func:`securelp.coordinator.audit.monomial.column_order`)
    puts at their index among the party's real columns: over every column the coordinator sees, and over
    the columns the ``all`` classifier calls real (the attacker drops what it calls decoys first)."""
    from securelp.coordinator.audit.monomial import column_order

    raw = filtered = start = 0
    for S, real_index in blocks:
        keep = called_real[start:start + real_index.size]
        start += real_index.size
        real = real_index >= 0
        raw += int(np.sum(column_order(S)[real] == real_index[real]))
        if keep.any():
            rank = column_order(S[:, np.flatnonzero(keep)])
            filtered += int(np.sum((rank == real_index[keep]) & real[keep]))
    return raw, filtered


def cases(netlib: Sequence[Path], names: Sequence[str], variants: Sequence[str], ratios: Sequence[float],
          reveals: Sequence[bool], seed: int = 0, margins: Sequence[float] = (1.0,)) -> list[Case]:
    """Every run asked for: per LP found, ratio 0 once and each variant at every other ratio (``resampled``
    at each cost margin), with and without the revealed x_j."""
    out = []
    for name in names:
        path = next((Path(d) / f"{name}.mps" for d in netlib if (Path(d) / f"{name}.mps").is_file()), None)
        if path is None:
            continue
        for reveal in reveals:
            for ratio in ratios:
                if ratio == 0:
                    out.append(Case(path, variants[0], ratio, reveal, seed=seed))
                    continue
                for variant in variants:
                    for margin in (margins if variant == "resampled" else (1.0,)):
                        out.append(Case(path, variant, ratio, reveal, seed=seed, margin=margin))
    return out


# -- the table --------------------------------------------------------------------------------------
def _pr(tp: int, fp: int, fn: int) -> str:
    prec = f"{tp / (tp + fp):.2f}" if tp + fp else "-"
    rec = f"{tp / (tp + fn):.2f}" if tp + fn else "-"
    return f"{prec} / {rec}"


def table(records: list[dict[str, Any]]) -> str:
    """The docs table from the newest run: per variant, margin, ratio and reveal, summed over the LPs.
    Recovery of the real columns counts every run; the distinguishers and the column order count the
    runs whose optimum the decoys left unchanged (the only ones a party could use)."""
    from benchmarks.results import describe_run, latest_run

    run = latest_run(records)
    groups: dict[tuple[str, float, float, bool], list[dict[str, Any]]] = {}
    for r in run:
        f = r["figures"]
        margin = f["margin"] if f["variant"] == "resampled" else 0.0
        groups.setdefault((f["variant"], margin, f["ratio"], f["reveal"]), []).append(f)
    base = {(f["problem"], f["reveal"]): f for f in (r["figures"] for r in run) if f["ratio"] == 0}
    head = ("| decoys per party | x_j revealed | LPs: optimum unchanged | decoys (entered) | real columns: values "
            "right / up to scale / placed by the audit | column order right: all columns / after dropping what "
            "`all` calls decoys | \"real\": precision / recall (AUC) by the solution, y_t > 0 | by reduced cost | "
            "by dominance | by the entries | all | bytes, session s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (variant, margin, ratio, reveal), fs in sorted(groups.items(), key=lambda kv: (
            not kv[0][3], kv[0][0] != "none", kv[0][0], -kv[0][1], kv[0][2])):
        kind = f"resampled (margin {margin:g})" if variant == "resampled" else variant
        label = "none" if variant == "none" else f"{kind}, {ratio:g} n_j"
        ok = [f for f in fs if f["optimum_unchanged"] and "distinguishers" in f]
        cols = sum(f["real_columns"] for f in fs)
        cells = []
        for name in DISTINGUISHERS:
            ds = [f["distinguishers"][name] for f in ok]
            tp, fp, fn = (sum(d[k] for d in ds) for k in ("tp", "fp", "fn"))
            aucs = [d["auc"] for d in ds if d["auc"] is not None]
            cells.append(f"{_pr(tp, fp, fn)} ({np.mean(aucs):.2f})" if aucs else f"{_pr(tp, fp, fn)} (-)")
        ok_cols = sum(f["real_columns"] for f in ok)
        order = (f"{sum(f['order_right'] for f in ok)} / {sum(f['order_right_filtered'] for f in ok)} of {ok_cols}"
                 if ok else "-")
        b = [base.get((f["problem"], reveal)) for f in fs]
        ratios_b = [f["bytes_sent"] / x["bytes_sent"] for f, x in zip(fs, b) if x]
        ratios_s = [f["session_s"] / x["session_s"] for f, x in zip(fs, b) if x and x["session_s"] > 0]
        lines.append(
            f"| {label} | {'yes' if reveal else 'no'} | {len(ok)}/{len(fs)} | {sum(f['decoys'] for f in fs)} "
            f"({sum(f['decoys_entered'] for f in fs)}) | "
            f"{sum(f['real_exact'] for f in fs)} / {sum(f['real_up_to_scale'] for f in fs)} / "
            f"{sum(f['real_placed'] for f in fs)} of {cols} | {order} | " + " | ".join(cells) +
            f" | x{np.median(ratios_b):.2f}, x{np.median(ratios_s):.2f} |")
    problems = sorted({f["problem"] for fs in groups.values() for f in fs})
    lines.append("")
    lines.append(f"LPs: {', '.join(problems)}; 3 parties each, every column bounded (x >= 0). \"Optimum unchanged\": "
                 "the central solve with decoys equals the one without to 1e-9 relative (a decoy that entered the "
                 "solution or made the LP unbounded changed it). Precision / recall of the set the attacker calls "
                 "real (recall: the share of the real columns it keeps; with r n_j decoys per party a random pick "
                 "has precision 1 / (1 + r)), over the runs whose optimum is unchanged; AUC: the area under the ROC "
                 "curve of its score, averaged over those runs (0.5: chance). Bytes and session seconds: median "
                 "ratio to the same LP without decoys. " + describe_run(run[0]))
    return "\n".join(lines)


# -- command line -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Run the cases asked for and append one JSON line each to benchmarks/results/decoys.jsonl."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netlib", action="append", default=None,
                        help="a folder of netlib MPS files (repeatable; default: tests/data/netlib and the shared one)")
    parser.add_argument("--only", default=",".join(NETLIB), help="comma-separated LP names")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--ratios", default=",".join(f"{r:g}" for r in RATIOS))
    parser.add_argument("--margins", default=",".join(f"{m:g}" for m in MARGINS),
                        help="cost margins of the resampled decoys, in units of max|c_j|")
    parser.add_argument("--reveal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--budget", type=float, default=60.0, help="the audit's time budget per session (s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the decoys (the masks use fresh entropy)")
    parser.add_argument("--out", type=Path, default=None, help="results file (default benchmarks/results/decoys.jsonl)")
    args = parser.parse_args(argv)
    folders = [Path(p) for p in args.netlib] if args.netlib else [REPO / "tests" / "data" / "netlib",
                                                                   shared_data("netlib")]
    reveals = {"both": (True, False), "yes": (True,), "no": (False,)}[args.reveal]
    todo = cases(folders, [n for n in args.only.split(",") if n], [v for v in args.variants.split(",") if v],
                 [float(r) for r in args.ratios.split(",") if r], reveals, args.seed,
                 [float(m) for m in args.margins.split(",") if m])
    if not todo:
        print("benchmarks.bench_decoys: no LP found; give --netlib", file=sys.stderr)
        return 4
    context = run_context("decoys", argv)
    lines = []
    for i, case in enumerate(todo, 1):
        fig = run_case(case, args.budget)
        d = fig.get("distinguishers", {})
        print(f"[{i}/{len(todo)}] {fig['problem']} {fig['variant']} {case.margin:g} {case.ratio:g} reveal={case.reveal}: "
              f"decoys {fig['decoys']} entered {fig['decoys_entered']} unchanged {fig['optimum_unchanged']}; "
              f"real {fig['real_exact']}/{fig['real_up_to_scale']} of {fig['real_columns']}; "
              + " ".join(f"{k}={v['auc']:.2f}" if v["auc"] is not None else f"{k}=-" for k, v in d.items()),
              flush=True)
        lines.append(({"problem": fig["problem"], "variant": fig["variant"], "ratio": case.ratio,
                       "reveal": case.reveal, "parties": case.parties, "seed": case.seed, "margin": case.margin},
                      fig))
    append_run(args.out or results_path("decoys"), context, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
