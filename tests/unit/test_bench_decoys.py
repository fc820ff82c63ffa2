"""The decoy benchmark (benchmarks/bench_decoys.py): its decoys leave the optimum alone and are dropped on
decode, its optimum check fails when a decoy does enter, and its distinguishers separate a planted easy
case and not a case with nothing to separate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from benchmarks import bench_decoys as bd
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.transcript import run_recorded
from securelp.coordinator.transport import InProcessLink
from securelp.party.session import PartySession
from securelp.solvers.lp import LinearProgram, read_mps
from securelp.solvers.lp.highs import HighsBackend
from securelp.solvers.lp.partition import ColumnBlock, split_columns

AFIRO = Path(__file__).resolve().parents[1] / "data" / "netlib" / "afiro.mps"


def _objective(lp: LinearProgram) -> float:
    r = HighsBackend().solve(lp)
    return float(r.objective) if r.is_optimal else float("nan")


def test_dominated_decoys_leave_the_optimum_and_are_dropped_on_decode() -> None:
    lp = read_mps(AFIRO)
    aug, decoys = bd.lp_with_decoys(lp, 3, 1.0, "dominated", seed=5)
    assert aug.n_cols == lp.n_cols + sum(d.decoy.size for d in decoys) and all(d.decoy.size for d in decoys)
    base = _objective(lp)
    assert abs(_objective(aug) - base) <= bd.OBJECTIVE_TOL * max(1.0, abs(base))
    public, blocks = split_columns(aug, [d.block.n_cols for d in decoys], ids=[d.block.party_id for d in decoys])
    sessions = [PartySession(b) for b in blocks]
    outcome, _ = run_recorded(public, [InProcessLink(s) for s in sessions], SessionConfig())
    assert abs(outcome.objective - base) <= 1e-9 * max(1.0, abs(base))
    _, real_blocks = split_columns(lp, [d.real.size for d in decoys])
    for s, d, real in zip(sessions, decoys, real_blocks):
        assert s.outcome is not None and s.outcome.x is not None
        assert np.all(np.abs(s.outcome.x[d.decoy]) <= bd.ENTERED_TOL)  # no decoy is used
        mine = bd.drop_decoys(s.outcome.x, d)
        assert mine.size == real.n_cols
        # the real columns are the party's own, in order, and its solution reproduces its share of the optimum
        assert np.array_equal(d.block.A[:, d.real].toarray(), real.A.toarray())
        assert np.allclose(real.c @ mine, d.block.c @ s.outcome.x)


def test_the_optimum_check_fails_when_a_decoy_is_cheap() -> None:
    """Negative control: a resampled decoy with a large negative cost margin enters or unbounds the LP,
    and the benchmark's check says the optimum changed."""
    lp = read_mps(AFIRO)
    aug, _ = bd.lp_with_decoys(lp, 3, 1.0, "resampled", seed=5, margin=-5.0)
    base = _objective(lp)
    changed = _objective(aug)
    assert not np.isfinite(changed) or abs(changed - base) > bd.OBJECTIVE_TOL * max(1.0, abs(base))


def test_run_case_measures_a_dominated_run_on_afiro() -> None:
    fig = bd.run_case(bd.Case(AFIRO, "dominated", 1.0, reveal=True), budget=20.0)
    assert fig["status"] == "optimal" and fig["optimum_unchanged"] and fig["decoys_entered"] == 0
    assert fig["decoys"] > 0 and fig["monomial_columns"] == fig["real_columns"] + fig["decoys"]
    # the real columns are still sent: the audit finds every one up to scale
    assert fig["real_up_to_scale"] == fig["real_columns"] == 32
    dom = fig["distinguishers"]["dominance"]
    assert dom["tp"] + dom["fn"] == 32 and dom["auc"] > 0.8  # dominated decoys are found as such
    sol = fig["distinguishers"]["solution"]
    assert sol["fp"] == 0  # a decoy is never positive in the solution


def test_dominance_finds_a_costlier_sum_and_not_a_cheaper_one() -> None:
    A = sp.csc_matrix(np.array([[1.0, 0.0, 2.0, 1.0], [0.0, -1.0, -3.0, 0.0], [0.0, 0.0, 0.0, 4.0]]))
    lower, upper = np.zeros(4), np.full(4, np.inf)
    # column 2 = 2 a_0 + 3 a_1; at cost 2 * 1 + 3 * 1 + 0.5 it is dominated, at 4.5 it is not
    assert bd.dominated_columns(A, np.array([1.0, 1.0, 5.5, 1.0]), lower, upper).tolist() == [False, False, True,
                                                                                              False]
    assert not bd.dominated_columns(A, np.array([1.0, 1.0, 4.5, 1.0]), lower, upper).any()
    # the positive factor of each column does not matter
    D = sp.diags([3.0, 0.5, 7.0, 2.0])
    assert bd.dominated_columns(sp.csc_matrix(A @ D), np.array([1.0, 1.0, 5.5, 1.0]) * D.diagonal(), lower,
                                upper)[2]


def test_the_entries_classifier_separates_a_planted_case_and_not_a_random_labelling() -> None:
    rng = np.random.default_rng(11)
    m, n_real, n_decoy = 40, 60, 60
    cols, costs = [], []
    for t in range(n_real + n_decoy):
        nnz = 2 if t < n_real else 8  # planted: decoys are much denser, with costs far larger
        rows = rng.choice(m, nnz, replace=False)
        cols.append(sp.csc_matrix((rng.uniform(0.5, 2.0, nnz), (rows, np.zeros(nnz, dtype=np.int64))), shape=(m, 1)))
        costs.append(rng.uniform(0.5, 1.0) * (1.0 if t < n_real else 50.0))
    A = sp.hstack(cols, format="csc")
    X = bd.column_features(A, np.array(costs), np.zeros(A.shape[1]), np.full(A.shape[1], np.inf))
    real = np.arange(A.shape[1]) < n_real
    assert bd.auc(bd.cross_validated_scores(X, real), real) > 0.95
    # negative control: the same columns labelled at random carry nothing to learn
    shuffled = rng.permutation(real)
    assert bd.auc(bd.cross_validated_scores(X, shuffled), shuffled) < 0.75


def test_auc_and_otsu() -> None:
    real = np.array([True, True, False, False])
    assert bd.auc(np.array([3.0, 4.0, 1.0, 2.0]), real) == 1.0
    assert bd.auc(np.array([1.0, 2.0, 3.0, 4.0]), real) == 0.0
    assert bd.auc(np.ones(4), real) == 0.5
    assert bd.auc(np.ones(2), np.array([True, True])) is None
    t = bd.otsu_threshold(np.array([0.0, 0.1, 0.2, 5.0, 5.1]))
    assert 0.2 < t < 5.0


def test_add_decoys_refuses_an_unknown_variant_and_skips_a_block_without_templates() -> None:
    blk = ColumnBlock("p", sp.csc_matrix(np.eye(2)), np.ones(2), np.full(2, -np.inf), np.full(2, np.inf))
    with pytest.raises(ValueError, match="not one of"):
        bd.add_decoys(blk, 2, "copies", np.random.default_rng(0))
    out = bd.add_decoys(blk, 2, "resampled", np.random.default_rng(0))  # free columns: no template with x >= 0
    assert out.decoy.size == 0 and out.block is blk
