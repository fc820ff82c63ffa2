"""Secure aggregation benchmark: the cost of summing the dense PPLP products under pairwise masks in
Z_2^64 (``securelp.party.aggregation``), side by side with plain sessions, in one run.

Instances: Mangasarian's Examples 1 and 2 (``coordinator/examples.py``, split 500/300/200 and
50/30/20), a 3,000 x 300 LP of the same construction (split 150/90/60) and netlib afiro (split
11/11/10, ``--bounds rows``: every afiro column is bounded, so in monomial mode no product is dense
and nothing would be aggregated). For each instance and each transport (in-process; gRPC with
mutual TLS and three ``securelp party`` processes, process start excluded), every repetition runs a
plain session and a secure-aggregation session one after the other. Figures per (instance,
transport): median session seconds (hello to close) and masking seconds, bytes sent and received by
all parties (serialized payloads), the largest relative difference of the objective from the
central HiGHS optimum, and the encoding's error bound. Results are appended as JSON lines (machine,
command, commit, date, figures; :mod:`benchmarks.results`) to ``benchmarks/results/secagg.jsonl``;
``python -m benchmarks.render`` puts the latest run's table into docs/benchmarks/secagg.md. Usage::

    python -m benchmarks.bench_secagg --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import run_context
from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.examples import mangasarian_example, random_solvable_lp
from securelp.coordinator.protocol import SessionConfig, SessionOutcome, run_secure_lp
from securelp.coordinator.simulation import owners_consent, simulated_links
from securelp.solvers.errors import InputError
from securelp.solvers.files import write_atomically
from securelp.solvers.lp import HighsBackend, LinearProgram, read_mps
from securelp.solvers.lp.partition import split_columns

REPO = Path(__file__).resolve().parents[1]
NAME = "secagg"
RESULTS = REPO / "benchmarks" / "results" / "secagg.jsonl"


def _instances(names: list[str]) -> list[tuple[str, LinearProgram, tuple[int, ...], str]]:
    out = []
    for name in names:
        if name in ("example1", "example2"):
            lp, split, _ = mangasarian_example(int(name[-1]))
            out.append((name, lp, split, "monomial"))
        elif name == "random3000x300":
            lp, _ = random_solvable_lp(3000, 300, np.random.default_rng(0), name="random-3000x300")
            out.append((name, lp, (150, 90, 60), "monomial"))
        elif name == "afiro":
            out.append((name, read_mps(REPO / "deploy" / "afiro.mps"), (11, 11, 10), "rows"))
        else:
            raise InputError(f"unknown instance {name!r} (example1, example2, random3000x300, afiro)")
    return out


def _session(public, blocks, config: SessionConfig, transport: str) -> SessionOutcome:  # type: ignore[no-untyped-def]
    if transport == "inprocess":
        with simulated_links(blocks, "inprocess", policy=owners_consent(config)) as links:
            return run_secure_lp(public, links, config)
    from securelp.coordinator.launcher import LocalParties

    with tempfile.TemporaryDirectory(prefix="securelp-bench-") as tmp, \
            LocalParties(blocks, Path(tmp), policy=owners_consent(config)) as cluster:
        return run_secure_lp(public, cluster.links(deadline_s=600), config)


def _figures(outcomes: list[SessionOutcome], central: float) -> dict[str, object]:
    last = outcomes[-1]
    agg = last.aggregation
    return {
        "total_s": statistics.median(o.timings_s["total"] for o in outcomes),
        "mask_s": statistics.median(o.timings_s["mask"] for o in outcomes),
        "solve_s": statistics.median(o.timings_s["solve"] for o in outcomes),
        "bytes_sent": int(statistics.median(sum(p.bytes_sent for p in o.parties) for o in outcomes)),
        "bytes_received": int(statistics.median(sum(p.bytes_received for p in o.parties) for o in outcomes)),
        "max_objective_rel_diff": max(abs(o.objective - central) / max(1.0, abs(central)) for o in outcomes),
        "k": last.k,
        "aggregating_parties": len(agg.participants) if agg is not None else 0,
        "encoding_error_a": agg.encoding_error_a if agg is not None else None,
        "encoding_error_c": agg.encoding_error_c if agg is not None else None,
        "relative_error_a": agg.relative_error_a if agg is not None else None,
        "keys_bound": agg.keys_bound if agg is not None else None,
    }


def run(names: list[str], transports: list[str], repeat: int, out: Path,
        argv: list[str] | None = None) -> list[dict[str, object]]:
    context = run_context(NAME, argv)  # the shared fields, kept flat in this file's lines
    header = {k: context[k] for k in ("machine", "command", "commit", "date")}
    lines = []
    for name, lp, split, mode in _instances(names):
        public, blocks = split_columns(lp, split, ids=[f"owner{i + 1}" for i in range(len(split))])
        start = time.perf_counter()
        central = HighsBackend().solve(lp)
        central_s = time.perf_counter() - start
        for transport in transports:
            runs: dict[bool, list[SessionOutcome]] = {False: [], True: []}
            for _ in range(repeat):
                for secure in (False, True):  # side by side: a plain and a secure session per repetition
                    config = SessionConfig(bounds_mode=mode, secure_aggregation=secure, deadline_s=600)
                    runs[secure].append(_session(public, blocks, config, transport))
            plain, secure = _figures(runs[False], central.objective), _figures(runs[True], central.objective)
            line = {**header, "instance": name, "m": lp.n_rows, "n": lp.n_cols, "split": list(split),
                    "bounds_mode": mode, "transport": transport, "repeat": repeat,
                    "figures": {"central_s": central_s, "central_objective": central.objective,
                                "plain": plain, "secure": secure}}
            lines.append(line)
            print(f"{name} ({lp.n_rows} x {lp.n_cols}, {mode}) {transport}: plain {plain['total_s']:.3f} s "
                  f"{plain['bytes_sent']:,} B, secure {secure['total_s']:.3f} s {secure['bytes_sent']:,} B, "
                  f"objective rel diff {secure['max_objective_rel_diff']:.1e} (plain {plain['max_objective_rel_diff']:.1e})",
                  flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = out.read_text() if out.exists() else ""
    write_atomically(out, previous + "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines),
                     what="benchmark results ")
    return lines


def render_table(lines: list[dict]) -> str:  # type: ignore[type-arg]
    """The markdown table of one run's lines (and the line naming machine, commit, date, command)."""
    first = lines[0]
    m = first["machine"]
    mem = f", {m['memory_bytes'] / 2**30:.0f} GiB" if m.get("memory_bytes") else ""
    load = m.get("load_average") or m.get("load_average_at_start")
    if load:
        mem += f", load average {load[0]:.1f} at the start"
    head = (f"Run of {first['date']} at commit `{first['commit']}` on {m['cpu']} ({m['cores']} cores{mem}, "
            f"Python {m['python']}): `{first['command']}`; medians of {first['repeat']} sessions of each kind, plain and "
            "secure one after the other in every repetition; bytes are the serialized payloads all parties sent "
            "(they received much less); masking: the slowest party's products, encoding and pairwise masks; "
            "gRPC: mutual TLS, three `securelp party` processes, process start excluded.")
    rows = [("| instance | transport | plain s | secure s | ratio | masking s (plain / secure) | plain bytes sent | "
             "secure bytes sent | ratio | objective rel. diff (secure / plain) | encoding error of AB' (abs., rel.) |"),
            "|---|---|---:|---:|---:|---|---:|---:|---:|---|---|"]
    for line in lines:
        f = line["figures"]
        p, s = f["plain"], f["secure"]
        enc = (f"{s['encoding_error_a']:.1e}, {s['relative_error_a']:.1e}" if s["encoding_error_a"] is not None
               else "nothing aggregated")
        rows.append(f"| {line['instance']} ({line['m']:,} x {line['n']:,}, {line['bounds_mode']}) | {line['transport']} "
                    f"| {p['total_s']:.3f} | {s['total_s']:.3f} | {s['total_s'] / p['total_s']:.2f}x "
                    f"| {p['mask_s']:.3f} / {s['mask_s']:.3f} | {p['bytes_sent']:,} | {s['bytes_sent']:,} | {s['bytes_sent'] / p['bytes_sent']:.3f}x "
                    f"| {s['max_objective_rel_diff']:.1e} / {p['max_objective_rel_diff']:.1e} | {enc} |")
    return head + "\n\n" + "\n".join(rows) + "\n"


def table(records: list[dict]) -> str:  # type: ignore[type-arg]
    """The docs table of the newest run (``python -m benchmarks.render``)."""
    latest = records[-1]["date"]
    return render_table([line for line in records if line["date"] == latest])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--instances", default="example1,example2,random3000x300,afiro")
    ap.add_argument("--transports", default="inprocess,grpc")
    ap.add_argument("--out", type=Path, default=RESULTS, help="JSON lines to append to (default %(default)s)")
    args = ap.parse_args(argv)
    transports = [t for t in args.transports.split(",") if t]
    if not set(transports) <= {"inprocess", "grpc"}:
        raise InputError(f"--transports {args.transports!r}: expected inprocess and/or grpc")
    run([n for n in args.instances.split(",") if n], transports, args.repeat, args.out, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
