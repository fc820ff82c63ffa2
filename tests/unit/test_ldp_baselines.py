"""GRR, OUE, exponential mechanism and planar Laplace: closed forms, verification, audits."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate

from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode, InputError, ResourceError, VerificationError
from securelp.solvers.ldp import GridDomain, build_mechanism, simulate
from securelp.solvers.ldp.baselines import (
    DenseMechanism,
    GeneralizedRandomizedResponse,
    OptimizedUnaryEncoding,
    exponential_mechanism,
    planar_laplace_mechanism,
)
from securelp.solvers.ldp.planar_laplace import planar_laplace_matrix, rectangle_masses
from securelp.solvers.mdp.sampling import (
    RowSampler,
    bernoulli_dyadic,
    chi_square_test,
    clopper_pearson,
    distinguishing_audit,
)
from securelp.solvers.mdp.verify import verify_mechanism
from securelp.solvers.randomness import SecureRandom


def test_grr_diagonal_and_rows_sum_to_one() -> None:
    g = GeneralizedRandomizedResponse(7, 1.2)
    e = math.exp(1.2)
    assert g.a == pytest.approx(e / (e + 6), rel=1e-15)  # e^eps/(e^eps + m - 1), not "+1"
    P = g.matrix()
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-15)
    assert g.e <= e or g.e == pytest.approx(e, rel=1e-16)
    assert g.verification.max_mdp_violation == 0.0


def test_grr_closed_forms_equal_the_general_inversion_formulas() -> None:
    m, eps, n = 9, 0.9, 1234
    g = GeneralizedRandomizedResponse(m, eps)
    P = g.matrix()
    y = np.random.default_rng(0).dirichlet(np.ones(m))
    assert np.allclose(g.estimate(y), np.linalg.solve(P.T, y), atol=1e-12)
    prior = np.random.default_rng(1).dirichlet(np.ones(m))
    general = DenseMechanism("grr-dense", P, GridDomain(3, 3), eps)
    assert g.mse_theory(prior, n)[0] == pytest.approx(general.mse_theory(prior, n)[0], rel=1e-9)
    # Wang et al. per-item variance, summed: m b(1-b)/(N(a-b)^2) + (1-a-b)/(N(a-b))
    a, b = g.a, g.b
    closed = (m * b * (1 - b) / (n * (a - b) ** 2) + (1 - a - b) / (n * (a - b))) / m
    assert g.mse_theory(prior, n)[0] == pytest.approx(closed, rel=1e-12)
    dom = GridDomain(3, 3)
    g2 = GeneralizedRandomizedResponse(9, eps, dom)
    assert g2.range_error_theory(prior, 1.0) == pytest.approx(general.range_error_theory(prior, 1.0), abs=1e-12)


def test_oue_closed_form_and_exact_verification() -> None:
    o = OptimizedUnaryEncoding(16, 1.0)
    assert o.p == 0.5
    assert o.q >= 1 / (math.exp(1.0) + 1)
    assert o.verification.details["eps_effective"] <= 1.0
    p, q = o.p, o.q
    assert o.mse_theory(None, 100)[0] == pytest.approx(
        q * (1 - q) / (100 * (p - q) ** 2) + (1 - p - q) / (16 * 100 * (p - q)), rel=1e-14)
    assert o.range_error_theory(None, 1.0) is None


def test_oue_simulation_matches_closed_form() -> None:
    dom = GridDomain(4, 4)
    runs = [simulate(dom, "oue", 1.0, 3000, seed=f"oue{i}") for i in range(10)]
    mse = np.mean([r.mse_freq for r in runs])
    assert abs(mse - runs[0].mse_freq_theory) <= 0.2 * runs[0].mse_freq_theory
    assert runs[0].error_range is None


def test_oue_bits_chi_square_with_control() -> None:
    o = OptimizedUnaryEncoding(5, 0.7)
    true = np.zeros(40_000, dtype=np.int64)
    counts = o.perturb_counts(true, SecureRandom(9))
    # bit 0 is Bernoulli(1/2), bits 1..4 Bernoulli(q): compare totals against binomial means
    n = true.size
    z0 = (counts[0] - n * 0.5) / math.sqrt(n * 0.25)
    zq = (counts[1:].sum() - 4 * n * o.q) / math.sqrt(4 * n * o.q * (1 - o.q))
    assert abs(z0) < 5.3 and abs(zq) < 5.3  # 1e-7 two-sided
    q_bad = o.q * 1.05
    z_bad = (counts[1:].sum() - 4 * n * q_bad) / math.sqrt(4 * n * q_bad * (1 - q_bad))
    assert abs(z_bad) > 5.3


def test_em_verified_and_estimator() -> None:
    dom = GridDomain(5, 5)
    em = exponential_mechanism(dom, 1.0)
    P = em.matrix()
    verify_mechanism(P, dom.distance_matrix(), 1.0)
    with pytest.raises(VerificationError):
        verify_mechanism(P, dom.distance_matrix(), 0.4)


def test_planar_laplace_masses_match_numerical_integration() -> None:
    eps = 0.8
    f = lambda y, x: eps * eps / (2 * np.pi) * np.exp(-eps * np.hypot(x, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rect in [(-0.5, 0.5, -0.5, 0.5), (0.5, 1.5, -0.5, 0.5), (2.5, 3.5, -1.5, -0.5)]:
            ref = integrate.dblquad(f, rect[0], rect[1], rect[2], rect[3], epsabs=0, epsrel=1e-12)[0]
            got = rectangle_masses(eps, *[np.array([v]) for v in rect])[0]
            assert got == pytest.approx(ref, rel=1e-10)
    # the whole plane, split into the four quadrants, has mass one
    total = rectangle_masses(eps, np.array([-np.inf, 0, -np.inf, 0]), np.array([0, np.inf, 0, np.inf]),
                             np.array([-np.inf, -np.inf, 0, 0]), np.array([0, 0, np.inf, np.inf])).sum()
    assert total == pytest.approx(1.0, abs=1e-13)


def test_planar_laplace_far_quadrants_are_accurate_at_large_eps() -> None:
    """A quadrant ``[x0, inf) x [y0, inf)`` far from the source at eps R ~ 100-400: its mass
    peaks sharply at the corner's angle: a polar rule refined only towards 0 loses 0.3 % there, and
    the 10 x 10 grid at eps 30 would fail its verification (the ratio of cells on one diagonal above
    exp(eps d))."""
    for eps, x0, y0 in [(30.0, 6.5, 6.5), (30.0, 9.5, 9.5), (45.0, 2.5, 7.5), (8.0, 0.5, 30.0)]:
        r_min = np.hypot(x0, y0)
        theta_star = np.arctan2(y0, x0)

        def scaled(theta: float, eps=eps, x0=x0, y0=y0, r_min=r_min) -> float:
            R = max(x0 / np.cos(theta), y0 / np.sin(theta))  # (1 + eps R) e^{-eps (R - r_min)}
            return (1 + eps * R) * np.exp(-eps * (R - r_min))

        ref = sum(integrate.quad(scaled, a, b, epsabs=0, epsrel=1e-13, limit=500)[0]
                  for a, b in [(0.0, theta_star), (theta_star, np.pi / 2)]) / (2 * np.pi)
        got = rectangle_masses(eps, np.array([x0]), np.array([np.inf]), np.array([y0]), np.array([np.inf]))[0]
        assert got * np.exp(eps * r_min) == pytest.approx(ref, rel=1e-10)
    P, quad_err = planar_laplace_matrix(10, 10, 1.0, 30.0)
    assert quad_err < 1e-12
    verify_mechanism(P, GridDomain(10, 10).distance_matrix(), 30.0)


@pytest.mark.parametrize("eps", [0.05, 1.0, 6.0])
def test_planar_laplace_matrix_rows_and_verification(eps: float) -> None:
    P, quad_err = planar_laplace_matrix(7, 6, 1.0, eps)
    assert quad_err < 1e-12
    verify_mechanism(P, GridDomain(7, 6).distance_matrix(), eps)
    with pytest.raises(VerificationError):
        verify_mechanism(P, GridDomain(7, 6).distance_matrix(), eps * 0.9)


def test_planar_laplace_refuses_an_eps_whose_far_cells_underflow() -> None:
    """eps * diameter = 707 on a 10 x 10 grid: a clear error before anything is built. Without the
    guard, at eps 100, the matrix has far cells at 0 beside positive ones, which the verifier
    rejects (exp(eps d) must not overflow into a NaN that hides them)."""
    with pytest.raises(VerificationError, match="underflows on this grid") as caught:
        planar_laplace_matrix(10, 10, 1.0, 50.0)
    assert caught.value.parameter == "eps"
    with np.errstate(all="ignore"):
        P, _ = planar_laplace_matrix(10, 10, 1.0, 100.0, max_exponent=np.inf)  # the guard off
    assert P.min() == 0.0
    with pytest.raises(VerificationError, match=r"exp\(eps\*d\) \* P\[\d+,\d+\] = 0\.0"):
        verify_mechanism(P, GridDomain(10, 10).distance_matrix(), 100.0)


def test_planar_laplace_row_sampling_chi_square() -> None:
    dom = GridDomain(6, 6)
    pl = planar_laplace_mechanism(dom, 1.0)
    row = pl.row(14)
    x = RowSampler(row).sample(100_000, SecureRandom(4))
    assert not chi_square_test(x, row).rejected
    for f in (0.95, 1.05):
        bad = planar_laplace_mechanism(dom, f).row(14)
        assert chi_square_test(x, bad).rejected


def test_planar_laplace_limits() -> None:
    with pytest.raises(ResourceError):
        planar_laplace_mechanism(GridDomain(31, 30), 1.0)
    with pytest.raises(InputError):
        build_mechanism("nope", GridDomain(2, 2), 1.0)


@pytest.mark.parametrize("name", ["le", "em", "pl", "grr"])
def test_distinguishing_audit_with_known_bad_control(name: str) -> None:
    """Clopper-Pearson lower bound on eps for a few pairs; a 2 eps mechanism must be caught."""
    dom = GridDomain(2, 2)
    eps = 1.0
    rng = SecureRandom(21)
    good = build_mechanism(name, dom, eps)
    # known-bad control: the mechanism run at 2 eps while eps is claimed. EM's exponent is
    # eps d / 2, so on this symmetric grid EM at 2 eps still meets eps on these pairs
    # (its loss is e^{eps' d/2} Z_l/Z_j): its control is run at 4 eps (true loss 2 eps d).
    bad = build_mechanism(name, dom, (4 if name == "em" else 2) * eps)
    D = dom.distance_matrix()
    for j, l in [(0, 1), (0, 3), (2, 1)]:
        claim = eps * (D[j, l] if name != "grr" else 1.0)
        res = distinguishing_audit(good.row(j), good.row(l), claim, 30_000, rng, j=j, l=l)
        assert not res.violated, res
        res_bad = distinguishing_audit(bad.row(j), bad.row(l), claim, 30_000, rng, j=j, l=l)
        assert res_bad.violated, res_bad


def test_simulate_rejects_bad_inputs() -> None:
    dom = GridDomain(3, 3)
    with pytest.raises(InputError):
        simulate(dom, "le", 1.0, 10, prior=np.full(8, 1 / 8))
    with pytest.raises(InputError):
        simulate(dom, "le", 1.0, 10, prior=np.full(9, 0.1))
    with pytest.raises(InputError):
        simulate(dom, "grr", 0.0, 10)
    with pytest.raises(InputError):
        simulate(dom, "le", 1.0, 0)


def _oue_reports(o: OptimizedUnaryEncoding, v: int, n: int, rng: SecureRandom) -> np.ndarray:
    bits = bernoulli_dyadic(o.q_frac, (n, o.m), rng)
    bits[:, v] = bernoulli_dyadic(o.p_frac, n, rng)
    return bits


def test_oue_distinguishing_audit_with_known_bad_control() -> None:
    """LDP-Audit's OUE check: event (bit j = 1, bit l = 0) has ratio (1 - q)/q = e^eps."""
    rng = SecureRandom(33)
    n = 60_000
    for mech, must_violate in ((OptimizedUnaryEncoding(4, 1.0), False), (OptimizedUnaryEncoding(4, 2.0), True)):
        xj = _oue_reports(mech, 0, n, rng)
        xl = _oue_reports(mech, 1, n, rng)
        sj = int(np.sum((xj[:, 0] == 1) & (xj[:, 1] == 0)))
        sl = int(np.sum((xl[:, 0] == 1) & (xl[:, 1] == 0)))
        lo, _ = clopper_pearson(sj, n, 1e-6)
        _, hi = clopper_pearson(sl, n, 1e-6)
        eps_lower = math.log(lo / hi)
        assert (eps_lower > 1.0) is must_violate, (mech.eps, eps_lower)


@pytest.mark.parametrize("eps", [700.0, 1e6, 1e300])
def test_grr_and_oue_refuse_an_eps_whose_exponential_overflows(eps: float, tmp_path, capsys) -> None:
    """GRR at eps 1e6 would fail inside the sampler (its weight e^eps is inf) and both in the exact
    Decimal arithmetic at 1e300: a one-line input error naming eps instead; 650 itself still works."""
    for cls in (GeneralizedRandomizedResponse, OptimizedUnaryEncoding):
        with pytest.raises(InputError, match="supports eps up to 650"):
            cls(25, eps)
        assert cls(25, 650.0).verification.max_mdp_violation == 0.0
    out = tmp_path / "r.json"
    code = main(["ldp", "--dataset", "grid", "--rows", "5", "--cols", "5", "--eps", repr(eps), "--mechanism", "grr",
                 "--users", "10", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT and "supports eps up to 650" in err and "Traceback" not in err and not out.exists()
    assert "(--eps)" in err  # the engine names its parameter, the command its flag
