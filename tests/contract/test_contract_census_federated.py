"""The protocol ``census-federated`` over every transport: in-process, gRPC dial-in and gRPC dial-out
(threads of this process, port 0, mutual TLS with fresh session certificates, keys bound to them).

- the release is the single-process release of the same noisy values (the parties' noise drawn from
  the seeds of ``simulate_federated``): consistent, non-negative, integer, the total right;
- each party receives exactly its own regions' rows of the release and the public accounting;
- the coordinator's transcript (recorded at the link layer) holds no party's true row and no
  unmasked spanning vector, checked on the bytes it received; the same check catches a planted
  leak (a party that sends its true counts, one that sends its spanning vector unmasked).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.census_federated import run_census_federated
from securelp.coordinator.certs import load_identity
from securelp.coordinator.transcript import Direction, TranscriptRecorder, read_transcript, write_transcript
from securelp.coordinator.transport import InProcessConnection, ProtocolLink
from securelp.party import census_federated as cf
from securelp.party.aggregation import SigningIdentity
from securelp.party.runtime import HostedProtocol, PartyHost
from securelp.solvers.errors import ConfigError, InputError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.federated import party_values, release_groups, simulate_federated, split_by_level
from securelp.solvers.hierarchy.model import GroupSizeData, to_cumulative
from securelp.solvers.lp.partition import PublicRows
from securelp.solvers.randomness import SecureRandom
from tests.contract.test_contract_runtime import TRANSPORTS, connections_to

TAXI = Path(__file__).parent.parent / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"
EPS = Fraction(1, 2)


@pytest.fixture(scope="module")
def taxi() -> GroupSizeData:
    return read_counts_csv(TAXI, max_size=8, top_code=True)


class Parties:
    """One host per party region, each session's noise drawn as ``simulate_federated`` draws it."""

    def __init__(self, data: GroupSizeData, level: int, seed: str = "same",
                 session_type: type[cf.CensusFederatedSession] = cf.CensusFederatedSession) -> None:
        self.data, self.split = data, split_by_level(data.hierarchy, level)
        self.seed = seed
        self.counts = [cf.RegionalCounts.of_party(data, self.split, j) for j in range(len(self.split.parties))]
        self.ids = [f"r{data.hierarchy.ids[r]}".replace(" ", "") for r in self.split.parties]
        self.identities: dict[str, SigningIdentity] = {}
        self.sessions: dict[str, list[cf.CensusFederatedSession]] = {pid: [] for pid in self.ids}
        self.session_type = session_type
        self.hosts = [PartyHost(pid, [HostedProtocol(cf.CENSUS_FEDERATED, self._factory(j))])
                      for j, pid in enumerate(self.ids)]
        self._rngs: list[SecureRandom] = []

    def reseed(self) -> None:
        """The per-party sources of ``simulate_federated(..., SecureRandom(seed=self.seed, label="fed"))``."""
        root = SecureRandom(seed=self.seed, label="fed")
        self._rngs = [root.spawn(f"party{j}") for j in range(len(self.ids))]

    def _factory(self, j: int):  # type: ignore[no-untyped-def]
        def make(session_id: str) -> cf.CensusFederatedSession:
            pid = self.ids[j]
            s = self.session_type(pid, self.counts[j], rng=self._rngs[j], identity=self.identities.get(pid))
            self.sessions[pid].append(s)
            return s
        return make

    def bind(self, certs: Path) -> None:
        for pid in self.ids:
            ident = load_identity(certs, pid)
            self.identities[pid] = SigningIdentity(ident.private_key, ident.certificate, ident.ca_certificate)


def run_recorded(parties: Parties, connections, mechanism: str, level: int):  # type: ignore[no-untyped-def]
    recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0), name="census-federated"))
    links = [recorder.wrap(ProtocolLink(c, cf.CENSUS_FEDERATED, deadline_s=60)) for c in connections]
    outcome = run_census_federated(links[::-1], parties.data.hierarchy, parties.data.max_size, mechanism=mechanism,
                                   eps=EPS, party_level=level, total=parties.data.total)
    return outcome, recorder.transcript()


def spanning_vectors(parties: Parties, mechanism: str) -> list[np.ndarray]:
    """Each party's unmasked spanning vector, recomputed from its seeded noise source (the test knows
    the seed; the coordinator does not)."""
    data, split = parties.data, parties.split
    root = SecureRandom(seed=parties.seed, label="fed")
    out = []
    for j, rows in enumerate(release_groups(data, split)):
        v = party_values(mechanism, EPS, split, data.hierarchy.depth, j, rows, root.spawn(f"party{j}"))
        out.append(np.concatenate([v.spanning.reshape(-1), [int(rows[0].sum())]]).astype(np.int64))
    return out


def leaks(transcript, parties: Parties, mechanism: str) -> list[str]:  # type: ignore[no-untyped-def]
    """What the coordinator received that it must not have: any party's true row (counts, or the
    values the mechanism noises) as bytes inside any received payload, or any party's unmasked
    spanning vector (or a noisy row equal to a true one)."""
    received = [r for r in transcript.records if r.direction is Direction.FROM_PARTY]
    blobs = [r.payload for r in received]
    found = []
    for pid, rc in zip(parties.ids, parties.counts):
        base = to_cumulative(rc.counts) if mechanism in mech.CUMULATIVE else rc.counts
        for name, rows in (("count", rc.counts), ("value", base)):
            for k, row in enumerate(np.asarray(rows)):
                if not row.any():
                    continue
                needle = cf.encode_int64(row[None, :])
                if any(needle in blob for blob in blobs):
                    found.append(f"{pid}: true {name} row of {rc.region_ids[k]}")
    vectors = spanning_vectors(parties, mechanism)
    for r in received:
        if r.message_type != "securelp.census.v1.CensusMeasurement":
            continue
        msg = r.message()
        j = parties.ids.index(r.party_id)
        got = np.frombuffer(msg.masked, dtype="<i8")
        if got.size == vectors[j].size and np.array_equal(got, vectors[j]):
            found.append(f"{r.party_id}: unmasked spanning vector")
        if np.count_nonzero(got[:-1] == vectors[j][:-1]) > max(3, got.size // 100):
            found.append(f"{r.party_id}: spanning vector entries in the clear")
    return found


def check_release(outcome, parties: Parties, mechanism: str, level: int) -> None:  # type: ignore[no-untyped-def]
    data = parties.data
    noisy, single = simulate_federated(data, parties.split, mechanism, EPS, SecureRandom(seed=parties.seed, label="fed"))
    np.testing.assert_array_equal(outcome.noisy, noisy)
    np.testing.assert_array_equal(outcome.release.counts, single.counts)
    central = mech.postprocess(mechanism, data.hierarchy, outcome.noisy, data.total)  # the same noisy values
    np.testing.assert_array_equal(outcome.release.counts, central.counts)
    metrics = mech.release_metrics(data.hierarchy, outcome.release.counts, data.total)
    assert metrics["constraint_violations"] == 0 and metrics["negative_counts"] == 0
    assert metrics["non_integer_counts"] == 0 and metrics["total_matches"]
    assert outcome.total == data.total
    for j, pid in enumerate(parties.ids):
        (s,) = parties.sessions[pid][-1:]
        assert s.close_reason == "done"
        np.testing.assert_array_equal(s.released, outcome.release.counts[parties.split.owned(j)])
        assert s.accounting["eps_total_exact"] == "1/2" and s.accounting["party_level"] == level
        assert s.total == data.total


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_federated_release_runs_over_every_transport_and_leaks_no_true_count(transport, taxi, tmp_path):
    level, mechanism = 2, "hdp"
    parties = Parties(taxi, level)
    parties.reseed()
    with connections_to(transport, parties.hosts, tmp_path) as session_connections:
        connections = session_connections()
        if transport != "inprocess":  # the gRPC parties bind their keys to their certificates
            parties.bind(tmp_path / "certs")
        outcome, transcript = run_recorded(parties, connections, mechanism, level)
    check_release(outcome, parties, mechanism, level)
    assert leaks(transcript, parties, mechanism) == []
    bound = [s.identity is not None for ss in parties.sessions.values() for s in ss]
    assert all(bound) == (transport != "inprocess")
    assert all(b > 0 for b in outcome.bytes_sent) and all(b > 0 for b in outcome.bytes_received)
    path = tmp_path / "census.transcript"  # the file round-trips the census messages
    write_transcript(transcript, path)
    again = read_transcript(path)
    assert [r.payload for r in again.records] == [r.payload for r in transcript.records]


@pytest.mark.parametrize(("mechanism", "level"), [("chain", 3), ("topdown", 3), ("cdp", 2)])
def test_every_party_level_and_mechanism_gives_the_single_process_release(mechanism, level, taxi):
    parties = Parties(taxi, level)
    parties.reseed()
    outcome, transcript = run_recorded(parties, [InProcessConnection(h) for h in parties.hosts], mechanism, level)
    check_release(outcome, parties, mechanism, level)
    assert leaks(transcript, parties, mechanism) == []
    # the spanning regions' values carry one exact two-sided geometric draw: not the truth
    base = to_cumulative(taxi.counts) if mechanism in mech.CUMULATIVE else taxi.counts
    spanning = list(parties.split.spanning)
    assert np.count_nonzero(outcome.noisy[spanning] != base[spanning]) > base[spanning].size // 2


class SendsTrueCounts(cf.CensusFederatedSession):
    """A planted leak: the party's own rows go out without noise."""

    def measure(self, request):  # type: ignore[no-untyped-def]
        reply = super().measure(request)
        reply.own = cf.encode_int64(self.data.counts)
        return reply


@pytest.mark.parametrize("leak", ["true counts", "unmasked"])
def test_the_transcript_check_catches_a_planted_leak(leak, taxi, monkeypatch):
    """Negative controls: the same check, on a run where the parties leak, must report it."""
    level, mechanism = 2, "hdp"
    if leak == "unmasked":  # the pairwise masks switched off: the vectors go out in the clear
        monkeypatch.setattr(cf.agg, "mask_shares", lambda flat, pairs: flat)
    parties = Parties(taxi, level, session_type=SendsTrueCounts if leak == "true counts" else cf.CensusFederatedSession)
    parties.reseed()
    outcome, transcript = run_recorded(parties, [InProcessConnection(h) for h in parties.hosts], mechanism, level)
    found = leaks(transcript, parties, mechanism)
    if leak == "unmasked":
        assert {f for f in found if f.endswith(": unmasked spanning vector")} == {
            f"{pid}: unmasked spanning vector" for pid in parties.ids}
        check_release(outcome, parties, mechanism, level)  # the leak does not show in the release
    else:
        assert {f.split(":")[0] for f in found if ": true count row" in f} == set(parties.ids)


def test_parties_that_do_not_fit_the_public_hierarchy_are_refused(taxi):
    parties = Parties(taxi, 2)
    parties.reseed()
    links = [ProtocolLink(InProcessConnection(h), cf.CENSUS_FEDERATED) for h in parties.hosts]
    twin = PartyHost("twin", [HostedProtocol(cf.CENSUS_FEDERATED, lambda sid: cf.CensusFederatedSession(
        "twin", parties.counts[1]))])
    with pytest.raises(InputError, match=f"party twin and party {parties.ids[1]} both hold region 'upper'"):
        run_census_federated(links[1:] + [ProtocolLink(InProcessConnection(twin), cf.CENSUS_FEDERATED)],
                             taxi.hierarchy, taxi.max_size, mechanism="hdp", eps=EPS)
    parties.reseed()
    with pytest.raises(ConfigError, match="two or more parties"):
        run_census_federated(links[:1], taxi.hierarchy, taxi.max_size, mechanism="hdp", eps=EPS)
    parties.reseed()
    with pytest.raises(InputError, match="the public total is 7"):
        run_census_federated(links, taxi.hierarchy, taxi.max_size, mechanism="hdp", eps=EPS, total=7)
    assert all(s.close_reason.startswith("aborted") for ss in parties.sessions.values() for s in ss[-1:])


@pytest.mark.slow
def test_the_census_scale_synthetic_with_51_state_parties_in_process():
    """The bundled synthetic nation/state/county instance, one party per state (51), in-process."""
    from securelp.solvers.hierarchy.synthetic import census_synthetic

    data = census_synthetic(max_size=100, seed=0)
    parties = Parties(data, 2, seed="census")
    assert len(parties.ids) == 51
    parties.reseed()
    outcome, transcript = run_recorded(parties, [InProcessConnection(h) for h in parties.hosts], "hdp", 2)
    check_release(outcome, parties, "hdp", 2)
    assert leaks(transcript, parties, "hdp") == []
