"""M_c^dp: Algorithm 2 on the noisy cumulative counts, then the exact Model 1 DP.

Fioretto, Van Hentenryck, Zhu (AIJ 2021), Algorithm 2 (our reading): per region, the noisy
chain c~_1 >= ... >= c~_N (cumulative counts, :mod:`.model`) is projected onto non-increasing
sequences (isotonic regression), clipped at 0, rounded (which keeps it monotone) and differenced
into non-negative counts n_s = c_s - c_{s+1}; these counts are then made consistent with total G
by the exact Model 1 DP (:mod:`.hdp`).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import isotonic_regression

from securelp.solvers.hierarchy.hdp import DPResult, HdpOptions, solve_model1
from securelp.solvers.hierarchy.model import Hierarchy, from_cumulative


def algorithm2(noisy_cum: np.ndarray) -> np.ndarray:
    """Per region: isotonic (non-increasing) regression, clip at 0, round, difference -> counts >= 0."""
    y = np.asarray(noisy_cum, dtype=np.float64)
    out = np.empty_like(y)
    for r in range(y.shape[0]):
        out[r] = isotonic_regression(y[r], increasing=False).x
    mono = np.rint(np.maximum(out, 0.0)).astype(np.int64)
    return from_cumulative(mono)


def solve_cdp(hier: Hierarchy, noisy_cum: np.ndarray, total: int, options: HdpOptions | None = None) -> DPResult:
    """M_c^dp's release: Algorithm 2's counts made consistent by the Model 1 DP (objective: to those counts).

    ``options`` are the DP's (default: ``HdpOptions()``).
    """
    return solve_model1(hier, algorithm2(noisy_cum), total, HdpOptions() if options is None else options)
