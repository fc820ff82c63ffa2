"""Secret datasets: metrics, priors, and the input errors the issue lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets import (
    GOWALLA_PRIOR,
    MAX_DENSE_RECORDS,
    SecretDataset,
    haversine_km,
    load_dataset,
    load_prior,
)

SHIPPED = Path(__file__).resolve().parents[2] / "tests" / "data" / "mdp" / "rome_shipped_distances.csv"


def test_grid_metric_and_defaults() -> None:
    g = load_dataset("grid", rows=3, cols=4, cell_km=0.5)
    assert isinstance(g, SecretDataset) and g.n == 12 and g.unit == "km"
    assert g.distance[0, 1] == pytest.approx(0.5) and g.distance[0, 5] == pytest.approx(0.5 * np.sqrt(2))
    assert np.allclose(g.distance, g.distance.T) and np.all(np.diag(g.distance) == 0)
    assert g.prior.sum() == pytest.approx(1.0) and g.default_eta == pytest.approx(1.0)


def test_rome_uses_correct_haversine_not_the_swapped_matrix() -> None:
    r = load_dataset("rome")
    assert r.n == 500 and r.default_eps == 10 and r.default_eta == 2
    lat, lon = r.coords[:, 0], r.coords[:, 1]
    assert 41 < lat.mean() < 42.5 and 12 < lon.mean() < 13
    swapped = haversine_km(lon, lat)  # what the MATLAB code computed
    assert np.max(np.abs(swapped - r.distance)) > 1.0  # km: they really differ
    # one degree of latitude is ~111.2 km
    assert haversine_km(np.array([41.0, 42.0]), np.array([12.0, 12.0]))[0, 1] == pytest.approx(111.2, abs=0.1)
    # 200 entries of Qiu's shipped distance_matrix.mat (tests/data/mdp/SOURCES.md)
    shipped = np.loadtxt(SHIPPED, delimiter=",", skiprows=1)
    i, j, km = shipped[:, 0].astype(int), shipped[:, 1].astype(int), shipped[:, 2]
    assert np.max(np.abs(km - swapped[i, j])) < 1e-3  # confirms the swap (MATLAB used R = 6371 km)
    assert np.max(np.abs(km - r.distance[i, j])) > 1.0  # and the matrix we compute is not the shipped one


def test_gaussian_is_3d_and_seeded() -> None:
    a = load_dataset("gaussian", n_records=30, seed=7)
    b = load_dataset("gaussian", n_records=30, seed=7)
    assert a.coords.shape == (30, 3) and np.array_equal(a.distance, b.distance)


def test_gowalla_prior_loads_for_100x100() -> None:
    p = load_prior(GOWALLA_PRIOR, 10_000)
    assert p.shape == (10_000,) and abs(p.sum() - 1) <= 1e-9 and np.count_nonzero(p) == 1867


@pytest.mark.parametrize(
    "content, match",
    [("0.5,0.5", "has 2 entries"), ("0.5,0.2,0.2,0.1,0.0", "has 5 entries"), ("0.6,0.6,-0.2,0.0", "negative"),
     ("0.3,0.3,0.3,0.0", "sums to"), ("0.25,abc,0.25,0.25", "line 1")],
)
def test_bad_prior_is_an_input_error_naming_the_file(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "prior.csv"
    f.write_text(content)
    with pytest.raises(InputError, match=match) as exc:
        load_dataset("grid", rows=2, cols=2, prior=str(f))
    assert "prior.csv" in str(exc.value)


def test_points_file_euclidean_and_haversine(tmp_path: Path) -> None:
    f = tmp_path / "pts.csv"
    f.write_text("name,x,y\na,0,0\nb,3,4\nc,6,8\n")
    ds = load_dataset("points", path=str(f))
    assert ds.labels == ("a", "b", "c") and ds.distance[0, 1] == pytest.approx(5.0)
    h = tmp_path / "ll.csv"
    h.write_text("41.9,12.5\n41.91,12.5\n")
    ds = load_dataset("points", path=str(h), metric="haversine")
    assert ds.unit == "km" and ds.distance[0, 1] == pytest.approx(1.112, abs=0.01)


def test_malformed_points_file_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.csv"
    f.write_text("x,y\n0,0\n1,1\n2,oops\n")
    with pytest.raises(InputError, match=r"bad.csv, line 4"):
        load_dataset("points", path=str(f))
    g = tmp_path / "ragged.csv"
    g.write_text("0,0\n1,1,1\n")
    with pytest.raises(InputError, match="line 2"):
        load_dataset("points", path=str(g))
    with pytest.raises(InputError, match="cannot read"):
        load_dataset("points", path=str(tmp_path / "missing.csv"))
    # a header naming another number of columns than the records have is refused, not ignored;
    # a labelled file's header may or may not name the label column
    w = tmp_path / "wide.csv"
    w.write_text("x,y,z\n0,0\n1,1\n")
    with pytest.raises(InputError, match=r"wide.csv, line 1: the header names 3 columns but the first record \(line 2\) has 2"):
        load_dataset("points", path=str(w))
    for header in ("name,x,y", "x,y"):
        ok = tmp_path / "labelled.csv"
        ok.write_text(f"{header}\na,0,0\nb,1,1\n")
        assert load_dataset("points", path=str(ok)).labels == ("a", "b")


def test_duplicate_points_are_refused_naming_both(tmp_path: Path) -> None:
    f = tmp_path / "dup.csv"
    f.write_text("p,0,0\nq,1,1\nr,0,0\n")
    with pytest.raises(InputError, match=r"records 0 \(p\) and 2 \(r\).*duplicate"):
        load_dataset("points", path=str(f))


def test_an_unknown_dataset_is_an_input_error_naming_the_parameter() -> None:
    with pytest.raises(InputError, match="unknown dataset") as caught:
        load_dataset("nope")
    assert caught.value.parameter == "name"


def test_too_many_records_for_the_dense_distances_is_an_input_error(tmp_path: Path) -> None:
    """Every dataset has a cap on its records (100,000 points: 80 GB of distances), refused before the
    distances are computed."""
    cap = MAX_DENSE_RECORDS
    f = tmp_path / "many.csv"
    f.write_text("".join(f"{i},{i % 7}\n" for i in range(cap + 1)))
    with pytest.raises(InputError, match=rf"many\.csv has {cap + 1:,} records, too many for the dense distance "
                                         rf"matrix \(max {cap:,}\)"):
        load_dataset("points", path=str(f))
    with pytest.raises(InputError, match=rf"grid of {2 * (cap // 2 + 1)} cells is too large"):
        load_dataset("grid", rows=2, cols=cap // 2 + 1)
    with pytest.raises(InputError, match=rf"gaussian needs 1 to {cap:,} records"):
        load_dataset("gaussian", n_records=cap + 1)
    f.write_text("".join(f"{i},{i * i}\n" for i in range(5)))
    assert load_dataset("points", path=str(f)).n == 5


def test_a_points_file_with_too_many_lines_is_refused_before_any_line_is_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of millions of short lines (small enough in bytes) is refused by its line count, so the
    refusal does not wait for millions of lines to be split and converted."""
    from securelp.solvers.mdp.datasets import points

    def parse_not_reached(*args: object) -> None:
        raise AssertionError("the records were parsed before the line count was checked")

    monkeypatch.setattr(points, "_parse_records", parse_not_reached)
    f = tmp_path / "long.csv"
    f.write_text("x,y\n" + "0,1\n" * (MAX_DENSE_RECORDS + 1))
    with pytest.raises(InputError, match=rf"long\.csv has {MAX_DENSE_RECORDS + 2:,} record lines, too many"):
        load_dataset("points", path=str(f))
