"""Plots of mDP results: the bounds per iteration (as Qiu's Figs. 17-20) and, for 2-D data,
the partition on a map (boundary records marked). Uses matplotlib's Agg backend; matplotlib is the
optional extra ``securelp[plot]`` (:func:`require_plotting` says so when it is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.extras import require_extra
from securelp.solvers.files import write_atomically

__all__ = ["PLOT_FORMATS", "plot_format", "plot_result", "require_plotting"]

#: the image formats a plot is written in, by the path's suffix
PLOT_FORMATS = ("png", "pdf", "svg")


def plot_format(path: str | Path) -> str:
    """The image format of a plot written to ``path``, from its suffix.

    Raises
    ------
    InputError
        The suffix is not one of :data:`PLOT_FORMATS`.
    """
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in PLOT_FORMATS:
        raise InputError(f"cannot write the plot {path}: its name must end in one of "
                         f"{', '.join('.' + f for f in PLOT_FORMATS)} (the image format), not {Path(path).suffix or 'nothing'}")
    return fmt


def require_plotting(purpose: str = "writing a plot") -> Any:
    """matplotlib's pyplot on the Agg backend.

    Raises
    ------
    ConfigError
        matplotlib is not installed (``pip install 'securelp[plot]'``).
    """
    matplotlib = require_extra("matplotlib", purpose)
    matplotlib.use("Agg", force=False)
    return require_extra("matplotlib.pyplot", purpose)


def plot_result(result: Any, problem: Any, path: str | Path) -> None:
    """Write an image (PNG, PDF or SVG, from the suffix of ``path``) with the bounds per iteration
    and, when coordinates are 2-D, the partition map."""
    import io

    fmt = plot_format(path)
    plt = require_plotting()

    coords = problem.dataset.coords
    with_map = coords is not None and np.asarray(coords).shape[1] == 2
    fig, axes = plt.subplots(1, 2 if with_map else 1, figsize=(11 if with_map else 6, 4.5))
    axes = np.atleast_1d(axes)
    ax = axes[0]
    it = [h.iteration for h in result.history]
    lo = np.array([h.lower for h in result.history], dtype=float)
    up = np.array([h.upper for h in result.history], dtype=float)
    ax.plot(it, lo, "b.-", label="lower bound")
    ax.plot(it, np.where(np.isfinite(up), up, np.nan), "r.-", label="upper bound (verified)")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"expected loss ({problem.dataset.unit or 'units'})")
    ax.set_title(f"{result.method} on {problem.dataset.name}: n={problem.n}, K={problem.K}, {result.status}, "
                 f"gap {result.rel_gap:.1e}")
    ax.legend()
    ax.grid(alpha=0.3)
    if with_map:
        ax = axes[1]
        C = np.asarray(coords)
        # (lat, lon) maps are drawn lon on x, a degree of longitude cos(lat) as long as one of latitude
        latlon = problem.dataset.name in ("rome",) or problem.dataset.unit == "km" and problem.dataset.name == "points"
        x, y = (C[:, 1], C[:, 0]) if latlon else (C[:, 0], C[:, 1])
        part = result.partition or {}
        labels = part.get("labels")
        boundary = part.get("boundary")
        if labels is not None:
            ax.scatter(x, y, c=np.asarray(labels), cmap="tab20", s=14)
            if boundary is not None:
                b = np.asarray(boundary, dtype=bool)
                ax.scatter(x[b], y[b], facecolors="none", edgecolors="k", s=40, linewidths=0.6, label="boundary")
                # below the map: inside it the legend hides records (a grid's corner cell)
                ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
            ax.set_title(f"partition {part.get('method')} (M={len(part.get('sizes', []))}, {part.get('n_boundary')} boundary)")
        else:
            ax.scatter(x, y, s=10, c="gray")
            ax.set_title("records")
        if latlon:
            ax.set_xlabel("longitude (degrees)")
            ax.set_ylabel("latitude (degrees)")
            ax.set_aspect(1.0 / max(np.cos(np.radians(float(np.mean(y)))), 1e-3), adjustable="datalim")
        else:
            ax.set_aspect("equal", adjustable="datalim")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    write_atomically(path, buf.getvalue())
