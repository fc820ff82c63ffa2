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

from securelp.solvers.errors import InputError
from securelp.solvers.files import require_file
from securelp.solvers.lp.highs import new_highs
from securelp.solvers.lp.model import LinearProgram, Sense


def _number(text: str) -> float:
    """An MPS number (Fortran's ``D`` exponent accepted)."""
    return float(text.replace("D", "E").replace("d", "e"))


def _is_number(text: str) -> bool:
    try:
        _number(text)
    except ValueError:
        return False
    return True


# fixed-format MPS: numeric fields 4 (columns 25-36) and 6 (columns 50-61), 1-based
_FIXED_NUMBER_SLICES = {"COLUMNS": (slice(24, 36), slice(49, 61)), "RHS": (slice(24, 36), slice(49, 61)),
                        "RANGES": (slice(24, 36), slice(49, 61)), "BOUNDS": (slice(24, 36),)}


#: |matrix coefficient| HiGHS refuses ("large_matrix_value"), and |cost| it reads as infinite
_LARGE_MATRIX_VALUE = 1e15
_INFINITE_COST = 1e20
#: bound types without a value
_NO_VALUE_BOUNDS = ("FR", "MI", "PL", "BV")
#: the section names of fixed and free MPS (HiGHS's reader, CPLEX's and Gurobi's extensions): a line
#: that starts in column 1 must begin with one of them
_SECTIONS = ("NAME", "ROWS", "COLUMNS", "RHS", "RANGES", "BOUNDS", "ENDATA", "OBJSENSE", "OBJSENS", "OBJNAME",
             "LAZYCONS", "USERCUTS", "SOS", "QUADOBJ", "QMATRIX", "QSECTION", "QCMATRIX", "CSECTION", "INDICATORS",
             "GENCONS", "PWLOBJ", "PWLNAM", "PWLCON", "MAX", "MIN", "MAXIMIZE", "MINIMIZE")


def _check_lines(path: Path) -> None:
    """Reject what HiGHS's lenient reader would silently read differently, naming the line:
    numeric fields it would read as 0; a row defined twice; a column whose entries are not
    contiguous (HiGHS made two columns of one name); a COLUMNS entry in an undefined row (dropped);
    a BOUNDS line naming a column that is not in COLUMNS (HiGHS added a new column); a coefficient
    HiGHS refuses (|value| >= 1e15: it only said it "could not parse" the file).

    A line passes the number check when its numeric fields parse either in free format (white-space
    separated) or in fixed format (by column), since fixed-format names may hold spaces; the name
    checks look only at lines with the free format's number of fields, for the same reason.
    """
    section = ""
    rows: dict[str, int] = {}  # name -> line
    objective: set[str] = set()
    columns: dict[str, int] = {}
    current_column = ""
    with path.open("r", encoding="latin-1") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip() or line.startswith("*"):
                continue
            if not line[0].isspace():
                word = line.split()[0].upper()
                if word not in _SECTIONS:  # e.g. a file of numbers, which HiGHS would read to its end first
                    raise InputError(f"MPS file {path}, line {lineno}: {line.split()[0][:40]!r} is not an MPS section "
                                     f"name (expected one of {', '.join(_SECTIONS[:8])}, ...); is this an MPS file?")
                section = word
                continue
            fields = line.split()
            where = f"MPS file {path}, line {lineno}"
            if section == "ROWS" and len(fields) == 2:
                kind, name = fields[0].upper(), fields[1]
                if name in rows:
                    raise InputError(f"{where}: row {name!r} is defined twice (first on line {rows[name]})")
                rows[name] = lineno
                if kind == "N":
                    objective.add(name)
                continue
            if section not in _FIXED_NUMBER_SLICES or "'MARKER'" in line:
                continue
            if section == "BOUNDS":
                positions = [3] if len(fields) > 3 and fields[0].upper() not in _NO_VALUE_BOUNDS else []
            else:
                positions = [i for i in (2, 4) if i < len(fields)]
            bad = [fields[i] for i in positions if not _is_number(fields[i])]
            if bad:
                fixed = [line[sl].strip() for sl in _FIXED_NUMBER_SLICES[section] if line[sl].strip()]
                if fixed and all(_is_number(v) for v in fixed):
                    continue  # fixed format with spaces in names: leave it to HiGHS
                raise InputError(f"{where}: {section} value {bad[0]!r} is not a number")
            if section == "COLUMNS" and len(fields) in (3, 5):
                name = fields[0]
                if name != current_column:
                    if name in columns:
                        raise InputError(f"{where}: column {name!r} appears again after other columns (first on "
                                         f"line {columns[name]}); a column's entries must be contiguous")
                    columns[name] = lineno
                    current_column = name
                for row, value in zip(fields[1::2], fields[2::2]):
                    if rows and row not in rows:
                        raise InputError(f"{where}: column {name!r} has an entry in row {row!r}, which ROWS does "
                                         "not define")
                    v = abs(_number(value))
                    if row in objective and v >= _INFINITE_COST:
                        raise InputError(f"{where}: cost {value} of column {name!r} is too large (|cost| >= "
                                         f"{_INFINITE_COST:g} is infinite to HiGHS)")
                    if row not in objective and v >= _LARGE_MATRIX_VALUE:
                        raise InputError(f"{where}: coefficient {value} of column {name!r} in row {row!r} is too large "
                                         f"(HiGHS refuses |values| >= {_LARGE_MATRIX_VALUE:g}; rescale the model)")
            elif section == "BOUNDS" and fields and columns:
                kind = fields[0].upper()
                expected = (2, 3) if kind in _NO_VALUE_BOUNDS else (3, 4)
                if len(fields) in expected:
                    name = fields[-1] if kind in _NO_VALUE_BOUNDS else fields[-2]
                    if name not in columns:
                        raise InputError(f"{where}: {kind} bound on column {name!r}, which is not in COLUMNS")


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
    _check_lines(p)
    try:
        str(p).encode("utf-8")
    except UnicodeEncodeError:  # HiGHS takes a UTF-8 name: readModel() raised a TypeError
        shown = os.fsencode(p).decode("utf-8", "backslashreplace")
        raise InputError(f"MPS file {shown}: the file name is not valid UTF-8 (HiGHS cannot open it); "
                         "rename the file") from None
    h = new_highs()
    status = h.readModel(str(p))
    if status == highspy.HighsStatus.kError:
        raise InputError(f"MPS file {p} is malformed (HiGHS could not parse it)")
    hl = h.getLp()
    m, n = int(hl.num_row_), int(hl.num_col_)
    if n == 0:
        raise InputError(f"MPS file {p} defines no columns")
    if m == 0:  # nothing for the parties to mask (the leakage audit and bound rows failed on it)
        raise InputError(f"MPS file {p} defines no constraint rows (only the objective); "
                         "securelp needs at least one row")
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
    row_names = tuple(hl.row_names_) if len(hl.row_names_) == m else None
    col_names = tuple(hl.col_names_) if len(hl.col_names_) == n else None
    for what, names, lo, hi in (("column", col_names, hl.col_lower_, hl.col_upper_),
                                ("row", row_names, hl.row_lower_, hl.row_upper_)):
        bad = np.flatnonzero(np.asarray(lo, dtype=np.float64) > np.asarray(hi, dtype=np.float64))
        if bad.size:  # named here: the model could only say "column 0"
            i = int(bad[0])
            label = repr(names[i]) if names is not None else str(i)
            raise InputError(f"MPS file {p}: {what} {label} has lower bound {lo[i]:g} above upper bound {hi[i]:g}")
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
            row_names=row_names,
            col_names=col_names,
        )
    except InputError as exc:
        raise InputError(f"MPS file {p}: {exc}") from None
