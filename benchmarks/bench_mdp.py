"""Benchmark: direct (HiGHS on the whole PMO) vs BD (records: Qiu; columns: ours), and partition statistics.

Usage:
    python -m benchmarks.bench_mdp partitions            # Tables 1-2 style statistics (M = 25)
    python -m benchmarks.bench_mdp solve NAME [--method bd --decomposition columns] [--cap S]  # one instance: rome, grid20x25_eps1, grid20x25_eps10,
                                                         # gaussian1000, gaussian2000, grid10x10_eps1
    python -m benchmarks.bench_mdp ipm N K [--tolerance T] [--seed S] [--threads W]
        # the structured IPM alone on K random undominated outputs of gaussian N's largest component
    python -m benchmarks.bench_mdp graph      # essential pairs: per-source search vs min-plus, side by side
    python -m benchmarks.bench_mdp scoreboard [--quick] [--direct-cap S] [--records-cap S] [--only NAME ...]
        # the engine benchmark in one run: direct vs bd (columns) vs Qiu's record bd per instance, each
        # measurement in its own process, one after the other; JSON lines, then a markdown table
``scoreboard`` appends its measurements to ``benchmarks/results/mdp.jsonl`` (:mod:`benchmarks.results`)
and ``python -m benchmarks.render`` puts the newest run's table into docs/benchmarks/mdp.md; the other
modes are diagnostics that print one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the child processes run this file as a script

from benchmarks.results import append_run, describe_run, latest_run, load, one_line_errors, results_path, run_context
from securelp.coordinator.commands.common import positive_float
from securelp.coordinator.reporting import check_writable
from securelp.solvers.errors import SecureLPError
from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.columns import solve_colgen
from securelp.solvers.mdp.columns.bounds import component_rows, undominated_outputs
from securelp.solvers.mdp.datasets import euclidean_distance, load_dataset
from securelp.solvers.mdp.direct import solve_direct
from securelp.solvers.mdp.graph import build_graph, essential_edges, pair_share
from securelp.solvers.mdp.ipm import structured_ipm
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.records import PARTITIONERS, partition_records
from securelp.solvers.resources import peak_rss

NAME = "mdp"

INSTANCES = {
    "grid6x6_eps1": ("grid", {"rows": 6, "cols": 6}, 1.0, 2.0),
    "grid10x10_eps1": ("grid", {"rows": 10, "cols": 10}, 1.0, 2.0),
    "grid20x25_eps1": ("grid", {"rows": 20, "cols": 25}, 1.0, 2.0),
    "grid20x25_eps10": ("grid", {"rows": 20, "cols": 25}, 10.0, 2.0),
    "rome": ("rome", {}, 10.0, 2.0),
    "gaussian300": ("gaussian", {"n_records": 300, "seed": 0}, 1.0, 0.5),
    "gaussian500": ("gaussian", {"n_records": 500, "seed": 0}, 1.0, 0.5),
    "gaussian1000": ("gaussian", {"n_records": 1000, "seed": 0}, 1.0, 0.5),
    "gaussian2000": ("gaussian", {"n_records": 2000, "seed": 0}, 1.0, 0.5),
}


def partitions() -> None:
    sets = [("rome", {}), ("grid", {"rows": 20, "cols": 25}), ("gaussian", {"n_records": 500, "seed": 0}),
            ("text", {"n_records": 500})]
    for name, kw in sets:
        try:
            ds = load_dataset(name, **kw)
        except SecureLPError as exc:
            print(json.dumps({"dataset": name, "error": str(exc)}), flush=True)
            continue
        g = build_graph(ds.distance, ds.default_eta)
        for method in PARTITIONERS:
            t = time.perf_counter()
            part = partition_records(method, ds.distance, g.rows, g.cols, 25, coords=ds.coords, eps=ds.default_eps)
            sizes = part.sizes
            print(json.dumps({"dataset": name, "n": ds.n, "eta": ds.default_eta, "edges": g.n_edges,
                              "components": g.n_components, "partitioner": method, "M": part.n_subsets,
                              "min_size": min(sizes), "max_size": max(sizes), "n_boundary": part.n_boundary,
                              "n_internal": ds.n - part.n_boundary, "seconds": round(time.perf_counter() - t, 3)}),
                  flush=True)


def solve(name: str, method: str, cap: float, partitioner: str, subsets: int, decomposition: str) -> None:
    ds_name, kw, eps, eta = INSTANCES[name]
    ds = load_dataset(ds_name, **kw)
    p = build_pmo(ds, eps, eta)
    row = {"instance": name, "method": method, "n": p.n, "K": p.K, "edges": p.graph.n_edges,
           "lp_rows": int(p.lp_edges[0].size * p.K + p.n), "cap_s": cap}
    t = time.perf_counter()
    try:
        if method == "direct":
            r = solve_direct(p, time_limit=cap)
        elif method == "colgen":
            r = solve_colgen(p, gap=1e-4, time_limit=cap)
        else:
            r = solve_bd(p, partitioner=partitioner, n_subsets=subsets, gap=1e-4, time_limit=cap, max_iterations=100000,
                         decomposition=decomposition)
            row.update(decomposition=decomposition)
            if decomposition == "columns":
                row.update(components=len(r.partition["sizes"]), largest_component=max(r.partition["sizes"]),
                           pricing_lp_solves=r.details["pricing_lp_solves"], n_columns=r.details["n_columns"])
        if method == "bd" and decomposition == "records":
            row.update(partitioner=partitioner, M=subsets, n_boundary=r.partition["n_boundary"],
                       mp_components=len(r.partition["mp_component_sizes"]))
        row.update(status=r.status, objective=r.objective, lower=r.lower_bound, upper=r.upper_bound,
                   rel_gap=r.rel_gap, iterations=r.iterations, time_s=round(r.time_s, 2),
                   max_mdp_violation=r.verification.max_mdp_violation)
    except SecureLPError as exc:
        row.update(status="error", error=str(exc), time_s=round(time.perf_counter() - t, 2))
    row.update(peak_rss=peak_rss())
    print(json.dumps(row), flush=True)


def ipm(n_records: int, n_outputs: int, tolerance: float, seed: int, threads: int) -> None:
    """:func:`securelp.solvers.mdp.ipm.structured_ipm` alone on ``n_outputs`` outputs drawn at random (``seed``)
    from the pairwise-undominated ones of gaussian ``n_records``'s largest component (the dataset's
    own seed 0, eps 1, eta 0.5, as ``securelp mdp --dataset gaussian``): iterations, seconds, the
    relative gap and the seconds at every 10th iteration."""
    p = build_pmo(load_dataset("gaussian", n_records=n_records, seed=0))
    idx = max(p.graph.component_members(), key=lambda g: g.size)
    kept = undominated_outputs(p.cost[idx])
    S = np.sort(np.random.default_rng(seed).choice(kept, size=min(n_outputs, kept.size), replace=False))
    G = np.ascontiguousarray(p.cost[np.ix_(idx, S)])
    A = component_rows(p, idx)
    t = time.perf_counter()
    r = structured_ipm(G, A, float("inf"), tolerance=tolerance, threads=threads, max_iterations=500)
    seconds = time.perf_counter() - t

    def gap(h: tuple[float, float, float]) -> float:
        return (h[0] - h[1]) / abs(h[0])

    print(json.dumps({"bench": "ipm", "records": int(idx.size), "mdp_rows": int(A.shape[0]), "outputs": int(S.size),
                      "seed": seed, "threads": threads, "tolerance": tolerance, "status": r.status,
                      "iterations": r.iterations, "seconds": round(seconds, 2), "bound": r.bound, "primal": r.primal,
                      "rel_gap": (r.primal - r.bound) / abs(r.primal),
                      "every_10th": [[i, float(f"{gap(h):.3g}"), round(h[2], 1)]
                                     for i, h in enumerate(r.history) if i % 10 == 0]}), flush=True)


#: the essential-pair benchmark's graphs: dataset, its parameters and eta (None: the dataset's default)
GRAPHS = {
    "text1000": ("text", {"n_records": 1000}, None),
    "points1500_complete": ("points1500", {}, 1000.0),
    "grid20x25_eta40": ("grid", {"rows": 20, "cols": 25}, 40.0),
    "grid20x25": ("grid", {"rows": 20, "cols": 25}, 2.0),
    "gaussian1000": ("gaussian", {"n_records": 1000, "seed": 0}, None),
}


def graph_bench() -> None:
    """:func:`securelp.solvers.mdp.graph.essential_edges` by both searches on each of :data:`GRAPHS`, one after
    the other: the per-source search and the blocked min-plus product (``auto`` takes it on dense
    graphs), with whether their masks agree. ``points1500_complete``: 1,500 points uniform in
    [0, 10]^2 (``numpy.random.default_rng(0)``) with every pair a neighbour."""
    for name, (ds_name, kw, eta) in GRAPHS.items():
        if ds_name == "points1500":
            d = euclidean_distance(np.random.default_rng(0).uniform(0, 10, size=(1500, 2)))
        else:
            ds = load_dataset(ds_name, **kw)
            d, eta = np.asarray(ds.distance), ds.default_eta if eta is None else eta
        g = build_graph(d, eta)
        t = time.perf_counter()
        per_source = essential_edges(d, g.rows, g.cols, search="per_source")
        t_src = time.perf_counter() - t
        t = time.perf_counter()
        minplus = essential_edges(d, g.rows, g.cols, search="min_plus")
        t_mp = time.perf_counter() - t
        print(json.dumps({"bench": "essential_edges", "graph": name, "records": int(d.shape[0]), "pairs": int(g.rows.size),
                          "kept": int(per_source.sum()), "dense_share": round(pair_share(g.rows, d.shape[0]), 4),
                          "per_source_s": round(t_src, 3), "min_plus_s": round(t_mp, 3),
                          "same_mask": bool(np.array_equal(per_source, minplus))}), flush=True)


#: the engine benchmark: instance, then (method, decomposition, cap key) in the order they run. The caps
#: are keys so that ``--direct-cap`` / ``--records-cap`` / ``--columns-cap`` set them for every row.
SCOREBOARD = (
    ("grid20x25_eps10", (("direct", "records", "direct"), ("bd", "columns", "columns"), ("bd", "records", "records"))),
    ("grid20x25_eps1", (("direct", "records", "direct"), ("bd", "columns", "columns"), ("bd", "records", "records"))),
    ("rome", (("direct", "records", "direct"), ("bd", "columns", "columns"), ("bd", "records", "records"))),
    ("gaussian1000", (("direct", "records", "direct"), ("bd", "columns", "columns"))),
    ("gaussian2000", (("direct", "records", "direct"), ("bd", "columns", "columns"))),
)

#: ``--quick``: the small instance the scoreboard's own test runs (seconds)
QUICK_SCOREBOARD = (
    ("grid6x6_eps1", (("direct", "records", "direct"), ("bd", "columns", "columns"), ("bd", "records", "records"))),
)


def _measure(args: list[str]) -> dict:
    """Run ``bench_mdp.py solve ARGS`` in a child process; its JSON row with the child's wall seconds
    and peak RSS, so one measurement's memory does not count against the next. The peak is the
    child's own (``peak_rss``); ``wait4``'s ``ru_maxrss``, which starts from this driver's peak, only
    for a child that crashed before reporting."""
    import os
    import subprocess

    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "solve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    with proc.stdout:
        out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    lines = [line for line in out.splitlines() if line.startswith("{")]
    row = json.loads(lines[-1]) if lines else {"status": "crashed", "exit_code": proc.returncode}
    peak = row.pop("peak_rss", usage.ru_maxrss * 1024)  # ru_maxrss is in KiB on Linux
    row.update(wall_s=round(wall, 2), max_rss_gb=round(peak / 2**30, 2))
    return row


def scoreboard(quick: bool, caps: dict[str, float], only: list[str] | None) -> list[dict]:
    """The mDP engine's benchmark side by side in one run (:data:`SCOREBOARD`): one JSON row per
    measurement, printed as it ends; the rows are what :func:`scoreboard_cases` records."""
    rows: list[dict] = []
    for name, runs in QUICK_SCOREBOARD if quick else SCOREBOARD:
        if only and name not in only:
            continue
        for method, decomposition, cap_key in runs:
            row = _measure([name, "--method", method, "--decomposition", decomposition, "--cap", str(caps[cap_key])])
            row.setdefault("instance", name)
            row.setdefault("method", method)
            row["decomposition"] = None if method == "direct" else decomposition
            row["cap_s"] = caps[cap_key]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


#: the keys of a scoreboard row that say what was measured (the rest is what was measured on it)
CASE_KEYS = ("instance", "method", "decomposition", "cap_s", "records", "outputs", "eps", "eta")


def scoreboard_cases(rows: list[dict]) -> list[tuple[dict, dict]]:
    """The scoreboard's rows as (case, figures) pairs for :func:`benchmarks.results.append_run`."""
    from importlib.metadata import version

    out = []
    for row in rows:
        case = {k: row[k] for k in CASE_KEYS if k in row}
        case["highspy"] = version("highspy")
        out.append((case, {k: v for k, v in row.items() if k not in CASE_KEYS}))
    return out


def table(records: list[dict]) -> str:
    """The scoreboard table of the newest run, with the ratio of ``direct``'s wall time to each decomposition's."""
    run = latest_run(records)
    rows = ["| instance | method | status | loss | lower bound | gap | wall s | max RSS GB | direct wall / this |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in dict.fromkeys(r["case"]["instance"] for r in run):
        group = [r for r in run if r["case"]["instance"] == name]
        direct = next((r for r in group if r["case"]["method"] == "direct"), None)
        for r in group:
            c, f = r["case"], r["figures"]
            label = c["method"] if c.get("decomposition") is None else f"bd {c['decomposition']}"
            ratio = "-"
            if direct is not None and r is not direct and f.get("status") == "optimal":
                ratio = f"{direct['figures']['wall_s'] / f['wall_s']:.1f}x"
                if direct["figures"].get("status") != "optimal":  # direct did not certify: a lower bound on the ratio
                    ratio = f"> {ratio} (direct: {direct['figures'].get('status')})"
            num = {key: "-" if f.get(key) is None else f"{f[key]:.7g}" for key in ("objective", "lower", "rel_gap")}
            rows.append(f"| {name} | {label} | {f.get('status')} | {num['objective']} | {num['lower']} | "
                        f"{num['rel_gap']} | {f['wall_s']} | {f['max_rss_gb']} | {ratio} |")
    return ("\n".join(rows) + f"\n\nEach measurement in its own process, one after the other (highspy "
            f"{run[0]['case']['highspy']}). " + describe_run(run[0]) + "\n")


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("partitions")
    s = sub.add_parser("solve")
    s.add_argument("name", choices=sorted(INSTANCES))
    s.add_argument("--method", choices=["direct", "bd", "colgen"], default="bd")
    s.add_argument("--cap", type=positive_float, default=600.0, help="time cap in seconds")
    s.add_argument("--partitioner", default="kmdv")
    s.add_argument("--subsets", type=int, default=25)
    s.add_argument("--decomposition", choices=["records", "columns"], default="records",
                   help="bd: Qiu's record partition (default) or by output column (docs/explanation/mdp.md)")
    i = sub.add_parser("ipm")
    i.add_argument("n_records", type=int)
    i.add_argument("n_outputs", type=int)
    i.add_argument("--tolerance", type=float, default=1e-3, help="relative gap to stop at (the IPM start probes at 1e-3)")
    i.add_argument("--seed", type=int, default=0, help="which random outputs")
    i.add_argument("--threads", type=int, default=2)
    sub.add_parser("graph")
    b = sub.add_parser("scoreboard")
    b.add_argument("--quick", action="store_true", help="the 6x6 grid only (seconds; what the test runs)")
    b.add_argument("--direct-cap", type=positive_float, default=600.0, help="HiGHS's limit on the whole PMO (seconds)")
    b.add_argument("--columns-cap", type=positive_float, default=1800.0, help="bd --decomposition columns' limit (seconds)")
    b.add_argument("--records-cap", type=positive_float, default=600.0, help="Qiu's record bd's limit (seconds)")
    b.add_argument("--only", nargs="+", metavar="NAME", choices=[name for name, _ in SCOREBOARD + QUICK_SCOREBOARD],
                   help="instances to run (default: all of the scoreboard): "
                        + ", ".join(name for name, _ in SCOREBOARD + QUICK_SCOREBOARD))
    b.add_argument("--out", type=Path, default=results_path(NAME),
                   help="JSON lines to append the run to (default benchmarks/results/mdp.jsonl)")
    a = ap.parse_args(argv)
    if a.cmd == "scoreboard":
        chosen = [name for name, _ in (QUICK_SCOREBOARD if a.quick else SCOREBOARD)]
        if a.only and not set(a.only) & set(chosen):
            ap.error(f"--only {' '.join(a.only)}: none of them is in the {'--quick ' if a.quick else ''}scoreboard "
                     f"({', '.join(chosen)})")
        check_writable(str(a.out), "--out")  # before the runs, not after them
        context = run_context(NAME, argv)
        rows = scoreboard(a.quick, {"direct": a.direct_cap, "columns": a.columns_cap, "records": a.records_cap}, a.only)
        append_run(a.out, context, scoreboard_cases(rows))
        print(table(load(a.out)))
    elif a.cmd == "graph":
        graph_bench()
    elif a.cmd == "partitions":
        partitions()
    elif a.cmd == "ipm":
        ipm(a.n_records, a.n_outputs, a.tolerance, a.seed, a.threads)
    else:
        solve(a.name, a.method, a.cap, a.partitioner, a.subsets, a.decomposition)
    return 0


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
