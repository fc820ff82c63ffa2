"""The column decomposition of the PMO (Dantzig-Wolfe / column generation), component by component.

Beyond Qiu: the PMO splits exactly into one LP per mDP-graph component
(:mod:`~securelp.solvers.mdp.columns.component`). Singleton components are solved in closed form (all
mass on ``argmin_k c_ik``); on the others the outputs dominated entrywise or in the cone's dual order
are dropped (:mod:`~securelp.solvers.mdp.columns.bounds`, :mod:`~securelp.solvers.mdp.columns.optimal_transport`),
a first-order start runs on large ones (:mod:`~securelp.solvers.mdp.columns.starts`), and the column
generation certifies the rest (:mod:`~securelp.solvers.mdp.columns.iterations`). A component stopped
short of the gap above the exponential mechanism's loss (Qiu Eq. 47) returns that mechanism's rows
instead (private on every pair). The components' verified rows are assembled and verified again as a
whole (:func:`securelp.solvers.mdp.repair.finalize_mechanism`).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.columns.bounds import component_rows, mdp_rows_matrix, undominated_outputs
from securelp.solvers.mdp.columns.component import ComponentCG, say_nothing
from securelp.solvers.mdp.columns.ipm_start import ipm_outputs, ipm_start_columns
from securelp.solvers.mdp.columns.iterations import Rows, run_component
from securelp.solvers.mdp.columns.optimal_transport import TransportCertifier, cone_dominated
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions
from securelp.solvers.mdp.columns.pricing import output_features
from securelp.solvers.mdp.columns.starts import FIRST_ORDER_METHODS, choose_start, run_start
from securelp.solvers.mdp.expmech import private_exponential_mechanism
from securelp.solvers.mdp.pmo import PMOProblem, require_lp_factors
from securelp.solvers.mdp.repair import finalize_mechanism
from securelp.solvers.mdp.report import IterationRecord, MechanismResult

__all__ = ["solve_colgen"]

logger = logging.getLogger(__name__)


@dataclass
class _Tally:
    """What the components' runs add up to, for the result's details."""

    lp_solves: int = 0
    transport_certified: int = 0
    cold_retries: int = 0
    master_retries: int = 0
    master_tightenings: int = 0
    n_columns: int = 0
    columns_retired: int = 0
    expmech_components: int = 0
    kept_sizes: list[int] = field(default_factory=list)
    dominated: list[dict[str, float]] = field(default_factory=list)
    starts: list[dict[str, Any]] = field(default_factory=list)
    lazy_rows: list[dict[str, float]] = field(default_factory=list)

    def add(self, cg: ComponentCG) -> None:
        p, mst = cg.pricer, cg.master
        self.lp_solves += p.lp_solves
        self.transport_certified += p.transport_certified
        self.cold_retries += p.cold_retries
        self.master_retries += mst.retries
        self.master_tightenings += mst.tightenings
        self.n_columns += mst.columns_added
        self.columns_retired += mst.columns_retired
        if p.lazy is not None:
            self.lazy_rows.append({"records": int(cg.m), "mdp_rows": int(cg.E), "start_rows": int(p.lazy.start.size),
                                   "mean_rows_carried": p.lazy.rows_carried / max(p.lazy.solves, 1),
                                   "separation_rounds": p.lazy.separation_rounds})

    def details(self) -> dict[str, Any]:
        return {"n_columns": self.n_columns, "columns_retired": self.columns_retired,
                "pricing_lp_solves": self.lp_solves, "transport_certified": self.transport_certified,
                "pricing_cold_retries": self.cold_retries, "master_retries": self.master_retries,
                "master_tightenings": self.master_tightenings, "expmech_components": self.expmech_components,
                "kept_outputs": self.kept_sizes, "dominated_outputs": self.dominated, "dual_ascent": self.starts,
                "lazy_rows": self.lazy_rows}


def _check(problem: PMOProblem, gap: float, max_iterations: int, dual_ascent: float | None, first_order: str) -> None:
    """Refuse parameters the column decomposition cannot take (``InputError`` naming the parameter)."""
    if not 0 < gap < 1:
        raise InputError(f"the relative gap must be in (0, 1), got {gap}", parameter="gap")
    require_lp_factors(problem)
    if int(max_iterations) < 1:
        raise InputError(f"the iteration cap must be >= 1, got {max_iterations}", parameter="max_iterations")
    if dual_ascent is not None and not (math.isfinite(dual_ascent) and dual_ascent >= 0):
        raise InputError(f"the dual-ascent budget must be a number of seconds >= 0, got {dual_ascent}",
                         parameter="dual_ascent")
    if first_order not in FIRST_ORDER_METHODS:
        raise InputError(f"the first-order start must be one of {', '.join(FIRST_ORDER_METHODS)}, got {first_order!r}",
                         parameter="first_order")


def solve_colgen(problem: PMOProblem, *, gap: float = 1e-4, max_iterations: int = 1000,
                 time_limit: float = float("inf"), workers: int = 2, exact_check: bool = False,
                 method_name: str = "colgen", dual_ascent: float | None = None, first_order: str = "auto",
                 progress: Callable[[IterationRecord], None] | None = None,
                 status: Callable[[str], None] | None = None,
                 options: ColumnGenerationOptions | None = None) -> MechanismResult:
    """Solve the PMO by column generation over output columns, component by component; returns a
    verified mechanism with a certified gap (module docstring).

    ``dual_ascent`` is the wall-clock budget in seconds, per component, of the first-order start
    ``first_order`` (one of :data:`~securelp.solvers.mdp.columns.starts.FIRST_ORDER_METHODS`) run before
    the column generation; ``None`` (default): by the component's size and the time limit
    (:func:`~securelp.solvers.mdp.columns.starts.start_budget`); ``0``: never. ``options``: the tunables
    (:class:`~securelp.solvers.mdp.columns.options.ColumnGenerationOptions`).

    ``progress`` gets every column-generation iteration's bounds (whole problem); ``status`` gets a
    line of text about the slow parts before them on a large component (the dominance search, the
    start and its phases, every IPM iteration), for a terminal.

    Raises
    ------
    InputError
        ``gap`` outside ``(0, 1)``, ``max_iterations < 1``, a negative ``dual_ascent`` or an unknown
        ``first_order`` (``parameter`` names it), or eps d too large for an LP.
    SolverError
        A master or a pricing LP that no fallback solves.
    VerificationError
        The assembled mechanism failed verification.
    """
    _check(problem, gap, max_iterations, dual_ascent, first_order)
    options = options or ColumnGenerationOptions()
    run = _Run(problem, gap, int(max_iterations), time_limit, workers, dual_ascent, first_order, progress, status,
               options)
    for ci, idx in enumerate(run.comps):
        run.component(ci, idx)
    return run.result(exact_check, method_name)


class _Run:
    """One :func:`solve_colgen` call: the components, their bounds and rows so far, the history."""

    def __init__(self, problem: PMOProblem, gap: float, max_iterations: int, time_limit: float, workers: int,
                 dual_ascent: float | None, first_order: str, progress: Callable[[IterationRecord], None] | None,
                 status: Callable[[str], None] | None, options: ColumnGenerationOptions) -> None:
        self.t0 = time.perf_counter()
        self.problem, self.gap, self.max_iterations, self.time_limit = problem, gap, max_iterations, time_limit
        self.workers, self.dual_ascent, self.first_order = workers, dual_ascent, first_order
        self.progress, self.status, self.options = progress, status, options
        self.deadline = self.t0 + time_limit
        G = problem.cost
        self.comps = sorted(problem.graph.component_members(), key=lambda g: (g.size, int(g[0])))
        self.all_rows = mdp_rows_matrix(problem)  # every component's rows are cut from it
        self.trivial = np.array([float(G[c].min(axis=1).sum()) for c in self.comps])
        self.lowers = self.trivial.copy()
        self.uppers = np.full(len(self.comps), np.inf)
        self.Z = np.zeros((problem.n, problem.K))
        self.history: list[IterationRecord] = []
        self.statuses: list[str] = []
        self.tally = _Tally()

    def record(self, ci: int, lo: float, up: float) -> None:
        """Component ``ci``'s bounds after an iteration, with the other components' as they stand."""
        others = np.arange(len(self.comps)) != ci
        lw = float(self.lowers[others].sum() + lo)
        uw = float(self.uppers[others].sum() + up)
        self.history.append(IterationRecord(len(self.history) + 1, lw, uw, time.perf_counter() - self.t0))
        if self.progress is not None:
            self.progress(self.history[-1])

    def _kept_outputs(self, idx: np.ndarray, A_c: sp.csr_matrix, say: Callable[[str], None]
                      ) -> tuple[np.ndarray, TransportCertifier | None]:
        """The outputs of component ``idx`` not dominated entrywise, nor (``options.dominance``, components
        of at most ``transport_max_records`` records) in the cone's dual order; each search under a time
        limit for at most ``dominance_share`` of it. Returns them and the transport certifier built."""
        o, G, t_limit = self.options, self.problem.cost, self.time_limit
        kept = undominated_outputs(G[idx], min(self.deadline, time.perf_counter() + o.dominance_share * t_limit))
        if not (o.dominance and kept.size > 1 and idx.size <= o.transport_max_records):
            return kept, None
        say(f"component of {idx.size} records: looking for dominated outputs among {kept.size}")
        td = time.perf_counter()
        certifier = TransportCertifier(A_c)
        Gc = G[np.ix_(idx, kept)]
        by, visited = cone_dominated(Gc, A_c, certifier, output_features(Gc),
                                     min(self.deadline, td + o.dominance_share * t_limit), tries=o.dominance_tries,
                                     neighbours=o.dominance_neighbours)
        alive = by < 0
        self.tally.dominated.append({"records": int(idx.size), "outputs": int(kept.size),
                                     "removed": int((~alive).sum()), "visited": int(visited),
                                     "seconds": time.perf_counter() - td})
        logger.info("component of %d records: %d of %d outputs dominated in the cone's dual order (%.1f s)",
                    idx.size, self.tally.dominated[-1]["removed"], kept.size, self.tally.dominated[-1]["seconds"])
        return kept[alive], certifier

    def component(self, ci: int, idx: np.ndarray) -> None:
        """Component ``ci`` (records ``idx``): its rows into the mechanism, its bounds and status."""
        G = self.problem.cost
        if idx.size == 1:
            i = int(idx[0])
            k = int(np.argmin(G[i]))
            self.Z[i, k] = 1.0
            self.lowers[ci] = self.uppers[ci] = float(G[i, k])
            self.tally.kept_sizes.append(1)
            return
        A_c = component_rows(self.problem, idx, self.all_rows)
        say = self.status if self.status is not None and idx.size >= self.options.status_min_records else say_nothing
        kept, certifier = self._kept_outputs(idx, A_c, say)
        self.tally.kept_sizes.append(int(kept.size))
        cg = ComponentCG(self.problem, idx, kept, self.workers, self.gap, self.options, A=A_c, transport=certifier)
        cg.say = say
        try:
            rows, lo, up, st, its = self._solve(cg, functools.partial(self.record, ci))
        finally:
            cg.close()
        self.tally.add(cg)
        self.Z[idx] = rows
        self.lowers[ci], self.uppers[ci] = max(lo, self.trivial[ci]), up
        self.statuses.append(st)
        logger.info("component of %d records, %d kept outputs: %s after %d iterations", idx.size, kept.size, st, its)

    def _solve(self, cg: ComponentCG, on_iter: Callable[[float, float], None]) -> Rows:
        """The component's start, its column generation (switched to the ipm start where ``auto`` gave it
        none and it lingers) and, stopped short above it, the exponential mechanism's rows."""
        o = self.options.starts
        method, budget = choose_start(self.first_order, cg.m, cg.E, cg.Kc, self.time_limit, self.dual_ascent,
                                      self.options)
        centre, entry = None, None
        if budget > 0:
            centre, entry = run_start(cg, method, budget, self.deadline, self.gap, self.time_limit, self.tally.starts)
        switch = (self.first_order == "auto" and self.dual_ascent is None and budget == 0 and cg.pricer.lazy is None
                  and cg.m >= o.ipm_switch_min_records and self.max_iterations > o.ipm_switch_iterations
                  and ipm_outputs(cg.m, cg.E, cg.Kc, self.options) > 0)
        rows, lo, up, st, its = run_component(cg, self.deadline, o.ipm_switch_iterations if switch
                                              else self.max_iterations, on_iter, centre=centre,
                                              trust_centre=method == "ipm")
        if entry is not None and cg.start_gap is not None:
            entry["start_gap"] = cg.start_gap  # its repaired primal over its bound (the run stops within the gap)
        if switch and st == "iteration_limit" and time.perf_counter() < self.deadline:
            rows, lo, up, st, its = self._switch_to_ipm(cg, (rows, lo, up, st, its), on_iter)
        if st != "optimal" and (em := private_exponential_mechanism(
                np.asarray(self.problem.dataset.distance)[np.ix_(cg.idx, self.problem.outputs)],
                self.problem.eps)) is not None:
            loss = float(np.sum(self.problem.cost[cg.idx] * em))
            if loss < up:
                logger.info("component of %d records: the exponential mechanism's rows (loss %.10g) replace the "
                            "column generation's (%.10g)", cg.m, loss, up)
                rows, up = em, loss
                self.tally.expmech_components += 1
                on_iter(lo, up)
        return rows, lo, up, st, its

    def _switch_to_ipm(self, cg: ComponentCG, done: Rows, on_iter: Callable[[float, float], None]) -> Rows:
        """The ``ipm`` start on a component whose column generation has run ``ipm_switch_iterations``
        iterations without closing the gap (``done``: what they gave), then the column generation again
        from its columns and duals, the columns found so far kept. Returns what
        :func:`~securelp.solvers.mdp.columns.iterations.run_component` does, with the better bounds and
        rows of the two runs and the iterations of both."""
        rows, lo, up, _, its = done
        ta = time.perf_counter()
        unlimited = not math.isfinite(self.time_limit)
        o = self.options.starts
        budget = o.unlimited_budget if unlimited else o.screen_budget_share * (self.deadline - ta)
        cg.say(f"component of {cg.m} records: the column generation has not closed the gap after {its} iterations: "
               "IPM start")
        logger.info("component of %d records: gap %.3g after %d column-generation iterations: IPM start", cg.m,
                    (up - lo) / max(abs(up), 1e-300), its)
        entry: dict[str, Any] = {"records": int(cg.m), "method": "ipm", "after_iterations": int(its)}
        start, centre = ipm_start_columns(cg, entry, ta, budget, self.deadline, self.gap, unlimited)
        bound = float(start.Q.min(axis=1).sum())
        entry.update(iterations=start.iterations, seconds=time.perf_counter() - ta, bound=bound)
        self.tally.starts.append(entry)
        logger.info("component of %d records: ipm start, %d iterations, bound %.10g", cg.m, start.iterations, bound)
        rows2, lo2, up2, st, its2 = run_component(cg, self.deadline, self.max_iterations - its, on_iter,
                                                  centre=centre, trust_centre=True)
        if cg.start_gap is not None:
            entry["start_gap"] = cg.start_gap
        if up2 <= up:
            rows, up = rows2, up2
        lo = max(lo, lo2)
        if (up - lo) / max(abs(up), 1e-300) <= self.gap:
            st = "optimal"
        return rows, min(lo, up), up, st, its + its2

    def result(self, exact_check: bool, method_name: str) -> MechanismResult:
        """The components' rows, each repaired and verified, checked again as a whole (not repaired again),
        with the summed bounds and the status of the weakest component."""
        problem = self.problem
        X, report, info = finalize_mechanism(self.Z, problem, exact=exact_check, verified_parts=True)
        upper = problem.objective_of(X)
        lower = min(float(self.lowers.sum()), upper)
        rel_gap = (upper - lower) / max(abs(upper), 1e-300)
        if rel_gap <= self.gap:
            status = "optimal"
        elif "time_limit" in self.statuses:
            status = "time_limit"
        elif "stalled" in self.statuses:
            status = "stalled"
        else:
            status = "iteration_limit"
        if not self.history:
            self.history.append(IterationRecord(1, lower, upper, time.perf_counter() - self.t0))
        return MechanismResult(
            method=method_name, status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
            rel_gap=rel_gap, iterations=len(self.history), time_s=time.perf_counter() - self.t0, verification=report,
            history=tuple(self.history),
            details={**self.tally.details(), "component_sizes": [int(c.size) for c in self.comps], **info},
        )
