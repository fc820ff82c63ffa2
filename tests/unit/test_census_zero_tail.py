"""Zero tails of Model 3: closed-form multipliers pass the certificate when the tail is optimal, fail when not."""

from __future__ import annotations

import logging

import numpy as np

from securelp.solvers.hierarchy.chain import ChainOptions
from securelp.solvers.hierarchy.chain.certificate import check_certificate
from securelp.solvers.hierarchy.chain.rounds import solve_model3_certified
from securelp.solvers.hierarchy.chain.tails import complete_multipliers, fixed_cells, ladder_starts
from securelp.solvers.hierarchy.chain.windows import round_to_feasible
from securelp.solvers.hierarchy.model import Hierarchy
from securelp.solvers.hierarchy.relaxation import model3_relaxation_dykstra


def _two_leaves() -> Hierarchy:
    return Hierarchy.from_parents(["r", "a", "b"], ["", "r", "r"])


def _instance(y_a2: int):
    """Root r with leaves a, b; N = 4, G = 2; one group of size 1 per leaf, tails (sizes 2..4) zero."""
    h = _two_leaves()
    y = np.array([[2, 0, 1, 0],   # root
                  [1, 0, y_a2, -1],  # a
                  [1, 0, 1, -1]], dtype=np.int64)  # b
    cum = np.array([[2, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], dtype=np.int64)
    # multipliers of the free part (size 1): lam_root = 0 puts both leaves' size-1 cells in their
    # optimal range [-1, 1]; the size-1 -> size-2 chain rows are slack (1 > 0): mu = 0 there
    lam = np.zeros((3, 4), dtype=np.int64)
    mu = np.zeros((3, 3), dtype=np.int64)
    return h, y, cum, lam, mu


def test_zero_tail_multipliers_certify_an_optimal_tail() -> None:
    h, y, cum, lam, mu = _instance(y_a2=1)
    starts = ladder_starts(h, y, cum)
    assert starts.tolist() == [1, 1]  # both leaves: zero from size 2 on, partial sums of 1 - 2y >= 0
    fixed = fixed_cells(h, starts, 4)
    assert not fixed[0, 0] and fixed[:, 1:].all() and not fixed[1:, 0].any()
    lam2, mu2 = complete_multipliers(h, y, fixed, lam, mu)
    assert lam2.dtype == np.int64 and mu2.dtype == np.int64
    assert lam2[0, 1:].tolist() == [1, -1, 1]  # 1 - 2 y_root
    assert mu2[1].tolist() == [0, 2, 0]
    cert = check_certificate(h, cum, y, 2, lam2, mu2)
    assert cert.ok and cert.integral_arithmetic, cert.reason
    # the multipliers left at zero do not certify the tail (the completion is what makes it pass)
    assert not check_certificate(h, cum, y, 2, lam, mu).ok


def test_zero_tail_that_is_not_optimal_fails_the_certificate() -> None:
    # y = 3 at leaf a, size 3: raising c_2^a = c_3^a = 1 (and the root's) lowers the objective by 4,
    # so the zero tail is not optimal and no multipliers can certify it
    h, y, cum, lam, mu = _instance(y_a2=3)
    fixed = fixed_cells(h, np.array([1, 1]), 4)
    lam2, mu2 = complete_multipliers(h, y, fixed, lam, mu)
    cert = check_certificate(h, cum, y, 2, lam2, mu2)
    assert not cert.ok
    assert cert.failing[1, 2] and not cert.failing[2].any()
    # and the ladder rule does not propose that tail for leaf a from size 2
    assert ladder_starts(h, y, cum)[0] > 1


def test_chain_with_zero_tails_equals_chain_without_and_shortens_failing_tails(caplog) -> None:
    """Long zero tails with noisy positives: tails are proposed, some fail the certificate and are
    shortened (rows and columns added to the live LP), and the optimum equals the tail-free solve."""
    h = Hierarchy.from_parents(["r", "a", "b", "a0", "a1", "a2", "b0", "b1"], ["", "r", "r", "a", "a", "a", "b", "b"])
    leaves = list(h.leaves)
    shortened = 0
    for seed in range(12):
        rng = np.random.default_rng(100 + seed)
        n = 40
        true = np.zeros((h.size, n), dtype=np.int64)
        true[leaves, :6] = np.sort(rng.integers(0, 20, size=(len(leaves), 6)), axis=1)[:, ::-1]
        for r in reversed(range(h.size)):
            if h.children[r]:
                true[r] = true[list(h.children[r])].sum(axis=0)
        y = true + rng.integers(-6, 7, size=true.shape)
        total = int(true[0, 0])
        approx, _, _ = model3_relaxation_dykstra(h, y.astype(float), total, tol=0.05)
        centre = round_to_feasible(h, approx, total)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="securelp.solvers.hierarchy.chain"):
            with_tails = solve_model3_certified(h, y, total, centre, ChainOptions(zero_tails=True))
        assert "zero tails fix" in caplog.text
        shortened += "zero-tail cells fail" in caplog.text
        without = solve_model3_certified(h, y, total, centre, ChainOptions(zero_tails=False))
        assert with_tails.certificate.ok and with_tails.certificate.integral_arithmetic
        assert with_tails.objective == without.objective
    assert shortened >= 1  # the restart path (rows added to a live model) ran
