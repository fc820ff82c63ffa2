"""Dial-out: a listening coordinator that the parties connect to, so no data owner opens a port.

``securelp coordinator --listen HOST:PORT`` serves ``CoordinatorRuntime.Connect`` (``runtime.proto``):
each party dials it with its own certificate from the session CA and opens one bidirectional
stream, on which the coordinator then runs the session exactly as in the dial-in direction (the
same protocol state machines and messages; the coordinator sends the requests, the party the
replies; heartbeats both ways). As federated-learning clients do, the data owner needs only an
outbound connection.

:class:`PartyListener` accepts a party when

- under mutual TLS, its client certificate is the session CA's (TLS refuses it otherwise) and
  names the party id the party claims in its ``Open`` frame (else the party is refused as an
  ``AuthenticationError``; a certificate naming ``coordinator`` cannot pose as a party);
- the id is one the session expects (``--party NAME``, or the split's roster), or, with only a
  count (``--expect N``), while fewer than N parties are connected;
- no party of that id is connected already, and the session has not started.

A refusal is a ``Goodbye`` that names the error class and the reason, so the party's own error
says why. :meth:`PartyListener.wait_for_parties` waits (``--wait``) until every expected party is
connected (a party whose connection fails while the others are awaited is forgotten and may
connect again) and returns their connections in order.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from securelp.coordinator.certs import COORDINATOR_ID, RESERVED_IDS, load_identity, validate_party_ids
from securelp.coordinator.grpc_link import DEFAULT_DEADLINE_S, StreamConnection, session_certificates
from securelp.coordinator.shaping import LinkShape, shaped_addresses
from securelp.coordinator.transport import PartyLink, PPLPLink
from securelp.protos import runtime_pb2 as rpb
from securelp.protos import runtime_pb2_grpc as rpb_grpc
from securelp.protos.channels import DEFAULT_MAX_MESSAGE_BYTES, ServerTls, create_grpc_server, peer_names
from securelp.protos.stream import DEFAULT_KEEPALIVE_S, FrameStream
from securelp.solvers import errors as E

log = logging.getLogger(__name__)

SERVICE_NAME = "securelp.v1.CoordinatorRuntime"


def _address_of(peer: str) -> str:
    """gRPC's ``ipv4:10.0.0.5:41234`` / ``ipv6:%5B::1%5D:41234`` -> ``10.0.0.5:41234`` / ``[::1]:41234``
    (gRPC percent-encodes the brackets of an IPv6 peer)."""
    from urllib.parse import unquote

    kind, _, rest = peer.partition(":")
    return unquote(rest) if kind in ("ipv4", "ipv6", "unix") and rest else peer


class DialOutConnection(StreamConnection):
    """A party's stream to the listening coordinator (made by :class:`PartyListener`)."""

    def __init__(self, party_id: str, address: str, stream: FrameStream, *, keepalive_s: float, tls: bool) -> None:
        super().__init__(party_id, address, direction="dial-out", keepalive_s=keepalive_s, tls=tls)
        self.stream = stream


class _ConnectServicer(rpb_grpc.CoordinatorRuntimeServicer):
    def __init__(self, listener: PartyListener) -> None:
        self.listener = listener

    def Connect(self, request_iterator: Iterator[rpb.Frame], context: grpc.ServicerContext) -> Iterator[rpb.Frame]:
        lst = self.listener
        address = _address_of(context.peer())
        stream = FrameStream(peer=f"the party at {address}", role="coordinator", keepalive_s=lst.keepalive_s)
        # the RPC ends without this side ending the stream: the party's connection is gone
        context.add_callback(lambda: stream.lost("its connection ended"))
        stream.attach(request_iterator, cancel=context.cancel, name="listener")
        connection: DialOutConnection | None = None
        ended = False
        try:
            try:
                opened = stream.wait_open(max(lst.keepalive_s, 5.0))
            except E.SecureLPError as exc:
                log.info("a connection from %s did not open: %s", address, exc)
                ended = True
                return
            pid = opened.sender
            stream.peer = f"party {pid} at {address}"
            try:
                lst._check_identity(pid, peer_names(context) if lst.tls else None)
                connection = DialOutConnection(pid, address, stream, keepalive_s=lst.keepalive_s, tls=lst.tls)
                lst._admit(connection)
            except E.SecureLPError as exc:
                log.warning("refused the party at %s (claims %r): %s", address, pid, exc)
                stream.goodbye(str(exc), type(exc).__name__)
                yield from stream.outgoing()
                ended = True
                return
            log.info("party %s connected from %s", pid, address)
            stream.send_open(COORDINATOR_ID)
            yield from stream.outgoing()
            ended = True
        finally:
            if not ended:  # gRPC closed the generator: the RPC was cancelled under it
                stream.lost("its connection ended")
            stream.close(cancel=False)
            if connection is not None:
                lst._gone(connection)


class PartyListener:
    """The coordinator's server for dial-out parties (a context manager: started on enter, stopped on exit).

    Parameters
    ----------
    address : ``host:port`` to listen on (port 0: any free port; see :attr:`port`).
    tls : the coordinator's certificate (it must allow TLS server authentication) and the session CA;
        required unless ``insecure``.
    insecure : plaintext, for debugging only (warned; the parties' ids are then not authenticated).
    expected : the party ids the session expects, in the session's order (None: any id, see ``count``).
    count : with ``expected`` None, how many parties to wait for.
    keepalive_s : the runtime's keepalive on every stream.
    """

    def __init__(self, address: str, *, tls: ServerTls | None, insecure: bool = False,
                 expected: Sequence[str] | None = None, count: int | None = None,
                 keepalive_s: float = DEFAULT_KEEPALIVE_S, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if expected is None and not count:
            raise E.ConfigError("a listening coordinator needs the parties it expects (--party NAME) or their count "
                                "(--expect N)")
        if expected is not None:
            expected = validate_party_ids(list(expected))
            if count is not None and count != len(expected):
                raise E.InputError(f"--expect {count} but {len(expected)} parties are named: "
                                   f"{', '.join(expected)}")
        self.address = address
        self.tls = not insecure
        self.expected = list(expected) if expected is not None else None
        self.count = len(expected) if expected is not None else int(count or 0)
        self.keepalive_s = float(keepalive_s)
        self._lock = threading.Condition()
        self._connected: dict[str, DialOutConnection] = {}
        self._order: list[str] = []
        self._session_started = False
        workers = self.count + 8  # one per party stream, and room for refusals and health checks
        self._server, self.port = create_grpc_server(address, tls=tls, insecure=insecure, who="the coordinator",
                                                     max_message_bytes=max_message_bytes, max_workers=workers)
        rpb_grpc.add_CoordinatorRuntimeServicer_to_server(_ConnectServicer(self), self._server)
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self._started = False

    # -- lifetime ----------------------------------------------------------------------------------
    def start(self) -> int:
        """Start listening; the bound port."""
        if not self._started:
            self._server.start()
            self._started = True
            for name in ("", SERVICE_NAME):
                self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self.port

    def __enter__(self) -> PartyListener:  # noqa: PYI034 - typing.Self needs Python 3.11
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, grace_s: float = 1.0) -> None:
        """End every party's stream (those still open are told the coordinator goes away) and stop."""
        with self._lock:
            connections = list(self._connected.values())
        for connection in connections:
            connection.finish("the coordinator stopped")
        for name in ("", SERVICE_NAME):
            self._health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self._server.stop(grace_s).wait(grace_s + 1.0)

    # -- admission ---------------------------------------------------------------------------------
    def _check_identity(self, pid: str, names: set[str] | None) -> None:
        try:
            validate_party_ids([pid])
        except E.InputError as exc:
            raise E.InputError(f"the party's claimed id: {exc}") from None
        if names is not None and (pid not in names or pid.lower() in RESERVED_IDS):
            raise E.AuthenticationError(f"the client certificate names {sorted(names) or 'nobody'}, not party {pid!r}; "
                                        "a party connects with its own certificate from the session's CA")

    def _admit(self, connection: DialOutConnection) -> None:
        pid = connection.party_id
        with self._lock:
            if self._session_started:
                raise E.TransportError(f"party {pid} connected after the session started; connect before the "
                                       "coordinator starts it")
            if self.expected is not None and pid not in self.expected:
                raise E.InputError(f"party {pid} is not part of this session (it expects: {', '.join(self.expected)})")
            if pid in self._connected:
                raise E.TransportError(f"party {pid} is already connected (from {self._connected[pid].address})")
            if self.expected is None and len(self._connected) >= self.count:
                raise E.TransportError(f"the session has its {self.count} parties already "
                                       f"({', '.join(self._order)})")
            self._connected[pid] = connection
            self._order.append(pid)
            self._lock.notify_all()

    def _gone(self, connection: DialOutConnection) -> None:
        with self._lock:
            if self._connected.get(connection.party_id) is connection and not self._session_started:
                del self._connected[connection.party_id]
                self._order.remove(connection.party_id)
                log.info("party %s disconnected before the session: %s", connection.party_id,
                         connection.stream.failure if connection.stream is not None else "closed")
            self._lock.notify_all()

    def new_session(self) -> None:
        """Forget the connections of the session that ended and admit parties again (a coordinator that
        runs several sessions; long-running parties reconnect after each)."""
        with self._lock:
            self._connected.clear()
            self._order.clear()
            self._session_started = False
            self._lock.notify_all()

    @property
    def connected(self) -> list[str]:
        """The ids connected now, in the order they connected."""
        with self._lock:
            return list(self._order)

    def wait_for_parties(self, timeout: float) -> list[DialOutConnection]:
        """Wait until every expected party is connected (``--wait``); their connections in the session's
        order (the expected ids', else the order they connected). The session then starts: later
        connections are refused.

        Raises
        ------
        TransportError
            Not all connected within ``timeout`` seconds, naming the missing and the connected parties.
        """
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                for pid, conn in list(self._connected.items()):  # a party that vanished while the others came
                    if conn.stream is not None and conn.stream.done.is_set():
                        del self._connected[pid]
                        self._order.remove(pid)
                ready = (len(self._connected) == self.count if self.expected is None
                         else all(p in self._connected for p in self.expected))
                if ready:
                    self._session_started = True
                    order = self.expected if self.expected is not None else self._order
                    return [self._connected[p] for p in order]
                left = end - time.monotonic()
                if left <= 0:
                    have = ", ".join(self._order) or "none"
                    if self.expected is not None:
                        missing = [p for p in self.expected if p not in self._connected]
                        raise E.TransportError(f"parties {', '.join(missing)} did not connect within {timeout:g} s "
                                               f"(--wait; connected: {have}); check that they run with --connect "
                                               f"{self.address}, or raise --wait")
                    raise E.TransportError(f"{len(self._connected)} of the {self.count} expected parties connected "
                                           f"within {timeout:g} s (--wait; connected: {have}); raise --wait")
                self._lock.wait(min(left, 0.2))

    def links(self, timeout: float, deadline_s: float = DEFAULT_DEADLINE_S) -> list[PartyLink]:
        """The secure LP's links to the parties, once all are connected (see :meth:`wait_for_parties`)."""
        return [PPLPLink(c, deadline_s=deadline_s) for c in self.wait_for_parties(timeout)]


def _dialout_party(session: object, address: str, tls_dir: Path | None, insecure: bool, keepalive_s: float,
                   stop: threading.Event, serve_forever: bool) -> threading.Thread:
    """One party in a thread of this process, dialing the listener (the contract tests' dial-out party)."""
    from securelp.party.server import connect_and_serve

    tls = None
    if tls_dir is not None and not insecure:
        ident = load_identity(tls_dir, session.party_id)  # type: ignore[attr-defined]
        tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)

    def run() -> None:
        try:
            connect_and_serve(address, session, tls=tls, insecure=insecure, keepalive_s=keepalive_s,
                              idle_timeout_s=None, serve_forever=serve_forever, stop=stop, retry_s=0.1)
        except E.SecureLPError as exc:
            log.warning("dial-out party %s ended: %s", session.party_id, exc)  # type: ignore[attr-defined]

    thread = threading.Thread(target=run, name=f"dialout-{session.party_id}", daemon=True)  # type: ignore[attr-defined]
    thread.start()
    return thread


@contextlib.contextmanager
def local_dialout_links(sessions: Sequence[object], workdir: Path, *, deadline_s: float = DEFAULT_DEADLINE_S,
                        insecure: bool = False, host: str = "127.0.0.1", bind_keys: bool = True,
                        keepalive_s: float = DEFAULT_KEEPALIVE_S, wait_s: float = 30.0,
                        serve_forever: bool = False,
                        link_shapes: Mapping[str, LinkShape] | None = None) -> Iterator[list[PartyLink]]:
    """Dial-out, in this process: a listening coordinator on port 0 and one party per session (or
    ``PartyHost``) in a thread that dials it, with fresh session certificates in ``workdir`` unless
    ``insecure`` (``bind_keys`` as for ``local_grpc_links``). Yields the secure LP's links once
    every party is connected; everything is stopped on exit. A party ``link_shapes`` shapes dials
    through its own shaped link (``securelp.coordinator.shaping``). For simulations and contract tests."""
    ids = [s.party_id for s in sessions]  # type: ignore[attr-defined]
    tls_dir = session_certificates(workdir, ids, sessions, insecure=insecure, bind_keys=bind_keys)
    server_tls = None
    if not insecure:
        ident = load_identity(tls_dir, COORDINATOR_ID)
        server_tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    with PartyListener(f"{host}:0", tls=server_tls, insecure=insecure, expected=ids, keepalive_s=keepalive_s) as lst, \
            shaped_addresses({pid: f"{host}:{lst.port}" for pid in ids}, link_shapes) as addresses:
        try:
            for session, pid in zip(sessions, ids):
                threads.append(_dialout_party(session, addresses[pid], None if insecure else tls_dir, insecure,
                                              keepalive_s, stop, serve_forever))
            links = lst.links(wait_s, deadline_s)
            yield links
        finally:
            stop.set()
    for thread in threads:
        thread.join(5.0)
