"""The IPM benchmark of benchmarks/bench_mdp.py (``ipm N K``) runs and reports what it measured."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_mdp
from benchmarks.results import run_context
from securelp.solvers.mdp.graph import DENSE_PAIR_SHARE


def test_the_ipm_benchmark_reports_a_certified_restricted_gap(capsys: pytest.CaptureFixture[str]) -> None:
    bench_mdp.ipm(280, 10, 1e-4, seed=1, threads=2)
    row = json.loads(capsys.readouterr().out)
    assert row["bench"] == "ipm" and row["outputs"] == 10 and row["records"] > 100
    assert row["status"] == "optimal" and 0 <= row["rel_gap"] <= 1e-4
    assert row["bound"] <= row["primal"] and row["iterations"] > 5
    assert row["every_10th"][0][0] == 0 and len(row["every_10th"]) >= row["iterations"] // 10


def test_the_graph_benchmark_runs_both_searches(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_mdp, "GRAPHS", {"dense": ("grid", {"rows": 6, "cols": 7}, 40.0),
                                              "sparse": ("grid", {"rows": 6, "cols": 7}, 2.0)})
    bench_mdp.graph_bench()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["graph"] for r in rows] == ["dense", "sparse"]
    assert all(r["same_mask"] and 0 < r["kept"] < r["pairs"] for r in rows)  # the grid has implied pairs
    assert rows[0]["dense_share"] > DENSE_PAIR_SHARE > rows[1]["dense_share"]


def _records(rows: list[dict]) -> list[dict]:
    """The scoreboard's rows as the lines benchmarks/results.py writes for them."""
    context = run_context("mdp", ["scoreboard", "--quick"])
    return [{**context, "case": case, "figures": figures} for case, figures in bench_mdp.scoreboard_cases(rows)]


def test_the_scoreboard_runs_every_method_in_its_own_process(capsys: pytest.CaptureFixture[str]) -> None:
    rows = bench_mdp.scoreboard(True, {"direct": 60.0, "columns": 60.0, "records": 60.0}, None)
    out = capsys.readouterr().out
    assert [(r["method"], r["decomposition"]) for r in rows] == [("direct", None), ("bd", "columns"), ("bd", "records")]
    # each measurement ran in a child process that reported its own row, memory and wall time
    assert all(r["status"] == "optimal" and r["wall_s"] >= r["time_s"] > 0 and r["max_rss_gb"] > 0 for r in rows)
    assert max(r["objective"] for r in rows) - min(r["objective"] for r in rows) <= 1e-9 * rows[0]["objective"]
    assert all(r["rel_gap"] <= 1e-4 for r in rows)
    assert out.count('"instance": "grid6x6_eps1"') == 3  # a JSON row as each measurement ended
    table = [line for line in bench_mdp.table(_records(rows)).splitlines() if line.startswith("| grid6x6_eps1 |")]
    assert len(table) == 3 and table[0].endswith("| - |") and table[1].endswith("x |")


def test_the_scoreboard_reports_a_child_that_crashed(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # a measurement whose process prints no row (here: an instance the child does not know) is
    # reported as crashed with its exit code, not dropped, and the others still run
    monkeypatch.setattr(bench_mdp, "QUICK_SCOREBOARD", (("no_such_instance", (("direct", "records", "direct"),)),))
    rows = bench_mdp.scoreboard(True, {"direct": 5.0, "columns": 5.0, "records": 5.0}, None)
    assert rows[0]["status"] == "crashed" and rows[0]["exit_code"] != 0
    assert "| no_such_instance | direct | crashed |" in bench_mdp.table(_records(rows))


@pytest.mark.parametrize("argv", [["scoreboard", "--direct-cap", "-1"], ["scoreboard", "--records-cap", "nan"],
                                  ["scoreboard", "--quick", "--only", "rome"], ["scoreboard", "--only", "nosuch"],
                                  ["solve", "rome", "--cap", "0"]])
def test_the_benchmark_refuses_bad_caps_and_names(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["bench_mdp.py", *argv])
    with pytest.raises(SystemExit) as exc:
        bench_mdp.main()
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err
