"""One audit of one session: every attack on the transcript, then (when known) the truth.

:func:`audit_transcript` rebuilds the coordinator's view of each party from a
:class:`~securelp.coordinator.transcript.Transcript` and runs, within one time budget:

1. per party, the monomial attacks (:mod:`~securelp.coordinator.audit.monomial`);
2. per masked product, the known mask rows of rows mode (Bednarz et al.), then the dense
   attacks (:mod:`~securelp.coordinator.audit.dense`);
3. per party, what the solution gives (:mod:`~securelp.coordinator.audit.solution`);
4. the coalitions of the coordinator with 1 .. p-1 parties (:mod:`~securelp.coordinator.audit.collusion`);
5. with rows of A assumed known (an assumption, reported apart): the known-row attacks
   (:mod:`~securelp.coordinator.audit.known_rows`).

Everything in steps 1-4 uses the transcript alone; it is what the coordinator of this session
can do. With a :class:`~securelp.coordinator.audit.truth.Truth` (simulations, ``securelp audit
--truth``) :func:`evaluate` then scores every outcome against the real blocks, on the separate,
non-private evaluation path.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.collusion import CollusionResult, attack_collusion
from securelp.coordinator.audit.dense import attack_dense, orthonormal_range
from securelp.coordinator.audit.known_rows import (
    KnownRows,
    attack_known_mask_rows,
    attack_known_rows,
    attack_known_rows_monomial,
    attack_mask_rows_free,
)
from securelp.coordinator.audit.monomial import SolutionMatch, attack_monomial, match_solution
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns, not_applicable
from securelp.coordinator.audit.scales import MIN_LEARNT, Priors, default_priors, learn_priors, single_round_reading
from securelp.coordinator.audit.seeds import attack_seed
from securelp.coordinator.audit.solution import attack_solution
from securelp.coordinator.audit.truth import Truth, TruthColumns, score_columns
from securelp.coordinator.audit.view import (
    MaskedProduct,
    PartyView,
    aggregated_products,
    party_views,
    plain_products,
)
from securelp.coordinator.transcript import Transcript

#: seconds the end-of-session audit of ``solve``, ``demo`` and ``coordinator`` may take by default
DEFAULT_SESSION_BUDGET_S = 30.0
#: dense subspace comparisons against the truth are skipped above this many flops
MAX_TRUTH_FLOPS = 2e10


@dataclass(eq=False)
class PartyAudit:
    """The attacks on one party and what they add up to."""

    view: PartyView
    outcomes: list[AttackOutcome] = field(default_factory=list)
    assumed: list[AttackOutcome] = field(default_factory=list)  # with rows of A assumed known
    summary: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] | None = None
    assumed_truth: dict[str, Any] | None = None

    @property
    def party_id(self) -> str:
        return self.view.party_id

    def outcome(self, attack: str) -> AttackOutcome | None:
        for o in self.outcomes + self.assumed:
            if o.attack == attack:
                return o
        return None


@dataclass(eq=False)
class SessionAudit:
    """Every attack of one audit, per party, with the session's collusion results."""

    session_id: str
    mode: str
    transport: str
    parties: dict[str, PartyAudit]
    shared: list[AttackOutcome]
    collusion: list[CollusionResult]
    budget_s: float | None
    seconds: float
    known_rows: str
    truth_source: str = ""
    evaluation_seconds: float = 0.0
    known_rows_count: int = 0

    @property
    def skipped(self) -> list[dict[str, str]]:
        """Attacks that apply but did not run (budget, size limits), with the reason."""
        out = []
        for pa in self.parties.values():
            for o in pa.outcomes + pa.assumed:
                if o.status is AttackStatus.SKIPPED:
                    out.append({"party": pa.party_id, "attack": o.attack, "reason": o.reason})
        for o in self.shared:
            if o.status is AttackStatus.SKIPPED:
                out.append({"party": "+".join(o.parties), "attack": o.attack, "reason": o.reason})
        return out

    @property
    def claims_hold(self) -> bool | None:
        """Whether every claim of exact recovery and of a position was right (None: no truth)."""
        checks = [pa.truth["claims_hold"] for pa in self.parties.values() if pa.truth is not None]
        return all(checks) if checks else None


def _sub_budget(budget: Budget, left: int) -> Budget:
    rem = budget.remaining()
    return Budget(None if not np.isfinite(rem) else max(0.0, rem / max(1, left)))


def audit_transcript(transcript: Transcript, *, truth: Truth | None = None, known_rows: KnownRows | None = None,
                     budget_s: float | None = DEFAULT_SESSION_BUDGET_S, seed: int | None = None,
                     own_products: Mapping[str, MaskedProduct] | None = None) -> SessionAudit:
    """Run every attack on ``transcript``; with ``truth``, evaluate them.

    Parameters
    ----------
    transcript : what the coordinator received and sent.
    truth : every party's block (simulations, ``--truth``); None: transcript only.
    known_rows : rows of A assumed known to the coordinator (their attacks are reported apart).
    budget_s : seconds for all attacks together (None: no limit); an attack that does not fit is
        reported as skipped with the reason.
    seed : seed of the random pivot orders (None: fresh entropy).
    own_products : colluders' own contributions to products shared by several parties.
    """
    from threadpoolctl import threadpool_limits

    # numpy and scipy each load their own OpenBLAS, whose thread pools fight for the cores (and
    # with HiGHS's workers after a solve): the range of a 1000 x 110 product took 2-5 s inside a
    # session and 0.02 s with one BLAS thread (as in securelp.solvers.mdp.ipm)
    with threadpool_limits(limits=1, user_api="blas"):
        return _audit(transcript, truth=truth, known_rows=known_rows, budget_s=budget_s, seed=seed,
                      own_products=own_products)


def _session_priors(views: Sequence[PartyView], matches: Mapping[str, SolutionMatch]) -> Priors | None:
    """Priors learnt from every column of the session whose factor the revealed solution confirmed,
    or narrowed down to a single round reading; without MIN_LEARNT of them, the defaults over all of
    the session's monomial columns (None: no monomial column)."""
    mono = [v for v in views if v.n_monomial]
    if not mono:
        return None
    S_parts, c, lo, hi, d = [], [], [], [], []
    for v in mono:
        mt = matches.get(v.party_id)
        if mt is None or not mt.ran:
            continue
        narrow, narrow_d = single_round_reading(v.scaled_a, v.scaled_c, v.scaled_lower, v.scaled_upper, mt.allowed)
        sure = np.flatnonzero(mt.certain)
        keep = ~np.isin(narrow, sure)
        cols = np.concatenate([sure, narrow[keep]])
        scales = np.concatenate([mt.scale[sure], narrow_d[keep]])
        if not cols.size:
            continue
        S_parts.append(sp.csc_matrix(v.scaled_a)[:, cols])
        c.append(v.scaled_c[cols])
        lo.append(v.scaled_lower[cols])
        hi.append(v.scaled_upper[cols])
        d.append(scales)
    if sum(p.shape[1] for p in S_parts) >= MIN_LEARNT:
        return learn_priors(sp.hstack(S_parts, format="csc"), np.concatenate(c), np.concatenate(lo),
                            np.concatenate(hi), np.concatenate(d))
    S = sp.hstack([sp.csc_matrix(v.scaled_a) for v in mono], format="csc")
    return default_priors(S)


def _with_candidates(product: MaskedProduct, view: PartyView, match: SolutionMatch | None) -> MaskedProduct:
    """A party's product with the values its dense columns can take in the revealed x_j (the monomial
    columns' matching leaves them; zeros where the dense columns take fewer nonzero entries than they
    number)."""
    if match is None or not match.ran:
        return product
    values = np.concatenate([np.repeat(match.dense_values, match.dense_counts),
                             np.zeros(max(0, view.n_dense - match.dense_slots))])
    return dataclasses.replace(product, x_candidates=values)


def _audit(transcript: Transcript, *, truth: Truth | None, known_rows: KnownRows | None, budget_s: float | None,
           seed: int | None, own_products: Mapping[str, MaskedProduct] | None) -> SessionAudit:
    t_start = time.perf_counter()
    budget = Budget(budget_s)
    rng = np.random.default_rng(seed)
    views = party_views(transcript)
    audits = {v.party_id: PartyAudit(v) for v in views}
    by_id = {v.party_id: v for v in views}
    mode = next((v.mode for v in views if v.mode), "")
    # 1. monomial columns: the revealed solutions first (certain factors), priors learnt from them
    # across the session, then every party's best guesses; cheap, linear in the nonzeros
    matches = {v.party_id: match_solution(v.y, v.x, v.n_dense) for v in views
               if v.n_monomial and v.x is not None and v.y is not None}
    priors = _session_priors(views, matches)
    for v in views:
        audits[v.party_id].outcomes.extend(attack_monomial(v.party_id, v.scaled_a, v.scaled_c, v.scaled_lower,
                                                           v.scaled_upper, v.y, v.x, budget, n_dense=v.n_dense,
                                                           match=matches.get(v.party_id), priors=priors))
        if known_rows is not None:
            audits[v.party_id].assumed.append(attack_known_rows_monomial(v, known_rows))
        if v.reproducible:
            audits[v.party_id].outcomes.append(attack_seed(v, budget))
    # 2. dense products, each with its share of what is left
    products = [_with_candidates(pr, by_id[pr.parties[0]], matches.get(pr.parties[0]))
                for pr in plain_products(views)] + aggregated_products(views)
    shared: list[AttackOutcome] = []
    for i, pr in enumerate(products):
        sub = _sub_budget(budget, len(products) - i)
        outs = [attack_known_mask_rows(pr, sub)]
        exact = outs[0].claimed == pr.n_cols and pr.n_cols > 0
        if len(pr.parties) == 1 and pr.known_mask_rows.shape[0] and not exact:
            outs.append(attack_mask_rows_free(pr, sub, rng))
        outs.extend(attack_dense(pr, sub, rng, search=not exact))
        if len(pr.parties) == 1:
            audits[pr.parties[0]].outcomes.extend(outs)
        else:
            shared.extend(outs)
            for pid, o in _attributed(outs, pr, by_id):
                audits[pid].outcomes.append(o)
        if known_rows is not None and len(pr.parties) == 1:
            audits[pr.parties[0]].assumed.append(attack_known_rows(pr, by_id.get(pr.parties[0]), known_rows, sub))
    for v in views:
        pa = audits[v.party_id]
        if v.aggregated:
            together = next(pr.label for pr in products if v.party_id in pr.parties)
            pa.outcomes.append(not_applicable("dense_column_space", "dense", (v.party_id,),
                                              f"its dense product reached the coordinator only inside the sum "
                                              f"{together} (secure aggregation); the dense attacks ran on that sum"))
        elif not v.masked_a.shape[1]:
            pa.outcomes.append(not_applicable("dense_column_space", "dense", (v.party_id,),
                                              "no column of this party is under a dense mask"))
        if v.mode != "rows":
            pa.outcomes.append(not_applicable("known_mask_rows", "known_rows", (v.party_id,),
                                              "bounds are not sent as mask rows in this mode"))
    # 3. the solution
    for v in views:
        audits[v.party_id].outcomes.extend(attack_solution(v))
    for pa in audits.values():
        pa.summary = summarize(pa)
    # 4. collusion
    collusion: list[CollusionResult] = []
    if len(views) > 1:
        def residual_attack(pr: MaskedProduct) -> Mapping[str, int]:
            outs = attack_dense(pr, _sub_budget(budget, 1), rng)
            costs = next((o for o in outs if o.attack == "dense_costs"), None)
            return {pr.label: costs.claimed if costs is not None else 0}

        collusion = attack_collusion([v.party_id for v in views], {v.party_id: v.n_cols for v in views}, products,
                                     {p: int(a.summary["recovered_exact"]) for p, a in audits.items()},
                                     residual_attack, own_products)
    result = SessionAudit(session_id=transcript.header.session_id, mode=mode, transport=transcript.header.transport,
                          parties=audits, shared=shared, collusion=collusion, budget_s=budget_s,
                          seconds=time.perf_counter() - t_start,
                          known_rows=known_rows.label if known_rows is not None else "none",
                          known_rows_count=known_rows.count if known_rows is not None else 0)
    if truth is not None:
        evaluate(result, truth)
    return result


def _attributed(outs: Sequence[AttackOutcome], product: MaskedProduct,
                views: Mapping[str, PartyView]) -> list[tuple[str, AttackOutcome]]:
    """The parts of a shared product's outcomes that belong to one party.

    A recovered column of the sum is attributed to a party when the attack placed it: positions of
    a product of several parties run over their columns party after party (the revealed x_j of each
    party, or in rows mode the mask rows each party sent, say whose a column is), so a position in a
    party's range is one of its columns, at the position minus the range's start. A party that sent
    mask rows (rows mode) also learns that they are known when its columns are not placed."""
    out: list[tuple[str, AttackOutcome]] = []
    offsets, start = {}, 0
    for pid in product.parties:
        offsets[pid] = start
        start += views[pid].n_cols
    for o in outs:
        if not o.ran:
            continue
        rec = o.recovered
        for pid in product.parties:
            v, off = views[pid], offsets[pid]
            figures = {"from_sum": product.label}
            if rec is not None:
                placed = np.where(rec.position >= 0, rec.position, rec.position_guesses)
                sel = (placed >= off) & (placed < off + v.n_cols)
                if sel.any():
                    claimed = rec.direction_claimed[sel] if rec.direction_claimed is not None else None
                    pos = np.where(rec.position[sel] >= 0, rec.position[sel] - off, -1)
                    guess = np.where(rec.position_guesses[sel] >= 0, rec.position_guesses[sel] - off, -1)
                    mine = RecoveredColumns(sp.csc_matrix(rec.A[:, np.flatnonzero(sel)]), rec.c[sel],
                                            rec.scale_known[sel], pos, rec.signed_scale, claimed,
                                            basis=rec.bases[sel], position_guess=guess,
                                            position_basis=rec.position_bases[sel])
                    out.append((pid, AttackOutcome(o.attack, o.family, (pid,), AttackStatus.RAN, columns=v.n_dense,
                                                   claimed=int(mine.scale_known.sum()), up_to_scale=mine.count,
                                                   positions=int((pos >= 0).sum()), figures=figures, recovered=mine,
                                                   reason=f"found in the sum {product.label} and placed among this "
                                                          "party's columns" + ("" if (pos >= 0).all() else
                                                                               " (positions partly best guesses)"))))
                    continue
            if o.attack == "known_mask_rows" and v.mode == "rows" and v.bound_rows.shape[0]:
                figures["mask_rows"] = int(v.bound_rows.shape[0])
                out.append((pid, AttackOutcome("known_mask_rows", o.family, (pid,), AttackStatus.RAN, columns=v.n_dense,
                                               figures=figures,
                                               reason=f"its mask rows are known, but its columns reach the coordinator "
                                                      f"only inside the sum {product.label}, with columns whose mask "
                                                      "rows are not known")))
    return out


# -- what the attacks add up to ---------------------------------------------------------------------
def _merged_monomial(pa: PartyAudit, with_assumed: bool) -> RecoveredColumns | None:
    norm = pa.outcome("monomial_normalization")
    if norm is None or norm.recovered is None:
        return None
    rec = norm.recovered
    if with_assumed:
        kr = next((o for o in pa.assumed if o.attack == "known_rows_monomial" and o.recovered is not None), None)
        if kr is not None and kr.recovered is not None:
            pin = kr.recovered.scale_known & ~rec.scale_known
            A = rec.A @ sp.diags((~pin).astype(float)) + kr.recovered.A @ sp.diags(pin.astype(float))
            basis = np.where(pin, "known_rows", rec.bases).astype(object)
            position = np.where(pin & (kr.recovered.position >= 0), kr.recovered.position, rec.position)
            rec = RecoveredColumns(sp.csc_matrix(A), np.where(pin, kr.recovered.c, rec.c), rec.scale_known | pin,
                                   position, signed_scale=False, basis=basis,
                                   position_guess=np.where(position >= 0, -1, rec.position_guesses),
                                   position_basis=rec.position_bases)
    return rec


#: dense outcomes in the order their recovered columns are preferred (the first that has some)
DENSE_ORDER = ("known_mask_rows", "mask_rows_free_columns", "dense_single_column", "dense_mask_structure",
               "dense_costs", "dense_l1_recovery", "dense_sparse_recovery")


def _merged_dense(pa: PartyAudit, with_assumed: bool) -> RecoveredColumns | None:
    order = list(DENSE_ORDER)
    if with_assumed:
        order.insert(0, "known_rows")
    for name in order:
        o = pa.outcome(name)
        if o is not None and o.ran and o.recovered is not None and (o.claimed or o.up_to_scale or
                                                                     name.startswith("dense_") or
                                                                     name == "mask_rows_free_columns"):
            return o.recovered
    return None


def _seeded(pa: PartyAudit) -> AttackOutcome | None:
    o = pa.outcome("seed_guess")
    return o if o is not None and o.ran and o.claimed and o.recovered is not None else None


def _counts(values: np.ndarray) -> dict[str, int]:
    if not values.size:
        return {}
    keys, counts = np.unique(values.astype(str), return_counts=True)
    return {str(k): int(c) for k, c in zip(keys, counts) if k}


def summarize(pa: PartyAudit, *, with_assumed: bool = False) -> dict[str, Any]:
    """Per party: columns whose values the attacks claim (``recovered_exact``, each confirmed by a check,
    ``exact_by``), columns with a best guess of their values (``best_guess``, by class), columns known
    up to a factor, columns placed (claimed) and columns with a best guess of their position."""
    v = pa.view
    mono = _merged_monomial(pa, with_assumed)
    dense = _merged_dense(pa, with_assumed)
    norm = pa.outcome("monomial_normalization")
    parts = [r for r in (mono, dense) if r is not None]
    seeded = _seeded(pa)
    if seeded is not None and seeded.recovered is not None:
        parts = [seeded.recovered]
    m_claimed = int(mono.scale_known.sum()) if mono is not None else 0
    d_claimed = int(dense.scale_known.sum()) if dense is not None else 0
    d_up = min(int(dense.directions_claimed.sum()), v.n_dense) if dense is not None else 0
    exact = sum(int(r.scale_known.sum()) for r in parts)
    guessed = np.concatenate([r.bases[r.guessed] for r in parts]) if parts else np.zeros(0, dtype=object)
    claimed_by = np.concatenate([r.bases[np.asarray(r.scale_known, dtype=bool)] for r in parts]) if parts \
        else np.zeros(0, dtype=object)
    pos_guess = np.concatenate([r.position_bases[r.position_guesses >= 0] for r in parts]) if parts \
        else np.zeros(0, dtype=object)
    positions = sum(int((r.position >= 0).sum()) for r in parts)
    out = {"columns": v.n_cols, "recovered_exact": exact,
           "recovered_up_to_scale": v.n_cols if seeded is not None else v.n_monomial + d_up, "positions": positions,
           "ambiguous": int(norm.figures.get("ambiguous", 0)) if norm is not None and norm.ran else 0,
           "monomial_columns": v.n_monomial, "monomial_exact": m_claimed, "dense_columns": v.n_dense,
           "dense_exact": d_claimed, "dense_up_to_scale": d_up,
           "exact_by": _counts(claimed_by), "best_guess": int(guessed.size), "best_guess_classes": _counts(guessed),
           "positions_guessed": int(pos_guess.size), "position_guess_classes": _counts(pos_guess)}
    out["not_recovered"] = v.n_cols - out["recovered_exact"]
    return out


# -- evaluation against the truth -------------------------------------------------------------------
def _targets(pa: PartyAudit, truth: Truth) -> tuple[TruthColumns | None, TruthColumns | None, TruthColumns | None]:
    """True columns of the monomial part, of the dense part, and all of one party's."""
    blk = truth.block(pa.party_id)
    if blk is None:
        return None, None, None
    bounded = blk.bounded_mask()
    if pa.view.mode == "rows":
        mono_idx, dense_idx = np.zeros(0, dtype=np.int64), np.arange(blk.n_cols)
    else:
        mono_idx, dense_idx = np.flatnonzero(bounded), np.flatnonzero(~bounded)
    A = sp.csc_matrix(blk.A)
    mono = TruthColumns(A[:, mono_idx], blk.c[mono_idx], mono_idx)
    dense = TruthColumns(A[:, dense_idx], blk.c[dense_idx], dense_idx)
    whole = TruthColumns(A, blk.c, np.arange(blk.n_cols))
    return mono, dense, whole


def _subspace_truth(basis: np.ndarray, A: sp.csc_matrix) -> dict[str, Any]:
    """The rank of A and the largest principal-angle sine between range(A) and the revealed
    subspace: ||(I - Q Q') U_A||_2 for an orthonormal basis U_A of range(A)."""
    m, n = A.shape
    r = basis.shape[1]
    if 4.0 * m * n * n > MAX_TRUTH_FLOPS:
        return {"skipped": f"the {m} x {n} block is too large to compare subspaces here"}
    U = orthonormal_range(A.toarray())
    rank = U.shape[1]
    out: dict[str, Any] = {"true_rank": rank, "rank_right": rank == r}
    if rank == 0:
        out["max_principal_angle_sine"] = 0.0 if r == 0 else 1.0
        return out
    X = U - basis @ (basis.T @ U) if r else U
    out["max_principal_angle_sine"] = float(np.sqrt(max(0.0, np.linalg.eigvalsh(X.T @ X).max())))
    if r > rank:  # the revealed space is larger than the block's: its extra directions are off by 90 degrees
        out["max_principal_angle_sine"] = 1.0
    return out


def _evaluate_outcome(o: AttackOutcome, mono: TruthColumns | None, dense: TruthColumns | None,
                      whole: TruthColumns | None = None) -> None:
    if not o.ran:
        return
    if o.family == "seed":
        target = whole
    else:
        target = mono if o.family == "monomial" or o.attack == "known_rows_monomial" else dense
    if target is None:
        return
    if o.recovered is not None:
        o.truth = score_columns(o.recovered, target)
    if "basis" in o.artifacts:
        o.truth = _subspace_truth(o.artifacts["basis"], target.A)
    if "support" in o.artifacts:
        true_rows = np.diff(sp.csr_matrix(target.A).indptr) > 0
        o.truth = {"rows_right": int(np.sum(true_rows == o.artifacts["support"])), "rows": int(true_rows.size)}
        o.truth["fraction_right"] = o.truth["rows_right"] / max(1, o.truth["rows"])
    if "gram" in o.artifacts:
        AAt = (target.A @ target.A.T).toarray()
        ref = float(np.linalg.norm(AAt))
        o.truth = {"rel_error": float(np.linalg.norm(o.artifacts["gram"] - AAt) / ref) if ref else None}


def _merge_truth(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    keys = ("columns", "recovered_exact", "recovered_up_to_scale", "claimed_right", "claimed_wrong",
            "unclaimed_right", "direction_claimed_wrong", "positions_assigned", "positions_right")
    out: dict[str, Any] = {k: int(sum(p.get(k, 0) for p in parts)) for k in keys}
    n = out["columns"]
    out["fraction_exact"] = out["recovered_exact"] / n if n else 0.0
    out["fraction_up_to_scale"] = out["recovered_up_to_scale"] / n if n else 0.0
    errs = [p["rel_error_max"] for p in parts if p.get("rel_error_max") is not None]
    out["rel_error_max"] = max(errs) if errs else None
    for key in ("guesses", "position_guesses"):
        merged: dict[str, dict[str, int]] = {}
        for p in parts:
            for cls, e in p.get(key, {}).items():
                slot = merged.setdefault(cls, {"guessed": 0, "right": 0})
                slot["guessed"] += int(e["guessed"])
                slot["right"] += int(e["right"])
        out[key] = merged
    out["claims_hold"] = (out["claimed_wrong"] == 0 and out["direction_claimed_wrong"] == 0
                          and out["positions_right"] == out["positions_assigned"])
    return out


def _party_truth(pa: PartyAudit, mono: TruthColumns | None, dense: TruthColumns | None,
                 whole: TruthColumns | None, with_assumed: bool) -> dict[str, Any]:
    seeded = _seeded(pa)
    if seeded is not None and seeded.recovered is not None and whole is not None:
        return _merge_truth([score_columns(seeded.recovered, whole)])
    parts = []
    m_rec, d_rec = _merged_monomial(pa, with_assumed), _merged_dense(pa, with_assumed)
    if mono is not None and mono.count:
        parts.append(score_columns(m_rec, mono) if m_rec is not None else {"columns": mono.count})
    if dense is not None and dense.count:
        parts.append(score_columns(d_rec, dense) if d_rec is not None else {"columns": dense.count})
    return _merge_truth(parts)


def evaluate(audit: SessionAudit, truth: Truth) -> None:
    """Score every outcome of ``audit`` against ``truth`` (fills the ``truth`` fields in place)."""
    t0 = time.perf_counter()
    audit.truth_source = truth.source
    for pa in audit.parties.values():
        mono, dense, whole = _targets(pa, truth)
        for o in pa.outcomes + pa.assumed:
            _evaluate_outcome(o, mono, dense, whole)
        pa.truth = _party_truth(pa, mono, dense, whole, with_assumed=False)
        if pa.assumed:
            pa.assumed_truth = _party_truth(pa, mono, dense, whole, with_assumed=True)
    for o in audit.shared:  # a product of several parties: against their dense columns, party after party
        parts = [_targets(audit.parties[p], truth)[1] for p in o.parties if p in audit.parties]
        if parts and all(part is not None for part in parts):
            offsets = np.cumsum([0] + [audit.parties[p].view.n_cols for p in o.parties])[:-1]
            joint = TruthColumns(sp.hstack([part.A for part in parts], format="csc"),  # type: ignore[union-attr]
                                 np.concatenate([part.c for part in parts]),  # type: ignore[union-attr]
                                 np.concatenate([off + (part.original if part.original is not None  # type: ignore[union-attr]
                                                        else np.arange(part.count))  # type: ignore[union-attr]
                                                 for off, part in zip(offsets, parts)]))
            _evaluate_outcome(o, None, joint)
    for res in audit.collusion:
        honest = [audit.parties[h].truth for h in res.honest if audit.parties[h].truth is not None]
        res.truth = {"honest_recovered_exact": int(sum(t["recovered_exact"] for t in honest)),
                     "honest_columns": int(sum(t["columns"] for t in honest))}
    audit.evaluation_seconds = time.perf_counter() - t0
