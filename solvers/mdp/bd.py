"""Benders decomposition of the PMO (``securelp mdp --method bd``): by records or by output columns.

``records`` is Qiu's BD over a record partition (:mod:`securelp.solvers.mdp.records`). ``columns`` is
Benders decomposition of the PMO's *dual* with the unit-row duals as master variables and one
subproblem per output column: in primal terms column generation per mDP-graph component
(:mod:`securelp.solvers.mdp.columns`, whose module docstring states the equivalence).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.columns import ColumnGenerationOptions, solve_colgen
from securelp.solvers.mdp.pmo import PMOProblem
from securelp.solvers.mdp.records import Partition, RecordOptions, solve_records
from securelp.solvers.mdp.report import IterationRecord, MechanismResult

__all__ = ["DECOMPOSITIONS", "solve_bd"]

#: the decompositions :func:`solve_bd` runs
DECOMPOSITIONS = ("records", "columns")


def solve_bd(problem: PMOProblem, *, decomposition: str = "records", partitioner: str = "kmdv", n_subsets: int = 25,
             gap: float = 1e-4, max_iterations: int = 500, time_limit: float = float("inf"), workers: int = 2,
             seed: int = 0, initial_cuts: bool = True, partition: Partition | None = None, exact_check: bool = False,
             dual_ascent: float | None = None, first_order: str = "auto",
             progress: Callable[[IterationRecord], None] | None = None, status: Callable[[str], None] | None = None,
             options: RecordOptions | None = None, columns: ColumnGenerationOptions | None = None) -> MechanismResult:
    """Solve the PMO by Benders decomposition; returns a verified mechanism.

    ``decomposition="records"``: Qiu's BD (:func:`securelp.solvers.mdp.records.solve_records`, with
    ``partitioner``, ``n_subsets``, ``seed``, ``initial_cuts``, ``partition`` and ``options``).
    ``"columns"``: the column decomposition (:func:`securelp.solvers.mdp.columns.solve_colgen`, with
    ``dual_ascent``, ``first_order`` and ``columns``); its ``partition`` reports the mDP graph's
    components. ``progress`` gets every iteration's bounds, ``status`` notes on the slow phases before
    them.

    Raises
    ------
    InputError
        ``gap`` outside ``(0, 1)`` or an unknown decomposition (``parameter`` names it), or what the
        decomposition refuses.
    SolverError, VerificationError, ResourceError
        From the decomposition.
    """
    if not (0 < gap < 1):
        raise InputError(f"the relative gap must be in (0, 1), got {gap}", parameter="gap")
    if decomposition not in DECOMPOSITIONS:
        raise InputError(f"unknown decomposition {decomposition!r}: use records or columns", parameter="decomposition")
    if decomposition == "columns":
        r = solve_colgen(problem, gap=gap, max_iterations=max_iterations, time_limit=time_limit, workers=workers,
                         exact_check=exact_check, method_name="bd", dual_ascent=dual_ascent, first_order=first_order,
                         progress=progress, status=status, options=columns)
        part = {"method": None, "decomposition": "columns", "sizes": r.details["component_sizes"], "n_boundary": 0,
                "mp_component_sizes": [], "kept_outputs": r.details["kept_outputs"]}
        return dataclasses.replace(r, partition=part)
    return solve_records(problem, partitioner=partitioner, n_subsets=n_subsets, gap=gap, max_iterations=max_iterations,
                         time_limit=time_limit, workers=workers, seed=seed, initial_cuts=initial_cuts,
                         partition=partition, exact_check=exact_check, progress=progress, status=status,
                         options=options)
