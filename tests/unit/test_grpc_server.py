"""``securelp.party.server.serve``: health states, and the three ways a party's serving ends
(Close from the coordinator, idle timeout, signal) -- so no party runs forever."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from securelp.coordinator.grpc_link import GrpcPartyLink
from securelp.party.server import SERVICE_NAME, create_server, serve
from securelp.party.session import PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import ConfigError, ProtocolError
from securelp.solvers.lp.partition import ColumnBlock


def _session(pid="solo"):
    return PartySession(ColumnBlock(pid, np.eye(2), np.ones(2), np.full(2, -np.inf), np.full(2, np.inf)))


def _serve_in_thread(session, **kw):
    listening: list[int] = []
    got = threading.Event()
    result: list[object] = []

    def on_listening(host, port):
        listening.append(port)
        got.set()

    t = threading.Thread(target=lambda: result.append(serve("127.0.0.1:0", session, tls=None, insecure=True,
                                                            on_listening=on_listening, grace_s=0.5, **kw)),
                         daemon=True)
    t.start()
    assert got.wait(10)
    return t, listening[0], result


def _health(port):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5).status


def test_serving_until_close_then_stopped():
    session = _session()
    t, port, result = _serve_in_thread(session, idle_timeout_s=60)
    assert _health(port) == health_pb2.HealthCheckResponse.SERVING
    link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5)
    link.wait_ready(5)
    assert link.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=2)).n_cols == 2
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


def test_calls_reset_the_idle_clock():
    t, port, result = _serve_in_thread(_session(), idle_timeout_s=1.5)
    link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5)
    start = time.monotonic()
    link.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=2))
    time.sleep(1.0)
    with pytest.raises(ProtocolError, match="hello"):  # a refused call still counts as contact
        link.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=2))
    t.join(15)
    assert result[0].reason == "idle" and time.monotonic() - start > 2.0
    link.shutdown()


def test_serve_and_create_server_validate_arguments():
    with pytest.raises(ConfigError, match="idle timeout"):
        serve("127.0.0.1:0", _session(), tls=None, insecure=True, idle_timeout_s=0)
    server, port = create_server("127.0.0.1:0", _session(), tls=None, insecure=True)
    try:
        assert port > 0
        assert _health(port) == health_pb2.HealthCheckResponse.SERVING
        from securelp.solvers.errors import TransportError
        with pytest.raises(TransportError, match=f"cannot listen on 127.0.0.1:{port}"):
            create_server(f"127.0.0.1:{port}", _session(), tls=None, insecure=True)  # no silent port sharing
    finally:
        server.stop(0)


class _RefusingSession:
    party_id = "strict"
    closed = threading.Event()

    def hello(self, request):
        from securelp.solvers.errors import InputError

        raise InputError("party strict: its block file is stale")


def test_party_error_class_crosses_the_wire():
    from securelp.solvers.errors import InputError, ProtocolError

    server, port = create_server("127.0.0.1:0", _RefusingSession(), tls=None, insecure=True)
    link = GrpcPartyLink("strict", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=5)
    try:
        with pytest.raises(InputError) as info:  # INVALID_ARGUMENT alone would have become a ProtocolError
            link.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=1))
        assert type(info.value) is InputError and not isinstance(info.value, ProtocolError)
        assert str(info.value) == "hello: party strict: its block file is stale"
    finally:
        link.shutdown()
        server.stop(0)


def test_a_client_certificate_of_the_session_ca_that_is_not_the_coordinator_is_refused(tmp_path):
    # mint, with the session CA, a client certificate for "mallory": TLS accepts it (right CA,
    # clientAuth), so only the party's identity check stands between mallory and the data.
    from securelp.coordinator.certs import _certificate, _new_key, _pem_cert, _pem_key
    from securelp.coordinator.grpc_link import ChannelTls
    from securelp.party.server import ServerTls
    from securelp.solvers.errors import AuthenticationError

    ca_key = _new_key()
    ca = _certificate("test CA", ca_key, "test CA", ca_key, ca=True, days=1, server=False, client=False)
    keys = {name: _new_key() for name in ("solo", "coordinator", "mallory")}
    certs = {name: _certificate(name, key, "test CA", ca_key, ca=False, days=1, server=(name == "solo"),
                                client=(name != "solo")) for name, key in keys.items()}
    server, port = create_server("127.0.0.1:0", _session("solo"), tls=ServerTls(
        _pem_key(keys["solo"]), _pem_cert(certs["solo"]), _pem_cert(ca)))
    hello = pb.HelloRequest(session_id="s", protocol_version=1, n_rows=2)
    try:
        for who, ok in (("mallory", False), ("coordinator", True)):  # the coordinator is the negative control
            link = GrpcPartyLink("solo", f"127.0.0.1:{port}", tls=ChannelTls(
                _pem_cert(ca), _pem_key(keys[who]), _pem_cert(certs[who])), deadline_s=5)
            try:
                if ok:
                    assert link.hello(hello).party_id == "solo"
                else:
                    with pytest.raises(AuthenticationError, match="names \\['mallory'\\], not 'coordinator'"):
                        link.hello(hello)
            finally:
                link.shutdown()
    finally:
        server.stop(0)
