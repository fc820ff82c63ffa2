"""Shaped links: what a secure-LP session costs over a network of given latency and bandwidth.

Each case runs one session of three parties over gRPC with mutual TLS (party servers in this
process, dial-in) with every link shaped by the user-space proxy (``securelp.coordinator.shaping``;
the same as ``--link latency=..,bandwidth=..``), on Mangasarian's Examples 1 and 2 and a dense
3,000 x 300 instance built like them, at one-way latencies of 0, 10, 50 and 200 ms and bandwidths of
10 Mbit/s, 100 Mbit/s and 1 Gbit/s. Measured: the session's time (hello to close, the
coordinator's ``total``), the bytes the parties sent, and the calls per party, read from the
coordinator's transcript. The round trips a session costs are measured, not assumed: the extra
seconds at the largest latency over those at 0 ms, divided by its round-trip time. Usage::

    python -m benchmarks.bench_links [--lps example1,example2,3000x300] [--latencies 0,10,50,200]
                                     [--bandwidths 10mbit,100mbit,1gbit] [--repeat 1]

Each run appends one JSON line per case to ``benchmarks/results/links.jsonl``
(:mod:`benchmarks.results`); ``python -m benchmarks.render`` puts the newest run's table into
docs/benchmarks/grpc.md.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

import numpy as np

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
from securelp.coordinator.examples import mangasarian_example, random_solvable_lp
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.reporting import check_writable
from securelp.coordinator.shaping import parse_link_shape
from securelp.coordinator.simulation import owners_consent, simulated_links
from securelp.coordinator.transcript import Direction, read_transcript, run_recorded
from securelp.solvers.lp.partition import split_columns

NAME = "links"


def _instance(name: str):
    if name.startswith("example"):
        lp, split, _ = mangasarian_example(int(name.removeprefix("example")))
        return lp, split
    m, n = (int(v) for v in name.lower().split("x"))
    lp, _ = random_solvable_lp(m, n, np.random.default_rng(0), name=f"random-{m}x{n}")
    return lp, (n // 2, (3 * n) // 10, n - n // 2 - (3 * n) // 10)


def _session(public, blocks, shape_text: str, workdir: Path) -> tuple[float, int, dict[str, int], float]:
    config = SessionConfig(deadline_s=600.0)
    shapes = {b.party_id: parse_link_shape(shape_text) for b in blocks} if shape_text else None
    path = workdir / "session.transcript"
    start = time.perf_counter()
    with simulated_links(blocks, "grpc", policy=owners_consent(config), deadline_s=600.0,
                         link_shapes=shapes) as links:
        outcome, _ = run_recorded(public, links, config, path=str(path), run=run_secure_lp)
    wall = time.perf_counter() - start
    transcript = read_transcript(path)
    calls = collections.Counter(r.party_id for r in transcript.records if r.direction is Direction.TO_PARTY)
    sent = sum(len(r.payload) for r in transcript.records if r.direction is Direction.FROM_PARTY)
    if outcome.status.value != "optimal":
        raise RuntimeError(f"session ended {outcome.status.value}")
    return outcome.timings_s["total"], sent, dict(calls), wall


def run(lps: list[str], latencies: list[float], bandwidths: list[str], repeat: int) -> list[tuple[dict, dict]]:
    rows = []
    for name in lps:
        lp, split = _instance(name)
        public, blocks = split_columns(lp, split)
        for bandwidth in bandwidths:
            for latency in latencies:
                shape = ",".join(p for p in (f"latency={latency:g}ms" if latency else "",
                                             f"bandwidth={bandwidth}") if p)
                totals, walls = [], []
                for _ in range(repeat):
                    with tempfile.TemporaryDirectory() as tmp:
                        total, sent, calls, wall = _session(public, blocks, shape, Path(tmp))
                    totals.append(total)
                    walls.append(wall)
                rows.append(({"lp": name, "m": lp.n_rows, "n": lp.n_cols, "latency_ms": latency,
                              "bandwidth": bandwidth, "repeat": repeat},
                             {"session_s": median(totals), "wall_s": median(walls), "bytes_to_coordinator": sent,
                              "calls_per_party": max(calls.values())}))
                print(f"{name:10s} {bandwidth:>8s} {latency:5g} ms: session {median(totals):8.3f} s, "
                      f"{sent / 1e6:7.2f} MB to the coordinator, {max(calls.values())} calls per party", flush=True)
    return rows


def table(records: list[dict]) -> str:
    """The docs table of the newest run: session seconds per LP, bandwidth and latency."""
    lines = latest_run(records)
    latencies = sorted({r["case"]["latency_ms"] for r in lines})
    head = ("| LP | MB to the coordinator | calls per party | bandwidth | "
            + " | ".join(f"{lat:g} ms" for lat in latencies) + " | round trips |")
    rows = [head, "|---|---:|---:|---|" + "---:|" * (len(latencies) + 1)]
    by = {(r["case"]["lp"], r["case"]["bandwidth"], r["case"]["latency_ms"]): r["figures"] for r in lines}
    seen: list[tuple[str, str]] = list(dict.fromkeys((r["case"]["lp"], r["case"]["bandwidth"]) for r in lines))
    top = max(latencies)
    for lp, bw in seen:
        any_fig = next(by[(lp, bw, lat)] for lat in latencies if (lp, bw, lat) in by)
        cells = [f"{by[(lp, bw, lat)]['session_s']:.2f}" if (lp, bw, lat) in by else "-" for lat in latencies]
        trips = "-"
        if top > 0 and (lp, bw, 0) in by and (lp, bw, top) in by:
            extra = by[(lp, bw, top)]["session_s"] - by[(lp, bw, 0)]["session_s"]
            # a negative difference is the machine's noise exceeding the latency's effect
            trips = f"{extra / (2 * top / 1e3):.1f}" if extra > 0 else "- (noise)"
        rows.append(f"| {lp} | {any_fig['bytes_to_coordinator'] / 1e6:.2f} | {any_fig['calls_per_party']} | {bw} | "
                    + " | ".join(cells) + f" | {trips} |")
    note = ("\n\nSeconds of one session (hello to close), three parties over gRPC with mutual TLS, every link shaped "
            "by the user-space proxy at the one-way latency of the column and the bandwidth of the row (each "
            f"direction). Round trips: the extra seconds at {top:g} ms over 0 ms, divided by the round-trip time "
            f"{2 * top:g} ms. " + describe_run(lines[0]) + "\n")
    return "\n".join(rows) + note


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lps", default="example1,example2,3000x300")
    ap.add_argument("--latencies", default="0,10,50,200", help="one-way latencies in ms")
    ap.add_argument("--bandwidths", default="10mbit,100mbit,1gbit")
    ap.add_argument("--repeat", type=positive_int, default=1)
    ap.add_argument("--out", type=Path, default=results_path(NAME),
                    help="JSON lines to append the run to (default benchmarks/results/links.jsonl)")
    args = ap.parse_args(argv)
    check_writable(str(args.out), "--out")
    for bw in args.bandwidths.split(","):
        parse_link_shape(f"bandwidth={bw}")  # a malformed rate is refused before any session runs
    context = run_context(NAME, argv)
    append_run(args.out, context, run([s for s in args.lps.split(",") if s],
                                      [float(v) for v in args.latencies.split(",")],
                                      [b for b in args.bandwidths.split(",") if b], args.repeat))
    print(table(load(args.out)))
    return 0


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
