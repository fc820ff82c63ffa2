"""A data owner's result file: its own part x_j of the optimal solution, with its column names.

Written by ``securelp party --out FILE`` (a party keeps its file; nothing of it goes to the
coordinator unless the party's policy reveals x_j) and by ``securelp solve``/``demo --out DIR``,
which simulate every owner and write one file per owner. The format follows the file's suffix:

- ``.csv`` (the default for any other suffix): a header ``column,value`` then one line per
  column, values in ``repr`` precision (they read back bit for bit);
- ``.json``: ``{"party": ID, "status": S, "objective": F, "columns": [...], "x": [...]}``;
- ``.npz``: arrays ``columns`` (str), ``x`` (float64), ``party``, ``status``, ``objective``.

Every file is written atomically (complete or not at all). A session that ended without an
optimum writes the status and no values, so an owner never mistakes a stale file for a result.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.files import write_atomically

#: suffixes with their own format; any other suffix gets CSV
FORMATS = (".csv", ".json", ".npz")


def default_column_names(n: int) -> tuple[str, ...]:
    """``x1 .. xn``: the names of columns that came without any."""
    return tuple(f"x{i + 1}" for i in range(n))


def solution_text_csv(columns: Sequence[str], x: np.ndarray | None) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["column", "value"])
    if x is not None:
        for name, value in zip(columns, x):
            writer.writerow([name, repr(float(value))])
    return out.getvalue()


def write_party_solution(path: str | os.PathLike[str], party_id: str, columns: Sequence[str],
                         x: np.ndarray | None, *, status: str, objective: float | None) -> Path:
    """Write one party's result file (format by suffix, atomically); returns its path.

    Parameters
    ----------
    path : the file; ``.json`` and ``.npz`` choose those formats, anything else is CSV.
    party_id : the owner.
    columns : the names of its columns, in its block's order.
    x : its decoded values (None when the session ended without an optimum).
    status : the session's status (``optimal``, ``infeasible``, ...).
    objective : the optimal value (None or NaN when there is none).

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
        doc = {"party": party_id, "status": status, "objective": value, "columns": list(columns),
               "x": None if x is None else [float(v) for v in x]}
        write_atomically(target, json.dumps(doc, indent=1) + "\n", what="result ")
    elif suffix == ".npz":
        arrays = {"party": np.array(party_id), "status": np.array(status),
                  "objective": np.array(np.nan if value is None else value),
                  "columns": np.array(list(columns), dtype=str),
                  "x": np.zeros(0) if x is None else np.asarray(x, dtype=np.float64)}
        write_atomically(target, lambda handle: np.savez(handle, **arrays), what="result ")
    else:
        write_atomically(target, solution_text_csv(columns, x), what="result ")
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
