"""What a PPLP session costs before it runs: the largest ``k`` the protocol carries, one message per
masked block, and memory. The memory model is calibrated on measured runs (the constants below);
the checks refuse a session with a clear error before anything large is allocated:

- :func:`check_session_fits` (``securelp.coordinator.simulation``): the whole simulated session, every
  party and the coordinator in one process (``securelp solve``);
- :func:`check_coordinator_fits`: the coordinator's own share, from the parties' Hello replies,
  before the Mask round (``run_secure_lp``, every transport; ``securelp coordinator``);
- a party checks its own share when asked to mask (``securelp.party.session``).
"""

from __future__ import annotations

from collections.abc import Sequence

from securelp.party.session import MAX_MASK_DOUBLES
from securelp.protos.codec import MAX_PAYLOAD_BYTES  # also protobuf's own 2 GiB limit (a larger block: EncodeError)
from securelp.solvers.errors import InputError, ResourceError
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = ["MAX_K", "MEMORY_SHARE", "check_coordinator_fits", "check_k", "check_messages", "coordinator_memory",
           "describe", "session_memory"]

#: the largest k the protocol carries: the solution notice holds u (k doubles) in one payload of at
#: most 2 GiB (``securelp.protos.codec.MAX_PAYLOAD_BYTES``); the MaskRequest's k is a uint64 (``--k 1e23``
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
#: its parent's peak; ``securelp.solvers.resources.peak_rss`` reads the child's own, 327 to 347 MB.)
LP_COPIES = 24
PARTY_COPIES = 3
#: the coordinator's copies of each received block row (the message and its parsed array). Measured
#: alone (``securelp coordinator`` against three ``securelp party`` processes, afiro, --bounds rows,
#: ``/usr/bin/time -f %M``): 329 MB at k = 20,000 and 750 MB at 60,000, 10.5 KB per k, where
#: ``8 * (LP_COPIES * m_t + COORDINATOR_COPIES * (p m + n_b))`` gives 13.1 KB
COORDINATOR_COPIES = 2
#: bytes of the interpreter, numpy, HiGHS and gRPC before any session (measured: ~90 MB; the
#: coordinator above: 119 MB at k = 0 by extrapolation)
BASE_BYTES = 256 << 20
#: share of the available memory a run may plan to use
MEMORY_SHARE = 0.9


def session_memory(m: int, n_dense: Sequence[int], n_bound_rows: Sequence[int], k: int, nnz: int) -> float:
    """Estimated peak bytes of one simulated session (every party, the coordinator and HiGHS in one
    process) with ``n_dense[j]`` dense-masked columns and ``n_bound_rows[j]`` bound rows per party.
    ``nnz``: nonzeros of the original LP (the central comparison, monomial blocks)."""
    k_used = k if sum(n_dense) else 0
    p = len(n_dense)
    n_b = sum(n_bound_rows)
    per_k = 8.0 * (LP_COPIES * (m + n_b) + PARTY_COPIES * (p * m + n_b) + 2 * sum(n_dense))
    return BASE_BYTES + per_k * k_used + 200.0 * (nnz + m + sum(n_dense) + n_b)


def coordinator_memory(m: int, n_dense: Sequence[int], n_bound_rows: Sequence[int], k: int) -> float:
    """Estimated peak bytes of the coordinator alone: the parties' masked blocks as received and
    parsed, the transformed LP and HiGHS (the parties' sparse monomial blocks are not counted)."""
    if not sum(n_dense):
        return float(BASE_BYTES)
    p_dense = sum(1 for nd in n_dense if nd)
    n_b = sum(n_bound_rows)
    return BASE_BYTES + 8.0 * k * (LP_COPIES * (m + n_b) + COORDINATOR_COPIES * (p_dense * m + n_b))


def check_k(what: str, k: int) -> None:
    """Refuse a ``k`` the protocol cannot carry (InputError, exit 3); ``what`` names it
    (``"--k 5000"``, or ``"k = 42 (n + 10)"`` for the default)."""
    if k > MAX_K:
        raise InputError(f"{what} is more than the protocol carries (at most {MAX_K})")


def describe(what: str, m: int, n_dense: Sequence[int], n_bound_rows: Sequence[int]) -> str:
    """``"--k 5000 with 27 rows, 32 masked columns, 11 bound rows and 3 parties"``."""
    n_b = sum(n_bound_rows)
    return (f"{what} with {m} rows, {sum(n_dense)} masked columns{f', {n_b} bound rows' if n_b else ''} "
            f"and {len(n_dense)} parties")


def check_messages(what: str, party_ids: Sequence[str], m: int, n_dense: Sequence[int], n_bound_rows: Sequence[int],
                   k: int) -> None:
    """Refuse (ResourceError, exit 12) a ``k`` whose mask a party would not accept (8 GiB) or whose
    masked block would not fit in one message (2 GiB)."""
    for party_id, nd, nb in zip(party_ids, n_dense, n_bound_rows):
        if nd and k * max(m, nd) > MAX_MASK_DOUBLES:
            raise ResourceError(f"{what}: party {party_id} would need more than "
                                f"{MAX_MASK_DOUBLES * 8 / 2**30:.0f} GiB for its mask ({max(m, nd)} x {k} doubles), "
                                "more than a party accepts")
        if nd and 8 * k * (m + nb + 1) > MAX_PAYLOAD_BYTES:
            raise ResourceError(f"{what}: party {party_id}'s masked block ({m + nb} x {k} doubles) would exceed the "
                                f"protocol's 2 GiB message (at most k = {MAX_PAYLOAD_BYTES // (8 * (m + nb + 1))} "
                                "with this problem and split)")


def check_coordinator_fits(what: str, party_ids: Sequence[str], m: int, n_dense: Sequence[int],
                           n_bound_rows: Sequence[int], k: int) -> None:
    """The checks a coordinator makes from the parties' Hello replies, before it asks for any mask:
    ``k`` within the protocol, each masked block within one message and a party's limit, and its
    own share (:func:`coordinator_memory`) within :data:`MEMORY_SHARE` of the available memory."""
    check_k(what, k)
    if not sum(n_dense):
        return  # no dense mask: k is not used
    check_messages(what, party_ids, m, n_dense, n_bound_rows, k)
    short = memory_shortfall(coordinator_memory(m, n_dense, n_bound_rows, k), available_memory(), MEMORY_SHARE)
    if short:
        raise ResourceError(f"{describe(what, m, n_dense, n_bound_rows)}: the coordinator would need about {short}")
