"""`securelp census` end to end through securelp.coordinator.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.hierarchy.chain import solve_model3
from securelp.solvers.hierarchy.counts_csv import read_noisy_csv
from securelp.solvers.hierarchy.hdp import solve_model1

NOISY = """level,region_id,parent_id,size,noisy_count
1,R,,1,5
1,R,,2,-1
1,R,,3,2
2,A,R,1,3
2,A,R,2,2
2,A,R,3,0
2,B,R,1,-2
2,B,R,2,1
2,B,R,3,1
"""
COUNTS = """level,region_id,parent_id,size,count
1,R,,1,30
1,R,,2,12
1,R,,3,4
2,A,R,1,20
2,A,R,2,2
2,B,R,1,10
2,B,R,2,10
2,B,R,3,4
"""
KEYS = {"mechanism", "private", "objective", "constraint_violations", "negative_counts", "non_integer_counts",
        "total_matches", "time_s"}


def _file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("mechanism", ["hdp", "cdp", "chain", "hqp", "cqp", "topdown"])
def test_postprocess_every_mechanism(tmp_path: Path, mechanism: str) -> None:
    noisy = _file(tmp_path, "n.csv", NOISY)
    out = tmp_path / "r.json"
    rel = tmp_path / "rel.csv"
    assert main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", mechanism,
                 "--json", str(out), "--out", str(rel)]) == 0
    rep = json.loads(out.read_text())
    assert KEYS <= set(rep) and rep["mechanism"] == mechanism and rep["private"] is True
    assert "l1_error_by_level" not in rep  # errors against the truth belong to `census evaluate`
    assert rel.read_text().startswith("level,region_id,parent_id,size,count\n")
    y = read_noisy_csv(noisy)
    if mechanism == "hdp":
        assert rep["objective"] == solve_model1(y.hierarchy, y.values, 6).objective
    if mechanism == "chain":
        assert rep["objective"] == solve_model3(y.hierarchy, y.values, 6).objective
    if mechanism in ("hdp", "cdp", "chain", "topdown"):
        assert rep["constraint_violations"] == 0 and rep["negative_counts"] == 0
        assert rep["non_integer_counts"] == 0 and rep["total_matches"] is True


def test_postprocess_cumulative_le_order(tmp_path: Path) -> None:
    noisy = _file(tmp_path, "n.csv", NOISY)
    out = tmp_path / "r.json"
    assert main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", "chain",
                 "--cumulative-order", "le", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    y = read_noisy_csv(noisy).values
    cum_le = np.array([rep["cumulative_counts"][r] for r in ("R", "A", "B")])
    counts = np.array([rep["counts"][r] for r in ("R", "A", "B")])
    assert np.array_equal(np.cumsum(counts, axis=1), cum_le) and cum_le[0, -1] == 6
    assert rep["objective"] == float(((cum_le - y) ** 2).sum())


def test_release_repeat_and_reproducible(tmp_path: Path) -> None:
    data = _file(tmp_path, "c.csv", COUNTS)
    reports = []
    for k in range(2):
        out = tmp_path / f"r{k}.json"
        assert main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "0.5", "--mechanism", "hdp",
                     "--seed", "4", "--repeat", "3", "--json", str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    rep = reports[0]
    assert KEYS <= set(rep) and rep["reproducible"] is True and rep["repeat"] == 3 and len(rep["runs"]) == 3
    assert rep["private"] is False  # seeded noise can be recomputed
    assert rep["noise_scale"] == 8.0 and "l1_error_by_level" not in rep
    assert rep["constraint_violations"] == 0 and rep["total_matches"] is True
    assert [r["objective"] for r in rep["runs"]] == [r["objective"] for r in reports[1]["runs"]]


def test_release_fresh_entropy_is_flagged(tmp_path: Path, capsys) -> None:
    data = _file(tmp_path, "c.csv", COUNTS)
    assert main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "cdp",
                 "--json", "-"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["reproducible"] is False and rep["seed"] is None and rep["private"] is True


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["--eps", "0"], 3, "--eps '0': must be > 0"),
        (["--eps", "-1"], 3, "--eps '-1': must be > 0"),
        (["--eps", "abc"], 3, "positive number"),
        (["--eps", "1", "--total", "5"], 3, "does not match"),
    ],
)
def test_release_errors(tmp_path: Path, capsys, args: list[str], code: int, needle: str) -> None:
    data = _file(tmp_path, "c.csv", COUNTS)
    rc = main(["census", "release", "--data", str(data), "--max-size", "3", "--mechanism", "hdp", "--json", "-", *args])
    assert rc == code
    assert needle in capsys.readouterr().err


def test_bad_input_file_is_one_line_error(tmp_path: Path, capsys) -> None:
    data = _file(tmp_path, "c.csv", COUNTS.replace("2,B,R,3,4", "2,B,R,3,5"))
    rc = main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "hdp",
               "--json", "-"])
    err = capsys.readouterr().err
    assert rc == 3 and "children of region 'R'" in err and "Traceback" not in err


def test_resource_error_exit_code(tmp_path: Path, capsys) -> None:
    noisy = _file(tmp_path, "n.csv", NOISY)
    rc = main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", "hdp",
               "--max-size", "1000000000", "--json", "-"])
    assert rc == 12 and "exceeds the limit" in capsys.readouterr().err


def test_unknown_mechanism_is_usage_error(tmp_path: Path) -> None:
    noisy = _file(tmp_path, "n.csv", NOISY)
    with pytest.raises(SystemExit) as info:
        main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", "nope", "--json", "-"])
    assert info.value.code == 2


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
@pytest.mark.parametrize("command", ["release", "postprocess"])
def test_bad_time_limit_is_input_error(tmp_path: Path, capsys, command: str, value: str) -> None:
    if command == "release":
        args = ["--data", str(_file(tmp_path, "c.csv", COUNTS)), "--max-size", "3", "--eps", "1"]
    else:
        args = ["--noisy", str(_file(tmp_path, "n.csv", NOISY)), "--total", "6"]
    rc = main(["census", command, *args, "--mechanism", "chain", "--json", "-", "--time-limit", value])
    assert rc == 3 and "--time-limit must be a positive number of seconds" in capsys.readouterr().err


def test_chain_time_limit_refuses_and_writes_nothing(tmp_path: Path, capsys) -> None:
    """A chain solve past --time-limit exits 12 with the reason; no report, no release file."""
    noisy = _file(tmp_path, "n.csv", NOISY)
    out, rel = tmp_path / "r.json", tmp_path / "rel.csv"
    rc = main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", "chain",
               "--time-limit", "1e-9", "--json", str(out), "--out", str(rel)])
    err = capsys.readouterr().err
    assert rc == 12 and "no certified release within the time limit" in err and "Traceback" not in err
    assert not out.exists() and not rel.exists()
    # 0 means no limit
    assert main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", "chain",
                 "--time-limit", "0", "--json", str(out)]) == 0


def test_engine_errors_are_told_in_the_flags_of_the_command(tmp_path: Path, capsys) -> None:
    """The engine's typed errors name no flag; the CLI says which of its flags to change."""
    noisy = _file(tmp_path, "n.csv", NOISY)
    rc = main(["census", "postprocess", "--noisy", str(noisy), "--total", "6", "--mechanism", "hdp", "--max-size", "2",
               "--json", "-"])
    err = capsys.readouterr().err
    assert rc == 3 and "sizes go up to 3 but --max-size is 2" in err
    rc = main(["census", "release", "--synthetic", "census", "--max-size", "5", "--eps", "1", "--mechanism", "hdp",
               "--json", "-"])
    err = capsys.readouterr().err
    assert rc == 3 and "needs --max-size >= 10, got 5" in err and "Traceback" not in err
