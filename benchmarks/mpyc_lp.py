"""MPyC's LP form for benchmarks/bench_mpyc.py: the conversion, the integer tableau and a clear replay.

MPyC's secure simplex demo (``np_lpsolver``) solves ``max c'x s.t. Ax <= b, x >= 0`` with ``b >= 0``
on an integer tableau. :func:`to_standard_form` brings a general LP there (free columns split,
bounds as rows, rows of other kinds with a big-M artificial column), :func:`integer_tableau` scales
it to integers, :func:`exact_simplex` runs the demo's pivot rule in exact arithmetic (the integers'
sizes MPyC must carry) and :func:`float_replay` in floating point. Nothing here needs mpyc.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.lp import LinearProgram, Sense

# ----------------------------------------------------------------------------------------------
# The LP conversion to the demo's form (no mpyc needed)
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class StandardFormLP:
    """``max c'x' s.t. A x' <= b, x' >= 0`` with ``b >= 0`` (the origin is feasible).

    Columns are ordered by owner (party 0's, party 1's, ..., then the public surplus columns,
    owner -1); rows are ordered public first (from the original rows), then each party's bound
    rows. The original variables are ``x = recover @ x' + shift``; the original objective at a
    point whose artificial slacks are zero is ``sign * c'x' + constant``.
    """

    A: np.ndarray
    b: np.ndarray
    c: np.ndarray
    col_owner: np.ndarray
    row_owner: np.ndarray
    artificial: np.ndarray
    recover: np.ndarray
    shift: np.ndarray
    sign: float
    constant: float
    big_m: float
    name: str = ""

    @property
    def n_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def n_cols(self) -> int:
        return int(self.A.shape[1])

    def as_lp(self) -> LinearProgram:
        """The converted LP as a ``LinearProgram`` (for HiGHS)."""
        m, n = self.A.shape
        return LinearProgram(c=self.c, A=self.A, row_lower=np.full(m, -np.inf), row_upper=self.b,
                             col_lower=np.zeros(n), col_upper=np.full(n, np.inf), sense=Sense.MAXIMIZE,
                             name=f"{self.name}-standard-form")

    def original_objective(self, value: float | Fraction) -> float:
        """The original LP's objective (its own sense, offset included) for converted value ``value``."""
        return float(self.sign * value + self.constant)


def to_standard_form(lp: LinearProgram, col_owner: Sequence[int], *, big_m: float | None = None) -> StandardFormLP:
    """Convert ``lp`` to the form MPyC's LP demo solves (see the module docstring).

    Parameters
    ----------
    lp : the LP in general form.
    col_owner : the party (0-based) holding each original column.
    big_m : the penalty on artificial slacks, used only when some row needs an artificial
        variable; None picks ``10^ceil(log10(max|c| / max|a_ij|))`` (at least 100), about the size
        of a dual ``c_j / a_ij``. The conversion is exact when M exceeds the optimal duals of the
        artificial rows; callers check the optimum with HiGHS (``as_lp``).

    Returns
    -------
    StandardFormLP
        with ``b >= 0``; its optimum maps to the original one through ``original_objective``.

    Raises
    ------
    InputError
        ``col_owner`` does not give one nonnegative party per column.
    """
    owner = np.asarray(col_owner, dtype=int)
    if owner.shape != (lp.n_cols,) or (owner < 0).any():
        raise InputError(f"col_owner needs one party index >= 0 per column ({lp.n_cols}), got shape {owner.shape}")
    A0 = lp.A.toarray()
    m0, n0 = A0.shape
    cols: list[tuple[int, float, int]] = []  # (original column, coefficient in x, owner)
    shift = np.zeros(n0)
    bound_rows: list[tuple[int, float, int]] = []  # (new column, u - l, owner)
    for j in range(n0):
        lo, hi = lp.col_lower[j], lp.col_upper[j]
        if np.isfinite(lo):
            shift[j] = lo
            cols.append((j, 1.0, owner[j]))
            if np.isfinite(hi):
                bound_rows.append((len(cols) - 1, float(hi - lo), owner[j]))
        elif np.isfinite(hi):
            shift[j] = hi
            cols.append((j, -1.0, owner[j]))
        else:
            cols.append((j, 1.0, owner[j]))
            cols.append((j, -1.0, owner[j]))
    n1 = len(cols)
    recover = np.zeros((n0, n1))
    for k, (j, s, _) in enumerate(cols):
        recover[j, k] = s
    A1 = A0 @ recover
    activity_shift = A0 @ shift
    rows: list[np.ndarray] = []
    rhs: list[float] = []
    art: list[bool] = []
    surplus: list[int] = []  # row index of each surplus column

    def one_sided(g: np.ndarray, beta: float) -> None:
        if beta >= 0:
            rows.append(g)
            rhs.append(beta)
            art.append(False)
        else:
            surplus.append(len(rows))
            rows.append(-g)
            rhs.append(-beta)
            art.append(True)

    for i in range(m0):
        lo, hi = lp.row_lower[i] - activity_shift[i], lp.row_upper[i] - activity_shift[i]
        a = A1[i]
        if np.isfinite(lo) and np.isfinite(hi) and lp.row_lower[i] == lp.row_upper[i]:
            if hi == 0:
                rows.extend([a, -a])
                rhs.extend([0.0, 0.0])
                art.extend([False, False])
            else:
                rows.append(a if hi > 0 else -a)
                rhs.append(abs(hi))
                art.append(True)
            continue
        if np.isfinite(hi):
            one_sided(a, hi)
        if np.isfinite(lo):
            one_sided(-a, -lo)
    m_pub = len(rows)
    A_rows = np.array(rows).reshape(m_pub, n1) if rows else np.zeros((0, n1))
    # surplus columns (public): -1 in their row
    S = np.zeros((m_pub, len(surplus)))
    for k, i in enumerate(surplus):
        S[i, k] = -1.0
    A_pub = np.hstack([A_rows, S])
    owners = np.array([o for _, _, o in cols] + [-1] * len(surplus), dtype=int)
    # bound rows x'_k <= u - l, grouped by owner after the public rows
    B = np.zeros((len(bound_rows), n1 + len(surplus)))
    for r, (k, _, _) in enumerate(bound_rows):
        B[r, k] = 1.0
    A = np.vstack([A_pub, B])
    b = np.concatenate([np.array(rhs, dtype=float), np.array([w for _, w, _ in bound_rows], dtype=float)])
    row_owner = np.array([-1] * m_pub + [o for _, _, o in bound_rows], dtype=int)
    artificial = np.array(art + [False] * len(bound_rows), dtype=bool)
    sign = -1.0 if lp.sense == Sense.MINIMIZE else 1.0
    c_cols = sign * (lp.c @ recover)
    c = np.concatenate([c_cols, np.zeros(len(surplus))])
    M = 0.0
    if artificial.any():
        if big_m is None:  # about the size of a dual c_j / a_ij; far larger ones make HiGHS's check stall
            ratio = max(1.0, float(np.abs(lp.c).max()) / max(1e-12, float(np.abs(A0).max())))
            big_m = 10.0 ** max(2, math.ceil(math.log10(ratio)))
        M = float(big_m)
        c = c + M * A[artificial].sum(axis=0)
    kappa = sign * float(lp.c @ shift) - M * float(b[artificial].sum())
    # order: columns by owner (public last), rows public first then by owner (stable)
    col_key = np.where(owners < 0, np.iinfo(int).max, owners)
    col_order = np.argsort(col_key, kind="stable")
    row_key = np.where(row_owner < 0, -1, row_owner)
    row_order = np.argsort(row_key, kind="stable")
    A = A[np.ix_(row_order, col_order)]
    recover_full = np.hstack([recover, np.zeros((n0, len(surplus)))])[:, col_order]
    for arr in (A, b, c, recover_full, shift):
        arr.setflags(write=False)
    return StandardFormLP(A=A, b=b[row_order], c=c[col_order], col_owner=owners[col_order],
                          row_owner=row_owner[row_order], artificial=artificial[row_order], recover=recover_full,
                          shift=shift, sign=sign, constant=sign * kappa + lp.offset, big_m=M, name=lp.name)


@dataclass(frozen=True, eq=False)
class IntegerTableau:
    """The demo's integer tableau ``[[-c, 0], [A, b]]`` times ``scale`` (Python ints, object array)."""

    T: np.ndarray
    scale: int
    exact: bool


def _is_integral(values: np.ndarray) -> bool:
    return bool(np.all(np.abs(values - np.round(values)) <= 1e-9 * np.maximum(1.0, np.abs(values))))


def integer_tableau(std: StandardFormLP, max_decimals: int = 6, *, row_gcd: bool = True) -> IntegerTableau:
    """Scale the converted LP by the smallest ``10^d`` (``d <= max_decimals``) that makes it integral.

    When no such d exists the data are rounded at ``10^max_decimals`` and ``exact`` is False.
    ``row_gcd``: divide each constraint row (with its right-hand side) by the gcd of its entries,
    as the demo does; this keeps the feasible set and shortens the integers, but the gcd of a row
    spans several parties' entries, so it is computed here in the clear.
    """
    m, n = std.A.shape
    data = np.zeros((m + 1, n + 1))
    data[0, :n] = -std.c
    data[1:, :n] = std.A
    data[1:, n] = std.b
    exact = False
    d = max_decimals
    for d in range(max_decimals + 1):
        if _is_integral(data * 10.0 ** d):
            exact = True
            break
    scale = 10 ** d
    T = np.empty(data.shape, dtype=object)
    T[...] = [[round(float(v) * scale) for v in row] for row in data]
    if row_gcd:
        for i in range(1, m + 1):  # the demo's reduction; the cost row is left alone
            g = math.gcd(*(int(v) for v in T[i]))
            if g > 1:
                T[i] //= g
    return IntegerTableau(T=T, scale=scale, exact=exact)


def tournament_argmin(items: Sequence[Any], less: Callable[[Any, Any], bool]) -> int:
    """The index MPyC's ``np_argmin`` picks: an odd-even tournament that keeps the first of equals.

    Mirrors ``Runtime._np_argmin`` of MPyC 0.11 (pairs ``(n0 + 2k, n0 + 2k + 1)``, the second wins
    only if strictly less, an odd first element passes through), so that a clear run takes the
    same pivots as the secure one even where ``less`` is not a total order.
    """
    idx = list(range(len(items)))
    vals = list(items)
    while len(vals) > 1:
        n0 = len(vals) % 2
        nv, ni = ([vals[0]], [idx[0]]) if n0 else ([], [])
        for k in range(n0, len(vals) - 1, 2):
            if less(vals[k + 1], vals[k]):
                nv.append(vals[k + 1])
                ni.append(idx[k + 1])
            else:
                nv.append(vals[k])
                ni.append(idx[k])
        vals, idx = nv, ni
    return idx[0]


def _fraction_less(a: tuple[int, int], b: tuple[int, int]) -> bool:
    # the demo's SecureFraction.__lt__: a0 * b1 < a1 * b0
    return a[0] * b[1] < a[1] * b[0]


@dataclass(frozen=True)
class ExactRun:
    """The demo's integer simplex run in the clear (pivots as the secure run takes them).

    ``status``: "optimal", "unbounded", or "budget" (stopped at the time or iteration budget).
    ``value_num / cd``: the optimum of the scaled LP times 1 (divide by ``scale`` for the LP's);
    ``x_num / cd`` and ``y_num / cd``: primal and dual solutions; ``max_bits``: the largest
    tableau entry's bit length over the run; ``check_bits``: the bit length of the certificate
    check's compared values.
    """

    status: str
    iterations: int
    max_bits: int
    check_bits: int
    value_num: int
    cd: int
    x_num: tuple[int, ...]
    y_num: tuple[int, ...]
    seconds: float

    def required_bit_length(self) -> int:
        """The secure integers' bit length the run needs (ratio-test products and the check)."""
        return max(2 * (self.max_bits + 1) + 2, self.check_bits + 2)


def exact_simplex(tab: IntegerTableau, *, max_iterations: int | None = None,
                  time_budget_s: float | None = None) -> ExactRun:
    """Run the demo's small-tableau integer simplex in the clear (exact Python integers).

    The update is ``T <- (T * pivot - col (x) row) / previous_pivot + e_k (x) row`` with
    ``row = T_k + previous_pivot * e_l``; every division is exact (Bareiss).
    """
    start = time.perf_counter()
    T = tab.T.copy()
    m, n = T.shape[0] - 1, T.shape[1] - 1
    basis = list(range(n, n + m))
    cobasis = list(range(n))
    pp = 1
    max_bits = max(abs(int(v)).bit_length() for v in T.flat)
    iterations = 0
    limit = max_iterations if max_iterations is not None else 50 * (m + n)
    status = "optimal"
    while True:
        cost = list(T[0, :-1])
        col = tournament_argmin(cost, lambda a, b: a < b)
        if cost[col] >= 0:
            break
        if iterations >= limit or (time_budget_s is not None and time.perf_counter() - start > time_budget_s):
            status = "budget"
            break
        p_col = T[:, col].copy()
        den = p_col[1:]
        items = [(int(T[i + 1, -1]) + (1 if den[i] <= 0 else 0), int(den[i])) for i in range(m)]
        row = tournament_argmin(items, _fraction_less)
        pivot = int(den[row])
        if pivot <= 0:
            status = "unbounded"
            break
        basis[row], cobasis[col] = cobasis[col], basis[row]
        p_row = T[row + 1, :].copy()
        p_row[col] += pp
        T = (T * pivot - np.outer(p_col, p_row)) // pp
        T[row + 1, :] += p_row
        pp = pivot
        iterations += 1
        max_bits = max(max_bits, max(abs(int(v)).bit_length() for v in T.flat))
    x = [0] * n
    for i, j in enumerate(basis):
        if j < n:
            x[j] = int(T[i + 1, -1])
    y = [0] * m
    for j, k in enumerate(cobasis):
        if k >= n:
            y[k - n] = int(T[0, j])
    A = tab.T[1:, :-1]
    b = tab.T[1:, -1]
    c = -tab.T[0, :-1]
    xv = np.array(x, dtype=object)
    yv = np.array(y, dtype=object)
    checks = list(A.dot(xv) - b * pp) + list(yv.dot(A) - c * pp) + [c.dot(xv), yv.dot(b)] if m and n else [0]
    check_bits = max(abs(int(v)).bit_length() for v in checks)
    return ExactRun(status=status, iterations=iterations, max_bits=max_bits, check_bits=check_bits,
                    value_num=int(T[0, -1]), cd=pp, x_num=tuple(x), y_num=tuple(y),
                    seconds=time.perf_counter() - start)


def float_replay(std: StandardFormLP, *, max_iterations: int | None = None, tol: float = 1e-9) -> int | None:
    """The iteration count of the same pivot rules on a floating-point small tableau.

    An estimate of the secure run's iteration count where the exact run is too slow to finish:
    entering column by the tournament argmin of the cost row, leaving row by the tournament
    argmin of ``b_i / a_il`` over ``a_il > 0`` (the order the demo's fraction comparison induces
    there); rounding can break ties differently than exact arithmetic. None: unbounded or over
    ``max_iterations`` (default ``50 (m + n)``).
    """
    m, n = std.A.shape
    T = np.zeros((m + 1, n + 1))
    T[0, :n] = -std.c
    T[1:, :n] = std.A
    T[1:, n] = std.b
    scale = max(1.0, float(np.abs(T).max()))
    for it in range(max_iterations if max_iterations is not None else 50 * (m + n)):
        cost = T[0, :-1]
        col = tournament_argmin(list(cost), lambda a, b: a < b)
        if cost[col] >= -tol * scale:
            return it
        a = T[1:, col]
        ratios = np.where(a > tol, T[1:, -1] / np.where(a > tol, a, 1.0), np.inf)
        row = tournament_argmin(list(ratios), lambda a, b: a < b)
        if not np.isfinite(ratios[row]):
            return None
        k = row + 1
        pivot = T[k, col]
        pcol = T[:, col].copy()
        prow = T[k, :] / pivot
        T -= np.outer(pcol, prow)
        T[k, :] = prow
        T[:, col] = -pcol / pivot
        T[k, col] = 1.0 / pivot
    return None


def hadamard_bits(tab: IntegerTableau) -> int:
    """Bits of Hadamard's bound on every minor of ``[[-c, 0, 0], [A, I, b]]`` (each tableau entry is one)."""
    T = tab.T.astype(float)
    row_norms = np.sqrt((T ** 2).sum(axis=1) + np.r_[0.0, np.ones(T.shape[0] - 1)])
    col_norms = np.sqrt((T ** 2).sum(axis=0))
    log_rows = float(np.log2(np.maximum(1.0, row_norms)).sum())
    log_cols = float(np.log2(np.maximum(1.0, col_norms)).sum())
    return math.ceil(min(log_rows, log_cols)) + 1


