"""Transport benchmark: moving a masked block A_.j B_.j' (m x k doubles, the dominant
O(m k) message of Mangasarian's PPLP) from one party to the coordinator.

For each size m = k and repetition, one fresh party session answers hello + mask over
(1) the in-process link (protobuf serialization + chunk framing, no socket),
(2) gRPC with mutual TLS to a server thread in this process (loopback), and
(3) gRPC with mutual TLS to a separate ``securelp party`` process (``LocalParties``;
process start excluded). The party's own masking time (``compute_seconds``, reported by
the party) is subtracted, so the figure is serialization + framing + TLS + transfer.
A is sparse (1 % density) so masking stays cheap; the masked block is dense regardless.
Reports medians over ``--repeat`` runs and the throughput in MB/s. Usage::

    python -m benchmarks.bench_grpc --sizes 500,1000,2000,3000 --repeat 5 [--out results.jsonl]

Each run appends one JSON line per size to ``benchmarks/results/grpc.jsonl`` (:mod:`benchmarks.results`);
``python -m benchmarks.render`` puts the newest run's table into docs/benchmarks/grpc.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchmarks.results import (
    append_run,
    describe_run,
    latest_run,
    load,
    median,
    one_line_errors,
    results_path,
    run_context,
)
from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.grpc_link import local_grpc_links
from securelp.coordinator.launcher import LocalParties
from securelp.coordinator.reporting import check_writable
from securelp.coordinator.transport import InProcessLink
from securelp.party.session import PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.lp.partition import ColumnBlock

NAME = "grpc"


def _block(m: int, k: int, seed: int) -> ColumnBlock:
    rng = np.random.default_rng(seed)
    A = sp.random(m, k, density=0.01, random_state=rng, format="csc")
    return ColumnBlock("bench", A, rng.uniform(-1, 1, k), np.full(k, -np.inf), np.full(k, np.inf))


def _one_mask(link, m: int, k: int) -> tuple[float, int]:
    link.hello(pb.HelloRequest(session_id="bench", protocol_version=1, n_rows=m))
    start = time.perf_counter()
    reply = link.mask(pb.MaskRequest(session_id="bench", bounds_mode=pb.BOUNDS_MODE_MONOMIAL, k=k, reveal=False))
    wall = time.perf_counter() - start
    link.close(pb.CloseRequest(session_id="bench", reason="done"))
    return wall - reply.compute_seconds, link.bytes_sent


def run(sizes: list[int], repeat: int) -> list[tuple[dict, dict]]:
    rows = []
    for m in sizes:
        times: dict[str, list[float]] = {"inprocess": [], "grpc_thread": [], "grpc_process": []}
        payload = 0
        for r in range(repeat):
            block = _block(m, m, r)
            t, payload = _one_mask(InProcessLink(PartySession(block)), m, m)
            times["inprocess"].append(t)
            with tempfile.TemporaryDirectory() as tmp, \
                    local_grpc_links([PartySession(block)], Path(tmp), deadline_s=300) as (link,):
                t, _ = _one_mask(link, m, m)
                times["grpc_thread"].append(t)
            with tempfile.TemporaryDirectory() as tmp, LocalParties([block], Path(tmp)) as cluster:
                (link,) = cluster.links(deadline_s=300)
                t, _ = _one_mask(link, m, m)
                times["grpc_process"].append(t)
        med = {k: median(v) for k, v in times.items()}
        rows.append(({"m": m, "k": m, "repeat": repeat},
                     {"payload_bytes": payload, **{f"{k}_s": v for k, v in med.items()},
                      **{f"{k}_MBps": payload / v / 1e6 for k, v in med.items()}}))
        print(f"m=k={m:5d}  payload {payload / 1e6:7.1f} MB  "
              + "  ".join(f"{k} {med[k]:.4f} s ({payload / med[k] / 1e6:.0f} MB/s)" for k in times), flush=True)
    return rows


def table(records: list[dict]) -> str:
    """The docs table of the newest run: seconds and MB/s per size and transport."""
    run_lines = latest_run(records)
    rows = [("| m = k | payload MB | in-process s (MB/s) | gRPC + mTLS, thread s (MB/s) | "
            "gRPC + mTLS, process s (MB/s) |"), "|---:|---:|---:|---:|---:|"]
    for r in run_lines:
        c, f = r["case"], r["figures"]
        cells = [f"{f[f'{t}_s']:.4f} ({f[f'{t}_MBps']:.0f})" for t in ("inprocess", "grpc_thread", "grpc_process")]
        rows.append(f"| {c['m']:,} | {f['payload_bytes'] / 1e6:.1f} | " + " | ".join(cells) + " |")
    return ("\n".join(rows) + f"\n\nMedians of {run_lines[0]['case']['repeat']} repetitions; the party's own masking "
            "time is subtracted. " + describe_run(run_lines[0]) + "\n")


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,1000,2000,3000")
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_argument("--out", type=Path, default=results_path(NAME),
                    help="JSON lines to append the run to (default benchmarks/results/grpc.jsonl)")
    args = ap.parse_args(argv)
    check_writable(str(args.out), "--out")  # before the runs, not after them
    context = run_context(NAME, argv)
    append_run(args.out, context, run([int(s) for s in args.sizes.split(",")], args.repeat))
    print(table(load(args.out)))
    return 0


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
