"""Federated protocols benchmark: ``census-federated`` at 3, 10 and 51 state parties and ``ldp-collect``
at 10^6 users, in-process and over gRPC, in one run.

Census: the bundled synthetic nation/state/county instance (``census_synthetic``, 2010 county
populations), one party per state. For k < 51 parties the hierarchy is the nation above the first k
states (in the file's order) and their counties, the nation's counts the sum of theirs. Each session:
mechanism ``hdp`` (the default; ``--mechanism``), eps 1, N = ``--max-size``. Transports: in-process
(every message through protobuf and the runtime's frames) and gRPC (one server per party in this
process on 127.0.0.1, port 0, mutual TLS with fresh certificates; certificate generation excluded).
Figures: session seconds (hello to close) and per phase, bytes sent and received per party (mean
and max, serialized payloads), and the release's checks (consistent, non-negative, total right).

LDP: ``--users`` users (uniform on a 10 x 10 grid, eps 1, the Linear-Equations mechanism) split
among ``--clients`` clients; figures: seconds end to end (mechanism build excluded, reported apart),
users per second, seconds and bytes per user.

Each configuration is one JSON line (``benchmarks.results``: bench, run id, date, commit, command,
machine with its load average, case, figures) appended to ``benchmarks/results/federated.jsonl``;
``python -m benchmarks.render`` writes the tables of docs/howto/federated-census.md and
docs/howto/ldp-collection.md from them (:func:`table_census`, :func:`table_ldp`). Usage::

    python -m benchmarks.bench_federated
    python -m benchmarks.bench_federated --parties 3,10 --transports inprocess --users 100000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results import append_run, describe_run, latest_run, one_line_errors, results_path, run_context
from securelp.coordinator.census_federated import simulate_release
from securelp.coordinator.ldp_collect import simulate_collection
from securelp.party.ldp_collect import MechanismSpec
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.hierarchy.synthetic import census_synthetic

BENCH = "federated"


def first_states(data: GroupSizeData, k: int) -> GroupSizeData:
    """The nation above its first ``k`` states and their counties (the nation's counts recomputed)."""
    hier = data.hierarchy
    states = [r for r in range(hier.size) if int(hier.level[r]) == 2][:k]
    keep = [0] + [r for r in range(1, hier.size)
                  if (int(hier.level[r]) == 2 and r in states) or (int(hier.level[r]) == 3
                                                                    and int(hier.parent[r]) in states)]
    parents = ["" if r == 0 else hier.ids[int(hier.parent[r])] for r in keep]
    sub = Hierarchy.from_parents([hier.ids[r] for r in keep], parents)
    index = {rid: r for r, rid in enumerate(hier.ids)}
    counts = np.asarray(data.counts)[[index[rid] for rid in sub.ids]].copy()
    counts[0] = counts[[i for i in range(sub.size) if int(sub.level[i]) == 2]].sum(axis=0)
    return GroupSizeData(sub, counts)


def census_line(data: GroupSizeData, parties: int, transport: str, mechanism: str,
                eps: Fraction) -> tuple[dict[str, Any], dict[str, Any]]:
    sub = data if parties >= 51 else first_states(data, parties)
    with tempfile.TemporaryDirectory(prefix="securelp-bench-") as tmp:
        sim = simulate_release(sub, party_level=2, mechanism=mechanism, eps=eps, transport=transport,
                               workdir=tmp)
    o = sim.outcome
    metrics = mech.release_metrics(sub.hierarchy, o.release.counts, o.total)
    case = {"protocol": "census-federated", "parties": len(o.parties), "transport": transport, "mechanism": mechanism,
            "eps": str(eps), "regions": sub.hierarchy.size, "max_size": sub.max_size}
    return case, {"session_s": sim.seconds, "phase_s": o.phase_s,
                        "seconds_per_party": sim.seconds / len(o.parties),
                        "bytes_sent_per_party_mean": float(np.mean(o.bytes_sent)),
                        "bytes_sent_per_party_max": int(np.max(o.bytes_sent)),
                        "bytes_received_per_party_mean": float(np.mean(o.bytes_received)),
                        "bytes_received_per_party_max": int(np.max(o.bytes_received)),
                        "constraint_violations": metrics["constraint_violations"],
                        "negative_counts": metrics["negative_counts"],
                        "non_integer_counts": metrics["non_integer_counts"],
                        "total_matches": metrics["total_matches"]}


def ldp_line(users: int, clients: int, transport: str) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = MechanismSpec("le", 1.0, 10, 10, 1.0)
    values = np.random.default_rng(0).integers(0, spec.m, users)
    with tempfile.TemporaryDirectory(prefix="securelp-bench-") as tmp:
        sim = simulate_collection(np.array_split(values, clients), spec, transport=transport, workdir=tmp,
                                  record=False)
    o = sim.outcome
    sent = int(sum(o.bytes_sent))
    case = {"protocol": "ldp-collect", "users": users, "parties": clients, "transport": transport,
            "mechanism": "le", "eps": 1.0, "m": spec.m}
    return case, {"seconds": sim.seconds, "build_s": sim.build_s, "phase_s": o.phase_s,
                        "users_per_s": users / sim.seconds, "seconds_per_user": sim.seconds / users,
                        "bytes_sent": sent, "bytes_per_user": sent / users, "chunks": o.chunks,
                        "estimate_sum": float(o.estimate.sum())}


def table_census(records: list[dict[str, Any]]) -> str:
    """The census table of the newest run (docs/howto/federated-census.md)."""
    run = [r for r in latest_run(records) if r["case"]["protocol"] == "census-federated"]
    rows = [("| parties | transport | regions | session s | measure s | post-processing s | bytes sent / party | "
            "bytes received / party | load avg |"), "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in run:
        c, f = r["case"], r["figures"]
        rows.append(f"| {c['parties']} | {c['transport']} | {c['regions']:,} | {f['session_s']:.2f} | "
                    f"{f['phase_s']['measure']:.2f} | {f['phase_s']['postprocess']:.2f} | "
                    f"{f['bytes_sent_per_party_mean']:,.0f} | {f['bytes_received_per_party_mean']:,.0f} | "
                    f"{r['machine']['load_average'][0]:.1f} |")
    first = run[0]["case"] if run else {}
    return "\n".join(rows) + (f"\n\nSynthetic census, {first.get('mechanism')}, eps {first.get('eps')}, N = "
                              f"{first.get('max_size')}. {describe_run(run[0])}" if run else "")


def table_ldp(records: list[dict[str, Any]]) -> str:
    """The LDP collection table of the newest run (docs/howto/ldp-collection.md)."""
    run = [r for r in latest_run(records) if r["case"]["protocol"] == "ldp-collect"]
    rows = [("| users | parties | transport | seconds | users / s | microseconds / user | bytes / user | build s | "
            "load avg |"), "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in run:
        c, f = r["case"], r["figures"]
        rows.append(f"| {c['users']:,} | {c['parties']} | {c['transport']} | {f['seconds']:.2f} | "
                    f"{f['users_per_s']:,.0f} | {f['seconds_per_user'] * 1e6:.2f} | {f['bytes_per_user']:.3f} | "
                    f"{f['build_s']:.2f} | {r['machine']['load_average'][0]:.1f} |")
    return "\n".join(rows) + (f"\n\n{run[0]['case']['mechanism']} on a 10 x 10 grid, eps {run[0]['case']['eps']}; "
                              f"the mechanism's build is excluded from the seconds. {describe_run(run[0])}"
                              if run else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parties", default="3,10,51", help="census party counts (default 3,10,51)")
    p.add_argument("--transports", default="inprocess,grpc")
    p.add_argument("--mechanism", default="hdp", choices=mech.MECHANISMS)
    p.add_argument("--max-size", type=int, default=100, help="N of the synthetic census (default 100)")
    p.add_argument("--users", type=int, default=10**6, help="LDP users (default 10^6; 0: no LDP run)")
    p.add_argument("--clients", type=int, default=4, help="LDP client parties (default 4)")
    p.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    args = p.parse_args(argv)
    context = run_context(BENCH, argv)
    transports = [t for t in args.transports.split(",") if t]
    data = census_synthetic(max_size=args.max_size, seed=0)
    cases = []
    for parties in [int(k) for k in args.parties.split(",") if k]:
        for transport in transports:
            case, figures = census_line(data, parties, transport, args.mechanism, Fraction(1))
            figures["load_average_at_end"] = list(os.getloadavg())
            cases.append((case, figures))
            print(case, f"{figures['session_s']:.2f} s", flush=True)
    if args.users:
        for transport in transports:
            case, figures = ldp_line(args.users, args.clients, transport)
            figures["load_average_at_end"] = list(os.getloadavg())
            cases.append((case, figures))
            print(case, f"{figures['seconds']:.2f} s", flush=True)
    append_run(results_path(BENCH, args.out), context, cases)
    return 0


if __name__ == "__main__":
    sys.exit(one_line_errors(BENCH, main)())
