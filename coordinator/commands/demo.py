"""``securelp demo``: Mangasarian's Example 1 or 2 end to end.

By default it starts one real ``securelp party`` process per data owner on localhost,
with a fresh CA and certificates in a temporary directory, runs the protocol over gRPC
with mutual TLS, prints the report, and stops every process it started (on success,
error and Ctrl-C alike).
"""

from __future__ import annotations

import argparse
import time

from securelp.coordinator.commands.audit import add_transcript_arguments, check_transcript_path
from securelp.coordinator.commands.common import (
    STATUS_EXIT,
    add_keepalive_argument,
    add_output_arguments,
    add_secure_aggregation_argument,
    non_negative_int,
    not_private_seed_help,
    positive_float,
    print_summary,
)
from securelp.coordinator.examples import EXAMPLES, mangasarian_example
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.report import build_report, format_report
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.coordinator.simulation import audit_simulation, owners_consent, simulate
from securelp.coordinator.transcript import run_recorded
from securelp.solvers.lp.partition import split_columns


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run Mangasarian's example end to end over gRPC with mTLS",
                       description="Example 1 (m=100, n=1000, split 500/300/200) or Example 2 (m=1000, n=100, "
                                   "split 50/30/20) of Mangasarian's PPLP paper with three party processes.")
    p.add_argument("--example", type=int, choices=sorted(EXAMPLES), default=1)
    p.add_argument("--transport", choices=["grpc", "inprocess"], default="grpc",
                   help="grpc: real party processes with mTLS (default); inprocess: simulated parties")
    p.add_argument("--bounds", choices=["monomial", "rows"], default="monomial")
    p.add_argument("--reveal", action=argparse.BooleanOptionalAction, default=True,
                   help="the owners reveal their decoded x_j (default; the report checks the assembled solution); "
                        "--no-reveal: they keep it")
    add_secure_aggregation_argument(p)
    p.add_argument("--data-seed", type=non_negative_int, default=0, help="seed of the (public, synthetic) example data")
    p.add_argument("--seed", default=None,
                   help=not_private_seed_help("every owner's mask", "the masks and so unmask the data"))
    p.add_argument("--deadline", type=positive_float, default=120.0, metavar="S")
    add_keepalive_argument(p, grpc_only=True)
    add_output_arguments(p)
    add_transcript_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)])
    lp, split, known_value = mangasarian_example(args.example, seed=args.data_seed)
    public, blocks = split_columns(lp, split, ids=[f"owner{i + 1}" for i in range(len(split))])
    config = SessionConfig(bounds_mode=args.bounds, reveal=args.reveal, deadline_s=args.deadline,
                           secure_aggregation=args.secure_aggregation)
    policy = owners_consent(config)  # the demo plays every owner: they agree to what it asks
    start = time.perf_counter()
    if args.transport == "inprocess":
        outcome, audit = simulate(public, blocks, config, transport="inprocess", central=lp, seed=args.seed,
                                  transcript_path=args.transcript, audit_budget_s=args.audit_budget, policy=policy,
                                  keepalive_s=args.keepalive)
        startup = 0.0
    else:
        from securelp.coordinator.exit_cleanups import private_tempdir
        from securelp.coordinator.launcher import LocalParties  # lazy: processes only when asked for

        # keys and the owners' blocks: removed however the run ends (SIGTERM and a forced exit too)
        with private_tempdir("securelp-demo-") as tmp, \
                LocalParties(blocks, tmp, policy=policy, seed=args.seed, keepalive_s=args.keepalive) as cluster:
            startup = time.perf_counter() - start
            links = cluster.links(deadline_s=args.deadline)
            outcome, transcript = run_recorded(public, links, config, central=lp, path=args.transcript,
                                               run=run_secure_lp)
        audit = audit_simulation(transcript, blocks, budget_s=args.audit_budget)
    lines = [format_report(outcome, title=f"securelp demo: Mangasarian example {args.example}", audit=audit),
             f"  known optimal value {known_value:.15g} (from the construction)"]
    if args.transport == "grpc":
        lines.append(f"  party processes started in {startup:.2f} s and stopped; certificates were temporary")
    print_summary(args, "\n".join(lines))
    if args.json:
        write_json_report(args.json, build_report(outcome, audit, extra={
            "example": args.example, "known_objective": known_value, "process_start_s": startup}))
    return int(STATUS_EXIT[outcome.status])
