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
)
from securelp.coordinator.audit.monomial import attack_monomial
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns, not_applicable
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


def _audit(transcript: Transcript, *, truth: Truth | None, known_rows: KnownRows | None, budget_s: float | None,
           seed: int | None, own_products: Mapping[str, MaskedProduct] | None) -> SessionAudit:
    t_start = time.perf_counter()
    budget = Budget(budget_s)
    rng = np.random.default_rng(seed)
    views = party_views(transcript)
    products = plain_products(views) + aggregated_products(views)
    audits = {v.party_id: PartyAudit(v) for v in views}
    mode = next((v.mode for v in views if v.mode), "")
    # 1. monomial columns: cheap, linear in the nonzeros
    for v in views:
        audits[v.party_id].outcomes.extend(attack_monomial(v.party_id, v.scaled_a, v.scaled_c, v.scaled_lower,
                                                           v.scaled_upper, v.y, v.x, budget))
        if known_rows is not None:
            audits[v.party_id].assumed.append(attack_known_rows_monomial(v, known_rows))
    # 2. dense products, each with its share of what is left
    shared: list[AttackOutcome] = []
    by_id = {v.party_id: v for v in views}
    for i, pr in enumerate(products):
        sub = _sub_budget(budget, len(products) - i)
        outs = [attack_known_mask_rows(pr, sub)]
        exact = outs[0].claimed == pr.n_cols and pr.n_cols > 0
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
                sel = (rec.position >= off) & (rec.position < off + v.n_cols)
                if sel.any():
                    claimed = rec.direction_claimed[sel] if rec.direction_claimed is not None else None
                    mine = RecoveredColumns(sp.csc_matrix(rec.A[:, np.flatnonzero(sel)]), rec.c[sel],
                                            rec.scale_known[sel], rec.position[sel] - off, rec.signed_scale, claimed)
                    out.append((pid, AttackOutcome(o.attack, o.family, (pid,), AttackStatus.RAN, columns=v.n_dense,
                                                   claimed=int(mine.scale_known.sum()), up_to_scale=mine.count,
                                                   positions=mine.count, figures=figures, recovered=mine,
                                                   reason=f"found in the sum {product.label} and placed among this "
                                                          "party's columns")))
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
            pin = kr.recovered.scale_known
            A = rec.A @ sp.diags((~pin).astype(float)) + kr.recovered.A @ sp.diags(pin.astype(float))
            rec = RecoveredColumns(sp.csc_matrix(A), np.where(pin, kr.recovered.c, rec.c), rec.scale_known | pin,
                                   np.where(pin, kr.recovered.position, rec.position), signed_scale=False)
    return rec


def _merged_dense(pa: PartyAudit, with_assumed: bool) -> RecoveredColumns | None:
    order = ["known_mask_rows", "dense_mask_structure", "dense_costs", "dense_l1_recovery", "dense_sparse_recovery"]
    if with_assumed:
        order.insert(0, "known_rows")
    for name in order:
        o = pa.outcome(name)
        if o is not None and o.ran and o.recovered is not None and (o.claimed or o.up_to_scale or
                                                                     name.startswith("dense_")):
            return o.recovered
    return None


def summarize(pa: PartyAudit, *, with_assumed: bool = False) -> dict[str, Any]:
    """Per party: columns whose values the attacks claim (``recovered_exact``), columns known up
    to a factor, columns placed, and the ambiguous ones (a few round alternatives)."""
    v = pa.view
    mono = _merged_monomial(pa, with_assumed)
    dense = _merged_dense(pa, with_assumed)
    norm = pa.outcome("monomial_normalization")
    m_claimed = int(mono.scale_known.sum()) if mono is not None else 0
    d_claimed = int(dense.scale_known.sum()) if dense is not None else 0
    d_up = min(int(dense.directions_claimed.sum()), v.n_dense) if dense is not None else 0
    m_pos = int((mono.position >= 0).sum()) if mono is not None else 0
    d_pos = int((dense.position >= 0).sum()) if dense is not None else 0
    out = {"columns": v.n_cols, "recovered_exact": m_claimed + d_claimed,
           "recovered_up_to_scale": v.n_monomial + d_up, "positions": m_pos + d_pos,
           "ambiguous": int(norm.figures.get("ambiguous", 0)) if norm is not None and norm.ran else 0,
           "monomial_columns": v.n_monomial, "monomial_exact": m_claimed, "dense_columns": v.n_dense,
           "dense_exact": d_claimed, "dense_up_to_scale": d_up}
    out["not_recovered"] = v.n_cols - out["recovered_exact"]
    return out


# -- evaluation against the truth -------------------------------------------------------------------
def _targets(pa: PartyAudit, truth: Truth) -> tuple[TruthColumns | None, TruthColumns | None]:
    """True columns of the monomial part and of the dense part of one party."""
    blk = truth.block(pa.party_id)
    if blk is None:
        return None, None
    bounded = blk.bounded_mask()
    if pa.view.mode == "rows":
        mono_idx, dense_idx = np.zeros(0, dtype=np.int64), np.arange(blk.n_cols)
    else:
        mono_idx, dense_idx = np.flatnonzero(bounded), np.flatnonzero(~bounded)
    A = sp.csc_matrix(blk.A)
    mono = TruthColumns(A[:, mono_idx], blk.c[mono_idx], mono_idx)
    dense = TruthColumns(A[:, dense_idx], blk.c[dense_idx], dense_idx)
    return mono, dense


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


def _evaluate_outcome(o: AttackOutcome, mono: TruthColumns | None, dense: TruthColumns | None) -> None:
    if not o.ran:
        return
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
    out = {k: int(sum(p.get(k, 0) for p in parts)) for k in keys}
    n = out["columns"]
    out["fraction_exact"] = out["recovered_exact"] / n if n else 0.0
    out["fraction_up_to_scale"] = out["recovered_up_to_scale"] / n if n else 0.0
    errs = [p["rel_error_max"] for p in parts if p.get("rel_error_max") is not None]
    out["rel_error_max"] = max(errs) if errs else None
    out["claims_hold"] = (out["claimed_wrong"] == 0 and out["direction_claimed_wrong"] == 0
                          and out["positions_right"] == out["positions_assigned"])
    return out


def _party_truth(pa: PartyAudit, mono: TruthColumns | None, dense: TruthColumns | None,
                 with_assumed: bool) -> dict[str, Any]:
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
        mono, dense = _targets(pa, truth)
        for o in pa.outcomes + pa.assumed:
            _evaluate_outcome(o, mono, dense)
        pa.truth = _party_truth(pa, mono, dense, with_assumed=False)
        if pa.assumed:
            pa.assumed_truth = _party_truth(pa, mono, dense, with_assumed=True)
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
