"""``securelp census``: hierarchical DP group-size releases (PGSR).

``securelp census release (--data FILE | --synthetic census) --eps E --mechanism M
[--seed S] [--repeat R] --json R [--out released.csv]`` adds exact geometric noise to the
true counts (or cumulative counts) and post-processes them; ``securelp census postprocess
--noisy FILE --total G --mechanism M --json R [--out F]`` only post-processes given noisy
values. JSON keys are documented in docs/census.md.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from typing import Any

import numpy as np

from securelp.coordinator.commands.common import non_negative_int, positive_int, refuse_inapplicable
from securelp.coordinator.reporting import check_distinct, check_writable, quiet_output, write_json_report
from securelp.solvers.errors import InputError
from securelp.solvers.files import write_atomically, written_together
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.model import MAX_COUNT, counts_csv_text, parse_epsilon, read_counts_csv, read_noisy_csv
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)


#: Default wall-clock limit (s) of one chain release from the CLI (the library has none).
CHAIN_TIME_LIMIT = 1800.0


def _add_time_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", type=float, default=CHAIN_TIME_LIMIT, metavar="SECONDS",
                   help=f"chain only: give up (no release, exit 12) when one exact solve has not been certified "
                        f"after this many seconds (default {CHAIN_TIME_LIMIT:g}; 0: no limit)")


def _time_limit(args: argparse.Namespace) -> float | None:
    """The checked --time-limit: seconds, or None for 0 (no limit)."""
    value = args.time_limit
    if value == 0:
        return None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"--time-limit must be a positive number of seconds (or 0 for no limit), got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "census",
        help="hierarchical DP group-size releases (PGSR)",
        description="Consistent differentially private releases of hierarchical group-size counts "
        "(Fioretto, Van Hentenryck, Zhu, AIJ 2021). See docs/census.md.",
    )
    csub = p.add_subparsers(dest="census_command", metavar="ACTION")
    csub.required = True
    r = csub.add_parser("release", help="add exact geometric noise and post-process",
                        description="Release noisy, post-processed group-size counts of a hierarchy.")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="FILE", help="CSV level,region_id,parent_id,size,count")
    src.add_argument("--synthetic", choices=["census"], help="the bundled census-scale synthetic instance")
    r.add_argument("--eps", required=True, help="privacy budget eps > 0 (decimal, read exactly)")
    r.add_argument("--mechanism", required=True, choices=mech.MECHANISMS)
    r.add_argument("--seed", default=None, help="reproducible-simulation mode: seed of the noise (flagged in the report; "
                                                "NOT private, simulations only)")
    r.add_argument("--repeat", type=positive_int, default=1, metavar="R", help="independent releases (default 1)")
    r.add_argument("--max-size", type=positive_int, default=None, metavar="N",
                   help="largest group size (default: the data's; synthetic: 1000)")
    r.add_argument("--synthetic-seed", type=non_negative_int, default=None,
                   help="--synthetic only: seed of the synthetic instance (default 0)")
    r.add_argument("--total", type=non_negative_int, default=None, metavar="G",
                   help="optional check: the public total G must equal the data's number of groups")
    r.add_argument("--json", required=True, metavar="PATH", help="JSON report ('-' for stdout)")
    r.add_argument("--out", metavar="CSV", default=None, help="write the (last) released counts here")
    _add_time_limit(r)
    r.set_defaults(func=run_release)
    q = csub.add_parser("postprocess", help="post-process given noisy values only",
                        description="Post-process noisy values (CSV level,region_id,parent_id,size,noisy_count): "
                        "noisy counts for hdp/hqp/topdown, noisy cumulative counts c_s = #groups of size >= s "
                        "for cdp/cqp/chain.")
    q.add_argument("--noisy", required=True, metavar="FILE")
    q.add_argument("--total", required=True, type=non_negative_int, metavar="G", help="public number of groups G")
    q.add_argument("--mechanism", required=True, choices=mech.MECHANISMS)
    q.add_argument("--max-size", type=positive_int, default=None, metavar="N",
                   help="largest group size (default: the largest size in the file)")
    q.add_argument("--cumulative-order", choices=["ge", "le"], default=None,
                   help="cdp/chain/cqp only: ge (default) c_s = #groups of size >= s (c_1 = total); "
                        "le: c_s = #groups of size <= s (c_N = total)")
    q.add_argument("--json", required=True, metavar="PATH", help="JSON report ('-' for stdout)")
    q.add_argument("--out", metavar="CSV", default=None, help="write the post-processed counts here")
    _add_time_limit(q)
    q.set_defaults(func=run_postprocess)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _check_total(total: int | None) -> None:
    """--total within the bound on counts (2**50), as the data files."""
    if total is not None and total > MAX_COUNT:
        raise InputError(f"--total {total} exceeds the largest accepted total 2**50 = {MAX_COUNT:,}")


def _progress(args: argparse.Namespace, text: str) -> None:
    if not quiet_output(args.json):
        print(text, file=sys.stderr, flush=True)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means (and standard deviations) of the per-run metrics."""
    out: dict[str, Any] = {}
    for key in ("objective", "constraint_violations", "negative_counts", "non_integer_counts", "time_s"):
        vals = np.array([float(r[key]) for r in runs])
        out[key] = float(vals.mean()) if len(runs) > 1 else runs[0][key]
        out[f"{key}_sd"] = float(vals.std(ddof=1)) if len(runs) > 1 else 0.0
    out["total_matches"] = all(bool(r["total_matches"]) for r in runs)
    if runs[0]["l1_error_by_level"] is not None:
        levels = list(runs[0]["l1_error_by_level"])
        mat = np.array([[r["l1_error_by_level"][lev] for lev in levels] for r in runs])
        out["l1_error_by_level"] = {lev: float(v) for lev, v in zip(levels, mat.mean(axis=0))}
        out["l1_error_by_level_sd"] = {
            lev: (float(v) if len(runs) > 1 else 0.0)
            for lev, v in zip(levels, mat.std(axis=0, ddof=1) if len(runs) > 1 else np.zeros(len(levels)))
        }
    else:
        out["l1_error_by_level"] = None
        out["l1_error_by_level_sd"] = None
    return out


def _check_outputs(args: argparse.Namespace) -> None:
    """The report and counts paths, before any work."""
    check_writable(args.json, "--json")
    check_writable(args.out, "--out")
    inputs = [(flag, getattr(args, key, None)) for flag, key in (("--data", "data"), ("--noisy", "noisy"))]
    check_distinct([("--json", args.json), ("--out", args.out)], inputs)


def run_release(args: argparse.Namespace) -> int:
    _check_outputs(args)
    eps = parse_epsilon(args.eps)
    time_limit = _time_limit(args)
    _check_total(args.total)
    if args.data and args.synthetic_seed is not None:
        raise InputError("--synthetic-seed is for --synthetic census only; --data FILE is read as it is "
                         "(remove --synthetic-seed)")
    if args.seed is not None:
        logger.warning("--seed: the noise is reproducible, so this release is NOT private (simulations only)")
    bytes_per_cell = mech.BYTES_PER_CELL[args.mechanism]
    if args.data:
        data = read_counts_csv(args.data, max_size=args.max_size, bytes_per_cell=bytes_per_cell)
        source = args.data
    else:
        from securelp.solvers.hierarchy.synthetic import census_synthetic

        seed = args.synthetic_seed or 0
        data = census_synthetic(max_size=args.max_size or 1000, seed=seed, bytes_per_cell=bytes_per_cell)
        source = f"synthetic:census(seed={seed})"
    total = data.total
    if args.total is not None and args.total != total:
        raise InputError(f"--total {args.total} does not match the data's number of groups G = {total}")
    hier = data.hierarchy
    scale = mech.noise_scale(args.mechanism, hier.depth, eps)
    rng = SecureRandom(seed=args.seed, label="census/release")
    runs: list[dict[str, Any]] = []
    last = None
    for k in range(args.repeat):
        start = time.perf_counter()
        noisy = mech.add_noise(args.mechanism, data, eps, rng.spawn(f"run{k}"))
        noise_time = time.perf_counter() - start
        pp = mech.postprocess(args.mechanism, hier, noisy, total, time_limit=time_limit)
        metrics = mech.release_metrics(hier, pp.counts, total, data.counts)
        runs.append({
            "run": k,
            "objective": pp.objective,
            **metrics,
            "time_s": noise_time + pp.time_s,
            "noise_time_s": noise_time,
            "postprocess_time_s": pp.time_s,
            "details": pp.details,
        })
        last = pp
        proof = f" (certificate: {pp.details['certificate']})" if "certificate" in pp.details else ""
        _progress(args, f"census release {args.mechanism} eps={args.eps}: run {k + 1}/{args.repeat} "
                        f"in {noise_time + pp.time_s:.2f}s{proof}")
    assert last is not None
    report: dict[str, Any] = {
        "mechanism": args.mechanism,
        **_summary(runs),
        "eps": float(eps),
        "eps_exact": str(eps),
        "noise": "two-sided geometric (exact CKS sampler), "
                 + ("cumulative counts" if args.mechanism in mech.CUMULATIVE else "counts"),
        "noise_scale": float(scale),
        "reproducible": rng.reproducible,
        "seed": args.seed,
        "repeat": args.repeat,
        "dataset": {"source": source, "regions": hier.size, "levels": hier.depth,
                    "max_size": data.max_size, "total": total},
        "runs": runs,
    }
    with written_together():  # the counts and the report that describes them, together or not at all
        if args.out:
            write_atomically(args.out, counts_csv_text(hier, last.counts))
        write_json_report(args.json, report)
    return 0


def run_postprocess(args: argparse.Namespace) -> int:
    _check_outputs(args)
    time_limit = _time_limit(args)
    _check_total(args.total)
    refuse_inapplicable(args, "--mechanism", args.mechanism, {
        "cumulative_order": ("--cumulative-order", tuple(m for m in mech.MECHANISMS if m in mech.CUMULATIVE))})
    noisy = read_noisy_csv(args.noisy, max_size=args.max_size, bytes_per_cell=mech.BYTES_PER_CELL[args.mechanism])
    hier = noisy.hierarchy
    values = noisy.values
    reverse = args.mechanism in mech.CUMULATIVE and args.cumulative_order == "le"
    if reverse:  # c^le on sizes 1..N is c^ge on the reversed size axis
        values = values[:, ::-1].copy()
    start = time.perf_counter()
    pp = mech.postprocess(args.mechanism, hier, values, args.total, time_limit=time_limit)
    if reverse:
        pp = mech.PostProcessed(pp.mechanism, pp.counts[:, ::-1].copy(), pp.objective, pp.time_s, pp.details)
    elapsed = time.perf_counter() - start
    metrics = mech.release_metrics(hier, pp.counts, args.total, None)
    report: dict[str, Any] = {
        "mechanism": args.mechanism,
        "objective": pp.objective,
        **metrics,
        "time_s": elapsed,
        "input": (f"cumulative counts c_s = #groups of size {'<=' if reverse else '>='} s"
                  if args.mechanism in mech.CUMULATIVE else "group-size counts"),
        "dataset": {"source": args.noisy, "regions": hier.size, "levels": hier.depth,
                    "max_size": int(noisy.values.shape[1]), "total": args.total},
        "details": pp.details,
    }
    if args.mechanism in mech.CUMULATIVE:
        from securelp.solvers.hierarchy.cumulative import to_cumulative

        cum = np.cumsum(pp.counts, axis=1) if reverse else to_cumulative(pp.counts)
        report["cumulative_counts"] = {
            hier.ids[r]: cum[r].tolist() for r in range(hier.size)
        } if pp.counts.size <= 10_000 else None
    report["counts"] = {hier.ids[r]: pp.counts[r].tolist() for r in range(hier.size)} if pp.counts.size <= 10_000 else None
    with written_together():
        if args.out:
            write_atomically(args.out, counts_csv_text(hier, pp.counts))
        write_json_report(args.json, report)
    _progress(args, f"census postprocess {args.mechanism}: objective {pp.objective:g} in {elapsed:.2f}s")
    return 0
