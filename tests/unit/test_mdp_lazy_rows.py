"""Lazy mDP rows in the column decomposition's pricing LPs (dense components, securelp.solvers.mdp.columns.lazy_rows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.columns import ColumnGenerationOptions, StartOptions, driver, solve_colgen
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.lazy_rows import BASIC, LazyRows, basis_codes, status_codes
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.direct import solve_direct
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.verify import verify_mechanism


def _complete(tmp_path: Path, n: int = 40, seed: int = 0):
    """``n`` random 2-D points with every pair a neighbour (all pairs essential): a dense component."""
    pts = np.random.default_rng(seed).uniform(0, 10, size=(n, 2))
    f = tmp_path / "pts.csv"
    np.savetxt(f, pts, fmt="%.6f", delimiter=",")
    return build_pmo(load_dataset("points", path=f), 1.0, 1000.0)


def _options(lazy: bool, **kw) -> ColumnGenerationOptions:
    return ColumnGenerationOptions(lazy_rows_min_ratio=0.0 if lazy else np.inf, **kw)


def _component(p, lazy: bool, **kw) -> ComponentCG:
    return ComponentCG(p, np.arange(p.n), np.arange(p.K), 1, 1e-6, _options(lazy, **kw))


def test_dense_components_price_lazily_and_exactly(tmp_path: Path) -> None:
    """Each lazy pricing LP ends at a point that keeps every mDP row, with the optimum of the whole
    LP (scipy's HiGHS on all rows) and a certificate that attains it; it needed rows beyond its start."""
    p = _complete(tmp_path)
    cg = _component(p, lazy=True, lazy_start_neighbours=2, lazy_add_per_record=1)
    lazy = cg.pricer.lazy
    assert lazy is not None and cg.pricer.dual_pricing
    assert lazy.start.size < cg.E  # the LPs start from a few rows per record
    assert lazy.start.size <= 2 * 2 * cg.m  # 2 nearest per record and their reverses (the option holds)
    rng = np.random.default_rng(1)
    for _ in range(3):
        mu = cg.G.mean(axis=1) + rng.normal(0, 0.02 * cg.G.mean(), cg.m)
        js = rng.choice(cg.Kc, size=6, replace=False)
        for j, z in cg.pricer.price(js, mu, 1e-12):
            c = cg.G[:, j] - mu
            full = linprog(c, A_ub=cg.A, b_ub=np.zeros(cg.E), bounds=(0, 1), method="highs")
            assert z is not None
            assert float(np.max(cg.A @ z)) <= 1e-8  # every row, not only those carried
            assert float(c @ z) == pytest.approx(full.fun, rel=1e-7, abs=1e-10)
            # the stored certificate (zero multipliers on rows not carried) certifies it
            assert float(np.minimum(0.0, cg.certs.Q[j] - mu).sum()) >= full.fun - 1e-9
    assert lazy.separation_rounds > 0
    # a second pricing at the same duals starts from each output's own rows and basis
    rounds = lazy.separation_rounds
    cg.pricer.price(js, mu, 1e-12)
    assert lazy.separation_rounds == rounds
    cg.close()


def test_without_separation_the_points_break_rows(tmp_path: Path, monkeypatch) -> None:
    """Negative control: with the rows' separation switched off the pricing LPs are relaxations and
    their points break mDP rows, which the check above would catch."""
    # fault injection: the separation finds nothing
    monkeypatch.setattr(LazyRows, "violated", lambda self, w, z: np.empty(0, dtype=np.int64))
    p = _complete(tmp_path)
    cg = _component(p, lazy=True, lazy_start_neighbours=2)
    rng = np.random.default_rng(1)
    mu = cg.G.mean(axis=1) + rng.normal(0, 0.02 * cg.G.mean(), cg.m)
    worst = max(float(np.max(cg.A @ z)) for _, z in cg.pricer.price(np.arange(cg.Kc), mu, 1e-12) if z is not None)
    cg.close()
    assert worst > 1e-6


@pytest.fixture(scope="module")
def complete30(tmp_path_factory: pytest.TempPathFactory):
    """30 points with every pair a neighbour (seed 2) and HiGHS's direct solution, computed once for
    both pricing modes."""
    p = _complete(tmp_path_factory.mktemp("complete30"), n=30, seed=2)
    return p, solve_direct(p)


@pytest.mark.parametrize("lazy", [True, False])
def test_dense_columns_decomposition_equals_direct(complete30, lazy: bool) -> None:
    """The whole column decomposition on a complete graph gives direct's optimum either way."""
    p, direct = complete30
    r = solve_bd(p, decomposition="columns", gap=1e-7, columns=_options(lazy, lazy_start_neighbours=3))
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) and r.rel_gap <= 1e-6


def test_cli_reports_the_lazy_rows_of_a_dense_component(tmp_path: Path) -> None:
    """`securelp mdp` on 66 points with every pair a neighbour (65 rows per record, above the default
    64 from which the pricing LPs take their rows lazily): the report's `lazy_rows` names the component
    and what its LPs carried; a sparse grid's is empty."""
    import json

    from securelp.coordinator.cli import main

    f = tmp_path / "pts.csv"
    np.savetxt(f, np.random.default_rng(3).uniform(0, 10, size=(66, 2)), fmt="%.6f", delimiter=",")
    out = tmp_path / "r.json"
    assert main(["mdp", "--dataset", "points", "--points", str(f), "--eta", "1000", "--method", "bd",
                 "--decomposition", "columns", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["status"] == "optimal"
    (lz,) = rep["lazy_rows"]
    assert lz["records"] == 66 and lz["mdp_rows"] == 66 * 65
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
    options = _options(lazy, starts=StartOptions(ipm_switch_min_records=10, ipm_switch_iterations=1))

    def switched(*args, **kwargs):
        raise _Switched

    monkeypatch.setattr(driver._Run, "_switch_to_ipm", switched)  # a spy: stop where the switch would begin
    if lazy:
        assert solve_colgen(p, gap=1e-6, max_iterations=3, options=options).iterations >= 2  # went on past the first
    else:
        with pytest.raises(_Switched):
            solve_colgen(p, gap=1e-6, max_iterations=3, options=options)


def test_the_saved_basis_and_the_loaded_columns_are_highs_own(tmp_path: Path) -> None:
    """The basis codes kept from HiGHS's basic variables equal its full status lists, and the model
    loaded from ``A``'s arrays is ``[I, A[rows]']`` with that basis (both faster than HiGHS's
    ``getBasis`` lists and scipy's stacking)."""
    p = _complete(tmp_path, n=30)
    cg = _component(p, lazy=True)
    lazy = cg.pricer.lazy
    mu = cg.G.mean(axis=1)
    cg.pricer.price(np.arange(6), mu, 1e-12)
    h = cg.pricer.models[0]
    b = h.getBasis()
    col, row = basis_codes(h, h.getNumCol(), h.getNumRow())
    assert np.array_equal(col, status_codes(b.col_status)) and np.array_equal(row, status_codes(b.row_status))
    assert (col == BASIC).sum() + (row == BASIC).sum() == cg.m
    j = int(np.flatnonzero([s is not None for s in lazy.saved])[0])
    lazy.load(h, 0, j)
    saved_rows, saved_col, saved_row = lazy.saved[j]
    a = h.getLp().a_matrix_
    got = sp.csc_matrix((np.asarray(a.value_), np.asarray(a.index_), np.asarray(a.start_)),
                        shape=(cg.m, cg.m + saved_rows.size))
    want = sp.hstack([sp.identity(cg.m, format="csc"), cg.A[saved_rows].T], format="csc")
    assert abs(got - want).max() == 0.0
    b = h.getBasis()
    assert np.array_equal(status_codes(b.col_status), saved_col)
    assert np.array_equal(status_codes(b.row_status), saved_row)
    cg.close()
