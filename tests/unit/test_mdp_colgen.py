"""Column decomposition of the PMO (`colgen`, `bd --decomposition columns`) == direct, both verified."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import InputError, VerificationError
from securelp.solvers.lp.highs import TIGHT_TOLERANCE
from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.columns import ColumnGenerationOptions, driver, solve_colgen
from securelp.solvers.mdp.columns import component as component_module
from securelp.solvers.mdp.columns.bounds import mdp_rows_bound, mdp_rows_matrix, open_shares, undominated_outputs
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.master import PRIMAL_SIMPLEX, RestrictedMaster, master_tolerance
from securelp.solvers.mdp.columns.pricing import Pricer, output_features, pricing_chain
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.direct import solve_direct
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.verify import verify_mechanism
from tests.mdp_fixtures import subset


def _gauss_components():
    p = build_pmo(load_dataset("gaussian", n_records=40, seed=3), 1.0, 0.6)
    sizes = np.bincount(p.graph.component)
    assert (sizes == 1).any() and (sizes > 2).any()  # singletons and real components
    return p


@pytest.mark.parametrize("pricing", ["primal", "dual"])
@pytest.mark.parametrize("instance", ["gauss_components", "grid_eps10", "grid_eps1_k"])
def test_columns_decomposition_equals_direct(instance: str, pricing: str) -> None:
    """Both forms of the pricing LP (the LP itself, or its dual: one basis row per record) give
    the optimum with a certified bound."""
    options = ColumnGenerationOptions(pricing_dual_min_ratio=0.0 if pricing == "dual" else np.inf)
    if instance == "gauss_components":
        p = _gauss_components()
    elif instance == "grid_eps10":
        p = build_pmo(load_dataset("grid", rows=5, cols=5), 10.0, 2.0)
    else:
        p = build_pmo(load_dataset("grid", rows=4, cols=5), 1.0, 1.5, n_outputs=9, seed=4)
    direct = solve_direct(p)
    r = solve_bd(p, decomposition="columns", gap=1e-7, columns=options)
    assert r.method == "bd" and r.partition["decomposition"] == "columns"
    assert sorted(r.partition["sizes"]) == sorted(np.bincount(p.graph.component).tolist())
    for res in (direct, r):
        verify_mechanism(res.mechanism, p.dataset.distance, p.eps, eta=p.eta)
        assert res.objective == pytest.approx(p.objective_of(res.mechanism), rel=1e-12)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    # at eps d ~ 10 the bound from HiGHS's pricing duals is good to ~1e-6 relative only (docs/explanation/mdp.md)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) and r.rel_gap <= 1e-5
    # negative control: the same matrix is not private at a smaller eps (the check can fail)
    with pytest.raises(VerificationError):
        verify_mechanism(r.mechanism, p.dataset.distance, p.eps / 2, eta=p.eta)


def test_time_limit_still_returns_verified_mechanism_and_valid_bound() -> None:
    p = build_pmo(load_dataset("gaussian", n_records=50, seed=1), 1.0, 0.9)
    opt = solve_direct(p).objective
    r = solve_colgen(p, gap=1e-9, time_limit=0.0)
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.lower_bound <= opt * (1 + 1e-9) <= r.upper_bound * (1 + 1e-9)
    assert r.status in ("time_limit", "optimal")


@pytest.mark.parametrize("reserve", [ColumnGenerationOptions().finish_reserve, 0.0])
def test_time_limit_leaves_room_for_the_last_verification(reserve: float, monkeypatch) -> None:
    """The iterations stop early enough for the last verified rows and the final verification to
    end by the time limit. Slow verifications (0.4 s) and pricing LPs (20 ms) stand in for a
    10,000-record grid, whose repairs and verifications take half a minute each; with the reserve
    switched off the run overruns here too."""
    import time as _time

    real_verify, real_price = component_module.verify_mechanism, Pricer.price_one

    def slow_verify(*args, **kwargs):
        _time.sleep(0.4)
        return real_verify(*args, **kwargs)

    def slow_price(self, *args, **kwargs):
        _time.sleep(0.02)
        return real_price(self, *args, **kwargs)

    # fault injection: a machine slow at what the reserve is for
    monkeypatch.setattr(component_module, "verify_mechanism", slow_verify)
    monkeypatch.setattr(Pricer, "price_one", slow_price)
    p = build_pmo(load_dataset("grid", rows=8, cols=8), 1.0, 1.5)  # one component
    limit = 3.0
    r = solve_colgen(p, gap=1e-12, time_limit=limit, first_order="smoothed", dual_ascent=0.0,
                     options=ColumnGenerationOptions(finish_reserve=reserve))
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.status == "time_limit"
    if reserve:  # measured 2.62 s: the iterations stop at 3.0 - 2 x 0.4 s, the last rows take 0.4 s
        assert r.time_s <= limit - 0.15
    else:  # measured 3.42 s (the last verified rows start once the limit has passed) or 3.005 s
        # (the limit passed inside a master solve, whose rows are dropped): never before the limit
        assert r.time_s >= limit - 0.01


def test_undominated_outputs_drops_only_dominated_columns() -> None:
    rng = np.random.default_rng(0)
    G = rng.uniform(1, 2, size=(6, 5))
    G[:, 3] = G[:, 1] + 0.1  # dominated by column 1
    G[:, 4] = G[:, 0]  # equal to column 0: the first one is kept
    kept = undominated_outputs(G)
    assert 3 not in kept and 4 not in kept and 0 in kept and 1 in kept
    for k in kept:  # no kept column is dominated by another kept one
        others = [j for j in kept if j != k]
        assert not any(np.all(G[:, j] <= G[:, k]) for j in others)
    # negative control: lower one entry of column 3 below column 1 -- now it must stay
    G[2, 3] = G[2, 1] - 0.05
    assert 3 in undominated_outputs(G)


def _undominated_by_definition(G: np.ndarray) -> np.ndarray:
    K = G.shape[1]
    return np.array([k for k in range(K) if not any(
        np.all(G[:, j] <= G[:, k]) and (np.any(G[:, j] < G[:, k]) or j < k) for j in range(K) if j != k)], dtype=int)


def test_undominated_outputs_equal_the_definition_with_ties_and_prior_zero_rows() -> None:
    """The screened search (constant rows left out, a few rows first) keeps exactly what the
    definition keeps, on small integer matrices full of ties, equal columns and all-zero rows."""
    rng = np.random.default_rng(0)
    dropped = 0
    for _ in range(300):
        m, K = int(rng.integers(1, 25)), int(rng.integers(1, 30))
        G = rng.integers(0, int(rng.integers(2, 6)), (m, K)).astype(float)
        if rng.random() < 0.3:
            G[rng.random(m) < 0.5] = 0.0  # records of prior 0
        if rng.random() < 0.2:
            G[:, int(rng.integers(0, K))] = G[:, 0]
        want = _undominated_by_definition(G)
        assert np.array_equal(undominated_outputs(G), want)
        dropped += K - want.size
    assert dropped > 500
    assert np.array_equal(undominated_outputs(np.zeros((4, 3))), [0])  # all equal: the first


def test_undominated_outputs_keep_what_they_had_no_time_to_examine() -> None:
    G = np.add.outer(np.zeros(3), np.arange(50.0))  # column k dominated by every column before it
    G[0] = np.arange(50.0)[::-1] * 0  # a constant row, left out
    assert np.array_equal(undominated_outputs(G), [0])
    assert np.array_equal(undominated_outputs(G, deadline=0.0), np.arange(50))  # past the deadline: all kept


def test_bad_parameters_are_input_errors_naming_the_parameter() -> None:
    p = build_pmo(load_dataset("grid", rows=3, cols=3), 1.0, 1.5)
    for call, name in ((lambda: solve_bd(p, decomposition="rows"), "decomposition"),
                       (lambda: solve_colgen(p, gap=1.0), "gap"), (lambda: solve_colgen(p, max_iterations=0), "max_iterations")):
        with pytest.raises(InputError) as exc:
            call()
        assert exc.value.parameter == name and "--" not in str(exc.value)  # no command-line flag in an engine


def test_cli_bd_columns_keeps_report_keys(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    rc = main(["mdp", "--dataset", "grid", "--rows", "4", "--cols", "4", "--eps", "1", "--eta", "1.5",
               "--method", "bd", "--decomposition", "columns", "--gap", "1e-6", "--json", str(out)])
    rep = json.loads(out.read_text())
    assert rc == 0
    keys = {"status", "method", "objective", "lower_bound", "upper_bound", "rel_gap", "iterations", "time_s",
            "n_records", "n_outputs", "n_edges", "verification", "partition", "history"}
    assert keys <= set(rep) and rep["method"] == "bd" and rep["decomposition"] == "columns"
    assert rep["status"] == "optimal" and rep["rel_gap"] <= 1e-6
    assert set(rep["partition"]) == {"sizes", "n_boundary", "mp_component_sizes"}
    (dom,) = rep["dominated_outputs"]  # the grid is one component
    assert set(dom) == {"records", "outputs", "removed", "visited", "seconds"}
    assert dom["records"] == 16 and dom["visited"] == dom["outputs"] and 0 <= dom["removed"] < dom["outputs"]


def test_mdp_rows_bound_is_valid_for_nonnegative_multipliers_only() -> None:
    """OPT >= sum_i min_k (g_k + A'y_k)_i for every y >= 0; with y < 0 the same formula overshoots."""
    p = build_pmo(load_dataset("grid", rows=4, cols=4), 1.0, 1.5)
    opt = solve_direct(p).objective
    A = mdp_rows_matrix(p)
    G = p.cost
    # the rows are those the mechanism satisfies: A z_k <= 0 for every output column
    X = solve_direct(p).mechanism
    assert float((A @ X).max()) <= 1e-9
    rng = np.random.default_rng(5)
    assert mdp_rows_bound(G, A, np.zeros((A.shape[0], p.K))) == pytest.approx(float(G.min(axis=1).sum()))
    for scale in (1e-3, 1e-2, 1e-1, 1.0):
        Y = rng.exponential(scale, size=(A.shape[0], p.K))
        assert mdp_rows_bound(G, A, Y) <= opt * (1 + 1e-12)
    # negative control: uniform negative multipliers raise every q_i (each edge appears both ways and
    # exp(eps d) > 1), so the formula would claim a bound above the optimum -- hence the y >= 0 check
    Yneg = np.full((A.shape[0], p.K), -1.0)
    q_bound = float(np.min(G + A.T @ Yneg, axis=1).sum())
    assert q_bound > opt
    with pytest.raises(InputError) as exc:
        mdp_rows_bound(G, A, Yneg)
    assert exc.value.parameter == "Y"


def test_pricing_chain_walks_to_nearest_neighbours() -> None:
    """The pricing order: a permutation of the outputs given, from the first one, each next output
    the nearest not yet visited (on a line: outwards in order, then the far side)."""
    F = np.array([[0.0], [10.0], [1.0], [3.0], [-2.0], [6.0]])
    js = np.array([2, 1, 5, 0, 3, 4])
    order = pricing_chain(F, js)
    assert sorted(order.tolist()) == sorted(js.tolist()) and order[0] == 2
    assert order.tolist() == [2, 0, 4, 3, 5, 1]  # 1 -> 0 -> -2 -> 3 -> 6 -> 10
    assert pricing_chain(F, np.array([], dtype=np.int64)).size == 0
    assert pricing_chain(F, np.array([3])).tolist() == [3]
    # features: outputs with alike cost columns are near
    G = np.array([[1.0, 1.1, 9.0], [2.0, 2.1, 0.5], [3.0, 2.9, 7.0]])
    Fg = output_features(G)
    d = lambda a, b: float(np.linalg.norm(Fg[a] - Fg[b]))
    assert d(0, 1) < d(0, 2) and d(0, 1) < d(1, 2)


def test_the_master_tolerance_follows_the_gap_target() -> None:
    assert master_tolerance(1e-4) == pytest.approx(1e-7)  # HiGHS's default at the default gap
    assert master_tolerance(1e-2) == pytest.approx(1e-7)
    assert master_tolerance(3e-6) == pytest.approx(3e-9)
    assert master_tolerance(1e-8) == TIGHT_TOLERANCE
    p = build_pmo(load_dataset("grid", rows=3, cols=4), 1.0, 1.5)
    idx = np.arange(p.n)
    for gap in (1e-4, 1e-7):
        cg = ComponentCG(p, idx, undominated_outputs(p.cost), 1, gap)
        try:
            tol = master_tolerance(gap)
            assert cg.master.h.getOptionValue("primal_feasibility_tolerance")[1] == tol
            assert cg.master.h.getOptionValue("dual_feasibility_tolerance")[1] == tol
            assert cg.master.enter_tol == cg.options.enter_factor * tol
        finally:
            cg.close()


def _points(tmp_path: Path, n: int, seed: int):
    """``n`` standard normal points in 2-D (generator ``seed``), eps 1, eta 0.6."""
    f = tmp_path / "pts.csv"
    np.savetxt(f, np.random.default_rng(seed).normal(size=(n, 2)), delimiter=",", header="x,y", comments="")
    return build_pmo(load_dataset("points", path=str(f), metric="euclidean"), 1.0, 0.6)


def test_a_stall_short_of_the_gap_tightens_the_master(tmp_path: Path) -> None:
    """60 points in 2-D: at the default gap's master tolerance (1e-7) nothing enters at the RMP's
    duals while the bound there is short of the gap; the run tightens the master and is certified.
    Without room to tighten it stalls (here at a gap of about 2e-4)."""
    p = _points(tmp_path, 60, 1)
    r = solve_colgen(p, gap=1e-4, options=ColumnGenerationOptions(dominance=False))
    assert r.status == "optimal" and r.rel_gap <= 1e-4
    assert r.details["master_tightenings"] >= 1
    r = solve_colgen(p, gap=1e-4, options=ColumnGenerationOptions(dominance=False, stall_tolerance=1e-7))
    assert r.status == "stalled" and r.rel_gap > 1e-4
    assert r.details["master_tightenings"] == 0


@pytest.mark.slow
def test_a_tight_gap_is_certified_with_the_master_at_highs_floor(tmp_path: Path) -> None:
    """90 points in 2-D at a 1e-6 target are certified: the master's tolerance can go down to HiGHS's
    floor (``stall_tolerance``)."""
    r = solve_colgen(_points(tmp_path, 90, 11), gap=1e-6)
    assert r.status == "optimal" and r.rel_gap <= 1e-6


@pytest.mark.parametrize("chunk", [1 << 20, 7, 1])
def test_open_shares_in_blocks_equal_the_whole_array_form(chunk: int) -> None:
    rng = np.random.default_rng(3)
    Q = rng.normal(size=(37, 23))
    mu = rng.normal(size=23)
    assert np.array_equal(open_shares(Q, mu, chunk), np.minimum(0.0, Q - mu).sum(axis=1))


def _master_matches_its_columns(master: RestrictedMaster) -> bool:
    """The master's columns after the slacks are exactly ``col_owner``/``col_ray`` (cost and entries)."""
    lp = master.h.getLp()
    n = len(master.col_owner)
    if lp.num_col_ != master.n_slack + n or len(master.col_ray) != n or master.col_idle.size != n:
        return False
    cost = np.asarray(lp.col_cost_)[master.n_slack:]
    want = np.array([master.G[:, k] @ v for k, v in zip(master.col_owner, master.col_ray)])
    start, index, value = (np.asarray(a) for a in (lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_))
    for c, v in enumerate(master.col_ray):
        col = np.zeros(master.m)
        sl = slice(start[master.n_slack + c], start[master.n_slack + c + 1])
        col[index[sl]] = value[sl]
        if not np.allclose(col, v, rtol=0, atol=1e-15):
            return False
    return bool(np.allclose(cost, want, rtol=1e-12, atol=0))


def test_retired_columns_leave_the_master_consistent_and_the_optimum(monkeypatch) -> None:
    """Columns idle in the RMP are deleted from HiGHS's model and from the bookkeeping alike (checked
    after every retirement: costs and entries column by column), and the run still ends at
    ``direct``'s optimum, verified. The check can fail: a column deleted from the model alone is caught."""
    checked: list[int] = []
    retire = RestrictedMaster.retire_columns

    def checking(self: RestrictedMaster, lam: np.ndarray) -> np.ndarray:
        out = retire(self, lam)
        assert out.size == len(self.col_owner) and _master_matches_its_columns(self)
        checked.append(self.columns_retired)
        return out

    monkeypatch.setattr(RestrictedMaster, "retire_columns", checking)  # a check after every retirement
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 1.0, 1.5)
    direct = solve_direct(p)
    options = ColumnGenerationOptions(dominance=False, column_idle_solves=1, column_pool_per_record=0)
    r = solve_colgen(p, gap=1e-7, options=options)
    assert r.details["columns_retired"] > 0 and checked and max(checked) > 0
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    assert r.lower_bound <= direct.objective * (1 + 1e-9)
    # negative control
    cg = ComponentCG(p, np.arange(p.n), np.arange(p.K), 1, 1e-6)
    try:
        assert _master_matches_its_columns(cg.master)
        cg.master.h.deleteCols(1, np.array([cg.master.n_slack], dtype=np.int32))
        assert not _master_matches_its_columns(cg.master)
    finally:
        cg.close()


def test_the_unboxed_resolve_puts_back_the_boxed_basis_and_the_primal_simplex() -> None:
    """The upper bound's re-solve without the dual box runs the dual simplex, then restores the
    boxed master's basis (unless the unboxed duals lie in the box) and the primal simplex of the warm
    re-solves: the next boxed solve takes no pivot. The check can fail: from the unboxed optimum's
    basis the same solve pivots."""
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 1.0, 1.5)
    cg = ComponentCG(p, np.arange(p.n), np.arange(p.K), 1, 1e-6)
    master = cg.master
    try:
        master.solve()
        centre = cg.G.min(axis=1)  # the trivial duals, far below the optimum's: the box binds
        width = 1e-3 * float(centre.mean())
        master.set_box(centre, width)
        master.h.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX)
        master.solve()
        assert master.box_binding()
        rows, _ = cg.unboxed_rows(centre, width)
        verify_mechanism(rows, p.dataset.distance, p.eps, eta=p.eta)
        assert master.h.getOptionValue("simplex_strategy")[1] == PRIMAL_SIMPLEX
        master.solve()
        assert master.h.getInfo().simplex_iteration_count == 0
        # negative control: the unboxed optimum's basis
        master.set_box(None, 0.0)
        master.solve()
        unboxed = master.h.getBasis()
        master.set_box(centre, width)
        master.h.setBasis(unboxed)
        master.solve()
        assert master.h.getInfo().simplex_iteration_count > 0
        # the box moved onto the unboxed optimum's duals (as when the centre moves): that basis is
        # kept, optimal for the boxed master too
        master.set_box(None, 0.0)
        mu, _, _ = master.solve()
        master.set_box(centre, width)
        master.solve()
        master.set_box(mu, width)
        cg.unboxed_rows(mu, width)
        master.solve()
        assert master.h.getInfo().simplex_iteration_count == 0
    finally:
        cg.close()


def test_a_component_stopped_above_the_exponential_mechanism_returns_its_rows(monkeypatch) -> None:
    """A column generation cut short can hold a poor mechanism (far above the exponential mechanism's
    loss on a large grid at a time limit): such a component's rows are the exponential mechanism's,
    verified with the rest; a component that beats them keeps its own."""
    from securelp.solvers.mdp.expmech import solve_expmech

    problem = build_pmo(load_dataset("grid", rows=5, cols=5), 1.0, 2.0)
    em = solve_expmech(problem).objective

    def stopped(cg, deadline, max_iterations, on_iter, **kw):  # every record on the farthest output
        rows = np.zeros((cg.m, cg.problem.K))
        rows[:, np.argmax(cg.problem.loss[cg.idx].sum(axis=0))] = 1.0
        return rows, 0.0, float(np.sum(cg.problem.cost[cg.idx] * rows)), "time_limit", 1

    monkeypatch.setattr(driver, "run_component", stopped)  # fault injection: a run stopped with poor rows
    r = solve_colgen(problem, gap=1e-4)
    assert r.status == "time_limit" and r.details["expmech_components"] == 1
    assert r.objective == pytest.approx(em, rel=1e-12) and r.history[-1].upper == pytest.approx(em, rel=1e-12)
    verify_mechanism(r.mechanism, problem.dataset.distance, 1.0, eta=2.0)
    monkeypatch.undo()
    r = solve_colgen(problem, gap=1e-4)
    assert r.status == "optimal" and r.details["expmech_components"] == 0 and r.objective < em


@pytest.mark.parametrize("instance", ["grid_eps1", "grid_eps10", "rome40", "gaussian_travel", "points_k"])
def test_colgen_equals_direct(instance: str, tmp_path: Path) -> None:
    if instance == "grid_eps1":
        p = build_pmo(load_dataset("grid", rows=5, cols=6), 1.0, 2.0)
    elif instance == "grid_eps10":
        p = build_pmo(load_dataset("grid", rows=6, cols=6), 10.0, 2.0)
    elif instance == "rome40":
        p = build_pmo(subset(load_dataset("rome"), np.arange(40), "rome40"), 10.0, 2.0)
    elif instance == "gaussian_travel":
        p = build_pmo(load_dataset("gaussian", n_records=24, seed=3), 1.0, 0.9, loss="travel", seed=1)
    else:
        pts = np.random.default_rng().uniform(0, 4, size=(20, 2))
        f = tmp_path / "pts.csv"
        f.write_text("\n".join(f"{float(a)!r},{float(b)!r}" for a, b in pts))
        p = build_pmo(load_dataset("points", path=str(f)), 1.0, 1.5, n_outputs=8, seed=5)
    direct = solve_direct(p)
    cg = solve_colgen(p, gap=1e-8)
    verify_mechanism(cg.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert cg.objective == pytest.approx(direct.objective, rel=1e-6)
    assert cg.lower_bound <= direct.objective * (1 + 1e-9) + 1e-15
    assert cg.rel_gap <= 1e-6
