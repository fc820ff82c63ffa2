"""The generic Benders engine against a direct HiGHS solve of the same block-ladder LP."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from securelp.solvers.benders import (
    BendersEngine,
    BendersIteration,
    BendersOptions,
    LinkedRows,
    MasterSpec,
    RowBlock,
    SubproblemSpec,
)
from securelp.solvers.benders import blocks as blocks_module
from securelp.solvers.benders.blocks import Block
from securelp.solvers.benders.cuts import fit_cut_row
from securelp.solvers.benders.highs_calls import TimeUp, pass_model, rescaled_duals, run_highs
from securelp.solvers.benders.master import MasterComponent
from securelp.solvers.benders.stopping import gap_closed, pace_window_for, too_slow
from securelp.solvers.errors import ConfigError


def _rb(A: np.ndarray, lo: np.ndarray, up: np.ndarray) -> RowBlock:
    M = sp.csr_matrix(A)
    return RowBlock(M.indptr, M.indices, M.data, lo, up)


def _instance(seed: int, n_x: int = 4, n_blocks: int = 3, n_y: int = 3):
    """min c0 x + sum c_m y_m s.t. y_mj <= g x_v (linked), sum_j y_mj = 1, x sum = 1, 0 <= x, y <= 1."""
    rng = np.random.default_rng(seed)
    c0 = rng.uniform(0, 1, n_x)
    master = MasterSpec(c0, np.zeros(n_x), np.ones(n_x), _rb(np.ones((1, n_x)), np.array([1.0]), np.array([1.0])))
    blocks = []
    dense_rows = []  # for the reference LP
    for m in range(n_blocks):
        cm = rng.uniform(0, 1, n_y)
        v = rng.integers(0, n_x, n_y)
        g = rng.uniform(1.5, 4.0, n_y)
        A = np.vstack([np.eye(n_y), np.ones((1, n_y))])
        lo = np.concatenate([np.full(n_y, -np.inf), [1.0]])
        up = np.concatenate([np.zeros(n_y), [1.0]])
        blocks.append(SubproblemSpec(f"b{m}", cm, np.ones(n_y), _rb(A, lo, up), LinkedRows(np.arange(n_y), v, g)))
        dense_rows.append((cm, v, g))
    # reference: variables [x, y_0, y_1, ...]
    N = n_x + n_blocks * n_y
    c = np.concatenate([c0] + [b[0] for b in dense_rows])
    A_ub, b_ub, A_eq, b_eq = [], [], [np.concatenate([np.ones(n_x), np.zeros(N - n_x)])], [1.0]
    for m, (cm, v, g) in enumerate(dense_rows):
        for j in range(n_y):
            row = np.zeros(N)
            row[n_x + m * n_y + j] = 1.0
            row[v[j]] = -g[j]
            A_ub.append(row)
            b_ub.append(0.0)
        row = np.zeros(N)
        row[n_x + m * n_y : n_x + (m + 1) * n_y] = 1.0
        A_eq.append(row)
        b_eq.append(1.0)
    ref = linprog(c, A_ub=np.array(A_ub), b_ub=b_ub, A_eq=np.array(A_eq), b_eq=b_eq, bounds=(0, 1), method="highs")
    return master, blocks, ref


@given(seed=st.integers(0, 10_000))
@settings(max_examples=15, deadline=None)
def test_engine_matches_direct_lp(seed: int) -> None:
    master, blocks, ref = _instance(seed)
    assert ref.status == 0

    def ub(x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, object]:
        return float(master.cost @ x + sum(b.cost @ y for b, y in zip(blocks, ys))), (x, ys)

    res = BendersEngine(master, blocks, upper_bound_fn=ub, workers=2).run(gap=1e-9, max_iterations=300)
    assert res.status in ("optimal", "stalled")
    assert res.upper_bound == pytest.approx(ref.fun, rel=1e-7, abs=1e-9)
    assert res.lower_bound <= ref.fun + 1e-7
    lowers = [h.lower for h in res.history]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(lowers))  # the master bound never decreases


def test_feasibility_cuts_are_used_when_blocks_start_infeasible() -> None:
    # linked rows y_j <= g x_v with x starting at the cheapest vertex leave some block infeasible
    for seed in range(40):
        master, blocks, ref = _instance(seed, n_x=4, n_blocks=3, n_y=2)
        res = BendersEngine(master, blocks, upper_bound_fn=lambda x, ys, master=master, blocks=blocks: (float(master.cost @ x + sum(b.cost @ y for b, y in zip(blocks, ys))), None)).run(gap=1e-9)
        if any(h.n_feasibility_cuts for h in res.history):
            assert res.upper_bound == pytest.approx(ref.fun, rel=1e-7, abs=1e-9)
            return
    pytest.fail("no instance needed a feasibility cut; the test lost its purpose")


def _infeasible_first_instance():
    """An instance whose first master solution leaves some block infeasible."""
    for seed in range(40):
        master, blocks, ref = _instance(seed, n_x=4, n_blocks=3, n_y=2)
        res = BendersEngine(master, blocks, upper_bound_fn=lambda x, ys: (0.0, None)).run(gap=1e-9, max_iterations=1)
        if res.history[0].n_feasibility_cuts:
            return master, blocks, ref
    pytest.fail("no instance starts with an infeasible block; the tests lost their purpose")


def test_the_repair_function_gives_an_upper_bound_while_blocks_are_infeasible() -> None:
    master, blocks, ref = _infeasible_first_instance()
    seen: list[list[np.ndarray | None]] = []

    def exact(x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, object]:
        return float(master.cost @ x + sum(b.cost @ y for b, y in zip(blocks, ys))), "exact"

    def repaired(x: np.ndarray, ys: list[np.ndarray | None], feasible: list[bool]) -> tuple[float, object]:
        assert not all(feasible) and len(feasible) == len(blocks)
        seen.append(ys)
        return ref.fun + 1.0, "repaired"  # any feasible solution's value will do here

    res = BendersEngine(master, blocks, upper_bound_fn=exact, repair_upper_bound_fn=repaired).run(gap=1e-9)
    assert res.history[0].upper == pytest.approx(ref.fun + 1.0)  # an upper bound from iteration 1 on
    assert seen and all(y is not None and y.shape == b.cost.shape and np.all((y >= 0) & (y <= b.upper))
                        for ys in seen for y, b in zip(ys, blocks))  # phase-1 solutions, in the box
    assert res.upper_bound == pytest.approx(ref.fun, rel=1e-7, abs=1e-9) and res.best_payload == "exact"
    # without it, no upper bound until every block is feasible
    res = BendersEngine(master, blocks, upper_bound_fn=exact).run(gap=1e-9)
    assert res.history[0].upper == np.inf and res.upper_bound == pytest.approx(ref.fun, rel=1e-7, abs=1e-9)


def test_a_block_whose_solves_fail_gives_no_cut_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:

    master, blocks, ref = _instance(3)
    calls = {"n": 0}
    solve = Block.solve

    def flaky(self, x):  # every HiGHS fallback failing on block b1, the first time or always
        if self.spec.name == "b1" and (always or calls["n"] == 0):
            calls["n"] += 1
            return {"feasible": False, "failed": "HiGHS failed on elastic Benders block b1 (test)", "y": None}
        return solve(self, x)

    def ub(x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, object]:
        return float(master.cost @ x + sum(b.cost @ y for b, y in zip(blocks, ys))), None

    monkeypatch.setattr(Block, "solve", flaky)  # fault injection: HiGHS failing on a block
    always = False
    res = BendersEngine(master, blocks, upper_bound_fn=ub).run(gap=1e-9, max_iterations=300)
    assert res.history[0].n_failed_blocks == 1 and res.details["failed_block_solves"] == 1
    assert res.upper_bound == pytest.approx(ref.fun, rel=1e-7, abs=1e-9)  # the later iterations made up for it
    always = True
    res = BendersEngine(master, blocks, upper_bound_fn=ub).run(gap=1e-9, max_iterations=300)
    # no exception: the run stops when no block gives a cut, with valid bounds and the error
    assert res.status == "numerical_trouble" and "b1 (test)" in res.details["error"]
    assert res.lower_bound <= ref.fun + 1e-9 and res.upper_bound == np.inf
    assert all(h.n_failed_blocks == 1 for h in res.history)


def test_the_time_limit_holds_inside_an_iteration(monkeypatch: pytest.MonkeyPatch) -> None:
    import time


    master, blocks, ref = _instance(3)
    solve = Block.solve
    iteration = {"n": 0}

    def slow(self, x):  # block b1 needs longer than the time left in iteration 2
        if self.spec.name == "b1":
            iteration["n"] += 1
            if iteration["n"] == 2:
                time.sleep(0.6)
        return solve(self, x)

    def ub(x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, object]:
        return float(master.cost @ x + sum(b.cost @ y for b, y in zip(blocks, ys))), None

    monkeypatch.setattr(Block, "solve", slow)  # fault injection: a block slower than the time left
    t = time.perf_counter()
    res = BendersEngine(master, blocks, upper_bound_fn=ub).run(gap=1e-12, max_iterations=300, time_limit=0.4)
    assert time.perf_counter() - t < 1.5  # not one more iteration after the deadline
    assert res.status == "time_limit" and res.iterations == 2
    last = res.history[-1]
    assert last.n_optimality_cuts == last.n_feasibility_cuts == 0  # the abandoned iteration gives no cut
    assert res.lower_bound <= ref.fun + 1e-9 and res.lower_bound >= res.history[0].lower


def test_a_time_limit_before_any_upper_bound_still_gives_the_repaired_one() -> None:
    master, blocks, ref = _instance(3)
    seen: list[list[bool]] = []

    def repaired(x: np.ndarray, ys: list[np.ndarray | None], feasible: list[bool]) -> tuple[float, object]:
        seen.append(feasible)
        return ref.fun + 1.0, "repaired"

    res = BendersEngine(master, blocks, upper_bound_fn=lambda x, ys: (0.0, None),
                        repair_upper_bound_fn=repaired).run(gap=1e-9, time_limit=0.0)
    assert res.status == "time_limit" and res.iterations == 1 and res.best_payload == "repaired"
    assert res.upper_bound == pytest.approx(ref.fun + 1.0) and res.lower_bound == -np.inf
    assert seen == [[False] * len(blocks)]


def test_highs_gets_the_time_left() -> None:
    import time


    master, blocks, _ = _instance(0)
    blk = Block(blocks[0], master.upper)
    # (the block alone, its linked rows at x = 0, is infeasible: a conclusive end all the same)
    assert run_highs(blk.h, "test block", time.perf_counter() + 50.0) == "Infeasible"
    assert 45.0 < blk.h.getOptionValue("time_limit")[1] <= 50.0
    with pytest.raises(TimeUp):
        run_highs(blk.h, "test block", time.perf_counter() - 1.0)
    assert run_highs(blk.h, "test block") == "Infeasible"  # no deadline: no limit left over
    assert blk.h.getOptionValue("time_limit")[1] == np.inf


def test_the_time_left_counts_from_now_on_a_model_solved_before() -> None:
    # HiGHS compares its time limit with the run time a model has accumulated over all its runs: a
    # block re-solved warm for minutes would otherwise stop at once (Rome's record BD stopped at
    # 215 s of a 300 s limit)
    import time

    from securelp.solvers.lp.highs import new_highs

    rng = np.random.default_rng(0)
    A = sp.random(200, 300, density=0.05, random_state=1, format="csr")
    rows = RowBlock(A.indptr, A.indices, A.data, np.full(200, -np.inf), np.ones(200))
    h = new_highs()
    pass_model(h, -rng.uniform(0, 1, 300), np.zeros(300), np.full(300, np.inf), rows)
    while h.getRunTime() < 0.5:
        h.clearSolver()
        assert run_highs(h, "test LP") == "Optimal"
    ran = h.getRunTime()
    h.clearSolver()  # a cold solve (about 0.01 s here) with 0.4 s left: a limit of 0.4 s on HiGHS's clock has passed
    assert run_highs(h, "test LP", time.perf_counter() + 0.4) == "Optimal"
    assert h.getOptionValue("time_limit")[1] > ran + 0.3


def _wide_block():
    """One block: y_0 <= 1e9 y_1 (a row 1e9 wide), y_j <= g_j x_j (linked), sum y = 1, 0 <= y <= 1."""
    n = 3
    A = np.vstack([[1.0, -1e9, 0.0], np.eye(n), np.ones((1, n))])
    lo = np.array([-np.inf, -np.inf, -np.inf, -np.inf, 1.0])
    up = np.array([0.0, 0.0, 0.0, 0.0, 1.0])
    g = np.array([2.0, 1.5, 3.0])
    spec = SubproblemSpec("wide", np.array([1.0, 2.0, 3.0]), np.ones(n), _rb(A, lo, up),
                          LinkedRows(np.arange(1, n + 1), np.arange(n), g), unit_rows=np.array([4]))
    return spec, A, g


def _block_value(A: np.ndarray, g: np.ndarray, x: np.ndarray) -> float:
    res = linprog([1.0, 2.0, 3.0], A_ub=A[:4], b_ub=np.concatenate([[0.0], g * x]), A_eq=A[4:], b_eq=[1.0],
                  bounds=(0, 1), method="highs")
    return res.fun if res.status == 0 else np.inf


def test_a_block_highs_fails_on_is_solved_with_its_widest_rows_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    from securelp.solvers.errors import SolverError

    spec, A, g = _wide_block()
    calls: list[str] = []
    run = run_highs

    def failing(h, what, deadline=np.inf):  # HiGHS as on Rome: phase 1 and the plain elastic LP fail
        calls.append(what)
        if what.startswith("phase-1"):
            return "Unknown"
        if what.startswith("elastic") and "freed" not in what:
            raise SolverError(f"HiGHS failed on {what} (model status Solve error)")
        return run(h, what, deadline)

    monkeypatch.setattr(blocks_module, "run_highs", failing)  # fault injection: HiGHS failing
    blk = Block(spec, np.ones(3))
    assert blk.row_ratio[0] == pytest.approx(1e9) and np.all(blk.row_ratio[1:] == 1.0)
    x_hat = np.array([0.2, 0.1, 0.05])  # infeasible: sum g x < 1
    res = blk.solve(x_hat)
    assert res["feasible"] and not res.get("failed") and blk.freed_ratio == 1e8
    assert any("elastic Benders block wide (1 rows freed)" == c for c in calls)
    # the cut is valid: below the block's value wherever the block is feasible
    rng = np.random.default_rng(0)
    for x in rng.uniform(0, 1, (200, 3)):
        q = _block_value(A, g, x)
        if np.isfinite(q):
            assert res["alpha"] + res["beta"] @ x[res["vars"]] <= q + 1e-9
    # and it cuts off x_hat hard (the elastic price of the missing mass)
    assert res["alpha"] + res["beta"] @ x_hat[res["vars"]] > 1e3
    # the next solve goes straight to the freed LP
    calls.clear()
    assert blk.solve(x_hat)["feasible"]
    assert not any(c == "elastic Benders block wide" for c in calls)
    # without the fallback the block gives no cut (what the test guards against)
    blk = Block(spec, np.ones(3), BendersOptions(wide_row_ratios=()))
    assert blk.solve(x_hat)["failed"].startswith("HiGHS failed on elastic Benders block wide")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_master_bound_comes_from_duals_and_holds_for_any_duals(seed: int) -> None:
    # the lower bound is weak duality on the master's row duals, not HiGHS's objective (which on
    # Rome's record BD was 4 % above the LP's optimum): exact duals give the optimum, any others a
    # value below it, and a theta's cut duals that overshoot are scaled, not a bound of -inf

    master, _blocks, _ = _instance(seed, n_x=4, n_blocks=3, n_y=3)
    rng = np.random.default_rng(seed)
    comp = MasterComponent(master, np.arange(master.n), np.arange(master.rows.n_rows), [0, 1, 2],
                                   [0.0, 0.0, 0.0])
    for b in (0, 1, 2):  # optimality cuts theta_b >= alpha + beta' x (any: the LP is what it is)
        for _ in range(3):
            v = rng.choice(master.n, 2, replace=False)
            comp.add_cut(b, float(rng.uniform(0.1, 1.0)), v, rng.uniform(-1.0, 1.0, 2))
    comp.add_cut(None, -0.9, np.array([0, 1]), np.array([1.0, 1.0]))  # x_0 + x_1 <= 0.9
    bound, _x, _thetas = comp.solve()
    optimum = float(comp.h.getInfo().objective_function_value)
    assert bound == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    pi = np.asarray(comp.h.getSolution().row_dual)
    assert bound == comp.certified_bound(pi)  # what solve() returns is the dual bound
    for scale in (0.3, 1.0, 3.0):
        for _ in range(20):
            noisy = pi * rng.uniform(0.5, 1.5, pi.size) + scale * rng.normal(size=pi.size)
            b = comp.certified_bound(noisy)
            assert b <= optimum + 1e-12
            assert np.isfinite(b)


def _history(lowers: list[float], uppers: list[float], seconds: float = 1.0) -> list[BendersIteration]:
    return [BendersIteration(i + 1, lo, up, seconds * (i + 1), 1, 0) for i, (lo, up) in enumerate(zip(lowers, uppers))]


def test_the_pace_rule_stops_bounds_that_have_stopped_moving() -> None:
    # iterations of 5 s: 20 of them span the rule's minute
    flat = _history([1.0] * 21, [2.0] * 21, seconds=5.0)
    assert too_slow(flat, 20, 1e-4, 500, float("inf"))
    assert not too_slow(flat[:20], 20, 1e-4, 500, float("inf"))  # not yet a whole window
    assert not too_slow(flat, 0, 1e-4, 500, float("inf"))  # switched off
    # the lower bound climbs by 0.01 an iteration: the 480 iterations left close the gap of 1 at that pace
    climbing = _history([1.0 + 0.01 * i for i in range(21)], [2.2] * 21, seconds=5.0)
    assert gap_closed(climbing, 20) == pytest.approx(0.2)
    assert not too_slow(climbing, 20, 1e-4, 500, float("inf"))
    # ... but not the 50 left under a cap of 50 iterations, nor the 150 s left of a 255 s time limit
    assert too_slow(climbing, 20, 1e-4, 71, float("inf"))
    assert too_slow(climbing, 20, 1e-4, 500, 255.0)
    # no upper bound yet, or none a window ago: no pace to judge
    assert not too_slow(_history([1.0] * 21, [float("inf")] * 21, 5.0), 20, 1e-4, 500, float("inf"))
    assert not too_slow(_history([1.0] * 21, [float("inf")] + [2.0] * 20, 5.0), 20, 1e-4, 500, float("inf"))
    # the gap already within the target: nothing to judge
    assert not too_slow(_history([1.0] * 21, [1.00001] * 21, 5.0), 20, 1e-4, 500, float("inf"))


def test_the_pace_rule_judges_at_least_a_minute_of_iterations() -> None:
    """Benders bounds move in bursts: cheap iterations are judged over a minute, not over 20 of them."""
    fast = _history([1.0] * 200, [2.0] * 200, seconds=0.5)  # 100 s of flat bounds
    assert pace_window_for(fast, 20, 60.0) == 120  # the window grows back to span the minute
    assert pace_window_for(fast[:100], 20, 60.0) == 0  # 50 s of history: nothing judged yet
    assert not too_slow(fast[:100], 20, 1e-4, 500, float("inf"), min_seconds=60.0)
    assert too_slow(fast, 20, 1e-4, 500, float("inf"), min_seconds=60.0)
    assert pace_window_for(fast, 20, 0.0) == 20 and pace_window_for(fast[:20], 20, 0.0) == 0
    # a burst inside the minute keeps the run going, however flat its last 20 iterations
    burst = _history([1.0] * 100 + [1.5] * 100, [2.0] * 200, seconds=0.5)  # a burst 50 s ago
    assert too_slow(burst, 20, 1e-4, 500, float("inf"), min_seconds=0.0)
    assert not too_slow(burst, 20, 1e-4, 500, float("inf"), min_seconds=60.0)
    # slow iterations: the 20 iterations already span more than a minute
    slow = _history([1.0] * 21, [2.0] * 21, seconds=30.0)
    assert pace_window_for(slow, 20, 60.0) == 20 and too_slow(slow, 20, 1e-4, 500, float("inf"), min_seconds=60.0)


def test_record_bd_whose_bounds_stop_moving_ends_no_progress_with_the_same_bounds() -> None:
    """The 4x5 grid at eps 10/km solved at the master's points (no in-out separation) and with the cuts
    as they come (not scaled up to a violation HiGHS sees): its bounds stop moving. Without the pace
    rule the record BD runs to its iteration cap; with it, it stops one window later with the bounds
    it would have had. The default in-out separation closes the gap on the same instance."""
    from securelp.solvers.mdp.bd import solve_bd
    from securelp.solvers.mdp.datasets import load_dataset
    from securelp.solvers.mdp.pmo import build_pmo
    from securelp.solvers.mdp.records.options import RecordOptions

    # its iterations take milliseconds: judged over a window of 20 alone
    benders = BendersOptions(pace_min_seconds=0.0, visible_violation=0.0)
    p = build_pmo(load_dataset("grid", rows=4, cols=5), 10.0, 2.0)
    paced = solve_bd(p, partitioner="kmdv", n_subsets=2, gap=1e-4, max_iterations=500,
                     options=RecordOptions(in_out=0.0, benders=benders))
    unpaced = solve_bd(p, partitioner="kmdv", n_subsets=2, gap=1e-4, max_iterations=150,
                       options=RecordOptions(in_out=0.0, benders=dataclasses.replace(benders, pace_window=0)))
    # the paced run stops a window after its bounds stopped moving, well before the unpaced run's cap
    assert paced.status == "no_progress" and benders.pace_window < paced.iterations < 150
    assert unpaced.status == "iteration_limit" and unpaced.iterations == 150
    # the unpaced run's many more iterations raise the lower bound by a hair at most (the gap stays near
    # 0.09) and leave the upper one
    assert paced.lower_bound == pytest.approx(unpaced.lower_bound, rel=1e-5)
    assert paced.upper_bound == pytest.approx(unpaced.upper_bound, rel=1e-9)
    r = solve_bd(p, partitioner="kmdv", n_subsets=2, gap=1e-4, max_iterations=500)
    assert r.status == "optimal" and r.rel_gap <= 1e-4 and r.iterations < 60


@given(seed=st.integers(0, 10_000), lam=st.sampled_from([0.2, 0.5, 0.8]))
@settings(max_examples=15, deadline=None)
def test_in_out_separation_from_a_feasible_core_matches_direct_lp(seed: int, lam: float) -> None:
    """With a core (a master point where every block is feasible: x uniform, as every link factor is
    at least 1.5 and the blocks' unit rows need sum_j g_j x_v(j) >= 1) the blocks are solved between
    the master's point and the core; the optimum and a valid lower bound are the same."""
    master, blocks, ref = _instance(seed)
    assert ref.status == 0

    def ub(x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, object]:
        return float(master.cost @ x + sum(b.cost @ y for b, y in zip(blocks, ys))), (x, ys)

    core = np.full(master.n, 1.0 / master.n)
    res = BendersEngine(master, blocks, upper_bound_fn=ub, workers=2).run(gap=1e-9, max_iterations=300, core=core,
                                                                          in_out=lam)
    assert res.status in ("optimal", "stalled")
    assert res.upper_bound == pytest.approx(ref.fun, rel=1e-7, abs=1e-9)
    assert res.lower_bound <= ref.fun + 1e-7
    lowers = [h.lower for h in res.history]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(lowers))


def test_cuts_beyond_highs_limits_are_scaled_or_left_out_and_the_bound_still_adds_up() -> None:
    """HiGHS refuses a row with a coefficient of 1e15 or more. Such a cut is scaled down to 1e12, a
    positive multiple being as valid, with the coefficients that fall below 1e-9 dropped safely; an
    optimality cut whose theta would fall below 1e-9 is left out. A refused cut is not recorded: the
    certified bound adds up the rows HiGHS holds."""
    master, _blocks, _ = _instance(3)
    comp = MasterComponent(master, np.arange(master.n), np.arange(master.rows.n_rows), [0, 1, 2], [0.0, 0.0, 0.0])
    n0 = master.rows.n_rows
    comp.add_cut(0, 0.1, np.array([0, 1]), np.array([-0.5, 1e25]))  # theta's coefficient 1e-13: left out
    assert comp.n_cuts == 0 and comp.h.getNumRow() == n0
    # theta_0 + 0.5 x0 - 2e15 x1 - 1e-6 x2 >= 0.1, scaled by 5e-4: the x2 term (5e-10) is dropped,
    # its largest value over [0, 1] (0, the coefficient being negative) taken from the bound
    comp.add_cut(0, 0.1, np.array([0, 1, 2]), np.array([-0.5, 2e15, 1e-6]))
    idx, vals = comp.cut_rows[-1]
    assert comp.n_cuts == 1 and comp.h.getNumRow() == n0 + 1
    assert np.abs(vals).max() == pytest.approx(1e12) and 2 not in idx and comp.cut_lower[-1] == pytest.approx(5e-5)
    # a feasibility cut with a coefficient beyond the limit and one that falls below 1e-9:
    # x0 + 3e15 x1 - 1e-6 x3 <= 1, scaled by 1e12 / 3e15, keeps x0 and x1; the x3 term's least value
    # over [0, 1] (at x3 = 1) moves to the right-hand side
    comp.add_cut(None, -1.0, np.array([0, 1, 3]), np.array([1.0, 3e15, -1e-6]))
    idx, vals = comp.cut_rows[-1]
    assert comp.n_cuts == 2 and comp.h.getNumRow() == n0 + 2 and 3 not in idx
    assert comp.cut_upper[-1] == pytest.approx((1.0 + 1e-6) / 3e3, rel=1e-12)
    bound, x, th = comp.solve()
    assert x[0] / 3e3 + 1e12 * x[1] <= comp.cut_upper[-1] * (1 + 1e-9)
    assert bound <= float(master.cost @ x) + sum(th.values()) + 1e-9


def test_a_short_certificate_is_recomputed_from_a_rescaled_copy() -> None:
    """A master certificate that falls short of HiGHS's objective is recomputed from the duals of a
    copy re-solved with the costs scaled (wrong-signed duals of 6e-10 times coefficients up to e^20
    can take it far below); the master's own HiGHS is untouched."""
    master, _blocks, _ = _instance(5)
    comp = MasterComponent(master, np.arange(master.n), np.arange(master.rows.n_rows), [0, 1, 2], [0.0, 0.0, 0.0])
    comp.add_cut(0, 0.3, np.array([0, 1]), np.array([-0.5, 0.2]))
    bound, _x, _th = comp.solve()
    optimum = float(comp.h.getInfo().objective_function_value)
    assert bound == pytest.approx(optimum, rel=1e-9, abs=1e-12) and comp.recertify_solves == 0
    pi = rescaled_duals(comp.h, comp.options.recertify_scales[0], float("inf"))
    assert pi is not None and comp.certified_bound(pi) == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    # a certificate far short (as from clipped duals) is replaced by the copy's
    assert comp.recertified(optimum - 1.0, optimum) == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    assert comp.recertify_solves == 1
    assert comp.h.getOptionValue("user_objective_scale")[1] == 0  # the master's own HiGHS unchanged
    # past the deadline nothing is re-solved and the bound stays what it was
    assert rescaled_duals(comp.h, 12, 0.0) is None


def test_a_cut_hair_short_of_highs_tolerance_is_scaled_up_until_violated_visibly() -> None:
    """A cut that cuts off the master's point by less than HiGHS's feasibility tolerance is added as a
    positive multiple whose violation is ``visible_violation`` in the row's units (a master whose cuts are
    violated by 1.8e-10 stays where it is). The cut rows are fitted by the options in force."""
    options = BendersOptions()
    master, _blocks, _ = _instance(5)
    comp = MasterComponent(master, np.arange(master.n), np.arange(master.rows.n_rows), [0, 1, 2], [0.0, 0.0, 0.0])
    comp.add_cut(1, 2e-6, np.array([0, 2]), np.array([1e-6, -3e-6]), violation=1e-10)
    idx, vals = comp.cut_rows[-1]
    assert list(idx) == [0, 2, comp.theta_col[1]]
    up = options.visible_violation / 1e-10
    assert vals[-1] == pytest.approx(up) and comp.cut_lower[-1] == pytest.approx(2e-6 * up)  # theta's coefficient last
    assert vals[:-1] == pytest.approx(-np.array([1e-6, -3e-6]) * up)
    # a visible violation, or none given: as it comes
    comp.add_cut(1, 2e-6, np.array([0, 2]), np.array([1e-6, -3e-6]), violation=1e-3)
    comp.add_cut(None, -0.5, np.array([0, 1]), np.array([1.0, 1.0]))
    assert comp.cut_rows[-2][1][-1] == 1.0 and comp.cut_upper[-1] == 0.5
    # the multiple stays within cut_max_upscale and cut_max_coefficient
    comp.add_cut(None, -0.5, np.array([0, 1]), np.array([1.0, 1.0]), violation=1e-20)
    assert np.abs(comp.cut_rows[-1][1]).max() == pytest.approx(options.cut_max_upscale)
    comp.add_cut(None, -0.5, np.array([0, 1]), np.array([1e9, 1.0]), violation=1e-12)
    assert np.abs(comp.cut_rows[-1][1]).max() == pytest.approx(options.cut_max_coefficient)
    bound, x, th = comp.solve()
    assert bound <= float(master.cost @ x) + sum(th.values()) + 1e-9
    # other options fit the rows otherwise: no scaling up at all, and a lower cap
    row = fit_cut_row(np.array([0, 1]), np.array([1e9, 1.0]), 0.5, 1e-12, np.ones(2), False,
                      BendersOptions(visible_violation=0.0, cut_max_coefficient=1e6))
    assert row is not None and np.abs(row[1]).max() == pytest.approx(1e6) and row[3] == pytest.approx(1e-3)


def test_options_are_validated_once_with_the_field_named() -> None:
    """A value that breaks an option's rule is a ConfigError naming the field (never a silent default)."""
    for bad in ({"pace_window": -1}, {"in_out_weak_share": 2.0}, {"wide_row_ratios": (1e8, -1.0)},
                {"recertify_scales": (24.5,)}, {"cut_max_upscale": 0.0}):
        with pytest.raises(ConfigError, match=f"BendersOptions.{next(iter(bad))} must be") as exc:
            BendersOptions(**bad)
        assert exc.value.parameter == next(iter(bad))
    assert BendersOptions(pace_window=0).pace_window == 0


def test_a_block_presolve_calls_infeasible_is_rechecked_before_its_phase_1(monkeypatch: pytest.MonkeyPatch) -> None:
    master, blocks, _ = _instance(0)
    spec = blocks[0]
    x = np.full(master.cost.size, 1.0 / master.cost.size)  # every block feasible here
    honest = Block(spec, np.ones(master.cost.size)).solve(x)
    assert honest["feasible"]
    calls: list[str] = []
    run = run_highs

    def artefact(h, what, deadline=np.inf):  # presolve's "infeasible" at the feasibility boundary
        calls.append(what)
        if what.startswith("Benders block"):
            return "Infeasible"
        return run(h, what, deadline)

    monkeypatch.setattr(blocks_module, "run_highs", artefact)  # fault injection: a wrong "infeasible"
    blk = Block(spec, np.ones(master.cost.size))
    res = blk.solve(x)
    assert calls == ["Benders block b0", "rechecked Benders block b0"]  # no phase-1 LP, no fallback
    assert blk.h1 is None and res["feasible"] and res["value"] == pytest.approx(honest["value"], abs=1e-12)
    assert res["alpha"] == pytest.approx(honest["alpha"], abs=1e-12)
    assert np.array_equal(res["vars"], honest["vars"]) and np.allclose(res["beta"], honest["beta"], atol=1e-12)
    # a block that is infeasible indeed still gets its feasibility cut from the phase-1 LP
    calls.clear()
    res = blk.solve(np.zeros(master.cost.size))
    assert calls[:3] == ["Benders block b0", "rechecked Benders block b0", "phase-1 of Benders block b0"]
    assert not res["feasible"] and res["violation"] > 0


def test_a_block_highs_fails_on_is_rechecked_and_a_block_all_fail_on_gives_no_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from securelp.solvers.errors import SolverError

    master, blocks, ref = _instance(0)
    x = np.full(master.cost.size, 1.0 / master.cost.size)
    honest = Block(blocks[0], np.ones(master.cost.size)).solve(x)
    failing_on: tuple[str, ...] = ("Benders block",)
    run = run_highs

    def failing(h, what, deadline=np.inf):  # HiGHS failing warm, cold and with IPM (model status Not Set)
        if what.startswith(failing_on):
            raise SolverError(f"HiGHS failed on {what} (model status Not Set)")
        return run(h, what, deadline)

    monkeypatch.setattr(blocks_module, "run_highs", failing)  # fault injection: HiGHS failing
    res = Block(blocks[0], np.ones(master.cost.size)).solve(x)
    assert res["feasible"] and res["value"] == pytest.approx(honest["value"], abs=1e-12)
    # failing on every LP of the block: no cut and no exception, and the engine goes on without it
    failing_on = ("Benders block", "rechecked", "phase-1", "relaxed", "elastic")
    res = Block(blocks[0], np.ones(master.cost.size)).solve(x)
    assert not res["feasible"] and res["failed"].startswith("HiGHS failed on elastic Benders block b0")
    out = BendersEngine(master, blocks, upper_bound_fn=lambda x, ys: (0.0, None)).run(gap=1e-9, max_iterations=3)
    assert out.history and all(h.n_failed_blocks == len(blocks) for h in out.history)
    assert out.lower_bound <= ref.fun + 1e-9
