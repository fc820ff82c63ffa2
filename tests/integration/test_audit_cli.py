"""The audit through the CLI, as separate processes: --transcript, securelp audit, its exit codes and
errors, a wrong claim reported as wrong, and every key of a demo report documented."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit import DEFAULT_SESSION_BUDGET_S
from securelp.solvers.errors import ExitCode
from securelp.solvers.lp import LinearProgram
from tests.audit_fixtures import NETLIB, audit, run_session

REPO = Path(__file__).resolve().parents[2]
LEAKAGE_KEYS = {"mode", "dense_masked_columns", "monomial_columns", "bound_rows", "revealed_solution",
                "every_column_bounded", "coordinator_can_reconstruct", "not_recovered_by_our_attacks", "summary",
                "attacks", "truth", "with_known_rows", "reproducible"}


def securelp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "securelp.coordinator.cli", *args], cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=300)


def _root2_lp() -> LinearProgram:
    """Bounded columns whose entries are +-0.70710678 with cost 1.41421356 (as in netlib's scsd1)."""
    rng = np.random.default_rng(91)
    m, n = 20, 12
    rows = np.concatenate([rng.choice(m, 4, replace=False) for _ in range(n)])
    vals = 0.70710678 * rng.choice([-1.0, 1.0], rows.size)
    A = sp.csc_matrix((vals, (rows, np.repeat(np.arange(n), 4))), shape=(m, n))
    return LinearProgram(c=np.full(n, 1.41421356), A=A, row_lower=np.full(m, -10.0), row_upper=np.full(m, 10.0),
                         col_lower=np.zeros(n), col_upper=np.full(n, 5.0))


def test_a_wrong_claim_is_reported_as_wrong(tmp_path: Path) -> None:
    """Masks from the seed 7: the seed guess recomputes them, the revealed x_j (nonzero: the costs are
    negative) confirms the seed, and every column is claimed; scored against an impostor truth (every
    entry 1% off) every claim is wrong, and `securelp audit` says so."""
    zero = _root2_lp()  # positive costs: x = 0, which fits every seed, so it confirms none
    _, transcript, blocks = run_session(zero, parties=1, seed="7")
    pa = audit(transcript, blocks).parties["party1"]
    assert pa.summary["exact_by"] == {} and pa.truth["claims_hold"]
    assert "nonzero" in pa.outcome("seed_guess").reason
    lp = LinearProgram(c=-zero.c, A=zero.A, row_lower=zero.row_lower, row_upper=zero.row_upper,
                       col_lower=zero.col_lower, col_upper=zero.col_upper)
    _, transcript, blocks = run_session(lp, parties=1, seed="7", path=str(tmp_path / "t.bin"))
    a = audit(transcript, blocks)
    assert a.parties["party1"].summary["exact_by"] == {"seed": 12} and a.claims_hold  # the control
    assert a.parties["party1"].truth["positions_right"] == 12
    impostor = LinearProgram(c=lp.c, A=lp.A * 1.01, row_lower=lp.row_lower, row_upper=lp.row_upper,
                             col_lower=lp.col_lower, col_upper=lp.col_upper)
    from benchmarks.bench_leakage import write_mps

    for truth, code in ((lp, ExitCode.OK), (impostor, ExitCode.VERIFICATION)):
        lp_file = tmp_path / "truth.mps"
        write_mps(truth, lp_file)
        r = securelp("audit", str(tmp_path / "t.bin"), "--truth", str(lp_file))
        assert r.returncode == code, r.stderr
        assert ("THE STATEMENT ABOVE IS WRONG" in r.stdout) == (code == ExitCode.VERIFICATION)
        assert "Traceback" not in r.stderr


def test_solve_transcript_then_audit_with_either_truth(tmp_path: Path) -> None:
    mps = NETLIB / "afiro.mps"
    tr, rep = tmp_path / "afiro.bin", tmp_path / "solve.json"
    r = securelp("solve", str(mps), "--parties", "3", "--transcript", str(tr), "--json", str(rep))
    assert r.returncode == 0, r.stderr
    solve_report = json.loads(rep.read_text())
    assert solve_report["audit"]["budget_s"] == DEFAULT_SESSION_BUDGET_S
    r = securelp("split", str(mps), "--parties", "3", "--out", str(tmp_path / "blocks"))
    assert r.returncode == 0, r.stderr
    results = []
    for truth in (str(mps), str(tmp_path / "blocks")):
        out = tmp_path / "audit.json"
        r = securelp("audit", str(tr), "--truth", truth, "--known-rows", "singletons", "--json", str(out),
                     "--seed", "3")
        assert r.returncode == 0, r.stderr
        report = json.loads(out.read_text())
        assert report["kind"] == "audit" and report["session_id"] == solve_report["session_id"]
        results.append([p["leakage"]["truth"]["recovered_exact"] for p in report["parties"]])
        assert all(set(p["leakage"]) == LEAKAGE_KEYS for p in report["parties"])
    assert results[0] == results[1] and sum(results[0]) >= 30
    # without --truth: the statements, no evaluation
    r = securelp("audit", str(tr), "--json", "-")
    assert r.returncode == 0
    report = json.loads(r.stdout)
    assert all("truth" not in p["leakage"] for p in report["parties"])
    for p in report["parties"]:
        summary = p["leakage"]["summary"]
        assert summary["recovered_exact"] + summary["best_guess"] == p["n_cols"]


def test_audit_cli_errors_are_one_line(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"SLPTRNS\n\x05\x00")
    r = securelp("audit", str(garbage))
    assert r.returncode == ExitCode.INPUT and "truncated" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = securelp("audit", str(garbage), "--known-rows", "singletons")
    assert r.returncode == ExitCode.CONFIG and "--truth" in r.stderr
    r = securelp("solve", str(NETLIB / "afiro.mps"), "--transcript", "-")
    assert r.returncode == ExitCode.INPUT and "binary" in r.stderr


def test_demo_records_its_transcript_and_every_report_key_is_documented(tmp_path: Path) -> None:
    tr, rep = tmp_path / "demo.bin", tmp_path / "demo.json"
    r = securelp("demo", "--transport", "inprocess", "--example", "1", "--transcript", str(tr), "--json", str(rep))
    assert r.returncode == 0, r.stderr
    report = json.loads(rep.read_text())
    docs = (REPO / "docs" / "reports.md").read_text()
    keys = set(report["audit"])
    for p in report["parties"]:
        leak = p["leakage"]
        assert not leak["every_column_bounded"] and leak["dense_masked_columns"] == p["n_cols"]
        assert any("all of it, which says nothing more" in s for s in leak["coordinator_can_reconstruct"])
        keys |= set(leak) | set(leak["summary"]) | set(leak["truth"])
        for entry in leak["attacks"]:
            keys |= set(entry) | set(entry.get("truth", {}))
    for c in report["audit"]["collusion"]:
        keys |= set(c)
    missing = sorted(k for k in keys if f"`{k}`" not in docs)
    assert not missing, f"report keys not in docs/reports.md: {missing}"
    r = securelp("audit", str(tr), "--json", "-")
    assert r.returncode == 0 and json.loads(r.stdout)["session_id"] == report["session_id"]
