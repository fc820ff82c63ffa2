"""Simulating all data owners in one process, over either transport.

``simulate`` splits nothing itself: it takes the public rows and the private blocks,
builds one ``PartySession`` per block, connects to them in-process or over real gRPC
servers on loopback (threads of this process, mutual TLS with fresh certificates in a
temporary directory), runs the protocol and, since it holds every block, audits the
leakage statement against the truth.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from coordinator.leakage import audit_entry, check_against_truth
from coordinator.protocol import SessionConfig, SessionOutcome, run_secure_lp
from coordinator.transport import InProcessLink, PartyLink
from party.session import PartySession
from solvers.errors import ConfigError
from solvers.lp import LinearProgram
from solvers.lp.partition import ColumnBlock, PublicRows

TRANSPORTS = ("inprocess", "grpc")


def party_seed(seed: int | str | None, party_id: str) -> str | None:
    """Each simulated party's own seed in reproducible mode (None: fresh entropy)."""
    return None if seed is None else f"{seed}/{party_id}"


@contextlib.contextmanager
def simulated_links(blocks: Sequence[ColumnBlock], transport: str, *, seed: int | str | None = None,
                    deadline_s: float = 120.0, insecure: bool = False) -> Iterator[list[PartyLink]]:
    """Links to one simulated party per block; servers and channels are closed on exit."""
    sessions = [PartySession(b, seed=party_seed(seed, b.party_id)) for b in blocks]
    if transport == "inprocess":
        yield [InProcessLink(s) for s in sessions]
        return
    if transport != "grpc":
        raise ConfigError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    from coordinator.grpc_link import local_grpc_links  # lazy: gRPC only when asked for

    with tempfile.TemporaryDirectory(prefix="securelp-sim-") as tmp, \
            local_grpc_links(sessions, Path(tmp), deadline_s=deadline_s, insecure=insecure) as links:
        yield links


def simulate(public: PublicRows, blocks: Sequence[ColumnBlock], config: SessionConfig, *, transport: str = "inprocess",
             seed: int | str | None = None, central: LinearProgram | None = None,
             insecure: bool = False) -> tuple[SessionOutcome, dict[str, dict[str, Any]]]:
    """Run one session with simulated parties; returns the outcome and per-party audits."""
    with simulated_links(blocks, transport, seed=seed, deadline_s=config.deadline_s, insecure=insecure) as links:
        outcome = run_secure_lp(public, links, config, central=central)
    by_id = {b.party_id: b for b in blocks}
    audits = {e.party_id: check_against_truth(audit_entry(e), by_id[e.party_id], config.bounds_mode)
              for e in outcome.transcript}
    return outcome, audits
