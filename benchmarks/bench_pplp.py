"""PPLP benchmark: Mangasarian's Examples 1 and 2, side by side in one run.

For each example and repetition: the centralized HiGHS solve (wall time of
``HighsBackend.solve`` on the whole LP, same backend and options as the coordinator),
the secure protocol in-process (hello to close), and the secure protocol over gRPC with
mutual TLS and three real party processes (hello to close; process start excluded and
reported separately). Reports medians over ``--repeat`` runs and the ratios
secure / central. Usage::

    python -m benchmarks.bench_pplp --repeat 5 [--extra 300x3000,3000x300] [--out results.jsonl]

Each run appends one JSON line per instance to ``benchmarks/results/pplp.jsonl``
(:mod:`benchmarks.results`); ``python -m benchmarks.render`` puts the newest run's table into
docs/benchmarks/pplp.md.

``--extra MxN,...`` adds instances built exactly like the examples (A ~ U[-50,50], a known
solution, half the rows active) at other sizes, split 50/30/20 among three parties, to show
how the secure/central ratio moves when the solve grows faster than the masking.
"""

from __future__ import annotations

import argparse
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
from securelp.coordinator.simulation import simulated_links
from securelp.solvers.lp import HighsBackend
from securelp.solvers.lp.partition import split_columns

NAME = "pplp"


def _central(lp) -> tuple[float, float]:
    start = time.perf_counter()
    res = HighsBackend().solve(lp)
    return time.perf_counter() - start, res.objective


def _inprocess(public, blocks) -> tuple[float, float, dict]:
    with simulated_links(blocks, "inprocess") as links:
        out = run_secure_lp(public, links, SessionConfig())
    return out.timings_s["total"], out.objective, out.timings_s


def _grpc_processes(public, blocks) -> tuple[float, float, dict, float]:
    from securelp.coordinator.launcher import LocalParties

    with tempfile.TemporaryDirectory(prefix="securelp-bench-") as tmp:
        t0 = time.perf_counter()
        with LocalParties(blocks, Path(tmp)) as cluster:
            startup = time.perf_counter() - t0
            links = cluster.links()
            out = run_secure_lp(public, links, SessionConfig())
    return out.timings_s["total"], out.objective, out.timings_s, startup


def measure(args: argparse.Namespace) -> list[tuple[dict, dict]]:
    """Run every instance ``--repeat`` times; one (case, figures) pair per instance."""
    instances: list[tuple[str, object, tuple[int, ...]]] = []
    for ex in [int(e) for e in args.examples.split(",") if e]:
        lp, split, _ = mangasarian_example(ex)
        instances.append((f"example {ex}", lp, split))
    for spec in [e for e in (args.extra or "").split(",") if e]:
        m, n = (int(v) for v in spec.lower().split("x"))
        lp, _ = random_solvable_lp(m, n, np.random.default_rng(0), name=f"random-{m}x{n}")
        split = (n // 2, (3 * n) // 10, n - n // 2 - (3 * n) // 10)
        instances.append((f"{m}x{n}", lp, split))
    cases = []
    for ex, lp, split in instances:
        public, blocks = split_columns(lp, split)
        res: dict[str, list] = {"central": [], "inprocess": [], "grpc": [], "grpc_start": [], "rel": []}
        phases: dict[str, list[dict]] = {"inprocess": [], "grpc": []}
        for _ in range(args.repeat):
            tc, obj_c = _central(lp)
            ti, obj_i, ph_i = _inprocess(public, blocks)
            res["central"].append(tc)
            res["inprocess"].append(ti)
            phases["inprocess"].append(ph_i)
            res["rel"].append(abs(obj_i - obj_c) / abs(obj_c))
            if not args.no_grpc:
                tg, obj_g, ph_g, st = _grpc_processes(public, blocks)
                res["grpc"].append(tg)
                res["grpc_start"].append(st)
                phases["grpc"].append(ph_g)
                res["rel"].append(abs(obj_g - obj_c) / abs(obj_c))
        med = {k: median(v) for k, v in res.items() if v and k != "rel"}
        figures = {"median_s": med, "max_objective_rel_diff": max(res["rel"]),
                   "ratio_inprocess": med["inprocess"] / med["central"],
                   "ratio_grpc": med["grpc"] / med["central"] if "grpc" in med else None,
                   "median_phases_s": {t: {k: median([p[k] for p in ps]) for k in ps[0]}
                                       for t, ps in phases.items() if ps}}
        cases.append(({"instance": ex, "m": lp.n_rows, "n": lp.n_cols, "split": list(split), "repeat": args.repeat},
                      figures))
        print(f"{ex} (m={lp.n_rows}, n={lp.n_cols}), medians of {args.repeat}: central {med['central']:.4f} s, "
              f"secure in-process {med['inprocess']:.4f} s (x{figures['ratio_inprocess']:.2f})"
              + (f", secure gRPC+mTLS 3 processes {med['grpc']:.4f} s (x{figures['ratio_grpc']:.2f}; process start "
                 f"{med['grpc_start']:.2f} s excluded)" if "grpc" in med else "")
              + f", max objective rel diff {figures['max_objective_rel_diff']:.2e}", flush=True)
    return cases


def table(records: list[dict]) -> str:
    """The docs table of the newest run: medians per instance, ratios to the central solve."""
    run = latest_run(records)
    rows = [("| instance | m x n | central s | secure in-process s (ratio) | secure gRPC + mTLS s (ratio) | "
            "process start s | max objective rel. diff |"), "|---|---|---:|---:|---:|---:|---:|"]
    for r in run:
        c, f = r["case"], r["figures"]
        med = f["median_s"]
        grpc = f"{med['grpc']:.4f} ({f['ratio_grpc']:.2f}x)" if "grpc" in med else "not run"
        start = f"{med['grpc_start']:.2f}" if "grpc_start" in med else "-"
        rows.append(f"| {c['instance']} | {c['m']:,} x {c['n']:,} | {med['central']:.4f} | "
                    f"{med['inprocess']:.4f} ({f['ratio_inprocess']:.2f}x) | {grpc} | {start} | "
                    f"{f['max_objective_rel_diff']:.1e} |")
    return "\n".join(rows) + f"\n\nMedians of {run[0]['case']['repeat']} repetitions. " + describe_run(run[0]) + "\n"


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_argument("--examples", default="1,2")
    ap.add_argument("--extra", default="", help="more instances, e.g. 300x3000,3000x300")
    ap.add_argument("--no-grpc", action="store_true")
    ap.add_argument("--out", type=Path, default=results_path(NAME),
                    help="JSON lines to append the run to (default benchmarks/results/pplp.jsonl)")
    args = ap.parse_args(argv)
    check_writable(str(args.out), "--out")  # before the runs, not after them
    context = run_context(NAME, argv)
    cases = measure(args)
    append_run(args.out, context, cases)
    print(table(load(args.out)))
    return 0


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
