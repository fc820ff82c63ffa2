"""The HiGHS backend (``highspy``, imported lazily).

``Highs.run()`` says whether the call worked; ``getModelStatus()`` says what happened to
the model; the two are kept apart. Model statuses map through ``_STATUS_TABLE``; unknown
codes map to ``SolveStatus.ERROR`` with HiGHS's own status text kept in the result.
When presolve can only say "infeasible or unbounded", the model is solved once more
without presolve so the parties learn which.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import numpy as np

from securelp.solvers.errors import SolverError
from securelp.solvers.lp.model import LinearProgram, Sense
from securelp.solvers.lp.result import LPResult, SolveStatus

log = logging.getLogger(__name__)

_STATUS_TABLE = {
    "kOptimal": SolveStatus.OPTIMAL,
    "kInfeasible": SolveStatus.INFEASIBLE,
    "kUnbounded": SolveStatus.UNBOUNDED,
    "kUnboundedOrInfeasible": SolveStatus.INFEASIBLE_OR_UNBOUNDED,
    "kTimeLimit": SolveStatus.LIMIT,
    "kIterationLimit": SolveStatus.LIMIT,
    "kSolutionLimit": SolveStatus.LIMIT,
    "kObjectiveBound": SolveStatus.LIMIT,
    "kObjectiveTarget": SolveStatus.LIMIT,
    "kInterrupt": SolveStatus.LIMIT,
    "kHighsInterrupt": SolveStatus.LIMIT,
}


_BANNER_LOCK = threading.Lock()
_banner_consumed = False


def consume_highs_banner() -> None:
    """Create (and drop) the process's first ``highspy.Highs`` with C-level stdout muted.

    highspy >= 1.16 prints its copyright banner to file descriptor 1 when the first
    ``Highs`` object of a process is constructed, before any option can be set; on a
    command whose report goes to stdout (``--json -``) that banner would corrupt it, and a
    library prints nothing unasked. The CLI calls this once at start-up, before any other thread
    runs; :func:`new_highs` calls it too, for library use. Idempotent.
    """
    global _banner_consumed
    with _BANNER_LOCK:
        if _banner_consumed:
            return
        import highspy

        saved = None
        if sys.stdout is not None:  # None: started with descriptor 1 closed, nothing to protect
            try:
                sys.stdout.flush()
                saved = os.dup(1)
            except (OSError, ValueError):
                saved = None
        if saved is None:
            highspy.Highs()
        else:
            try:
                with open(os.devnull, "w") as devnull:
                    os.dup2(devnull.fileno(), 1)
                    try:
                        highspy.Highs()
                    finally:
                        os.dup2(saved, 1)
            finally:
                os.close(saved)
        _banner_consumed = True


#: primal and dual feasibility tolerances of ``new_highs(tight=True)`` (HiGHS's defaults are 1e-7)
TIGHT_TOLERANCE = 1e-9


def new_highs(options: dict[str, object] | None = None, *, tight: bool = False) -> object:
    """A silent ``highspy.Highs`` with ``options`` set (a rejected option is a SolverError).

    ``tight``: primal and dual feasibility tolerances of :data:`TIGHT_TOLERANCE`, for the
    models whose duals become certified bounds. Never sets ``threads``: HiGHS >= 1.16 sizes
    one task scheduler per process at its first run and refuses to run a later model that
    asks for another thread count (model status 'Not Set').
    """
    import highspy

    consume_highs_banner()  # the first Highs of a process prints a banner on stdout; a library stays quiet
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    opts: dict[str, object] = {}
    if tight:
        opts.update(primal_feasibility_tolerance=TIGHT_TOLERANCE, dual_feasibility_tolerance=TIGHT_TOLERANCE)
    opts.update(options or {})
    for key, value in opts.items():
        if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
            raise SolverError(f"HiGHS rejected option {key}={value!r}")
    return h


def set_time_left(h: object, seconds: float) -> None:
    """Let the next ``run()`` of the ``highspy.Highs`` object ``h`` take at most ``seconds`` more.

    HiGHS checks ``time_limit`` against the run time the object has accumulated over all its
    ``run()`` calls (highspy 1.16, measured: a second run with a limit of 1.2x the first run's
    time stopped after 0.04 s with "Time limit reached"), not against the current run; a model
    re-solved warm many times would stop early. ``seconds`` infinite: no limit.
    """
    import math

    limit = float(h.getRunTime()) + max(float(seconds), 0.0) if math.isfinite(seconds) else math.inf
    h.setOptionValue("time_limit", limit)


def signed_duals(pi: np.ndarray, row_lower: np.ndarray, row_upper: np.ndarray) -> np.ndarray:
    """A copy of the row duals ``pi`` with each dual whose sign asks for an infinite row bound set to 0
    (``pi_r > 0`` bounds row ``r`` from below, ``pi_r < 0`` from above, HiGHS's sign convention)."""
    pi = np.array(pi, dtype=float)
    pi[(pi > 0) & ~np.isfinite(row_lower)] = 0.0
    pi[(pi < 0) & ~np.isfinite(row_upper)] = 0.0
    return pi


def dual_bound(AT: object, cost: np.ndarray, col_lower: np.ndarray, col_upper: np.ndarray,
               row_lower: np.ndarray, row_upper: np.ndarray, pi: np.ndarray) -> float:
    """A lower bound on ``min c'x`` s.t. ``row_lower <= A x <= row_upper``, ``col_lower <= x <= col_upper``
    from any row duals ``pi`` (weak duality; ``AT`` is ``A`` transposed, sparse or dense).

    A dual whose sign asks for an infinite row bound is set to 0; the bound is
    ``sum_r pi_r b_r + sum_j min(d_j l_j, d_j u_j)`` with ``d = c - A' pi``, and ``-inf`` where a
    reduced cost needs an infinite column bound. HiGHS's objective is no such bound: on a badly
    scaled LP it can report "optimal" above the true optimum (Rome's PMO at eps 10/km).
    """
    pi = np.where(np.isfinite(pi), pi, 0.0)  # a failed solve's nan duals: any duals give a bound
    pi = signed_duals(pi, row_lower, row_upper)
    reduced = cost - AT @ pi
    nzr = pi != 0
    bound = float(pi[nzr] @ np.where(pi[nzr] > 0, row_lower[nzr], row_upper[nzr]))
    at = np.where(reduced >= 0, col_lower, col_upper)
    nz = reduced != 0
    if not np.all(np.isfinite(at[nz])):
        return -np.inf
    return bound + float(reduced[nz] @ at[nz])


def pass_lp(h: object, lp: LinearProgram) -> bool:
    """Load ``lp`` into the ``highspy.Highs`` object ``h``; False when HiGHS refuses it.

    Uses ``passModel``'s array overload, which reads the numpy buffers directly: filling a
    ``HighsLp`` attribute by attribute converts every array element by element (measured
    13 ms vs 2 ms for the 1e5 nonzeros of Mangasarian's Example 1).
    """
    A = lp.A
    return pass_arrays(h, lp.c, lp.col_lower, lp.col_upper, lp.row_lower, lp.row_upper, A.indptr, A.indices,
                       A.data, maximize=lp.sense is Sense.MAXIMIZE, offset=lp.offset)


def pass_arrays(h: object, c: np.ndarray, col_lower: np.ndarray, col_upper: np.ndarray, row_lower: np.ndarray,
                row_upper: np.ndarray, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, *,
                maximize: bool = False, offset: float = 0.0) -> bool:
    """Load the LP ``min c'x  s.t.  row_lower <= A x <= row_upper,  col_lower <= x <= col_upper``, ``A``
    given column-wise (``indptr``, ``indices``, ``data``), into ``h`` without building a
    :class:`LinearProgram` (hot loops that load many small models); False when HiGHS refuses it."""
    import highspy

    n_cols, n_rows = int(np.size(c)), int(np.size(row_lower))
    sense = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
    status = h.passModel(
        n_cols, n_rows, int(indptr[-1]), int(highspy.MatrixFormat.kColwise), int(sense), float(offset),
        np.ascontiguousarray(c, dtype=np.float64),
        np.ascontiguousarray(col_lower, dtype=np.float64),
        np.ascontiguousarray(col_upper, dtype=np.float64),
        np.ascontiguousarray(row_lower, dtype=np.float64),
        np.ascontiguousarray(row_upper, dtype=np.float64),
        np.ascontiguousarray(indptr, dtype=np.int32),
        np.ascontiguousarray(indices, dtype=np.int32),
        np.ascontiguousarray(data, dtype=np.float64),
        np.zeros(n_cols, dtype=np.int32),  # every column continuous (HighsVarType.kContinuous)
    )
    return status != highspy.HighsStatus.kError


#: option sets tried in turn when a run stops with an error and model status "Not Set": HiGHS's
#: dual simplex gives up that way on some ill-conditioned models ("Increasing Markowitz threshold
#: to 0.5", then the error). Measured on a transformed e226 in rows mode (505 x 292, 147,460
#: nonzeros, coefficients 9e-6 to 6e3), where it happened in 1 of 150 sessions: the same options on a
#: fresh object fail again (a plain retry does not help); presolve
#: off, the interior-point solver, primal simplex or no scaling each solve it (optimum -11.6389291)
_FALLBACKS: tuple[dict[str, object], ...] = ({}, {"presolve": "off"}, {"solver": "ipm"})


class HighsBackend:
    """Solve ``LinearProgram`` instances with HiGHS.

    Parameters
    ----------
    time_limit : seconds, or None for no limit.
    options : further HiGHS options (name -> value).
    """

    name = "highs"

    def __init__(self, time_limit: float | None = None, options: dict[str, object] | None = None,
                 strategy: str = "auto") -> None:
        if strategy not in ("auto", "default"):
            raise SolverError(f"unknown HiGHS strategy {strategy!r} (auto or default)")
        self.options: dict[str, object] = dict(options or {})
        self.strategy = strategy
        if time_limit is not None:
            self.options["time_limit"] = float(time_limit)

    def _options_for(self, lp: LinearProgram) -> dict[str, object]:
        """``auto``: primal simplex when free columns outnumber rows (dense masked LPs).

        With more free columns than rows, a basis can consist of free columns only, and
        then a reduced cost of rounding size (1e-9) on a nonbasic free column makes dual
        simplex report a spurious unbounded ray; primal simplex does not start there.
        """
        opts = dict(self.options)
        if self.strategy == "auto" and "solver" not in opts and "simplex_strategy" not in opts:
            n_free = int(np.count_nonzero(~np.isfinite(lp.col_lower) & ~np.isfinite(lp.col_upper)))
            if n_free > lp.n_rows:
                opts["simplex_strategy"] = 4
        return opts

    def solve(self, lp: LinearProgram) -> LPResult:
        """Solve ``lp``; infeasible/unbounded come back as statuses.

        A status other than optimal is confirmed before it is returned: "infeasible or
        unbounded" from presolve is resolved without presolve, and an infeasible or
        unbounded verdict of simplex is checked once by the interior-point solver (with
        crossover), whose answer wins when it finds an optimum (simplex verdicts on
        dense, masked LPs can be artefacts of rounding).
        """
        opts = self._options_for(lp)
        result = self._solve_once(lp, opts)
        if result.status is SolveStatus.INFEASIBLE_OR_UNBOUNDED and opts.get("presolve") != "off":
            log.info("presolve could not tell infeasible from unbounded; re-solving without presolve")
            again = self._solve_once(lp, {**opts, "presolve": "off"})
            if again.status in (SolveStatus.INFEASIBLE, SolveStatus.UNBOUNDED):
                result = again
        if self.strategy == "auto" and result.status in (
                SolveStatus.INFEASIBLE, SolveStatus.UNBOUNDED, SolveStatus.INFEASIBLE_OR_UNBOUNDED) \
                and opts.get("solver") != "ipm":
            check = self._solve_once(lp, {**self.options, "solver": "ipm"})
            if check.is_optimal:
                log.warning("simplex reported %s but the interior-point check found an optimum; using it",
                            result.status.value)
                return check
        return result

    def _solve_once(self, lp: LinearProgram, options: dict[str, object]) -> LPResult:
        import highspy

        start = time.perf_counter()
        for attempt, extra in enumerate(_FALLBACKS):
            h = new_highs({**options, **extra})
            if not pass_lp(h, lp):
                raise SolverError(f"HiGHS refused the model {lp.name or ''} ({lp.n_rows} rows, {lp.n_cols} columns)")
            run_status = h.run()
            model_status = h.getModelStatus()
            # a simplex run that errs out ("Not Set") on an ill-conditioned model is tried again
            # with presolve off, then by the interior-point solver: see _FALLBACKS
            if run_status == highspy.HighsStatus.kError and model_status == highspy.HighsModelStatus.kNotset \
                    and attempt + 1 < len(_FALLBACKS):
                log.warning("HiGHS stopped with an error (model status 'Not Set'); trying again with %s",
                            ", ".join(f"{k}={v}" for k, v in _FALLBACKS[attempt + 1].items()))
                continue
            break
        elapsed = time.perf_counter() - start
        text = h.modelStatusToString(model_status)
        status = _STATUS_TABLE.get(model_status.name, SolveStatus.ERROR)
        if run_status == highspy.HighsStatus.kError and status is SolveStatus.OPTIMAL:
            status = SolveStatus.ERROR
        info = h.getInfo()
        iterations = int(max(info.simplex_iteration_count, 0) + max(info.ipm_iteration_count, 0))
        x = row_duals = col_duals = dual_ray = None
        objective = float("nan")
        if status is SolveStatus.OPTIMAL:
            sol = h.getSolution()
            x = np.array(sol.col_value, dtype=np.float64)
            row_duals = np.array(sol.row_dual, dtype=np.float64)
            col_duals = np.array(sol.col_dual, dtype=np.float64)
            objective = float(h.getInfo().objective_function_value)
        elif status is SolveStatus.INFEASIBLE:
            ray_out = h.getDualRay()
            has_ray, ray = ray_out[-2], ray_out[-1]
            if has_ray:
                dual_ray = np.array(ray, dtype=np.float64)
        return LPResult(
            status=status,
            objective=objective,
            x=x,
            row_duals=row_duals,
            col_duals=col_duals,
            dual_ray=dual_ray,
            iterations=iterations,
            solve_time_s=elapsed,
            backend_status=text,
        )


def solve(lp: LinearProgram, time_limit: float | None = None) -> LPResult:
    """Solve ``lp`` with a default ``HighsBackend``."""
    return HighsBackend(time_limit=time_limit).solve(lp)
