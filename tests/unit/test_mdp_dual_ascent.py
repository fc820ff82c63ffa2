"""First-order dual ascent (`smoothed_dual_ascent`): a valid mDP-row bound, and a warm start that keeps colgen exact.

The starts run without the dominance search (``ColumnGenerationOptions(dominance=False)``): dropping the outputs dominated in the cone's dual order
would shrink these small instances below the sizes that get a start."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import InputError
from securelp.solvers.mdp.columns import ColumnGenerationOptions, solve_colgen
from securelp.solvers.mdp.columns.ascent import smoothed_dual_ascent
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.verify import verify_mechanism
from tests.mdp_fixtures import component, gaussian

NO_DOMINANCE = ColumnGenerationOptions(dominance=False)


def _giant(p) -> ComponentCG:
    """The column generation of ``p``'s largest component (its ``G`` and mDP rows ``A``); close it after use."""
    return component(p, max(p.graph.component_members(), key=lambda g: g.size), workers=2)


@pytest.mark.parametrize("seed", [1, 2])
def test_bound_is_below_the_optimum_and_closes_most_of_the_gap(seed: int) -> None:
    p, _, idx, opt_c = gaussian(70, seed)  # opt_c: the giant component's share of the optimum
    cg = _giant(p)
    cg.close()
    A, G = cg.A, cg.G
    assert np.array_equal(cg.idx, idx) and idx.size >= 20
    trivial = float(G.min(axis=1).sum())
    Q, its = smoothed_dual_ascent(G, A, time.perf_counter() + 600.0, max_iterations=1000)
    assert its > 0 and Q.shape == G.shape
    bound = float(Q.min(axis=1).sum())
    assert bound <= opt_c * (1 + 1e-9)  # weak duality: never above the optimum
    # and not vacuous: most of the distance from the trivial bound to the optimum is closed (after
    # these 1000 iterations 99.3% for seed 1, 98.4% for seed 2)
    assert bound >= trivial + 0.9 * (opt_c - trivial)


def test_colgen_with_a_dual_ascent_start_equals_direct() -> None:
    p, direct, _, _ = gaussian(70)
    r = solve_colgen(p, gap=1e-7, dual_ascent=1.0, options=NO_DOMINANCE)
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    assert r.lower_bound <= direct.objective * (1 + 1e-9)
    ascent = r.details["dual_ascent"]
    assert ascent and all(a["iterations"] > 0 for a in ascent)
    assert sum(a["bound"] for a in ascent) <= direct.objective * (1 + 1e-9)
    # the default leaves small components alone (the starts come before the first iteration)
    assert solve_colgen(p, gap=1e-4, max_iterations=1).details["dual_ascent"] == []


def test_bad_dual_ascent_budget_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    p = build_pmo(load_dataset("grid", rows=3, cols=3), 1.0, 1.5)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(InputError, match="dual-ascent") as exc:
            solve_colgen(p, dual_ascent=bad)
        assert exc.value.parameter == "dual_ascent"
    rc = main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "bd",
               "--decomposition", "columns", "--dual-ascent", "-2", "--json", "-"])
    assert rc == 3
    assert "--dual-ascent must be a number of seconds >= 0" in capsys.readouterr().err


def test_bad_time_limit_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """On the command line a zero, negative, NaN or infinite limit is a user mistake, not a run that
    stops at once with a trivial mechanism and status time_limit (exit 8, which it was). The API
    keeps ``time_limit=0`` as "no time left" (test_mdp_colgen)."""
    for bad in ("-5", "0", "nan", "inf"):
        rc = main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "bd",
                   "--decomposition", "columns", "--time-limit", bad, "--json", "-"])
        assert rc == 3
        assert "--time-limit must be a positive number of seconds" in capsys.readouterr().err
    for bad in ("0", "-1"):  # no threads at all is a mistake too, not a silent one-thread run
        rc = main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "bd",
                   "--decomposition", "columns", "--workers", bad, "--json", "-"])
        assert rc == 3 and "--workers must be >= 1" in capsys.readouterr().err
    rc = main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "bd",
               "--decomposition", "columns", "--time-limit", "30", "--json", "-"])
    assert rc == 0  # a sane limit still runs
    assert '"status": "optimal"' in capsys.readouterr().out


def test_cli_reports_the_dual_ascent(tmp_path) -> None:
    out = tmp_path / "r.json"
    rc = main(["mdp", "--dataset", "gaussian", "--records", "40", "--seed", "2", "--eta", "0.9", "--method", "bd",
               "--decomposition", "columns", "--dual-ascent", "0.5", "--first-order", "smoothed", "--gap", "1e-6",
               "--json", str(out)])
    rep = json.loads(out.read_text())
    assert rc == 0 and rep["status"] == "optimal"
    assert rep["dual_ascent"] and {"records", "iterations", "seconds", "bound"} <= set(rep["dual_ascent"][0])
    assert sum(a["bound"] for a in rep["dual_ascent"]) <= rep["upper_bound"] * (1 + 1e-9)


def test_pricing_round_stops_at_the_deadline_and_keeps_the_certificates() -> None:
    p = gaussian(70)[0]
    cg = _giant(p)
    try:
        js = np.arange(cg.Kc)
        mu = cg.G.min(axis=1) + 1e-3
        before = cg.certs.Q.copy()
        assert cg.pricer.price(js, mu, 1e-12, deadline=time.perf_counter() - 1.0) == []
        assert cg.pricer.lp_solves == 0 and np.array_equal(cg.certs.Q, before)
        done = cg.pricer.price(js, mu, 1e-12)
        assert len(done) == cg.Kc and cg.pricer.lp_solves == cg.Kc
    finally:
        cg.close()
