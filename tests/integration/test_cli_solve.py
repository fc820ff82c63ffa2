"""`securelp solve` and `securelp demo --transport inprocess`: reports, exit codes, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from securelp.solvers.errors import ExitCode
from tests.lp_fixtures import INFEASIBLE_MPS, TINY_MPS, UNBOUNDED_MPS

REPO = Path(__file__).resolve().parents[2]
REPORT_KEYS = {"status", "objective", "central_objective", "objective_rel_diff", "feasibility_violation", "k",
               "transport", "bounds_mode", "parties", "timings_s"}


def securelp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "securelp.coordinator.cli", *args], cwd=cwd or REPO, check=False, capture_output=True,
                          text=True, timeout=300)


def _write(tmp_path: Path, text: str, name: str = "lp.mps") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_solve_writes_the_documented_report(tmp_path):
    out = tmp_path / "r.json"
    r = securelp("solve", str(_write(tmp_path, TINY_MPS)), "--parties", "2", "--json", str(out))
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert REPORT_KEYS <= set(report)
    assert report["status"] == "optimal" and report["objective_rel_diff"] <= 1e-9
    assert set(report["timings_s"]) == {"mask", "transfer", "solve", "decode", "total"}
    for p in report["parties"]:
        assert {"id", "n_cols", "bytes_sent", "bytes_received", "leakage"} <= set(p)
        assert p["leakage"]["truth"]["claims_hold"]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("text, code", [(INFEASIBLE_MPS, ExitCode.INFEASIBLE), (UNBOUNDED_MPS, ExitCode.UNBOUNDED)])
def test_infeasible_and_unbounded_exit_codes(tmp_path, text, code):
    out = tmp_path / "r.json"
    r = securelp("solve", str(_write(tmp_path, text)), "--parties", "2", "--json", str(out))
    assert r.returncode == code
    assert json.loads(out.read_text())["status"] in ("infeasible", "unbounded")
    # without --json to stdout the summary says there is no objective, as the JSON's null does (not "nan")
    r = securelp("solve", str(_write(tmp_path, text)), "--parties", "2")
    assert r.returncode == code and "objective (secure) n/a" in r.stdout and "nan" not in r.stdout


@pytest.mark.parametrize("args, code, fragment", [
    (["solve", "missing.mps"], ExitCode.INPUT, "missing.mps does not exist"),
    (["solve", "{tiny}", "--parties", "5"], ExitCode.INPUT, "5 parties but only 3 columns"),
    (["solve", "{tiny}", "--parties", "2", "--split", "1,1"], ExitCode.INPUT, "sums to 2, but the LP has 3"),
    (["solve", "{tiny}", "--parties", "2", "--split", "a,b"], ExitCode.INPUT, "expected comma-separated"),
    (["solve", "{tiny}", "--parties", "0"], ExitCode.USAGE, "positive integer"),
    (["solve", "{free}", "--parties", "2", "--k", "1"], ExitCode.CONFIG, "k = 1 is smaller than n = 2"),
    (["solve", "{tiny}", "--json", "/nonexistent-dir/r.json"], ExitCode.INPUT, "does not exist"),
    (["demo", "--example", "3"], ExitCode.USAGE, "invalid choice"),
    # numpy's generators take no negative seed: refused as a usage error, not a traceback
    (["demo", "--data-seed", "-1", "--transport", "inprocess"], ExitCode.USAGE, "expected a non-negative integer, got -1"),
    (["census", "release", "--synthetic", "census", "--data-seed", "-1", "--eps", "1", "--mechanism", "hdp",
      "--json", "-"], ExitCode.USAGE, "expected a non-negative integer, got -1"),
])
def test_bad_input_is_a_clear_error(tmp_path, args, code, fragment):
    tiny = _write(tmp_path, TINY_MPS, "tiny.mps")
    free = _write(tmp_path, INFEASIBLE_MPS.replace("RHS\n", "BOUNDS\n FR BND X1\n FR BND X2\nRHS\n"), "free.mps")
    args = [a.format(tiny=tiny, free=free) for a in args]
    r = securelp(*args, cwd=tmp_path)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr


def test_demo_inprocess_example_2(tmp_path):
    out = tmp_path / "d.json"
    r = securelp("demo", "--example", "2", "--transport", "inprocess", "--json", str(out))
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert report["objective_rel_diff"] <= 1e-9
    assert report["k"] == 110 and len(report["parties"]) == 3  # n = 100 plus the margin of 10
    assert "known optimal value" in r.stdout


@pytest.mark.parametrize("argv", [["solve", "{tiny}", "--parties", "2"], ["demo", "--transport", "inprocess"]])
def test_json_to_stdout_is_the_only_thing_on_stdout(tmp_path, argv):
    """``--json -``: stdout parses as one JSON document (human report on stderr, no HiGHS banner)."""
    tiny = _write(tmp_path, TINY_MPS, "tiny.mps")
    r = securelp(*[a.format(tiny=tiny) for a in argv], "--json", "-")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["status"] == "optimal"
    assert "objective (secure)" in r.stderr
