"""``securelp.solve``: a secure LP session with simulated data owners, as a function call.

The same session ``securelp solve`` runs (Mangasarian, *Privacy-Preserving Linear Programming*,
Optim. Lett. 2011): the LP's columns are split among the parties, each party masks its block,
the coordinator solves the transformed LP and each party decodes its own ``x_j``. Since one
process plays every owner, the result holds every block's solution (``SecureLPResult.x``) next to
what each owner alone learns (``SecureLPResult.parties[id].x``) and what the coordinator could
reconstruct from what it saw (``.leakage``, from the attacks that ran on the session's transcript,
evaluated against the blocks).

Example
-------
>>> import securelp
>>> res = securelp.solve("afiro.mps", parties=3)                       # doctest: +SKIP
>>> res.status.value, round(res.objective, 6)                           # doctest: +SKIP
('optimal', -464.753143)
>>> res.parties["party2"].x                                             # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from securelp.coordinator.audit import SessionAudit
from securelp.coordinator.protocol import SessionConfig, SessionOutcome
from securelp.coordinator.report import build_report
from securelp.coordinator.shaping import parse_link_specs
from securelp.coordinator.simulation import TRANSPORTS, check_session_fits, owners_consent, simulate
from securelp.party.policy import PartyPolicy
from securelp.party.results import default_column_names, write_party_solution
from securelp.party.session import PartySession
from securelp.protos.stream import DEFAULT_KEEPALIVE_S
from securelp.solvers.errors import ConfigError, InputError
from securelp.solvers.files import check_writable, make_output_dir, write_atomically, written_together
from securelp.solvers.lp import LinearProgram, SolveStatus, read_mps
from securelp.solvers.lp.partition import ColumnBlock, PublicRows, parse_split, split_columns

__all__ = ["PartyResult", "SecureLPResult", "solve", "write_results"]

#: the public part of a result directory (objective, status, row duals)
PUBLIC_RESULT = "public.json"


@dataclass(frozen=True, eq=False)
class PartyResult:
    """What one data owner takes home from a session.

    Attributes
    ----------
    party_id : the owner.
    columns : the names of its columns (from the MPS file, else ``x1 .. xn``).
    x : its decoded part of the optimal solution (None unless the session was optimal).
    revealed : whether x reached the coordinator (by the session's agreement).
    policy : what the owner agreed to.
    bytes_sent, bytes_received : serialized payload bytes it sent and received.
    leakage : the report's statement of what the coordinator can reconstruct of its data.
    """

    party_id: str
    columns: tuple[str, ...]
    x: np.ndarray | None
    revealed: bool
    policy: PartyPolicy | None
    bytes_sent: int
    bytes_received: int
    leakage: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, eq=False)
class SecureLPResult:
    """The result of :func:`solve`: one fixed shape, like scipy's ``linprog`` result.

    Attributes
    ----------
    status : ``SolveStatus`` of the session (every party learns it).
    objective : the optimal value (NaN unless optimal).
    x : the whole solution in the LP's column order (a simulation holds every block).
    y : the optimal row duals the coordinator computed (None unless optimal).
    parties : each owner's :class:`PartyResult`, by id, in split order.
    leakage : each owner's leakage statement, by id (also in ``parties[id].leakage``).
    timings : seconds of the session's phases (mask, transfer, solve, decode, total).
    bytes : ``{"sent": ..., "received": ...}``: payload bytes over all parties.
    central_objective : HiGHS's optimum of the whole LP, for comparison (None if not optimal).
    report : the JSON report ``securelp solve --json`` writes (docs/reports.md).
    session : the coordinator's full ``SessionOutcome``; audit : the ``SessionAudit``.
    """

    status: SolveStatus
    objective: float
    x: np.ndarray | None
    y: np.ndarray | None
    parties: Mapping[str, PartyResult]
    leakage: Mapping[str, Mapping[str, Any]] = field(repr=False)
    timings: Mapping[str, float]
    bytes: Mapping[str, int]
    central_objective: float | None
    report: Mapping[str, Any] = field(repr=False)
    session: SessionOutcome = field(repr=False)
    audit: SessionAudit = field(repr=False)
    row_names: tuple[str, ...] = field(default=(), repr=False)

    @property
    def success(self) -> bool:
        """True when the session found an optimum."""
        return self.status is SolveStatus.OPTIMAL


def _problem(problem: LinearProgram | str | os.PathLike[str]) -> LinearProgram:
    if isinstance(problem, LinearProgram):
        return problem
    if isinstance(problem, (str, os.PathLike)):
        return read_mps(problem)
    raise InputError(f"problem must be a LinearProgram or the path of an MPS file, not {type(problem).__name__}")


def split_problem(lp: LinearProgram, parties: int | Sequence[int] | Mapping[str, int]) -> tuple[PublicRows, list[ColumnBlock]]:
    """The public rows and the owners' blocks: ``parties`` is a count (near-equal contiguous
    parts), the column count of each part, or ``{id: column count}``."""
    if isinstance(parties, Mapping):
        ids = [str(i) for i in parties]
        sizes = parse_split(",".join(str(int(v)) for v in parties.values()), lp.n_cols, len(ids))
        return split_columns(lp, sizes, ids=ids)
    if isinstance(parties, (int, np.integer)) and not isinstance(parties, bool):
        return split_columns(lp, parse_split(None, lp.n_cols, int(parties)))
    if isinstance(parties, Sequence) and not isinstance(parties, str):
        sizes = [int(v) for v in parties]
        return split_columns(lp, parse_split(",".join(map(str, sizes)), lp.n_cols, len(sizes)))
    raise InputError(f"parties must be a count, a list of column counts or {{id: count}}, not {parties!r}")


def solve(problem: LinearProgram | str | os.PathLike[str], parties: int | Sequence[int] | Mapping[str, int] = 3, *,
          transport: str = "inprocess", bounds: str = "monomial", seed: int | str | None = None,
          k: int | None = None, reveal: bool = True, secure_aggregation: bool = False, deadline_s: float = 120.0,
          audit_budget_s: float | None = 30.0, transcript: str | os.PathLike[str] | None = None,
          compare: bool = True, insecure: bool = False, keepalive_s: float | None = None,
          direction: str = "dial-in", link: str | Sequence[str] = ()) -> SecureLPResult:
    """Solve an LP securely with one simulated data owner per column block.

    Parameters
    ----------
    problem : a ``LinearProgram`` or the path of an MPS file.
    parties : the number of owners (near-equal contiguous column blocks), the column count of each
        block, or ``{id: column count}``.
    transport : ``"inprocess"`` (every message still round-trips through protobuf) or ``"grpc"``
        (party servers on loopback, mutual TLS with fresh certificates).
    bounds : ``"monomial"`` (bounded columns by a private positive monomial map) or ``"rows"``.
    seed : reproducible masks for tests -- NOT private (anyone with the seed recomputes them).
    k : the dense mask's dimension (default: the dense-masked column count plus 10).
    reveal : whether the owners reveal their x_j to the coordinator.
    secure_aggregation : the coordinator receives only the sum of the dense products.
    deadline_s : the deadline of every call to a party.
    audit_budget_s : seconds for the leakage attacks on the session's transcript, evaluated
        against the blocks (None: no limit; 0: none runs, and the report says each was skipped).
    transcript : also write the coordinator's transcript to this file.
    compare : also solve the whole LP centrally (``central_objective``).
    insecure : gRPC without TLS (debugging only; logged as a warning).
    keepalive_s : over gRPC, the protocol runtime's liveness interval (None: its default).
    direction : over gRPC, ``"dial-in"`` (the coordinator dials the parties) or ``"dial-out"`` (the
        parties dial a listening coordinator).
    link : over gRPC, shaped links as ``--link`` takes them: ``"latency=50ms,bandwidth=10mbit"`` for
        every party, ``"party2:latency=200ms"`` for one (a list for several).

    Returns
    -------
    SecureLPResult

    Raises
    ------
    InputError, ConfigError, ProtocolError, TransportError, ResourceError
        The typed errors the CLI maps to exit codes (docs: exit codes).
    """
    if transport not in TRANSPORTS:
        raise ConfigError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if insecure and transport != "grpc":
        raise ConfigError(f"insecure applies to the grpc transport only; {transport} has no TLS to turn off")
    lp = _problem(problem)
    public, blocks = split_problem(lp, parties)
    config = SessionConfig(k=k, bounds_mode=bounds, reveal=reveal, deadline_s=deadline_s,
                           secure_aggregation=secure_aggregation)
    check_session_fits(public, blocks, config)
    if transcript is not None:
        check_writable(str(transcript), "transcript")
    specs = [link] if isinstance(link, str) else list(link)
    shapes = parse_link_specs(specs, [b.party_id for b in blocks]) if specs else None
    sessions: list[PartySession] = []
    outcome, session_audit = simulate(public, blocks, config, transport=transport, seed=seed,
                                      central=lp if compare else None,
                                      transcript_path=None if transcript is None else str(transcript),
                                      audit_budget_s=audit_budget_s,
                                      policy=owners_consent(config), sessions_out=sessions, insecure=insecure,
                                      keepalive_s=DEFAULT_KEEPALIVE_S if keepalive_s is None else keepalive_s,
                                      direction=direction, link_shapes=shapes)
    return _result(lp, blocks, outcome, session_audit, sessions)


def _result(lp: LinearProgram, blocks: Sequence[ColumnBlock], outcome: SessionOutcome, audit: SessionAudit,
            sessions: Sequence[PartySession]) -> SecureLPResult:
    names = lp.col_names or default_column_names(lp.n_cols)
    report = build_report(outcome, audit, extra={"problem": lp.name})
    leak = {p["id"]: p["leakage"] for p in report["parties"]}
    by_session = {s.party_id: s for s in sessions}
    optimal = outcome.status is SolveStatus.OPTIMAL
    parties: dict[str, PartyResult] = {}
    start = 0
    xs = []
    for block, rep in zip(blocks, outcome.parties):
        cols = tuple(names[start:start + block.n_cols])
        start += block.n_cols
        own = by_session.get(block.party_id)
        x_j = own.outcome.x if (optimal and own is not None and own.outcome is not None) else None
        xs.append(x_j)
        parties[block.party_id] = PartyResult(block.party_id, cols, None if x_j is None else np.array(x_j),
                                              rep.revealed, rep.policy, rep.bytes_sent, rep.bytes_received,
                                              leak.get(block.party_id, {}))
    x = np.concatenate(xs) if optimal and all(v is not None for v in xs) else None
    return SecureLPResult(
        status=outcome.status, objective=outcome.objective, x=x,
        y=None if outcome.row_duals is None else np.array(outcome.row_duals), parties=parties, leakage=leak,
        timings=dict(outcome.timings_s),
        bytes={"sent": sum(p.bytes_sent for p in outcome.parties),
               "received": sum(p.bytes_received for p in outcome.parties)},
        central_objective=outcome.central_objective, report=report, session=outcome, audit=audit,
        row_names=lp.row_names or tuple(f"r{i + 1}" for i in range(lp.n_rows)))


def write_results(directory: str | os.PathLike[str], result: SecureLPResult, *, suffix: str = ".csv") -> dict[str, Any]:
    """Write each owner's ``x_j`` to ``DIR/<id><suffix>`` and the public part (status, objective,
    row duals y with the row names) to ``DIR/public.json``, all of them together and atomically.
    Returns where each went (the report's ``results`` key)."""
    return write_result_files(directory, result.status.value, result.objective if result.success else None,
                              result.row_names, result.y,
                              {pid: (party.columns, party.x) for pid, party in result.parties.items()}, suffix=suffix)


def write_result_files(directory: str | os.PathLike[str], status: str, objective: float | None,
                       row_names: Sequence[str], y: np.ndarray | None,
                       parties: Mapping[str, tuple[Sequence[str], np.ndarray | None]], *,
                       suffix: str = ".csv") -> dict[str, Any]:
    """The files of :func:`write_results` from their parts: each owner's ``(column names, x_j)`` (x_j
    None without an optimum) and the public status, objective and row duals."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    make_output_dir(out)
    paths: dict[str, str] = {}
    public_doc = {"status": status, "objective": objective,
                  "rows": list(row_names) if y is not None else [],
                  "y": None if y is None else [float(v) for v in y]}
    with written_together():
        for pid, (columns, x) in parties.items():
            target = out / f"{pid}{suffix}"
            write_party_solution(target, pid, columns, x, status=status, objective=objective)
            paths[pid] = str(target)
        write_atomically(out / PUBLIC_RESULT, json.dumps(public_doc, indent=1) + "\n", what="result ")
    return {"directory": str(out), "parties": paths, "public": str(out / PUBLIC_RESULT)}
