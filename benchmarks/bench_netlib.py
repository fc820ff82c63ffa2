"""Netlib sweep: every MPS file through the secure protocol (3 parties), both transports.

For each file: the centralized HiGHS optimum, netlib's published value (with e226's
objective-constant convention noted), the secure optimum in-process and over gRPC with
mutual TLS (party servers in threads of this process), relative differences and times.
Usage::

    python -m benchmarks.bench_netlib [--dir ../shared/data/netlib] [--bounds monomial] [--transports inprocess,grpc]

Each run appends one JSON line per file and transport to ``benchmarks/results/netlib.jsonl``
(:mod:`benchmarks.results`); ``python -m benchmarks.render`` puts the newest run's table into
docs/benchmarks/pplp.md. Exit code 1 when a secure optimum is more than 1e-8 from the central one.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from benchmarks.results import (
    append_run,
    describe_run,
    latest_run,
    one_line_errors,
    results_path,
    run_context,
    shared_data,
)
from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.reporting import check_writable
from securelp.coordinator.simulation import simulate
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import parse_split, split_columns

NAME = "netlib"
DEFAULT_DIR = shared_data("netlib")


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--parties", type=positive_int, default=3)
    ap.add_argument("--bounds", default="monomial")
    ap.add_argument("--transports", default="inprocess,grpc")
    ap.add_argument("--only", default=None, help="comma-separated problem names")
    ap.add_argument("--out", type=Path, default=results_path(NAME),
                    help="JSON lines to append the run to (default benchmarks/results/netlib.jsonl)")
    args = ap.parse_args(argv)
    check_writable(str(args.out), "--out")  # before the runs, not after them
    context = run_context(NAME, argv)
    published = {}
    table = args.dir / "optimal_values.csv"
    if table.is_file():
        published = {r["name"]: float(r["optimal_objective"]) for r in csv.DictReader(table.open())}
    files = sorted(args.dir.glob("*.mps"))
    if args.only:
        wanted = set(args.only.split(","))
        files = [f for f in files if f.stem in wanted]
    rows = []
    worst = 0.0
    print(f"{'problem':<10} {'m':>5} {'n':>5} {'transport':<10} {'status':<8} {'rel diff central':>16} "
          f"{'rel diff netlib':>15} {'secure s':>9} {'central s':>9}")
    for f in files:
        lp = read_mps(f)
        public, blocks = split_columns(lp, parse_split(None, lp.n_cols, args.parties))
        for transport in args.transports.split(","):
            t0 = time.perf_counter()
            outcome, audit = simulate(public, blocks, SessionConfig(bounds_mode=args.bounds), transport=transport,
                                       central=lp)
            elapsed = time.perf_counter() - t0
            pub = published.get(f.stem)
            # netlib's table reports c'x without the MPS objective constant (e226)
            rel_pub = abs(outcome.objective - lp.offset - pub) / max(1.0, abs(pub)) if pub is not None else None
            rel = outcome.objective_rel_diff
            worst = max(worst, rel if rel is not None else float("inf"))
            rows.append(({"problem": f.stem, "m": lp.n_rows, "n": lp.n_cols, "transport": transport,
                          "parties": args.parties, "bounds": args.bounds},
                         {"status": outcome.status.value, "objective": outcome.objective,
                          "central_objective": outcome.central_objective, "objective_rel_diff": rel,
                          "published_rel_diff": rel_pub, "secure_total_s": outcome.timings_s["total"],
                          "central_s": outcome.central_time_s, "wall_s": elapsed,
                          "audit_claims_hold": audit.claims_hold}))
            print(f"{f.stem:<10} {lp.n_rows:>5} {lp.n_cols:>5} {transport:<10} {outcome.status.value:<8} "
                  f"{rel if rel is not None else float('nan'):>16.2e} "
                  f"{rel_pub if rel_pub is not None else float('nan'):>15.2e} "
                  f"{outcome.timings_s['total']:>9.3f} {outcome.central_time_s or 0:>9.3f}")
    print(f"worst relative difference secure vs central: {worst:.2e} over {len(rows)} runs")
    append_run(args.out, context, rows)
    return 0 if worst <= 1e-8 else 1


def table(records: list[dict]) -> str:
    """The docs table of the newest run: per file and transport, the distance to the central optimum."""
    run = latest_run(records)
    rows = [("| problem | m x n | transport | status | rel. diff to central | rel. diff to netlib | secure s | "
            "central s |"), "|---|---|---|---|---:|---:|---:|---:|"]

    def e(v: float | None) -> str:
        return "-" if v is None else f"{v:.1e}"

    for r in run:
        c, f = r["case"], r["figures"]
        rows.append(f"| {c['problem']} | {c['m']} x {c['n']} | {c['transport']} | {f['status']} | "
                    f"{e(f['objective_rel_diff'])} | {e(f['published_rel_diff'])} | {f['secure_total_s']:.3f} | "
                    f"{f['central_s']:.3f} |")
    c = run[0]["case"]
    return ("\n".join(rows) + f"\n\n{c['parties']} parties, bounds mode {c['bounds']}. " + describe_run(run[0])
            + "\n")


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
