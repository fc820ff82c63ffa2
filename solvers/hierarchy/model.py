"""The data model of the PGSR problem: a hierarchy of regions and its group-size counts.

Fioretto, Van Hentenryck, Zhu, *Differential Privacy of Hierarchical Census Data: An
Optimization Approach* (AIJ 2021): a hierarchy of regions (one root at level 1, every leaf
at level L), group sizes s = 1..N, and counts n_s^r = number of groups of size s in region
r. Consistency: for every internal region r and size s, sum_{c child of r} n_s^c = n_s^r.
The total number of groups G = sum_s n_s^root is public.

Cumulative counts (the chain of a region, sizes in ascending order):

    c_s^r = number of groups in r of size >= s,   so c_1^r = groups in r, c_1^root = G,
    n_s^r = c_s^r - c_{s+1}^r   (c_{N+1}^r = 0).

Regions are stored in breadth-first order (root first, parents before children), so a
bottom-up pass is a reverse loop and a top-down pass a forward loop. Every count, G and noisy
value is at most :data:`MAX_COUNT` = 2**50 in magnitude: every integer up to it is exact in
float64 (2**53), and int64 sums of up to 2**12 of them cannot wrap around.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from securelp.solvers.hierarchy.errors import CountsFileError, DomainTooLargeError, HierarchyError
from securelp.solvers.resources import available_memory, memory_shortfall

#: Refuse dense arrays above this many cells (regions x sizes) before allocating.
MAX_DENSE_CELLS = 200_000_000
#: Largest count, total G and |noisy value| accepted (2**50); see the module docstring.
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
            raise HierarchyError(f"the hierarchy must have exactly one root (a region with a blank parent_id); found "
                                 f"{len(roots)}: {roots[:5]}", roots[:5])
        known = set(id_list)
        kids: dict[str, list[str]] = {r: [] for r in id_list}
        for r, p in zip(id_list, par_list):
            if p:
                if p not in known:
                    raise HierarchyError(f"region {r!r} has parent_id {p!r}, which is not a region of the file (orphan)",
                                         [r])
                if p == r:
                    raise HierarchyError(f"region {r!r} is its own parent (cycle)", [r])
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
            raise HierarchyError(f"regions not reachable from root {roots[0]!r} (a parent cycle): {unreachable[:5]}",
                                 unreachable[:5])
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
            raise HierarchyError(f"all leaves must be at the same depth; leaves are at levels {sorted(leaf_levels)} "
                                 f"(e.g. {shallow[:3]} at level {min(leaf_levels)})", shallow[:3])
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



@dataclass(frozen=True)
class NoisyValues:
    """Noisy values ``values[r, s-1]`` (int64 if all integers, else float64) on a hierarchy."""

    hierarchy: Hierarchy
    values: np.ndarray



def check_cells(regions: int, sizes: int, what: str, bytes_per_cell: float = READER_BYTES_PER_CELL) -> None:
    """Refuse (before anything is allocated) a dense regions x sizes array above :data:`MAX_DENSE_CELLS`
    cells, or one whose ``bytes_per_cell`` per cell would not fit in the memory available
    (:func:`securelp.solvers.resources.available_memory`).

    Raises
    ------
    DomainTooLargeError
        With the numbers of regions and sizes, the limit and, for memory, the estimate and how many
        cells would fit.
    """
    cells = regions * sizes
    if cells > MAX_DENSE_CELLS:
        raise DomainTooLargeError(what, regions, sizes, MAX_DENSE_CELLS)
    free = available_memory()
    if short := memory_shortfall(cells * bytes_per_cell, free):
        assert free is not None
        raise DomainTooLargeError(what, regions, sizes, MAX_DENSE_CELLS, needed=short, bytes_per_cell=bytes_per_cell,
                                  fits=int(free // bytes_per_cell))


def to_cumulative(counts: np.ndarray) -> np.ndarray:
    """c_s = sum_{i >= s} n_i along the size axis."""
    return np.cumsum(np.asarray(counts)[:, ::-1], axis=1)[:, ::-1]


def from_cumulative(cum: np.ndarray) -> np.ndarray:
    """n_s = c_s - c_{s+1} (c_{N+1} = 0)."""
    c = np.asarray(cum)
    nxt = np.concatenate([c[:, 1:], np.zeros((c.shape[0], 1), dtype=c.dtype)], axis=1)
    return c - nxt


def children_sum(counts: np.ndarray, kids: list[int]) -> np.ndarray:
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
    """Raise CountsFileError naming the first region and size where the children do not sum to the parent.

    ``counts`` are int64 in [0, :data:`MAX_COUNT`] (as :func:`read_counts_csv` guarantees).
    """
    for r in hier.internal:
        csum = children_sum(counts, list(hier.children[r]))
        bad = np.nonzero(csum != counts[r])[0]
        if bad.size:
            s = int(bad[0]) + 1
            rid = hier.ids[r]
            line = f" (first row at line {region_line[rid]})" if region_line and rid in region_line else ""
            got = f"more than {MAX_COUNT:,}" if csum[bad[0]] > MAX_COUNT else f"{int(csum[bad[0]])}"
            raise CountsFileError(name, f"children of region {rid!r}{line} sum to {got} groups of size {s}, but the "
                                        f"region has {counts[r, bad[0]]}; {bad.size} size(s) disagree. Children must "
                                        f"sum to the parent for every size")


