"""``securelp.census_release``: consistent group-size counts over a geography, differentially private.

The counts ``c[r, s]`` (groups of size ``s`` in region ``r``) get exact two-sided geometric noise
(Canonne, Kamath, Steinke 2020) at scale ``2L/eps`` (counts) or ``L/eps`` (cumulative counts,
``L`` the hierarchy's levels), and one of Fioretto, Van Hentenryck and Zhu's post-processings
(*Differential Privacy of Hierarchical Census Data: An Optimization Approach*, AI 296, 2021) makes
them consistent: non-negative integers, children summing to their parent, the root summing to
the public number of groups G. Post-processing sees only the noisy values and the public
hierarchy, G and N, so the release is eps-DP; what a release returns is computed from those
alone (errors against the truth belong to an evaluation, ``securelp census evaluate``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.hierarchy.noise import parse_epsilon
from securelp.solvers.randomness import SecureRandom

__all__ = ["CensusRelease", "census_release", "release"]


@dataclass(frozen=True)
class CensusRelease:
    """A release: the consistent counts and what may be published with them."""

    hierarchy: Hierarchy
    #: released counts, regions x sizes (``counts[r, s-1]``: groups of size s in region r)
    counts: np.ndarray
    mechanism: str
    eps: Fraction
    #: False when a seed made the noise reproducible (then it is a simulation, not a release)
    private: bool
    #: figures of the released counts and the public G only (consistency, negatives, time)
    report: dict[str, Any]


def census_release(data: GroupSizeData | str | os.PathLike[str], eps: float | str, *, mechanism: str = "chain",
                   max_size: int | None = None, seed: int | str | None = None,
                   options: mech.PostprocessOptions | None = None) -> CensusRelease:
    """Release ``data``'s group-size counts with eps-DP, consistent across the hierarchy.

    Parameters
    ----------
    data:
        The true counts: a :class:`~securelp.solvers.hierarchy.model.GroupSizeData` or a CSV
        ``level,region_id,parent_id,size,count`` (docs/reference/files.md).
    eps:
        The privacy budget, read exactly from its decimal text (``"0.1"`` is 1/10).
    mechanism:
        One of ``hdp``, ``cdp``, ``chain`` (the most accurate), ``hqp``, ``cqp``, ``topdown``.
    max_size:
        N, the largest group size, chosen without looking at the data (it is published); larger
        groups are counted at N. Required for a CSV: one taken from the data would disclose the
        largest group.
    seed:
        ``None``: fresh OS entropy. A seed makes the noise reproducible and the release NOT
        private (``private`` is then False).

    Raises
    ------
    InputError
        An unknown mechanism, an eps that is not positive, a CSV without ``max_size``, bad counts.
    """
    mech.check_mechanism(mechanism)
    exact_eps = parse_epsilon(eps)
    if not isinstance(data, GroupSizeData):
        if max_size is None:
            raise InputError("a counts file needs max_size, the largest group size, chosen without looking at the "
                             "data (it is part of the release)", parameter="max_size")
        data = read_counts_csv(data, max_size=max_size, bytes_per_cell=mech.BYTES_PER_CELL[mechanism], top_code=True)
    elif max_size is not None and max_size != data.max_size:
        raise InputError(f"max_size {max_size} differs from the data's size domain N = {data.max_size}",
                         parameter="max_size")
    rng = SecureRandom(seed=seed, label="census/release")
    hier, total = data.hierarchy, data.total  # public: the hierarchy and G
    noisy = mech.add_noise(mechanism, data, exact_eps, rng)
    del data  # below, only the noisy measurements and the public parameters are used
    pp = mech.postprocess(mechanism, hier, noisy, total, options or mech.PostprocessOptions())
    report = {"mechanism": mechanism, "eps": float(exact_eps), "private": not rng.reproducible,
              "noise_scale": float(mech.noise_scale(mechanism, hier.depth, exact_eps)),
              "objective": pp.objective, **mech.release_metrics(hier, pp.counts, total), "time_s": pp.time_s}
    return CensusRelease(hier, pp.counts, mechanism, exact_eps, not rng.reproducible, report)


#: ``securelp.census.release``
release = census_release
