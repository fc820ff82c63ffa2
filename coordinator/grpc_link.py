"""The coordinator's gRPC transport: runtime streams to party processes, in both directions.

A :class:`StreamConnection` carries calls of any protocol over one runtime stream
(``runtime.proto``; ``securelp.protos.stream.FrameStream``) to one party. The stream is made either
way (docs/protocol.md, "Directions"):

- **dial-in** (:class:`DialInConnection`, :class:`GrpcPartyLink`): the coordinator dials the party's
  server and attaches one stream per session (``PartyRuntime.Attach``), opened at the session's
  first call and ended after its close;
- **dial-out** (``securelp.coordinator.listener``): the party dialed a listening coordinator, and
  the listener hands out a connection over the stream the party opened.

Rules (docs/protocol.md; channels from ``securelp.protos.channels``):

- mutual TLS by default: the coordinator's certificate (``coordinator``) and
  ``grpc.ssl_target_name_override = <party_id>``, so a party must present a certificate from the
  session CA whose SAN names exactly the party we meant to dial; plaintext only with an explicit
  ``insecure=True`` (logged warning);
- a deadline on every call (``deadline_s``, default 120 s), enforced by the caller's wait on the
  reply (the stream's reader is never what a call waits on, so no gRPC read can hold it);
- liveness: heartbeats both ways; a party from which nothing arrived for ``keepalive_s`` is
  unresponsive, one whose connection ended disconnected, in every phase (``check_alive``, which
  the secure LP's driver calls while it solves);
- payloads (masked block, solution notice, decode reply) as 1 MiB chunks with a SHA-256 over the
  whole; per-message limit 8 MiB on both sides;
- ``grpc.RpcError`` never escapes: it becomes a typed error that names the party and its address.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import grpc
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from securelp.coordinator.certs import COORDINATOR_ID, load_identity, write_session_certs
from securelp.coordinator.shaping import LinkShape, shaped_addresses
from securelp.coordinator.transport import CLOSE_AFTER_TIMEOUT_S, CLOSE_DEADLINE_S, Connection, PartyLink, PPLPLink
from securelp.party.runtime import describe_offers
from securelp.protos import runtime_pb2 as rpb
from securelp.protos import runtime_pb2_grpc as rpb_grpc
from securelp.protos.channels import (
    CHANNEL_KEEPALIVE_OPTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    RETRIED_METHODS,
    SERVICE_CONFIG,
    channel_options,
    classify_rpc_error,
    create_channel,
    mismatch_hint,
    short_cause,
    timed_out_while_connecting,
)
from securelp.protos.channels import ChannelTls as _ChannelTls
from securelp.protos.stream import DEFAULT_KEEPALIVE_S, CallDeadlineExceeded, FrameStream, PeerFault, PeerGone
from securelp.solvers import errors as E

log = logging.getLogger(__name__)

__all__ = ["CHANNEL_KEEPALIVE_OPTIONS", "CLOSE_AFTER_TIMEOUT_S", "CLOSE_DEADLINE_S", "DEFAULT_DEADLINE_S",
           "RETRIED_METHODS", "SERVICE_CONFIG", "SERVICE_NAME", "ChannelTls", "DialInConnection", "GrpcPartyLink",
           "StreamConnection", "channel_options", "create_channel", "local_grpc_links", "parse_address"]

DEFAULT_DEADLINE_S = 120.0
#: the health service name a party's server reports
SERVICE_NAME = "securelp.v1.PartyRuntime"
#: after its goodbye, how long a connection waits for the party to end the stream
FINISH_WAIT_S = 1.0


class ChannelTls(_ChannelTls):
    """PEM material of the coordinator: the session CA, its key and its certificate chain."""

    @classmethod
    def from_dir(cls, certs_dir: str | Path, name: str = COORDINATOR_ID) -> ChannelTls:
        ident = load_identity(certs_dir, name)
        return cls(ident.ca_certificate, ident.private_key, ident.certificate)


def _prefixed(exc: E.SecureLPError, what: str) -> E.SecureLPError:
    """The same typed error with the phase in front (``"solve: party p2 at ... disconnected"``)."""
    text = str(exc)
    text = text if text.startswith(f"{what}: ") else f"{what}: {text}"
    if isinstance(exc, PeerGone):
        return PeerGone(text, kind=exc.kind)
    return type(exc)(text)


class StreamConnection(Connection):
    """Calls of any protocol over one runtime stream to one party (either direction).

    Parameters
    ----------
    party_id : the party.
    address : its address, for messages (``host:port``).
    direction : "dial-in" or "dial-out".
    keepalive_s : the runtime's keepalive (a party silent this long is unresponsive).
    tls : whether the stream runs under TLS (for the reading of connection errors).
    """

    transport = "grpc"

    def __init__(self, party_id: str, address: str, *, direction: str, keepalive_s: float = DEFAULT_KEEPALIVE_S,
                 tls: bool = True) -> None:
        super().__init__(party_id)
        self.address = address
        self.direction = direction
        self.keepalive_s = float(keepalive_s)
        self._tls = tls
        self.stream: FrameStream | None = None
        self._phase = "hello"

    @property
    def who(self) -> str:
        return f"party {self.party_id} at {self.address}"

    def _stream_for(self, what: str, deadline_s: float) -> FrameStream:
        """The stream to use for a call (dial-in opens it here)."""
        if self.stream is None:
            raise PeerGone(f"{self.who}: no stream (the session on this connection is over)", kind="closed")
        return self.stream

    def offers(self) -> list[rpb.ProtocolOffer]:
        stream = self.stream
        return list(stream.peer_open.protocols) if stream is not None and stream.peer_open is not None else []

    def call(self, protocol: str, session_id: str, method: str, request: Message, reply_type: type[Message], *,
             deadline_s: float) -> tuple[Message, Mapping[str, str]]:
        self._phase = method
        stream = self._stream_for(method, deadline_s)
        offers = self.offers()
        if offers and protocol not in [o.name for o in offers]:
            raise E.ProtocolError(f"party {self.party_id} does not serve protocol {protocol} (it serves: "
                                  f"{describe_offers(offers)})")
        payload = request.SerializeToString()
        try:
            response = stream.call(protocol, session_id, method, payload, deadline_s=deadline_s)
        except PeerFault as exc:
            text = str(exc)
            raise exc.typed(f"{method}: " + ("" if self.party_id in text else f"{self.who}: ")) from None
        except CallDeadlineExceeded:
            raise CallDeadlineExceeded(
                f"{self.who} did not answer {method} within {deadline_s:g} s (deadline exceeded); is it overloaded or "
                "stopped? raise --deadline if the block is large") from None
        except E.ProtocolError as exc:
            text = str(exc)
            raise E.ProtocolError(text if self.party_id in text else f"party {self.party_id}: {text}") from None
        self.bytes_received += len(payload)
        self.bytes_sent += len(response.payload)
        try:
            reply = reply_type.FromString(response.payload)
        except DecodeError:
            raise E.ProtocolError(f"party {self.party_id}: the {method} reply does not parse") from None
        return reply, response.metadata

    def check_alive(self, what: str) -> None:
        stream = self.stream
        if stream is not None and stream.failure is not None:
            raise _prefixed(stream.failure, what)

    def finish(self, reason: str = "session over") -> None:
        stream, self.stream = self.stream, None
        if stream is None:
            return
        stream.goodbye(reason)
        stream.done.wait(FINISH_WAIT_S)  # the party ends its side after our goodbye
        stream.close()

    def cancel_calls(self) -> None:
        if self.stream is not None:
            self.stream.interrupt_calls(E.TransportError(f"{self.who}: the call was cancelled (the run was "
                                                         "interrupted)"))

    def shutdown(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            stream.close()

    def _classify(self, exc: BaseException, stream: FrameStream) -> E.SecureLPError:
        """A gRPC error of the stream: before the party opened it, why it could not be reached (TLS,
        unreachable, unresponsive); after, the party disconnected."""
        if not isinstance(exc, grpc.RpcError):
            return PeerGone(f"{self.who} disconnected ({exc.__class__.__name__})", kind="disconnected")
        err = classify_rpc_error(exc, who=self.who, what=self._phase, tls=self._tls, expected_name=self.party_id)
        if stream.opened.is_set() and isinstance(err, PeerGone):
            cause = short_cause(exc.details() or "") if hasattr(exc, "details") else ""
            return PeerGone(f"{self.who} disconnected ({cause or 'its stream ended'}); did its process end?",
                            kind="disconnected")
        return err


class DialInConnection(StreamConnection):
    """Dial-in: the coordinator dials the party's server and attaches one stream per session."""

    def __init__(self, party_id: str, address: str, *, tls: _ChannelTls | None, insecure: bool = False,
                 keepalive_s: float = DEFAULT_KEEPALIVE_S, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        super().__init__(party_id, address, direction="dial-in", keepalive_s=keepalive_s, tls=not insecure)
        self._channel_tls = tls
        self._channel = create_channel(address, tls=tls, target_name=party_id, insecure=insecure,
                                       max_message_bytes=max_message_bytes)

    @property
    def channel(self) -> grpc.Channel:
        return self._channel

    def _stream_for(self, what: str, deadline_s: float) -> FrameStream:
        if self.stream is not None:
            return self.stream
        stream = FrameStream(peer=self.who, role="coordinator", keepalive_s=self.keepalive_s)
        stream.send_open(COORDINATOR_ID)
        call = rpb_grpc.PartyRuntimeStub(self._channel).Attach(stream.outgoing())
        stream.attach(call, cancel=call.cancel, classify=lambda exc: self._classify(exc, stream),
                      name=f"coordinator-{self.party_id}")
        self.stream = stream
        try:
            peer = stream.wait_open(min(deadline_s, max(self.keepalive_s, 1.0)) if deadline_s else self.keepalive_s)
        except PeerGone as exc:
            if exc.kind == "unresponsive":
                raise CallDeadlineExceeded(f"{self.who} did not answer {what} within {deadline_s:g} s: it is "
                                           "unresponsive (it accepted the connection but never opened the stream; is "
                                           "it stopped or overloaded?)") from None
            raise
        if peer.sender != self.party_id:
            raise stream_error(stream, E.ProtocolError(f"{self.who} introduced itself as {peer.sender!r}"))
        return stream

    def shutdown(self) -> None:
        super().shutdown()
        self._channel.close()


def stream_error(stream: FrameStream, error: E.SecureLPError) -> E.SecureLPError:
    """End ``stream`` and return ``error`` (to raise)."""
    stream.close()
    return error


class GrpcPartyLink(PPLPLink):
    """The secure LP to a party process that listens (dial-in).

    Parameters
    ----------
    party_id : the party (its certificate must name it).
    address : ``host:port`` of its server.
    tls : the coordinator's certificate material (mutual TLS); required unless ``insecure``.
    insecure : plaintext, for debugging only (warned).
    deadline_s : the deadline of every call.
    keepalive_s : the runtime's keepalive.
    """

    def __init__(self, party_id: str, address: str, *, tls: _ChannelTls | None, insecure: bool = False,
                 deadline_s: float = DEFAULT_DEADLINE_S, keepalive_s: float = DEFAULT_KEEPALIVE_S,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if deadline_s <= 0:
            raise E.ConfigError(f"deadline must be positive, got {deadline_s}")
        connection = DialInConnection(party_id, address, tls=tls, insecure=insecure, keepalive_s=keepalive_s,
                                      max_message_bytes=max_message_bytes)
        super().__init__(connection, deadline_s=deadline_s)
        self.address = address
        self._tls = not insecure

    # -- the edge: RpcError -> typed error naming the party ------------------------
    def _rpc_error(self, exc: grpc.RpcError, what: str, deadline_s: float) -> E.SecureLPError:
        """The typed error of a gRPC error of a call to this party (``what``: the call)."""
        if getattr(exc, "code", lambda: None)() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return E.TransportError(f"party {self.party_id} at {self.address} did not answer {what} within "
                                    f"{deadline_s:g} s (deadline exceeded); is it overloaded or stopped?")
        return classify_rpc_error(exc, who=f"party {self.party_id} at {self.address}", what=what, tls=self._tls,
                                  expected_name=self.party_id)

    def wait_ready(self, timeout: float, *, cancel: threading.Event | None = None) -> None:
        """Block until the party's health service reports SERVING (``securelp coordinator --wait``),
        or return early once ``cancel`` is set (another party already failed).

        Raises
        ------
        TransportError naming the party, the ``--wait`` time and the last cause seen (connection
        refused, a health status, unresponsive) when it is not ready in time; at once,
        AuthenticationError for a TLS failure and TransportError for a TLS/plaintext mismatch (a
        plaintext coordinator whose connection the party closes while it is set up). A party that
        accepts the connection but never completes it (stopped with SIGSTOP) is unresponsive, never a
        certificate problem.
        """
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        end = time.monotonic() + timeout
        who = f"party {self.party_id} at {self.address}"
        cause = ""  # the most informative reason seen: a late poll's timeout does not hide "Connection refused"
        channel = self.connection.channel  # type: ignore[attr-defined]
        while True:
            if cancel is not None and cancel.is_set():
                return
            left = end - time.monotonic()
            if left <= 0:
                raise E.TransportError(f"{who} was not ready within {timeout:g} s (--wait): "
                                       f"{cause or 'no answer to the health check'}; check that the party process "
                                       "runs and listens on that address, or raise --wait")
            poll = min(left, 5.0)
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=poll)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                cause = f"health status {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
            except grpc.RpcError as exc:
                code = exc.code()
                details = exc.details() or ""
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    cause = cause or "no answer to the health check (deadline exceeded): is it stopped or overloaded?"
                elif timed_out_while_connecting(details):
                    cause = (f"unresponsive: it accepted the connection but never completed it "
                             f"({short_cause(details)}); is it stopped or overloaded?")
                else:
                    hint = mismatch_hint(details, self._tls)
                    if hint and not self._tls:
                        raise E.TransportError(f"{who} is not usable: {hint} ({short_cause(details)})") from None
                    err = self._rpc_error(exc, "health check", poll)
                    if isinstance(err, E.AuthenticationError):
                        raise err from None
                    cause = short_cause(details) if code == grpc.StatusCode.UNAVAILABLE else str(err)
            pause = min(0.1, max(0.0, end - time.monotonic()))
            if cancel is not None:
                cancel.wait(pause)
            else:
                time.sleep(pause)


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (IPv6 as ``[::1]:port``) -> (host, port); raises InputError."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise E.InputError(f"address {text!r} is not HOST:PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise E.InputError(f"address {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise E.InputError(f"address {text!r}: port {port} is out of range")
    return host, port


def session_certificates(workdir: Path, ids: Sequence[str], sessions: Sequence[object], *, insecure: bool,
                         bind_keys: bool) -> Path:
    """Fresh session certificates in ``workdir/certs`` (unless ``insecure``); with ``bind_keys``, each
    session without an identity gets its certificate as the identity that binds its aggregation key."""
    from securelp.party.aggregation import SigningIdentity  # lazy: the party side only here

    tls_dir = Path(workdir) / "certs"
    if insecure:
        return tls_dir
    write_session_certs(tls_dir, ids)
    if bind_keys:
        for session in sessions:
            if getattr(session, "identity", "absent") is None:
                ident = load_identity(tls_dir, session.party_id)  # type: ignore[attr-defined]
                session.bind_identity(SigningIdentity(ident.private_key, ident.certificate,  # type: ignore[attr-defined]
                                                      ident.ca_certificate))
    return tls_dir


@contextlib.contextmanager
def local_grpc_links(sessions: Sequence[object], workdir: Path, *, deadline_s: float = DEFAULT_DEADLINE_S,
                     insecure: bool = False, host: str = "127.0.0.1", bind_keys: bool = True,
                     keepalive_s: float = DEFAULT_KEEPALIVE_S,
                     link_shapes: Mapping[str, LinkShape] | None = None) -> Iterator[list[PartyLink]]:
    """Dial-in, in this process: real gRPC servers (one per session or ``PartyHost``, port 0) and links
    to them, through a shaped link (``securelp.coordinator.shaping``) for each party ``link_shapes``
    shapes.

    Uses fresh session certificates in ``workdir`` (mutual TLS) unless ``insecure``; with
    ``bind_keys``, each session that has no identity yet gets its certificate as the identity that
    binds its secure-aggregation key (as ``securelp party --certs`` does). Servers and channels are
    stopped on exit. For simulations and contract tests.
    """
    from securelp.party.server import ServerTls, create_server

    ids = [s.party_id for s in sessions]  # type: ignore[attr-defined]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise E.ConfigError(f"duplicate party ids: {', '.join(dupes)}")
    tls_dir = session_certificates(workdir, ids, sessions, insecure=insecure, bind_keys=bind_keys)
    channel_tls = None if insecure else ChannelTls.from_dir(tls_dir)
    servers: list[grpc.Server] = []
    links: list[GrpcPartyLink] = []
    with contextlib.ExitStack() as stack:
        try:
            endpoints = {}
            for session in sessions:
                pid = session.party_id  # type: ignore[attr-defined]
                server_tls = None
                if not insecure:
                    ident = load_identity(tls_dir, pid)
                    server_tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
                server, port = create_server(f"{host}:0", session, tls=server_tls, insecure=insecure,
                                             keepalive_s=keepalive_s)
                servers.append(server)
                endpoints[pid] = f"{host}:{port}"
            addresses = stack.enter_context(shaped_addresses(endpoints, link_shapes))
            for pid in ids:
                links.append(GrpcPartyLink(pid, addresses[pid], tls=channel_tls, insecure=insecure,
                                           deadline_s=deadline_s, keepalive_s=keepalive_s))
            yield list(links)
        finally:
            for link in links:
                link.shutdown()
            for server in servers:
                server.stop(0)
