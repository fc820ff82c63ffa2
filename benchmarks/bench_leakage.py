"""Leakage benchmark: every attack of ``securelp audit`` on real and demo LPs, per protection mode.

For each LP and mode it runs one secure session with simulated parties (in-process; every
message recorded), the attacks of :mod:`securelp.coordinator.audit` on the transcript, and their
evaluation against the blocks, and appends one JSON line per run to
``benchmarks/results/leakage.jsonl`` (machine, command, commit, date, figures). Modes:

* ``monomial``: the default; every netlib column is bounded (x >= 0), so every column is under
  the positive monomial transform;
* ``rows``: every column under the dense mask, bounds sent as mask rows (Bednarz et al.);
* ``dense``: the same LP with every column bound removed, so the default mode masks every
  column densely (what the dense mask protects, on the structure of real data; the session's LP
  may be unbounded, the transcript and its attacks do not need an optimum).

``--synthetic`` adds the random sparse LP of the outside measurement (m = 300, n = 120, 4
nonzeros per column, split 60/40/20, k = 130; free columns, so dense masks only), with integer
and with Gaussian values.

``python -m benchmarks.render`` rewrites the table of docs/threat_model.md between the markers
``<!-- leakage-table:begin -->`` and ``<!-- leakage-table:end -->`` from the newest line of each
(problem, mode) in the results file (:func:`table`). ``--transport-lp SOURCESxSINKS`` writes the transportation
LP of the scaling check (supply rows <= , demand rows >=, x >= 0, integer costs) as MPS::

    python -m benchmarks.bench_leakage --netlib ../shared/data/netlib --examples
    python -m benchmarks.render
    python -m benchmarks.bench_leakage --transport-lp 200x500 --out /tmp/transport.mps
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks.results import commit
from securelp.coordinator.examples import mangasarian_example
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.simulation import owners_consent, simulate
from securelp.solvers.files import write_atomically
from securelp.solvers.lp import LinearProgram, read_mps
from securelp.solvers.lp.partition import parse_split, split_columns

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "leakage.jsonl"
BEGIN, END = "<!-- leakage-table:begin -->", "<!-- leakage-table:end -->"
MODES = ("monomial", "rows", "dense")


def transportation_lp(sources: int, sinks: int, seed: int = 0) -> LinearProgram:
    """min c'x over x_ij >= 0 with sum_j x_ij <= supply_i and sum_i x_ij >= demand_j; integer costs
    in 1..100, integer demands in 1..100, supplies covering them with 10% slack. Every coefficient
    of A is 1 (what makes the audit's matching of columns large: sources * sinks columns)."""
    rng = np.random.default_rng(seed)
    n = sources * sinks
    i = np.repeat(np.arange(sources), sinks)
    j = np.tile(np.arange(sinks), sources)
    rows = np.concatenate([i, sources + j])
    cols = np.concatenate([np.arange(n), np.arange(n)])
    A = sp.csc_matrix((np.ones(2 * n), (rows, cols)), shape=(sources + sinks, n))
    demand = rng.integers(1, 101, sinks).astype(float)
    supply = np.full(sources, np.ceil(1.1 * demand.sum() / sources))
    return LinearProgram(c=rng.integers(1, 101, n).astype(float), A=A,
                         row_lower=np.concatenate([np.full(sources, -np.inf), demand]),
                         row_upper=np.concatenate([supply, np.full(sinks, np.inf)]),
                         col_lower=np.zeros(n), col_upper=np.full(n, np.inf), name=f"transport{sources}x{sinks}")


def write_mps(lp: LinearProgram, path: Path) -> None:
    """Write ``lp`` as an MPS file (through HiGHS's writer), atomically."""
    import tempfile

    from securelp.solvers.lp.highs import new_highs, pass_lp

    h = new_highs()
    if not pass_lp(h, lp):
        raise SystemExit("HiGHS refused the LP")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lp.mps"
        h.writeModel(str(out))
        write_atomically(path, out.read_bytes())


def _free(lp: LinearProgram) -> LinearProgram:
    n = lp.n_cols
    return LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper,
                         col_lower=np.full(n, -np.inf), col_upper=np.full(n, np.inf), sense=lp.sense,
                         offset=lp.offset, name=lp.name)


def _attack_figures(audit: Any) -> dict[str, Any]:
    """Per attack: columns targeted, columns recovered exactly (truth), seconds; summed over parties."""
    out: dict[str, dict[str, Any]] = {}
    for pa in audit.parties.values():
        for o in pa.outcomes + pa.assumed:
            e = out.setdefault(o.attack, {"ran": 0, "skipped": 0, "columns": 0, "claimed": 0, "right": 0,
                                          "up_to_scale_right": 0, "positions_right": 0, "seconds": 0.0})
            e["ran"] += int(o.ran)
            e["skipped"] += int(o.status.value == "skipped")
            e["seconds"] += o.seconds
            if o.ran:
                e["columns"] += o.columns
                e["claimed"] += o.claimed
                if o.truth is not None:
                    e["right"] += int(o.truth.get("recovered_exact", 0))
                    e["up_to_scale_right"] += int(o.truth.get("recovered_up_to_scale", 0))
                    e["positions_right"] += int(o.truth.get("positions_right", 0))
                    if "max_principal_angle_sine" in o.truth:
                        e["max_principal_angle_sine"] = max(e.get("max_principal_angle_sine", 0.0),
                                                            o.truth["max_principal_angle_sine"])
                    if o.truth.get("rel_error") is not None:
                        e["gram_rel_error_max"] = max(e.get("gram_rel_error_max", 0.0), o.truth["rel_error"])
    return out


def sparse_lp(m: int, n: int, per_col: int, seed: int, *, integer: bool) -> LinearProgram:
    """The outsider's random sparse LP: ``min c'x s.t. Ax >= b``, x free, ``per_col`` nonzeros per
    column (integers 1..9 with random signs and integer costs, or Gaussian values and costs), a
    known optimum (c = A'y, y >= 0; b = A x0 less slack on inactive rows)."""
    rng = np.random.default_rng(seed)
    rows = np.concatenate([rng.choice(m, per_col, replace=False) for _ in range(n)])
    if integer:
        vals = (rng.integers(1, 10, rows.size) * rng.choice([-1, 1], rows.size)).astype(float)
    else:
        vals = rng.standard_normal(rows.size)
    A = sp.csc_matrix((vals, (rows, np.repeat(np.arange(n), per_col))), shape=(m, n))
    active = rng.random(m) < 0.5
    y = np.where(active, rng.integers(1, 10, m) if integer else rng.uniform(0, 10, m), 0.0).astype(float)
    b = A @ rng.uniform(-5, 5, n) - np.where(active, 0.0, 1.0)
    kind = "integer" if integer else "gaussian"
    return LinearProgram(c=A.T @ y, A=A, row_lower=b, row_upper=np.full(m, np.inf), col_lower=np.full(n, -np.inf),
                         col_upper=np.full(n, np.inf), name=f"sparse-{m}x{n}-{per_col}nz-{kind}")


def run_one(lp: LinearProgram, split: list[int], mode: str, budget: float, k: int | None = None) -> dict[str, Any]:
    """One session and its audit; the figures of one JSON line."""
    bounds = "rows" if mode == "rows" else "monomial"
    target = _free(lp) if mode == "dense" else lp
    public, blocks = split_columns(target, split, ids=[f"party{i + 1}" for i in range(len(split))])
    t0 = time.perf_counter()
    config = SessionConfig(bounds_mode=bounds, k=k)
    outcome, audit = simulate(public, blocks, config, central=target, audit_budget_s=budget,
                              policy=owners_consent(config))  # owners who allow the mode measured
    wall = time.perf_counter() - t0
    truths = [pa.truth for pa in audit.parties.values() if pa.truth is not None]
    assumed = [pa.assumed_truth for pa in audit.parties.values() if pa.assumed_truth is not None]
    cols = sum(t["columns"] for t in truths)
    right = sum(t["recovered_exact"] for t in truths)
    up = sum(t["recovered_up_to_scale"] for t in truths)
    return {"problem": lp.name, "mode": mode, "m": lp.n_rows, "n": lp.n_cols, "parties": len(split),
            "status": outcome.status.value, "session_s": outcome.timings_s["total"], "audit_s": audit.seconds,
            "wall_s": wall, "columns": cols, "recovered_exact": right, "fraction_exact": right / cols if cols else 0.0,
            "recovered_up_to_scale": up, "fraction_up_to_scale": up / cols if cols else 0.0,
            "claimed_exact": sum(int(pa.summary["recovered_exact"]) for pa in audit.parties.values()),
            "claimed_up_to_scale": sum(int(pa.summary["recovered_up_to_scale"]) for pa in audit.parties.values()),
            "claimed_wrong": sum(t["claimed_wrong"] for t in truths),
            "direction_claimed_wrong": sum(t["direction_claimed_wrong"] for t in truths),
            "unclaimed_right": sum(t["unclaimed_right"] for t in truths),
            "positions_right": sum(t["positions_right"] for t in truths),
            "with_singleton_rows_exact": sum(t["recovered_exact"] for t in assumed) if assumed else None,
            "collusion_added": max((c.added for c in audit.collusion), default=0),
            "skipped": audit.skipped, "attacks": _attack_figures(audit)}


def _append(record: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def _instances(args: argparse.Namespace) -> list[tuple[LinearProgram, list[int], int | None, tuple[str, ...]]]:
    """(LP, split, k, modes) of every run asked for."""
    modes = tuple(m for m in args.modes.split(",") if m)
    out: list[tuple[LinearProgram, list[int], int | None, tuple[str, ...]]] = []
    if args.examples:
        for number in (1, 2):
            lp, split, _ = mangasarian_example(number)
            out.append((lp, list(split), None, modes))
    if args.synthetic:
        # the outsider's instance (m = 300, n = 120, 4 nonzeros per column, split 60/40/20, k = 130);
        # its columns are free, so only the dense masks apply
        for integer in (True, False):
            out.append((sparse_lp(300, 120, 4, 20260101, integer=integer), [60, 40, 20], 130, ("dense",)))
    if args.netlib:
        names = args.only.split(",") if args.only else None
        for f in sorted(Path(args.netlib).glob("*.mps")):
            if names is None or f.stem in names:
                lp = read_mps(f)
                out.append((lp, parse_split(None, lp.n_cols, args.parties), None, modes))
    return out


def _fmt_frac(right: int, cols: int) -> str:
    return f"{right}/{cols}" if cols else "-"


def table(records: list[dict[str, Any]]) -> str:
    """The leakage table from the newest result of each (problem, mode) (``python -m benchmarks.render``)."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in records:
        newest[(rec["problem"], rec["mode"])] = rec
    problems = list(dict.fromkeys(p for p, _ in newest))
    order = sorted(problems, key=lambda p: (not p.startswith("mangasarian"), not p.startswith("sparse"), p))
    head = ("| LP | m x n | default mode: exact (positions) | rows mode: exact | dense masks (bounds removed): up to "
            "scale, claimed / right; exact | default + singleton rows known: exact | wrong claims | audit s (default / "
            "rows / dense) |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for p in order:
        mono, rows, dense = (newest.get((p, mode)) for mode in MODES)
        any_rec = mono or rows or dense
        size = f"{any_rec['m']} x {any_rec['n']}" if any_rec else ""
        wrong = sum(int(r.get("claimed_wrong", 0)) + int(r.get("direction_claimed_wrong", 0))
                    for r in (mono, rows, dense) if r)
        cells = [
            f"{_fmt_frac(mono['recovered_exact'], mono['columns'])} ({mono['positions_right']})" if mono else "-",
            _fmt_frac(rows["recovered_exact"], rows["columns"]) if rows else "-",
            (f"{dense.get('claimed_up_to_scale', '?')} / {_fmt_frac(dense['recovered_up_to_scale'], dense['columns'])}; "
             f"{_fmt_frac(dense['recovered_exact'], dense['columns'])}") if dense else "-",
            _fmt_frac(mono["with_singleton_rows_exact"], mono["columns"])
            if mono and mono.get("with_singleton_rows_exact") is not None else "-",
            str(wrong),
            " / ".join(f"{r['audit_s']:.2f}" if r else "-" for r in (mono, rows, dense)),
        ]
        lines.append(f"| {p} | {size} | " + " | ".join(cells) + " |")
    stamp = sorted({(r["commit"], r["date"][:10], r["machine"]) for r in newest.values()})
    lines.append("")
    lines.append("Generated by `python -m benchmarks.bench_leakage --render docs/threat_model.md` from "
                 "`benchmarks/results/leakage.jsonl` (runs: " + "; ".join(f"commit {c}, {d}, {mach}"
                                                                        for c, d, mach in stamp) + ").")
    return "\n".join(lines) + "\n"


def render(doc: Path) -> None:
    """Rewrite the marked table of ``doc`` from the results file (what ``python -m benchmarks.render`` does for
    docs/threat_model.md)."""
    from benchmarks.render import replace_section
    from benchmarks.results import load

    text = replace_section(doc.read_text(encoding="utf-8"), BEGIN, END, table(load(RESULTS)), str(doc))
    write_atomically(doc, text, what="docs page ")
    print(f"rewrote the leakage table of {doc}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--netlib", default=None, metavar="DIR", help="run every netlib MPS file in DIR")
    ap.add_argument("--only", default=None, metavar="a,b", help="only these netlib names")
    ap.add_argument("--examples", action="store_true", help="Mangasarian's Examples 1 and 2")
    ap.add_argument("--synthetic", action="store_true",
                    help="the random sparse LP m=300, n=120, 4 nonzeros per column, k=130 (integer and Gaussian)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"modes to run (default {','.join(MODES)})")
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0, help="audit budget per run, seconds (default 120)")
    ap.add_argument("--render", default=None, metavar="DOC", help="rewrite the marked table in DOC and exit")
    ap.add_argument("--transport-lp", default=None, metavar="SxT", help="write the SxT transportation LP as MPS")
    ap.add_argument("--out", default=None, metavar="FILE.mps", help="where --transport-lp writes")
    args = ap.parse_args(argv)
    if args.render:
        render(Path(args.render))
        return 0
    if args.transport_lp:
        s, t = (int(v) for v in args.transport_lp.lower().split("x"))
        lp = transportation_lp(s, t)
        write_mps(lp, Path(args.out or f"transport{s}x{t}.mps"))
        print(f"wrote {args.out or f'transport{s}x{t}.mps'}: {lp.n_rows} rows, {lp.n_cols} columns")
        return 0
    meta = {"machine": f"{platform.node()} ({platform.processor() or platform.machine()}, {platform.system()})",
            "command": "python -m benchmarks.bench_leakage " + " ".join(sys.argv[1:] if argv is None else argv),
            "commit": commit()}
    for lp, split, k, modes in _instances(args):
        for mode in modes:
            rec = {**meta, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   **run_one(lp, split, mode, args.budget, k)}
            _append(rec)
            print(f"{lp.name:<24} {mode:<9} exact {rec['recovered_exact']:>5}/{rec['columns']:<5} up to scale "
                  f"{rec['recovered_up_to_scale']:>5} wrong claims {rec['claimed_wrong']:>3} positions "
                  f"{rec['positions_right']:>4} audit {rec['audit_s']:7.2f} s session {rec['session_s']:7.2f} s",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
