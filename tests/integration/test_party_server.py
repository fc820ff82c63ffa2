"""The party's gRPC side on real sockets, in both directions (threads of this process, port 0):
``serve`` (dial-in: health states, how serving ends, one session or session after session) and
``connect_and_serve`` (dial-out: waiting for the coordinator, identities checked both ways)."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from securelp.coordinator.certs import (
    COORDINATOR_ID,
    _certificate,
    _new_key,
    _pem_cert,
    _pem_key,
    load_identity,
    write_session_certs,
)
from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink
from securelp.coordinator.listener import PartyListener
from securelp.coordinator.transport import PPLPLink
from securelp.party.runtime import HostedProtocol, PartyHost
from securelp.party.server import SERVICE_NAME, ServerTls, connect_and_serve, create_server, serve
from securelp.party.session import PPLP, PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.solvers import errors as E
from securelp.solvers.lp.partition import ColumnBlock

pytestmark = pytest.mark.integration


def _block(pid="solo"):
    return ColumnBlock(pid, np.eye(2), np.ones(2), np.full(2, -np.inf), np.full(2, np.inf))


def _session(pid="solo"):
    return PartySession(_block(pid))


def _host(pid="solo"):
    return PartyHost(pid, [HostedProtocol(PPLP, lambda sid: PartySession(_block(pid)))])


def _serve_in_thread(party, **kw):
    listening: list[int] = []
    got = threading.Event()
    result: list[object] = []

    def on_listening(host, port):
        listening.append(port)
        got.set()

    t = threading.Thread(target=lambda: result.append(serve("127.0.0.1:0", party, tls=None, insecure=True,
                                                            on_listening=on_listening, grace_s=0.5, **kw)),
                         daemon=True)
    t.start()
    assert got.wait(10)
    return t, listening[0], result


def _health(port):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5).status


HELLO = pb.HelloRequest(session_id="s", protocol_version=1, n_rows=2)


def test_serving_until_close_then_stopped():
    t, port, result = _serve_in_thread(_session(), idle_timeout_s=60)
    assert _health(port) == health_pb2.HealthCheckResponse.SERVING
    link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5)
    link.wait_ready(5)
    assert link.hello(HELLO).n_cols == 2
    link.close(pb.CloseRequest(session_id="s", reason="done"))
    t.join(10)
    assert not t.is_alive()
    assert result[0].reason == "closed" and result[0].detail == "done"
    with pytest.raises(grpc.RpcError):  # the server is gone
        _health(port)
    link.shutdown()


def test_idle_timeout_ends_serving():
    start = time.monotonic()
    t, _port, result = _serve_in_thread(_session(), idle_timeout_s=0.6)
    t.join(15)
    assert not t.is_alive() and result[0].reason == "idle"
    assert 0.5 < time.monotonic() - start < 10


def test_a_connected_coordinator_holds_the_idle_clock_while_it_solves():
    """Idle is "no coordinator connected": a coordinator that is connected and silent (solving) for longer
    than the idle timeout keeps the party; after it left, the clock runs."""
    t, port, result = _serve_in_thread(_session(), idle_timeout_s=1.0, keepalive_s=0.4)
    link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5, keepalive_s=0.4)
    link.hello(HELLO)
    time.sleep(2.0)  # no call for twice the idle timeout; heartbeats flow
    assert t.is_alive()
    link.close(pb.CloseRequest(session_id="s", reason="done"))
    t.join(10)
    assert result[0].reason == "closed" and result[0].detail == "done"
    link.shutdown()


def test_serve_forever_takes_session_after_session_with_fresh_state():
    host = _host()
    t, port, result = _serve_in_thread(host, idle_timeout_s=1.5, serve_forever=True)
    link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5)
    for sid in ("first", "second", "third"):
        link.hello(pb.HelloRequest(session_id=sid, protocol_version=2, n_rows=2))
        link.close(pb.CloseRequest(session_id=sid, reason="done"))
    t.join(15)
    assert result[0].reason == "idle" and result[0].sessions == 3
    assert [r.session_id for r in host.history] == ["first", "second", "third"]
    assert len({id(r.session) for r in host.history}) == 3
    link.shutdown()


def test_serve_and_create_server_validate_arguments():
    with pytest.raises(E.ConfigError, match="idle timeout"):
        serve("127.0.0.1:0", _session(), tls=None, insecure=True, idle_timeout_s=0)
    server, port = create_server("127.0.0.1:0", _session(), tls=None, insecure=True)
    try:
        assert port > 0
        assert _health(port) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(E.TransportError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            create_server(f"127.0.0.1:{port}", _session(), tls=None, insecure=True)  # no silent port sharing
    finally:
        server.stop(0)


class _RefusingSession:
    party_id = "strict"

    def __init__(self):
        self.closed = threading.Event()
        self.close_reason = ""

    def handle(self, method, request):
        raise E.InputError("party strict: its block file is stale")

    def abandon(self, reason):
        self.closed.set()


def test_party_error_class_crosses_the_wire():
    server, port = create_server("127.0.0.1:0", PartyHost.single(_RefusingSession(), PPLP, "strict"), tls=None,
                                 insecure=True)
    link = GrpcPartyLink("strict", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5)
    try:
        with pytest.raises(E.InputError) as info:  # its own class, not a ProtocolError
            link.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=1))
        assert type(info.value) is E.InputError
        assert str(info.value) == "hello: party strict: its block file is stale"
    finally:
        link.shutdown()
        server.stop(0)


def _test_ca():
    ca_key = _new_key()
    return ca_key, _certificate("test CA", ca_key, "test CA", ca_key, ca=True, days=1, server=False, client=False)


def test_a_client_certificate_of_the_session_ca_that_is_not_the_coordinator_is_refused():
    # mint, with the session CA, a client certificate for "mallory": TLS accepts it (right CA,
    # clientAuth), so only the party's identity check stands between mallory and the data.
    ca_key, ca = _test_ca()
    keys = {name: _new_key() for name in ("solo", "coordinator", "mallory")}
    certs = {name: _certificate(name, key, "test CA", ca_key, ca=False, days=1, server=True, client=True)
             for name, key in keys.items()}
    server, port = create_server("127.0.0.1:0", _session("solo"), tls=ServerTls(
        _pem_key(keys["solo"]), _pem_cert(certs["solo"]), _pem_cert(ca)))
    try:
        for who, ok in (("mallory", False), ("coordinator", True)):  # the coordinator is the negative control
            link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=ChannelTls(
                _pem_cert(ca), _pem_key(keys[who]), _pem_cert(certs[who])), deadline_s=5)
            try:
                if ok:
                    assert link.hello(HELLO).party_id == "solo"
                else:
                    with pytest.raises(E.AuthenticationError, match="names \\['mallory'\\], not 'coordinator'"):
                        link.hello(HELLO)
            finally:
                link.shutdown()
    finally:
        server.stop(0)


def test_unreachable_party_is_named_quickly():
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lk = GrpcPartyLink("ghost", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=20)
    start = time.monotonic()
    with pytest.raises(E.TransportError, match=f"party ghost at 127.0.0.1:{port} is unreachable"):
        lk.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=1))
    assert time.monotonic() - start < 10
    lk.close(pb.CloseRequest(session_id="s"))  # best effort: never raises
    lk.shutdown()


# -- dial-out ---------------------------------------------------------------------------------------
def _identities(tmp_path, ids=("solo",)):
    d = write_session_certs(tmp_path / "certs", list(ids)).directory

    def tls(name):  # type: ignore[no-untyped-def]
        ident = load_identity(d, name)
        return ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
    return tls


def _dial_in_thread(address, party, tls, **kw):
    result: list[object] = []
    stop = threading.Event()

    def run():
        try:
            result.append(connect_and_serve(address, party, tls=tls, stop=stop, retry_s=0.1, **kw))
        except E.SecureLPError as exc:
            result.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, result, stop


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dialout_party_waits_for_its_coordinator_then_serves_its_session(tmp_path):
    tls = _identities(tmp_path)
    port = _free_port()
    t, result, _stop = _dial_in_thread(f"127.0.0.1:{port}", _session(), tls("solo"), idle_timeout_s=30)
    time.sleep(1.0)  # the coordinator is not up yet: the party keeps trying
    assert t.is_alive()
    with PartyListener(f"127.0.0.1:{port}", tls=tls(COORDINATOR_ID), expected=["solo"]) as listener:
        start = time.monotonic()
        (connection,) = listener.wait_for_parties(10)
        assert time.monotonic() - start < 3  # within the party's retry interval
        assert connection.direction == "dial-out" and connection.address.startswith("127.0.0.1:")
        link = PPLPLink(connection, deadline_s=10)
        assert link.hello(HELLO).party_id == "solo"
        link.close(pb.CloseRequest(session_id="s", reason="done"))
        t.join(10)
    assert result[0].reason == "closed" and result[0].detail == "done"


def test_a_dialout_party_must_present_its_own_certificate(tmp_path):
    """The coordinator checks that the client certificate names the id the party claims: a party
    using another party's certificate is refused (AuthenticationError on both sides); the control,
    its own certificate, is admitted."""
    tls = _identities(tmp_path, ("p1", "p2"))
    with PartyListener("127.0.0.1:0", tls=tls(COORDINATOR_ID), expected=["p1", "p2"]) as listener:
        address = f"127.0.0.1:{listener.port}"
        t, result, _stop = _dial_in_thread(address, _session("p1"), tls("p2"), idle_timeout_s=10)
        t.join(15)
        assert isinstance(result[0], E.AuthenticationError)
        assert "names ['p2'], not party 'p1'" in str(result[0])
        assert listener.connected == []
        t, result, stop = _dial_in_thread(address, _session("p1"), tls("p1"), idle_timeout_s=10)
        end = time.monotonic() + 10
        while listener.connected != ["p1"] and time.monotonic() < end:
            time.sleep(0.05)
        assert listener.connected == ["p1"]
        stop.set()
        t.join(10)


def test_a_dialout_party_refuses_a_coordinator_of_another_ca(tmp_path):
    tls = _identities(tmp_path)
    ca_key, ca = _test_ca()
    key = _new_key()
    foreign = _certificate("coordinator", key, "test CA", ca_key, ca=False, days=1, server=True, client=True)
    with PartyListener("127.0.0.1:0", tls=ServerTls(_pem_key(key), _pem_cert(foreign), _pem_cert(ca)),
                       expected=["solo"]) as listener:
        t, result, _stop = _dial_in_thread(f"127.0.0.1:{listener.port}", _session(), tls("solo"), idle_timeout_s=10)
        t.join(15)
    assert isinstance(result[0], E.AuthenticationError), result
    assert "TLS handshake with the coordinator" in str(result[0])


def test_a_listener_refuses_a_party_it_does_not_expect(tmp_path):
    tls = _identities(tmp_path, ("p1", "p9"))
    with PartyListener("127.0.0.1:0", tls=tls(COORDINATOR_ID), expected=["p1"]) as listener:
        t, result, _stop = _dial_in_thread(f"127.0.0.1:{listener.port}", _session("p9"), tls("p9"), idle_timeout_s=10)
        t.join(15)
        with pytest.raises(E.TransportError, match=r"parties p1 did not connect within 0.5 s \(--wait; connected: "
                                                   r"none\)"):
            listener.wait_for_parties(0.5)
    assert isinstance(result[0], E.InputError) and "party p9 is not part of this session (it expects: p1)" in str(
        result[0])
