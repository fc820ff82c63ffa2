"""``securelp solve FILE.mps --parties N``: one process plays every data owner."""

from __future__ import annotations

import argparse
import logging

from securelp.coordinator.api.lp import solve, write_results
from securelp.coordinator.commands.audit import add_transcript_arguments, check_transcript_path
from securelp.coordinator.commands.common import (
    STATUS_EXIT,
    add_keepalive_argument,
    add_link_argument,
    add_results_argument,
    add_session_arguments,
    check_output_dir,
    not_private_seed_help,
    positive_int,
    print_summary,
)
from securelp.coordinator.report import format_report
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.coordinator.simulation import DIRECTIONS, TRANSPORTS
from securelp.solvers.errors import ConfigError
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import parse_split

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="solve an MPS file securely with N simulated parties",
                       description="Split FILE.mps into N column blocks, run the PPLP protocol with one simulated "
                                   "party per block, and compare with a centralized solve.")
    p.add_argument("file", metavar="FILE.mps")
    p.add_argument("--parties", type=positive_int, default=3, metavar="N", help="number of parties (default 3)")
    p.add_argument("--split", default=None, metavar="n1,n2,...", help="columns per party (default: near-equal parts)")
    p.add_argument("--transport", choices=TRANSPORTS, default="inprocess")
    p.add_argument("--seed", default=None,
                   help=not_private_seed_help("every party's mask", "the masks and so unmask the data"))
    p.add_argument("--insecure", action="store_true", help="gRPC without TLS (warned; for debugging only)")
    add_session_arguments(p, reveal_default=True)
    add_keepalive_argument(p, grpc_only=True)
    p.add_argument("--direction", choices=DIRECTIONS, default="dial-in",
                   help="over gRPC: dial-in, the coordinator dials the parties (default), or dial-out, the parties "
                        "dial a listening coordinator (no inbound port at a party)")
    add_link_argument(p)
    add_transcript_arguments(p)
    add_results_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.insecure and args.transport != "grpc":  # refused, not ignored: it would turn off nothing
        raise ConfigError(f"--insecure applies to --transport grpc only; --transport {args.transport} has no TLS "
                          "to turn off")
    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_output_dir(args.out)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)], [("FILE", args.file)])
    lp = read_mps(args.file)
    parties = args.parties if args.split is None else parse_split(args.split, lp.n_cols, args.parties)
    result = solve(lp, parties, transport=args.transport, bounds=args.bounds, seed=args.seed, k=args.k,
                   reveal=args.reveal, secure_aggregation=args.secure_aggregation, deadline_s=args.deadline,
                   audit_budget_s=args.audit_budget, transcript=args.transcript, insecure=args.insecure,
                   keepalive_s=args.keepalive, direction=args.direction, link=args.link)
    report = dict(result.report)
    text = format_report(result.session, title=f"securelp solve {lp.name}", audit=result.audit)
    if args.out:
        report["results"] = write_results(args.out, result)
        text += (f"\n  results: each party's x_j in {args.out}/<party>.csv, the public part in "
                 f"{report['results']['public']}")
    print_summary(args, text)
    if args.json:
        write_json_report(args.json, report)
    return int(STATUS_EXIT[result.status])
