"""Simulating all data owners in one process, over either transport.

``simulate`` splits nothing itself: it takes the public rows and the private blocks,
builds one ``PartySession`` per block, connects to them in-process or over real gRPC
servers on loopback (threads of this process, mutual TLS with fresh certificates in a
temporary directory), runs the protocol and, since it holds every block, audits the
leakage statement against the truth.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from coordinator.exit_cleanups import private_tempdir
from coordinator.leakage import audit_entry, check_against_truth
from coordinator.protocol import K_MARGIN, SessionConfig, SessionOutcome, run_secure_lp
from coordinator.transport import InProcessLink, PartyLink
from party.session import MAX_MASK_DOUBLES, PartySession
from protos.codec import MAX_PAYLOAD_BYTES  # also protobuf's own 2 GiB limit (a larger block: EncodeError)
from solvers.errors import ConfigError, InputError, ResourceError
from solvers.lp import LinearProgram
from solvers.lp.partition import ColumnBlock, PublicRows
from solvers.resources import available_memory, memory_shortfall

TRANSPORTS = ("inprocess", "grpc")

#: the largest k the protocol carries: the solution notice holds u (k doubles) in one payload of at
#: most 2 GiB (``protos.codec.MAX_PAYLOAD_BYTES``); the MaskRequest's k is a uint64 (``--k 1e23``
#: failed in protobuf with "Value out of range")
MAX_K = 1 << 28
#: calibrated with ``/usr/bin/time -f %M`` on ``securelp solve`` (HiGHS 1.16, 3 parties): peak
#: bytes per k were 13.1 KB (100 x 30 free columns), 56.8 KB (400 x 30 free; 1 to 6 parties: 2
#: doubles more per party row) and 8.5 KB (afiro, --bounds rows: 27 + 32 rows). Model: per k,
#: ``8 * (LP_COPIES * m_t + PARTY_COPIES * (p m + n_b) + 2 n_d)`` bytes, with m_t the rows of the
#: coordinator's LP (m, plus the bound rows n_b in rows mode: the coordinator's sum, its CSC form,
#: HiGHS's copies and factors: 10.4 to 14.3 doubles measured) and the parties' masked products
#: and bound rows (product, message, parsed copy: 2 measured), B itself (n_d dense columns).
#: LP_COPIES has a 50% margin over the largest coefficient measured. (A reading of 508 MB for the
#: afiro session, 345 MB alone, came from a child of the test suite: its ``ru_maxrss`` starts from
#: its parent's peak; ``solvers.resources.peak_rss`` reads the child's own, 327 to 347 MB.)
LP_COPIES = 24
PARTY_COPIES = 3
#: bytes of the interpreter, numpy, HiGHS and gRPC before any session (measured: ~90 MB)
BASE_BYTES = 256 << 20
#: share of the available memory a run may plan to use
MEMORY_SHARE = 0.9


def session_memory(m: int, n_dense: list[int], n_bound_rows: list[int], k: int, nnz: int) -> float:
    """Estimated peak bytes of one simulated session (every party, the coordinator and HiGHS in this
    process) with ``n_dense[j]`` dense-masked columns and ``n_bound_rows[j]`` bound rows per party.
    ``nnz``: nonzeros of the original LP (the central comparison, monomial blocks)."""
    k_used = k if sum(n_dense) else 0
    p = len(n_dense)
    n_b = sum(n_bound_rows)
    per_k = 8.0 * (LP_COPIES * (m + n_b) + PARTY_COPIES * (p * m + n_b) + 2 * sum(n_dense))
    return BASE_BYTES + per_k * k_used + 200.0 * (nnz + m + sum(n_dense) + n_b)


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
    """:func:`session_memory` of a session of these blocks with this configuration."""
    n_dense, n_bound_rows = _mask_sizes(blocks, config)
    k = sum(n_dense) + K_MARGIN if config.k is None else int(config.k)
    return session_memory(public.n_rows, n_dense, n_bound_rows, k, sum(int(b.A.nnz) for b in blocks))


def check_session_fits(public: PublicRows, blocks: Sequence[ColumnBlock], config: SessionConfig) -> int:
    """Refuse, before anything is allocated, a session whose ``k`` the protocol cannot carry or whose
    run would not fit in memory; returns the k the session will use.

    Raises
    ------
    InputError
        ``--k`` above :data:`MAX_K` (k < n is refused by the protocol, exit 4).
    ResourceError
        The estimate of :func:`session_memory` exceeds :data:`MEMORY_SHARE` of the available
        memory, a party's mask exceeds what a party accepts (8 GiB), or a party's masked block
        exceeds what one message carries (2 GiB).
    """
    m = public.n_rows
    n_dense, n_bound_rows = _mask_sizes(blocks, config)
    total_dense = sum(n_dense)
    k = total_dense + K_MARGIN if config.k is None else int(config.k)
    if k > MAX_K:
        raise InputError(f"--k {k} is more than the protocol carries (at most {MAX_K})")
    if not total_dense:
        return k  # no dense mask: k is not used
    what = f"--k {k}" if config.k is not None else f"k = {k} (n + {K_MARGIN})"
    need = session_memory(m, n_dense, n_bound_rows, k, sum(int(b.A.nnz) for b in blocks))
    short = memory_shortfall(need, available_memory(), MEMORY_SHARE)
    if short:
        raise ResourceError(f"{what} with {m} rows, {total_dense} masked columns"
                            f"{f', {sum(n_bound_rows)} bound rows' if sum(n_bound_rows) else ''} "
                            f"and {len(blocks)} parties would need about {short}")
    for b, nd, nb in zip(blocks, n_dense, n_bound_rows):
        if nd and k * max(m, nd) > MAX_MASK_DOUBLES:
            raise ResourceError(f"{what}: party {b.party_id} would need more than "
                                f"{MAX_MASK_DOUBLES * 8 / 2**30:.0f} GiB for its mask ({max(m, nd)} x {k} doubles), "
                                "more than a party accepts")
        if nd and 8 * k * (m + nb + 1) > MAX_PAYLOAD_BYTES:
            raise ResourceError(f"{what}: party {b.party_id}'s masked block ({m + nb} x {k} doubles) would exceed the "
                                f"protocol's 2 GiB message (at most k = {MAX_PAYLOAD_BYTES // (8 * (m + nb + 1))} "
                                "with this problem and split)")
    return k


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

    # removed on every exit, SIGTERM included (coordinator.cli): it holds every party's private key
    with private_tempdir("securelp-sim-") as tmp, \
            local_grpc_links(sessions, tmp, deadline_s=deadline_s, insecure=insecure) as links:
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
