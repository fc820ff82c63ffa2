"""The value domains of the local d-privacy mechanisms: a grid of cells or a finite metric space.

Domain ``x_1..x_m`` with metric ``d`` (X. Gu, M. Li, Y. Cao, L. Xiong, "Supporting both Range Queries
and Frequency Estimation with Local Differential Privacy", IEEE CNS 2019): a ``rows x cols`` grid
(:class:`GridDomain`, Euclidean distances between cell centres, whose structure the kernels exploit)
or any distance matrix (:class:`DenseDomain`, e.g. a secret dataset's records).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import InputError, ResourceError

__all__ = ["DenseDomain", "Domain", "GridDomain", "check_eps"]


@dataclass(frozen=True)
class GridDomain:
    """``rows x cols`` cells of ``cell`` distance units; index ``r * cols + c``.

    Cell centres ``((c + 0.5) cell, (r + 0.5) cell)``, Euclidean distance (the same
    convention as :func:`securelp.solvers.mdp.datasets.grid.grid_dataset`).
    """

    rows: int
    cols: int
    cell: float = 1.0

    def __post_init__(self) -> None:
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise InputError(f"grid needs rows >= 1 and cols >= 1, got {self.rows} x {self.cols}")
        if not (math.isfinite(self.cell) and self.cell > 0):
            raise InputError(f"grid cell size must be > 0, got {self.cell}")

    @property
    def m(self) -> int:
        return int(self.rows) * int(self.cols)

    @property
    def coords(self) -> np.ndarray:
        yy, xx = np.divmod(np.arange(self.m), self.cols)
        return np.column_stack([(xx + 0.5) * self.cell, (yy + 0.5) * self.cell])

    def offset_table(self) -> np.ndarray:
        """``T[u, v]`` = distance between cells ``u`` rows and ``v`` columns apart."""
        u = np.arange(self.rows, dtype=float)[:, None]
        v = np.arange(self.cols, dtype=float)[None, :]
        return self.cell * np.sqrt(u * u + v * v)

    def distance_row(self, j: int) -> np.ndarray:
        r, c = divmod(int(j), self.cols)
        table = self.offset_table()
        du = np.abs(np.arange(self.rows) - r)
        dv = np.abs(np.arange(self.cols) - c)
        return table[du[:, None], dv[None, :]].ravel()

    def distance_matrix(self) -> np.ndarray:
        if self.m > 20000:
            raise ResourceError(f"a dense {self.m} x {self.m} distance matrix is too large")
        yy, xx = np.divmod(np.arange(self.m), self.cols)
        table = self.offset_table()
        return table[np.abs(yy[:, None] - yy[None, :]), np.abs(xx[:, None] - xx[None, :])]

    @property
    def diameter(self) -> float:
        return float(self.cell * math.hypot(self.rows - 1, self.cols - 1))


@dataclass(frozen=True)
class DenseDomain:
    """A finite metric space given by its distance matrix (records of a SecretDataset)."""

    distance: np.ndarray
    name: str = "points"

    def __post_init__(self) -> None:
        d = np.asarray(self.distance, dtype=float)
        if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] == 0:
            raise InputError(f"distance matrix must be square and non-empty, got shape {d.shape}")
        if not np.all(np.isfinite(d)) or np.any(d < 0) or np.any(np.diag(d) != 0):
            raise InputError("distances must be finite, >= 0, with a zero diagonal")
        if not np.allclose(d, d.T, rtol=1e-12, atol=1e-12):
            raise InputError("distance matrix is not symmetric")
        off = d + np.eye(d.shape[0])
        dup = np.argwhere(np.triu(off == 0, 1))
        if dup.size:
            i, j = (int(v) for v in dup[0])
            raise InputError(f"records {i} and {j} are at distance 0: d-privacy cannot separate them; merge duplicates")

    @property
    def m(self) -> int:
        return int(self.distance.shape[0])

    def distance_row(self, j: int) -> np.ndarray:
        return np.asarray(self.distance[int(j)], dtype=float)

    def distance_matrix(self) -> np.ndarray:
        return np.asarray(self.distance, dtype=float)

    @property
    def diameter(self) -> float:
        return float(np.max(self.distance))


Domain = GridDomain | DenseDomain


def check_eps(eps: float) -> float:
    """Validate a privacy parameter (finite, > 0)."""
    try:
        value = float(eps)
    except (TypeError, ValueError):
        raise InputError(f"eps must be a number, got {eps!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"eps must be finite and > 0, got {eps}")
    return value
