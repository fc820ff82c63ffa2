"""A regional census release in which no process sees a true count it does not own.

Each party is one region at the *party level* ``l*`` of the hierarchy (a state; a borough) and
holds the group-size counts of its region and of every region below it. The regions above
``l*`` (the nation; any level between) *span* parties. The mechanisms' noisy values (counts, or
cumulative counts, plus exact two-sided geometric noise of scale ``b`` -- ``2L/eps`` or ``L/eps``,
as in :mod:`.noise`) are produced as follows:

- a region inside party j's subtree: party j adds the whole noise itself and sends the noisy
  values;
- a spanning region r over ``p_r`` parties: each of them adds its own values and one share of the
  noise (:func:`.distributed.noise_share`, ``NB(1/p_r)`` differences), and the vectors are summed
  under secure aggregation, so the coordinator learns only ``true + noise`` for r.

Every noisy value therefore has exactly the distribution it has in the single-process release,
and the post-processing (any of the six mechanisms) runs on the assembled noisy values with the
public hierarchy and G: the release is eps-DP against the coordinator, the same accounting as the
centralized release (:func:`accounting`). Against the coordinator together with ``k`` parties
under a spanning region, the noise left in that region's values is a sum of ``p_r - k`` shares,
and its privacy loss is larger (:func:`collusion_epsilon` measures it from the exact pmf).

This module is transport-free: :func:`party_values` is what a party computes, :func:`assemble`
what the coordinator computes; the protocol that carries them is ``census-federated``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.distributed import noise_share, share_pmf
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy, to_cumulative
from securelp.solvers.hierarchy.noise import discrete_laplace
from securelp.solvers.randomness import SecureRandom

__all__ = ["PartyValues", "RegionalSplit", "accounting", "assemble", "collusion_epsilon", "level_loss", "party_values",
           "release_groups", "simulate_federated", "split_by_level"]


@dataclass(frozen=True)
class RegionalSplit:
    """Which party owns which region.

    Attributes
    ----------
    level : the party level l* (2 .. L).
    parties : the party regions' indices (the regions at level l*), in hierarchy order.
    owner : region index -> the index into ``parties`` of its owner, -1 for a spanning region.
    spanning : the spanning regions' indices (the levels above l*), parents first.
    under : for each spanning region, the indices into ``parties`` below it.
    spanning_levels : each spanning region's level.
    """

    level: int
    parties: tuple[int, ...]
    owner: np.ndarray
    spanning: tuple[int, ...]
    under: tuple[tuple[int, ...], ...]
    spanning_levels: tuple[int, ...]

    def owned(self, j: int) -> np.ndarray:
        """The regions party ``j`` owns (its region and all below), in hierarchy order."""
        return np.nonzero(self.owner == j)[0]

    def ancestors(self, j: int) -> list[int]:
        """The positions in ``spanning`` of party ``j``'s spanning ancestors."""
        return [pos for pos, below in enumerate(self.under) if j in below]


def split_by_level(hier: Hierarchy, level: int = 2) -> RegionalSplit:
    """One party per region at ``level`` (2 .. L): it owns its region's subtree."""
    if not 2 <= level <= hier.depth:
        raise InputError(f"the party level must be between 2 and the hierarchy's depth {hier.depth}, got {level}",
                         parameter="level")
    parties = tuple(i for i in range(hier.size) if int(hier.level[i]) == level)
    owner = np.full(hier.size, -1, dtype=np.int64)
    for j, r in enumerate(parties):
        owner[r] = j
    for i in range(hier.size):  # parents come before children
        if owner[i] < 0 and int(hier.level[i]) > level:
            owner[i] = owner[int(hier.parent[i])]
    spanning = tuple(i for i in range(hier.size) if owner[i] < 0)
    below: dict[int, list[int]] = {r: [] for r in spanning}
    for j, r in enumerate(parties):
        a = int(hier.parent[r])
        while a >= 0:
            below[a].append(j)
            a = int(hier.parent[a])
    return RegionalSplit(level, parties, owner, spanning, tuple(tuple(below[r]) for r in spanning),
                         tuple(int(hier.level[r]) for r in spanning))


@dataclass(frozen=True)
class PartyValues:
    """What party ``j`` sends: the noisy values of its own regions (in the clear) and its vector for
    the spanning regions (its values plus noise shares), which goes into secure aggregation."""

    party: int
    own: np.ndarray  # (len(owned), N) int64
    spanning: np.ndarray  # (len(spanning), N) int64, zero rows for spanning regions not above it


def _scale(mechanism: str, levels: int, eps: Fraction) -> Fraction:
    return mech.noise_scale(mechanism, levels, eps)


def party_values(mechanism: str, eps: Fraction, split: RegionalSplit, depth: int, j: int, own_counts: np.ndarray,
                 rng: SecureRandom) -> PartyValues:
    """Party ``j``'s noisy values from its own counts ``own_counts`` (rows: :meth:`RegionalSplit.owned`
    of ``j``, its party region first), with exact noise of the mechanism's scale for an
    ``depth``-level hierarchy."""
    mech.check_mechanism(mechanism)
    owned = split.owned(j)
    counts = np.asarray(own_counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[0] != owned.size:
        raise InputError(f"party {j} holds {owned.size} regions, got counts of shape {counts.shape}",
                         parameter="own_counts")
    if counts.size and counts.min() < 0:
        raise InputError(f"party {j}'s counts must be non-negative", parameter="own_counts")
    b = _scale(mechanism, depth, eps)
    base = to_cumulative(counts) if mechanism in mech.CUMULATIVE else counts
    own = base + discrete_laplace(rng.spawn("own"), b, base.size).reshape(base.shape)
    width = counts.shape[1]
    spanning = np.zeros((len(split.spanning), width), dtype=np.int64)
    region = base[0]  # the party region's values: its contribution to every spanning ancestor
    for pos in split.ancestors(j):
        share = noise_share(rng.spawn(f"share{pos}"), b, len(split.under[pos]), width)
        spanning[pos] = region + share
    return PartyValues(j, own, spanning)


def assemble(split: RegionalSplit, n_regions: int, own: list[np.ndarray], spanning_sum: np.ndarray) -> np.ndarray:
    """The coordinator's noisy values for every region: each party's own rows, and for the spanning
    regions the securely aggregated sum of the parties' vectors."""
    width = spanning_sum.shape[1]
    noisy = np.zeros((n_regions, width), dtype=np.int64)
    for j, rows in enumerate(own):
        noisy[split.owned(j)] = rows
    noisy[list(split.spanning)] = spanning_sum
    return noisy


def accounting(mechanism: str, eps: Fraction, split: RegionalSplit, depth: int) -> dict[str, object]:
    """The privacy budget per level and in total, and who adds the noise of each level.

    Each level's values have L1 sensitivity 2 (counts: one group changes size, two counts move by
    one) or 1 (cumulative counts) per region path, and noise of scale b = sensitivity * L / eps:
    eps/L per level, regions of one level composing in parallel (disjoint groups), the L levels
    sequentially: eps in total, as in the single-process release.
    """
    b = _scale(mechanism, depth, eps)
    per_level = eps / depth
    levels = []
    for lev in range(1, depth + 1):
        who = ("shares of every party below, summed under secure aggregation" if lev < split.level
               else "the region's party")
        levels.append({"level": lev, "eps": float(per_level), "eps_exact": str(per_level), "noise_scale": float(b),
                       "noise_added_by": who})
    return {"mechanism": mechanism, "eps_total": float(eps), "eps_total_exact": str(eps), "party_level": split.level,
            "levels": levels,
            "against": "the coordinator, and any single party (each sees only its own counts and the release)"}


def level_loss(mechanism: str, eps: Fraction, depth: int, parties: int, colluding: int) -> float:
    """The privacy loss of one spanning region's value against the coordinator with ``colluding`` of
    the ``parties`` below it: the noise it does not know is a sum of ``parties - colluding`` shares,
    ``X - X'`` with ``X, X'`` ~ NB((parties - colluding) / parties), and the loss is
    ``max_z |log P(z) / P(z + sensitivity)|`` over that exact pmf (where both are above 1e-12).
    No colluder: ``eps / L``, the centralized level's budget. Every party colluding: ``inf``."""
    if not 0 <= colluding <= parties:
        raise InputError(f"colluding must be between 0 and {parties}, got {colluding}", parameter="colluding")
    if colluding == parties:
        return math.inf
    b = _scale(mechanism, depth, eps)
    sens = 1 if mechanism in mech.CUMULATIVE else 2
    _, p = share_pmf(b, Fraction(parties - colluding, parties), int(40 * float(b)) + 50)
    ok = (p[:-sens] > 1e-12) & (p[sens:] > 1e-12)
    return float(np.abs(np.log(p[:-sens][ok]) - np.log(p[sens:][ok])).max())


def collusion_epsilon(mechanism: str, eps: Fraction, split: RegionalSplit, depth: int, colluding: int) -> float:
    """The total privacy loss of the people of an honest party against the coordinator together with
    ``colluding`` other parties, placed for the worst case (below every spanning region above the
    honest party, as many as fit beside it): each party level keeps its eps/L, each spanning level
    loses the largest :func:`level_loss` of its regions."""
    per_level = float(eps / depth)
    total = per_level * (depth - split.level + 1)
    for lev in sorted(set(split.spanning_levels)):
        total += max(level_loss(mechanism, eps, depth, len(below), min(colluding, len(below) - 1))
                     for below, lv in zip(split.under, split.spanning_levels) if lv == lev)
    return total


def release_groups(data: GroupSizeData, split: RegionalSplit) -> list[np.ndarray]:
    """Each party's own counts (rows :meth:`RegionalSplit.owned`), cut from a whole-hierarchy
    dataset, as a simulation hands them to its parties."""
    return [np.asarray(data.counts)[split.owned(j)] for j in range(len(split.parties))]


def simulate_federated(data: GroupSizeData, split: RegionalSplit, mechanism: str, eps: Fraction,
                       rng: SecureRandom, options: mech.PostprocessOptions | None = None
                       ) -> tuple[np.ndarray, mech.PostProcessed]:
    """Every party's step in one process (party j draws from ``rng.spawn(f"party{j}")``), the
    spanning vectors summed in the clear (the protocol sums them under secure aggregation), the
    noisy values assembled and post-processed: the noisy values and the release."""
    hier = data.hierarchy
    values = [party_values(mechanism, eps, split, hier.depth, j, rows, rng.spawn(f"party{j}"))
              for j, rows in enumerate(release_groups(data, split))]
    spanning_sum = np.sum([v.spanning for v in values], axis=0)
    noisy = assemble(split, hier.size, [v.own for v in values], spanning_sum)
    return noisy, mech.postprocess(mechanism, hier, noisy, data.total, options or mech.PostprocessOptions())
