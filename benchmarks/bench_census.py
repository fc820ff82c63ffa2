"""Benchmarks of the hierarchical-DP engine (``securelp census``); prints Markdown tables.

NOT PRIVATE: an evaluation. Its errors are computed against the true counts (as
``securelp census evaluate``), so neither its tables nor its JSON (``"private": false``) are
releases.

1. Table 7 style on the Kuo taxi hierarchy (3 levels, N = 4,919): L1 error per level and
   consistency violations, mean and sd over R repetitions, for every mechanism and eps.
2. Census-scale synthetic (3,194 regions): post-processing time of each mechanism vs N and
   vs 1/eps, with the exactness certificate details of hdp.
3. With ``--attack T``: a distinguishing attack on two neighbouring datasets (one person moves
   from a group of size 2 to size 3), T releases at eps = 1 per mechanism: its accuracy from the
   released counts alone (what a release carries) and with ``l1_error_by_level`` beside them
   (what a release would carry if its evaluation against the truth went with it), with Clopper-Pearson 95 %
   intervals; eps-DP allows at most e^eps / (1 + e^eps).

Usage::

    python -m benchmarks.bench_census [--reps 30] [--eps 0.1 0.5 1] [--sizes 125 250 500 1000]
        [--skip-taxi] [--skip-census] [--taxi-mechanisms ...] [--lumped K --lumped-reps R]
        [--attack T] [--out results.jsonl]

Each run appends one JSON line per cell to ``benchmarks/results/census.jsonl`` (:mod:`benchmarks.results`,
``case.section`` names the part); ``python -m benchmarks.render`` puts the newest tables into
docs/benchmarks/census.md.

Mechanisms that refuse an instance (ResourceError: e.g. cqp beyond Dykstra's size limit,
chain beyond its LP segment limits) are reported as such, never as numbers; in Table 7 a
release refused for one noise draw (chain: a fractional LP optimum, no certificate) is counted
in the mechanism cell and the statistics are over the releases made. For chain the
"DP rounds" column of the census table is its number of LP rounds.
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy.stats import beta

from benchmarks.results import append_run, describe_run, latest_run, load, one_line_errors, results_path, run_context
from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.reporting import check_writable
from securelp.solvers.errors import SecureLPError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.hierarchy.synthetic import census_synthetic
from securelp.solvers.randomness import SecureRandom

NAME = "census"
TAXI = Path(__file__).resolve().parents[1] / "tests" / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"


def run_once(name: str, data, eps: Fraction, rng: SecureRandom) -> dict:
    t0 = time.perf_counter()
    noisy = mech.add_noise(name, data, eps, rng)
    t1 = time.perf_counter()
    pp = mech.postprocess(name, data.hierarchy, noisy, data.total)
    m = mech.release_metrics(data.hierarchy, pp.counts, data.total)
    l1 = mech.l1_error_by_level(data.hierarchy, pp.counts, data.counts)  # against the truth: not private
    return {"noise_s": t1 - t0, "post_s": pp.time_s, "objective": pp.objective, **m, "l1_error_by_level": l1,
            "details": pp.details}


def taxi_lumped(k: int) -> GroupSizeData:
    """The taxi hierarchy with sizes >= k lumped into one size class k ("k+")."""
    data = read_counts_csv(TAXI)
    c = data.counts[:, :k].copy()
    c[:, k - 1] += data.counts[:, k:].sum(axis=1)
    return GroupSizeData(data.hierarchy, c)


def table7(reps: int, eps_list: list[str], seed: str, mechanisms: list[str], data: GroupSizeData | None = None,
           section: str = "taxi") -> list[tuple[dict, dict]]:
    """Table 7 style: L1 error per level (mean and sd over ``reps`` releases) for every mechanism and eps."""
    data = read_counts_csv(TAXI) if data is None else data
    levels = sorted(data.hierarchy.levels())
    cases = []
    for eps_text in eps_list:
        eps = Fraction(eps_text)
        for name in mechanisms:
            case = {"section": section, "eps": eps_text, "mechanism": name, "reps": reps,
                    "regions": data.hierarchy.size, "levels": data.hierarchy.depth, "max_size": data.max_size,
                    "total": data.total}
            rng = SecureRandom(seed=f"{seed}/{eps_text}/{name}", label="bench")
            runs, refused = [], []
            for _ in range(reps):
                try:
                    runs.append(run_once(name, data, eps, rng))
                except SecureLPError as exc:  # a refused release (e.g. chain without a certificate)
                    refused.append(f"{type(exc).__name__}: {exc}")
            if not runs:
                cases.append((case, {"refused": len(refused), "error": refused[0][:300]}))
                continue
            done = len(runs)
            l1 = np.array([[r["l1_error_by_level"][str(lev)] for lev in levels] for r in runs])
            viol = np.array([r["constraint_violations"] for r in runs])
            cases.append((case, {
                "released": done, "refused": len(refused), "l1_mean": l1.mean(axis=0).tolist(),
                "l1_sd": (l1.std(axis=0, ddof=1) if done > 1 else np.zeros(len(levels))).tolist(),
                "violations_mean": float(viol.mean()), "violations_sd": float(viol.std(ddof=1)) if done > 1 else 0.0,
                "negative": int(sum(r["negative_counts"] for r in runs)),
                "non_integer": int(sum(r["non_integer_counts"] for r in runs)),
                "total_matches": all(r["total_matches"] for r in runs),
                "post_s_mean": float(np.mean([r["post_s"] for r in runs]))}))
            print(f"{section} eps={eps_text} {name}: {done} released", flush=True)
    return cases


def census_scaling(sizes: list[int], eps_list: list[str], seed: str, mechanisms: list[str]) -> list[tuple[dict, dict]]:
    """Census-scale synthetic: post-processing time of each mechanism per N and eps, one release per cell."""
    cases = []
    for n in sizes:
        data = census_synthetic(max_size=n, seed=0)
        for eps_text in eps_list:
            for name in mechanisms:
                case = {"section": "census", "N": n, "eps": eps_text, "mechanism": name, "cells": int(data.counts.size)}
                rng = SecureRandom(seed=f"{seed}/{n}/{eps_text}/{name}", label="bench")
                try:
                    r = run_once(name, data, Fraction(eps_text), rng)
                except SecureLPError as exc:
                    cases.append((case, {"error": f"{type(exc).__name__}: {exc}"[:300]}))
                    continue
                d = r["details"]
                cases.append((case, {"noise_s": r["noise_s"], "post_s": r["post_s"],
                                     "rounds": d.get("dp_rounds", d.get("lp_rounds")),
                                     "max_window_halfwidth": d.get("max_window_halfwidth"),
                                     "violations": r["constraint_violations"], "negative": r["negative_counts"],
                                     "non_integer": r["non_integer_counts"],
                                     "l1_level3": r["l1_error_by_level"]["3"]}))
                print(f"census N={n} eps={eps_text} {name}: {r['post_s']:.2f} s", flush=True)
    return cases


def _neighbours() -> tuple[GroupSizeData, GroupSizeData]:
    """A 3-level hierarchy and its neighbour: one person joins a group of size 2 in leaf a2."""
    h = Hierarchy.from_parents(["R", "A", "B", "a1", "a2", "b1"], ["", "R", "R", "A", "A", "B"])
    leaves = {"a1": [5, 3, 1, 0], "a2": [2, 2, 0, 1], "b1": [4, 1, 2, 1]}
    out = []
    for move in (False, True):
        c = np.zeros((h.size, 4), dtype=np.int64)
        for k, v in leaves.items():
            c[h.ids.index(k)] = v
        if move:
            c[h.ids.index("a2"), 1:3] += [-1, 1]
        for r in reversed(range(h.size)):
            if h.children[r]:
                c[r] = c[list(h.children[r])].sum(axis=0)
        out.append(GroupSizeData(h, c))
    return out[0], out[1]


def _interval(ok: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95 % interval of ok successes in n trials."""
    lo = float(beta.ppf(0.025, ok, n - ok + 1)) if ok else 0.0
    hi = float(beta.ppf(0.975, ok + 1, n - ok)) if ok < n else 1.0
    return lo, hi


def attack(trials: int, mechanisms: list[str]) -> list[tuple[dict, dict]]:
    """Guess which neighbour a fresh-entropy release came from (module docstring, 3)."""
    x, y = _neighbours()
    h, eps = x.hierarchy, Fraction(1)
    cells = np.nonzero(y.counts != x.counts)
    coin = np.random.default_rng(0)
    bound = math.e / (1 + math.e)
    cases = []
    for name in mechanisms:
        plain = leak = 0
        for _ in range(trials):
            secret = int(coin.integers(2))
            data = (x, y)[secret]
            pp = mech.postprocess(name, h, mech.add_noise(name, data, eps, SecureRandom(label="bench/attack")), data.total)
            # the release alone: the neighbour closer to the released counts where the two differ
            dx, dy = (float(np.abs(pp.counts[cells] - c.counts[cells]).sum()) for c in (x, y))
            plain += (int(coin.integers(2)) if dx == dy else int(dy < dx)) == secret
            # with the errors against the truth: the neighbour whose errors match the reported ones
            reported = mech.l1_error_by_level(h, pp.counts, data.counts)
            fits = [mech.l1_error_by_level(h, pp.counts, c.counts) == reported for c in (x, y)]
            leak += (int(coin.integers(2)) if fits[0] == fits[1] else int(fits[1])) == secret
        cases.append(({"section": "attack", "mechanism": name, "trials": trials, "eps": "1"},
                      {"release_only_correct": plain, "with_l1_correct": leak, "bound": bound,
                       "release_only_interval": list(_interval(plain, trials)),
                       "with_l1_interval": list(_interval(leak, trials))}))
    return cases


def _section(records: list[dict], section: str) -> list[dict]:
    """The newest run's lines of ``section`` (a run may leave some sections out)."""
    lines = [r for r in records if r["case"]["section"] == section]
    return latest_run(lines)


def table_taxi(records: list[dict], section: str = "taxi") -> str:
    """The Table 7 style table of the newest run that measured ``section``."""
    lines = _section(records, section)
    first = lines[0]["case"]
    head = "| eps | mechanism | " + " | ".join(f"L1 level {k + 1}" for k in range(first["levels"]))
    rows = [head + " | violations | negative | non-integer | total = G | post-process s (mean) |",
            "|---|---|" + "---:|" * first["levels"] + "---:|---:|---:|---|---:|"]
    for r in lines:
        c, f = r["case"], r["figures"]
        if "l1_mean" not in f:
            rows.append(f"| {c['eps']} | {c['mechanism']} | refused: {f['error'][:80]} |" + " |" * (first["levels"] + 4))
            continue
        label = c["mechanism"] if not f["refused"] else f"{c['mechanism']} ({f['released']} released, {f['refused']} refused)"
        cells = [f"{m:,.0f} ± {sd:,.0f}" for m, sd in zip(f["l1_mean"], f["l1_sd"])]
        rows.append(f"| {c['eps']} | {label} | " + " | ".join(cells)
                    + f" | {f['violations_mean']:,.1f} ± {f['violations_sd']:,.1f} | {f['negative']} | {f['non_integer']} "
                    f"| {f['total_matches']} | {f['post_s_mean']:.3f} |")
    return ("\n".join(rows) + f"\n\n{first['regions']} regions, L = {first['levels']}, N = {first['max_size']:,}, "
            f"G = {first['total']:,}; mean ± sd over {first['reps']} releases per cell. NOT PRIVATE: errors against the "
            "true counts. " + describe_run(lines[0]) + "\n")


def table_census(records: list[dict]) -> str:
    """The census-scale table of the newest run that measured it."""
    lines = _section(records, "census")
    rows = [("| N | eps | mechanism | regions x sizes | noise s | post-process s | rounds | violations | negative | "
            "non-integer | L1 level 3 |"), "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in lines:
        c, f = r["case"], r["figures"]
        if "error" in f:
            rows.append(f"| {c['N']} | {c['eps']} | {c['mechanism']} | {c['cells']:,} | not run: {f['error'][:90]} "
                        "| | | | | | |")
            continue
        rows.append(f"| {c['N']} | {c['eps']} | {c['mechanism']} | {c['cells']:,} | {f['noise_s']:.2f} | {f['post_s']:.2f} "
                    f"| {f['rounds'] if f['rounds'] is not None else '-'} | {f['violations']} | {f['negative']} | "
                    f"{f['non_integer']} | {f['l1_level3']:,.0f} |")
    return ("\n".join(rows) + "\n\nThe census-scale synthetic instance (3,194 regions: nation, 51 states, 3,142 "
            "counties), one release per cell. " + describe_run(lines[0]) + "\n")


def table_attack(records: list[dict]) -> str:
    """The distinguishing attack's table of the newest run that measured it."""
    lines = _section(records, "attack")
    rows = ["| mechanism | correct guesses from the release | with l1_error_by_level beside it |", "|---|---|---|"]
    for r in lines:
        f = r["figures"]
        t = r["case"]["trials"]
        cells = [f"{f[k] / t:.3f} (95 % CI {lo:.3f}-{hi:.3f})"
                 for k, (lo, hi) in (("release_only_correct", f["release_only_interval"]),
                                     ("with_l1_correct", f["with_l1_interval"]))]
        rows.append(f"| {r['case']['mechanism']} | {cells[0]} | {cells[1]} |")
    return ("\n".join(rows) + f"\n\n{lines[0]['case']['trials']} releases per mechanism at eps = 1; eps-DP allows at most "
            f"e/(1 + e) = {lines[0]['figures']['bound']:.3f}. " + describe_run(lines[0]) + "\n")


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=positive_int, default=30)
    ap.add_argument("--eps", nargs="+", default=["0.1", "0.5", "1"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[125, 250, 500, 1000])
    ap.add_argument("--census-eps", nargs="+", default=["1", "0.5", "0.1"])
    ap.add_argument("--taxi-mechanisms", nargs="+", default=list(mech.MECHANISMS))
    ap.add_argument("--census-mechanisms", nargs="+", default=list(mech.MECHANISMS))
    ap.add_argument("--seed", default="bench-census")
    ap.add_argument("--skip-taxi", action="store_true")
    ap.add_argument("--skip-census", action="store_true")
    ap.add_argument("--lumped", type=int, default=0, metavar="K",
                    help="also run the table on the taxi hierarchy with sizes >= K lumped (small enough for chain)")
    ap.add_argument("--lumped-reps", type=positive_int, default=10)
    ap.add_argument("--attack", type=int, default=0, metavar="T",
                    help="also run the distinguishing attack with T releases per mechanism")
    ap.add_argument("--attack-mechanisms", nargs="+", default=["hdp", "chain"])
    ap.add_argument("--out", type=Path, default=results_path(NAME),
                    help="JSON lines to append the run to (default benchmarks/results/census.jsonl)")
    args = ap.parse_args(argv)
    check_writable(str(args.out), "--out")  # before the runs, not after them
    print("NOT PRIVATE: evaluation against the true counts (errors computed from them)", flush=True)
    context = run_context(NAME, argv)
    cases: list[tuple[dict, dict]] = []
    if not args.skip_taxi:
        cases += table7(args.reps, args.eps, args.seed, args.taxi_mechanisms)
    if args.lumped:
        cases += table7(args.lumped_reps, args.eps, args.seed, list(mech.MECHANISMS), taxi_lumped(args.lumped),
                        section=f"taxi-lumped-{args.lumped}")
    if not args.skip_census:
        cases += census_scaling(args.sizes, args.census_eps, args.seed, args.census_mechanisms)
    if args.attack:
        cases += attack(args.attack, args.attack_mechanisms)
    append_run(args.out, context, cases)
    records = load(args.out)
    sections = dict.fromkeys(c["section"] for c, _ in cases)
    for section in sections:
        if section.startswith("taxi"):
            print(table_taxi(records, section))
    if "census" in sections:
        print(table_census(records))
    if "attack" in sections:
        print(table_attack(records))
    return 0


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
