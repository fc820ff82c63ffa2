"""The federated regional census release as seen by its coordinator (:mod:`securelp.solvers.hierarchy.federated`).

Each party (a region at the party level) adds exact two-sided geometric noise to its own regions'
counts (or cumulative counts) and sends them in the clear; for the regions above, each party's
values plus one noise share go into secure aggregation and the coordinator learns only the sum.
The coordinator then post-processes the assembled noisy values (Fioretto, Van Hentenryck, Zhu,
AIJ 2021) into the release and its report. The claim: eps-DP against the coordinator.

The view of one run is everything the coordinator receives and publishes:

- ``party{j}.own``: party j's noisy rows (its region and every region below it);
- ``aggregate``: the securely aggregated vectors of the spanning regions;
- ``release``: the post-processed counts, and ``report.*``: the release's report (mechanism, eps,
  noise scale, the post-processing's objective and details, the release's consistency figures).

Under one seed a run's view is bit for bit what the coordinator of a real session receives (each
measurement message's own rows, the sum of the masked vectors) and publishes: checked by
``tests/unit/test_dpaudit_protocols.py``.

Neighbouring inputs: D1 is D0 with one person more in one group of a leaf region (a group of size
s becomes size s + 1): two counts of each region on the leaf's path move by one (L1 sensitivity 2)
or one cumulative count does (sensitivity 1), and the public number of groups G is unchanged. (One
*group* more would change G, which the release publishes exactly, so it is not a neighbour the
claim covers.)

Runs are batched: R runs are R column blocks of one call of each party's
:func:`~securelp.solvers.hierarchy.federated.party_values` (the noise is independent per cell, so
each block is one run's values, drawn by the protocol's own code). For a cumulative mechanism the
cumulative sums of one call run across the blocks, so block k also carries the later blocks' group
totals, ``(R - 1 - k)`` times the region's number of groups; the adapter subtracts that offset,
which is the same on D0 and D1. The post-processing is a public function of the noisy values and
cannot add distinguishability; it still runs on every run (``release=True``) so that a field of
the release or its report computed from the truth is caught.

Planted leaks (test-only, ``plant=``; never part of the protocol):

- ``count-in-message``: the party owning the changed leaf adds that leaf's true counts to its message;
- ``half-noise``: every party draws its noise at half the claimed scale (the eps of the claim doubled);
- ``report-field``: the report carries the true number of persons at the root.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from securelp.coordinator.dpaudit.views import View
from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy import federated as fed
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy, to_cumulative
from securelp.solvers.randomness import SecureRandom

__all__ = ["CENSUS_PLANTS", "CensusFederatedViews", "small_census"]

#: planted leaks of the census adapter (test-only)
CENSUS_PLANTS = ("count-in-message", "half-noise", "report-field")


def small_census() -> tuple[GroupSizeData, int, int]:
    """A three-level hierarchy (nation; states A, B; four counties) with group sizes 1..4, and the
    neighbour used by default: county ``a1``, a group of size 2 gains a person. Returns the data,
    the changed leaf's index and the size s (1-based)."""
    ids = ["N", "A", "B", "a1", "a2", "b1", "b2"]
    parents = [None, "N", "N", "A", "A", "B", "B"]
    hier = Hierarchy.from_parents(ids, parents)
    leaves = {"a1": [3, 2, 1, 0], "a2": [1, 2, 2, 1], "b1": [2, 2, 0, 1], "b2": [4, 1, 1, 0]}
    counts = np.zeros((hier.size, 4), dtype=np.int64)
    for name, row in leaves.items():
        counts[hier.ids.index(name)] = row
    for r in reversed(hier.internal):
        counts[r] = counts[list(hier.children[r])].sum(axis=0)
    return GroupSizeData(hier, counts), hier.ids.index("a1"), 2


def one_person_more(data: GroupSizeData, leaf: int, size: int) -> GroupSizeData:
    """``data`` with one group of ``size`` in ``leaf`` grown by one person (on every region of the
    leaf's path: one group fewer of ``size``, one more of ``size + 1``)."""
    hier = data.hierarchy
    if hier.children[leaf]:
        raise InputError(f"region {hier.ids[leaf]!r} is not a leaf", parameter="leaf")
    if not 1 <= size < data.max_size or data.counts[leaf, size - 1] < 1:
        raise InputError(f"leaf {hier.ids[leaf]!r} has no group of size {size} that can grow within N = "
                         f"{data.max_size}", parameter="size")
    counts = np.array(data.counts, dtype=np.int64)
    r = leaf
    while r >= 0:
        counts[r, size - 1] -= 1
        counts[r, size] += 1
        r = int(hier.parent[r])
    return GroupSizeData(hier, counts)


class CensusFederatedViews:
    """View source of the federated census release on a neighbouring pair (see the module docstring).

    Parameters
    ----------
    eps:
        The claimed privacy budget.
    mechanism:
        One of the six PGSR mechanisms (default ``cdp``: cumulative counts, exact DP post-processing).
    data, leaf, size:
        D0 and the neighbour (default :func:`small_census`).
    level:
        The party level (default 2: one party per state).
    release:
        Post-process every run and put the release and its report in the view (default True).
    plant:
        A planted leak of :data:`CENSUS_PLANTS` (test-only), or None.
    """

    protocol = "census"

    def __init__(self, eps: float | str | Fraction = 1, *, mechanism: str = "cdp", data: GroupSizeData | None = None,
                 leaf: int | None = None, size: int | None = None, level: int = 2, release: bool = True,
                 plant: str | None = None) -> None:
        from securelp.solvers.hierarchy.noise import parse_epsilon

        mech.check_mechanism(mechanism)
        if plant is not None and plant not in CENSUS_PLANTS:
            raise InputError(f"unknown planted leak {plant!r} for census; choose one of {', '.join(CENSUS_PLANTS)}",
                             parameter="plant")
        self.eps = eps if isinstance(eps, Fraction) else parse_epsilon(eps)
        if data is None:
            data, d_leaf, d_size = small_census()
            leaf = d_leaf if leaf is None else leaf
            size = d_size if size is None else size
        if leaf is None or size is None:
            raise InputError("give the changed leaf and group size with your own data", parameter="leaf")
        self.mechanism = mechanism
        self.inputs = (data, one_person_more(data, leaf, size))
        self.leaf, self.size = leaf, size
        self.split = fed.split_by_level(data.hierarchy, level)
        self.release = release
        self.plant = plant
        self.claimed_eps = float(self.eps)
        self._leaf_party = int(self.split.owner[leaf])

    def describe(self) -> dict[str, Any]:
        hier = self.inputs[0].hierarchy
        return {"mechanism": self.mechanism, "regions": hier.size, "levels": hier.depth,
                "sizes": self.inputs[0].max_size, "parties": len(self.split.parties), "party_level": self.split.level,
                "neighbour": f"one person more in a group of size {self.size} of leaf {hier.ids[self.leaf]!r}",
                "view": "each party's own noisy rows, the securely aggregated spanning vectors"
                        + (", the release and its report" if self.release else ""),
                "noise_scale": float(mech.noise_scale(self.mechanism, hier.depth, self.eps)),
                "plant": self.plant}

    def _noisy_batch(self, data: GroupSizeData, runs: int, rng: SecureRandom) -> tuple[list[np.ndarray], np.ndarray]:
        """Per party its own rows and the spanning sum, each ``(regions, N * runs)``, offsets removed."""
        hier, split = data.hierarchy, self.split
        width = data.max_size
        eps = self.eps * 2 if self.plant == "half-noise" else self.eps
        own, spanning = [], np.zeros((len(split.spanning), width * runs), dtype=np.int64)
        cumulative = self.mechanism in mech.CUMULATIVE
        block = np.arange(width * runs) // width
        later = (runs - 1 - block)[None, :]  # blocks after each column's block
        for j, rows in enumerate(fed.release_groups(data, split)):
            tiled = np.tile(rows, (1, runs))
            values = fed.party_values(self.mechanism, eps, split, hier.depth, j, tiled, rng.spawn(f"party{j}"))
            own_rows = values.own
            if cumulative:
                own_rows = own_rows - later * rows.sum(axis=1, keepdims=True)
            own.append(own_rows)
            spanning += values.spanning
        if cumulative:
            totals = np.asarray(data.counts)[list(split.spanning)].sum(axis=1, keepdims=True)
            spanning = spanning - later * totals
        return own, spanning

    def views(self, side: int, runs: int, rng: SecureRandom) -> list[View]:
        data = self.inputs[side]
        hier = data.hierarchy
        width = data.max_size
        own, spanning = self._noisy_batch(data, runs, rng)
        truth_base = to_cumulative(data.counts) if self.mechanism in mech.CUMULATIVE else np.asarray(data.counts)
        out: list[View] = []
        for k in range(runs):
            cols = slice(k * width, (k + 1) * width)
            view: dict[str, Any] = {f"party{j}.own": rows[:, cols] for j, rows in enumerate(own)}
            view["aggregate"] = spanning[:, cols]
            if self.plant == "count-in-message":
                view[f"party{self._leaf_party}.true_counts"] = truth_base[self.leaf]
            if self.release:
                noisy = fed.assemble(self.split, hier.size, [rows[:, cols] for rows in own], spanning[:, cols])
                pp = mech.postprocess(self.mechanism, hier, noisy, data.total)
                view["release"] = pp.counts
                report = {"mechanism": self.mechanism, "eps": float(self.eps),
                          "noise_scale": float(mech.noise_scale(self.mechanism, hier.depth, self.eps)),
                          "objective": pp.objective, **mech.release_metrics(hier, pp.counts, data.total),
                          "time_s": pp.time_s, **{f"details.{key}": v for key, v in pp.details.items()}}
                if self.plant == "report-field":
                    report["persons"] = int((np.asarray(data.counts[0]) * np.arange(1, width + 1)).sum())
                view.update({f"report.{key}": v for key, v in report.items()})
            out.append(view)
        return out
