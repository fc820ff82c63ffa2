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

    python -m benchmarks.bench_grpc --sizes 500,1000,2000,3000 --repeat 5 [--json out.json]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.grpc_link import local_grpc_links
from securelp.coordinator.launcher import LocalParties
from securelp.coordinator.reporting import check_writable, write_json_report
from securelp.coordinator.transport import InProcessLink
from securelp.party.session import PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.lp.partition import ColumnBlock


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


def run(sizes: list[int], repeat: int) -> list[dict]:
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
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {"m": m, "k": m, "payload_bytes": payload, **{f"{k}_s": v for k, v in med.items()},
               **{f"{k}_MBps": payload / v / 1e6 for k, v in med.items()}}
        rows.append(row)
        print(f"m=k={m:5d}  payload {payload / 1e6:7.1f} MB  "
              + "  ".join(f"{k} {med[k]:.4f} s ({payload / med[k] / 1e6:.0f} MB/s)" for k in times), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,1000,2000,3000")
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    check_writable(args.json, "--json")  # before the runs, not after them
    rows = run([int(s) for s in args.sizes.split(",")], args.repeat)
    if args.json:
        write_json_report(args.json, rows)


if __name__ == "__main__":
    main()
