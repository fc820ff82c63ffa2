"""Leakage model of each protocol mode and the auditor that checks it.

What the coordinator sees from party j (``protocol.TranscriptEntry``) and what that
allows it to reconstruct (Mangasarian 2011; Bednarz, Bean, Roughan, WPES 2009):

* dense mask (free columns; all columns in ``rows`` mode): M = A_d B_d' (m x k) and
  B_d c_d. For k >= n_d and any invertible Q, (A_d Q^-1, Q B_d) explains M equally well,
  so A_d and c_d are not determined. Invariants of the mask do leak: the row Gram
  M M' = A_d (B_d'B_d) A_d' estimates k A_d A_d' (Wishart noise, since the mask is
  Gaussian), and M u = A_d x_d for the solution u.
* positive monomial transform (bounded columns, ``monomial`` mode): A_b D P, c_b' D P,
  D^-1 bounds. A_b is revealed up to a positive scaling and the order of its columns:
  zero pattern, signs and ratios within each column, ratios c_i/A_ri per column.
* bound rows (``rows`` mode): B_b' itself. When every column of the party is bounded,
  A_.j = M (B')^+ and c_j = (B')'^+ (B c) exactly: the Bednarz et al. attack.
* revealed solution: x_j reaches the coordinator (and with it A_.j x_j).

``leakage_statement`` says this per party in each report; ``audit_entry`` performs the
attacks the statement calls possible (and the one it calls impossible) on the actual
transcript, and ``check_against_truth`` measures them when the truth is known
(simulations and tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from securelp.coordinator.protocol import PartyReport, TranscriptEntry
from securelp.party.session import SCALE_SPREAD
from securelp.solvers.lp.partition import ColumnBlock


def leakage_statement(mode: str, party: PartyReport) -> dict[str, Any]:
    """A per-party statement of what the coordinator can reconstruct in ``mode``."""
    can: list[str] = [f"n_j = {party.n_cols} columns ({party.n_free} free, {party.n_bounded} bounded)"]
    cannot: list[str] = []
    if party.n_dense_masked:
        can.append("for its dense-masked columns: the row Gram matrix A_d A_d' up to Wishart noise (from M M'/k), "
                   "and A_d x_d at the solution")
        cannot.append("A_d and c_d of its dense-masked columns (any invertible re-mixing of the mask explains "
                      "the masked products equally well)")
    if party.n_monomial:
        can.append(f"its {party.n_monomial} bounded columns up to positive column scaling and column order: zero "
                   "pattern, signs, ratios within each column, cost-to-coefficient ratios, and bound ratios")
        cannot.append("the scale of each bounded column and which original column it is")
    if party.n_bound_rows:
        can.append(f"the mask rows B_b' of its {party.n_bound_rows} bounded columns (sent as constraint rows)")
        if party.n_bound_rows == party.n_cols:
            can.append("A_.j and c_j exactly (every column is bounded, so B' is known: A = M (B')^+)")
        else:
            can.append("the part of A_.j that the known mask rows span; the rest stays masked")
    if party.revealed:
        can.append("x_j (revealed by agreement)")
        if party.n_monomial:
            can.append("for bounded columns with a nonzero solution value: candidate scales x/y, narrowed by "
                       f"matching x_j to y (scalings lie in the public range [1/{SCALE_SPREAD:g}, {SCALE_SPREAD:g}])")
    else:
        cannot.append("x_j (kept by the party)")
    return {"mode": mode, "dense_masked_columns": party.n_dense_masked, "monomial_columns": party.n_monomial,
            "bound_rows": party.n_bound_rows, "revealed_solution": party.revealed,
            "coordinator_can_reconstruct": can, "coordinator_cannot_reconstruct": cannot}


@dataclass(frozen=True, eq=False)
class AuditResult:
    """What the auditor reconstructed from one party's transcript entry."""

    party_id: str
    exact_block: np.ndarray | None  # A_.j recovered exactly (rows mode, all bounded)
    exact_cost: np.ndarray | None
    monomial_signature: np.ndarray | None  # column-normalized monomial block (order unknown)
    dense_guess: np.ndarray | None  # best guess of the dense part without the mask


def _normalize_columns(A: np.ndarray) -> np.ndarray:
    scale = np.abs(A).max(axis=0)
    scale[scale == 0] = 1.0
    return A / scale


def audit_entry(entry: TranscriptEntry, rng: np.random.Generator | None = None) -> AuditResult:
    """Attempt the reconstructions of the leakage model on what the coordinator saw."""
    rng = rng or np.random.default_rng()
    exact_block = exact_cost = signature = guess = None
    n_j = int(entry.hello.n_cols)
    if entry.bound_rows.shape[0] == n_j and n_j and entry.masked_a.shape[1]:
        B = entry.bound_rows.T  # k x n_j, full column rank with probability 1
        # A B' = M  <=>  B A' = M'
        exact_block = scipy.linalg.lstsq(B, entry.masked_a.T, lapack_driver="gelsy")[0].T
        exact_cost = scipy.linalg.lstsq(B, entry.masked_c, lapack_driver="gelsy")[0]
    if entry.scaled_a.shape[1]:
        signature = _normalize_columns(entry.scaled_a.toarray())
    if entry.masked_a.shape[1] and exact_block is None:
        # the attack the model calls impossible: undo a mask drawn from the same distribution
        k = entry.masked_a.shape[1]
        n_d = int(entry.hello.n_free) if entry.bound_rows.shape[0] == 0 else n_j
        B_guess = rng.standard_normal((k, n_d))
        guess = scipy.linalg.lstsq(B_guess, entry.masked_a.T, lapack_driver="gelsy")[0].T
    return AuditResult(entry.party_id, exact_block, exact_cost, signature, guess)


def _match_columns(signature: np.ndarray, truth: np.ndarray) -> float:
    """Largest mismatch after matching each signature column to a normalized truth column."""
    target = _normalize_columns(truth)
    remaining = list(range(target.shape[1]))
    worst = 0.0
    for t in range(signature.shape[1]):
        errs = [np.abs(signature[:, t] - target[:, r]).max() for r in remaining]
        best = int(np.argmin(errs))
        worst = max(worst, errs[best])
        remaining.pop(best)
    return worst


def check_against_truth(audit: AuditResult, block: ColumnBlock, mode: str) -> dict[str, Any]:
    """Measure the audit's reconstructions against the party's true block.

    Returns the relative errors and whether each finding agrees with the statement:
    ``exact_recovery`` should succeed in rows mode when every column is bounded;
    ``monomial_up_to_scaling`` should succeed for monomial columns; ``dense_unmasking``
    should fail (relative error near 1 or above).
    """
    A = block.A.toarray() if sp.issparse(block.A) else np.asarray(block.A)
    bounded = block.bounded_mask()
    out: dict[str, Any] = {}
    scale = max(1e-300, float(np.abs(A).max()) if A.size else 1.0)
    if audit.exact_block is not None:
        err = float(np.abs(audit.exact_block - A).max() / scale)
        out["exact_recovery_rel_error"] = err
        out["exact_recovery_succeeded"] = err < 1e-6
    if audit.monomial_signature is not None:
        cols = np.flatnonzero(bounded) if mode == "monomial" else np.zeros(0, dtype=int)
        err = _match_columns(audit.monomial_signature, A[:, cols])
        out["monomial_up_to_scaling_max_error"] = err
        out["monomial_up_to_scaling_succeeded"] = err < 1e-9
    if audit.dense_guess is not None:
        cols = np.flatnonzero(~bounded) if mode == "monomial" else np.arange(A.shape[1])
        truth = A[:, cols]
        err = float(np.linalg.norm(audit.dense_guess - truth) / max(1e-300, np.linalg.norm(truth)))
        out["dense_unmasking_rel_error"] = err
        out["dense_unmasking_succeeded"] = err < 1e-3
    consistent = (out.get("exact_recovery_succeeded", True) and out.get("monomial_up_to_scaling_succeeded", True)
                  and not out.get("dense_unmasking_succeeded", False))
    if mode == "rows" and bounded.all() and block.n_cols and audit.exact_block is None:
        consistent = False
    out["statement_confirmed"] = bool(consistent)
    return out
