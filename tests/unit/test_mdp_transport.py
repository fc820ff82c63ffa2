"""Greedy lossy-transport certificates for the pricing LPs (`solvers.mdp.transport`)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.mdp.colgen import _ComponentCG, smoothed_dual_ascent, undominated_outputs
from solvers.mdp.datasets import load_dataset
from solvers.mdp.pmo import build_pmo
from solvers.mdp.transport import TransportCertifier


def _giant(p) -> _ComponentCG:
    idx = max(p.graph.component_members(), key=lambda g: g.size)
    return _ComponentCG(p, idx, undominated_outputs(p.cost[idx]), 2, 1e-4, 0.0)


def _duals(cg: _ComponentCG, lift: float) -> np.ndarray:
    """Unit-row duals above a dual-feasible point (so some outputs are violated, most are not)."""
    Q, _ = smoothed_dual_ascent(cg.G, cg.A, time.perf_counter() + 600.0, max_iterations=300)
    return Q.min(axis=1) * lift


def test_a_chain_routes_the_flow_along_the_path_at_the_product_of_the_prices() -> None:
    # records 0 - 1 - 2 on a line, a = 2 per hop: one unit delivered to 0 costs 4 units of 2's slack
    src = np.array([0, 1, 1, 2])
    tgt = np.array([1, 0, 2, 1])
    E = src.size
    A = sp.csr_matrix((np.concatenate([np.ones(E), -2.0 * np.ones(E)]),
                       (np.concatenate([np.arange(E), np.arange(E)]), np.concatenate([src, tgt]))), shape=(E, 3))
    tc = TransportCertifier(A)
    y = tc.certify(np.array([1.0, 0.0, -4.01]))
    assert y is not None and np.all(y >= 0)
    assert A.T @ y == pytest.approx([1.0, 0.0, -4.0])  # 1 delivered, 1 passed on, 4 paid
    assert tc.certify(np.array([1.0, 0.0, -3.9])) is None  # not enough slack at that price
    assert tc.certify(np.array([1.0, 0.0, 0.0])) is None  # no slack at all
    y = tc.certify(np.array([-1.0, -1.0, -1.0]))  # nothing to serve: y = 0
    assert y is not None and not y.any()


def test_certificates_are_valid_and_never_claim_a_violated_output() -> None:
    p = build_pmo(load_dataset("gaussian", n_records=120, seed=5), 1.0, 0.8)
    cg = _giant(p)
    try:
        mu = _duals(cg, 1.1)
        tau, tol = cg.tolerances(float(cg.G.min(axis=1).sum()))
        tc = TransportCertifier(cg.A)
        certified = 0
        for j in range(cg.Kc):
            y = tc.certify(mu - cg.G[:, j])
            if y is None:
                continue
            certified += 1
            assert np.all(y >= 0)
            assert np.minimum(0.0, cg.G[:, j] + cg.AT @ y - mu).sum() >= -1e-12  # g_j + A'y >= mu up to rounding
        priced = cg.price(np.arange(cg.Kc), mu, tol)
        violated = {j for j, z in priced if z is not None and float((cg.G[:, j] - mu) @ z) < -tau}
        assert len(violated) >= cg.Kc // 4 and certified >= cg.Kc // 4  # both kinds (52 and 57 of 115)
        for j in violated:
            assert TransportCertifier.certify(tc, mu - cg.G[:, j]) is None
    finally:
        cg.close()


def test_pricing_with_transport_finds_the_same_violated_outputs_and_bound() -> None:
    p = build_pmo(load_dataset("gaussian", n_records=120, seed=5), 1.0, 0.8)
    found = []
    for transport in (False, True):
        cg = _giant(p)
        try:
            mu = _duals(cg, 1.1)
            tau, tol = cg.tolerances(float(cg.G.min(axis=1).sum()))
            js = np.arange(cg.Kc)
            priced = cg.price(js, mu, tol, transport=transport)
            assert sorted(j for j, _ in priced) == js.tolist()
            violated = sorted(j for j, z in priced if z is not None and float((cg.G[:, j] - mu) @ z) < -tau)
            bound = float(mu.sum() + cg.open_shares(mu).sum())
            found.append((violated, bound, cg.lp_solves, cg.transport_certified))
        finally:
            cg.close()
    (v0, b0, lp0, t0), (v1, b1, lp1, t1) = found
    assert v0 == v1 and v0
    assert b1 == pytest.approx(b0, abs=1e-9 * abs(b0))
    assert t0 == 0 and t1 > 0 and lp1 == lp0 - t1  # every certified output saved its LP
