"""Lazy mDP rows in the column decomposition's pricing LPs (dense components, securelp.solvers.mdp.rowpool)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from securelp.solvers.mdp import colgen, rowpool
from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.pmo import build_pmo, solve_direct
from securelp.solvers.mdp.verify import verify_mechanism


def _complete(tmp_path: Path, n: int = 40, seed: int = 0):
    """``n`` random 2-D points with every pair a neighbour (all pairs essential): a dense component."""
    pts = np.random.default_rng(seed).uniform(0, 10, size=(n, 2))
    f = tmp_path / "pts.csv"
    np.savetxt(f, pts, fmt="%.6f", delimiter=",")
    return build_pmo(load_dataset("points", path=f), 1.0, 1000.0)


def _component(p, monkeypatch, lazy: bool) -> colgen._ComponentCG:
    monkeypatch.setattr(colgen, "LAZY_ROWS_MIN_RATIO", 0.0 if lazy else np.inf)
    idx = np.arange(p.n)
    return colgen._ComponentCG(p, idx, np.arange(p.K), 1, 1e-6, 0.0)


def test_dense_components_price_lazily_and_exactly(tmp_path: Path, monkeypatch) -> None:
    """Each lazy pricing LP ends at a point that keeps every mDP row, with the optimum of the whole
    LP (scipy's HiGHS on all rows) and a certificate that attains it; it needed rows beyond its start."""
    monkeypatch.setattr(rowpool, "START_NEIGHBOURS", 2)
    monkeypatch.setattr(rowpool, "ADD_PER_RECORD", 1)
    p = _complete(tmp_path)
    cg = _component(p, monkeypatch, lazy=True)
    assert cg.lazy is not None and cg.dual_pricing
    assert cg.lazy.start.size < cg.E  # the LPs start from a few rows per record
    assert cg.lazy.start.size <= 2 * 2 * cg.m  # 2 nearest per record and their reverses (the patch holds)
    rng = np.random.default_rng(1)
    for _ in range(3):
        mu = cg.G.mean(axis=1) + rng.normal(0, 0.02 * cg.G.mean(), cg.m)
        js = rng.choice(cg.Kc, size=6, replace=False)
        for j, z in cg.price(js, mu, 1e-12):
            c = cg.G[:, j] - mu
            full = linprog(c, A_ub=cg.A, b_ub=np.zeros(cg.E), bounds=(0, 1), method="highs")
            assert z is not None
            assert float(np.max(cg.A @ z)) <= 1e-8  # every row, not only those carried
            assert float(c @ z) == pytest.approx(full.fun, rel=1e-7, abs=1e-10)
            # the stored certificate (zero multipliers on rows not carried) certifies it
            assert float(np.minimum(0.0, cg.Q[j] - mu).sum()) >= full.fun - 1e-9
    assert cg.lazy.separation_rounds > 0
    # a second pricing at the same duals starts from each output's own rows and basis
    rounds = cg.lazy.separation_rounds
    cg.price(js, mu, 1e-12)
    assert cg.lazy.separation_rounds == rounds


def test_without_separation_the_points_break_rows(tmp_path: Path, monkeypatch) -> None:
    """Negative control: with the rows' separation switched off the pricing LPs are relaxations and
    their points break mDP rows, which the check above would catch."""
    monkeypatch.setattr(rowpool, "START_NEIGHBOURS", 2)
    monkeypatch.setattr(rowpool.LazyRows, "violated", lambda self, w, z: np.empty(0, dtype=np.int64))
    p = _complete(tmp_path)
    cg = _component(p, monkeypatch, lazy=True)
    rng = np.random.default_rng(1)
    mu = cg.G.mean(axis=1) + rng.normal(0, 0.02 * cg.G.mean(), cg.m)
    worst = max(float(np.max(cg.A @ z)) for _, z in cg.price(np.arange(cg.Kc), mu, 1e-12) if z is not None)
    assert worst > 1e-6


@pytest.mark.parametrize("lazy", [True, False])
def test_dense_columns_decomposition_equals_direct(tmp_path: Path, lazy: bool, monkeypatch) -> None:
    """The whole column decomposition on a complete graph gives direct's optimum either way."""
    monkeypatch.setattr(rowpool, "START_NEIGHBOURS", 3)
    p = _complete(tmp_path, n=30, seed=2)
    monkeypatch.setattr(colgen, "LAZY_ROWS_MIN_RATIO", 0.0 if lazy else np.inf)
    direct = solve_direct(p)
    r = solve_bd(p, decomposition="columns", gap=1e-7)
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) and r.rel_gap <= 1e-6


def test_cli_reports_the_lazy_rows_of_a_dense_component(tmp_path: Path) -> None:
    """`securelp mdp` on 80 points with every pair a neighbour (79 rows per record): the report's
    `lazy_rows` names the component and what its LPs carried; a sparse grid's is empty."""
    import json

    from securelp.coordinator.cli import main

    f = tmp_path / "pts.csv"
    np.savetxt(f, np.random.default_rng(3).uniform(0, 10, size=(80, 2)), fmt="%.6f", delimiter=",")
    out = tmp_path / "r.json"
    assert main(["mdp", "--dataset", "points", "--points", str(f), "--eta", "1000", "--method", "bd",
                 "--decomposition", "columns", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["status"] == "optimal"
    (lz,) = rep["lazy_rows"]
    assert lz["records"] == 80 and lz["mdp_rows"] == 80 * 79
    assert lz["start_rows"] <= lz["mean_rows_carried"] < lz["mdp_rows"] and lz["separation_rounds"] > 0
    assert main(["mdp", "--dataset", "grid", "--rows", "4", "--cols", "4", "--method", "bd", "--decomposition",
                 "columns", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["lazy_rows"] == []


class _Switched(Exception):
    pass


@pytest.mark.parametrize("lazy", [True, False])
def test_dense_components_do_not_switch_to_the_ipm(tmp_path: Path, lazy: bool, monkeypatch) -> None:
    """A lingering column generation turns to the IPM start, except on a dense component (the IPM
    would carry every row of every output); the switch's thresholds are lowered to this instance,
    and the switch is stopped where it would begin."""
    p = _complete(tmp_path, n=30, seed=2)
    monkeypatch.setattr(colgen, "LAZY_ROWS_MIN_RATIO", 0.0 if lazy else np.inf)
    monkeypatch.setattr(colgen, "IPM_SWITCH_MIN_RECORDS", 10)
    monkeypatch.setattr(colgen, "IPM_SWITCH_ITERATIONS", 1)

    def switched(*args, **kwargs):
        raise _Switched

    monkeypatch.setattr(colgen, "_switch_to_ipm", switched)
    if lazy:
        assert colgen.solve_colgen(p, gap=1e-6, max_iterations=3).iterations >= 2  # went on past the first
    else:
        with pytest.raises(_Switched):
            colgen.solve_colgen(p, gap=1e-6, max_iterations=3)


def test_the_saved_basis_and_the_loaded_columns_are_highs_own(tmp_path: Path, monkeypatch) -> None:
    """The basis codes kept from HiGHS's basic variables equal its full status lists, and the model
    loaded from ``A``'s arrays is ``[I, A[rows]']`` with that basis (stop 39 replaced the slower
    ``getBasis`` lists and scipy's stacking with both)."""
    p = _complete(tmp_path, n=30)
    cg = _component(p, monkeypatch, lazy=True)
    mu = cg.G.mean(axis=1)
    cg.price(np.arange(6), mu, 1e-12)
    h = cg.pricers[0]
    b = h.getBasis()
    col, row = rowpool._basis_codes(h, h.getNumCol(), h.getNumRow())
    assert np.array_equal(col, rowpool._codes(b.col_status)) and np.array_equal(row, rowpool._codes(b.row_status))
    assert (col == rowpool._BASIC).sum() + (row == rowpool._BASIC).sum() == cg.m
    j = int(np.flatnonzero([s is not None for s in cg.lazy.saved])[0])
    cg.lazy.load(h, 0, j)
    saved_rows, saved_col, saved_row = cg.lazy.saved[j]
    a = h.getLp().a_matrix_
    got = sp.csc_matrix((np.asarray(a.value_), np.asarray(a.index_), np.asarray(a.start_)),
                        shape=(cg.m, cg.m + saved_rows.size))
    want = sp.hstack([sp.identity(cg.m, format="csc"), cg.A[saved_rows].T], format="csc")
    assert abs(got - want).max() == 0.0
    b = h.getBasis()
    assert np.array_equal(rowpool._codes(b.col_status), saved_col)
    assert np.array_equal(rowpool._codes(b.row_status), saved_row)
