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
   (what releases carried before it moved to ``census evaluate``), with Clopper-Pearson 95 %
   intervals; eps-DP allows at most e^eps / (1 + e^eps).

Usage::

    python benchmarks/bench_census.py [--reps 30] [--eps 0.1 0.5 1] [--sizes 125 250 500 1000]
        [--skip-taxi] [--skip-census] [--taxi-mechanisms ...] [--lumped K --lumped-reps R]
        [--attack T] [--json out.json]

Mechanisms that refuse an instance (ResourceError: e.g. cqp beyond Dykstra's size limit,
chain beyond its LP segment limits) are reported as such, never as numbers; in Table 7 a
release refused for one noise draw (chain: a fractional LP optimum, no certificate) is counted
in the mechanism cell and the statistics are over the releases made. For chain the
"DP rounds" column of the census table is its number of LP rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy.stats import beta

from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.reporting import check_writable
from securelp.solvers.errors import SecureLPError
from securelp.solvers.files import write_atomically
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.hierarchy.synthetic import census_synthetic
from securelp.solvers.randomness import SecureRandom

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


def table7(reps: int, eps_list: list[str], seed: str, mechanisms: list[str], data=None, title: str = "Kuo taxi hierarchy") -> list[dict]:
    data = read_counts_csv(TAXI) if data is None else data
    levels = sorted(data.hierarchy.levels())
    print(f"\n### {title}: {data.hierarchy.size} regions, L = {data.hierarchy.depth}, "
          f"N = {data.max_size}, G = {data.total}; {reps} repetitions per cell\n")
    print("| eps | mechanism | L1 level 1 | L1 level 2 | L1 level 3 | violations | negative | non-integer | total = G | post-process s (mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for eps_text in eps_list:
        eps = Fraction(eps_text)
        for name in mechanisms:
            rng = SecureRandom(seed=f"{seed}/{eps_text}/{name}", label="bench")
            runs, refused = [], []
            for _ in range(reps):
                try:
                    runs.append(run_once(name, data, eps, rng))
                except SecureLPError as exc:  # a refused release (e.g. chain without a certificate)
                    refused.append(f"{type(exc).__name__}: {exc}")
            if not runs:
                print(f"| {eps_text} | {name} | not run: {refused[0]} | | | | | | | |")
                rows.append({"eps": eps_text, "mechanism": name, "error": refused[0], "refused": len(refused)})
                continue
            label = name if not refused else f"{name} ({len(runs)} released, {len(refused)} refused)"
            reps_done = len(runs)
            l1 = np.array([[r["l1_error_by_level"][str(lev)] for lev in levels] for r in runs])
            viol = np.array([r["constraint_violations"] for r in runs])
            cells = [f"{l1[:, k].mean():,.0f} ± {l1[:, k].std(ddof=1) if reps_done > 1 else 0:,.0f}" for k in range(len(levels))]
            neg = sum(r["negative_counts"] for r in runs)
            nonint = sum(r["non_integer_counts"] for r in runs)
            tot = all(r["total_matches"] for r in runs)
            post = np.mean([r["post_s"] for r in runs])
            print(f"| {eps_text} | {label} | " + " | ".join(cells)
                  + f" | {viol.mean():,.1f} ± {viol.std(ddof=1) if reps_done > 1 else 0:,.1f} | {neg} | {nonint} | {tot} | {post:.3f} |",
                  flush=True)
            rows.append({"eps": eps_text, "mechanism": name, "reps": reps_done, "refused": len(refused),
                         "refusals": refused,
                         "l1_mean": l1.mean(axis=0).tolist(), "l1_sd": (l1.std(axis=0, ddof=1) if reps_done > 1 else np.zeros(len(levels))).tolist(),
                         "violations_mean": float(viol.mean()), "negative": neg, "non_integer": nonint,
                         "total_matches": tot, "post_s_mean": float(post),
                         "post_s_max": float(max(r["post_s"] for r in runs)),
                         "details": [r["details"] for r in runs]})
    return rows


def census_scaling(sizes: list[int], eps_list: list[str], seed: str, mechanisms: list[str]) -> list[dict]:
    rows = []
    print("\n### Census-scale synthetic: post-processing time (s), one run per cell\n")
    print("| N | eps | mechanism | regions x sizes | noise s | post-process s | DP rounds | max window half-width | violations | neg | non-int | L1 level 3 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        data = census_synthetic(max_size=n, seed=0)
        for eps_text in eps_list:
            for name in mechanisms:
                rng = SecureRandom(seed=f"{seed}/{n}/{eps_text}/{name}", label="bench")
                try:
                    r = run_once(name, data, Fraction(eps_text), rng)
                except SecureLPError as exc:
                    print(f"| {n} | {eps_text} | {name} | {data.counts.size:,} | not run: {type(exc).__name__}: {exc} | | | | | | | |", flush=True)
                    rows.append({"N": n, "eps": eps_text, "mechanism": name, "error": str(exc)})
                    continue
                d = r["details"]
                print(f"| {n} | {eps_text} | {name} | {data.counts.size:,} | {r['noise_s']:.2f} | {r['post_s']:.2f} | "
                      f"{d.get('dp_rounds', d.get('lp_rounds', '-'))} | {d.get('max_window_halfwidth', '-')} | {r['constraint_violations']} | "
                      f"{r['negative_counts']} | {r['non_integer_counts']} | {r['l1_error_by_level']['3']:,.0f} |", flush=True)
                rows.append({"N": n, "eps": eps_text, "mechanism": name, **{k: v for k, v in r.items() if k != "details"},
                             "details": d})
    return rows


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


def attack(trials: int, mechanisms: list[str]) -> list[dict]:
    """Guess which neighbour a fresh-entropy release came from (module docstring, 3)."""
    x, y = _neighbours()
    h, eps = x.hierarchy, Fraction(1)
    cells = np.nonzero(y.counts != x.counts)
    coin = np.random.default_rng(0)
    bound = math.e / (1 + math.e)
    print(f"\n### Distinguishing neighbours at eps = 1 ({trials} releases each; eps-DP allows {bound:.3f})\n")
    print("| mechanism | from the release | with l1_error_by_level beside it |")
    print("|---|---|---|")
    rows = []
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
        cells_text = [f"{k / trials:.3f} (95 % CI {lo:.3f}-{hi:.3f})" for k in (plain, leak)
                      for lo, hi in [_interval(k, trials)]]
        print(f"| {name} | {cells_text[0]} | {cells_text[1]} |", flush=True)
        rows.append({"mechanism": name, "trials": trials, "release_only_correct": plain, "with_l1_correct": leak,
                     "bound": bound})
    return rows


def main() -> None:
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
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    check_writable(args.json, "--json")  # before the runs, not after them
    print("NOT PRIVATE: evaluation against the true counts (errors computed from them)", flush=True)
    out: dict = {"private": False}
    if not args.skip_taxi:
        if not TAXI.is_file():
            print(f"taxi data not found at {TAXI}; skipping table 7")
        else:
            out["table7"] = table7(args.reps, args.eps, args.seed, args.taxi_mechanisms)
    if args.lumped and TAXI.is_file():
        out["lumped"] = table7(args.lumped_reps, args.eps, args.seed, list(mech.MECHANISMS), taxi_lumped(args.lumped),
                               title=f"Kuo taxi hierarchy, sizes >= {args.lumped} lumped into one class")
    if not args.skip_census:
        out["census"] = census_scaling(args.sizes, args.census_eps, args.seed, args.census_mechanisms)
    if args.attack:
        out["attack"] = attack(args.attack, args.attack_mechanisms)
    if args.json:
        write_atomically(args.json, json.dumps(out, indent=2, default=str), what="report ")


if __name__ == "__main__":
    main()
