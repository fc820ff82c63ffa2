"""Privacy audit benchmark: the eps lower bound of every protocol, correct and with each planted leak.

Cases: the federated census release (``cdp``: cumulative counts; ``hdp``: counts) on the built-in
three-level hierarchy, the LDP collection (``le``, ``grr``, ``oue``) on a 3 x 3 grid with 10 users,
each correct and with the three planted leaks (the true count in a message, noise at half the
claimed scale, the truth in a report field); the secure LP (no DP claim). Every case runs the
audit of ``securelp.coordinator.dpaudit`` with fresh entropy (no seed) at claimed eps 1 and 95 %
confidence. Figures per case: runs per input, seconds, the held-out eps lower bound, the verdict,
the chosen event, the most eps the held-out runs could show. Results are appended as JSON lines
(:func:`benchmarks.results.append_run`: bench, run_id, date, commit, command, machine, case,
figures) to ``benchmarks/results/dpaudit.jsonl``; :func:`table` renders the newest run. Usage::

    python -m benchmarks.bench_dpaudit --runs 2000 --lp-runs 200
    python -m benchmarks.bench_dpaudit --only census --mechanisms hdp --plants half-noise --runs 8000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchmarks.results import append_run, describe_run, load, results_path, run_context
from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.dpaudit import audit_protocol
from securelp.coordinator.dpaudit.census import CENSUS_PLANTS, CensusFederatedViews
from securelp.coordinator.dpaudit.ldp import LDP_PLANTS, LdpCollectionViews
from securelp.coordinator.dpaudit.lp import LpSessionViews

RESULTS = results_path("dpaudit")


def _cases(runs: int, lp_runs: int) -> list[tuple[str, str, str | None, Any, int]]:
    cases: list[tuple[str, str, str | None, Any, int]] = []
    for mechanism in ("cdp", "hdp"):
        for plant in (None, *CENSUS_PLANTS):
            cases.append(("census", mechanism, plant, CensusFederatedViews(1, mechanism=mechanism, plant=plant), runs))
    for mechanism in ("le", "grr", "oue"):
        for plant in (None, *LDP_PLANTS):
            cases.append(("ldp", mechanism, plant, LdpCollectionViews(1.0, mechanism=mechanism, plant=plant), runs))
    cases.append(("lp", "monomial", None, LpSessionViews(), lp_runs))
    return cases


def run(runs: int, lp_runs: int, only: list[str], out: Path, mechanisms: list[str] | None = None,
        plants: list[str] | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Audit every case (or those of the protocols ``only``, the ``mechanisms``, the ``plants``, where
    ``none`` names the correct protocol) and append one line per case to ``out``; returns the (case,
    figures) pairs."""
    context = run_context("dpaudit")
    cases = []
    for protocol, mechanism, plant, source, n in _cases(runs, lp_runs):
        if (only and protocol not in only) or (mechanisms and mechanism not in mechanisms) or (
                plants and (plant or "none") not in plants):
            continue
        audit = audit_protocol(source, n, 0.95)
        r = audit.result
        case = {"protocol": protocol, "mechanism": mechanism, "plant": plant}
        figures = {"runs_per_input": n, "seconds": audit.seconds, "claimed_eps": audit.claimed_eps,
                   "eps_lower_bound": audit.eps_lb, "verdict": audit.verdict, "confidence": r.confidence,
                   "event": r.event.describe(), "max_detectable_eps": r.max_detectable_eps,
                   "features": audit.setup["features"]}
        cases.append((case, figures))
        print(f"{protocol} {mechanism} plant={plant or '-'}: eps_lb {audit.eps_lb:.3f} (claim "
              f"{audit.claimed_eps if audit.claimed_eps is not None else 'none'}) {audit.verdict}, {n} runs, "
              f"{audit.seconds:.1f} s", flush=True)
    append_run(out, context, cases)
    return cases


def table(records: list[dict[str, Any]] | None = None) -> str:
    """The markdown table of the newest result of each case (protocol, mechanism, planted leak, runs)
    in ``records`` (default: the committed results), with the runs they come from."""
    records = load(RESULTS) if records is None else records
    if not records:
        return "No results yet: run `python -m benchmarks.bench_dpaudit`.\n"
    newest: dict[tuple, dict[str, Any]] = {}
    for r in records:  # oldest first: a later line of the same case replaces an earlier one
        c = r["case"]
        newest[(c["protocol"], c["mechanism"], c["plant"] or "", r["figures"]["runs_per_input"])] = r
    columns = ("| protocol | mechanism | planted leak | runs per input | claimed eps | eps lower bound (95 %) | verdict "
               "| seconds |")
    out = [columns, "|---|---|---|---:|---:|---:|---|---:|"]
    for r in newest.values():
        c, f = r["case"], r["figures"]
        claim = "none" if f["claimed_eps"] is None else f"{f['claimed_eps']:g}"
        out.append(f"| {c['protocol']} | {c['mechanism']} | {c['plant'] or '-'} | {f['runs_per_input']} | {claim} "
                   f"| {f['eps_lower_bound']:.3f} | {f['verdict']} | {f['seconds']:.1f} |")
    runs = {r["run_id"]: r for r in newest.values()}
    return "\n".join(out) + "\n\n" + " ".join(describe_run(r) for r in runs.values()) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=positive_int, default=2000, help="runs per input of census and ldp (default 2000)")
    p.add_argument("--lp-runs", type=positive_int, default=200, help="runs per input of the secure LP (default 200)")
    p.add_argument("--only", nargs="*", default=[], choices=["census", "ldp", "lp"], help="only these protocols")
    p.add_argument("--mechanisms", nargs="*", default=[], help="only these mechanisms (cdp, hdp, le, grr, oue, monomial)")
    p.add_argument("--plants", nargs="*", default=[], choices=["none", *CENSUS_PLANTS],
                   help="only these planted leaks ('none': the correct protocols)")
    p.add_argument("--out", type=Path, default=RESULTS, help="results file (default benchmarks/results/dpaudit.jsonl)")
    args = p.parse_args()
    cases = run(args.runs, args.lp_runs, args.only, args.out, args.mechanisms, args.plants)
    wrong = [c for c, f in cases if (c["plant"] is None) == (f["verdict"] == "VIOLATES its claim")
             and c["protocol"] != "lp"]
    if wrong:
        print(f"{len(wrong)} case(s) with an unexpected verdict", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
