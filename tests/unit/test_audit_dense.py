"""Attacks on dense masked products: they succeed where they should (a party that sends M = A_j, a
scaling-only mask, sparse blocks) and fail where they should (generic dense blocks under dense
Gaussian masks, k >= n); the subspace, row-support and Gram figures are checked against the
truth, with controls that show each check can fail."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from securelp.coordinator.audit import Truth, evaluate
from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.dense import attack_dense
from securelp.coordinator.audit.truth import TruthColumns, score_columns
from securelp.coordinator.audit.view import MaskedProduct, party_views, plain_products
from securelp.coordinator.examples import random_solvable_lp
from securelp.solvers.lp import LinearProgram
from securelp.solvers.lp.partition import ColumnBlock
from tests.audit_fixtures import audit, netlib, run_session, sparse_lp


def _right(classes: dict) -> int:
    return sum(int(e["right"]) for e in classes.values())


def _dense_integer_lp(rng: np.random.Generator, m: int, n: int):  # type: ignore[no-untyped-def]
    return sparse_lp(rng, m, n, m, values="integer")


@pytest.mark.parametrize("mask", ["identity", "scaling"])
def test_planted_masks_that_do_not_mix_are_flagged_fully_recovered(mask: str) -> None:
    """A party that sends M = A_j (identity mask) or M = A_j D (scaling only), on sparse and on
    dense integer blocks: every column recovered exactly, at its position; the honest party beside
    it on the same dense data loses nothing."""
    for lp in (sparse_lp(np.random.default_rng(7001), 50, 30, 4), _dense_integer_lp(np.random.default_rng(7002), 40, 24)):
        _, transcript, blocks = run_session(lp, split=[12, lp.n_cols - 12], planted={"party1": mask})
        a = audit(transcript, blocks)
        weak = a.parties["party1"]
        structure = weak.outcome("dense_mask_structure")
        # the directions are certain; one factor per column is not (A D looks like A), so the values
        # and positions are best guesses, and the truth says they are right
        assert structure.up_to_scale == 12 and weak.truth["recovered_up_to_scale"] == 12
        assert weak.truth["recovered_exact"] == 12 and weak.truth["claimed_wrong"] == 0
        assert weak.summary["recovered_exact"] + weak.summary["best_guess"] == 12
        assert _right(weak.truth["position_guesses"]) + weak.truth["positions_right"] == 12
        assert weak.truth["claims_hold"]
        honest = a.parties["party2"]
        assert honest.outcome("dense_mask_structure").up_to_scale == 0  # the real mask mixes columns
        if lp.A.nnz == lp.n_rows * lp.n_cols:  # dense: the honest party's columns stay hidden
            assert honest.summary["recovered_exact"] == 0 and honest.truth["recovered_up_to_scale"] == 0


def test_sparse_blocks_are_recovered_through_their_column_space() -> None:
    """The outsider's setting, smaller: sparse integer columns under the real Gaussian mask. The
    sparsest vectors of range(M) are the columns; the masked costs and the revealed x then give
    values and positions."""
    lp = sparse_lp(np.random.default_rng(8001), 150, 60, 4)
    _, transcript, blocks = run_session(lp, split=[30, 20, 10])
    a = audit(transcript, blocks)
    for pa in a.parties.values():
        n = pa.view.n_cols
        assert pa.truth["recovered_up_to_scale"] >= 0.9 * n
        assert pa.truth["recovered_exact"] >= 0.8 * n and pa.truth["claims_hold"]
        assert pa.truth["claimed_right"] + _right(pa.truth["guesses"]) >= 0.8 * n
        assert pa.outcome("dense_column_space").truth["max_principal_angle_sine"] < 1e-8
        assert pa.outcome("dense_row_support").truth["fraction_right"] == 1.0


def test_generic_dense_blocks_under_gaussian_masks_resist() -> None:
    """Gaussian data, dense Gaussian masks, k >= n: no sparse vector in the column space, so neither
    the pivot search nor the l1 programs find a column, nothing is claimed, and the truth agrees."""
    lp, _ = random_solvable_lp(80, 30, np.random.default_rng(9001))
    _, transcript, blocks = run_session(lp, split=[15, 15])
    a = audit(transcript, blocks)
    for pa in a.parties.values():
        assert pa.outcome("dense_mask_structure").up_to_scale == 0
        assert pa.outcome("dense_sparse_recovery").up_to_scale == 0
        l1 = pa.outcome("dense_l1_recovery")
        assert l1.ran and l1.figures["programs"] >= 1 and l1.up_to_scale == 0
        assert pa.outcome("dense_costs").status.value == "not_applicable"
        assert pa.summary["recovered_exact"] == 0
        assert pa.truth["recovered_exact"] == 0 and pa.truth["recovered_up_to_scale"] == 0
        # what is revealed, is revealed exactly: the column space
        assert pa.outcome("dense_column_space").truth["max_principal_angle_sine"] < 1e-8


def test_subspace_and_support_checks_can_fail() -> None:
    """Scored against another party's block, the revealed subspace and row support are wrong: the
    checks are not true by construction."""
    lp = sparse_lp(np.random.default_rng(9101), 60, 20, 3)
    _, transcript, blocks = run_session(lp, split=[10, 10])
    a = audit(transcript, blocks)
    swapped = [ColumnBlock("party1", blocks[1].A, blocks[1].c, blocks[1].col_lower, blocks[1].col_upper),
               ColumnBlock("party2", blocks[0].A, blocks[0].c, blocks[0].col_lower, blocks[0].col_upper)]
    evaluate(a, Truth.of(swapped))
    for pa in a.parties.values():
        assert pa.outcome("dense_column_space").truth["max_principal_angle_sine"] > 0.5
        assert pa.outcome("dense_row_support").truth["fraction_right"] < 1.0
        assert pa.truth["recovered_up_to_scale"] == 0


def test_gram_estimate_improves_with_k_and_fails_against_another_block() -> None:
    lp, _ = random_solvable_lp(40, 20, np.random.default_rng(9201))
    errors = {}
    for k in (30, 400):
        _, transcript, blocks = run_session(lp, parties=1, k=k)
        a = audit(transcript, blocks)
        errors[k] = a.parties["party1"].outcome("dense_row_gram").truth["rel_error"]
    assert errors[400] < errors[30] and errors[400] < 0.5
    other, _ = random_solvable_lp(40, 20, np.random.default_rng(9202))
    evaluate(a, Truth.of([ColumnBlock("party1", other.A, other.c, other.col_lower, other.col_upper)]))
    assert a.parties["party1"].outcome("dense_row_gram").truth["rel_error"] > 0.5


def test_a_product_attributed_to_several_parties_is_attacked_the_same_way() -> None:
    """Secure aggregation reveals only sum_j A_j B_j'; the dense attacks take that sum as one product
    of the parties together and find both parties' sparse columns in it."""
    lp = sparse_lp(np.random.default_rng(9301), 120, 30, 3)
    _, transcript, blocks = run_session(lp, split=[18, 12], reveal=False, k=40, seed="agg")
    p1, p2 = plain_products(party_views(transcript))
    shared = MaskedProduct(parties=("party1", "party2"), M=p1.M + p2.M, Bc=p1.Bc + p2.Bc, n_cols=30,
                           known_mask_rows=np.zeros((0, 40)), known_mask_index=np.zeros(0, dtype=np.int64),
                           known_mask_lower=np.zeros(0), known_mask_upper=np.zeros(0), u=None, x=None, x_values=None)
    outs = {o.attack: o for o in attack_dense(shared, Budget(60), np.random.default_rng(1))}
    assert outs["dense_column_space"].figures["rank"] == 30
    both = TruthColumns(sp.hstack([b.A for b in blocks], format="csc"), np.concatenate([b.c for b in blocks]))
    score = score_columns(outs["dense_l1_recovery"].recovered, both)
    assert score["recovered_up_to_scale"] >= 27


def test_an_exhausted_budget_skips_with_the_reason() -> None:
    lp, _ = random_solvable_lp(60, 20, np.random.default_rng(9401))
    _, transcript, blocks = run_session(lp, parties=1, seed="nobudget")
    a = audit(transcript, blocks, budget_s=1e-9)
    pa = a.parties["party1"]
    skipped = {s["attack"] for s in a.skipped}
    assert "dense_column_space" in skipped
    assert "budget" in pa.outcome("dense_column_space").reason
    assert pa.summary["recovered_exact"] == 0  # nothing claimed for what did not run


def test_sparse_vectors_that_are_not_columns_are_not_claimed() -> None:
    """sc50b with its bounds removed: +-1 staircase columns whose differences are sparser than the
    columns. The search finds such combinations; the identifiability and mask-independence checks
    keep them from being claimed, so every claim that remains is right."""
    lp = netlib("sc50b")
    free = LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper,
                         col_lower=np.full(lp.n_cols, -np.inf), col_upper=np.full(lp.n_cols, np.inf))
    _, transcript, blocks = run_session(free, parties=3)
    a = audit(transcript, blocks)
    found = sum(pa.outcome("dense_sparse_recovery").figures["found"] for pa in a.parties.values())
    right = sum(pa.truth["recovered_up_to_scale"] for pa in a.parties.values())
    assert found > right  # combinations among the candidates
    for pa in a.parties.values():
        assert pa.truth["direction_claimed_wrong"] == 0 and pa.truth["claimed_wrong"] == 0
        assert pa.truth["claims_hold"]


def test_a_single_free_column_is_its_column_space() -> None:
    """One dense-masked column: range(M) is the column itself; with x revealed its value is one of the
    entries of x_j the bounded columns' matching leaves, so the roundest reading is a best guess
    (right here), not a claim."""
    lp = sparse_lp(np.random.default_rng(9501), 30, 6, 4)
    lo = np.concatenate([np.full(5, -100.0), [-np.inf]])
    lp = LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper, col_lower=lo,
                       col_upper=lp.col_upper)
    _, transcript, blocks = run_session(lp, parties=1)
    a = audit(transcript, blocks)
    pa = a.parties["party1"]
    assert pa.view.n_dense == 1 and pa.outcome("dense_sparse_recovery").up_to_scale == 1
    single = pa.outcome("dense_single_column")
    assert single.ran and single.claimed == 0 and "best guess" in single.reason
    assert pa.truth["guesses"]["guess:single_dense_x_round"] == {"guessed": 1, "right": 1}
    assert pa.truth["claims_hold"] and pa.truth["recovered_exact"] == 6
