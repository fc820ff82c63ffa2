"""The collector's driver of the protocol ``ldp-collect`` (its client: ``securelp.party.ldp_collect``).

Local-DP frequency estimation as X. Gu, M. Li, Y. Cao, L. Xiong (*Supporting both range queries
and frequency estimation with local differential privacy*, IEEE CNS 2019) describe it: every user
perturbs its value on its own device with the public mechanism P, the collector counts the reports
(``y``: their empirical distribution, ``E[y] = P^T c`` for the true frequencies c) and estimates
``c_hat`` solving ``P^T c_hat = y`` with the mechanism's own solver (``mechanism.estimate``: a
factorization or a preconditioned conjugate-gradient solve, never an explicit inverse); ``c_hat``
is unbiased, with the MSE that ``securelp ldp`` reports as its theory.

1. hello to every client (the mechanism's parameters and fingerprint); each answers with its
   number of users;
2. collect: each client is asked for chunks of at most ``chunk`` reports until its last; the
   collector adds each chunk into its histogram at once (it keeps counts, not reports);
3. close; the estimate.

The collector receives reports only: no value, no user id (a report's position in its chunk is the
only order). The driver uses only ``ProtocolLink.call`` and the helpers every driver uses: it runs
unchanged in-process and over gRPC in both directions.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from securelp.coordinator.drive import close_all, each, run_on_hosts
from securelp.coordinator.transport import ProtocolLink, close_session
from securelp.party.ldp_collect import PROTOCOL_VERSION, MechanismSpec, fingerprint, unpack_reports
from securelp.protos import ldp_collect_pb2 as lpb
from securelp.solvers.errors import ConfigError, ProtocolError

log = logging.getLogger(__name__)

#: reports per collect call unless told otherwise (256 KiB of one-byte reports)
DEFAULT_CHUNK = 1 << 18


@dataclass(frozen=True, eq=False)
class CollectOutcome:
    """One ``ldp-collect`` session as the collector knows it.

    Attributes
    ----------
    histogram : reports per domain value (all clients).
    estimate : the estimated value frequencies (sum 1; entries may be negative).
    users : reports received, per client in ``parties`` order.
    bytes_sent, bytes_received : payload bytes per client (its view).
    phase_s : seconds of hello, collect, estimate, close.
    """

    session_id: str
    spec: MechanismSpec
    parties: tuple[str, ...]
    histogram: np.ndarray
    estimate: np.ndarray
    users: tuple[int, ...]
    chunks: int
    bytes_sent: tuple[int, ...]
    bytes_received: tuple[int, ...]
    phase_s: dict[str, float] = field(default_factory=dict)

    @property
    def total_users(self) -> int:
        return int(sum(self.users))


def run_ldp_collect(links: Sequence[ProtocolLink], spec: MechanismSpec, mechanism: Any, *,
                    chunk: int = DEFAULT_CHUNK, session_id: str = "") -> CollectOutcome:
    """Run one ``ldp-collect`` session over ``links`` (one per client).

    Parameters
    ----------
    spec : the public mechanism's parameters; ``mechanism`` : the collector's build of it.
    chunk : the most reports one collect call asks for.

    Raises
    ------
    ConfigError
        No client, or a chunk outside 1..2^22.
    ProtocolError, TransportError
        A client refused (another mechanism), sent more or fewer reports than it announced, or was lost.
    """
    if not links:
        raise ConfigError("a collection needs at least one client")
    if not 1 <= chunk <= 1 << 22:
        raise ConfigError(f"the chunk must hold 1..{1 << 22} reports, got {chunk}")
    sid = session_id or secrets.token_hex(8)
    m = spec.m
    phases: dict[str, float] = {}
    chunks = [0] * len(links)
    pool = ThreadPoolExecutor(max_workers=min(32, len(links)), thread_name_prefix="ldp-collect")
    try:
        t0 = time.perf_counter()
        hello = lpb.LdpHelloRequest(session_id=sid, protocol_version=PROTOCOL_VERSION, mechanism=spec.name,
                                    eps=spec.eps, rows=spec.rows, cols=spec.cols, cell_km=spec.cell_km,
                                    fingerprint=fingerprint(mechanism))
        hellos = each(links, lambda link: link.call("hello", hello), "hello", pool)
        for link, h in zip(links, hellos):
            if h.party_id != link.party_id or h.protocol_version != PROTOCOL_VERSION:
                raise ProtocolError(f"party {link.party_id} answered hello as {h.party_id!r}, version "
                                    f"{h.protocol_version}")
        phases["hello"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        request = lpb.LdpCollectRequest(session_id=sid, max_reports=chunk)

        def collect(link: ProtocolLink) -> np.ndarray:
            k = links.index(link)
            announced = int(hellos[k].users)
            counts = np.zeros(m, dtype=np.int64)
            got = 0
            last = announced == 0
            while not last:
                reply = link.call("collect", request)
                reports = unpack_reports(reply.reports, int(reply.width), m, f"collect: party {link.party_id}")
                counts += np.bincount(reports, minlength=m)
                got += reports.size
                chunks[k] += 1
                last = bool(reply.last)
                if got > announced or (not last and reports.size == 0):
                    raise ProtocolError(f"collect: party {link.party_id} sends more reports than the {announced} "
                                        "users it announced (or an empty chunk before its last)")
            if got != announced:
                raise ProtocolError(f"collect: party {link.party_id} sent {got} reports for {announced} users")
            return counts

        histograms = each(links, collect, "collect", pool)
        phases["collect"] = time.perf_counter() - t0
        histogram = np.sum(histograms, axis=0)
        total = int(histogram.sum())
        t0 = time.perf_counter()
        if total == 0:
            raise ProtocolError("the clients announced no users: nothing to estimate")
        estimate = mechanism.estimate(histogram / total)
        phases["estimate"] = time.perf_counter() - t0
    except BaseException as exc:
        aborted = lpb.LdpClose(session_id=sid, reason=f"aborted: {exc.__class__.__name__}")
        close_all(links, lambda link: close_session(link, aborted), pool)
        raise
    else:
        t0 = time.perf_counter()
        close_all(links, lambda link: close_session(link, lpb.LdpClose(session_id=sid, reason="done")), pool)
        phases["close"] = time.perf_counter() - t0
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    log.info("ldp-collect session %s: %d clients, %d reports, %d chunks", sid, len(links), total, sum(chunks))
    return CollectOutcome(sid, spec, tuple(link.party_id for link in links), histogram, np.asarray(estimate),
                          tuple(int(h.users) for h in hellos), sum(chunks), tuple(link.bytes_sent for link in links),
                          tuple(link.bytes_received for link in links), phases)


@dataclass(frozen=True, eq=False)
class SimulatedCollection:
    outcome: CollectOutcome
    transcript: Any
    sessions: tuple[Any, ...]
    seconds: float
    build_s: float


def simulate_collection(values: Sequence[np.ndarray], spec: MechanismSpec, *, transport: str = "inprocess",
                        seed: str | int | None = None, chunk: int = DEFAULT_CHUNK, deadline_s: float = 600.0,
                        transcript_path: str | None = None, workdir: Any = None,
                        record: bool = True) -> SimulatedCollection:
    """Every client simulated in this process (client k holds ``values[k]``), the collection run over
    ``transport`` (``inprocess``, or ``grpc``: a gRPC server per client on 127.0.0.1 with mutual TLS and
    fresh certificates in ``workdir``). ``seed``: reproducible reports (NOT private). ``record``: keep
    the collector's transcript (every report it received)."""
    from securelp.coordinator.transcript import TranscriptRecorder, write_transcript
    from securelp.party.ldp_collect import LDP_COLLECT, LdpCollectSession, MechanismCache
    from securelp.party.runtime import HostedProtocol, PartyHost
    from securelp.solvers.lp.partition import PublicRows
    from securelp.solvers.randomness import SecureRandom

    if transport not in ("inprocess", "grpc"):
        raise ConfigError(f"transport must be inprocess or grpc, got {transport!r}")
    t0 = time.perf_counter()
    cache = MechanismCache()
    mechanism, _ = cache.get(spec)  # the collector's build; the simulated clients share it (public work)
    build_s = time.perf_counter() - t0
    ids = [f"client{k + 1}" for k in range(len(values))]
    root = SecureRandom(seed, label="ldp/collect") if seed is not None else None
    sessions: list[Any] = [None] * len(ids)

    def factory(k: int) -> Any:
        def make(session_id: str) -> LdpCollectSession:
            rng = root.spawn(f"client{k}") if root is not None else None
            sessions[k] = LdpCollectSession(ids[k], values[k], rng=rng, mechanisms=cache)
            return sessions[k]
        return make

    hosts = [PartyHost(pid, [HostedProtocol(LDP_COLLECT, factory(k))]) for k, pid in enumerate(ids)]
    recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0), name=f"ldp-collect {spec.name}"))

    def run(connections: Sequence[Any]) -> CollectOutcome:
        links = [ProtocolLink(c, LDP_COLLECT, deadline_s=deadline_s) for c in connections]
        if record or transcript_path is not None:
            links = [recorder.wrap(link) for link in links]  # type: ignore[misc]
        try:
            return run_ldp_collect(links, spec, mechanism, chunk=chunk)
        finally:
            if transcript_path is not None:
                write_transcript(recorder.transcript(), transcript_path)

    outcome, seconds = run_on_hosts(hosts, transport, workdir, deadline_s, run)
    return SimulatedCollection(outcome, recorder.transcript() if record else None, tuple(sessions), seconds, build_s)
