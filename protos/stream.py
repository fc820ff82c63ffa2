"""One bidirectional stream of runtime frames (``runtime.proto``), whichever side dialed.

The protocol runtime carries every protocol's messages over one stream per party and session
(docs/protocol.md, "Runtime"). :class:`FrameStream` is that stream's engine, free of gRPC: it
takes the incoming frames as an iterator and hands out the frames to send as another, so the
same code runs on a gRPC client stream (the coordinator dialing a party, a party dialing a
listening coordinator), on a gRPC server stream, and on in-memory pipes in tests.

- **Calls** (coordinator role): :meth:`FrameStream.call` serializes nothing itself; it takes the
  payload bytes of a protocol's message, splits them into envelopes of at most 1 MiB
  (``securelp.protos.codec``), and waits for the reply's envelopes (reassembled and checked
  against their SHA-256) or a ``Fault``, within the call's deadline.
- **Requests** (party role): complete requests are handed, one at a time and in order, to the
  ``handler`` on a worker thread, so heartbeats keep flowing while the party computes; its reply
  (or its typed error, as a ``Fault``) goes back with the call's id.
- **Liveness**: each side sends a ``Heartbeat`` every ``keepalive / 4`` seconds and gives up on a
  peer from which *nothing* (a frame of any kind) arrived for ``keepalive`` seconds: a stopped
  (SIGSTOP) or hung peer is *unresponsive* after at most one keepalive, in every phase, also while
  no call is in flight (the coordinator solving, a party computing its mask). A peer whose process
  ends closes its connection, and the stream *disconnects* at once. Either way the stream fails
  once: the pending calls raise that error, the outgoing frames end, and the transport's
  ``cancel`` is called.

Errors are typed (``securelp.solvers.errors``) and name the peer: :class:`PeerGone` (disconnected,
unresponsive, or the peer said goodbye), :class:`CallDeadlineExceeded`, :class:`PeerFault` (the
party's own typed error, by class name), and ``ProtocolError`` for a malformed stream.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from securelp.protos import runtime_pb2 as rpb
from securelp.protos.codec import CHUNK_BYTES, ChunkAssembler
from securelp.solvers import errors as E

log = logging.getLogger(__name__)

#: the version of the runtime's frames (``runtime.proto``), checked in the ``Open`` frames
RUNTIME_VERSION = 1
#: seconds without any frame from a peer after which it is declared unresponsive (``--keepalive``)
DEFAULT_KEEPALIVE_S = 10.0
#: heartbeats sent per keepalive interval
HEARTBEATS_PER_KEEPALIVE = 4
#: the silence check runs at least this often
_CHECK_S = 0.25
_END = object()

#: typed errors a party may report in a ``Fault`` (by class name), re-raised as such
FAULT_CLASSES: dict[str, type[E.SecureLPError]] = {
    cls.__name__: cls for cls in (E.InputError, E.ConfigError, E.ProtocolError, E.ResourceError, E.SolverError,
                                  E.AuthenticationError, E.TransportError, E.SecureLPError)
}


class PeerGone(E.TransportError):
    """The peer disconnected, fell silent for a keepalive, or ended the stream."""

    def __init__(self, message: str, *, kind: str = "disconnected") -> None:
        super().__init__(message)
        #: "disconnected", "unresponsive", "goodbye" or "closed" (this side ended the stream)
        self.kind = kind


class CallDeadlineExceeded(E.TransportError):
    """A call got no reply within its deadline (the peer still sends heartbeats: it is alive but slow)."""


class PeerFault(E.SecureLPError):
    """The party answered a call with its typed error (``Fault``)."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class

    def typed(self, prefix: str = "") -> E.SecureLPError:
        """The error as the class the party raised (a ``ProtocolError`` for an unknown class name)."""
        cls = FAULT_CLASSES.get(self.error_class, E.ProtocolError)
        return cls(f"{prefix}{self}")


@dataclass(frozen=True)
class Request:
    """A complete request a party received: one protocol message and where it belongs."""

    call_id: int
    protocol: str
    session_id: str
    method: str
    payload: bytes
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    """A party's answer to a :class:`Request`: the serialized reply and its metadata."""

    payload: bytes
    metadata: Mapping[str, str] = field(default_factory=dict)


def envelopes(call_id: int, protocol: str, session_id: str, method: str, payload: bytes, *, reply: bool,
              metadata: Mapping[str, str] | None = None, chunk_bytes: int = CHUNK_BYTES) -> Iterator[rpb.Frame]:
    """The frames of one message: its payload in chunks (SHA-256 of the whole on the last), the
    metadata on the first."""
    import hashlib

    total = len(payload)
    digest = hashlib.sha256(payload).digest()
    view = memoryview(payload)
    starts = range(0, total, chunk_bytes) if total else range(1)
    for i, offset in enumerate(starts):
        end = min(total, offset + chunk_bytes)
        env = rpb.Envelope(call_id=call_id, protocol=protocol, session_id=session_id, method=method, reply=reply,
                           total_size=total, offset=offset, data=bytes(view[offset:end]),
                           sha256=digest if end == total else b"")
        if i == 0 and metadata:
            env.metadata.update(dict(metadata))
        yield rpb.Frame(envelope=env)


class _Pending:
    """A call waiting for its reply."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.payload = b""
        self.metadata: dict[str, str] = {}
        self.error: BaseException | None = None


class FrameStream:
    """The engine of one runtime stream (see the module docstring).

    Parameters
    ----------
    peer : how messages name the other side ("party p1 at 10.0.0.5:50051", "the coordinator at ...").
    role : "coordinator" (sends calls) or "party" (answers them with ``handler``).
    keepalive_s : give up on the peer after this many seconds without a frame from it; heartbeats
        go out every ``keepalive_s / 4``.
    handler : party role: answers a :class:`Request` with a :class:`Response` or raises a typed error.
    clock : a monotonic clock (tests).
    """

    def __init__(self, *, peer: str, role: str, keepalive_s: float = DEFAULT_KEEPALIVE_S,
                 handler: Callable[[Request], Response] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if role not in ("coordinator", "party"):
            raise ValueError(f"role must be coordinator or party, not {role!r}")
        if not keepalive_s > 0:
            raise E.ConfigError(f"keepalive must be positive, got {keepalive_s}")
        if role == "party" and handler is None:
            raise ValueError("a party stream needs a handler")
        self.peer = peer
        self.role = role
        self.keepalive_s = float(keepalive_s)
        self.heartbeat_s = self.keepalive_s / HEARTBEATS_PER_KEEPALIVE
        self._handler = handler
        self._clock = clock
        self._out: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._assembling: dict[int, tuple[rpb.Envelope, ChunkAssembler]] = {}
        self._requests: queue.Queue[object] = queue.Queue()
        self._call_ids = itertools.count(1)
        self._last_rx = clock()
        self._cancel: Callable[[], None] | None = None
        self._classify: Callable[[BaseException], E.SecureLPError] | None = None
        self._closing = False
        self._threads: list[threading.Thread] = []
        #: the peer's ``Open`` frame, once it arrived
        self.peer_open: rpb.Open | None = None
        self.opened = threading.Event()
        #: the peer's ``Goodbye``, if it sent one
        self.peer_goodbye: rpb.Goodbye | None = None
        #: the first failure (None while the stream is healthy or after an orderly end)
        self.failure: E.SecureLPError | None = None
        #: set when the stream is over (failure, goodbye, or closed here)
        self.done = threading.Event()
        self.frames_received = 0
        self._open_sent = threading.Event()

    # -- wiring --------------------------------------------------------------------------------
    def outgoing(self) -> Iterator[rpb.Frame]:
        """The frames to send, for the transport to consume; ends when the stream is over."""
        while True:
            item = self._out.get()
            if item is _END:
                return
            if isinstance(item, rpb.Frame):
                yield item
                continue
            for frame in item:  # type: ignore[attr-defined]  # a lazily produced message
                if self.done.is_set() and self.failure is not None:
                    return
                yield frame

    def attach(self, incoming: Iterable[rpb.Frame], *, cancel: Callable[[], None] | None = None,
               classify: Callable[[BaseException], E.SecureLPError] | None = None, name: str = "stream") -> None:
        """Start reading ``incoming`` and sending heartbeats.

        ``cancel`` ends the transport's stream (called once the stream fails or is closed);
        ``classify`` turns an exception raised by ``incoming`` (a gRPC error) into a typed error.
        """
        self._cancel = cancel
        self._classify = classify
        self._last_rx = self._clock()
        targets = [(self._read, (iter(incoming),), f"{name}-reader"), (self._beat, (), f"{name}-heartbeat")]
        if self.role == "party":
            targets.append((self._serve_requests, (), f"{name}-worker"))
        for target, args, thread_name in targets:
            thread = threading.Thread(target=target, args=args, name=thread_name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def send(self, frame: rpb.Frame) -> None:
        """Queue one frame (dropped once the stream is over)."""
        if not self.done.is_set():
            self._out.put(frame)

    def send_open(self, sender: str, protocols: Iterable[rpb.ProtocolOffer] = ()) -> None:
        """Send this side's ``Open`` frame (the first frame on a stream: heartbeats wait for it)."""
        self._open_sent.set()
        self.send(rpb.Frame(open=rpb.Open(runtime_version=RUNTIME_VERSION, sender=sender, protocols=list(protocols),
                                          heartbeat_s=self.heartbeat_s, keepalive_s=self.keepalive_s)))

    def wait_open(self, timeout: float) -> rpb.Open:
        """The peer's ``Open`` frame; raises the stream's failure, or ``PeerGone`` (unresponsive) when
        none came within ``timeout`` seconds, or ``ProtocolError`` for another runtime version."""
        end = self._clock() + timeout
        while not self.opened.wait(min(_CHECK_S, max(0.0, end - self._clock()))):
            if self.failure is not None:
                raise self.failure
            if self.done.is_set():
                raise PeerGone(f"{self.peer} ended the stream before opening it", kind="closed")
            if self._clock() >= end:
                raise self._fail(PeerGone(f"{self.peer} did not open the stream within {timeout:g} s: it is "
                                          "unresponsive (stopped, overloaded, or the connection hangs)",
                                          kind="unresponsive"))
        assert self.peer_open is not None
        if self.peer_open.runtime_version != RUNTIME_VERSION:
            raise self._fail(E.ProtocolError(
                f"{self.peer} speaks runtime version {self.peer_open.runtime_version}, this side "
                f"{RUNTIME_VERSION}; run both from compatible securelp releases"))
        return self.peer_open

    # -- calls (coordinator role) ----------------------------------------------------------------
    def call(self, protocol: str, session_id: str, method: str, payload: bytes, *, deadline_s: float,
             metadata: Mapping[str, str] | None = None) -> Response:
        """Send one request and wait for its reply (at most ``deadline_s`` seconds).

        Raises
        ------
        PeerFault
            The party answered with its typed error.
        CallDeadlineExceeded
            No reply in time (the peer is alive: its heartbeats arrive).
        PeerGone, ProtocolError
            The stream failed (before or during the call).
        """
        if self.role != "coordinator":
            raise ValueError("only the coordinator's side of a stream makes calls")
        if self.failure is not None:
            raise self.failure
        if self.done.is_set():
            raise PeerGone(f"{self.peer}: the stream is closed", kind="closed")
        call_id = next(self._call_ids)
        pending = _Pending()
        with self._lock:
            self._pending[call_id] = pending
        try:
            self._out.put(envelopes(call_id, protocol, session_id, method, payload, reply=False, metadata=metadata))
            if not pending.done.wait(deadline_s):
                raise CallDeadlineExceeded(f"{self.peer} did not answer {method} within {deadline_s:g} s (deadline "
                                           "exceeded)")
        finally:
            with self._lock:
                self._pending.pop(call_id, None)
        if pending.error is not None:
            raise pending.error
        return Response(pending.payload, pending.metadata)

    # -- ending --------------------------------------------------------------------------------
    def goodbye(self, reason: str, error_class: str = "") -> None:
        """End the stream from this side, telling the peer why."""
        with self._lock:
            if self.done.is_set():
                return
            self._closing = True
        self._out.put(rpb.Frame(goodbye=rpb.Goodbye(reason=reason, error_class=error_class)))
        self._out.put(_END)

    def close(self, *, cancel: bool = True) -> None:
        """Stop: end the outgoing frames, fail pending calls, and cancel the transport's stream."""
        with self._lock:
            self._closing = True
            already = self.done.is_set()
            self.done.set()
        if not already:
            self._out.put(_END)
            self._requests.put(_END)
            self._wake_pending(PeerGone(f"{self.peer}: the stream was closed", kind="closed"))
        if cancel and self._cancel is not None:
            try:
                self._cancel()
            except Exception as exc:  # noqa: BLE001 - a transport that is already gone
                log.debug("cancelling the stream to %s: %s", self.peer, exc.__class__.__name__)

    def lost(self, cause: str = "its connection ended") -> None:
        """The transport ended the stream (a server seeing its client go): unless this side was already
        ending it, the peer *disconnected* -- a failure that pending calls and liveness checks report."""
        self._fail(PeerGone(f"{self.peer} disconnected ({cause}); did its process end?", kind="disconnected"))

    def join(self, timeout: float = 2.0) -> None:
        """Wait for the stream's threads (after ``close``)."""
        end = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, end - time.monotonic()))

    def interrupt_calls(self, error: BaseException) -> None:
        """End the calls in flight with ``error`` at once; the stream itself stays up (for a close)."""
        self._wake_pending(error)

    def check(self) -> None:
        """Raise the stream's failure, if any (a liveness check between calls)."""
        if self.failure is not None:
            raise self.failure

    @property
    def seconds_since_heard(self) -> float:
        """Seconds since the last frame of any kind arrived from the peer."""
        return self._clock() - self._last_rx

    # -- internals -----------------------------------------------------------------------------
    def _fail(self, error: E.SecureLPError) -> E.SecureLPError:
        """Record the first failure, end the stream, and return the failure that holds."""
        with self._lock:
            if self.failure is None and not (self._closing and isinstance(error, PeerGone)):
                self.failure = error
            first = self.failure or error
            already = self.done.is_set()
            self.done.set()
        if not already:
            log.info("stream to %s ended: %s", self.peer, first)
            self._out.put(_END)
            self._requests.put(_END)
            self._wake_pending(first)
            if self._cancel is not None:
                try:
                    self._cancel()
                except Exception as exc:  # noqa: BLE001
                    log.debug("cancelling the stream to %s: %s", self.peer, exc.__class__.__name__)
        return first

    def _wake_pending(self, error: BaseException) -> None:
        with self._lock:
            pending = list(self._pending.values())
        for p in pending:
            if not p.done.is_set():
                p.error = error
                p.done.set()

    def _read(self, incoming: Iterator[rpb.Frame]) -> None:
        try:
            for frame in incoming:
                self._last_rx = self._clock()
                self.frames_received += 1
                self._on_frame(frame)
                if self.done.is_set():
                    break
            else:
                if not self.done.is_set():
                    self._fail(PeerGone(f"{self.peer} disconnected: its stream ended without a goodbye (did its "
                                        "process end?)", kind="disconnected"))
        except E.SecureLPError as exc:
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001 - the transport's own error (gRPC), classified
            if self.done.is_set():
                return
            if self._classify is not None:
                self._fail(self._classify(exc))
            else:
                self._fail(PeerGone(f"{self.peer} disconnected ({exc.__class__.__name__}: {exc})",
                                    kind="disconnected"))

    def _on_frame(self, frame: rpb.Frame) -> None:
        kind = frame.WhichOneof("kind")
        if kind == "heartbeat":
            return
        if kind == "open":
            if self.peer_open is not None:
                raise E.ProtocolError(f"{self.peer} opened the stream twice")
            self.peer_open = frame.open
            self.opened.set()
            return
        if kind == "goodbye":
            self.peer_goodbye = frame.goodbye
            reason = frame.goodbye.reason or "no reason given"
            if frame.goodbye.error_class:
                cls = FAULT_CLASSES.get(frame.goodbye.error_class, E.ProtocolError)
                self._fail(cls(reason if self.peer.split(" at ")[0] in reason else f"{self.peer}: {reason}"))
            else:
                self._fail(PeerGone(f"{self.peer} ended the stream ({reason})", kind="goodbye"))
            return
        if not self.opened.is_set():
            raise E.ProtocolError(f"{self.peer} sent a {kind or 'empty'} frame before opening the stream")
        if kind == "envelope":
            self._on_envelope(frame.envelope)
        elif kind == "fault":
            if self.role != "coordinator":
                raise E.ProtocolError(f"{self.peer} sent a fault to a party")
            with self._lock:
                pending = self._pending.get(int(frame.fault.call_id))
            if pending is not None:
                pending.error = PeerFault(frame.fault.error_class, frame.fault.message)
                pending.done.set()
        else:
            raise E.ProtocolError(f"{self.peer} sent an empty frame")

    def _on_envelope(self, env: rpb.Envelope) -> None:
        expect_reply = self.role == "coordinator"
        if env.reply != expect_reply:
            raise E.ProtocolError(f"{self.peer} sent a {'reply' if env.reply else 'request'} to the "
                                  f"{'coordinator' if expect_reply else 'party'}")
        call_id = int(env.call_id)
        if call_id not in self._assembling:
            self._assembling[call_id] = (env, ChunkAssembler(f"{self.peer}: {env.method or 'message'}"))
        first, assembler = self._assembling[call_id]
        if (env.protocol, env.session_id, env.method) != (first.protocol, first.session_id, first.method):
            raise E.ProtocolError(f"{self.peer}: the chunks of call {call_id} changed protocol, session or method")
        if not assembler.add(env):
            return
        del self._assembling[call_id]
        payload = assembler.payload()
        if expect_reply:
            with self._lock:
                pending = self._pending.get(call_id)
            if pending is None:  # a reply after its call's deadline: dropped
                log.info("dropped a late reply to call %d (%s) from %s", call_id, first.method, self.peer)
                return
            pending.payload, pending.metadata = payload, dict(first.metadata)
            pending.done.set()
        else:
            self._requests.put(Request(call_id, first.protocol, first.session_id, first.method, payload,
                                       dict(first.metadata)))

    def _serve_requests(self) -> None:
        """Party role: answer the requests one at a time, in order."""
        assert self._handler is not None
        while True:
            item = self._requests.get()
            if item is _END:
                return
            request: Request = item  # type: ignore[assignment]
            try:
                response = self._handler(request)
            except MemoryError:  # a limit the estimates missed: a resource error, not an internal one
                self._fault(request, "ResourceError", "ran out of memory during this call")
                continue
            except E.SecureLPError as exc:
                self._fault(request, type(exc).__name__, str(exc))
                continue
            except Exception as exc:
                log.error("internal error answering %s (%s)", request.method, exc.__class__.__name__)
                log.debug("internal error", exc_info=True)
                self._fault(request, "SecureLPError", f"internal error ({exc.__class__.__name__}); see the party's log")
                continue
            if not self.done.is_set():
                self._out.put(envelopes(request.call_id, request.protocol, request.session_id, request.method,
                                        response.payload, reply=True, metadata=response.metadata))

    def _fault(self, request: Request, error_class: str, message: str) -> None:
        self.send(rpb.Frame(fault=rpb.Fault(call_id=request.call_id, error_class=error_class, message=message)))

    def _beat(self) -> None:
        sequence = itertools.count(1)
        next_beat = self._clock()
        while not self.done.is_set():
            now = self._clock()
            if now >= next_beat and self._open_sent.is_set():
                self.send(rpb.Frame(heartbeat=rpb.Heartbeat(sequence=next(sequence))))
                next_beat = now + self.heartbeat_s
            silent = now - self._last_rx
            if silent > self.keepalive_s:
                self._fail(PeerGone(f"{self.peer} is unresponsive: nothing received for {silent:.1f} s (keepalive "
                                    f"{self.keepalive_s:g} s); is it stopped or overloaded?", kind="unresponsive"))
                return
            self.done.wait(min(_CHECK_S, self.heartbeat_s, max(0.0, next_beat - now)) or _CHECK_S)
