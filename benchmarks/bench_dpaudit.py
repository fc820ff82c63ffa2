"""Privacy audit benchmark: the eps lower bound of every protocol, correct and with each planted leak.

Cases: the federated census release (``cdp``: cumulative counts; ``hdp``: counts) on the built-in
three-level hierarchy, the LDP collection (``le``, ``grr``, ``oue``) on a 3 x 3 grid with 10 users,
each correct and with the three planted leaks (the true count in a message, noise at half the
claimed scale, the truth in a report field); the secure LP (no DP claim). Every case runs the
audit of ``securelp.coordinator.dpaudit`` with fresh entropy (no seed) at claimed eps 1 and 95 %
confidence. Figures per case: runs per input, seconds, the held-out eps lower bound, the verdict,
the chosen event, the most eps the held-out runs could show. Results are appended as JSON lines
(machine, command, commit, date, figures) to ``benchmarks/results/dpaudit.jsonl``. Usage::

    python -m benchmarks.bench_dpaudit --runs 2000 --lp-runs 200
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from securelp.coordinator.commands.common import positive_int
from securelp.coordinator.dpaudit import audit_protocol
from securelp.coordinator.dpaudit.census import CENSUS_PLANTS, CensusFederatedViews
from securelp.coordinator.dpaudit.ldp import LDP_PLANTS, LdpCollectionViews
from securelp.coordinator.dpaudit.lp import LpSessionViews
from securelp.solvers.files import write_atomically

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "dpaudit.jsonl"


def _machine() -> dict[str, object]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "load_average_at_start": list(os.getloadavg())}


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{'+uncommitted' if dirty else ''}"


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


def run(runs: int, lp_runs: int, only: list[str], out: Path) -> list[dict[str, object]]:
    header = {"machine": _machine(),
              "command": " ".join(shlex.quote(a) for a in ["python", "-m", "benchmarks.bench_dpaudit", *sys.argv[1:]]),
              "commit": _commit(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    lines = []
    for protocol, mechanism, plant, source, n in _cases(runs, lp_runs):
        if only and protocol not in only:
            continue
        audit = audit_protocol(source, n, 0.95)
        r = audit.result
        line = {**header, "protocol": protocol, "mechanism": mechanism, "plant": plant,
                "figures": {"runs_per_input": n, "seconds": audit.seconds, "claimed_eps": audit.claimed_eps,
                            "eps_lower_bound": audit.eps_lb, "verdict": audit.verdict, "confidence": r.confidence,
                            "event": r.event.describe(), "max_detectable_eps": r.max_detectable_eps,
                            "features": audit.setup["features"]}}
        lines.append(line)
        print(f"{protocol} {mechanism} plant={plant or '-'}: eps_lb {audit.eps_lb:.3f} (claim "
              f"{audit.claimed_eps if audit.claimed_eps is not None else 'none'}) {audit.verdict}, {n} runs, "
              f"{audit.seconds:.1f} s", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = out.read_text() if out.exists() else ""
    write_atomically(out, previous + "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines),
                     what="benchmark results ")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=positive_int, default=2000, help="runs per input of census and ldp (default 2000)")
    p.add_argument("--lp-runs", type=positive_int, default=200, help="runs per input of the secure LP (default 200)")
    p.add_argument("--only", nargs="*", default=[], choices=["census", "ldp", "lp"], help="only these protocols")
    p.add_argument("--out", type=Path, default=RESULTS, help=f"results file (default {RESULTS.relative_to(REPO)})")
    args = p.parse_args()
    lines = run(args.runs, args.lp_runs, args.only, args.out)
    wrong = [ln for ln in lines if (ln["plant"] is None) == (ln["figures"]["verdict"] == "VIOLATES its claim")
             and ln["protocol"] != "lp"]
    if wrong:
        print(f"{len(wrong)} case(s) with an unexpected verdict", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
