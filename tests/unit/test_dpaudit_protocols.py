"""The privacy audit of whole protocols: correct protocols are not flagged, planted leaks are.

Each planted leak (the true count in a message, noise at half the claimed scale, the truth in a
report field) is a negative control: a run of the protocol that violates its claim, which the
audit must flag (eps lower bound above the claimed eps at 95 % confidence).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.coordinator.dpaudit import CONSISTENT, NO_CLAIM, VIOLATES, audit_protocol
from securelp.coordinator.dpaudit.census import CensusFederatedViews, small_census
from securelp.coordinator.dpaudit.ldp import LdpCollectionViews
from securelp.coordinator.dpaudit.lp import LpSessionViews
from securelp.solvers.hierarchy.model import to_cumulative
from securelp.solvers.randomness import SecureRandom

# --------------------------------------------------------------------------- census


def test_census_correct_release_is_consistent_with_its_claim() -> None:
    # cdp: cumulative counts, so one person more moves one value per level (3 coordinates)
    src = CensusFederatedViews(1, mechanism="cdp")
    view = src.views(0, 1, SecureRandom("keys", label="t"))[0]
    # the coordinator's whole view: both parties' messages, the aggregate, the release and its report
    assert {"party0.own", "party1.own", "aggregate", "release", "report.objective"} <= set(view)
    audit = audit_protocol(src, 300, seed="census-ok")
    assert audit.verdict == CONSISTENT and audit.eps_lb <= 1.0


@pytest.mark.parametrize("plant, runs, release", [("count-in-message", 200, False), ("report-field", 200, True),
                                                   ("half-noise", 2000, False)])
def test_census_planted_leaks_violate_the_claim(plant: str, runs: int, release: bool) -> None:
    audit = audit_protocol(CensusFederatedViews(1, mechanism="cdp", plant=plant, release=release), runs,
                           seed=f"census-{plant}")
    assert audit.verdict == VIOLATES, audit.summary()
    assert audit.eps_lb > 1.0


def test_census_batched_runs_carry_exactly_one_runs_values() -> None:
    # each batched run's noisy values are the truth plus centred noise: a wrong offset of the
    # cumulative sums across the batch's blocks would shift them by whole group totals
    src = CensusFederatedViews(1, mechanism="cdp", release=False)
    data, _, _ = small_census()
    views = src.views(0, 300, SecureRandom("batch", label="t"))
    own = np.array([v["party0.own"] for v in views], dtype=float)
    truth = to_cumulative(np.asarray(data.counts))[src.split.owned(0)]
    err = own.mean(axis=0) - truth
    sd = np.sqrt(2) * src.describe()["noise_scale"] / np.sqrt(len(views))
    assert np.all(np.abs(err) < 5 * sd)
    agg = np.array([v["aggregate"] for v in views], dtype=float).mean(axis=0)
    assert np.all(np.abs(agg - to_cumulative(np.asarray(data.counts))[list(src.split.spanning)]) < 5 * sd)


@pytest.mark.parametrize("mechanism", ["hdp", "cdp"])
def test_census_view_is_what_the_protocol_puts_on_the_wire(mechanism: str) -> None:
    """Under one seed, a run's view is bit for bit what a real census-federated session's coordinator
    receives: each party's own rows as its measurement message carries them, the spanning sum the
    masked vectors add up to (mod 2^64, with G after it), and the release it publishes."""
    from fractions import Fraction

    from securelp.coordinator.census_federated import simulate_release
    from securelp.coordinator.transcript import Direction
    from securelp.party.census_federated import decode_int64

    src = CensusFederatedViews(1, mechanism=mechanism)
    data = src.inputs[0]
    view = src.views(0, 1, SecureRandom(7, label="census/federated"))[0]
    sim = simulate_release(data, party_level=2, mechanism=mechanism, eps=Fraction(1), seed=7)
    measured = [r for r in sim.transcript.records
                if r.direction is Direction.FROM_PARTY and r.message_type.endswith(".CensusMeasurement")]
    assert len(measured) == len(src.split.parties) == 2
    masked_sum = np.zeros(view["aggregate"].size + 1, dtype=np.uint64)
    for record in measured:
        message = record.message()
        j = sim.outcome.parties.index(record.party_id)
        own = view[f"party{j}.own"]
        np.testing.assert_array_equal(decode_int64(message.own, own.shape, "own rows"), own)
        masked_sum += np.frombuffer(message.masked, dtype="<u8")
    summed = masked_sum.view(np.int64)
    np.testing.assert_array_equal(summed[:-1].reshape(view["aggregate"].shape), view["aggregate"])
    assert summed[-1] == data.total
    np.testing.assert_array_equal(view["release"], sim.outcome.release.counts)


# --------------------------------------------------------------------------- ldp


@pytest.mark.parametrize("mechanism", ["le", "grr", "em"])
def test_ldp_view_is_what_the_collection_puts_on_the_wire(mechanism: str) -> None:
    """Under one seed, a run's view is bit for bit what a real ldp-collect session's collector receives
    from a client holding the run's users (its reports message) and publishes (the estimate)."""
    from securelp.coordinator.ldp_collect import simulate_collection
    from securelp.coordinator.transcript import Direction
    from securelp.party.ldp_collect import MechanismSpec, report_width, unpack_reports

    src = LdpCollectionViews(1.0, mechanism=mechanism, users=40)
    values = src.inputs[0]
    view = src.views(0, 1, SecureRandom(5, label="ldp/collect").spawn("client0"))[0]
    sim = simulate_collection([values], MechanismSpec(mechanism, 1.0, 3, 3), seed=5, chunk=values.size)
    sent = [r.message() for r in sim.transcript.records
            if r.direction is Direction.FROM_PARTY and r.message_type.endswith(".LdpReports")]
    assert len(sent) == 1
    m = src.domain.m
    reports = unpack_reports(sent[0].reports, report_width(m), m, "reports")
    np.testing.assert_array_equal(reports, [view[f"report[{u}]"] for u in range(values.size)])
    np.testing.assert_allclose(sim.outcome.estimate, view["estimate"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("mechanism", ["le", "grr", "oue"])
def test_ldp_correct_collections_are_consistent(mechanism: str) -> None:
    audit = audit_protocol(LdpCollectionViews(1.0, mechanism=mechanism), 1000, seed=f"ldp-ok-{mechanism}")
    assert audit.verdict == CONSISTENT, audit.summary()


@pytest.mark.parametrize("mechanism", ["le", "grr", "oue"])
def test_ldp_half_noise_violates_the_claim(mechanism: str) -> None:
    audit = audit_protocol(LdpCollectionViews(1.0, mechanism=mechanism, plant="half-noise"), 2000,
                           seed=f"ldp-half-{mechanism}")
    assert audit.verdict == VIOLATES, audit.summary()


@pytest.mark.parametrize("plant", ["count-in-message", "report-field"])
def test_ldp_truth_in_a_message_or_report_violates_the_claim(plant: str) -> None:
    audit = audit_protocol(LdpCollectionViews(1.0, plant=plant), 200, seed=f"ldp-{plant}")
    assert audit.verdict == VIOLATES and audit.eps_lb > 3.0


def test_ldp_fresh_randomness_correct_collection_not_flagged() -> None:
    # no seed: a seed cannot hide a bug (PRIVACY_TESTING.md item 6)
    audit = audit_protocol(LdpCollectionViews(1.0, mechanism="grr"), 1000, confidence=0.999)
    assert not audit.reproducible and audit.verdict == CONSISTENT


def test_ldp_claim_of_a_d_private_mechanism_scales_with_the_distance() -> None:
    far = LdpCollectionViews(1.0, mechanism="em", x0=0, x1=8)  # opposite corners of the 3 x 3 grid
    assert far.claimed_eps == pytest.approx(np.hypot(2, 2))
    assert LdpCollectionViews(1.0, mechanism="grr", x0=0, x1=8).claimed_eps == 1.0


# --------------------------------------------------------------------------- lp


def test_lp_has_no_claim_and_its_objective_tells_the_inputs_apart() -> None:
    audit = audit_protocol(LpSessionViews(), 60, seed="lp")
    assert audit.verdict == NO_CLAIM and not audit.violated
    # one changed cost moves the optimum every party is told: the measured distinguishability is the
    # most 30 held-out runs can show
    assert audit.result.event.features[0].endswith("SolutionNotice#0.objective")
    assert audit.eps_lb == pytest.approx(audit.result.max_detectable_eps)


def test_lp_transcript_files_are_views_like_the_in_process_sessions(tmp_path) -> None:
    from securelp.coordinator.dpaudit import TranscriptViews
    from securelp.coordinator.protocol import run_secure_lp
    from securelp.coordinator.simulation import links_to, owners_consent
    from securelp.coordinator.transcript import run_recorded
    from securelp.party.session import PartySession

    src = LpSessionViews()
    files: dict[int, list[str]] = {0: [], 1: []}
    for side in (0, 1):
        public, blocks = src.splits[side]
        for i in range(24):
            path = str(tmp_path / f"d{side}-{i}.transcript")
            sessions = [PartySession(b, policy=owners_consent(src.config)) for b in blocks]
            with links_to(sessions, "inprocess") as links:
                run_recorded(public, links, src.config, path=path, run=run_secure_lp)
            files[side].append(path)
    audit = audit_protocol(TranscriptViews(files[0], files[1]), 24)
    assert audit.verdict == NO_CLAIM
    assert audit.result.event.features[0].endswith("SolutionNotice#0.objective")
    assert audit.result.hits in ((12, 0), (0, 12))  # the held-out runs fall apart by input


# --------------------------------------------------------------------------- command


def test_cli_flags_a_planted_leak_with_exit_9_and_a_json_report(tmp_path, capsys) -> None:
    report = tmp_path / "r.json"
    code = main(["audit", "--protocol", "ldp", "--runs", "200", "--plant", "report-field", "--seed", "7",
                 "--json", str(report)])
    assert code == 9
    out = capsys.readouterr().out
    assert "VIOLATES its claim" in out and "TEST ONLY" in out
    r = json.loads(report.read_text())
    assert r["kind"] == "dpaudit" and r["verdict"] == VIOLATES and r["claimed_eps"] == 1.0
    assert r["eps_lower_bound"] > 1.0 and r["confidence"] == 0.95 and r["runs_per_input"] == 200
    assert "collector.users_with_x0" in r["event"]["features"]


def test_cli_correct_protocol_exits_0_and_views_round_trip(tmp_path, capsys) -> None:
    views = tmp_path / "v.jsonl"
    assert main(["audit", "--protocol", "ldp", "--runs", "200", "--seed", "7", "--save-views", str(views)]) == 0
    first = capsys.readouterr().out
    assert "consistent" in first
    assert main(["audit", "--views", str(views), "--runs", "200"]) == 0
    again = capsys.readouterr().out
    assert first.split("eps >= ")[1][:5] == again.split("eps >= ")[1][:5]
    assert main(["audit", "--views", str(views), "--runs", "200", "--quiet"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("argv, message", [
    (["audit"], "give TRANSCRIPT"),
    (["audit", "t.bin", "--protocol", "ldp"], "not both"),
    (["audit", "t.bin", "--runs", "10"], "--runs belong to the protocol audit"),
    (["audit", "--protocol", "lp", "--eps", "1"], "no DP claim"),
    (["audit", "--protocol", "ldp", "--truth", "x"], "--truth belong to the transcript audit"),
    (["audit", "--protocol", "ldp", "--mechanism", "hdp"], "not a mechanism of ldp"),
])
def test_cli_refuses_mixed_options(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --------------------------------------------------------------------------- slow: larger runs


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["cdp", "hdp", "topdown"])
def test_census_mechanisms_at_4000_runs(mechanism: str) -> None:
    ok = audit_protocol(CensusFederatedViews(1, mechanism=mechanism), 4000)
    assert ok.verdict == CONSISTENT, ok.summary()
    # the count mechanisms spread the loss over six coordinates (two sizes on three levels): more runs
    half = audit_protocol(CensusFederatedViews(1, mechanism=mechanism, plant="half-noise", release=False), 8000)
    assert half.verdict == VIOLATES, half.summary()
    for plant, release in (("count-in-message", False), ("report-field", True)):
        bad = audit_protocol(CensusFederatedViews(1, mechanism=mechanism, plant=plant, release=release), 400)
        assert bad.verdict == VIOLATES, bad.summary()


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["le", "grr", "oue", "pl"])
def test_ldp_mechanisms_at_10000_runs(mechanism: str) -> None:
    ok = audit_protocol(LdpCollectionViews(1.0, mechanism=mechanism), 10000)
    assert ok.verdict == CONSISTENT, ok.summary()
    bad = audit_protocol(LdpCollectionViews(1.0, mechanism=mechanism, plant="half-noise"), 10000)
    assert bad.verdict == VIOLATES, bad.summary()
