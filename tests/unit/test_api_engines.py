"""The engines' library calls: ``securelp.optimal_mechanism``, ``ldp_mechanism`` / ``ldp_perturb`` /
``ldp_estimate`` and ``census_release``: verified results, typed errors naming the parameter, and a
census release that carries nothing computed from the true counts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import securelp
from securelp.solvers.errors import InputError

GRID = {"rows": 3, "cols": 3}


def test_optimal_mechanism_is_verified_and_bd_agrees_with_the_direct_lp() -> None:
    bd = securelp.optimal_mechanism("grid", eps=0.5, dataset_params=GRID)
    direct = securelp.optimal_mechanism("grid", eps=0.5, method="direct", dataset_params=GRID)
    em = securelp.optimal_mechanism("grid", eps=0.5, method="expmech", dataset_params=GRID)
    assert bd.status == direct.status == "optimal"
    assert bd.objective == pytest.approx(direct.objective, rel=1e-4)
    assert em.objective > bd.objective * 1.05  # the baseline is feasible, not optimal
    assert bd.mechanism.shape == (9, 9) and bd.labels[0] == "r0c0" and list(bd.outputs) == list(range(9))
    np.testing.assert_allclose(bd.mechanism.sum(axis=1), 1.0, atol=1e-9)
    # the definition, checked here independently on what the call returned: for records within eta,
    # P[i, k] <= exp(eps d(i, j)) P[j, k]
    d = bd.problem.dataset.distance
    p = bd.mechanism
    near = d <= bd.eta * (1 + 1e-12)
    worst = max(float(np.max(p[i] - np.exp(bd.eps * d[i, j]) * p[j]))
                for i in range(9) for j in range(9) if near[i, j])
    assert worst <= 1e-9 and p.min() >= -1e-12


def test_optimal_mechanism_takes_a_dataset_object_and_refuses_mixed_or_unknown_arguments() -> None:
    ds = securelp.load_dataset("grid", **GRID)
    assert securelp.optimal_mechanism(ds, eps=0.5).status == "optimal"
    with pytest.raises(InputError, match="unknown method 'lp'") as caught:
        securelp.optimal_mechanism(ds, method="lp")
    assert caught.value.parameter == "method"
    with pytest.raises(InputError, match="gap must be in") as caught:
        securelp.optimal_mechanism(ds, gap=1.0)
    assert caught.value.parameter == "gap"
    with pytest.raises(InputError, match="n_subsets: options of method 'bd'"):
        securelp.optimal_mechanism(ds, method="direct", n_subsets=3)
    with pytest.raises(InputError, match="dataset_params are for a dataset given by name"):
        securelp.optimal_mechanism(ds, dataset_params=GRID)


def test_ldp_reports_estimate_the_frequencies_and_bad_values_are_refused() -> None:
    domain = securelp.GridDomain(4, 4, 1.0)
    mech = securelp.ldp_mechanism(domain, 2.0)
    assert mech.verification is not None
    truth = np.zeros(16)
    truth[[0, 5, 15]] = [0.5, 0.3, 0.2]
    values = np.repeat([0, 5, 15], [10_000, 6_000, 4_000])
    reports = securelp.ldp_perturb(mech, values, seed=1)
    assert reports.shape == values.shape and not np.array_equal(reports, values)
    est = securelp.ldp_estimate(mech, reports)
    assert np.abs(est - truth).max() < 0.05
    with pytest.raises(InputError, match=r"indices in 0\.\.15") as caught:
        securelp.ldp_perturb(mech, np.array([3, 16]))
    assert caught.value.parameter == "values"
    with pytest.raises(InputError, match="integer value indices"):
        securelp.ldp_perturb(mech, np.array([0.5]))
    with pytest.raises(InputError, match="non-empty"):
        securelp.ldp_estimate(mech, np.array([], dtype=int))
    with pytest.raises(InputError, match="unknown mechanism") as caught:
        securelp.ldp_mechanism(domain, 1.0, "nope")
    assert caught.value.parameter == "mechanism"


def test_census_release_is_consistent_and_carries_nothing_from_the_truth(tmp_path: Path) -> None:
    taxi = Path(__file__).parent.parent / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"
    with pytest.raises(InputError, match="needs max_size") as caught:
        securelp.census_release(taxi, "1")
    assert caught.value.parameter == "max_size"
    rel = securelp.census_release(taxi, "1", mechanism="topdown", max_size=200)
    assert rel.private and rel.report["private"] and rel.eps == 1
    assert rel.report["constraint_violations"] == 0 and rel.report["negative_counts"] == 0
    assert rel.report["total_matches"] and rel.counts.shape[1] == 200
    # nothing in the report is an error against the truth, nor any figure of the true counts
    assert not any("error" in key or "l1" in key or "true" in key for key in rel.report)
    seeded = securelp.census_release(taxi, "1", mechanism="topdown", max_size=200, seed=3)
    again = securelp.census_release(taxi, "1", mechanism="topdown", max_size=200, seed=3)
    assert not seeded.private and np.array_equal(seeded.counts, again.counts)
    with pytest.raises(InputError, match="unknown mechanism"):
        securelp.census_release(taxi, "1", mechanism="laplace", max_size=200)
    assert math.isclose(rel.report["noise_scale"], 2 * 3 / 1)


def test_the_engines_namespaces_name_the_same_calls() -> None:
    assert securelp.mdp.optimal_mechanism is securelp.optimal_mechanism
    assert securelp.ldp.mechanism is securelp.ldp_mechanism
    assert securelp.ldp.perturb is securelp.ldp_perturb and securelp.ldp.estimate is securelp.ldp_estimate
    assert securelp.census.release is securelp.census_release
    assert {"mdp", "ldp", "census", "solve"} <= set(dir(securelp))
