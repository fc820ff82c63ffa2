"""The protocol ``ldp-collect`` over every transport: in-process, gRPC dial-in and gRPC dial-out.

The collector gets every client's reports (as many as it announced users), its histogram and
estimate; what it received (recorded at the link layer) is reports only: the share of reports equal
to their user's true value is the mechanism's diagonal mass, far from 1, and the same check catches
a planted leak (a client that sends its users' true values)."""

from __future__ import annotations

import numpy as np
import pytest

from securelp.coordinator.ldp_collect import run_ldp_collect
from securelp.coordinator.transcript import Direction, TranscriptRecorder
from securelp.coordinator.transport import ProtocolLink
from securelp.party import ldp_collect as lc
from securelp.party.runtime import HostedProtocol, PartyHost
from securelp.solvers.lp.partition import PublicRows
from securelp.solvers.randomness import SecureRandom
from tests.contract.test_contract_runtime import TRANSPORTS, connections_to

SPEC = lc.MechanismSpec("le", 1.0, 4, 4, 1.0)


class SendsTrueValues(lc.LdpCollectSession):
    """A planted leak: the users' values go out unperturbed."""

    def collect(self, request):  # type: ignore[no-untyped-def]
        start = self._next
        reply = super().collect(request)
        reply.reports = lc.pack_reports(self.values[start:self._next], reply.width)
        return reply


def clients(values, session_type=lc.LdpCollectSession, seed="c"):  # type: ignore[no-untyped-def]
    cache = lc.MechanismCache()
    made: dict[str, list] = {}

    def factory(k):  # type: ignore[no-untyped-def]
        def make(session_id):  # type: ignore[no-untyped-def]
            s = session_type(f"c{k}", values[k], rng=SecureRandom(seed, label=f"c{k}/{session_id}"), mechanisms=cache)
            made.setdefault(f"c{k}", []).append(s)
            return s
        return make

    return [PartyHost(f"c{k}", [HostedProtocol(lc.LDP_COLLECT, factory(k))]) for k in range(len(values))], made, cache


def received_reports(transcript) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    out: dict[str, list] = {}
    for rec in transcript.records:
        if rec.direction is Direction.FROM_PARTY and rec.message_type == "securelp.ldp.v1.LdpReports":
            msg = rec.message()
            out.setdefault(rec.party_id, []).append(lc.unpack_reports(msg.reports, msg.width, SPEC.m, "t"))
    return {pid: np.concatenate(chunks) for pid, chunks in out.items()}


def diagonal_mass(mechanism, values: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    """P(report = true value) for these users."""
    diag = np.array([mechanism.row(j)[j] / mechanism.row(j).sum() for j in range(mechanism.m)])
    return float(diag[values].mean())


def matches_truth(transcript, values) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Per client, the share of received reports that equal their user's true value."""
    got = received_reports(transcript)
    return {f"c{k}": float(np.mean(got[f"c{k}"] == v)) for k, v in enumerate(values)}


def collect(transport, hosts, tmp_path, cache, chunk=700):  # type: ignore[no-untyped-def]
    recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0)))
    with connections_to(transport, hosts, tmp_path) as session_connections:
        links = [recorder.wrap(ProtocolLink(c, lc.LDP_COLLECT, deadline_s=60)) for c in session_connections()]
        mechanism, _ = cache.get(SPEC)
        outcome = run_ldp_collect(links, SPEC, mechanism, chunk=chunk)
    return outcome, recorder.transcript(), mechanism


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_collector_gets_reports_only_over_every_transport(transport, tmp_path):
    rng = np.random.default_rng(5)
    values = [rng.integers(0, SPEC.m, n) for n in (3000, 2000, 1)]
    hosts, made, cache = clients(values)
    outcome, transcript, mechanism = collect(transport, hosts, tmp_path, cache)
    assert outcome.users == (3000, 2000, 1) and outcome.total_users == 5001
    assert int(outcome.histogram.sum()) == 5001 and abs(outcome.estimate.sum() - 1) < 1e-9
    assert outcome.chunks == 5 + 3 + 1  # 700 reports a call
    got = received_reports(transcript)
    assert {pid: r.size for pid, r in got.items()} == {"c0": 3000, "c1": 2000, "c2": 1}
    assert np.array_equal(np.bincount(np.concatenate(list(got.values())), minlength=SPEC.m), outcome.histogram)
    types = {r.message_type for r in transcript.records if r.direction is Direction.FROM_PARTY}
    assert types == {"securelp.ldp.v1.LdpHelloReply", "securelp.ldp.v1.LdpReports", "securelp.ldp.v1.LdpCloseReply"}
    expected = diagonal_mass(mechanism, np.concatenate(values[:2]))
    share = matches_truth(transcript, values)
    for pid in ("c0", "c1"):
        n = got[pid].size
        assert abs(share[pid] - expected) < 5 * np.sqrt(expected * (1 - expected) / n)
        assert share[pid] < 0.5
    assert all(s.close_reason == "done" for ss in made.values() for s in ss)
    assert all(b > 0 for b in outcome.bytes_sent)


def test_a_client_that_sends_true_values_is_caught(tmp_path):
    """Negative control: the same check on a client that leaks its users' values."""
    rng = np.random.default_rng(6)
    values = [rng.integers(0, SPEC.m, 2000) for _ in range(2)]
    hosts, _, cache = clients(values, session_type=SendsTrueValues)
    _, transcript, mechanism = collect("inprocess", hosts, tmp_path, cache)
    share = matches_truth(transcript, values)
    assert share == {"c0": 1.0, "c1": 1.0}
    assert diagonal_mass(mechanism, np.concatenate(values)) < 0.5
