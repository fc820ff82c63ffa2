"""The coordinator's side of PPLP (Mangasarian 2011), free of any transport.

Steps (docs/explanation/architecture.md): (1) hello: parties report n_j only; k is fixed (default: the number
of dense-masked columns, i.e. n when every column is free; ``k < n`` is refused).
(2) mask: each party sends A_.j B_.j' and B_.j c_j (plus its monomial or bound-row
parts). (3) the coordinator sums the products, AB' = sum_j A_.j B_.j' and
Bc = sum_j B_.j c_j, and solves

    min (Bc)'u + sum_j (c~_j)'y_j   s.t.  lo <= AB'u + sum_j A~_j y_j <= hi,
                                          l~_j <= y_j <= u~_j,  [rows mode: l_b <= B_b'u <= u_b]

with u free; (4) it sends each party the status, the optimal value, u and only that
party's own y_j; each party decodes x_j and reveals it only if the session agreed.
Every party learns the status, also when the LP is infeasible or unbounded.

Each party reports its policy with its hello (``securelp.party.policy``); a session whose
request some party would refuse (a bounds mode it does not allow, x_j it keeps) stops there,
before any masked data moves, with an error naming the party.

Secure aggregation (``SessionConfig.secure_aggregation``; ``securelp.party.aggregation``): the
parties with dense-masked columns agree pairwise keys through the coordinator (X25519 public keys
in their hellos, all of them relayed in the MaskRequest) and send fixed-point shares in Z_2^64
whose sum is the encoded sum of their products; the coordinator adds the shares and decodes AB'
and Bc, and never holds one party's dense product. It needs every share: a party lost after the
key agreement ends the session, naming that party, with nothing unmasked (there is no dropout
recovery). Bounded columns in monomial mode stay per party (a positive monomial map of each).

All of it runs over ``PartyLink`` objects, so the same code drives in-process
simulations and gRPC deployments in both connection directions (the protocol runtime,
docs/protocol.md); while it solves, it watches the links, so a party that dies or stops is
reported within the runtime's keepalive, not when the solve ends. The parsed blocks are kept per party in
``TranscriptEntry`` objects; the recorded transcript of every message, which the leakage
attacks read, is ``securelp.coordinator.transcript``'s.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.drive import close_all, while_alive
from securelp.coordinator.drive import each as _each
from securelp.coordinator.sizing import check_coordinator_fits
from securelp.coordinator.transport import PartyLink
from securelp.party import aggregation as agg
from securelp.party.policy import PartyPolicy
from securelp.party.session import PROTOCOL_VERSION
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import matrix_from_pb, vector_from_pb, vector_to_pb
from securelp.solvers.errors import ConfigError, InputError, ProtocolError
from securelp.solvers.lp import HighsBackend, LinearProgram, SolveStatus
from securelp.solvers.lp.partition import PublicRows

log = logging.getLogger(__name__)

T = TypeVar("T")

BOUNDS_MODES = {"monomial": pb.BOUNDS_MODE_MONOMIAL, "rows": pb.BOUNDS_MODE_ROWS}

#: the default ``k`` is the number ``n`` of dense-masked columns plus this many. With ``k = n`` the
#: stacked masks form a square Gaussian matrix, whose condition number has a heavy tail: in about
#: 1 of 200 sessions of Mangasarian's Example 2 (seed 56 of ``simulate(..., seed=i)``, i < 200)
#: HiGHS ended the transformed LP "Unknown" whatever its solver or options, and the demo failed
#: with exit code 8. An ``n x (n + p)`` Gaussian matrix is singular-ish with a probability that
#: falls like ``eps^(p+1)``: with 10 extra columns all 200 sessions were optimal (largest relative
#: distance to the central optimum 2.1e-12), the transformed LP 10 columns wider
K_MARGIN = 10


def session_k(n_dense: int, given: int | None) -> tuple[int, str]:
    """The ``k`` a session with ``n_dense`` dense-masked columns uses (``given``, else n +
    :data:`K_MARGIN`) and how messages name it: ``"--k 5000"`` or ``"k = 42 (n + 10)"``."""
    if given is not None:
        return int(given), f"--k {int(given)}"
    return n_dense + K_MARGIN, f"k = {n_dense + K_MARGIN} (n + {K_MARGIN})"


_STATUS_TO_PB = {
    SolveStatus.OPTIMAL: pb.SOLVE_STATUS_OPTIMAL,
    SolveStatus.INFEASIBLE: pb.SOLVE_STATUS_INFEASIBLE,
    SolveStatus.UNBOUNDED: pb.SOLVE_STATUS_UNBOUNDED,
    SolveStatus.INFEASIBLE_OR_UNBOUNDED: pb.SOLVE_STATUS_INFEASIBLE_OR_UNBOUNDED,
    SolveStatus.LIMIT: pb.SOLVE_STATUS_LIMIT,
    SolveStatus.ERROR: pb.SOLVE_STATUS_ERROR,
}


@dataclass(frozen=True)
class SessionConfig:
    """What the parties agree on for one session.

    Parameters
    ----------
    k : dimension of the dense mask (at least the number n of dense-masked columns); None means
        n + :data:`K_MARGIN`.
    bounds_mode : "monomial" (default) or "rows".
    reveal : whether the coordinator asks the parties for their decoded x_j (default False, as a
        party's default policy keeps it; a party whose policy keeps x_j is named before any mask).
    session_id : an id for the session; empty means a fresh random one.
    deadline_s : per-call deadline (used by transports that honour it).
    time_limit_s : solver time limit, or None.
    secure_aggregation : sum the dense products under secure aggregation (the coordinator
        receives shares, never a party's own product); needs two or more parties with
        dense-masked columns.
    """

    k: int | None = None
    bounds_mode: str = "monomial"
    reveal: bool = False
    session_id: str = ""
    deadline_s: float = 120.0
    time_limit_s: float | None = None
    secure_aggregation: bool = False

    def __post_init__(self) -> None:
        if self.bounds_mode not in BOUNDS_MODES:
            raise ConfigError(f"bounds mode {self.bounds_mode!r} is not one of {', '.join(BOUNDS_MODES)}")
        if self.k is not None and self.k < 1:
            raise ConfigError(f"k must be a positive integer, got {self.k}")
        if self.deadline_s <= 0:
            raise ConfigError(f"deadline must be positive, got {self.deadline_s}")


@dataclass(frozen=True, eq=False)
class TranscriptEntry:
    """The parsed block and the revealed x_j of one party."""

    party_id: str
    hello: pb.HelloReply
    masked_a: np.ndarray
    masked_c: np.ndarray
    scaled_a: sp.csc_matrix
    scaled_c: np.ndarray
    scaled_lower: np.ndarray
    scaled_upper: np.ndarray
    bound_rows: np.ndarray
    bound_lower: np.ndarray
    bound_upper: np.ndarray
    x: np.ndarray | None
    #: secure aggregation: the party's shares of the summed dense products (uint64, Z_2^64), m x k
    #: and k; ``masked_a`` and ``masked_c`` are then empty
    share_a: np.ndarray | None = None
    share_c: np.ndarray | None = None

    @property
    def has_dense(self) -> bool:
        """Whether the party contributed a dense product (in the clear or as a share)."""
        return bool(self.masked_a.shape[1]) or self.share_a is not None


@dataclass(frozen=True, eq=False)
class AggregationReport:
    """How the dense products were summed under secure aggregation (no private data).

    ``encoding_error_a``/``_c``: the largest difference, per entry, between the decoded sums and the
    sums of the parties' float products (each party rounds to a multiple of 2^-f);
    ``relative_error_a``/``_c``: the same relative to the magnitude bound 2^(61 - f) of the sum.
    ``keys_bound``: every aggregation key carried a certificate binding (the parties checked them).
    ``free_columns``: dense-masked columns of the participants whose mask rows the coordinator does
    not receive (all of them in monomial mode; the free ones in rows mode). No participant (every
    column bounded, monomial mode): nothing was aggregated.
    """

    participants: tuple[str, ...]
    fraction_bits_a: int
    fraction_bits_c: int
    encoding_error_a: float
    encoding_error_c: float
    relative_error_a: float
    relative_error_c: float
    keys_bound: bool
    free_columns: int

    def as_dict(self) -> dict[str, object]:
        return {"participants": list(self.participants), "ring": "Z_2^64", "free_columns": self.free_columns,
                "fraction_bits_a": self.fraction_bits_a, "fraction_bits_c": self.fraction_bits_c,
                "encoding_error_a": self.encoding_error_a, "encoding_error_c": self.encoding_error_c,
                "relative_error_a": self.relative_error_a, "relative_error_c": self.relative_error_c,
                "keys_bound": self.keys_bound}


@dataclass(frozen=True, eq=False)
class PartyReport:
    """Per-party figures of one session (no private data)."""

    party_id: str
    n_cols: int
    n_free: int
    n_bounded: int
    n_dense_masked: int
    n_monomial: int
    n_bound_rows: int
    bytes_sent: int
    bytes_received: int
    mask_seconds: float
    decode_seconds: float
    revealed: bool
    reproducible: bool
    x_summary: dict[str, float] | None
    #: what the party agreed to (from its hello; None for a version-1 party)
    policy: PartyPolicy | None = None
    #: its dense product reached the coordinator only as a share of the sum (secure aggregation)
    aggregated: bool = False
    #: the format of the file in which the party keeps its own x_j ("csv", "npz", "json"; ``securelp party
    #: --out``), as it reported with its decode reply; "" when it reported none. Never the path.
    saved_as: str = ""


@dataclass(frozen=True, eq=False)
class SessionOutcome:
    """The result of one secure session, as the coordinator knows it."""

    session_id: str
    status: SolveStatus
    backend_status: str
    objective: float
    x: np.ndarray | None
    k: int
    transport: str
    bounds_mode: str
    reproducible: bool
    n_rows: int
    n_cols: int
    iterations: int
    parties: tuple[PartyReport, ...]
    timings_s: dict[str, float]
    transcript: tuple[TranscriptEntry, ...] = field(repr=False)
    central_objective: float | None = None
    central_status: SolveStatus | None = None
    central_time_s: float | None = None
    feasibility_violation: float | None = None
    aggregation: AggregationReport | None = None
    #: the optimal row duals y of the original rows (the transformed LP's duals of its first m rows:
    #: B A'y = B c with B of full column rank gives A'y = c, so they are duals of the original LP);
    #: None unless optimal
    row_duals: np.ndarray | None = field(default=None, repr=False)

    @property
    def objective_rel_diff(self) -> float | None:
        if self.central_objective is None or not np.isfinite(self.objective) or not np.isfinite(self.central_objective):
            return None
        return abs(self.objective - self.central_objective) / max(1.0, abs(self.central_objective))


def _close_all(links: Sequence[PartyLink], session_id: str, reason: str,
               pool: ThreadPoolExecutor | None = None) -> None:
    """Tell every party the session is over (best effort; concurrently when a pool is given)."""
    close_all(links, lambda link: link.close(pb.CloseRequest(session_id=session_id, reason=reason)), pool)


def _check_blocks_against_roster(public: PublicRows, links: Sequence[PartyLink],
                                 hellos: Sequence[pb.HelloReply]) -> None:
    """Refuse (InputError, before any masked data moves) a party whose block is not the one the
    split gave it: another column count, or another split id (a stale block of an earlier split,
    a block of another LP with the same m). A party that reports no split id (a block file or a
    party from before split ids existed) is accepted with a warning."""
    roster = public.roster
    if roster is None:
        return
    columns = roster.columns
    for link, h in zip(links, hellos):
        pid = link.party_id
        reported = link.reported_split_id
        if reported and reported != roster.split_id:
            raise InputError(f"party {pid}: its block belongs to another split (split id {reported[:12]}..., the "
                             f"public rows are from split {roster.split_id[:12]}...): a stale block or one of another "
                             "LP; give every party its block from the same `securelp split`")
        if int(h.n_cols) != columns[pid]:
            raise InputError(f"party {pid}: its block has {int(h.n_cols)} columns but the split gave it "
                             f"{columns[pid]}: the block is not from this split")
        if not reported:
            log.warning("party %s reported no split id (a block or a securelp party from before split ids): "
                        "cannot confirm that its block belongs to this split", pid)


def _party_policies(links: Sequence[PartyLink], hellos: Sequence[pb.HelloReply], config: SessionConfig
                    ) -> list[PartyPolicy]:
    """Each party's reported policy; refuse (ConfigError, before any masked data moves) a session
    that asks some party for what its policy does not allow, naming the party."""
    policies = []
    for link, h in zip(links, hellos):
        pid = link.party_id
        if not h.HasField("policy"):
            raise ProtocolError(f"party {pid} reported no policy with its hello")
        policy = PartyPolicy.from_pb(h.policy, who=f"party {pid}")
        if config.bounds_mode not in policy.allow_bounds:
            raise ConfigError(f"party {pid} does not allow bounds mode {config.bounds_mode} (it allows: "
                              f"{', '.join(sorted(policy.allow_bounds))}); run with --bounds "
                              f"{min(policy.allow_bounds)}, or start the party with --allow-bounds "
                              f"{config.bounds_mode}")
        if config.reveal and not policy.reveal:
            raise ConfigError(f"party {pid} does not reveal x_j (run with --no-reveal, or start the party with "
                              "--reveal)")
        policies.append(policy)
    return policies


@dataclass(frozen=True)
class _AggregationPlan:
    """Who aggregates and the fixed-point precision (from the hellos)."""

    participants: tuple[str, ...]
    request: pb.Aggregation
    keys_bound: bool
    free_columns: int

    def report(self) -> AggregationReport:
        f_a, f_c = int(self.request.fraction_bits_a), int(self.request.fraction_bits_c)
        p = len(self.participants)
        err_a, err_c = agg.encoding_error_bound(p, f_a), agg.encoding_error_bound(p, f_c)
        return AggregationReport(self.participants, f_a, f_c, err_a, err_c,
                                 err_a / 2.0 ** (agg.SUM_BITS - f_a), err_c / 2.0 ** (agg.SUM_BITS - f_c),
                                 self.keys_bound, self.free_columns)


def _aggregation_plan(links: Sequence[PartyLink], hellos: Sequence[pb.HelloReply], dense_j: Sequence[int]
                      ) -> _AggregationPlan:
    """The secure-aggregation parameters: every party with dense-masked columns takes part (none, when
    every column is bounded in monomial mode: nothing to aggregate; one is refused, as its share would
    be its own product), with the key it reported; the fixed-point precision from their magnitude
    bounds (``securelp.party.aggregation.fraction_bits``)."""
    peers = []
    free = 0
    for link, h, nd in zip(links, hellos, dense_j):
        if not nd:
            continue
        free += int(h.n_free)
        key = h.aggregation_key
        if not h.HasField("aggregation_key") or len(key.public_key) != agg.PUBLIC_KEY_BYTES:
            raise ProtocolError(f"party {link.party_id} sent no valid aggregation key with its hello")
        peers.append(pb.AggregationPeer(party_id=link.party_id, key=key))
    if len(peers) == 1:
        raise ConfigError(f"secure aggregation needs two or more parties with dense-masked columns; this session has "
                          f"one, {peers[0].party_id}, whose share would be its own product; run without "
                          "--secure-aggregation")
    request = pb.Aggregation(peers=peers, fraction_bits_a=agg.fraction_bits([p.key.magnitude_a for p in peers]),
                             fraction_bits_c=agg.fraction_bits([p.key.magnitude_c for p in peers]))
    bound = bool(peers) and all(p.key.certificate and p.key.signature for p in peers)
    return _AggregationPlan(tuple(p.party_id for p in peers), request, bound, free)


def _aggregate(entries: Sequence[TranscriptEntry], plan: _AggregationPlan) -> tuple[np.ndarray, np.ndarray]:
    """AB' and Bc from the parties' shares: their sum in Z_2^64, decoded."""
    shares = [e for e in entries if e.share_a is not None]
    assert len(shares) == len(plan.participants)
    total_a = agg.sum_shares([e.share_a for e in shares])  # type: ignore[misc]
    total_c = agg.sum_shares([e.share_c for e in shares])  # type: ignore[misc]
    return agg.decode(total_a, plan.request.fraction_bits_a), agg.decode(total_c, plan.request.fraction_bits_c)


def _finite(arr: np.ndarray | sp.spmatrix, party: str, what: str) -> None:
    data = arr.data if sp.issparse(arr) else arr
    if not np.all(np.isfinite(data)):
        raise ProtocolError(f"party {party} sent NaN or Inf in {what}")


def _ring_from_pb(msg: pb.RingMatrix, rows: int, cols: int, what: str) -> np.ndarray:
    """A ``RingMatrix`` of the expected shape as a uint64 array (elements of Z_2^64)."""
    if (int(msg.rows), int(msg.cols)) != (rows, cols) or len(msg.values) != 8 * rows * cols:
        raise ProtocolError(f"{what}: expected {rows} x {cols} ring elements, got {int(msg.rows)} x {int(msg.cols)} "
                            f"in {len(msg.values)} bytes")
    return np.frombuffer(msg.values, dtype="<u8").astype(np.uint64).reshape(rows, cols)


def _parse_block(link: PartyLink, blk: pb.MaskedBlock, hello: pb.HelloReply, m: int, k: int, mode: int,
                 aggregated: bool = False) -> TranscriptEntry:
    pid = link.party_id
    if blk.party_id != pid:
        raise ProtocolError(f"party {pid} answered as {blk.party_id!r}")
    masked_a = np.asarray(matrix_from_pb(blk.masked_a, what=f"party {pid} masked_a"))
    n_dense = hello.n_free if mode == pb.BOUNDS_MODE_MONOMIAL else hello.n_cols
    n_mono = hello.n_bounded if mode == pb.BOUNDS_MODE_MONOMIAL else 0
    n_rows_b = hello.n_bounded if mode == pb.BOUNDS_MODE_ROWS else 0
    exp_cols = k if n_dense and not aggregated else 0
    if masked_a.shape != (m, exp_cols):
        if aggregated:
            raise ProtocolError(f"party {pid} sent its dense product in the clear in a secure-aggregation session")
        raise ProtocolError(f"party {pid}: masked block is {masked_a.shape[0]} x {masked_a.shape[1]}, expected {m} x {exp_cols}")
    masked_c = vector_from_pb(blk.masked_c, expected=exp_cols, what=f"party {pid} masked_c")
    share_a = share_c = None
    if aggregated:
        share_a = _ring_from_pb(blk.share_a, m, k, f"party {pid} share_a")
        share_c = _ring_from_pb(blk.share_c, 1, k, f"party {pid} share_c").ravel()
    elif blk.HasField("share_a") or blk.HasField("share_c"):
        raise ProtocolError(f"party {pid} sent aggregation shares it was not asked for")
    scaled_a = matrix_from_pb(blk.scaled_a, what=f"party {pid} scaled_a")
    scaled_a = sp.csc_matrix(scaled_a)
    if scaled_a.shape != (m, n_mono):
        raise ProtocolError(f"party {pid}: monomial block is {scaled_a.shape}, expected {(m, n_mono)}")
    scaled_c = vector_from_pb(blk.scaled_c, expected=n_mono, what=f"party {pid} scaled_c")
    scaled_lower = vector_from_pb(blk.scaled_lower, expected=n_mono, what=f"party {pid} scaled_lower")
    scaled_upper = vector_from_pb(blk.scaled_upper, expected=n_mono, what=f"party {pid} scaled_upper")
    bound_rows = np.asarray(matrix_from_pb(blk.bound_rows, what=f"party {pid} bound_rows"))
    if bound_rows.shape[0] != n_rows_b or (n_rows_b and bound_rows.shape[1] != k):
        raise ProtocolError(f"party {pid}: bound rows are {bound_rows.shape}, expected ({n_rows_b}, {k})")
    bound_lower = vector_from_pb(blk.bound_lower, expected=n_rows_b, what=f"party {pid} bound_lower")
    bound_upper = vector_from_pb(blk.bound_upper, expected=n_rows_b, what=f"party {pid} bound_upper")
    for arr, what in ((masked_a, "masked_a"), (masked_c, "masked_c"), (scaled_a, "scaled_a"), (scaled_c, "scaled_c"),
                      (bound_rows, "bound_rows")):
        _finite(arr, pid, what)
    for lo, hi, what in ((scaled_lower, scaled_upper, "monomial bounds"), (bound_lower, bound_upper, "bound rows")):
        if np.isnan(lo).any() or np.isnan(hi).any() or np.any(lo > hi):
            raise ProtocolError(f"party {pid} sent invalid {what}")
    return TranscriptEntry(pid, hello, masked_a, masked_c, scaled_a, scaled_c, scaled_lower, scaled_upper,
                           bound_rows, bound_lower, bound_upper, None, share_a, share_c)


def _dense_to_csc(M: np.ndarray) -> sp.csc_matrix:
    """CSC of a dense matrix without scipy's COO detour (a masked sum has no zero entries
    with probability 1; if it has some, the general conversion drops them)."""
    m, k = M.shape
    if m == 0 or k == 0 or not np.all(M):
        return sp.csc_matrix(M)
    indptr = np.arange(0, m * k + 1, m, dtype=np.int64)
    indices = np.tile(np.arange(m, dtype=np.int32), k)
    return sp.csc_matrix((M.ravel(order="F"), indices, indptr), shape=(m, k))


def transformed_lp(public: PublicRows, entries: Sequence[TranscriptEntry], k: int,
                   dense_sum: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[LinearProgram, list[slice]]:
    """The coordinator's LP over [u, y_1, ..., y_p]; returns it and each party's y slice.

    ``dense_sum``: (AB', Bc) when the dense products were summed under secure aggregation;
    otherwise they are the sums of the entries' masked products.
    """
    m = public.n_rows
    dense = [e for e in entries if e.masked_a.shape[1]]
    k_used = k if (dense or dense_sum is not None) else 0
    if dense_sum is not None:
        AB, cB = dense_sum
    else:
        AB = np.zeros((m, k_used))
        cB = np.zeros(k_used)
        for e in dense:
            AB += e.masked_a
            cB += e.masked_c
    blocks = [_dense_to_csc(AB)]
    costs = [cB]
    lower = [np.full(k_used, -np.inf)]
    upper = [np.full(k_used, np.inf)]
    slices: list[slice] = []
    col = k_used
    for e in entries:
        n_b = e.scaled_a.shape[1]
        blocks.append(e.scaled_a)
        costs.append(e.scaled_c)
        lower.append(e.scaled_lower)
        upper.append(e.scaled_upper)
        slices.append(slice(col, col + n_b))
        col += n_b
    A = sp.hstack(blocks, format="csc") if len(blocks) > 1 else blocks[0]
    row_lo = [public.row_lower]
    row_hi = [public.row_upper]
    extra = [e for e in entries if e.bound_rows.shape[0]]
    if extra:
        rows = np.vstack([e.bound_rows for e in extra])
        pad = sp.csc_matrix((rows.shape[0], col - k_used))
        A = sp.vstack([A, sp.hstack([sp.csc_matrix(rows), pad], format="csc")], format="csc")
        row_lo += [e.bound_lower for e in extra]
        row_hi += [e.bound_upper for e in extra]
    lp = LinearProgram(
        c=np.concatenate(costs), A=A, row_lower=np.concatenate(row_lo), row_upper=np.concatenate(row_hi),
        col_lower=np.concatenate(lower), col_upper=np.concatenate(upper), sense=public.sense,
        offset=public.offset, name=f"{public.name or 'lp'}-transformed")
    return lp, slices


def _x_summary(x: np.ndarray) -> dict[str, float]:
    return {"min": float(x.min()) if x.size else 0.0, "max": float(x.max()) if x.size else 0.0,
            "l2_norm": float(np.linalg.norm(x)), "nonzeros": int(np.count_nonzero(np.abs(x) > 1e-9))}


def run_secure_lp(public: PublicRows, links: Sequence[PartyLink], config: SessionConfig, *,
                  central: LinearProgram | None = None) -> SessionOutcome:
    """Run one PPLP session over ``links`` and return its outcome.

    Parameters
    ----------
    public : the public row data (m, row bounds, sense, objective constant).
    links : one ``PartyLink`` per party (any transport).
    config : the session's agreed parameters.
    central : the whole LP, when the caller has it (simulation): then the outcome also
        carries the centralized optimum and the feasibility violation of the decoded x.
    """
    if not links:
        raise ConfigError("a session needs at least one party")
    ids = [link.party_id for link in links]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(f"duplicate party ids: {', '.join(dupes)}; every party needs its own id")
    if public.roster is not None:  # before any call: a missing party would silently change the LP
        public.roster.check_parties(ids)
    else:
        log.info("the public rows carry no party roster; the party set and the blocks cannot be checked "
                 "against the split")
    session_id = config.session_id or secrets.token_hex(8)
    mode = BOUNDS_MODES[config.bounds_mode]
    m = public.n_rows
    pool = ThreadPoolExecutor(max_workers=min(32, len(links)), thread_name_prefix="securelp-session")
    t0 = time.perf_counter()
    try:
        hello = pb.HelloRequest(session_id=session_id, protocol_version=PROTOCOL_VERSION, n_rows=m, bounds_mode=mode,
                                secure_aggregation=config.secure_aggregation)
        hellos = _each(links, lambda l: l.hello(hello), "hello", pool)
        for link, h in zip(links, hellos):
            if h.party_id != link.party_id:
                raise ProtocolError(f"party {link.party_id} introduced itself as {h.party_id!r}")
            if h.protocol_version != PROTOCOL_VERSION:
                raise ProtocolError(f"party {link.party_id} answered in protocol version {h.protocol_version}; this "
                                    f"coordinator speaks {PROTOCOL_VERSION}: run both from compatible securelp releases")
            if h.n_rows != m:
                raise ProtocolError(f"party {link.party_id}: block has {h.n_rows} rows, the public row data has {m}")
            if h.n_free + h.n_bounded != h.n_cols:
                raise ProtocolError(f"party {link.party_id}: inconsistent column counts")
        _check_blocks_against_roster(public, links, hellos)
        policies = _party_policies(links, hellos, config)
        n = int(sum(h.n_cols for h in hellos))
        dense_j = [int(h.n_free if mode == pb.BOUNDS_MODE_MONOMIAL else h.n_cols) for h in hellos]
        n_dense = sum(dense_j)
        k, k_label = session_k(n_dense, config.k)
        if n_dense and k < n_dense:
            raise ConfigError(f"k = {k} is smaller than n = {n_dense} masked columns; the transformed LP would not be "
                              f"equivalent (choose k >= {n_dense})")
        plan = _aggregation_plan(links, hellos, dense_j) if config.secure_aggregation else None
        aggregated = {pid: plan is not None and pid in plan.participants for pid in ids}
        # before any mask is drawn: k within the protocol, each block within one message, and the
        # coordinator's own share of memory (a party checks its own when asked to mask)
        check_coordinator_fits(k_label, ids, m, dense_j,
                               [int(h.n_bounded) if mode == pb.BOUNDS_MODE_ROWS else 0 for h in hellos], k)
        t_hello = time.perf_counter()

        def mask_request(link: PartyLink) -> pb.MaskRequest:
            request = pb.MaskRequest(session_id=session_id, bounds_mode=mode, k=k, reveal=config.reveal)
            if plan is not None and aggregated[link.party_id]:
                request.aggregation.CopyFrom(plan.request)
            return request

        blocks = _each(links, lambda l: l.mask(mask_request(l)), "mask", pool)
        t_mask = time.perf_counter()
        entries = [_parse_block(l, b, h, m, k, mode, aggregated[l.party_id]) for l, b, h in zip(links, blocks, hellos)]
        dense_sum = _aggregate(entries, plan) if plan is not None and plan.participants else None
        lp, slices = transformed_lp(public, entries, k, dense_sum)
        # the parties wait meanwhile: one that dies or stops is named within the keepalive, not when the solve ends
        result = while_alive(links, "solve", lambda: HighsBackend(time_limit=config.time_limit_s).solve(lp))
        t_solve = time.perf_counter()
        log.info("transformed LP %d x %d solved: %s in %.3f s", lp.n_rows, lp.n_cols, result.status.value,
                 result.solve_time_s)
        status_pb = _STATUS_TO_PB[result.status]
        k_used = k if any(e.has_dense for e in entries) else 0

        def notify(link: PartyLink, entry: TranscriptEntry, sl: slice) -> pb.DecodeReply:
            notice = pb.SolutionNotice(session_id=session_id, status=status_pb, status_text=result.backend_status,
                                       objective=result.objective if result.is_optimal else float("nan"))
            if result.is_optimal:
                assert result.x is not None
                if entry.has_dense:
                    notice.u.CopyFrom(vector_to_pb(result.x[:k_used]))
                notice.y.CopyFrom(vector_to_pb(result.x[sl]))
            return link.decode(notice)

        replies = _each(list(links), lambda l: notify(l, entries[ids.index(l.party_id)], slices[ids.index(l.party_id)]),
                        "decode", pool)
        t_decode = time.perf_counter()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM: do not wait out the calls in flight
            for link in links:
                link.cancel_calls()
        _close_all(links, session_id, f"aborted: {exc.__class__.__name__}", pool)
        raise
    else:
        _close_all(links, session_id, "done", pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    t_end = time.perf_counter()

    xs: list[np.ndarray] = []
    revealed_all = True
    final_entries = []
    for link, h, reply, entry in zip(links, hellos, replies, entries):
        x_j = None
        if reply.revealed:
            x_j = vector_from_pb(reply.x, expected=int(h.n_cols), what=f"party {link.party_id} x")
            xs.append(x_j)
        else:
            revealed_all = False
        final_entries.append(TranscriptEntry(**{**entry.__dict__, "x": x_j}))
    x = np.concatenate(xs) if (revealed_all and result.is_optimal and xs) else None

    mask_seconds = max((b.compute_seconds for b in blocks), default=0.0)
    decode_seconds = max((r.compute_seconds for r in replies), default=0.0)
    timings = {
        "mask": mask_seconds,
        "transfer": max(0.0, (t_hello - t0) + (t_mask - t_hello - mask_seconds) + (t_decode - t_solve - decode_seconds)
                        + (t_end - t_decode)),
        "solve": t_solve - t_mask,
        "decode": decode_seconds,
        "total": t_end - t0,
    }
    reports = []
    for link, h, b, r, e, policy in zip(links, hellos, blocks, replies, final_entries, policies):
        reports.append(PartyReport(
            party_id=link.party_id, n_cols=int(h.n_cols), n_free=int(h.n_free), n_bounded=int(h.n_bounded),
            n_dense_masked=int(h.n_free if mode == pb.BOUNDS_MODE_MONOMIAL else h.n_cols),
            n_monomial=int(e.scaled_a.shape[1]), n_bound_rows=int(e.bound_rows.shape[0]),
            bytes_sent=link.bytes_sent, bytes_received=link.bytes_received,
            mask_seconds=float(b.compute_seconds), decode_seconds=float(r.compute_seconds),
            revealed=bool(r.revealed), reproducible=bool(b.reproducible),
            x_summary=_x_summary(e.x) if e.x is not None else None, policy=policy,
            aggregated=aggregated[link.party_id], saved_as=str(r.saved_as)))

    central_obj = central_status = central_time = violation = None
    if central is not None:
        c_res = HighsBackend(time_limit=config.time_limit_s).solve(central)
        central_status = c_res.status
        central_obj = c_res.objective if c_res.is_optimal else None
        central_time = c_res.solve_time_s
        if x is not None and x.size == central.n_cols:
            violation = central.max_violation(x)
    return SessionOutcome(
        session_id=session_id, status=result.status, backend_status=result.backend_status,
        objective=result.objective, x=x, k=k_used if n_dense else 0, transport=links[0].transport,
        bounds_mode=config.bounds_mode, reproducible=any(b.reproducible for b in blocks), n_rows=m, n_cols=n,
        iterations=result.iterations, parties=tuple(reports), timings_s=timings, transcript=tuple(final_entries),
        central_objective=central_obj, central_status=central_status, central_time_s=central_time,
        feasibility_violation=violation, aggregation=plan.report() if plan is not None else None,
        row_duals=(np.array(result.row_duals[:m]) if result.is_optimal and result.row_duals is not None else None))
