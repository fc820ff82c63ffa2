"""The PMO LP (Qiu, eq. (3)) solved whole by HiGHS (direct), the essential mDP pairs, the exponential
mechanism, and the exact repair (upward closure and mix into the cone); bad inputs refused."""

from __future__ import annotations

import dataclasses
import json
import re
import types
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode, InputError, ResourceError, VerificationError
from securelp.solvers.mdp import direct as direct_module
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.direct import DIRECT_BYTES_PER_NONZERO, solve_direct
from securelp.solvers.mdp.expmech import solve_expmech
from securelp.solvers.mdp.graph import build_graph, essential_edges
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.repair import (
    UNREPAIRED,
    finalize_mechanism,
    mix_into_cone,
    repair_mechanism,
    repair_reference,
    upward_closure,
)
from securelp.solvers.mdp.verify import verify_mechanism


def test_direct_beats_exponential_mechanism_and_is_verified() -> None:
    p = build_pmo(load_dataset("grid", rows=4, cols=4), 1.0, 1.5)
    d = solve_direct(p, exact_check=True)
    e = solve_expmech(p)
    assert d.verification.exact and d.verification.max_mdp_violation <= 1e-9
    assert d.objective < e.objective
    assert d.lower_bound <= d.objective <= d.lower_bound * (1 + 1e-8)


def test_direct_lower_bound_is_weak_duality_not_the_solvers_objective(monkeypatch: pytest.MonkeyPatch) -> None:
    # HiGHS's objective overstates the optimum on badly scaled PMOs; the bound comes from its duals, so
    # an overstated objective does not reach the report
    p = build_pmo(load_dataset("grid", rows=4, cols=4), 1.0, 1.5)
    honest = solve_direct(p)
    assert honest.lower_bound == pytest.approx(honest.details["solver_objective"], rel=1e-9)
    solve_lp = direct_module.highs_solve_lp

    def overstated(*args, **kwargs):
        status, x, duals, obj, h = solve_lp(*args, **kwargs)
        return status, x, duals, obj * 1.05, h

    monkeypatch.setattr(direct_module, "highs_solve_lp", overstated)  # fault injection: HiGHS overstating
    d = solve_direct(p)
    assert d.details["solver_objective"] == pytest.approx(1.05 * honest.details["solver_objective"])
    assert d.lower_bound == pytest.approx(honest.lower_bound, rel=1e-12) and d.status == "optimal"

    def off_duals(*args, **kwargs):  # duals that certify less than HiGHS claims
        status, x, duals, obj, h = solve_lp(*args, **kwargs)
        return status, x, 0.9 * duals, obj, h

    monkeypatch.setattr(direct_module, "highs_solve_lp", off_duals)  # fault injection: duals off
    d = solve_direct(p)
    assert d.lower_bound < 0.95 * honest.lower_bound and d.status == "numerical_trouble"
    assert d.rel_gap > 0.05 and d.objective == pytest.approx(honest.objective)


def test_essential_edges_prune_only_implied_constraints() -> None:
    g = load_dataset("grid", rows=4, cols=4)
    gr = build_graph(g.distance, 2.0)
    keep = essential_edges(np.asarray(g.distance), gr.rows, gr.cols)
    d = g.distance[gr.rows, gr.cols]
    assert np.all(keep[d < 1.5])  # unit and diagonal steps stay
    assert not np.any(keep[np.isclose(d, 2.0)])  # straight 2-steps are implied by two 1-steps
    p_full = build_pmo(g, 1.0, 2.0, prune=False)
    p_pruned = build_pmo(g, 1.0, 2.0)
    assert solve_direct(p_full).objective == pytest.approx(solve_direct(p_pruned).objective, rel=1e-9)


def test_repair_makes_a_slightly_infeasible_solution_exact() -> None:
    p = build_pmo(load_dataset("grid", rows=3, cols=3), 2.0, 1.5)
    Z = solve_direct(p).mechanism.copy()
    rng = np.random.default_rng(0)
    Z += rng.uniform(-1e-8, 1e-8, Z.shape)  # what a solver tolerance may leave
    with pytest.raises(VerificationError):
        verify_mechanism(Z, p.dataset.distance, p.eps, eta=p.eta, tol=1e-12)
    X, info = repair_mechanism(Z, p)
    verify_mechanism(X, p.dataset.distance, p.eps, eta=p.eta, tol=1e-12)
    assert info["max_abs_change"] < 1e-6


def test_repair_of_a_mechanism_off_by_rounding_takes_one_closure_and_no_mix() -> None:
    """Rows off by 1e-14 (what a master's combination of exact columns leaves): one closure, whose
    row sums are then within 5e-14 of 1, so neither a second closure nor the mix runs, and every
    ratio holds to 1e-13. Rows off by 1e-6 take more rounds."""
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 1.0, 2.0)
    X = solve_direct(p).mechanism
    rng = np.random.default_rng(2)
    near = X * (1.0 + 1e-14 * rng.uniform(-1, 1, (p.n, 1)))
    Y, info = repair_mechanism(near, p)
    assert info["mix_lambda"] == 0.0 and info["closure_rounds"] == 1
    assert verify_mechanism(Y, p.dataset.distance, p.eps, eta=p.eta, tol=1e-13).max_mdp_violation <= 1e-13
    far = X * (1.0 + 1e-6 * rng.uniform(-1, 1, (p.n, 1)))
    Y, info = repair_mechanism(far, p)
    assert info["closure_rounds"] > 1
    verify_mechanism(Y, p.dataset.distance, p.eps, eta=p.eta, tol=1e-12)


def test_finalize_returns_verified_parts_unchanged_and_repairs_them_if_they_fail() -> None:
    """``verified_parts``: a private matrix is verified and returned bit for bit, unrepaired; one
    that fails its check (here: rows off by 1e-6) is still repaired and verified, not returned."""
    p = build_pmo(load_dataset("grid", rows=4, cols=4), 1.0, 2.0)
    X = solve_direct(p).mechanism
    Y, report, info = finalize_mechanism(X, p, verified_parts=True)
    assert np.array_equal(Y, X) and info == UNREPAIRED and report.max_mdp_violation <= 1e-9
    far = X * (1.0 + 1e-6 * np.random.default_rng(3).uniform(-1, 1, (p.n, 1)))
    with pytest.raises(VerificationError):
        verify_mechanism(far, p.dataset.distance, p.eps, eta=p.eta)
    Y, report, info = finalize_mechanism(far, p, verified_parts=True)
    assert info["closure_passes"] > 0 and not np.array_equal(Y, far)
    verify_mechanism(Y, p.dataset.distance, p.eps, eta=p.eta)


def _plain_closure(Z: np.ndarray, rows: np.ndarray, cols: np.ndarray, inv_w: np.ndarray) -> np.ndarray:
    """The closure's definition: whole Jacobi sweeps over every pair until nothing changes."""
    ref = Z.copy()
    while True:
        new = ref.copy()
        np.maximum.at(new, cols, ref[rows] * inv_w[:, None])
        if np.array_equal(new, ref):
            return ref
        ref = new


def test_upward_closure_equals_plain_sweeps() -> None:
    """The closure that sweeps only the pairs and outputs that just grew gives exactly what full
    sweeps until nothing changes give, on random matrices far outside the cone."""
    p = build_pmo(load_dataset("grid", rows=5, cols=6), 1.3, 2.5)
    rows, cols = p.graph.rows, p.graph.cols
    inv_w = np.exp(-p.eps * np.asarray(p.dataset.distance)[rows, cols])
    rng = np.random.default_rng(3)
    for _ in range(5):
        Z = rng.uniform(0, 1, (p.n, p.K)) ** 8
        ref = _plain_closure(Z, rows, cols, inv_w)
        got = Z.copy()
        assert upward_closure(got, rows, cols, inv_w) > 1
        assert np.array_equal(got, ref)
        assert float(np.max(got[rows] * inv_w[:, None] - got[cols])) <= 0.0


def test_upward_closure_from_sparse_seeds_in_small_blocks_reaches_the_fixed_point() -> None:
    """A few nonzero entries spread over many passes and blocks: the pairs left out of the next pass
    (their source grew in a block before their target's) must all hold, including pairs that were
    not swept in the pass where their source grew (skipping those stops short of the fixed point)."""
    p = build_pmo(load_dataset("gaussian", n_records=150, seed=4))
    rows, cols = p.graph.rows, p.graph.cols
    inv_w = np.exp(-p.eps * np.asarray(p.dataset.distance)[rows, cols])
    rng = np.random.default_rng(8)
    for chunk in (1, 5 * p.K, 1 << 20):
        for _ in range(3):
            Z = (rng.uniform(0, 1, (p.n, p.K)) > 0.995) * rng.uniform(0, 1, (p.n, p.K))
            ref = _plain_closure(Z, rows, cols, inv_w)
            got = Z.copy()
            assert upward_closure(got, rows, cols, inv_w, chunk=chunk) > 2
            assert float(np.max(got[rows] * inv_w[:, None] - got[cols])) <= 0.0
            assert np.array_equal(got, ref)


def test_upward_closure_in_blocks_equals_whole_sweeps() -> None:
    """Blocks of a few targets, each writing before the next reads, reach the same fixed point bit
    for bit as the plain sweeps (on a dense graph, where one pass is 125 M entries on the text
    dataset and is taken a block at a time)."""
    p = build_pmo(load_dataset("grid", rows=5, cols=5), 0.7, 3.0)
    rows, cols = p.graph.rows, p.graph.cols
    inv_w = np.exp(-p.eps * np.asarray(p.dataset.distance)[rows, cols])
    rng = np.random.default_rng(11)
    Z = rng.uniform(0, 1, (p.n, p.K)) ** 12
    whole = Z.copy()
    upward_closure(whole, rows, cols, inv_w)
    for chunk in (1, 7 * p.K, 100 * p.K):  # 1: one target per block
        got = Z.copy()
        upward_closure(got, rows, cols, inv_w, chunk=chunk)
        assert np.array_equal(got, whole)
    assert float(np.max(whole[rows] * inv_w[:, None] - whole[cols])) <= 0.0


def _essential_edges_by_pair(d: np.ndarray, rows: np.ndarray, cols: np.ndarray, rel_tol: float = 1e-12) -> np.ndarray:
    """The definition, pair by pair."""
    nbrs = {i: set(cols[rows == i].tolist()) for i in range(d.shape[0])}
    keep = np.ones(rows.size, dtype=bool)
    for e, (i, j) in enumerate(zip(rows.tolist(), cols.tolist())):
        common = sorted(nbrs[i] & nbrs[j])
        if common and np.any(d[i, common] + d[common, j] <= d[i, j] * (1 + rel_tol)):
            keep[e] = False
    return keep


@pytest.mark.parametrize("search", ["min-plus", "dense adjacency", "sparse adjacency"])
def test_essential_edges_equal_the_pairwise_definition(search: str) -> None:
    """Each of the three searches (the blocked min-plus product of dense graphs, the per-source
    search with a dense or a sparse adjacency) on every graph, dense or not."""
    how = {"search": "min_plus" if search == "min-plus" else "per_source",
           "block": 7,  # blocks that do not divide n
           "dense_adjacency_max": 0 if search == "sparse adjacency" else 4096}
    rng = np.random.default_rng(5)
    cases = [np.asarray(load_dataset("grid", rows=6, cols=7).distance)]  # collinear: many implied
    for n, dim in ((60, 2), (40, 3)):
        x = rng.normal(size=(n, dim))
        x[: n // 3] = np.round(x[: n // 3] * 2) / 2  # some on a lattice, so some pairs are implied
        x = np.unique(x, axis=0)
        cases.append(np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)))
    implied = kept = 0
    for d in cases:
        for eta in (1.0, 2.5, np.inf):
            g = build_graph(d, eta)
            want = _essential_edges_by_pair(d, g.rows, g.cols)
            got = essential_edges(d, g.rows, g.cols, **how)
            assert np.array_equal(got, want)
            implied, kept = implied + int((~want).sum()), kept + int(want.sum())
    assert implied > 100 and kept > 100  # both answers occur


def test_repair_mixes_in_proportion_to_each_outputs_need() -> None:
    """Ratios broken in one output only: the mix puts its mass there, needing far less than a
    uniform mix over all outputs; the result verifies, and a quarter of the mix does not."""
    p = build_pmo(load_dataset("grid", rows=4, cols=4), 1.0, 1.5)
    rows, cols = p.graph.rows, p.graph.cols
    d = np.asarray(p.dataset.distance)[rows, cols]
    Y = np.full((p.n, p.K), 1.0)
    Y[0, 0] = 5.0  # record 0's output 0 far above its neighbours'
    Y /= Y.sum(axis=1)[:, None]
    with pytest.raises(VerificationError):
        verify_mechanism(Y, p.dataset.distance, p.eps, eta=p.eta)
    X, lam = mix_into_cone(Y, rows, cols, d, p.eps)
    report = verify_mechanism(X, p.dataset.distance, p.eps, eta=p.eta)
    assert report.max_row_sum_error <= 1e-12
    # a uniform mix needs V = 2 K max v (here all the need is in output 0)
    a = Y[rows, 0] - np.exp(p.eps * d) * Y[cols, 0]
    V_uniform = 2.0 * p.K * float(np.max(a / (np.exp(p.eps * d) - 1.0)))
    assert 0.0 < lam < 0.5 * V_uniform / (1.0 + V_uniform)
    assert X[5:, 0].min() > X[5:, 1:].max()  # the mass went to output 0
    # negative control: the same u with a quarter of lam leaves a violation
    u = (X[1] - (1.0 - lam) * Y[1]) / lam
    weak = (1.0 - lam / 4) * Y + (lam / 4) * u[None, :]
    with pytest.raises(VerificationError):
        verify_mechanism(weak, p.dataset.distance, p.eps, eta=p.eta)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"eps": 0.0}, "eps"), ({"eps": -1.0}, "eps"), ({"eta": 0.0}, "eta"), ({"n_outputs": 0}, "K"),
     ({"n_outputs": 99}, "exceeds"), ({"loss": "nope"}, "loss")],
)
def test_bad_pmo_parameters(kwargs: dict, match: str) -> None:
    g = load_dataset("grid", rows=3, cols=3)
    args = {"eps": 1.0, "eta": 1.5, **kwargs}
    with pytest.raises(InputError, match=match):
        build_pmo(g, args.pop("eps"), args.pop("eta"), **args)


def test_direct_refuses_an_lp_that_cannot_fit_in_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Gaussian 2,000's whole PMO (178 M nonzeros) was killed by the kernel at 24 GB: refused before
    anything is built, with a clear error naming the way out (the CLI names its flags); a fitting LP
    still runs."""
    p = build_pmo(load_dataset("grid", rows=3, cols=3), 1.0, 1.5)
    nnz = 2 * p.lp_edges[0].size * p.K + p.n * p.K
    monkeypatch.setattr(direct_module, "available_memory", lambda: DIRECT_BYTES_PER_NONZERO * nnz - 1)  # environment probe
    with pytest.raises(ResourceError, match=r"direct: the whole PMO LP has [\d,]+ rows and [\d,]+ nonzeros.*"
                                             r"the column decomposition needs far less") as caught:
        solve_direct(p)
    assert caught.value.parameter == "method" and "--" not in str(caught.value)
    out = tmp_path / "r.json"
    code = main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "1", "--eta", "1.5",
                 "--method", "direct", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == ExitCode.RESOURCE and not out.exists() and "Traceback" not in err and re.search(r"(GiB|MiB|KiB|bytes) available", err)
    assert "--method bd --decomposition columns" in err
    monkeypatch.setattr(direct_module, "available_memory", lambda: DIRECT_BYTES_PER_NONZERO * nnz)
    assert solve_direct(p).status == "optimal"


def test_direct_holds_its_time_limit_with_a_verified_mechanism_and_valid_bounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`securelp mdp --method direct` holds --time-limit: at the limit HiGHS's last iterate (repaired)
    or the best constant mechanism is returned, verified, with the trivial or weak-duality bound:
    status time_limit, exit code 8."""
    # the 6x6 grid's direct LP takes HiGHS about 40 times the limit, the CLI's 8x8 one below about 400 times
    p = build_pmo(load_dataset("grid", rows=6, cols=6), 1.0, 2.0)
    opt = solve_direct(p).objective
    r = solve_direct(p, time_limit=0.01)
    assert r.status == "time_limit"
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert r.objective == pytest.approx(p.objective_of(r.mechanism), rel=1e-12)
    assert r.lower_bound <= opt * (1 + 1e-9) <= r.upper_bound * (1 + 1e-9)
    assert r.lower_bound >= p.cost.min(axis=1).sum() * (1 - 1e-12)
    with pytest.raises(InputError, match="time limit"):
        solve_direct(p, time_limit=0.0)
    out = tmp_path / "r.json"
    code = main(["mdp", "--dataset", "grid", "--rows", "8", "--cols", "8", "--eps", "1", "--eta", "2",
                 "--method", "direct", "--time-limit", "0.01", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == ExitCode.SOLVER and "at the time limit" in err and "Traceback" not in err
    assert json.loads(out.read_text())["status"] == "time_limit"


def test_expmech_refuses_an_eps_whose_far_outputs_underflow() -> None:
    """At eps * d / 2 > 650 within a row the far outputs' exp(-eps d / 2) rounds to 0 beside a
    neighbour's positive entry, a matrix the verifier would reject: refused up front, saying why;
    600 still verifies."""
    ds = load_dataset("grid", rows=3, cols=3)
    diameter = float(np.max(ds.distance))
    ok = build_pmo(ds, 2 * 600.0 / diameter, 1.0)
    verify_mechanism(solve_expmech(ok).mechanism, ds.distance, ok.eps, eta=ok.eta)
    with pytest.raises(VerificationError, match="underflows on this dataset"):
        solve_expmech(build_pmo(ds, 2 * 700.0 / diameter, 1.0))


@pytest.fixture(scope="module")
def half_on_cheapest(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, np.ndarray]:
    """40 random points in 2-D at eps 10 (close pairs, ratios up to e^20) and the optimal mechanism
    with every other record moved to its cheapest output: what Qiu's record BD repairs when it
    puts a master's point together with the blocks' records on their cheapest outputs (Rome).
    Solved once for the module's tests; the mechanism is read-only, so no test changes it for another."""
    f = tmp_path_factory.mktemp("half_on_cheapest") / "pts.csv"
    np.savetxt(f, np.random.default_rng(0).uniform(0, 5, (40, 2)), delimiter=",", header="x,y", comments="")
    p = build_pmo(load_dataset("points", path=str(f), metric="euclidean"), 10.0, 2.0)
    Z = solve_direct(p).mechanism.copy()
    half = np.arange(p.n) % 2 == 0
    Z[half] = 0.0
    Z[half, np.argmin(p.cost[half], axis=1)] = 1.0
    Z.setflags(write=False)
    return p, Z


def test_repair_runs_its_closure_rounds_until_the_rows_settle(half_on_cheapest: tuple[object, np.ndarray]) -> None:
    """Rows that settle only after more than 8 closure rounds: the repair ends with no mix, at a lower
    loss than 8 rounds and their mix."""
    p, Z = half_on_cheapest
    X, info = repair_mechanism(Z, p)
    assert info["closure_rounds"] > 8 and info["mix_lambda"] == 0.0
    X8, info8 = repair_mechanism(Z, p, max_rounds=8)
    assert info8["closure_rounds"] == 8 and info8["mix_lambda"] > 0.0
    for W in (X, X8):
        verify_mechanism(W, p.dataset.distance, p.eps, eta=p.eta)
    assert p.objective_of(X) < p.objective_of(X8)


def test_repair_mixes_with_the_exponential_mechanism_where_it_costs_less(half_on_cheapest: tuple[object, np.ndarray]) -> None:
    """After one closure round, the mix with the exponential mechanism absorbs every broken ratio at
    a tenth of the loss of the per-output uniform mix (both verified); a quarter of its lam leaves a
    violation."""
    p, Z = half_on_cheapest
    rows, cols = p.graph.rows, p.graph.cols
    d = np.asarray(p.dataset.distance)[rows, cols]
    Y = Z.copy()
    upward_closure(Y, rows, cols, np.exp(-p.eps * d))
    Y /= Y.sum(axis=1)[:, None]
    reference = repair_reference(p, p.K)
    assert reference is not None
    by_ref, lam = mix_into_cone(Y, rows, cols, d, p.eps, reference)
    by_u, _ = mix_into_cone(Y, rows, cols, d, p.eps)
    for W in (by_ref, by_u):
        verify_mechanism(W, p.dataset.distance, p.eps, eta=p.eta)
    assert 0.0 < lam < 1.0 and p.objective_of(by_ref) < 0.1 * p.objective_of(by_u)
    weak = (1.0 - lam / 4) * Y + (lam / 4) * reference[0]
    with pytest.raises(VerificationError):
        verify_mechanism(weak, p.dataset.distance, p.eps, eta=p.eta)
    # none for a problem without its distances to the outputs, for another number of outputs, or
    # where exp(-eps d / 2) would underflow within a row
    assert repair_reference(types.SimpleNamespace(graph=p.graph, dataset=p.dataset, eps=p.eps), p.K) is None
    assert repair_reference(p, p.K + 1) is None
    assert repair_reference(dataclasses.replace(p, eps=1000.0), p.K) is None


def test_repair_past_its_deadline_mixes_after_one_round() -> None:
    """Past a deadline the repair starts no further closure round and the mix finishes it: as
    private (verified), the loss a little higher (the 50x50 grid's first master rows would otherwise
    take eight rounds, past a 60 s limit)."""
    p = build_pmo(load_dataset("grid", rows=6, cols=6), 1.0, 1.5)
    Z = solve_direct(p).mechanism
    Zp = Z * (1 + 1e-6 * np.random.default_rng(0).standard_normal(Z.shape))
    full, info_full = repair_mechanism(Zp, p)
    cut, info_cut = repair_mechanism(Zp, p, deadline=0.0)
    assert info_full["closure_rounds"] > 1 and info_cut["closure_rounds"] == 1 and info_cut["mix_lambda"] > 0
    for X in (full, cut):
        verify_mechanism(X, p.dataset.distance, p.eps, eta=p.eta)
    assert p.objective_of(full) <= p.objective_of(cut) <= p.objective_of(full) * (1 + 1e-5)

