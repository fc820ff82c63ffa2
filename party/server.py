"""The data owner's gRPC service: a thin servicer over ``securelp.party.session.PartySession``.

The servicer unpacks requests (reassembling checksummed chunks, ``securelp.protos.codec``), calls
the transport-free session (Mangasarian, PPLP, Optim. Lett. 2011: hello -> mask ->
decode -> close), streams replies back as chunks, and maps typed errors to gRPC status
codes in one place (``_status_for``). Nothing here does protocol math.

gRPC rules (docs/protocol.md):

- mutual TLS (``grpc.ssl_server_credentials(..., require_client_auth=True)``): a client
  whose certificate is not signed by the session CA fails the handshake; a client
  whose certificate is signed but does not name ``coordinator`` (CN or SAN) is refused
  with PERMISSION_DENIED on every PartyService call;
- message size limits (8 MiB; payloads travel as 1 MiB chunks), keepalive values
  below, ``SO_REUSEPORT`` off so a fixed port is never silently shared;
- the standard health service (``grpc.health.v1``): SERVING once bound, NOT_SERVING
  on shutdown;
- ``serve`` returns after the session is closed (Close RPC), after a signal
  (SIGTERM/SIGINT: NOT_SERVING, then ``server.stop(grace)``), or after an idle timeout
  with no coordinator contact, so a party process is never left running forever;
- a process that has begun to stop is not allowed to hang in gRPC's shutdown or in the
  interpreter's exit: ``ExitWatchdog`` ends it with ``os._exit`` once a deadline passes
  (armed by ``serve``'s signal handler and before the server stops; disarmed after a clean
  stop without a signal).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from securelp.protos import securelp_pb2 as pb
from securelp.protos import securelp_pb2_grpc as pb_grpc
from securelp.protos.codec import ERROR_CLASS_METADATA, SPLIT_ID_METADATA, join_chunks, split_payload
from securelp.solvers import errors as E

log = logging.getLogger(__name__)

T = TypeVar("T")

SERVICE_NAME = "securelp.v1.PartyService"
#: identity a client certificate must carry (CN or SAN DNS name)
COORDINATOR_IDENTITY = "coordinator"
#: per-message limit on both sides; payloads travel as 1 MiB chunks, so 8 MiB is ample
DEFAULT_MAX_MESSAGE_BYTES = 8 << 20
DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_GRACE_S = 5.0
#: keepalive: the server pings an idle client every 60 s and drops it after 20 s without an
#: answer; it accepts client pings every >= 10 s (the channel pings every 30 s).
SERVER_KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 3),
)

# typed error -> status code; the one place where this mapping lives
_STATUS_FOR: tuple[tuple[type[E.SecureLPError], grpc.StatusCode], ...] = (
    (E.InputError, grpc.StatusCode.INVALID_ARGUMENT),
    (E.ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (E.ProtocolError, grpc.StatusCode.FAILED_PRECONDITION),
    (E.ResourceError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.AuthenticationError, grpc.StatusCode.PERMISSION_DENIED),
    (E.SolverError, grpc.StatusCode.INTERNAL),
)


def _status_for(exc: E.SecureLPError) -> grpc.StatusCode:
    for cls, code in _STATUS_FOR:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


@dataclass(frozen=True)
class ServerTls:
    """PEM material of a party: its key and certificate chain, and the session CA."""

    private_key: bytes
    certificate_chain: bytes
    root_certificates: bytes


class PartyServicer(pb_grpc.PartyServiceServicer):
    """PartyService over one ``PartySession``; records the time of the last coordinator call.

    Parameters
    ----------
    session : the party's protocol state machine (``securelp.party.session.PartySession``).
    check_peer : require the client identity ``coordinator`` (True under mTLS).
    """

    def __init__(self, session: object, *, check_peer: bool = True) -> None:
        self.session = session
        self.party_id: str = session.party_id  # type: ignore[attr-defined]
        self.check_peer = check_peer
        self.last_contact = time.monotonic()

    # -- the one edge where typed errors become status codes -----------------------
    def _guard(self, context: grpc.ServicerContext, call: Callable[[], T]) -> T:
        self.last_contact = time.monotonic()
        try:
            if self.check_peer:
                self._check_peer(context)
            return call()
        except (E.SecureLPError, MemoryError) as exc:
            if isinstance(exc, MemoryError):  # a limit the estimates missed: a resource error, not an internal one
                exc = E.ResourceError(f"party {self.party_id}: ran out of memory during this call")
            code = _status_for(exc)
            log.warning("party %s: refused a request: %s", self.party_id, exc)
            context.set_trailing_metadata(((ERROR_CLASS_METADATA, type(exc).__name__),))
            context.abort(code, str(exc))
        except Exception as exc:  # never leak internals (or data) to the peer
            log.error("party %s: internal error (%s)", self.party_id, exc.__class__.__name__)
            log.debug("party %s: internal error", self.party_id, exc_info=True)
            context.abort(grpc.StatusCode.INTERNAL,
                          f"party {self.party_id}: internal error ({exc.__class__.__name__}); see the party's log")
        raise AssertionError("unreachable")  # context.abort raises

    def _check_peer(self, context: grpc.ServicerContext) -> None:
        auth = context.auth_context()
        names = {v.decode("utf-8", "replace") for key in ("x509_common_name", "x509_subject_alternative_name")
                 for v in auth.get(key, [])}
        if COORDINATOR_IDENTITY not in names:
            raise E.AuthenticationError(
                f"party {self.party_id}: the client certificate names {sorted(names) or 'nobody'}, "
                f"not {COORDINATOR_IDENTITY!r}; only the session's coordinator may call this party")

    # -- RPCs -------------------------------------------------------------------------
    def Hello(self, request: pb.HelloRequest, context: grpc.ServicerContext) -> pb.HelloReply:
        reply = self._guard(context, lambda: self.session.hello(request))  # type: ignore[attr-defined]
        split_id = getattr(self.session, "split_id", "")
        if split_id:
            context.set_trailing_metadata(((SPLIT_ID_METADATA, str(split_id)),))
        return reply

    def Mask(self, request: pb.MaskRequest, context: grpc.ServicerContext) -> Iterator[pb.Chunk]:
        # serialized under the guard: the masked block's bytes are its largest allocation, and a
        # MemoryError there is a resource error like one in the products (outside the guard the
        # coordinator would see "UNKNOWN: Exception iterating responses" and exit 1)
        payload = self._guard(context, lambda: self.session.mask(request).SerializeToString())  # type: ignore[attr-defined]
        yield from split_payload(payload)

    def Decode(self, request_iterator: Iterator[pb.Chunk], context: grpc.ServicerContext) -> Iterator[pb.Chunk]:
        def run() -> bytes:
            payload = join_chunks(request_iterator, peer=f"party {self.party_id}: solution notice")
            try:
                notice = pb.SolutionNotice.FromString(payload)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError
                raise E.ProtocolError(f"party {self.party_id}: the solution notice does not parse") from None
            return self.session.decode(notice).SerializeToString()  # type: ignore[attr-defined]

        yield from split_payload(self._guard(context, run))

    def Close(self, request: pb.CloseRequest, context: grpc.ServicerContext) -> pb.CloseReply:
        return self._guard(context, lambda: self.session.close(request))  # type: ignore[attr-defined]


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Channel arguments of every party server (sizes, keepalive, no port sharing)."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
        *SERVER_KEEPALIVE_OPTIONS,
    ]


@dataclass(frozen=True)
class PartyServer:
    """A started party server and its parts."""

    server: grpc.Server
    port: int
    servicer: PartyServicer
    health: health.HealthServicer


def create_server(address: str, session: object, *, tls: ServerTls | None, insecure: bool = False,
                  max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> tuple[grpc.Server, int]:
    """Build and start a party server on ``address``; returns (server, bound port).

    ``host:0`` picks a free port (tests). See ``start_party_server`` for the parameters.
    """
    started = start_party_server(address, session, tls=tls, insecure=insecure, max_message_bytes=max_message_bytes)
    return started.server, started.port


def start_party_server(address: str, session: object, *, tls: ServerTls | None, insecure: bool = False,
                       max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, max_workers: int = 4) -> PartyServer:
    """Build and start a party server on ``address`` (``host:0`` picks a free port).

    Parameters
    ----------
    address : ``host:port`` to bind.
    session : the party's ``PartySession``.
    tls : the party's certificate material; required unless ``insecure``.
    insecure : plaintext, for debugging only (logged as a warning). ``tls`` together
        with ``insecure=True`` is refused.

    Returns
    -------
    PartyServer (server, bound port, servicer, health servicer), started and SERVING.
    """
    if tls is not None and insecure:
        raise E.ConfigError("TLS material and insecure=True were both given; choose one")
    if tls is None and not insecure:
        raise E.ConfigError("no TLS material for the party server; pass certificates or, for debugging only, "
                            "--insecure")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="party-rpc"),
                         options=server_options(max_message_bytes), maximum_concurrent_rpcs=16)
    servicer = PartyServicer(session, check_peer=not insecure)
    pb_grpc.add_PartyServiceServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        if insecure:
            log.warning("party %s: serving WITHOUT TLS on %s (--insecure): anyone on the network can read the "
                        "masked data and impersonate the coordinator", servicer.party_id, address)
            port = server.add_insecure_port(address)
        else:
            assert tls is not None
            creds = grpc.ssl_server_credentials(((tls.private_key, tls.certificate_chain),),
                                                root_certificates=tls.root_certificates,
                                                require_client_auth=True)
            port = server.add_secure_port(address, creds)
    except RuntimeError as exc:
        raise E.TransportError(f"party {servicer.party_id}: cannot listen on {address} ({exc})") from None
    if not port:
        raise E.TransportError(f"party {servicer.party_id}: cannot listen on {address} (address in use or invalid)")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return PartyServer(server, port, servicer, health_servicer)


class ExitWatchdog:
    """Ends the process with ``os._exit(code)`` if it is still alive ``seconds`` after ``arm``.

    A party that has been told to stop (a signal, the launcher's death) must go away even if
    a gRPC thread or the interpreter's exit blocks. The first ``arm`` starts a daemon thread;
    later calls only change the exit code; ``disarm`` stops the countdown for good (a stop
    that finished). The message goes to fd 2 with ``os.write`` (no Python-level lock that a
    stuck thread could hold).

    Not for signal handlers: ``arm`` takes a lock and starts a thread, and a handler can be
    re-entered (a burst of signals) while it holds them. ``serve`` arms it from its main
    loop.
    """

    def __init__(self, seconds: float, label: str = "securelp") -> None:
        if not seconds > 0:
            raise E.ConfigError(f"exit watchdog needs a positive delay, got {seconds}")
        self.seconds = float(seconds)
        self.label = label
        self.code = int(E.ExitCode.INTERRUPTED)
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def armed(self) -> bool:
        return self._thread is not None and not self._cancelled.is_set()

    def arm(self, code: int) -> None:
        """Set the exit code and, on the first call, start the countdown (main code, not a signal handler)."""
        self.code = int(code)
        with self._lock:
            if self._thread is None and not self._cancelled.is_set():
                self._thread = threading.Thread(target=self._expire, name="exit-watchdog", daemon=True)
                self._thread.start()

    def disarm(self) -> None:
        """Cancel the countdown (and any later ``arm``): the shutdown it guarded has finished."""
        self._cancelled.set()

    def _expire(self) -> None:
        if self._cancelled.wait(self.seconds):
            return
        try:
            os.write(2, f"{self.label}: shutdown did not finish within {self.seconds:g} s; "
                        f"exiting (code {self.code})\n".encode())
        finally:
            os._exit(self.code)


@dataclass(frozen=True)
class ServeResult:
    """Why ``serve`` returned."""

    reason: str  # "closed", "idle", "signal"
    detail: str


def serve(address: str, session: object, *, tls: ServerTls | None, insecure: bool = False,
          idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, grace_s: float = DEFAULT_GRACE_S,
          on_listening: Callable[[str, int], None] | None = None,
          max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
          exit_watchdog: ExitWatchdog | None = None) -> ServeResult:
    """Serve one session until it is closed, a signal arrives, or the coordinator goes silent.

    Installs SIGTERM/SIGINT handlers (main thread only) that set NOT_SERVING and stop
    the server with ``grace_s`` seconds for in-flight calls; restores the previous
    handlers on return. The handlers only append to a list: no lock, no thread, nothing
    that a re-entered handler could deadlock on. A party started by ``LocalParties`` gets
    its parent-death SIGTERM several times when the launcher is killed (once for each of
    the launcher's threads the kernel re-parents it to as they exit), and a handler that
    took a lock (``Event.set``, starting a thread) hung in about 4 of 10 bursts of
    SIGTERMs. The loop below sees the signal within 0.2 s.

    Parameters
    ----------
    on_listening : called with (host, port) once the server is SERVING (the CLI prints
        ``LISTENING host:port`` from it).
    idle_timeout_s : return with reason ``"idle"`` after this many seconds with no call
        from the coordinator.
    exit_watchdog : armed as soon as the loop ends (exit code 130 after a signal, else 6),
        before the server stops, so a process that is stopping ends even if the shutdown
        blocks. It stays armed after a signal (the process is going away; its exit must
        not hang either); otherwise it is disarmed once the server has stopped. Give it a
        delay longer than ``grace_s``.
    """
    if idle_timeout_s <= 0:
        raise E.ConfigError(f"idle timeout must be positive, got {idle_timeout_s}")
    started = start_party_server(address, session, tls=tls, insecure=insecure, max_message_bytes=max_message_bytes)
    server, port, servicer, health_servicer = started.server, started.port, started.servicer, started.health
    host = address.rsplit(":", 1)[0]
    signalled: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signal.Signals(signum).name)  # re-entrant: see the docstring

    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
    closed: threading.Event = session.closed  # type: ignore[attr-defined]
    result: ServeResult
    try:
        log.info("party %s: serving on %s:%d", servicer.party_id, host, port)
        if on_listening is not None:
            on_listening(host, port)
        while True:
            if closed.wait(timeout=0.2):
                result = ServeResult("closed", getattr(session, "close_reason", ""))
                break
            if signalled:
                result = ServeResult("signal", signalled[0])
                break
            idle = time.monotonic() - servicer.last_contact
            if idle > idle_timeout_s:
                result = ServeResult("idle", f"no call from the coordinator for {idle_timeout_s:g} s")
                break
    finally:
        if exit_watchdog is not None:  # a stop that blocks is a transport failure (130 after a signal)
            exit_watchdog.arm(int(E.ExitCode.INTERRUPTED if signalled else E.ExitCode.TRANSPORT))
        for name in ("", SERVICE_NAME):
            health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        # after Close the last reply is already on its way; a short grace lets it flush
        server.stop(grace_s).wait(grace_s + 1.0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if exit_watchdog is not None and not signalled:
            exit_watchdog.disarm()
    log.info("party %s: stopped (%s%s)", servicer.party_id, result.reason,
             f": {result.detail}" if result.detail else "")
    return result
