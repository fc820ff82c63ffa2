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


def test_the_graph_benchmark_runs_both_searches(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from solvers.mdp import graph

    monkeypatch.setattr(bench_mdp, "GRAPHS", {"dense": ("grid", {"rows": 6, "cols": 7}, 40.0),
                                              "sparse": ("grid", {"rows": 6, "cols": 7}, 2.0)})
    bench_mdp.graph_bench()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["graph"] for r in rows] == ["dense", "sparse"]
    assert all(r["same_mask"] and 0 < r["kept"] < r["pairs"] for r in rows)  # the grid has implied pairs
    assert rows[0]["dense_share"] > graph.DENSE_PAIR_SHARE > rows[1]["dense_share"]
