"""The data owner's gRPC side, in both connection directions, over one ``PartyHost``.

A party process serves the protocols of its ``securelp.party.runtime.PartyHost`` (the secure LP of
Mangasarian, *Privacy-Preserving Linear Programming*, Optim. Lett. 2011, and any other registered
protocol) over the runtime's frames (``runtime.proto``, ``securelp.protos.stream``), either way:

- **dial-in** (:func:`serve`): the party listens, the coordinator attaches one stream per session
  (``PartyRuntime.Attach``). The servicer is thin: it checks that the client certificate names
  ``coordinator`` (PERMISSION_DENIED otherwise), takes the host for the stream (a second
  coordinator gets a ``Goodbye`` saying the party is busy with another session) and hands the
  stream to a ``FrameStream``;
- **dial-out** (:func:`connect_and_serve`): the party dials a listening coordinator
  (``CoordinatorRuntime.Connect``) with its own certificate (the coordinator checks it names the
  party id it claims; the party checks the coordinator's names ``coordinator``), so the owner opens
  no inbound port. It retries until the coordinator listens and, after a session, reconnects for
  the next one.

Lifetime: by default a party serves one session and returns (the command exits with the
session's code). With ``serve_forever`` (``securelp party --serve``) it takes session after
session, each with a fresh state machine (fresh masks), until a signal. A session whose
coordinator vanished (its connection ended, or nothing arrived for a keepalive) is dropped at once
and the next coordinator is served. Without a connected coordinator for ``idle_timeout_s`` the
party returns (reason ``idle``).

gRPC rules (docs/protocol.md): mutual TLS (``securelp.protos.channels``), message size limits,
keepalive, ``SO_REUSEPORT`` off, the standard health service (``""`` and
``securelp.v1.PartyRuntime`` SERVING once bound, NOT_SERVING on shutdown), and on SIGTERM/SIGINT
a ``Goodbye`` to a connected coordinator, NOT_SERVING, then ``server.stop(grace)``. A process that
has begun to stop is not allowed to hang in gRPC's shutdown or in the interpreter's exit:
``ExitWatchdog`` ends it with ``os._exit`` once a deadline passes.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from securelp.party.runtime import PartyBusy, PartyHost, SessionRecord
from securelp.protos import runtime_pb2 as rpb
from securelp.protos import runtime_pb2_grpc as rpb_grpc
from securelp.protos.channels import (
    DEFAULT_MAX_MESSAGE_BYTES,
    SERVER_KEEPALIVE_OPTIONS,
    ChannelTls,
    ServerTls,
    classify_rpc_error,
    create_channel,
    create_grpc_server,
    peer_names,
    server_options,
)
from securelp.protos.stream import DEFAULT_KEEPALIVE_S, FrameStream, PeerGone
from securelp.solvers import errors as E

log = logging.getLogger(__name__)

__all__ = ["COORDINATOR_IDENTITY", "SERVER_KEEPALIVE_OPTIONS", "SERVICE_NAME", "ExitWatchdog", "PartyRuntimeServicer",
           "PartyServer", "ServeResult", "ServerTls", "connect_and_serve", "create_server", "serve", "server_options",
           "start_party_server"]

SERVICE_NAME = "securelp.v1.PartyRuntime"
#: identity a client certificate must carry (CN or SAN DNS name) in dial-in, and the coordinator's
#: server certificate in dial-out
COORDINATOR_IDENTITY = "coordinator"
DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_GRACE_S = 5.0
#: seconds between two attempts to reach a coordinator that does not listen (yet)
RETRY_S = 0.5
#: ... and to connect again to a coordinator that refused for now (a session of others in progress)
REFUSED_RETRY_S = 2.0


def as_host(party: object) -> PartyHost:
    """A ``PartyHost``, or the single-session host of one ``PartySession`` (tests, simulations)."""
    if isinstance(party, PartyHost):
        return party
    from securelp.party.session import PPLP

    return PartyHost.single(party, PPLP, party.party_id)  # type: ignore[arg-type, attr-defined]


def _release_reason(stream: FrameStream) -> str:
    """Why a stream's connection ended, for the log and a dropped session's reason."""
    failure = stream.failure
    if failure is None:
        return "the connection was closed"
    if isinstance(failure, PeerGone) and failure.kind == "goodbye":
        return "the coordinator ended the stream"
    return str(failure)


class PartyRuntimeServicer(rpb_grpc.PartyRuntimeServicer):
    """Dial-in: ``PartyRuntime.Attach`` over one ``PartyHost``.

    Parameters
    ----------
    host : the party's runtime (its protocols, one session at a time).
    check_peer : require the client identity ``coordinator`` (True under mTLS).
    keepalive_s : the runtime's keepalive on every stream.
    """

    def __init__(self, host: PartyHost, *, check_peer: bool = True, keepalive_s: float = DEFAULT_KEEPALIVE_S) -> None:
        self.host = host
        self.party_id = host.party_id
        self.check_peer = check_peer
        self.keepalive_s = keepalive_s
        self._lock = threading.Lock()
        self.streams: set[FrameStream] = set()

    def Attach(self, request_iterator: Iterator[rpb.Frame], context: grpc.ServicerContext) -> Iterator[rpb.Frame]:
        who = f"the coordinator at {context.peer()}"
        if self.check_peer:
            names = peer_names(context)
            if COORDINATOR_IDENTITY not in names:
                from securelp.protos.codec import ERROR_CLASS_METADATA

                log.warning("party %s: refused %s: its certificate names %s", self.party_id, who, sorted(names))
                context.set_trailing_metadata(((ERROR_CLASS_METADATA, "AuthenticationError"),))
                context.abort(grpc.StatusCode.PERMISSION_DENIED,
                              f"party {self.party_id}: the client certificate names {sorted(names) or 'nobody'}, "
                              f"not {COORDINATOR_IDENTITY!r}; only the session's coordinator may call this party")
        try:
            lease = self.host.connect(who)
        except PartyBusy as exc:
            log.warning("party %s: refused %s: %s", self.party_id, who, exc)
            yield rpb.Frame(goodbye=rpb.Goodbye(reason=str(exc).removeprefix(f"party {self.party_id} is "),
                                                error_class="TransportError"))
            return
        stream = FrameStream(peer=who, role="party", keepalive_s=self.keepalive_s, handler=lease.handle)
        with self._lock:
            self.streams.add(stream)
        # the RPC ends without this side ending the stream: the coordinator's connection is gone
        context.add_callback(lambda: stream.lost("its connection ended"))
        stream.send_open(self.party_id, self.host.offers())  # the first frame, before any reply
        stream.attach(request_iterator, cancel=context.cancel, name=f"party-{self.party_id}")
        ended = False
        try:
            yield from stream.outgoing()
            ended = True
        finally:
            if not ended:  # gRPC closed the generator: the RPC was cancelled under it
                stream.lost("its connection ended")
            stream.close(cancel=False)
            with self._lock:
                self.streams.discard(stream)
            lease.release(_release_reason(stream))

    def say_goodbye(self, reason: str) -> None:
        """Tell every attached coordinator that the party goes away (a signal), and end the streams."""
        with self._lock:
            streams = list(self.streams)
        for stream in streams:
            stream.goodbye(f"party {self.party_id} {reason}", "TransportError")


@dataclass(frozen=True)
class PartyServer:
    """A started party server and its parts."""

    server: grpc.Server
    port: int
    servicer: PartyRuntimeServicer
    health: health.HealthServicer


def create_server(address: str, party: object, *, tls: ServerTls | None, insecure: bool = False,
                  max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                  keepalive_s: float = DEFAULT_KEEPALIVE_S) -> tuple[grpc.Server, int]:
    """Build and start a party server on ``address``; returns (server, bound port).

    ``host:0`` picks a free port (tests). See :func:`start_party_server` for the parameters.
    """
    started = start_party_server(address, party, tls=tls, insecure=insecure, max_message_bytes=max_message_bytes,
                                 keepalive_s=keepalive_s)
    return started.server, started.port


def start_party_server(address: str, party: object, *, tls: ServerTls | None, insecure: bool = False,
                       max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, max_workers: int = 8,
                       keepalive_s: float = DEFAULT_KEEPALIVE_S) -> PartyServer:
    """Build and start a dial-in party server on ``address`` (``host:0`` picks a free port).

    Parameters
    ----------
    address : ``host:port`` to bind.
    party : the party's ``PartyHost`` (or one ``PartySession``, served as its single session).
    tls : the party's certificate material; required unless ``insecure``.
    insecure : plaintext, for debugging only (logged as a warning). ``tls`` together
        with ``insecure=True`` is refused.
    keepalive_s : the runtime's keepalive on every stream.

    Returns
    -------
    PartyServer (server, bound port, servicer, health servicer), started and SERVING.
    """
    host = as_host(party)
    server, port = create_grpc_server(address, tls=tls, insecure=insecure, who=f"party {host.party_id}",
                                      max_message_bytes=max_message_bytes, max_workers=max_workers)
    servicer = PartyRuntimeServicer(host, check_peer=not insecure, keepalive_s=keepalive_s)
    rpb_grpc.add_PartyRuntimeServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
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
    """Why :func:`serve` or :func:`connect_and_serve` returned.

    ``reason``: "closed" (a session ended and the party serves one: ``detail`` is how it ended,
    ``done``, ``aborted: ...``, ``refused: ...`` or ``dropped: ...``, and ``record`` the session),
    "idle" (no coordinator for the idle timeout) or "signal" (``detail``: the signal's name).
    ``sessions``: how many sessions ended while it served.
    """

    reason: str
    detail: str
    record: SessionRecord | None = None
    sessions: int = 0


class _Signals:
    """SIGTERM/SIGINT handlers (main thread only) that only append the signal's name to a list: no
    lock, no thread, nothing that a re-entered handler could deadlock on. A party started by
    ``LocalParties`` gets its parent-death SIGTERM several times when the launcher is killed (once
    for each of the launcher's threads the kernel re-parents it to as they exit), and a handler that
    took a lock hung in about 4 of 10 bursts of SIGTERMs. The loops see the signal within 0.2 s."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self._previous: dict[int, object] = {}

    def __enter__(self) -> list[str]:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self.received

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.received.append(signal.Signals(signum).name)  # re-entrant: see the class docstring

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _check_idle(idle_timeout_s: float | None) -> None:
    if idle_timeout_s is not None and idle_timeout_s <= 0:
        raise E.ConfigError(f"idle timeout must be positive, got {idle_timeout_s}")


def serve(address: str, party: object, *, tls: ServerTls | None, insecure: bool = False,
          idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S, grace_s: float = DEFAULT_GRACE_S,
          on_listening: Callable[[str, int], None] | None = None,
          max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
          exit_watchdog: ExitWatchdog | None = None, keepalive_s: float = DEFAULT_KEEPALIVE_S,
          serve_forever: bool = False) -> ServeResult:
    """Dial-in: listen on ``address`` and serve sessions until one ended (or, with ``serve_forever``,
    until a signal), a signal arrives, or no coordinator came for ``idle_timeout_s`` (None: wait for ever).

    Installs SIGTERM/SIGINT handlers (main thread only; :class:`_Signals`) and restores the previous
    ones on return. On a signal, a connected coordinator is told (``Goodbye``), the health service
    says NOT_SERVING and the server stops with ``grace_s`` seconds for in-flight calls.

    Parameters
    ----------
    party : the party's ``PartyHost`` (or one ``PartySession``).
    on_listening : called with (host, port) once the server is SERVING (the CLI prints
        ``LISTENING host:port`` from it).
    exit_watchdog : armed as soon as the loop ends (exit code 130 after a signal, else 6),
        before the server stops, so a process that is stopping ends even if the shutdown
        blocks. It stays armed after a signal (the process is going away; its exit must
        not hang either); otherwise it is disarmed once the server has stopped. Give it a
        delay longer than ``grace_s``.
    """
    _check_idle(idle_timeout_s)
    started = start_party_server(address, party, tls=tls, insecure=insecure, max_message_bytes=max_message_bytes,
                                 keepalive_s=keepalive_s)
    server, port, servicer, health_servicer = started.server, started.port, started.servicer, started.health
    host = servicer.host
    bound = address.rsplit(":", 1)[0]
    first = len(host.history)
    result: ServeResult
    with _Signals() as signalled:
        try:
            log.info("party %s: serving on %s:%d%s", host.party_id, bound, port,
                     " (session after session)" if serve_forever else "")
            if on_listening is not None:
                on_listening(bound, port)
            result = _wait(host, first, signalled, serve_forever, idle_timeout_s)
        finally:
            if exit_watchdog is not None:  # a stop that blocks is a transport failure (130 after a signal)
                exit_watchdog.arm(int(E.ExitCode.INTERRUPTED if signalled else E.ExitCode.TRANSPORT))
            if signalled:
                servicer.say_goodbye(f"is shutting down ({signalled[0]})")
            for name in ("", SERVICE_NAME):
                health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
            # after the last reply a short grace lets it flush
            server.stop(grace_s).wait(grace_s + 1.0)
            if exit_watchdog is not None and not signalled:
                exit_watchdog.disarm()
    log.info("party %s: stopped (%s%s)", host.party_id, result.reason, f": {result.detail}" if result.detail else "")
    return result


def _wait(host: PartyHost, first: int, signalled: list[str], serve_forever: bool,
          idle_timeout_s: float | None, stop: Callable[[], bool] | None = None) -> ServeResult:
    """Wait until a session ended (unless ``serve_forever``), a signal, the idle timeout, or ``stop()``."""
    while True:
        host.wait_for_change(0.2)
        ended = host.history[first:]
        if ended and not serve_forever:
            return ServeResult("closed", ended[0].end_reason, ended[0], len(ended))
        if signalled:
            return ServeResult("signal", signalled[0], None, len(ended))
        if idle_timeout_s is not None and host.idle_seconds() > idle_timeout_s:
            return ServeResult("idle", f"no coordinator for {idle_timeout_s:g} s", None, len(ended))
        if stop is not None and stop():
            return ServeResult("stopped", "", None, len(ended))


def connect_and_serve(address: str, party: object, *, tls: ServerTls | ChannelTls | None, insecure: bool = False,
                      idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S, keepalive_s: float = DEFAULT_KEEPALIVE_S,
                      serve_forever: bool = False, on_connected: Callable[[str], None] | None = None,
                      exit_watchdog: ExitWatchdog | None = None, retry_s: float = RETRY_S,
                      max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                      stop: threading.Event | None = None) -> ServeResult:
    """Dial-out: connect to the coordinator listening at ``address`` and serve its sessions.

    The party retries every ``retry_s`` seconds (a fresh channel each time, so gRPC's reconnection
    backoff never delays it) until the coordinator listens, serves the session that coordinator
    runs on the stream, and returns once one ended (or, with ``serve_forever``, reconnects at once
    for the next coordinator). A coordinator that vanishes mid-session (its connection ends, or
    nothing arrives for ``keepalive_s``) has its session dropped. Returns on a signal (the connected
    coordinator is told), after ``idle_timeout_s`` without a connected coordinator (None: never), or
    when ``stop`` is set (tests).

    Raises
    ------
    AuthenticationError
        The coordinator's certificate is not the session CA's ``coordinator``, or the coordinator
        refused the party's certificate.
    InputError
        Without ``serve_forever``: the coordinator's session does not include this party.
    """
    _check_idle(idle_timeout_s)
    host = as_host(party)
    who = f"the coordinator at {address}"
    channel_tls = None if tls is None else ChannelTls(tls.root_certificates, tls.private_key, tls.certificate_chain)
    first = len(host.history)
    last_contact = time.monotonic()
    last_wait_note = ""
    ever_connected = False
    result: ServeResult | None = None
    with _Signals() as signalled:
        try:
            while result is None:
                if signalled:
                    result = ServeResult("signal", signalled[0], None, len(host.history) - first)
                    break
                if stop is not None and stop.is_set():
                    result = ServeResult("stopped", "", None, len(host.history) - first)
                    break
                if idle_timeout_s is not None and time.monotonic() - last_contact > idle_timeout_s:
                    result = ServeResult("idle", f"no coordinator for {idle_timeout_s:g} s", None,
                                         len(host.history) - first)
                    break
                sessions_before = len(host.history)
                outcome = _one_connection(host, address, who, channel_tls, insecure, keepalive_s, max_message_bytes,
                                          signalled, stop, on_connected)
                if outcome == "connected":
                    ever_connected = True
                    last_contact = time.monotonic()
                    last_wait_note = ""
                    ended = host.history[first:]
                    if ended and not serve_forever:
                        result = ServeResult("closed", ended[0].end_reason, ended[0], len(ended))
                    elif len(host.history) == sessions_before and not (signalled or (stop is not None and stop.is_set())):
                        # the coordinator let it go before any session (it gave up waiting, or stopped)
                        until = f", for up to {idle_timeout_s:g} s (--idle-timeout)" if idle_timeout_s is not None else ""
                        log.warning("party %s: %s closed the connection before a session; waiting for a coordinator "
                                    "there%s", host.party_id, who, until)
                    continue
                if isinstance(outcome, E.SecureLPError):  # refused by the coordinator
                    transient = type(outcome) is E.TransportError  # busy with another session, already connected
                    # a coordinator that is going away closes connections while they are set up, which reads
                    # like a refused certificate: a long-running party that this address already served with
                    # these certificates keeps trying
                    restarting = serve_forever and ever_connected and isinstance(outcome, E.AuthenticationError)
                    if not restarting and (isinstance(outcome, E.AuthenticationError)
                                           or not (serve_forever or transient)):
                        raise outcome
                    pause = REFUSED_RETRY_S if transient else (retry_s if restarting else keepalive_s)
                    if str(outcome) != last_wait_note:
                        if restarting:
                            log.info("party %s: %s closed the connection while it was set up (going away, or "
                                     "another coordinator with other certificates?); trying again every %g s",
                                     host.party_id, who, pause)
                        else:
                            log.warning("party %s: %s; trying again every %g s", host.party_id, outcome, pause)
                        last_wait_note = str(outcome)
                    _pause(pause, signalled, stop)
                    continue
                if outcome != last_wait_note:
                    log.info("party %s: waiting for %s: %s", host.party_id, who, outcome)
                    last_wait_note = outcome
                _pause(retry_s, signalled, stop)
        finally:
            if exit_watchdog is not None:
                exit_watchdog.arm(int(E.ExitCode.INTERRUPTED if signalled else E.ExitCode.TRANSPORT))
                if not signalled:
                    exit_watchdog.disarm()
    log.info("party %s: stopped (%s%s)", host.party_id, result.reason, f": {result.detail}" if result.detail else "")
    return result


def _pause(seconds: float, signalled: list[str], stop: threading.Event | None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not signalled and not (stop is not None and stop.is_set()):
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))


def _one_connection(host: PartyHost, address: str, who: str, tls: ChannelTls | None, insecure: bool,
                    keepalive_s: float, max_message_bytes: int, signalled: list[str], stop: threading.Event | None,
                    on_connected: Callable[[str], None] | None) -> str | E.SecureLPError:
    """One attempt: "connected" after a stream that was served to its end, the coordinator's refusal
    (a typed error), or why the coordinator could not be reached (a string: try again)."""
    channel = create_channel(address, tls=tls, target_name=COORDINATOR_IDENTITY, insecure=insecure,
                             max_message_bytes=max_message_bytes)
    try:
        lease = host.connect(who)
        stream = FrameStream(peer=who, role="party", keepalive_s=keepalive_s, handler=lease.handle)
        try:
            stream.send_open(host.party_id, host.offers())  # the first frame, before any reply
            call = rpb_grpc.CoordinatorRuntimeStub(channel).Connect(stream.outgoing())
            stream.attach(call, cancel=call.cancel, name=f"party-{host.party_id}",
                          classify=lambda exc: _classify(exc, who, stream, not insecure))
            try:
                stream.wait_open(max(keepalive_s, 5.0))
            except (E.AuthenticationError, E.InputError, E.ConfigError, E.ProtocolError) as exc:
                return exc
            except E.TransportError as exc:
                if stream.peer_goodbye is not None and stream.peer_goodbye.error_class:
                    return exc  # refused (e.g. already connected): the coordinator's word
                return str(exc)
            log.info("party %s: connected to %s", host.party_id, who)
            if on_connected is not None:
                on_connected(address)
            while not stream.done.wait(0.2):
                if signalled:
                    stream.goodbye(f"party {host.party_id} is shutting down ({signalled[0]})", "TransportError")
                    stream.done.wait(1.0)
                    break
                if stop is not None and stop.is_set():
                    break
            return "connected"
        finally:
            stream.close()
            lease.release(_release_reason(stream))
            stream.join(1.0)
    finally:
        channel.close()


def _classify(exc: BaseException, who: str, stream: FrameStream, tls: bool) -> E.SecureLPError:
    """A gRPC error of the dial-out stream: before the coordinator opened it, why it cannot be reached;
    after, the coordinator disconnected."""
    if not isinstance(exc, grpc.RpcError):
        return PeerGone(f"{who} disconnected ({exc.__class__.__name__})", kind="disconnected")
    err = classify_rpc_error(exc, who=who, what="connect", tls=tls, peer_kind="coordinator",
                             expected_name=COORDINATOR_IDENTITY)
    if stream.opened.is_set() and isinstance(err, PeerGone):
        return PeerGone(f"{who} disconnected ({exc.details() or exc.code().name}); did its process end?",
                        kind="disconnected")
    return err


