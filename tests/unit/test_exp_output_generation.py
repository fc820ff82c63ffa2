"""The output-generation experiment (benchmarks/exp_output_generation.py) is exact where it stops."""

from __future__ import annotations

import io

import pytest

from benchmarks.exp_output_generation import largest_component, run, solve_restricted


def test_output_generation_matches_the_whole_component_lp() -> None:
    cg = largest_component(150, "0")
    G, A = cg.G, cg.A
    cg.close()
    status, full, _, _, _ = solve_restricted(G, A, list(range(G.shape[1])), "choose")
    assert status == "Optimal"
    log = io.StringIO()
    r = run(150, 10, "ipm", out=log)
    assert r["rel_gap"] <= 1e-6
    assert r["lower"] <= full * (1 + 1e-9)  # a certified bound never passes the optimum
    assert r["objective"] == pytest.approx(full, rel=1e-6)
    assert r["outputs"] < G.shape[1]  # the optimum needs only some of the outputs
    assert "round 1:" in log.getvalue()
