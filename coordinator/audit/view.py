"""The coordinator's view of each party, rebuilt from a transcript alone.

From the messages of one PPLP session (Mangasarian 2011) the coordinator holds, per party j:
the sizes n_j, n_free, n_bounded (Hello); the session's mode, k and whether x_j is revealed
(MaskRequest); the masked block (MaskedBlock): the dense product M_j = A_d B_d' (m x k) with
B_d c_d, the monomial part A_b D P with P'D c_b and the scaled bounds, and in rows mode the
bound rows B_b'; what it sent back (SolutionNotice: u and y_j); and x_j when revealed
(DecodeReply). :class:`PartyView` holds that.

The dense attacks work on a :class:`MaskedProduct`: a masked product *attributed to a set of
parties*. In the plain protocol each party's M_j is its own product (one party); a protocol
that only reveals a sum sum_j A_j B_j' (secure aggregation) contributes one product attributed
to all its parties, and the same attacks apply to it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.transcript import Direction, Transcript
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import matrix_from_pb, vector_from_pb
from securelp.solvers.errors import InputError, ProtocolError

MODES = {pb.BOUNDS_MODE_MONOMIAL: "monomial", pb.BOUNDS_MODE_ROWS: "rows"}


@dataclass(frozen=True, eq=False)
class PartyView:
    """Everything the coordinator received from, and sent to, one party."""

    party_id: str
    n_rows: int
    n_cols: int
    n_free: int
    n_bounded: int
    mode: str  # "monomial", "rows", or "" when no mask was requested
    k: int
    reveal_agreed: bool
    masked_a: np.ndarray  # (m, k) or (m, 0)
    masked_c: np.ndarray
    scaled_a: sp.csc_matrix  # (m, n_monomial)
    scaled_c: np.ndarray
    scaled_lower: np.ndarray
    scaled_upper: np.ndarray
    bound_rows: np.ndarray  # (n_bound_rows, k)
    bound_lower: np.ndarray
    bound_upper: np.ndarray
    status: int  # the SolveStatus sent (0: none sent)
    u: np.ndarray | None  # the shared u sent to the party (None: not optimal / none)
    y: np.ndarray | None  # the party's own monomial variables sent to it
    x: np.ndarray | None  # x_j, when the party revealed it
    masked: bool  # whether a MaskedBlock was received

    @property
    def n_dense(self) -> int:
        """Columns under the dense mask."""
        return int(self.masked_a.shape[1] and (self.n_free if self.mode == "monomial" else self.n_cols))

    @property
    def n_monomial(self) -> int:
        return int(self.scaled_a.shape[1])


@dataclass(frozen=True, eq=False)
class MaskedProduct:
    """A dense masked product M = A_d B' (m x k) and B c, attributed to ``parties``.

    ``n_cols`` is the number of dense-masked columns behind it (sum over its parties, in the
    parties' order); ``known_mask_rows`` rows of B' the coordinator received (rows mode), at
    ``known_mask_index`` (positions among the n_cols columns); ``u`` the u of the solution;
    ``x`` the revealed values of its columns in their original order, when every party
    revealed and the positions of the dense columns among each party's columns are known
    (rows mode: all columns are dense).
    """

    parties: tuple[str, ...]
    M: np.ndarray
    Bc: np.ndarray
    n_cols: int
    known_mask_rows: np.ndarray
    known_mask_index: np.ndarray
    known_mask_lower: np.ndarray
    known_mask_upper: np.ndarray
    u: np.ndarray | None
    x: np.ndarray | None
    x_values: np.ndarray | None  # revealed x values of these parties (positions unknown), or None

    @property
    def label(self) -> str:
        return "+".join(self.parties)


def _one(transcript: Transcript, party: str, type_name: str, direction: Direction):  # type: ignore[no-untyped-def]
    recs = transcript.of(party, type_name, direction)
    return recs[-1].message() if recs else None


def _where(transcript: Transcript, party: str) -> str:
    return f"{transcript.source or 'the transcript'}, party {party}"


def party_view(transcript: Transcript, party: str) -> PartyView:
    """The coordinator's view of ``party``.

    Raises
    ------
    InputError
        A message in the transcript is inconsistent (shapes, lengths), naming the party.
    """
    m = transcript.header.public.n_rows
    hello = _one(transcript, party, "securelp.v1.HelloReply", Direction.FROM_PARTY)
    req = _one(transcript, party, "securelp.v1.MaskRequest", Direction.TO_PARTY)
    blk = _one(transcript, party, "securelp.v1.MaskedBlock", Direction.FROM_PARTY)
    notice = _one(transcript, party, "securelp.v1.SolutionNotice", Direction.TO_PARTY)
    reply = _one(transcript, party, "securelp.v1.DecodeReply", Direction.FROM_PARTY)
    n_cols = int(hello.n_cols) if hello is not None else 0
    try:
        masked_a = np.zeros((m, 0))
        masked_c = scaled_c = scaled_lower = scaled_upper = bound_lower = bound_upper = np.zeros(0)
        scaled_a = sp.csc_matrix((m, 0))
        bound_rows = np.zeros((0, 0))
        if blk is not None:
            masked_a = np.asarray(matrix_from_pb(blk.masked_a, what="masked_a"))
            masked_c = vector_from_pb(blk.masked_c, expected=masked_a.shape[1], what="masked_c")
            scaled_a = sp.csc_matrix(matrix_from_pb(blk.scaled_a, what="scaled_a"))
            n_b = scaled_a.shape[1]
            scaled_c = vector_from_pb(blk.scaled_c, expected=n_b, what="scaled_c")
            scaled_lower = vector_from_pb(blk.scaled_lower, expected=n_b, what="scaled_lower")
            scaled_upper = vector_from_pb(blk.scaled_upper, expected=n_b, what="scaled_upper")
            bound_rows = np.asarray(matrix_from_pb(blk.bound_rows, what="bound_rows"))
            bound_lower = vector_from_pb(blk.bound_lower, expected=bound_rows.shape[0], what="bound_lower")
            bound_upper = vector_from_pb(blk.bound_upper, expected=bound_rows.shape[0], what="bound_upper")
            if masked_a.shape[0] != m or scaled_a.shape[0] != m:
                raise ProtocolError(f"its masked block has {masked_a.shape[0]} rows, the public rows {m}")
        u = y = x = None
        status = 0
        if notice is not None:
            status = int(notice.status)
            if notice.status == pb.SOLVE_STATUS_OPTIMAL:
                u = vector_from_pb(notice.u, what="u")
                y = vector_from_pb(notice.y, expected=scaled_a.shape[1], what="y")
        if reply is not None and reply.revealed:
            x = vector_from_pb(reply.x, expected=n_cols, what="x")
    except ProtocolError as exc:
        raise InputError(f"{_where(transcript, party)}: {exc}") from None
    return PartyView(
        party_id=party, n_rows=m, n_cols=n_cols, n_free=int(hello.n_free) if hello else 0,
        n_bounded=int(hello.n_bounded) if hello else 0, mode=MODES.get(req.bounds_mode, "") if req else "",
        k=int(req.k) if req else 0, reveal_agreed=bool(req.reveal) if req else False, masked_a=masked_a,
        masked_c=masked_c, scaled_a=scaled_a, scaled_c=scaled_c, scaled_lower=scaled_lower, scaled_upper=scaled_upper,
        bound_rows=bound_rows, bound_lower=bound_lower, bound_upper=bound_upper, status=status, u=u, y=y, x=x,
        masked=blk is not None)


def party_views(transcript: Transcript) -> list[PartyView]:
    """One view per party, in the roster's order."""
    return [party_view(transcript, p) for p in transcript.party_ids]


def plain_products(views: list[PartyView]) -> list[MaskedProduct]:
    """The dense masked products of the plain protocol: one per party that sent a dense block."""
    out = []
    for v in views:
        if not v.masked_a.shape[1]:
            continue
        n_d = v.n_dense
        known_index = np.zeros(0, dtype=np.int64)
        known_rows = np.zeros((0, v.masked_a.shape[1]))
        lo = hi = np.zeros(0)
        if v.mode == "rows" and v.bound_rows.shape[0]:
            known_rows, lo, hi = v.bound_rows, v.bound_lower, v.bound_upper
            # the party sends the rows of its bounded columns in their order, not their positions;
            # they are known only when every column is bounded
            known_index = (np.arange(n_d, dtype=np.int64) if v.bound_rows.shape[0] == n_d
                           else np.full(v.bound_rows.shape[0], -1, dtype=np.int64))
        x_ordered = v.x if (v.x is not None and v.mode == "rows") else None
        out.append(MaskedProduct(parties=(v.party_id,), M=v.masked_a, Bc=v.masked_c, n_cols=n_d,
                                 known_mask_rows=known_rows, known_mask_index=known_index, known_mask_lower=lo,
                                 known_mask_upper=hi, u=v.u, x=x_ordered, x_values=v.x))
    return out
