"""The ``grid`` dataset: ``rows x cols`` cells of ``cell_km`` km; records are the cell centres,
the Euclidean distance in km (eps 1 per km, eta two cells by default).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import MAX_DENSE_RECORDS, SecretDataset, euclidean_distance, finish_dataset

__all__ = ["grid_dataset"]

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
    return finish_dataset("grid", labels, euclidean_distance(coords), coords, prior, 1.0, 2.0 * cell_km, "km")
