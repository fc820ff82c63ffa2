"""Evaluation against the truth: how much of what an attack recovered is right.

This is the explicitly non-private path (docs/explanation/architecture.md: evaluation against the truth is separate
from anything released): it needs every party's block, which only a simulation (``securelp
solve``, ``demo``) or ``securelp audit --truth`` holds. The figures it adds to a report say how
good the attacks were; they are computed from private data and belong to the evaluation only.

Truth comes from the party block files of ``securelp split`` (a directory) or from the original
MPS file, split by the transcript's roster column counts exactly as ``securelp solve`` splits
(contiguous blocks in roster order).

Scoring (:func:`score_columns`) matches recovered columns to true ones through hashed values
and directions (:mod:`securelp.coordinator.audit.columns`; sorting, no pair loop). A recovered column is
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
    direction_hash,
    match_by_hash,
    pair_errors,
    snap_small,
    value_hash,
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


def _relative_errors(errors: np.ndarray) -> dict[str, float | None]:
    finite = errors[np.isfinite(errors)]
    return {"rel_error_median": float(np.median(finite)) if finite.size else None,
            "rel_error_max": float(finite.max()) if finite.size else None}


def score_columns(rec: RecoveredColumns, truth: TruthColumns) -> dict[str, Any]:
    """How many recovered columns are right (vectorized: hashes, then every candidate pair verified).

    Returns
    -------
    A dict (report keys, docs/reports.md): ``columns`` (true columns), ``recovered_exact`` and
    ``fraction_exact`` (true columns whose values, column and cost, were recovered to 1e-6
    relative), ``recovered_up_to_scale`` and ``fraction_up_to_scale``, ``claimed_right``,
    ``claimed_wrong`` (claims of exact values that are wrong), ``unclaimed_right`` (values right
    that the attack did not claim), ``direction_claimed_wrong`` (columns claimed up to a factor
    whose direction is no true column's), ``positions_assigned`` and ``positions_right``, and the
    median and largest relative error of the claimed columns whose direction is right.
    """
    n_true, q, signed = truth.count, rec.count, rec.signed_scale
    R, T = snap_small(rec.A), snap_small(truth.A)
    rc, tc = np.asarray(rec.c, dtype=float), np.asarray(truth.c, dtype=float)
    free = np.ones(n_true, dtype=bool)
    exact = np.zeros(q, dtype=bool)
    direction = np.zeros(q, dtype=bool)
    claimed_err = np.full(q, np.inf)
    # values first (a recovered column takes the true column with its values), then directions
    r_i, t_j = match_by_hash(value_hash(R, rc), value_hash(T, tc), np.flatnonzero(np.isfinite(rc)), free)
    err = pair_errors(R, rc, r_i, T, tc, t_j, direction=False, signed=signed)
    ok = err <= MATCH_TOL
    exact[r_i[ok]] = direction[r_i[ok]] = True
    claimed_err[r_i[ok]] = err[ok]
    free[t_j[ok]] = False
    r_i, t_j = match_by_hash(direction_hash(R, signed), direction_hash(T, signed), np.flatnonzero(~exact), free)
    ok = pair_errors(R, None, r_i, T, None, t_j, direction=True, signed=signed) <= MATCH_TOL
    r_i, t_j = r_i[ok], t_j[ok]
    direction[r_i] = True
    free[t_j] = False
    verr = pair_errors(R, rc, r_i, T, tc, t_j, direction=False, signed=signed)
    claimed_err[r_i] = verr
    exact[r_i[verr <= MATCH_TOL]] = True  # values right, keys apart by rounding
    claimed = np.asarray(rec.scale_known, dtype=bool)
    dir_claimed = rec.directions_claimed
    # positions: the true column at the position the attack gave
    assigned, pos_right = _positions_right(np.asarray(rec.position, dtype=np.int64), truth, R, rc, T, tc, claimed,
                                           signed)
    guessed_pos, guess_pos_right = _positions_right(rec.position_guesses, truth, R, rc, T, tc,
                                                    claimed | rec.guessed, signed)
    n_exact, n_up = int(exact.sum()), int(direction.sum())
    out: dict[str, Any] = {
        "columns": n_true, "recovered_exact": n_exact, "fraction_exact": n_exact / n_true if n_true else 0.0,
        "recovered_up_to_scale": n_up, "fraction_up_to_scale": n_up / n_true if n_true else 0.0,
        "claimed_right": int((claimed & exact).sum()), "claimed_wrong": int((claimed & ~exact).sum()),
        "unclaimed_right": int((~claimed & exact).sum()),
        "direction_claimed_wrong": int((dir_claimed & ~direction).sum()), "positions_assigned": int(assigned.size),
        "positions_right": int(pos_right.sum()),
        "guesses": _by_class(rec.bases, rec.guessed, exact),
        "position_guesses": _by_class(rec.position_bases, rec.position_guesses >= 0,
                                      _scatter(guessed_pos, guess_pos_right, q))}
    out.update(_relative_errors(claimed_err[claimed & direction]))
    return out


def _scatter(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    out[index] = values
    return out


def _by_class(classes: np.ndarray, selected: np.ndarray, right: np.ndarray) -> dict[str, dict[str, int]]:
    """Per class of best guess: how many were made and how many are right."""
    idx = np.flatnonzero(selected)
    if not idx.size:
        return {}
    keys, inverse = np.unique(classes[idx].astype(str), return_inverse=True)
    guessed = np.bincount(inverse, minlength=keys.size)
    hits = np.bincount(inverse, weights=right[idx].astype(float), minlength=keys.size)
    return {str(k): {"guessed": int(g), "right": int(h)} for k, g, h in zip(keys, guessed, hits)}


def _positions_right(pos: np.ndarray, truth: TruthColumns, R: sp.csc_matrix, rc: np.ndarray, T: sp.csc_matrix,
                     tc: np.ndarray, valued: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """The recovered columns with a position, and whether the true column there is theirs (its values
    where the attack has values for it, ``valued``; else its direction)."""
    n_true = truth.count
    assigned = np.flatnonzero(pos >= 0)
    if truth.original is not None:
        where = np.full(int(max(truth.original.max(initial=-1), pos.max(initial=-1))) + 1, -1, dtype=np.int64)
        where[truth.original] = np.arange(n_true)
        j = np.where(pos[assigned] < where.size, where[np.minimum(pos[assigned], where.size - 1)], -1)
    else:
        j = np.where(pos[assigned] < n_true, pos[assigned], -1)
    valid = j >= 0
    a_ok, j_ok = assigned[valid], j[valid]
    right = np.zeros(assigned.size, dtype=bool)
    if a_ok.size:
        val_ok = pair_errors(R, rc, a_ok, T, tc, j_ok, direction=False, signed=signed) <= MATCH_TOL
        dir_ok = pair_errors(R, None, a_ok, T, None, j_ok, direction=True, signed=signed) <= MATCH_TOL
        right[np.flatnonzero(valid)] = np.where(valued[a_ok], val_ok, dir_ok)
    return assigned, right


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
