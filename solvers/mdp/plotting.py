"""Plots of mDP results: the bounds per iteration (as Qiu's Figs. 17-20: the upper and the lower
bound against the iteration, with the certified relative gap ``(U - L) / U`` on a log scale beside
them) and, for 2-D data, the partition on a map (boundary records marked). Uses matplotlib's Agg
backend; matplotlib is the optional extra ``securelp[plot]`` (:func:`require_plotting` says so when
it is missing).

C. Qiu, *Enhancing Scalability of Metric Differential Privacy via Secret Dataset Partitioning and
Benders Decomposition*, Sec. 4 (convergence of BD per partitioner).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.extras import require_extra
from securelp.solvers.files import write_atomically

__all__ = ["PLOT_FORMATS", "plot_format", "plot_result", "relative_gaps", "require_plotting"]

#: the image formats a plot is written in, by the path's suffix
PLOT_FORMATS = ("png", "pdf", "svg")


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


def relative_gaps(history: Any) -> np.ndarray:
    """The certified relative gap ``(U - L) / U`` after each iteration of ``history`` (records with
    ``lower`` and ``upper``); ``nan`` until both bounds are finite."""
    lo = np.array([h.lower for h in history], dtype=float)
    up = np.array([h.upper for h in history], dtype=float)
    ok = np.isfinite(lo) & np.isfinite(up) & (up != 0)
    out = np.full(lo.size, np.nan)
    out[ok] = (up[ok] - lo[ok]) / np.abs(up[ok])
    return out


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
    ax.plot(it, np.where(np.isfinite(lo), lo, np.nan), "b.-", label="lower bound (certified)")
    ax.plot(it, np.where(np.isfinite(up), up, np.nan), "r.-", label="upper bound (verified)")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"expected loss ({problem.dataset.unit or 'units'})")
    part = result.partition or {}
    how = result.method
    if part.get("decomposition") == "records":
        how = f"bd (records, {part.get('method')}, M={len(part.get('sizes', []))})"
    elif part.get("decomposition"):
        how = f"bd ({part['decomposition']})"
    ax.set_title(f"{how} on {problem.dataset.name}: n={problem.n}, K={problem.K}\n{result.status}, "
                 f"gap {result.rel_gap:.1e}, {result.iterations} iterations, {result.time_s:.1f} s", fontsize=9)
    gaps = relative_gaps(result.history)
    handles, names = ax.get_legend_handles_labels()
    if np.any(np.isfinite(gaps) & (gaps > 0)):
        # the stopping rule's quantity, on its own log scale (a twin drawn after the map keeps the map second)
        tw = ax.twinx()
        tw.semilogy(it, np.where(gaps > 0, gaps, np.nan), color="0.5", ls="--", marker=".", label="relative gap")
        tw.set_ylabel("relative gap (U - L) / U")
        h2, l2 = tw.get_legend_handles_labels()
        handles, names = handles + h2, names + l2
    ax.legend(handles, names, fontsize=8)
    ax.grid(alpha=0.3)
    if with_map:
        ax = axes[1]
        C = np.asarray(coords)
        # (lat, lon) maps are drawn lon on x, a degree of longitude cos(lat) as long as one of latitude
        latlon = problem.dataset.name in ("rome",) or problem.dataset.unit == "km" and problem.dataset.name == "points"
        x, y = (C[:, 1], C[:, 0]) if latlon else (C[:, 0], C[:, 1])
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
