"""Secret datasets for the metric-DP engine, by name (Qiu Sec. 2: records, a metric, a prior).

``grid`` (:mod:`~securelp.solvers.mdp.datasets.grid`), ``rome`` (:mod:`~securelp.solvers.mdp.datasets.rome`),
``gaussian`` (:mod:`~securelp.solvers.mdp.datasets.gaussian`), ``points`` (a user CSV,
:mod:`~securelp.solvers.mdp.datasets.points`), ``text`` (word embeddings,
:mod:`~securelp.solvers.mdp.datasets.text`) and ``road`` (a real road graph,
:mod:`~securelp.solvers.mdp.datasets.road`); what they share is in :mod:`~securelp.solvers.mdp.datasets.base`.
Priors are uniform unless ``prior`` (a path or an array) is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import (
    DATA_DIR,
    GOWALLA_PRIOR,
    MAX_DENSE_RECORDS,
    SecretDataset,
    euclidean_distance,
    haversine_km,
    load_prior,
    validate_dataset,
)
from securelp.solvers.mdp.datasets.gaussian import gaussian_dataset
from securelp.solvers.mdp.datasets.grid import grid_dataset
from securelp.solvers.mdp.datasets.points import points_dataset
from securelp.solvers.mdp.datasets.road import load_road_dataset
from securelp.solvers.mdp.datasets.rome import ROME_RECORDS, rome_dataset
from securelp.solvers.mdp.datasets.text import load_text_dataset

__all__ = ["DATASETS", "DATA_DIR", "GOWALLA_PRIOR", "MAX_DENSE_RECORDS", "ROME_RECORDS", "SecretDataset",
           "euclidean_distance", "gaussian_dataset", "grid_dataset", "haversine_km", "load_dataset", "load_prior",
           "points_dataset", "rome_dataset", "validate_dataset"]

#: dataset name -> loader(**params)
DATASETS: dict[str, Callable[..., SecretDataset]] = {
    "grid": grid_dataset,
    "rome": rome_dataset,
    "gaussian": gaussian_dataset,
    "points": points_dataset,
    "text": load_text_dataset,
    "road": load_road_dataset,
}


def load_dataset(name: str, **params: Any) -> SecretDataset:
    """Load a dataset by name from :data:`DATASETS` with loader-specific ``params``.

    Parameters whose value is ``None`` are dropped, so a CLI can pass every option.
    ``prior`` (path or array) is accepted by every loader.

    Raises
    ------
    InputError
        Unknown name (``parameter`` "name"), unknown parameter, or invalid data.
    """
    loader = DATASETS.get(name)
    if loader is None:
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(sorted(DATASETS))}", parameter="name")
    params = {k: v for k, v in params.items() if v is not None}
    try:
        return loader(**params)
    except TypeError as exc:
        if "unexpected keyword" in str(exc) or "positional argument" in str(exc):
            raise InputError(f"dataset {name!r}: {exc}") from None
        raise
