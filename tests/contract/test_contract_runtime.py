"""The protocol runtime's contract, over every transport: in-process, gRPC dial-in and gRPC dial-out
(threads of this process, port 0, mutual TLS with fresh session certificates).

- a second protocol (the example ``secure-sum``) runs unchanged over every transport: no transport
  code knows it;
- a long-running party serves session after session, each with a fresh state machine (fresh masks);
- one session at a time: a second coordinator is refused, naming the party and saying it is busy;
- a coordinator that vanishes mid-session has its session dropped at once, and the next coordinator
  is served at once.
"""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest

from securelp.coordinator.certs import COORDINATOR_ID, load_identity
from securelp.coordinator.grpc_link import GrpcPartyLink, local_grpc_links
from securelp.coordinator.listener import PartyListener, _dialout_party
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.secure_sum import run_secure_sum
from securelp.coordinator.simulation import owners_consent
from securelp.coordinator.transport import InProcessConnection, PPLPLink, ProtocolLink
from securelp.party.aggregation import SigningIdentity
from securelp.party.runtime import HostedProtocol, PartyBusy, PartyHost
from securelp.party.secure_sum import SECURE_SUM, hosted_secure_sum
from securelp.party.session import PPLP, PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.protos.channels import ServerTls
from securelp.solvers.errors import ConfigError, TransportError
from securelp.solvers.lp import SolveStatus
from securelp.solvers.lp.partition import split_columns
from tests.lp_fixtures import random_feasible_lp

TRANSPORTS = ["inprocess", "dial-in", "dial-out"]


class DialOut:
    """A listening coordinator on port 0 and long-running parties in threads that dial it."""

    def __init__(self, hosts, tmp_path, keepalive_s=10.0):  # type: ignore[no-untyped-def]
        from securelp.coordinator.grpc_link import session_certificates

        self.hosts, self.keepalive_s = hosts, keepalive_s
        self.tls_dir = session_certificates(tmp_path, [h.party_id for h in hosts], [], insecure=False, bind_keys=False)
        ident = load_identity(self.tls_dir, COORDINATOR_ID)
        self.server_tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
        self.stop = threading.Event()
        self.listener = PartyListener("127.0.0.1:0", tls=self.server_tls, expected=[h.party_id for h in hosts],
                                      keepalive_s=keepalive_s)
        self.port = self.listener.start()
        self.threads = [_dialout_party(h, f"127.0.0.1:{self.port}", self.tls_dir, False, keepalive_s, self.stop, True)
                        for h in hosts]

    def connections(self, timeout=30.0):  # type: ignore[no-untyped-def]
        return self.listener.wait_for_parties(timeout)

    def restart(self, *, vanish: bool):  # type: ignore[no-untyped-def]
        """A new coordinator on the same port; ``vanish``: the old one disappears without a word."""
        if vanish:
            self.listener._server.stop(0)
        else:
            self.listener.stop()
        self.listener = PartyListener(f"127.0.0.1:{self.port}", tls=self.server_tls,
                                      expected=[h.party_id for h in self.hosts], keepalive_s=self.keepalive_s)
        self.listener.start()

    def close(self):  # type: ignore[no-untyped-def]
        self.stop.set()
        self.listener.stop()
        for t in self.threads:
            t.join(5)


@contextlib.contextmanager
def connections_to(transport, hosts, tmp_path):  # type: ignore[no-untyped-def]
    """A function that returns one connection per host over ``transport`` for the next session (the raw
    runtime: any protocol's link goes on top). In-process and dial-in, the same connections serve
    session after session; dial-out, the parties reconnect after each and the listener admits them."""
    if transport == "inprocess":
        connections = [InProcessConnection(h) for h in hosts]
        yield lambda: connections
    elif transport == "dial-in":
        with local_grpc_links(hosts, tmp_path) as links:
            yield lambda: [link.connection for link in links]
    else:
        dial = DialOut(hosts, tmp_path)
        sessions = []

        def next_session():  # type: ignore[no-untyped-def]
            if sessions:
                dial.listener.new_session()
            sessions.append(dial.connections())
            return sessions[-1]
        try:
            yield next_session
        finally:
            dial.close()


# -- a second protocol ------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_second_protocol_runs_over_every_transport(transport, tmp_path):
    """``secure-sum``: the coordinator gets the exact sum of three private vectors, never one of them
    (no share equals its party's vector), and every party learns the sum."""
    rng = np.random.default_rng(1)
    vectors = {f"s{i}": rng.integers(-10**12, 10**12, 50) for i in range(3)}
    sessions: dict[str, list] = {pid: [] for pid in vectors}
    identities: dict[str, SigningIdentity] = {}

    def factory(pid):  # type: ignore[no-untyped-def]
        def make(session_id):  # type: ignore[no-untyped-def]
            from securelp.party.secure_sum import SecureSumSession

            s = SecureSumSession(pid, vectors[pid], identity=identities.get(pid))
            sessions[pid].append(s)
            return s
        return make

    hosts = [PartyHost(pid, [HostedProtocol(SECURE_SUM, factory(pid))]) for pid in vectors]
    with connections_to(transport, hosts, tmp_path) as session_connections:
        connections = session_connections()
        if transport != "inprocess":  # the gRPC parties bind their keys to their certificates
            for pid in vectors:
                ident = load_identity(tmp_path / "certs", pid)
                identities[pid] = SigningIdentity(ident.private_key, ident.certificate, ident.ca_certificate)
        links = [ProtocolLink(c, SECURE_SUM, deadline_s=30) for c in connections]
        outcome = run_secure_sum(links, 50)
    expected = sum(vectors.values())
    assert np.array_equal(outcome.total, expected)
    assert outcome.keys_bound == (transport != "inprocess")
    for pid, share in zip(outcome.parties, outcome.shares):
        assert not np.array_equal(share.view(np.int64), vectors[pid])  # masked
        (s,) = sessions[pid]
        assert s.close_reason == "done" and np.array_equal(s.total, expected)
    assert all(b > 0 for b in outcome.bytes_sent)


def test_a_second_protocol_s_transcript_names_it_and_reads_back(tmp_path):
    """The coordinator's transcript records at the link layer whatever protocol crosses it: a secure-sum
    session's file names its protocol, each record its method and message type, and it reads back byte
    for byte; a file of format 1 (whose header names no protocol) still reads, as a pplp session."""
    import struct

    from securelp.coordinator.transcript import TranscriptRecorder, read_transcript, write_transcript
    from securelp.protos import transcript_pb2 as tpb
    from securelp.solvers.lp.partition import PublicRows

    hosts = [PartyHost(pid, [hosted_secure_sum(pid, [i, 2 * i, 3])]) for i, pid in enumerate(("t1", "t2"), 1)]
    recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0)))
    links = recorder.wrap_all([ProtocolLink(InProcessConnection(h), SECURE_SUM, deadline_s=10) for h in hosts])
    outcome = run_secure_sum(links, 3)
    assert list(outcome.total) == [3, 6, 6]
    path = tmp_path / "sum.transcript"
    write_transcript(recorder.transcript(), path)
    back = read_transcript(path)
    assert back.header.protocol == "secure-sum" and back.header.format_version == 2
    assert back.header.session_id == outcome.session_id
    calls = [(r.party_id, r.call, r.message_type) for r in back.records if r.party_id == "t1"]
    assert [c[1] for c in calls] == ["hello", "hello", "share", "share", "close", "close"]
    assert calls[2][2] == "securelp.examples.v1.SumShareRequest" and calls[3][2] == "securelp.examples.v1.SumShare"
    share = back.of("t1", "securelp.examples.v1.SumShare")[0].message()  # parsed: the reader knows the protocol's types
    assert share.share  # its bytes came back
    # format 1: the header before it named its protocol
    data = path.read_bytes()
    (length,) = struct.unpack_from("<Q", data, 8)
    frame = tpb.TranscriptFrame.FromString(data[16:16 + length])
    frame.header.format_version = 1
    frame.header.ClearField("protocol")
    raw = frame.SerializeToString()
    old = tmp_path / "v1.transcript"
    old.write_bytes(data[:8] + struct.pack("<Q", len(raw)) + raw + data[16 + length:])
    assert read_transcript(old).header.protocol == "pplp"


def test_a_secure_sum_of_one_party_is_refused():
    host = PartyHost("solo", [hosted_secure_sum("solo", [1, 2])])
    with pytest.raises(ConfigError, match="two or more parties"):
        run_secure_sum([ProtocolLink(InProcessConnection(host), SECURE_SUM)], 2)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_party_serves_both_protocols(transport, tmp_path):
    """The registry: a party serving pplp and secure-sum answers either, one session at a time."""
    lp = random_feasible_lp(np.random.default_rng(2), 6, 8)
    public, blocks = split_columns(lp, [4, 4], ids=["a", "b"])
    config = SessionConfig(reveal=True)
    hosts = [PartyHost(b.party_id, [HostedProtocol(PPLP, lambda sid, b=b: PartySession(b, policy=owners_consent(config))),
                                    hosted_secure_sum(b.party_id, [i + 1, 10])]) for i, b in enumerate(blocks)]
    with connections_to(transport, hosts, tmp_path) as session_connections:
        outcome = run_secure_lp(public, [PPLPLink(c) for c in session_connections()], config, central=lp)
        total = run_secure_sum([ProtocolLink(c, SECURE_SUM) for c in session_connections()], 2)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.objective_rel_diff <= 1e-9
    assert list(total.total) == [3, 20]
    assert [r.protocol for r in hosts[0].history] == ["pplp", "secure-sum"]


# -- long-running parties ---------------------------------------------------------------------------
def _lp_hosts(seed=3):  # type: ignore[no-untyped-def]
    lp = random_feasible_lp(np.random.default_rng(seed), 8, 12)
    public, blocks = split_columns(lp, [4, 4, 4], ids=["p1", "p2", "p3"])
    made: dict[str, list[PartySession]] = {b.party_id: [] for b in blocks}

    def factory(block):  # type: ignore[no-untyped-def]
        def make(session_id):  # type: ignore[no-untyped-def]
            s = PartySession(block)
            made[block.party_id].append(s)
            return s
        return make

    hosts = [PartyHost(b.party_id, [HostedProtocol(PPLP, factory(b))]) for b in blocks]
    return lp, public, hosts, made


def test_a_long_running_party_serves_session_after_session_with_fresh_masks(tmp_path):
    """Over dial-in and dial-out (the parties reconnect after each session): two sessions, both exact,
    each party with a new state machine and another mask."""
    lp, public, hosts, made = _lp_hosts()
    results = []
    (tmp_path / "in").mkdir()
    with local_grpc_links(hosts, tmp_path / "in") as links:
        for _ in range(2):
            results.append(run_secure_lp(public, links, SessionConfig(), central=lp))
    (tmp_path / "out").mkdir()
    dial = DialOut(hosts, tmp_path / "out")
    try:
        for _ in range(2):
            results.append(run_secure_lp(public, [PPLPLink(c) for c in dial.connections()], SessionConfig(), central=lp))
            dial.listener.new_session()
    finally:
        dial.close()
    assert all(r.status is SolveStatus.OPTIMAL and r.objective_rel_diff <= 1e-9 for r in results)
    for sessions in made.values():
        assert len(sessions) == 4 and len({id(s) for s in sessions}) == 4
        assert all(s.close_reason == "done" for s in sessions)
    masks = [r.transcript[0].scaled_c for r in results]  # p1's monomial part: another private scaling each time
    assert not any(np.allclose(masks[0], m) for m in masks[1:])
    assert [r.end_reason for r in hosts[0].history] == ["done"] * 4


@pytest.mark.parametrize("transport", ["inprocess", "dial-in"])
def test_a_second_coordinator_is_refused_as_busy(transport, tmp_path):
    _, _, hosts, _ = _lp_hosts()
    host = hosts[0]
    hello = pb.HelloRequest(session_id="first", protocol_version=2, n_rows=8)
    if transport == "inprocess":
        first = PPLPLink(InProcessConnection(host))
        second = PPLPLink(InProcessConnection(host))
        first.hello(hello)
        with pytest.raises(PartyBusy, match="party p1 is busy with session first \\(pplp\\)"):
            second.hello(hello)
        return
    with local_grpc_links([host], tmp_path) as (first,):
        first.hello(hello)
        second = GrpcPartyLink("p1", first.address, tls=first.connection._channel_tls, deadline_s=10)
        try:
            with pytest.raises(TransportError, match=r"party p1 at 127\.0\.0\.1:\d+: busy with session first "
                                                     r"\(pplp\); a party process serves one session at a time"):
                second.hello(hello)
        finally:
            second.shutdown()
        first.close(pb.CloseRequest(session_id="first", reason="done"))
    assert [r.end_reason for r in host.history] == ["done"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_vanished_coordinator_s_session_is_dropped_and_the_next_one_served(transport, tmp_path):
    lp, public, hosts, made = _lp_hosts()
    with contextlib.ExitStack() as stack:
        _vanish_and_serve(transport, tmp_path, lp, public, hosts, made, stack)


def _vanish_and_serve(transport, tmp_path, lp, public, hosts, made, stack):  # type: ignore[no-untyped-def]
    dial = None
    if transport == "inprocess":
        old = [PPLPLink(InProcessConnection(h)) for h in hosts]
    elif transport == "dial-in":
        old = stack.enter_context(local_grpc_links(hosts, tmp_path))
    else:
        dial = DialOut(hosts, tmp_path)
        stack.callback(dial.close)
        old = [PPLPLink(c) for c in dial.connections()]
    for link in old:  # hello and mask, then the coordinator disappears: no close
        link.hello(pb.HelloRequest(session_id="gone", protocol_version=2, n_rows=8))
        link.mask(pb.MaskRequest(session_id="gone", bounds_mode=pb.BOUNDS_MODE_MONOMIAL, k=20))
    start = time.monotonic()
    if transport == "dial-out":
        dial.restart(vanish=True)  # its server stops at once: the parties see their streams end
    else:
        for link in old:
            link.connection.shutdown()  # the streams end without a goodbye
    firsts = [sessions[0] for sessions in made.values()]
    while not all(s.closed.is_set() for s in firsts) and time.monotonic() - start < 10:
        time.sleep(0.02)
    assert time.monotonic() - start < 3, "a party still held the vanished coordinator's session"
    for s in firsts:
        assert s.close_reason.startswith("dropped") and s._mask is None
    if transport == "inprocess":
        new = [PPLPLink(InProcessConnection(h)) for h in hosts]
    elif transport == "dial-in":
        new = [GrpcPartyLink(link.party_id, link.address, tls=link.connection._channel_tls, deadline_s=30)
               for link in old]
        stack.callback(lambda: [link.shutdown() for link in new])
    else:
        new = [PPLPLink(c) for c in dial.connections()]
    outcome = run_secure_lp(public, new, SessionConfig(), central=lp)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.objective_rel_diff <= 1e-9
    assert [r.end_reason.split(":")[0] for r in hosts[0].history] == ["dropped", "done"]
