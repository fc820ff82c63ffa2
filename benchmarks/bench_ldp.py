"""Benchmarks of the local d-privacy engine (``securelp ldp``); prints Markdown tables.

1. LE at scale: the structured (BTTB/FFT + PCG) LE on grids up to 100 x 100 (m = 10,000)
   with the Gowalla prior, stage by stage; optionally the dense alternative (build
   E + Cholesky) for comparison (``--dense-baseline``, ~1.6 GB and ~25 s at m = 10,000).
2. Gu Fig. 1 style: LE theory vs simulation of Error_range and MSE_freq across eps.
3. Baselines side by side (le, grr, oue, em, pl) on one grid and several eps.

Usage::

    python benchmarks/bench_ldp.py [--users N] [--dense-baseline] [--json out.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from securelp.coordinator.commands.common import positive_int
from securelp.solvers.errors import SecureLPError
from securelp.solvers.ldp import GridDomain, simulate

GOWALLA = Path(__file__).resolve().parents[1] / "solvers" / "data" / "mdp" / "paris_gowalla_global_100x100.csv"


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    return f"{v:.4g}"


def le_at_scale(users: int, dense_baseline: bool) -> list[dict]:
    rows = []
    print("\n### 1. LE at scale (eps = 10 per km, 100 m cells, range r = 100 m)\n")
    print("| grid | m | prior | build+verify s | simulate s | estimate s | theory s | total s | verification | Error_range emp / theory | MSE_freq emp / theory (method) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (20, 50, 100):
        prior = None
        prior_name = "uniform"
        if n == 100:
            prior = np.loadtxt(GOWALLA, delimiter=",")
            prior_name = "Gowalla Paris"
        r = simulate(GridDomain(n, n, 0.1), "le", 10.0, users, prior=prior, radius=0.1, seed="bench-le")
        t = r.timings
        print(f"| {n}x{n} | {r.m} | {prior_name} | {t['build_and_verify_s']:.3f} | {t['simulate_s']:.3f} | "
              f"{t['estimate_s']:.3f} | {t['theory_s']:.3f} | {r.time_s:.3f} | {r.verification['method']} | "
              f"{_fmt(r.error_range)} / {_fmt(r.error_range_theory)} | {_fmt(r.mse_freq)} / {_fmt(r.mse_freq_theory)} "
              f"({r.mse_freq_theory_method}, se {_fmt(r.mse_freq_theory_stderr)}) |")
        rows.append({"grid": n, **r.as_dict()})
    if dense_baseline:
        import scipy.linalg as sla

        n = 100
        t0 = time.perf_counter()
        dom = GridDomain(n, n, 0.1)
        E = np.exp(-10.0 * dom.distance_matrix())
        t1 = time.perf_counter()
        fac = sla.cho_factor(E, lower=True, overwrite_a=True, check_finite=False)
        t2 = time.perf_counter()
        p = sla.cho_solve(fac, np.ones(dom.m))
        t3 = time.perf_counter()
        print(f"\nDense alternative at m = 10,000: build E {t1 - t0:.2f} s, Cholesky {t2 - t1:.2f} s, "
              f"solve {t3 - t2:.3f} s, total {t3 - t0:.2f} s (min p = {p.min():.4g}); the structured LE above "
              f"needs no m x m matrix.")
        rows.append({"dense_build_s": t1 - t0, "dense_cholesky_s": t2 - t1, "dense_solve_s": t3 - t2})
        del E, fac
    return rows


def fig1(users: int) -> list[dict]:
    rows = []
    print("\n### 2. LE: theory vs simulation (Gu Fig. 1 style), 15x15 grid of 1 km cells, uniform prior, r = 1 km\n")
    print(f"Each empirical figure is the mean of 5 independent runs of {users:,} users (seeds bench-fig1-eps-i).\n")
    print("| eps /km | Error_range emp | Error_range theory | MSE_freq emp | MSE_freq theory | emp/theory MSE |")
    print("|---|---|---|---|---|---|")
    for eps in (0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0):
        try:
            runs = [simulate(GridDomain(15, 15, 1.0), "le", eps, users, radius=1.0, seed=f"bench-fig1-{eps}-{i}")
                    for i in range(5)]
        except SecureLPError as exc:
            print(f"| {eps} | LE does not exist: {str(exc)[:80]}... | | | | |")
            continue
        er = float(np.mean([r.error_range for r in runs]))
        mse = float(np.mean([r.mse_freq for r in runs]))
        th = runs[0]
        print(f"| {eps} | {er:.4f} | {th.error_range_theory:.4f} | {mse:.4g} | {th.mse_freq_theory:.4g} | "
              f"{mse / th.mse_freq_theory:.3f} |")
        rows.append({"eps": eps, "error_range": er, "error_range_theory": th.error_range_theory,
                     "mse_freq": mse, "mse_freq_theory": th.mse_freq_theory})
    return rows


def baselines(users: int) -> list[dict]:
    rows = []
    print(f"\n### 3. Mechanisms side by side, 20x20 grid of 1 km cells, uniform prior, r = 1 km, {users:,} users\n")
    print("| eps /km | mechanism | Error_range emp / theory | MSE_freq emp / theory | verification | time s |")
    print("|---|---|---|---|---|---|")
    for eps in (1.0, 2.0, 4.0):
        for mech in ("le", "grr", "oue", "em", "pl"):
            try:
                r = simulate(GridDomain(20, 20, 1.0), mech, eps, users, radius=1.0, seed=f"bench-base-{eps}-{mech}")
            except SecureLPError as exc:
                print(f"| {eps} | {mech} | error: {str(exc)[:70]} | | | |")
                continue
            print(f"| {eps} | {mech} | {_fmt(r.error_range)} / {_fmt(r.error_range_theory)} | "
                  f"{_fmt(r.mse_freq)} / {_fmt(r.mse_freq_theory)} | {r.verification['method']} "
                  f"(viol {_fmt(r.verification['max_mdp_violation'])}) | {r.time_s:.2f} |")
            rows.append(r.as_dict())
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=positive_int, default=100_000)
    ap.add_argument("--dense-baseline", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from securelp.coordinator.reporting import check_writable

    check_writable(args.json, "--json")  # before the runs, not after them
    out = {
        "le_at_scale": le_at_scale(args.users, args.dense_baseline),
        "fig1": fig1(min(args.users, 20_000)),
        "baselines": baselines(args.users),
    }
    if args.json:
        from securelp.coordinator.reporting import write_json_report

        write_json_report(args.json, out)


if __name__ == "__main__":
    main()
