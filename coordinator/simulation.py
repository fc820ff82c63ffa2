"""Simulating all data owners in one process, over either transport.

``simulate`` splits nothing itself: it takes the public rows and the private blocks,
builds one ``PartySession`` per block, connects to them in-process or over real gRPC
servers on loopback (threads of this process, mutual TLS with fresh certificates in a
temporary directory), runs the protocol with every message recorded (the transcript), runs the
attacks of :mod:`securelp.coordinator.audit` on the transcript and, since it holds every block,
evaluates them against the truth (rows holding one nonzero in the whole LP are assumed known for
the known-row attacks, reported apart).

The simulated parties enforce a ``securelp.party.policy.PartyPolicy`` like ``securelp party``
does, with the same default (monomial bounds only, x_j kept). ``securelp solve`` and ``securelp
demo`` play every data owner themselves, so they give their parties :func:`owners_consent`: the
policy of owners who agree to exactly what the session asks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from securelp.coordinator import sizing
from securelp.coordinator.audit import (
    DEFAULT_SESSION_BUDGET_S,
    SessionAudit,
    Truth,
    audit_transcript,
    known_rows_from_truth,
)
from securelp.coordinator.audit.view import own_product
from securelp.coordinator.exit_cleanups import private_tempdir
from securelp.coordinator.protocol import SessionConfig, SessionOutcome, run_secure_lp, session_k
from securelp.coordinator.shaping import LinkShape
from securelp.coordinator.sizing import session_memory
from securelp.coordinator.transcript import Transcript, run_recorded
from securelp.coordinator.transport import InProcessLink, PartyLink
from securelp.party.policy import DEFAULT_POLICY, PartyPolicy
from securelp.party.session import PartySession
from securelp.protos.stream import DEFAULT_KEEPALIVE_S
from securelp.solvers.errors import ConfigError, ResourceError
from securelp.solvers.lp import LinearProgram
from securelp.solvers.lp.partition import ColumnBlock, PublicRows
from securelp.solvers.resources import memory_shortfall

TRANSPORTS = ("inprocess", "grpc")
#: who dials whom over gRPC: the coordinator the parties (dial-in), or the parties the coordinator (dial-out)
DIRECTIONS = ("dial-in", "dial-out")


def _mask_sizes(blocks: Sequence[ColumnBlock], config: SessionConfig) -> tuple[list[int], list[int]]:
    """Per party: the dense-masked columns and the bound rows it sends."""
    rows_mode = config.bounds_mode == "rows"
    n_dense, n_bound_rows = [], []
    for b in blocks:
        bounded = int(np.count_nonzero(b.bounded_mask()))
        n_dense.append(b.n_cols if rows_mode else b.n_cols - bounded)
        n_bound_rows.append(bounded if rows_mode else 0)
    return n_dense, n_bound_rows


def estimate_session_memory(public: PublicRows, blocks: Sequence[ColumnBlock], config: SessionConfig) -> float:
    """:func:`securelp.coordinator.sizing.session_memory` of a session of these blocks with this configuration."""
    n_dense, n_bound_rows = _mask_sizes(blocks, config)
    k, _ = session_k(sum(n_dense), config.k)
    return session_memory(public.n_rows, n_dense, n_bound_rows, k, sum(int(b.A.nnz) for b in blocks))


def check_session_fits(public: PublicRows, blocks: Sequence[ColumnBlock], config: SessionConfig) -> int:
    """Refuse, before anything is allocated, a session whose ``k`` the protocol cannot carry or whose
    run would not fit in memory; returns the k the session will use.

    Raises
    ------
    InputError
        ``--k`` above :data:`securelp.coordinator.sizing.MAX_K` (k < n is refused by the protocol, exit 4).
    ResourceError
        The estimate of :func:`securelp.coordinator.sizing.session_memory` exceeds
        :data:`~securelp.coordinator.sizing.MEMORY_SHARE` of the available memory, a party's mask exceeds
        what a party accepts (8 GiB), or a party's masked block exceeds what one message carries
        (2 GiB).
    """
    m = public.n_rows
    n_dense, n_bound_rows = _mask_sizes(blocks, config)
    k, what = session_k(sum(n_dense), config.k)
    sizing.check_k(what, k)
    if not sum(n_dense):
        return k  # no dense mask: k is not used
    need = session_memory(m, n_dense, n_bound_rows, k, sum(int(b.A.nnz) for b in blocks))
    short = memory_shortfall(need, sizing.available_memory(), sizing.MEMORY_SHARE)
    if short:
        raise ResourceError(f"{sizing.describe(what, m, n_dense, n_bound_rows)} would need about {short}")
    sizing.check_messages(what, [b.party_id for b in blocks], m, n_dense, n_bound_rows, k)
    return k


def owners_consent(config: SessionConfig) -> PartyPolicy:
    """The policy of simulated owners who agree to what ``config`` asks: its bounds mode (monomial is
    always allowed) and revealing x_j when it asks for it."""
    return PartyPolicy(frozenset({"monomial", config.bounds_mode}), reveal=config.reveal)


def party_seed(seed: int | str | None, party_id: str) -> str | None:
    """Each simulated party's own seed in reproducible mode (None: fresh entropy)."""
    return None if seed is None else f"{seed}/{party_id}"


@contextlib.contextmanager
def simulated_links(blocks: Sequence[ColumnBlock], transport: str, *, seed: int | str | None = None,
                    deadline_s: float = 120.0, insecure: bool = False,
                    policy: PartyPolicy = DEFAULT_POLICY, keepalive_s: float = DEFAULT_KEEPALIVE_S,
                    direction: str = "dial-in",
                    link_shapes: Mapping[str, LinkShape] | None = None) -> Iterator[list[PartyLink]]:
    """Links to one simulated party per block, each with ``policy``; servers and channels are closed
    on exit."""
    sessions = [PartySession(b, seed=party_seed(seed, b.party_id), policy=policy) for b in blocks]
    with links_to(sessions, transport, deadline_s=deadline_s, insecure=insecure, keepalive_s=keepalive_s,
                  direction=direction, link_shapes=link_shapes) as links:
        yield links


@contextlib.contextmanager
def links_to(sessions: Sequence[PartySession], transport: str, *, deadline_s: float = 120.0,
             insecure: bool = False, keepalive_s: float = DEFAULT_KEEPALIVE_S,
             direction: str = "dial-in",
             link_shapes: Mapping[str, LinkShape] | None = None) -> Iterator[list[PartyLink]]:
    """Links to these party sessions, in-process or through gRPC on loopback (closed on exit): party
    servers the coordinator dials (``direction="dial-in"``), or a listening coordinator the parties
    dial (``"dial-out"``); over gRPC, each party ``link_shapes`` shapes behind its shaped link."""
    if transport == "inprocess":
        if link_shapes and any(not shape.is_plain for shape in link_shapes.values()):
            raise ConfigError("shaped links (--link) need --transport grpc: in-process parties have no network")
        yield [InProcessLink(s) for s in sessions]
        return
    if transport != "grpc":
        raise ConfigError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if direction not in DIRECTIONS:
        raise ConfigError(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    from securelp.coordinator.grpc_link import local_grpc_links  # lazy: gRPC only when asked for
    from securelp.coordinator.listener import local_dialout_links

    local = local_grpc_links if direction == "dial-in" else local_dialout_links
    # removed on every exit, SIGTERM included (securelp.coordinator.cli): it holds every party's private key
    with private_tempdir("securelp-sim-") as tmp, \
            local(sessions, tmp, deadline_s=deadline_s, insecure=insecure, keepalive_s=keepalive_s,
                  link_shapes=link_shapes) as links:
        yield links


def audit_simulation(transcript: Transcript, blocks: Sequence[ColumnBlock], *,
                     budget_s: float | None = DEFAULT_SESSION_BUDGET_S, seed: int | None = None,
                     sessions: Sequence[PartySession] = ()) -> SessionAudit:
    """The transcript's attacks, evaluated against the blocks (a simulation holds them all); the
    known-row attacks assume the rows with a single nonzero in the whole LP known. ``sessions``: the
    simulated parties; those that recorded what they aggregated bring it to the collusion attacks
    (a colluding party knows its own dense product)."""
    truth = Truth.of(blocks, "simulation")
    known = known_rows_from_truth(truth, [b.party_id for b in blocks], "singletons")
    own = {s.party_id: own_product(s.party_id, *s.contribution) for s in sessions if s.contribution is not None}
    return audit_transcript(transcript, truth=truth, known_rows=known, budget_s=budget_s, seed=seed,
                            own_products=own or None)


def simulate(public: PublicRows, blocks: Sequence[ColumnBlock], config: SessionConfig, *, transport: str = "inprocess",
             seed: int | str | None = None, central: LinearProgram | None = None, insecure: bool = False,
             transcript_path: str | None = None, audit_budget_s: float | None = DEFAULT_SESSION_BUDGET_S,
             policy: PartyPolicy = DEFAULT_POLICY, sessions_out: list[PartySession] | None = None,
             keepalive_s: float = DEFAULT_KEEPALIVE_S, direction: str = "dial-in",
             link_shapes: Mapping[str, LinkShape] | None = None) -> tuple[SessionOutcome, SessionAudit]:
    """Run one session with simulated parties, each enforcing ``policy`` (default: the default of
    ``securelp party``; :func:`owners_consent` for owners who agree to what ``config`` asks); returns
    the outcome and the audit of its transcript (evaluated against the blocks). ``transcript_path``:
    also write the transcript file there. ``sessions_out``: a list that receives the simulated parties
    (each holds what it decoded, ``PartySession.outcome``, and its own result, ``PartySession.result()``).
    Over gRPC: ``direction`` (``dial-in``, the coordinator dials the parties, or ``dial-out``, the
    parties dial a listening coordinator), the runtime's ``keepalive_s`` and each party's shaped link
    (``link_shapes``, from ``securelp.coordinator.shaping.parse_link_specs``)."""
    sessions = [PartySession(b, seed=party_seed(seed, b.party_id), policy=policy,
                             record_contribution=config.secure_aggregation) for b in blocks]
    if sessions_out is not None:
        sessions_out.extend(sessions)
    with links_to(sessions, transport, deadline_s=config.deadline_s, insecure=insecure, keepalive_s=keepalive_s,
                  direction=direction, link_shapes=link_shapes) as links:
        outcome, transcript = run_recorded(public, links, config, central=central, path=transcript_path,
                                           run=run_secure_lp)
    return outcome, audit_simulation(transcript, blocks, budget_s=audit_budget_s, sessions=sessions)
