"""The same PPLP tests over every transport: in-process links, and real gRPC in both connection
directions -- dial-in (party servers in threads of this process, port 0) and dial-out (a listening
coordinator on port 0 and parties in threads that dial it) -- with mutual TLS and fresh session
certificates.

Contract: the transport and the direction change nothing the protocol computes -- the secure
optimum equals the central one, statuses reach every party, errors name the party, and (with the
same seeds) every transport carries exactly the same payload bytes; with plain and with secure
aggregation of the dense products; a party refuses what its policy does not allow, whoever asks
and however.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from securelp.coordinator.grpc_link import GrpcPartyLink, local_grpc_links
from securelp.coordinator.listener import local_dialout_links
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.simulation import owners_consent
from securelp.coordinator.transport import InProcessLink
from securelp.party.policy import PartyPolicy
from securelp.party.session import PROTOCOL_VERSION, PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import ConfigError, ProtocolError, ResourceError, SecureLPError, TransportError
from securelp.solvers.lp import HighsBackend, LinearProgram, SolveStatus, read_mps
from securelp.solvers.lp.partition import ColumnBlock, parse_split, split_columns
from tests.lp_fixtures import INFEASIBLE_MPS, UNBOUNDED_MPS, random_feasible_lp

TRANSPORTS = ["inprocess", "dial-in", "dial-out"]
GRPC = ["dial-in", "dial-out"]
#: the transport a session reports for each
REPORTED = {"inprocess": "inprocess", "dial-in": "grpc", "dial-out": "grpc"}


@contextlib.contextmanager
def links_for(transport, sessions, tmp_path, deadline_s=60.0, bind_keys=True, keepalive_s=10.0):
    if transport == "inprocess":
        yield [InProcessLink(s) for s in sessions]
    elif transport == "dial-in":
        with local_grpc_links(sessions, tmp_path, deadline_s=deadline_s, bind_keys=bind_keys,
                              keepalive_s=keepalive_s) as links:
            assert all(isinstance(link, GrpcPartyLink) and link.direction == "dial-in" for link in links)
            yield links
    else:
        with local_dialout_links(sessions, tmp_path, deadline_s=deadline_s, bind_keys=bind_keys,
                                 keepalive_s=keepalive_s) as links:
            assert all(link.transport == "grpc" and link.direction == "dial-out" for link in links)
            yield links


def run(transport, lp, tmp_path, parties=3, seed=None, ids=None, bind_keys=True, **cfg):
    """A session whose owners agree to what it asks (x_j revealed unless ``reveal=False``)."""
    public, blocks = split_columns(lp, parse_split(None, lp.n_cols, parties), ids=ids)
    config = SessionConfig(**{"reveal": True, **cfg})
    sessions = [PartySession(b, seed=None if seed is None else f"{seed}/{b.party_id}", policy=owners_consent(config))
                for b in blocks]
    with links_for(transport, sessions, tmp_path, bind_keys=bind_keys) as links:
        outcome = run_secure_lp(public, links, config, central=lp)
    return outcome, sessions


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ["monomial", "rows"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("secure", [False, True], ids=["plain", "secagg"])
def test_random_feasible_lp_matches_central(transport, mode, seed, secure, tmp_path):
    lp = random_feasible_lp(np.random.default_rng(seed), 12, 20)
    outcome, sessions = run(transport, lp, tmp_path, bounds_mode=mode, secure_aggregation=secure)
    assert outcome.transport == REPORTED[transport]
    assert (outcome.aggregation is not None) == secure
    if secure:  # every party has free columns here: all of them aggregate, and only shares arrive
        assert outcome.aggregation.participants == ("party1", "party2", "party3")
        assert outcome.aggregation.keys_bound == (transport != "inprocess")  # the gRPC parties hold certificates
        assert all(e.masked_a.shape[1] == 0 and e.share_a is not None for e in outcome.transcript)
    assert outcome.status is SolveStatus.OPTIMAL
    assert outcome.objective_rel_diff is not None and outcome.objective_rel_diff <= 1e-8
    assert outcome.feasibility_violation is not None and outcome.feasibility_violation <= 1e-6
    for s in sessions:  # every party learned the optimal value and holds its own x_j
        assert s.outcome.status == pb.SOLVE_STATUS_OPTIMAL
        assert s.outcome.objective == pytest.approx(outcome.objective, rel=1e-12)
        assert s.closed.is_set()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_payload_over_one_chunk_is_exact(transport, tmp_path):
    # 150 x 1000 free columns: each masked block is 150 x 1000 doubles (1.2 MB > one 1 MiB chunk)
    rng = np.random.default_rng(5)
    m, n = 150, 1000
    A = rng.uniform(-50, 50, (m, n))
    x_star = rng.uniform(-5, 5, n)
    active = rng.random(m) < 0.5
    y = np.where(active, rng.uniform(0, 10, m), 0.0)
    b = A @ x_star - np.where(active, 0.0, rng.uniform(0, 1, m))
    lp = LinearProgram(c=A.T @ y, A=A, row_lower=b, row_upper=np.full(m, np.inf),
                       col_lower=np.full(n, -np.inf), col_upper=np.full(n, np.inf))
    outcome, _ = run(transport, lp, tmp_path, parties=1)
    assert outcome.parties[0].bytes_sent > (1 << 20)
    assert outcome.objective_rel_diff <= 1e-9


@pytest.mark.parametrize("secure", [False, True], ids=["plain", "secagg"])
def test_every_transport_carries_the_same_bytes(tmp_path, secure):
    lp = random_feasible_lp(np.random.default_rng(3), 10, 15)
    # keys unbound everywhere: a certificate and an ECDSA signature (of varying length) would differ
    outcomes = []
    for transport in TRANSPORTS:
        (tmp_path / transport).mkdir()
        outcomes.append(run(transport, lp, tmp_path / transport, seed="s", secure_aggregation=secure, bind_keys=False,
                            session_id="s1")[0])
    a = outcomes[0]
    for b in outcomes[1:]:
        assert [(p.bytes_sent, p.bytes_received) for p in a.parties] == \
            [(p.bytes_sent, p.bytes_received) for p in b.parties]
        assert all(p.bytes_sent > 0 and p.bytes_received > 0 for p in b.parties)
        assert a.objective == pytest.approx(b.objective, rel=1e-12)
        if secure:  # the same seeds draw the same keys and masks: the very same shares on every transport
            assert all(np.array_equal(x.share_a, y.share_a) for x, y in zip(a.transcript, b.transcript))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("text, status, pbstatus", [
    (INFEASIBLE_MPS, SolveStatus.INFEASIBLE, pb.SOLVE_STATUS_INFEASIBLE),
    (UNBOUNDED_MPS, SolveStatus.UNBOUNDED, pb.SOLVE_STATUS_UNBOUNDED)])
def test_status_reaches_every_party(transport, text, status, pbstatus, tmp_path):
    f = tmp_path / "lp.mps"
    f.write_text(text)
    outcome, sessions = run(transport, read_mps(f), tmp_path, parties=2)
    assert outcome.status is status
    assert [s.outcome.status for s in sessions] == [pbstatus, pbstatus]
    assert all(s.outcome.x is None and s.closed.is_set() for s in sessions)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_row_count_mismatch_names_the_party_and_closes_everyone(transport, tmp_path):
    lp = random_feasible_lp(np.random.default_rng(2), 6, 6)
    public, blocks = split_columns(lp, [3, 3], ids=["alpha", "beta"])
    bad = ColumnBlock("beta", blocks[1].A[:5, :], blocks[1].c, blocks[1].col_lower, blocks[1].col_upper)
    sessions = [PartySession(blocks[0]), PartySession(bad)]
    with links_for(transport, sessions, tmp_path) as links, pytest.raises(ProtocolError, match="beta"):
        run_secure_lp(public, links, SessionConfig())
    assert all(s.closed.is_set() for s in sessions)  # the abort reached both parties


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_k_smaller_than_n_is_refused(transport, tmp_path):
    lp = random_feasible_lp(np.random.default_rng(4), 5, 8, free_fraction=1.0)
    with pytest.raises(ConfigError, match="k = 3"):
        run(transport, lp, tmp_path, parties=2, k=3)


def test_a_party_s_refusal_reads_the_same_over_both_transports(tmp_path, monkeypatch):
    """A k whose masked block would not fit in the party's memory is refused by the party (the
    coordinator's own checks pass); the coordinator's message names the call and the party once,
    whatever the transport (gRPC's said "mask: mask: ...")."""
    from securelp.party import session as party_session

    monkeypatch.setattr(party_session, "available_memory", lambda: 1 << 20)  # the parties' machine: 1 MiB left
    lp = random_feasible_lp(np.random.default_rng(4), 5, 8, free_fraction=1.0)
    texts = []
    for transport in TRANSPORTS:
        (tmp_path / transport).mkdir()
        with pytest.raises(ResourceError) as info:
            run(transport, lp, tmp_path / transport, parties=2, k=10**5)
        texts.append(str(info.value))
    assert texts[0] == texts[1] == texts[2]
    assert texts[0].startswith("mask: party party1: its masked block with k = 100000 would need about")


class _Unserializable:
    """A reply whose bytes cannot be allocated (protobuf raises MemoryError there)."""

    def SerializeToString(self) -> bytes:
        raise MemoryError


@pytest.mark.parametrize("transport", GRPC)
@pytest.mark.parametrize("where", ["products", "serialization"])
def test_a_party_out_of_memory_is_a_resource_error_over_grpc(tmp_path, monkeypatch, where, transport):
    """A MemoryError the party's estimate missed reaches the coordinator as RESOURCE_EXHAUSTED
    (exit 12), not as an internal error (exit 1): in the products, and while the masked block is
    serialized (outside the party's guard that one would reach the coordinator as gRPC's
    "Exception iterating responses", exit 1)."""
    def no_memory(self, request):  # type: ignore[no-untyped-def]
        if where == "products":
            raise MemoryError("Unable to allocate 3.0 GiB")
        return _Unserializable()

    monkeypatch.setattr(PartySession, "mask", no_memory)
    lp = random_feasible_lp(np.random.default_rng(4), 5, 8, free_fraction=1.0)
    with pytest.raises(ResourceError, match=r"^mask: party party1: ran out of memory during this call$"):
        run(transport, lp, tmp_path, parties=2)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_party_refuses_a_second_hello(transport, tmp_path):
    lp = random_feasible_lp(np.random.default_rng(6), 4, 4)
    _, blocks = split_columns(lp, [4], ids=["solo"])
    session = PartySession(blocks[0])
    with links_for(transport, [session], tmp_path) as (link,):
        hello = pb.HelloRequest(session_id="s1", protocol_version=1, n_rows=4)
        assert link.hello(hello).n_cols == 4
        with pytest.raises(ProtocolError, match="solo.*second hello"):
            link.hello(hello)


@pytest.mark.parametrize("transport", GRPC)
def test_grpc_deadline_names_the_party(tmp_path, transport):
    import threading
    import time

    from securelp.solvers.errors import TransportError

    lp = random_feasible_lp(np.random.default_rng(7), 4, 4)
    _, blocks = split_columns(lp, [4], ids=["slowpoke"])
    session = PartySession(blocks[0])
    gate = threading.Event()
    original = session.hello

    def stuck(request):
        gate.wait(10)
        return original(request)

    session.hello = stuck  # type: ignore[method-assign]
    with links_for(transport, [session], tmp_path, deadline_s=1.0) as (link,):
        start = time.monotonic()
        with pytest.raises(TransportError, match="party slowpoke at 127.0.0.1:[0-9]+ did not answer hello within 1 s"):
            link.hello(pb.HelloRequest(session_id="s", protocol_version=1, n_rows=4))
        assert time.monotonic() - start < 5
        assert link.timed_out  # its close gets 1 s
        gate.set()


def test_central_solver_agrees_on_the_fixture():  # guards the fixture the contract rests on
    lp = random_feasible_lp(np.random.default_rng(0), 12, 20)
    assert HighsBackend().solve(lp).status is SolveStatus.OPTIMAL


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_default_party_refuses_rows_mode_asked_directly(transport, tmp_path):
    """Asked for BOUNDS_MODE_ROWS by a caller that skips the coordinator's own checks (a link's raw calls,
    over any transport and direction), a party with the default policy refuses and ends its session; no
    bound rows leave it, and the refusal arrives as the party's own typed error."""
    lp = random_feasible_lp(np.random.default_rng(10), 6, 6, free_fraction=0.0)
    _, blocks = split_columns(lp, [6], ids=["owner"])
    session = PartySession(blocks[0])
    hello = pb.HelloRequest(session_id="s", protocol_version=PROTOCOL_VERSION, n_rows=6)
    request = pb.MaskRequest(session_id="s", bounds_mode=pb.BOUNDS_MODE_ROWS, k=16)
    with links_for(transport, [session], tmp_path) as (link,):
        assert PartyPolicy.from_pb(link.hello(hello).policy) == PartyPolicy()
        with pytest.raises(ProtocolError, match=r"party owner refused MaskRequest \(bounds mode rows\)") as info:
            link.mask(request)
        assert type(info.value) is ProtocolError
    assert session.closed.is_set() and session.close_reason == "refused: MaskRequest (bounds mode rows)"
    assert session._mask is None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_party_lost_after_the_key_agreement_is_named(transport, tmp_path):
    """Secure aggregation needs every share: a party that fails its Mask call ends the session, the
    error names it, every party is told the session was aborted."""
    lp = random_feasible_lp(np.random.default_rng(11), 8, 12, free_fraction=1.0)
    public, blocks = split_columns(lp, [4, 4, 4], ids=["a1", "a2", "a3"])
    sessions = [PartySession(b) for b in blocks]

    def lost(request):  # type: ignore[no-untyped-def]
        raise TransportError("party a2: connection lost")

    sessions[1].mask = lost  # type: ignore[method-assign]
    with links_for(transport, sessions, tmp_path) as links, pytest.raises(SecureLPError, match=r"^mask: .*a2"):
        run_secure_lp(public, links, SessionConfig(secure_aggregation=True))
    assert all(s.closed.is_set() and s.close_reason.startswith("aborted") for s in sessions)
