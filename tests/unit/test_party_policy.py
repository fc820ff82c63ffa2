"""A party enforces its own policy (in-process): the bounds modes it allows, whether it reveals x_j,
one decode per session, and only a u whose x_j lies inside its own column bounds."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.simulation import owners_consent, simulate
from securelp.coordinator.transport import InProcessLink, PartyLink
from securelp.party.policy import DEFAULT_POLICY, PartyPolicy
from securelp.party.session import DECODE_TOLERANCE, PROTOCOL_VERSION, PartySession, bound_violations
from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import vector_from_pb, vector_to_pb
from securelp.solvers.errors import ConfigError, ExitCode, ProtocolError
from securelp.solvers.lp import SolveStatus
from securelp.solvers.lp.partition import split_columns
from tests.lp_fixtures import random_feasible_lp

ROWS = PartyPolicy(frozenset({"monomial", "rows"}))


def _blocks(free_fraction=0.0, seed=0, m=8, n=10, split=(5, 5)):
    lp = random_feasible_lp(np.random.default_rng(seed), m, n, free_fraction=free_fraction)
    public, blocks = split_columns(lp, list(split))
    return lp, public, blocks


def _hello(session: PartySession, n_rows: int, **kw) -> pb.HelloReply:
    return session.hello(pb.HelloRequest(session_id="s", protocol_version=PROTOCOL_VERSION, n_rows=n_rows, **kw))


# -- the policy object ---------------------------------------------------------------------------
def test_default_policy_allows_monomial_only_and_keeps_x():
    assert DEFAULT_POLICY == PartyPolicy() == PartyPolicy(frozenset({"monomial"}), reveal=False)
    assert DEFAULT_POLICY.allows_mode(pb.BOUNDS_MODE_MONOMIAL) and not DEFAULT_POLICY.allows_mode(pb.BOUNDS_MODE_ROWS)
    assert DEFAULT_POLICY.describe() == "bounds modes monomial; decoded solution kept (--no-reveal)"


def test_policy_from_names_and_wire_round_trip():
    policy = PartyPolicy.from_names(["monomial,rows"], reveal=True)
    assert policy.allow_bounds == frozenset({"monomial", "rows"}) and policy.reveal
    assert PartyPolicy.from_names(["rows", "monomial"]) == PartyPolicy(frozenset({"rows", "monomial"}))
    assert PartyPolicy.from_pb(pb.PartyPolicy.FromString(policy.to_pb().SerializeToString())) == policy
    assert policy.as_dict() == {"allow_bounds": ["monomial", "rows"], "reveal": True}


@pytest.mark.parametrize("names, fragment", [(["cols"], "bounds mode cols is not one of"),
                                             ([","], "at least one bounds mode")])
def test_a_bad_policy_is_a_config_error(names, fragment):
    with pytest.raises(ConfigError, match=fragment):
        PartyPolicy.from_names(names)


def test_a_reported_policy_without_modes_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="party p9 reported a policy that allows no bounds mode"):
        PartyPolicy.from_pb(pb.PartyPolicy(), who="party p9")


# -- the party refuses what its policy does not allow --------------------------------------------
def test_a_default_party_refuses_rows_mode_and_ends_the_session(caplog):
    _, _, blocks = _blocks()
    session = PartySession(blocks[0])
    reply = _hello(session, 8)
    assert PartyPolicy.from_pb(reply.policy) == DEFAULT_POLICY  # reported with the hello
    request = pb.MaskRequest(session_id="s", bounds_mode=pb.BOUNDS_MODE_ROWS, k=20)
    with caplog.at_level(logging.WARNING, logger="securelp.party.session"), \
            pytest.raises(ProtocolError, match=r"party party1 refused MaskRequest \(bounds mode rows\): its policy "
                                               r"does not allow bounds mode rows .*--allow-bounds rows") as info:
        session.mask(request)
    assert info.value.exit_code == ExitCode.PROTOCOL
    assert "party party1: session s: refused MaskRequest (bounds mode rows)" in caplog.text
    assert session.closed.is_set() and session.close_reason == "refused: MaskRequest (bounds mode rows)"
    assert session._mask is None
    with pytest.raises(ProtocolError, match="mask requested in state refused"):  # nothing more in this session
        session.mask(request)
    # the control: a party that allows rows sends its bound rows (B_b') for the same request
    allowing = PartySession(blocks[0], policy=ROWS)
    _hello(allowing, 8)
    assert allowing.mask(request).bound_rows.rows == 5


def test_a_party_that_keeps_x_refuses_a_reveal_request():
    _, _, blocks = _blocks()
    session = PartySession(blocks[0])
    _hello(session, 8)
    with pytest.raises(ProtocolError, match=r"refused MaskRequest \(reveal\): its policy keeps its decoded solution"):
        session.mask(pb.MaskRequest(session_id="s", bounds_mode=pb.BOUNDS_MODE_MONOMIAL, k=20, reveal=True))
    revealing = PartySession(blocks[0], policy=PartyPolicy(reveal=True))
    _hello(revealing, 8)
    revealing.mask(pb.MaskRequest(session_id="s", bounds_mode=pb.BOUNDS_MODE_MONOMIAL, k=20, reveal=True))


def test_the_coordinator_names_the_party_before_any_mask():
    """The policies travel with the hellos: a session asking for rows (or for x_j) stops there, with an
    error naming the party, and no party draws a mask."""
    lp, public, blocks = _blocks()
    sessions = [PartySession(blocks[0], policy=ROWS), PartySession(blocks[1])]
    with pytest.raises(ConfigError, match=r"party party2 does not allow bounds mode rows \(it allows: monomial\); "
                                          r"run with --bounds monomial, or start the party with --allow-bounds rows"):
        run_secure_lp(public, [InProcessLink(s) for s in sessions], SessionConfig(bounds_mode="rows"))
    assert all(s.closed.is_set() and s._mask is None and s._state == "closed" for s in sessions)
    sessions = [PartySession(b) for b in blocks]
    with pytest.raises(ConfigError, match=r"party party1 does not reveal x_j \(run with --no-reveal"):
        run_secure_lp(public, [InProcessLink(s) for s in sessions], SessionConfig(reveal=True))
    # the defaults agree with each other: monomial, x_j kept
    outcome = run_secure_lp(public, [InProcessLink(PartySession(b)) for b in blocks], SessionConfig(), central=lp)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.x is None
    assert [p.policy for p in outcome.parties] == [DEFAULT_POLICY, DEFAULT_POLICY]


def test_the_simulation_takes_the_same_policy_with_the_same_default():
    lp, public, blocks = _blocks()
    config = SessionConfig(bounds_mode="rows")
    with pytest.raises(ConfigError, match="party party1 does not allow bounds mode rows"):
        simulate(public, blocks, config, central=lp)
    outcome, _ = simulate(public, blocks, config, central=lp, policy=owners_consent(config))
    assert outcome.status is SolveStatus.OPTIMAL
    assert all(p.policy == PartyPolicy(frozenset({"monomial", "rows"})) for p in outcome.parties)


# -- decoding: once, and only inside the party's bounds -------------------------------------------
class _TamperingLink(PartyLink):
    """An in-process link whose coordinator rewrites the solution notice it sends to one party."""

    def __init__(self, inner: InProcessLink, rewrite) -> None:  # type: ignore[no-untyped-def]
        super().__init__(inner.party_id)
        self.inner, self.rewrite = inner, rewrite

    def hello(self, request):  # type: ignore[no-untyped-def]
        reply = self.inner.hello(request)
        self.reported_split_id = self.inner.reported_split_id
        return reply

    def mask(self, request):  # type: ignore[no-untyped-def]
        return self.inner.mask(request)

    def decode(self, notice):  # type: ignore[no-untyped-def]
        return self.inner.decode(self.rewrite(notice))

    def close(self, request):  # type: ignore[no-untyped-def]
        self.inner.close(request)


@pytest.mark.parametrize("mode", ["monomial", "rows"])
def test_a_u_outside_the_partys_bounds_is_refused(mode, caplog):
    lp, public, blocks = _blocks()  # every column bounded
    policy = PartyPolicy(frozenset({"monomial", "rows"}))
    sessions = [PartySession(b, policy=policy) for b in blocks]

    def push_out(notice: pb.SolutionNotice) -> pb.SolutionNotice:
        field = "u" if mode == "rows" else "y"
        values = vector_from_pb(getattr(notice, field))
        getattr(notice, field).CopyFrom(vector_to_pb(values * 1e6 + 1e6))  # a point far outside the box
        return notice

    links = [InProcessLink(sessions[0]), _TamperingLink(InProcessLink(sessions[1]), push_out)]
    with caplog.at_level(logging.WARNING, logger="securelp.party.session"), \
            pytest.raises(ProtocolError, match=r"^decode: party party2 refused SolutionNotice: the solution it was "
                                               r"sent decodes to a point outside its own column bounds"):
        run_secure_lp(public, links, SessionConfig(bounds_mode=mode))
    assert sessions[1].outcome is None and sessions[1].close_reason == "refused: SolutionNotice"
    refusal = [r.getMessage() for r in caplog.records if "violates" in r.getMessage()]
    assert len(refusal) == 1  # counts and the tolerance only, no value of x_j or u
    assert re.fullmatch(rf"party party2: session [0-9a-f]+: the decoded solution violates [1-5] of its 5 column bounds beyond the tolerance "
                        rf"{DECODE_TOLERANCE:.1e} \(relative to each bound\)", refusal[0])
    # the control: the same session with the honest notice decodes
    outcome = run_secure_lp(public, [InProcessLink(PartySession(b, policy=policy)) for b in blocks],
                            SessionConfig(bounds_mode=mode), central=lp)
    assert outcome.status is SolveStatus.OPTIMAL


def test_bound_violations_use_the_documented_relative_tolerance():
    lower, upper = np.array([0.0, -1000.0]), np.array([1.0, 1000.0])
    inside = np.array([-0.9 * DECODE_TOLERANCE, 1000.0 * (1 + 0.9 * DECODE_TOLERANCE)])
    outside = np.array([-1.1 * DECODE_TOLERANCE, 1000.0 * (1 + 1.1 * DECODE_TOLERANCE)])
    assert bound_violations(inside, lower, upper) == 0
    assert bound_violations(outside, lower, upper) == 2
    assert bound_violations(np.array([np.nan, 0.0]), lower, upper) == 1


def test_a_party_decodes_once_per_session():
    lp, public, blocks = _blocks(free_fraction=1.0)
    sessions = [PartySession(b) for b in blocks]
    notices: list[pb.SolutionNotice] = []

    def keep(notice: pb.SolutionNotice) -> pb.SolutionNotice:
        notices.append(pb.SolutionNotice.FromString(notice.SerializeToString()))
        return notice

    links = [_TamperingLink(InProcessLink(s), keep) for s in sessions]

    class KeepOpen(_TamperingLink):  # a coordinator that does not close: it asks again instead
        def close(self, request):  # type: ignore[no-untyped-def]
            pass

    links = [KeepOpen(link.inner, keep) for link in links]
    outcome = run_secure_lp(public, links, SessionConfig(), central=lp)
    assert outcome.status is SolveStatus.OPTIMAL and sessions[0].outcome is not None
    second = pb.SolutionNotice.FromString(notices[0].SerializeToString())
    second.u.CopyFrom(vector_to_pb(vector_from_pb(second.u) * 0.5))  # another u, chosen by the coordinator
    with pytest.raises(ProtocolError, match=r"solution received in state decoded \(a party decodes once per "
                                            r"session\)"):
        sessions[0].decode(second)
