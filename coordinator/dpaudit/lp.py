"""The secure LP session (Mangasarian, *Privacy-Preserving Linear Programming*, Optim. Lett. 2011)
as seen by its coordinator, audited for distinguishability.

The secure LP makes no differential-privacy claim: its masks hide a party's block up to what the
leakage statement names, and every party learns the optimal value, a deterministic function of
all the data. The audit therefore reports the *measured* distinguishability of two neighbouring
inputs -- one coefficient of one party's block changed -- as ``no claim``, not pass or fail.

Each run is one in-process session (every message round-trips through protobuf) with fresh masks;
the view is the session's transcript (:func:`~securelp.coordinator.dpaudit.views.transcript_view`:
every field of every message the coordinator sent or received, without session ids or timings).
Transcripts recorded over gRPC (``--transcript``) are audited the same way with
:class:`~securelp.coordinator.dpaudit.views.TranscriptViews`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from securelp.coordinator.dpaudit.views import View, transcript_view
from securelp.solvers.errors import InputError
from securelp.solvers.lp import LinearProgram
from securelp.solvers.randomness import SecureRandom

__all__ = ["LpSessionViews", "small_lp"]


def small_lp(c1: float = -2.0) -> LinearProgram:
    """A 3-row, 4-column LP with bounded columns (``x >= 0``); ``c1`` is column 1's cost (the second
    column of the first party's block when split in two)."""
    A = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 0.0, 1.0], [0.0, 1.0, 3.0, 1.0]])
    return LinearProgram(c=np.array([-1.0, c1, -1.0, -1.0]), A=A, row_lower=np.full(3, -np.inf),
                         row_upper=np.array([4.0, 5.0, 6.0]), col_lower=np.zeros(4), col_upper=np.full(4, np.inf))


class LpSessionViews:
    """View source of secure LP sessions on two LPs that differ in one coefficient.

    Parameters
    ----------
    lp0, lp1:
        The neighbouring LPs (default :func:`small_lp` with column 1's cost -2 and -2.5).
    parties:
        Column blocks (near-equal, contiguous).
    bounds:
        ``monomial`` or ``rows``.
    """

    protocol = "lp"
    claimed_eps = None

    def __init__(self, lp0: LinearProgram | None = None, lp1: LinearProgram | None = None, *, parties: int = 2,
                 bounds: str = "monomial") -> None:
        from securelp.coordinator.api.lp import split_problem
        from securelp.coordinator.protocol import SessionConfig

        lp0 = small_lp(-2.0) if lp0 is None else lp0
        lp1 = small_lp(-2.5) if lp1 is None else lp1
        if lp0.A.shape != lp1.A.shape:
            raise InputError(f"the two LPs must have the same shape, got {lp0.A.shape} and {lp1.A.shape}")
        self.splits = (split_problem(lp0, parties), split_problem(lp1, parties))
        self.config = SessionConfig(bounds_mode=bounds, reveal=False)
        diff = int(np.count_nonzero(lp0.c != lp1.c)) + int((lp0.A != lp1.A).nnz)
        self._setup = {"rows": int(lp0.A.shape[0]), "columns": int(lp0.A.shape[1]), "parties": parties,
                       "bounds": bounds, "coefficients_changed": diff,
                       "view": "the session transcript: every field of every message (no session ids, no timings)"}

    def describe(self) -> dict[str, Any]:
        return dict(self._setup)

    def views(self, side: int, runs: int, rng: SecureRandom) -> list[View]:
        from securelp.coordinator.protocol import run_secure_lp
        from securelp.coordinator.simulation import links_to, owners_consent
        from securelp.coordinator.transcript import run_recorded
        from securelp.party.session import PartySession

        public, blocks = self.splits[side]
        out: list[View] = []
        for _ in range(runs):
            # masks from the parties' own entropy, or, in a reproducible audit, from seeds the audit draws
            seeds = [rng.bytes(16).hex() if rng.reproducible else None for _ in blocks]
            sessions = [PartySession(b, seed=s, policy=owners_consent(self.config)) for b, s in zip(blocks, seeds)]
            with links_to(sessions, "inprocess") as links:
                _, transcript = run_recorded(public, links, self.config, run=run_secure_lp)
            out.append(transcript_view(transcript))
        return out
