"""``securelp solve FILE.mps --parties N``: one process plays every data owner."""

from __future__ import annotations

import argparse
import logging

from securelp.coordinator.commands.audit import add_transcript_arguments, check_transcript_path
from securelp.coordinator.commands.common import STATUS_EXIT, add_session_arguments, positive_int
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.report import build_report, format_report
from securelp.coordinator.reporting import check_distinct, check_writable, human_stream, write_json_report
from securelp.coordinator.simulation import TRANSPORTS, check_session_fits, owners_consent, simulate
from securelp.solvers.errors import ConfigError
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import parse_split, split_columns

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="solve an MPS file securely with N simulated parties",
                       description="Split FILE.mps into N column blocks, run the PPLP protocol with one simulated "
                                   "party per block, and compare with a centralized solve.")
    p.add_argument("file", metavar="FILE.mps")
    p.add_argument("--parties", type=positive_int, default=3, help="number of parties (default 3)")
    p.add_argument("--split", default=None, metavar="a,b,c", help="columns per party (default: near-equal parts)")
    p.add_argument("--transport", choices=TRANSPORTS, default="inprocess")
    p.add_argument("--seed", default=None,
                   help="reproducible-simulation mode: derive every mask from this seed (flagged in the report)")
    p.add_argument("--insecure", action="store_true", help="gRPC without TLS (warned; for debugging only)")
    add_session_arguments(p, reveal_default=True)
    add_transcript_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.insecure and args.transport != "grpc":  # it used to be accepted and ignored
        raise ConfigError(f"--insecure applies to --transport grpc only; --transport {args.transport} has no TLS "
                          "to turn off")
    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)], [("FILE", args.file)])
    lp = read_mps(args.file)
    sizes = parse_split(args.split, lp.n_cols, args.parties)
    public, blocks = split_columns(lp, sizes)
    config = SessionConfig(k=args.k, bounds_mode=args.bounds, reveal=args.reveal, deadline_s=args.deadline,
                           secure_aggregation=args.secure_aggregation)
    check_session_fits(public, blocks, config)  # --k the protocol carries, the whole run in memory (exit 12)
    # one process plays every data owner: the owners agree to what the session asks
    outcome, audit = simulate(public, blocks, config, transport=args.transport, seed=args.seed, central=lp,
                              insecure=args.insecure, transcript_path=args.transcript,
                              audit_budget_s=args.audit_budget, policy=owners_consent(config))
    print(format_report(outcome, title=f"securelp solve {lp.name}", audit=audit), file=human_stream(args.json))
    if args.json:
        write_json_report(args.json, build_report(outcome, audit, extra={"problem": lp.name}))
    return int(STATUS_EXIT[outcome.status])
