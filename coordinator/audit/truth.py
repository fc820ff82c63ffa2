"""Evaluation against the truth: how much of what an attack recovered is right.

This is the explicitly non-private path (DESIGN.md: evaluation against the truth is separate
from anything released): it needs every party's block, which only a simulation (``securelp
solve``, ``demo``) or ``securelp audit --truth`` holds. The figures it adds to a report say how
good the attacks were; they are computed from private data and belong to the evaluation only.

Truth comes from the party block files of ``securelp split`` (a directory) or from the original
MPS file, split by the transcript's roster column counts exactly as ``securelp solve`` splits
(contiguous blocks in roster order).

Scoring (:func:`score_columns`) matches recovered columns to true ones through
:class:`~securelp.coordinator.audit.columns.DirectionIndex` (linear time). A recovered column is
*right* when its values (column and cost) are within :data:`~securelp.coordinator.audit.columns.MATCH_TOL`
relative of a true column not matched before; *right up to scale* when its direction is. Each
true column counts once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit.columns import (
    MATCH_TOL,
    DirectionIndex,
    column_entries,
    direction_error,
    snap_small,
    value_error,
)
from securelp.coordinator.audit.results import RecoveredColumns
from securelp.solvers.errors import InputError
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import ColumnBlock, load_block, split_columns


@dataclass(frozen=True, eq=False)
class TruthColumns:
    """True columns of one attack target, in their original order; ``original[j]`` is column j's
    position among the columns positions refer to (its party's block; None: the identity)."""

    A: sp.csc_matrix
    c: np.ndarray
    original: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.A.shape[1])


def _relative_errors(errors: list[float]) -> dict[str, float | None]:
    finite = [e for e in errors if np.isfinite(e)]
    return {"rel_error_median": float(np.median(finite)) if finite else None,
            "rel_error_max": float(max(finite)) if finite else None}


def score_columns(rec: RecoveredColumns, truth: TruthColumns) -> dict[str, Any]:
    """How many recovered columns are right.

    Returns
    -------
    A dict (report keys, docs/reports.md): ``columns`` (true columns), ``recovered_exact`` and
    ``fraction_exact`` (true columns whose values, column and cost, were recovered to 1e-6
    relative), ``recovered_up_to_scale`` and ``fraction_up_to_scale``, ``claimed_right``,
    ``claimed_wrong`` (claims of exact values that are wrong), ``unclaimed_right`` (values right
    that the attack did not claim), ``positions_assigned`` and ``positions_right``, and the
    median and largest relative error of the claimed columns that match a true direction.
    """
    n_true = truth.count
    out: dict[str, Any] = {"columns": n_true}
    A_rec = snap_small(rec.A)
    A_rec.sort_indices()
    T = snap_small(truth.A)
    T.sort_indices()
    index = DirectionIndex(T, signed=rec.signed_scale)
    used = np.zeros(n_true, dtype=bool)
    where = {int(o): j for j, o in enumerate(truth.original)} if truth.original is not None else None
    exact = up = claimed_right = claimed_wrong = unclaimed_right = 0
    pos_assigned = pos_right = 0
    claimed_errors: list[float] = []
    for i in range(rec.count):
        rows, vals = column_entries(A_rec, i)
        cost = float(rec.c[i])
        best_j, best_val, best_dir = -1, np.inf, np.inf
        for j in index.lookup(rows, vals):
            if used[j]:
                continue
            t_rows, t_vals = column_entries(T, j)
            derr = direction_error(rows, vals, t_rows, t_vals, rec.signed_scale)
            if derr > MATCH_TOL:
                continue
            verr = value_error(rows, vals, cost, t_rows, t_vals, float(truth.c[j]))
            if (verr, derr) < (best_val, best_dir):
                best_j, best_val, best_dir = j, verr, derr
        is_exact = best_j >= 0 and best_val <= MATCH_TOL
        if best_j >= 0:
            used[best_j] = True
            up += 1
            exact += int(is_exact)
        if rec.scale_known[i]:
            claimed_errors.append(best_val if best_j >= 0 else np.inf)
            claimed_right += int(is_exact)
            claimed_wrong += int(not is_exact)
        else:
            unclaimed_right += int(is_exact)
        p = int(rec.position[i])
        if p >= 0:
            pos_assigned += 1
            j = (where.get(p, -1) if where is not None else p) if p < (1 << 62) else -1
            if 0 <= j < n_true:
                t_rows, t_vals = column_entries(T, j)
                if rec.scale_known[i]:
                    ok = value_error(rows, vals, cost, t_rows, t_vals, float(truth.c[j])) <= MATCH_TOL
                else:
                    ok = direction_error(rows, vals, t_rows, t_vals, rec.signed_scale) <= MATCH_TOL
                pos_right += int(ok)
    out.update({"recovered_exact": exact, "fraction_exact": exact / n_true if n_true else 0.0,
                "recovered_up_to_scale": up, "fraction_up_to_scale": up / n_true if n_true else 0.0,
                "claimed_right": claimed_right, "claimed_wrong": claimed_wrong, "unclaimed_right": unclaimed_right,
                "positions_assigned": pos_assigned, "positions_right": pos_right})
    out.update(_relative_errors(claimed_errors))
    return out


# -- loading the truth -----------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Truth:
    """Every party's block, by party id (the non-private evaluation's input)."""

    blocks: Mapping[str, ColumnBlock]
    source: str = ""

    @staticmethod
    def of(blocks: Sequence[ColumnBlock], source: str = "") -> Truth:
        return Truth({b.party_id: b for b in blocks}, source)

    def block(self, party: str) -> ColumnBlock | None:
        return self.blocks.get(party)


def load_truth(path: str | os.PathLike[str], party_ids: Sequence[str], n_cols: Mapping[str, int]) -> Truth:
    """The truth for a transcript with these parties: a directory of ``securelp split`` block files
    (``<party>.npz``), or the original MPS file split into contiguous blocks of ``n_cols`` columns
    in the order of ``party_ids`` (as ``securelp solve`` splits).

    Raises
    ------
    InputError
        The path is missing, a party's block is missing or of another size, or the MPS file's
        column count differs from the transcript's.
    """
    p = Path(path)
    if p.is_dir():
        blocks = []
        for party in party_ids:
            f = p / f"{party}.npz"
            if not f.is_file():
                raise InputError(f"--truth {p}: no block file {f.name} for party {party}")
            blk = load_block(f, party)
            if blk.n_cols != n_cols[party]:
                raise InputError(f"--truth {f}: party {party}'s block has {blk.n_cols} columns, the transcript says "
                                 f"{n_cols[party]}; it is not the block of this session")
            blocks.append(blk)
        return Truth.of(blocks, str(p))
    if not p.is_file():
        raise InputError(f"--truth {p} does not exist (give a directory of block files or the MPS file)")
    lp = read_mps(p)
    sizes = [int(n_cols[q]) for q in party_ids]
    if sum(sizes) != lp.n_cols:
        raise InputError(f"--truth {p} has {lp.n_cols} columns, the transcript's parties hold {sum(sizes)}; it is "
                         "not the LP of this session")
    _, blocks = split_columns(lp, sizes, ids=list(party_ids))
    return Truth.of(blocks, str(p))
