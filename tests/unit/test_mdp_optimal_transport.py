"""Greedy lossy-transport certificates for the pricing LPs (`securelp.solvers.mdp.columns.optimal_transport`)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import scipy.sparse as sp

from securelp.solvers.mdp.columns import solve_colgen
from securelp.solvers.mdp.columns.ascent import smoothed_dual_ascent
from securelp.solvers.mdp.columns.bounds import component_rows, undominated_outputs
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.optimal_transport import TransportCertifier, cone_dominated
from securelp.solvers.mdp.columns.pricing import output_features
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.direct import highs_solve_lp, solve_direct
from securelp.solvers.mdp.pmo import build_pmo
from tests.mdp_fixtures import component


def _giant(p) -> ComponentCG:
    idx = max(p.graph.component_members(), key=lambda g: g.size)
    return component(p, idx, workers=2)


def _duals(cg: ComponentCG, lift: float) -> np.ndarray:
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
    # partial: the plan serves what the slack can pay for and leaves the rest of the deficit
    y = tc.certify(np.array([1.0, 0.0, -3.0]), partial=True)
    assert y is not None and np.all(y >= 0)
    assert A.T @ y == pytest.approx([0.75, 0.0, -3.0])  # 3 units of slack buy 3/4 of a unit at 0
    y = tc.certify(np.array([1.0, 0.0, 0.0]), partial=True)  # no slack: nothing served
    assert y is not None and not y.any()


def test_partial_plans_certify_the_outputs_the_master_uses(monkeypatch) -> None:
    """At the master's duals an output in use is tight (reduced cost 0): a complete plan needs every
    last bit of slack and the greedy one falls short by a hair, while a partial plan's unserved
    remainder is within the pricing's tolerance. On a grid at eps 10/km (the start columns are
    nearly optimal, every output is in use) partial plans certify most pricings; complete plans
    (the negative control) almost none. Either way the optimum is certified."""

    p = build_pmo(load_dataset("grid", rows=6, cols=6), 10.0, 2.0)
    opt = solve_direct(p).objective
    counts = []
    original = TransportCertifier.certify
    for partial in (True, False):

        def certify(self, b, partial=False, _p=partial):  # the pricing asks for partial plans: give _p
            return original(self, b, partial=_p)

        monkeypatch.setattr(TransportCertifier, "certify", certify)
        r = solve_colgen(p, gap=1e-6)
        assert r.status == "optimal" and r.objective == pytest.approx(opt, rel=1e-6)
        assert r.lower_bound <= opt * (1 + 1e-9)
        counts.append((r.details["transport_certified"], r.details["pricing_lp_solves"]))
    (t_partial, lp_partial), (t_whole, lp_whole) = counts
    assert t_partial > 2 * t_whole and lp_partial < lp_whole, counts


def test_certificates_are_valid_and_never_claim_a_violated_output() -> None:
    p = build_pmo(load_dataset("gaussian", n_records=70, seed=5), 1.0, 0.8)
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
        priced = cg.pricer.price(np.arange(cg.Kc), mu, tol)
        violated = {j for j, z in priced if z is not None and float((cg.G[:, j] - mu) @ z) < -tau}
        assert len(violated) >= cg.Kc // 4 and certified >= cg.Kc // 4  # both kinds (27 and 30 of 63)
        for j in violated:
            assert TransportCertifier.certify(tc, mu - cg.G[:, j]) is None
    finally:
        cg.close()


def test_pricing_with_transport_finds_the_same_violated_outputs_and_bound() -> None:
    """Gaussian 70 records: of the giant component's 63 outputs, 27 violated at these duals and 17
    certified by transport plans."""
    p = build_pmo(load_dataset("gaussian", n_records=70, seed=5), 1.0, 0.8)
    found = []
    for transport in (False, True):
        cg = _giant(p)
        try:
            mu = _duals(cg, 1.1)
            tau, tol = cg.tolerances(float(cg.G.min(axis=1).sum()))
            js = np.arange(cg.Kc)
            priced = cg.pricer.price(js, mu, tol, transport=transport)
            assert sorted(j for j, _ in priced) == js.tolist()
            violated = sorted(j for j, z in priced if z is not None and float((cg.G[:, j] - mu) @ z) < -tau)
            bound = float(mu.sum() + cg.open_shares(mu).sum())
            found.append((violated, bound, cg.pricer.lp_solves, cg.pricer.transport_certified))
        finally:
            cg.close()
    (v0, b0, lp0, t0), (v1, b1, lp1, t1) = found
    assert v0 == v1 and v0
    assert b1 == pytest.approx(b0, abs=1e-9 * abs(b0))
    assert t0 == 0 and t1 > 0 and lp1 == lp0 - t1  # every certified output saved its LP


def _pricing_value(G_diff: np.ndarray, A: sp.csr_matrix) -> float:
    """``min {(g_k - g_j).z : A z <= 0, 0 <= z <= 1}`` by HiGHS: >= 0 iff ``k`` is dominated by ``j``."""

    E, m = A.shape
    A = sp.csr_matrix(A)
    st, _, _, obj, _ = highs_solve_lp(G_diff, np.zeros(m), np.ones(m), np.full(E, -np.inf), np.zeros(E),
                                      A.indptr, A.indices, A.data)
    assert st == "Optimal"
    return obj


def _component(p):
    idx = max(p.graph.component_members(), key=lambda g: g.size)
    kept = undominated_outputs(p.cost[idx])
    G = p.cost[np.ix_(idx, kept)]
    A = component_rows(p, idx)
    return G, A, output_features(G)


def test_every_output_removed_as_dominated_is_dominated_by_a_kept_one() -> None:
    p = build_pmo(load_dataset("gaussian", n_records=150, seed=3), None, None)
    G, A, F = _component(p)
    by, visited = cone_dominated(G, A, TransportCertifier(A), F)
    removed = np.flatnonzero(by >= 0)
    assert visited == G.shape[1] and removed.size >= G.shape[1] // 4  # 29 of 71
    for k in removed:
        j = int(by[k])
        assert j != k
        # by LP: g_j costs no more than g_k on every point of the cone's box
        assert _pricing_value(G[:, k] - G[:, j], A) >= -1e-12
        while by[j] >= 0:  # the chain ends at a kept output
            j = int(by[j])
        assert _pricing_value(G[:, k] - G[:, j], A) >= -1e-12
    # and the pairs it kept are not all dominated: some kept output beats its nearest kept neighbour
    kept = np.flatnonzero(by < 0)
    assert min(_pricing_value(G[:, k] - G[:, j], A) for k, j in itertools.pairwise(kept[:6])) < -1e-9


def test_a_plan_that_does_not_hold_removes_nothing(monkeypatch) -> None:
    p = build_pmo(load_dataset("gaussian", n_records=150, seed=3), None, None)
    G, A, F = _component(p)
    tc = TransportCertifier(A)
    # a certifier whose plans deliver nothing: g_k >= g_j fails wherever k is nearer than j
    monkeypatch.setattr(tc, "certify", lambda b: np.zeros(A.shape[0]))
    by, _ = cone_dominated(G, A, tc, F)
    assert not np.any(by >= 0)


def test_the_search_stops_at_its_deadline_and_keeps_the_rest() -> None:
    p = build_pmo(load_dataset("gaussian", n_records=150, seed=3), None, None)
    G, A, F = _component(p)
    by, visited = cone_dominated(G, A, TransportCertifier(A), F, deadline=time.perf_counter() - 1.0)
    assert visited == 0 and not np.any(by >= 0)


def test_colgen_without_the_dominated_outputs_equals_direct() -> None:
    """Gaussian 80 records (seed 7): the search drops outputs in four components (14 of the largest's
    24), and the column generation over the rest is at direct's optimum."""
    p = build_pmo(load_dataset("gaussian", n_records=80, seed=7), None, None)
    direct = solve_direct(p)
    r = solve_colgen(p, gap=1e-5)
    dom = r.details["dominated_outputs"]
    assert dom and sum(d["removed"] for d in dom) > 0
    assert r.status == "optimal"
    assert r.objective == pytest.approx(direct.objective, rel=1e-6)
    assert r.lower_bound <= direct.objective * (1 + 1e-9)
