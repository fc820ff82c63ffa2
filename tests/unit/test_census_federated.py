"""The regional (federated) census release, transport-free: who owns which region, what each party
computes, what the coordinator assembles, and that the release equals the single-process release
under the same noise; the accounting and its collusion figures."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.federated import (
    accounting,
    assemble,
    collusion_epsilon,
    level_loss,
    party_values,
    release_groups,
    simulate_federated,
    split_by_level,
)
from securelp.solvers.hierarchy.model import GroupSizeData, to_cumulative
from securelp.solvers.randomness import SecureRandom

TAXI = Path(__file__).parent.parent / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"


@pytest.fixture(scope="module")
def taxi() -> GroupSizeData:
    return read_counts_csv(TAXI, max_size=60, top_code=True)


def test_split_gives_each_party_its_subtree_and_lists_the_spanning_regions(taxi: GroupSizeData) -> None:
    h = taxi.hierarchy
    two = split_by_level(h, 2)
    assert len(two.parties) == 2 and two.spanning == (0,) and two.under == ((0, 1),)
    assert sorted(np.concatenate([two.owned(0), two.owned(1)]).tolist()) == list(range(1, h.size))
    three = split_by_level(h, 3)
    assert len(three.parties) == 28 and three.spanning_levels == (1, 2, 2)
    assert sum(len(u) for u in three.under[1:]) == 28 and len(three.under[0]) == 28
    for j, r in enumerate(three.parties):
        assert three.owned(j).tolist() == [r]
    with pytest.raises(InputError, match="between 2 and the hierarchy's depth 3") as caught:
        split_by_level(h, 1)
    assert caught.value.parameter == "level"


def _assembled(data: GroupSizeData, split, mechanism: str, eps: Fraction, rng: SecureRandom) -> np.ndarray:
    """The coordinator's noisy values, the parties' vectors summed in the clear."""
    h = data.hierarchy
    values = [party_values(mechanism, eps, split, h.depth, j, rows, rng.spawn(f"party{j}"))
              for j, rows in enumerate(release_groups(data, split))]
    return assemble(split, h.size, [v.own for v in values], np.sum([v.spanning for v in values], axis=0))


@pytest.mark.parametrize(("mechanism", "level"), [("hdp", 2), ("chain", 3), ("topdown", 3)])
def test_the_release_equals_the_single_process_release_under_the_same_noise(
        taxi: GroupSizeData, mechanism: str, level: int) -> None:
    """The parties' noise does not depend on their counts, so the same seeds on zero counts give the
    noise alone: the coordinator's values are the true values plus that noise, and the release is the
    single-process post-processing of those values."""
    h, eps = taxi.hierarchy, Fraction(2)
    taxi = GroupSizeData(h, taxi.counts[:, :10])  # sizes 1..10: each size is a consistent column
    split = split_by_level(h, level)
    noisy, released = simulate_federated(taxi, split, mechanism, eps, SecureRandom(seed="same", label="fed"))
    np.testing.assert_array_equal(noisy, _assembled(taxi, split, mechanism, eps, SecureRandom(seed="same", label="fed")))
    noise = _assembled(GroupSizeData(h, np.zeros_like(taxi.counts)), split, mechanism, eps,
                       SecureRandom(seed="same", label="fed"))
    base = to_cumulative(taxi.counts) if mechanism in mech.CUMULATIVE else taxi.counts
    np.testing.assert_array_equal(noisy, base + noise)
    assert np.count_nonzero(noise) > noise.size // 2
    central = mech.postprocess(mechanism, h, base + noise, taxi.total)
    np.testing.assert_array_equal(released.counts, central.counts)
    metrics = mech.release_metrics(h, released.counts, taxi.total)
    assert metrics["constraint_violations"] == 0 and metrics["negative_counts"] == 0 and metrics["total_matches"]


def test_party_values_check_their_input_and_never_send_a_spanning_total(taxi: GroupSizeData) -> None:
    h = taxi.hierarchy
    split = split_by_level(h, 3)
    own = release_groups(taxi, split)
    v = party_values("hdp", Fraction(1), split, h.depth, 4, own[4], SecureRandom(seed=1))
    ancestors = split.ancestors(4)
    assert len(ancestors) == 2 and v.own.shape == own[4].shape
    # the spanning rows above party 4 are its own values plus a share: never a region's true total,
    # and rows of spanning regions not above it are zero
    for pos in range(len(split.spanning)):
        if pos in ancestors:
            assert not np.array_equal(v.spanning[pos], taxi.counts[split.spanning[pos]])
            assert not np.array_equal(v.spanning[pos], own[4][0])
        else:
            assert not v.spanning[pos].any()
    with pytest.raises(InputError, match="holds 1 regions"):
        party_values("hdp", Fraction(1), split, h.depth, 4, own[4][:0], SecureRandom(seed=1))
    with pytest.raises(InputError, match="non-negative"):
        party_values("hdp", Fraction(1), split, h.depth, 4, -own[4] - 1, SecureRandom(seed=1))


def test_the_spanning_noise_has_the_centralized_scale(taxi: GroupSizeData) -> None:
    """The root's noise (assembled minus truth), over the 600 sizes of the small hierarchy with its 60
    sizes repeated 10 times, has the discrete Laplace's variance 2q/(1-q)^2 at b = 2L/eps (not the
    variance of one share)."""
    h = taxi.hierarchy
    split = split_by_level(h, 3)
    eps = Fraction(3)
    b = float(mech.noise_scale("hdp", h.depth, eps))
    q = np.exp(-1 / b)
    # one run over 600 sizes: 600 independent draws of the root's noise (the samplers' cost is mostly
    # per call, so one wide run costs a fraction of ten runs over 60 sizes)
    wide = GroupSizeData(h, np.tile(taxi.counts, 10))
    noisy = _assembled(wide, split, "hdp", eps, SecureRandom(seed="var"))
    root_noise = noisy[0] - wide.counts[0]
    var = np.var(root_noise)
    expected = 2 * q / (1 - q) ** 2
    assert abs(var - expected) < 0.25 * expected  # 600 draws: the sample variance is within ~10 %
    single_share = expected / 28  # what one party's share alone would give
    assert var > 5 * single_share


def test_accounting_is_the_centralized_budget_and_collusion_weakens_it(taxi: GroupSizeData) -> None:
    h = taxi.hierarchy
    split = split_by_level(h, 2)
    acc = accounting("chain", Fraction(1), split, h.depth)
    assert [lv["eps_exact"] for lv in acc["levels"]] == ["1/3"] * 3 and acc["eps_total_exact"] == "1"
    assert acc["levels"][0]["noise_added_by"].startswith("shares") and acc["levels"][1]["noise_added_by"].startswith("the")
    for mechanism in ("chain", "hdp"):
        assert level_loss(mechanism, Fraction(1), 3, 51, 0) == pytest.approx(1 / 3, rel=1e-9)
        assert level_loss(mechanism, Fraction(1), 3, 51, 1) > 1 / 3
        assert level_loss(mechanism, Fraction(1), 3, 51, 50) > level_loss(mechanism, Fraction(1), 3, 51, 1)
        assert level_loss(mechanism, Fraction(1), 3, 51, 51) == float("inf")
    assert collusion_epsilon("hdp", Fraction(1), split, h.depth, 0) == pytest.approx(1.0, rel=1e-9)
    # one of the two parties colluding: the root keeps only the honest party's share
    assert collusion_epsilon("hdp", Fraction(1), split, h.depth, 1) > 1.5
    with pytest.raises(InputError, match="colluding must be between 0 and 51"):
        level_loss("hdp", Fraction(1), 3, 51, 52)
