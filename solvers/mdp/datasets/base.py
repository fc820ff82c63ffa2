"""Secret datasets for the metric-DP engine: records, a metric, a prior, default parameters.

A secret dataset ``X = {x_1..x_n}`` with a metric ``d`` and a prior ``p`` (Qiu, "Enhancing
Scalability of Metric Differential Privacy via Secret Dataset Partitioning and Benders
Decomposition", Sec. 2) is a :class:`SecretDataset`. This module holds what every loader shares:
the type, its validation (two distinct records at distance 0, duplicate points, are refused,
naming both; a prior with the wrong length, a negative entry, or a sum off 1 by more than
``1e-9`` is refused, naming the file), the Euclidean and great-circle metrics and priors read
from files (the real Gowalla prior over a 100x100 grid is shipped as
``solvers/data/mdp/paris_gowalla_global_100x100.csv``, :data:`GOWALLA_PRIOR`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError

__all__ = ["DATA_DIR", "GOWALLA_PRIOR", "MAX_DENSE_RECORDS", "SecretDataset", "euclidean_distance", "finish_dataset",
           "haversine_km", "load_prior", "validate_dataset"]

logger = logging.getLogger(__name__)

#: the shipped data (Rome records, the Gowalla prior, the word list and its embeddings, the OSM extract)
DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "mdp"
GOWALLA_PRIOR = DATA_DIR / "paris_gowalla_global_100x100.csv"
EARTH_RADIUS_KM = 6371.0088
PRIOR_TOL = 1e-9


@dataclass(frozen=True)
class SecretDataset:
    """A secret dataset: records, their pairwise metric, a prior and default parameters.

    Attributes
    ----------
    name:
        Dataset name (``grid``, ``rome``, ...).
    labels:
        One label per record.
    distance:
        ``(n, n)`` symmetric matrix, zero diagonal, metric units (km for maps).
    coords:
        ``(n, d)`` coordinates when meaningful (2-D maps: (lat, lon) or (x, y) km), used by
        partitioners and plots; ``None`` otherwise.
    prior:
        ``(n,)`` non-negative, sums to 1.
    default_eps, default_eta:
        Default privacy parameter (per unit) and neighbourhood radius (units).
    unit:
        ``"km"`` or ``""``.
    """

    name: str
    labels: tuple[str, ...]
    distance: np.ndarray
    coords: np.ndarray | None
    prior: np.ndarray
    default_eps: float
    default_eta: float
    unit: str

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.distance.shape[0])


def euclidean_distance(coords: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances of the rows of ``coords`` (exact zero diagonal)."""
    from scipy.spatial.distance import cdist

    x = np.asarray(coords, dtype=float)
    d = cdist(x, x)
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def haversine_km(lat_deg: np.ndarray, lon_deg: np.ndarray) -> np.ndarray:
    """Pairwise great-circle distances in km from latitude and longitude in degrees.

    ``d = 2 R asin(sqrt(sin^2(dlat/2) + cos(lat1) cos(lat2) sin^2(dlon/2)))`` with
    ``R = 6371.0088`` km (mean Earth radius).
    """
    lat = np.radians(np.asarray(lat_deg, dtype=float))
    lon = np.radians(np.asarray(lon_deg, dtype=float))
    dlat = lat[:, None] - lat[None, :]
    dlon = lon[:, None] - lon[None, :]
    a = np.sin(dlat / 2) ** 2 + np.cos(lat)[:, None] * np.cos(lat)[None, :] * np.sin(dlon / 2) ** 2
    d = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


#: a number in a prior file: a decimal, optionally with an exponent (inf and nan are read, then refused)
DECIMAL_TOKEN = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def load_prior(source: str | Path | np.ndarray, n: int) -> np.ndarray:
    """Load and validate a prior over ``n`` records.

    ``source`` is an array or a text file of numbers separated by commas, whitespace or
    newlines (e.g. the Gowalla prior: one line of 10,000 values).

    Raises
    ------
    InputError
        Unreadable file, non-numeric token (file and line named), wrong length, negative or
        non-finite entry, or sum off 1 by more than ``1e-9``.
    """
    where = "prior"
    if isinstance(source, np.ndarray):
        values = np.asarray(source, dtype=float).ravel()
    else:
        path = Path(source)
        where = f"prior file {path}"
        if path.exists() and not path.is_file():
            raise InputError(f"cannot read {where}: not a regular file")
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"cannot read {where}: not UTF-8 text (byte {exc.start})") from None
        items: list[float] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            for token in line.replace(",", " ").replace(";", " ").split():
                try:
                    if not DECIMAL_TOKEN.fullmatch(token):  # float() also takes "1_0" and other scripts' digits
                        raise ValueError(token)
                    items.append(float(token))
                except ValueError:
                    raise InputError(f"{where}, line {lineno}: {token[:40]!r} is not a number") from None
        values = np.asarray(items, dtype=float)
    if values.size != n:
        raise InputError(f"{where} has {values.size} entries but there are {n} records (domain elements)")
    if not np.all(np.isfinite(values)):
        raise InputError(f"{where} has a non-finite entry (index {int(np.argmax(~np.isfinite(values)))})")
    if np.any(values < 0):
        i = int(np.argmax(values < 0))
        raise InputError(f"{where} has a negative entry {values[i]:g} at index {i}")
    total = float(values.sum())
    if abs(total - 1.0) > PRIOR_TOL:
        raise InputError(f"{where} sums to {total:.12g}, not 1 (tolerance {PRIOR_TOL:g}); normalise it")
    return values


#: records of a grid, gaussian or points dataset at most: every dataset keeps its n x n distances
#: (3.2 GB at 20,000)
MAX_DENSE_RECORDS = 20_000


def validate_dataset(ds: SecretDataset) -> SecretDataset:
    """Check the invariants of a :class:`SecretDataset`; returns it unchanged.

    Raises
    ------
    InputError
        Wrong shapes, asymmetric / negative / non-finite distances, duplicate points
        (distance 0 between distinct records, both named), or an invalid prior.
    """
    d = np.asarray(ds.distance)
    n = d.shape[0] if d.ndim == 2 else -1
    if d.ndim != 2 or d.shape != (n, n) or n == 0:
        raise InputError(f"dataset {ds.name}: distance matrix must be square and non-empty, got {d.shape}")
    if len(ds.labels) != n:
        raise InputError(f"dataset {ds.name}: {len(ds.labels)} labels for {n} records")
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise InputError(f"dataset {ds.name}: distances must be finite and non-negative")
    if np.any(np.diag(d) != 0):
        raise InputError(f"dataset {ds.name}: distance diagonal must be zero")
    if not np.allclose(d, d.T, rtol=1e-12, atol=1e-12):
        raise InputError(f"dataset {ds.name}: distance matrix is not symmetric")
    off = d + np.eye(n)
    dup = np.argwhere(np.triu(off == 0, 1))
    if dup.size:
        i, j = (int(v) for v in dup[0])
        raise InputError(
            f"dataset {ds.name}: records {i} ({ds.labels[i]}) and {j} ({ds.labels[j]}) are duplicate points "
            f"(distance 0); mDP cannot separate them -- remove or merge duplicates"
        )
    if ds.coords is not None and np.asarray(ds.coords).shape[0] != n:
        raise InputError(f"dataset {ds.name}: coords has {np.asarray(ds.coords).shape[0]} rows for {n} records")
    load_prior(np.asarray(ds.prior), n)
    if not (ds.default_eps > 0 and ds.default_eta > 0):
        raise InputError(f"dataset {ds.name}: default eps and eta must be > 0")
    return ds


def finish_dataset(name: str, labels: list[str] | tuple[str, ...], distance: np.ndarray, coords: np.ndarray | None,
                   prior: str | Path | np.ndarray | None, eps: float, eta: float, unit: str) -> SecretDataset:
    """A loader's arrays as a validated :class:`SecretDataset`: the prior read (uniform when
    ``None``), the arrays made read-only."""
    n = distance.shape[0]
    p = np.full(n, 1.0 / n) if prior is None else load_prior(prior, n)
    for arr in (distance, p) + ((coords,) if coords is not None else ()):
        arr.setflags(write=False)
    return validate_dataset(SecretDataset(name, tuple(labels), distance, coords, p, float(eps), float(eta), unit))
