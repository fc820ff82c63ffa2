"""The gRPC transport: one channel factory and ``GrpcPartyLink``, the coordinator's view of
a party process.

Same four calls as ``coordinator.transport.PartyLink`` (Mangasarian's PPLP steps:
hello, mask, decode, close), carried by ``securelp.v1.PartyService``. Rules
(docs/protocol.md):

- mutual TLS by default: ``grpc.ssl_channel_credentials(ca, coordinator key,
  coordinator chain)`` and ``grpc.ssl_target_name_override = <party_id>``, so a party
  must present a certificate from the session CA whose SAN names exactly the party we
  meant to dial; plaintext only with an explicit ``insecure=True`` (logged warning);
  TLS material together with ``insecure=True`` is refused;
- a deadline on every call (``deadline_s``, default 120 s);
- payloads (masked block, solution notice, decode reply) as 1 MiB chunks with a
  SHA-256 over the whole (``protos.codec``); per-message limit 8 MiB on both sides;
- keepalive: a ping every 30 s, 20 s to answer, allowed without active calls;
- retries declared in the service config, for UNAVAILABLE only (4 attempts, backoff
  0.2 s doubling to 2 s);
- ``grpc.RpcError`` never escapes: ``_rpc_error`` turns it into a typed error that
  names the party and its address.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from coordinator.certs import COORDINATOR_ID, load_identity, write_session_certs
from coordinator.transport import PartyLink
from protos import securelp_pb2 as pb
from protos import securelp_pb2_grpc as pb_grpc
from protos.codec import join_chunks, split_payload
from solvers import errors as E

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 8 << 20
DEFAULT_DEADLINE_S = 120.0
#: Close is best effort; never wait long for a party that is going away
CLOSE_DEADLINE_S = 10.0
SERVICE_NAME = "securelp.v1.PartyService"
#: client keepalive: ping every 30 s (the server accepts pings every >= 10 s), 20 s to answer
CHANNEL_KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)
#: retries for UNAVAILABLE only (connection refused/reset before the call reached the party)
SERVICE_CONFIG = {
    "methodConfig": [{
        "name": [{"service": SERVICE_NAME}, {"service": "grpc.health.v1.Health"}],
        "retryPolicy": {
            "maxAttempts": 4,
            "initialBackoff": "0.2s",
            "maxBackoff": "2s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }]
}
ERROR_CLASS_METADATA = "securelp-error-class"
#: typed errors a party may report (class name in trailing metadata) and we re-raise as such
_PARTY_ERRORS: dict[str, type[E.SecureLPError]] = {
    cls.__name__: cls for cls in (E.InputError, E.ConfigError, E.ProtocolError, E.ResourceError, E.SolverError,
                                  E.AuthenticationError)
}
#: fragments of gRPC/BoringSSL error details that mean a TLS handshake or identity failure
_TLS_FAILURE_MARKERS = ("handshake", "certificate", "ssl_error", "ssl routines", "peer name", "alert",
                        "verification check failed", "unauthenticated")
#: a TCP connection that the peer closed while connecting: under mTLS, the party refused our
#: certificate (TLS 1.3 servers verify the client after the client finished its side) or it
#: does not speak TLS at all. A party that is down refuses the connection instead.
_CLOSED_WHILE_CONNECTING = ("socket closed", "connection reset", "end of file", "eof")


@dataclass(frozen=True)
class ChannelTls:
    """PEM material of the coordinator: the session CA, its key and its certificate chain."""

    root_certificates: bytes
    private_key: bytes
    certificate_chain: bytes

    @classmethod
    def from_dir(cls, certs_dir: str | Path, name: str = COORDINATOR_ID) -> ChannelTls:
        ident = load_identity(certs_dir, name)
        return cls(ident.ca_certificate, ident.private_key, ident.certificate)


def channel_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, object]]:
    """Channel arguments of every coordinator channel (sizes, keepalive, retries)."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
        *CHANNEL_KEEPALIVE_OPTIONS,
    ]


def create_channel(address: str, *, tls: ChannelTls | None, target_name: str | None = None, insecure: bool = False,
                   max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> grpc.Channel:
    """The one place channels are made.

    Parameters
    ----------
    address : ``host:port`` of the party.
    tls : the coordinator's certificate material (mutual TLS); required unless ``insecure``.
    target_name : the identity the server certificate must carry (the party id).
    insecure : plaintext, only when asked for explicitly; warned.
    """
    if tls is not None and insecure:
        raise E.ConfigError("TLS material and insecure=True were both given; choose one")
    options = channel_options(max_message_bytes)
    if insecure:
        log.warning("connecting to %s WITHOUT TLS (--insecure): masked data travels in the clear and the party "
                    "is not authenticated", address)
        return grpc.insecure_channel(address, options=options)
    if tls is None:
        raise E.ConfigError(f"no TLS material for {address}; pass --certs DIR (or --insecure for debugging only)")
    if target_name:
        options.append(("grpc.ssl_target_name_override", target_name))
    creds = grpc.ssl_channel_credentials(root_certificates=tls.root_certificates, private_key=tls.private_key,
                                         certificate_chain=tls.certificate_chain)
    return grpc.secure_channel(address, creds, options=options)


def _looks_like_tls_failure(details: str, tls: bool) -> bool:
    low = details.lower()
    if any(marker in low for marker in _TLS_FAILURE_MARKERS):
        return True
    return tls and "failed to connect" in low and any(marker in low for marker in _CLOSED_WHILE_CONNECTING)


class GrpcPartyLink(PartyLink):
    """A party process reached over gRPC.

    Parameters
    ----------
    party_id : the party's id (also the identity its certificate must carry).
    address : ``host:port``.
    tls : coordinator certificate material, or None with ``insecure=True``.
    deadline_s : deadline of every call.
    """

    def __init__(self, party_id: str, address: str, *, tls: ChannelTls | None, insecure: bool = False,
                 deadline_s: float = DEFAULT_DEADLINE_S, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        super().__init__(party_id)
        if deadline_s <= 0:
            raise E.ConfigError(f"deadline must be positive, got {deadline_s}")
        self.address = address
        self.deadline_s = float(deadline_s)
        self._tls = not insecure
        self._channel = create_channel(address, tls=tls, target_name=party_id, insecure=insecure,
                                       max_message_bytes=max_message_bytes)
        self._stub = pb_grpc.PartyServiceStub(self._channel)

    @property
    def transport(self) -> str:
        return "grpc"

    # -- the edge: RpcError -> typed error naming the party ------------------------
    def _rpc_error(self, exc: grpc.RpcError, what: str, deadline_s: float) -> E.SecureLPError:
        code = exc.code() if hasattr(exc, "code") else None
        details = (exc.details() if hasattr(exc, "details") else "") or ""
        who = f"party {self.party_id} at {self.address}"
        cls_name = ""
        try:
            for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
                if key == ERROR_CLASS_METADATA:
                    cls_name = value
        except Exception:  # noqa: BLE001 - no metadata on locally generated errors
            cls_name = ""
        if cls_name in _PARTY_ERRORS:
            text = details if self.party_id in details else f"{who}: {details}"
            return _PARTY_ERRORS[cls_name](f"{what}: {text}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return E.TransportError(f"{who} did not answer {what} within {deadline_s:g} s (deadline exceeded); "
                                    "is it overloaded or stopped? raise --deadline if the block is large")
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return E.AuthenticationError(f"{who} refused the coordinator ({details})")
        if code == grpc.StatusCode.UNAVAILABLE:
            if _looks_like_tls_failure(details, self._tls):
                return E.AuthenticationError(
                    f"TLS handshake with {who} failed: its certificate is not from this session's CA or does not "
                    f"name {self.party_id!r}, or it refused ours ({details})")
            return E.TransportError(f"{who} is unreachable during {what} ({details}); check that the party "
                                    "process runs and listens on that address")
        if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                    grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.UNIMPLEMENTED):
            return E.ProtocolError(f"{who} rejected {what}: {details}")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return E.ResourceError(f"{what} with {who} exceeded a size limit: {details}")
        if code == grpc.StatusCode.CANCELLED:
            return E.TransportError(f"{what} with {who} was cancelled ({details})")
        return E.SecureLPError(f"{who} failed during {what} ({code.name if code else 'unknown'}: {details})")

    @contextlib.contextmanager
    def _edge(self, what: str, deadline_s: float) -> Iterator[None]:
        try:
            yield
        except grpc.RpcError as exc:
            raise self._rpc_error(exc, what, deadline_s) from None
        except E.ProtocolError as exc:  # a bad chunk stream from the party
            text = str(exc)
            raise E.ProtocolError(text if self.party_id in text else f"party {self.party_id}: {text}") from None

    # -- PartyLink ---------------------------------------------------------------------
    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        with self._edge("hello", self.deadline_s):
            reply = self._stub.Hello(request, timeout=self.deadline_s, wait_for_ready=False)
        self.bytes_received += request.ByteSize()
        self.bytes_sent += reply.ByteSize()
        return reply

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        with self._edge("mask", self.deadline_s):
            payload = join_chunks(self._stub.Mask(request, timeout=self.deadline_s),
                                  peer=f"party {self.party_id}: masked block")
        self.bytes_received += request.ByteSize()
        self.bytes_sent += len(payload)
        try:
            return pb.MaskedBlock.FromString(payload)
        except Exception:  # noqa: BLE001 - protobuf DecodeError
            raise E.ProtocolError(f"party {self.party_id}: the masked block does not parse") from None

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        request = notice.SerializeToString()
        with self._edge("decode", self.deadline_s):
            payload = join_chunks(self._stub.Decode(split_payload(request), timeout=self.deadline_s),
                                  peer=f"party {self.party_id}: decode reply")
        self.bytes_received += len(request)
        self.bytes_sent += len(payload)
        try:
            return pb.DecodeReply.FromString(payload)
        except Exception:  # noqa: BLE001
            raise E.ProtocolError(f"party {self.party_id}: the decode reply does not parse") from None

    def close(self, request: pb.CloseRequest) -> None:
        deadline = min(self.deadline_s, CLOSE_DEADLINE_S)
        try:
            with self._edge("close", deadline):
                reply = self._stub.Close(request, timeout=deadline)
            self.bytes_received += request.ByteSize()
            self.bytes_sent += reply.ByteSize()
        except E.SecureLPError as exc:  # best effort: a dead party cannot be told
            log.info("could not close party %s: %s", self.party_id, exc)

    def wait_ready(self, timeout: float) -> None:
        """Block until the party's health service reports SERVING.

        Raises
        ------
        TransportError / AuthenticationError naming the party when it is not ready in time.
        """
        stub = health_pb2_grpc.HealthStub(self._channel)
        end = time.monotonic() + timeout
        last = "no answer"
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise E.TransportError(f"party {self.party_id} at {self.address} was not ready within "
                                       f"{timeout:g} s ({last})")
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=min(left, 5.0))
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = f"health status {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
            except grpc.RpcError as exc:
                err = self._rpc_error(exc, "health check", timeout)
                if isinstance(err, E.AuthenticationError):
                    raise err from None
                last = str(err)
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    def shutdown(self) -> None:
        self._channel.close()


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


@contextlib.contextmanager
def local_grpc_links(sessions: Sequence[object], workdir: Path, *, deadline_s: float = DEFAULT_DEADLINE_S,
                     insecure: bool = False, host: str = "127.0.0.1") -> Iterator[list[PartyLink]]:
    """Real gRPC servers in this process (one per session, port 0) and links to them.

    Uses fresh session certificates in ``workdir`` (mutual TLS) unless ``insecure``.
    Servers and channels are stopped on exit. For simulations and contract tests.
    """
    from party.server import ServerTls, create_server  # lazy: the party side only here

    ids = [s.party_id for s in sessions]  # type: ignore[attr-defined]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise E.ConfigError(f"duplicate party ids: {', '.join(dupes)}")
    tls_dir = Path(workdir) / "certs"
    channel_tls: ChannelTls | None = None
    if not insecure:
        write_session_certs(tls_dir, ids)
        channel_tls = ChannelTls.from_dir(tls_dir)
    servers: list[grpc.Server] = []
    links: list[GrpcPartyLink] = []
    try:
        for session in sessions:
            pid = session.party_id  # type: ignore[attr-defined]
            server_tls = None
            if not insecure:
                ident = load_identity(tls_dir, pid)
                server_tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
            server, port = create_server(f"{host}:0", session, tls=server_tls, insecure=insecure)
            servers.append(server)
            links.append(GrpcPartyLink(pid, f"{host}:{port}", tls=channel_tls, insecure=insecure,
                                       deadline_s=deadline_s))
        yield list(links)
    finally:
        for link in links:
            link.shutdown()
        for server in servers:
            server.stop(0)
