"""The structured interior-point method and the ``ipm`` start: exact against HiGHS, bounds valid
whatever the iterate, and the column generation after it still certifies the optimum.

The starts run without the dominance search (``dominance=False``): dropping the outputs dominated in
the cone's dual order would shrink these small instances below the sizes that get a start."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import scipy.sparse as sp

from securelp.coordinator.cli import main
from securelp.solvers.errors import InputError
from securelp.solvers.mdp.columns import ColumnGenerationOptions, IPMStartOptions, StartOptions, solve_colgen
from securelp.solvers.mdp.columns import ipm_start as ipm_start_module
from securelp.solvers.mdp.columns.ipm_start import ipm_outputs, prune_outputs
from securelp.solvers.mdp.columns.master import RestrictedMaster
from securelp.solvers.mdp.ipm import Dissection, IPMOptions, dissection, memory_needed, structured_ipm
from securelp.solvers.mdp.ipm.inverses import Inverses
from tests.mdp_fixtures import assert_certified_optimum, component, gaussian, gaussian70


def _options(starts: StartOptions | None = None, **ipm_start) -> ColumnGenerationOptions:
    """Column generation without the dominance search (these instances would shrink below a start's size),
    with the ipm start's options ``ipm_start``."""
    return ColumnGenerationOptions(dominance=False, ipm_start=IPMStartOptions(**ipm_start),
                                   starts=starts or StartOptions())


#: the starts' size floor lowered so that ``small``'s giant component (22 records x 22 kept outputs) gets
#: the ipm start and its 2-record components (at most 4) none
SMALL_STARTS = StartOptions(pdlp_min_size=10)


@pytest.fixture(scope="module")
def instance():
    p, direct, idx, opt_c = gaussian70()
    cg = component(p, idx)
    G, A = cg.G.copy(), cg.A.copy()
    cg.close()
    return p, direct, idx, opt_c, G, A


@pytest.fixture(scope="module")
def dense(instance):
    """The structured IPM on the giant component's LP to a relative gap of 1e-6 (dense inverses, one
    thread), computed once."""
    _, _, _, _, G, A = instance
    return structured_ipm(G, A, float("inf"), tolerance=1e-6)


@pytest.fixture(scope="module")
def small():
    """Gaussian 40 records (seed 1): a giant component of 22 records, 84 mDP rows and 22 kept outputs,
    whose cold column generation is cheap. It is below the default sizes that get a start: the tests
    that need one lower ``pdlp_min_size`` (:data:`SMALL_STARTS`)."""
    return gaussian(40)


def test_ipm_solves_the_component_lp_to_the_tolerance(instance, dense) -> None:
    _, _, _, opt_c, G, A = instance
    res = dense
    assert res.status == "optimal" and 5 < res.iterations < 100
    # the bound is recomputed here from the returned multipliers: it is what the method claims,
    # and it is below the optimum HiGHS found, the primal iterate above it, both within 1e-8
    assert np.all(res.Y >= 0)
    bound = float(np.min(G + A.T @ res.Y, axis=1).sum())
    assert bound == pytest.approx(res.bound, rel=1e-12)
    assert bound <= opt_c * (1 + 1e-12) <= res.primal * (1 + 1e-8)
    assert res.primal - bound <= 1e-6 * res.primal
    # asked for more than the arithmetic gives, it stops by itself, no worse
    tight = structured_ipm(G, A, float("inf"), tolerance=1e-12)
    assert tight.status == "stalled" and tight.iterations < 100
    assert tight.bound <= opt_c * (1 + 1e-12) and tight.primal - tight.bound <= 1e-6 * tight.primal
    # the primal iterate is a mechanism up to rounding: rows sum to 1, the mDP rows hold
    assert np.abs(res.Z.sum(axis=1) - 1).max() < 1e-9
    assert float((A @ res.Z).max()) < 1e-9
    assert res.Z.min() >= 0


def test_an_early_stop_still_gives_a_valid_bound(instance) -> None:
    """After 3 iterations the iterate is far from optimal, yet its clipped multipliers still
    certify a bound below the optimum; unclipped they would not be a certificate at all."""
    _, _, _, opt_c, G, A = instance
    res = structured_ipm(G, A, float("inf"), max_iterations=3)
    assert res.status == "iteration_limit" and res.iterations == 3
    assert res.bound <= opt_c and res.primal >= opt_c
    assert res.primal - res.bound > 1e-3 * opt_c  # really far: the test is not vacuous
    # a deadline in the past stops before the second iteration, with the start's bound
    res0 = structured_ipm(G, A, time.perf_counter() - 1.0)
    assert res0.status == "time_limit" and res0.iterations <= 1 and res0.bound <= opt_c


def test_restricted_outputs_bound_only_their_lp(instance) -> None:
    """On a subset of the outputs the IPM solves the restricted LP, whose optimum is at or above
    the whole one: its bound is a bound for the restricted LP only (the start completes it with
    other certificates), and its primal is a mechanism of the whole."""
    _, _, _, opt_c, G, A = instance
    S = np.argsort(G.sum(axis=0))[:5]
    res = structured_ipm(G[:, S], A, float("inf"), tolerance=1e-6)
    assert res.status == "optimal"
    assert res.primal >= opt_c * (1 - 1e-9)


def test_the_probe_is_called_once_at_its_gap_and_can_stop_the_method(instance) -> None:
    _, _, _, opt_c, G, A = instance
    seen: list[np.ndarray] = []
    lives: list[np.ndarray] = []

    def stop(mu: np.ndarray, live: np.ndarray) -> bool:
        seen.append(mu)
        lives.append(live)
        return True

    res = structured_ipm(G, A, float("inf"), tolerance=1e-6, probe_gap=1e-2, probe=stop)
    assert res.status == "probed" and len(seen) == 1
    assert res.primal - res.bound <= 1e-2 * res.primal and res.bound <= opt_c * (1 + 1e-12)
    assert res.primal - res.bound > 1e-6 * res.primal  # stopped there, not at the tolerance
    assert seen[0].shape == (G.shape[0],) and np.allclose(seen[0], res.mu)
    assert np.array_equal(lives[0], np.arange(G.shape[1]))  # nothing pruned: every output is in the LP
    # a probe that returns False is not called again, and the method goes on to its tolerance
    calls: list[int] = []
    full = structured_ipm(G, A, float("inf"), tolerance=1e-6, probe_gap=1e-2,
                          probe=lambda mu, live: calls.append(1) is not None)
    assert full.status == "optimal" and calls == [1] and full.iterations > res.iterations


def test_idle_outputs_leave_the_restricted_lp(instance, dense) -> None:
    """With ``prune_below`` the outputs the iterate leaves idle leave the LP on the way: the result
    is the LP over the others (the same optimum as that LP solved alone, its bound valid for it),
    the pruned outputs carry no mass, and the probe is told which outputs are still in."""
    _, _, _, opt_c, G, A = instance
    K = G.shape[1]
    res = structured_ipm(G, A, float("inf"), tolerance=1e-6, prune_below=1e-2, prune_gap=1e-2)
    assert res.status == "optimal" and 0 < res.pruned.size < K
    live = np.setdiff1d(np.arange(K), res.pruned)
    alone = _restricted_optimum(G[:, live], A)  # HiGHS on the LP over the kept outputs
    assert res.bound <= alone * (1 + 1e-9) <= res.primal * (1 + 2e-9)
    assert res.primal - alone <= 1e-6 * alone
    assert res.primal >= opt_c * (1 - 1e-9)  # a restriction of the whole LP
    assert np.all(res.Z[:, res.pruned] == 0) and np.abs(res.Z.sum(axis=1) - 1).max() < 1e-9
    # the pruned outputs' frozen multipliers are still multipliers (>= 0): a valid certificate of
    # the whole LP, only not a tight one at mu
    assert np.all(res.Y >= 0)
    assert float(np.min(G + A.T @ res.Y, axis=1).sum()) <= opt_c * (1 + 1e-12)
    # without it nothing leaves, and the probe sees the LP without the pruned outputs
    assert dense.pruned.size == 0
    lives: list[np.ndarray] = []
    early = structured_ipm(G, A, float("inf"), tolerance=1e-6, prune_below=1e-2, prune_gap=1e-1, probe_gap=1e-3,
                           probe=lambda mu, live: lives.append(live) is not None)
    assert len(lives) == 1 and early.pruned.size > 0
    # pruned at gap 1e-1, probed at 1e-3: outputs had left before the probe, and may leave after it
    out_at_probe = set(range(K)) - set(lives[0].tolist())
    assert out_at_probe and out_at_probe <= set(early.pruned.tolist())
    assert np.all(np.diff(lives[0]) > 0)


def _restricted_optimum(G: np.ndarray, A: sp.csr_matrix) -> float:
    """HiGHS on the component LP over the outputs ``G``: rows sum to 1, ``A z_k <= 0`` per output."""
    from scipy.optimize import linprog

    m, K = G.shape
    unit = sp.kron(sp.eye(m), np.ones((1, K)))  # z flattened record-major: z[i, k] at i * K + k
    mdp = sp.kron(A, sp.eye(K))
    out = linprog(G.ravel(), A_ub=mdp, b_ub=np.zeros(mdp.shape[0]), A_eq=unit, b_eq=np.ones(m),
                  bounds=(0, None), method="highs")
    assert out.status == 0, out.message
    return float(out.fun)


def _grid_rows(n: int) -> sp.csr_matrix:
    """mDP rows of an ``n x n`` grid graph (both directions of every edge, factor 1.5)."""
    rows = []
    for i in range(n):
        for j in range(n):
            for di, dj in ((0, 1), (1, 0)):
                if i + di < n and j + dj < n:
                    a, b = i * n + j, (i + di) * n + j + dj
                    rows += [(a, b), (b, a)]
    E = len(rows)
    r = np.repeat(np.arange(E), 2)
    c = np.array(rows).ravel()
    v = np.tile([1.0, -1.5], E)
    return sp.csr_matrix((v, (r, c)), shape=(E, n * n))


def _tree_inverse(H: np.ndarray, d: Dissection | None) -> np.ndarray | None:
    """``H^-1`` through the structured IPM's inverses (one output), or None when it fails."""
    inv = Inverses(1, H.shape[0], d)
    n = H.shape[0]
    iu = np.flatnonzero(np.triu(np.ones((n, n), dtype=bool), 1).ravel() & (H.ravel() != 0))
    il = (iu % n) * n + iu // n
    off, diag = H.ravel()[iu][:, None], np.diagonal(H)[:, None]
    M = inv.invert(off, diag, iu, il)
    if M is None:
        return None
    dense = inv.dense(0)
    assert np.allclose(np.tril(M), np.tril(dense), rtol=0, atol=1e-12 * np.abs(dense).max())
    return dense


def test_the_dissected_inverse_is_the_inverse() -> None:
    """A 20 x 20 grid's ``H = A' diag(theta) A + diag(d)``: the nested dissection separates the two
    parts (no row joins them), and its inverse equals LAPACK's dense one; with a separator that
    misses an edge of the graph the same formula is wrong (the check can fail)."""
    A = _grid_rows(20)
    rng = np.random.default_rng(3)
    H = (A.T @ sp.diags(rng.uniform(0.1, 10.0, A.shape[0])) @ A).toarray() + np.diag(rng.uniform(0.01, 1.0, 400))
    d = dissection(A, min_records=50)
    assert d is not None and d.sub1 is not None and d.flops() < 0.6 * 400**3
    assert sorted(d.perm.tolist()) == list(range(400)) and d.s < 60
    adj = (abs(A).T @ abs(A)).toarray()[np.ix_(d.perm, d.perm)]
    assert not adj[:d.p1, d.p1:d.p1 + d.p2].any()
    Hp = H[np.ix_(d.perm, d.perm)]
    dense = np.linalg.inv(Hp)
    assert np.abs(_tree_inverse(Hp, d) - dense).max() <= 1e-10 * np.abs(dense).max()
    # the same dissection on a matrix with one entry joining the two parts: not its inverse
    Hx = Hp.copy()
    Hx[0, d.p1] = Hx[d.p1, 0] = -0.05
    assert np.abs(_tree_inverse(Hx, d) - np.linalg.inv(Hx)).max() > 1e-6 * np.abs(dense).max()
    # a matrix that is not positive definite is refused, not inverted
    assert _tree_inverse(Hp - 2 * np.abs(dense).max() ** -1 * np.eye(400) * 10, d) is None
    # a small or a complete graph gets none
    assert dissection(_grid_rows(5), min_records=50) is None


def test_the_ipm_with_a_dissection_and_threads_finds_the_same_optimum(instance, dense) -> None:
    """The component's 51 records dissected (forced: below the size where it pays) and the outputs
    split over two threads: the same certified optimum as the dense, single-threaded run."""
    _, _, _, opt_c, G, A = instance
    forced = IPMOptions(dissect_min_records=8, dissect_max_cost=10.0)
    d = dissection(A, forced.dissect_min_records, forced.dissect_max_cost)
    assert d is not None and d.s > 0
    res = structured_ipm(G, A, float("inf"), tolerance=1e-6, threads=2, options=forced)
    assert res.status == "optimal"
    assert float(np.min(G + A.T @ res.Y, axis=1).sum()) == pytest.approx(res.bound, rel=1e-12)
    assert res.bound <= opt_c * (1 + 1e-12) <= res.primal * (1 + 1e-8)
    assert res.bound == pytest.approx(dense.bound, rel=1e-6)
    # the records come back in their own order
    assert np.abs(res.Z.sum(axis=1) - 1).max() < 1e-9 and float((A @ res.Z).max()) < 1e-9
    assert np.abs(res.mu - dense.mu).max() < 1e-4 * np.abs(dense.mu).max()


def test_malformed_mdp_rows_are_refused(instance) -> None:
    _, _, _, _, G, A = instance
    bad = sp.csr_matrix(A.toarray() * -1.0)  # rows a z_j - z_i: the +1 entry is missing
    with pytest.raises(InputError, match="z_i - a z_j"):
        structured_ipm(G, bad, float("inf"))
    with pytest.raises(InputError, match="columns") as exc:
        structured_ipm(G[:-1], A, float("inf"))
    assert exc.value.parameter == "A"


def test_memory_needed_grows_with_outputs_and_records_squared() -> None:
    assert memory_needed(894, 200) == pytest.approx(8 * 200 * 894**2, rel=0.01)
    assert memory_needed(10, 4) < memory_needed(20, 4) < memory_needed(20, 8)


def test_colgen_with_an_ipm_start_equals_direct(small) -> None:
    """The ascent screens 5 of the kept outputs, the IPM solves the LP over them, the pricing at
    its duals adds the violated outputs for a second round, and the column generation prices every
    output: the optimum, certified (a gap of 1e-6: the rounds' columns are the IPM's, accurate to
    its tolerance, and the master enters no column below its entering tolerance)."""
    p, direct, _, _ = small
    notes: list[str] = []
    options = dataclasses.replace(_options(SMALL_STARTS, max_outputs=5), status_min_records=1)  # every component reports
    r = solve_colgen(p, gap=1e-6, dual_ascent=2.0, first_order="ipm", status=notes.append, options=options)
    assert_certified_optimum(p, direct, r)
    starts = r.details["dual_ascent"]
    assert starts and all(s["method"] == "ipm" for s in starts)
    for s in starts:
        info = s["ipm"]
        assert info["rounds"][0]["outputs"] == 5 and info["iterations"] > 0 and s["columns"] > 0
        assert len(info["rounds"]) >= 2 and info["rounds"][0]["violated"] > 0
        assert info["restricted_bound"] <= info["restricted_primal"]
        # the terminal's status line: the start, then every IPM iteration of every round, and the pricing
        mine = [t for t in notes if t.startswith(f"component of {s['records']} records")]
        assert any(t.endswith("ipm start") for t in mine)
        steps = [t for t in mine if ", iteration " in t]
        assert len(steps) >= info["iterations"] and any("IPM round 1 on 5 outputs, iteration 0," in t for t in steps)
        assert sum("pricing" in t for t in mine) >= len(info["rounds"])


def test_an_ipm_start_within_the_gap_ends_its_component_without_a_master_solve(small, monkeypatch) -> None:
    """The IPM rounds stop once their bound is within the gap of the restricted primal; that primal,
    repaired and verified, is within the gap too, so the component ends there: no master solve, and
    its ``start_gap`` in the report. With a gap the start does not reach, the master runs."""
    p, direct, idx, _ = small
    solved: list[int] = []
    real = RestrictedMaster.solve

    def counted(self, *args, **kwargs):
        solved.append(self.m)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RestrictedMaster, "solve", counted)  # a spy: which components solve a master
    r = solve_colgen(p, gap=1e-4, dual_ascent=2.0, first_order="ipm", options=_options(SMALL_STARTS))
    assert r.status == "optimal" and r.objective <= direct.objective * (1 + 1e-4)
    (entry,) = [s for s in r.details["dual_ascent"] if s["records"] == idx.size]
    assert -1e-12 <= entry["start_gap"] <= 1e-4
    assert idx.size not in solved
    # a gap below the IPM's own finish: the start's rows stay an upper bound, the master goes on
    solved.clear()
    r = solve_colgen(p, gap=1e-6, dual_ascent=2.0, first_order="ipm",
                     options=_options(SMALL_STARTS, gap_share=1e3))  # the rounds stop at a restricted gap of 1e-3
    assert_certified_optimum(p, direct, r)
    (entry,) = [s for s in r.details["dual_ascent"] if s["records"] == idx.size]
    assert entry["start_gap"] > 1e-6 and idx.size in solved


def test_ipm_rounds_add_the_violated_outputs_and_close_the_bound(small) -> None:
    """Output generation: the first round's 5 outputs leave outputs violated at its duals and a
    Lagrangian bound far below the optimum; the next round holds them too, and its bound reaches the
    optimum. Every round's bound is a valid one (at most the component's optimum)."""
    p, direct, idx, opt_c = small
    r = solve_colgen(p, gap=1e-6, dual_ascent=2.0, first_order="ipm", options=_options(SMALL_STARTS, max_outputs=5))
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    (entry,) = [s for s in r.details["dual_ascent"] if s["records"] == idx.size]
    rounds = entry["ipm"]["rounds"]
    assert len(rounds) >= 2
    first, last = rounds[0], rounds[-1]
    assert first["violated"] > 0 and first["lower_bound"] < opt_c * (1 - 1e-3)
    assert rounds[1]["outputs"] == 5 - first["pruned"] + first["violated"]
    assert last["violated"] == 0 and last["lower_bound"] >= opt_c * (1 - 1e-5)
    assert all(rd["lower_bound"] <= opt_c * (1 + 1e-9) for rd in rounds)
    assert entry["ipm"]["lower_bound"] == max(rd["lower_bound"] for rd in rounds)

    # one round only: the bound stays where the first round left it
    r1 = solve_colgen(p, gap=1e-6, dual_ascent=2.0, first_order="ipm",
                      options=_options(SMALL_STARTS, max_outputs=5, max_rounds=1))
    (entry1,) = [s for s in r1.details["dual_ascent"] if s["records"] == idx.size]
    assert len(entry1["ipm"]["rounds"]) == 1 and entry1["ipm"]["lower_bound"] < opt_c * (1 - 1e-3)


def test_the_ipm_start_is_the_same_from_run_to_run(small) -> None:
    """The screening ascent stops at its iterations (``ascent_iterations``), not at a time: two runs
    screen the same outputs and go through the same rounds (with a time cap alone, the rounds differ
    from run to run)."""
    p, direct, idx, _ = small
    runs = []
    for _ in range(2):
        r = solve_colgen(p, gap=1e-6, dual_ascent=30.0, first_order="ipm",
                         options=_options(SMALL_STARTS, max_outputs=5, ascent_iterations=40))
        assert_certified_optimum(p, direct, r)
        (entry,) = [s for s in r.details["dual_ascent"] if s["records"] == idx.size]
        info = entry["ipm"]
        assert info["ascent_iterations"] == 40
        runs.append([(rd["outputs"], rd["iterations"], rd["violated"], rd["pruned"], rd["lower_bound"])
                     for rd in info["rounds"]])
    assert runs[0] == runs[1]


def _ipm_info(p, direct, idx, options: ColumnGenerationOptions, **kwargs) -> dict:
    """The ``ipm`` start's report on the giant component ``idx`` of a run on ``p`` that must end at
    ``direct``'s certified optimum (``kwargs`` go to :func:`solve_colgen`)."""
    args = {"gap": 1e-6, "dual_ascent": 2.0, "first_order": "ipm", "options": options, **kwargs}
    r = solve_colgen(p, **args)
    assert_certified_optimum(p, direct, r)
    (entry,) = [s for s in r.details["dual_ascent"] if s["records"] == idx.size]
    return entry["ipm"]


def test_without_a_time_limit_the_screen_runs_all_its_iterations(small) -> None:
    """With no time limit the screening ascent stops at its iterations only, whatever
    ``ascent_seconds`` says (a slower machine's ascent would stop short and its screen take another
    path); under a time limit the cap still binds."""
    p, direct, idx, _ = small
    options = _options(SMALL_STARTS, max_outputs=5, ascent_iterations=40, ascent_seconds=1e-9)
    infos = [_ipm_info(p, direct, idx, options, time_limit=limit) for limit in (float("inf"), 600.0)]
    assert infos[0]["ascent_iterations"] == 40
    assert infos[1]["ascent_iterations"] < 40


def test_only_the_first_rounds_stop_at_their_probe_and_later_ones_go_on_while_outputs_are_violated(
        instance) -> None:
    """Rounds after ``probe_rounds`` run to the gap instead of stopping at their probe, and one that
    leaves outputs violated is followed by another (up to ``max_rounds``): on 5 screened outputs,
    round 2 run to its end leaves one output violated and round 3 brings it in. With the rounds cut
    at 2 the master closes what they leave: the optimum either way."""
    p, direct, idx, _, _, _ = instance

    def rounds(**kw) -> list[dict]:
        return _ipm_info(p, direct, idx, _options(max_outputs=5, **kw))["rounds"]

    assert [rd["status"] for rd in rounds()][:2] == ["probed", "probed"]  # by default both may stop
    got = rounds(probe_rounds=1)
    assert got[0]["status"] == "probed" and all(rd["status"] != "probed" for rd in got[1:])
    assert len(got) >= 3 and got[1]["violated"] > 0 and got[-1]["violated"] == 0
    got = rounds(probe_rounds=1, max_rounds=2)
    assert len(got) == 2 and got[-1]["violated"] > 0


def test_pruned_outputs_are_the_unused_ones_and_come_back_when_needed(instance) -> None:
    """Between rounds an output leaves when its entries are all small, unless it is some record's
    largest. Pruned too eagerly (a threshold of 1 keeps only the records' favourites), an output the
    optimum needs is found violated by the next pricing and brought back: the result is still the
    certified optimum."""
    Z = np.array([[0.90, 0.05, 0.050, 0.0],
                  [0.30, 0.60, 0.095, 0.005],
                  [0.02, 0.03, 0.009, 0.941]])
    S = np.array([7, 3, 9, 12])
    assert prune_outputs(Z, S, 0.01).tolist() == [3, 7, 9, 12]
    assert prune_outputs(Z, S, 0.1).tolist() == [3, 7, 12]
    assert prune_outputs(Z, S, 1.0).tolist() == [3, 7, 12]  # each row's largest stays
    assert prune_outputs(Z[:, :1] * 0, S[:1], 0.5).tolist() == [7]  # never empty

    p, direct, idx, _, _, _ = instance
    r = solve_colgen(p, gap=1e-6, dual_ascent=2.0, first_order="ipm", options=_options(max_outputs=10, prune_below=1.0))
    assert_certified_optimum(p, direct, r)
    (entry,) = [s for s in r.details["dual_ascent"] if s["records"] == idx.size]
    rounds = entry["ipm"]["rounds"]
    # pruned within a round (once its gap is prune_gap) or after it, and some brought back
    assert sum(rd["pruned"] + rd["pruned_in_round"] for rd in rounds) > 0 and len(rounds) >= 2


def test_a_round_at_the_cap_prunes_on_the_way_and_one_below_it_does_not(small) -> None:
    """A round that holds as many outputs as the rounds may grow to prunes its idle outputs once its
    gap is ``prune_gap``, which makes room for its probe; one below the cap keeps them to its end
    (there the probe fires anyway). Either way the result is the certified optimum."""
    p, direct, idx, _ = small

    def rounds_of(**kw) -> list[dict]:
        return _ipm_info(p, direct, idx, _options(SMALL_STARTS, max_outputs=20, **kw))["rounds"]

    below = rounds_of()  # the cap: max_grown_outputs (400), at most the 22 kept outputs
    assert below[0]["outputs"] == 20 and all(rd["pruned_in_round"] == 0 for rd in below)
    at_cap = rounds_of(max_grown_outputs=20)
    assert at_cap[0]["outputs"] == 20 and at_cap[0]["pruned_in_round"] > 0
    # switched off: nothing leaves within a round
    assert all(rd["pruned_in_round"] == 0 for rd in rounds_of(max_grown_outputs=20, prune_gap=0.0))


def _memory(monkeypatch, free: int | None, *modules) -> None:
    """The memory probe of the given modules (default: every start's) reading ``free`` bytes."""
    from securelp.solvers.mdp.columns import ascent, pdlp

    for module in modules or (ascent, pdlp, ipm_start_module):
        monkeypatch.setattr(module, "available_memory", lambda: free)


def test_an_ipm_start_that_does_not_fit_in_memory_is_skipped(small, monkeypatch) -> None:
    p, direct, _, _ = small
    _memory(monkeypatch, 1000, ipm_start_module)  # the ascent fits, the IPM does not
    r = solve_colgen(p, gap=1e-7, dual_ascent=1.0, first_order="ipm",
                     options=_options(SMALL_STARTS))
    assert r.objective == pytest.approx(direct.objective, rel=1e-6) and r.status == "optimal"
    assert any(s["records"] == 22 for s in r.details["dual_ascent"])
    assert all(s["ipm"]["status"] == "skipped" and s["ipm"]["outputs"] == 0 for s in r.details["dual_ascent"])


def test_a_start_whose_ascent_does_not_fit_is_left_out(small, monkeypatch, caplog) -> None:
    """Every start but pdlp begins with the ascent over all kept outputs (a complete mDP graph's would
    take tens of GB). When it does not fit, the component starts cold, with a warning when the start
    was asked for, and is still certified."""
    import logging

    p, direct, _, _ = small
    _memory(monkeypatch, 100_000)  # the ascent needs about 65 KiB, more than 60% of it
    # every start, auto's too, would be given to the giant component (22 records x 22 outputs)
    starts = StartOptions(dual_ascent_min_size=10, pdlp_min_size=10)
    for method in ("ipm", "smoothed", "screened", "pdlp", "auto"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="securelp.solvers.mdp.columns.starts"):
            r = solve_colgen(p, gap=1e-7, dual_ascent=None if method == "auto" else 1.0, first_order=method,
                             options=_options(starts))
        assert r.objective == pytest.approx(direct.objective, rel=1e-6) and r.status == "optimal"
        assert not any(s["records"] == 22 for s in r.details["dual_ascent"])  # no start on the large component
        said = [rec for rec in caplog.records if "its dual ascent's arrays over" in rec.getMessage()]
        assert said and said[0].levelno == (logging.INFO if method == "auto" else logging.WARNING)
        assert "84 mDP rows x 22 outputs need" in said[0].getMessage()
    _memory(monkeypatch, None)  # memory unknown: the start runs
    r = solve_colgen(p, gap=1e-7, options=_options(starts))
    assert r.status == "optimal" and any(s["records"] == 22 for s in r.details["dual_ascent"])
    assert ipm_outputs(22, 84, 22, _options()) > 0
    _memory(monkeypatch, 100_000)
    assert ipm_outputs(22, 84, 22, _options()) == 0  # nor is the switch to the IPM taken


def test_cli_takes_the_ipm_start(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--first-order ipm --dual-ascent S`` runs the IPM start on a component large enough for a start
    (gaussian 100: after the dominance search its largest component, 81 records, still has one) and
    the report says so."""
    out = tmp_path / "r.json"
    code = main(["mdp", "--dataset", "gaussian", "--records", "100", "--seed", "1", "--eta", "0.9", "--method", "bd",
                 "--decomposition", "columns", "--first-order", "ipm", "--dual-ascent", "1", "--json", str(out)])
    assert code == 0
    import json

    rep = json.loads(out.read_text())
    assert rep["status"] == "optimal" and rep["rel_gap"] <= 1e-4
    starts = rep["dual_ascent"]
    assert [s["method"] for s in starts] == ["ipm"] and starts[0]["records"] == 81
    assert starts[0]["ipm"]["iterations"] > 0 and starts[0]["bound"] <= rep["upper_bound"] * (1 + 1e-9)


def test_an_ipm_start_without_time_for_a_step_keeps_the_ascent(small, monkeypatch) -> None:
    """When the start's budget is gone before the IPM's first step, its starting point (far from
    optimal) is not used as centre, columns or certificate; the column generation still certifies."""
    p, direct, _, _ = small
    ascent = ipm_start_module.smoothed_dual_ascent

    def ascent_to_the_end(G, A, deadline, **kw):  # ... and uses all of it, however fast the machine
        out = ascent(G, A, deadline, **kw)
        time.sleep(max(0.0, deadline - time.perf_counter()) + 0.01)
        return out

    monkeypatch.setattr(ipm_start_module, "smoothed_dual_ascent", ascent_to_the_end)  # fault injection
    r = solve_colgen(p, gap=1e-7, dual_ascent=0.5, first_order="ipm", time_limit=60.0,
                     options=_options(SMALL_STARTS, ascent_share=1.0))  # the ascent takes the whole budget ...
    assert_certified_optimum(p, direct, r)
    assert any(s["records"] == 22 for s in r.details["dual_ascent"])
    for s in r.details["dual_ascent"]:
        assert s["ipm"]["iterations"] == 0 and "columns" not in s


def test_auto_turns_to_the_ipm_start_when_the_column_generation_lingers(small) -> None:
    """``auto`` gives a component of at most ``dual_ascent_min_size`` records x outputs no start; when
    its column generation has not closed the gap after ``ipm_switch_iterations`` iterations, the IPM
    start runs after all and the column generation finishes from it (its columns so far kept): the
    optimum, certified, and the iterations of both runs counted."""
    p, direct, idx, _ = small
    notes: list[str] = []
    starts = StartOptions(ipm_switch_iterations=2, ipm_switch_min_records=idx.size)
    options = dataclasses.replace(_options(starts), status_min_records=1)
    r = solve_colgen(p, gap=1e-6, status=notes.append, options=options)
    assert_certified_optimum(p, direct, r)
    (entry,) = r.details["dual_ascent"]  # only the giant component is large enough
    assert entry["records"] == idx.size and entry["method"] == "ipm" and entry["after_iterations"] == 2
    assert entry["columns"] > 0 and entry["ipm"]["iterations"] > 0
    assert any("has not closed the gap after 2 iterations" in t for t in notes)

    # the switch is auto's: not with an explicit start or without starts (dual_ascent=0), and not
    # when the iteration cap would leave nothing after it. The first two stop at 5 iterations, room
    # enough for a switch after 2 (auto takes it there), so they need not run to the gap.
    for kwargs in ({"first_order": "pdlp", "max_iterations": 5}, {"dual_ascent": 0.0, "max_iterations": 5},
                   {"max_iterations": 2}):
        r = solve_colgen(p, gap=1e-6, options=options, **kwargs)
        assert not any(s.get("after_iterations") for s in r.details["dual_ascent"]), kwargs


def test_auto_keeps_the_column_generation_that_closes_quickly() -> None:
    """A component whose start columns are nearly optimal (a grid at eps 10/km) closes within
    ``ipm_switch_iterations``: no IPM start."""
    from securelp.solvers.mdp.datasets import load_dataset
    from securelp.solvers.mdp.direct import solve_direct
    from securelp.solvers.mdp.pmo import build_pmo

    p = build_pmo(load_dataset("grid", rows=5, cols=5), 10.0, 2.0)
    r = solve_colgen(p, gap=1e-6, options=ColumnGenerationOptions(starts=StartOptions(ipm_switch_min_records=2)))
    assert r.status == "optimal" and not r.details["dual_ascent"]
    assert r.objective == pytest.approx(solve_direct(p).objective, rel=1e-6)
