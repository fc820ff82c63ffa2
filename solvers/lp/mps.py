"""MPS input through HiGHS's reader, keeping the objective constant.

Free and fixed MPS are read by HiGHS. The objective constant (an RHS entry on the cost
row, e.g. netlib's e226) is kept as ``LinearProgram.offset``; HiGHS stores it as the
negated RHS, as the MPS convention says.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from solvers.errors import InputError
from solvers.files import require_file
from solvers.lp.highs import new_highs
from solvers.lp.model import LinearProgram, Sense


def _is_number(text: str) -> bool:
    try:
        float(text.replace("D", "E").replace("d", "e"))
    except ValueError:
        return False
    return True


# fixed-format MPS: numeric fields 4 (columns 25-36) and 6 (columns 50-61), 1-based
_FIXED_NUMBER_SLICES = {"COLUMNS": (slice(24, 36), slice(49, 61)), "RHS": (slice(24, 36), slice(49, 61)),
                        "RANGES": (slice(24, 36), slice(49, 61)), "BOUNDS": (slice(24, 36),)}


def _check_numbers(path: Path) -> None:
    """Reject numeric fields HiGHS's lenient reader would silently read as 0.

    A line passes when its numeric fields parse either in free format (white-space
    separated) or in fixed format (by column), since fixed-format names may hold spaces.
    """
    section = ""
    with path.open("r", encoding="latin-1") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip() or line.startswith("*"):
                continue
            if not line[0].isspace():
                section = line.split()[0].upper()
                continue
            if section not in _FIXED_NUMBER_SLICES or "'MARKER'" in line:
                continue
            fields = line.split()
            if section == "BOUNDS":
                positions = [3] if len(fields) > 3 and fields[0].upper() not in ("FR", "MI", "PL", "BV") else []
            else:
                positions = [i for i in (2, 4) if i < len(fields)]
            bad = [fields[i] for i in positions if not _is_number(fields[i])]
            if not bad:
                continue
            fixed = [line[sl].strip() for sl in _FIXED_NUMBER_SLICES[section] if line[sl].strip()]
            if fixed and all(_is_number(v) for v in fixed):
                continue
            raise InputError(f"MPS file {path}, line {lineno}: {section} value {bad[0]!r} is not a number")


def read_mps(path: str | os.PathLike[str]) -> LinearProgram:
    """Read an MPS file into a ``LinearProgram``.

    Raises
    ------
    InputError
        When the file is missing, unreadable or malformed (the message names the file).
    """
    import highspy

    p = require_file(path, "MPS file")
    try:
        with p.open("rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        raise InputError(f"MPS file {p} cannot be read: {exc.strerror}") from None
    if b"\0" in head:
        raise InputError(f"MPS file {p} is not a text file")
    _check_numbers(p)
    h = new_highs()
    status = h.readModel(str(p))
    if status == highspy.HighsStatus.kError:
        raise InputError(f"MPS file {p} is malformed (HiGHS could not parse it)")
    hl = h.getLp()
    m, n = int(hl.num_row_), int(hl.num_col_)
    if n == 0:
        raise InputError(f"MPS file {p} defines no columns")
    a = hl.a_matrix_
    start = np.array(a.start_, dtype=np.int64)
    index = np.array(a.index_, dtype=np.int64)
    value = np.array(a.value_, dtype=np.float64)
    if a.format_ == highspy.MatrixFormat.kRowwise:
        A = sp.csr_matrix((value, index, start), shape=(m, n)).tocsc()
    else:
        A = sp.csc_matrix((value, index, start), shape=(m, n))
    integrality = list(getattr(hl, "integrality_", []) or [])
    if any(str(v).endswith("kInteger") for v in integrality):
        raise InputError(f"MPS file {p} declares integer columns; securelp solves LPs only")
    sense = Sense.MAXIMIZE if hl.sense_ == highspy.ObjSense.kMaximize else Sense.MINIMIZE
    try:
        return LinearProgram(
            c=np.array(hl.col_cost_, dtype=np.float64),
            A=A,
            row_lower=np.array(hl.row_lower_, dtype=np.float64),
            row_upper=np.array(hl.row_upper_, dtype=np.float64),
            col_lower=np.array(hl.col_lower_, dtype=np.float64),
            col_upper=np.array(hl.col_upper_, dtype=np.float64),
            sense=sense,
            offset=float(hl.offset_),
            name=p.stem,
            row_names=tuple(hl.row_names_) if len(hl.row_names_) == m else None,
            col_names=tuple(hl.col_names_) if len(hl.col_names_) == n else None,
        )
    except InputError as exc:
        raise InputError(f"MPS file {p}: {exc}") from None
