"""Benchmark results are data: every line has the shared context, and the docs' tables are what
``python -m benchmarks.render`` generates from ``benchmarks/results/*.jsonl`` (a stale table fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import render
from benchmarks.results import RESULTS_DIR, append_run, load, run_context
from securelp.solvers.errors import InputError

KEYS = {"bench", "run_id", "date", "commit", "command", "machine", "case", "figures"}
#: every line has its date, commit, command and machine, each in its benchmark's own layout: written
#: before benchmarks/results.py (leakage, mpyc, secagg: their next runs write through append_run), or one
#: line per (dataset, eps, mechanism) cell with its per-repetition loads (table7), or one line per run
#: with its load at start and end and its cost by part (qiu)
OWN_LAYOUT = {"leakage", "mpyc", "secagg", "table7", "qiu"}


def test_every_committed_result_line_has_the_shared_context() -> None:
    files = sorted(RESULTS_DIR.glob("*.jsonl"))
    assert {t.results for t in render.TABLES} <= {f.stem for f in files}
    for f in files:
        records = load(f)
        assert records, f
        for r in records:
            if f.stem in OWN_LAYOUT:
                assert {"date", "commit", "command", "machine"} <= set(r), f.name
                continue
            assert KEYS <= set(r), (f.name, sorted(KEYS - set(r)))
            assert {"cpu", "cores", "memory_bytes", "load_average"} <= set(r["machine"]), f.name


def test_a_run_appends_one_line_per_case(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    context = run_context("x", ["--repeat", "1"])
    assert append_run(path, context, [({"n": 1}, {"s": 0.5}), ({"n": 2}, {"s": 0.7})]) == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["case"]["n"] for r in lines] == [1, 2] and lines[0]["run_id"] == lines[1]["run_id"]
    assert "--repeat 1" in lines[0]["command"] and KEYS <= set(lines[0])


def test_the_committed_tables_are_the_rendered_ones() -> None:
    stale = [str(p) for p, text in render.rendered_pages().items() if p.read_text(encoding="utf-8") != text]
    assert stale == [], "run python -m benchmarks.render"


def test_a_table_edited_by_hand_is_found_stale(tmp_path: Path) -> None:
    table = render.TABLES[0]
    page = (render.REPO / table.page).read_text(encoding="utf-8")
    begin, end = table.markers
    edited = page.replace(begin + "\n", begin + "\n| a row typed by hand |\n", 1)
    assert edited != page
    fresh = render.replace_section(edited, begin, end, table.render(), table.page)
    assert fresh != edited and "typed by hand" not in fresh
    with pytest.raises(InputError, match="lacks the table markers"):
        render.replace_section("no markers here", begin, end, "x", "page.md")
