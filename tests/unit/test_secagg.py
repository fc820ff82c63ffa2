"""Secure aggregation of the dense products: the masks cancel exactly, the shares are uniform given
their sum, the fixed point cannot overflow and stays within its stated error, the coordinator never
holds one party's product -- and the attacks the statement calls possible (collusion, substituted
keys without a certificate binding) do succeed, while the ones it calls impossible fail."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from securelp.coordinator.certs import load_identity, write_session_certs
from securelp.coordinator.examples import mangasarian_example
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.simulation import owners_consent, simulate
from securelp.coordinator.transport import InProcessLink, PartyLink
from securelp.party import aggregation as agg
from securelp.party.session import PROTOCOL_VERSION, PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import ConfigError, ProtocolError, SecureLPError, TransportError
from securelp.solvers.lp import SolveStatus, read_mps
from securelp.solvers.lp.partition import parse_split, split_columns
from securelp.solvers.randomness import SecureRandom
from tests.lp_fixtures import random_feasible_lp

REPO = Path(__file__).resolve().parents[2]
AFIRO = REPO / "deploy" / "afiro.mps"
#: false-positive rate of the uniformity tests (docs/explanation/testing.md)
ALPHA = 1e-6


# -- fixed point ----------------------------------------------------------------------------------
def test_magnitude_exponent_is_the_smallest_power_of_two_above():
    assert [agg.magnitude_exponent(v) for v in (1.0, 1024.0, 1025.0, 0.3, 2.0**-40)] == [0, 10, 11, -1, -40]
    assert agg.magnitude_exponent(0.0) == agg.ZERO_MAGNITUDE


def test_z_max_bounds_every_normal_the_mask_generator_draws():
    # Box-Muller radius sqrt(-2 ln(1 - u)) with 1 - u >= 2^-53: the largest magnitude it can return
    assert math.sqrt(-2.0 * math.log(2.0**-53)) <= agg.Z_MAX
    z = SecureRandom(None).standard_normal(1_000_000)
    assert np.abs(z).max() <= agg.Z_MAX


def test_the_reported_bound_covers_the_products_of_any_drawn_mask():
    rng = np.random.default_rng(0)
    A = rng.uniform(-50, 50, (30, 40))
    c = rng.uniform(-5, 5, 40)
    e_a, e_c = agg.product_magnitudes(A, c)
    B = SecureRandom(None).standard_normal((60, 40))
    assert np.abs(A @ B.T).max() <= 2.0**e_a and np.abs(B @ c).max() <= 2.0**e_c
    # and the encoder refuses a product above the bound it reported (the negative control)
    with pytest.raises(ProtocolError, match="exceeds the magnitude bound"):
        agg.encode(np.array([2.0 ** (e_a + 1)]), 10, e_a, what="p")


@settings(max_examples=200, deadline=None)
@given(exps=st.lists(st.integers(-60, 60), min_size=2, max_size=64))
def test_the_fraction_bits_keep_every_sum_below_the_ring(exps):
    """Property: with f = fraction_bits(e), parties at their largest magnitude (all of the same sign, the
    worst case) sum to less than 2^62 in magnitude after rounding: no wrap in Z_2^64."""
    f = agg.fraction_bits(exps)
    worst = sum(math.ldexp(1.0, e + f) + 0.5 for e in exps)
    assert worst < 2.0**62
    # and the precision is not wasted: one bit more could exceed 2^61 for the largest term set
    assert sum(math.ldexp(1.0, e + f + 1) for e in exps) > 2.0**61


def test_encode_and_decode_round_trip_within_the_stated_error():
    rng = np.random.default_rng(1)
    parts = [rng.uniform(-1e3, 1e3, 10_000) for _ in range(4)]
    exps = [agg.magnitude_exponent(float(np.abs(p).max())) for p in parts]
    f = agg.fraction_bits(exps)
    total = agg.decode(agg.sum_shares([agg.encode(p, f, e, what="p") for p, e in zip(parts, exps)]), f)
    err = np.abs(total - np.sum(parts, axis=0)).max()
    assert err <= agg.encoding_error_bound(4, f) + 4 * np.finfo(float).eps * 4e3
    assert err > 0  # the encoding does round (the bound is not vacuous)


# -- keys and masks ---------------------------------------------------------------------------------
def test_pairwise_keys_agree_and_depend_on_the_session_and_both_ids():
    a, b = agg.AggregationKeyPair(bytes(range(32))), agg.AggregationKeyPair(bytes(range(1, 33)))
    k_ab = a.pair_key(b.public_key, "s1", "alice", "bob")
    assert k_ab == b.pair_key(a.public_key, "s1", "bob", "alice")
    assert len({k_ab, a.pair_key(b.public_key, "s2", "alice", "bob"), a.pair_key(b.public_key, "s1", "alice", "carol"),
                a.pair_key(b.public_key, "s1", "dave", "bob")}) == 4
    with pytest.raises(ProtocolError, match="is 31 bytes"):
        a.pair_key(b.public_key[:31], "s1", "alice", "bob")
    with pytest.raises(ProtocolError, match="is invalid"):  # a low-order point
        a.pair_key(bytes(32), "s1", "alice", "bob")


def _shares(products, session="s", seed=0):
    """Shares of the given flat float products of len(products) parties (ids p0, p1, ...)."""
    rng = SecureRandom(seed)
    keys = [agg.AggregationKeyPair(rng.bytes(32)) for _ in products]
    ids = [f"p{i}" for i in range(len(products))]
    exps = [agg.magnitude_exponent(float(np.abs(p).max())) for p in products]
    f = agg.fraction_bits(exps)
    shares, encoded = [], []
    for i, (p, e) in enumerate(zip(products, exps)):
        enc = agg.encode(p, f, e, what=ids[i])
        encoded.append(enc.copy())
        pairs = [(keys[i].pair_key(keys[q].public_key, session, ids[i], ids[q]), 1 if ids[i] < ids[q] else -1)
                 for q in range(len(products)) if q != i]
        shares.append(agg.mask_shares(enc, pairs))
    return shares, encoded, f


def test_the_masks_cancel_exactly_in_the_ring():
    rng = np.random.default_rng(2)
    products = [rng.standard_normal(5000) * 100 for _ in range(3)]
    shares, encoded, _ = _shares(products)
    assert np.array_equal(agg.sum_shares(shares), agg.sum_shares(encoded))
    assert all(not np.array_equal(s, e) for s, e in zip(shares, encoded))


def _top_byte_chi2(values: np.ndarray) -> float:
    counts = np.bincount((values >> np.uint64(56)).astype(np.int64), minlength=256)
    expected = values.size / 256
    return float(((counts - expected) ** 2 / expected).sum())


def test_shares_are_uniform_given_the_sum():
    """Chi-square of the top byte (256 bins) of p - 1 shares against the uniform distribution on
    Z_2^64, for products that are far from uniform (a constant); the last share is determined by the
    sum. Negative control: masks drawn from a 60-bit range instead of the whole ring leave the top
    byte of a share skewed, and the same test rejects them."""
    n = 200_000
    critical = scipy.stats.chi2.isf(ALPHA, 255)
    products = [np.full(n, 1234.5), np.full(n, -0.25), np.full(n, 7.0)]
    shares, encoded, _ = _shares(products)
    for s in shares[:-1]:
        assert _top_byte_chi2(s) < critical
    joint = (shares[0] >> np.uint64(60)) * np.uint64(16) + (shares[1] >> np.uint64(60))  # the two top nibbles together
    counts = np.bincount(joint.astype(np.int64), minlength=256)
    assert float(((counts - n / 256) ** 2 / (n / 256)).sum()) < critical
    narrow = encoded[0] + (SecureRandom(3)._uint64(n) >> np.uint64(4))  # a mask that does not cover the ring
    assert _top_byte_chi2(narrow) > critical


# -- sessions ---------------------------------------------------------------------------------------
class _Recording(PartySession):
    """A party that keeps its float products (the test's truth; never sent)."""

    def _share(self, reply, masked_a, masked_c, pairs, f_a, f_c):  # type: ignore[no-untyped-def]
        self.products = (masked_a.copy(), masked_c.copy())
        super()._share(reply, masked_a, masked_c, pairs, f_a, f_c)


def _session(lp, parties=3, cls=PartySession, links=None, **cfg):  # type: ignore[no-untyped-def]
    public, blocks = split_columns(lp, parse_split(None, lp.n_cols, parties))
    config = SessionConfig(secure_aggregation=True, **cfg)
    sessions = [cls(b, policy=owners_consent(config)) for b in blocks]
    made = [InProcessLink(s) for s in sessions] if links is None else links(sessions)
    return run_secure_lp(public, made, config, central=lp), sessions


def test_the_coordinator_receives_only_shares_whose_sum_is_the_sum_of_products():
    lp = random_feasible_lp(np.random.default_rng(3), 15, 24, free_fraction=1.0)
    outcome, sessions = _session(lp, cls=_Recording)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.objective_rel_diff <= 1e-9
    agg_report = outcome.aggregation
    assert agg_report is not None and agg_report.participants == ("party1", "party2", "party3")
    total = np.zeros_like(sessions[0].products[0])
    for entry, s in zip(outcome.transcript, sessions):
        assert entry.masked_a.shape[1] == 0 and entry.share_a is not None  # no product in the clear
        own = s.products[0]
        as_if_product = agg.decode(entry.share_a, agg_report.fraction_bits_a)
        # a share read as a product is uniform over [-4, 4) times the sum's bound: far off, and uncorrelated
        assert np.linalg.norm(as_if_product - own) > 10 * np.linalg.norm(own)
        assert abs(np.corrcoef(as_if_product.ravel(), own.ravel())[0, 1]) < 0.3
        total += own
    joint = agg.decode(agg.sum_shares([e.share_a for e in outcome.transcript]), agg_report.fraction_bits_a)
    assert np.abs(joint - total).max() <= agg_report.encoding_error_a + 1e-12 * np.abs(total).max()


def test_collusion_of_the_coordinator_with_all_other_parties_recovers_a_product_exactly():
    """The leakage statement's collusion line: with t = p - 1 colluders the last product is their
    difference from the sum (attack succeeds); with p - 2 colluders what remains is the sum of two
    products, not either of them (attack fails)."""
    lp = random_feasible_lp(np.random.default_rng(4), 15, 24, free_fraction=1.0)
    outcome, sessions = _session(lp, parties=3, cls=_Recording)
    f_a = outcome.aggregation.fraction_bits_a
    joint = agg.decode(agg.sum_shares([e.share_a for e in outcome.transcript]), f_a)
    target = sessions[2].products[0]
    guess_all = joint - sessions[0].products[0] - sessions[1].products[0]
    assert np.abs(guess_all - target).max() <= 2 * outcome.aggregation.encoding_error_a + 1e-10 * np.abs(target).max()
    guess_one = joint - sessions[0].products[0]
    assert np.linalg.norm(guess_one - target) > 0.3 * np.linalg.norm(target)


def test_the_objective_matches_the_central_one_on_the_examples_and_afiro():
    for number in (1, 2):
        lp, split, known = mangasarian_example(number)
        public, blocks = split_columns(lp, split)
        config = SessionConfig(secure_aggregation=True, reveal=True)
        outcome, audit = simulate(public, blocks, config, central=lp, policy=owners_consent(config))
        assert outcome.objective_rel_diff <= 1e-9 and abs(outcome.objective - known) <= 1e-9 * abs(known)
        assert outcome.feasibility_violation < 1e-6
        assert outcome.aggregation.relative_error_a < 1e-15
        assert audit.claims_hold
    afiro = read_mps(AFIRO)  # every column bounded: rows mode makes every column dense
    outcome, audit = simulate(*split_columns(afiro, [14, 14, 4]), SessionConfig(secure_aggregation=True,
                                                                                bounds_mode="rows"),
                              central=afiro, policy=owners_consent(SessionConfig(bounds_mode="rows")))
    assert outcome.objective_rel_diff <= 1e-9 and len(outcome.aggregation.participants) == 3
    # every mask row is known, so the summed products give every block, attributed through the bound rows
    assert all(pa.summary["recovered_exact"] == pa.view.n_cols and pa.truth["recovered_exact"] == pa.view.n_cols
               for pa in audit.parties.values()) and audit.claims_hold


def test_nothing_to_aggregate_and_a_single_aggregator():
    afiro = read_mps(AFIRO)  # monomial mode: no dense column, so nothing is aggregated
    public, blocks = split_columns(afiro, [14, 14, 4])
    outcome, _ = simulate(public, blocks, SessionConfig(secure_aggregation=True), central=afiro)
    assert outcome.objective_rel_diff <= 1e-12 and outcome.aggregation.participants == ()
    lp = random_feasible_lp(np.random.default_rng(5), 6, 8, free_fraction=1.0)
    public, blocks = split_columns(lp, [8])
    with pytest.raises(ConfigError, match="has one, party1, whose share would be its own product"):
        simulate(public, blocks, SessionConfig(secure_aggregation=True))


class _Relay(PartyLink):
    """An in-process link whose coordinator may rewrite the MaskRequest and watch the reply."""

    def __init__(self, session: PartySession, rewrite=None, fail_mask: bool = False) -> None:  # type: ignore[no-untyped-def]
        super().__init__(session.party_id)
        self.inner = InProcessLink(session)
        self.rewrite, self.fail_mask = rewrite, fail_mask
        self.block: pb.MaskedBlock | None = None

    def hello(self, request):  # type: ignore[no-untyped-def]
        return self.inner.hello(request)

    def mask(self, request):  # type: ignore[no-untyped-def]
        if self.fail_mask:
            raise TransportError(f"party {self.party_id} at 127.0.0.1:1 is unreachable (connection reset)")
        self.block = self.inner.mask(self.rewrite(request) if self.rewrite else request)
        return self.block

    def decode(self, notice):  # type: ignore[no-untyped-def]
        return self.inner.decode(notice)

    def close(self, request):  # type: ignore[no-untyped-def]
        self.inner.close(request)


def test_a_party_lost_after_the_key_agreement_ends_the_session_with_nothing_unmasked():
    lp = random_feasible_lp(np.random.default_rng(6), 15, 24, free_fraction=1.0)
    public, blocks = split_columns(lp, [8, 8, 8])
    config = SessionConfig(secure_aggregation=True)
    sessions = [_Recording(b) for b in blocks]
    links = [_Relay(sessions[0]), _Relay(sessions[1]), _Relay(sessions[2], fail_mask=True)]
    with pytest.raises(TransportError, match="^mask: party party3 at 127.0.0.1:1 is unreachable"):
        run_secure_lp(public, links, config)
    assert all(s.closed.is_set() and s.close_reason == "aborted: TransportError" for s in sessions)
    # what the coordinator holds: two shares; they do not sum to the two products
    got = [np.frombuffer(link.block.share_a.values, "<u8").astype(np.uint64) for link in links[:2]]
    exps = [agg.magnitude_exponent(float(np.abs(s.products[0]).max())) for s in sessions[:2]]
    assert exps  # the two surviving parties did compute their products
    partial = agg.sum_shares(got).view(np.int64).astype(np.float64)
    truth_scale = max(float(np.abs(s.products[0]).max()) for s in sessions[:2])
    assert np.abs(partial).max() > 2.0**40 * truth_scale  # a masked ring element, not a sum of products


def _steal_keys(victim: str, attacker: dict[str, agg.AggregationKeyPair]):  # type: ignore[no-untyped-def]
    """A coordinator that relays its own public keys to ``victim`` in place of every peer's."""

    def rewrite(request: pb.MaskRequest) -> pb.MaskRequest:
        out = pb.MaskRequest.FromString(request.SerializeToString())
        for peer in out.aggregation.peers:
            if peer.party_id != victim:
                peer.key.public_key = attacker[peer.party_id].public_key
        return out

    return rewrite


def test_substituted_keys_unmask_a_party_unless_keys_are_bound_to_certificates(tmp_path):
    """Semi-honest model: a coordinator that swaps the public keys it relays learns the victim's pairwise
    masks and its product (the attack succeeds without key binding); with keys signed by the parties'
    certificates the victim refuses the substituted keys (the attack fails)."""
    lp = random_feasible_lp(np.random.default_rng(7), 12, 24, free_fraction=1.0)
    public, blocks = split_columns(lp, [8, 8, 8])
    attacker = {b.party_id: agg.AggregationKeyPair(SecureRandom(None).bytes(32)) for b in blocks}
    config = SessionConfig(secure_aggregation=True, session_id="swap")

    sessions = [_Recording(b) for b in blocks]
    links = [_Relay(sessions[0], _steal_keys("party1", attacker)), _Relay(sessions[1]), _Relay(sessions[2])]
    with contextlib.suppress(SecureLPError):  # the session itself goes wrong; the victim's share is what matters
        run_secure_lp(public, links, config)
    share = np.frombuffer(links[0].block.share_a.values, "<u8").astype(np.uint64)
    # the attacker recomputes every pairwise mask the victim added
    m, k = int(links[0].block.share_a.rows), int(links[0].block.share_a.cols)
    stream = share.copy()
    victim_pub = sessions[0]._aggregation.public_key
    for peer in ("party2", "party3"):
        key = attacker[peer].pair_key(victim_pub, "swap", peer, "party1")
        mask = agg.pair_mask(key, m * k + k)[: m * k]
        np.subtract(stream, mask, out=stream)  # party1 < party2, party3: it added them
    f_a = agg.fraction_bits([sessions[0]._aggregation.magnitude_a, *[s._aggregation.magnitude_a for s in sessions[1:]]])
    stolen = agg.decode(stream, f_a).reshape(m, k)
    assert np.abs(stolen - sessions[0].products[0]).max() <= 2.0**-f_a  # unmasked

    write_session_certs(tmp_path, [b.party_id for b in blocks])
    idents = {b.party_id: load_identity(tmp_path, b.party_id) for b in blocks}
    bound = [PartySession(b, identity=agg.SigningIdentity(idents[b.party_id].private_key, idents[b.party_id].certificate,
                                                           idents[b.party_id].ca_certificate)) for b in blocks]
    links = [_Relay(bound[0], _steal_keys("party1", attacker)), _Relay(bound[1]), _Relay(bound[2])]
    with pytest.raises(ProtocolError, match="party party1: the aggregation key relayed for party party2 is not the one "
                                            "it signed"):
        run_secure_lp(public, links, config)
    assert links[0].block is None  # the victim sent nothing
    # the control: the same bound parties with an honest relay aggregate, and the report says the keys were bound
    bound = [PartySession(b, identity=agg.SigningIdentity(idents[b.party_id].private_key, idents[b.party_id].certificate,
                                                           idents[b.party_id].ca_certificate)) for b in blocks]
    outcome = run_secure_lp(public, [InProcessLink(s) for s in bound], config, central=lp)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.aggregation.keys_bound


@pytest.mark.parametrize("tamper, fragment", [
    (lambda r: r.aggregation.peers.pop(), "over 1 party would send its own product"),
    (lambda r: setattr(r.aggregation, "fraction_bits_a", r.aggregation.fraction_bits_a + 3),
     "fixed-point precision is not the one the relayed magnitudes give"),
    (lambda r: setattr(r.aggregation.peers[0].key, "magnitude_a", r.aggregation.peers[0].key.magnitude_a - 5),
     "does not relay its own key as it reported it"),
    (lambda r: r.ClearField("aggregation"), "drops the secure aggregation its hello agreed"),
])
def test_a_party_refuses_aggregation_parameters_it_did_not_agree(tamper, fragment):
    lp = random_feasible_lp(np.random.default_rng(8), 6, 8, free_fraction=1.0)
    public, blocks = split_columns(lp, [4, 4])
    sessions = [PartySession(b) for b in blocks]

    def rewrite(request: pb.MaskRequest) -> pb.MaskRequest:
        out = pb.MaskRequest.FromString(request.SerializeToString())
        tamper(out)
        return out

    with pytest.raises(ProtocolError, match=fragment):
        run_secure_lp(public, [_Relay(sessions[0], rewrite), _Relay(sessions[1])], SessionConfig(secure_aggregation=True))


def test_versions_are_checked_at_hello():
    lp = random_feasible_lp(np.random.default_rng(9), 4, 4, free_fraction=1.0)
    public, blocks = split_columns(lp, [2, 2])
    s = PartySession(blocks[0])
    with pytest.raises(ProtocolError, match="protocol version 3 not supported"):
        s.hello(pb.HelloRequest(session_id="a", protocol_version=PROTOCOL_VERSION + 1, n_rows=4))
    old = PartySession(blocks[0])  # a version-1 coordinator is answered in version 1, without aggregation
    assert old.hello(pb.HelloRequest(session_id="a", protocol_version=1, n_rows=4)).protocol_version == 1
    with pytest.raises(ProtocolError, match="secure aggregation needs protocol version 2"):
        PartySession(blocks[0]).hello(pb.HelloRequest(session_id="a", protocol_version=1, n_rows=4,
                                                      secure_aggregation=True))

    class OldParty(PartySession):
        def hello(self, request):  # type: ignore[no-untyped-def]
            reply = super().hello(request)
            reply.protocol_version = 1
            return reply

    with pytest.raises(ProtocolError, match="party party2 answered in protocol version 1; this coordinator speaks 2"):
        run_secure_lp(public, [InProcessLink(PartySession(blocks[0])), InProcessLink(OldParty(blocks[1]))],
                      SessionConfig())


@pytest.mark.slow
def test_the_objective_matches_the_central_one_on_a_3000_by_300_lp():
    from securelp.coordinator.examples import random_solvable_lp

    lp, known = random_solvable_lp(3000, 300, np.random.default_rng(0))
    public, blocks = split_columns(lp, [150, 90, 60])
    outcome, _ = simulate(public, blocks, SessionConfig(secure_aggregation=True), central=lp)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.objective_rel_diff <= 1e-9
    assert abs(outcome.objective - known) <= 1e-9 * abs(known)
