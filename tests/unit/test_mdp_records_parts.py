"""Record BD's seconds by part (master, blocks, cut generation, repair, verification) and its
convergence plot (Qiu's Figs. 17-20: both bounds and the relative gap per iteration)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from securelp.solvers.benders.driver import PARTS
from securelp.solvers.mdp import plotting
from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.report import IterationRecord


def test_record_bd_reports_its_seconds_by_part_for_the_run_and_each_iteration() -> None:
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 10.0, 2.0)
    r = solve_bd(p, decomposition="records", partitioner="kmrec", n_subsets=2, gap=1e-9, max_iterations=4)
    parts = r.details["parts"]
    assert set(PARTS) | {"partition", "build", "incumbents", "repair", "verification", "final"} <= set(parts)
    assert all(v >= 0.0 for v in parts.values())
    # the parts the wall clock saw one after the other add up to no more than the run
    serial = ("partition", "build", "incumbents", "master_highs", "master_certificate", "master_recertify",
              "blocks_wall", "cut_adding", "upper_bounds", "final")
    assert 0.0 < sum(parts[k] for k in serial) <= r.time_s * 1.01 + 0.05
    assert parts["master_highs"] > 0.0 and parts["block_highs"] > 0.0
    # repair and verification are the upper-bound functions' time, and a mechanism was verified
    assert parts["repair"] + parts["verification"] <= parts["upper_bounds"] + 1e-6
    assert r.details["verified_upper_bounds"] >= 1 and parts["verification"] > 0.0
    per_it = r.details["iteration_parts"]
    assert len(per_it) == r.iterations == len(r.history)
    for k in ("master_highs", "block_highs", "repair"):
        assert sum(it[k] for it in per_it) == pytest.approx(parts[k], rel=1e-9, abs=1e-9)


def test_relative_gaps_are_nan_until_both_bounds_are_finite() -> None:
    hist = [IterationRecord(1, -np.inf, np.inf, 0.1), IterationRecord(2, 1.0, np.inf, 0.2),
            IterationRecord(3, 1.0, 2.0, 0.3), IterationRecord(4, 1.98, 2.0, 0.4)]
    g = plotting.relative_gaps(hist)
    assert np.isnan(g[:2]).all()
    assert g[2:] == pytest.approx([0.5, 0.01])


def test_the_records_plot_shows_both_bounds_and_the_gap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plt = plotting.require_plotting()
    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig) or close(fig))
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 10.0, 2.0)
    r = solve_bd(p, decomposition="records", partitioner="kmrec", n_subsets=2, gap=1e-9, max_iterations=3)
    png = tmp_path / "bd.png"
    plotting.plot_result(r, p, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = figures[0].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:2] == ["lower bound (certified)", "upper bound (verified)"]
    assert "records, kmrec, M=2" in ax.get_title()
    lower = ax.get_lines()[0].get_ydata()
    assert np.allclose(lower, [h.lower for h in r.history])
