"""`securelp census`: bounds on counts, noisy values and totals, the memory estimate, quoting of
region ids, the seeded-release warning and options that do not apply (reviewer's defects)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy import model
from securelp.solvers.hierarchy.counts_csv import counts_csv_text, read_counts_csv, read_noisy_csv
from securelp.solvers.hierarchy.model import MAX_COUNT
from securelp.solvers.hierarchy.noise import parse_epsilon

COUNTS = "level,region_id,parent_id,size,count\n"
NOISY = "level,region_id,parent_id,size,noisy_count\n"
SMALL = COUNTS + "1,R,,1,5\n1,R,,3,2\n2,a,R,1,3\n2,a,R,3,2\n2,b,R,1,2\n"


def _file(tmp_path: Path, text: str, name: str = "d.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Warning" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# 1. counts, G and --total are bounded by 2**50; sums never wrap around


@pytest.mark.parametrize(
    "rows, needle",
    [
        # a root and its one child at the int64 maximum (unchecked, hdp would run out of memory)
        ("1,R,,1,9223372036854775807\n2,a,R,1,9223372036854775807\n", "line 2: count '9223372036854775807'"),
        # beyond int64 (unchecked, an OverflowError traceback)
        ("1,R,,1,99999999999999999999999\n2,a,R,1,99999999999999999999999\n", "line 2: count '99999999999999999999999'"),
        # just above the bound, on the child's line
        (f"1,R,,1,{MAX_COUNT}\n2,a,R,1,{MAX_COUNT + 1}\n", f"line 3: count '{MAX_COUNT + 1}'"),
        # counts within the bound whose sum (G) passes 2**63 (in int64 it would wrap around to a negative G)
        (f"1,R,,1,{2**62}\n1,R,,2,{2**62 + 4}\n2,a,R,1,{2**62}\n2,a,R,2,{2**62 + 4}\n", "exceeds the largest"),
        # each count within the bound, G above it
        (f"1,R,,1,{2**49}\n1,R,,2,{2**49 + 1}\n2,a,R,1,{2**49}\n2,a,R,2,{2**49 + 1}\n", "line 2: the counts of root"),
    ],
)
def test_counts_above_the_bound_are_input_errors(tmp_path: Path, capsys, rows: str, needle: str) -> None:
    data = _file(tmp_path, COUNTS + rows)
    rc = main(["census", "release", "--data", str(data), "--max-size", "2", "--eps", "1", "--mechanism", "hdp",
               "--json", "-"])
    line = _one_line_error(capsys)
    assert rc == 3 and str(data) in line and needle in line and "2**50" in line


def test_counts_at_the_bound_release_exact_integers(tmp_path: Path) -> None:
    data = _file(tmp_path, COUNTS + f"1,R,,1,{MAX_COUNT}\n2,a,R,1,{MAX_COUNT}\n")
    out, rel = tmp_path / "r.json", tmp_path / "rel.csv"
    assert main(["census", "release", "--data", str(data), "--max-size", "1", "--eps", "1", "--mechanism", "topdown",
                 "--seed", "1", "--json", str(out), "--out", str(rel)]) == 0
    rep = json.loads(out.read_text())
    assert rep["dataset"]["total"] == MAX_COUNT and rep["total_matches"] is True
    back = read_counts_csv(rel)
    assert back.total == MAX_COUNT and back.counts.tolist() == [[MAX_COUNT], [MAX_COUNT]]


def test_children_sum_does_not_wrap_around(tmp_path: Path) -> None:
    """2**14 children of 2**50 sum to 2**64, which int64 wraps to 0: the parent's 0 must not match."""
    kids = 2**14
    text = COUNTS + "1,R,,1,0\n1,R,,2,1\n" + "".join(f"2,c{k},R,1,{MAX_COUNT}\n" for k in range(kids))
    text += "2,c0,R,2,1\n"
    with pytest.raises(InputError, match=r"children of region 'R'.* sum to more than 1,125,899,906,842,624"):
        read_counts_csv(_file(tmp_path, text))


@pytest.mark.parametrize("command", ["release", "postprocess"])
def test_total_above_the_bound_is_an_input_error(tmp_path: Path, capsys, command: str) -> None:
    if command == "release":
        args = ["--data", str(_file(tmp_path, SMALL)), "--max-size", "3", "--eps", "1"]
    else:
        args = ["--noisy", str(_file(tmp_path, NOISY + "1,R,,1,1\n2,a,R,1,1\n"))]
    rc = main(["census", command, *args, "--total", str(MAX_COUNT + 1), "--mechanism", "hdp", "--json", "-"])
    line = _one_line_error(capsys)
    assert rc == 3 and f"--total {MAX_COUNT + 1} exceeds the largest accepted total 2**50" in line


# 2. every noisy value, integer or decimal, is bounded and finite


@pytest.mark.parametrize("value", ["1e20", "-1.2e15", f"{MAX_COUNT + 1}", f"-{MAX_COUNT + 1}", "inf", "nan", "-inf"])
def test_noisy_values_out_of_range_are_refused(tmp_path: Path, capsys, value: str) -> None:
    noisy = _file(tmp_path, NOISY + f"1,R,,1,{value}\n1,R,,2,1.5\n2,a,R,1,2\n2,b,R,2,1\n")
    out, rel = tmp_path / "td.json", tmp_path / "td.csv"
    rc = main(["census", "postprocess", "--noisy", str(noisy), "--total", "5", "--mechanism", "topdown",
               "--json", str(out), "--out", str(rel)])
    line = _one_line_error(capsys)
    assert rc == 3 and f"{noisy} line 2" in line and repr(value) in line
    assert not out.exists() and not rel.exists()


def test_noisy_values_at_the_bound_are_read(tmp_path: Path) -> None:
    text = NOISY + f"1,R,,1,{float(MAX_COUNT)}\n1,R,,2,-{MAX_COUNT}\n2,a,R,1,2\n"
    assert read_noisy_csv(_file(tmp_path, text)).values[0].tolist() == [MAX_COUNT, -MAX_COUNT]


# 3. the memory estimate, before anything is allocated


def test_memory_estimate_refuses_before_allocating(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(model, "available_memory", lambda: 50 * 2**20)  # 50 MiB
    allocated: list[tuple[int, ...]] = []
    zeros = np.zeros
    monkeypatch.setattr(model.np, "zeros", lambda shape, *a, **k: (allocated.append(shape), zeros(shape, *a, **k))[1])
    data = _file(tmp_path, SMALL)
    # 3 regions x 10**6 sizes = 3,000,000 cells: within the cell limit, but 768 bytes a cell for hdp
    rc = main(["census", "release", "--data", str(data), "--max-size", "1000000", "--eps", "1",
               "--mechanism", "hdp", "--json", "-"])
    line = _one_line_error(capsys)
    assert rc == 12 and "3,000,000 cells need about" in line and "68,266 cells would fit" in line
    assert not [s for s in allocated if np.prod(s) >= 3_000_000]
    rc = main(["census", "postprocess", "--noisy", str(_file(tmp_path, NOISY + "1,R,,1,1\n2,a,R,1,1\n", "n.csv")),
               "--total", "1", "--max-size", "1000000", "--mechanism", "topdown", "--json", "-"])
    assert rc == 12 and "cells would fit" in _one_line_error(capsys)
    # the same file fits with its own sizes
    assert main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "hdp",
                 "--json", str(tmp_path / "r.json")]) == 0


def test_huge_size_in_a_file_is_refused_before_allocating(tmp_path: Path, capsys) -> None:
    # 2 regions x 10**8 sizes = 2 x 10**8 cells: at the cell limit, far beyond memory (160 B a cell)
    data = _file(tmp_path, COUNTS + "1,R,,100000000,1\n2,a,R,100000000,1\n")
    rc = main(["census", "release", "--data", str(data), "--max-size", "100000000", "--eps", "1", "--mechanism",
               "topdown", "--json", "-"])
    line = _one_line_error(capsys)
    assert rc == 12 and "200,000,000 cells need about" in line and "cells would fit" in line


# 4. the released CSV quotes region ids


def test_released_csv_quotes_region_ids(tmp_path: Path) -> None:
    rows = '1,"R,x",,1,3\n2,"a""q","R,x",1,1\n2,"b\nc","R,x",1,2\n'
    data = _file(tmp_path, COUNTS + rows)
    noisy = _file(tmp_path, NOISY + rows, "n.csv")  # consistent noisy values: hdp returns them unchanged
    rel = tmp_path / "rel.csv"
    assert main(["census", "postprocess", "--noisy", str(noisy), "--total", "3", "--mechanism", "hdp",
                 "--json", str(tmp_path / "r.json"), "--out", str(rel)]) == 0
    back = read_counts_csv(rel)
    assert back.hierarchy.ids == ("R,x", 'a"q', "b\nc") and back.counts.tolist() == [[3], [1], [2]]
    assert rel.read_text().splitlines()[1] == '1,"R,x",,1,3'
    # a release writes through the same function
    out = tmp_path / "rel2.csv"
    assert main(["census", "release", "--data", str(data), "--max-size", "1", "--eps", "1", "--mechanism", "hdp",
                 "--json", str(tmp_path / "r2.json"), "--out", str(out)]) == 0
    assert read_counts_csv(out).total == 3
    h = read_counts_csv(data).hierarchy
    assert counts_csv_text(h, np.array([[3], [1], [2]])) == rel.read_text()


# 5. a seeded release warns that it is not private


def test_seeded_release_warns(tmp_path: Path, caplog) -> None:
    data = _file(tmp_path, SMALL)
    with caplog.at_level("WARNING"):
        assert main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "hdp",
                     "--json", str(tmp_path / "a.json")]) == 0
    assert "NOT private" not in caplog.text
    with caplog.at_level("WARNING"):
        assert main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "hdp",
                     "--seed", "3", "--json", str(tmp_path / "b.json")]) == 0
    assert "--seed: the noise is reproducible, so this release is NOT private" in caplog.text


# 6. the eps rule, and options that do not apply


@pytest.mark.parametrize(
    "text, needle",
    [
        ("1e-12", "smaller than 10**-9"),
        ("1e400", "larger than 10**9"),
        ("1e99999999", "larger than 10**9"),
        ("1234567891", "larger than 10**9"),
        ("0.1234567891", "p = 1234567891 (too many significant digits)"),
        ("0.0000000015", "q = 2000000000 (too many decimals)"),
    ],
)
def test_eps_message_states_the_rule(text: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        parse_epsilon(text)
    msg = str(info.value)
    assert needle in msg and "p and q must both be at most 10**9" in msg and "significant decimals" not in msg


@pytest.mark.parametrize("text", ["0.123456789", "123456789", "1e-9", "1e9", "1/3"])
def test_eps_within_the_rule(text: str) -> None:
    assert parse_epsilon(text) > 0


@pytest.mark.parametrize("mechanism", ["hdp", "hqp", "topdown"])
def test_cumulative_order_refused_for_count_mechanisms(tmp_path: Path, capsys, mechanism: str) -> None:
    noisy = _file(tmp_path, NOISY + "1,R,,1,1\n2,a,R,1,1\n")
    rc = main(["census", "postprocess", "--noisy", str(noisy), "--total", "1", "--mechanism", mechanism,
               "--cumulative-order", "ge", "--json", "-"])
    line = _one_line_error(capsys)
    assert rc == 3 and f"--mechanism {mechanism} does not use --cumulative-order" in line


def test_synthetic_seed_refused_with_data(tmp_path: Path, capsys) -> None:
    rc = main(["census", "release", "--data", str(_file(tmp_path, SMALL)), "--data-seed", "0", "--eps", "1",
               "--mechanism", "hdp", "--json", "-"])
    line = _one_line_error(capsys)
    assert rc == 3 and "--data-seed is for --synthetic census only" in line


def test_hqp_on_large_values_takes_the_exact_tree_not_highs_qp(tmp_path: Path) -> None:
    """HiGHS's QP runs for minutes on noisy values near 1e15; above 2**20 the tree algorithm is used,
    and it agrees with HiGHS on the same problem scaled down."""
    from securelp.solvers.hierarchy.baselines import HqpOptions, hqp
    from securelp.solvers.hierarchy.relaxation import model1_relaxation, model1_relaxation_tree

    max_scale = HqpOptions().highs_max_scale

    text = NOISY + ("1,R,,1,71271685121515\n1,R,,2,9.39627e+11\n1,R,,3,975845398629358\n"
                    "2,c0,R,1,3.23669e+10\n2,c0,R,2,90613200603003\n2,c0,R,3,100882842953892\n"
                    "2,c1,R,1,8.81469e+11\n2,c1,R,2,952791087147184\n2,c1,R,3,-5.08304e+08\n")
    noisy = read_noisy_csv(_file(tmp_path, text))
    G = 10**15
    counts, backend = hqp(noisy.hierarchy, noisy.values, G)
    assert backend == "tree" and counts.sum(axis=1)[0] > 0 and (counts >= 0).all()
    x = model1_relaxation_tree(noisy.hierarchy, noisy.values, G)
    s = G / 1e3
    xs, _ = model1_relaxation(noisy.hierarchy, noisy.values / s, G / s)
    assert float(np.max(np.abs(xs * s - x))) <= 1e-6 * G
    small = noisy.values / (2 * G / max_scale)  # the same shape, within the scale: HiGHS
    assert hqp(noisy.hierarchy, small, int(max_scale // 4))[1] == "highs-qp"
    assert hqp(noisy.hierarchy, small, int(max_scale // 4), HqpOptions(highs_max_scale=1.0))[1] == "tree"


def test_the_exact_dp_is_refused_by_the_memory_it_would_hold(monkeypatch, tmp_path: Path, capsys) -> None:
    """The memory hdp's tables would hold is checked against what is available before they are built
    (without the check they grew to 20.5 GB before the cell limit refused them)."""
    from securelp.solvers.hierarchy import hdp

    monkeypatch.setattr(hdp, "available_memory", lambda: 200 << 20)  # 200 MiB: 3.5 M cells at 40 B, 70 %
    data = _file(tmp_path, NOISY + "1,R,,1,7e12\n1,R,,2,9e11\n2,a,R,1,3e12\n2,a,R,2,5e11\n2,b,R,1,-2e12\n2,b,R,2,1\n")
    rc = main(["census", "postprocess", "--noisy", str(data), "--total", str(10**13), "--mechanism", "hdp",
               "--json", str(tmp_path / "r.json")])
    line = _one_line_error(capsys)
    assert rc == 12 and "table cells held" in line and re.search(r"[0-9.,]+ (GiB|MiB|KiB|bytes) available", line)
    assert not (tmp_path / "r.json").exists()
