"""Secret datasets for the metric-DP engine: records, a metric, a prior, default parameters.

Every loader returns a :class:`SecretDataset` (Qiu, "Enhancing Scalability of Metric
Differential Privacy via Secret Dataset Partitioning and Benders Decomposition",
Sec. 2: a secret dataset ``X = {x_1..x_n}`` with a metric ``d`` and a prior ``p``).

Datasets
--------
``grid``
    ``rows x cols`` cells of ``cell_km`` km; records = cell centres, Euclidean distance (km).
``rome``
    The 500 Rome road-network records of Qiu's code (``solvers/data/mdp/rome_500_records.csv``).
    Distances are great-circle (haversine, Earth radius 6371.0088 km) on (lat, lon) in
    that order -- the MATLAB ``distance_matrix.mat`` swapped latitude and longitude.
``gaussian``
    ``n_records`` points drawn from a 3-D Gaussian ``N(0, I)`` (Qiu's synthetic data),
    Euclidean distance.
``points``
    A user CSV of coordinates (one record a line, optional header, optional leading
    non-numeric label column) with ``metric`` ``euclidean`` or ``haversine`` (then the
    two columns are latitude and longitude in degrees; distances in km).
``text`` / ``road``
    Provided by :mod:`securelp.solvers.mdp.text_dataset` and :mod:`securelp.solvers.mdp.road_dataset`
    (imported lazily).

Priors are uniform unless ``prior`` (a path or an array) is given; the real Gowalla prior
over a 100x100 grid is shipped as ``solvers/data/mdp/paris_gowalla_global_100x100.csv``
(:data:`GOWALLA_PRIOR`). Validation: two distinct records at distance 0 (duplicate
points) are refused, naming both; a prior with the wrong length, a negative entry, or a
sum off 1 by more than ``1e-9`` is refused, naming the file.
"""

from __future__ import annotations

import csv
import importlib
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError

__all__ = [
    "DATASETS",
    "DATA_DIR",
    "GOWALLA_PRIOR",
    "ROME_RECORDS",
    "SecretDataset",
    "euclidean_distance",
    "gaussian_dataset",
    "grid_dataset",
    "haversine_km",
    "load_dataset",
    "load_prior",
    "points_dataset",
    "rome_dataset",
    "validate_dataset",
]

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "mdp"
ROME_RECORDS = DATA_DIR / "rome_500_records.csv"
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
        except UnicodeDecodeError as exc:  # until stop 47 a traceback
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


#: records of a grid or points dataset at most: every dataset keeps its n x n distances (3.2 GB at
#: 20,000; a 100,000-point file would have needed 80 GB before the limit covered points files)
MAX_DENSE_RECORDS = 20_000
#: a points file larger than this is refused before it is read (20,000 records of a label and two
#: coordinates take about 1 MB; ``--points /dev/zero`` used to end in a MemoryError)
MAX_POINTS_FILE_BYTES = 64 << 20


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


def _finish(name: str, labels: list[str], distance: np.ndarray, coords: np.ndarray | None,
            prior: str | Path | np.ndarray | None, eps: float, eta: float, unit: str) -> SecretDataset:
    n = distance.shape[0]
    p = np.full(n, 1.0 / n) if prior is None else load_prior(prior, n)
    for arr in (distance, p) + ((coords,) if coords is not None else ()):
        arr.setflags(write=False)
    return validate_dataset(SecretDataset(name, tuple(labels), distance, coords, p, float(eps), float(eta), unit))


def grid_dataset(rows: int = 10, cols: int = 10, cell_km: float = 1.0, prior: str | Path | np.ndarray | None = None) -> SecretDataset:
    """``rows x cols`` grid of cells of ``cell_km`` km; records are the cell centres.

    Record index ``r * cols + c`` (row-major); coords are ``(x, y)`` km with x along the
    columns. This matches a prior file listing cells row by row (``y * cols + x``), as the
    Gowalla prior does.
    """
    rows, cols = int(rows), int(cols)
    if rows < 1 or cols < 1:
        raise InputError(f"grid needs rows >= 1 and cols >= 1, got {rows} x {cols}")
    if not (math.isfinite(cell_km) and cell_km > 0):
        raise InputError(f"cell size must be > 0 km, got {cell_km}")
    if rows * cols > MAX_DENSE_RECORDS:
        raise InputError(f"grid of {rows * cols} cells is too large for the dense distance matrix "
                         f"(max {MAX_DENSE_RECORDS:,})")
    yy, xx = np.divmod(np.arange(rows * cols), cols)
    coords = np.column_stack([(xx + 0.5) * cell_km, (yy + 0.5) * cell_km]).astype(float)
    labels = [f"r{r}c{c}" for r, c in zip(yy.tolist(), xx.tolist())]
    return _finish("grid", labels, euclidean_distance(coords), coords, prior, 1.0, 2.0 * cell_km, "km")


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
    return _finish("rome", ids, haversine_km(coords[:, 0], coords[:, 1]), coords, prior, 10.0, 2.0, "km")


def gaussian_dataset(n_records: int = 500, seed: int | str | None = None,
                     prior: str | Path | np.ndarray | None = None) -> SecretDataset:
    """``n_records`` points of a 3-D standard Gaussian (Qiu's synthetic data); eps 1, eta 0.5.

    The points are public test data, not a privacy-relevant sample: they are drawn with
    :class:`securelp.solvers.randomness.SecureRandom` only so a seed reproduces them.
    """
    from securelp.solvers.randomness import SecureRandom

    n_records = int(n_records)
    if not 1 <= n_records <= MAX_DENSE_RECORDS:
        raise InputError(f"gaussian needs 1 to {MAX_DENSE_RECORDS:,} records (its n x n distances are kept), "
                         f"got {n_records:,}")
    rng = SecureRandom(seed, label="mdp-gaussian")
    coords = rng.standard_normal((n_records, 3)).astype(float)
    labels = [f"g{i}" for i in range(n_records)]
    return _finish("gaussian", labels, euclidean_distance(coords), coords, prior, 1.0, 0.5, "")


def points_dataset(path: str | Path, metric: str = "euclidean", prior: str | Path | np.ndarray | None = None,
                   eps: float = 1.0, eta: float | None = None) -> SecretDataset:
    """Records from a CSV of coordinates.

    One record a line; comma (or whitespace) separated. A first line that is not numeric
    is a header. A first column that is not numeric on every line is taken as labels.
    With ``metric="haversine"`` exactly two coordinates (lat, lon in degrees) are required
    and distances are km. Blank lines and lines starting with ``#`` are skipped.

    Raises
    ------
    InputError
        Unreadable file; a line with a non-numeric field or a different number of fields
        (file and line named); no records; latitude/longitude out of range; duplicates.
    """
    path = Path(path)
    if metric not in ("euclidean", "haversine"):
        raise InputError(f"unknown metric {metric!r}: use euclidean or haversine")
    if path.exists() and not path.is_file():  # a directory, a device such as /dev/zero, a pipe
        raise InputError(f"points file {path} is not a regular file")
    try:
        if path.stat().st_size > MAX_POINTS_FILE_BYTES:
            raise InputError(f"points file {path} is larger than {MAX_POINTS_FILE_BYTES >> 20} MiB (at most "
                             f"{MAX_DENSE_RECORDS:,} records are read)")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read points file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    lines = [(no, ln.strip()) for no, ln in enumerate(text.splitlines(), start=1)]
    lines = [(no, ln) for no, ln in lines if ln and not ln.startswith("#")]
    if not lines:
        raise InputError(f"points file {path} has no records")

    def split(line: str) -> list[str]:
        return [t.strip() for t in (line.split(",") if "," in line else line.split())]

    def numeric(tok: str) -> bool:
        try:
            return math.isfinite(float(tok))
        except ValueError:
            return False

    header = None
    if not any(numeric(t) for t in split(lines[0][1])):
        header, lines = lines[0], lines[1:]
    if not lines:
        raise InputError(f"points file {path} has a header but no records")
    rows = [(no, split(ln)) for no, ln in lines]
    has_label = all(rows[0][1]) and not numeric(rows[0][1][0])
    width = len(rows[0][1])
    named = None if header is None else len(split(header[1]))
    if named is not None and named not in ((width, width - 1) if has_label else (width,)):
        # a header that names another number of columns than the records have is a file mixed up
        # (a coordinate missing from every record, or the header of another file)
        raise InputError(f"{path}, line {header[0]}: the header names {named} columns but the first "
                         f"record (line {rows[0][0]}) has {width} fields")
    labels: list[str] = []
    values: list[list[float]] = []
    for no, toks in rows:
        if len(toks) != width:
            raise InputError(f"{path}, line {no}: {len(toks)} fields, expected {width} like the first record")
        if has_label:
            label, toks = toks[0], toks[1:]
            if not toks:
                raise InputError(f"{path}, line {no}: no coordinates, only {label[:40]!r} (separate the fields "
                                 "with commas or whitespace)")
        else:
            label = f"p{len(labels)}"
        try:
            vals = [float(t) for t in toks]
        except ValueError:
            bad = next(t for t in toks if not numeric(t))
            raise InputError(f"{path}, line {no}: {bad[:40]!r} is not a number") from None
        if not toks or not all(math.isfinite(v) for v in vals):
            raise InputError(f"{path}, line {no}: coordinates must be finite numbers")
        labels.append(label)
        values.append(vals)
    coords = np.asarray(values, dtype=float)
    if len(coords) > MAX_DENSE_RECORDS:
        raise InputError(f"points file {path} has {len(coords):,} records, too many for the dense distance matrix "
                         f"(max {MAX_DENSE_RECORDS:,})")
    if metric == "haversine":
        if coords.shape[1] != 2:
            raise InputError(f"{path}: haversine needs exactly two coordinates (lat, lon) per record, got {coords.shape[1]}")
        bad = np.argwhere((np.abs(coords[:, 0]) > 90) | (np.abs(coords[:, 1]) > 180))
        if bad.size:
            no = rows[int(bad[0, 0])][0]
            raise InputError(f"{path}, line {no}: latitude must be in [-90, 90] and longitude in [-180, 180]")
        distance = haversine_km(coords[:, 0], coords[:, 1])
        unit = "km"
    else:
        distance = euclidean_distance(coords)
        unit = ""
    if eta is None:
        # default radius: twice the median nearest-neighbour distance
        nn = np.where(np.eye(len(coords), dtype=bool), np.inf, distance).min(axis=1) if len(coords) > 1 else np.array([1.0])
        eta = float(2.0 * np.median(nn)) if np.isfinite(np.median(nn)) and np.median(nn) > 0 else 1.0
    return _finish("points", labels, distance, coords if coords.shape[1] <= 3 else None, prior, eps, eta, unit)


def _lazy(module: str, func: str, dataset: str) -> Callable[..., SecretDataset]:
    def loader(**params: Any) -> SecretDataset:
        try:
            mod = importlib.import_module(module)
            fn = getattr(mod, func)
        except (ImportError, AttributeError) as exc:
            raise InputError(
                f"dataset {dataset!r} is not available in this build ({module}.{func} could not be imported: {exc})"
            ) from None
        prior = params.pop("prior", None)
        ds = fn(**params)
        if prior is not None:
            ds = SecretDataset(ds.name, ds.labels, ds.distance, ds.coords, load_prior(prior, ds.n),
                               ds.default_eps, ds.default_eta, ds.unit)
        return validate_dataset(ds)

    return loader


#: dataset name -> loader(**params)
DATASETS: dict[str, Callable[..., SecretDataset]] = {
    "grid": grid_dataset,
    "rome": rome_dataset,
    "gaussian": gaussian_dataset,
    "points": points_dataset,
    "text": _lazy("securelp.solvers.mdp.text_dataset", "load_text_dataset", "text"),
    "road": _lazy("securelp.solvers.mdp.road_dataset", "load_road_dataset", "road"),
}


def load_dataset(name: str, **params: Any) -> SecretDataset:
    """Load a dataset by name from :data:`DATASETS` with loader-specific ``params``.

    Parameters whose value is ``None`` are dropped, so a CLI can pass every option.
    ``prior`` (path or array) is accepted by every loader.

    Raises
    ------
    InputError
        Unknown name, unknown parameter, or invalid data.
    """
    loader = DATASETS.get(name)
    if loader is None:
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(sorted(DATASETS))}")
    params = {k: v for k, v in params.items() if v is not None}
    try:
        return loader(**params)
    except TypeError as exc:
        if "unexpected keyword" in str(exc) or "positional argument" in str(exc):
            raise InputError(f"dataset {name!r}: {exc}") from None
        raise
