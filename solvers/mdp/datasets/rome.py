"""The ``rome`` dataset: the 500 Rome road-network records of Qiu's code
(``solvers/data/mdp/rome_500_records.csv``).

Distances are great-circle (haversine, Earth radius 6371.0088 km) on (lat, lon) in that order: the
MATLAB ``distance_matrix.mat`` swapped latitude and longitude. eps 10 per km, eta 2 km by default.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import DATA_DIR, SecretDataset, finish_dataset, haversine_km

__all__ = ["ROME_RECORDS", "rome_dataset"]

ROME_RECORDS = DATA_DIR / "rome_500_records.csv"

def rome_dataset(prior: str | Path | np.ndarray | None = None, path: str | Path | None = None) -> SecretDataset:
    """The 500 Rome records (Qiu's code), haversine distances on (lat, lon); eps 10/km, eta 2 km."""
    path = Path(path) if path is not None else ROME_RECORDS
    ids, lat, lon = [], [], []
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            for lineno, row in enumerate(reader, start=2):
                try:
                    lat.append(float(row["lat"]))
                    lon.append(float(row["lon"]))
                    ids.append(f"osm{row['osmid']}")
                except (KeyError, TypeError, ValueError):
                    raise InputError(f"{path}, line {lineno}: expected numeric lat and lon and an osmid") from None
    except OSError as exc:
        raise InputError(f"cannot read Rome records {path}: {exc.strerror or exc}") from None
    coords = np.column_stack([lat, lon])
    return finish_dataset("rome", ids, haversine_km(coords[:, 0], coords[:, 1]), coords, prior, 10.0, 2.0, "km")
