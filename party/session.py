"""One data owner's side of the PPLP protocol, free of any transport.

Mangasarian (Privacy-Preserving Linear Programming, Optim. Lett. 2011): party j holds the
column block A_.j, c_j of ``min c'x s.t. lo <= Ax <= hi``. It draws a private random
matrix B_.j (k x n_j) and sends only A_.j B_.j' (m x k) and B_.j c_j (k). Because
x = B'u ranges over all of R^n when B' (n x k, k >= n) has full row rank, the
transformed LP ``min (Bc)'u s.t. lo <= (AB')u <= hi`` with u free has the same optimal
value, and party j alone decodes x_j = B_.j' u.

Column bounds. Written as rows of A, bounds reveal B_.j and then A_.j (Bednarz, Bean,
Roughan, WPES 2009). So, by default (``BOUNDS_MODE_MONOMIAL``), columns with a finite
bound are not dense-masked but transformed by a private positive monomial matrix
D P (positive diagonal scaling, permutation): with x_b = D P y, the bounds map exactly
to y (l/d, u/d, permuted), and the coordinator learns A_b only up to column scaling and
order. Free columns keep the dense mask. ``BOUNDS_MODE_ROWS`` dense-masks every column
and sends the bound rows B_b' u in [l_b, u_b] -- exact, but it reveals B_b and, with
it, A_.j.

Masks come from ``securelp.solvers.randomness.SecureRandom`` (ChaCha20, OS entropy), or from a
seed in the flagged reproducible-simulation mode.

The owner's policy (``securelp.party.policy.PartyPolicy``) decides which requests it answers:
a MaskRequest for a bounds mode it does not allow, or asking for x_j it keeps, is refused and
ends the session (``ProtocolError``). It decodes once per session, and only a u whose x_j
satisfies its own column bounds within :data:`DECODE_TOLERANCE` relative to each bound: a
coordinator choosing u to probe the mask (x_j = B_d' u for a u of its choice) gets one answer,
and none for a u outside the party's box.

Secure aggregation (``securelp.party.aggregation``): when the hello asks for it, the party draws
an X25519 key pair for the session, reports its public key (bound to its TLS certificate when it
has one) and coarse magnitude bounds of its dense products; its MaskRequest then relays every
participant's key and the fixed-point precision, and the party sends fixed-point shares of its
dense products masked with pairwise masks that cancel in the sum, never the products themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.party import aggregation as agg
from securelp.party.policy import DEFAULT_POLICY, PartyPolicy, bounds_mode_name
from securelp.party.results import PartyResult
from securelp.party.runtime import Method, ProtocolSpec
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import matrix_to_pb, vector_from_pb, vector_to_pb
from securelp.solvers.errors import ProtocolError, ResourceError
from securelp.solvers.lp.partition import ColumnBlock
from securelp.solvers.randomness import SecureRandom
from securelp.solvers.resources import available_memory, memory_shortfall

log = logging.getLogger(__name__)

#: the wire protocol this party speaks: version 2 adds the party's policy and secure aggregation
#: (docs/protocol.md, "Versions")
PROTOCOL_VERSION = 2
#: the oldest coordinator protocol a party still answers (a version-1 session has no policy report
#: and no secure aggregation; the party enforces its policy all the same)
MIN_PROTOCOL_VERSION = 1
#: the secure LP as the protocol runtime carries it (docs/protocol.md, "Runtime"): its name on the
#: wire, its versions (checked at hello, on both sides) and its methods
PPLP = ProtocolSpec(
    name="pplp", version=PROTOCOL_VERSION, min_version=MIN_PROTOCOL_VERSION,
    methods={"hello": Method(pb.HelloRequest, pb.HelloReply), "mask": Method(pb.MaskRequest, pb.MaskedBlock),
             "decode": Method(pb.SolutionNotice, pb.DecodeReply), "close": Method(pb.CloseRequest, pb.CloseReply)})
#: the reply metadata key of a hello that carries the block's split id (public)
SPLIT_ID_KEY = "securelp-split-id"
#: the feasibility the coordinator's solver reaches on the original (unscaled) model, relative to each
#: bound: HiGHS applies its primal feasibility tolerance (1e-7) to its scaled model, and the points it
#: reported optimal violated a decoded bound by up to 3.6e-6 of max(1, |bound|) (vtpbase in rows mode;
#: over 22 netlib LPs, 3 parties, monomial and rows mode, plain and secure aggregation, the next
#: largest was 8.9e-7, agg); the secure solve's netlib test holds violations below 1e-5 too
SOLVER_FEASIBILITY_TOLERANCE = 1e-5
#: monomial scalings are log-uniform in [1/SCALE_SPREAD, SCALE_SPREAD]
SCALE_SPREAD = 8.0
#: refuse masks whose dense product would exceed this many doubles (8 GiB)
MAX_MASK_DOUBLES = 1 << 30
#: doubles a party allocates per unit of k and row of its masked block (the product, its message,
#: the serialized bytes and gRPC's buffers), besides B itself (k x n_d): 3.8 measured (``securelp
#: party`` processes on afiro, --bounds rows, ``/usr/bin/time -f %M``: 104 MB at k = 20,000 and 154
#: MB at 60,000, 1.25 KB per k for 27 rows, 11 bound rows and 11 dense columns); 5 with a margin
MASK_COPIES = 5
#: share of the available memory a mask may plan to use
MASK_MEMORY_SHARE = 0.9
#: more m x k arrays under secure aggregation: the fixed-point encoding and one pairwise mask at a time
AGGREGATION_COPIES = 2
#: a decoded x_j may lie outside its column bounds by this much relative to each bound
#: (max(1, |bound|)): the solver's feasibility on the original model
DECODE_TOLERANCE = SOLVER_FEASIBILITY_TOLERANCE


def mask_memory(m: int, n_dense: int, n_bound_rows: int, k: int, *, secure_aggregation: bool = False) -> float:
    """Estimated bytes a party allocates to mask a block of ``m`` rows, ``n_dense`` dense-masked
    columns and ``n_bound_rows`` bound rows with this ``k``."""
    if not n_dense:
        return 0.0
    extra = AGGREGATION_COPIES * (m + 1) if secure_aggregation else 0
    return 8.0 * k * (n_dense + MASK_COPIES * (m + n_bound_rows) + extra)


def bound_violations(x: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                     tolerance: float = DECODE_TOLERANCE) -> int:
    """How many entries of ``x`` lie outside [lower, upper] by more than ``tolerance * max(1, |bound|)``
    (NaN counts as a violation)."""
    with np.errstate(invalid="ignore"):
        below = x < lower - tolerance * np.maximum(1.0, np.abs(lower))
        above = x > upper + tolerance * np.maximum(1.0, np.abs(upper))
    return int(np.count_nonzero(below | above | np.isnan(x)))


@dataclass(frozen=True)
class PartyOutcome:
    """What the party learned at the end (kept locally; never logged)."""

    status: int
    objective: float
    x: np.ndarray | None


class PartySession:
    """The protocol state machine of one data owner: hello -> mask -> decode -> close.

    Parameters
    ----------
    block : the party's private column block.
    seed : None (default: fresh OS entropy) or a seed for the flagged
        reproducible-simulation mode.
    policy : what the owner agrees to (default: monomial bounds only, x_j kept), the same
        default as ``securelp party``.
    identity : the party's TLS identity, which binds its secure-aggregation key to its
        certificate and lets it check its peers' keys (None: keys are not bound).
    record_contribution : simulations only: keep the dense products it aggregated
        (``contribution``, its own data, never sent) so that an audit can play this party
        colluding with the coordinator.
    saved_as : the format of the owner's output file ("csv", "npz", "json"; ``securelp party
        --out``) or "" for none; reported with the decode reply, never the path.
    """

    def __init__(self, block: ColumnBlock, *, seed: int | str | None = None,
                 policy: PartyPolicy = DEFAULT_POLICY, identity: agg.SigningIdentity | None = None,
                 record_contribution: bool = False, saved_as: str = "") -> None:
        if not isinstance(policy, PartyPolicy):
            raise TypeError("policy must be a securelp.party.policy.PartyPolicy")
        self.block = block
        self.party_id = block.party_id
        self.policy = policy
        self.identity = identity
        #: the id of the split the block came from (public; reported with the hello, never data)
        self.split_id: str = getattr(block, "split_id", "") or ""
        self._rng = SecureRandom(seed, label=f"party/{block.party_id}")
        self._lock = threading.Lock()
        self._session_id: str | None = None
        self._version = PROTOCOL_VERSION
        self._state = "new"
        self._mode = pb.BOUNDS_MODE_UNSPECIFIED
        self._k = 0
        self._reveal = False
        self._dense_cols = np.zeros(0, dtype=np.int64)
        self._bounded_cols = np.zeros(0, dtype=np.int64)
        self._mask: np.ndarray | None = None  # B_d, k x n_d
        self._perm: np.ndarray | None = None
        self._scale: np.ndarray | None = None
        self._aggregation: pb.AggregationKey | None = None  # what the hello reported
        self._agg_mode = pb.BOUNDS_MODE_UNSPECIFIED
        self._agg_keys: agg.AggregationKeyPair | None = None
        self.record_contribution = record_contribution
        #: (A_d B_d', B_d c_d, n_d) as aggregated, with ``record_contribution`` (simulations)
        self.contribution: tuple[np.ndarray, np.ndarray, int] | None = None
        self.outcome: PartyOutcome | None = None
        self.saved_as = saved_as
        self.closed = threading.Event()
        self.close_reason = ""

    @property
    def session_id(self) -> str:
        """The id of the session (empty before the hello)."""
        return self._session_id or ""

    @property
    def _who(self) -> str:
        """How log lines name the party and its session."""
        return f"party {self.party_id}: session {self._session_id or '-'}"

    # -- the runtime's view (securelp.party.runtime.HostedSession) -----------------------------
    def handle(self, method: str, request: object) -> object:
        """Answer one request of the protocol ``pplp`` by its method name."""
        steps = {"hello": self.hello, "mask": self.mask, "decode": self.decode, "close": self.close}
        if method not in steps:
            raise ProtocolError(f"party {self.party_id}: pplp has no method {method!r}")
        return steps[method](request)  # type: ignore[arg-type]

    def reply_metadata(self, method: str) -> dict[str, str]:
        """Metadata of a reply: the hello reports the block's split id (public)."""
        return {SPLIT_ID_KEY: self.split_id} if method == "hello" and self.split_id else {}

    def abandon(self, reason: str) -> None:
        """The coordinator is gone (its connection ended, or it was silent for a keepalive): forget the
        mask and keys and end the session; its decoded values, if any, are no session result."""
        with self._lock:
            if self._state in ("closed", "refused", "dropped"):
                return
            self._mask = None
            self._agg_keys = None
            self._state = "dropped"
            self.close_reason = f"dropped: {reason}"
            self.closed.set()
        log.warning("%s: dropped (%s); its mask is forgotten", self._who, reason)

    def result(self) -> PartyResult | None:
        """The owner's result of a session that closed with "done" (None otherwise): its own x_j under
        its column names, the status and the optimal value every party learns."""
        outcome = self.outcome
        if outcome is None or self.close_reason != "done":
            return None
        return PartyResult(party_id=self.party_id, session_id=self.session_id,
                           status=pb.SolveStatus.Name(outcome.status).removeprefix("SOLVE_STATUS_").lower(),
                           objective=outcome.objective, x=outcome.x, column_names=self.block.column_names)

    def bind_identity(self, identity: agg.SigningIdentity) -> None:
        """Give the party its TLS identity (before its hello), e.g. once session certificates exist."""
        with self._lock:
            if self._state != "new":
                raise ProtocolError(f"party {self.party_id}: its identity can only be set before the hello")
            self.identity = identity

    # -- helpers ------------------------------------------------------------------
    def _check_session(self, session_id: str, step: str) -> None:
        if self._session_id is None:
            raise ProtocolError(f"party {self.party_id}: {step} before hello")
        if session_id != self._session_id:
            raise ProtocolError(f"party {self.party_id}: {step} for unknown session {session_id!r}")

    def _refuse(self, request: str, reason: str, hint: str = "") -> ProtocolError:
        """End the session after a request the policy does not allow; the error to raise.

        The log line names the request and the rule, never a value; the session is closed (the
        mask dropped), so ``securelp party`` exits with code 5 at once.
        """
        log.warning("%s: refused %s: %s; the session is over", self._who, request, reason)
        self._mask = None
        self._agg_keys = None
        self._state = "refused"
        self.close_reason = f"refused: {request}"
        self.closed.set()
        return ProtocolError(f"party {self.party_id} refused {request}: {reason}{f'; {hint}' if hint else ''}")

    def _dense_and_bounded(self, mode: int) -> tuple[np.ndarray, np.ndarray]:
        bounded = self.block.bounded_mask()
        dense = np.flatnonzero(~bounded) if mode == pb.BOUNDS_MODE_MONOMIAL else np.arange(self.block.n_cols)
        return dense, np.flatnonzero(bounded)

    # -- protocol steps -----------------------------------------------------------
    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        """Step 1: report sizes and the policy only; check the public row count against the block."""
        with self._lock:
            version = int(request.protocol_version)
            if not MIN_PROTOCOL_VERSION <= version <= PROTOCOL_VERSION:
                raise ProtocolError(
                    f"party {self.party_id}: protocol version {version} not supported (this party speaks "
                    f"{MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}); run the coordinator and the parties from "
                    "compatible securelp releases")
            if not request.session_id:
                raise ProtocolError(f"party {self.party_id}: hello without a session id")
            if self._state not in ("new",):
                raise ProtocolError(f"party {self.party_id}: second hello in one session")
            if int(request.n_rows) != self.block.n_rows:
                raise ProtocolError(
                    f"party {self.party_id}: its block has {self.block.n_rows} rows but the session's public "
                    f"row data has {int(request.n_rows)}")
            if request.secure_aggregation and version < 2:
                raise ProtocolError(f"party {self.party_id}: secure aggregation needs protocol version 2")
            self._session_id = request.session_id
            self._version = version
            self._state = "hello"
            bounded = self.block.bounded_mask()
            reply = pb.HelloReply(
                party_id=self.party_id,
                protocol_version=version,
                n_rows=self.block.n_rows,
                n_cols=self.block.n_cols,
                n_free=int((~bounded).sum()),
                n_bounded=int(bounded.sum()),
            )
            reply.policy.CopyFrom(self.policy.to_pb())
            if request.secure_aggregation:
                self._agg_mode = request.bounds_mode
                self._aggregation = self._aggregation_key(request.session_id, request.bounds_mode)
                reply.aggregation_key.CopyFrom(self._aggregation)
            log.info("%s: hello, %d columns, protocol %d%s", self._who, self.block.n_cols, version,
                     ", secure aggregation" if request.secure_aggregation else "")
            return reply

    def _aggregation_key(self, session_id: str, mode: int) -> pb.AggregationKey:
        """A fresh key pair for this session and the magnitude bounds of the dense products in ``mode``
        (none reported for a mode the policy does not allow: that mask request will be refused)."""
        self._agg_keys = agg.AggregationKeyPair(self._rng.bytes(32))
        key = pb.AggregationKey(public_key=self._agg_keys.public_key, magnitude_a=agg.ZERO_MAGNITUDE,
                                magnitude_c=agg.ZERO_MAGNITUDE)
        if mode in (pb.BOUNDS_MODE_MONOMIAL, pb.BOUNDS_MODE_ROWS) and self.policy.allows_mode(mode):
            dense, _ = self._dense_and_bounded(mode)
            key.magnitude_a, key.magnitude_c = agg.product_magnitudes(self.block.A[:, dense], self.block.c[dense])
        if self.identity is not None:
            key.certificate = self.identity.certificate
            key.signature = agg.sign_key(self.identity, session_id, self.party_id, key.public_key)
        return key

    def _check_policy(self, request: pb.MaskRequest) -> None:
        """Refuse (and end the session) a mask request the owner's policy does not allow."""
        mode = request.bounds_mode
        if mode in (pb.BOUNDS_MODE_MONOMIAL, pb.BOUNDS_MODE_ROWS) and not self.policy.allows_mode(mode):
            name = bounds_mode_name(mode)
            raise self._refuse(f"MaskRequest (bounds mode {name})",
                               f"its policy does not allow bounds mode {name} (it allows: "
                               f"{', '.join(sorted(self.policy.allow_bounds))})",
                               f"run the coordinator with --bounds monomial, or the party with --allow-bounds {name}")
        if request.reveal and not self.policy.reveal:
            raise self._refuse("MaskRequest (reveal)", "its policy keeps its decoded solution (--no-reveal)",
                               "run the coordinator with --no-reveal, or the party with --reveal")

    def _aggregation_peers(self, request: pb.MaskRequest, n_dense: int) -> tuple[list[tuple[bytes, int]], int, int]:
        """Check the relayed aggregation parameters; the pairwise (key, sign) list and (f_a, f_c)."""
        me = self.party_id
        has = request.HasField("aggregation")
        if has and self._aggregation is None:
            raise ProtocolError(f"party {me}: the mask request asks for secure aggregation, which its hello did not")
        if self._aggregation is not None and request.bounds_mode != self._agg_mode:
            raise ProtocolError(f"party {me}: the mask request's bounds mode differs from its hello's")
        if has and not n_dense:
            raise ProtocolError(f"party {me}: asked to aggregate a dense product it does not have")
        if not has:
            if self._aggregation is not None and n_dense:  # a coordinator must not fall back to the products
                raise ProtocolError(f"party {me}: the mask request drops the secure aggregation its hello agreed; "
                                    "it does not send its own dense product")
            return [], 0, 0
        assert self._aggregation is not None and self._agg_keys is not None
        peers = list(request.aggregation.peers)
        ids = [p.party_id for p in peers]
        if len(set(ids)) != len(ids):
            raise ProtocolError(f"party {me}: the aggregation lists a party twice")
        if len(peers) < 2:
            raise ProtocolError(f"party {me}: secure aggregation over {len(peers)} party would send its own product")
        mine = [p for p in peers if p.party_id == me]
        if not mine or mine[0].key.SerializeToString(deterministic=True) != \
                self._aggregation.SerializeToString(deterministic=True):
            raise ProtocolError(f"party {me}: the aggregation does not relay its own key as it reported it")
        f_a = agg.fraction_bits([p.key.magnitude_a for p in peers])
        f_c = agg.fraction_bits([p.key.magnitude_c for p in peers])
        if (request.aggregation.fraction_bits_a, request.aggregation.fraction_bits_c) != (f_a, f_c):
            raise ProtocolError(f"party {me}: the fixed-point precision is not the one the relayed magnitudes give "
                                f"({request.aggregation.fraction_bits_a}, {request.aggregation.fraction_bits_c} "
                                f"fraction bits instead of {f_a}, {f_c})")
        session_id = self._session_id or ""
        pairs: list[tuple[bytes, int]] = []
        for p in peers:
            if p.party_id == me:
                continue
            if self.identity is not None:
                agg.verify_binding(self.identity.ca_certificate, session_id, p.party_id, p.key.public_key,
                                   p.key.certificate, p.key.signature, who=f"party {me}")
            key = self._agg_keys.pair_key(p.key.public_key, session_id, me, p.party_id)
            pairs.append((key, 1 if me < p.party_id else -1))
        return pairs, f_a, f_c

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        """Step 2: draw the private mask and send the masked products (or shares of their sum)."""
        with self._lock:
            self._check_session(request.session_id, "mask")
            if self._state != "hello":
                raise ProtocolError(f"party {self.party_id}: mask requested in state {self._state}")
            start = time.perf_counter()
            mode = request.bounds_mode
            if mode not in (pb.BOUNDS_MODE_MONOMIAL, pb.BOUNDS_MODE_ROWS):
                raise ProtocolError(f"party {self.party_id}: unknown bounds mode {mode}")
            self._check_policy(request)
            block = self.block
            dense_cols, bounded_cols = self._dense_and_bounded(mode)
            k = int(request.k)
            if dense_cols.size and k < dense_cols.size:
                raise ProtocolError(
                    f"party {self.party_id}: k = {k} is smaller than its {dense_cols.size} masked columns "
                    "(B' would not have full row rank)")
            if dense_cols.size and k * max(block.n_rows, dense_cols.size) > MAX_MASK_DOUBLES:
                raise ResourceError(f"party {self.party_id}: k = {k} would need more than 8 GiB for the masked block")
            pairs, f_a, f_c = self._aggregation_peers(request, dense_cols.size)
            secure = bool(pairs)
            n_bound_rows = bounded_cols.size if mode == pb.BOUNDS_MODE_ROWS else 0
            short = memory_shortfall(mask_memory(block.n_rows, dense_cols.size, n_bound_rows, k,
                                                 secure_aggregation=secure), available_memory(), MASK_MEMORY_SHARE)
            if short:  # the sizes only, which the coordinator knows from Hello
                raise ResourceError(f"party {self.party_id}: its masked block with k = {k} would need about {short}")
            m = block.n_rows
            reply = pb.MaskedBlock(party_id=self.party_id, reproducible=self._rng.reproducible)
            if dense_cols.size:
                B = self._rng.standard_normal((k, dense_cols.size))
                A_d = block.A[:, dense_cols]
                if A_d.nnz > 0.05 * A_d.shape[0] * A_d.shape[1]:
                    masked_a = A_d.toarray() @ B.T  # BLAS
                else:
                    masked_a = np.asarray((B @ A_d.T).T)  # sparse A: O(nnz k)
                masked_c = B @ block.c[dense_cols]
                self._mask = B
                if secure:
                    assert self._aggregation is not None
                    self._share(reply, masked_a, masked_c, pairs, f_a, f_c)
                    reply.masked_a.CopyFrom(matrix_to_pb(np.zeros((m, 0))))
                    reply.masked_c.CopyFrom(vector_to_pb(np.zeros(0)))
                else:
                    reply.masked_a.CopyFrom(matrix_to_pb(np.ascontiguousarray(masked_a)))
                    reply.masked_c.CopyFrom(vector_to_pb(masked_c))
                del masked_a
            else:
                reply.masked_a.CopyFrom(matrix_to_pb(np.zeros((m, 0))))
                reply.masked_c.CopyFrom(vector_to_pb(np.zeros(0)))
                self._mask = np.zeros((k, 0))
            self._agg_keys = None  # the pairwise keys are not needed again
            if mode == pb.BOUNDS_MODE_MONOMIAL and bounded_cols.size:
                perm = self._rng.permutation(bounded_cols.size)
                scale = np.exp(self._rng.uniform(-np.log(SCALE_SPREAD), np.log(SCALE_SPREAD), bounded_cols.size))
                cols = bounded_cols[perm]  # y_t corresponds to original column cols[t]
                d = scale[perm]
                A_b = block.A[:, cols] @ sp.diags(d)
                reply.scaled_a.CopyFrom(matrix_to_pb(sp.csc_matrix(A_b)))
                reply.scaled_c.CopyFrom(vector_to_pb(block.c[cols] * d))
                reply.scaled_lower.CopyFrom(vector_to_pb(block.col_lower[cols] / d))
                reply.scaled_upper.CopyFrom(vector_to_pb(block.col_upper[cols] / d))
                self._perm, self._scale = cols, d
            else:
                reply.scaled_a.CopyFrom(matrix_to_pb(sp.csc_matrix((m, 0))))
                self._perm, self._scale = np.zeros(0, dtype=np.int64), np.zeros(0)
            if mode == pb.BOUNDS_MODE_ROWS and bounded_cols.size:
                # x = B' u; the bound rows are the rows of B' for bounded columns
                rows = self._mask.T[bounded_cols, :]
                reply.bound_rows.CopyFrom(matrix_to_pb(np.ascontiguousarray(rows)))
                reply.bound_lower.CopyFrom(vector_to_pb(block.col_lower[bounded_cols]))
                reply.bound_upper.CopyFrom(vector_to_pb(block.col_upper[bounded_cols]))
            else:
                reply.bound_rows.CopyFrom(matrix_to_pb(np.zeros((0, k if dense_cols.size else 0))))
            self._mode, self._k, self._reveal = mode, k, bool(request.reveal)
            self._dense_cols, self._bounded_cols = dense_cols, bounded_cols
            self._state = "masked"
            reply.compute_seconds = time.perf_counter() - start
            log.info("%s: masked block sent (k=%d, %d dense, %d monomial columns%s)", self._who, k,
                     dense_cols.size, self._perm.size,
                     f", as shares over {len(pairs) + 1} parties" if secure else "")
            return reply

    def _share(self, reply: pb.MaskedBlock, masked_a: np.ndarray, masked_c: np.ndarray,
               pairs: list[tuple[bytes, int]], f_a: int, f_c: int) -> None:
        """Fill ``share_a``/``share_c``: the fixed-point products plus the pairwise masks (one keystream
        per pair covers both, A's m x k entries first)."""
        assert self._aggregation is not None
        if self.record_contribution:
            self.contribution = (masked_a, masked_c, int(self._mask.shape[1]) if self._mask is not None else 0)
        m, k = masked_a.shape
        who = f"party {self.party_id}"
        flat = np.empty(m * k + k, dtype=np.uint64)
        flat[: m * k] = agg.encode(masked_a, f_a, self._aggregation.magnitude_a, what=who).ravel()
        flat[m * k:] = agg.encode(masked_c, f_c, self._aggregation.magnitude_c, what=who)
        agg.mask_shares(flat, pairs)
        reply.share_a.CopyFrom(pb.RingMatrix(rows=m, cols=k, values=flat[: m * k].astype("<u8").tobytes()))
        reply.share_c.CopyFrom(pb.RingMatrix(rows=1, cols=k, values=flat[m * k:].astype("<u8").tobytes()))

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        """Step 4: decode x_j = B_d' u (+ D P y) once, check it against the party's own column bounds,
        and reveal it if the session agreed."""
        with self._lock:
            self._check_session(notice.session_id, "decode")
            if self._state != "masked":
                raise ProtocolError(f"party {self.party_id}: solution received in state {self._state} "
                                    "(a party decodes once per session)")
            start = time.perf_counter()
            self._state = "decoded"
            if notice.status != pb.SOLVE_STATUS_OPTIMAL:
                self.outcome = PartyOutcome(int(notice.status), float("nan"), None)
                log.info("%s: the solve ended with status %s", self._who, pb.SolveStatus.Name(notice.status))
                return pb.DecodeReply(party_id=self.party_id, revealed=False, n_decoded=0,
                                      compute_seconds=time.perf_counter() - start)
            assert self._mask is not None and self._perm is not None and self._scale is not None
            k_used = self._mask.shape[0] if self._dense_cols.size else 0
            u = vector_from_pb(notice.u, expected=k_used, what=f"party {self.party_id}: u")
            y = vector_from_pb(notice.y, expected=self._perm.size, what=f"party {self.party_id}: y")
            x = np.zeros(self.block.n_cols)
            if self._dense_cols.size:
                x[self._dense_cols] = self._mask.T @ u
            if self._perm.size:
                x[self._perm] = self._scale * y
            bad = bound_violations(x, self.block.col_lower, self.block.col_upper)
            if bad:
                log.warning("%s: the decoded solution violates %d of its %d column bounds beyond the tolerance "
                            "%.1e (relative to each bound)", self._who, bad, self.block.n_cols, DECODE_TOLERANCE)
                raise self._refuse("SolutionNotice", "the solution it was sent decodes to a point outside its own "
                                   f"column bounds (tolerance {DECODE_TOLERANCE:.1e} relative to each bound)",
                                   "a u chosen by the coordinator, or a solver that returned an infeasible point")
            self.outcome = PartyOutcome(int(notice.status), float(notice.objective), x)
            reply = pb.DecodeReply(party_id=self.party_id, revealed=self._reveal, n_decoded=x.size,
                                   saved_as=self.saved_as)
            if self._reveal:
                reply.x.CopyFrom(vector_to_pb(x))
            reply.compute_seconds = time.perf_counter() - start
            log.info("%s: decoded %d components (revealed: %s)", self._who, x.size, self._reveal)
            return reply

    def close(self, request: pb.CloseRequest) -> pb.CloseReply:
        """The coordinator ends the session; the party may exit."""
        with self._lock:
            if self._session_id is not None and request.session_id and request.session_id != self._session_id:
                raise ProtocolError(f"party {self.party_id}: close for unknown session {request.session_id!r}")
            if self._state not in ("refused", "dropped"):  # a refusal stays the reason the session ended
                self.close_reason = request.reason
                self._state = "closed"
            self._mask = None  # drop the secret mask as soon as it is no longer needed
            self._agg_keys = None
            self.closed.set()
            return pb.CloseReply(party_id=self.party_id)
