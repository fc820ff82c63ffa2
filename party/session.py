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
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import matrix_to_pb, vector_from_pb, vector_to_pb
from securelp.solvers.errors import ProtocolError, ResourceError
from securelp.solvers.lp.partition import ColumnBlock
from securelp.solvers.randomness import SecureRandom
from securelp.solvers.resources import available_memory, memory_shortfall

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
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


def mask_memory(m: int, n_dense: int, n_bound_rows: int, k: int) -> float:
    """Estimated bytes a party allocates to mask a block of ``m`` rows, ``n_dense`` dense-masked
    columns and ``n_bound_rows`` bound rows with this ``k``."""
    return 8.0 * k * (n_dense + MASK_COPIES * (m + n_bound_rows)) if n_dense else 0.0


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
    """

    def __init__(self, block: ColumnBlock, *, seed: int | str | None = None) -> None:
        self.block = block
        self.party_id = block.party_id
        #: the id of the split the block came from (public; reported with the hello, never data)
        self.split_id: str = getattr(block, "split_id", "") or ""
        self._rng = SecureRandom(seed, label=f"party/{block.party_id}")
        self._lock = threading.Lock()
        self._session_id: str | None = None
        self._state = "new"
        self._mode = pb.BOUNDS_MODE_UNSPECIFIED
        self._k = 0
        self._reveal = False
        self._dense_cols = np.zeros(0, dtype=np.int64)
        self._bounded_cols = np.zeros(0, dtype=np.int64)
        self._mask: np.ndarray | None = None  # B_d, k x n_d
        self._perm: np.ndarray | None = None
        self._scale: np.ndarray | None = None
        self.outcome: PartyOutcome | None = None
        self.closed = threading.Event()
        self.close_reason = ""

    # -- helpers ------------------------------------------------------------------
    def _check_session(self, session_id: str, step: str) -> None:
        if self._session_id is None:
            raise ProtocolError(f"party {self.party_id}: {step} before hello")
        if session_id != self._session_id:
            raise ProtocolError(f"party {self.party_id}: {step} for unknown session {session_id!r}")

    # -- protocol steps -----------------------------------------------------------
    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        """Step 1: report sizes only; check the public row count against the block."""
        with self._lock:
            if request.protocol_version != PROTOCOL_VERSION:
                raise ProtocolError(
                    f"party {self.party_id}: protocol version {request.protocol_version} not supported "
                    f"(this party speaks {PROTOCOL_VERSION})")
            if not request.session_id:
                raise ProtocolError(f"party {self.party_id}: hello without a session id")
            if self._state not in ("new",):
                raise ProtocolError(f"party {self.party_id}: second hello in one session")
            if int(request.n_rows) != self.block.n_rows:
                raise ProtocolError(
                    f"party {self.party_id}: its block has {self.block.n_rows} rows but the session's public "
                    f"row data has {int(request.n_rows)}")
            self._session_id = request.session_id
            self._state = "hello"
            bounded = self.block.bounded_mask()
            log.info("party %s: hello, session %s, %d columns", self.party_id, request.session_id, self.block.n_cols)
            return pb.HelloReply(
                party_id=self.party_id,
                protocol_version=PROTOCOL_VERSION,
                n_rows=self.block.n_rows,
                n_cols=self.block.n_cols,
                n_free=int((~bounded).sum()),
                n_bounded=int(bounded.sum()),
            )

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        """Step 2: draw the private mask and send the masked products."""
        with self._lock:
            self._check_session(request.session_id, "mask")
            if self._state != "hello":
                raise ProtocolError(f"party {self.party_id}: mask requested in state {self._state}")
            start = time.perf_counter()
            mode = request.bounds_mode
            if mode not in (pb.BOUNDS_MODE_MONOMIAL, pb.BOUNDS_MODE_ROWS):
                raise ProtocolError(f"party {self.party_id}: unknown bounds mode {mode}")
            block = self.block
            bounded = block.bounded_mask()
            if mode == pb.BOUNDS_MODE_MONOMIAL:
                dense_cols = np.flatnonzero(~bounded)
            else:
                dense_cols = np.arange(block.n_cols)
            bounded_cols = np.flatnonzero(bounded)
            k = int(request.k)
            if dense_cols.size and k < dense_cols.size:
                raise ProtocolError(
                    f"party {self.party_id}: k = {k} is smaller than its {dense_cols.size} masked columns "
                    "(B' would not have full row rank)")
            if dense_cols.size and k * max(block.n_rows, dense_cols.size) > MAX_MASK_DOUBLES:
                # a resource limit (exit 12 on both sides), not a protocol fault (until stop 47: exit 5)
                raise ResourceError(f"party {self.party_id}: k = {k} would need more than 8 GiB for the masked block")
            n_bound_rows = bounded_cols.size if mode == pb.BOUNDS_MODE_ROWS else 0
            short = memory_shortfall(mask_memory(block.n_rows, dense_cols.size, n_bound_rows, k), available_memory(),
                                     MASK_MEMORY_SHARE)
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
                reply.masked_a.CopyFrom(matrix_to_pb(np.ascontiguousarray(masked_a)))
                reply.masked_c.CopyFrom(vector_to_pb(B @ block.c[dense_cols]))
                self._mask = B
            else:
                reply.masked_a.CopyFrom(matrix_to_pb(np.zeros((m, 0))))
                reply.masked_c.CopyFrom(vector_to_pb(np.zeros(0)))
                self._mask = np.zeros((k, 0))
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
            log.info("party %s: masked block sent (k=%d, %d dense, %d monomial columns)", self.party_id, k,
                     dense_cols.size, self._perm.size)
            return reply

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        """Step 4: decode x_j = B_d' u (+ D P y) and reveal it if the session agreed."""
        with self._lock:
            self._check_session(notice.session_id, "decode")
            if self._state != "masked":
                raise ProtocolError(f"party {self.party_id}: solution received in state {self._state}")
            start = time.perf_counter()
            self._state = "decoded"
            if notice.status != pb.SOLVE_STATUS_OPTIMAL:
                self.outcome = PartyOutcome(int(notice.status), float("nan"), None)
                log.info("party %s: session ended with status %s", self.party_id,
                         pb.SolveStatus.Name(notice.status))
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
            self.outcome = PartyOutcome(int(notice.status), float(notice.objective), x)
            reply = pb.DecodeReply(party_id=self.party_id, revealed=self._reveal, n_decoded=x.size)
            if self._reveal:
                reply.x.CopyFrom(vector_to_pb(x))
            reply.compute_seconds = time.perf_counter() - start
            log.info("party %s: decoded %d components (revealed: %s)", self.party_id, x.size, self._reveal)
            return reply

    def close(self, request: pb.CloseRequest) -> pb.CloseReply:
        """The coordinator ends the session; the party may exit."""
        with self._lock:
            if self._session_id is not None and request.session_id and request.session_id != self._session_id:
                raise ProtocolError(f"party {self.party_id}: close for unknown session {request.session_id!r}")
            self.close_reason = request.reason
            self._mask = None  # drop the secret mask as soon as it is no longer needed
            self._state = "closed"
            self.closed.set()
            return pb.CloseReply(party_id=self.party_id)
