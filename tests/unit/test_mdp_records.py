"""Qiu's Benders decomposition over a record partition (solvers/mdp/records) equals the direct LP,
both verified: partitions, bounds, incumbents, memory checks, and the Benders engine's rules on
these instances."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from securelp.solvers.benders import BendersOptions
from securelp.solvers.benders import driver as benders_driver
from securelp.solvers.benders.blocks import Block
from securelp.solvers.benders.master import master_components
from securelp.solvers.benders.stopping import memory_running_out
from securelp.solvers.errors import InputError, ResourceError
from securelp.solvers.mdp import direct as direct_module
from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.columns import solve_colgen
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.direct import DIRECT_BYTES_PER_NONZERO, solve_direct
from securelp.solvers.mdp.expmech import solve_expmech
from securelp.solvers.mdp.graph import build_graph
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.records import PARTITIONERS, RecordOptions, build_bd_model, partition_records
from securelp.solvers.mdp.records.driver import cheapest_incumbent, on_cheapest_outputs
from securelp.solvers.mdp.records.master import MASTER_BYTES_PER_NONZERO
from securelp.solvers.mdp.repair import finalize_mechanism
from securelp.solvers.mdp.verify import verify_mechanism
from tests.mdp_fixtures import subset


def _check_equal(problem, partitioner="kmdv", M=3, **kw):
    direct = solve_direct(problem)
    bd = solve_bd(problem, partitioner=partitioner, n_subsets=M, gap=1e-9, **kw)
    for r in (direct, bd):
        verify_mechanism(r.mechanism, problem.dataset.distance, problem.eps, eta=problem.eta)
        assert r.mechanism.shape == (problem.n, problem.K)
        assert r.objective == pytest.approx(problem.objective_of(r.mechanism), rel=1e-12)
    assert bd.objective == pytest.approx(direct.objective, rel=1e-6)
    assert bd.lower_bound <= bd.upper_bound and bd.rel_gap <= 1e-6
    return direct, bd


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_bd_equals_direct_on_a_grid_for_every_partitioner(partitioner: str) -> None:
    p = build_pmo(load_dataset("grid", rows=4, cols=5), 1.0, 1.5)
    _, bd = _check_equal(p, partitioner=partitioner, M=2)
    part = bd.partition
    assert sum(part["sizes"]) == 20 and part["n_boundary"] == int(np.sum(part["boundary"]))


def test_bd_equals_direct_high_eps_grid() -> None:
    # at eps d up to 20 the blocks' and the master's LPs work at value scales near HiGHS's tolerances:
    # certified within 1e-6 because the certificates are recomputed with scaled costs where they fall
    # short (without that re-solve this instance ends at a gap of about 2e-6; the cut scaling that the
    # test below checks is not what this one needs)
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 10.0, 2.0)
    _, bd = _check_equal(p, partitioner="kmrec", M=2)
    assert bd.details["recertify_solves"] > 0  # the copies with scaled costs did work here


def test_bd_has_a_near_optimal_upper_bound_from_the_first_iteration_at_high_eps() -> None:
    # the instance above: BD's lower bound stalls, but the repaired assembly with each infeasible
    # block's records on their cheapest outputs is within 1e-4 of the optimum from iteration 1
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 10.0, 2.0)
    direct = solve_direct(p)
    r = solve_bd(p, partitioner="kmrec", n_subsets=2, gap=1e-9, max_iterations=3)
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.history[0].upper == pytest.approx(direct.objective, rel=1e-4)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) <= r.upper_bound * (1 + 2e-9)


def test_bd_equals_direct_on_rome_subset_with_components() -> None:
    rome = load_dataset("rome")
    p = build_pmo(subset(rome, np.arange(40), "rome40"), 10.0, 2.0)
    assert p.graph.n_components > 1  # disconnected mDP graph is not an error
    _check_equal(p, partitioner="kmdv", M=3)


def test_bd_equals_direct_on_gaussian_and_travel_loss() -> None:
    g = load_dataset("gaussian", n_records=24, seed=3)
    p = build_pmo(g, 1.0, 0.9, loss="travel", seed=1)
    assert p.loss_name == "travel" and p.loss.shape == (24, 24)
    _check_equal(p, partitioner="kmrec", M=3)


def test_bd_equals_direct_on_a_fresh_points_file(tmp_path: Path) -> None:
    # a points file never shipped with the repo, drawn fresh each run
    pts = np.random.default_rng().uniform(0, 4, size=(18, 2))
    f = tmp_path / "pts.csv"
    f.write_text("x,y\n" + "\n".join(f"{float(a)!r},{float(b)!r}" for a, b in pts))
    ds = load_dataset("points", path=str(f))
    p = build_pmo(ds, 1.0, 1.5, n_outputs=10, seed=2)
    assert p.K == 10
    _check_equal(p, partitioner="bsc", M=2)


def test_bd_without_initial_cuts_and_single_subset() -> None:
    p = build_pmo(load_dataset("grid", rows=4, cols=4), 1.0, 1.5)
    _check_equal(p, M=2, initial_cuts=False)
    _, bd = _check_equal(p, M=1)  # everything internal: one block, empty master
    assert bd.partition["n_boundary"] == 0


def test_bd_history_and_iteration_cap() -> None:
    p = build_pmo(load_dataset("grid", rows=4, cols=5), 1.0, 1.5)
    notes: list[str] = []
    r = solve_bd(p, partitioner="kmdv", n_subsets=2, gap=1e-9, status=notes.append)
    # one note before the first iteration: the master's size (a terminal shows nothing else while
    # a large master is solved for minutes)
    assert len(notes) == 1 and notes[0].startswith(f"Qiu's master over {r.partition['n_boundary']} boundary records x 20")
    lowers = [h.lower for h in r.history]
    uppers = [h.upper for h in r.history]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(lowers))
    assert all(b <= a for a, b in itertools.pairwise(uppers))
    assert r.history[-1].upper == pytest.approx(r.upper_bound, rel=1e-12)


def test_bd_under_a_time_limit_spent_before_the_first_master_solve() -> None:
    # the limit counts from the call and holds inside an iteration: a verified mechanism all the
    # same (the master's x repaired), and the trivial bound as the lower bound
    p = build_pmo(load_dataset("grid", rows=4, cols=5), 1.0, 1.5)
    r = solve_bd(p, n_subsets=3, time_limit=1e-9)
    assert r.status == "time_limit" and r.iterations == 1
    assert r.verification.max_mdp_violation <= 1e-9 and r.verification.max_row_sum_error <= 1e-9
    assert r.lower_bound == pytest.approx(float(p.cost.min(axis=1).sum()))
    assert r.upper_bound == pytest.approx(p.objective_of(r.mechanism)) and r.lower_bound <= r.upper_bound
    # the iteration's record carries that bound too, not -inf
    assert r.history[0].lower == pytest.approx(r.lower_bound)


def test_partition_boundary_definition() -> None:
    g = load_dataset("grid", rows=2, cols=6)
    gr = build_graph(g.distance, 1.0)
    part = partition_records("kmrec", g.distance, gr.rows, gr.cols, 2, coords=g.coords)
    for i in range(g.n):
        nb = gr.cols[gr.rows == i]
        assert part.boundary[i] == bool(np.any(part.labels[nb] != part.labels[i]))


def test_bad_bd_parameters() -> None:
    p = build_pmo(load_dataset("grid", rows=3, cols=3), 1.0, 1.5)
    with pytest.raises(InputError, match="gap"):
        solve_bd(p, gap=0.0)
    with pytest.raises(InputError, match="partitioner"):
        solve_bd(p, partitioner="nope")
    with pytest.raises(InputError, match="subsets"):
        solve_bd(p, n_subsets=0)


@pytest.mark.parametrize("name", ["text", "road"])
def test_bd_and_colgen_equal_direct_on_the_ldp_helpers_datasets(name: str) -> None:
    ds = load_dataset(name, n_records=16, seed=1)
    eta = float(np.quantile(ds.distance[ds.distance > 0], 0.3))  # a sparse, non-trivial mDP graph
    p = build_pmo(ds, 1.0 / eta, eta)
    direct, _bd = _check_equal(p, partitioner="kmdv", M=2)
    cg = solve_colgen(p, gap=1e-8)
    assert cg.objective == pytest.approx(direct.objective, rel=1e-6)


def test_bd_returns_a_verified_mechanism_when_a_block_always_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # every HiGHS fallback failing on one block (seen on Rome at eps 10/km) does not end the run
    # without a mechanism: the iterations' assemblies are repaired exactly, and the bounds stay valid
    p = build_pmo(load_dataset("grid", rows=4, cols=5), 1.0, 1.5)
    direct = solve_direct(p)
    solve = Block.solve
    failing: list[str] = []

    def flaky(self, x):
        if not failing and self.spec.linked.var.size:
            failing.append(self.spec.name)
        if self.spec.name in failing:
            return {"feasible": False, "failed": f"HiGHS failed on elastic Benders block {self.spec.name} (test)",
                    "y": None}
        return solve(self, x)

    monkeypatch.setattr(Block, "solve", flaky)  # fault injection: one block's HiGHS always failing
    r = solve_bd(p, partitioner="kmdv", n_subsets=3, gap=1e-9)
    assert failing and r.status == "numerical_trouble" and r.details["failed_block_solves"] == r.iterations
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(p.objective_of(r.mechanism), rel=1e-12)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) and direct.objective <= r.upper_bound * (1 + 1e-9)
    assert np.isfinite(r.history[0].upper)  # the repaired assembly bounds from the first iteration on


def test_record_bd_refuses_a_master_that_cannot_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a dense mDP graph every record is a boundary record and Qiu's master is the whole PMO
    (text 500: 250 M nonzeros); refused before the master is built, naming the way out."""
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 1.0, 2.0)
    monkeypatch.setattr(direct_module, "available_memory", lambda: 1000)  # environment probe
    with pytest.raises(ResourceError, match=r"bd: Qiu's record decomposition \(a master over \d+ boundary records .* "
                                             r"the column decomposition needs far less") as caught:
        solve_bd(p, n_subsets=4)
    assert caught.value.parameter == "decomposition"
    monkeypatch.setattr(direct_module, "available_memory", lambda: None)
    assert solve_bd(p, n_subsets=4, gap=1e-6).status == "optimal"


def test_record_bd_counts_all_its_rows_against_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The master and the blocks together hold every mDP row of the PMO and the master's Property 3.2
    rows, at the record BD's own bytes per nonzero (counting only the master's mDP rows at the direct
    LP's bytes let the 50x50 grid at eps 1/km be killed by the kernel at 24 GB). Memory for all but the
    initial rows is refused, enough for all of them runs."""
    p = build_pmo(load_dataset("grid", rows=8, cols=8), 1.0, 2.0)
    part = partition_records("kmrec", p.dataset.distance, p.graph.rows, p.graph.cols, 4, coords=p.dataset.coords)
    master, blocks, boundary, _internal, n_init = build_bd_model(p, part)
    assert n_init > 0 and blocks
    E, n, K = p.lp_edges[0].size, p.n, p.K
    nnz = 2 * E * K + 2 * n_init + n * K
    need = MASTER_BYTES_PER_NONZERO * nnz
    n_master_mdp = master.rows.n_rows - n_init - boundary.size
    master_only = DIRECT_BYTES_PER_NONZERO * (2 * n_master_mdp + boundary.size * K)
    assert master_only < need - 2 * MASTER_BYTES_PER_NONZERO * n_init  # the master alone would not be refused
    monkeypatch.setattr(direct_module, "available_memory", lambda: need - 1)  # environment probe
    with pytest.raises(ResourceError, match=rf"with [\d,]+ mDP rows and {n_init:,} initial cut rows, and blocks\) "
                                            rf"holds all {E * K:,} mDP rows of the PMO and {nnz:,} nonzeros"):
        build_bd_model(p, part)
    monkeypatch.setattr(direct_module, "available_memory", lambda: need)
    assert build_bd_model(p, part)[4] == n_init


def test_record_bd_warns_when_its_master_is_nearly_the_whole_pmo(caplog: pytest.LogCaptureFixture) -> None:
    """Subsets small next to eta put nearly every record on the boundary: the master is nearly the
    whole PMO (the 20x20 grid at eps 1/km: 91 % of its rows, a first master solve of more than 15
    minutes), which the run says up front; a partition with internal records does not warn."""
    options = RecordOptions(master_warn_rows=1)
    p = build_pmo(load_dataset("grid", rows=8, cols=8), 1.0, 2.0)
    # a time limit spent before the first master solve: the warning comes before any master is solved
    with caplog.at_level("WARNING", logger="securelp.solvers.mdp.records.driver"):
        r = solve_bd(p, n_subsets=16, time_limit=1e-9, options=options)
    assert r.status == "time_limit"
    assert "of the PMO's mDP rows" in caplog.text and "the column decomposition" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="securelp.solvers.mdp.records.driver"):
        r = solve_bd(p, n_subsets=2, partitioner="kmrec", time_limit=1e-9, options=options)
    assert r.status == "time_limit" and r.partition["n_boundary"] < p.n
    assert "of the PMO's mDP rows" not in caplog.text


def test_record_bd_stops_before_memory_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """When an iteration leaves less than twice what it took (or under 1 GiB), the run stops with
    ``memory_limit`` and its verified mechanism instead of growing until the kernel kills it."""
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 4.0, 2.0)
    left = iter([8 << 30, 5 << 30, 5 << 30])  # iteration 1 takes 3 GiB and leaves 5
    monkeypatch.setattr(benders_driver, "available_memory", lambda: next(left, 5 << 30))  # environment probe
    r = solve_bd(p, n_subsets=2, partitioner="kmrec", gap=1e-6)
    assert r.status == "memory_limit" and r.iterations == 1 and r.upper_bound < np.inf
    assert r.verification.max_row_sum_error <= 1e-9
    monkeypatch.setattr(benders_driver, "available_memory", lambda: 8 << 30)  # nothing taken: the run goes on
    r = solve_bd(p, n_subsets=2, partitioner="kmrec", gap=1e-6, max_iterations=3)  # certified in about 30
    assert r.status == "iteration_limit" and r.iterations == 3
    options = BendersOptions()
    floor = options.memory_floor

    def running_out(before, after, at_start):
        return memory_running_out(before, after, at_start, options)

    assert not running_out(None, None, None) and running_out(None, floor - 1, None)
    assert running_out(8 * floor, floor - 1, 8 * floor)
    # a machine with half the floor: the floor is memory_floor_share of it, and iterations that take
    # nothing go on
    small = floor // 2
    assert not running_out(small - 1000, small - 1000, small)
    assert running_out(small, small // 30, small)


def _union_find_roots(n: int, groups: list[np.ndarray]) -> np.ndarray:
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            a = parent[a]
        return a

    for g in groups:
        for v in g[1:]:
            ra, rb = find(int(g[0])), find(int(v))
            if ra != rb:
                parent[rb] = ra
    return np.array([find(v) for v in range(n)])


def test_master_components_equal_a_union_find() -> None:
    """The master's components from one sparse graph equal a plain union-find over its rows and
    its blocks' linked variables."""
    for name, kw, eps, eta, M in (("grid", {"rows": 8, "cols": 9}, 1.0, 2.0, 6), ("road", {"n_records": 300}, None, None, 25)):
        ds = load_dataset(name, **kw)
        p = build_pmo(ds, eps or ds.default_eps, eta or ds.default_eta)
        part = partition_records("kmadj", p.dataset.distance, p.graph.rows, p.graph.cols, M, coords=p.dataset.coords,
                                 eps=p.eps, seed=0)
        master, blocks, _, _, _ = build_bd_model(p, part)
        groups = [master.rows.index[master.rows.starts[r]:master.rows.starts[r + 1]] for r in range(master.rows.n_rows)]
        groups += [np.unique(b.linked.var) for b in blocks]
        roots = _union_find_roots(master.n, groups)
        got = master_components(master, blocks)
        assert sorted(len(c[0]) for c in got) == sorted(np.unique(roots, return_counts=True)[1].tolist())
        for members, rows, bl in got:
            assert np.unique(roots[members]).size == 1 and members.tolist() == sorted(members.tolist())
            r0 = roots[members[0]]
            assert all(roots[master.rows.index[master.rows.starts[r]]] == r0 for r in rows.tolist())
            assert all(roots[blocks[b].linked.var[0]] == r0 for b in bl)
        assert sum(len(c[1]) for c in got) == sum(1 for g in groups[:master.rows.n_rows] if len(g))
        assert len(got) > 1 or name == "grid"


def test_record_bd_starts_from_the_better_of_two_private_mechanisms() -> None:
    """The record BD's first incumbent is the better of the exponential mechanism and every record on
    its cheapest output repaired exactly, both verified: a run stopped before its first upper bound
    returns it, and no run returns a mechanism worse than it."""
    p = build_pmo(load_dataset("grid", rows=6, cols=6), 1.0, 1.5)
    e = solve_expmech(p)
    cheapest, (Z, _, _) = cheapest_incumbent(p)
    verify_mechanism(Z, p.dataset.distance, p.eps, eta=p.eta)
    assert cheapest < 0.8 * e.objective  # on this grid the repaired cheapest mechanism is far better
    cut = solve_bd(p, n_subsets=5, time_limit=1e-6)
    assert cut.status == "time_limit" and cut.details["returned_cheapest"] and not cut.details["returned_expmech"]
    assert cut.objective == pytest.approx(cheapest, rel=1e-12) and cut.details["cheapest_incumbent"] == cut.objective
    assert cut.details["expmech_incumbent"] == pytest.approx(e.objective, rel=1e-12)
    verify_mechanism(cut.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    full = solve_bd(p, n_subsets=5, max_iterations=3)
    assert full.upper_bound <= cheapest
    verify_mechanism(full.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    # at a small eps the exponential mechanism is the better one, and it is the one returned
    q = build_pmo(load_dataset("grid", rows=3, cols=3), 0.01, 2.0)
    e, (cheapest, _) = solve_expmech(q), cheapest_incumbent(q)
    assert e.objective < cheapest
    cut = solve_bd(q, n_subsets=2, time_limit=1e-6)
    assert cut.objective == pytest.approx(e.objective, rel=1e-12)
    assert cut.details["returned_expmech"] and not cut.details["returned_cheapest"]


def test_a_record_of_prior_zero_starts_on_its_nearest_output() -> None:
    """Every ``p_i c_ik`` of a record of prior 0 is 0: put on output 0 by the objective's argmin, its
    mass spread by the repair onto its neighbours' rows; on its nearest output by the loss's, it
    costs nothing."""
    rng = np.random.default_rng(0)
    prior = rng.random(100) * (rng.random(100) < 0.2)
    p = build_pmo(load_dataset("grid", rows=10, cols=10, prior=prior / prior.sum()), 1.0, 2.0)
    loss, (Z, _, _) = cheapest_incumbent(p)
    verify_mechanism(Z, p.dataset.distance, p.eps, eta=p.eta)
    by_objective, _, _ = finalize_mechanism(on_cheapest_outputs(p.cost), p)
    assert loss < 0.8 * p.objective_of(by_objective)
    assert np.array_equal(on_cheapest_outputs(p.loss)[prior > 0], on_cheapest_outputs(p.cost)[prior > 0])


@pytest.mark.slow  # about 250 iterations
def test_record_bd_whose_bounds_move_in_bursts_is_not_stopped_under_a_minute() -> None:
    # the 8x8 grid at eps 8/km with the cuts as they come (not scaled up to a violation HiGHS sees) and
    # no going back to the master's point on weak cuts: its lower bound rises in bursts (mostly when
    # the in-out separation goes back to the master's point); with the pace judged over the last 20
    # iterations alone the run would stop `no_progress` at a gap of a few percent, judged over at
    # least a minute it is certified
    bursts = RecordOptions(benders=BendersOptions(visible_violation=0.0, in_out_weak_share=0.0))
    p = build_pmo(load_dataset("grid", rows=8, cols=8), 8.0, 2.0)
    direct = solve_direct(p)
    r = solve_bd(p, partitioner="kmdv", n_subsets=6, gap=1e-6, time_limit=120, options=bursts)
    assert r.status == "optimal" and r.rel_gap <= 1e-6 and r.iterations > 2 * 20
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)


@pytest.mark.parametrize("rows, cols, eps, n_subsets", [(6, 7, 10.0, 6), (6, 6, 8.0, 2)])
def test_record_bd_cuts_are_scaled_until_highs_sees_them_violated(rows: int, cols: int, eps: float,
                                                                   n_subsets: int) -> None:
    # the 6x7 grid at eps 10/km in 6 subsets and the 6x6 grid at eps 8/km in 2: late in the run some
    # of the blocks' optimality cuts cut off the master's point by less than HiGHS's feasibility
    # tolerance of 1e-9, so the master would stay where it is (with the cuts as they come neither run
    # is certified within 100 iterations); scaled up until the violation is 1e-7 in the row's units,
    # each run is certified at 1e-6 in well under 100 iterations
    p = build_pmo(load_dataset("grid", rows=rows, cols=cols), eps, 2.0)
    direct = solve_direct(p)
    r = solve_bd(p, partitioner="kmdv", n_subsets=n_subsets, gap=1e-6, time_limit=120)
    assert r.status == "optimal" and r.rel_gap <= 1e-6 and r.iterations < 100
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.lower_bound <= direct.objective * (1 + 1e-9)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)


def test_record_bd_goes_to_the_masters_point_when_the_cuts_that_entered_are_weak() -> None:
    # the in-out separation solves the blocks at the master's point also when the cuts from the point
    # between it and the core cut off the thetas by less than in_out_weak_share of the gap in all (on
    # Rome at eps 10/km barely violated cuts would otherwise hold the lower bound where it is); on the
    # 5x5 grid at eps 6/km the rule takes fewer iterations, both runs certified
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 6.0, 2.0)
    direct = solve_direct(p)
    runs = {}
    default = BendersOptions().in_out_weak_share
    for share in (default, 0.0):
        options = RecordOptions(benders=BendersOptions(in_out_weak_share=share))
        runs[share] = r = solve_bd(p, partitioner="kmrec", n_subsets=2, gap=1e-6, time_limit=60, options=options)
        assert r.status == "optimal" and r.objective == pytest.approx(direct.objective, rel=1e-6)
        verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert runs[default].iterations < runs[0.0].iterations


def test_record_bd_gives_up_a_block_that_is_slow_at_the_masters_point() -> None:
    # a block solve at the master's point that runs past its cap (here 0 s: every one) gives no cut,
    # the run goes on between the point and the core and is not ended by it (on Rome at eps 10/km one
    # such solve could run to the time limit); the result is verified and its bounds hold
    impatient = RecordOptions(benders=BendersOptions(at_x_min_seconds=0.0, at_x_slowest_factor=0.0))
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 6.0, 2.0)
    direct = solve_direct(p)
    r = solve_bd(p, partitioner="kmrec", n_subsets=2, gap=1e-6, time_limit=60, options=impatient)
    assert r.details["failed_block_solves"] > 0 and r.status != "time_limit"
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) <= r.upper_bound * (1 + 2e-9)

