"""Sessions, LPs and planted weak parties for the leakage-audit tests (tests/unit/test_audit_*.py).

Netlib LPs come from ``tests/data/netlib`` (copied with their SOURCES.md so a clean clone runs
them); none of them was used while the attacks' thresholds were chosen. Random instances take a
generator from the caller (fixed seeds, and one test that draws fresh ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit import SessionAudit, Truth, audit_transcript, known_rows_from_truth
from securelp.coordinator.protocol import SessionConfig, SessionOutcome
from securelp.coordinator.simulation import owners_consent
from securelp.coordinator.transcript import Transcript, run_recorded
from securelp.coordinator.transport import InProcessLink
from securelp.party.policy import DEFAULT_POLICY, PartyPolicy
from securelp.party.session import PartySession
from securelp.solvers.lp import LinearProgram, read_mps
from securelp.solvers.lp.partition import ColumnBlock, parse_split, split_columns
from securelp.solvers.randomness import SecureRandom

NETLIB = Path(__file__).resolve().parent / "data" / "netlib"
NETLIB_NAMES = ("afiro", "sc50b", "kb2", "adlittle", "blend")


def netlib(name: str) -> LinearProgram:
    return read_mps(NETLIB / f"{name}.mps")


def sparse_lp(rng: np.random.Generator, m: int, n: int, per_col: int, *, values: str = "integer") -> LinearProgram:
    """``min c'x s.t. Ax >= b``, x free, A with ``per_col`` nonzeros per column, a known optimum
    (c = A'y with y >= 0, b = A x0 less slack on inactive rows). ``values``: ``integer`` (1..9 with
    random signs), ``unit`` (+-1 only, as in incidence matrices) or ``gaussian``; the first two give
    integer costs. ``per_col`` equal to m gives a dense block."""
    rows = np.concatenate([rng.choice(m, per_col, replace=False) for _ in range(n)])
    cols = np.repeat(np.arange(n), per_col)
    integer = values in ("integer", "unit")
    if values == "integer":
        vals = rng.integers(1, 10, rows.size) * rng.choice([-1, 1], rows.size)
    elif values == "unit":
        vals = rng.choice([-1, 1], rows.size)
    else:
        vals = rng.standard_normal(rows.size)
    A = sp.csc_matrix((vals.astype(float), (rows, cols)), shape=(m, n))
    x0 = rng.uniform(-5, 5, n)  # a real-valued optimum (integer ones repeat values, unlike real data)
    active = rng.random(m) < 0.5
    y = np.where(active, rng.integers(1, 10, m) if integer else rng.uniform(0, 10, m), 0).astype(float)
    c = A.T @ y
    b = A @ x0 - np.where(active, 0.0, 1.0)
    return LinearProgram(c=c, A=A, row_lower=b, row_upper=np.full(m, np.inf), col_lower=np.full(n, -np.inf),
                         col_upper=np.full(n, np.inf), name="sparse")


def bounded(lp: LinearProgram) -> LinearProgram:
    """The same LP with x >= 0 on every column (a bound on every column)."""
    n = lp.n_cols
    return LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper, col_lower=np.zeros(n),
                         col_upper=np.full(n, np.inf), sense=lp.sense, offset=lp.offset, name=lp.name)


class _FixedMaskRandom:
    """A party's randomness with a planted mask B (k x n_d) and the real generator for the rest."""

    def __init__(self, inner: object, mask: str) -> None:
        self._inner = inner
        self._mask = mask

    def standard_normal(self, shape: tuple[int, int]) -> np.ndarray:
        k, n = shape
        B = np.eye(k, n)
        if self._mask == "scaling":  # a positive scaling of each column, no mixing
            B = B * np.exp(np.linspace(-1.0, 1.0, n))[None, :]
        return B

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


class PlantedMaskSession(PartySession):
    """A party whose dense mask is planted: ``"identity"`` (it sends M = A_d, padded with zero
    columns) or ``"scaling"`` (M = A_d D). A weak party the audit must flag as fully recovered."""

    def __init__(self, block: ColumnBlock, mask: str, policy: PartyPolicy = DEFAULT_POLICY) -> None:
        super().__init__(block, policy=policy)
        self._rng = _FixedMaskRandom(self._rng, mask)


class UnflaggedMaskSession(PartySession):
    """A party whose masks come from a fixed key that it does not flag as a seed: the transcript says
    fresh entropy, so the audit treats the masks as such (no seed attack, which tries about 2,000
    guesses per party), and the test is repeatable. For tests whose outcome holds for any mask."""

    def __init__(self, block: ColumnBlock, key: str, policy: PartyPolicy = DEFAULT_POLICY) -> None:
        super().__init__(block, policy=policy)
        rng = SecureRandom(key, label=f"party/{block.party_id}")
        rng.reproducible = False
        self._rng = rng


def run_session(lp: LinearProgram, *, parties: int = 3, split: Sequence[int] | None = None, mode: str = "monomial",
                reveal: bool = True, k: int | None = None, planted: dict[str, str] | None = None,
                path: str | None = None, seed: str | None = None,
                masks: str | None = "audit-tests") -> tuple[SessionOutcome, Transcript, list[ColumnBlock]]:
    """One in-process session with every message recorded; ``planted`` maps party ids to a planted
    mask (see :class:`PlantedMaskSession`). ``seed``: masks drawn in the flagged reproducible mode
    (the audit then runs the seed attack). Without it, ``masks`` keys masks the parties do not flag
    (:class:`UnflaggedMaskSession`: repeatable, audited as fresh), and ``masks=None`` draws them
    from fresh OS entropy."""
    sizes = list(split) if split is not None else parse_split(None, lp.n_cols, parties)
    public, blocks = split_columns(lp, sizes)
    planted = planted or {}
    config = SessionConfig(bounds_mode=mode, reveal=reveal, k=k)
    policy = owners_consent(config)  # the owners agree to what the session asks

    def session(b: ColumnBlock) -> PartySession:
        if b.party_id in planted:
            return PlantedMaskSession(b, planted[b.party_id], policy)
        if seed is None and masks is not None:
            return UnflaggedMaskSession(b, f"{masks}/{b.party_id}", policy)
        return PartySession(b, seed=None if seed is None else f"{seed}/{b.party_id}", policy=policy)

    sessions = [session(b) for b in blocks]
    links = [InProcessLink(s) for s in sessions]
    outcome, transcript = run_recorded(public, links, config, central=lp, path=path)
    return outcome, transcript, blocks


def audit(transcript: Transcript, blocks: Sequence[ColumnBlock] | None = None, *, known: str | None = None,
          budget_s: float | None = 60.0, seed: int | None = 0) -> SessionAudit:
    """The audit of a transcript, evaluated against ``blocks`` when given."""
    truth = Truth.of(blocks) if blocks is not None else None
    known_rows = known_rows_from_truth(truth, [b.party_id for b in blocks], known) if (known and truth) else None
    return audit_transcript(transcript, truth=truth, known_rows=known_rows, budget_s=budget_s, seed=seed)
