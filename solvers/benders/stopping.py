"""When a Benders run stops short of its gap: its bounds' pace, and the memory it has left.

The pace rule extrapolates linearly what the last iterations closed of the gap: a run whose bounds
keep moving is not stopped by it (a linear extrapolation overstates what a tailing run still does),
and one whose bounds have stopped moving is stopped about one window later instead of running to
its iteration cap. The memory rule stops a run whose cut pool and models grow faster than the
memory left allows, rather than letting the kernel kill it with nothing returned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from securelp.solvers.benders.model import BendersIteration
from securelp.solvers.benders.options import BendersOptions

__all__ = ["gap_closed", "memory_running_out", "memory_taken", "pace_window_for", "too_slow"]

INF = np.inf


def memory_taken(before: int | None, after: int | None) -> int:
    """Bytes of available memory an iteration used up (``before`` and ``after`` it; 0 when unknown)."""
    return max(0, before - after) if before is not None and after is not None else 0


def memory_running_out(before: int | None, after: int | None, at_start: int | None,
                       options: BendersOptions | None = None) -> bool:
    """Whether the memory left after an iteration (``after`` bytes; ``before`` it, ``at_start`` when
    the run began) is below ``options.memory_growth_factor`` times what the iteration took, or below
    ``options.memory_floor`` (at most ``options.memory_floor_share`` of ``at_start``); False when unknown."""
    if after is None:
        return False
    o = options or BendersOptions()
    took = memory_taken(before, after)
    floor = o.memory_floor if at_start is None else min(o.memory_floor, o.memory_floor_share * at_start)
    return after < max(floor, o.memory_growth_factor * took)


def gap_closed(history: Sequence[BendersIteration], window: int) -> float:
    """How much of the absolute gap the last ``window`` iterations closed (lower bound raised plus
    upper bound lowered); infinite, no pace to judge, where either bound was still infinite
    ``window`` iterations ago."""
    then, now = history[-1 - window], history[-1]
    if not (np.isfinite(then.lower) and np.isfinite(then.upper)):
        return INF
    return (now.lower - then.lower) + (then.upper - now.upper)


def pace_window_for(history: Sequence[BendersIteration], window: int, min_seconds: float) -> int:
    """The iterations the pace is judged over: the last ``window``, or more until they span
    ``min_seconds``; 0 when the history is too short for either (no judgement yet)."""
    if window <= 0 or len(history) <= window:
        return 0
    now = history[-1].seconds
    w = window
    while now - history[-1 - w].seconds < min_seconds:
        w += 1
        if w >= len(history):
            return 0
    return w


def too_slow(history: Sequence[BendersIteration], window: int, gap: float, max_iterations: int,
             time_limit: float, min_seconds: float = BendersOptions.pace_min_seconds) -> bool:
    """True when, at the pace of the last ``window`` iterations (at least ``min_seconds`` of them,
    :func:`pace_window_for`: the gap they closed, their mean time), the iterations and seconds
    left could not close the gap down to ``gap``. A cheap run whose bounds move in bursts is not
    judged on a window of under ``min_seconds``."""
    w = pace_window_for(history, window, min_seconds)
    if w == 0:
        return False
    now = history[-1]
    if not np.isfinite(now.upper):
        return False
    need = (now.upper - now.lower) - gap * abs(now.upper)
    closed = gap_closed(history, w)
    if need <= 0 or not np.isfinite(closed):
        return False
    left = float(max_iterations - len(history))
    per_iteration = (now.seconds - history[-1 - w].seconds) / w
    if np.isfinite(time_limit) and per_iteration > 0:
        left = min(left, max(time_limit - now.seconds, 0.0) / per_iteration)
    return closed / w * left < need
