"""Example protocol ``secure-sum``: the sum of the parties' private integer vectors, under secure aggregation.

A second protocol on the runtime (docs/protocol.md, "Adding a protocol"), small enough to read
in one sitting and used by the contract tests to show that a protocol needs no transport code:
its messages (``protos/secure_sum.proto``), this party state machine, and the coordinator's driver
(``securelp.coordinator.secure_sum``). Party j holds an integer vector v_j of a public length L; the
coordinator learns sum_j v_j and nothing else (semi-honest, no dropouts), by the pairwise masks of
Bonawitz et al. (*Practical Secure Aggregation for Privacy-Preserving Machine Learning*, CCS 2017),
as the secure LP's secure aggregation (``securelp.party.aggregation``) computes them:

1. hello: each party draws an X25519 key pair for the session and reports its public key, signed
   with its TLS certificate's key when it has a TLS identity (then its peers check the binding);
2. share: the coordinator relays every participant's key; party j sends
   S_j = v_j + sum_{q != j} s(j, q) R_jq (mod 2^64), R_jq the ChaCha20 keystream under the pair key
   HKDF(X25519(sk_j, pk_q), session id, both ids), s = +1 if j < q (ids in string order) else -1;
3. close: the coordinator adds the shares mod 2^64 (the masks cancel) and reads the sum as
   two's-complement int64; with the reason ``done`` it tells every party the sum.

Any p - 1 shares are uniform in Z_2^64^L, whatever the vectors (the masks' differences span the
sum-zero subspace); sums that leave the int64 range wrap, as int64 arithmetic does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from securelp.party import aggregation as agg
from securelp.party.runtime import HostedProtocol, Method, ProtocolSpec
from securelp.protos import secure_sum_pb2 as spb
from securelp.solvers.errors import InputError, ProtocolError
from securelp.solvers.randomness import SecureRandom

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
SECURE_SUM = ProtocolSpec(
    name="secure-sum", version=PROTOCOL_VERSION, min_version=PROTOCOL_VERSION,
    methods={"hello": Method(spb.SumHelloRequest, spb.SumHelloReply), "share": Method(spb.SumShareRequest, spb.SumShare),
             "close": Method(spb.SumClose, spb.SumCloseReply)})


def encode_vector(values: np.ndarray) -> bytes:
    """int64 values as little-endian uint64 (two's complement)."""
    return np.ascontiguousarray(values, dtype=np.int64).view(np.uint64).astype("<u8").tobytes()


def decode_vector(data: bytes, length: int, what: str) -> np.ndarray:
    """Little-endian uint64 bytes of ``length`` elements (a ``ProtocolError`` naming ``what`` otherwise)."""
    if len(data) != 8 * length:
        raise ProtocolError(f"{what}: expected {length} ring elements, got {len(data)} bytes")
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


class SecureSumSession:
    """One party's state machine for one session of ``secure-sum``: hello -> share -> close.

    Parameters
    ----------
    party_id : the party.
    values : its private integer vector.
    seed : None (fresh OS entropy) or a seed (reproducible simulations).
    identity : its TLS identity, which binds its key to its certificate and lets it check its peers'.
    """

    def __init__(self, party_id: str, values: Sequence[int] | np.ndarray, *, seed: int | str | None = None,
                 identity: agg.SigningIdentity | None = None) -> None:
        self.party_id = party_id
        self.values = np.asarray(values, dtype=np.int64).reshape(-1)
        self.identity = identity
        self._rng = SecureRandom(seed, label=f"secure-sum/{party_id}")
        self._lock = threading.Lock()
        self._state = "new"
        self._session_id = ""
        self._keys: agg.AggregationKeyPair | None = None
        self._reply: spb.SumHelloReply | None = None
        self.total: np.ndarray | None = None
        self.closed = threading.Event()
        self.close_reason = ""

    def handle(self, method: str, request: object) -> object:
        steps = {"hello": self.hello, "share": self.share, "close": self.close}
        if method not in steps:
            raise ProtocolError(f"party {self.party_id}: secure-sum has no method {method!r}")
        return steps[method](request)  # type: ignore[arg-type]

    def abandon(self, reason: str) -> None:
        """The coordinator is gone: forget the key and end the session."""
        with self._lock:
            if self._state not in ("closed", "dropped"):
                self._keys = None
                self._state = "dropped"
                self.close_reason = f"dropped: {reason}"
                self.closed.set()

    def hello(self, request: spb.SumHelloRequest) -> spb.SumHelloReply:
        """Step 1: a fresh key pair for the session; the public key, bound to the certificate if any."""
        with self._lock:
            if int(request.protocol_version) != PROTOCOL_VERSION:
                raise ProtocolError(f"party {self.party_id}: secure-sum version {int(request.protocol_version)} is not "
                                    f"supported (this party speaks {PROTOCOL_VERSION})")
            if self._state != "new":
                raise ProtocolError(f"party {self.party_id}: second hello in one session")
            if not request.session_id:
                raise ProtocolError(f"party {self.party_id}: hello without a session id")
            if int(request.length) != self.values.size:
                raise InputError(f"party {self.party_id}: its vector has {self.values.size} entries, the session sums "
                                 f"{int(request.length)}")
            self._session_id = request.session_id
            self._keys = agg.AggregationKeyPair(self._rng.bytes(32))
            reply = spb.SumHelloReply(party_id=self.party_id, protocol_version=PROTOCOL_VERSION,
                                      public_key=self._keys.public_key)
            if self.identity is not None:
                reply.certificate = self.identity.certificate
                reply.signature = agg.sign_key(self.identity, self._session_id, self.party_id, reply.public_key)
            self._reply = reply
            self._state = "hello"
            log.info("party %s: session %s: secure-sum hello (%d values)", self.party_id, self._session_id,
                     self.values.size)
            return reply

    def share(self, request: spb.SumShareRequest) -> spb.SumShare:
        """Step 2: the vector plus the pairwise masks with every other participant."""
        with self._lock:
            me = self.party_id
            if self._state != "hello" or request.session_id != self._session_id:
                raise ProtocolError(f"party {me}: share requested in state {self._state} for session "
                                    f"{request.session_id!r}")
            assert self._keys is not None and self._reply is not None
            ids = [p.party_id for p in request.peers]
            if len(set(ids)) != len(ids) or len(ids) < 2:
                raise ProtocolError(f"party {me}: a sum needs two or more distinct participants, got {ids}")
            mine = [p for p in request.peers if p.party_id == me]
            if not mine or mine[0].public_key != self._reply.public_key:
                raise ProtocolError(f"party {me}: the relayed keys do not include its own key as it reported it")
            pairs = []
            for peer in request.peers:
                if peer.party_id == me:
                    continue
                if self.identity is not None:
                    agg.verify_binding(self.identity.ca_certificate, self._session_id, peer.party_id, peer.public_key,
                                       peer.certificate, peer.signature, who=f"party {me}")
                key = self._keys.pair_key(peer.public_key, self._session_id, me, peer.party_id)
                pairs.append((key, 1 if me < peer.party_id else -1))
            flat = self.values.view(np.uint64).copy()
            agg.mask_shares(flat, pairs)
            self._keys = None
            self._state = "shared"
            return spb.SumShare(party_id=me, share=flat.astype("<u8").tobytes())

    def close(self, request: spb.SumClose) -> spb.SumCloseReply:
        """Step 3: the session is over; with ``done``, the sum."""
        with self._lock:
            if self._state == "dropped":
                return spb.SumCloseReply(party_id=self.party_id)
            if request.reason == "done" and request.total:
                self.total = decode_vector(request.total, self.values.size, f"party {self.party_id}: total").view(
                    np.int64)
            self.close_reason = request.reason
            self._keys = None
            self._state = "closed"
            self.closed.set()
            return spb.SumCloseReply(party_id=self.party_id)


def hosted_secure_sum(party_id: str, values: Sequence[int] | np.ndarray, *, identity: agg.SigningIdentity | None = None,
                      seed: int | str | None = None) -> HostedProtocol:
    """``secure-sum`` as a party serves it: a fresh :class:`SecureSumSession` (fresh key) per session."""
    return HostedProtocol(SECURE_SUM, lambda session_id: SecureSumSession(
        party_id, values, identity=identity, seed=None if seed is None else f"{seed}/{session_id}"))
