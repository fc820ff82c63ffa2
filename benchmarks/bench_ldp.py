"""Benchmarks of the local d-privacy engine (``securelp ldp``).

1. LE at scale: the structured (BTTB/FFT + PCG) LE on grids up to 100 x 100 (m = 10,000)
   with the Gowalla prior, stage by stage; optionally the dense alternative (build
   E + Cholesky) for comparison (``--dense-baseline``, ~1.6 GB and ~25 s at m = 10,000).
2. Gu Fig. 1 style: LE theory vs simulation of Error_range and MSE_freq across eps.
3. Baselines side by side (le, grr, oue, em, pl) on one grid and several eps.

NOT PRIVATE: an evaluation (errors against the simulated users' true values). Usage::

    python -m benchmarks.bench_ldp [--users N] [--grids 20,50,100] [--dense-baseline] [--out results.jsonl]

Each run appends one JSON line per measured case to ``benchmarks/results/ldp.jsonl``
(:mod:`benchmarks.results`, ``case.section`` names the part); ``python -m benchmarks.render`` puts
the newest run's tables into docs/benchmarks/ldp.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.results import append_run, describe_run, latest_run, load, one_line_errors, results_path, run_context
from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.reporting import check_writable
from securelp.solvers.errors import SecureLPError
from securelp.solvers.ldp import GridDomain, simulate

NAME = "ldp"
GOWALLA = Path(__file__).resolve().parents[1] / "solvers" / "data" / "mdp" / "paris_gowalla_global_100x100.csv"
#: the timing stages of a simulation, as ``LdpResult.timings`` names them
STAGES = ("build_and_verify_s", "simulate_s", "estimate_s", "theory_s")


def _fmt(v: float | str | None) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    return f"{v:.4g}"


def le_at_scale(users: int, grids: list[int], dense_baseline: bool) -> list[tuple[dict, dict]]:
    """Section 1: LE on n x n grids of 100 m cells at eps = 10 per km (the Gowalla prior at 100 x 100)."""
    cases = []
    for n in grids:
        prior, prior_name = None, "uniform"
        if n == 100:
            prior, prior_name = np.loadtxt(GOWALLA, delimiter=","), "Gowalla Paris"
        r = simulate(GridDomain(n, n, 0.1), "le", 10.0, users, prior=prior, radius=0.1, seed="bench-le")
        cases.append(({"section": "scale", "grid": n, "m": r.m, "prior": prior_name, "users": users, "eps": 10.0},
                      {**{k: r.timings[k] for k in STAGES}, "total_s": r.time_s,
                       "verification": r.verification["method"], "error_range": r.error_range,
                       "error_range_theory": r.error_range_theory, "mse_freq": r.mse_freq,
                       "mse_freq_theory": r.mse_freq_theory, "mse_freq_theory_method": r.mse_freq_theory_method}))
        print(f"LE {n}x{n}: {r.time_s:.3f} s", flush=True)
    if dense_baseline:
        import scipy.linalg as sla

        n = 100
        t0 = time.perf_counter()
        dom = GridDomain(n, n, 0.1)
        E = np.exp(-10.0 * dom.distance_matrix())
        t1 = time.perf_counter()
        fac = sla.cho_factor(E, lower=True, overwrite_a=True, check_finite=False)
        t2 = time.perf_counter()
        sla.cho_solve(fac, np.ones(dom.m))
        t3 = time.perf_counter()
        cases.append(({"section": "dense", "grid": n, "m": dom.m},
                      {"build_s": t1 - t0, "cholesky_s": t2 - t1, "solve_s": t3 - t2, "total_s": t3 - t0}))
    return cases


def fig1(users: int, runs: int = 5) -> list[tuple[dict, dict]]:
    """Section 2: LE's empirical errors (mean of ``runs`` simulations) against its theory, 15 x 15 grid."""
    cases = []
    for eps in (0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0):
        case = {"section": "fig1", "eps": eps, "grid": 15, "users": users, "runs": runs}
        try:
            sims = [simulate(GridDomain(15, 15, 1.0), "le", eps, users, radius=1.0, seed=f"bench-fig1-{eps}-{i}")
                    for i in range(runs)]
        except SecureLPError as exc:
            cases.append((case, {"error": str(exc)[:200]}))
            continue
        th = sims[0]
        cases.append((case, {"error_range": float(np.mean([r.error_range for r in sims])),
                             "error_range_theory": th.error_range_theory,
                             "mse_freq": float(np.mean([r.mse_freq for r in sims])),
                             "mse_freq_theory": th.mse_freq_theory}))
    return cases


def baselines(users: int) -> list[tuple[dict, dict]]:
    """Section 3: every mechanism on a 20 x 20 grid of 1 km cells."""
    cases = []
    for eps in (1.0, 2.0, 4.0):
        for mech in ("le", "grr", "oue", "em", "pl"):
            case = {"section": "baselines", "eps": eps, "mechanism": mech, "grid": 20, "users": users}
            try:
                r = simulate(GridDomain(20, 20, 1.0), mech, eps, users, radius=1.0, seed=f"bench-base-{eps}-{mech}")
            except SecureLPError as exc:
                cases.append((case, {"error": str(exc)[:200]}))
                continue
            cases.append((case, {"error_range": r.error_range, "error_range_theory": r.error_range_theory,
                                 "mse_freq": r.mse_freq, "mse_freq_theory": r.mse_freq_theory,
                                 "verification": r.verification["method"],
                                 "max_mdp_violation": r.verification["max_mdp_violation"], "time_s": r.time_s}))
    return cases


def _section(records: list[dict], section: str) -> list[dict]:
    run = latest_run([r for r in records if r["case"]["section"] in ("scale", "dense", "fig1", "baselines")])
    return [r for r in run if r["case"]["section"] == section]


def table_scale(records: list[dict]) -> str:
    """Section 1's table (and the dense alternative, when it ran)."""
    lines = _section(records, "scale")
    rows = [("| grid | m | prior | build+verify s | simulate s | estimate s | theory s | total s | verification | "
            "Error_range emp / theory | MSE_freq emp / theory |"), "|---|---:|---|---:|---:|---:|---:|---:|---|---|---|"]
    for r in lines:
        c, f = r["case"], r["figures"]
        rows.append(f"| {c['grid']}x{c['grid']} | {c['m']:,} | {c['prior']} | " + " | ".join(f"{f[k]:.3f}" for k in STAGES)
                    + f" | {f['total_s']:.3f} | {f['verification']} | {_fmt(f['error_range'])} / "
                    f"{_fmt(f['error_range_theory'])} | {_fmt(f['mse_freq'])} / {_fmt(f['mse_freq_theory'])} |")
    text = "\n".join(rows) + f"\n\n{lines[0]['case']['users']:,} users, eps = 10 per km, 100 m cells, r = 100 m. "
    for r in _section(records, "dense"):
        f = r["figures"]
        text += (f"The dense alternative at m = {r['case']['m']:,}: build E {f['build_s']:.2f} s, Cholesky "
                 f"{f['cholesky_s']:.2f} s, solve {f['solve_s']:.3f} s. ")
    return text + describe_run(lines[0]) + "\n"


def table_fig1(records: list[dict]) -> str:
    """Section 2's table."""
    lines = _section(records, "fig1")
    rows = ["| eps /km | Error_range emp | Error_range theory | MSE_freq emp | MSE_freq theory | emp / theory MSE |",
            "|---:|---:|---:|---:|---:|---:|"]
    for r in lines:
        c, f = r["case"], r["figures"]
        if "error" in f:
            rows.append(f"| {c['eps']} | LE does not exist: {f['error'][:80]} | | | | |")
            continue
        rows.append(f"| {c['eps']} | {f['error_range']:.4f} | {f['error_range_theory']:.4f} | {f['mse_freq']:.4g} | "
                    f"{f['mse_freq_theory']:.4g} | {f['mse_freq'] / f['mse_freq_theory']:.3f} |")
    c = lines[0]["case"]
    return ("\n".join(rows) + f"\n\nEach empirical figure is the mean of {c['runs']} simulations of {c['users']:,} users; "
            "15 x 15 grid of 1 km cells, uniform prior, r = 1 km. " + describe_run(lines[0]) + "\n")


def table_baselines(records: list[dict]) -> str:
    """Section 3's table."""
    lines = _section(records, "baselines")
    rows = [("| eps /km | mechanism | Error_range emp / theory | MSE_freq emp / theory | verification (max violation) "
            "| time s |"), "|---:|---|---|---|---|---:|"]
    for r in lines:
        c, f = r["case"], r["figures"]
        if "error" in f:
            rows.append(f"| {c['eps']} | {c['mechanism']} | error: {f['error'][:70]} | | | |")
            continue
        rows.append(f"| {c['eps']} | {c['mechanism']} | {_fmt(f['error_range'])} / {_fmt(f['error_range_theory'])} | "
                    f"{_fmt(f['mse_freq'])} / {_fmt(f['mse_freq_theory'])} | {f['verification']} "
                    f"({_fmt(f['max_mdp_violation'])}) | {f['time_s']:.2f} |")
    return (("\n".join(rows)) + f"\n\n20 x 20 grid of 1 km cells, uniform prior, r = 1 km, "
            f"{lines[0]['case']['users']:,} users. " + describe_run(lines[0]) + "\n")


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=positive_int, default=100_000)
    ap.add_argument("--grids", default="20,50,100", help="LE at scale: n x n grids (default 20,50,100)")
    ap.add_argument("--dense-baseline", action="store_true")
    ap.add_argument("--out", type=Path, default=results_path(NAME),
                    help="JSON lines to append the run to (default benchmarks/results/ldp.jsonl)")
    args = ap.parse_args(argv)
    check_writable(str(args.out), "--out")  # before the runs, not after them
    print("NOT PRIVATE: simulation against the simulated users' true values", flush=True)
    context = run_context(NAME, argv)
    cases = le_at_scale(args.users, [int(g) for g in args.grids.split(",") if g], args.dense_baseline)
    cases += fig1(min(args.users, 20_000))
    cases += baselines(args.users)
    append_run(args.out, context, cases)
    records = load(args.out)
    for render in (table_scale, table_fig1, table_baselines):
        print(render(records))
    return 0


main = one_line_errors(NAME, _main)

if __name__ == "__main__":
    raise SystemExit(main())
