"""The protocol runtime without sockets: the stream engine (``securelp.protos.stream``) over in-memory
pipes, the party's host (one session at a time, dropped sessions) and the owner's result file."""

from __future__ import annotations

import csv
import json
import queue
import threading
import time

import numpy as np
import pytest

from securelp.coordinator.transport import InProcessConnection, InProcessLink, ProtocolLink
from securelp.party.results import PartyResult, read_party_solution, result_format, write_result
from securelp.party.runtime import HostedProtocol, PartyBusy, PartyHost
from securelp.party.session import PPLP, PartySession
from securelp.protos import runtime_pb2 as rpb
from securelp.protos import securelp_pb2 as pb
from securelp.protos.stream import (
    CallDeadlineExceeded,
    FrameStream,
    PeerFault,
    PeerGone,
    Request,
    Response,
    envelopes,
)
from securelp.solvers.errors import InputError, ProtocolError
from securelp.solvers.lp.partition import ColumnBlock


class Wire:
    """One direction of an in-memory connection: relays frames, can stall (a stopped peer) or break."""

    def __init__(self, source):  # type: ignore[no-untyped-def]
        self.frames: queue.Queue = queue.Queue()
        self.stalled = threading.Event()
        self.broken = threading.Event()
        threading.Thread(target=lambda: [self.frames.put(f) for f in source], daemon=True).start()

    def __iter__(self):  # type: ignore[no-untyped-def]
        while True:  # like a socket: a reset is seen at once, also while nothing arrives
            if self.broken.is_set():
                raise ConnectionResetError("connection reset by peer")
            if self.stalled.is_set():
                time.sleep(0.01)
                continue
            try:
                yield self.frames.get(timeout=0.01)
            except queue.Empty:
                continue


def pair(handler, keepalive=2.0, party_keepalive=None):  # type: ignore[no-untyped-def]
    """A coordinator stream and a party stream connected by two wires (to the party, to the coordinator)."""
    coordinator = FrameStream(peer="party p1", role="coordinator", keepalive_s=keepalive)
    party = FrameStream(peer="the coordinator", role="party", keepalive_s=party_keepalive or keepalive, handler=handler)
    to_party, to_coordinator = Wire(coordinator.outgoing()), Wire(party.outgoing())
    coordinator.send_open("coordinator")
    party.send_open("p1", [PPLP.offer()])
    party.attach(to_party, cancel=lambda: to_party.broken.set())
    coordinator.attach(to_coordinator, cancel=lambda: to_coordinator.broken.set())
    assert coordinator.wait_open(5).sender == "p1"
    assert party.wait_open(5).sender == "coordinator"
    return coordinator, party, to_party, to_coordinator


def echo(request: Request) -> Response:
    return Response(request.payload[::-1], {"method": request.method})


def test_a_call_over_several_chunks_comes_back_whole():
    coordinator, party, *_ = pair(echo)
    payload = np.random.default_rng(0).bytes(2_500_000)  # three 1 MiB chunks
    reply = coordinator.call("pplp", "s", "mask", payload, deadline_s=10)
    assert reply.payload == payload[::-1] and reply.metadata == {"method": "mask"}
    coordinator.close()
    party.close()


def test_the_partys_typed_error_comes_back_as_a_fault():
    def refuse(request: Request) -> Response:
        raise InputError("party p1: its block is stale")

    coordinator, party, *_ = pair(refuse)
    with pytest.raises(PeerFault) as info:
        coordinator.call("pplp", "s", "hello", b"x", deadline_s=5)
    err = info.value.typed("hello: ")
    assert type(err) is InputError and str(err) == "hello: party p1: its block is stale"
    assert coordinator.failure is None  # the stream survives a refused call
    coordinator.close()
    party.close()


def test_a_stopped_party_is_unresponsive_within_the_keepalive_and_a_slow_one_is_not():
    """Heartbeats flow while the party computes: a call slower than the keepalive succeeds (the control),
    while a stalled connection (the party stopped) fails the call after one keepalive, as unresponsive."""
    def slow(request: Request) -> Response:
        time.sleep(1.2)
        return echo(request)

    coordinator, party, _to_party, to_coordinator = pair(slow, keepalive=0.5)
    assert coordinator.call("pplp", "s", "mask", b"abc", deadline_s=10).payload == b"cba"  # 1.2 s > keepalive
    to_coordinator.stalled.set()  # the party stops: nothing reaches the coordinator any more
    start = time.monotonic()
    with pytest.raises(PeerGone) as info:
        coordinator.call("pplp", "s", "decode", b"abc", deadline_s=30)
    assert info.value.kind == "unresponsive" and "party p1 is unresponsive" in str(info.value)
    assert time.monotonic() - start < 0.5 + 1.0
    party.close()


def test_a_party_that_disconnects_fails_the_call_at_once():
    release = threading.Event()

    def blocked(request: Request) -> Response:
        release.wait(10)
        return echo(request)

    coordinator, party, _to_party, to_coordinator = pair(blocked, keepalive=30)
    threading.Timer(0.3, to_coordinator.broken.set).start()
    start = time.monotonic()
    with pytest.raises(PeerGone) as info:
        coordinator.call("pplp", "s", "mask", b"abc", deadline_s=30)
    assert info.value.kind == "disconnected" and time.monotonic() - start < 5
    release.set()
    party.close()


def test_a_deadline_is_not_a_dead_peer():
    release = threading.Event()

    def blocked(request: Request) -> Response:
        release.wait(5)
        return echo(request)

    coordinator, party, *_ = pair(blocked)
    with pytest.raises(CallDeadlineExceeded, match="party p1 did not answer mask within 0.3 s"):
        coordinator.call("pplp", "s", "mask", b"abc", deadline_s=0.3)
    release.set()
    assert coordinator.call("pplp", "s", "decode", b"ok", deadline_s=5).payload == b"ko"  # the late reply was dropped
    coordinator.close()
    party.close()


def test_a_refusing_goodbye_is_the_typed_error_it_names():
    coordinator, party, *_ = pair(echo)
    party.goodbye("busy with session 42", "TransportError")
    with pytest.raises(Exception) as info:
        coordinator.wait_open(1) and coordinator.call("pplp", "s", "hello", b"", deadline_s=5)
    assert type(info.value).__name__ == "TransportError" and "party p1: busy with session 42" in str(info.value)


def test_a_corrupt_chunk_fails_the_stream_with_a_protocol_error():
    party = FrameStream(peer="the coordinator", role="party", keepalive_s=5, handler=echo)
    frames = list(envelopes(1, "pplp", "s", "hello", b"payload", reply=False))
    frames[0].envelope.data = b"tampered"
    party.attach(iter([rpb.Frame(open=rpb.Open(runtime_version=1, sender="coordinator")), *frames]))
    assert party.done.wait(5)
    assert isinstance(party.failure, ProtocolError)


# -- the party's host ----------------------------------------------------------------------------------
def _block(pid="p1"):
    return ColumnBlock(pid, np.eye(2), np.ones(2), np.full(2, -np.inf), np.full(2, np.inf), col_names=("a", "b"))


def _host(**kw):  # type: ignore[no-untyped-def]
    return PartyHost("p1", [HostedProtocol(PPLP, lambda sid: PartySession(_block()))], **kw)


def test_a_peer_of_another_runtime_version_is_refused_naming_it():
    """The runtime's version is checked in the Open frames: a peer that speaks another one is a
    ProtocolError naming it (the control: the same Open with this version is accepted)."""
    from securelp.protos import runtime_pb2 as rpb
    from securelp.protos.stream import RUNTIME_VERSION

    for version, ok in ((RUNTIME_VERSION, True), (RUNTIME_VERSION + 1, False)):
        coordinator = FrameStream(peer="party p1", role="coordinator", keepalive_s=5)
        frames = iter([rpb.Frame(open=rpb.Open(runtime_version=version, sender="p1", heartbeat_s=1, keepalive_s=5))])
        wire = Wire(frames)
        coordinator.send_open("coordinator")
        coordinator.attach(wire, cancel=wire.broken.set)
        try:
            if ok:
                assert coordinator.wait_open(5).sender == "p1"
            else:
                with pytest.raises(ProtocolError, match=rf"party p1 speaks runtime version {version}, this side "
                                                        rf"{RUNTIME_VERSION}"):
                    coordinator.wait_open(5)
        finally:
            coordinator.close()


def test_one_session_at_a_time_and_a_fresh_state_machine_for_each():
    ended = []
    host = _host(on_session_end=ended.append)
    first = ProtocolLink(InProcessConnection(host), PPLP)
    first.call("hello", pb.HelloRequest(session_id="s1", protocol_version=2, n_rows=2))
    with pytest.raises(PartyBusy, match="party p1 is busy with session s1 \\(pplp\\)"):
        ProtocolLink(InProcessConnection(host), PPLP).call(
            "hello", pb.HelloRequest(session_id="s2", protocol_version=2, n_rows=2))
    s1 = host.current.session
    first.connection.finish("the coordinator vanished")  # the connection ends mid-session: the session is dropped
    assert [r.end_reason for r in ended] == ["dropped: the coordinator vanished"]
    time.sleep(0.1)
    assert s1.closed.is_set() and s1._mask is None and s1.close_reason.startswith("dropped")
    second = ProtocolLink(InProcessConnection(host), PPLP)  # the host is free at once
    second.call("hello", pb.HelloRequest(session_id="s2", protocol_version=2, n_rows=2))
    assert host.current.session is not s1 and host.current.session_id == "s2"
    second.call("close", pb.CloseRequest(session_id="s2", reason="done"))
    assert [r.end_reason for r in ended] == ["dropped: the coordinator vanished", "done"]


def test_the_host_names_what_it_does_not_serve():
    link = ProtocolLink(InProcessConnection(_host()), PPLP)
    with pytest.raises(ProtocolError, match="mask for session 'x', which it does not have \\(hello first\\)"):
        link.call("mask", pb.MaskRequest(session_id="x"))
    # a close for a session it does not have is answered (closing is idempotent)
    assert link.call("close", pb.CloseRequest(session_id="x")).party_id == "p1"
    from securelp.party.runtime import Method, ProtocolSpec

    other = ProtocolSpec("census", 1, 1, {"hello": Method(pb.HelloRequest, pb.HelloReply),
                                         "close": Method(pb.CloseRequest, pb.CloseReply)})
    with pytest.raises(ProtocolError, match="does not serve protocol 'census' \\(it serves: pplp 1-2\\)"):
        ProtocolLink(link.connection, other).call("hello", pb.HelloRequest(session_id="y"))


def test_the_hello_reports_the_split_id_through_the_frames():
    block = ColumnBlock("p1", np.eye(2), np.ones(2), np.full(2, -np.inf), np.full(2, np.inf), "ab" * 16)
    link = InProcessLink(PartySession(block))
    link.hello(pb.HelloRequest(session_id="s", protocol_version=2, n_rows=2))
    assert link.reported_split_id == "ab" * 16
    assert link.bytes_received > 0 and link.bytes_sent > 0


# -- the owner's result ------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".json", ".npz", ".txt"])
def test_the_result_file_holds_x_under_the_column_names(tmp_path, suffix):
    x = np.array([1.0 / 3.0, -2.5e-300, 7.0])
    result = PartyResult("p1", "s9", "optimal", -4.5, x, ("X1", "cap,1", "X3"))
    path = write_result(result, tmp_path / f"x_{{session}}{suffix}")
    assert path == tmp_path / f"x_s9{suffix}" and (path.stat().st_mode & 0o777) == 0o600
    fmt = result_format(path)
    if fmt == "csv":
        rows = list(csv.reader(path.open()))
        assert rows[0] == ["column", "value"] and [r[0] for r in rows[1:]] == ["X1", "cap,1", "X3"]
        assert np.array_equal([float(r[1]) for r in rows[1:]], x)  # repr: every double round-trips
    elif fmt == "json":
        doc = json.loads(path.read_text())
        assert doc["columns"] == ["X1", "cap,1", "X3"] and doc["x"] == list(x) and doc["session_id"] == "s9"
    else:
        with np.load(path) as data:
            assert list(data["columns"]) == ["X1", "cap,1", "X3"] and np.array_equal(data["x"], x)
    names, back = read_party_solution(path)
    assert names == ("X1", "cap,1", "X3") and np.array_equal(back, x)
    # a session without an optimum: the status and no values, so a stale file is never taken for a result
    empty = write_result(PartyResult("p1", "s9", "infeasible", float("nan"), None, ("X1",)), tmp_path / "n.json")
    doc = json.loads(empty.read_text())
    assert doc["status"] == "infeasible" and doc["x"] is None and doc["objective"] is None


def test_a_session_gives_its_owner_x_under_its_names_only_when_done():
    session = PartySession(_block())
    link = InProcessLink(session)
    link.hello(pb.HelloRequest(session_id="s", protocol_version=2, n_rows=2, bounds_mode=pb.BOUNDS_MODE_MONOMIAL))
    link.mask(pb.MaskRequest(session_id="s", bounds_mode=pb.BOUNDS_MODE_MONOMIAL, k=4))
    from securelp.protos.codec import vector_to_pb

    reply = link.decode(pb.SolutionNotice(session_id="s", status=pb.SOLVE_STATUS_OPTIMAL, objective=1.0,
                                          u=vector_to_pb(np.ones(4))))
    assert reply.saved_as == "" and not reply.revealed
    assert session.result() is None  # not closed yet: no session result
    link.close(pb.CloseRequest(session_id="s", reason="done"))
    result = session.result()
    assert result.column_names == ("a", "b") and result.x.shape == (2,) and result.status == "optimal"

