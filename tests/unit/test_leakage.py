"""The leakage auditor: the attacks the statement calls possible succeed, the one it
calls impossible fails, and the check itself can fail (negative controls)."""

from __future__ import annotations

import numpy as np
import pytest

from securelp.coordinator.leakage import audit_entry, check_against_truth, leakage_statement
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.simulation import simulate
from securelp.solvers.lp import LinearProgram
from securelp.solvers.lp.partition import ColumnBlock, split_columns
from tests.lp_fixtures import random_feasible_lp


def _lp(free_fraction: float, seed: int = 0) -> LinearProgram:
    return random_feasible_lp(np.random.default_rng(seed), 12, 9, free_fraction=free_fraction)


def _session(lp, mode):
    public, blocks = split_columns(lp, [5, 4])
    outcome, audits = simulate(public, blocks, SessionConfig(bounds_mode=mode))
    return outcome, audits, blocks


def test_rows_mode_reveals_the_block_exactly():
    lp = _lp(free_fraction=0.0)  # every column bounded
    outcome, audits, blocks = _session(lp, "rows")
    for entry, block in zip(outcome.transcript, blocks):
        audit = audit_entry(entry)
        assert audit.exact_block is not None
        np.testing.assert_allclose(audit.exact_block, block.A.toarray(), atol=1e-8)
        np.testing.assert_allclose(audit.exact_cost, block.c, atol=1e-8)
        assert audits[block.party_id]["exact_recovery_succeeded"]
        assert audits[block.party_id]["statement_confirmed"]
    stmt = leakage_statement("rows", outcome.parties[0])
    assert any("exactly" in s for s in stmt["coordinator_can_reconstruct"])


def test_monomial_mode_reveals_columns_up_to_scaling_only():
    lp = _lp(free_fraction=0.0)
    outcome, audits, blocks = _session(lp, "monomial")
    for entry, block in zip(outcome.transcript, blocks):
        a = audits[block.party_id]
        assert a["monomial_up_to_scaling_succeeded"] and a["statement_confirmed"]
        # but not the block itself: the scaled block differs from A in scale
        scaled = entry.scaled_a.toarray()
        assert not np.allclose(np.sort(np.abs(scaled), axis=None), np.sort(np.abs(block.A.toarray()), axis=None))
        assert audit_entry(entry).exact_block is None


def test_dense_mask_unmasking_fails():
    lp = _lp(free_fraction=1.0)
    _outcome, audits, blocks = _session(lp, "monomial")
    for block in blocks:
        a = audits[block.party_id]
        assert a["dense_unmasking_rel_error"] > 0.3
        assert not a["dense_unmasking_succeeded"]
        assert a["statement_confirmed"]


def test_negative_control_wrong_truth_is_caught():
    """The check must fail when the transcript does not come from the claimed block."""
    lp = _lp(free_fraction=0.0)
    outcome, _, blocks = _session(lp, "rows")
    entry = outcome.transcript[0]
    impostor = ColumnBlock(blocks[0].party_id, blocks[0].A * 1.01, blocks[0].c, blocks[0].col_lower,
                           blocks[0].col_upper)
    result = check_against_truth(audit_entry(entry), impostor, "rows")
    assert not result["exact_recovery_succeeded"] and not result["statement_confirmed"]
    # monomial: a permuted-sign truth must not match
    outcome_m, _, blocks_m = _session(lp, "monomial")
    flipped = ColumnBlock(blocks_m[0].party_id, -blocks_m[0].A, blocks_m[0].c, blocks_m[0].col_lower,
                          blocks_m[0].col_upper)
    result_m = check_against_truth(audit_entry(outcome_m.transcript[0]), flipped, "monomial")
    assert not result_m["monomial_up_to_scaling_succeeded"] and not result_m["statement_confirmed"]


def test_negative_control_a_leaky_dense_mask_is_caught():
    """If a party's 'mask' were the identity, the unmasking attack would succeed and the
    auditor must report the statement as broken."""
    lp = _lp(free_fraction=1.0)
    outcome, _, blocks = _session(lp, "monomial")
    entry = outcome.transcript[0]
    A = blocks[0].A.toarray()
    k = entry.masked_a.shape[1]

    class IdentityRng:
        def standard_normal(self, shape):
            return np.eye(*shape)

    leaky = type(entry)(**{**entry.__dict__, "masked_a": A @ np.eye(k, A.shape[1]).T})
    result = check_against_truth(audit_entry(leaky, rng=IdentityRng()), blocks[0], "monomial")
    assert result["dense_unmasking_succeeded"] and not result["statement_confirmed"]


@pytest.mark.parametrize("reveal", [True, False])
def test_statement_mentions_solution_disclosure(reveal):
    lp = _lp(free_fraction=0.5)
    public, blocks = split_columns(lp, [5, 4])
    outcome, _ = simulate(public, blocks, SessionConfig(reveal=reveal))
    stmt = leakage_statement("monomial", outcome.parties[0])
    text = " ".join(stmt["coordinator_can_reconstruct" if reveal else "coordinator_cannot_reconstruct"])
    assert "x_j" in text
