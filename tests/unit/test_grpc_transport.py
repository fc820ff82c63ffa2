"""Unit tests of the gRPC edge without sockets: chunk framing, the party's servicer (typed errors as
faults, the peer check, a busy party) over in-memory frames, the channel/server factories, and
RpcError -> typed error."""

from __future__ import annotations

import queue
import threading

import grpc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securelp.coordinator.grpc_link import GrpcPartyLink, create_channel, parse_address
from securelp.party.runtime import PartyHost
from securelp.party.server import PartyRuntimeServicer, create_server
from securelp.party.session import PPLP
from securelp.protos import runtime_pb2 as rpb
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import CHUNK_BYTES, join_chunks, split_payload
from securelp.protos.stream import PeerFault, envelopes
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


# -- the party's servicer: typed errors as faults, the peer check, busy -----------------------
class _Aborted(Exception):
    pass


class FakeContext:
    def __init__(self, names=("coordinator",)):
        self.names = names
        self.code = None
        self.details = None
        self.trailing = ()

    def peer(self):
        return "ipv4:127.0.0.1:40000"

    def auth_context(self):
        return {"x509_common_name": [n.encode() for n in self.names]}

    def set_trailing_metadata(self, md):
        self.trailing = md

    def abort(self, code, details):
        self.code, self.details = code, details
        raise _Aborted

    def add_callback(self, callback):
        return True

    def cancel(self):
        pass


class FakeSession:
    """A party state machine whose hello raises ``exc`` (or answers)."""

    party_id = "p1"

    def __init__(self, exc=None):
        self.exc = exc
        self.closed = threading.Event()
        self.close_reason = ""

    def handle(self, method, request):
        if self.exc:
            raise self.exc
        return pb.HelloReply(party_id="p1", n_rows=request.n_rows)

    def abandon(self, reason):
        self.closed.set()


def _attach(servicer, ctx, request):
    """Open a stream to the servicer with a hello; the frames it answers with, until a reply or fault."""
    incoming: queue.Queue = queue.Queue()
    incoming.put(rpb.Frame(open=rpb.Open(runtime_version=1, sender="coordinator")))
    for frame in envelopes(1, "pplp", "s", "hello", request.SerializeToString(), reply=False):
        incoming.put(frame)

    def frames():
        while (frame := incoming.get()) is not None:
            yield frame

    out = servicer.Attach(frames(), ctx)
    got = []
    try:
        for frame in out:
            got.append(frame)
            if frame.WhichOneof("kind") in ("fault", "goodbye") or (
                    frame.WhichOneof("kind") == "envelope" and frame.envelope.reply):
                break
    finally:
        incoming.put(None)
        out.close()
    return got


def _servicer(session, **kw):
    return PartyRuntimeServicer(PartyHost.single(session, PPLP, "p1"), keepalive_s=5, **kw)


@pytest.mark.parametrize("exc", [E.ProtocolError("party p1: hello before x"), E.InputError("bad"),
                                 E.ResourceError("big"), E.SolverError("s")])
def test_typed_errors_reach_the_coordinator_as_faults_of_their_class(exc):
    frames = _attach(_servicer(FakeSession(exc)), FakeContext(), pb.HelloRequest(n_rows=3))
    assert frames[0].WhichOneof("kind") == "open" and frames[0].open.sender == "p1"
    fault = frames[-1].fault
    assert (fault.error_class, fault.message) == (type(exc).__name__, str(exc))
    assert type(PeerFault(fault.error_class, fault.message).typed()) is type(exc)


def test_unexpected_errors_do_not_leak_their_message():
    secret = "A[3,4]=0.123456789"
    fault = _attach(_servicer(FakeSession(ValueError(secret))), FakeContext(), pb.HelloRequest())[-1].fault
    assert secret not in fault.message and "internal error (ValueError)" in fault.message
    assert fault.error_class == "SecureLPError"


def test_a_reply_comes_back_and_the_peer_must_be_the_coordinator():
    frames = _attach(_servicer(FakeSession()), FakeContext(), pb.HelloRequest(n_rows=4))
    assert frames[-1].envelope.reply and pb.HelloReply.FromString(frames[-1].envelope.data).n_rows == 4
    ctx = FakeContext(names=("owner2",))  # a valid session certificate, but another party's
    with pytest.raises(_Aborted):
        _attach(_servicer(FakeSession()), ctx, pb.HelloRequest(n_rows=4))
    assert ctx.code == grpc.StatusCode.PERMISSION_DENIED and "owner2" in ctx.details
    # insecure mode has no identities to check
    frames = _attach(_servicer(FakeSession(), check_peer=False), FakeContext(()), pb.HelloRequest(n_rows=5))
    assert pb.HelloReply.FromString(frames[-1].envelope.data).n_rows == 5


def test_a_busy_party_says_so_and_names_the_session():
    servicer = _servicer(FakeSession())
    servicer.host.connect("another coordinator")
    frames = _attach(servicer, FakeContext(), pb.HelloRequest())
    assert [f.WhichOneof("kind") for f in frames] == ["goodbye"]
    assert frames[0].goodbye.error_class == "TransportError"
    assert frames[0].goodbye.reason.startswith("busy with a coordinator that has not started its session yet")


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


def test_insecure_is_warned_once_per_address(caplog):
    """A plaintext channel is warned about, once per address: a dial-out party that redials every few
    seconds does not repeat it."""
    with caplog.at_level("WARNING"):
        for _ in range(3):
            create_channel("127.0.0.1:7", tls=None, insecure=True).close()
        create_channel("127.0.0.1:8", tls=None, insecure=True).close()
    warned = [r.getMessage() for r in caplog.records if "WITHOUT TLS" in r.getMessage()]
    assert len(warned) == 2 and "127.0.0.1:7" in warned[0] and "127.0.0.1:8" in warned[1]


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
    (grpc.StatusCode.PERMISSION_DENIED, "not the coordinator", E.AuthenticationError, "refused this side's certificate"),
    (grpc.StatusCode.INVALID_ARGUMENT, "bad k", E.ProtocolError, "rejected mask"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max", E.ResourceError, "size limit"),
    (grpc.StatusCode.UNIMPLEMENTED, "Method not found!", E.ProtocolError, "does not serve the securelp runtime"),
    (grpc.StatusCode.INTERNAL, "boom", E.SecureLPError, "party owner3 at 10.0.0.9:50051 failed"),
    # a party stopped with SIGSTOP: the kernel accepts the connection, gRPC's handshake times out
    (grpc.StatusCode.UNAVAILABLE, ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:42953: "
                                   "Handshake read failed (Endpoint closing)"), E.TransportError, "is unresponsive"),
])
def test_rpc_errors_become_typed_errors_naming_the_party(link, code, details, cls, fragment):
    err = link._rpc_error(FakeRpcError(code, details), "mask", 7)
    assert isinstance(err, cls) and not isinstance(err, E.AuthenticationError) or cls is E.AuthenticationError
    assert type(err).exit_code == cls.exit_code
    assert fragment in str(err)
    assert not isinstance(err, grpc.RpcError)


def test_a_handshake_that_times_out_is_not_a_certificate_problem():
    """gRPC's handshake timeout against a stopped party says "Handshake read failed (Endpoint closing)":
    "handshake" alone must not make it a TLS failure (it was reported as a certificate from another CA)."""
    from securelp.protos.channels import looks_like_tls_failure

    assert not looks_like_tls_failure("ipv4:127.0.0.1:1: Handshake read failed (Endpoint closing)", True)
    assert not looks_like_tls_failure("Handshake timed out", True)
    assert looks_like_tls_failure("Ssl handshake failed: CERTIFICATE_VERIFY_FAILED", True)  # the control


def test_a_connection_reset_during_the_handshake_is_a_transport_failure():
    """A link cut while TLS is set up ("Connection reset by peer", no TLS alert) is the network or the
    peer going away (exit 6), not a refused certificate (exit 7); a reset with a TLS alert still is one."""
    from securelp.protos.channels import reset_while_connecting

    cut = "ipv4:127.0.0.1:38421: Handshake read failed (recvmsg:Connection reset by peer (104))"
    assert reset_while_connecting(cut)
    assert not reset_while_connecting("Ssl handshake failed: CERTIFICATE_VERIFY_FAILED; Connection reset by peer")
    assert not reset_while_connecting("ipv4:127.0.0.1:1: Handshake read failed (Endpoint closing)")


def test_party_error_class_survives_the_wire(link):
    err = link._rpc_error(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "party owner3: k too small",
                                       (("securelp-error-class", "ProtocolError"),)), "mask", 7)
    assert type(err) is E.ProtocolError and str(err) == "mask: party owner3: k too small"
    err = link._rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "x", (("securelp-error-class", "Evil"),)),
                          "mask", 7)
    assert type(err) is E.ProtocolError  # unknown class names fall back to the status code


def test_socket_closed_while_connecting_is_a_tls_refusal_only_under_tls(link):
    details = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1.2.3.4:5: Socket closed"
    assert not isinstance(link._rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details), "hello", 1),
                          E.AuthenticationError)
    link._tls = True
    assert type(link._rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details), "hello", 1)) is E.AuthenticationError


@pytest.mark.parametrize("peer, address", [("ipv4:10.0.0.5:41234", "10.0.0.5:41234"),
                                           ("ipv6:%5B::1%5D:51634", "[::1]:51634"),
                                           ("unix:/run/x.sock", "/run/x.sock"), ("odd", "odd")])
def test_a_dial_out_party_s_address_reads_as_host_port(peer, address):
    """gRPC's peer strings (it percent-encodes an IPv6 peer's brackets) become the address reports show."""
    from securelp.coordinator.listener import _address_of

    assert _address_of(peer) == address


@pytest.mark.parametrize("address, reason", [("256.1.1.1:0", "the host '256.1.1.1' does not resolve"),
                                             ("example.invalid:0", "the host 'example.invalid' does not resolve")])
def test_an_address_that_cannot_be_bound_says_why(address, reason):
    """gRPC only says that a bind failed; the error carries the operating system's reason."""
    from securelp.protos.channels import bind_failure

    assert reason in bind_failure(address)
