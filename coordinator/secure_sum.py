"""The coordinator's driver of the example protocol ``secure-sum`` (``securelp.party.secure_sum``).

Bonawitz et al. (CCS 2017) pairwise masking, without dropout recovery: (1) hello to every party
(each reports a fresh X25519 public key, bound to its certificate when it has a TLS identity);
(2) share: every party gets every participant's key and answers with its masked vector in
Z_2^64; (3) the coordinator adds the shares (the masks cancel) and closes the session, telling
every party the sum. A party lost after the hello ends the session (naming it); nothing is
unmasked, since the shares received sum to the survivors' vectors plus the lost party's masks.

The driver uses only ``ProtocolLink.call`` and the helpers every driver uses
(``securelp.coordinator.drive``): it runs unchanged in-process and over gRPC in both directions.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from securelp.coordinator.drive import close_all, each
from securelp.coordinator.transport import ProtocolLink, close_session
from securelp.party import aggregation as agg
from securelp.party.secure_sum import PROTOCOL_VERSION, decode_vector, encode_vector
from securelp.protos import secure_sum_pb2 as spb
from securelp.solvers.errors import ConfigError, ProtocolError


@dataclass(frozen=True, eq=False)
class SumOutcome:
    """The result of one ``secure-sum`` session, as the coordinator knows it."""

    session_id: str
    total: np.ndarray  # int64
    parties: tuple[str, ...]
    keys_bound: bool
    shares: tuple[np.ndarray, ...]  # what the coordinator received (uint64), for audits
    bytes_sent: tuple[int, ...]  # per party, by the party


def run_secure_sum(links: Sequence[ProtocolLink], length: int, *, session_id: str = "") -> SumOutcome:
    """Run one ``secure-sum`` session of vectors of ``length`` over ``links`` (one per party)."""
    if len(links) < 2:
        raise ConfigError("a secure sum needs two or more parties (one party's share would be its vector)")
    sid = session_id or secrets.token_hex(8)
    pool = ThreadPoolExecutor(max_workers=min(32, len(links)), thread_name_prefix="secure-sum")
    try:
        hello = spb.SumHelloRequest(session_id=sid, protocol_version=PROTOCOL_VERSION, length=length)
        hellos = each(links, lambda link: link.call("hello", hello), "hello", pool)
        for link, h in zip(links, hellos):
            if h.party_id != link.party_id:
                raise ProtocolError(f"party {link.party_id} introduced itself as {h.party_id!r}")
            if h.protocol_version != PROTOCOL_VERSION:
                raise ProtocolError(f"party {link.party_id} answered in secure-sum version {h.protocol_version}")
        peers = [spb.SumPeer(party_id=h.party_id, public_key=h.public_key, certificate=h.certificate,
                             signature=h.signature) for h in hellos]
        request = spb.SumShareRequest(session_id=sid, peers=peers)
        replies = each(links, lambda link: link.call("share", request), "share", pool)
        shares = tuple(decode_vector(r.share, length, f"share: party {link.party_id}")
                       for link, r in zip(links, replies))
        total = agg.sum_shares(list(shares)).view(np.int64)
    except BaseException as exc:
        aborted = spb.SumClose(session_id=sid, reason=f"aborted: {exc.__class__.__name__}")
        close_all(links, lambda link: close_session(link, aborted), pool)
        raise
    else:
        done = spb.SumClose(session_id=sid, reason="done", total=encode_vector(total))
        close_all(links, lambda link: close_session(link, done), pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return SumOutcome(sid, total, tuple(link.party_id for link in links),
                      all(h.certificate and h.signature for h in hellos), shares,
                      tuple(link.bytes_sent for link in links))
