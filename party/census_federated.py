"""The party's side of the protocol ``census-federated``: a regional census release with distributed
exact noise (its coordinator: ``securelp.coordinator.census_federated``; docs/howto/federated-census.md).

A party is one region at the *party level* l* of a public hierarchy (a state) and holds the
group-size counts n_r[s] (s = 1..N) of its region and of every region below it. The release is
the one of Fioretto, Van Hentenryck and Zhu (*Differential Privacy of Hierarchical Census Data:
An Optimization Approach*, AIJ 2021): every region's values (counts, or cumulative counts for
cdp/cqp/chain) plus two-sided geometric noise of scale b = sensitivity * L / eps, then a
consistent post-processing. Here no process sees a true count it does not own
(:mod:`securelp.solvers.hierarchy.federated`):

1. hello: the party reports its region id and the shape of its subtree (ids and parents: public
   geography) and a fresh X25519 key (bound to its TLS certificate when it has one), as in
   ``secure-sum``;
2. measure: the coordinator sends the mechanism, eps, the depth L, the party level, the spanning
   regions (the levels above l*, each with its parent and its number p_r of parties below) and
   every participant's key. The party computes, with
   :func:`securelp.solvers.hierarchy.federated.party_values`, the noisy values of its own regions
   (the whole noise, added by itself: they go in the clear) and its spanning vector: for each
   spanning ancestor r its region's values plus one share ``X - X'`` (``X, X'`` ~ NB(1/p_r, q))
   of r's noise, zero rows elsewhere, then its number of groups. The vector goes out masked with
   the pairwise masks of Bonawitz et al. (CCS 2017; ``securelp.party.aggregation``): the
   coordinator learns only the sum over all parties, i.e. ``true + one exact two-sided geometric
   draw`` for each spanning region, and the public total G;
3. release: the coordinator returns the released counts of the party's own regions and the
   public accounting;
4. close.

Every noisy value thus has the distribution it has in the single-process release, and the
release is eps-DP against the coordinator (and against each party, which sees only its own
counts and the release). A party's share alone is not DP noise: it is never sent unmasked.
Nothing private is logged: session ids, region counts and sizes only.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.party import aggregation as agg
from securelp.party.runtime import HostedProtocol, Method, ProtocolSpec
from securelp.protos import census_federated_pb2 as cpb
from securelp.solvers.errors import InputError, ProtocolError, SecureLPError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.federated import RegionalSplit, party_values
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.hierarchy.noise import parse_epsilon
from securelp.solvers.randomness import SecureRandom

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CENSUS_FEDERATED = ProtocolSpec(
    name="census-federated", version=PROTOCOL_VERSION, min_version=PROTOCOL_VERSION,
    methods={"hello": Method(cpb.CensusHelloRequest, cpb.CensusHelloReply),
             "measure": Method(cpb.CensusMeasureRequest, cpb.CensusMeasurement),
             "release": Method(cpb.CensusRelease, cpb.CensusReleaseReply),
             "close": Method(cpb.CensusClose, cpb.CensusCloseReply)})


def encode_int64(values: np.ndarray) -> bytes:
    """int64 values, row-major, little-endian."""
    return np.ascontiguousarray(values, dtype=np.int64).astype("<i8").tobytes()


def decode_int64(data: bytes, shape: tuple[int, int], what: str) -> np.ndarray:
    """Little-endian int64 bytes of ``shape`` (a ``ProtocolError`` naming ``what`` otherwise)."""
    if len(data) != 8 * shape[0] * shape[1]:
        raise ProtocolError(f"{what}: expected {shape[0]} x {shape[1]} int64 values, got {len(data)} bytes")
    return np.frombuffer(data, dtype="<i8").astype(np.int64).reshape(shape)


@dataclass(frozen=True, eq=False)
class RegionalCounts:
    """One party's data: its region's subtree and the true counts of every region in it.

    Attributes
    ----------
    region_ids : its regions, its party region first, parents before children.
    parent_ids : the parent of each (the first: the spanning region above it, or "" if unknown).
    levels : each region's level in the whole hierarchy (the first: the party level).
    counts : (regions, N) int64 true counts n_r[s], s = 1..N.
    """

    region_ids: tuple[str, ...]
    parent_ids: tuple[str, ...]
    levels: tuple[int, ...]
    counts: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.region_ids)
        if not n or len(self.parent_ids) != n or len(self.levels) != n:
            raise InputError("a party's regions, parents and levels must be non-empty lists of one length")
        c = np.asarray(self.counts)
        if c.ndim != 2 or c.shape[0] != n or not np.issubdtype(c.dtype, np.integer):
            raise InputError(f"a party's counts must be integers of shape ({n}, N), got {c.dtype} {c.shape}")
        if c.size and int(c.min()) < 0:
            raise InputError("a party's counts must be non-negative")

    @property
    def region_id(self) -> str:
        return self.region_ids[0]

    @property
    def max_size(self) -> int:
        return int(np.asarray(self.counts).shape[1])

    @property
    def groups(self) -> int:
        """Its number of groups (its region's counts summed over sizes)."""
        return int(np.asarray(self.counts)[0].sum())

    @classmethod
    def of_party(cls, data: GroupSizeData, split: RegionalSplit, j: int) -> RegionalCounts:
        """Party ``j``'s data cut from a whole-hierarchy dataset (simulations)."""
        hier = data.hierarchy
        owned = split.owned(j)
        parent = [hier.ids[int(hier.parent[r])] if int(hier.parent[r]) >= 0 else "" for r in owned]
        return cls(tuple(hier.ids[r] for r in owned), tuple(parent), tuple(int(hier.level[r]) for r in owned),
                   np.asarray(data.counts)[owned])

    @classmethod
    def from_subtree(cls, data: GroupSizeData, party_level: int, parent_id: str = "") -> RegionalCounts:
        """A party's data read from a file of its own subtree (its region is the file's root, at
        ``party_level`` of the whole hierarchy; ``parent_id``: the region above it, if known)."""
        hier = data.hierarchy
        parent = [parent_id] + [hier.ids[int(hier.parent[r])] for r in range(1, hier.size)]
        return cls(hier.ids, tuple(parent), tuple(int(lv) + party_level - 1 for lv in hier.level),
                   np.asarray(data.counts))


def read_subtree_csv(path: str | os.PathLike[str], max_size: int) -> RegionalCounts:
    """A party's own data from a counts file of its subtree (``level,region_id,parent_id,size,count``,
    the rows of the whole census file for its region and every region below it: levels and parent
    ids as in the whole hierarchy, its region's parent naming the region above it).

    The rows are checked as ``securelp census release`` checks a whole file (children sum to their
    parent for every size, one top region, equal leaf depth), groups larger than ``max_size`` (the
    public N) counted at N.

    Raises
    ------
    InputError
        A malformed file, or one whose regions do not form one subtree (its message names the file).
    """
    import tempfile

    from securelp.solvers.hierarchy.counts_csv import read_counts_csv

    name = str(path)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise InputError(f"{name}: cannot read the party's census file ({exc.strerror})") from None
    if not rows or [c.strip() for c in rows[0]] != ["level", "region_id", "parent_id", "size", "count"]:
        raise InputError(f"{name}: expected the header level,region_id,parent_id,size,count")
    body = [r for r in rows[1:] if r and any(c.strip() for c in r)]
    if any(len(r) != 5 for r in body):
        raise InputError(f"{name}: every row needs 5 fields (level,region_id,parent_id,size,count)")
    ids = {r[1].strip() for r in body}
    tops = {(r[1].strip(), r[2].strip(), r[0].strip()) for r in body if r[2].strip() not in ids}
    if len(tops) != 1:
        raise InputError(f"{name}: a party's file holds one subtree, with one top region (its region); found "
                         f"{len(tops)}: {sorted(t[0] for t in tops)[:5]}")
    ((top, parent, level_text),) = tops
    try:
        level = int(level_text)
        shift = level - 1
        relative = [[str(int(r[0]) - shift), r[1], "" if r[1].strip() == top else r[2], r[3], r[4]] for r in body]
    except ValueError:
        raise InputError(f"{name}: a level is not an integer") from None
    with tempfile.TemporaryDirectory(prefix="securelp-party-") as tmp:  # 0700: the counts are private
        local = os.path.join(tmp, os.path.basename(name) or "counts.csv")
        with open(local, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(rows[0])
            writer.writerows(relative)
        data = read_counts_csv(local, max_size=max_size, top_code=True)
    return RegionalCounts.from_subtree(data, level, parent)


def subtree_hierarchy(counts: RegionalCounts) -> Hierarchy:
    """The party's subtree as a hierarchy of its own (its region the root)."""
    return Hierarchy.from_parents(counts.region_ids, ("", *counts.parent_ids[1:]))


def local_split(spanning: Sequence[cpb.SpanningRegion], ancestors: Sequence[int], party_level: int,
                owned: int) -> RegionalSplit:
    """The party's view of the regional split, enough for ``party_values``: itself as party 0 owning
    ``owned`` regions; each spanning region with ``p_r`` parties below it, party 0 among them exactly
    for the ``ancestors`` positions (the others' indices are placeholders: a party knows only how
    many share each spanning region's noise)."""
    above = set(ancestors)
    under = tuple(tuple(range(int(s.parties))) if pos in above else tuple(range(1, int(s.parties) + 1))
                  for pos, s in enumerate(spanning))
    width = max([int(s.parties) for s in spanning] + [1])
    return RegionalSplit(party_level, tuple(range(width)), np.zeros(owned, dtype=np.int64),
                         tuple(range(len(spanning))), under, tuple(int(s.level) for s in spanning))


class CensusFederatedSession:
    """One party's state machine for one ``census-federated`` session: hello -> measure -> release -> close.

    Parameters
    ----------
    party_id : the party.
    data : its regions and true counts.
    rng : its noise source (None: fresh OS entropy; a seeded one only for reproducible simulations).
    identity : its TLS identity, which binds its key to its certificate and lets it check its peers'.
    """

    def __init__(self, party_id: str, data: RegionalCounts, *, rng: SecureRandom | None = None,
                 identity: agg.SigningIdentity | None = None) -> None:
        self.party_id = party_id
        self.data = data
        self.identity = identity
        self._rng = rng if rng is not None else SecureRandom(None, label=f"census-federated/{party_id}")
        self._lock = threading.Lock()
        self._state = "new"
        self._session_id = ""
        self._keys: agg.AggregationKeyPair | None = None
        self._reply: cpb.CensusHelloReply | None = None
        #: the released counts of its own regions (rows in ``data.region_ids`` order), after release
        self.released: np.ndarray | None = None
        #: the public accounting the coordinator sent with the release
        self.accounting: dict[str, object] | None = None
        self.total: int | None = None
        self.closed = threading.Event()
        self.close_reason = ""

    def bind_identity(self, identity: agg.SigningIdentity) -> None:
        """Use ``identity`` (its TLS certificate and key) to bind its aggregation keys."""
        self.identity = identity

    def handle(self, method: str, request: object) -> object:
        steps: dict[str, Callable[[object], object]] = {
            "hello": self.hello, "measure": self.measure, "release": self.release,  # type: ignore[dict-item]
            "close": self.close}  # type: ignore[dict-item]
        if method not in steps:
            raise ProtocolError(f"party {self.party_id}: census-federated has no method {method!r}")
        return steps[method](request)

    def abandon(self, reason: str) -> None:
        """The coordinator is gone: forget the key and end the session."""
        with self._lock:
            if self._state not in ("closed", "dropped"):
                self._keys = None
                self._state = "dropped"
                self.close_reason = f"dropped: {reason}"
                self.closed.set()

    def _refuse(self, text: str) -> ProtocolError:
        """End the session (its key forgotten) and return the error that says why."""
        self._keys = None
        self._state = "closed"
        self.close_reason = f"refused: {text}"
        self.closed.set()
        return ProtocolError(f"party {self.party_id}: {text}")

    def hello(self, request: cpb.CensusHelloRequest) -> cpb.CensusHelloReply:
        """Step 1: its region and subtree shape, and a fresh key pair for the session."""
        with self._lock:
            me = self.party_id
            if int(request.protocol_version) != PROTOCOL_VERSION:
                raise ProtocolError(f"party {me}: census-federated version {int(request.protocol_version)} is not "
                                    f"supported (this party speaks {PROTOCOL_VERSION})")
            if self._state != "new":
                raise ProtocolError(f"party {me}: second hello in one session")
            if not request.session_id:
                raise ProtocolError(f"party {me}: hello without a session id")
            if int(request.max_size) != self.data.max_size:
                raise self._refuse(f"its counts have sizes 1..{self.data.max_size}, the session releases sizes "
                                   f"1..{int(request.max_size)} (give the party --max-size {int(request.max_size)})")
            self._session_id = request.session_id
            self._keys = agg.AggregationKeyPair(SecureRandom(None).bytes(32))
            reply = cpb.CensusHelloReply(party_id=me, protocol_version=PROTOCOL_VERSION,
                                         region_id=self.data.region_id, subtree_ids=list(self.data.region_ids),
                                         subtree_parents=["", *self.data.parent_ids[1:]],
                                         public_key=self._keys.public_key)
            if self.identity is not None:
                reply.certificate = self.identity.certificate
                reply.signature = agg.sign_key(self.identity, self._session_id, me, reply.public_key)
            self._reply = reply
            self._state = "hello"
            log.info("party %s: session %s: census-federated hello (%d regions, N = %d)", me, self._session_id,
                     len(self.data.region_ids), self.data.max_size)
            return reply

    def _ancestors(self, request: cpb.CensusMeasureRequest) -> list[int]:
        """The positions of its spanning ancestors, walking up from its region's parent."""
        me = self.party_id
        known = self.data.parent_ids[0]
        if known and request.parent_id != known:
            raise self._refuse(f"the coordinator places region {self.data.region_id} under {request.parent_id!r}, "
                               f"its data says under {known!r}")
        where = {s.region_id: pos for pos, s in enumerate(request.spanning)}
        if len(where) != len(request.spanning):
            raise self._refuse("the spanning regions repeat an id")
        chain: list[int] = []
        current = request.parent_id
        while current:
            pos = where.get(current)
            if pos is None or pos in chain:
                raise self._refuse(f"region {current!r} above region {self.data.region_id} is not a spanning region "
                                   f"of the session (or its parents form a cycle)")
            chain.append(pos)
            current = request.spanning[pos].parent_id
        if not chain:
            raise self._refuse(f"region {self.data.region_id} has no spanning region above it")
        if [int(request.spanning[pos].level) for pos in chain] != list(range(int(request.party_level) - 1, 0, -1)):
            raise self._refuse(f"the spanning regions above region {self.data.region_id} are not at the levels "
                               f"{int(request.party_level) - 1}..1")
        for pos in chain:
            if int(request.spanning[pos].parties) < 1:
                raise self._refuse(f"spanning region {request.spanning[pos].region_id!r} is said to have no party "
                                   f"below it, yet party {me} is")
        return chain

    def measure(self, request: cpb.CensusMeasureRequest) -> cpb.CensusMeasurement:
        """Step 2: its own regions' noisy values, and its masked spanning vector."""
        with self._lock:
            me = self.party_id
            if self._state != "hello" or request.session_id != self._session_id:
                raise ProtocolError(f"party {me}: measure requested in state {self._state} for session "
                                    f"{request.session_id!r}")
            assert self._keys is not None and self._reply is not None
            try:
                mech.check_mechanism(request.mechanism)
                eps = parse_epsilon(request.eps)
            except SecureLPError as exc:
                raise self._refuse(f"the session's mechanism or eps is not acceptable: {exc}") from None
            depth, level = int(request.depth), int(request.party_level)
            if level != self.data.levels[0] or max(self.data.levels) != depth or not 2 <= level <= depth:
                raise self._refuse(f"its region is at level {self.data.levels[0]} with leaves at level "
                                   f"{max(self.data.levels)}; the session has party level {level} and depth {depth}")
            ancestors = self._ancestors(request)
            ids = [p.party_id for p in request.peers]
            if len(set(ids)) != len(ids) or len(ids) < 2:
                raise self._refuse(f"secure aggregation needs two or more distinct participants, got {len(ids)}")
            mine = [p for p in request.peers if p.party_id == me]
            if not mine or mine[0].public_key != self._reply.public_key:
                raise self._refuse("the relayed keys do not include its own key as it reported it")
            pairs = []
            for peer in request.peers:
                if peer.party_id == me:
                    continue
                if self.identity is not None:
                    agg.verify_binding(self.identity.ca_certificate, self._session_id, peer.party_id,
                                       peer.public_key, peer.certificate, peer.signature, who=f"party {me}")
                key = self._keys.pair_key(peer.public_key, self._session_id, me, peer.party_id)
                pairs.append((key, 1 if me < peer.party_id else -1))
            split = local_split(request.spanning, ancestors, level, len(self.data.region_ids))
            values = party_values(request.mechanism, Fraction(eps), split, depth, 0, self.data.counts, self._rng)
            own = encode_int64(values.own)
            flat = np.concatenate([values.spanning.reshape(-1),
                                   np.array([self.data.groups], dtype=np.int64)]).view(np.uint64)
            del values  # the unmasked spanning vector is masked in place and never kept
            agg.mask_shares(flat, pairs)
            self._keys = None
            self._state = "measured"
            log.info("party %s: session %s: measured %d own regions, %d spanning regions (%d above it)", me,
                     self._session_id, len(self.data.region_ids), len(request.spanning), len(ancestors))
            return cpb.CensusMeasurement(party_id=me, own=own, masked=flat.astype("<u8").tobytes())

    def release(self, request: cpb.CensusRelease) -> cpb.CensusReleaseReply:
        """Step 3: the released counts of its own regions, and the public accounting."""
        with self._lock:
            me = self.party_id
            if self._state != "measured" or request.session_id != self._session_id:
                raise ProtocolError(f"party {me}: release in state {self._state} for session {request.session_id!r}")
            shape = (len(self.data.region_ids), self.data.max_size)
            self.released = decode_int64(request.counts, shape, f"party {me}: released counts")
            try:
                self.accounting = json.loads(request.accounting_json) if request.accounting_json else {}
            except ValueError:
                raise ProtocolError(f"party {me}: the release's accounting is not JSON") from None
            self.total = int(request.total)
            self._state = "released"
            return cpb.CensusReleaseReply(party_id=me)

    def close(self, request: cpb.CensusClose) -> cpb.CensusCloseReply:
        """Step 4: the session is over."""
        with self._lock:
            if self._state != "dropped":
                self.close_reason = request.reason
                self._keys = None
                self._state = "closed"
                self.closed.set()
            return cpb.CensusCloseReply(party_id=self.party_id)


def hosted_census_federated(party_id: str, data: RegionalCounts, *, identity: agg.SigningIdentity | None = None,
                            seed: int | str | None = None) -> HostedProtocol:
    """``census-federated`` as a party serves it: a fresh :class:`CensusFederatedSession` (fresh key,
    fresh noise) per session; ``seed`` only for reproducible simulations (NOT private)."""
    return HostedProtocol(CENSUS_FEDERATED, lambda session_id: CensusFederatedSession(
        party_id, data, identity=identity,
        rng=None if seed is None else SecureRandom(f"{seed}/{session_id}", label=f"census-federated/{party_id}")))
