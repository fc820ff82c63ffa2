"""Validating CSV readers and the writer of group-size counts (the model of :mod:`.model`).

True counts: ``level,region_id,parent_id,size,count`` (blank parent for the root; zero counts
may be omitted; every count and the root total G at most :data:`~.model.MAX_COUNT`). Noisy
values: ``level,region_id,parent_id,size,noisy_count`` (integers or decimals, may be negative,
|value| at most :data:`~.model.MAX_COUNT`; a missing (region, size) pair means 0). Every error
names the file and, where there is one, its line, region and size.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass

import numpy as np

from securelp.solvers.files import require_file
from securelp.solvers.hierarchy.errors import CountsFileError, SizeDomainError, quoted
from securelp.solvers.hierarchy.model import (
    MAX_COUNT,
    READER_BYTES_PER_CELL,
    GroupSizeData,
    Hierarchy,
    NoisyValues,
    check_cells,
    validate_consistency,
)

COUNT_HEADER = ("level", "region_id", "parent_id", "size", "count")
NOISY_HEADER = ("level", "region_id", "parent_id", "size", "noisy_count")


def _parse_int(text: str, what: str, name: str, line: int) -> int:
    t = text.strip()
    try:
        value = int(t)
    except ValueError:
        raise CountsFileError(name, f"{what} must be an integer, got {quoted(text)}", line) from None
    return value


def _read_rows(path: str | os.PathLike[str], header: tuple[str, ...]) -> tuple[list[list[str]], str]:
    p = require_file(path, "counts file" if header == COUNT_HEADER else "noisy counts file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CountsFileError(str(p), f"not UTF-8 text ({exc})") from None
    reader = csv.reader(io.StringIO(text))
    rows = list(reader)
    if not rows:
        raise CountsFileError(str(p), f"empty file; expected header {','.join(header)}")
    got = tuple(c.strip() for c in rows[0])
    if got != header:
        raise CountsFileError(str(p), f"header must be {','.join(header)}, got {','.join(got)}", 1)
    return rows[1:], str(p)


@dataclass(frozen=True)
class _Row:
    level: int
    region: str
    parent: str
    size: int
    value: int | float


def _parse_value(raw: str, value_col: str, name: str, line: int, integer_values: bool, region: str) -> int | float:
    if integer_values:
        val: int | float = _parse_int(raw, value_col, name, line)
        if val < 0:
            raise CountsFileError(name, f"{value_col} must be a non-negative integer, got {quoted(raw)} "
                                        f"(region {region!r})", line)
        return val
    try:
        return int(raw)
    except ValueError:
        try:
            val = float(raw)
        except ValueError:
            raise CountsFileError(name, f"{value_col} must be a number, got {quoted(raw)}", line) from None
        if not math.isfinite(val):
            raise CountsFileError(name, f"{value_col} must be finite, got {quoted(raw)}", line)
        return val


def _parse_row(row: list[str], name: str, line: int, value_col: str, integer_values: bool) -> _Row:
    if len(row) != 5:
        raise CountsFileError(name, f"expected 5 columns, got {len(row)}", line)
    level = _parse_int(row[0], "level", name, line)
    region, parent = row[1].strip(), row[2].strip()
    if not region:
        raise CountsFileError(name, "empty region_id", line)
    size = _parse_int(row[3], "size", name, line)
    if size < 1:
        raise CountsFileError(name, f"size must be >= 1, got {size}", line)
    raw = row[4].strip()
    value = _parse_value(raw, value_col, name, line, integer_values, region)
    if abs(value) > MAX_COUNT:
        raise CountsFileError(name, f"{value_col} {quoted(raw)} of region {region!r} size {size} exceeds the largest "
                                    f"accepted {'count' if integer_values else 'magnitude'} 2**50 = {MAX_COUNT:,}", line)
    return _Row(level, region, parent, size, value)


@dataclass
class _Collected:
    """What the rows of a file say: the hierarchy, every (region, size) value, each region's first line."""

    hierarchy: Hierarchy
    values: dict[tuple[str, int], int | float]
    region_line: dict[str, int]
    largest_size: int


def _collect(rows: list[list[str]], name: str, value_col: str, integer_values: bool) -> _Collected:
    region_parent: dict[str, str] = {}
    region_level: dict[str, int] = {}
    region_line: dict[str, int] = {}
    values: dict[tuple[str, int], int | float] = {}
    for k, raw in enumerate(rows):
        line = k + 2
        if not raw or all(not c.strip() for c in raw):
            continue
        row = _parse_row(raw, name, line, value_col, integer_values)
        rid = row.region
        if rid in region_parent:
            if region_parent[rid] != row.parent:
                raise CountsFileError(name, f"region {rid!r} has parent_id {row.parent!r} but line {region_line[rid]} "
                                            f"says {region_parent[rid]!r}", line)
            if region_level[rid] != row.level:
                raise CountsFileError(name, f"region {rid!r} has level {row.level} but line {region_line[rid]} says "
                                            f"{region_level[rid]}", line)
        else:
            region_parent[rid], region_level[rid], region_line[rid] = row.parent, row.level, line
        if (rid, row.size) in values:
            raise CountsFileError(name, f"duplicate row for region {rid!r} size {row.size}", line)
        values[(rid, row.size)] = row.value
    if not region_parent:
        raise CountsFileError(name, "no data rows")
    hier = Hierarchy.from_parents(region_parent.keys(), region_parent.values())
    for i, rid in enumerate(hier.ids):
        if region_level[rid] != int(hier.level[i]):
            raise CountsFileError(name, f"region {rid!r} has level {region_level[rid]} but is at depth "
                                        f"{int(hier.level[i])} of the hierarchy (root = level 1)", region_line[rid])
    return _Collected(hier, values, region_line, max(size for _, size in values))


def read_counts_csv(
    path: str | os.PathLike[str], max_size: int | None = None, *, bytes_per_cell: float = READER_BYTES_PER_CELL,
    top_code: bool = False,
) -> GroupSizeData:
    """Read and validate true group-size counts (``level,region_id,parent_id,size,count``).

    Parameters
    ----------
    path:
        The CSV file.
    max_size:
        N (default: the largest size in the file).
    bytes_per_cell:
        Memory the caller will need per (region, size) cell; checked against the memory
        available before the dense array is allocated.
    top_code:
        Count groups larger than ``max_size`` at size N (N then means "N or more"), instead of
        refusing the file. A DP release needs this: its size domain must be public, and a
        refusal (or a default N read from the data) would tell whether some group is larger.

    Raises
    ------
    CountsFileError, HierarchyError (InputError)
        Malformed rows, negative or non-integer counts, a count or a root total G above
        :data:`~.model.MAX_COUNT`, not exactly one root, orphans, cycles, leaves at different depths, or
        children that do not sum to their parent for some size (each message names the line or
        region and size): a CountsFileError (source, line, problem) or, for the hierarchy, a
        HierarchyError.
    ValueError
        ``top_code`` without ``max_size``.
    SizeDomainError
        Sizes above ``max_size`` without ``top_code``.
    DomainTooLargeError
        More cells than :data:`~.model.MAX_DENSE_CELLS`, or than the available memory holds.
    """
    rows, name = _read_rows(path, COUNT_HEADER)
    got = _collect(rows, name, "count", integer_values=True)
    hier = got.hierarchy
    root = hier.ids[0]
    total = sum(int(v) for (rid, _), v in got.values.items() if rid == root)  # Python ints: no wrap-around
    if total > MAX_COUNT:
        raise CountsFileError(name, f"the counts of root region {root!r} sum to G = {total:,} groups, more than the "
                                    f"largest accepted total 2**50 = {MAX_COUNT:,}", got.region_line[root])
    if top_code and max_size is None:
        raise ValueError("top-coding needs a public largest size N (max_size)")
    n = got.largest_size if max_size is None else int(max_size)
    if n < got.largest_size and not top_code:
        raise SizeDomainError(name, got.largest_size, n)
    check_cells(hier.size, n, name, bytes_per_cell)
    counts = _dense_top_coded(hier, got, n, name)
    validate_consistency(hier, counts, name=name, region_line=got.region_line)
    return GroupSizeData(hierarchy=hier, counts=counts)


def _dense_top_coded(hier: Hierarchy, got: _Collected, n: int, name: str) -> np.ndarray:
    """The regions x N int64 counts, groups of size N or more counted at N."""
    index = {r: i for i, r in enumerate(hier.ids)}
    counts = np.zeros((hier.size, n), dtype=np.int64)
    top: dict[str, int] = {}  # per region, the groups of size >= N (Python integers: no wrap-around)
    for (rid, size), val in got.values.items():
        if size >= n:
            top[rid] = top.get(rid, 0) + int(val)
        else:
            counts[index[rid], size - 1] = int(val)
    for rid, val in top.items():
        if val > MAX_COUNT:
            raise CountsFileError(name, f"region {rid!r} has {val:,} groups of size {n} or more, more than the "
                                        f"largest accepted count 2**50 = {MAX_COUNT:,}", got.region_line[rid])
        counts[index[rid], n - 1] = val
    return counts


def read_noisy_csv(
    path: str | os.PathLike[str], max_size: int | None = None, *, bytes_per_cell: float = READER_BYTES_PER_CELL
) -> NoisyValues:
    """Read ``level,region_id,parent_id,size,noisy_count`` (structure validated; every value a finite
    integer or decimal with |value| at most :data:`~.model.MAX_COUNT`).

    ``bytes_per_cell`` is checked against the available memory before the dense array is
    allocated, as in :func:`read_counts_csv`.

    Raises
    ------
    CountsFileError, HierarchyError
        Malformed rows or structure (as :func:`read_counts_csv`, without the consistency check).
    SizeDomainError
        Sizes above ``max_size``.
    DomainTooLargeError
        More cells than the limit or the available memory allows.
    """
    rows, name = _read_rows(path, NOISY_HEADER)
    got = _collect(rows, name, "noisy_count", integer_values=False)
    hier = got.hierarchy
    n = got.largest_size if max_size is None else int(max_size)
    if n < got.largest_size:
        raise SizeDomainError(name, got.largest_size, n)
    check_cells(hier.size, n, name, bytes_per_cell)
    index = {r: i for i, r in enumerate(hier.ids)}
    all_int = all(isinstance(v, int) for v in got.values.values())
    arr = np.zeros((hier.size, n), dtype=np.int64 if all_int else np.float64)
    for (rid, size), val in got.values.items():
        arr[index[rid], size - 1] = val
    return NoisyValues(hierarchy=hier, values=arr)


def counts_csv_text(hier: Hierarchy, counts: np.ndarray, column: str = "count", dense: bool = False) -> str:
    """CSV text of the non-zero (or, with ``dense``, all) cells of ``counts`` (``csv.writer``: region
    ids with a comma, quote or line break are quoted, so the file reads back)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COUNT_HEADER[:4] + (column,))
    is_int = np.issubdtype(counts.dtype, np.integer)
    for r in range(hier.size):
        par = "" if hier.parent[r] < 0 else hier.ids[int(hier.parent[r])]
        row = counts[r]
        idx = range(row.size) if dense else np.nonzero(row)[0].tolist()
        level = int(hier.level[r])
        for j in idx:
            v = row[j]
            writer.writerow((level, hier.ids[r], par, j + 1, str(int(v)) if is_int else repr(float(v))))
    return out.getvalue()
