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

Each configuration is one JSON line (machine with the load average at its start, command, commit,
date, figures) appended to ``benchmarks/results/federated.jsonl``. Usage::

    python -m benchmarks.bench_federated
    python -m benchmarks.bench_federated --parties 3,10 --transports inprocess --users 100000
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from securelp.coordinator.census_federated import simulate_release
from securelp.coordinator.ldp_collect import simulate_collection
from securelp.party.ldp_collect import MechanismSpec
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.hierarchy.synthetic import census_synthetic

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "federated.jsonl"


def _machine() -> dict[str, object]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "memory_bytes": mem, "python": platform.python_version(),
            "platform": platform.platform(), "load_average_at_start": list(os.getloadavg())}


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{'+uncommitted' if dirty else ''}"


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


def census_line(data: GroupSizeData, parties: int, transport: str, mechanism: str, eps: Fraction) -> dict[str, object]:
    sub = data if parties >= 51 else first_states(data, parties)
    with tempfile.TemporaryDirectory(prefix="securelp-bench-") as tmp:
        sim = simulate_release(sub, party_level=2, mechanism=mechanism, eps=eps, transport=transport,
                               workdir=tmp)
    o = sim.outcome
    metrics = mech.release_metrics(sub.hierarchy, o.release.counts, o.total)
    return {"protocol": "census-federated", "parties": len(o.parties), "transport": transport, "mechanism": mechanism,
            "eps": str(eps), "regions": sub.hierarchy.size, "max_size": sub.max_size,
            "figures": {"session_s": sim.seconds, "phase_s": o.phase_s,
                        "seconds_per_party": sim.seconds / len(o.parties),
                        "bytes_sent_per_party_mean": float(np.mean(o.bytes_sent)),
                        "bytes_sent_per_party_max": int(np.max(o.bytes_sent)),
                        "bytes_received_per_party_mean": float(np.mean(o.bytes_received)),
                        "bytes_received_per_party_max": int(np.max(o.bytes_received)),
                        "constraint_violations": metrics["constraint_violations"],
                        "negative_counts": metrics["negative_counts"],
                        "non_integer_counts": metrics["non_integer_counts"],
                        "total_matches": metrics["total_matches"]}}


def ldp_line(users: int, clients: int, transport: str) -> dict[str, object]:
    spec = MechanismSpec("le", 1.0, 10, 10, 1.0)
    values = np.random.default_rng(0).integers(0, spec.m, users)
    with tempfile.TemporaryDirectory(prefix="securelp-bench-") as tmp:
        sim = simulate_collection(np.array_split(values, clients), spec, transport=transport, workdir=tmp,
                                  record=False)
    o = sim.outcome
    sent = int(sum(o.bytes_sent))
    return {"protocol": "ldp-collect", "users": users, "clients": clients, "transport": transport,
            "mechanism": "le", "eps": 1.0, "m": spec.m,
            "figures": {"seconds": sim.seconds, "build_s": sim.build_s, "phase_s": o.phase_s,
                        "users_per_s": users / sim.seconds, "seconds_per_user": sim.seconds / users,
                        "bytes_sent": sent, "bytes_per_user": sent / users, "chunks": o.chunks,
                        "estimate_sum": float(o.estimate.sum())}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parties", default="3,10,51", help="census party counts (default 3,10,51)")
    p.add_argument("--transports", default="inprocess,grpc")
    p.add_argument("--mechanism", default="hdp", choices=mech.MECHANISMS)
    p.add_argument("--max-size", type=int, default=100, help="N of the synthetic census (default 100)")
    p.add_argument("--users", type=int, default=10**6, help="LDP users (default 10^6; 0: no LDP run)")
    p.add_argument("--clients", type=int, default=4, help="LDP clients (default 4)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    header = {"command": " ".join(shlex.quote(a) for a in ["python", "-m", "benchmarks.bench_federated",
                                                           *(sys.argv[1:] if argv is None else argv)]),
              "commit": _commit()}
    transports = [t for t in args.transports.split(",") if t]
    data = census_synthetic(max_size=args.max_size, seed=0)
    lines = []
    for parties in [int(k) for k in args.parties.split(",") if k]:
        for transport in transports:
            lines.append(("census", lambda parties=parties, transport=transport: census_line(
                data, parties, transport, args.mechanism, Fraction(1))))
    if args.users:
        for transport in transports:
            lines.append(("ldp", lambda transport=transport: ldp_line(args.users, args.clients, transport)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for _, make in lines:
        machine = _machine()
        start = time.perf_counter()
        line = make()
        record = {"machine": machine, **header,
                  "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **line,
                  "wall_s": time.perf_counter() - start, "load_average_at_end": list(os.getloadavg())}
        with args.out.open("a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        print(json.dumps({k: record[k] for k in ("protocol", "transport") if k in record} | {
            "parties": record.get("parties", record.get("clients")), "figures": record["figures"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
