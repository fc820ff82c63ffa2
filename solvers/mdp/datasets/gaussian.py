"""The ``gaussian`` dataset: ``n_records`` points of a 3-D standard Gaussian ``N(0, I)`` (Qiu's
synthetic data), the Euclidean distance (eps 1, eta 0.5 by default).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import MAX_DENSE_RECORDS, SecretDataset, euclidean_distance, finish_dataset
from securelp.solvers.randomness import SecureRandom

__all__ = ["gaussian_dataset"]

def gaussian_dataset(n_records: int = 500, seed: int | str | None = None,
                     prior: str | Path | np.ndarray | None = None) -> SecretDataset:
    """``n_records`` points of a 3-D standard Gaussian (Qiu's synthetic data); eps 1, eta 0.5.

    The points are public test data, not a privacy-relevant sample: they are drawn with
    :class:`securelp.solvers.randomness.SecureRandom` only so a seed reproduces them.
    """
    n_records = int(n_records)
    if not 1 <= n_records <= MAX_DENSE_RECORDS:
        raise InputError(f"gaussian needs 1 to {MAX_DENSE_RECORDS:,} records (its n x n distances are kept), "
                         f"got {n_records:,}")
    rng = SecureRandom(seed, label="mdp-gaussian")
    coords = rng.standard_normal((n_records, 3)).astype(float)
    labels = [f"g{i}" for i in range(n_records)]
    return finish_dataset("gaussian", labels, euclidean_distance(coords), coords, prior, 1.0, 0.5, "")
