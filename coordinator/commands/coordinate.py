"""``securelp coordinator``: run one PPLP session against party processes over gRPC.

It dials every ``--party NAME=HOST:PORT`` with mutual TLS (certificates from
``--certs DIR``: ca.pem and coordinator.pem/.key), waits until each party's health
service reports SERVING, runs the protocol (``securelp.coordinator.protocol.run_secure_lp``),
prints the readable report and writes the JSON one. Exit codes: the LP status
(0 optimal, 10 infeasible, 11 unbounded) or the typed error's code (6 unreachable or
timed-out party, 7 certificate refused, 5 protocol violation, ...).
"""

from __future__ import annotations

import argparse
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from securelp.coordinator.commands.audit import add_transcript_arguments, check_transcript_path
from securelp.coordinator.commands.common import STATUS_EXIT, add_session_arguments, positive_float, print_summary
from securelp.coordinator.grpc_env import quiet_grpc_core
from securelp.solvers.errors import ConfigError, InputError

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coordinator", help="run the coordinator against party processes",
                       description="Dial each party (NAME=HOST:PORT) with mutual TLS and run one secure LP session.")
    p.add_argument("--public", required=True, metavar="ROWS.npz", help="public row data (securelp split)")
    p.add_argument("--party", action="append", required=True, metavar="NAME=HOST:PORT", dest="parties",
                   help="a party and its address; repeat once per party")
    p.add_argument("--certs", metavar="DIR", default=None, help="directory with ca.pem and coordinator.pem/.key")
    p.add_argument("--insecure", action="store_true", help="plaintext gRPC (warned; for debugging only)")
    p.add_argument("--wait", type=positive_float, default=30.0, metavar="S",
                   help="seconds to wait for every party to report SERVING (default 30)")
    add_session_arguments(p, reveal_default=False)
    add_transcript_arguments(p)
    p.set_defaults(func=run)


def parse_parties(specs: list[str]) -> list[tuple[str, str]]:
    """``NAME=HOST:PORT`` items -> [(name, address)].

    Duplicate names are refused (InputError, as in split and certs); names that differ only in case (they are DNS
    names in the certificates), reserved names (``coordinator``, ``ca``, ``public``) and names
    that cannot be a party id are refused at once (InputError), not after the ``--wait``.
    """
    from securelp.coordinator.certs import validate_party_ids
    from securelp.coordinator.commands.split import SPLIT_RESERVED_IDS
    from securelp.coordinator.grpc_link import parse_address

    out: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, address = spec.partition("=")
        name = name.strip()
        if not sep or not name or not address:
            raise InputError(f"--party {spec!r}: expected NAME=HOST:PORT, e.g. owner1=10.0.0.5:50051")
        parse_address(address)
        out.append((name, address.strip()))
    names = [n for n, _ in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"duplicate party ids in --party: {', '.join(dupes)}; every party needs its own id")
    try:
        validate_party_ids(names, SPLIT_RESERVED_IDS)
    except InputError as exc:
        raise InputError(f"--party: {exc}") from None
    return out


def _wait_all_ready(links: list, wait_s: float) -> None:  # type: ignore[type-arg]
    """Wait for every party's health service; the first failure (refused TLS, a TLS/plaintext
    mismatch, --wait exceeded) stops the other waits at once and is raised."""
    cancel = threading.Event()

    def one(link) -> None:  # type: ignore[no-untyped-def]
        try:
            link.wait_ready(wait_s, cancel=cancel)
        except BaseException:
            cancel.set()
            raise

    with ThreadPoolExecutor(max_workers=min(16, len(links))) as pool:
        futures = [pool.submit(one, link) for link in links]
        for fut in futures:
            fut.exception()  # wait for all (each ends soon after a failure)
    for fut in futures:
        if fut.exception() is not None:
            raise fut.exception()  # type: ignore[misc]


def run(args: argparse.Namespace) -> int:
    quiet_grpc_core(args.verbose)
    from securelp.coordinator.audit import audit_transcript
    from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink
    from securelp.coordinator.protocol import SessionConfig, run_secure_lp
    from securelp.coordinator.report import build_report, format_report
    from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
    from securelp.coordinator.transcript import run_recorded
    from securelp.solvers.lp.partition import load_public

    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)], [("--public", args.public)])

    if args.certs and args.insecure:
        raise ConfigError("--certs and --insecure were both given; choose one")
    if not args.certs and not args.insecure:
        raise ConfigError("--certs DIR is required (or --insecure, for debugging only)")
    parties = parse_parties(args.parties)
    public = load_public(args.public)
    if public.roster is not None:  # before dialing anyone: the parties stay up for a corrected run
        public.roster.check_parties([name for name, _ in parties], what="the --party set")
    else:
        log.warning("%s has no party roster (written by an older securelp split): the --party set and the "
                    "parties' blocks cannot be checked against the split; a missing party would go unnoticed. "
                    "Re-run securelp split to record one", args.public)
    config = SessionConfig(k=args.k, bounds_mode=args.bounds, reveal=args.reveal, deadline_s=args.deadline,
                           secure_aggregation=args.secure_aggregation)
    tls = ChannelTls.from_dir(args.certs) if args.certs else None
    links: list[GrpcPartyLink] = []
    try:
        for name, address in parties:
            links.append(GrpcPartyLink(name, address, tls=tls, insecure=args.insecure, deadline_s=args.deadline))
        _wait_all_ready(links, args.wait)
        outcome, transcript = run_recorded(public, links, config, path=args.transcript, run=run_secure_lp)
    finally:
        for link in links:
            link.shutdown()
    # the coordinator holds the transcript: the attacks on it say what it could reconstruct
    audit = audit_transcript(transcript, budget_s=args.audit_budget)
    print_summary(args, format_report(outcome, title=f"securelp coordinator {public.name or ''}".rstrip(), audit=audit))
    if args.json:
        write_json_report(args.json, build_report(outcome, audit, extra={
            "problem": public.name, "endpoints": {name: address for name, address in parties}}))
    return int(STATUS_EXIT[outcome.status])
