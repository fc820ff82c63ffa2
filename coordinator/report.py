"""Run reports of the secure LP: the JSON document (stable keys, docs/reports.md) and
the readable text printed by ``securelp solve``/``demo``/``coordinator``.

Reports carry sizes, statuses, optimal values, bytes and times; never matrices, masks,
or a party's solution (only per-party summaries of x_j when it was revealed). Each party's
``leakage`` entry comes from the attacks that ran on this session's transcript
(:mod:`securelp.coordinator.audit`); in simulations it carries their evaluation against the
truth beside them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from securelp.coordinator.audit import SessionAudit, audit_entry, leakage_entry, text_lines
from securelp.coordinator.protocol import PartyReport, SessionOutcome

#: the version of the report's keys (docs/reports.md)
REPORT_VERSION = 2


def _unaudited(mode: str, p: PartyReport) -> dict[str, Any]:
    """The leakage entry of a party when no attack ran (nothing is claimed either way)."""
    return {"mode": mode, "dense_masked_columns": p.n_dense_masked, "monomial_columns": p.n_monomial,
            "bound_rows": p.n_bound_rows, "revealed_solution": p.revealed,
            "every_column_bounded": bool(p.n_cols and p.n_bounded == p.n_cols and mode == "monomial"),
            "coordinator_can_reconstruct": [f"n_j = {p.n_cols} columns ({p.n_free} free, {p.n_bounded} bounded)"],
            "not_recovered_by_our_attacks": [("no attack ran on this session's transcript; nothing is claimed "
                                              "about what the coordinator can or cannot reconstruct")],
            "summary": None, "attacks": []}


def build_report(outcome: SessionOutcome, audit: SessionAudit | None = None,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON report of one session (keys documented in docs/reports.md)."""
    parties = []
    for p in outcome.parties:
        if audit is not None and p.party_id in audit.parties:
            leak = leakage_entry(audit.parties[p.party_id], audit)
        else:
            leak = _unaudited(outcome.bounds_mode, p)
        parties.append({
            "id": p.party_id,
            "n_cols": p.n_cols,
            "n_free": p.n_free,
            "n_bounded": p.n_bounded,
            "bytes_sent": p.bytes_sent,
            "bytes_received": p.bytes_received,
            "mask_seconds": p.mask_seconds,
            "decode_seconds": p.decode_seconds,
            "revealed": p.revealed,
            "policy": p.policy.as_dict() if p.policy is not None else None,
            "aggregated": p.aggregated,
            "saved_as": p.saved_as or None,
            "leakage": leak,
        })
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "session_id": outcome.session_id,
        "status": outcome.status.value,
        "backend_status": outcome.backend_status,
        "objective": outcome.objective,
        "central_objective": outcome.central_objective,
        "objective_rel_diff": outcome.objective_rel_diff,
        "feasibility_violation": outcome.feasibility_violation,
        "k": outcome.k,
        "m": outcome.n_rows,
        "n": outcome.n_cols,
        "transport": outcome.transport,
        "bounds_mode": outcome.bounds_mode,
        "reproducible": outcome.reproducible,
        "iterations": outcome.iterations,
        "parties": parties,
        "timings_s": dict(outcome.timings_s),
        "central_time_s": outcome.central_time_s,
        "audit": audit_entry(audit) if audit is not None else None,
        "secure_aggregation": outcome.aggregation.as_dict() if outcome.aggregation is not None else None,
    }
    if extra:
        report.update(extra)
    return report


def _fmt(value: float | None, spec: str = ".10g") -> str:
    # no value, or nan (an infeasible or unbounded LP has no objective): "n/a", as in the JSON's null
    return "n/a" if value is None or math.isnan(value) else format(value, spec)


def format_report(outcome: SessionOutcome, title: str = "secure LP session", audit: SessionAudit | None = None) -> str:
    """A readable summary (no private data; in simulations, the attacks' evaluation against the truth)."""
    lines = [(f"{title}: {outcome.n_rows} rows x {outcome.n_cols} columns, {len(outcome.parties)} parties, "
              f"transport {outcome.transport}, bounds mode {outcome.bounds_mode}, k = {outcome.k}")]
    if outcome.reproducible:
        lines.append("  WARNING: reproducible-simulation mode: masks were drawn from a seed, not fresh entropy. Anyone "
                     "who knows or guesses the seed recomputes every seeded party's mask and has all its columns "
                     "exactly and in place; --seed S gives each party the seed 'S/<party id>', so the parties' masks "
                     "are not independent. For simulations only, never for real data.")
    agg = outcome.aggregation
    if agg is not None:
        keys = ("bound to the parties' certificates" if agg.keys_bound
                else "NOT bound to certificates (a coordinator that swaps keys could unmask)")
        lines.append(f"  secure aggregation over {len(agg.participants)} parties in Z_2^64: {agg.fraction_bits_a} and "
                     f"{agg.fraction_bits_c} fraction bits for AB' and Bc, encoding error at most "
                     f"{agg.encoding_error_a:.2e} and {agg.encoding_error_c:.2e} per entry ({agg.relative_error_a:.1e} "
                     f"of the sums' bounds); keys {keys}")
    lines.append(f"  status             {outcome.status.value} ({outcome.backend_status})")
    lines.append(f"  objective (secure) {_fmt(outcome.objective, '.15g')}")
    if outcome.central_objective is not None or outcome.central_status is not None:
        lines.append(f"  objective (central){' '}{_fmt(outcome.central_objective, '.15g')}")
        lines.append(f"  relative difference {_fmt(outcome.objective_rel_diff, '.3e')}")
    if outcome.feasibility_violation is not None:
        lines.append(f"  max bound violation of decoded x in the original LP: {outcome.feasibility_violation:.3e}")
    lines.append("  parties:")
    for p in outcome.parties:
        summary = f"kept by the party (in its own {p.saved_as} file)" if p.saved_as else "kept by the party"
        if p.x_summary is not None:
            s = p.x_summary
            summary = (f"x_j in [{s['min']:.4g}, {s['max']:.4g}], |x_j| = {s['l2_norm']:.6g}, "
                       f"{int(s['nonzeros'])} nonzero")
        lines.append(f"    {p.party_id:<12} n_j={p.n_cols:<6} sent {p.bytes_sent:>12,} B  received "
                     f"{p.bytes_received:>10,} B  decoded: {summary}")
        if p.policy is not None:
            lines.append(f"    {'':<12} policy: {p.policy.describe()}")
    t = outcome.timings_s
    lines.append("  times (s): " + ", ".join(f"{k} {v:.4f}" for k, v in t.items())
                 + (f"; central solve {outcome.central_time_s:.4f}" if outcome.central_time_s is not None else ""))
    lines.append("  leakage (from the attacks that ran on this session's transcript):")
    if audit is None:
        lines.append("    no attack ran; nothing is claimed about what the coordinator can or cannot reconstruct")
        return "\n".join(lines)
    for p in outcome.parties:
        pa = audit.parties.get(p.party_id)
        if pa is not None:
            lines.extend(f"    {line}" for line in text_lines(pa, audit))
    skipped = audit.skipped
    if skipped:
        lines.append(f"    {len(skipped)} attack(s) skipped: " + "; ".join(f"{s['party']} {s['attack']} ({s['reason']})"
                                                                     for s in skipped))
    lines.append(f"    audit: attacks {audit.seconds:.2f} s" + (f" of a {audit.budget_s:g} s budget" if audit.budget_s else "")
                 + (f"; evaluation against the data {audit.evaluation_seconds:.2f} s" if audit.truth_source else ""))
    return "\n".join(lines)
