"""What an attack returns: its status, its counts, and the columns it recovered.

Every attack of :mod:`securelp.coordinator.audit` returns one :class:`AttackOutcome` per party
(or per set of parties it targets). The outcome says whether the attack ran, was skipped (and
why: its budget, its size limit) or does not apply, how many columns it targeted, how many it
*claims* to have recovered exactly (its own judgement, from the transcript alone), and the
recovered columns themselves (:class:`RecoveredColumns`), which the truth evaluation
(:mod:`securelp.coordinator.audit.truth`) scores when the data are known. Recovered columns
never go into a report; only their counts do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

#: prefix of the basis of a best guess (values or a position the attack does not claim)
GUESS = "guess:"
#: the checks that confirm a claimed column (RecoveredColumns.basis), in words
CHECKS = {
    "solution_matching": "the revealed solution, whose entries fit the scaled columns in one way only, with every "
                         "factor in the public range",
    "mask_rows": "the mask rows sent as bound rows, which fix the mask (Bednarz et al.)",
    "single_dense_column": "the revealed solution: with one dense-masked column a and its value x_f, a = M u / x_f",
    "seed": "the mask recomputed from a guessed seed, which reproduces the masked block exactly",
    "known_rows": "rows of A assumed known",
}


class AttackStatus(enum.Enum):
    """Whether an attack ran."""

    RAN = "ran"
    SKIPPED = "skipped"  # it applies, but its budget or a size limit stopped it
    NOT_APPLICABLE = "not_applicable"  # nothing in the transcript for it (e.g. no dense mask)


@dataclass(frozen=True, eq=False)
class RecoveredColumns:
    """Columns an attack recovered for one target, in its own order.

    Attributes
    ----------
    A : (m, q) sparse: each recovered column (exact values where ``scale_known``, else the
        direction only, normalized so its first nonzero is +-1).
    c : (q,) the recovered costs (NaN where the attack has none).
    scale_known : (q,) whether the attack claims the column's values exactly (not only its
        direction).
    position : (q,) the original position the attack assigns (index among the target's columns
        in their original order), -1 where it assigns none.
    signed_scale : whether the unknown scale of a direction-only column may be negative (dense
        masks) or is positive (monomial transform).
    direction_claimed : (q,) whether the attack claims the column's direction (that it is one of
        the target's columns up to a factor); None: every column's (the attack's output are columns
        by construction).
    basis : (q,) how each column's values were obtained: for a claimed column the check that
        confirms it (one of :data:`CHECKS`), for another column with values the class of its best
        guess (``guess:...``, scored by the evaluation into the measured hit rates of
        :mod:`~securelp.coordinator.audit.hit_rates`), ``""`` where the attack has no values (a
        direction only). None: ``""`` everywhere.
    position_guess : (q,) a best guess of the original position where ``position`` has none (-1: no
        guess); None: no guesses.
    position_basis : (q,) the class of each position guess (``guess:...``); None: ``""``.
    """

    A: sp.csc_matrix
    c: np.ndarray
    scale_known: np.ndarray
    position: np.ndarray
    signed_scale: bool
    direction_claimed: np.ndarray | None = None
    basis: np.ndarray | None = None
    position_guess: np.ndarray | None = None
    position_basis: np.ndarray | None = None

    @property
    def directions_claimed(self) -> np.ndarray:
        return np.ones(self.count, dtype=bool) if self.direction_claimed is None else self.direction_claimed

    @property
    def bases(self) -> np.ndarray:
        """:attr:`basis`, with ``""`` where it is None."""
        return np.full(self.count, "", dtype=object) if self.basis is None else self.basis

    @property
    def guessed(self) -> np.ndarray:
        """Columns with values that are a best guess (not claimed)."""
        b = self.bases.astype(str)
        return np.char.startswith(b, GUESS) & ~np.asarray(self.scale_known, dtype=bool) if b.size \
            else np.zeros(0, dtype=bool)

    @property
    def position_guesses(self) -> np.ndarray:
        """Best-guess positions where no position is claimed (-1: none)."""
        if self.position_guess is None:
            return np.full(self.count, -1, dtype=np.int64)
        return np.where(self.position >= 0, -1, self.position_guess)

    @property
    def position_bases(self) -> np.ndarray:
        return np.full(self.count, "", dtype=object) if self.position_basis is None else self.position_basis

    @property
    def count(self) -> int:
        return int(self.A.shape[1])

    @staticmethod
    def empty(m: int, signed_scale: bool) -> RecoveredColumns:
        return RecoveredColumns(sp.csc_matrix((m, 0)), np.zeros(0), np.zeros(0, dtype=bool),
                                np.zeros(0, dtype=np.int64), signed_scale)


@dataclass(eq=False)
class AttackOutcome:
    """One attack on one target (a party, or the parties that share a masked product).

    ``claimed`` counts columns the attack recovered exactly by its own judgement (values and
    cost), ``up_to_scale`` columns it found up to an unknown factor, ``positions`` columns it
    placed at their original position. ``figures`` holds attack-specific numbers (rank, zero
    rows, ...), ``truth`` the evaluation against the real data when the run had it.
    """

    attack: str
    family: str
    parties: tuple[str, ...]
    status: AttackStatus
    reason: str = ""
    columns: int = 0
    claimed: int = 0
    up_to_scale: int = 0
    positions: int = 0
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    recovered: RecoveredColumns | None = field(default=None, repr=False)
    truth: dict[str, Any] | None = None
    #: what the attack computed besides columns (a subspace basis, an estimate), for the
    #: evaluation against the truth; never reported
    artifacts: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ran(self) -> bool:
        return self.status is AttackStatus.RAN

    def to_json(self) -> dict[str, Any]:
        """The outcome as report keys (docs/reports.md); no recovered data."""
        out: dict[str, Any] = {"attack": self.attack, "family": self.family, "status": self.status.value}
        if self.reason:
            out["reason"] = self.reason
        out.update({"columns": self.columns, "claimed_exact": self.claimed, "up_to_scale": self.up_to_scale,
                    "positions": self.positions, "seconds": round(self.seconds, 4)})
        if self.figures:
            out["figures"] = dict(self.figures)
        if self.truth is not None:
            out["truth"] = dict(self.truth)
        return out


def not_applicable(attack: str, family: str, parties: tuple[str, ...], reason: str) -> AttackOutcome:
    return AttackOutcome(attack, family, parties, AttackStatus.NOT_APPLICABLE, reason)


def skipped(attack: str, family: str, parties: tuple[str, ...], reason: str, columns: int = 0) -> AttackOutcome:
    return AttackOutcome(attack, family, parties, AttackStatus.SKIPPED, reason, columns=columns)
