"""The coordinator's view of each party, rebuilt from a transcript alone.

From the messages of one PPLP session (Mangasarian 2011) the coordinator holds, per party j:
the sizes n_j, n_free, n_bounded (Hello); the session's mode, k and whether x_j is revealed
(MaskRequest); the masked block (MaskedBlock): the dense product M_j = A_d B_d' (m x k) with
B_d c_d, the monomial part A_b D P with P'D c_b and the scaled bounds, and in rows mode the
bound rows B_b'; what it sent back (SolutionNotice: u and y_j); and x_j when revealed
(DecodeReply). :class:`PartyView` holds that.

The dense attacks work on a :class:`MaskedProduct`: a masked product *attributed to a set of
parties*. In the plain protocol each party's M_j is its own product (one party); under secure
aggregation (``securelp.party.aggregation``) a party sends a share S_j in Z_2^64 instead, and
the coordinator holds only the sum: :func:`aggregated_products` adds the shares, decodes
sum_j A_d,j B_d,j' and sum_j B_d,j c_d,j with the session's fixed-point precision, and returns
one product attributed to all the parties that aggregated; the same attacks apply to it
unchanged. Its columns are the aggregating parties' dense columns, party after party.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.transcript import Direction, Transcript
from securelp.party import aggregation as agg
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
    #: secure aggregation: the party's shares (uint64, m x k and k) instead of masked_a/masked_c,
    #: and the session's fixed-point precision (fraction bits of AB' and of Bc)
    share_a: np.ndarray | None = None
    share_c: np.ndarray | None = None
    fraction_bits: tuple[int, int] = (0, 0)
    #: the coordinator asked the party for secure aggregation in its hello (the party then drew a key)
    aggregation_requested: bool = False
    #: the party drew its masks from a seed (reproducible-simulation mode, flagged in its MaskedBlock)
    reproducible: bool = False
    #: serialized bytes of every message the party sent, and of its MaskedBlock (sizes travel in the
    #: clear under TLS)
    sent_bytes: int = 0
    block_bytes: int = 0

    @property
    def aggregated(self) -> bool:
        """Whether the party's dense product reached the coordinator only as a share of the sum."""
        return self.share_a is not None

    @property
    def n_dense(self) -> int:
        """Columns under the dense mask."""
        dense = self.masked_a.shape[1] or self.aggregated
        return int(dense and (self.n_free if self.mode == "monomial" else self.n_cols))

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
    #: the values of x_values the product's own columns can take (what the revealed solution leaves
    #: after the monomial columns are matched, :func:`securelp.coordinator.audit.monomial.match_solution`);
    #: None: any of x_values
    x_candidates: np.ndarray | None = None

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
    hello_req = _one(transcript, party, "securelp.v1.HelloRequest", Direction.TO_PARTY)
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
        share_a = share_c = None
        fraction_bits = (0, 0)
        if blk is not None and blk.HasField("share_a"):
            k = int(req.k) if req is not None else 0
            if (int(blk.share_a.rows), int(blk.share_a.cols)) != (m, k) or len(blk.share_a.values) != 8 * m * k \
                    or (int(blk.share_c.rows), int(blk.share_c.cols)) != (1, k) or len(blk.share_c.values) != 8 * k:
                raise ProtocolError(f"its aggregation shares are not {m} x {k} and {k} ring elements")
            share_a = np.frombuffer(blk.share_a.values, dtype="<u8").astype(np.uint64).reshape(m, k)
            share_c = np.frombuffer(blk.share_c.values, dtype="<u8").astype(np.uint64)
            if req is None or not req.HasField("aggregation"):
                raise ProtocolError("it sent aggregation shares without an aggregation in its mask request")
            fraction_bits = (int(req.aggregation.fraction_bits_a), int(req.aggregation.fraction_bits_c))
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
        masked=blk is not None, share_a=share_a, share_c=share_c, fraction_bits=fraction_bits,
        reproducible=bool(blk.reproducible) if blk is not None else False,
        aggregation_requested=bool(hello_req.secure_aggregation) if hello_req is not None else False,
        sent_bytes=sum(r.size for r in transcript.of(party, None, Direction.FROM_PARTY)),
        block_bytes=sum(r.size for r in transcript.of(party, "securelp.v1.MaskedBlock", Direction.FROM_PARTY)))


def party_views(transcript: Transcript) -> list[PartyView]:
    """One view per party, in the roster's order."""
    return [party_view(transcript, p) for p in transcript.party_ids]


def _known_mask_rows(views: list[PartyView], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bound rows of ``views`` (rows mode) stacked, and their positions among the columns of the
    product the views contribute to, party after party (-1 where a party's positions are unknown: it
    has free columns, whose rows it does not send)."""
    rows, index, lo, hi = [np.zeros((0, k))], [np.zeros(0, dtype=np.int64)], [np.zeros(0)], [np.zeros(0)]
    offset = 0
    for v in views:
        n_d = v.n_dense
        if v.mode == "rows" and v.bound_rows.shape[0]:
            rows.append(v.bound_rows)
            lo.append(v.bound_lower)
            hi.append(v.bound_upper)
            # a party sends the rows of its bounded columns in their order, not their positions; they are
            # known only when every column is bounded
            index.append(offset + np.arange(n_d, dtype=np.int64) if v.bound_rows.shape[0] == n_d
                         else np.full(v.bound_rows.shape[0], -1, dtype=np.int64))
        offset += n_d
    return np.vstack(rows), np.concatenate(index), np.concatenate(lo), np.concatenate(hi)


def plain_products(views: list[PartyView]) -> list[MaskedProduct]:
    """The dense masked products of the plain protocol: one per party that sent a dense block."""
    out = []
    for v in views:
        if not v.masked_a.shape[1]:
            continue
        known_rows, known_index, lo, hi = _known_mask_rows([v], v.masked_a.shape[1])
        x_ordered = v.x if (v.x is not None and v.mode == "rows") else None
        out.append(MaskedProduct(parties=(v.party_id,), M=v.masked_a, Bc=v.masked_c, n_cols=v.n_dense,
                                 known_mask_rows=known_rows, known_mask_index=known_index, known_mask_lower=lo,
                                 known_mask_upper=hi, u=v.u, x=x_ordered, x_values=v.x))
    return out


def aggregated_products(views: list[PartyView]) -> list[MaskedProduct]:
    """Under secure aggregation: the one product the coordinator holds, the sum of the shares in
    Z_2^64 decoded with the session's precision, attributed to every party that aggregated (their
    dense columns party after party). None without shares."""
    shared = [v for v in views if v.aggregated]
    if not shared:
        return []
    f_a, f_c = shared[0].fraction_bits
    M = agg.decode(agg.sum_shares([v.share_a for v in shared]), f_a)  # type: ignore[misc]
    Bc = agg.decode(agg.sum_shares([v.share_c for v in shared]), f_c)  # type: ignore[misc]
    known_rows, known_index, lo, hi = _known_mask_rows(shared, M.shape[1])
    revealed = all(v.x is not None for v in shared)
    x_values = np.concatenate([v.x for v in shared]) if revealed else None  # type: ignore[misc]
    x_ordered = x_values if revealed and all(v.mode == "rows" for v in shared) else None
    return [MaskedProduct(parties=tuple(v.party_id for v in shared), M=M, Bc=Bc, n_cols=sum(v.n_dense for v in shared),
                          known_mask_rows=known_rows, known_mask_index=known_index, known_mask_lower=lo,
                          known_mask_upper=hi, u=shared[0].u, x=x_ordered, x_values=x_values)]


def own_product(party_id: str, M: np.ndarray, Bc: np.ndarray, n_cols: int) -> MaskedProduct:
    """A party's own contribution to an aggregated product (what a colluding party brings)."""
    k = M.shape[1]
    return MaskedProduct(parties=(party_id,), M=M, Bc=Bc, n_cols=n_cols, known_mask_rows=np.zeros((0, k)),
                         known_mask_index=np.zeros(0, dtype=np.int64), known_mask_lower=np.zeros(0),
                         known_mask_upper=np.zeros(0), u=None, x=None, x_values=None)
