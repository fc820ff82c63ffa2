"""Qiu's Benders decomposition (BD) of the PMO over a partitioned secret dataset (Qiu Sec. 4-5).

With a partition into subsets (:mod:`~securelp.solvers.mdp.records.partition`), boundary records
``B`` (a neighbour in another subset) and internal records ``I_m``: the master holds the boundary
variables with their own rows and Property 3.2's initial cuts (:mod:`~securelp.solvers.mdp.records.master`),
block ``m`` the internal variables of subset ``m`` (:mod:`~securelp.solvers.mdp.records.blocks`).
Property 3.1: the master splits into independent components (variables linked by a master row or by
one block), each solved on its own by the generic engine (:class:`securelp.solvers.benders.BendersEngine`);
feasibility cuts come from normalised Farkas rays (phase-1 duals), optimality cuts from the blocks'
duals, both with the weak-duality bound term (valid for any duals).

Every upper bound is the loss of an assembled full ``n x K`` mechanism after the exact repair and
verification of :mod:`securelp.solvers.mdp.repair`; the run starts from two private mechanisms (the
exponential mechanism, Qiu Eq. 47, and every record on its cheapest output repaired exactly), and
the returned mechanism is the best one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from securelp.solvers.benders import BendersEngine, BendersIteration, BendersResult, MasterSpec, SubproblemSpec
from securelp.solvers.errors import InputError, VerificationError
from securelp.solvers.mdp.expmech import solve_expmech
from securelp.solvers.mdp.pmo import PMOProblem, require_lp_factors
from securelp.solvers.mdp.records.blocks import build_blocks
from securelp.solvers.mdp.records.master import build_master
from securelp.solvers.mdp.records.options import RecordOptions
from securelp.solvers.mdp.records.partition import Partition, partition_records
from securelp.solvers.mdp.repair import UNREPAIRED, finalize_mechanism, repair_mechanism
from securelp.solvers.mdp.report import IterationRecord, MechanismResult
from securelp.solvers.mdp.verify import verify_mechanism

__all__ = ["build_bd_model", "cheapest_incumbent", "on_cheapest_outputs", "solve_records"]

logger = logging.getLogger(__name__)


def build_bd_model(problem: PMOProblem, partition: Partition, *, initial_cuts: bool = True,
                   options: RecordOptions | None = None
                   ) -> tuple[MasterSpec, list[SubproblemSpec], np.ndarray, list[np.ndarray], int]:
    """Build the master and blocks. Returns ``(master, blocks, boundary_ids, block_internal_ids, n_initial_cuts)``.

    Raises
    ------
    ResourceError
        The decomposition's LPs would not fit in memory.
    """
    options = options or RecordOptions()
    B = np.flatnonzero(partition.boundary)
    posB = np.full(problem.n, -1, dtype=np.int64)
    posB[B] = np.arange(B.size)
    er, ec = problem.lp_edges
    w = np.exp(problem.eps * np.asarray(problem.dataset.distance)[er, ec])
    master, n_init = build_master(problem, partition, w, posB, initial_cuts=initial_cuts,
                                  max_factor=options.initial_cut_max_factor)
    blocks, internal_ids = build_blocks(problem, partition, posB, w)
    return master, blocks, B, internal_ids, n_init


def _expmech_incumbent(problem: PMOProblem) -> tuple[float, Any] | None:
    """The exponential mechanism (Qiu Eq. 47), verified, as a first incumbent: private on every pair, so
    feasible for the PMO; where the assembled masters' repairs are poor it is the better mechanism.
    ``None`` where it cannot be built (its far outputs underflow)."""
    try:
        r = solve_expmech(problem)
    except VerificationError as exc:
        logger.info("BD: no exponential-mechanism incumbent (%s)", exc)
        return None
    return r.objective, (r.mechanism, r.verification, dict(UNREPAIRED))


def on_cheapest_outputs(loss: np.ndarray) -> np.ndarray:
    """Each row of ``loss`` (records x outputs) as a 0/1 row with its 1 on its cheapest output.

    Given the loss ``c``, not the objective's ``p * c``: the two agree where ``p_i > 0``, and a record
    of prior 0 goes to its nearest output instead of output 0 (every ``p_i c_ik`` is 0 there), whose
    mass the repair's closure would spread onto its neighbours."""
    Z = np.zeros(loss.shape)
    Z[np.arange(loss.shape[0]), np.argmin(loss, axis=1)] = 1.0
    return Z


def cheapest_incumbent(problem: PMOProblem) -> tuple[float, Any]:
    """Every record on its cheapest output, repaired exactly (the upward closure spreads each row over
    its neighbours' outputs at ``exp(-eps d)``) and verified: the other first incumbent, near-optimal at
    large ``eps d``. Returns its loss and ``(mechanism, report, repair figures)``."""
    X, report, info = finalize_mechanism(on_cheapest_outputs(problem.loss), problem)
    return problem.objective_of(X), (X, report, info)


class _UpperBounds:
    """The engine's upper-bound functions: the master's ``x`` and the blocks' solutions assembled into a
    full ``n x K`` matrix, repaired exactly and verified. Counts :attr:`repaired` and :attr:`verified`,
    and the seconds of each (:attr:`repair_seconds`, :attr:`verify_seconds`)."""

    def __init__(self, problem: PMOProblem, B: np.ndarray, internal_ids: list[np.ndarray], best: float = np.inf
                 ) -> None:
        self.problem, self.B, self.internal_ids = problem, B, internal_ids
        self.best = best
        self.repaired = self.verified = 0
        self.repair_seconds = self.verify_seconds = 0.0

    def assemble(self, x: np.ndarray, ys: list[np.ndarray]) -> np.ndarray:
        """The full ``n x K`` matrix of the master's ``x`` and the blocks' ``ys``."""
        p, B = self.problem, self.B
        Z = np.zeros((p.n, p.K))
        if B.size:
            Z[B] = x.reshape(B.size, p.K)
        for Im, y in zip(self.internal_ids, ys):
            Z[Im] = y.reshape(Im.size, p.K)
        return Z

    def verify(self, Z: np.ndarray) -> tuple[float, Any]:
        """``Z`` repaired and verified: its loss and ``(mechanism, report, repair figures)``.

        Raises
        ------
        VerificationError
            The repaired mechanism fails its verification.
        """
        p = self.problem
        t = time.perf_counter()
        X, info = repair_mechanism(Z, p)
        value = p.objective_of(X)
        self.repaired += 1
        self.repair_seconds += time.perf_counter() - t
        t = time.perf_counter()
        report = verify_mechanism(X, p.dataset.distance, p.eps, eta=p.eta)
        self.verified += 1
        self.verify_seconds += time.perf_counter() - t
        self.best = min(self.best, value)
        return value, (X, report, info)

    def upper_bound(self, x: np.ndarray, ys: list[np.ndarray]) -> tuple[float, Any]:
        """Every block feasible: the assembly, unless its raw loss is not below the best verified one
        (then its repair could not win)."""
        Z = self.assemble(x, ys)
        if self.problem.objective_of(Z) >= self.best:
            return np.inf, None
        return self.verify(Z)

    def repaired_upper_bound(self, x: np.ndarray, ys: list[np.ndarray | None], feasible: list[bool]
                             ) -> tuple[float, Any]:
        """An iteration with infeasible blocks: the master's ``x`` and the feasible blocks' solutions
        with, for the infeasible ones, (a) each record on its cheapest output or (b) their phase-1
        solutions, each assembly repaired exactly and verified; the better is kept. (a) is near-optimal
        at large ``eps d``; (b) ignores the loss and helps at small ``eps d``."""
        loss = self.problem.loss
        a = self.verify(self.assemble(x, [y if ok else on_cheapest_outputs(loss[Im])
                                          for Im, y, ok in zip(self.internal_ids, ys, feasible)]))
        if all(y is None for y, ok in zip(ys, feasible) if not ok):
            return a
        b = self.verify(self.assemble(x, [on_cheapest_outputs(loss[Im]) if y is None else y
                                          for Im, y in zip(self.internal_ids, ys)]))
        return min(a, b, key=lambda candidate: candidate[0])


def _warn_if_the_master_is_the_pmo(problem: PMOProblem, master: MasterSpec, n_boundary: int, n_init: int,
                                   options: RecordOptions) -> None:
    """A warning when the master holds nearly all of the PMO's mDP rows (subsets small next to eta, or
    a dense mDP graph): its solves are then nearly the whole LP's."""
    n_master_mdp = master.rows.n_rows - n_init - n_boundary
    n_mdp = problem.lp_edges[0].size * problem.K
    if n_master_mdp >= options.master_warn_rows and n_master_mdp >= options.master_warn_share * n_mdp:
        logger.warning(f"bd: {n_boundary:,} of {problem.n:,} records are boundary records, and Qiu's master holds "
                       f"{100.0 * n_master_mdp / n_mdp:.0f} % of the PMO's mDP rows ({n_master_mdp:,} rows): its solves "
                       "are nearly the whole LP's (the subsets are small next to eta, or the mDP graph is dense); "
                       "the column decomposition is usually far faster")


def solve_records(problem: PMOProblem, *, partitioner: str = "kmdv", n_subsets: int = 25, gap: float = 1e-4,
                  max_iterations: int = 500, time_limit: float = float("inf"), workers: int = 2, seed: int = 0,
                  initial_cuts: bool = True, partition: Partition | None = None, exact_check: bool = False,
                  progress: Callable[[IterationRecord], None] | None = None,
                  status: Callable[[str], None] | None = None, options: RecordOptions | None = None) -> MechanismResult:
    """Qiu's record BD of the PMO; returns a verified mechanism.

    ``partition`` (else ``partitioner`` into ``n_subsets`` with ``seed``) splits the records;
    ``status`` gets one note, the master's size, before the first iteration (a large master is solved
    for minutes with no iteration to show). The run stops ``no_progress`` when its bounds' pace cannot
    reach ``gap`` in the budget left and ``memory_limit`` when an iteration left too little memory for
    another (:mod:`securelp.solvers.benders.stopping`, ``options.benders``).

    Raises
    ------
    InputError
        ``max_iterations < 1``, ``n_subsets < 1`` or an unknown partitioner (``parameter`` names it).
    VerificationError
        A mechanism failed verification.
    ResourceError
        The decomposition's LPs would not fit in memory.
    """
    if int(max_iterations) < 1:
        raise InputError(f"the iteration cap must be >= 1, got {max_iterations}", parameter="max_iterations")
    require_lp_factors(problem)
    options = options or RecordOptions()
    t0 = time.perf_counter()
    if partition is None:
        partition = partition_records(partitioner, problem.dataset.distance, problem.graph.rows, problem.graph.cols,
                                      n_subsets, coords=problem.dataset.coords, eps=problem.eps, seed=seed)
    t_part = time.perf_counter() - t0
    master, blocks, B, internal_ids, n_init = build_bd_model(problem, partition, initial_cuts=initial_cuts,
                                                             options=options)
    t_build = time.perf_counter() - t0 - t_part
    logger.info("BD: %d boundary records, %d blocks, %d initial cut rows, master %d x %d", B.size, len(blocks), n_init,
                master.rows.n_rows, master.n)
    _warn_if_the_master_is_the_pmo(problem, master, B.size, n_init, options)
    if status is not None:
        status(f"Qiu's master over {B.size:,} boundary records x {problem.K:,} outputs ({master.rows.n_rows:,} rows) "
               f"and {len(blocks)} blocks: first iteration")
    bounds = _UpperBounds(problem, B, internal_ids)
    # a lower bound before any master solve has given one: every record on its cheapest output
    trivial = float(problem.cost.min(axis=1).sum())
    # the first incumbents, both private mechanisms, verified. The engine runs from the exponential
    # mechanism alone: its in-out separation judges cuts against U - L, and the cheapest one's lower U
    # from the start can stall it short of the optimum. The cheapest one is an upper bound at every
    # iteration all the same, and is returned where it is the best.
    t_inc = time.perf_counter()
    em_incumbent = _expmech_incumbent(problem)
    cheap = cheapest_incumbent(problem)
    t_inc = time.perf_counter() - t_inc
    iteration_parts: list[dict[str, float]] = []
    seen = [0.0, 0.0]  # the repair's and the verification's seconds at the last iteration

    def on_iteration(rec: BendersIteration) -> None:
        # the engine's parts of this iteration, with its upper bounds' repair and verification apart
        iteration_parts.append({**rec.parts, "repair": bounds.repair_seconds - seen[0],
                                "verification": bounds.verify_seconds - seen[1]})
        seen[:] = [bounds.repair_seconds, bounds.verify_seconds]
        if progress is not None:
            progress(IterationRecord(rec.iteration, max(rec.lower, trivial), min(rec.upper, cheap[0]), rec.seconds))

    engine = BendersEngine(master, blocks, upper_bound_fn=bounds.upper_bound,
                           repair_upper_bound_fn=bounds.repaired_upper_bound, workers=workers, options=options.benders)
    # the time limit counts from the call: the partition, the model building and the incumbents are part of
    # it. The in-out separation's first core: the exponential mechanism's boundary rows (it is feasible,
    # so every block is feasible there)
    in_out = options.in_out
    core = None if em_incumbent is None or not in_out or not B.size else np.asarray(em_incumbent[1][0])[B].ravel()
    res = engine.run(gap=gap, max_iterations=int(max_iterations), time_limit=time_limit - (time.perf_counter() - t0),
                     progress=on_iteration, incumbent=em_incumbent, core=core, in_out=float(in_out or 0.0))
    parts = {"partition": t_part, "build": t_build, "incumbents": t_inc, **res.details["parts"],
             "repair": bounds.repair_seconds, "verification": bounds.verify_seconds}
    return _result(problem, partition, res, em_incumbent, cheap, trivial, bounds.verified, gap, exact_check,
                   {"partition_seconds": t_part, "build_seconds": t_build, "initial_cut_rows": n_init,
                    "n_blocks": len(blocks), "repaired_upper_bounds": bounds.repaired, "iteration_parts": iteration_parts},
                   t0, parts)


def _result(problem: PMOProblem, partition: Partition, res: BendersResult, em_incumbent: tuple[float, Any] | None,
            cheap: tuple[float, Any], trivial: float, verified: int, gap: float,
            exact_check: bool, details: dict[str, Any], t0: float, parts: dict[str, float]) -> MechanismResult:
    """The run's verified mechanism (the engine's best, or the cheapest incumbent where it is better),
    its bounds (at least the ``trivial`` one), its history and partition; ``parts``: the run's seconds by
    part, to which the final check is added (``final``)."""
    payload = res.best_payload
    if payload is None or cheap[0] < res.upper_bound:  # the engine's upper bound is its payload's loss
        payload = cheap[1]
    X, report, info = payload
    returned_expmech = em_incumbent is not None and payload is em_incumbent[1]
    returned_cheapest = payload is cheap[1]
    t = time.perf_counter()
    if exact_check:
        X, report, info = finalize_mechanism(X, problem, exact=True)
    parts = {**parts, "final": time.perf_counter() - t}
    upper = problem.objective_of(X)
    # the trivial bound stands when the time limit came before the first master solve
    lower = min(max(res.lower_bound, trivial), upper)
    rel_gap = (upper - lower) / max(abs(upper), 1e-300)
    status = "optimal" if rel_gap <= gap else res.status
    history = tuple(IterationRecord(h.iteration, max(h.lower, trivial), min(h.upper, cheap[0]), h.seconds)
                    for h in res.history)
    part = {
        "method": partition.method,
        "decomposition": "records",
        "sizes": partition.sizes,
        "n_boundary": partition.n_boundary,
        "internal_sizes": partition.internal_sizes(),
        "mp_component_sizes": [s // problem.K for s in res.master_component_sizes],
        "labels": partition.labels.tolist(),
        "boundary": partition.boundary.tolist(),
    }
    return MechanismResult(
        method="bd", status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
        rel_gap=rel_gap, iterations=res.iterations, time_s=time.perf_counter() - t0, verification=report,
        history=history, partition=part,
        details={**details, "total_cuts": res.total_cuts, "verified_upper_bounds": verified,
                 "engine_status": res.status,
                 "expmech_incumbent": None if em_incumbent is None else em_incumbent[0],
                 "returned_expmech": returned_expmech, "cheapest_incumbent": cheap[0],
                 "returned_cheapest": returned_cheapest, **res.details, "parts": parts, **info},
    )
