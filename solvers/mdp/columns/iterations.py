"""The column generation's iterations on one component: master, pricing, bounds, stabilisation, stopping.

Each iteration solves the restricted master under its dual box, prices the outputs worth pricing at
the box's or the master's duals (only outputs in use in the master, or that just entered, until none
of those enters: a certified stop needs a full round), adds the columns of negative reduced cost, and
raises the certified bound (the better of the two Lagrangian bounds of
:mod:`~securelp.solvers.mdp.columns.bounds`, over all iterations). The box's centre is the duals of the
best Lagrangian bound; it moves when the bound improves, widens when nothing enters while it binds, and
is dropped when the certificates found at boxed duals stay weak. The upper bound is the master's
mechanism solved without the box, repaired and verified (every fifth iteration and at the end); a
first-order or IPM start's repaired primal is checked before the first master solve and ends the
component at once when it is within the gap of the start's bound.

Equivalence with Benders: this is Benders decomposition of the PMO's dual, whose complicating
variables are the unit-row duals ``mu``; a pricing solution ``r`` is a Benders feasibility cut
``mu' r <= g_k' r``, and the Benders master ``max {1' mu : collected cuts}`` is the LP dual of the
restricted master.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.master import PRIMAL_SIMPLEX, OutOfTime

__all__ = ["run_component"]

logger = logging.getLogger(__name__)

Rows = tuple[np.ndarray, float, float, str, int]


def run_component(cg: ComponentCG, deadline: float, max_iterations: int, on_iter: Callable[[float, float], None],
                  centre: np.ndarray | None = None, trust_centre: bool = False) -> Rows:
    """Iterate on ``cg`` until the gap, ``max_iterations``, a stall or ``deadline``; returns ``(rows m x K
    verified, lower, upper, status, iterations)``. ``on_iter`` gets the component's bounds after every
    iteration.

    ``centre``: unit-row duals to start the stabilisation from (e.g. a PDLP start's); kept only when
    their bound from the stored certificates beats the trivial centre's, or always with
    ``trust_centre`` (the IPM start's: near-optimal duals whose stored certificates are weak only on the
    outputs it did not solve for, which the first round prices at the centre).

    Raises
    ------
    SolverError
        A master or a pricing LP that no fallback solves.
    """
    return _Loop(cg, deadline, on_iter, centre, trust_centre).run(max_iterations)


class _Loop:
    """The state of :func:`run_component`: the stability centre ``mu_c`` and its bound, the box, the
    bounds and rows so far, and the pricing's mode (partial or full)."""

    def __init__(self, cg: ComponentCG, deadline: float, on_iter: Callable[[float, float], None],
                 centre: np.ndarray | None, trust_centre: bool) -> None:
        self.cg, self.deadline, self.on_iter = cg, deadline, on_iter
        # first stability centre: mu0_i = p_i min_k c_ik, where every reduced cost g_k - mu0 is >= 0, so
        # L(mu0) = sum mu0 exactly (the trivial bound)
        self.mu_c: np.ndarray = cg.G.min(axis=1)
        self.best_lb = float(self.mu_c.sum())
        self.price_centre = False  # first round: price every output at the given centre (its exact bound)
        if centre is not None:
            lb_centre = float(centre.sum() + cg.open_shares(centre).sum())
            if lb_centre > self.best_lb or trust_centre:
                self.mu_c, self.best_lb = np.array(centre, dtype=float), lb_centre
                self.price_centre = True
        # the best certified lower bound (either Lagrangian bound; the stored certificates may come from a
        # start, and pricing replaces them output by output)
        self.best_bound = max(self.best_lb, cg.certs.mdp_rows_bound())
        self.upper, self.rows = np.inf, None
        self.status = "iteration_limit"
        self.full = False  # partial pricing first: only outputs in use in the RMP or just entered
        self.recent = np.zeros(0, dtype=np.int64)
        self.box_center: np.ndarray | None = None
        self.width = 0.0
        self.it = 0
        cg.deadline = deadline

    def run(self, max_iterations: int) -> Rows:
        cg = self.cg
        if cg.start_rows is not None and time.perf_counter() < cg.finish_by(self.deadline):
            done = self._start_within_gap()
            if done is not None:
                return done
        try:
            if cg.master.boxstep:
                self._first_master()
            cg.master.h.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX)  # warm re-solves from here on
            for it in range(1, max_iterations + 1):
                self.it = it
                if self._iteration(it == max_iterations):
                    break
            if self.rows is None:
                self.rows, self.upper = cg.unboxed_rows(self.box_center, self.width)
        except OutOfTime:
            # the deadline passed inside a master solve: the best verified rows so far, else a fallback;
            # every bound stays valid (it comes from the stored pricing certificates)
            logger.info("component of %d records: a master solve reached the time limit", cg.m)
            self.status = "time_limit"
            if self.rows is None:
                self.rows, self.upper = cg.fallback_rows()
        return self.rows, min(self.best_bound, self.upper), self.upper, self.status, self.it

    def _start_within_gap(self) -> Rows | None:
        """A start's repaired primal (the IPM's last round, PDLP's iterate) is an upper bound of its own:
        when it already closes the gap on the start's bound, no master is solved at all."""
        cg = self.cg
        self.rows, self.upper = cg.verify_rows(cg.start_rows)
        cg.start_gap = (self.upper - self.best_bound) / max(abs(self.upper), 1e-300)
        logger.info("component of %d records: the start's repaired rows, loss %.10g, are %.3g above its bound",
                    cg.m, self.upper, cg.start_gap)
        self.on_iter(min(self.best_bound, self.upper), self.upper)
        if cg.start_gap <= cg.gap:
            return self.rows, min(self.best_bound, self.upper), self.upper, "optimal", 0
        return None

    def _first_master(self) -> None:
        """The master without the box first: a restriction of the PMO, so its mechanism is an upper
        bound at once (kept when a later master solve reaches the time limit); then the box, of the
        average unit-row dual's width (of the gap spread over the records around a start's duals)."""
        cg = self.cg
        _, obj0, lam0 = cg.master.solve(cg.stop_at())
        self.rows, self.upper = cg.verified_rows(lam0)
        self.width = max(abs(obj0), 1e-300) / cg.m  # the average unit-row dual
        if self.price_centre:
            self.width = min(self.width, max(obj0 - max(self.best_lb, self.best_bound), 1e-9 * abs(obj0)) / cg.m)
        self.box_center = self.mu_c.copy()
        cg.master.set_box(self.box_center, self.width)

    def _price(self, mu_s: np.ndarray, mu_r: np.ndarray, lam: np.ndarray, tau: float, price_tol: float
               ) -> tuple[np.ndarray, list[int], list[np.ndarray], bool, int]:
        """Price at ``mu_s`` the outputs worth it (open share below ``-tau``; in partial mode only those in
        use in the master or just entered); the columns of negative reduced cost at the master's duals
        ``mu_r``. Returns the open shares after, the columns, whether the time was up and how many
        outputs were to be priced."""
        cg = self.cg
        cheap = cg.open_shares(mu_s)
        candidates = cheap < -tau
        if not self.full:
            in_use = np.zeros(cg.Kc, dtype=bool)
            in_use[np.asarray(cg.master.col_owner, dtype=np.int64)[lam > 0]] = True
            in_use[self.recent] = True
            candidates &= in_use
        js = np.flatnonzero(candidates)
        js = js[np.argsort(cheap[js])]
        out_of_time = time.perf_counter() > cg.finish_by(self.deadline)
        new_k: list[int] = []
        new_v: list[np.ndarray] = []
        if js.size and not out_of_time:
            for j, z in cg.pricer.price(js, mu_s, price_tol, cg.finish_by(self.deadline), transport=True):
                if z is None or z.sum() <= 0:
                    continue
                rc = float((cg.G[:, j] - mu_r) @ z)
                if rc < -1e-3 * tau * max(1.0, float(z.max())) and rc < -cg.master.enter_tol * float(z.sum()):
                    new_k.append(j)
                    new_v.append(z / z.sum())
            cheap = cg.open_shares(mu_s)
        return cheap, new_k, new_v, out_of_time, (js.size if not out_of_time else 0)

    def _iteration(self, last: bool) -> bool:
        """One iteration; True when the loop stops (:attr:`status` says why)."""
        cg = self.cg
        mu_r, obj_r, lam, self.box_center, self.width = cg.master.solve_in_box(self.box_center, self.width,
                                                                              cg.stop_at())
        binding = self.box_center is not None and cg.master.box_binding()
        lam = cg.master.retire_columns(lam)
        scale = max(abs(obj_r), abs(self.upper) if np.isfinite(self.upper) else 0.0, 1e-300)
        tau, price_tol = cg.tolerances(scale)
        at_centre = self.price_centre  # the first round prices every output at the given centre
        mu_s = self.mu_c if at_centre else mu_r
        if at_centre:
            self.full, self.price_centre = True, False
        cheap, new_k, new_v, out_of_time, n_priced = self._price(mu_s, mu_r, lam, tau, price_tol)
        lb = float(mu_s.sum() + cheap.sum())
        # the Lagrangian bound that relaxes the mDP rows instead: never below lb, and it needs no mu
        lb_y = cg.certs.mdp_rows_bound()
        self.best_bound = max(self.best_bound, lb, lb_y)
        logger.debug("colgen it %d: rmp %.10g, lb(mu_s) %.10g, lb(y) %.10g, at centre %s, box %s %.3g, %s pricing %d, "
                     "entered %d, columns %d", self.it, obj_r, lb, lb_y, at_centre, binding, self.width,
                     "full" if self.full else "partial", n_priced, len(new_k), len(cg.master.col_owner))
        if lb > self.best_lb:
            self.best_lb, self.mu_c = lb, mu_s.copy()
            if self.box_center is not None:
                self.box_center = self.mu_c.copy()
                cg.master.set_box(self.box_center, self.width)
        converged = not new_k and not at_centre and self.full and not binding
        near = (obj_r - self.best_bound) / scale <= cg.gap and not binding
        out_of_time = out_of_time or time.perf_counter() > cg.finish_by(self.deadline)
        stop_now = near or converged or out_of_time or last
        # every 5th iteration the upper bound is refreshed, unless that would eat the time the end needs
        if stop_now or (self.it % 5 == 0 and time.perf_counter() + cg.rows_seconds < cg.finish_by(self.deadline)):
            X, ub = cg.unboxed_rows(self.box_center, self.width, None if binding else lam)
            if ub < self.upper:
                self.upper, self.rows = ub, X
        self.on_iter(self.best_bound, self.upper)
        if np.isfinite(self.upper) and (self.upper - self.best_bound) / max(abs(self.upper), 1e-300) <= cg.gap:
            self.status = "optimal"
            return True
        if out_of_time:
            self.status = "time_limit"
            return True
        return self._after(converged, binding, at_centre, new_k, new_v)

    def _after(self, converged: bool, binding: bool, at_centre: bool, new_k: list[int],
               new_v: list[np.ndarray]) -> bool:
        """What follows an iteration that did not close the gap; True when the loop stops (stalled)."""
        cg = self.cg
        if converged and self.box_center is not None:
            # no column at the RMP's own duals but the gap is open: the certificates found at boxed duals
            # were weak; drop the box and go on unstabilised
            cg.master.set_box(None, 0.0)
            self.box_center = None
            cg.master.boxstep = False
            return False
        if converged and cg.master.tol > cg.options.stall_tolerance:
            # nothing enters at the RMP's duals, yet the bound there is short of the gap: at a loose
            # tolerance the many outputs whose columns price just above the entering threshold add up
            # (up to outputs x records x the threshold); tighten and go on
            cg.master.tighten()
            return False
        if converged:
            self.status = "stalled"
            return True
        if not new_k:
            if at_centre:
                pass  # the next round prices at the RMP's own duals
            elif not self.full:
                self.full = True  # nothing more among the outputs in use: price every output
            elif binding and self.box_center is not None:
                self.width *= 4.0  # no column at the box's optimum: widen the box
                cg.master.set_box(self.box_center, self.width)
            return False
        self.full = False
        self.recent = np.asarray(sorted(set(new_k)), dtype=np.int64)
        cg.master.add_columns(new_k, new_v)
        return False
