"""Run reports of the secure LP: the JSON document (stable keys, docs/reports.md) and
the readable text printed by ``securelp solve``/``demo``/``coordinator``.

Reports carry sizes, statuses, optimal values, bytes and times; never matrices, masks,
or a party's solution (only per-party summaries of x_j when it was revealed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from securelp.coordinator.leakage import leakage_statement
from securelp.coordinator.protocol import SessionOutcome

REPORT_VERSION = 1


def build_report(outcome: SessionOutcome, audits: Mapping[str, dict[str, Any]] | None = None,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON report of one session (keys documented in docs/reports.md)."""
    parties = []
    for p in outcome.parties:
        leak = leakage_statement(outcome.bounds_mode, p)
        if audits and p.party_id in audits:
            leak["audit"] = audits[p.party_id]
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
    }
    if extra:
        report.update(extra)
    return report


def _fmt(value: float | None, spec: str = ".10g") -> str:
    # no value, or nan (an infeasible or unbounded LP has no objective): "n/a", as in the JSON's null
    return "n/a" if value is None or math.isnan(value) else format(value, spec)


def format_report(outcome: SessionOutcome, title: str = "secure LP session") -> str:
    """A readable summary (no private data)."""
    lines = [(f"{title}: {outcome.n_rows} rows x {outcome.n_cols} columns, {len(outcome.parties)} parties, "
              f"transport {outcome.transport}, bounds mode {outcome.bounds_mode}, k = {outcome.k}")]
    if outcome.reproducible:
        lines.append("  WARNING: reproducible-simulation mode: masks were drawn from a seed, not fresh entropy")
    lines.append(f"  status             {outcome.status.value} ({outcome.backend_status})")
    lines.append(f"  objective (secure) {_fmt(outcome.objective, '.15g')}")
    if outcome.central_objective is not None or outcome.central_status is not None:
        lines.append(f"  objective (central){' '}{_fmt(outcome.central_objective, '.15g')}")
        lines.append(f"  relative difference {_fmt(outcome.objective_rel_diff, '.3e')}")
    if outcome.feasibility_violation is not None:
        lines.append(f"  max bound violation of decoded x in the original LP: {outcome.feasibility_violation:.3e}")
    lines.append("  parties:")
    for p in outcome.parties:
        summary = "kept by the party"
        if p.x_summary is not None:
            s = p.x_summary
            summary = (f"x_j in [{s['min']:.4g}, {s['max']:.4g}], |x_j| = {s['l2_norm']:.6g}, "
                       f"{int(s['nonzeros'])} nonzero")
        lines.append(f"    {p.party_id:<12} n_j={p.n_cols:<6} sent {p.bytes_sent:>12,} B  received "
                     f"{p.bytes_received:>10,} B  decoded: {summary}")
    t = outcome.timings_s
    lines.append("  times (s): " + ", ".join(f"{k} {v:.4f}" for k, v in t.items())
                 + (f"; central solve {outcome.central_time_s:.4f}" if outcome.central_time_s is not None else ""))
    lines.append("  leakage (what the coordinator can reconstruct):")
    seen: set[str] = set()
    for p in outcome.parties:
        leak = leakage_statement(outcome.bounds_mode, p)
        for item in leak["coordinator_can_reconstruct"][1:]:
            key = f"{p.party_id}: {item}"
            if key not in seen:
                seen.add(key)
                lines.append(f"    - {key}")
        for item in leak["coordinator_cannot_reconstruct"]:
            lines.append(f"    - {p.party_id}: NOT {item}")
    return "\n".join(lines)
