"""``securelp audit TRANSCRIPT [--truth PATH] [--json R]``: run the attacks on a session transcript.

``securelp audit --protocol census|ldp|lp ...`` is the end-to-end empirical privacy audit instead
(:mod:`securelp.coordinator.dpaudit.command`).

A thin layer over :mod:`securelp.coordinator.audit`: reads the transcript that ``--transcript``
wrote (``securelp solve``, ``demo`` or ``coordinator``), runs every attack on it within
``--budget`` seconds, and prints per party what the coordinator of that session can reconstruct
and what our attacks did not recover. ``--truth`` (a directory of ``securelp split`` block files,
or the original MPS file, split by the transcript's roster as ``solve`` splits) adds how much of
it was right; ``--known-rows`` evaluates rows of A assumed known (values from ``--truth``).
Exit code 9 when ``--truth`` shows a claim of the audit to be wrong.

Also home of the ``--transcript`` and ``--audit-budget`` options of the session commands.
"""

from __future__ import annotations

import argparse
import io
import logging
from typing import Any

import numpy as np

from securelp.coordinator.commands.common import add_output_arguments, positive_float, summary_stream
from securelp.solvers.errors import ConfigError, ExitCode, InputError

log = logging.getLogger(__name__)


def add_transcript_arguments(p: argparse.ArgumentParser) -> None:
    """``--transcript FILE`` and ``--audit-budget S`` of ``solve``, ``demo`` and ``coordinator``."""
    from securelp.coordinator.audit import DEFAULT_SESSION_BUDGET_S

    p.add_argument("--transcript", metavar="FILE", default=None,
                   help="write what the coordinator received and sent, per party, to FILE (binary; read it with "
                        "`securelp audit FILE`)")
    p.add_argument("--audit-budget", type=positive_float, default=DEFAULT_SESSION_BUDGET_S, metavar="S",
                   help="seconds the attacks on the session's transcript may take at its end "
                        f"(default {DEFAULT_SESSION_BUDGET_S:g}); an attack that does not fit is reported as skipped")


def check_transcript_path(path: str | None) -> None:
    """Refuse, before the session, a ``--transcript`` that cannot be written."""
    from securelp.coordinator.reporting import check_writable

    if path is not None and str(path) == "-":
        raise InputError("--transcript needs a file name: the transcript is binary and does not go to standard output")
    check_writable(path, "--transcript")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="run the leakage attacks on a session transcript",
                       description="Run every attack on what the coordinator of a session saw (a file written by "
                                   "--transcript) and say, per party, what it can reconstruct; with --truth, how much "
                                   "of that is right. With --protocol instead of TRANSCRIPT: the end-to-end empirical "
                                   "privacy audit of a protocol (docs/howto/privacy-audit.md).")
    p.add_argument("transcript", metavar="TRANSCRIPT", nargs="?", default=None)
    from securelp.coordinator.dpaudit.command import add_protocol_arguments

    add_protocol_arguments(p)
    p.add_argument("--truth", metavar="PATH", default=None,
                   help="the real data: a directory of party block files (securelp split) or the original MPS file")
    p.add_argument("--known-rows", metavar="SPEC", default=None,
                   help="rows of A assumed known to the coordinator, with their values from --truth: 'singletons' "
                        "(rows with one nonzero in the whole LP), 'none', or row indices such as 0,5,12")
    p.add_argument("--budget", type=positive_float, default=300.0, metavar="S",
                   help="seconds all attacks together may take (default 300)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the attacks' random pivot orders, for reproducible audits (default: fresh)")
    p.add_argument("--recovered", metavar="FILE.npz", default=None,
                   help="also write what each attack recovered (columns, costs, positions, subspaces) to FILE.npz; "
                        "it holds the parties' reconstructed data (written mode 0600)")
    add_output_arguments(p)
    p.set_defaults(func=run)


def _recovered_arrays(audit: Any) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for pid, pa in audit.parties.items():
        for o in pa.outcomes + pa.assumed:
            pre = f"{pid}/{o.attack}/"
            if o.recovered is not None and o.recovered.count:
                A = o.recovered.A.tocsc()
                arrays.update({pre + "shape": np.array(A.shape), pre + "data": A.data, pre + "indices": A.indices,
                               pre + "indptr": A.indptr, pre + "c": o.recovered.c,
                               pre + "claimed": o.recovered.scale_known, pre + "position": o.recovered.position})
            if "basis" in o.artifacts:
                arrays[pre + "basis"] = o.artifacts["basis"]
    return arrays


def run(args: argparse.Namespace) -> int:
    if args.protocol is not None or args.transcript is None:
        from securelp.coordinator.dpaudit.command import run_protocol_audit

        return run_protocol_audit(args)
    from securelp.coordinator.dpaudit.command import refuse_protocol_options

    refuse_protocol_options(args)
    from securelp.coordinator.audit import (
        audit_entry,
        audit_transcript,
        known_rows_from_truth,
        leakage_entry,
        load_truth,
        text_lines,
    )
    from securelp.coordinator.report import REPORT_VERSION
    from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
    from securelp.coordinator.transcript import read_transcript
    from securelp.solvers.files import write_atomically

    check_writable(args.json, "--json")
    check_writable(args.recovered, "--recovered")
    check_distinct([("--json", args.json), ("--recovered", args.recovered)],
                   [("TRANSCRIPT", args.transcript), ("--truth", args.truth)])
    if args.known_rows is not None and args.truth is None:
        raise ConfigError("--known-rows takes the rows' values from --truth; give --truth too")
    transcript = read_transcript(args.transcript)
    parties = transcript.party_ids
    views_cols = {}
    for pid in parties:
        hello = [r for r in transcript.of(pid, "securelp.v1.HelloReply")]
        views_cols[pid] = int(hello[-1].message().n_cols) if hello else 0
    truth = load_truth(args.truth, parties, views_cols) if args.truth is not None else None
    known = known_rows_from_truth(truth, parties, args.known_rows) if (truth is not None and args.known_rows) else None
    audit = audit_transcript(transcript, truth=truth, known_rows=known, budget_s=args.budget, seed=args.seed)

    out = summary_stream(args) or io.StringIO()  # --quiet: the lines go nowhere
    h = transcript.header
    print(f"securelp audit {args.transcript}: session {h.session_id}, {h.public.n_rows} rows, {len(parties)} parties, "
          f"mode {audit.mode or 'none'}, transport {h.transport}, {len(transcript.records)} messages "
          f"({transcript.n_bytes:,} B)", file=out)
    for pid in parties:
        for line in text_lines(audit.parties[pid], audit):
            print(f"  {line}", file=out)
    for c in audit.collusion:
        print(f"  collusion with {c.size} part{'y' if c.size == 1 else 'ies'} (worst: {', '.join(c.coalition)}): "
              f"{c.claimed_with} of the honest parties' {c.honest_columns} columns recovered exactly "
              f"({c.added:+d} against no collusion)", file=out)
    for s in audit.skipped:
        print(f"  skipped: {s['party']} {s['attack']}: {s['reason']}", file=out)
    print(f"  attacks took {audit.seconds:.2f} s of a {args.budget:g} s budget", file=out)
    if args.recovered:
        arrays = _recovered_arrays(audit)

        def save(handle: io.BufferedWriter) -> None:
            np.savez(handle, **arrays)

        write_atomically(args.recovered, save, what="recovered data ", mode=0o600)
    if args.json:
        report = {"report_version": REPORT_VERSION, "kind": "audit", "transcript": str(args.transcript),
                  "session_id": h.session_id, "mode": audit.mode, "transport": h.transport, "m": h.public.n_rows,
                  "parties": [{"id": pid, "n_cols": audit.parties[pid].view.n_cols,
                               "n_free": audit.parties[pid].view.n_free,
                               "n_bounded": audit.parties[pid].view.n_bounded,
                               "leakage": leakage_entry(audit.parties[pid], audit)} for pid in parties],
                  "audit": audit_entry(audit)}
        write_json_report(args.json, report)
    if audit.claims_hold is False:
        print("securelp audit: the truth shows at least one claim of this audit to be wrong (see 'truth' above)",
              file=out)
        return int(ExitCode.VERIFICATION)
    return 0
