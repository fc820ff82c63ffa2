"""gRPC plumbing shared by both sides and both connection directions: one factory for channels,
one for servers, and one reading of gRPC's errors.

Whoever dials is the TLS client and whoever listens the TLS server: the coordinator dials the
parties (dial-in) or listens for them (dial-out), so both the coordinator and a party use both
factories (docs/protocol.md, "Directions"). Rules:

- mutual TLS (RFC 8446, TLS 1.3) unless ``insecure=True`` is asked for explicitly (warned); TLS
  material together with ``insecure=True`` is refused. A server requires a client certificate
  (``require_client_auth=True``); a channel checks that the server's certificate names the peer
  it meant to reach (``grpc.ssl_target_name_override``);
- 8 MiB per message on both sides (payloads travel as 1 MiB chunks);
- gRPC keepalive (HTTP/2 pings: client every 30 s, 20 s to answer; the server accepts pings every
  >= 10 s, so no GOAWAY "too_many_pings"); liveness of a session is the runtime's own heartbeat
  (``securelp.protos.stream``), whose interval is ``--keepalive``;
- retries for UNAVAILABLE only, and only for the idempotent health check; a runtime stream is
  never retried (a repeated hello or mask is refused; a retried stream on a reset connection was
  seen to block its reader for ever);
- ``SO_REUSEPORT`` off, so a fixed port already in use is an error, not a silent share;
- :func:`classify_rpc_error` turns a ``grpc.RpcError`` into a typed error naming the peer: a TLS
  failure is an ``AuthenticationError``; a connection that was set up but never answered (a stopped
  peer: gRPC's "handshake timed out") is a ``TransportError`` saying the peer is unresponsive, never
  a certificate problem.
"""

from __future__ import annotations

import json
import logging
from concurrent import futures
from dataclasses import dataclass

import grpc

from securelp.solvers import errors as E

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 8 << 20
#: client keepalive: ping every 30 s (the server accepts pings every >= 10 s), 20 s to answer
CHANNEL_KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)
#: server keepalive: ping an idle client every 60 s, drop it after 20 s without an answer; accept
#: client pings every >= 10 s (the channel pings every 30 s)
SERVER_KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 3),
)
#: the only call retried (UNAVAILABLE only, within its deadline): the health check
RETRIED_METHODS: tuple[tuple[str, str], ...] = (("grpc.health.v1.Health", "Check"),)
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
#: fragments of gRPC/BoringSSL error details that mean a TLS handshake or identity failure
_TLS_FAILURE_MARKERS = ("handshake", "certificate", "ssl_error", "ssl routines", "peer name", "alert",
                        "verification check failed", "unauthenticated")
#: ... unless the details say the connection timed out: a peer that accepted the TCP connection but
#: never answered (stopped with SIGSTOP: the kernel still accepts) fails gRPC's 20 s handshake
#: timeout, reported as "Handshake read failed (Endpoint closing)" (grpcio 1.85, measured), or as
#: "timed out" in other versions
_TIMEOUT_MARKERS = ("timed out", "timeout", "deadline", "endpoint closing")
#: a TCP connection that the peer closed while connecting: under mTLS, the server refused our
#: certificate (TLS 1.3 servers verify the client after the client finished its side) or it
#: does not speak TLS at all. A peer that is down refuses the connection instead.
_CLOSED_WHILE_CONNECTING = ("socket closed", "connection reset", "end of file", "eof")


@dataclass(frozen=True)
class ChannelTls:
    """PEM material of the dialing side: the session CA, its key and its certificate chain."""

    root_certificates: bytes
    private_key: bytes
    certificate_chain: bytes


@dataclass(frozen=True)
class ServerTls:
    """PEM material of the listening side: its key and certificate chain, and the session CA."""

    private_key: bytes
    certificate_chain: bytes
    root_certificates: bytes


def channel_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, object]]:
    """Channel arguments of every channel (sizes, keepalive, retries)."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
        *CHANNEL_KEEPALIVE_OPTIONS,
    ]


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Channel arguments of every server (sizes, keepalive, no port sharing)."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
        *SERVER_KEEPALIVE_OPTIONS,
    ]


#: the addresses this process has already warned about dialing in plaintext
_WARNED_PLAINTEXT: set[str] = set()


def create_channel(address: str, *, tls: ChannelTls | None, target_name: str | None = None, insecure: bool = False,
                   max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> grpc.Channel:
    """The one place channels are made.

    Parameters
    ----------
    address : ``host:port`` of the listening side.
    tls : the dialing side's certificate material (mutual TLS); required unless ``insecure``.
    target_name : the identity the server's certificate must carry (a party id, or ``coordinator``).
    insecure : plaintext, only when asked for explicitly; warned.
    """
    if tls is not None and insecure:
        raise E.ConfigError("TLS material and insecure=True were both given; choose one")
    options = channel_options(max_message_bytes)
    if insecure:
        if address not in _WARNED_PLAINTEXT:  # once per address: a party that redials would repeat it
            _WARNED_PLAINTEXT.add(address)
            log.warning("connecting to %s WITHOUT TLS (--insecure): masked data travels in the clear and the peer "
                        "is not authenticated", address)
        return grpc.insecure_channel(address, options=options)
    if tls is None:
        raise E.ConfigError(f"no TLS material for {address}; pass --certs DIR (or --insecure for debugging only)")
    if target_name:
        options.append(("grpc.ssl_target_name_override", target_name))
    creds = grpc.ssl_channel_credentials(root_certificates=tls.root_certificates, private_key=tls.private_key,
                                         certificate_chain=tls.certificate_chain)
    return grpc.secure_channel(address, creds, options=options)


def create_grpc_server(address: str, *, tls: ServerTls | None, insecure: bool = False, who: str = "securelp",
                       max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, max_workers: int = 8,
                       max_concurrent_rpcs: int | None = None) -> tuple[grpc.Server, int]:
    """A gRPC server bound to ``address`` (``host:0`` picks a free port), not started yet, and its port.

    Raises
    ------
    ConfigError
        TLS material together with ``insecure``, or neither.
    TransportError
        The address cannot be bound (in use, invalid), naming ``who``.
    """
    if tls is not None and insecure:
        raise E.ConfigError("TLS material and insecure=True were both given; choose one")
    if tls is None and not insecure:
        raise E.ConfigError(f"no TLS material for {who}'s server; pass certificates or, for debugging only, "
                            "--insecure")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rpc"),
                         options=server_options(max_message_bytes), maximum_concurrent_rpcs=max_concurrent_rpcs)
    try:
        if insecure:
            log.warning("%s: serving WITHOUT TLS on %s (--insecure): anyone on the network can read the masked "
                        "data and impersonate a peer", who, address)
            port = server.add_insecure_port(address)
        else:
            assert tls is not None
            creds = grpc.ssl_server_credentials(((tls.private_key, tls.certificate_chain),),
                                                root_certificates=tls.root_certificates, require_client_auth=True)
            port = server.add_secure_port(address, creds)
    except RuntimeError:
        port = 0
    if not port:
        raise E.TransportError(f"{who}: cannot listen on {address}: {bind_failure(address)}")
    return server, port


def bind_failure(address: str) -> str:
    """Why ``host:port`` cannot be bound, as the operating system says it (gRPC reports only that it
    failed, with the cause in its own log): a plain socket tries the same bind."""
    import socket

    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, ValueError, UnicodeError) as exc:
        return f"the host {host!r} does not resolve ({exc})"
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(sockaddr)
        except OSError as exc:
            return exc.strerror or str(exc)
    return "gRPC could not bind it (set GRPC_VERBOSITY=debug for its reason)"


def peer_names(context: grpc.ServicerContext) -> set[str]:
    """The identities (CN and SAN DNS names) of the client certificate of a call (empty without TLS)."""
    auth = context.auth_context()
    return {v.decode("utf-8", "replace") for key in ("x509_common_name", "x509_subject_alternative_name")
            for v in auth.get(key, [])}


def closed_while_connecting(low: str) -> bool:
    """gRPC's (lower-cased) error says the peer closed the socket while the connection was set up."""
    return "failed to connect" in low and any(marker in low for marker in _CLOSED_WHILE_CONNECTING)


def timed_out_while_connecting(details: str) -> bool:
    """gRPC's error says the connection was accepted but never completed (a stopped or hung peer)."""
    low = details.lower()
    return any(marker in low for marker in _TIMEOUT_MARKERS)


#: a connection reset (TCP RST) in the middle of the handshake, without any TLS alert or verification
#: message: a network path that failed (a shaped link cut, a route gone) or a peer that died; a peer
#: that refuses a certificate sends a TLS alert and closes instead
_RESET_MARKERS = ("connection reset by peer",)
_VERIFICATION_MARKERS = ("certificate", "alert", "verif", "peer name", "unauthenticated", "ssl routines")


def reset_while_connecting(details: str) -> bool:
    """gRPC's error says the connection was reset while it was set up, with no sign of a refused
    certificate."""
    low = details.lower()
    return any(m in low for m in _RESET_MARKERS) and not any(m in low for m in _VERIFICATION_MARKERS)


def looks_like_tls_failure(details: str, tls: bool) -> bool:
    """The error details show a TLS handshake or verification failure (not a timeout)."""
    low = details.lower()
    if timed_out_while_connecting(low):
        return False
    if any(marker in low for marker in _TLS_FAILURE_MARKERS):
        return True
    return tls and closed_while_connecting(low)


def mismatch_hint(details: str, tls: bool, peer_kind: str = "party") -> str:
    """A TLS/plaintext mismatch, told from gRPC's connection error (cheap: no extra probe).

    A TLS client dialling a plaintext server fails its handshake with BoringSSL's
    ``WRONG_VERSION_NUMBER`` (the server answered with HTTP/2, not a TLS record); a plaintext
    client dialling a TLS server sees the server close the socket while connecting.
    """
    low = details.lower()
    if tls and "wrong_version_number" in low:
        return f"the {peer_kind} seems to serve plaintext (started with --insecure?) while this side uses TLS"
    if not tls and closed_while_connecting(low):
        return (f"the {peer_kind} closed the connection while it was set up: it probably requires TLS (--certs) "
                "while this side runs with --insecure")
    return ""


def short_cause(details: str) -> str:
    """The last, most specific part of a gRPC connection error ("Connection refused")."""
    tail = details.rsplit(": ", 1)[-1].strip() if details else ""
    return tail or details or "no answer"


def error_class_of(exc: grpc.RpcError) -> str:
    """The typed error class a peer put in the trailing metadata ``securelp-error-class`` ("": none)."""
    from securelp.protos.codec import ERROR_CLASS_METADATA

    try:
        for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
            if key == ERROR_CLASS_METADATA:
                return str(value)
    except Exception:  # noqa: BLE001 - no metadata on locally generated errors
        return ""
    return ""


def classify_rpc_error(exc: grpc.RpcError, *, who: str, what: str, tls: bool, peer_kind: str = "party",
                       expected_name: str | None = None) -> E.SecureLPError:
    """A typed error for a gRPC error of a call or stream with ``who`` ("party p1 at 10.0.0.5:50051")
    during ``what`` (a phase or call name); ``expected_name``: the identity the peer's certificate
    must name (for the message of a TLS failure)."""
    from securelp.protos.stream import FAULT_CLASSES, PeerGone

    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else "") or ""
    cls_name = error_class_of(exc)
    if cls_name in FAULT_CLASSES:
        return FAULT_CLASSES[cls_name](f"{what}: {details if who.split(' at ')[0] in details else f'{who}: {details}'}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return E.TransportError(f"{who} did not answer {what} in time (deadline exceeded); is it overloaded or "
                                "stopped?")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return E.AuthenticationError(f"{who} refused this side's certificate ({details})")
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = mismatch_hint(details, tls, peer_kind)
        if hint:
            cls = E.AuthenticationError if tls else E.TransportError
            return cls(f"{who} could not be reached during {what}: {hint} ({short_cause(details)})")
        if reset_while_connecting(details):
            named = repr(expected_name) if expected_name else "the expected identity"
            return PeerGone(f"the connection to {who} was reset during {what}, while it was set up: the network "
                            f"path failed or the peer's process ended ({short_cause(details)}); if it persists, "
                            f"check that its certificate is from this session's CA and names {named}",
                            kind="disconnected")
        if looks_like_tls_failure(details, tls):
            named = repr(expected_name) if expected_name else "the expected identity"
            return E.AuthenticationError(
                f"TLS handshake with {who} failed: its certificate is not from this session's CA or does not "
                f"name {named}, or it refused ours ({details})")
        if timed_out_while_connecting(details):
            return PeerGone(f"{who} is unresponsive during {what}: it accepted the connection but never completed "
                            f"it ({short_cause(details)}); is it stopped or overloaded?", kind="unresponsive")
        return PeerGone(f"{who} is unreachable during {what} ({details}); check that its process runs and listens "
                        "on that address", kind="disconnected")
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.OUT_OF_RANGE):
        return E.ProtocolError(f"{who} rejected {what}: {details}")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return E.ProtocolError(f"{who} does not serve the securelp runtime ({details}): a securelp of another "
                               "release? run both sides from compatible releases")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return E.ResourceError(f"{what} with {who} exceeded a size limit: {details}")
    if code == grpc.StatusCode.CANCELLED:
        return PeerGone(f"{who} disconnected during {what}: the stream was cancelled ({details})",
                        kind="disconnected")
    return E.SecureLPError(f"{who} failed during {what} ({code.name if code else 'unknown'}: {details})")
