"""``securelp party``: one data-owner process, in either connection direction.

It reads only its own block file (whose stored party id must equal ``--id``) and serves the
secure LP over the protocol runtime with mutual TLS, either

- **dial-in** (``--listen HOST:PORT``): it listens, prints ``LISTENING host:port`` on stdout once it
  is SERVING (so a launcher can ask for port 0), and the coordinator dials it; or
- **dial-out** (``--connect HOST:PORT``): it dials a listening coordinator (``securelp coordinator
  --listen``), retrying until it listens, and prints ``CONNECTED host:port`` each time it is
  connected; the owner opens no inbound port.

By default it serves one session and exits with that session's code: its status (0 optimal, 10
infeasible, 11 unbounded, ...), 5 when the coordinator aborted the session or the party refused a
request its policy does not allow, 6 when the coordinator vanished mid-session (its connection
ended, or nothing arrived for ``--keepalive`` seconds) or after ``--idle-timeout`` seconds without
a coordinator, 130 on a signal. With ``--serve`` it takes session after session (each with fresh
masks; a session whose coordinator vanished is dropped and the next coordinator served at once),
until a signal (or ``--idle-timeout``, if given). After a signal it is gone within ``--grace`` + 5 s,
even if gRPC's shutdown or the interpreter's exit blocks (``securelp.party.server.ExitWatchdog``).

Its result: with ``--out FILE`` the party writes its own x_j under its column names (CSV, or NPZ or
JSON by the suffix; ``{session}`` in the name is replaced by the session id) atomically, mode
0600, when a session closes (without an optimum: the status and no values; ``securelp.party.results``); the coordinator
learns only that the party keeps its result in a file and in which format, never the path. It
never logs or prints its block, its mask or its decoded x_j.

Census data: with ``--census SUBTREE.csv --max-size N`` the party also serves the protocol
``census-federated`` (``securelp.party.census_federated``; docs/howto/federated-census.md): the file
holds the rows of the whole census file (``level,region_id,parent_id,size,count``) for its region and
every region below it, N is the public size domain (larger groups counted at N). ``--data`` may then
be left out (a census-only party). A census session that ends ``done`` exits 0; with ``--out FILE`` the
party writes its own regions' released counts there (CSV, atomically).

Its policy (``securelp.party.policy.PartyPolicy``): ``--allow-bounds`` (default monomial only)
and ``--reveal/--no-reveal`` (default: keep x_j). Printed on stderr at start, reported to the
coordinator with the hello, and enforced by the party itself.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from securelp.coordinator.commands.common import (
    DEFAULT_KEEPALIVE_S,
    not_private_seed_help,
    positive_float,
    positive_int,
)
from securelp.coordinator.grpc_env import quiet_grpc_core
from securelp.solvers.errors import ConfigError, ExitCode, ProtocolError, SecureLPError, TransportError

if TYPE_CHECKING:
    from securelp.party.runtime import SessionRecord
    from securelp.party.server import ServeResult

log = logging.getLogger(__name__)

#: the bounds modes ``--allow-bounds`` takes (securelp.party.policy.BOUNDS_MODE_NAMES; not imported here, so
#: that building the parser does not load protobuf)
BOUNDS_MODES = ("monomial", "rows")
#: seconds beyond ``--grace`` that a stopping party may take before its watchdog ends it
SHUTDOWN_SLACK_S = 5.0
#: ``--idle-timeout`` of a party that serves one session (with ``--serve``: none unless given)
DEFAULT_IDLE_TIMEOUT_S = 600.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("party", help="run one data-owner process (listens, or dials a listening coordinator)",
                       description="Serve sessions for the data owner --id (PPLP with --data, census-federated with "
                                   "--census), reading only its own files: listen for the coordinator (--listen) or "
                                   "dial it (--connect).")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--listen", metavar="HOST:PORT", help="dial-in: address to bind (port 0: any free port)")
    where.add_argument("--connect", metavar="HOST:PORT",
                       help="dial-out: the listening coordinator's address (securelp coordinator --listen, or "
                            "securelp census federated --hierarchy FILE --listen); this party opens no inbound port")
    p.add_argument("--data", metavar="BLOCK.npz", default=None,
                   help="this party's private block (securelp split): it serves the secure LP (pplp)")
    p.add_argument("--census", metavar="SUBTREE.csv", default=None,
                   help="this party's census counts (the rows of its region's subtree, level,region_id,parent_id,"
                        "size,count): it serves census-federated; needs --max-size")
    p.add_argument("--max-size", type=positive_int, default=None, metavar="N",
                   help="with --census: the public largest group size N (larger groups are counted at N)")
    p.add_argument("--id", required=True, metavar="NAME", help="this party's id (must match the block and cert)")
    p.add_argument("--certs", metavar="DIR", default=None,
                   help="certificate directory with ca.pem, NAME.pem and NAME.key (securelp certs)")
    p.add_argument("--insecure", action="store_true", help="no TLS (warned; for debugging only)")
    p.add_argument("--seed", default=None,
                   help=not_private_seed_help("this party's mask", "the mask and so unmask the block"))
    p.add_argument("--serve", action="store_true",
                   help="long-running: serve session after session (fresh masks each) until stopped, instead of "
                        "exiting after one")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write this party's own result to FILE when a session ends: with --data its decoded "
                        "solution x_j with its column names (without an optimum: the status and no values; CSV, or "
                        ".npz or .json by the suffix), with --census its regions' released counts (CSV "
                        "level,region_id,parent_id,size,count); {session} in the name becomes the session id; the "
                        "path is never sent to the coordinator")
    p.add_argument("--keepalive", type=positive_float, default=DEFAULT_KEEPALIVE_S, metavar="S",
                   help="drop a session whose coordinator sent nothing for S seconds (heartbeats flow every S/4; "
                        f"default {DEFAULT_KEEPALIVE_S:g})")
    p.add_argument("--idle-timeout", type=positive_float, default=None, metavar="S",
                   help=f"exit after S seconds without a coordinator (default {DEFAULT_IDLE_TIMEOUT_S:g}; with --serve: "
                        "never, unless given)")
    p.add_argument("--grace", type=positive_float, default=5.0, metavar="S",
                   help="seconds in-flight calls get on shutdown (default 5)")
    p.add_argument("--allow-bounds", action="append", default=None, metavar="MODE[,MODE]", type=_bounds_modes,
                   help="bounds modes this party answers: monomial (bounded columns leak up to scaling and order) "
                        "and/or rows (the coordinator recovers this party's A_j and c_j); repeatable or a comma "
                        "list (default: monomial only)")
    p.add_argument("--reveal", action=argparse.BooleanOptionalAction, default=False,
                   help="send the decoded x_j to the coordinator when it asks (default: --no-reveal, the party "
                        "keeps its x_j and refuses a session that asks for it)")
    p.set_defaults(func=run)


def _bounds_modes(text: str) -> list[str]:
    modes = [part.strip() for part in text.split(",") if part.strip()]
    bad = [m for m in modes if m not in BOUNDS_MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"expected monomial and/or rows, got {text!r}")
    return modes


def _status_exit(status: int) -> int:
    from securelp.protos import securelp_pb2 as pb

    return int({
        pb.SOLVE_STATUS_OPTIMAL: ExitCode.OK,
        pb.SOLVE_STATUS_INFEASIBLE: ExitCode.INFEASIBLE,
        pb.SOLVE_STATUS_UNBOUNDED: ExitCode.UNBOUNDED,
        pb.SOLVE_STATUS_INFEASIBLE_OR_UNBOUNDED: ExitCode.INFEASIBLE,
        pb.SOLVE_STATUS_ABORTED: ExitCode.PROTOCOL,
    }.get(status, ExitCode.SOLVER))


class _Owner:
    """What the command does when a session ends: the owner's line on stdout, its result file."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.errors: list[SecureLPError] = []

    def session_ended(self, record: SessionRecord) -> None:
        from securelp.party.results import write_result
        from securelp.protos import securelp_pb2 as pb

        args, session = self.args, record.session
        if record.protocol == "census-federated":
            self.census_ended(record)
            return
        outcome = getattr(session, "outcome", None)
        if record.end_reason != "done" or outcome is None:
            if args.serve:  # a one-shot party reports its single session's end when it exits
                print(f"securelp party: {args.id}: session {record.session_id} ended: {record.end_reason}",
                      file=sys.stderr, flush=True)
            return
        name = pb.SolveStatus.Name(outcome.status).removeprefix("SOLVE_STATUS_").lower()
        print(f"party {args.id}: session {record.session_id} ended: status {name}, objective "
              f"{outcome.objective:.15g}", flush=True)
        result = session.result()  # type: ignore[attr-defined]
        if args.out is None or result is None:
            return
        try:
            path = write_result(result, args.out)
        except SecureLPError as exc:
            log.error("party %s: session %s: its result could not be written: %s", args.id, record.session_id, exc)
            self.errors.append(exc)
            return
        what = f"its decoded solution ({result.x.size} columns)" if result.x is not None else f"status {name}, no values"
        print(f"securelp party: {args.id}: session {record.session_id}: wrote {what} to {path}", file=sys.stderr,
              flush=True)


    def census_ended(self, record: SessionRecord) -> None:
        """A census session ended: one line; with ``--out``, its own regions' released counts."""
        from securelp.solvers.files import write_atomically

        args, session = self.args, record.session
        released = getattr(session, "released", None)
        if record.end_reason != "done" or released is None:
            print(f"securelp party: {args.id}: census session {record.session_id} ended: {record.end_reason}",
                  file=sys.stderr, flush=True)
            return
        print(f"party {args.id}: census session {record.session_id} ended: released {released.shape[0]} regions",
              flush=True)
        if args.out is None:
            return
        data = session.data  # type: ignore[attr-defined]
        lines = ["level,region_id,parent_id,size,count"]
        for k, (rid, par, lev) in enumerate(zip(data.region_ids, data.parent_ids, data.levels)):
            lines += [f"{lev},{rid},{par},{s + 1},{int(v)}" for s, v in enumerate(released[k]) if v]
        from securelp.party.results import result_path

        path = result_path(args.out, record.session_id)
        try:
            write_atomically(path, "\n".join(lines) + "\n", what="census release ", mode=0o600)
        except SecureLPError as exc:
            log.error("party %s: session %s: its release could not be written: %s", args.id, record.session_id, exc)
            self.errors.append(exc)
            return
        print(f"securelp party: {args.id}: session {record.session_id}: wrote its released counts to {path}",
              file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    quiet_grpc_core(args.verbose)
    from securelp.coordinator.launcher import die_with_parent

    die_with_parent()  # started by LocalParties: go when the launcher goes, even after kill -9
    from securelp.coordinator.certs import load_identity, require_usage, validate_party_ids
    from securelp.coordinator.grpc_link import parse_address
    from securelp.party.aggregation import SigningIdentity
    from securelp.party.policy import PartyPolicy
    from securelp.party.results import check_result_path, result_format
    from securelp.party.runtime import HostedProtocol, PartyHost
    from securelp.party.server import ExitWatchdog, ServerTls, connect_and_serve, serve
    from securelp.party.session import PPLP, PartySession
    from securelp.solvers.lp.partition import load_block

    if args.certs and args.insecure:
        raise ConfigError("--certs and --insecure were both given; choose one")
    if not args.certs and not args.insecure:
        raise ConfigError("--certs DIR is required (or --insecure, for debugging only)")
    if not args.insecure:
        validate_party_ids([args.id])
    parse_address(args.listen or args.connect)
    if args.out is not None:
        check_result_path(args.out)
    if args.data is None and args.census is None:
        raise ConfigError("give --data BLOCK.npz (the secure LP), --census SUBTREE.csv (census-federated), or both")
    if (args.census is None) != (args.max_size is None):
        raise ConfigError("--census and --max-size N go together (N: the public largest group size)")
    block = load_block(args.data, party_id=args.id) if args.data is not None else None
    tls = identity = None
    if args.certs:
        ident = load_identity(args.certs, args.id)
        require_usage(ident, "client" if args.connect else "server",
                      "--connect (the party is the TLS client)" if args.connect else "--listen (the party is the "
                                                                                     "TLS server)")
        tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
        identity = SigningIdentity(ident.private_key, ident.certificate, ident.ca_certificate)
    if args.seed is not None:
        log.warning("party %s: reproducible-simulation mode: the mask derives from --seed (not for real data)",
                    args.id)
    policy = PartyPolicy.from_names([m for group in (args.allow_bounds or [["monomial"]]) for m in group],
                                    reveal=args.reveal)
    print(f"securelp party: {args.id}: policy: {policy.describe()}", file=sys.stderr, flush=True)
    saved_as = result_format(args.out) if args.out is not None else ""
    started: list[int] = []

    def new_session(session_id: str) -> PartySession:
        # fresh masks for every session; in reproducible mode, another seed for each session after the first
        seed = args.seed if args.seed is None or not started else f"{args.seed}/session{len(started)}"
        started.append(1)
        return PartySession(block, seed=seed, policy=policy, identity=identity, saved_as=saved_as)

    owner = _Owner(args)
    protocols = [HostedProtocol(PPLP, new_session)] if block is not None else []
    if args.census is not None:
        from securelp.party.census_federated import hosted_census_federated, read_subtree_csv

        census = read_subtree_csv(args.census, args.max_size)
        protocols.append(hosted_census_federated(args.id, census, identity=identity,
                                                 seed=args.seed))
        print(f"securelp party: {args.id}: census: region {census.region_id}, {len(census.region_ids)} regions, "
              f"N = {census.max_size}", file=sys.stderr, flush=True)
    host = PartyHost(args.id, protocols, on_session_end=owner.session_ended)
    idle = args.idle_timeout if args.idle_timeout is not None else (None if args.serve else DEFAULT_IDLE_TIMEOUT_S)
    watchdog = ExitWatchdog(args.grace + SHUTDOWN_SLACK_S, label=f"securelp party: {args.id}")
    if args.connect:
        def connected(address: str) -> None:
            print(f"CONNECTED {address}", flush=True)

        result = connect_and_serve(args.connect, host, tls=tls, insecure=args.insecure, idle_timeout_s=idle,
                                   keepalive_s=args.keepalive, serve_forever=args.serve, on_connected=connected,
                                   exit_watchdog=watchdog)
    else:
        def listening(bound: str, port: int) -> None:
            print(f"LISTENING {bound}:{port}", flush=True)

        result = serve(args.listen, host, tls=tls, insecure=args.insecure, idle_timeout_s=idle, grace_s=args.grace,
                       on_listening=listening, exit_watchdog=watchdog, keepalive_s=args.keepalive,
                       serve_forever=args.serve)
    return _finish(args, result, owner)


def _finish(args: argparse.Namespace, result: ServeResult, owner: _Owner) -> int:
    """Report why serving ended and return the exit code (or raise the typed error)."""
    if result.reason == "signal":
        print(f"securelp party: {args.id}: stopped by {result.detail}"
              + (f" after {result.sessions} session(s)" if args.serve else ""), file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    if result.reason == "idle":
        raise TransportError(f"party {args.id}: {result.detail}; exiting (raise --idle-timeout, or check the "
                             "coordinator's address)")
    record = result.record
    assert record is not None
    detail, sid = result.detail, record.session_id
    if record.protocol == "census-federated" and detail == "done":
        if owner.errors:
            raise owner.errors[0]
        return int(ExitCode.OK)
    if detail.startswith("refused"):
        policy = getattr(record.session, "policy", None)
        if policy is None:  # a protocol without a policy (census-federated): its own checks refused
            raise ProtocolError(f"party {args.id}: session {sid}: refused: {detail.removeprefix('refused: ')}; "
                                "the session is over")
        raise ProtocolError(f"party {args.id}: session {sid}: {detail.removeprefix('refused: ')} refused, as its "
                            f"policy ({policy.describe()}) or its checks require; the session is over")
    if detail.startswith("aborted"):
        after = ("any decoded values are not a session result" if record.protocol == "pplp"
                 else "nothing of it is a result")
        raise ProtocolError(f"party {args.id}: session {sid}: the coordinator aborted the session ({detail}); "
                            f"{after}")
    if detail.startswith("dropped"):
        raise TransportError(f"party {args.id}: session {sid} was dropped: {detail.removeprefix('dropped: ')}")
    outcome = getattr(record.session, "outcome", None)
    if outcome is None:
        raise ProtocolError(f"party {args.id}: session {sid}: the coordinator ended the session before a solution "
                            f"({detail or 'no reason given'})")
    if owner.errors:
        raise owner.errors[0]
    return _status_exit(outcome.status)
