"""The Benders iterations (J. F. Benders 1962; Qiu Sec. 4): master, blocks, cuts, bounds, stopping.

Each iteration solves the master's components (:mod:`~securelp.solvers.benders.master`; the lower
bound is their certified bounds' sum), solves the blocks at a master point in parallel (threads;
HiGHS releases the GIL), adds the cuts that cut off the master's ``(x, theta)``, and turns the
blocks' solutions into a feasible, verified solution through the caller's functions (the upper
bound). With a *core* (a master point where every block is feasible) the blocks are solved
between the master's point and the core (the in-out separation of Ben-Ameur and Neto 2007, as in
Fischetti, Ljubic and Sinnl 2017), and at the master's point itself when no cut, or only weak ones,
came from there. A block on which every HiGHS fallback fails gives no cut that iteration; the run
stops (``numerical_trouble``) only when no block gives one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from securelp.solvers.benders.blocks import Block
from securelp.solvers.benders.cuts import cut_at
from securelp.solvers.benders.highs_calls import TimeUp
from securelp.solvers.benders.master import MasterComponent, master_components
from securelp.solvers.benders.model import BendersIteration, BendersResult, MasterSpec, SubproblemSpec
from securelp.solvers.benders.options import BendersOptions
from securelp.solvers.benders.stopping import (
    gap_closed,
    memory_running_out,
    memory_taken,
    pace_window_for,
    too_slow,
)
from securelp.solvers.errors import SolverError
from securelp.solvers.resources import available_memory

__all__ = ["PARTS", "BendersEngine"]

logger = logging.getLogger(__name__)

INF = np.inf

#: what an iteration's seconds are spent on (:attr:`BendersIteration.parts`, and their totals in the
#: result's ``details["parts"]``): the master's HiGHS runs, its weak-duality certificate and the
#: re-solves that improve it; the blocks' phase as the wall clock saw it (threads in parallel), and
#: summed over the blocks their HiGHS runs, the re-solves for higher cuts and the rest of their cut
#: generation (duals to cuts, bounds passed); adding the cuts to the master; the caller's upper-bound
#: functions (repair and verification)
PARTS = ("master_highs", "master_certificate", "master_recertify", "blocks_wall", "block_highs",
         "block_recertify", "block_cut_generation", "cut_adding", "upper_bounds")

UpperBound = Callable[[np.ndarray, list[np.ndarray]], tuple[float, Any]]
RepairedUpperBound = Callable[[np.ndarray, list[np.ndarray | None], list[bool]], tuple[float, Any]]


class BendersEngine:
    """Benders decomposition of a block-ladder LP (:mod:`securelp.solvers.benders.model`).

    Parameters
    ----------
    master, blocks:
        The problem.
    upper_bound_fn:
        ``f(x, ys) -> (objective, payload)`` turning a master solution and the blocks'
        optimal solutions into a feasible, verified solution; called whenever every block
        is feasible. It may raise to signal a failed verification.
    repair_upper_bound_fn:
        Optional ``f(x, ys, feasible) -> (objective, payload)`` for the other iterations: ``ys``
        holds the feasible blocks' solutions and, for an infeasible block (``feasible[b]`` False),
        its phase-1 solution (``None`` when there is none); the function must repair them into a
        feasible solution. Without it no upper bound is found until an iteration has every block
        feasible.
    workers:
        Threads for the blocks.
    options:
        The engine's tunables (:class:`~securelp.solvers.benders.options.BendersOptions`).
    """

    def __init__(self, master: MasterSpec, blocks: Sequence[SubproblemSpec], *, upper_bound_fn: UpperBound,
                 repair_upper_bound_fn: RepairedUpperBound | None = None, workers: int = 2,
                 options: BendersOptions | None = None) -> None:
        self.master = master
        self.specs = list(blocks)
        self.upper_bound_fn = upper_bound_fn
        self.repair_upper_bound_fn = repair_upper_bound_fn
        self.workers = max(1, int(workers))
        self.options = options or BendersOptions()

    def run(self, *, gap: float = 1e-4, max_iterations: int = 200, time_limit: float = float("inf"),
            progress: Callable[[BendersIteration], None] | None = None, incumbent: tuple[float, Any] | None = None,
            core: np.ndarray | None = None, in_out: float = 0.5) -> BendersResult:
        """Iterate until ``(UB - LB) / |UB| <= gap``, the iteration cap, the time limit, no new cut
        (``stalled``), or a pace too slow for the budget (``no_progress``,
        :func:`~securelp.solvers.benders.stopping.too_slow`; ``options.pace_window`` 0: never).
        ``incumbent``: ``(value, payload)`` of a solution known before the first iteration (the
        caller's, already verified); it is the upper bound until a better one.

        ``core``: a master point at which every block is feasible (the ``x`` of a known feasible
        solution). With it the blocks are solved at ``in_out * x + (1 - in_out) * core`` instead of
        at the master's ``x``, and a cut enters only where it cuts off the master's ``(x, theta)``: a
        feasibility cut found there always does (the cut holds at the core and fails at the point
        between). When no cut enters, or only weak ones (``options.in_out_weak_share``), the core moves
        to that point and the blocks are solved at ``x`` itself, as without a core (a block slow there
        is given up, ``options.at_x_slowest_factor``). Cuts from points nearer the feasible region are
        deeper, and the master's ``x`` stops zig-zagging across the feasibility boundary.

        Raises
        ------
        SolverError
            Master variables outside ``[0, finite upper]``, or a block with no link to the master
            that is infeasible on its own.
        """
        t0 = time.perf_counter()
        if np.any(self.master.lower != 0) or not np.all(np.isfinite(self.master.upper)):
            raise SolverError("the Benders engine needs master variables in [0, finite upper]")
        state = _Run(self, t0, gap, int(max_iterations), time_limit, progress, incumbent, core, float(in_out))
        try:
            for it in range(1, int(max_iterations) + 1):
                if state.iteration(it):
                    break
        except BaseException:
            # an interrupt (or an error) while blocks are solved: do not wait for their HiGHS calls
            # (up to about a minute each on large blocks); the CLI ends the process if they hold its exit
            if state.pool is not None:
                state.pool.shutdown(wait=False, cancel_futures=True)
                state.pool = None
            raise
        finally:
            if state.pool is not None:
                state.pool.shutdown(wait=True)
        return state.result()


@dataclass
class _Separation:
    """Where an iteration solved its blocks and what came of it: the point between the master's and
    the core (``x_sep``, None without a core), the point the results are at (``x_eval``), the results
    there and at ``x_sep`` when both were solved, the cuts counted, and whether the core moved."""

    x_sep: np.ndarray | None
    x_eval: np.ndarray
    results: list[dict[str, Any]]
    sep_results: list[dict[str, Any]] | None = None
    n_opt: int = 0
    n_feas: int = 0
    n_failed: int = 0
    core_moved: bool = False


class _Run:
    """One :meth:`BendersEngine.run`: its blocks, master components, bounds and counters."""

    def __init__(self, engine: BendersEngine, t0: float, gap: float, max_iterations: int, time_limit: float,
                 progress: Callable[[BendersIteration], None] | None, incumbent: tuple[float, Any] | None,
                 core: np.ndarray | None, in_out: float) -> None:
        self.engine, self.options = engine, engine.options
        self.t0, self.gap, self.max_iterations, self.time_limit = t0, gap, max_iterations, time_limit
        self.progress, self.core, self.in_out = progress, core, in_out
        # the time limit also holds inside an iteration: every HiGHS solve gets the time left
        self.deadline = t0 + time_limit
        self._set_up_blocks()
        self._set_up_master()
        self.history: list[BendersIteration] = []
        self.lower, self.upper = -INF, INF
        self.best_payload: Any = None
        if incumbent is not None:
            self.upper, self.best_payload = incumbent
        self.status = "iteration_limit"
        self.total_cuts = 0
        self.master_seconds = 0.0
        self.ub_seconds = 0.0
        self.blocks_wall = 0.0  # in solve_blocks, by the wall clock
        self.cuts_wall = 0.0  # in add_cuts
        self.error_text = ""
        self.failed_solves = 0
        self.pool = ThreadPoolExecutor(max_workers=engine.workers) if engine.workers > 1 else None
        self.patience_from = 0  # the in-out separation's patience counts from this iteration
        self.slowest = 0.0  # the longest block solve so far (a solve at the master's point is capped by it)
        self.cut_gain = 0.0  # what the last add_cuts' optimality cuts cut off the thetas by, in all
        self.memory_at_start = self.memory_before = available_memory()
        self.parts_before = self.parts()

    def _set_up_blocks(self) -> None:
        """The blocks; those with no link to the master are solved once, without the deadline
        (every solution needs them)."""
        engine = self.engine
        self.blocks = [Block(s, engine.master.upper, self.options) for s in engine.specs]
        self.x_all = np.zeros(engine.master.n)
        self.const = 0.0
        self.fixed_y: dict[int, np.ndarray] = {}
        self.linked_ids: list[int] = []
        for b, blk in enumerate(self.blocks):
            if blk.spec.linked.var.size == 0:
                res = blk.solve(self.x_all)
                if not res["feasible"]:
                    raise SolverError(f"block {blk.spec.name} is infeasible on its own; the problem is infeasible")
                self.const += res["value"]
                self.fixed_y[b] = res["y"]
            else:
                self.linked_ids.append(b)
                blk.deadline = self.deadline
                blk.recertify_shortfall = self.options.recertify_share * self.gap

    def _set_up_master(self) -> None:
        """The master's independent components, each with its linked blocks' thetas."""
        engine, linked = self.engine, set(self.linked_ids)
        self.comps: list[MasterComponent] = []
        for xvars, row_ids, bl in master_components(engine.master, engine.specs):
            bl = [b for b in bl if b in linked]
            comp = MasterComponent(engine.master, xvars, row_ids, bl, [self.blocks[b].spec.theta_lower for b in bl],
                                   self.options)
            comp.deadline = self.deadline
            comp.recertify_shortfall = self.options.recertify_share * self.gap
            self.comps.append(comp)
        self.comp_of_block = {b: ci for ci, c in enumerate(self.comps) for b in c.blocks}
        logger.info("Benders: %d master components (sizes %s), %d linked blocks, %d independent",
                    len(self.comps), sorted((c.n_x for c in self.comps), reverse=True)[:10], len(self.linked_ids),
                    len(self.fixed_y))

    # -- block solves and cuts

    def repaired(self, by_id: dict[int, dict[str, Any]], x: np.ndarray) -> tuple[float, Any]:
        """The repair function on the master point ``x`` the blocks were solved at and their
        solutions (``by_id``: this iteration's results of the linked blocks, empty when it was
        cut short)."""
        n = len(self.blocks)
        ys = [self.fixed_y[b] if b in self.fixed_y else by_id.get(b, {}).get("y") for b in range(n)]
        feasible = [b in self.fixed_y or bool(by_id.get(b, {}).get("feasible")) for b in range(n)]
        return self.engine.repair_upper_bound_fn(x.copy(), ys, feasible)

    def solve_one(self, b: int, x: np.ndarray, cap: float | None) -> dict[str, Any]:
        """Block ``b`` at ``x``; with ``cap`` (seconds) a block that takes longer is given up (no cut)."""
        blk = self.blocks[b]
        t = time.perf_counter()
        if cap is not None:
            blk.deadline = min(self.deadline, t + cap)
        try:
            res = blk.solve(x)
        except TimeUp:
            if cap is None or time.perf_counter() >= self.deadline:
                raise
            logger.info("Benders: block %s at the master's point given up after %.0f s", blk.spec.name, cap)
            return {"feasible": False, "failed": f"block {blk.spec.name} given up after {cap:.0f} s",
                    "capped": True, "y": None}
        finally:
            blk.deadline = self.deadline
        self.slowest = max(self.slowest, time.perf_counter() - t)
        return res

    def solve_blocks(self, x: np.ndarray, capped: bool = False) -> list[dict[str, Any]]:
        """Every linked block at ``x`` (``capped``: at the master's point, each capped)."""
        cap = max(self.options.at_x_min_seconds, self.options.at_x_slowest_factor * self.slowest) if capped else None
        t = time.perf_counter()
        try:
            if self.pool is not None:
                return list(self.pool.map(lambda b: self.solve_one(b, x, cap), self.linked_ids))
            return [self.solve_one(b, x, cap) for b in self.linked_ids]
        finally:
            self.blocks_wall += time.perf_counter() - t

    def parts(self) -> dict[str, float]:
        """The seconds spent so far by part (:data:`PARTS`)."""
        comps, blocks = self.comps, self.blocks
        block_highs = sum(b.highs_seconds for b in blocks)
        block_recertify = sum(b.recertify_seconds for b in blocks)
        return {"master_highs": sum(c.highs_seconds for c in comps),
                "master_certificate": sum(c.certificate_seconds for c in comps),
                "master_recertify": sum(c.recertify_seconds for c in comps),
                "blocks_wall": self.blocks_wall, "block_highs": block_highs, "block_recertify": block_recertify,
                "block_cut_generation": max(0.0, sum(b.solve_seconds for b in blocks) - block_highs - block_recertify),
                "cut_adding": self.cuts_wall, "upper_bounds": self.ub_seconds}

    def add_cuts(self, it: int, results: list[dict[str, Any]], thetas: dict[int, float]) -> tuple[int, int, int]:
        """Add the cuts of ``results`` that cut off the master's ``(x, theta)``; returns the
        numbers of optimality cuts, feasibility cuts and failed blocks (:attr:`cut_gain`: the sum of
        the optimality cuts' violations)."""
        t = time.perf_counter()
        try:
            return self._add_cuts(it, results, thetas)
        finally:
            self.cuts_wall += time.perf_counter() - t

    def _add_cuts(self, it: int, results: list[dict[str, Any]], thetas: dict[int, float]) -> tuple[int, int, int]:
        n_opt = n_feas = n_failed = 0
        self.cut_gain = 0.0
        for b, res in zip(self.linked_ids, results):
            comp = self.comps[self.comp_of_block[b]]
            if res.get("failed"):
                n_failed += 1
                self.error_text = res["failed"]
                (logger.info if res.get("capped") else logger.warning)(
                    "Benders iteration %d: no cut from block %s: %s", it, self.blocks[b].spec.name, res["failed"])
                continue
            at = cut_at(res["alpha"], res["vars"], res["beta"], self.x_all)
            if res["feasible"]:
                if at > thetas[b] + 1e-12 + 1e-9 * abs(at):
                    comp.add_cut(b, res["alpha"], res["vars"], res["beta"], violation=at - thetas[b])
                    self.cut_gain += at - thetas[b]
                    n_opt += 1
            elif self.core is None or at > 0.0:
                comp.add_cut(None, res["alpha"], res["vars"], res["beta"], violation=at)
                n_feas += 1
        return n_opt, n_feas, n_failed

    def record(self, rec: BendersIteration) -> None:
        """Append ``rec``, with the seconds spent since the last one by part, to the history and report it."""
        now = self.parts()
        rec = replace(rec, parts={k: now[k] - self.parts_before[k] for k in PARTS})
        self.parts_before = now
        self.history.append(rec)
        if self.progress is not None:
            self.progress(rec)

    # -- one iteration

    def iteration(self, it: int) -> bool:
        """Iteration ``it``; True when the run stops (:attr:`status` says why)."""
        sep = self._master_and_blocks(it)
        if sep is None:
            return True
        thetas, sep = sep
        sep.n_opt, sep.n_feas, sep.n_failed = self.add_cuts(it, sep.results, thetas)
        if not self._at_masters_point(it, thetas, sep):
            return True
        self.total_cuts += sep.n_opt + sep.n_feas
        self.failed_solves += sep.n_failed
        self._upper_bounds(sep)
        elapsed = time.perf_counter() - self.t0
        self.record(BendersIteration(it, self.lower, self.upper, elapsed, sep.n_opt, sep.n_feas, sep.n_failed))
        return self._stops(it, sep, elapsed)

    def _time_up(self, it: int, exc: TimeUp) -> None:
        logger.info("Benders: time limit reached at iteration %d (in %s)", it, exc)
        self.status = "time_limit"

    def _master_and_blocks(self, it: int) -> tuple[dict[int, float], _Separation] | None:
        """The master's components, then the blocks at the separation point; ``None`` when the run
        stops here (HiGHS failed, or the time limit inside the iteration: the bounds so far stand,
        and without any upper bound yet the master's point is repaired once)."""
        tm = time.perf_counter()
        lb_it = self.const
        thetas: dict[int, float] = {}
        try:
            for comp in self.comps:
                obj, xv, th = comp.solve()
                lb_it += obj
                self.x_all[comp.xvars] = xv
                thetas.update(th)
            self.master_seconds += time.perf_counter() - tm
            self.lower = max(self.lower, lb_it)
            return thetas, self._separate(it)
        except SolverError as exc:
            logger.warning("Benders stopped at iteration %d: %s", it, exc)
            self.status = "numerical_trouble"
            self.error_text = str(exc)
        except TimeUp as exc:
            self._time_up(it, exc)
            if not np.isfinite(self.upper) and self.engine.repair_upper_bound_fn is not None:
                tu = time.perf_counter()
                self.upper, self.best_payload = self.repaired({}, self.x_all)
                self.ub_seconds += time.perf_counter() - tu
            self.record(BendersIteration(it, self.lower, self.upper, time.perf_counter() - self.t0, 0, 0, 0))
        return None

    def _separate(self, it: int) -> _Separation:
        """The blocks between the master's point and the core, or at the master's point itself when
        the lower bound has not risen for ``options.in_out_patience`` iterations (a converged master's
        point gives the upper bound that closes the gap) or there is no core."""
        patience = self.options.in_out_patience
        lower_then = self.history[-patience].lower if len(self.history) >= patience else -INF
        stuck = (self.lower <= lower_then + 1e-12 * abs(self.lower)
                 and len(self.history) >= self.patience_from + patience)
        x_sep = None if self.core is None else self.in_out * self.x_all + (1.0 - self.in_out) * self.core
        x_eval = self.x_all if x_sep is None or stuck else x_sep
        try:
            results = self.solve_blocks(x_eval)
        except SolverError as exc:
            if x_sep is None or x_eval is x_sep:
                raise
            # HiGHS failed at the master's point (the blocks' feasibility boundary): between it and
            # the core instead, and the master's point is not tried again for a while
            logger.info("Benders iteration %d: at the master's point %s; between it and the core", it, exc)
            self.patience_from = len(self.history)
            x_eval = x_sep
            results = self.solve_blocks(x_eval)
        return _Separation(x_sep, x_eval, results)

    def _at_masters_point(self, it: int, thetas: dict[int, float], sep: _Separation) -> bool:
        """When nothing (or only weak cuts) cut off the master's point from the point between it and
        the core, the core moves there and the blocks are solved at the master's point itself (where it
        failed lately only the core moves). False when the time limit came meanwhile."""
        weak = (sep.n_feas == 0 and np.isfinite(self.upper) and np.isfinite(self.lower)
                and self.cut_gain < self.options.in_out_weak_share * (self.upper - self.lower))
        if not (sep.x_sep is not None and (sep.n_opt + sep.n_feas == 0 or weak) and sep.x_eval is sep.x_sep):
            return True
        self.core, sep.core_moved = sep.x_sep, True
        patience = self.options.in_out_patience
        try:
            at_x = self.solve_blocks(self.x_all, capped=True) if len(self.history) >= self.patience_from else None
            gave_up = at_x is not None and any(r.get("capped") for r in at_x)
            if gave_up:
                self.patience_from = len(self.history) + patience
        except SolverError as exc:
            # the next iteration separates between the master's point and the moved core
            logger.info("Benders iteration %d: at the master's point %s", it, exc)
            self.patience_from = len(self.history) + patience
            return True
        except TimeUp as exc:
            self._time_up(it, exc)
            self.record(BendersIteration(it, self.lower, self.upper, time.perf_counter() - self.t0, 0, 0, 0))
            return False
        if at_x is not None:
            n_opt0, n_feas0 = sep.n_opt, sep.n_feas
            sep.sep_results, sep.x_eval, sep.results = sep.results, self.x_all, at_x
            sep.n_opt, sep.n_feas, sep.n_failed = self.add_cuts(it, at_x, thetas)
            sep.n_opt, sep.n_feas = sep.n_opt + n_opt0, sep.n_feas + n_feas0
            if sep.n_opt + sep.n_feas == 0 and gave_up:
                # a block given up at the master's point and no cut from the others: the next
                # iteration separates between it and the moved core (the upper bound comes from
                # the solutions there)
                sep.x_eval, sep.results = sep.x_sep, sep.sep_results
        return True

    def _upper_bounds(self, sep: _Separation) -> None:
        """Upper bounds from the blocks' solutions where they were solved, and from those at the point
        between when the blocks were then solved at the master's point too (all feasible there, their
        assembly is a solution); where the blocks were solved between the master's point and the core,
        also the master's own point repaired without block solutions."""
        engine = self.engine
        points = [(sep.x_eval, sep.results)]
        if sep.x_eval is self.x_all and sep.sep_results is not None and sep.x_sep is not None:
            points.append((sep.x_sep, sep.sep_results))
        candidates: list[tuple[float, Any]] = []
        tu = time.perf_counter()
        for xp, res in points:
            by_id = dict(zip(self.linked_ids, res))
            if all(r["feasible"] for r in res):
                ys = [self.fixed_y[b] if b in self.fixed_y else by_id[b]["y"] for b in range(len(self.blocks))]
                candidates.append(engine.upper_bound_fn(xp.copy(), ys))
            elif engine.repair_upper_bound_fn is not None:
                candidates.append(self.repaired(by_id, xp))
        if sep.x_eval is not self.x_all and engine.repair_upper_bound_fn is not None:
            candidates.append(self.repaired({}, self.x_all))
        self.ub_seconds += time.perf_counter() - tu
        for ub_val, payload in candidates:
            if ub_val < self.upper:
                self.upper, self.best_payload = ub_val, payload

    def _stops(self, it: int, sep: _Separation, elapsed: float) -> bool:
        """Whether the run stops after this iteration: the gap, no cut, the time limit, memory, pace."""
        rel = (self.upper - self.lower) / max(abs(self.upper), 1e-300) if np.isfinite(self.upper) else INF
        if rel <= self.gap:
            self.status = "optimal"
            return True
        if sep.n_opt + sep.n_feas == 0 and not (sep.core_moved and sep.x_eval is sep.x_sep):
            self.status = "numerical_trouble" if sep.n_failed else "stalled"
            return True
        if elapsed > self.time_limit:
            self.status = "time_limit"
            return True
        memory_after = available_memory()
        if memory_running_out(self.memory_before, memory_after, self.memory_at_start, self.options):
            logger.warning("Benders: stopping at iteration %d: %.1f GiB of memory left, and the iteration took %.1f "
                           "GiB", it, memory_after / 2**30,
                           memory_taken(self.memory_before, memory_after) / 2**30)
            self.status = "memory_limit"
            return True
        self.memory_before = memory_after
        o = self.options
        if too_slow(self.history, o.pace_window, self.gap, self.max_iterations, self.time_limit, o.pace_min_seconds):
            w = pace_window_for(self.history, o.pace_window, o.pace_min_seconds)  # what too_slow judged
            logger.info("Benders: the last %d iterations closed %.3g of the gap %.3g; at that pace the budget left "
                        "would not reach the target", w, gap_closed(self.history, w), self.upper - self.lower)
            self.status = "no_progress"
            return True
        return False

    def result(self) -> BendersResult:
        rel_gap = (self.upper - self.lower) / max(abs(self.upper), 1e-300) if np.isfinite(self.upper) else INF
        comps, blocks = self.comps, self.blocks
        return BendersResult(
            status=self.status, lower_bound=self.lower, upper_bound=self.upper, rel_gap=rel_gap,
            iterations=len(self.history), history=tuple(self.history), best_payload=self.best_payload,
            n_master_components=len(comps),
            master_component_sizes=tuple(sorted((int(c.n_x) for c in comps), reverse=True)),
            total_cuts=self.total_cuts,
            details={"master_seconds": self.master_seconds, "block_seconds": sum(b.solve_seconds for b in blocks),
                     "upper_bound_seconds": self.ub_seconds, "n_blocks": len(blocks),
                     "n_independent_blocks": len(self.fixed_y), "failed_block_solves": self.failed_solves,
                     "error": self.error_text, "parts": self.parts(),
                     # copies re-solved with scaled costs for a better certificate or cut (cuts.recertify)
                     "recertify_solves": sum(c.recertify_solves for c in comps) + sum(b.recertify_solves for b in blocks)},
        )
