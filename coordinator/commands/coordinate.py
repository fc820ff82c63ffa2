"""``securelp coordinator``: run one PPLP session against party processes over gRPC, either direction.

- **dial-in** (``--party NAME=HOST:PORT`` per party): it dials every party with mutual TLS
  (certificates from ``--certs DIR``: ca.pem and coordinator.pem/.key) and waits (``--wait``) until
  each party's health service reports SERVING;
- **dial-out** (``--listen HOST:PORT`` with ``--party NAME`` per party, or ``--expect N``): it listens,
  prints ``LISTENING host:port`` once it does (port 0: any free port), and waits (``--wait``) until
  every expected party has connected (``securelp party --connect``) with a certificate naming it.

Then it runs the protocol (``securelp.coordinator.protocol.run_secure_lp``), prints the readable
report and writes the JSON one. A party that dies or stops is reported within ``--keepalive``
seconds, in every phase. Exit codes: the LP status (0 optimal, 10 infeasible, 11 unbounded) or the
typed error's code (6 unreachable, vanished, unresponsive, busy or timed-out party, 7 certificate
refused, 5 protocol violation, ...).
"""

from __future__ import annotations

import argparse
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from securelp.coordinator.commands.audit import add_transcript_arguments, check_transcript_path
from securelp.coordinator.commands.common import (
    STATUS_EXIT,
    add_keepalive_argument,
    add_session_arguments,
    positive_float,
    positive_int,
    print_summary,
)
from securelp.coordinator.grpc_env import quiet_grpc_core
from securelp.solvers.errors import ConfigError, InputError

log = logging.getLogger(__name__)

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coordinator", help="run the coordinator against party processes",
                       description="Run one secure LP session with mutual TLS: dial each party (--party NAME=HOST:PORT), "
                                   "or listen (--listen HOST:PORT) for the parties to connect (--party NAME or "
                                   "--expect N).")
    p.add_argument("--public", required=True, metavar="ROWS.npz", help="public row data (securelp split)")
    p.add_argument("--party", action="append", default=None, metavar="NAME=HOST:PORT|NAME", dest="parties",
                   help="a party: with its address (dial-in, the coordinator dials it), or, with --listen, its name "
                        "only (it connects); repeat once per party")
    p.add_argument("--listen", metavar="HOST:PORT", default=None,
                   help="dial-out: listen on this address for the parties (securelp party --connect), so that no "
                        "data owner opens an inbound port")
    p.add_argument("--expect", type=positive_int, default=None, metavar="N",
                   help="with --listen: the number of parties to wait for (the split's roster names them when "
                        "public.npz has one); instead of --party NAME")
    p.add_argument("--certs", metavar="DIR", default=None, help="directory with ca.pem and coordinator.pem/.key")
    p.add_argument("--insecure", action="store_true", help="plaintext gRPC (warned; for debugging only)")
    p.add_argument("--wait", type=positive_float, default=30.0, metavar="S",
                   help="seconds to wait for every party to report SERVING (dial-in) or to connect (--listen) "
                        "(default 30)")
    add_keepalive_argument(p)
    add_session_arguments(p, reveal_default=False)
    add_transcript_arguments(p)
    p.set_defaults(func=run)


def parse_parties(specs: list[str]) -> list[tuple[str, str]]:
    """``NAME=HOST:PORT`` items -> [(name, address)].

    Duplicate names are refused (InputError, as in split and certs); names that differ only in case (they are DNS
    names in the certificates), reserved names (``coordinator``, ``ca``, ``public``) and names
    that cannot be a party id are refused at once (InputError), not after the ``--wait``.
    """
    from securelp.coordinator.grpc_link import parse_address

    out: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, address = spec.partition("=")
        name = name.strip()
        if not sep or not name or not address:
            raise InputError(f"--party {spec!r}: expected NAME=HOST:PORT, e.g. owner1=10.0.0.5:50051 (or --listen "
                             "HOST:PORT and --party NAME for parties that connect)")
        parse_address(address)
        out.append((name, address.strip()))
    _check_names([n for n, _ in out])
    return out


def _check_names(names: list[str]) -> list[str]:
    from securelp.coordinator.certs import validate_party_ids
    from securelp.coordinator.commands.split import SPLIT_RESERVED_IDS

    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"duplicate party ids in --party: {', '.join(dupes)}; every party needs its own id")
    try:
        return validate_party_ids(names, SPLIT_RESERVED_IDS)
    except InputError as exc:
        raise InputError(f"--party: {exc}") from None


def parse_listen_parties(specs: list[str] | None, expect: int | None, roster_ids: list[str] | None) -> list[str] | None:
    """The party ids a listening coordinator expects, in the session's order (None: any ``expect`` ids).

    ``--party NAME`` names them; else ``--expect N`` counts them, and the split's roster names them when
    there is one (N must be its size).
    """
    if specs:
        bad = [s for s in specs if "=" in s]
        if bad:
            raise InputError(f"--party {bad[0]!r}: with --listen the parties connect: give their names only "
                             "(--party NAME), not addresses")
        names = _check_names([s.strip() for s in specs])
        if expect is not None and expect != len(names):
            raise InputError(f"--expect {expect} but --party names {len(names)} parties")
        return names
    if expect is None:
        raise InputError("--listen needs the parties it waits for: --party NAME (repeat per party) or --expect N")
    if roster_ids is not None:
        if expect != len(roster_ids):
            raise InputError(f"--expect {expect}, but the split's roster has {len(roster_ids)} parties: "
                             f"{', '.join(roster_ids)}")
        return list(roster_ids)
    return None


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
    from securelp.coordinator.protocol import SessionConfig
    from securelp.coordinator.report import build_report, format_report
    from securelp.coordinator.reporting import check_distinct, check_writable, human_stream, write_json_report
    from securelp.solvers.lp.partition import load_public

    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)], [("--public", args.public)])

    if args.certs and args.insecure:
        raise ConfigError("--certs and --insecure were both given; choose one")
    if not args.certs and not args.insecure:
        raise ConfigError("--certs DIR is required (or --insecure, for debugging only)")
    if args.expect is not None and not args.listen:
        raise InputError("--expect N applies to --listen (parties that connect); with --party NAME=HOST:PORT the "
                         "coordinator dials each party it names")
    public = load_public(args.public)
    roster_ids = list(public.roster.party_ids) if public.roster is not None else None
    if args.listen:
        from securelp.coordinator.grpc_link import parse_address

        parse_address(args.listen)
        expected = parse_listen_parties(args.parties, args.expect, roster_ids)
        named = expected
    else:
        if not args.parties:
            raise InputError("give every party: --party NAME=HOST:PORT (the coordinator dials it), or --listen "
                             "HOST:PORT with --party NAME or --expect N (the parties connect)")
        parties = parse_parties(args.parties)
        named = [name for name, _ in parties]
    if public.roster is not None:  # before dialing or listening: the parties stay up for a corrected run
        if named is not None:
            public.roster.check_parties(named, what="the --party set")
    else:
        log.warning("%s has no party roster (written by an older securelp split): the party set and the "
                    "parties' blocks cannot be checked against the split; a missing party would go unnoticed. "
                    "Re-run securelp split to record one", args.public)
    config = SessionConfig(k=args.k, bounds_mode=args.bounds, reveal=args.reveal, deadline_s=args.deadline,
                           secure_aggregation=args.secure_aggregation)
    out = human_stream(args.json)  # the LISTENING line, also with --quiet: a launcher reads it
    if args.listen:
        outcome, transcript, endpoints, direction = _listen_and_run(args, expected, public, config, out)
    else:
        outcome, transcript, endpoints, direction = _dial_and_run(args, parties, public, config)
    # the coordinator holds the transcript: the attacks on it say what it could reconstruct
    audit = audit_transcript(transcript, budget_s=args.audit_budget)
    print_summary(args, format_report(outcome, title=f"securelp coordinator {public.name or ''}".rstrip(), audit=audit))
    if args.json:
        write_json_report(args.json, build_report(outcome, audit, extra={
            "problem": public.name, "endpoints": endpoints, "direction": direction}))
    return int(STATUS_EXIT[outcome.status])


def _dial_and_run(args, parties, public, config):  # type: ignore[no-untyped-def]
    """Dial-in: dial every party, wait for their health services, run the session."""
    from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink
    from securelp.coordinator.protocol import run_secure_lp
    from securelp.coordinator.transcript import run_recorded

    tls = ChannelTls.from_dir(args.certs) if args.certs else None
    links: list[GrpcPartyLink] = []
    try:
        for name, address in parties:
            links.append(GrpcPartyLink(name, address, tls=tls, insecure=args.insecure, deadline_s=args.deadline,
                                       keepalive_s=args.keepalive))
        _wait_all_ready(links, args.wait)
        outcome, transcript = run_recorded(public, links, config, path=args.transcript, run=run_secure_lp)
    finally:
        for link in links:
            link.shutdown()
    return outcome, transcript, {name: address for name, address in parties}, "dial-in"


def _listen_and_run(args, expected, public, config, out):  # type: ignore[no-untyped-def]
    """Dial-out: listen, wait for the parties to connect, run the session on their streams."""
    from securelp.coordinator.certs import COORDINATOR_ID, load_identity, require_usage
    from securelp.coordinator.listener import PartyListener
    from securelp.coordinator.protocol import run_secure_lp
    from securelp.coordinator.transcript import run_recorded
    from securelp.protos.channels import ServerTls

    tls = None
    if args.certs:
        ident = load_identity(args.certs, COORDINATOR_ID)
        require_usage(ident, "server", "--listen (the coordinator is the TLS server)")
        tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
    listener = PartyListener(args.listen, tls=tls, insecure=args.insecure, expected=expected, count=args.expect,
                             keepalive_s=args.keepalive)
    try:
        port = listener.start()
        print(f"LISTENING {args.listen.rsplit(':', 1)[0]}:{port}", file=out, flush=True)
        links = listener.links(args.wait, deadline_s=args.deadline)
        outcome, transcript = run_recorded(public, links, config, path=args.transcript, run=run_secure_lp)
        endpoints = {link.party_id: link.connection.address for link in links}  # type: ignore[attr-defined]
    finally:
        listener.stop()
    return outcome, transcript, endpoints, "dial-out"
