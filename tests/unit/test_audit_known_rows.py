"""Known rows: rows mode's bound rows give the block exactly (Bednarz et al.), rows of A assumed
known do so when they fix the mask, and singleton rows pin monomial columns; with too little
known, the attacks say what they fixed and claim nothing."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from securelp.coordinator.audit import singleton_rows
from securelp.coordinator.audit.truth import Truth
from securelp.coordinator.examples import random_solvable_lp
from securelp.solvers.lp import LinearProgram
from tests.audit_fixtures import NETLIB_NAMES, audit, netlib, run_session


@pytest.mark.parametrize("name", NETLIB_NAMES)
def test_rows_mode_reveals_every_bounded_block_exactly(name: str) -> None:
    lp = netlib(name)
    _, transcript, blocks = run_session(lp, mode="rows")  # fresh masks: the bound rows give the block for any
    a = audit(transcript, blocks)
    for pa in a.parties.values():
        kmr = pa.outcome("known_mask_rows")
        assert kmr.claimed == pa.view.n_cols == kmr.truth["claimed_right"] == kmr.truth["positions_right"]
        assert kmr.truth["rel_error_max"] < 1e-9
        assert pa.summary["recovered_exact"] == pa.view.n_cols and pa.truth["claims_hold"]


def test_rows_mode_with_free_columns_claims_nothing_from_the_mask_rows() -> None:
    """Bounded and free columns mixed: the bound rows come without positions and the free columns'
    mask stays hidden; the attack reports what it learned and claims no column."""
    lp, _ = random_solvable_lp(60, 20, np.random.default_rng(31))
    lo = np.where(np.arange(20) % 2 == 0, 0.0, -np.inf)
    lp = LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper, col_lower=lo - 100,
                       col_upper=lp.col_upper)
    _, transcript, blocks = run_session(lp, parties=2, mode="rows")
    a = audit(transcript, blocks)
    for pa in a.parties.values():
        kmr = pa.outcome("known_mask_rows")
        assert kmr.ran and kmr.claimed == 0 and "positions" in kmr.reason
        assert kmr.figures["mask_rows"] == pa.view.n_bounded == 5
        assert pa.truth["recovered_exact"] == 0


def _with_unit_rows(lp: LinearProgram, cols: np.ndarray) -> LinearProgram:
    """``lp`` with one extra row x_c <= 100 per column in ``cols`` (a bound written as a constraint)."""
    extra = sp.csc_matrix((np.ones(cols.size), (np.arange(cols.size), cols)), shape=(cols.size, lp.n_cols))
    return LinearProgram(c=lp.c, A=sp.vstack([lp.A, extra], format="csc"),
                         row_lower=np.concatenate([lp.row_lower, np.full(cols.size, -np.inf)]),
                         row_upper=np.concatenate([lp.row_upper, np.full(cols.size, 100.0)]),
                         col_lower=lp.col_lower, col_upper=lp.col_upper)


def test_known_rows_fix_the_mask_when_there_are_enough() -> None:
    """Free Gaussian columns in rows mode: with a known row per column (the unit rows of bounds
    written as constraints) the mask and the block follow exactly; with one row too few, the attack
    says how many mask rows it fixed and claims nothing."""
    base, _ = random_solvable_lp(50, 12, np.random.default_rng(41))
    for known_cols, expect_all in ((np.arange(12), True), (np.arange(11), False)):
        lp = _with_unit_rows(base, known_cols)
        _, transcript, blocks = run_session(lp, parties=1, mode="rows")
        truth = Truth.of(blocks)
        assert singleton_rows(truth, ["party1"]).size == known_cols.size
        a = audit(transcript, blocks, known="singletons")
        kr = a.parties["party1"].outcome("known_rows")
        assert kr.ran and kr.figures["known_rows"] == known_cols.size
        if expect_all:
            assert kr.claimed == 12 and kr.truth["claimed_right"] == 12 and kr.truth["positions_right"] == 12
            assert a.parties["party1"].assumed_truth["recovered_exact"] == 12
        else:
            assert kr.claimed == 0 and kr.figures["mask_rows_determined"] == 11
            assert "11 of 12" in kr.reason
        # the transcript-only summary does not count what rests on the assumption
        assert a.parties["party1"].summary["recovered_exact"] == 0


def test_singleton_rows_pin_monomial_columns() -> None:
    """Gaussian bounded columns (no round numbers to normalize): a known unit row pins its column's
    scale and original position; the others stay unrecovered."""
    base, _ = random_solvable_lp(30, 16, np.random.default_rng(51))
    lp = LinearProgram(c=base.c, A=base.A, row_lower=base.row_lower, row_upper=base.row_upper,
                       col_lower=np.full(16, -50.0), col_upper=base.col_upper)
    lp = _with_unit_rows(lp, np.array([1, 4, 9]))
    _, transcript, blocks = run_session(lp, parties=1, reveal=False)
    a = audit(transcript, blocks, known="singletons")
    pa = a.parties["party1"]
    pinned = pa.outcome("known_rows_monomial")
    assert pinned.claimed == 3 and pinned.truth["claimed_right"] == 3 and pinned.truth["positions_right"] == 3
    assert pa.assumed_truth["recovered_exact"] == 3
    assert pa.truth["recovered_exact"] == 0  # without the assumption nothing
