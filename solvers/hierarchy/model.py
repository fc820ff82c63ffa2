"""Hierarchy and group-size data model for the PGSR problem, with a validating CSV reader.

Fioretto, Van Hentenryck, Zhu, *Differential Privacy of Hierarchical Census Data: An
Optimization Approach* (AIJ 2021): a hierarchy of regions (one root at level 1, every leaf
at level L), group sizes s = 1..N, and counts n_s^r = number of groups of size s in region
r. Consistency: for every internal region r and size s, sum_{c child of r} n_s^c = n_s^r.
The total number of groups G = sum_s n_s^root is public.

Regions are stored in breadth-first order (root first, parents before children), so a
bottom-up pass is a reverse loop and a top-down pass a forward loop.

CSV formats
-----------
True counts: ``level,region_id,parent_id,size,count`` (blank parent for the root; zero
counts may be omitted; every count and the root total G at most :data:`MAX_COUNT`). Noisy
values: ``level,region_id,parent_id,size,noisy_count`` (integers or decimals, may be
negative, |value| at most :data:`MAX_COUNT`; a missing (region, size) pair means 0).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError, ResourceError
from securelp.solvers.files import require_file
from securelp.solvers.resources import available_memory, memory_shortfall

logger = logging.getLogger(__name__)

COUNT_HEADER = ("level", "region_id", "parent_id", "size", "count")
NOISY_HEADER = ("level", "region_id", "parent_id", "size", "noisy_count")

#: Refuse dense arrays above this many cells (regions x sizes) before allocating.
MAX_DENSE_CELLS = 200_000_000
#: Largest count, total G and |noisy value| accepted (2**50). Every integer up to it is exact in
#: float64 (2**53), and int64 sums of up to 2**12 of them cannot wrap around.
MAX_COUNT = 2**50
#: Memory of the readers' own dense arrays (int64 or float64 values, a children-sum row), bytes per cell.
READER_BYTES_PER_CELL = 16


@dataclass(frozen=True)
class Hierarchy:
    """A rooted tree of regions in breadth-first order.

    Attributes
    ----------
    ids:
        Region identifiers; ``ids[0]`` is the root.
    parent:
        ``parent[i]`` is the index of region i's parent (-1 for the root).
    level:
        1 for the root, L for the leaves.
    """

    ids: tuple[str, ...]
    parent: np.ndarray
    level: np.ndarray
    children: tuple[tuple[int, ...], ...] = field(repr=False)

    @property
    def size(self) -> int:
        """Number of regions."""
        return len(self.ids)

    @property
    def depth(self) -> int:
        """Number of levels L."""
        return int(self.level.max())

    @property
    def internal(self) -> list[int]:
        """Indices of internal regions, parents before children."""
        return [i for i in range(self.size) if self.children[i]]

    @property
    def leaves(self) -> list[int]:
        """Indices of the leaves."""
        return [i for i in range(self.size) if not self.children[i]]

    def levels(self) -> dict[int, list[int]]:
        """Level number -> region indices at that level."""
        out: dict[int, list[int]] = {}
        for i, lev in enumerate(self.level.tolist()):
            out.setdefault(int(lev), []).append(i)
        return out

    @staticmethod
    def from_parents(ids: Iterable[str], parents: Iterable[str | None]) -> Hierarchy:
        """Build from (id, parent id) pairs; validates one root, no orphan, no cycle, equal leaf depth."""
        id_list = list(ids)
        par_list = list(parents)
        roots = [r for r, p in zip(id_list, par_list) if not p]
        if len(roots) != 1:
            raise InputError(
                f"the hierarchy must have exactly one root (a region with a blank parent_id); found "
                f"{len(roots)}: {roots[:5]}"
            )
        known = set(id_list)
        kids: dict[str, list[str]] = {r: [] for r in id_list}
        for r, p in zip(id_list, par_list):
            if p:
                if p not in known:
                    raise InputError(f"region {r!r} has parent_id {p!r}, which is not a region of the file (orphan)")
                if p == r:
                    raise InputError(f"region {r!r} is its own parent (cycle)")
                kids[p].append(r)
        order = [roots[0]]
        lev = {roots[0]: 1}
        head = 0
        while head < len(order):
            r = order[head]
            head += 1
            for c in kids[r]:
                lev[c] = lev[r] + 1
                order.append(c)
        if len(order) != len(id_list):
            unreachable = sorted(known - set(order))
            raise InputError(
                f"regions not reachable from root {roots[0]!r} (a parent cycle): {unreachable[:5]}"
            )
        index = {r: i for i, r in enumerate(order)}
        parent = np.empty(len(order), dtype=np.int64)
        par_of = dict(zip(id_list, par_list))
        for i, r in enumerate(order):
            parent[i] = index[par_of[r]] if par_of[r] else -1
        children = tuple(tuple(index[c] for c in kids[r]) for r in order)
        level = np.array([lev[r] for r in order], dtype=np.int64)
        leaf_levels = {int(level[i]) for i in range(len(order)) if not children[i]}
        if len(leaf_levels) > 1:
            shallow = [order[i] for i in range(len(order)) if not children[i] and level[i] == min(leaf_levels)]
            raise InputError(
                f"all leaves must be at the same depth; leaves are at levels {sorted(leaf_levels)} "
                f"(e.g. {shallow[:3]} at level {min(leaf_levels)})"
            )
        return Hierarchy(ids=tuple(order), parent=parent, level=level, children=children)


@dataclass(frozen=True)
class GroupSizeData:
    """Counts ``counts[r, s-1]`` of groups of size s in region r (dense, int64 or float64)."""

    hierarchy: Hierarchy
    counts: np.ndarray

    @property
    def max_size(self) -> int:
        """N, the largest group size represented."""
        return int(self.counts.shape[1])

    @property
    def total(self) -> int:
        """G, the number of groups at the root."""
        return int(self.counts[0].sum())


def _check_cells(regions: int, sizes: int, what: str, bytes_per_cell: float = READER_BYTES_PER_CELL) -> None:
    """ResourceError (before anything is allocated) when regions x sizes cells pass
    :data:`MAX_DENSE_CELLS`, or when ``bytes_per_cell`` per cell would not fit in the memory
    available (:func:`securelp.solvers.resources.available_memory`)."""
    cells = regions * sizes
    if cells > MAX_DENSE_CELLS:
        raise ResourceError(
            f"{what}: {regions} regions x {sizes} sizes = {cells:,} cells exceeds the limit of "
            f"{MAX_DENSE_CELLS:,}; use fewer sizes (--max-size) or a smaller hierarchy"
        )
    free = available_memory()
    if short := memory_shortfall(cells * bytes_per_cell, free):
        assert free is not None
        fit = int(free // bytes_per_cell)
        raise ResourceError(
            f"{what}: {regions} regions x {sizes} sizes = {cells:,} cells need about {short} (estimate: "
            f"{bytes_per_cell:g} bytes per cell); about {fit:,} cells would fit: use fewer sizes (--max-size) "
            f"or a smaller hierarchy"
        )


def _shown(text: str, width: int = 40) -> str:
    """``text`` quoted for a one-line message, cut after ``width`` characters."""
    return repr(text) if len(text) <= width else repr(text[:width]) + f"... ({len(text)} characters)"


def _parse_int(text: str, what: str, where: str) -> int:
    t = text.strip()
    try:
        value = int(t)
    except ValueError:
        raise InputError(f"{where}: {what} must be an integer, got {_shown(text)}") from None
    return value


def _read_rows(path: str | os.PathLike[str], header: tuple[str, ...]) -> tuple[list[list[str]], str]:
    p = require_file(path, "counts file" if header == COUNT_HEADER else "noisy counts file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text ({exc})") from None
    reader = csv.reader(io.StringIO(text))
    rows = list(reader)
    if not rows:
        raise InputError(f"{p}: empty file; expected header {','.join(header)}")
    got = tuple(c.strip() for c in rows[0])
    if got != header:
        raise InputError(f"{p} line 1: header must be {','.join(header)}, got {','.join(got)}")
    return rows[1:], str(p)


def _collect(
    rows: list[list[str]], name: str, value_col: str, integer_values: bool
) -> tuple[Hierarchy, dict[tuple[str, int], int | float], dict[str, int], int]:
    region_parent: dict[str, str] = {}
    region_level: dict[str, int] = {}
    region_line: dict[str, int] = {}
    values: dict[tuple[str, int], int | float] = {}
    max_size = 0
    for k, row in enumerate(rows):
        line = k + 2
        where = f"{name} line {line}"
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 5:
            raise InputError(f"{where}: expected 5 columns, got {len(row)}")
        lev = _parse_int(row[0], "level", where)
        rid = row[1].strip()
        pid = row[2].strip()
        if not rid:
            raise InputError(f"{where}: empty region_id")
        size = _parse_int(row[3], "size", where)
        if size < 1:
            raise InputError(f"{where}: size must be >= 1, got {size}")
        raw = row[4].strip()
        if integer_values:
            val: int | float = _parse_int(raw, value_col, where)
            if val < 0:
                raise InputError(f"{where}: {value_col} must be a non-negative integer, got {_shown(raw)} "
                                 f"(region {rid!r})")
        else:
            try:
                val = int(raw)
            except ValueError:
                try:
                    val = float(raw)
                except ValueError:
                    raise InputError(f"{where}: {value_col} must be a number, got {_shown(raw)}") from None
                if not math.isfinite(val):
                    raise InputError(f"{where}: {value_col} must be finite, got {_shown(raw)}")
        if abs(val) > MAX_COUNT:
            raise InputError(f"{where}: {value_col} {_shown(raw)} of region {rid!r} size {size} exceeds the "
                             f"largest accepted {'count' if integer_values else 'magnitude'} 2**50 = {MAX_COUNT:,}")
        if rid in region_parent:
            if region_parent[rid] != pid:
                raise InputError(
                    f"{where}: region {rid!r} has parent_id {pid!r} but line {region_line[rid]} says "
                    f"{region_parent[rid]!r}"
                )
            if region_level[rid] != lev:
                raise InputError(
                    f"{where}: region {rid!r} has level {lev} but line {region_line[rid]} says {region_level[rid]}"
                )
        else:
            region_parent[rid] = pid
            region_level[rid] = lev
            region_line[rid] = line
        key = (rid, size)
        if key in values:
            raise InputError(f"{where}: duplicate row for region {rid!r} size {size}")
        values[key] = val
        max_size = max(max_size, size)
    if not region_parent:
        raise InputError(f"{name}: no data rows")
    hier = Hierarchy.from_parents(region_parent.keys(), region_parent.values())
    for i, rid in enumerate(hier.ids):
        if region_level[rid] != int(hier.level[i]):
            raise InputError(
                f"{name} line {region_line[rid]}: region {rid!r} has level {region_level[rid]} but is at depth "
                f"{int(hier.level[i])} of the hierarchy (root = level 1)"
            )
    return hier, values, region_line, max_size


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
    InputError
        Malformed rows, negative or non-integer counts, a count or a root total G above
        :data:`MAX_COUNT`, not exactly one root, orphans, cycles, leaves at different depths, or
        children that do not sum to their parent for some size (each message names the line or
        region and size).
    ResourceError
        More cells than :data:`MAX_DENSE_CELLS`, or than the available memory holds.
    """
    rows, name = _read_rows(path, COUNT_HEADER)
    hier, values, region_line, n_max = _collect(rows, name, "count", integer_values=True)
    root = hier.ids[0]
    total = sum(int(v) for (rid, _), v in values.items() if rid == root)  # Python ints: no wrap-around
    if total > MAX_COUNT:
        raise InputError(
            f"{name} line {region_line[root]}: the counts of root region {root!r} sum to G = {total:,} groups, "
            f"more than the largest accepted total 2**50 = {MAX_COUNT:,}"
        )
    if top_code and max_size is None:
        raise InputError(f"{name}: top-coding needs a public largest size N (--max-size)")
    n = n_max if max_size is None else int(max_size)
    if n < n_max and not top_code:
        raise InputError(f"{name}: sizes go up to {n_max} but --max-size is {n}")
    _check_cells(hier.size, n, name, bytes_per_cell)
    index = {r: i for i, r in enumerate(hier.ids)}
    counts = np.zeros((hier.size, n), dtype=np.int64)
    top: dict[str, int] = {}  # per region, the groups of size >= N (Python integers: no wrap-around)
    for (rid, size), val in values.items():
        if size >= n:
            top[rid] = top.get(rid, 0) + int(val)
        else:
            counts[index[rid], size - 1] = int(val)
    for rid, val in top.items():
        if val > MAX_COUNT:
            raise InputError(f"{name} line {region_line[rid]}: region {rid!r} has {val:,} groups of size {n} or more, "
                             f"more than the largest accepted count 2**50 = {MAX_COUNT:,}")
        counts[index[rid], n - 1] = val
    validate_consistency(hier, counts, name=name, region_line=region_line)
    return GroupSizeData(hierarchy=hier, counts=counts)


def _children_sum(counts: np.ndarray, kids: list[int]) -> np.ndarray:
    """Per size, the sum of the children's counts, exact for int64 counts in [0, MAX_COUNT]: added
    2**12 children at a time and capped at MAX_COUNT + 1 after each step, so it never wraps around
    (a capped sum is above every accepted count, so it still disagrees with the parent)."""
    cap = MAX_COUNT + 1
    out = np.zeros(counts.shape[1], dtype=np.int64)
    step = 2**12  # 2**12 * 2**50 + cap < 2**63
    for k in range(0, len(kids), step):
        out += counts[kids[k : k + step]].sum(axis=0)
        np.minimum(out, cap, out=out)
    return out


def validate_consistency(
    hier: Hierarchy, counts: np.ndarray, name: str = "data", region_line: dict[str, int] | None = None
) -> None:
    """Raise InputError naming the first region and size where the children do not sum to the parent.

    ``counts`` are int64 in [0, :data:`MAX_COUNT`] (as :func:`read_counts_csv` guarantees).
    """
    for r in hier.internal:
        csum = _children_sum(counts, list(hier.children[r]))
        bad = np.nonzero(csum != counts[r])[0]
        if bad.size:
            s = int(bad[0]) + 1
            rid = hier.ids[r]
            line = f" (first row at line {region_line[rid]})" if region_line and rid in region_line else ""
            got = f"more than {MAX_COUNT:,}" if csum[bad[0]] > MAX_COUNT else f"{int(csum[bad[0]])}"
            raise InputError(
                f"{name}: children of region {rid!r}{line} sum to {got} groups of size {s}, but the "
                f"region has {counts[r, bad[0]]}; {bad.size} size(s) disagree. Children must sum to the parent "
                f"for every size"
            )


@dataclass(frozen=True)
class NoisyValues:
    """Noisy values ``values[r, s-1]`` (int64 if all integers, else float64) on a hierarchy."""

    hierarchy: Hierarchy
    values: np.ndarray


def read_noisy_csv(
    path: str | os.PathLike[str], max_size: int | None = None, *, bytes_per_cell: float = READER_BYTES_PER_CELL
) -> NoisyValues:
    """Read ``level,region_id,parent_id,size,noisy_count`` (structure validated; every value a finite
    integer or decimal with |value| at most :data:`MAX_COUNT`).

    ``bytes_per_cell`` is checked against the available memory before the dense array is
    allocated, as in :func:`read_counts_csv`.
    """
    rows, name = _read_rows(path, NOISY_HEADER)
    hier, values, _, n_max = _collect(rows, name, "noisy_count", integer_values=False)
    n = n_max if max_size is None else int(max_size)
    if n < n_max:
        raise InputError(f"{name}: sizes go up to {n_max} but --max-size is {n}")
    _check_cells(hier.size, n, name, bytes_per_cell)
    index = {r: i for i, r in enumerate(hier.ids)}
    all_int = all(isinstance(v, int) for v in values.values())
    arr = np.zeros((hier.size, n), dtype=np.int64 if all_int else np.float64)
    for (rid, size), val in values.items():
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


def _magnitude(v: int) -> str:
    """``v`` for a message, or its approximate number of digits when it is long."""
    return str(v) if v < 10**20 else f"a number of about {int(v.bit_length() * 0.30103) + 1} digits"


def parse_epsilon(text: str | float) -> Fraction:
    """Parse a privacy budget exactly (``"0.1"`` -> 1/10).

    The rule: eps > 0 and, as a fraction p/q in lowest terms, p <= 10**9 and q <= 10**9 (so
    10**-9 <= eps <= 10**9; ``0.123456789``, ``123456789`` and ``1/3`` pass, ``1234567891``,
    ``1e-12`` and ``0.1234567891`` do not).

    Raises
    ------
    InputError
        Not a number, eps <= 0, or outside the rule above (the message says which part).
    """
    t = str(text).strip()
    rule = "eps is used as an exact fraction p/q in lowest terms, and p and q must both be at most 10**9"
    huge = re.fullmatch(r"([+-]?)(\d+\.?\d*|\.\d+)[eE]([+-]?)0*[1-9]\d{4,}", t)
    if huge:  # an exponent of 10**4 or more: do not build the number only to refuse it
        if huge.group(1) == "-" or not re.search("[1-9]", huge.group(2)):
            raise InputError(f"--eps must be > 0, got {_shown(t)}")
        side = "smaller than 10**-9" if huge.group(3) == "-" else "larger than 10**9"
        raise InputError(f"--eps {_shown(t)}: {rule}; it is {side}")
    try:
        eps = Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise InputError(f"--eps must be a positive number, got {_shown(t)}") from None
    if eps <= 0:
        raise InputError(f"--eps must be > 0, got {_shown(t)}")
    p, q = eps.numerator, eps.denominator
    if p > 10**9 or q > 10**9:
        if eps > 10**9:
            why = "it is larger than 10**9"
        elif eps < Fraction(1, 10**9):
            why = "it is smaller than 10**-9"
        elif p > 10**9:
            why = f"p = {_magnitude(p)} (too many significant digits)"
        else:
            why = f"q = {_magnitude(q)} (too many decimals)"
        raise InputError(f"--eps {_shown(t)}: {rule}; {why}")
    return eps
