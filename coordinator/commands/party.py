"""``securelp party``: one data-owner process, a gRPC server for one session.

It reads only its own block file (whose stored party id must equal ``--id``), serves
``securelp.v1.PartyService`` with mutual TLS, prints ``LISTENING host:port`` on stdout
once it is SERVING (so a launcher can ask for port 0), and exits when the coordinator
closes the session, on SIGTERM/SIGINT, or after ``--idle-timeout`` seconds without a
call from the coordinator. Exit code: the session's status (0 optimal, 10 infeasible,
11 unbounded, ...), 5 when the coordinator aborted the session or the party refused a request
its policy does not allow, 6 on idle timeout, 130 on a signal. After a signal it is gone within
``--grace`` + 5 s, even if gRPC's shutdown or the interpreter's exit blocks
(``securelp.party.server.ExitWatchdog``). It never logs or prints its block, its mask or its
decoded x_j.

Its policy (``securelp.party.policy.PartyPolicy``): ``--allow-bounds`` (default monomial only)
and ``--reveal/--no-reveal`` (default: keep x_j). Printed on stderr at start, reported to the
coordinator with the hello, and enforced by the party itself.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from securelp.coordinator.commands.common import not_private_seed_help, positive_float
from securelp.coordinator.grpc_env import quiet_grpc_core
from securelp.solvers.errors import ConfigError, ExitCode, ProtocolError, TransportError

if TYPE_CHECKING:
    from securelp.party.server import ServeResult
    from securelp.party.session import PartySession

log = logging.getLogger(__name__)

#: the bounds modes ``--allow-bounds`` takes (securelp.party.policy.BOUNDS_MODE_NAMES; not imported here, so
#: that building the parser does not load protobuf)
BOUNDS_MODES = ("monomial", "rows")
#: seconds beyond ``--grace`` that a stopping party may take before its watchdog ends it
SHUTDOWN_SLACK_S = 5.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("party", help="run one data-owner process (gRPC server)",
                       description="Serve one PPLP session for the data owner --id, reading only --data.")
    p.add_argument("--listen", required=True, metavar="HOST:PORT", help="address to bind (port 0: any free port)")
    p.add_argument("--data", required=True, metavar="BLOCK.npz", help="this party's private block (securelp split)")
    p.add_argument("--id", required=True, metavar="NAME", help="this party's id (must match the block and cert)")
    p.add_argument("--certs", metavar="DIR", default=None,
                   help="certificate directory with ca.pem, NAME.pem and NAME.key (securelp certs)")
    p.add_argument("--insecure", action="store_true", help="serve without TLS (warned; for debugging only)")
    p.add_argument("--seed", default=None,
                   help=not_private_seed_help("this party's mask", "the mask and so unmask the block"))
    p.add_argument("--idle-timeout", type=positive_float, default=600.0, metavar="S",
                   help="exit after S seconds without a call from the coordinator (default 600)")
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


def run(args: argparse.Namespace) -> int:
    quiet_grpc_core(args.verbose)
    from securelp.coordinator.launcher import die_with_parent

    die_with_parent()  # started by LocalParties: go when the launcher goes, even after kill -9
    from securelp.coordinator.certs import load_identity, validate_party_ids
    from securelp.coordinator.grpc_link import parse_address
    from securelp.party.aggregation import SigningIdentity
    from securelp.party.policy import PartyPolicy
    from securelp.party.server import ExitWatchdog, ServerTls, serve
    from securelp.party.session import PartySession
    from securelp.solvers.lp.partition import load_block

    if args.certs and args.insecure:
        raise ConfigError("--certs and --insecure were both given; choose one")
    if not args.certs and not args.insecure:
        raise ConfigError("--certs DIR is required (or --insecure, for debugging only)")
    if not args.insecure:
        validate_party_ids([args.id])
    parse_address(args.listen)
    block = load_block(args.data, party_id=args.id)
    tls = identity = None
    if args.certs:
        ident = load_identity(args.certs, args.id)
        tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
        identity = SigningIdentity(ident.private_key, ident.certificate, ident.ca_certificate)
    if args.seed is not None:
        log.warning("party %s: reproducible-simulation mode: the mask derives from --seed (not for real data)",
                    args.id)
    policy = PartyPolicy.from_names([m for group in (args.allow_bounds or [["monomial"]]) for m in group],
                                    reveal=args.reveal)
    print(f"securelp party: {args.id}: policy: {policy.describe()}", file=sys.stderr, flush=True)
    session = PartySession(block, seed=args.seed, policy=policy, identity=identity)

    def listening(host: str, port: int) -> None:
        print(f"LISTENING {host}:{port}", flush=True)

    watchdog = ExitWatchdog(args.grace + SHUTDOWN_SLACK_S, label=f"securelp party: {args.id}")
    result = serve(args.listen, session, tls=tls, insecure=args.insecure, idle_timeout_s=args.idle_timeout,
                   grace_s=args.grace, on_listening=listening, exit_watchdog=watchdog)
    return _finish(args, result, session)


def _finish(args: argparse.Namespace, result: ServeResult, session: PartySession) -> int:
    """Report why the session ended and return the exit code (or raise the typed error)."""
    from securelp.protos import securelp_pb2 as pb

    if result.reason == "signal":
        print(f"securelp party: {args.id}: stopped by {result.detail}", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    if result.reason == "idle":
        raise TransportError(f"party {args.id}: {result.detail}; exiting (raise --idle-timeout for long solves)")
    outcome = session.outcome
    if result.detail.startswith("refused"):
        raise ProtocolError(f"party {args.id}: {result.detail.removeprefix('refused: ')} refused, as its policy "
                            f"({session.policy.describe()}) or its checks require; the session is over")
    if result.detail.startswith("aborted"):
        raise ProtocolError(f"party {args.id}: the coordinator aborted the session ({result.detail}); "
                            "any decoded values are not a session result")
    if outcome is None:
        raise ProtocolError(f"party {args.id}: the coordinator ended the session before a solution "
                            f"({result.detail or 'no reason given'})")
    name = pb.SolveStatus.Name(outcome.status).removeprefix("SOLVE_STATUS_").lower()
    print(f"party {args.id}: session ended: status {name}, objective {outcome.objective:.15g}", flush=True)
    return _status_exit(outcome.status)
