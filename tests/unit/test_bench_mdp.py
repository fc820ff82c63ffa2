"""The IPM benchmark of benchmarks/bench_mdp.py (``ipm N K``) runs and reports what it measured."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_mdp


def test_the_ipm_benchmark_reports_a_certified_restricted_gap(capsys: pytest.CaptureFixture[str]) -> None:
    bench_mdp.ipm(300, 20, 1e-4, seed=1, threads=2)
    row = json.loads(capsys.readouterr().out)
    assert row["bench"] == "ipm" and row["outputs"] == 20 and row["records"] > 100
    assert row["status"] == "optimal" and 0 <= row["rel_gap"] <= 1e-4
    assert row["bound"] <= row["primal"] and row["iterations"] > 5
    assert row["every_10th"][0][0] == 0 and len(row["every_10th"]) >= row["iterations"] // 10
