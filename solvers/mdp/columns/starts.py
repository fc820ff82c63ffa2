"""The first-order starts of the column decomposition and ``auto``'s choice among them.

On a large component a full pricing round takes minutes, so the column generation starts from a
strong certificate (its first bound, :mod:`~securelp.solvers.mdp.columns.bounds`) and start columns:

* ``pdlp``: HiGHS's PDLP on the whole component LP (:mod:`~securelp.solvers.mdp.columns.pdlp`), the
  smoothed ascent from its duals (which raises the bound faster than more PDLP iterations), then PDLP
  on the outputs that ascent screens (better columns for the upper bound);
* ``screened``: the ascent, PDLP on the outputs it screens, the ascent again from where it stopped;
* ``smoothed``: the ascent alone (a bound, no columns);
* ``ipm``: the ascent, then output generation with the structured IPM
  (:mod:`~securelp.solvers.mdp.columns.ipm_start`);
* ``auto``: ``ipm`` where its inverses fit in memory and, under a time limit, its expected time fits
  in the start's budget; else ``pdlp`` where its PDLP gets enough expected iterations, else
  ``screened`` where its PDLP does, else ``smoothed``
  (:class:`~securelp.solvers.mdp.columns.options.StartOptions`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from securelp.solvers.mdp.columns.ascent import ascent_too_large, smoothed_dual_ascent
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.ipm_start import ipm_fits, ipm_start_columns
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions
from securelp.solvers.mdp.columns.pdlp import (
    FirstOrderStart,
    expected_pdlp_iterations,
    pdlp_start,
    pdlp_too_large,
    screen_outputs,
)

__all__ = ["FIRST_ORDER_METHODS", "choose_start", "run_start", "screened_primal", "start_budget"]

logger = logging.getLogger(__name__)

#: the first-order starts (module docstring)
FIRST_ORDER_METHODS = ("auto", "pdlp", "smoothed", "screened", "ipm")


def start_budget(method: str, size: int, time_limit: float, dual_ascent: float | None,
                 options: ColumnGenerationOptions) -> float:
    """Seconds of the first-order start on a component of ``size`` records x kept outputs: the given
    ``dual_ascent``, else (components above ``starts.dual_ascent_min_size``) ``pdlp_budget_share`` of
    the time limit for ``pdlp``, ``screen_budget_share`` of it for ``screened`` and ``ipm`` (without one
    ``unlimited_budget``), and ``smoothed_share`` of it for the smoothed ascent (``smoothed_unlimited``)."""
    o = options.starts
    if dual_ascent is not None:
        return float(dual_ascent)
    if size <= o.dual_ascent_min_size:
        return 0.0
    shares = {"pdlp": (o.pdlp_budget_share, o.unlimited_budget), "screened": (o.screen_budget_share, o.unlimited_budget),
              "ipm": (o.screen_budget_share, o.unlimited_budget)}
    share, fallback = shares.get(method, (o.smoothed_share, o.smoothed_unlimited))
    return share * time_limit if math.isfinite(time_limit) else fallback


def _auto_pdlp_or_screened(m: int, size: int, nnz: int, time_limit: float, dual_ascent: float | None,
                           options: ColumnGenerationOptions) -> str:
    """``auto``'s choice when the ``ipm`` start does not fit: ``pdlp`` without a time limit, and under
    one when its PDLP on the whole LP (``nnz`` nonzeros) gets ``auto_pdlp_min_iterations`` expected
    iterations, else ``screened``."""
    o = options.starts
    if not math.isfinite(time_limit):
        return "pdlp"
    budget = start_budget("pdlp", size, time_limit, dual_ascent, options)
    pdlp_seconds = (1.0 - o.pdlp_screen_share) * (1.0 - o.pdlp_polish_share) * budget
    expected = expected_pdlp_iterations(pdlp_seconds, nnz, o.pdlp_seconds_per_nonzero_iteration)
    if expected < o.auto_pdlp_min_iterations:
        logger.info("component of %d records: about %.0f PDLP iterations on the whole LP in %.0f s (< %d): "
                    "screened start instead", m, expected, pdlp_seconds, o.auto_pdlp_min_iterations)
        return "screened"
    return "pdlp"


def choose_start(first_order: str, m: int, E: int, Kc: int, time_limit: float, dual_ascent: float | None,
                 options: ColumnGenerationOptions | None = None) -> tuple[str, float]:
    """The first-order start of a component (``m`` records, ``E`` mDP rows, ``Kc`` kept outputs) and
    its budget in seconds (0: none). ``auto``: see the module docstring; a ``pdlp`` start whose whole
    component LP would not fit in memory becomes ``screened`` (PDLP on as many outputs as fit). PDLP-based
    starts are skipped on components below ``starts.pdlp_min_size`` records x kept outputs (their pricing
    LPs are cheaper), and every start but ``pdlp`` where its ascent's arrays would not fit."""
    options = options or ColumnGenerationOptions()
    o = options.starts
    size = m * Kc
    per_output = m + 2 * E  # nonzeros of the component LP per output (unit rows, mDP rows)
    method = first_order
    if method == "auto" and size > o.dual_ascent_min_size and ipm_fits(
            m, E, Kc, time_limit, start_budget("ipm", size, time_limit, dual_ascent, options), options):
        return "ipm", start_budget("ipm", size, time_limit, dual_ascent, options)
    if method == "auto":
        method = _auto_pdlp_or_screened(m, size, per_output * Kc, time_limit, dual_ascent, options)
    if method == "pdlp" and (why := pdlp_too_large(per_output * Kc, o.pdlp_max_nonzeros, o.pdlp_memory_share)):
        method = "screened"
        logger.info("component of %d records: no PDLP start on the whole LP (%s); PDLP on screened outputs", m, why)
    budget = start_budget(method, size, time_limit, dual_ascent, options)
    if first_order == "auto" and method == "screened" and budget > 0 and math.isfinite(time_limit):
        pdlp_seconds = (1.0 - o.screen_ascent_share - o.screen_resume_share) * budget
        expected = expected_pdlp_iterations(pdlp_seconds, per_output * min(o.screen_max_outputs, Kc),
                                            o.pdlp_seconds_per_nonzero_iteration)
        if expected < o.screen_min_iterations:
            logger.info("component of %d records: about %.0f PDLP iterations on screened outputs in %.0f s (< %d): "
                        "smoothed dual ascent instead", m, expected, pdlp_seconds, o.screen_min_iterations)
            method = "smoothed"
            budget = start_budget(method, size, time_limit, dual_ascent, options)
    if method in ("pdlp", "screened", "ipm") and size < o.pdlp_min_size:
        budget = 0.0
    if budget > 0 and method != "pdlp" and (why := ascent_too_large(E, Kc, o.ascent_memory_share)):
        # every start but pdlp begins with the ascent over all kept outputs; without it the column
        # generation starts cold (an explicit pdlp or ipm start that does not fit is likewise scaled
        # down, not refused)
        log = logger.info if first_order == "auto" else logger.warning
        log("component of %d records: no %s start: its dual ascent's arrays over %s; plain column generation", m,
            method, why)
        budget = 0.0
    return method, budget


def _ascend_from(cg: ComponentCG, q_before: np.ndarray, Y0: np.ndarray, beta: float, deadline: float,
                 what: str) -> tuple[np.ndarray, dict[str, float]]:
    """The smoothed ascent from duals ``Y0`` (mDP rows x outputs) with first smoothing ``beta`` until
    ``deadline``; returns the better of its certificate and ``q_before`` (the certificate of ``Y0``, or of
    an earlier iterate: the ascent starts from ``Y0`` rounded to float32) and what it did."""
    t = time.perf_counter()
    before = float(q_before.min(axis=1).sum())
    q, its = smoothed_dual_ascent(cg.G, cg.A, deadline, Y0=Y0, beta=beta, threads=cg.workers,
                                  parallel_min=cg.options.starts.ascent_parallel_min)
    after = float(q.min(axis=1).sum())
    if after < before:
        q, after = q_before, before
    logger.info("component of %d records: smoothed ascent %s, %d iterations, bound %.10g -> %.10g", cg.m, what, its,
                before, after)
    return q, {"iterations": its, "seconds": time.perf_counter() - t, "bound_before": before, "bound": after}


def _polish(cg: ComponentCG, start: FirstOrderStart, deadline: float) -> tuple[np.ndarray, dict[str, float]]:
    """Go on from a PDLP start's mDP-row duals with the smoothed ascent until ``deadline``, its first
    smoothing bias ``polish_smoothing`` of the gap PDLP left (estimated by PDLP's own, unrepaired primal
    value)."""
    before = float(start.Q.min(axis=1).sum())
    m, K = cg.G.shape
    gap_left = max(float(np.sum(cg.G * start.Z)) - before, 1e-3 * abs(before))
    beta = cg.options.starts.polish_smoothing * gap_left / (m * math.log(max(K, 2)))
    return _ascend_from(cg, start.Q, start.Y.T, beta, deadline, "after PDLP")


def screened_primal(cg: ComponentCG, Q: np.ndarray, deadline: float, tolerance: float) -> dict[str, Any]:
    """PDLP on the component LP restricted to the outputs :func:`~securelp.solvers.mdp.columns.pdlp.screen_outputs`
    picks from ``Q`` (records x outputs; at most ``screen_max_outputs``, halved until they fit in memory),
    until ``deadline``; its primal columns, repaired, enter the master (the restricted LP's mechanisms are
    mechanisms of the whole: the other outputs get no mass). PDLP's unit-row duals are not used as a
    stability centre: they are the restricted LP's. Returns what it did (``outputs``, ``iterations``,
    ``seconds``, ``status``, ``columns``)."""
    o = cg.options.starts
    t = time.perf_counter()
    n = min(o.screen_max_outputs, cg.Kc)
    while n > 1 and pdlp_too_large((cg.m + 2 * cg.E) * n, o.pdlp_max_nonzeros, o.pdlp_memory_share):
        n //= 2
    out: dict[str, Any] = {"outputs": 0, "iterations": 0, "status": "none", "columns": 0}
    if why := pdlp_too_large((cg.m + 2 * cg.E) * n, o.pdlp_max_nonzeros, o.pdlp_memory_share):
        logger.info("component of %d records: no PDLP even on one output (%s)", cg.m, why)
        out["seconds"] = time.perf_counter() - t
        return out
    S = screen_outputs(Q, n, o.screen_temperature)
    start = pdlp_start(cg.G[:, S], cg.A, deadline, tolerance=tolerance, iteration_limit=o.screen_pdlp_iterations)
    out["outputs"] = int(S.size)
    if start is not None:
        Z = np.zeros((cg.m, cg.Kc))
        Z[:, S] = start.Z
        out.update(iterations=start.iterations, status=start.status, columns=cg.add_primal_columns(Z))
    out["seconds"] = time.perf_counter() - t
    logger.info("component of %d records: PDLP on %d screened outputs, %d iterations (%s), %d columns", cg.m,
                S.size, out["iterations"], out["status"], out["columns"])
    return out


def _screened_start(cg: ComponentCG, ta: float, budget: float, deadline: float, tolerance: float
                    ) -> tuple[np.ndarray, int, dict[str, Any]]:
    """The ``screened`` start begun at ``ta`` with ``budget`` seconds: the ascent (``screen_ascent_share``),
    PDLP on the outputs it screens (:func:`screened_primal`), then the ascent again from its last iterate
    and smoothing (``screen_resume_share``). Returns the best certificate, the ascents' iterations and
    what the screened PDLP did (with ``ascent_after`` when the second ascent ran)."""
    o = cg.options.starts
    end = min(deadline, ta + budget)
    resume = o.screen_resume_share * budget
    state: dict[str, Any] = {}
    q, its = smoothed_dual_ascent(cg.G, cg.A, min(deadline, ta + o.screen_ascent_share * budget),
                                  state=state if resume > 0 else None, threads=cg.workers,
                                  parallel_min=o.ascent_parallel_min)
    info = screened_primal(cg, q, min(deadline, ta + budget - resume), tolerance)
    if resume > 0 and "Y" in state and time.perf_counter() < end:
        q, info["ascent_after"] = _ascend_from(cg, q, state.pop("Y"), state["beta"], end, "after the screened PDLP")
        its += info["ascent_after"]["iterations"]
    return q, its, info


def _pdlp(cg: ComponentCG, entry: dict[str, Any], ta: float, budget: float, deadline: float, gap: float
          ) -> tuple[np.ndarray | None, int, np.ndarray | None]:
    """The ``pdlp`` start: PDLP on the whole LP, the ascent from its duals (``pdlp_polish_share``; at most
    PDLP's own time when PDLP converged), its columns, then PDLP on screened outputs (``pdlp_screen_share``)
    unless PDLP converged. Returns the certificate (None without a PDLP solution), the iterations and
    the stability centre."""
    o = cg.options.starts
    screen = o.pdlp_screen_share * budget
    polish = o.pdlp_polish_share * (budget - screen)
    start = pdlp_start(cg.G, cg.A, min(deadline, ta + budget - screen - polish), tolerance=max(gap, 1e-7))
    if start is None:
        return None, 0, None
    q, its = start.Q, start.iterations
    end = min(deadline, ta + budget - screen)
    if start.status == "Optimal":  # PDLP converged early: the ascent gets at most its time
        end = min(end, 2.0 * time.perf_counter() - ta)
    if polish > 0 and start.Y is not None and time.perf_counter() < end:
        q, entry["polish"] = _polish(cg, start, end)
    start.Y = None
    entry["columns"] = cg.add_primal_columns(start.Z)
    entry["status"] = start.status
    if screen > 0 and start.status != "Optimal" and time.perf_counter() < deadline:
        entry["screened"] = screened_primal(cg, q, min(deadline, time.perf_counter() + screen), max(gap, 1e-7))
    return q, its, start.mu


def run_start(cg: ComponentCG, method: str, budget: float, deadline: float, gap: float, time_limit: float,
              starts: list[dict[str, Any]]) -> tuple[np.ndarray | None, dict[str, Any] | None]:
    """The start ``method`` with ``budget`` seconds on ``cg``: its certificate becomes every output's stored
    one and its report is appended to ``starts``. Returns the stability centre it gives (None: none) and
    its report (None when it gave no certificate)."""
    ta = time.perf_counter()
    entry: dict[str, Any] = {"records": int(cg.m), "method": method}
    cg.say(f"component of {cg.m} records, {cg.Kc} outputs: {method} start"
           + (f" (at most {budget:.0f} s)" if method != "ipm" or math.isfinite(time_limit) else ""))
    centre = None
    if method == "pdlp":
        q, its, centre = _pdlp(cg, entry, ta, budget, deadline, gap)
    elif method == "screened":
        q, its, entry["screened"] = _screened_start(cg, ta, budget, deadline, max(gap, 1e-7))
    elif method == "ipm":
        start, centre = ipm_start_columns(cg, entry, ta, budget, deadline, gap, not math.isfinite(time_limit))
        q, its = start.Q, start.iterations
    else:
        q, its = smoothed_dual_ascent(cg.G, cg.A, min(deadline, ta + budget), threads=cg.workers,
                                      parallel_min=cg.options.starts.ascent_parallel_min)
    if q is not None:
        bound = float(q.min(axis=1).sum())
        cg.warm_start(q)
        entry.update(iterations=its, seconds=time.perf_counter() - ta, bound=bound)
        starts.append(entry)
        logger.info("component of %d records: %s start, %d iterations, bound %.10g", cg.m, method, its, bound)
        return centre, entry
    return centre, None
