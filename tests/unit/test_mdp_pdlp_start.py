"""The PDLP start of the column decomposition: nothing it returns is trusted, and colgen stays exact.

The starts run without the dominance search: dropping the outputs dominated in the cone's dual order
would shrink these small instances below the sizes that get a start."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import InputError, SolverError
from securelp.solvers.mdp.columns import ColumnGenerationOptions, IPMStartOptions, StartOptions, solve_colgen
from securelp.solvers.mdp.columns import ascent as ascent_module
from securelp.solvers.mdp.columns import pdlp as pdlp_module
from securelp.solvers.mdp.columns import starts as starts_module
from securelp.solvers.mdp.columns.ascent import smoothed_dual_ascent
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.iterations import run_component
from securelp.solvers.mdp.columns.master import MASTER_FALLBACKS
from securelp.solvers.mdp.columns.pdlp import PDLP_BYTES_PER_NONZERO, pdlp_start, pdlp_too_large, screen_outputs
from securelp.solvers.mdp.columns.starts import choose_start, screened_primal
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.verify import verify_mechanism
from tests.mdp_fixtures import assert_certified_optimum, component, gaussian, gaussian70


@pytest.fixture(scope="module")
def instance():
    return gaussian70()


@pytest.fixture(scope="module")
def small():
    """Gaussian 40 records: a giant component of 22 records and 22 kept outputs, on which PDLP converges
    in a few thousand iterations."""
    return gaussian(40)


@pytest.fixture(scope="module")
def converged(small):
    """PDLP's start on ``small``'s giant component, run to convergence (deterministic), computed once."""
    p, _, idx, _ = small
    cg = _cg(p, idx)
    try:
        start = pdlp_start(cg.G, cg.A, time.perf_counter() + 120.0)
    finally:
        cg.close()
    assert start is not None and start.status == "Optimal"
    return start


def _cg(p, idx) -> ComponentCG:
    return component(p, idx)


def _options(**starts) -> ColumnGenerationOptions:
    """Column generation without the dominance search, with the starts' options ``starts``; the PDLP-based
    starts run from 100 records x kept outputs on (``small``'s giant component has 484, its others at
    most 4)."""
    return ColumnGenerationOptions(dominance=False, starts=StartOptions(**{"pdlp_min_size": 100, **starts}))



def test_start_bound_and_columns(small, converged) -> None:
    p, _, idx, opt_c = small
    cg = _cg(p, idx)
    try:
        start = converged
        assert start is not None and start.Q.shape == cg.G.shape == start.Z.shape and start.iterations > 0
        bound = float(start.Q.min(axis=1).sum())
        trivial = float(cg.G.min(axis=1).sum())
        assert bound <= opt_c * (1 + 1e-9)  # weak duality, whatever PDLP's accuracy
        assert bound >= trivial + 0.99 * (opt_c - trivial)  # and not vacuous
        before = len(cg.master.col_owner)
        assert cg.add_primal_columns(start.Z) > 0
        # every column that entered lies in the cone: A z <= 0 up to rounding
        for z in cg.master.col_ray[before:]:
            assert float((cg.A @ z).max()) <= 1e-12 * float(z.max())
        # the master over these columns is a restriction of the PMO: at or above the optimum, and close
        _, rmp, _ = cg.master.solve()
        assert opt_c * (1 - 1e-9) <= rmp <= opt_c * (1 + 1e-4)
    finally:
        cg.close()


def test_columns_outside_the_cone_are_closed_before_they_enter(instance) -> None:
    p, _, idx, _ = instance
    cg = _cg(p, idx)
    try:
        Z = np.zeros(cg.G.shape)
        Z[:, 0] = 1e-3
        Z[0, 0] = 1.0  # breaks every mDP row of record 0's neighbours in output 0
        assert float((cg.A @ Z[:, 0]).max()) > 0.1  # negative control: the raw column is outside
        before = len(cg.master.col_owner)
        assert cg.add_primal_columns(Z) >= 1
        for z in cg.master.col_ray[before:]:
            assert float((cg.A @ z).max()) <= 1e-12 * float(z.max())
    finally:
        cg.close()


def test_colgen_with_a_pdlp_start_equals_direct(small) -> None:
    p, direct, _, _ = small
    r = solve_colgen(p, gap=1e-7, dual_ascent=2.0, first_order="pdlp", options=_options())
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    assert r.lower_bound <= direct.objective * (1 + 1e-9)
    starts = r.details["dual_ascent"]
    assert starts and all(s["method"] == "pdlp" and s["columns"] > 0 and s["iterations"] > 0 for s in starts)
    # the second half of the budget went to the ascent from PDLP's duals, which kept or raised its bound
    assert all(s["polish"]["bound"] >= s["polish"]["bound_before"] for s in starts)
    assert all(s["bound"] == s["polish"]["bound"] for s in starts)


def test_pdlp_start_ends_with_pdlp_on_screened_outputs(small, monkeypatch) -> None:
    """After PDLP on the whole LP (stopped early here) and the ascent from its duals, PDLP runs on
    the outputs that ascent's certificate screens (``pdlp_screen_share`` of the start), for columns
    only; the column generation still ends at the optimum."""
    p, direct, _, _ = small
    real = starts_module.pdlp_start
    limits: list[int | None] = []

    def early(G, A, deadline, **kw):  # the whole LP's PDLP stops before it converges
        kw.setdefault("iteration_limit", 40)
        limits.append(kw["iteration_limit"])
        return real(G, A, deadline, **kw)

    monkeypatch.setattr(starts_module, "pdlp_start", early)  # fault injection: PDLP stopped short
    options = _options(screen_max_outputs=10, screen_pdlp_iterations=300)
    r = solve_colgen(p, gap=1e-7, dual_ascent=3.0, first_order="pdlp", options=options)
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(direct.objective, rel=1e-6) and r.status == "optimal"
    starts = r.details["dual_ascent"]
    assert starts and all(s["method"] == "pdlp" and s["status"] != "Optimal" for s in starts)
    for s in starts:
        sc = s["screened"]
        assert 1 <= sc["outputs"] <= 10 and 0 < sc["iterations"] <= 300 and sc["columns"] > 0
    assert limits[:2] == [40, 300]  # the whole LP first, then the screened outputs
    options = _options(screen_max_outputs=10, screen_pdlp_iterations=300, pdlp_screen_share=0.0)  # off
    r = solve_colgen(p, gap=1e-7, dual_ascent=3.0, first_order="pdlp", options=options)
    assert all("screened" not in s for s in r.details["dual_ascent"])


_ORDER = ("smoothed", "screened", "pdlp", "ipm")


def test_auto_moves_to_the_heavier_starts_as_the_time_limit_grows(monkeypatch) -> None:
    """``auto`` under a time limit, on the sizes of a 1,000-record gaussian's giant component (894
    records, 965 kept outputs, 23.2 M nonzeros): the longer the limit, the heavier the start
    (smoothed, screened, pdlp, ipm), each with its share of the limit; without a limit the ``ipm``
    start where its inverses fit in memory, else the screened start."""
    for module in (ascent_module, pdlp_module):
        monkeypatch.setattr(module, "available_memory", lambda: 24 * 2**30)
    from securelp.solvers.mdp.columns import ipm_start as ipm_start_module

    monkeypatch.setattr(ipm_start_module, "available_memory", lambda: 24 * 2**30)
    o = ColumnGenerationOptions().starts
    share = {"smoothed": o.smoothed_share, "screened": o.screen_budget_share, "pdlp": o.pdlp_budget_share,
             "ipm": o.screen_budget_share}
    m, Kc = 894, 965
    E = (23_200_000 // Kc - m) // 2
    seen = []
    for limit in (60.0, 300.0, 450.0, 600.0, 900.0, 3600.0):
        method, budget = choose_start("auto", m, E, Kc, limit, None)
        assert budget == pytest.approx(share[method] * limit)
        seen.append(_ORDER.index(method))
    assert seen == sorted(seen) and seen[0] < seen[-1]
    assert choose_start("auto", m, E, Kc, float("inf"), None) == ("ipm", o.unlimited_budget)
    # an explicit start is never replaced
    assert choose_start("screened", m, E, Kc, 900.0, None)[0] == "screened"
    assert choose_start("pdlp", m, E, Kc, 900.0, None)[0] == "pdlp"
    # a 2,000-record component's inverses (5.8 GB) fit in 24 GiB, not in 4 GiB: the screened start then
    assert choose_start("auto", 1901, 46_698, 1971, float("inf"), None)[0] == "ipm"
    monkeypatch.setattr(ipm_start_module, "available_memory", lambda: 4 * 2**30)
    assert choose_start("auto", 1901, 46_698, 1971, float("inf"), None)[0] == "screened"


def test_ascent_from_pdlp_duals_raises_a_valid_bound(instance) -> None:
    """The smoothed ascent started from an early PDLP iterate's duals: a bound at least PDLP's, and
    still at most the optimum (weak duality); negative duals handed to it are clipped, so even a
    bad start gives a valid bound. Iteration-limited, not timed: how far PDLP gets in a fixed time
    depends on the machine's load."""
    p, _, idx, opt_c = instance
    cg = _cg(p, idx)
    try:
        start = pdlp_start(cg.G, cg.A, time.perf_counter() + 120.0, iteration_limit=2000)
        assert start is not None and start.Y is not None and start.Y.shape == (cg.G.shape[1], cg.A.shape[0])
        before = float(start.Q.min(axis=1).sum())
        m, K = cg.G.shape
        q, its = smoothed_dual_ascent(cg.G, cg.A, time.perf_counter() + 120.0, Y0=start.Y.T,
                                      beta=1e-3 * abs(before) / (m * np.log(K)))
        after = float(q.min(axis=1).sum())
        assert its > 0 and before <= after <= opt_c * (1 + 1e-9)
        assert before < opt_c * (1 - 1e-4)  # PDLP left a gap ...
        assert after > before + 0.5 * (opt_c - before)  # ... and the ascent closes much of it
        bad = -np.abs(start.Y.T) * 1e3 - 1.0  # all negative: clipped to Y = 0, the trivial start
        q_bad, _ = smoothed_dual_ascent(cg.G, cg.A, time.perf_counter() + 0.2, Y0=bad)
        assert float(q_bad.min(axis=1).sum()) <= opt_c * (1 + 1e-9)
        with pytest.raises(ValueError, match="mDP rows x outputs"):
            smoothed_dual_ascent(cg.G, cg.A, time.perf_counter() + 1.0, Y0=start.Y)
    finally:
        cg.close()


def test_the_ascent_on_threads_is_the_ascent_on_one(instance) -> None:
    """The smoothed ascent's products and softmin run by blocks of rows on the threads: the same
    iterates, so the same certificate to the bit, whatever the number of threads (and below the
    optimum: weak duality). The instance is small, so the size from which threads are used is
    lowered."""
    p, _, idx, opt_c = instance
    cg = _cg(p, idx)
    try:
        state1: dict = {}
        state2: dict = {}
        q1, its1 = smoothed_dual_ascent(cg.G, cg.A, np.inf, max_iterations=120, state=state1, parallel_min=0)
        q2, its2 = smoothed_dual_ascent(cg.G, cg.A, np.inf, max_iterations=120, state=state2, threads=2,
                                        parallel_min=0)
        q3, _ = smoothed_dual_ascent(cg.G, cg.A, np.inf, max_iterations=120, threads=3, parallel_min=0)
        assert its1 == its2 == 120
        assert np.array_equal(q1, q2) and np.array_equal(q1, q3)
        assert np.array_equal(state1["Y"], state2["Y"]) and state1["beta"] == state2["beta"]
        assert float(q1.min(axis=1).sum()) <= opt_c * (1 + 1e-9)
    finally:
        cg.close()


def test_too_large_for_pdlp_falls_back_to_the_screened_start(small) -> None:
    """A PDLP start whose whole LP is too large becomes the screened start; when not even one
    output's LP fits, its PDLP is skipped and only the ascent runs."""
    p, direct, _, _ = small
    r = solve_colgen(p, gap=1e-6, dual_ascent=0.5, first_order="pdlp", options=_options(pdlp_max_nonzeros=1))
    assert r.objective == pytest.approx(direct.objective, rel=1e-5)
    starts = r.details["dual_ascent"]
    assert starts and all(s["method"] == "screened" and s["screened"]["outputs"] == 0 for s in starts)
    assert all(s["screened"]["columns"] == 0 and s["iterations"] > 0 for s in starts)


def test_a_start_that_would_not_fit_in_memory_is_not_run(small, monkeypatch) -> None:
    """The PDLP start is skipped when its measured footprint exceeds the available memory, and runs
    when memory is unknown."""
    p, direct, _, _ = small
    monkeypatch.setattr(pdlp_module, "available_memory", lambda: 1_000)  # PDLP's probe only: the ascent fits
    r = solve_colgen(p, gap=1e-6, dual_ascent=0.5, first_order="pdlp", options=_options())
    assert r.objective == pytest.approx(direct.objective, rel=1e-5)
    starts = r.details["dual_ascent"]
    assert starts and all(s["method"] == "screened" and s["screened"]["outputs"] == 0 for s in starts)
    o = ColumnGenerationOptions().starts
    assert re.search(r"(GiB|MiB|KiB|bytes) available", pdlp_too_large(10**6, o.pdlp_max_nonzeros, o.pdlp_memory_share))
    monkeypatch.setattr(pdlp_module, "available_memory", lambda: None)
    assert pdlp_too_large(10**6, o.pdlp_max_nonzeros, o.pdlp_memory_share) == ""
    assert "nonzeros >" in pdlp_too_large(o.pdlp_max_nonzeros + 1, o.pdlp_max_nonzeros, o.pdlp_memory_share)


def test_available_memory_is_read_from_the_system() -> None:
    free = pdlp_module.available_memory()
    if free is None:
        pytest.skip("no /proc/meminfo or cgroup limit on this system")
    assert 0 < free < 2**50


class _FailingRuns:
    """A master whose first ``n`` runs report HiGHS's model status 'Unknown' (and, optionally, a primal residual)."""

    def __init__(self, h, n: int, residual: float | None = None) -> None:
        self._h, self._n, self.runs, self._residual = h, n, 0, residual

    def __getattr__(self, name):
        return getattr(self._h, name)

    def run(self):
        self.runs += 1
        return self._h.run()

    def getModelStatus(self):
        import highspy

        return highspy.HighsModelStatus.kUnknown if self.runs <= self._n else self._h.getModelStatus()

    def getInfo(self):
        info = self._h.getInfo()
        if self._residual is not None:
            info.max_primal_infeasibility = self._residual
        return info


class _TimedOut(_FailingRuns):
    """A master whose runs after the first ``n`` report HiGHS's 'Time limit reached'."""

    def getModelStatus(self):
        import highspy

        return highspy.HighsModelStatus.kTimeLimit if self.runs > self._n else self._h.getModelStatus()


def _assert_verified_rows(cg, rows, lo, up, opt_c) -> None:
    verify_mechanism(rows, cg.sub.dataset.distance, cg.problem.eps, eta=cg.problem.eta)
    assert np.abs(rows.sum(axis=1) - 1.0).max() <= 1e-9
    assert up == pytest.approx(float(np.sum(cg.problem.cost[cg.idx] * rows)), rel=1e-12)
    assert lo <= opt_c * (1 + 1e-9) <= up * (1 + 1e-9)


def test_a_master_solve_that_reaches_the_deadline_ends_the_run_with_a_verified_mechanism(small, converged) -> None:
    """HiGHS's time limit on the master is the time left; a master run that reaches it ends the run
    ('time_limit') with the best verified rows so far (here the first, unboxed, master's), or, when
    no master was ever solved, the repaired first-order start's; the bounds stay valid."""
    p, _, idx, opt_c = small
    cg = _cg(p, idx)
    real = cg.master.h
    try:
        start = converged
        cg.warm_start(start.Q)
        # half of PDLP's iterate spread uniformly: a start far short of the gap, so the masters run
        cg.add_primal_columns(0.5 * start.Z + 0.5 / cg.Kc)
        cg.master.h = _TimedOut(real, 1)  # the first (unboxed) master solve succeeds, the boxed one times out
        rows, lo, up, status, _ = run_component(cg, time.perf_counter() + 60.0, 100, lambda a, b: None,
                                                centre=start.mu)
        assert status == "time_limit" and cg.master.h.runs == 2
        assert 0.0 < real.getOptionValue("time_limit")[1] - real.getRunTime() <= 60.0
        _assert_verified_rows(cg, rows, lo, up, opt_c)
        first = up
        cg.master.h = _TimedOut(real, 0)  # no master solution at all: the repaired start
        rows, lo, up, status, _ = run_component(cg, time.perf_counter() + 60.0, 100, lambda a, b: None,
                                                centre=start.mu)
        assert status == "time_limit" and cg.master.h.runs == 1
        _assert_verified_rows(cg, rows, lo, up, opt_c)
        assert up == pytest.approx(float(np.sum(cg.G * cg.start_rows)), rel=1e-9)
        assert up >= first * (1 - 1e-9)
    finally:
        cg.master.h = real
        cg.close()
    cg = _cg(p, idx)
    try:  # no start and the deadline already passed: the best constant mechanism, no master run
        cg.master.h = _TimedOut(cg.master.h, 0)
        rows, lo, up, status, _ = run_component(cg, time.perf_counter() - 1.0, 100, lambda a, b: None)
        assert status == "time_limit" and cg.master.h.runs == 0
        _assert_verified_rows(cg, rows, lo, up, opt_c)
        assert np.count_nonzero(rows.sum(axis=0)) == 1
        assert up == pytest.approx(float(cg.G.sum(axis=0).min()), rel=1e-9)
    finally:
        cg.close()


def test_a_failed_master_solve_falls_back_and_restores_its_options(instance) -> None:
    """Warm, cold and primal-simplex runs 'fail': the loose-tolerance fallback solves the master, the
    options are restored; when every fallback fails it is a SolverError, never a silent return."""
    p, _, idx, _ = instance
    cg = _cg(p, idx)
    master = cg.master
    accept = cg.options.master_accept_infeasibility
    try:
        _, clean, _ = master.solve()
        real = master.h
        master.h = _FailingRuns(real, 3)
        _, obj, _ = master.solve()
        assert master.h.runs == 4 and master.retries == 1
        assert obj == pytest.approx(clean, rel=1e-6)
        assert real.getOptionValue("simplex_strategy")[1] == 1
        assert real.getOptionValue("primal_feasibility_tolerance")[1] == master.tol
        assert real.getOptionValue("solver")[1] == "choose"
        # no run 'Optimal', but a solution with unit-row residual <= master_accept_infeasibility: taken
        master.h = _FailingRuns(real, 100)
        _, obj, _ = master.solve()
        # a fallback that sets what is already in force is skipped (here the dual simplex and the
        # 1e-7 tolerances of the default gap's master): it would repeat the cold re-solve
        fresh = [o for o in MASTER_FALLBACKS if not all(real.getOptionValue(k)[1] == v for k, v in o.items())]
        assert 0 < len(fresh) < len(MASTER_FALLBACKS)
        assert master.h.runs == 2 + len(fresh) and master.retries == 2
        assert obj == pytest.approx(clean, rel=1e-6)
        # ... and with residuals above it, a SolverError, never a silent return
        master.h = _FailingRuns(real, 100, residual=10 * accept)
        with pytest.raises(SolverError, match="ended with status Unknown, also cold.*smallest unit-row residual"):
            master.solve()
        master.h = real
    finally:
        cg.close()


def test_a_box_that_leaves_the_master_unbounded_is_widened_then_dropped(instance) -> None:
    """A dual box above every dual point the columns allow makes the boxed master unbounded: it is
    widened (a centre just above) or dropped (a centre far above), and the master is solved."""
    p, _, idx, _ = instance
    cg = _cg(p, idx)
    master = cg.master
    try:
        _, free, _ = master.solve()
        mu, _, _ = master.solve()
        above = mu + 0.01 * abs(free) / cg.m
        master.set_box(above, 1e-4 * abs(free) / cg.m)
        with pytest.raises(SolverError):
            master.solve()  # the negative control: this box has no solution
        _, obj, _, centre, width = master.solve_in_box(above, 1e-4 * abs(free) / cg.m)
        assert centre is not None and width > 1e-4 * abs(free) / cg.m and master.box_widenings >= 1
        assert obj <= free * (1 + 10 * master.tol)  # the box can only lower the boxed master's value
        far = mu + 1e6
        master.set_box(far, 1e-9)
        _, obj, _, centre, width = master.solve_in_box(far, 1e-9)
        assert centre is None and width == 0.0 and not master.boxstep
        assert obj == pytest.approx(free, rel=10 * master.tol)  # two solves, each within its tolerance
    finally:
        cg.close()


def test_the_fallback_gets_the_screened_shares_of_the_time_limit(small, monkeypatch) -> None:
    """A PDLP start refused for size runs the screened start with its budget (``screen_budget_share``
    of the cap), whose first ascent gets ``screen_ascent_share`` of it; its PDLP does not fit either,
    so the ascent goes on from its last iterate for the rest of the budget."""
    p, direct, _, _ = small
    budgets: list[float] = []
    starts: list[bool] = []
    real = starts_module.smoothed_dual_ascent

    def spy(G, A, deadline, **kw):
        budgets.append(deadline - time.perf_counter())
        starts.append(kw.get("Y0") is not None)
        return real(G, A, deadline, **kw)

    monkeypatch.setattr(starts_module, "smoothed_dual_ascent", spy)  # a spy on the ascents' deadlines
    options = _options(pdlp_max_nonzeros=1, dual_ascent_min_size=0)
    r = solve_colgen(p, gap=1e-6, time_limit=30.0, first_order="pdlp", options=options)
    # the column generation may get too little of the cap to certify: the bounds stay valid
    assert r.lower_bound <= direct.objective * (1 + 1e-9) <= r.objective * (1 + 2e-9)
    first = 30.0 * options.starts.screen_budget_share * options.starts.screen_ascent_share
    assert budgets and budgets[0] == pytest.approx(first, abs=1.0) and not starts[0]
    # where the first ascent ran to its deadline, the second went on from its iterate
    assert all(resumed for resumed in starts[1:])


@pytest.mark.slow
def test_auto_takes_pdlp_without_a_time_limit_else_the_screened_start(instance) -> None:
    """``auto`` (the default): the IPM start without a time limit and under one its expected time fits
    in; else PDLP on the whole LP when it gets ``auto_pdlp_min_iterations`` expected iterations; else
    the screened start when its PDLP gets ``screen_min_iterations`` expected iterations on the screened
    outputs, else the smoothed ascent (with its share). An explicit choice is never replaced."""
    p, direct, _, _ = instance

    def methods(starts: dict, **kw):
        options = ColumnGenerationOptions(starts=StartOptions(**{"dual_ascent_min_size": 0, "pdlp_min_size": 0, **starts}))
        r = solve_colgen(p, gap=1e-6, options=options, **kw)
        assert r.objective == pytest.approx(direct.objective, rel=1e-5)
        return {s["method"] for s in r.details["dual_ascent"]}

    assert methods({}, dual_ascent=1.0) == {"ipm"}  # no time limit
    assert methods({}, time_limit=20.0) == {"ipm"}  # its expected time fits
    slow_ipm = {"seconds_per_cube": 1.0}  # an IPM that would not fit in the start

    def methods_slow_ipm(starts: dict, **kw):
        options = ColumnGenerationOptions(starts=StartOptions(**{"dual_ascent_min_size": 0, "pdlp_min_size": 0, **starts}),
                                          ipm_start=IPMStartOptions(**slow_ipm))
        r = solve_colgen(p, gap=1e-6, options=options, **kw)
        assert r.objective == pytest.approx(direct.objective, rel=1e-5)
        return {s["method"] for s in r.details["dual_ascent"]}

    assert methods_slow_ipm({}, dual_ascent=1.0) == {"ipm"}  # no time limit: it runs anyway
    assert methods_slow_ipm({}, time_limit=20.0) == {"pdlp"}  # tens of thousands of iterations expected
    many = {"auto_pdlp_min_iterations": 10**12}  # more than PDLP on the whole LP gets
    assert methods_slow_ipm(many, time_limit=20.0) == {"screened"}
    slow = {**many, "pdlp_seconds_per_nonzero_iteration": 1.0}  # a machine 10^8 x slower
    assert methods_slow_ipm(slow, time_limit=20.0) == {"smoothed"}
    assert methods_slow_ipm(slow, time_limit=20.0, first_order="pdlp") == {"pdlp"}
    assert methods_slow_ipm(slow, time_limit=20.0, first_order="screened") == {"screened"}
    # no default start at all: nothing to choose
    assert methods_slow_ipm({**slow, "dual_ascent_min_size": 10**9}, time_limit=20.0) == set()


def test_bad_first_order_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    p = build_pmo(load_dataset("grid", rows=3, cols=3), 1.0, 1.5)
    with pytest.raises(InputError, match="first-order start must be one of auto, pdlp, smoothed, screened") as exc:
        solve_colgen(p, first_order="simplex")
    assert exc.value.parameter == "first_order"
    with pytest.raises(SystemExit) as exc:
        main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "bd",
              "--decomposition", "columns", "--first-order", "simplex", "--json", "-"])
    assert exc.value.code == 2
    assert "invalid choice: 'simplex'" in capsys.readouterr().err


def test_screen_outputs_ranks_outputs_by_the_records_they_serve() -> None:
    """Each record spreads a unit of weight over its near-minimal outputs (softmin of its row); the
    outputs with the most weight are kept, ties broken by the distance to some row's minimum."""
    Q = np.array([[1.0, 1.0001, 2.0, 3.0],
                  [1.0, 2.0, 1.0, 3.0],
                  [5.0, 5.0, 5.0, 4.99],
                  [7.0, 7.5, 7.0, 6.0]])
    assert list(screen_outputs(Q, 1)) == [3]  # the minimum of two records
    assert list(screen_outputs(Q, 2)) == [0, 3]  # then the output record 0 and record 1 share
    assert list(screen_outputs(Q, 3)) == [0, 2, 3]
    assert list(screen_outputs(Q, 99)) == [0, 1, 2, 3]
    # far from every minimum: no weight, ranked by the relative distance to the nearest row minimum
    far = np.array([[1.0, 3.0, 2.0], [1.0, 3.0, 2.0]])
    assert list(screen_outputs(far, 2)) == [0, 2]


def test_colgen_with_a_screened_start_equals_direct(small) -> None:
    """The ascent, then PDLP on the outputs its certificate marks (10 of the 22 kept here): start
    columns from a restricted LP, a bound from the ascent only; the column generation, which prices
    every output, still ends at the optimum. (With these columns, columns whose reduced cost is below
    the master's dual tolerance would enter without a pivot again and again: ``enter_factor``.)"""
    p, direct, _, _ = small
    r = solve_colgen(p, gap=1e-7, dual_ascent=2.0, first_order="screened",
                     options=_options(screen_max_outputs=10, screen_pdlp_iterations=300))
    assert_certified_optimum(p, direct, r)
    starts = r.details["dual_ascent"]
    assert starts and all(s["method"] == "screened" and s["iterations"] > 0 for s in starts)
    for s in starts:
        sc = s["screened"]
        assert 1 <= sc["outputs"] <= 10
        assert 0 < sc["iterations"] <= 300 and sc["columns"] > 0  # PDLP's iteration cap holds


def test_screened_start_shrinks_to_the_memory_available(instance, monkeypatch) -> None:
    """With too little memory for PDLP on many outputs the screened LP keeps fewer (down to one:
    all mass on one output is still a mechanism) instead of being refused."""
    p, _, idx, opt_c = instance
    cg = _cg(p, idx)
    try:
        q, _ = smoothed_dual_ascent(cg.G, cg.A, time.perf_counter() + 0.5)
        per_output = (cg.m + 2 * cg.E) * PDLP_BYTES_PER_NONZERO / cg.options.starts.pdlp_memory_share
        monkeypatch.setattr(pdlp_module, "available_memory", lambda: int(3.5 * per_output))
        info = screened_primal(cg, q, time.perf_counter() + 2.0, 1e-7)
        # halved until it fits: at most 3.5 outputs' worth of memory, and the size before did not fit
        assert 1 <= info["outputs"] <= 3.5 < 2 * info["outputs"] + 1
        assert info["columns"] > 0
        _, rmp, _ = cg.master.solve()
        assert rmp >= opt_c * (1 - 1e-9)  # a restriction of the PMO
    finally:
        cg.close()


def _start_run(small, converged, damp: float):
    """A run from PDLP's start whose primal iterate is mixed with the uniform mechanism (weight
    ``damp``) and whose every master solve would time out; returns what the run gives, the masters'
    runs and the component's start gap."""
    p, _, idx, opt_c = small
    cg = _cg(p, idx)
    real = cg.master.h
    try:
        start = converged
        cg.warm_start(start.Q)
        cg.add_primal_columns((1.0 - damp) * start.Z + damp / cg.Kc)
        cg.master.h = _TimedOut(real, 0)
        rows, lo, up, status, its = run_component(cg, time.perf_counter() + 60.0, 100, lambda a, b: None,
                                                  centre=start.mu)
        _assert_verified_rows(cg, rows, lo, up, opt_c)
        assert up == pytest.approx(float(np.sum(cg.G * cg.start_rows)), rel=1e-9)
        return status, its, cg.master.h.runs, cg.start_gap, (up - lo) / up
    finally:
        cg.master.h = real
        cg.close()


def test_a_start_within_the_gap_ends_the_component_without_a_master_solve(small, converged) -> None:
    """A converged PDLP start's repaired iterate is within 1e-4 of its certificate's bound: the
    component ends 'optimal' at once, the masters (which would all time out here) never run."""
    status, its, runs, start_gap, gap = _start_run(small, converged, 0.0)
    assert (status, its, runs) == ("optimal", 0, 0)
    assert start_gap == pytest.approx(gap, abs=1e-15) and 0.0 <= gap <= 1e-4


def test_a_start_short_of_the_gap_goes_on_to_the_master(small, converged) -> None:
    """The same start spread a tenth uniformly is short of the gap: the check lets the run go on
    to the master (whose time-out then ends it, with the start's rows as the upper bound)."""
    status, _, runs, start_gap, gap = _start_run(small, converged, 0.1)
    assert status == "time_limit" and runs == 1
    assert start_gap > 1e-4 and gap == pytest.approx(start_gap, rel=1e-12)
