"""The exact repair of a solver's approximate PMO solution into a verified mechanism.

An LP solver returns a vertex up to its feasibility tolerance; we never return that raw.
:func:`repair_mechanism` turns it into a matrix that satisfies the PMO's constraints (Qiu Eq. 5-7)
up to a relative 1e-13 (``RATIO_SLACK``): (1) clip negatives to 0; (2) the *upward closure*
``z_jk <- max(z_jk, z_ik / exp(eps d_ij))`` over the neighbour graph until no entry changes (so
every ratio holds); (3) divide each row by its sum, and repeat from (2) until no row sum was off by
more than 5e-14 (then no ratio moved by more than 1e-13); (4) if that did not happen within
``max_rounds`` rounds, or the rounds stopped converging, or the caller's deadline passed, mix with
an exactly private mechanism: a record-independent distribution ``u`` over the outputs,
``(1 - lam) z + lam u``, with ``u`` weighted by each output's largest ratio error from step (3) and
the ``lam`` that absorbs every one of them (a constant mechanism meets the mDP row of output ``k``
with slack ``(exp(eps d) - 1) u_k``), or, where the problem knows its outputs and costs, the
exponential mechanism (Qiu Eq. 47) with the ``lam`` its slack on the broken rows needs; the mix of
lower loss is kept. :func:`finalize_mechanism` then verifies the result
(:mod:`securelp.solvers.mdp.verify`); its loss, not a solver's objective, is the reported objective and
upper bound.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from securelp.solvers.errors import SolverError, VerificationError
from securelp.solvers.mdp.expmech import private_exponential_mechanism
from securelp.solvers.mdp.pmo import PMOProblem
from securelp.solvers.mdp.verify import VerificationReport, verify_mechanism

__all__ = ["UNREPAIRED", "finalize_mechanism", "mix_into_cone", "repair_mechanism", "repair_reference", "upward_closure"]

logger = logging.getLogger(__name__)

#: the repair's rounding allowance: a ratio broken by at most this much (relative) is left as it is
#: (the verifier allows 1e-9)
RATIO_SLACK = 1e-13
#: :func:`upward_closure` gathers at most this many entries (pairs x outputs) at once: below the size
#: from which the allocator maps fresh pages for every block (the result does not depend on it)
CLOSURE_CHUNK = 1 << 20
#: closure rounds (closure, then row normalisation) at most before the mix: more rounds settle rows
#: that converge slowly without a mix (a lower loss), each round after the first costing little
REPAIR_MAX_ROUNDS = 64
#: ... and they stop (to the mix) once the deviation has not halved over this many rounds
REPAIR_STALL_ROUNDS = 4
#: the mix tries the exponential mechanism up to this many entries (records x outputs; it and the
#: costs are two more such arrays: 128 MB each at this size)
REPAIR_REFERENCE_MAX_ENTRIES = 1 << 24


def upward_closure(Z: np.ndarray, rows: np.ndarray, cols: np.ndarray, inv_w: np.ndarray, max_passes: int = 200,
                   *, chunk: int = CLOSURE_CHUNK) -> int:
    """In place: ``Z[j] = max(Z[j], Z[i] * inv_w)`` over pairs ``(i, j)`` until stable; returns passes.

    The pairs are taken by target, a block of targets at a time (at most ``chunk`` entries gathered
    at once), and each block writes its targets before the next block reads them (a Gauss-Seidel
    sweep; every other pass sweeps the blocks backwards, so growth travels both ways along the
    records' order in one pair of passes). A pair can be violated after a pass only in an output
    where its source grew during the pass, so the next pass takes only the pairs whose source grew,
    in the outputs where anything grew; of those, the pairs whose target's block came after the
    source's in the pass read its final value then and are not swept again. The result is the least
    fixed point above ``Z`` of the rounded map, whatever the order of the sweeps (every value written
    is some ``Z[i] * inv_w`` on the way to it), so it equals what full sweeps until nothing changes
    give, bit for bit.

    Raises
    ------
    SolverError
        No fixed point within ``max_passes`` passes.
    """
    if rows.size == 0:
        return 0
    order = np.argsort(cols, kind="stable")
    r, c, iw = rows[order], cols[order], inv_w[order]
    sel: np.ndarray | None = None  # pairs to sweep (None: all)
    ks: np.ndarray | None = None  # outputs to sweep (None: all)
    for passes in range(1, max_passes + 1):
        rs, cs, ws = (r, c, iw) if sel is None else (r[sel], c[sel], iw[sel])
        targets, first = np.unique(cs, return_index=True)
        nk = Z.shape[1] if ks is None else ks.size
        bounds = np.append(first, cs.size)
        grown_rows = np.zeros(targets.size, dtype=bool)
        grown_cols = np.zeros(nk, dtype=bool)
        # the blocks of targets: the largest whose pairs fit in the chunk (at least one target each)
        blocks = []
        t0 = 0
        while t0 < targets.size:
            t1 = max(t0 + 1, int(np.searchsorted(bounds, bounds[t0] + max(1, chunk // nk), side="right")) - 1)
            t1 = min(t1, targets.size)
            blocks.append((t0, t1))
            t0 = t1
        if passes % 2 == 0:
            # every other pass sweeps the blocks backwards (a symmetric Gauss-Seidel): growth then
            # travels both ways along the records' order in one pair of passes
            blocks.reverse()
        when = np.full(Z.shape[0], -1, dtype=np.int64)  # the slot of each record's block in this pass
        for slot, (t0, t1) in enumerate(blocks):
            when[targets[t0:t1]] = slot
        for t0, t1 in blocks:
            a, b = int(bounds[t0]), int(bounds[t1])
            tg = targets[t0:t1]
            if ks is None:
                cand, cur = Z[rs[a:b]], Z[tg]
            else:
                cand, cur = Z[np.ix_(rs[a:b], ks)], Z[np.ix_(tg, ks)]
            cand *= ws[a:b, None]
            best = np.maximum.reduceat(cand, first[t0:t1] - a, axis=0)
            grew = best > cur
            if np.any(grew):
                np.maximum(cur, best, out=cur)
                if ks is None:
                    Z[tg] = cur
                else:
                    Z[np.ix_(tg, ks)] = cur
                grown_rows[t0:t1] = np.any(grew, axis=1)
                grown_cols |= np.any(grew, axis=0)
        if not np.any(grown_rows):
            return passes
        ks = np.flatnonzero(grown_cols) if ks is None else ks[grown_cols]
        # a pair swept in this pass whose source grew in a block before its target's block read the
        # source's final value of this pass and holds: every other pair whose source grew is swept again
        grown = np.zeros(Z.shape[0], dtype=bool)
        grown[targets[grown_rows]] = True
        again = grown[r]
        if sel is None:
            again &= when[r] >= when[c]
        else:
            again[sel] &= when[r[sel]] >= when[c[sel]]
        sel = np.flatnonzero(again)
    raise SolverError(f"mechanism repair did not converge in {max_passes} passes")


def mix_into_cone(X: np.ndarray, rows: np.ndarray, cols: np.ndarray, d: np.ndarray, eps: float,
                  reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, float]:
    """Step (4) of the repair on a row-stochastic ``X``: returns ``(mixed X, lam)``.

    ``reference``: ``(M, cost)``, an exactly private mechanism of ``X``'s shape (the exponential
    mechanism) and the loss per entry; the mix with ``M`` that absorbs every broken ratio is
    also formed, and the mix of lower loss is returned."""
    # (4) the mix: a record-independent distribution u meets the mDP row (i, j, k) with slack
    # (exp(eps d_ij) - 1) u_k, so u_k in proportion to column k's largest need v_k = max a/(w - 1)
    # absorbs every violation a with lam = V / (1 + V), V = sum v (x2 margin for rounding); the
    # uniform u would need V = K max v, far more where the need sits in a few outputs.
    # The exponential mechanism M meets the row (i, j, k) with slack s = exp(eps d_ij) M_jk - M_ik, so
    # the mix (1 - lam) X + lam M holds where lam >= a / (a + s) on every broken row. Where the
    # broken ratios sit between records whose mass is near each other its mass is where theirs is,
    # and a uniform-per-output top-up is far costlier
    X = np.asarray(X, dtype=float)
    K = X.shape[1]
    lam = 0.0
    if rows.size:
        w = np.exp(eps * d)
        v = np.zeros(K)
        need_ref = 0.0  # the largest a / (a + s) for the reference mechanism (inf: it cannot absorb)
        chunk = max(1, CLOSURE_CHUNK // K)
        for start in range(0, rows.size, chunk):
            sl = slice(start, start + chunk)
            xi = X[rows[sl]]
            a = xi - w[sl, None] * X[cols[sl]]
            e, k = np.nonzero(a > RATIO_SLACK * xi)  # after the closure, usually none
            if e.size:
                ae = a[e, k]
                with np.errstate(divide="ignore", invalid="ignore"):
                    np.maximum.at(v, k, ae / (w[sl][e] - 1.0))
                if reference is not None and np.isfinite(need_ref):
                    M = reference[0]
                    slack = w[sl][e] * M[cols[sl][e], k] - M[rows[sl][e], k]
                    need_ref = max(need_ref, float(np.max(ae / (ae + slack)))) if np.all(slack > 0) else math.inf
        V = 2.0 * float(v.sum())
        if V > 0:
            if math.isfinite(V):
                lam, u = V / (1.0 + V), v / v.sum()
            else:
                lam, u = 1.0, np.full(K, 1.0 / K)
            mixed = (1.0 - lam) * X + lam * u[None, :]
            if reference is not None and need_ref * (1.0 + 1e-6) < lam:
                # the margin covers rounding (a ratio is then kept to about 1e-16 of its need)
                lam_ref = need_ref * (1.0 + 1e-6)
                by_ref = (1.0 - lam_ref) * X + lam_ref * reference[0]
                if float(np.sum(reference[1] * by_ref)) < float(np.sum(reference[1] * mixed)):
                    mixed, lam = by_ref, lam_ref
            X = mixed
            X /= X.sum(axis=1)[:, None]
    return X, lam


def repair_reference(problem: Any, K: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The exponential mechanism on ``problem``'s records and outputs and the loss per entry, for
    the repair's mix: ``None`` where the problem does not give its distances to the outputs
    (``to_outputs``, or the dataset's distances and ``outputs``) and its costs (for a matrix over
    the outputs ``kept``, those columns of them), or where
    ``exp(-eps d / 2)`` would underflow within a row (then it is not private as computed)."""
    cost = getattr(problem, "cost", None)
    D = getattr(problem, "to_outputs", None)
    if D is None and getattr(problem, "outputs", None) is not None:
        D = np.asarray(problem.dataset.distance)[:, problem.outputs]
    if cost is None or D is None or np.shape(cost) != np.shape(D):
        return None
    kept = getattr(problem, "kept", None)
    if D.shape[1] != K and kept is not None and np.size(kept) == K:
        # a matrix over a subset of the outputs: the exponential mechanism on them is private too
        D, cost = D[:, kept], np.asarray(cost)[:, kept]
    if D.shape[1] != K:
        return None
    X = private_exponential_mechanism(D, problem.eps)
    return None if X is None else (X, np.asarray(cost))


def repair_mechanism(Z: np.ndarray, problem: PMOProblem, deadline: float = math.inf, *,
                     max_rounds: int = REPAIR_MAX_ROUNDS) -> tuple[np.ndarray, dict[str, float]]:
    """Make a solver's approximate PMO solution exactly feasible (see module docstring).

    Returns the repaired ``(n, K)`` matrix and figures on how much was changed
    (``max_abs_change``, ``mix_lambda``, ``closure_passes``, ``closure_rounds``).

    ``deadline`` (``time.perf_counter()`` seconds): once it has passed, no further closure round
    starts and the mix finishes the repair. The result is as private, its loss a little higher.
    ``max_rounds``: closure rounds at most before the mix.

    Raises
    ------
    SolverError
        A row of ``Z`` is all zero (nothing to repair it from).
    """
    Z0 = np.asarray(Z, dtype=float)
    X = np.clip(Z0, 0.0, None)
    rows, cols = problem.graph.rows, problem.graph.cols
    d = np.asarray(problem.dataset.distance)[rows, cols]
    inv_w = np.exp(-problem.eps * d)
    passes = 0
    settled = False
    deviations: list[float] = []
    for _round in range(max_rounds):
        passes += upward_closure(X, rows, cols, inv_w)
        s = X.sum(axis=1)
        if np.any(s <= 0):
            i = int(np.argmin(s))
            raise SolverError(f"solver returned an all-zero row for record {i}; cannot repair")
        X /= s[:, None]
        # rows rescaled by at most 1 +- RATIO_SLACK / 2 move a ratio of the closed matrix by at most
        # RATIO_SLACK, which the mix would leave alone: neither another closure (on the text
        # dataset a second full one in most repairs) nor the mix's pass over every pair is needed
        deviations.append(float(np.max(np.abs(s - 1.0))))
        if deviations[-1] <= 0.5 * RATIO_SLACK:
            settled = True
            break
        if time.perf_counter() > deadline:
            break
        if len(deviations) > REPAIR_STALL_ROUNDS and deviations[-1] > 0.5 * deviations[-1 - REPAIR_STALL_ROUNDS]:
            break
    lam = 0.0
    if not settled:
        reference = repair_reference(problem, X.shape[1]) if X.size <= REPAIR_REFERENCE_MAX_ENTRIES else None
        X, lam = mix_into_cone(X, rows, cols, d, problem.eps, reference)
    return X, {"max_abs_change": float(np.max(np.abs(X - Z0))), "mix_lambda": lam, "closure_passes": float(passes),
               "closure_rounds": float(_round + 1)}


#: :func:`repair_mechanism`'s figures for a mechanism returned as it came (nothing changed)
UNREPAIRED = {"max_abs_change": 0.0, "mix_lambda": 0.0, "closure_passes": 0.0, "closure_rounds": 0.0}


def finalize_mechanism(Z: np.ndarray, problem: PMOProblem, *, exact: bool = False, verified_parts: bool = False
                       ) -> tuple[np.ndarray, VerificationReport, dict[str, float]]:
    """Repair then verify; a failed verification raises :class:`VerificationError`.

    ``verified_parts``: ``Z`` is assembled from rows that were repaired and verified already (the
    column decomposition's components): it is verified as it is and returned unchanged when it
    passes, else repaired and verified as any other (the repair of such a matrix would change
    entries by rounding only, at the cost of two closure passes over every pair and output).

    Raises
    ------
    VerificationError
        The repaired mechanism fails its verification.
    """
    if verified_parts:
        try:
            report = verify_mechanism(Z, problem.dataset.distance, problem.eps, eta=problem.eta, exact=exact)
            return np.asarray(Z, dtype=float), report, dict(UNREPAIRED)
        except VerificationError as exc:  # not expected: the parts passed the same check
            logger.warning("the assembled mechanism failed its verification (%s); repairing it", exc)
    X, info = repair_mechanism(Z, problem)
    report = verify_mechanism(X, problem.dataset.distance, problem.eps, eta=problem.eta, exact=exact)
    return X, report, info
