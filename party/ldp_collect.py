"""The client's side of the protocol ``ldp-collect``: local-DP frequency collection (its collector:
``securelp.coordinator.ldp_collect``; docs/howto/ldp-collection.md).

A party is a client process holding many users' values x_u (indices into a public domain: the
cells of a grid). The public mechanism is a matrix P with ``P[x, y] <= exp(eps d(x, x')) P[x', y]``
(local d-privacy; the Linear-Equations mechanism of X. Gu, M. Li, Y. Cao, L. Xiong, *Supporting
both range queries and frequency estimation with local differential privacy*, IEEE CNS 2019, or a
baseline). Every user's report is one exact draw from row x_u of P, made on the client
(:func:`securelp.solvers.mdp.sampling.sample_from_rows`, the sampler ``ldp_perturb`` uses): the
collector receives only reports, never a value.

1. hello: the collector names the mechanism, eps and the grid; the party builds the mechanism
   itself (verified against its definition as every mechanism is), checks that its fingerprint
   equals the collector's (both hold the same P) and answers with its number of users (public: the
   number of reports it will send);
2. collect, repeated: the next at most ``max_reports`` users are perturbed and their reports sent,
   packed as little-endian unsigned integers of the smallest width that holds the domain, with
   ``last`` set on the final chunk;
3. close.

Each user's report is eps-local-d-private on its own, whatever the collector does; nothing else
leaves the party. Nothing private is logged: counts and sizes only.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from securelp.party.runtime import HostedProtocol, Method, ProtocolSpec
from securelp.protos import ldp_collect_pb2 as lpb
from securelp.solvers.errors import InputError, ProtocolError, SecureLPError
from securelp.solvers.mdp.sampling import sample_from_rows
from securelp.solvers.randomness import SecureRandom

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
LDP_COLLECT = ProtocolSpec(
    name="ldp-collect", version=PROTOCOL_VERSION, min_version=PROTOCOL_VERSION,
    methods={"hello": Method(lpb.LdpHelloRequest, lpb.LdpHelloReply),
             "collect": Method(lpb.LdpCollectRequest, lpb.LdpReports),
             "close": Method(lpb.LdpClose, lpb.LdpCloseReply)})
#: mechanisms whose reports are domain values (``oue`` reports bit vectors)
COLLECT_MECHANISMS = ("le", "grr", "em", "pl")
#: the most reports one collect call may ask for
MAX_CHUNK = 1 << 22


@dataclass(frozen=True)
class MechanismSpec:
    """The public mechanism of a collection: its name, eps and the grid it is built on."""

    name: str
    eps: float
    rows: int
    cols: int
    cell_km: float = 1.0

    @property
    def m(self) -> int:
        return self.rows * self.cols

    def build(self) -> object:
        """The verified mechanism (what ``securelp.ldp.mechanism`` builds)."""
        from securelp.solvers.ldp import GridDomain, build_mechanism

        if self.name not in COLLECT_MECHANISMS:
            raise InputError(f"mechanism {self.name!r} cannot be collected as values; choose one of "
                             f"{', '.join(COLLECT_MECHANISMS)}", parameter="mechanism")
        return build_mechanism(self.name, GridDomain(self.rows, self.cols, self.cell_km), self.eps)

    @classmethod
    def of_request(cls, request: lpb.LdpHelloRequest) -> MechanismSpec:
        return cls(request.mechanism, float(request.eps), int(request.rows), int(request.cols), float(request.cell_km))


def fingerprint(mechanism: object) -> str:
    """SHA-256 (hex) of the mechanism's matrix rounded to 9 decimals: two processes that built the
    same P agree on it (the rounding absorbs last-bit differences of floating-point kernels)."""
    m = int(mechanism.m)  # type: ignore[attr-defined]
    digest = hashlib.sha256(f"{type(mechanism).__name__}/{m}".encode())
    for j in range(m):
        digest.update(np.round(np.asarray(mechanism.row(j), dtype=np.float64), 9).tobytes())  # type: ignore[attr-defined]
    return digest.hexdigest()


def report_width(m: int) -> int:
    """Bytes per packed report: the smallest of 1, 2, 4 that holds indices 0..m-1."""
    return 1 if m <= 1 << 8 else 2 if m <= 1 << 16 else 4


def pack_reports(reports: np.ndarray, width: int) -> bytes:
    return np.asarray(reports).astype(f"<u{width}").tobytes()


def unpack_reports(data: bytes, width: int, m: int, what: str) -> np.ndarray:
    """Reports from their packed bytes (a ``ProtocolError`` naming ``what`` when malformed)."""
    if width not in (1, 2, 4) or len(data) % width:
        raise ProtocolError(f"{what}: {len(data)} bytes are not reports of width {width}")
    out = np.frombuffer(data, dtype=f"<u{width}")
    if out.size and int(out.max()) >= m:
        raise ProtocolError(f"{what}: a report is outside the domain 0..{m - 1}")
    return out


class MechanismCache:
    """Mechanisms a client built, by their public parameters (building one is public work: the
    simulated clients of one process share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[MechanismSpec, tuple[object, str]] = {}

    def get(self, spec: MechanismSpec) -> tuple[object, str]:
        with self._lock:
            if spec not in self._built:
                mech = spec.build()
                self._built[spec] = (mech, fingerprint(mech))
            return self._built[spec]


class LdpCollectSession:
    """One client's state machine for one ``ldp-collect`` session: hello -> collect* -> close.

    Parameters
    ----------
    party_id : the client.
    values : its users' true values (indices into the grid, row-major).
    rng : its randomness (None: fresh OS entropy; a seeded one only for reproducible simulations).
    mechanisms : a cache of built mechanisms (default: its own).
    """

    def __init__(self, party_id: str, values: np.ndarray, *, rng: SecureRandom | None = None,
                 mechanisms: MechanismCache | None = None) -> None:
        self.party_id = party_id
        self.values = np.asarray(values)
        if self.values.ndim != 1 or not np.issubdtype(self.values.dtype, np.integer):
            raise InputError(f"party {party_id}: users' values must be a 1-D integer array")
        self._rng = rng if rng is not None else SecureRandom(None, label=f"ldp-collect/{party_id}")
        self._cache = mechanisms or MechanismCache()
        self._lock = threading.Lock()
        self._state = "new"
        self._session_id = ""
        self._mechanism: object | None = None
        self._width = 1
        self._next = 0
        self.sent_reports = 0
        self.closed = threading.Event()
        self.close_reason = ""

    def handle(self, method: str, request: object) -> object:
        steps: dict[str, Callable[[object], object]] = {
            "hello": self.hello, "collect": self.collect, "close": self.close}  # type: ignore[dict-item]
        if method not in steps:
            raise ProtocolError(f"party {self.party_id}: ldp-collect has no method {method!r}")
        return steps[method](request)

    def abandon(self, reason: str) -> None:
        with self._lock:
            if self._state not in ("closed", "dropped"):
                self._state = "dropped"
                self.close_reason = f"dropped: {reason}"
                self.closed.set()

    def _refuse(self, text: str) -> ProtocolError:
        self._state = "closed"
        self.close_reason = f"refused: {text}"
        self.closed.set()
        return ProtocolError(f"party {self.party_id}: {text}")

    def hello(self, request: lpb.LdpHelloRequest) -> lpb.LdpHelloReply:
        """Step 1: build and check the public mechanism; report the number of users."""
        with self._lock:
            me = self.party_id
            if int(request.protocol_version) != PROTOCOL_VERSION:
                raise ProtocolError(f"party {me}: ldp-collect version {int(request.protocol_version)} is not supported "
                                    f"(this party speaks {PROTOCOL_VERSION})")
            if self._state != "new" or not request.session_id:
                raise ProtocolError(f"party {me}: hello in state {self._state} (or without a session id)")
            spec = MechanismSpec.of_request(request)
            try:
                mech, mine = self._cache.get(spec)
            except SecureLPError as exc:
                raise self._refuse(f"cannot build the session's mechanism: {exc}") from None
            if request.fingerprint != mine:
                raise self._refuse(f"the collector's mechanism {spec.name} (eps {spec.eps:g}, {spec.rows}x{spec.cols}) "
                                   "is not the one this party builds from the same parameters (fingerprints differ)")
            if self.values.size and (int(self.values.min()) < 0 or int(self.values.max()) >= spec.m):
                raise self._refuse(f"its users' values are not all cells of the {spec.rows}x{spec.cols} grid")
            self._session_id = request.session_id
            self._mechanism = mech
            self._width = report_width(spec.m)
            self._state = "hello"
            log.info("party %s: session %s: ldp-collect %s on %d cells, %d users", me, self._session_id, spec.name,
                     spec.m, self.values.size)
            return lpb.LdpHelloReply(party_id=me, protocol_version=PROTOCOL_VERSION, users=int(self.values.size))

    def collect(self, request: lpb.LdpCollectRequest) -> lpb.LdpReports:
        """Step 2: the next chunk of users, each perturbed by one exact draw from its value's row."""
        with self._lock:
            me = self.party_id
            if self._state != "hello" or request.session_id != self._session_id:
                raise ProtocolError(f"party {me}: collect in state {self._state} for session {request.session_id!r}")
            take = int(request.max_reports)
            if not 1 <= take <= MAX_CHUNK:
                raise ProtocolError(f"party {me}: a chunk holds 1..{MAX_CHUNK} reports, {take} were asked")
            chunk = self.values[self._next:self._next + take]
            reports = sample_from_rows(self._mechanism.row, chunk, self._rng)  # type: ignore[attr-defined]
            self._next += chunk.size
            self.sent_reports += chunk.size
            return lpb.LdpReports(party_id=me, width=self._width, reports=pack_reports(reports, self._width),
                                  last=self._next >= self.values.size)

    def close(self, request: lpb.LdpClose) -> lpb.LdpCloseReply:
        with self._lock:
            if self._state != "dropped":
                self.close_reason = request.reason
                self._state = "closed"
                self.closed.set()
            return lpb.LdpCloseReply(party_id=self.party_id)


def hosted_ldp_collect(party_id: str, values: np.ndarray, *, seed: int | str | None = None,
                       mechanisms: MechanismCache | None = None) -> HostedProtocol:
    """``ldp-collect`` as a client serves it: a fresh :class:`LdpCollectSession` (fresh randomness)
    per session; ``seed`` only for reproducible simulations (NOT private)."""
    cache = mechanisms or MechanismCache()
    return HostedProtocol(LDP_COLLECT, lambda session_id: LdpCollectSession(
        party_id, values, mechanisms=cache,
        rng=None if seed is None else SecureRandom(f"{seed}/{session_id}", label=f"ldp-collect/{party_id}")))
