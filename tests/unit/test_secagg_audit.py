"""The audit of secure-aggregation transcripts: the shares are summed into one product attributed to
every aggregating party; per-party attribution of the column space and the row support goes, the
joint column space does not; what the revealed solution or the mask rows place among a party's
columns is attributed back to it; colluders who subtract their own products leave one party's
product in the clear."""

from __future__ import annotations

import numpy as np

from securelp.coordinator.audit import AttackStatus
from securelp.coordinator.audit.view import aggregated_products, party_views, plain_products
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.simulation import owners_consent, simulate
from securelp.coordinator.transcript import run_recorded
from securelp.coordinator.transport import InProcessLink
from securelp.party import aggregation as agg
from securelp.party.session import PartySession
from securelp.solvers.lp.partition import split_columns
from tests.audit_fixtures import audit, netlib, sparse_lp


def _lp():
    """Two parties whose sparse integer columns touch disjoint row sets: alone, the row support and the
    column space of each product are the party's own."""
    lp = sparse_lp(np.random.default_rng(71), 80, 24, 3)
    A = lp.A.toarray()
    A[40:, :12] = 0.0  # party1's columns in rows 0..39 only
    A[:40, 12:] = 0.0  # party2's in rows 40..79
    A[np.arange(40), np.arange(40) % 12] += 1.0  # no empty row
    A[40 + np.arange(40), 12 + np.arange(40) % 12] += 1.0
    from securelp.solvers.lp import LinearProgram

    x0 = np.random.default_rng(72).uniform(-5, 5, 24)
    b = A @ x0 - 1.0
    y = np.ones(80)
    return LinearProgram(c=A.T @ y, A=A, row_lower=b, row_upper=np.full(80, np.inf), col_lower=lp.col_lower,
                         col_upper=lp.col_upper, name="disjoint")


def _session(lp, secure, reveal, seed):  # type: ignore[no-untyped-def]
    """A recorded two-party session; ``seed`` None: fresh masks (its audit skips the seed attack's
    guesses)."""
    public, blocks = split_columns(lp, [12, 12])
    config = SessionConfig(secure_aggregation=secure, reveal=reveal)
    sessions = [PartySession(b, seed=None if seed is None else f"{seed}/{b.party_id}", policy=owners_consent(config),
                             record_contribution=True)
                for b in blocks]
    outcome, transcript = run_recorded(public, [InProcessLink(s) for s in sessions], config, central=lp)
    return outcome, transcript, blocks, sessions


def test_the_shares_are_summed_into_one_product_of_every_aggregating_party():
    outcome, transcript, _, sessions = _session(_lp(), True, False, "sum")
    views = party_views(transcript)
    assert plain_products(views) == [] and all(v.aggregated and v.n_dense == 12 for v in views)
    (product,) = aggregated_products(views)
    assert product.parties == ("party1", "party2") and product.n_cols == 24
    truth = sum(s.contribution[0] for s in sessions)
    assert np.abs(product.M - truth).max() <= outcome.aggregation.encoding_error_a + 1e-12 * np.abs(truth).max()
    # the negative control: one party's share read as a product is nothing like its product
    alone = agg.decode(views[0].share_a, views[0].fraction_bits[0])
    assert np.linalg.norm(alone - sessions[0].contribution[0]) > 10 * np.linalg.norm(sessions[0].contribution[0])


def test_per_party_row_support_and_column_space_go_the_joint_ones_stay():
    lp = _lp()
    _, plain_t, blocks, _ = _session(lp, False, False, None)
    plain = audit(plain_t, blocks)
    for pid, rows in (("party1", 40), ("party2", 40)):  # alone: each party's own rows and own subspace
        pa = plain.parties[pid]
        assert pa.outcome("dense_row_support").figures["support_rows"] == rows
        assert pa.outcome("dense_row_support").truth["fraction_right"] == 1.0
        assert pa.outcome("dense_column_space").figures["rank"] == 12
        assert pa.outcome("dense_column_space").truth["max_principal_angle_sine"] < 1e-8
    _, secure_t, blocks, _ = _session(lp, True, False, None)
    secure = audit(secure_t, blocks)
    for pa in secure.parties.values():
        cs = pa.outcome("dense_column_space")
        assert cs.status is AttackStatus.NOT_APPLICABLE and "only inside the sum party1+party2" in cs.reason
        assert pa.outcome("dense_row_support") is None and pa.summary["dense_up_to_scale"] == 0
    shared = {o.attack: o for o in secure.shared}
    assert all(o.parties == ("party1", "party2") for o in secure.shared)
    assert shared["dense_row_support"].figures["support_rows"] == 80  # the union, not either party's rows
    assert shared["dense_column_space"].figures["rank"] == 24  # the joint column space, exactly
    assert shared["dense_column_space"].truth["max_principal_angle_sine"] < 1e-8
    assert secure.claims_hold


def test_the_revealed_solution_attributes_columns_found_in_the_sum():
    """x_j travels per party: columns recovered from the sum and matched to x_j are placed among the
    party's own columns (so secure aggregation does not hide them once x_j is revealed) -- as best
    guesses, right for all 12 here, not as confirmed claims; without x_j none is attributed."""
    lp = _lp()
    _, t_rev, blocks, _ = _session(lp, True, True, "x")
    a = audit(t_rev, blocks)
    for pa in a.parties.values():
        assert pa.summary["best_guess"] == 12 and pa.summary["positions_guessed"] == 12
        assert pa.truth["recovered_exact"] == 12 and pa.truth["unclaimed_right"] == 12 and pa.truth["claims_hold"]
        assert any("told apart from the others' and placed" in s for s in _can(pa, a))
    _, t_kept, blocks, _ = _session(lp, True, False, "x")
    a = audit(t_kept, blocks)
    for pa in a.parties.values():
        assert pa.summary["recovered_exact"] == 0 and pa.summary["best_guess"] == 0
        assert pa.truth["recovered_exact"] == 0 and pa.truth["claims_hold"]


def _can(pa, a):  # type: ignore[no-untyped-def]
    from securelp.coordinator.audit.statements import describe

    return describe(pa, a)[0]


def test_rows_mode_bound_rows_give_every_block_from_the_sum():
    """afiro in rows mode: every mask row is known, the sum is solved for all columns and each party's
    are attributed through its bound rows (the statement says secure aggregation hides nothing there)."""
    lp = netlib("afiro")
    public, blocks = split_columns(lp, [14, 14, 4])
    config = SessionConfig(secure_aggregation=True, bounds_mode="rows")
    _, a = simulate(public, blocks, config, central=lp, policy=owners_consent(config))
    for pa in a.parties.values():
        assert pa.summary["recovered_exact"] == pa.view.n_cols == pa.truth["recovered_exact"]
        assert pa.truth["positions_right"] == pa.view.n_cols


def test_collusion_subtracts_the_colluders_products_from_the_sum():
    """Simulated parties bring their own products to the collusion attacks: with t = p - 1 the residual
    is the honest party's product (attacked alone); without them the reduction is reported impossible."""
    lp = _lp()
    _, transcript, _, sessions = _session(lp, True, False, "col")
    from securelp.coordinator.audit import audit_transcript
    from securelp.coordinator.audit.view import own_product

    own = {s.party_id: own_product(s.party_id, *s.contribution) for s in sessions}
    with_own = audit_transcript(transcript, own_products=own, seed=0)
    (c,) = with_own.collusion
    assert c.residual_products == 1 and not c.skipped
    without = audit_transcript(transcript, seed=0)
    (c,) = without.collusion
    assert c.residual_products == 0 and "not known" in c.skipped[0]
    # the residual the coalition {party1} attacks is party2's product, to the encoding's error
    (product,) = aggregated_products(party_views(transcript))
    residual = product.M - own["party1"].M
    assert np.abs(residual - sessions[1].contribution[0]).max() <= 1e-9 * np.abs(residual).max()


def test_a_simulation_brings_the_parties_own_products_to_the_collusion_attacks():
    lp = _lp()
    public, blocks = split_columns(lp, [12, 12])
    _, a = simulate(public, blocks, SessionConfig(secure_aggregation=True), central=lp)
    (c,) = a.collusion
    assert c.residual_products == 1 and not c.skipped
    assert any("colluding: your own dense product exactly" in s and "not measured" not in s for s in _can(
        a.parties["party2"], a))
