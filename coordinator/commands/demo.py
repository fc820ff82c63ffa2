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
    add_link_argument,
    add_output_arguments,
    add_results_argument,
    add_secure_aggregation_argument,
    check_output_dir,
    link_shapes,
    non_negative_int,
    not_private_seed_help,
    positive_float,
    print_summary,
)
from securelp.coordinator.examples import EXAMPLES, mangasarian_example
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.report import build_report, format_report
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.coordinator.simulation import DIRECTIONS, audit_simulation, owners_consent, simulate
from securelp.coordinator.transcript import run_recorded
from securelp.solvers.errors import ConfigError, TransportError
from securelp.solvers.files import write_atomically
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
    p.add_argument("--direction", choices=DIRECTIONS, default="dial-in",
                   help="dial-in: the coordinator dials the parties (default); dial-out: the parties dial a "
                        "listening coordinator (no inbound port at a party)")
    p.add_argument("--hosts", choices=["local", "netns"], default="local",
                   help="local: every process on this host's loopback (default); netns: the coordinator and each "
                        "party in its own Linux network namespace with its own address on a private bridge "
                        "(root only; everything is removed afterwards)")
    add_link_argument(p)
    add_results_argument(p)
    add_output_arguments(p)
    add_transcript_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_output_dir(args.out)
    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)])
    if args.transport == "inprocess" and (args.hosts != "local" or args.link or args.direction != "dial-in"):
        raise ConfigError("--hosts netns, --link and --direction dial-out need --transport grpc (in-process parties "
                          "have no network)")
    if args.hosts == "netns":
        if args.out:
            raise ConfigError("--out collects the owners' files of local parties; with --hosts netns each party "
                              "keeps its x_j in its own host (securelp party --out)")
        if args.link:
            raise ConfigError("--link shapes loopback links of --hosts local; namespace hosts have real (virtual) "
                              "links of their own")
        from securelp.coordinator.netns import check_netns_available

        check_netns_available()
    lp, split, known_value = mangasarian_example(args.example, seed=args.data_seed)
    public, blocks = split_columns(lp, split, ids=[f"owner{i + 1}" for i in range(len(split))])
    shapes = link_shapes(args, [b.party_id for b in blocks])
    config = SessionConfig(bounds_mode=args.bounds, reveal=args.reveal, deadline_s=args.deadline,
                           secure_aggregation=args.secure_aggregation)
    policy = owners_consent(config)  # the demo plays every owner: they agree to what it asks
    start = time.perf_counter()
    if args.transport == "inprocess":
        sessions: list = []
        outcome, audit = simulate(public, blocks, config, transport="inprocess", central=lp, seed=args.seed,
                                  transcript_path=args.transcript, audit_budget_s=args.audit_budget, policy=policy,
                                  keepalive_s=args.keepalive, sessions_out=sessions)
        owned = {s.party_id: _owner_result(s.result(), s.block.column_names) for s in sessions}
        startup = 0.0
    elif args.hosts == "netns":
        return _run_on_namespaces(args, public, blocks, config, policy, known_value)
    else:
        from securelp.coordinator.exit_cleanups import private_tempdir
        from securelp.coordinator.launcher import LocalParties  # lazy: processes only when asked for

        # keys and the owners' blocks: removed however the run ends (SIGTERM and a forced exit too)
        with private_tempdir("securelp-demo-") as tmp, \
                LocalParties(blocks, tmp, policy=policy, seed=args.seed, keepalive_s=args.keepalive,
                             connect=args.direction == "dial-out", link_shapes=shapes,
                             outputs=args.out is not None) as cluster:
            startup = time.perf_counter() - start
            links = cluster.links(deadline_s=args.deadline)
            outcome, transcript = run_recorded(public, links, config, central=lp, path=args.transcript,
                                               run=run_secure_lp)
            cluster.wait(10.0)  # each party writes its own file as its session closes
            owned = _owner_files(cluster.result_path, blocks) if args.out else {}
        audit = audit_simulation(transcript, blocks, budget_s=args.audit_budget)
    lines = [format_report(outcome, title=f"securelp demo: Mangasarian example {args.example}", audit=audit),
             f"  known optimal value {known_value:.15g} (from the construction)"]
    if args.transport == "grpc":
        lines.append(f"  party processes started in {startup:.2f} s and stopped; certificates were temporary")
    extra: dict = {"example": args.example, "known_objective": known_value, "process_start_s": startup}
    if args.out:
        extra["results"] = _write_owned(args.out, outcome, lp, owned)
        lines.append(f"  results: each party's x_j in {args.out}/<party>.csv, the public part in "
                     f"{extra['results']['public']}")
    print_summary(args, "\n".join(lines))
    if args.json:
        write_json_report(args.json, build_report(outcome, audit, extra=extra))
    return int(STATUS_EXIT[outcome.status])


def _owner_result(result, columns) -> tuple:
    """An owner's (column names, x_j) from its session's result (x_j None without an optimum)."""
    return (columns, None) if result is None else (result.column_names, result.x)


def _owner_files(path_of, blocks) -> dict:
    """Each owner's (column names, x_j) from the file its own process wrote (``party --out``)."""
    from securelp.party.results import read_party_solution

    owned = {}
    for block in blocks:
        path = path_of(block.party_id)
        owned[block.party_id] = read_party_solution(path) if path.exists() else (block.column_names, None)
    return owned


def _write_owned(directory: str, outcome, lp, owned: dict) -> dict:
    """``--out DIR``: each owner's file and the public part (status, objective, row duals)."""
    from securelp.coordinator.api.lp import write_result_files

    optimal = outcome.status.value == "optimal"
    rows = lp.row_names or tuple(f"r{i + 1}" for i in range(lp.n_rows))
    return write_result_files(directory, outcome.status.value, outcome.objective if optimal else None, rows,
                              outcome.row_duals if optimal else None,
                              {pid: (cols, x if optimal else None) for pid, (cols, x) in owned.items()})


def _run_on_namespaces(args: argparse.Namespace, public, blocks, config: SessionConfig, policy, known_value: float) -> int:
    """``--hosts netns``: the coordinator and every party as processes in their own namespaces; prints
    the coordinator's summary and writes its report with the hosts' addresses."""
    from securelp.coordinator.exit_cleanups import private_tempdir
    from securelp.coordinator.netns_session import run_on_namespaces

    with private_tempdir("securelp-demo-") as tmp:
        run = run_on_namespaces(public, blocks, config, tmp, policy=policy, direction=args.direction,
                                keepalive_s=args.keepalive, transcript=args.transcript is not None, seed=args.seed)
        if run.transcript is not None and args.transcript:
            write_atomically(args.transcript, run.transcript.read_bytes())
    hosts = ", ".join(f"{h} {a}" for h, a in run.addresses.items())
    where = f"  hosts: network namespaces on a private bridge ({hosts}), {args.direction}; removed"
    # the coordinator's own stdout, without the LISTENING line a listening coordinator prints for tools
    summary = "\n".join(line for line in run.summary.rstrip("\n").splitlines() if not line.startswith("LISTENING "))
    print_summary(args, "\n".join([summary,
                                   f"  known optimal value {known_value:.15g} (from the construction)", where]))
    if run.report is None:
        raise TransportError(f"the coordinator exited with code {run.exit_code} without a report")
    if args.json:
        write_json_report(args.json, {**run.report, "example": args.example, "known_objective": known_value,
                                      "hosts": {"kind": "netns", "direction": args.direction,
                                                "addresses": run.addresses}})
    return run.exit_code
