"""Collusion of the coordinator with t of p parties: with independent masks it adds nothing to the
attacks on the honest parties (measured); on a product shared by several parties (secure
aggregation) the colluders' own contributions come off, and t = p - 1 leaves one honest party's
product in the clear."""

from __future__ import annotations

import numpy as np

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.collusion import attack_collusion
from securelp.coordinator.audit.dense import attack_dense
from securelp.coordinator.audit.view import MaskedProduct, party_views, plain_products
from tests.audit_fixtures import audit, netlib, run_session, sparse_lp


def test_independent_masks_collusion_adds_nothing() -> None:
    lp = sparse_lp(np.random.default_rng(61), 60, 24, 3)
    _, transcript, blocks = run_session(lp, parties=3)
    a = audit(transcript, blocks)
    assert [c.size for c in a.collusion] == [1, 2]
    for c in a.collusion:
        assert c.added == 0 and c.residual_products == 0
        assert set(c.coalition) | set(c.honest) == {"party1", "party2", "party3"}
        assert c.claimed_without == sum(a.parties[h].summary["recovered_exact"] for h in c.honest)
        assert c.truth["honest_columns"] == sum(a.parties[h].view.n_cols for h in c.honest)
    # the worst coalition of size 2 leaves a party whose columns the attacks recover best
    best = max(pa.summary["recovered_exact"] / pa.view.n_cols for pa in a.parties.values())
    worst = a.collusion[1]
    assert worst.claimed_with / worst.honest_columns == best


def _shared(products: list[MaskedProduct]) -> MaskedProduct:
    M = sum(p.M for p in products)
    Bc = sum(p.Bc for p in products)
    k = M.shape[1]
    return MaskedProduct(parties=tuple(p.parties[0] for p in products), M=M, Bc=Bc,
                         n_cols=sum(p.n_cols for p in products), known_mask_rows=np.zeros((0, k)),
                         known_mask_index=np.zeros(0, dtype=np.int64), known_mask_lower=np.zeros(0),
                         known_mask_upper=np.zeros(0), u=None, x=None, x_values=None)


def test_a_shared_product_is_reduced_by_the_colluders_contributions() -> None:
    """A dense Gaussian block (party1, resists alone) and a sparse one (party2) summed into one
    product: the coalition {party1} subtracts its own M_1 and the sparse recovery then runs on
    party2's product alone; without the colluders' own products the reduction is reported as not
    possible."""
    rng = np.random.default_rng(71)
    lp = sparse_lp(rng, 80, 24, 3)
    _, transcript, _ = run_session(lp, split=[12, 12], reveal=False, k=30, seed="shared")
    own = {p.parties[0]: p for p in plain_products(party_views(transcript))}
    shared = _shared(list(own.values()))
    calls: list[tuple[str, ...]] = []

    def residual(pr: MaskedProduct) -> dict[str, int]:
        calls.append(pr.parties)
        outs = {o.attack: o for o in attack_dense(pr, Budget(60), np.random.default_rng(2))}
        return {pr.label: outs["dense_sparse_recovery"].up_to_scale}

    results = attack_collusion(["party1", "party2"], {"party1": 12, "party2": 12}, [shared],
                               {"party1": 0, "party2": 0}, residual, own_products={"party1": own["party1"]})
    assert calls == [("party2",)]  # party1's contribution came off; party2's product is attacked alone
    assert results[0].coalition == ("party1",) and results[0].added >= 10
    alone = attack_collusion(["party1", "party2"], {"party1": 12, "party2": 12}, [shared],
                             {"party1": 0, "party2": 0}, residual, own_products=None)
    assert alone[0].added == 0 and alone[0].skipped and "not known" in alone[0].skipped[0]


def test_one_party_has_no_coalitions() -> None:
    _, transcript, blocks = run_session(netlib("afiro"), parties=1)
    assert audit(transcript, blocks).collusion == []
