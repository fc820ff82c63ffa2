"""The few BLAS/LAPACK calls of the structured IPM, callable from threads in parallel.

scipy's ``scipy.linalg.blas``/``lapack`` wrappers hold the GIL while the routine runs, so two
threads that each call ``dpotrf`` take turns (measured on two cores: 0.8-1.0x the time of one
thread). scipy also publishes the same routines as C function pointers for Cython
(:mod:`scipy.linalg.cython_blas`, :mod:`scipy.linalg.cython_lapack`, a public API with fixed
signatures); called through :mod:`ctypes` they run without the GIL (1.6-1.8x on two threads).
They also take a leading dimension, so a block of a larger column-major matrix is worked on in place.

Every function checks its arrays (float64, unit stride down a column, the sizes) before handing
pointers to Fortran, and the signatures scipy declares are compared with the expected ones on
first use: a mismatch (a scipy built with 64-bit integers, say) falls back to scipy's wrappers,
which are correct but hold the GIL. All matrices are column-major views: a C-ordered ``X`` is passed
as ``X.T``.
"""

from __future__ import annotations

import ctypes
import functools
import re

import numpy as np

_INT = ctypes.POINTER(ctypes.c_int)
_DBL = ctypes.POINTER(ctypes.c_double)
_CHR = ctypes.c_char_p

#: the C signatures of scipy's Cython exports (its double typedef written ``d``) and their
#: ctypes argument types
_SIGNATURES = {
    ("lapack", "dpotrf"): ("void (char *, int *, d *, int *, int *)", (_CHR, _INT, _DBL, _INT, _INT)),
    ("lapack", "dpotri"): ("void (char *, int *, d *, int *, int *)", (_CHR, _INT, _DBL, _INT, _INT)),
    ("lapack", "dtrtri"): ("void (char *, char *, int *, d *, int *, int *)", (_CHR, _CHR, _INT, _DBL, _INT, _INT)),
    ("blas", "dsyrk"): ("void (char *, char *, int *, int *, d *, d *, int *, d *, d *, int *)",
                        (_CHR, _CHR, _INT, _INT, _DBL, _DBL, _INT, _DBL, _DBL, _INT)),
    ("blas", "dgemm"): ("void (char *, char *, int *, int *, int *, d *, d *, int *, d *, int *, d *, d *, int *)",
                        (_CHR, _CHR, _INT, _INT, _INT, _DBL, _DBL, _INT, _DBL, _INT, _DBL, _DBL, _INT)),
}


@functools.cache
def _routine(lib: str, name: str) -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """scipy's exported ``name`` as a ctypes function (no GIL while it runs), or None when its
    declared signature is not the expected one."""
    from scipy.linalg import cython_blas, cython_lapack

    capsule = (cython_lapack if lib == "lapack" else cython_blas).__pyx_capi__.get(name)
    if capsule is None:
        return None
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    declared = get_name(capsule)
    expected, argtypes = _SIGNATURES[(lib, name)]
    if re.sub(rb"__pyx_t_\w+_d\b", b"d", declared).decode() != expected:
        return None
    return ctypes.CFUNCTYPE(None, *argtypes)(get_pointer(capsule, declared))


def native() -> bool:
    """Whether the GIL-free routines are in use (else scipy's wrappers)."""
    return all(_routine(lib, name) is not None for lib, name in _SIGNATURES)


def _matrix(a: np.ndarray, rows: int, cols: int, what: str, writable: bool = False) -> tuple[int, int]:
    """Pointer and leading dimension of the column-major ``rows x cols`` view ``a``."""
    if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.shape != (rows, cols):
        raise ValueError(f"{what}: a float64 array of shape {(rows, cols)} is needed, not "
                         f"{getattr(a, 'dtype', type(a))} {getattr(a, 'shape', '')}")
    if writable and not a.flags.writeable:
        raise ValueError(f"{what}: the array is read-only")
    if rows > 1 and a.strides[0] != 8 or cols > 1 and (a.strides[1] % 8 or a.strides[1] < 8 * max(rows, 1)):
        raise ValueError(f"{what}: a column-major view (unit stride down the columns) is needed, strides {a.strides}")
    ld = a.strides[1] // 8 if cols > 1 else max(rows, 1)
    return a.ctypes.data, max(ld, rows, 1)


def _i(v: int) -> ctypes.c_int:
    return ctypes.c_int(int(v))


def _triangle(name: str, a: np.ndarray, lower: bool, *flags: bytes, **fallback: int) -> int:
    """LAPACK's ``name`` (``uplo``, then ``flags``, ``n``, ``a``, ``lda``, ``info``) on the
    column-major square ``a`` in place; its ``info``. ``fallback``: extra arguments of scipy's wrapper."""
    n = a.shape[0]
    fn = _routine("lapack", name)
    if fn is None:
        from scipy.linalg import lapack

        c, info = getattr(lapack, name)(a, lower=int(lower), **fallback)
        a[...] = c
        return int(info)
    p, ld = _matrix(a, n, n, name[1:], writable=True)
    info = ctypes.c_int(0)
    fn(b"L" if lower else b"U", *flags, ctypes.byref(_i(n)), ctypes.cast(p, _DBL), ctypes.byref(_i(ld)),
       ctypes.byref(info))
    return int(info.value)


def potrf(a: np.ndarray, lower: bool = True) -> int:
    """Cholesky factorisation of the symmetric ``a`` (column-major, one triangle read) in place;
    LAPACK's ``info`` (0: success, > 0: not positive definite). The other triangle is left as is."""
    return _triangle("dpotrf", a, lower, clean=0)


def potri(a: np.ndarray, lower: bool = True) -> int:
    """The inverse, in the same triangle, of the matrix whose Cholesky factor :func:`potrf` left in
    ``a``; LAPACK's ``info``."""
    return _triangle("dpotri", a, lower)


def trtri(a: np.ndarray, lower: bool = True) -> int:
    """The inverse of the triangular ``a`` (column-major, its ``lower`` or upper triangle) in place;
    LAPACK's ``info`` (> 0: singular). The other triangle is left as is."""
    return _triangle("dtrtri", a, lower, b"N")


def syrk(c: np.ndarray, a: np.ndarray, alpha: float = 1.0, beta: float = 1.0, lower: bool = True) -> None:
    """``c = alpha a a' + beta c`` in ``c``'s ``lower`` (else upper) triangle, in place (``a``:
    ``n x k``, both column-major)."""
    n, k = a.shape
    fn = _routine("blas", "dsyrk")
    if fn is None:
        from scipy.linalg import blas

        c[...] = blas.dsyrk(alpha, a, beta=beta, c=c, lower=int(lower))
        return
    pc, ldc = _matrix(c, n, n, "syrk c", writable=True)
    pa, lda = _matrix(a, n, k, "syrk a")
    fn(b"L" if lower else b"U", b"N", ctypes.byref(_i(n)), ctypes.byref(_i(k)), ctypes.byref(ctypes.c_double(alpha)),
       ctypes.cast(pa, _DBL), ctypes.byref(_i(lda)), ctypes.byref(ctypes.c_double(beta)), ctypes.cast(pc, _DBL),
       ctypes.byref(_i(ldc)))


def _operand(a: np.ndarray, what: str) -> tuple[bytes, int, int]:
    """``a`` (2-D float64, unit stride along one axis) as a BLAS operand: ``N`` and its own
    column-major layout, or ``T`` and the column-major layout of ``a.T``; pointer, leading dimension."""
    rows, cols = a.shape
    if not isinstance(a, np.ndarray) or a.dtype != np.float64:
        raise ValueError(f"{what}: a float64 array is needed")
    if rows <= 1 or a.strides[0] == 8:
        p, ld = _matrix(a, rows, cols, what)
        return b"N", p, ld
    p, ld = _matrix(a.T, cols, rows, what)
    return b"T", p, ld


def gemm(c: np.ndarray, a: np.ndarray, b: np.ndarray, alpha: float = 1.0, beta: float = 0.0) -> None:
    """``c = alpha a b + beta c`` in place. Each array needs a unit stride along one of its axes
    (a C- or column-major matrix or a block of one); ``c`` of either layout."""
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or c.shape != (m, n):
        raise ValueError(f"gemm: shapes {a.shape} x {b.shape} -> {c.shape} do not match")
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta:
            c *= beta
        else:
            c.fill(0.0)
        return
    if m > 1 and c.strides[0] != 8:  # row-major c: c' = b' a'
        if n > 1 and c.strides[1] != 8:
            raise ValueError(f"gemm c: a unit stride along one axis is needed, strides {c.strides}")
        gemm(c.T, b.T, a.T, alpha, beta)
        return
    fn = _routine("blas", "dgemm")
    if fn is None:
        c[...] = alpha * (a @ b) + (beta * c if beta else 0.0)
        return
    pc, ldc = _matrix(c, m, n, "gemm c", writable=True)
    ta, pa, lda = _operand(a, "gemm a")
    tb, pb, ldb = _operand(b, "gemm b")
    fn(ta, tb, ctypes.byref(_i(m)), ctypes.byref(_i(n)), ctypes.byref(_i(k)), ctypes.byref(ctypes.c_double(alpha)),
       ctypes.cast(pa, _DBL), ctypes.byref(_i(lda)), ctypes.cast(pb, _DBL), ctypes.byref(_i(ldb)),
       ctypes.byref(ctypes.c_double(beta)), ctypes.cast(pc, _DBL), ctypes.byref(_i(ldc)))
