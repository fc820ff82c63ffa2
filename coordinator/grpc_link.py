"""The gRPC transport: one channel factory and ``GrpcPartyLink``, the coordinator's view of
a party process.

Same four calls as ``securelp.coordinator.transport.PartyLink`` (Mangasarian's PPLP steps:
hello, mask, decode, close), carried by ``securelp.v1.PartyService``. Rules
(docs/protocol.md):

- mutual TLS by default: ``grpc.ssl_channel_credentials(ca, coordinator key,
  coordinator chain)`` and ``grpc.ssl_target_name_override = <party_id>``, so a party
  must present a certificate from the session CA whose SAN names exactly the party we
  meant to dial; plaintext only with an explicit ``insecure=True`` (logged warning);
  TLS material together with ``insecure=True`` is refused;
- a deadline on every call (``deadline_s``, default 120 s), enforced twice: by gRPC and by a
  local watchdog that cancels a call (streaming ones included) still running at its deadline;
- payloads (masked block, solution notice, decode reply) as 1 MiB chunks with a
  SHA-256 over the whole (``securelp.protos.codec``); per-message limit 8 MiB on both sides;
- keepalive: a ping every 30 s, 20 s to answer, allowed without active calls;
- retries declared in the service config, for UNAVAILABLE only (4 attempts, backoff
  0.2 s doubling to 2 s), and only for the idempotent calls (health check, Close);
- ``grpc.RpcError`` never escapes: ``_rpc_error`` turns it into a typed error that
  names the party and its address.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from securelp.coordinator.certs import COORDINATOR_ID, load_identity, write_session_certs
from securelp.coordinator.transport import PartyLink
from securelp.protos import securelp_pb2 as pb
from securelp.protos import securelp_pb2_grpc as pb_grpc
from securelp.protos.codec import ERROR_CLASS_METADATA, SPLIT_ID_METADATA, join_chunks, split_payload
from securelp.solvers import errors as E

log = logging.getLogger(__name__)

C = TypeVar("C")
R = TypeVar("R")
T_call = TypeVar("T_call")

DEFAULT_MAX_MESSAGE_BYTES = 8 << 20
DEFAULT_DEADLINE_S = 120.0
#: Close is best effort; never wait long for a party that is going away
CLOSE_DEADLINE_S = 10.0
#: ... and 1 s for a party whose last call outlived its deadline (a stopped party will not answer the
#: Close either: the run ends --deadline + 1 s after its call) or whose run was interrupted
CLOSE_AFTER_TIMEOUT_S = 1.0
SERVICE_NAME = "securelp.v1.PartyService"
#: client keepalive: ping every 30 s (the server accepts pings every >= 10 s), 20 s to answer
CHANNEL_KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)
#: retries for UNAVAILABLE only (connection refused/reset before the call reached the party), and only
#: for the calls that are safe to repeat: the health check and Close (idempotent). Hello, Mask and
#: Decode change the party's state (a repeated hello or mask is refused), and a retried streaming
#: call on a connection the party reset mid-session never ended, whatever its deadline (the
#: coordinator blocked for ever reading the Mask stream of a party killed after its hello). The
#: retries are bounded by the call's deadline; every call also has a local watchdog
#: (``_CallWatchdog``) that cancels it at its deadline whatever gRPC's retry machinery does.
RETRIED_METHODS: tuple[tuple[str, str], ...] = ((SERVICE_NAME, "Close"), ("grpc.health.v1.Health", "Check"))
SERVICE_CONFIG = {
    "methodConfig": [{
        "name": [{"service": service, "method": method} for service, method in RETRIED_METHODS],
        "retryPolicy": {
            "maxAttempts": 4,
            "initialBackoff": "0.2s",
            "maxBackoff": "2s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }]
}
#: a call still running this long after its deadline is cancelled by ``_CallWatchdog``
WATCHDOG_SLACK_S = 0.1
#: ... and if its reader is still blocked this long after the cancel, the channel is closed
STUCK_GRACE_S = 0.5
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


def _closed_while_connecting(low: str) -> bool:
    """gRPC's (lower-cased) error says the peer closed the socket while the connection was set up."""
    return "failed to connect" in low and any(marker in low for marker in _CLOSED_WHILE_CONNECTING)


def _looks_like_tls_failure(details: str, tls: bool) -> bool:
    low = details.lower()
    if any(marker in low for marker in _TLS_FAILURE_MARKERS):
        return True
    return tls and _closed_while_connecting(low)


def _mismatch_hint(details: str, tls: bool) -> str:
    """A TLS/plaintext mismatch, told from gRPC's connection error (cheap: no extra probe).

    A TLS client dialling a plaintext server fails its handshake with BoringSSL's
    ``WRONG_VERSION_NUMBER`` (the server answered with HTTP/2, not a TLS record); a plaintext
    client dialling a TLS server sees the server close the socket while connecting.
    """
    low = details.lower()
    if tls and "wrong_version_number" in low:
        return "the party seems to serve plaintext (started with --insecure?) while the coordinator uses TLS"
    if not tls and _closed_while_connecting(low):
        return ("the party closed the connection while it was set up: it probably requires TLS (--certs) while "
                "the coordinator runs with --insecure")
    return ""


def _short_cause(details: str) -> str:
    """The last, most specific part of a gRPC connection error ("Connection refused")."""
    tail = details.rsplit(": ", 1)[-1].strip() if details else ""
    return tail or details or "no answer"


class _CallWatchdog:
    """Ends a gRPC call that is still running ``seconds`` (+ ``WATCHDOG_SLACK_S``) after it started.

    gRPC enforces ``timeout=`` itself, but a streaming call that the channel's retry machinery
    had taken over after the party reset the connection was seen to block for ever: the call
    had its status, yet the pending read never completed, and ``call.cancel()`` did not wake
    the reader either (grpcio 1.85). So the watchdog cancels the call and, if the reader is
    still blocked ``STUCK_GRACE_S`` later, calls ``on_stuck`` (the link closes its channel,
    which does wake it, and opens a fresh one for a best-effort Close). ``fired`` tells the
    caller why the call ended.
    """

    def __init__(self, seconds: float, on_stuck: Callable[[], None] | None = None) -> None:
        self.seconds = seconds
        self.fired = threading.Event()
        self._done = threading.Event()
        self._on_stuck = on_stuck
        self._call: grpc.Future | None = None
        self._timer = threading.Timer(seconds + WATCHDOG_SLACK_S, self._fire)
        self._timer.daemon = True

    def watch(self, call: T_call) -> T_call:
        self._call = call  # type: ignore[assignment]
        self._timer.start()
        return call

    def _fire(self) -> None:
        if self._done.is_set():
            return
        self.fired.set()
        if self._call is not None:
            self._call.cancel()
        if not self._done.wait(STUCK_GRACE_S) and self._on_stuck is not None:
            self._on_stuck()

    def stop(self) -> None:
        self._done.set()
        self._timer.cancel()
        if self._call is not None:
            self._call.cancel()  # no-op for a finished call; ends a stream we stopped reading


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
        self.timed_out = False  # a call of this link outlived its deadline (see close)
        self.interrupted = False  # the run was interrupted (see cancel_calls)
        self._tls = not insecure
        self._channel_args = {"tls": tls, "target_name": party_id, "insecure": insecure,
                              "max_message_bytes": max_message_bytes}
        self._channel_lock = threading.Lock()
        self._channel = create_channel(address, **self._channel_args)  # type: ignore[arg-type]
        self._stub = pb_grpc.PartyServiceStub(self._channel)

    @property
    def transport(self) -> str:
        return "grpc"

    def _replace_channel(self, why: str = "a call outlived its deadline and its cancel") -> None:
        """Close the channel (waking a reader that gRPC left blocked) and open a fresh one."""
        with self._channel_lock:
            old = self._channel
            self._channel = create_channel(self.address, **self._channel_args)  # type: ignore[arg-type]
            self._stub = pb_grpc.PartyServiceStub(self._channel)
        log.info("party %s: %s; channel replaced", self.party_id, why)
        old.close()

    def cancel_calls(self) -> None:
        self.interrupted = True  # and its Close gets CLOSE_AFTER_TIMEOUT_S: an interrupted run ends promptly
        self._replace_channel("the run was interrupted")

    # -- the edge: RpcError -> typed error naming the party ------------------------
    def _deadline_error(self, what: str, deadline_s: float) -> E.TransportError:
        self.timed_out = True  # Close gets CLOSE_AFTER_TIMEOUT_S only: a stopped party will not answer it either
        return E.TransportError(f"party {self.party_id} at {self.address} did not answer {what} within {deadline_s:g} s "
                                "(deadline exceeded); is it overloaded or stopped? raise --deadline if the block is "
                                "large")

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
            return self._deadline_error(what, deadline_s)
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return E.AuthenticationError(f"{who} refused the coordinator ({details})")
        if code == grpc.StatusCode.UNAVAILABLE:
            hint = _mismatch_hint(details, self._tls)
            if hint:
                cls = E.AuthenticationError if self._tls else E.TransportError
                return cls(f"{who} could not be reached during {what}: {hint} ({_short_cause(details)})")
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
    def _edge(self, what: str, deadline_s: float, watchdog: _CallWatchdog | None = None) -> Iterator[None]:
        try:
            yield
        except (grpc.RpcError, grpc.FutureCancelledError, grpc.FutureTimeoutError) as exc:
            if (watchdog is not None and watchdog.fired.is_set()) or not isinstance(exc, grpc.RpcError):
                raise self._deadline_error(what, deadline_s) from None
            raise self._rpc_error(exc, what, deadline_s) from None
        except E.ProtocolError as exc:  # a bad chunk stream from the party
            text = str(exc)
            raise E.ProtocolError(text if self.party_id in text else f"party {self.party_id}: {text}") from None

    def _bounded(self, what: str, deadline_s: float, start: Callable[[], C], consume: Callable[[C], R]) -> R:
        """Start a call (``start``: the stub invoked with ``timeout=deadline_s``), hand it to ``consume``,
        and make sure it ends by the deadline: the watchdog cancels it otherwise (then the typed
        error is the deadline one), and it is cancelled when ``consume`` stops early."""
        watchdog = _CallWatchdog(deadline_s, self._replace_channel)
        with self._edge(what, deadline_s, watchdog):
            call = watchdog.watch(start())
            try:
                return consume(call)
            finally:
                watchdog.stop()

    # -- PartyLink ---------------------------------------------------------------------
    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        def consume(call: grpc.Future) -> pb.HelloReply:
            reply = call.result()
            self.reported_split_id = None
            for key, value in call.trailing_metadata() or ():  # type: ignore[attr-defined]
                if key == SPLIT_ID_METADATA:
                    self.reported_split_id = str(value)
            return reply

        reply = self._bounded("hello", self.deadline_s,
                              lambda: self._stub.Hello.future(request, timeout=self.deadline_s, wait_for_ready=False),
                              consume)
        self.bytes_received += request.ByteSize()
        self.bytes_sent += reply.ByteSize()
        return reply

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        payload = self._bounded("mask", self.deadline_s,
                                lambda: self._stub.Mask(request, timeout=self.deadline_s),
                                lambda call: join_chunks(call, peer=f"party {self.party_id}: masked block"))
        self.bytes_received += request.ByteSize()
        self.bytes_sent += len(payload)
        try:
            return pb.MaskedBlock.FromString(payload)
        except Exception:  # noqa: BLE001 - protobuf DecodeError
            raise E.ProtocolError(f"party {self.party_id}: the masked block does not parse") from None

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        request = notice.SerializeToString()
        payload = self._bounded("decode", self.deadline_s,
                                lambda: self._stub.Decode(split_payload(request), timeout=self.deadline_s),
                                lambda call: join_chunks(call, peer=f"party {self.party_id}: decode reply"))
        self.bytes_received += len(request)
        self.bytes_sent += len(payload)
        try:
            return pb.DecodeReply.FromString(payload)
        except Exception:  # noqa: BLE001
            raise E.ProtocolError(f"party {self.party_id}: the decode reply does not parse") from None

    def close(self, request: pb.CloseRequest) -> None:
        short = self.timed_out or self.interrupted
        deadline = min(self.deadline_s, CLOSE_AFTER_TIMEOUT_S if short else CLOSE_DEADLINE_S)
        try:
            reply = self._bounded("close", deadline, lambda: self._stub.Close.future(request, timeout=deadline),
                                  lambda call: call.result())
            self.bytes_received += request.ByteSize()
            self.bytes_sent += reply.ByteSize()
        except E.SecureLPError as exc:  # best effort: a dead party cannot be told
            log.info("could not close party %s: %s", self.party_id, exc)

    def wait_ready(self, timeout: float, *, cancel: threading.Event | None = None) -> None:
        """Block until the party's health service reports SERVING (``securelp coordinator --wait``),
        or return early once ``cancel`` is set (another party already failed).

        Raises
        ------
        TransportError naming the party, the ``--wait`` time and the last cause seen (connection
        refused, a health status) when it is not ready in time; at once, AuthenticationError for a
        TLS failure and TransportError for a TLS/plaintext mismatch (a plaintext coordinator whose
        connection the party closes while it is set up).
        """
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        end = time.monotonic() + timeout
        who = f"party {self.party_id} at {self.address}"
        cause = ""  # the most informative reason seen: a late poll's timeout does not hide "Connection refused"
        while True:
            if cancel is not None and cancel.is_set():
                return
            left = end - time.monotonic()
            if left <= 0:
                raise E.TransportError(f"{who} was not ready within {timeout:g} s (--wait): "
                                       f"{cause or 'no answer to the health check'}; check that the party process "
                                       "runs and listens on that address, or raise --wait")
            poll = min(left, 5.0)
            watchdog = _CallWatchdog(poll, self._replace_channel)
            stub = health_pb2_grpc.HealthStub(self._channel)
            call = watchdog.watch(stub.Check.future(request, timeout=poll))
            try:
                reply = call.result()
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                cause = f"health status {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
            except (grpc.RpcError, grpc.FutureCancelledError) as exc:
                code = exc.code() if isinstance(exc, grpc.RpcError) else None
                if watchdog.fired.is_set() or code in (None, grpc.StatusCode.DEADLINE_EXCEEDED):
                    cause = cause or "no answer to the health check (deadline exceeded)"
                else:
                    details = exc.details() or ""  # type: ignore[union-attr]
                    hint = _mismatch_hint(details, self._tls)
                    if hint and not self._tls:
                        raise E.TransportError(f"{who} is not usable: {hint} ({_short_cause(details)})") from None
                    err = self._rpc_error(exc, "health check", poll)  # type: ignore[arg-type]
                    if isinstance(err, E.AuthenticationError):
                        raise err from None
                    cause = _short_cause(details) if code == grpc.StatusCode.UNAVAILABLE else str(err)
            finally:
                watchdog.stop()
            pause = min(0.1, max(0.0, end - time.monotonic()))
            if cancel is not None:
                cancel.wait(pause)
            else:
                time.sleep(pause)

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
                     insecure: bool = False, host: str = "127.0.0.1", bind_keys: bool = True
                     ) -> Iterator[list[PartyLink]]:
    """Real gRPC servers in this process (one per session, port 0) and links to them.

    Uses fresh session certificates in ``workdir`` (mutual TLS) unless ``insecure``; with
    ``bind_keys``, each session that has no identity yet gets its certificate as the identity that
    binds its secure-aggregation key (as ``securelp party --certs`` does). Servers and channels are stopped on exit. For
    simulations and contract tests.
    """
    from securelp.party.aggregation import SigningIdentity  # lazy: the party side only here
    from securelp.party.server import ServerTls, create_server

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
                if bind_keys and getattr(session, "identity", "absent") is None:
                    session.bind_identity(  # type: ignore[attr-defined]
                        SigningIdentity(ident.private_key, ident.certificate, ident.ca_certificate))
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
