"""A data owner's result file: its own part x_j of the optimal solution, with its column names.

In Mangasarian's PPLP (Optim. Lett. 2011) party j alone decodes x_j = B_.j' u (+ its monomial
part); the coordinator learns x_j only when the party's policy reveals it. The owner keeps it in
its own file, written by ``securelp party --out FILE`` (:func:`write_result`; a party keeps its
file, and nothing of it goes to the coordinator unless the party's policy reveals x_j) and by
``securelp solve``/``demo --out DIR``, which simulate every owner and write one file per owner
(:func:`write_party_solution`). The column names are the MPS file's (``securelp split`` keeps
them in the block file; older block files number them ``x1 .. xn``). The format follows the
file's suffix:

- ``.csv`` (the default for any other suffix): a header ``column,value`` then one line per
  column, values in ``repr`` precision (they read back bit for bit);
- ``.json``: ``{"party": ID, "status": S, "objective": F, "columns": [...], "x": [...]}`` (and
  ``"session_id"`` for a party's file);
- ``.npz``: arrays ``columns`` (str), ``x`` (float64), ``party``, ``status``, ``objective`` (and
  ``session_id`` for a party's file).

Every file is written atomically (complete or not at all); a party's with mode ``0600`` (x_j is
the owner's private data). A session that ended without an optimum writes the status and no
values, so an owner never mistakes a stale file for a result. A party's path may hold
``{session}``, replaced by the session id (a ``--serve`` party keeps every session's result).
The path itself is the owner's: it is never sent to the coordinator, which learns only that the
party keeps its result in a file and in which format (``DecodeReply.saved_as``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.files import check_writable, write_atomically

#: suffixes with their own format; any other suffix gets CSV
FORMATS = (".csv", ".json", ".npz")
#: the placeholder of ``--out`` replaced by the session id
SESSION_FIELD = "{session}"


def default_column_names(n: int) -> tuple[str, ...]:
    """``x1 .. xn``: the names of columns that came without any."""
    return tuple(f"x{i + 1}" for i in range(n))


def solution_text_csv(columns: Sequence[str], x: np.ndarray | None) -> str:
    """The CSV text of a result: ``column,value`` then one line per column."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["column", "value"])
    if x is not None:
        for name, value in zip(columns, x):
            writer.writerow([name, repr(float(value))])
    return out.getvalue()


def write_party_solution(path: str | os.PathLike[str], party_id: str, columns: Sequence[str],
                         x: np.ndarray | None, *, status: str, objective: float | None,
                         session_id: str | None = None, mode: int | None = None) -> Path:
    """Write one party's result file (format by suffix, atomically); returns its path.

    Parameters
    ----------
    path : the file; ``.json`` and ``.npz`` choose those formats, anything else is CSV.
    party_id : the owner.
    columns : the names of its columns, in its block's order.
    x : its decoded values (None when the session ended without an optimum).
    status : the session's status (``optimal``, ``infeasible``, ...).
    objective : the optimal value (None or NaN when there is none).
    session_id : the session, recorded in JSON and NPZ files (a party's own file).
    mode : the file's permissions (``0o600`` for a party's own file); None: the umask's.

    Raises
    ------
    InputError
        ``x`` and ``columns`` differ in length, or the file cannot be written.
    """
    target = Path(path)
    if x is not None and len(columns) != len(x):
        raise InputError(f"party {party_id}: {len(columns)} column names for {len(x)} values")
    value = None if objective is None or not math.isfinite(objective) else float(objective)
    suffix = target.suffix.lower()
    if suffix == ".json":
        doc: dict[str, object] = {"party": party_id, "status": status, "objective": value, "columns": list(columns),
                                  "x": None if x is None else [float(v) for v in x]}
        if session_id is not None:
            doc["session_id"] = session_id
        write_atomically(target, json.dumps(doc, indent=1) + "\n", what="result ", mode=mode)
    elif suffix == ".npz":
        arrays = {"party": np.array(party_id), "status": np.array(status),
                  "objective": np.array(np.nan if value is None else value),
                  "columns": np.array(list(columns), dtype=str),
                  "x": np.zeros(0) if x is None else np.asarray(x, dtype=np.float64)}
        if session_id is not None:
            arrays["session_id"] = np.array(session_id)
        write_atomically(target, lambda handle: np.savez(handle, **arrays), what="result ", mode=mode)
    else:
        write_atomically(target, solution_text_csv(columns, x), what="result ", mode=mode)
    return target


def read_party_solution(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """Read back a result file's column names and values (tests, and owners' own scripts)."""
    target = Path(path)
    try:
        if target.suffix.lower() == ".json":
            doc = json.loads(target.read_text(encoding="utf-8"))
            return tuple(doc["columns"]), np.array(doc["x"] or [], dtype=np.float64)
        if target.suffix.lower() == ".npz":
            with np.load(target, allow_pickle=False) as data:
                return tuple(str(c) for c in data["columns"]), np.array(data["x"], dtype=np.float64)
        rows = list(csv.reader(target.read_text(encoding="utf-8").splitlines()))
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"result file {target} cannot be read: {exc}") from None
    if not rows or rows[0] != ["column", "value"]:
        raise InputError(f"result file {target} is not a securelp result file (no 'column,value' header)")
    return tuple(r[0] for r in rows[1:]), np.array([float(r[1]) for r in rows[1:]], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class PartyResult:
    """What one session gave its owner (kept by the owner; never logged)."""

    party_id: str
    session_id: str
    status: str  # "optimal", "infeasible", ...
    objective: float
    x: np.ndarray | None  # x_j, when the session was optimal
    column_names: tuple[str, ...]


def result_format(path: str | os.PathLike[str]) -> str:
    """``csv``, ``npz`` or ``json``, by the file's suffix (CSV unless ``.npz`` or ``.json``)."""
    suffix = Path(path).suffix.lower()
    return suffix.removeprefix(".") if suffix in FORMATS else "csv"


def check_result_path(path: str | os.PathLike[str], option: str = "--out") -> None:
    """Refuse, before any session, an output path that could not be written (InputError)."""
    check_writable(str(path).replace(SESSION_FIELD, "session"), option)


def result_path(path: str | os.PathLike[str], session_id: str) -> Path:
    """``path`` with ``{session}`` replaced by the session id."""
    return Path(str(path).replace(SESSION_FIELD, session_id))


def write_result(result: PartyResult, path: str | os.PathLike[str]) -> Path:
    """Write a party's own result of one session to ``path`` (``{session}`` replaced), atomically and
    with mode 0600: x_j under its column names when the session was optimal, else the status and
    no values. Returns the path written.

    Raises
    ------
    InputError
        The path cannot be written (a directory, a missing directory, refused by the system), or the
        column names do not match x_j.
    ResourceError
        The disk is full.
    """
    return write_party_solution(result_path(path, result.session_id), result.party_id, result.column_names,
                                result.x, status=result.status, objective=result.objective,
                                session_id=result.session_id, mode=0o600)
