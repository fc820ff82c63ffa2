"""The coordinator's view of a party: connections that carry any protocol, and typed links over them.

Two layers (docs/protocol.md, "Runtime"):

- a :class:`Connection` reaches one party and carries calls of any protocol, without knowing their
  contents: ``call(protocol, session_id, method, request, reply type)`` sends a protobuf message and
  returns the party's reply. :class:`InProcessConnection` reaches a ``PartyHost`` in this process,
  but still round-trips every message through protobuf serialization and the runtime's envelope
  frames (serialized to bytes and parsed back, chunked and checksummed like on the wire), so a
  simulation of hundreds of parties exercises the same bytes as a deployment. The gRPC
  connections, in both directions, are ``securelp.coordinator.grpc_link.StreamConnection``s.
- a *link* is the typed view of one protocol over a connection. :class:`ProtocolLink` is the
  generic one (``call(method, request)``, reply types from the protocol's ``ProtocolSpec``);
  :class:`PartyLink` is the secure LP's interface (hello, mask, decode, close), which
  ``securelp.coordinator.protocol.run_secure_lp`` drives, and :class:`PPLPLink` implements it over
  any connection. :class:`InProcessLink` is the in-process PPLP link.

After ``hello``, ``reported_split_id`` holds the split id the party reported for its block
(``securelp split`` writes the same random id into public.npz and every block; the hello reply
carries it as metadata ``securelp-split-id``); None when the party reported none (a block file
or a party from before split ids existed).

Byte counters are from the party's point of view: ``bytes_sent`` is what the party sent
(replies), ``bytes_received`` what it received (requests), counted as serialized payload
bytes (framing overhead excluded, identical for every transport).
"""

from __future__ import annotations

import abc
import itertools
import logging
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError, Message

from securelp.party.runtime import Lease, PartyHost, ProtocolSpec
from securelp.party.session import PPLP, SPLIT_ID_KEY
from securelp.protos import runtime_pb2 as rpb
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import ChunkAssembler
from securelp.protos.stream import Request, envelopes
from securelp.solvers.errors import ProtocolError, SecureLPError

log = logging.getLogger(__name__)


class Connection(abc.ABC):
    """The coordinator's connection to one party, carrying calls of any protocol."""

    #: "inprocess" or "grpc"
    transport = "unknown"
    #: "dial-in" (the coordinator dialed the party), "dial-out" (the party dialed the coordinator), or ""
    direction = ""

    def __init__(self, party_id: str) -> None:
        self.party_id = party_id
        self.bytes_sent = 0
        self.bytes_received = 0

    @abc.abstractmethod
    def call(self, protocol: str, session_id: str, method: str, request: Message, reply_type: type[Message], *,
             deadline_s: float) -> tuple[Message, Mapping[str, str]]:
        """Send ``request`` as ``protocol``'s ``method`` and return the party's reply and its metadata.

        Raises a typed error naming the party: the party's own (its class kept), or a transport error
        (unreachable, disconnected, unresponsive, deadline exceeded)."""

    def offers(self) -> list[rpb.ProtocolOffer]:
        """The protocols the party serves (from its ``Open`` frame; in-process, from its host)."""
        return []

    def check_alive(self, what: str) -> None:
        """Raise the typed error of a party that is gone (``what``: the phase, for the message); a
        connection whose peer cannot die does nothing."""

    def finish(self, reason: str = "session over") -> None:
        """The session on this connection is over: end it (the party may take the next session)."""

    def cancel_calls(self) -> None:
        """End this connection's calls in flight at once (an interrupted run must not wait out their
        deadlines); the connection stays usable for a best-effort close."""

    def shutdown(self) -> None:
        """Release local resources (streams, channels)."""


def _roundtrip_frames(frames: Any, peer: str) -> tuple[rpb.Envelope, bytes]:
    """Serialize every frame, parse it back, and reassemble the payload: the bytes a stream carries."""
    first: rpb.Envelope | None = None
    assembler = ChunkAssembler(peer)
    for frame in frames:
        env = rpb.Frame.FromString(frame.SerializeToString()).envelope
        first = first or env
        assembler.add(env)
    assert first is not None
    return first, assembler.payload()


class InProcessConnection(Connection):
    """A party simulated in this process: a ``PartyHost`` reached through the envelope frames."""

    transport = "inprocess"

    def __init__(self, host: PartyHost) -> None:
        super().__init__(host.party_id)
        self.host = host
        self._lease: Lease | None = None
        self._call_ids = itertools.count(1)

    def offers(self) -> list[rpb.ProtocolOffer]:
        return self.host.offers()

    def call(self, protocol: str, session_id: str, method: str, request: Message, reply_type: type[Message], *,
             deadline_s: float) -> tuple[Message, Mapping[str, str]]:
        if self._lease is None or self._lease.released:
            self._lease = self.host.connect("the in-process coordinator")
        call_id = next(self._call_ids)
        payload = request.SerializeToString()
        env, data = _roundtrip_frames(envelopes(call_id, protocol, session_id, method, payload, reply=False),
                                      "in-process")
        self.bytes_received += len(payload)
        response = self._lease.handle(Request(call_id, env.protocol, env.session_id, env.method, data,
                                              dict(env.metadata)))
        reply_env, reply_data = _roundtrip_frames(
            envelopes(call_id, protocol, session_id, method, response.payload, reply=True,
                      metadata=response.metadata), "in-process")
        self.bytes_sent += len(response.payload)
        try:
            reply = reply_type.FromString(reply_data)
        except DecodeError:
            raise ProtocolError(f"party {self.party_id}: the {method} reply does not parse") from None
        return reply, dict(reply_env.metadata)

    def finish(self, reason: str = "session over") -> None:
        if self._lease is not None:
            self._lease.release(reason)
            self._lease = None

    def shutdown(self) -> None:
        self.finish("the coordinator shut down")


class ProtocolLink:
    """The typed view of one protocol over a connection: ``call(method, request)`` -> reply.

    Parameters
    ----------
    connection : the connection to the party (any transport, either direction).
    spec : the protocol (its name and its methods' message types).
    deadline_s : the deadline of every call.
    """

    def __init__(self, connection: Connection, spec: ProtocolSpec, *, deadline_s: float = 120.0) -> None:
        self.connection = connection
        self.spec = spec
        self.deadline_s = float(deadline_s)
        #: metadata of the last reply
        self.last_metadata: Mapping[str, str] = {}

    @property
    def party_id(self) -> str:
        return self.connection.party_id

    @property
    def protocol(self) -> str:
        return self.spec.name

    @property
    def transport(self) -> str:
        return self.connection.transport

    @property
    def bytes_sent(self) -> int:
        return self.connection.bytes_sent

    @property
    def bytes_received(self) -> int:
        return self.connection.bytes_received

    def call(self, method: str, request: Message, *, deadline_s: float | None = None) -> Message:
        """Send ``request`` as ``method`` of this protocol and return the reply."""
        m = self.spec.method(method, f"party {self.party_id}")
        session_id = str(getattr(request, "session_id", ""))
        reply, self.last_metadata = self.connection.call(
            self.spec.name, session_id, method, request, m.reply,
            deadline_s=self.deadline_s if deadline_s is None else deadline_s)
        return reply

    def check_alive(self, what: str) -> None:
        self.connection.check_alive(what)

    def cancel_calls(self) -> None:
        self.connection.cancel_calls()

    def shutdown(self) -> None:
        self.connection.shutdown()


class PartyLink(abc.ABC):
    """A connection from the coordinator to one party, for the secure LP (protocol ``pplp``)."""

    protocol = "pplp"

    def __init__(self, party_id: str) -> None:
        self.party_id = party_id
        self.bytes_sent = 0
        self.bytes_received = 0
        #: the split id the party reported with its hello (None: none reported)
        self.reported_split_id: str | None = None

    @property
    def transport(self) -> str:
        return "unknown"

    @abc.abstractmethod
    def hello(self, request: pb.HelloRequest) -> pb.HelloReply: ...

    @abc.abstractmethod
    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock: ...

    @abc.abstractmethod
    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply: ...

    @abc.abstractmethod
    def close(self, request: pb.CloseRequest) -> None:
        """Tell the party the session ended (best effort; never raises for a dead peer)."""

    def check_alive(self, what: str) -> None:
        """Raise the typed error of a party that is gone (the default cannot tell: nothing)."""

    def shutdown(self) -> None:
        """Release local resources (channels); the default has none."""

    def cancel_calls(self) -> None:
        """End this link's calls in flight at once (an interrupted run must not wait out their
        deadlines); the link stays usable for a Close. The default has nothing to cancel."""


#: the deadline of the best-effort close of a session
CLOSE_DEADLINE_S = 10.0
#: ... and of the close to a party whose last call outlived its deadline, or of an interrupted run
CLOSE_AFTER_TIMEOUT_S = 1.0


def close_session(link: Any, request: Message) -> None:
    """Send a protocol's ``close`` over ``link`` (a ``ProtocolLink``, or one that records it: the call
    goes through ``link.call`` so a transcript holds it), best effort with a short deadline, then end
    the connection's session."""
    try:
        link.call("close", request, deadline_s=min(link.deadline_s, CLOSE_DEADLINE_S))
    finally:
        link.connection.finish("session over")


class PPLPLink(PartyLink):
    """The secure LP over any :class:`Connection` (in-process, gRPC dial-in or dial-out).

    Its ``close`` is best effort (a short deadline, 1 s after a call that outlived its deadline or an
    interrupt) and ends the session on the connection.
    """

    def __init__(self, connection: Connection, *, deadline_s: float = 120.0) -> None:
        # no PartyLink.__init__: the counters are the connection's
        self.party_id = connection.party_id
        self.reported_split_id = None
        self.connection = connection
        self.deadline_s = float(deadline_s)
        self._link = ProtocolLink(connection, PPLP, deadline_s=deadline_s)
        #: a call of this link outlived its deadline (its close then gets 1 s)
        self.timed_out = False
        #: the run was interrupted (see cancel_calls)
        self.interrupted = False

    @property  # type: ignore[override]
    def bytes_sent(self) -> int:
        return self.connection.bytes_sent

    @property  # type: ignore[override]
    def bytes_received(self) -> int:
        return self.connection.bytes_received

    @property
    def transport(self) -> str:
        return self.connection.transport

    @property
    def direction(self) -> str:
        return self.connection.direction

    def _call(self, method: str, request: Message, deadline_s: float | None = None) -> Any:
        from securelp.protos.stream import CallDeadlineExceeded

        try:
            return self._link.call(method, request, deadline_s=deadline_s)
        except CallDeadlineExceeded:
            self.timed_out = True
            raise

    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        reply = self._call("hello", request)
        self.reported_split_id = self._link.last_metadata.get(SPLIT_ID_KEY) or None
        return reply

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        return self._call("mask", request)

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        return self._call("decode", notice)

    def close(self, request: pb.CloseRequest) -> None:
        short = self.timed_out or self.interrupted
        deadline = min(self.deadline_s, CLOSE_AFTER_TIMEOUT_S if short else CLOSE_DEADLINE_S)
        try:
            self._call("close", request, deadline)
        except SecureLPError as exc:  # best effort: a dead party cannot be told
            log.info("could not close party %s: %s", self.party_id, exc)
        finally:
            self.connection.finish("session over")

    def check_alive(self, what: str) -> None:
        self.connection.check_alive(what)

    def cancel_calls(self) -> None:
        self.interrupted = True  # and its close gets CLOSE_AFTER_TIMEOUT_S: an interrupted run ends promptly
        self.connection.cancel_calls()

    def shutdown(self) -> None:
        self.connection.shutdown()


class InProcessLink(PPLPLink):
    """A party simulated in this process (every message still goes through protobuf and the envelope
    frames). ``party``: the party's ``PartySession`` (every session of the link is that state
    machine) or a ``PartyHost``."""

    def __init__(self, party: object, *, deadline_s: float = 120.0) -> None:
        host = party if isinstance(party, PartyHost) else PartyHost.single(party, PPLP, party.party_id)  # type: ignore[arg-type, attr-defined]
        super().__init__(InProcessConnection(host), deadline_s=deadline_s)
        self.host = host
        #: the party's state machine when the link was made for one (None for a host)
        self._session = None if isinstance(party, PartyHost) else party
