"""The party's side of the protocol runtime: the protocols a data owner serves, one session at a time.

A protocol (docs/protocol.md, "Runtime") is its messages (a ``.proto`` file), a party state
machine and a coordinator driver. :class:`ProtocolSpec` names the protocol, its wire versions and
its methods with their message types; that is all the runtime needs to carry it, so adding a
protocol touches no transport code. The secure LP of Mangasarian (*Privacy-Preserving Linear
Programming*, Optim. Lett. 2011) is the protocol ``pplp`` (``securelp.party.session``); a small
example, ``secure-sum``, shows a second one (``securelp.party.secure_sum``).

:class:`PartyHost` is one data owner's runtime, whatever the transport (in-process, gRPC dial-in
or dial-out): a registry of the protocols it serves, each with a factory that builds a fresh
state machine for every session (fresh masks, fresh keys), and the rule that one party process
serves **one session at a time**:

- a connection (one stream of the runtime, or one in-process link) takes the host with
  :meth:`PartyHost.connect`; while it holds it, another connection is refused with
  :class:`PartyBusy` naming the session in progress;
- a request is parsed with its method's message type and handed to the session it names; the
  protocol's opening method (``hello``) starts a session, and the session ends when its state
  machine says so (``closed``: the closing method, or a refusal);
- a connection that ends before its session did (the coordinator vanished: its process ended, or
  it was silent for a keepalive) drops the session: :meth:`Lease.release` tells the state machine
  to forget its secrets (``abandon``) and frees the host at once for the next coordinator.

Every ended session is reported to ``on_session_end`` (the ``securelp party`` command writes the
owner's result file there) as a :class:`SessionRecord`; no private data is logged, only session
ids, methods and sizes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.protobuf.message import DecodeError, Message

from securelp.protos import runtime_pb2 as rpb
from securelp.protos.stream import Request, Response
from securelp.solvers.errors import ProtocolError, ResourceError, SecureLPError, TransportError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Method:
    """A method of a protocol: the message types of its request and of its reply."""

    request: type[Message]
    reply: type[Message]


@dataclass(frozen=True)
class ProtocolSpec:
    """A protocol as the runtime carries it.

    Parameters
    ----------
    name : the protocol's name on the wire (``pplp``, ``secure-sum``).
    version : the newest wire version of the protocol this release speaks.
    min_version : the oldest one it still answers.
    methods : method name -> :class:`Method`.
    opening : the method that starts a session.
    closing : the method that ends one (answered even for a session the party does not have).
    """

    name: str
    version: int
    min_version: int
    methods: Mapping[str, Method]
    opening: str = "hello"
    closing: str = "close"

    def __post_init__(self) -> None:
        if self.opening not in self.methods or self.closing not in self.methods:
            raise ValueError(f"protocol {self.name}: its opening and closing methods must be among its methods")
        if not 1 <= self.min_version <= self.version:
            raise ValueError(f"protocol {self.name}: versions {self.min_version} to {self.version}")

    def offer(self) -> rpb.ProtocolOffer:
        """How the protocol is announced in an ``Open`` frame."""
        return rpb.ProtocolOffer(name=self.name, min_version=self.min_version, max_version=self.version)

    def method(self, name: str, who: str) -> Method:
        """The method ``name``; a ``ProtocolError`` naming ``who`` for an unknown one."""
        try:
            return self.methods[name]
        except KeyError:
            raise ProtocolError(f"{who}: protocol {self.name} has no method {name!r} (it has: "
                                f"{', '.join(self.methods)})") from None


def describe_offers(offers: Iterable[rpb.ProtocolOffer]) -> str:
    """``pplp 1-2, secure-sum 1`` (or ``nothing``)."""
    parts = [f"{o.name} {o.min_version}" + (f"-{o.max_version}" if o.max_version != o.min_version else "")
             for o in offers]
    return ", ".join(parts) or "nothing"


class HostedSession(Protocol):
    """What the host needs of a protocol's party state machine (one session)."""

    closed: threading.Event
    close_reason: str

    def handle(self, method: str, request: Any) -> Message:
        """Answer one request of this session (raise a typed error to refuse it)."""

    def abandon(self, reason: str) -> None:
        """The session's coordinator is gone: forget the session's secrets and end it."""


#: builds the state machine of a new session, given its id
SessionFactory = Callable[[str], HostedSession]


@dataclass(frozen=True)
class HostedProtocol:
    """A protocol a party serves and the factory of its sessions."""

    spec: ProtocolSpec
    factory: SessionFactory


class PartyBusy(TransportError):
    """The party is serving another coordinator's session (one session at a time)."""


@dataclass(eq=False)
class SessionRecord:
    """One session a party hosted (no private data: its state machine keeps that)."""

    protocol: str
    session_id: str
    session: HostedSession
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    #: "done", "aborted: <error class>", "refused: <request>", "dropped: <why>", ...
    end_reason: str = ""

    @property
    def dropped(self) -> bool:
        return self.end_reason.startswith("dropped")


class Lease:
    """One connection's hold on a :class:`PartyHost` (see :meth:`PartyHost.connect`)."""

    def __init__(self, host: PartyHost, who: str) -> None:
        self.host = host
        self.who = who
        self.released = False

    def handle(self, request: Request) -> Response:
        """Answer one request that arrived on this connection."""
        return self.host._handle(self, request)

    def release(self, reason: str = "the connection ended") -> None:
        """The connection ended: drop its unfinished session, free the host."""
        self.host._release(self, reason)


class PartyHost:
    """One data owner's runtime: the protocols it serves, one session at a time (module docstring).

    Parameters
    ----------
    party_id : the owner's id.
    protocols : what it serves.
    on_session_end : called with every session that ended (done, aborted, refused or dropped).
    """

    def __init__(self, party_id: str, protocols: Iterable[HostedProtocol], *,
                 on_session_end: Callable[[SessionRecord], None] | None = None) -> None:
        self.party_id = party_id
        self.protocols: dict[str, HostedProtocol] = {}
        for hosted in protocols:
            if hosted.spec.name in self.protocols:
                raise ValueError(f"protocol {hosted.spec.name} registered twice")
            self.protocols[hosted.spec.name] = hosted
        self.on_session_end = on_session_end
        self._lock = threading.Lock()
        self._lease: Lease | None = None
        self.current: SessionRecord | None = None
        #: every session that ended, in order
        self.history: list[SessionRecord] = []
        #: set whenever a session ends or a connection is released (serve loops wait on it)
        self.changed = threading.Condition(self._lock)
        self.last_activity = time.monotonic()

    @classmethod
    def single(cls, session: HostedSession, spec: ProtocolSpec, party_id: str) -> PartyHost:
        """A host whose every session is the one state machine ``session`` (simulations and tests that
        inspect it: a second hello reaches it and is refused by it)."""
        return cls(party_id, [HostedProtocol(spec, lambda _sid: session)])

    # -- what it serves --------------------------------------------------------------------------
    def offers(self) -> list[rpb.ProtocolOffer]:
        """The protocols it serves, for its ``Open`` frame."""
        return [hosted.spec.offer() for hosted in self.protocols.values()]

    @property
    def busy(self) -> bool:
        """Whether a connection holds the host."""
        return self._lease is not None

    def idle_seconds(self) -> float:
        """Seconds since a connection last held the host (0 while one does)."""
        with self._lock:
            return 0.0 if self._lease is not None else time.monotonic() - self.last_activity

    # -- connections -----------------------------------------------------------------------------
    def connect(self, who: str) -> Lease:
        """Take the host for one connection (``who``: "the coordinator at 10.0.0.1:40112").

        Raises
        ------
        PartyBusy
            Another connection holds it; the message names the session in progress.
        """
        with self._lock:
            if self._lease is not None:
                doing = (f"session {self.current.session_id} ({self.current.protocol})" if self.current is not None
                         else "a coordinator that has not started its session yet")
                raise PartyBusy(f"party {self.party_id} is busy with {doing}; a party process serves one session at "
                                "a time: run the session when it has ended")
            lease = Lease(self, who)
            self._lease = lease
            self.last_activity = time.monotonic()
            return lease

    def _release(self, lease: Lease, reason: str) -> None:
        with self._lock:
            if lease.released:
                return
            lease.released = True
            if self._lease is lease:
                self._lease = None
            record = self.current
            if record is not None and not record.session.closed.is_set():
                self.current = None
            else:
                record = None
            self.last_activity = time.monotonic()
            self.changed.notify_all()
        if record is not None:  # its coordinator is gone: drop it (the state machine may still be computing)
            log.warning("party %s: session %s (%s) dropped: %s", self.party_id, record.session_id, record.protocol,
                        reason)
            record.end_reason = f"dropped: {reason}"
            self._finish(record)
            threading.Thread(target=record.session.abandon, args=(reason,), name="abandon-session",
                             daemon=True).start()

    # -- requests --------------------------------------------------------------------------------
    def _handle(self, lease: Lease, request: Request) -> Response:
        who = f"party {self.party_id}"
        hosted = self.protocols.get(request.protocol)
        if hosted is None:
            raise ProtocolError(f"{who} does not serve protocol {request.protocol!r} (it serves: "
                                f"{describe_offers(self.offers())})")
        spec = hosted.spec
        method = spec.method(request.method, who)
        try:
            message = method.request.FromString(request.payload)
        except DecodeError:
            raise ProtocolError(f"{who}: the {request.protocol} {request.method} request does not parse") from None
        with self._lock:
            if lease.released or self._lease is not lease:
                raise TransportError(f"{who}: this connection no longer holds the party")
            self.last_activity = time.monotonic()
            record = self.current
            if record is not None and record.session.closed.is_set():
                record = self.current = None  # ended without the host seeing it (a refusal mid-call)
            if record is not None and (record.session_id != request.session_id or record.protocol != spec.name):
                if request.method == spec.closing:
                    return self._idle_reply(method)
                raise ProtocolError(f"{who}: {request.method} for session {request.session_id!r} while session "
                                    f"{record.session_id} is in progress; a party serves one session at a time")
            if record is None:
                if request.method == spec.closing:
                    return self._idle_reply(method)
                if request.method != spec.opening:
                    raise ProtocolError(f"{who}: {request.protocol} {request.method} for session "
                                        f"{request.session_id!r}, which it does not have ({spec.opening} first)")
                record = SessionRecord(spec.name, request.session_id, hosted.factory(request.session_id))
                self.current = record
                log.info("party %s: session %s (%s) started", self.party_id, record.session_id, spec.name)
        session = record.session
        try:
            reply = session.handle(request.method, message)
            payload = reply.SerializeToString()  # a reply's bytes are its largest allocation: under the same guard
        except MemoryError:  # a limit the estimates missed: a resource error, not an internal one
            raise ResourceError(f"{who}: ran out of memory during this call") from None
        except SecureLPError:
            raise
        except Exception as exc:  # never leak internals (or data) to the peer
            log.error("%s: internal error answering %s (%s)", who, request.method, exc.__class__.__name__)
            log.debug("%s: internal error", who, exc_info=True)
            raise SecureLPError(f"{who}: internal error ({exc.__class__.__name__}); see the party's log") from None
        finally:
            if session.closed.is_set():
                self._ended(record)
        metadata = getattr(session, "reply_metadata", None)
        return Response(payload, metadata(request.method) if metadata is not None else {})

    def _idle_reply(self, method: Method) -> Response:
        """The answer to a closing call for a session the party does not have (closing is idempotent)."""
        reply = method.reply()
        if "party_id" in reply.DESCRIPTOR.fields_by_name:
            reply.party_id = self.party_id  # type: ignore[attr-defined]
        return Response(reply.SerializeToString(), {})

    def _ended(self, record: SessionRecord) -> None:
        with self._lock:
            if record.ended is not None:
                return
            if self.current is record:
                self.current = None
            record.end_reason = getattr(record.session, "close_reason", "") or "closed"
        self._finish(record)

    def _finish(self, record: SessionRecord) -> None:
        with self._lock:
            if record.ended is None:
                record.ended = time.monotonic()
            self.history.append(record)
            self.changed.notify_all()
        log.info("party %s: session %s (%s) ended: %s", self.party_id, record.session_id, record.protocol,
                 record.end_reason)
        if self.on_session_end is not None:
            self.on_session_end(record)

    def wait_for_change(self, timeout: float) -> None:
        """Block until a session ends or a connection is released, or ``timeout`` seconds pass."""
        with self._lock:
            self.changed.wait(timeout)
