"""Which ways revealed numbers can be assigned to scaled columns: the edges of every complete assignment.

Several attacks end in the same question. A party's columns t (its scaled monomial columns, say)
each correspond to exactly one of a list of revealed numbers (the entries of its x_j, or of a
known row of A), through an unknown one-to-one map; what the coordinator knows restricts which
number each column may take (x_pi(t) = d_t y_t with d_t in the public range [1/s, s]: the number
over y_t must lie in that range), and a number of free slots (the party's dense-masked columns,
whose values are not tied to any column it sees) take any number. Every number is taken once.

An edge (t, g) is *usable* when some complete assignment uses it. When column t has exactly one
usable number, that number is certain: no other assignment is consistent with the transcript
(Mangasarian 2011 for the protocol; positive monomial masks as in Bednarz, Bean, Roughan 2009).

Equal numbers are grouped (a group of count c takes c columns), so the assignment is a b-matching:
one maximum flow (source -> column, 1; column -> group, 1 per edge; source -> free slots, their
count; slots -> every group; group -> sink, its count) gives one complete assignment, and the
usable edges are those carrying flow or lying on a cycle of the residual graph (two maximum flows
differ by a circulation there), i.e. joining nodes of one strongly connected component.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, maximum_flow

#: edges above which the assignment is not attempted (memory and time of the flow)
MAX_EDGES = 4_000_000


@dataclass(frozen=True, eq=False)
class Assignments:
    """The usable edges of the complete assignments.

    Attributes
    ----------
    feasible : whether a complete assignment exists (False: the counts or edges do not fit; nothing
        below is meaningful).
    usable : (E,) per edge given, whether some complete assignment uses it.
    slots_usable : (G,) per group, whether the free slots can take one of its numbers in some
        complete assignment.
    slots_only : (G,) per group, whether every number of the group goes to a free slot in every
        complete assignment (no column can take one).
    """

    feasible: bool
    usable: np.ndarray
    slots_usable: np.ndarray
    slots_only: np.ndarray


def group_values(values: np.ndarray, rel_tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group equal values (relative ``rel_tol`` to the previous one, in sorted order).

    Returns
    -------
    (representative value per group, count per group, group of each input value)
    """
    order = np.argsort(values, kind="stable")
    v = values[order]
    new = np.ones(v.size, dtype=bool)
    if v.size > 1:
        new[1:] = np.abs(v[1:] - v[:-1]) > rel_tol * np.maximum(np.abs(v[1:]), np.abs(v[:-1]))
    gid_sorted = np.cumsum(new) - 1
    group = np.empty(v.size, dtype=np.int64)
    group[order] = gid_sorted
    reps = v[new]
    counts = np.bincount(gid_sorted, minlength=reps.size) if v.size else np.zeros(0, dtype=np.int64)
    return reps, counts.astype(np.int64), group


def complete_assignments(n_left: int, edge_left: np.ndarray, edge_group: np.ndarray, group_count: np.ndarray,
                         slots: int) -> Assignments:
    """The usable edges of the assignments of ``n_left`` columns and ``slots`` free slots to grouped
    numbers (see the module docstring).

    Parameters
    ----------
    n_left : columns; each takes exactly one number through one of its edges.
    edge_left, edge_group : the edges (column, group); duplicates are allowed.
    group_count : numbers per group; every number is taken exactly once.
    slots : free slots, each taking one number of any group.
    """
    n_groups = int(group_count.size)
    n_edges = int(edge_left.size)
    none = Assignments(False, np.zeros(n_edges, dtype=bool), np.zeros(n_groups, dtype=bool),
                       np.zeros(n_groups, dtype=bool))
    total = int(group_count.sum())
    if slots < 0 or total != n_left + slots:
        return none
    if total == 0:
        return Assignments(True, np.zeros(n_edges, dtype=bool), np.zeros(n_groups, dtype=bool),
                           np.zeros(n_groups, dtype=bool))
    # nodes: source 0, columns 1..L, slots L+1, groups L+2 .. L+1+G, sink L+2+G
    src, slot_node, g0 = 0, n_left + 1, n_left + 2
    sink = g0 + n_groups
    n_nodes = sink + 1
    pair = np.unique(np.stack([edge_left.astype(np.int64), edge_group.astype(np.int64)]), axis=1)
    lefts, groups = pair[0], pair[1]
    u = [np.zeros(n_left, dtype=np.int64), 1 + lefts, g0 + np.arange(n_groups)]
    v = [1 + np.arange(n_left), g0 + groups, np.full(n_groups, sink)]
    cap = [np.ones(n_left, dtype=np.int64), np.ones(lefts.size, dtype=np.int64), group_count]
    if slots:
        u += [np.array([src]), np.full(n_groups, slot_node)]
        v += [np.array([slot_node]), g0 + np.arange(n_groups)]
        cap += [np.array([slots]), group_count]
    eu, ev, ec = np.concatenate(u), np.concatenate(v), np.concatenate(cap).astype(np.int32)
    graph = sp.csr_array((ec, (eu, ev)), shape=(n_nodes, n_nodes))
    graph.sum_duplicates()
    result = maximum_flow(graph, src, sink, method="dinic")
    if int(result.flow_value) != total:
        return none
    flow = result.flow.tocoo()
    keys = flow.row.astype(np.int64) * n_nodes + flow.col.astype(np.int64)
    order = np.argsort(keys)
    keys, vals = keys[order], flow.data[order]

    def flow_on(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        k = a * n_nodes + b
        pos = np.clip(np.searchsorted(keys, k), 0, max(0, keys.size - 1))
        return np.where((keys.size > 0) & (keys[pos] == k), vals[pos], 0) if keys.size else np.zeros(k.size)

    f = flow_on(eu, ev)
    fwd = f < ec
    back = f > 0
    ru = np.concatenate([eu[fwd], ev[back]])
    rv = np.concatenate([ev[fwd], eu[back]])
    residual = sp.csr_array((np.ones(ru.size, dtype=np.int8), (ru, rv)), shape=(n_nodes, n_nodes))
    _, comp = connected_components(residual, directed=True, connection="strong")
    # per unique edge, then back to the edges as given
    f_pair = flow_on(1 + lefts, g0 + groups)
    usable_pair = (f_pair > 0) | (comp[1 + lefts] == comp[g0 + groups])
    edge_key = edge_left.astype(np.int64) * max(1, n_groups) + edge_group.astype(np.int64)
    pair_key = lefts * max(1, n_groups) + groups
    usable = usable_pair[np.searchsorted(pair_key, edge_key)] if n_edges else np.zeros(0, dtype=bool)
    if slots:
        f_slot = flow_on(np.full(n_groups, slot_node), g0 + np.arange(n_groups))
        slots_usable = (f_slot > 0) | (comp[slot_node] == comp[g0 + np.arange(n_groups)])
    else:
        slots_usable = np.zeros(n_groups, dtype=bool)
    taken_by_columns = np.zeros(n_groups, dtype=bool)
    taken_by_columns[groups[usable_pair]] = True
    return Assignments(True, usable, slots_usable, slots_usable & ~taken_by_columns)
