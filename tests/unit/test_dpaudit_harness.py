"""The distinguishing test of the privacy audit: Clopper-Pearson bounds, event choice, views."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

from securelp.coordinator.dpaudit import (
    RecordedViews,
    ViewBatch,
    audit_protocol,
    distinguish,
    eps_lower_bound,
    flatten_views,
    max_detectable_eps,
    write_views,
)
from securelp.coordinator.dpaudit.harness import cp_lower, cp_upper
from securelp.coordinator.dpaudit.ldp import LdpCollectionViews
from securelp.solvers.errors import InputError


def test_clopper_pearson_bounds_are_the_beta_quantiles_and_cover() -> None:
    assert float(cp_lower(7, 20, 0.025)) == pytest.approx(beta.ppf(0.025, 7, 14))
    assert float(cp_upper(7, 20, 0.025)) == pytest.approx(beta.ppf(0.975, 8, 13))
    assert float(cp_lower(0, 20, 0.025)) == 0.0 and float(cp_upper(20, 20, 0.025)) == 1.0
    # coverage: the one-sided 97.5 % lower bound exceeds the true p in at most ~2.5 % of samples
    rng = np.random.default_rng(5)
    k = rng.binomial(200, 0.3, size=4000)
    lows, highs = cp_lower(k, 200, 0.025), cp_upper(k, 200, 0.025)
    assert np.mean(lows > 0.3) <= 0.035 and np.mean(highs < 0.3) <= 0.035
    # and is not vacuous: most lower bounds sit above 0.2
    assert np.mean(lows > 0.2) > 0.9


def test_eps_lower_bound_of_a_perfect_event_is_the_resolution_of_the_runs() -> None:
    n = 500
    top = max_detectable_eps(n, 0.95)
    lo = (0.025) ** (1 / n)  # CP lower bound of n hits in n runs
    assert top == pytest.approx(math.log(lo / (1 - lo)))
    assert float(eps_lower_bound(n, n, 0, n, 0.95)) == pytest.approx(top)
    assert float(eps_lower_bound(100, n, 100, n, 0.95)) == 0.0  # equal rates show nothing


def _randomized_response(eps: float, n: int, seed: int, noise_features: int = 5) -> tuple[ViewBatch, ViewBatch]:
    """Binary randomized response of true eps (P[report = bit] = e^eps / (1 + e^eps)) beside
    independent coordinates that do not differ."""
    rng = np.random.default_rng(seed)
    keep = math.exp(eps) / (1 + math.exp(eps))
    names = ("report",) + tuple(f"other{i}" for i in range(noise_features))
    batches = []
    for bit in (0, 1):
        flip = rng.random(n) >= keep
        report = np.where(flip, 1 - bit, bit).astype(float)
        other = rng.integers(0, 7, size=(n, noise_features)).astype(float)
        batches.append(ViewBatch(names, np.column_stack([report, other])))
    return batches[0], batches[1]


def test_randomized_response_is_bounded_below_its_eps_and_flagged_against_half_of_it() -> None:
    d0, d1 = _randomized_response(1.0, 4000, seed=1)
    res = distinguish(d0, d1, 0.95)
    assert res.event.features == ("report",)
    assert 0.5 * 1.0 < res.eps_lb <= 1.0  # below the true eps, above half of it: flags a claim of 0.5
    # the negative control: a mechanism twice as leaky is bounded above the first one's eps
    d0, d1 = _randomized_response(2.5, 4000, seed=2)
    assert distinguish(d0, d1, 0.95).eps_lb > 1.0


def test_identical_inputs_give_no_distinguishability() -> None:
    d0, _ = _randomized_response(1.0, 2000, seed=3)
    d1, _ = _randomized_response(1.0, 2000, seed=4)
    assert distinguish(d0, d1, 0.95).eps_lb < 0.3


def test_flatten_views_cells_strings_missing_fields_and_no_timings() -> None:
    views = [{"a": np.array([[1, 2], [3, 4]]), "s": "x", "report.time_s": 0.5, "flag": True},
             {"a": np.array([[5, 6], [7, 8]]), "s": "y", "report.time_s": 0.9, "flag": False, "extra": 3}]
    batch = flatten_views(views)
    assert batch.names[:4] == ("a[0,0]", "a[0,1]", "a[1,0]", "a[1,1]")
    assert "report.time_s" not in batch.names  # wall-clock timings are not part of a view
    assert list(batch.values[:, batch.names.index("extra#present")]) == [0.0, 1.0]
    s = batch.values[:, batch.names.index("s")]
    assert s[0] != s[1]
    same = flatten_views(views[:1], names=batch.names)
    assert same.values.shape == (1, len(batch.names)) and same.values[0, batch.names.index("extra")] == 0.0


def test_a_field_only_one_input_carries_is_caught() -> None:
    v0 = [{"x": float(i % 5)} for i in range(200)]
    v1 = [{"x": float(i % 5), "debug": 1.0} for i in range(200)]
    b = flatten_views(v0 + v1)
    res = distinguish(ViewBatch(b.names, b.values[:200]), ViewBatch(b.names, b.values[200:]), 0.95)
    assert res.eps_lb == pytest.approx(max_detectable_eps(100, 0.95))


def test_too_few_runs_and_misaligned_features_are_refused() -> None:
    d0, d1 = _randomized_response(1.0, 6, seed=1)
    with pytest.raises(InputError, match="at least 8 runs"):
        distinguish(d0, d1)
    d0, d1 = _randomized_response(1.0, 20, seed=1)
    with pytest.raises(InputError, match="different features"):
        distinguish(d0, ViewBatch(("y",) + d1.names[1:], d1.values))
    with pytest.raises(InputError, match="confidence"):
        distinguish(d0, d1, 1.0)


class _Kept:
    def __init__(self, inner) -> None:
        self.inner, self.protocol, self.claimed_eps, self.kept = inner, inner.protocol, inner.claimed_eps, []

    def describe(self):
        return self.inner.describe()

    def views(self, side, runs, rng):
        out = self.inner.views(side, runs, rng)
        self.kept.extend((side, v) for v in out)
        return out


def test_recorded_views_audit_like_the_runs_they_record(tmp_path) -> None:
    kept = _Kept(LdpCollectionViews(1.0, mechanism="grr", plant="half-noise"))
    live = audit_protocol(kept, 400, seed="rec")
    path = tmp_path / "views.jsonl"
    write_views(path, kept.kept, {"protocol": "ldp", "claimed_eps": 1.0})
    recorded = audit_protocol(RecordedViews(path), 400, seed="other")
    assert recorded.eps_lb == pytest.approx(live.eps_lb)
    assert recorded.result.event.describe() == live.result.event.describe()
    assert recorded.claimed_eps == 1.0
    with pytest.raises(InputError, match="holds 400 views of input D0"):
        audit_protocol(RecordedViews(path), 401)
