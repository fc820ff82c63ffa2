"""Unit tests of the gRPC edge: chunk framing, the servicer's error mapping and peer check,
the channel/server factories, and RpcError -> typed error on the coordinator side."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securelp.coordinator.grpc_link import GrpcPartyLink, create_channel, parse_address
from securelp.party.server import PartyServicer, _status_for, create_server
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import CHUNK_BYTES, join_chunks, split_payload
from securelp.solvers import errors as E


# -- chunk framing --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES + 17])
def test_chunks_roundtrip_and_sizes(size):
    payload = np.random.default_rng(size).bytes(size)
    chunks = list(split_payload(payload))
    assert all(len(c.data) <= CHUNK_BYTES for c in chunks)
    assert len(chunks) == max(1, -(-size // CHUNK_BYTES))
    assert [bool(c.sha256) for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert join_chunks(chunks) == payload


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=5000), st.integers(min_value=1, max_value=700))
def test_chunks_roundtrip_property(payload, chunk_bytes):
    assert join_chunks(split_payload(payload, chunk_bytes)) == payload


def _chunks(size=2 * CHUNK_BYTES + 5):
    return list(split_payload(np.random.default_rng(1).bytes(size)))


def test_tampered_chunk_is_refused():
    chunks = _chunks()
    bad = bytearray(chunks[1].data)
    bad[100] ^= 0x01
    chunks[1] = pb.Chunk(total_size=chunks[1].total_size, offset=chunks[1].offset, data=bytes(bad))
    with pytest.raises(E.ProtocolError, match="party p7.*checksum"):
        join_chunks(chunks, peer="party p7")


@pytest.mark.parametrize("mutate, fragment", [
    (lambda cs: cs[:-1], "ended after"),             # truncated stream
    (lambda cs: [cs[1], cs[0], cs[2]], "offset"),    # reordered
    (lambda cs: [cs[0], cs[0], cs[1], cs[2]], "offset"),  # duplicated
    (lambda cs: [], "empty"),
])
def test_broken_streams_are_refused(mutate, fragment):
    with pytest.raises(E.ProtocolError, match=fragment):
        join_chunks(mutate(_chunks()), peer="party x")


# -- servicer: one place maps typed errors to status codes ----------------------------------
class _Aborted(Exception):
    pass


class FakeContext:
    def __init__(self, names=("coordinator",)):
        self.names = names
        self.code = None
        self.details = None
        self.trailing = ()

    def auth_context(self):
        return {"x509_common_name": [n.encode() for n in self.names]}

    def set_trailing_metadata(self, md):
        self.trailing = md

    def abort(self, code, details):
        self.code, self.details = code, details
        raise _Aborted


class FakeSession:
    party_id = "p1"

    def __init__(self, exc=None):
        self.exc = exc

    def hello(self, request):
        if self.exc:
            raise self.exc
        return pb.HelloReply(party_id="p1", n_rows=request.n_rows)

    def decode(self, notice):
        return pb.DecodeReply(party_id="p1", n_decoded=int(notice.objective))


@pytest.mark.parametrize("exc, code", [
    (E.ProtocolError("party p1: hello before x"), grpc.StatusCode.FAILED_PRECONDITION),
    (E.InputError("bad"), grpc.StatusCode.INVALID_ARGUMENT),
    (E.ResourceError("big"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.SolverError("s"), grpc.StatusCode.INTERNAL),
])
def test_typed_errors_map_to_status_codes(exc, code):
    ctx = FakeContext()
    with pytest.raises(_Aborted):
        PartyServicer(FakeSession(exc)).Hello(pb.HelloRequest(n_rows=3), ctx)
    assert ctx.code == code and ctx.details == str(exc)
    assert ctx.trailing == (("securelp-error-class", type(exc).__name__),)
    assert _status_for(exc) == code


def test_unexpected_errors_do_not_leak_their_message():
    secret = "A[3,4]=0.123456789"
    ctx = FakeContext()
    with pytest.raises(_Aborted):
        PartyServicer(FakeSession(ValueError(secret))).Hello(pb.HelloRequest(), ctx)
    assert ctx.code == grpc.StatusCode.INTERNAL
    assert secret not in ctx.details and "ValueError" in ctx.details


def test_peer_must_be_the_coordinator():
    servicer = PartyServicer(FakeSession())
    assert servicer.Hello(pb.HelloRequest(n_rows=4), FakeContext()).n_rows == 4
    ctx = FakeContext(names=("owner2",))  # a valid session certificate, but another party's
    with pytest.raises(_Aborted):
        servicer.Hello(pb.HelloRequest(n_rows=4), ctx)
    assert ctx.code == grpc.StatusCode.PERMISSION_DENIED and "owner2" in ctx.details
    # insecure mode has no identities to check
    assert PartyServicer(FakeSession(), check_peer=False).Hello(pb.HelloRequest(n_rows=5), FakeContext(())).n_rows == 5


def test_decode_reassembles_chunks_and_refuses_garbage():
    servicer = PartyServicer(FakeSession())
    notice = pb.SolutionNotice(session_id="s", objective=7.0)
    out = join_chunks(servicer.Decode(iter(split_payload(notice.SerializeToString(), 3)), FakeContext()))
    assert pb.DecodeReply.FromString(out).n_decoded == 7
    ctx = FakeContext()
    with pytest.raises(_Aborted):
        list(servicer.Decode(iter(split_payload(b"\xff\xff\xff")), ctx))
    assert ctx.code == grpc.StatusCode.FAILED_PRECONDITION and "does not parse" in ctx.details


def test_servicer_records_contact():
    servicer = PartyServicer(FakeSession())
    servicer.last_contact = 0.0
    servicer.Hello(pb.HelloRequest(), FakeContext())
    assert servicer.last_contact > 0.0


# -- factories ------------------------------------------------------------------------------
def test_factories_refuse_tls_with_insecure_and_nothing_at_all():
    from securelp.coordinator.grpc_link import ChannelTls
    from securelp.party.server import ServerTls

    with pytest.raises(E.ConfigError, match="both"):
        create_channel("127.0.0.1:1", tls=ChannelTls(b"a", b"b", b"c"), insecure=True)
    with pytest.raises(E.ConfigError, match="no TLS"):
        create_channel("127.0.0.1:1", tls=None)
    with pytest.raises(E.ConfigError, match="both"):
        create_server("127.0.0.1:0", FakeSession(), tls=ServerTls(b"a", b"b", b"c"), insecure=True)
    with pytest.raises(E.ConfigError, match="no TLS"):
        create_server("127.0.0.1:0", FakeSession(), tls=None)


def test_insecure_is_warned(caplog):
    with caplog.at_level("WARNING"):
        create_channel("127.0.0.1:1", tls=None, insecure=True).close()
    assert "WITHOUT TLS" in caplog.text


@pytest.mark.parametrize("text, ok", [("127.0.0.1:0", True), ("h:50051", True), ("[::1]:5", True),
                                      ("nohost", False), (":5", False), ("h:x", False), ("h:70000", False)])
def test_parse_address(text, ok):
    if ok:
        assert parse_address(text)[1] >= 0
    else:
        with pytest.raises(E.InputError):
            parse_address(text)


# -- RpcError -> typed error -----------------------------------------------------------------
class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, trailing=()):
        self._code, self._details, self._trailing = code, details, trailing

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing


@pytest.fixture()
def link():
    lk = GrpcPartyLink("owner3", "10.0.0.9:50051", tls=None, insecure=True, deadline_s=7)
    yield lk
    lk.shutdown()


@pytest.mark.parametrize("code, details, cls, fragment", [
    (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; Connection refused", E.TransportError,
     "party owner3 at 10.0.0.9:50051 is unreachable"),
    (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", E.TransportError, "did not answer mask within 7 s"),
    (grpc.StatusCode.UNAVAILABLE, "Ssl handshake failed: CERTIFICATE_VERIFY_FAILED", E.AuthenticationError,
     "TLS handshake with party owner3"),
    (grpc.StatusCode.PERMISSION_DENIED, "not the coordinator", E.AuthenticationError, "refused the coordinator"),
    (grpc.StatusCode.INVALID_ARGUMENT, "bad k", E.ProtocolError, "rejected mask"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max", E.ResourceError, "size limit"),
    (grpc.StatusCode.INTERNAL, "boom", E.SecureLPError, "party owner3 at 10.0.0.9:50051 failed"),
])
def test_rpc_errors_become_typed_errors_naming_the_party(link, code, details, cls, fragment):
    err = link._rpc_error(FakeRpcError(code, details), "mask", 7)
    assert type(err) is cls
    assert fragment in str(err)
    assert not isinstance(err, grpc.RpcError)


def test_party_error_class_survives_the_wire(link):
    err = link._rpc_error(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "party owner3: k too small",
                                       (("securelp-error-class", "ProtocolError"),)), "mask", 7)
    assert type(err) is E.ProtocolError and str(err) == "mask: party owner3: k too small"
    err = link._rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "x", (("securelp-error-class", "Evil"),)),
                          "mask", 7)
    assert type(err) is E.ProtocolError  # unknown class names fall back to the status code


def test_socket_closed_while_connecting_is_a_tls_refusal_only_under_tls(link):
    details = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1.2.3.4:5: Socket closed"
    assert type(link._rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details), "hello", 1)) is E.TransportError
    link._tls = True
    assert type(link._rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details), "hello", 1)) is E.AuthenticationError


def test_unreachable_party_is_named_quickly():
    import socket
    import time

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
