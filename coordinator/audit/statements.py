"""Leakage statements that follow from the attacks that ran, in words a data owner understands.

Each party's ``leakage`` entry in a report (docs/reports.md) is built here from its
:class:`~securelp.coordinator.audit.session.PartyAudit`: what the coordinator saw, what the
attacks on this run's transcript recovered (``coordinator_can_reconstruct``), and what they did
not (``not_recovered_by_our_attacks``, always worded "our attacks did not recover ...", and only
for attacks that ran; an attack that was skipped is named with its reason and nothing is
claimed for it). With the truth (simulations), the ``truth`` entry says how many of those claims
were right: ``claims_hold`` is false as soon as one claimed column or position is wrong.
"""

from __future__ import annotations

from typing import Any

from securelp.coordinator.audit.results import AttackOutcome, AttackStatus
from securelp.coordinator.audit.session import PartyAudit, SessionAudit
from securelp.party.session import SCALE_SPREAD

#: attack names in words
ATTACK_WORDS = {
    "monomial_normalization": "normalization (an entry of size 1, round-number scales in the public range)",
    "monomial_positions": "matching to the revealed solution",
    "known_mask_rows": "the mask rows sent as bound rows (Bednarz et al.)",
    "dense_row_support": "zero rows of the masked product",
    "dense_column_space": "the column space of the masked product",
    "dense_row_gram": "the row Gram estimate M M'/k",
    "dense_mask_structure": "a check for a mask that does not mix columns",
    "dense_sparse_recovery": "sparse recovery by random pivot rows",
    "dense_l1_recovery": "sparse recovery by l1 minimization",
    "dense_costs": "costs from the masked costs, then normalization and the revealed solution",
    "known_rows": "equations from rows of A assumed known",
    "known_rows_monomial": "rows of A assumed known, against the scaled columns",
    "solution_row_activity": "the row activity at the solution",
    "solution_revealed": "the revealed solution",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _ran(pa: PartyAudit, name: str) -> AttackOutcome | None:
    o = pa.outcome(name)
    return o if o is not None and o.status is AttackStatus.RAN else None


def _skipped_lines(pa: PartyAudit) -> list[str]:
    return [f"our attack '{ATTACK_WORDS.get(o.attack, o.attack)}' did not run ({o.reason}); nothing is claimed "
            "for it" for o in pa.outcomes if o.status is AttackStatus.SKIPPED]


def _monomial_lines(pa: PartyAudit, can: list[str], not_rec: list[str]) -> None:
    v = pa.view
    nb = v.n_monomial
    if not nb:
        return
    if v.n_bounded == v.n_cols:
        can.append(f"all {v.n_cols} of your columns have a bound (such as x >= 0), so no dense random mask protects "
                   "any of them: the coordinator receives each column multiplied by a secret positive factor, in a "
                   "shuffled order")
    else:
        can.append(f"your {_plural(nb, 'bounded column')} are not under the dense mask: the coordinator receives "
                   "each multiplied by a secret positive factor, in a shuffled order")
    can.append(f"for each of these {nb} columns: which constraints it touches, its signs and the ratios between its "
               "entries, its cost and its bounds, exactly (only one positive factor per column is hidden)")
    norm = _ran(pa, "monomial_normalization")
    if norm is None:
        return
    amb = int(norm.figures.get("ambiguous", 0))
    if norm.claimed:
        can.append(f"the exact values (entries and cost) of {norm.claimed} of these {nb} columns: our normalization "
                   "attack took the factor that makes the column's numbers round (an entry of size 1, few digits) "
                   f"within the public range [1/{SCALE_SPREAD:g}, {SCALE_SPREAD:g}]"
                   + (", checked against your revealed solution" if v.x is not None else ""))
    if amb:
        can.append(f"for {amb} more of these columns the values up to a choice among a few round factors (such as "
                   "10 or 2)")
    rest = nb - norm.claimed - amb
    if rest > 0:
        not_rec.append(f"our attacks ({ATTACK_WORDS['monomial_normalization']}"
                       + (f", {ATTACK_WORDS['monomial_positions']}" if v.x is not None else "")
                       + f") did not recover the exact values of {rest} of your {nb} bounded columns")
    pos = _ran(pa, "monomial_positions")
    if pos is not None:
        if pos.positions:
            can.append(f"the original position of {pos.positions} of these columns (matching d_t y_t to the values "
                       "of your revealed solution)")
        if nb - pos.positions > 0:
            not_rec.append(f"our attacks did not place {nb - pos.positions} of your {nb} bounded columns at their "
                           "original position")
    elif nb:
        not_rec.append(f"our attacks did not place any of your {nb} bounded columns at its original position "
                       "(no revealed solution to match)")


def _aggregated_lines(pa: PartyAudit, audit: SessionAudit, can: list[str], not_rec: list[str]) -> None:
    """A party whose dense product reached the coordinator only as a share of the sum (secure aggregation)."""
    v = pa.view
    nd = v.n_dense
    joint = [o for o in audit.shared if pa.party_id in o.parties]
    others = sorted({p for o in joint for p in o.parties} - {pa.party_id})
    everyone = len(others) + 1
    total = max((o.columns for o in joint), default=nd)
    can.append(f"your {_plural(nd, 'column')} under the dense mask reached the coordinator only inside the sum of the "
               f"masked products of {everyone} parties (secure aggregation, with {', '.join(others)}): what the "
               f"attacks found in that sum ({total} columns) is about all of you together; only what a line below says "
               "is yours is attributed to you")
    ran = {o.attack: o for o in joint if o.ran}
    if "dense_row_support" in ran:
        sup = ran["dense_row_support"]
        can.append(f"which of the {sup.figures['rows']} constraints the {everyone} parties' dense columns touch together "
                   f"({sup.figures['support_rows']} rows)")
    if "dense_column_space" in ran:
        cs = ran["dense_column_space"]
        can.append(f"the subspace spanned by all {total} of those columns together (dimension {cs.figures['rank']} of "
                   f"{cs.figures['rows']}), not the one spanned by yours")
    if "dense_row_gram" in ran:
        can.append("an estimate of the sum over the aggregating parties of the inner products between their rows "
                   "(sum_j A_j A_j'), not yours alone")
    found = max((o.up_to_scale for o in joint if o.ran and o.attack in ("dense_mask_structure", "dense_sparse_recovery",
                                                                        "dense_l1_recovery")), default=0)
    if found:
        can.append(f"{found} of the {total} columns of the sum up to a factor each (by themselves they do not say "
                   "whose they are)")
    mine = [o for o in pa.outcomes if o.ran and o.figures.get("from_sum") and o.recovered is not None]
    placed = max((o.positions for o in mine), default=0)
    exact = max((o.claimed for o in mine), default=0)
    if placed:
        how = ("your mask rows" if any(o.attack == "known_mask_rows" for o in mine)
               else "matching them to your revealed solution x_j")
        can.append(f"{placed} of your {nd} dense-masked columns told apart from the others' and placed at their "
                   f"original position ({how})" + (f", {exact} of them with their exact values and costs" if exact else ""))
    can.append("a power-of-two bound on the magnitude of your dense product and of your masked costs (reported for "
               "the fixed-point encoding)")
    full = next((c for c in audit.collusion if c.honest == (pa.party_id,)), None)
    colluders = ("the other aggregating party" if len(others) == 1
                 else f"all {len(others)} other aggregating parties")
    if full is not None and not full.skipped:
        gained = full.added
        can.append(f"with {colluders} colluding: your own dense product exactly (the sum "
                   "minus theirs), as without secure aggregation"
                   + (f"; on it our attacks recovered {gained} of your columns exactly" if gained else ""))
    else:
        can.append(f"with {colluders} colluding: your own dense product exactly (the sum "
                   "minus theirs), as without secure aggregation (not measured in this audit: the colluders' own "
                   "products are not in the transcript)")
    not_rec.append("your own dense product: the coordinator received only a share of the sum, uniformly distributed "
                   "given the sum (the attacks above ran on the sum)")
    if nd - placed > 0:
        not_rec.append(f"our attacks did not tell {nd - placed} of your {nd} dense-masked columns apart from the other "
                       "aggregating parties' columns")


def _dense_lines(pa: PartyAudit, audit: SessionAudit, can: list[str], not_rec: list[str]) -> None:
    v = pa.view
    nd = v.n_dense
    if not nd:
        return
    kmr = _ran(pa, "known_mask_rows")
    if kmr is not None and kmr.claimed == nd:
        can.append(f"your whole block (all {nd} columns and their costs) exactly and in its original order: in rows "
                   "mode every bound travels as a row of your mask, which gives the mask and then the block (Bednarz "
                   "et al.)")
        return
    if kmr is not None:
        can.append(f"the mask rows and the bounds of your {_plural(int(kmr.figures.get('mask_rows', 0)), 'bounded column')} "
                   "(sent as constraint rows in rows mode)")
    if v.aggregated:
        _aggregated_lines(pa, audit, can, not_rec)
        return
    can.append(f"your {_plural(nd, 'column')} under the dense mask are mixed by a secret random matrix; still:")
    sup = _ran(pa, "dense_row_support")
    if sup is not None:
        can.append(f"which of the {sup.figures['rows']} constraints they touch ({sup.figures['support_rows']} rows), "
                   "exactly")
    cs = _ran(pa, "dense_column_space")
    if cs is not None:
        r, m = cs.figures["rank"], cs.figures["rows"]
        extra = (" - here all of it, which says nothing more" if cs.figures["whole_space"]
                 else ", the space in which the sparse-recovery attacks search")
        can.append(f"the subspace their columns span (dimension {r} of {m}){extra}")
    gram = _ran(pa, "dense_row_gram")
    if gram is not None and gram.figures.get("expected_rel_error") is not None:
        can.append("an estimate of the inner products between the rows of these columns (A A'), with a relative "
                   f"error of about {gram.figures['expected_rel_error']:.2g}")
    structure = _ran(pa, "dense_mask_structure")
    search_names = ("dense_mask_structure", "dense_sparse_recovery", "dense_l1_recovery")
    found = max((o.up_to_scale for o in pa.outcomes if o.attack in search_names and o.ran), default=0)
    searched = [o for o in pa.outcomes if o.attack in search_names and o.ran]
    if structure is not None and structure.up_to_scale:
        can.append(f"all {nd} of these columns up to a factor each: the mask does not mix them (each column of the "
                   "masked product is one of your columns, scaled)")
    elif found:
        can.append(f"{found} of these {nd} columns up to a factor each (the sparsest vectors of that subspace, each "
                   "the only one with its zero pattern)")
    costs = structure if structure is not None and structure.up_to_scale else _ran(pa, "dense_costs")
    if costs is not None and costs.claimed:
        can.append(f"the exact values (entries and cost) of {costs.claimed} of them"
                   + (f", {costs.positions} at their original position" if costs.positions else ""))
    if searched and nd - found > 0:
        candidates = max((int(o.figures.get("found", 0)) for o in searched), default=0)
        why = (f" (the sparse search proposed {candidates} sparse vectors, but they failed the checks that they are "
               "your columns: unique with their zero pattern, and independent rows of the implied mask)"
               if candidates > found else "")
        not_rec.append(f"our attacks ({', '.join(ATTACK_WORDS[o.attack] for o in searched)}) did not recover "
                       f"{nd - found} of your {nd} dense-masked columns even up to a factor{why}")
    exact = costs.claimed if costs is not None else 0
    tried = [o for o in pa.outcomes if o.attack in ("dense_mask_structure", "dense_sparse_recovery",
                                                    "dense_l1_recovery", "dense_costs")
             and o.status is not AttackStatus.SKIPPED]
    if nd - exact > 0 and tried:
        reasons = [o.reason for o in tried if o.status is AttackStatus.NOT_APPLICABLE and o.reason]
        not_rec.append(f"our attacks did not recover the exact values of {nd - exact} of your {nd} dense-masked "
                       "columns" + (f" ({reasons[0]})" if reasons else ""))


def describe(pa: PartyAudit, audit: SessionAudit) -> tuple[list[str], list[str]]:
    """(what the coordinator can reconstruct, what our attacks did not recover) for one party."""
    v = pa.view
    can = [f"n_j = {v.n_cols} columns ({v.n_free} free, {v.n_bounded} bounded)"]
    not_rec: list[str] = []
    _monomial_lines(pa, can, not_rec)
    _dense_lines(pa, audit, can, not_rec)
    if _ran(pa, "solution_row_activity") is not None:
        can.append("how much of each constraint your columns use at the optimum (A_j x_j), from u and y")
    if _ran(pa, "solution_revealed") is not None:
        can.append("x_j, your part of the solution (revealed by agreement)")
    elif v.status:
        not_rec.append("x_j: you kept it (the coordinator holds only what the lines above say)")
    if audit.collusion and len(audit.parties) > 1:
        added = max((c.added for c in audit.collusion if pa.party_id in c.honest), default=0)
        if added == 0:
            why = ("what colluders subtract from the sum leaves your dense product, above" if v.aggregated
                   else "their masks are independent of yours")
            not_rec.append(f"our attacks recovered nothing more of your columns exactly when the coordinator colluded "
                           f"with up to {len(audit.parties) - 1} other parties ({why}; measured for the worst "
                           "coalition of each size)")
        else:
            can.append(f"with colluding parties, {added} more columns (worst coalition)")
    not_rec.extend(_skipped_lines(pa))
    return can, not_rec


def leakage_entry(pa: PartyAudit, audit: SessionAudit) -> dict[str, Any]:
    """The ``parties[].leakage`` entry of a report (docs/reports.md)."""
    v = pa.view
    can, not_rec = describe(pa, audit)
    entry: dict[str, Any] = {
        "mode": v.mode or audit.mode, "dense_masked_columns": v.n_dense, "monomial_columns": v.n_monomial,
        "bound_rows": int(v.bound_rows.shape[0]), "revealed_solution": v.x is not None,
        "every_column_bounded": bool(v.n_cols and v.n_bounded == v.n_cols and v.mode == "monomial"),
        "coordinator_can_reconstruct": can, "not_recovered_by_our_attacks": not_rec,
        "summary": dict(pa.summary), "attacks": [o.to_json() for o in pa.outcomes],
    }
    if pa.assumed:
        entry["with_known_rows"] = {"rows": audit.known_rows, "count": audit.known_rows_count,
                                    "attacks": [o.to_json() for o in pa.assumed]}
        if pa.assumed_truth is not None:
            entry["with_known_rows"]["truth"] = dict(pa.assumed_truth)
    if pa.truth is not None:
        entry["truth"] = dict(pa.truth)
    return entry


def audit_entry(audit: SessionAudit) -> dict[str, Any]:
    """The session-level ``audit`` entry of a report: budget, time, skipped attacks, collusion."""
    out: dict[str, Any] = {"budget_s": audit.budget_s, "seconds": round(audit.seconds, 4),
                           "evaluation_seconds": round(audit.evaluation_seconds, 4) if audit.truth_source else None,
                           "known_rows": audit.known_rows, "known_rows_count": audit.known_rows_count,
                           "skipped": audit.skipped,
                           "collusion": [c.to_json() for c in audit.collusion],
                           "shared_products": [o.to_json() for o in audit.shared],
                           "truth_source": audit.truth_source or None, "claims_hold": audit.claims_hold}
    return out


def text_lines(pa: PartyAudit, audit: SessionAudit) -> list[str]:
    """The readable report's lines for one party."""
    can, not_rec = describe(pa, audit)
    lines = [f"{pa.party_id}: the coordinator can reconstruct"]
    lines += [f"  - {c}" for c in can[1:]] or ["  - nothing beyond the sizes"]
    if not_rec:
        lines.append(f"{pa.party_id}: not recovered by our attacks")
        lines += [f"  - {c}" for c in not_rec]
    if pa.truth is not None:
        t = pa.truth
        lines.append(f"{pa.party_id}: checked against the real data: {t['recovered_exact']} of {t['columns']} "
                     f"columns right to 1e-6, {t['claimed_wrong']} wrong claims, {t['positions_right']} of "
                     f"{t['positions_assigned']} positions right"
                     + (f"; best guesses not claimed but right: {t['unclaimed_right']}" if t["unclaimed_right"] else "")
                     + ("" if t["claims_hold"] else "  -- THE STATEMENT ABOVE IS WRONG"))
    if pa.assumed_truth is not None and audit.known_rows_count:
        t = pa.assumed_truth
        lines.append(f"{pa.party_id}: if the coordinator also knew {_plural(audit.known_rows_count, 'row')} of A "
                     f"({audit.known_rows}): {t['recovered_exact']} of {t['columns']} columns right")
    return lines
