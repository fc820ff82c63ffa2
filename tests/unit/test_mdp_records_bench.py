"""benchmarks/bench_qiu.py: Qiu's master-component count, the statistics and the page it renders
from result rows (the paper's figures beside ours, the before-and-after pairs, the machine's load)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_qiu as bq


def test_qius_master_components_are_the_cross_subset_components_of_more_than_one_record() -> None:
    # records 0-1-2 in subset 0, 3-4 in subset 1, 5 alone in subset 2; cross edges 2-3 and 4-5
    labels = np.array([0, 0, 0, 1, 1, 2])
    rows = np.array([0, 1, 2, 3, 4])
    cols = np.array([1, 2, 3, 4, 5])
    assert bq.qiu_master_components(labels, rows, cols, 6) == [2, 2]
    # joining 3 and 4 across subsets too merges both into one component of four
    labels = np.array([0, 0, 0, 1, 2, 3])
    assert bq.qiu_master_components(labels, rows, cols, 6) == [4]


def test_mean_and_spread_are_the_papers_196_sample_sd() -> None:
    m, s = bq.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and s == pytest.approx(1.96 * 1.0)
    assert bq.mean_ci([]) is None and bq.mean_ci([5.0]) == (5.0, 0.0)


def _row(kind: str, date: str, wall: float = 10.0, **kw):
    base = {"kind": kind, "dataset": "road", "instance": 0, "date": date, "wall_s": wall, "commit": "abc",
            "machine": {"cpu": "CPU X", "cores": 2, "ram_gb": 8.0, "load_start": [3.5, 3, 3], "load_end": [4.25, 4, 4]}}
    return {**base, **kw}


def test_the_page_sets_ours_beside_the_papers_and_pairs_runs_around_a_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bq, "CHANGES", [("2026-01-01T12:00:00Z", "a faster block")])
    bd = {"partitioner": "bsc", "status": "optimal", "iterations": 1, "lower": 0.99, "upper": 1.0, "rel_gap": 0.01,
          "history": [[0.99, 1.0, 1.0]], "n_boundary": 100, "n": 500}
    rows = [
        _row("partition", "2026-01-01T10:00:00Z", partitioner="kmdv", subproblem_mean=9.5, subproblem_max=20,
             component_mean=11.0, component_max=40, n_boundary=250),
        _row("direct", "2026-01-01T10:10:00Z", status="optimal", time_s=12.0, objective=0.995, lower=0.995,
             upper=0.995, rel_gap=0.0),
        _row("bd", "2026-01-01T11:00:00Z", time_s=150.0, parts={"block_highs": 140.0, "blocks_wall": 139.0}, **bd),
        _row("bd", "2026-01-01T12:30:00Z", time_s=15.0, parts={"block_highs": 5.0, "blocks_wall": 4.0}, **bd),
        _row("trivial", "2026-01-01T12:40:00Z", trivial_lower=0.99),
    ]
    page = tmp_path / "qiu.md"
    bq.render(rows, page, tmp_path / "qiu.jsonl")
    text = page.read_text()
    # Table 1, k-m-DV on Road: ours (one instance) beside the paper's 9.5 +- 1.2
    assert "| Road | 9.5 +- 0.0 | 9.5 +- 1.2 |" in text
    # Table 3: the newest run, 15 s where the paper's BSC exceeded its iteration cap; the direct LP's 12 s
    assert "15.0 +- 0.0 (1/1) * | max it. exceeded" in text and "12.0 +- 0.0 (1/1)" in text
    # the run before the change and the one after it, side by side
    assert "| Road | BSC | 0 | 150.0 | 15.0 | 140.0 | 5.0 | 139.0 | 4.0 |" in text
    assert "| CPU X | 2 | 8.0 | 5 | 3.50-3.50 | 4.25-4.25 |" in text
    assert (tmp_path / bq.FIGURES / "convergence_road.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a run started before the change and ending after it measured the old code
    late = _row("bd", "2026-01-01T12:00:05Z", wall=30.0, time_s=30.0, parts={}, **bd)
    assert [(o["time_s"], n["time_s"]) for o, n in bq.before_after(rows[:3] + [late, rows[3]], "2026-01-01T12:00:00Z")] \
        == [(30.0, 15.0)]
