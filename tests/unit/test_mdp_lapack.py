"""The GIL-free BLAS/LAPACK calls of the structured IPM (securelp.solvers.mdp.ipm.lapack) against numpy, on
blocks of larger column-major arrays (worked on in place, nothing around them touched), through
scipy's exported routines and through the fallback to scipy's wrappers."""

from __future__ import annotations

import numpy as np
import pytest

from securelp.solvers.mdp.ipm import lapack


@pytest.fixture(params=["native", "fallback"])
def routines(request, monkeypatch):
    if request.param == "native":
        assert lapack.native()  # scipy's Cython exports have the expected signatures here
    else:
        monkeypatch.setattr(lapack, "_routine", lambda lib, name: None)  # environment probe: no native exports
        assert not lapack.native()
    return request.param


def _spd(n: int, rng: np.random.Generator) -> np.ndarray:
    X = rng.standard_normal((n, n))
    return X @ X.T + n * np.eye(n)


def test_cholesky_inverse_and_triangular_inverse_in_a_block(routines) -> None:
    rng = np.random.default_rng(0)
    H = _spd(30, rng)
    big = np.asfortranarray(rng.standard_normal((50, 60)))
    around = big.copy()
    blk = big[7:37, 11:41]
    blk[...] = H
    assert lapack.potrf(blk) == 0
    L = np.tril(blk)
    assert np.allclose(L @ L.T, H)
    assert np.array_equal(np.triu(blk, 1), np.triu(H, 1))  # the other triangle is left as is
    Lcopy = np.asfortranarray(L)
    assert lapack.trtri(Lcopy) == 0
    assert np.allclose(np.tril(Lcopy) @ L, np.eye(30))
    assert lapack.potri(blk) == 0
    assert np.allclose(np.tril(blk) + np.tril(blk, -1).T, np.linalg.inv(H))
    around[7:37, 11:41] = blk
    assert np.array_equal(around, big)


def test_a_matrix_that_is_not_positive_definite_is_reported(routines) -> None:
    a = np.asfortranarray(np.diag([1.0, -1.0, 2.0]))
    assert lapack.potrf(a) == 2


def test_syrk_and_gemm(routines) -> None:
    rng = np.random.default_rng(1)
    C = np.asfortranarray(rng.standard_normal((40, 40)))
    C0 = C.copy()
    A = np.asfortranarray(rng.standard_normal((25, 6)))
    lapack.syrk(C[5:30, 5:30], A, alpha=2.0, beta=1.0)
    assert np.allclose(np.tril(C[5:30, 5:30]), np.tril(C0[5:30, 5:30] + 2 * A @ A.T))
    assert np.array_equal(C[:5], C0[:5]) and np.array_equal(np.triu(C[5:30, 5:30], 1), np.triu(C0[5:30, 5:30], 1))
    for la in "CF":
        for lb in "CF":
            for lc in "CF":
                a = np.array(rng.standard_normal((7, 4)), order=la)
                b = np.array(rng.standard_normal((4, 5)), order=lb)
                c = np.array(rng.standard_normal((7, 5)), order=lc)
                c0 = c.copy()
                lapack.gemm(c, a, b, alpha=-1.5, beta=0.5)
                assert np.allclose(c, -1.5 * a @ b + 0.5 * c0)
    # a block of a row-major result and transposed views as operands; an empty inner dimension
    big = rng.standard_normal((20, 20))
    before = big.copy()
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((8, 3))
    lapack.gemm(big[2:8, 4:12], a, b.T, beta=1.0)
    before[2:8, 4:12] += a @ b.T
    assert np.allclose(big, before)
    c = np.full((3, 2), np.nan)
    lapack.gemm(c, np.zeros((3, 0)), np.zeros((0, 2)))
    assert np.array_equal(c, np.zeros((3, 2)))


def test_arrays_blas_cannot_read_are_refused() -> None:
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="column-major"):
        lapack.syrk(np.zeros((4, 4)), np.asfortranarray(rng.standard_normal((4, 2))))  # C-ordered c
    with pytest.raises(ValueError, match="float64"):
        lapack.potrf(np.eye(3, dtype=np.float32, order="F"))
    with pytest.raises(ValueError, match="shape"):
        lapack.syrk(np.zeros((4, 4), order="F"), np.zeros((3, 2), order="F"))
    with pytest.raises(ValueError, match="read-only"):
        a = np.asfortranarray(np.eye(3))
        a.flags.writeable = False
        lapack.potrf(a)
    with pytest.raises(ValueError, match="match"):
        lapack.gemm(np.zeros((2, 2)), np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="unit stride|column-major"):
        lapack.gemm(np.zeros((4, 4))[::2, ::2], np.zeros((2, 1)), np.zeros((1, 2)))
