"""The ``points`` dataset: a user CSV of coordinates (one record a line, optional header, optional
leading non-numeric label column) with ``metric`` ``euclidean`` or ``haversine`` (then the two
columns are latitude and longitude in degrees; distances in km).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import (
    MAX_DENSE_RECORDS,
    SecretDataset,
    euclidean_distance,
    finish_dataset,
    haversine_km,
)

__all__ = ["points_dataset"]

#: a points file larger than this is refused before it is read (20,000 records of a label and two
#: coordinates take about 1 MB)
MAX_POINTS_FILE_BYTES = 64 << 20

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
    labels, coords, line_numbers = _parse_records(path, _read_lines(path))
    if len(coords) > MAX_DENSE_RECORDS:
        raise InputError(f"points file {path} has {len(coords):,} records, too many for the dense distance matrix "
                         f"(max {MAX_DENSE_RECORDS:,})")
    if metric == "haversine":
        if coords.shape[1] != 2:
            raise InputError(f"{path}: haversine needs exactly two coordinates (lat, lon) per record, got {coords.shape[1]}")
        bad = np.argwhere((np.abs(coords[:, 0]) > 90) | (np.abs(coords[:, 1]) > 180))
        if bad.size:
            no = line_numbers[int(bad[0, 0])]
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
    return finish_dataset("points", labels, distance, coords if coords.shape[1] <= 3 else None, prior, eps, eta, unit)


def _read_lines(path: Path) -> list[tuple[int, str]]:
    """The points file's lines that are neither blank nor comments, with their line numbers."""
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
    if len(lines) > MAX_DENSE_RECORDS + 1:  # one line may be a header
        # counted before any line is parsed, so a long file is refused in the time it takes to read it
        raise InputError(f"points file {path} has {len(lines):,} record lines, too many for the dense distance "
                         f"matrix (max {MAX_DENSE_RECORDS:,} records)")
    return lines


def _split(line: str) -> list[str]:
    return [t.strip() for t in (line.split(",") if "," in line else line.split())]


def _numeric(tok: str) -> bool:
    try:
        return math.isfinite(float(tok))
    except ValueError:
        return False


def _parse_records(path: Path, lines: list[tuple[int, str]]) -> tuple[list[str], np.ndarray, list[int]]:
    """The records of the points file's ``lines``: their labels (``p0``, ``p1``, ... where the file has
    none), coordinates and line numbers; a header line is skipped, one that names another number of
    columns than the records have is refused."""
    header = None
    if not any(_numeric(t) for t in _split(lines[0][1])):
        header, lines = lines[0], lines[1:]
    if not lines:
        raise InputError(f"points file {path} has a header but no records")
    rows = [(no, _split(ln)) for no, ln in lines]
    has_label = all(rows[0][1]) and not _numeric(rows[0][1][0])
    width = len(rows[0][1])
    named = None if header is None else len(_split(header[1]))
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
            bad = next(t for t in toks if not _numeric(t))
            raise InputError(f"{path}, line {no}: {bad[:40]!r} is not a number") from None
        if not toks or not all(math.isfinite(v) for v in vals):
            raise InputError(f"{path}, line {no}: coordinates must be finite numbers")
        labels.append(label)
        values.append(vals)
    return labels, np.asarray(values, dtype=float), [no for no, _ in rows]
