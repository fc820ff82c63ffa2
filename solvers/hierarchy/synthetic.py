"""Census-scale synthetic household-size hierarchy (nation -> 51 states -> 3,142 counties).

No county-level household-size table (SF1 H13) is bundled, so one is synthesised from the
2010 county populations (solvers/data/census/us_county_state_pop2010.csv, US Census PEP),
following the construction Fioretto, Van Hentenryck, Zhu (AIJ 2021) describe for their
census experiments: published tables stop at "7 or more persons", so sizes >= 7 are
extrapolated with the ratio n7/n6, the remaining 8+ groups are redistributed over larger
sizes, and a few outliers create a heavy tail. Our construction, per county c (seeded
numpy Generator; this is public synthetic data, not a privacy-relevant sample):

1. households H_c = round(pop_c / 2.58) (2010 national persons per household);
2. shares of sizes 1..6 and "7+" = national 2010 shares (26.7, 33.6, 15.8, 13.4, 6.2,
   2.5, 1.8 %) times a county factor exp(0.15 z), z standard normal, renormalised;
   counts (n_1, ..., n_6, n_7+) ~ Multinomial(H_c, shares);
3. rho = n_6 / n_5 (the county's decay ratio, clipped to [0.05, 0.8]); n_7 = min(n_7+,
   round(rho n_6)) -- the "ratio n7/n6" step; the remaining m = n_7+ - n_7 groups of size
   8+ are redistributed over sizes 8..N with weights rho^(s-7) (Multinomial(m, .));
4. finally 50 outlier groups (nation-wide) get sizes uniform in [10, N] and counties drawn
   with probability proportional to population; the first outlier has size exactly N, so the
   instance spans sizes 1..N (default N = 1,000).

States are the sums of their counties and the nation the sum of its states (so the
state totals are county sums; for Virginia this differs from the state row of the file,
as its README notes). The result is consistent by construction.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy.errors import TooFewSizesError
from securelp.solvers.hierarchy.model import READER_BYTES_PER_CELL, GroupSizeData, Hierarchy, check_cells

POPULATION_CSV = Path(__file__).resolve().parents[1] / "data" / "census" / "us_county_state_pop2010.csv"
NATIONAL_SHARES = np.array([0.267, 0.336, 0.158, 0.134, 0.062, 0.025, 0.018])
PERSONS_PER_HOUSEHOLD = 2.58
N_OUTLIERS = 50


def census_synthetic(
    max_size: int = 1000, seed: int = 0, scale: float = 1.0, *, bytes_per_cell: float = READER_BYTES_PER_CELL
) -> GroupSizeData:
    """The synthetic nation/state/county household-size instance (see module docstring).

    Parameters
    ----------
    max_size:
        N, the largest group size (>= 10).
    seed:
        Seed of the generator (the instance is a deterministic function of it).
    scale:
        Multiply every county population by this factor before building households (1.0 =
        real 2010 populations; smaller values make quick test instances).
    bytes_per_cell:
        Memory the caller will need per (region, size) cell, checked against the available memory
        before the counts are allocated (DomainTooLargeError).

    Raises
    ------
    TooFewSizesError
        ``max_size`` below 10.
    """
    if max_size < 10:
        raise TooFewSizesError("the synthetic census", max_size, 10)
    if not POPULATION_CSV.is_file():
        raise InputError(f"bundled population file missing: {POPULATION_CSV}")
    rng = np.random.default_rng(seed)
    with POPULATION_CSV.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    states = [r for r in rows if r["SUMLEV"] == "040"]
    counties = [r for r in rows if r["SUMLEV"] == "050"]
    state_name = {r["STATE"]: r["STNAME"] for r in states}
    ids = ["US"] + [f"S{s['STATE']}" for s in states] + [f"C{c['STATE']}{c['COUNTY']}" for c in counties]
    parents = [""] + ["US"] * len(states) + [f"S{c['STATE']}" for c in counties]
    for c in counties:
        if c["STATE"] not in state_name:
            raise InputError(f"county {c['CTYNAME']!r} has unknown state {c['STATE']}")
    hier = Hierarchy.from_parents(ids, parents)
    check_cells(hier.size, max_size, "synthetic census", bytes_per_cell)
    index = {r: i for i, r in enumerate(hier.ids)}
    counts = np.zeros((hier.size, max_size), dtype=np.int64)
    pops = np.array([int(c["CENSUS2010POP"]) for c in counties], dtype=np.float64) * scale
    sizes_tail = np.arange(8, max_size + 1)
    for k, c in enumerate(counties):
        h = int(np.rint(pops[k] / PERSONS_PER_HOUSEHOLD))
        shares = NATIONAL_SHARES * np.exp(0.15 * rng.standard_normal(7))
        shares /= shares.sum()
        n = rng.multinomial(h, shares)
        row = counts[index[f"C{c['STATE']}{c['COUNTY']}"]]
        row[:6] = n[:6]
        rho = float(np.clip(n[5] / n[4], 0.05, 0.8)) if n[4] > 0 else 0.3
        n7 = min(int(n[6]), int(np.rint(rho * n[5])))
        row[6] = n7
        rest = int(n[6]) - n7
        if rest > 0:
            w = rho ** (sizes_tail - 7).astype(np.float64)
            row[7:] += rng.multinomial(rest, w / w.sum())
    leaf_idx = np.array([index[f"C{c['STATE']}{c['COUNTY']}"] for c in counties])
    prob = pops / pops.sum()
    out_sizes = rng.integers(10, max_size + 1, size=N_OUTLIERS)
    out_sizes[0] = max_size
    out_county = rng.choice(len(counties), size=N_OUTLIERS, p=prob)
    for s, k in zip(out_sizes.tolist(), out_county.tolist()):
        counts[leaf_idx[k], s - 1] += 1
    for r in reversed(range(hier.size)):
        kids = list(hier.children[r])
        if kids:
            counts[r] = counts[kids].sum(axis=0)
    return GroupSizeData(hierarchy=hier, counts=counts)
