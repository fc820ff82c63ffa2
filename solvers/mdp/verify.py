"""Verification of a perturbation matrix against metric DP (mDP) / local d-privacy.

A mechanism over secret records ``i = 1..n`` and outputs ``k = 1..K`` is a row-stochastic
matrix ``P`` (``P[i, k]`` = probability of reporting ``k`` when the secret is ``i``).
It satisfies ``eps``-mDP with neighbourhood radius ``eta`` (Qiu, "Enhancing Scalability
of Metric Differential Privacy via Secret Dataset Partitioning and Benders
Decomposition", Eq. 4-6) when

* ``P[i, k] >= 0`` for every entry,
* ``sum_k P[i, k] = 1`` for every record, and
* ``P[i, k] <= exp(eps * d(i, j)) * P[j, k]`` for every ordered neighbouring pair
  ``(i, j)`` (``i != j`` and ``d(i, j) <= eta``) and every output ``k``.

With ``eta=None`` every pair is a neighbour: this is local d-privacy (Gu, Li, Cao,
Xiong, "Supporting both Range Queries and Frequency Estimation with Local
Differential Privacy"; Chatzikokolakis et al.'s d-privacy).

Tolerances (documented and reported, never silent):

* entries must be ``>= 0`` exactly (no tolerance);
* row sums must satisfy ``|sum_k P[i, k] - 1| <= tol``;
* the mDP violation of ``(i, j, k)`` is the *relative* excess of ``P[i, k]`` over its
  bound, ``(P[i, k] - exp(eps d_ij) P[j, k]) / P[i, k]`` (0 when ``P[i, k] = 0``), and the
  largest one must be ``<= tol``. An entry that is positive while its neighbour's entry in
  the same column is 0 has violation 1 (an unbounded ratio): it always fails.

``exact=True`` repeats the row-sum and ratio checks in rational arithmetic
(:class:`fractions.Fraction`, every float taken at its exact binary value) against a
rigorous rational *lower* bound of ``exp(eps d)`` (a truncated Taylor series with terms
rounded down), so no floating-point rounding can make a violating matrix pass. It costs
``O(pairs * K)`` big-number operations: use it on small instances.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError, VerificationError

__all__ = ["MAX_EXPONENT", "VerificationReport", "exp_lower_bound", "neighbour_pairs", "verify_exact", "verify_mechanism"]

logger = logging.getLogger(__name__)

#: bytes of float64 scratch space one vectorised chunk of the ratio check may use
_CHUNK_BYTES = 24 * 1024 * 1024

#: the largest spread of exponents ``x`` within a row for which ``exp(-x)`` stays a normal double:
#: mechanisms computed as ``exp(-eps d)`` (or ``/ 2``) beyond it would round far entries to 0 or to
#: subnormals beside positive neighbours (an unbounded or imprecise ratio), so they are refused
MAX_EXPONENT = 650.0


@dataclass(frozen=True)
class VerificationReport:
    """Outcome of a successful :func:`verify_mechanism` call (figures for the JSON report).

    Attributes
    ----------
    n_records, n_outputs:
        Shape of the verified matrix.
    n_pairs:
        Number of ordered neighbouring pairs ``(i, j)`` whose ratio was checked on every output.
    max_row_sum_error:
        ``max_i |sum_k P[i, k] - 1|``.
    min_entry:
        Smallest entry of ``P`` (``>= 0`` when verification passed).
    max_mdp_violation:
        Largest relative excess ``(P[i,k] - exp(eps d_ij) P[j,k]) / P[i,k]`` over all
        checked pairs and outputs, clipped below at 0.
    tol:
        Tolerance used for the row sums and the relative ratio violation.
    exact:
        Whether the rational-arithmetic check was also run (and passed).
    eps, eta:
        Privacy parameters verified (``eta=None``: all pairs, local d-privacy).
    """

    n_records: int
    n_outputs: int
    n_pairs: int
    max_row_sum_error: float
    min_entry: float
    max_mdp_violation: float
    tol: float
    exact: bool
    eps: float
    eta: float | None

    def as_dict(self) -> dict[str, float]:
        """The three figures the JSON reports carry under ``verification``."""
        return {
            "max_row_sum_error": float(self.max_row_sum_error),
            "min_entry": float(self.min_entry),
            "max_mdp_violation": float(self.max_mdp_violation),
        }


def neighbour_pairs(distance: np.ndarray, eta: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Ordered neighbouring pairs ``(i, j)``, ``i != j``, ``d(i, j) <= eta`` (all pairs if ``eta`` is None).

    Returns
    -------
    (rows, cols):
        Two int64 arrays of equal length, sorted by ``rows`` then ``cols``.
    """
    d = np.asarray(distance, dtype=float)
    n = d.shape[0]
    if eta is None:
        mask = ~np.eye(n, dtype=bool)
    else:
        mask = d <= eta
        np.fill_diagonal(mask, False)
    rows, cols = np.nonzero(mask)
    return rows.astype(np.int64), cols.astype(np.int64)


def exp_lower_bound(x: Fraction, *, bits: int = 200) -> Fraction:
    """A rigorous rational lower bound of ``exp(x)`` for ``x >= 0``.

    Partial sum of the Taylor series (all terms positive, so every partial sum is below
    ``exp(x)``), each term rounded *down* to a multiple of ``2**-bits``; the series is
    cut once a term falls below ``2**-bits`` and the remaining terms are below the
    relative precision the check needs.
    """
    if x < 0:
        raise ValueError("exp_lower_bound needs x >= 0")
    scale = 1 << bits
    total = Fraction(0)
    term = Fraction(1)
    n = 0
    while True:
        floored = Fraction(math.floor(term * scale), scale)
        total += floored
        n += 1
        term = term * x / n
        if term * scale < 1 and n > x:
            break
    return total


def _validate_inputs(P: np.ndarray, distance: np.ndarray, eps: float, eta: float | None, tol: float) -> tuple[np.ndarray, np.ndarray]:
    P = np.asarray(P)
    distance = np.asarray(distance)
    if P.ndim != 2 or P.shape[0] == 0 or P.shape[1] == 0:
        raise InputError(f"mechanism must be a non-empty 2-D matrix (records x outputs), got shape {P.shape}")
    n = P.shape[0]
    if distance.shape != (n, n):
        raise InputError(f"distance matrix has shape {distance.shape}, expected ({n}, {n}) for {n} records")
    if not (isinstance(eps, (int, float, np.floating)) and math.isfinite(float(eps)) and float(eps) > 0):
        raise InputError(f"eps must be a finite number > 0, got {eps!r}")
    if eta is not None and not (math.isfinite(float(eta)) and float(eta) > 0):
        raise InputError(f"eta must be a finite number > 0 (or None for all pairs), got {eta!r}")
    if not (math.isfinite(float(tol)) and float(tol) >= 0):
        raise InputError(f"tol must be a finite number >= 0, got {tol!r}")
    if not np.issubdtype(P.dtype, np.floating) and not np.issubdtype(P.dtype, np.integer):
        raise InputError(f"mechanism must be numeric, got dtype {P.dtype}")
    P = P.astype(np.float64, copy=False)
    distance = distance.astype(np.float64, copy=False)
    if not np.all(np.isfinite(distance)) or np.any(distance < 0):
        raise InputError("distance matrix must be finite and non-negative")
    return P, distance


def verify_mechanism(
    P: np.ndarray,
    distance: np.ndarray,
    eps: float,
    *,
    eta: float | None = None,
    tol: float = 1e-9,
    exact: bool = False,
) -> VerificationReport:
    """Verify that ``P`` is an ``eps``-mDP mechanism for the records at ``distance``.

    Parameters
    ----------
    P:
        ``(n, K)`` perturbation matrix, rows = secret records, columns = outputs.
    distance:
        ``(n, n)`` distances between the secret records (same units as ``1/eps``).
    eps:
        Privacy parameter (per distance unit), ``> 0``.
    eta:
        Neighbourhood radius: pairs with ``d <= eta`` are constrained. ``None``: every
        pair (local d-privacy).
    tol:
        Largest allowed row-sum error and relative ratio violation (default ``1e-9``).
    exact:
        Also check row sums and ratios in exact rational arithmetic (small instances).

    Returns
    -------
    VerificationReport

    Raises
    ------
    VerificationError
        If any entry is negative or not finite, a row sum is off by more than ``tol``, or a
        ratio bound is violated by more than ``tol`` (relative); the message names the
        record(s) and output.
    InputError
        If the arguments are malformed (shapes, ``eps <= 0``, ``eta <= 0``).
    """
    P, distance = _validate_inputs(P, distance, eps, eta, tol)
    n, K = P.shape
    eps = float(eps)
    if not np.all(np.isfinite(P)):
        i, k = np.argwhere(~np.isfinite(P))[0]
        raise VerificationError(f"mechanism entry P[{i}, {k}] is not finite")
    min_entry = float(P.min())
    if min_entry < 0:
        i, k = np.unravel_index(int(np.argmin(P)), P.shape)
        raise VerificationError(f"mechanism entry P[{i}, {k}] = {min_entry:.3e} is negative (record {i}, output {k})")
    row_err = np.abs(P.sum(axis=1) - 1.0)
    max_row = float(row_err.max())
    if max_row > tol:
        i = int(np.argmax(row_err))
        raise VerificationError(
            f"row of record {i} sums to {P[i].sum():.12g}, off by {max_row:.3e} > tol {tol:g}"
        )
    rows, cols = neighbour_pairs(distance, None if eta is None else float(eta))
    n_pairs = int(rows.size)
    max_viol, worst = _largest_ratio_excess(P, distance, eps, rows, cols)
    if max_viol > tol:
        assert worst is not None
        i, j, k = worst
        raise VerificationError(
            f"mDP violated for records {i} and {j} (d = {distance[i, j]:.6g}) on output {k}: "
            f"P[{i},{k}] = {P[i, k]:.6e} exceeds exp(eps*d) * P[{j},{k}] = "
            f"{_scaled(eps * distance[i, j], P[j, k]):.6e} (relative excess {max_viol:.3e} > tol {tol:g})"
        )
    if exact:
        verify_exact(P, distance, eps, rows, cols, tol)
    logger.debug("verified mechanism %dx%d on %d ordered pairs: row err %.2e, mdp viol %.2e", n, K, n_pairs, max_row, max_viol)
    return VerificationReport(
        n_records=n,
        n_outputs=K,
        n_pairs=n_pairs,
        max_row_sum_error=max_row,
        min_entry=min_entry,
        max_mdp_violation=max(0.0, max_viol),
        tol=float(tol),
        exact=bool(exact),
        eps=eps,
        eta=None if eta is None else float(eta),
    )


def _largest_ratio_excess(P: np.ndarray, distance: np.ndarray, eps: float, rows: np.ndarray,
                          cols: np.ndarray) -> tuple[float, tuple[int, int, int] | None]:
    """The largest relative excess ``(P[i, k] - exp(eps d_ij) P[j, k]) / P[i, k]`` over the ordered pairs
    ``rows`` -> ``cols`` and every output (0 when none is positive), and where it is ``(i, j, k)``;
    the pairs are taken a chunk at a time (:data:`_CHUNK_BYTES` of temporaries)."""
    K = P.shape[1]
    max_viol = 0.0
    worst: tuple[int, int, int] | None = None
    chunk = max(1, _CHUNK_BYTES // (8 * K * 3))
    for start in range(0, int(rows.size), chunk):
        r = rows[start : start + chunk]
        c = cols[start : start + chunk]
        with np.errstate(over="ignore"):
            factor = np.exp(eps * distance[r, c])
        bound = P[c]
        if np.all(np.isfinite(factor)):
            bound *= factor[:, None]
        else:  # exp(eps d) overflowed: the bound is inf where P[j, k] > 0 and 0 where it is 0
            with np.errstate(invalid="ignore"):
                bound = np.where(bound > 0, bound * factor[:, None], 0.0)
        Pi = P[r]
        excess = Pi - bound  # P[i, k] - exp(eps d_ij) P[j, k]: only a positive one is a violation
        hit = np.flatnonzero(excess > 0)
        if hit.size == 0:
            continue
        rel = excess.flat[hit] / Pi.flat[hit]  # P[i, k] > 0 wherever the excess is positive
        at = int(np.argmax(rel))
        value = float(rel[at])
        if value > max_viol:
            max_viol = value
            e, k = divmod(int(hit[at]), K)
            worst = (int(r[e]), int(c[e]), int(k))
    return max_viol, worst


def _scaled(x: float, p: float) -> float:
    """``exp(x) * p`` for a message: ``inf`` where ``exp`` overflows and ``p > 0``, 0 where ``p`` is 0."""
    if p == 0:
        return 0.0
    try:
        return math.exp(x) * p
    except OverflowError:
        return math.inf


def verify_exact(P: np.ndarray, distance: np.ndarray, eps: float, rows: np.ndarray, cols: np.ndarray, tol: float) -> None:
    """Rational-arithmetic re-check of ``P``'s row sums and of its ratios on the ordered pairs ``rows`` ->
    ``cols`` (see the module docstring), within ``tol``.

    Raises
    ------
    VerificationError
        A row sum or a ratio is off by more than ``tol`` in exact arithmetic.
    """
    n, K = P.shape
    tol_q = Fraction(float(tol))
    F = [[Fraction(float(v)) for v in P[i]] for i in range(n)]
    for i in range(n):
        s = sum(F[i], Fraction(0))
        if abs(s - 1) > tol_q:
            raise VerificationError(f"exact check: row of record {i} sums to {float(s)!r}, off by more than tol {tol:g}")
    eps_q = Fraction(eps)
    cache: dict[float, Fraction] = {}
    one_minus_tol = 1 - tol_q
    for i, j in zip(rows.tolist(), cols.tolist()):
        d = float(distance[i, j])
        bound = cache.get(d)
        if bound is None:
            bound = exp_lower_bound(eps_q * Fraction(d))
            cache[d] = bound
        Fi, Fj = F[i], F[j]
        for k in range(K):
            a = Fi[k]
            if a == 0:
                continue
            # relative excess (a - bound*b)/a <= tol  <=>  bound*b >= (1 - tol) * a
            if bound * Fj[k] < one_minus_tol * a:
                raise VerificationError(
                    f"exact check: mDP violated for records {i} and {j} on output {k} "
                    f"(P[{i},{k}] = {float(a):.6e}, P[{j},{k}] = {float(Fj[k]):.6e}, d = {d:.6g})"
                )
