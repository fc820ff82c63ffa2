"""The coordinator's driver of the protocol ``census-federated`` (its party: ``securelp.party.census_federated``).

The regional release of Fioretto, Van Hentenryck and Zhu (*Differential Privacy of Hierarchical
Census Data: An Optimization Approach*, AIJ 2021) with no true count at the coordinator
(:mod:`securelp.solvers.hierarchy.federated`):

1. hello to every party: each names its region at the party level l* and its subtree (checked
   against the public hierarchy: one party per region of l*, each owning exactly its subtree), and
   reports a fresh X25519 key;
2. measure: every party gets the mechanism, eps, L, l*, the spanning regions (levels above l*,
   parents first, each with its number of parties) and every participant's key; it answers with its
   own regions' noisy values (in the clear: it added their whole noise) and its spanning vector
   masked for secure aggregation (Bonawitz et al., CCS 2017). The coordinator adds the masked
   vectors mod 2^64: the masks cancel and it holds, for each spanning region r,
   ``sum_j values_j + sum_j share_j = true_r + one exact two-sided geometric draw``, and the public
   total G (the parties' group counts, summed under the same masks);
3. it assembles every region's noisy values (:func:`~securelp.solvers.hierarchy.federated.assemble`)
   and post-processes them with the chosen mechanism (the release is the single-process release of
   the same noisy values); each party gets its own regions' released rows and the public accounting;
4. close (``done``; or the error's class when the session failed).

The coordinator never receives a true count nor an unmasked spanning vector: what it receives is
each party's noisy rows and one uniform-looking element of Z_2^64 per spanning entry (any p - 1
masked vectors are uniform whatever the data). The driver uses only ``ProtocolLink.call`` and the
helpers every driver uses (``securelp.coordinator.drive``): it runs unchanged in-process and over
gRPC in both directions. A :class:`~securelp.coordinator.transcript.TranscriptRecorder` wrapping
the links records what the coordinator received.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from securelp.coordinator.drive import close_all, each, run_on_hosts, while_alive
from securelp.coordinator.transport import ProtocolLink, close_session
from securelp.party import aggregation as agg
from securelp.party.census_federated import PROTOCOL_VERSION, decode_int64, encode_int64
from securelp.protos import census_federated_pb2 as cpb
from securelp.solvers.errors import ConfigError, InputError, ProtocolError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.federated import (
    RegionalSplit,
    accounting,
    assemble,
    collusion_epsilon,
    split_by_level,
)
from securelp.solvers.hierarchy.model import Hierarchy

log = logging.getLogger(__name__)

#: the largest noise scale b for which the accounting computes the loss against the coordinator with one
#: colluding party (about 1 s at b = 100; quadratic in b)
COLLUSION_MAX_SCALE = 100


@dataclass(frozen=True, eq=False)
class CensusOutcome:
    """One ``census-federated`` session, as the coordinator knows it (nothing here is a true count).

    Attributes
    ----------
    session_id, mechanism, eps, split : the session's public parameters.
    noisy : (regions, N) the assembled noisy values (counts, or cumulative counts for cdp/cqp/chain).
    release : the post-processed release, ``release.counts`` (regions, N) in hierarchy order.
    total : G, the number of groups (summed under secure aggregation).
    accounting : the public accounting (budget per level, who adds each level's noise, collusion).
    parties : the party ids, in the order of ``split.parties``.
    bytes_sent, bytes_received : per party, payload bytes it sent and received.
    phase_s : seconds of each phase (hello, measure, postprocess, release, close).
    """

    session_id: str
    mechanism: str
    eps: Fraction
    split: RegionalSplit
    noisy: np.ndarray
    release: mech.PostProcessed
    total: int
    accounting: dict[str, Any]
    parties: tuple[str, ...]
    bytes_sent: tuple[int, ...]
    bytes_received: tuple[int, ...]
    phase_s: dict[str, float] = field(default_factory=dict)


def _match_parties(hier: Hierarchy, split: RegionalSplit, links: Sequence[ProtocolLink],
                   hellos: Sequence[cpb.CensusHelloReply]) -> tuple[list[int], list[np.ndarray]]:
    """For each link, its index into ``split.parties`` and the permutation from its subtree order to
    the hierarchy's order of its regions; refuses a hello that does not fit the public hierarchy."""
    index = {rid: i for i, rid in enumerate(hier.ids)}
    party_of = {r: j for j, r in enumerate(split.parties)}
    order: list[int] = []
    perms: list[np.ndarray] = []
    for link, h in zip(links, hellos):
        who = f"party {link.party_id}"
        if h.party_id != link.party_id:
            raise ProtocolError(f"{who} introduced itself as {h.party_id!r}")
        if h.protocol_version != PROTOCOL_VERSION:
            raise ProtocolError(f"{who} answered in census-federated version {h.protocol_version}")
        r = index.get(h.region_id)
        if r is None or r not in party_of:
            raise InputError(f"{who} holds region {h.region_id!r}, which is not a region at level {split.level} of "
                             f"the public hierarchy (the party level); give each party its region's subtree")
        j = party_of[r]
        if j in order:
            raise InputError(f"{who} and party {links[order.index(j)].party_id} both hold region {h.region_id!r}")
        owned = split.owned(j)
        ids = list(h.subtree_ids)
        if sorted(ids) != sorted(hier.ids[k] for k in owned) or len(set(ids)) != len(ids) or ids[:1] != [h.region_id]:
            raise InputError(f"{who}'s regions are not the subtree of region {h.region_id!r} in the public hierarchy "
                             f"({len(ids)} regions reported, {owned.size} expected)")
        parents = list(h.subtree_parents)
        for rid, par in zip(ids[1:], parents[1:]):
            if hier.ids[int(hier.parent[index[rid]])] != par:
                raise InputError(f"{who} places region {rid!r} under {par!r}; the public hierarchy does not")
        position = {int(k): pos for pos, k in enumerate(owned)}
        perm = np.array([position[index[rid]] for rid in ids], dtype=np.int64)  # party row -> owned(j) row
        order.append(j)
        perms.append(perm)
    missing = sorted(set(range(len(split.parties))) - set(order))
    if missing:
        raise InputError(f"no party holds region(s) {', '.join(hier.ids[split.parties[j]] for j in missing[:5])} "
                         f"of level {split.level}: every region of the party level needs its party")
    return order, perms


def run_census_federated(links: Sequence[ProtocolLink], hierarchy: Hierarchy, max_size: int, *, mechanism: str,
                         eps: Fraction, party_level: int = 2, total: int | None = None,
                         options: mech.PostprocessOptions | None = None, session_id: str = "") -> CensusOutcome:
    """Run one ``census-federated`` session over ``links`` (one per party of ``party_level``).

    Parameters
    ----------
    links : one link per region at ``party_level`` of ``hierarchy`` (any order, any transport).
    hierarchy : the public hierarchy (ids and parents).
    max_size : N, the public size domain 1..N.
    mechanism, eps : the release's mechanism and budget (exact).
    party_level : l*, the level whose regions are the parties (2 .. L).
    total : the public G, if known: checked against the G the parties' secure sum gives.
    options : the post-processing's options.
    session_id : the session's id (default: random).

    Raises
    ------
    ConfigError
        Fewer than two parties (secure aggregation needs two).
    InputError
        The parties do not fit the hierarchy (a region without its party, a wrong subtree), or G
        differs from ``total``.
    ProtocolError, TransportError
        A party refused or broke the protocol, or was lost (the session is closed on every party).
    """
    mech.check_mechanism(mechanism)
    split = split_by_level(hierarchy, party_level)
    if len(links) < 2 or len(split.parties) < 2:
        raise ConfigError(f"a federated release needs two or more parties (secure aggregation of the spanning "
                          f"regions), got {len(links)} link(s) and {len(split.parties)} region(s) at level "
                          f"{party_level}")
    if len(links) != len(split.parties):
        raise ConfigError(f"level {party_level} of the hierarchy has {len(split.parties)} regions, one party each; "
                          f"got {len(links)} parties")
    sid = session_id or secrets.token_hex(8)
    depth, width = hierarchy.depth, int(max_size)
    phases: dict[str, float] = {}
    pool = ThreadPoolExecutor(max_workers=min(32, len(links)), thread_name_prefix="census-federated")
    try:
        t0 = time.perf_counter()
        hello = cpb.CensusHelloRequest(session_id=sid, protocol_version=PROTOCOL_VERSION, max_size=width)
        hellos = each(links, lambda link: link.call("hello", hello), "hello", pool)
        order, perms = _match_parties(hierarchy, split, links, hellos)
        phases["hello"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        spanning = [cpb.SpanningRegion(region_id=hierarchy.ids[r],
                                       parent_id=hierarchy.ids[int(hierarchy.parent[r])] if hierarchy.parent[r] >= 0
                                       else "", level=int(hierarchy.level[r]), parties=len(below))
                    for r, below in zip(split.spanning, split.under)]
        peers = [cpb.CensusPeer(party_id=h.party_id, public_key=h.public_key, certificate=h.certificate,
                                signature=h.signature) for h in hellos]
        requests = {}
        for link, j in zip(links, order):
            region = split.parties[j]
            requests[link.party_id] = cpb.CensusMeasureRequest(
                session_id=sid, mechanism=mechanism, eps=str(eps), depth=depth, party_level=party_level,
                spanning=spanning, parent_id=hierarchy.ids[int(hierarchy.parent[region])], peers=peers)
        replies = each(links, lambda link: link.call("measure", requests[link.party_id]), "measure", pool)
        own: list[np.ndarray] = [np.zeros((0, width), dtype=np.int64)] * len(split.parties)
        length = len(split.spanning) * width + 1
        masked = []
        for link, j, perm, reply in zip(links, order, perms, replies):
            if reply.party_id != link.party_id:
                raise ProtocolError(f"party {link.party_id} answered measure as {reply.party_id!r}")
            rows = decode_int64(reply.own, (perm.size, width), f"measure: party {link.party_id}'s own values")
            placed = np.empty_like(rows)
            placed[perm] = rows
            own[j] = placed
            if len(reply.masked) != 8 * length:
                raise ProtocolError(f"measure: party {link.party_id}'s masked vector has {len(reply.masked)} bytes, "
                                    f"expected {8 * length}")
            masked.append(np.frombuffer(reply.masked, dtype="<u8").astype(np.uint64))
        summed = agg.sum_shares(masked).view(np.int64)
        groups = int(summed[-1])
        noisy = assemble(split, hierarchy.size, own, summed[:-1].reshape(len(split.spanning), width))
        phases["measure"] = time.perf_counter() - t0
        if total is not None and groups != total:
            raise InputError(f"the parties' groups sum to G = {groups:,}, the public total is {total:,}")
        if groups < 0:
            raise ProtocolError(f"the parties' groups sum to a negative G = {groups}")
        t0 = time.perf_counter()
        released = while_alive(links, "postprocess", lambda: mech.postprocess(
            mechanism, hierarchy, noisy, groups, options or mech.PostprocessOptions()))
        phases["postprocess"] = time.perf_counter() - t0
        book = public_accounting(mechanism, eps, split, depth)
        text = json.dumps(book, sort_keys=True)
        t0 = time.perf_counter()

        def release(link: ProtocolLink) -> Any:
            k = links.index(link)
            j, perm = order[k], perms[k]
            rows = released.counts[split.owned(j)][perm]
            return link.call("release", cpb.CensusRelease(session_id=sid, counts=encode_int64(rows),
                                                          accounting_json=text, total=groups))

        each(links, release, "release", pool)
        phases["release"] = time.perf_counter() - t0
    except BaseException as exc:
        aborted = cpb.CensusClose(session_id=sid, reason=f"aborted: {exc.__class__.__name__}")
        close_all(links, lambda link: close_session(link, aborted), pool)
        raise
    else:
        t0 = time.perf_counter()
        close_all(links, lambda link: close_session(link, cpb.CensusClose(session_id=sid, reason="done")), pool)
        phases["close"] = time.perf_counter() - t0
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    by_party = sorted(range(len(links)), key=lambda k: order[k])
    log.info("census-federated session %s: %d parties, %d regions x %d sizes released (%s)", sid, len(links),
             hierarchy.size, width, mechanism)
    return CensusOutcome(sid, mechanism, eps, split, noisy, released, groups, book,
                         tuple(links[k].party_id for k in by_party), tuple(links[k].bytes_sent for k in by_party),
                         tuple(links[k].bytes_received for k in by_party), phases)


def public_accounting(mechanism: str, eps: Fraction, split: RegionalSplit, depth: int) -> dict[str, Any]:
    """The accounting each party receives: :func:`~securelp.solvers.hierarchy.federated.accounting`
    and, against the coordinator colluding with one party, the total loss of an honest party's
    people (:func:`~securelp.solvers.hierarchy.federated.collusion_epsilon`; None, with the reason,
    above the noise scale :data:`COLLUSION_MAX_SCALE`)."""
    book: dict[str, Any] = dict(accounting(mechanism, eps, split, depth))
    book["parties"] = len(split.parties)
    book["spanning_regions"] = len(split.spanning)
    scale = mech.noise_scale(mechanism, depth, eps)
    if scale <= COLLUSION_MAX_SCALE:
        book["eps_against_coordinator_and_one_party"] = collusion_epsilon(mechanism, eps, split, depth, 1)
    else:  # the exact pmf's convolution grows with the square of the scale: minutes beyond this
        book["eps_against_coordinator_and_one_party"] = None
        book["collusion_not_computed"] = (f"noise scale {float(scale):g} above {COLLUSION_MAX_SCALE}: run "
                                          "securelp.solvers.hierarchy.federated.collusion_epsilon offline")
    return book


@dataclass(frozen=True, eq=False)
class SimulatedRelease:
    """A simulated federated release: the outcome, the coordinator's transcript, each party's session."""

    outcome: CensusOutcome
    transcript: Any  # securelp.coordinator.transcript.Transcript
    sessions: tuple[Any, ...]  # the parties' CensusFederatedSession, in the order of outcome.parties
    seconds: float


def party_ids(hierarchy: Hierarchy, split: RegionalSplit) -> list[str]:
    """Party ids for a simulation: ``p<k>-<region id>``, with characters a certificate name cannot hold
    replaced by ``-`` (the region ids are public)."""
    import re

    return [f"p{j + 1}-" + re.sub(r"[^a-z0-9-]+", "-", hierarchy.ids[r].lower()).strip("-")[:40]
            for j, r in enumerate(split.parties)]


def simulate_release(data: Any, *, party_level: int, mechanism: str, eps: Fraction, transport: str = "inprocess",
                     seed: str | int | None = None, options: mech.PostprocessOptions | None = None,
                     deadline_s: float = 600.0, transcript_path: str | None = None,
                     workdir: Any = None) -> SimulatedRelease:
    """Every party of ``party_level`` simulated in this process, the protocol run over ``transport``.

    Parameters
    ----------
    data : the whole-hierarchy ``GroupSizeData``; each party gets only its own subtree's counts.
    transport : ``inprocess`` (every message still round-trips through protobuf and the runtime's
        frames) or ``grpc`` (one gRPC server per party on 127.0.0.1, port 0, mutual TLS with fresh
        session certificates in ``workdir``; the parties bind their aggregation keys to them).
    seed : None (the parties draw from the OS's entropy) or a seed: party j draws as
        ``simulate_federated(..., SecureRandom(seed, label="census/federated"))``'s party j (NOT private).
    transcript_path : write the coordinator's transcript here.
    """
    from securelp.coordinator.transcript import TranscriptRecorder, write_transcript
    from securelp.party.aggregation import SigningIdentity
    from securelp.party.census_federated import CENSUS_FEDERATED, CensusFederatedSession, RegionalCounts
    from securelp.party.runtime import HostedProtocol, PartyHost
    from securelp.solvers.lp.partition import PublicRows
    from securelp.solvers.randomness import SecureRandom

    if transport not in ("inprocess", "grpc"):
        raise ConfigError(f"transport must be inprocess or grpc, got {transport!r}")
    hier = data.hierarchy
    split = split_by_level(hier, party_level)
    ids = party_ids(hier, split)
    root = SecureRandom(seed, label="census/federated") if seed is not None else None
    rngs = [root.spawn(f"party{j}") if root is not None else None for j in range(len(ids))]
    identities: dict[str, SigningIdentity] = {}
    sessions: list[Any] = [None] * len(ids)

    def factory(j: int) -> Any:
        counts = RegionalCounts.of_party(data, split, j)

        def make(session_id: str) -> CensusFederatedSession:
            sessions[j] = CensusFederatedSession(ids[j], counts, rng=rngs[j], identity=identities.get(ids[j]))
            return sessions[j]
        return make

    hosts = [PartyHost(pid, [HostedProtocol(CENSUS_FEDERATED, factory(j))]) for j, pid in enumerate(ids)]
    recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0), name=f"census-federated {mechanism}"))

    def run(connections: Sequence[Any]) -> CensusOutcome:
        links = [recorder.wrap(ProtocolLink(c, CENSUS_FEDERATED, deadline_s=deadline_s)) for c in connections]
        try:
            return run_census_federated(links, hier, data.max_size, mechanism=mechanism, eps=eps,
                                        party_level=party_level, total=data.total, options=options)
        finally:
            if transcript_path is not None:
                write_transcript(recorder.transcript(), transcript_path)

    def load_identities(certs: Path) -> None:  # each party signs its aggregation key with its certificate
        from securelp.coordinator.certs import load_identity

        for pid in ids:
            ident = load_identity(certs, pid)
            identities[pid] = SigningIdentity(ident.private_key, ident.certificate, ident.ca_certificate)

    outcome, seconds = run_on_hosts(hosts, transport, workdir, deadline_s, run, on_certificates=load_identities)
    by_id = dict(zip(ids, sessions))
    return SimulatedRelease(outcome, recorder.transcript(), tuple(by_id[p] for p in outcome.parties), seconds)
