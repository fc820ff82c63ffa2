"""Decomposition of the PMO by output column (Dantzig-Wolfe / column generation) -- beyond Qiu.

The mDP rows of the PMO (Qiu Eq. 5) couple records only *within one output column k* and
only *within one connected component* of the mDP graph; the unit-measure rows (Eq. 6) couple
the columns, but only record by record. So the PMO splits exactly into one LP per component
``S`` (its records, all K outputs), and each of those is

    min sum_k g_k' z_k   s.t.  sum_k z_k = 1 (per record of S),  z_k in C_S  (every k),

with ``g_k = p * c[:, k]`` restricted to ``S`` and ``C_S = {z >= 0 : z_i <= exp(eps d_ij) z_j,
i ~ j in S}`` a polyhedral cone, the same for every column.

* Singleton components are solved in closed form (all mass on ``argmin_k c_ik``).
* Dominated outputs are dropped per component: if ``g_k' <= g_k`` on ``S`` (entrywise), moving
  column ``k``'s mass to ``k'`` keeps every constraint (``C_S`` is a convex cone) and does not
  raise the loss, so some optimum has ``z_k = 0`` on ``S``. More generally (stop 29) when
  ``g_k' <= g_k + A'y`` for some ``y >= 0`` on ``S`` (dominance in the cone's dual order, found by a
  lossy transport, :func:`securelp.solvers.mdp.transport.cone_dominated`): gaussian 1,000 and 2,000 lose
  about 60 % of their outputs this way.
* Dantzig-Wolfe: ``z_k = sum_r lambda_kr r`` over points ``r`` of ``C_S`` found so far (the
  restricted master, RMP, has one row per record). Pricing output ``k`` at duals ``mu`` is the
  LP ``v_k(mu) = min {(g_k - mu)' z : z in C_S, 0 <= z <= 1}`` (the box is valid: every entry
  of a mechanism is in [0, 1]). One warm HiGHS model per worker thread, and each output's last
  optimal basis is kept and restored before its next pricing.
* Lower bound (Lagrangian, relaxing the unit rows): for *any* ``mu``,
  ``OPT_S >= sum_i mu_i + sum_k v_k(mu)``, and for any ``y >= 0`` (duals of the mDP rows)
  ``v_k(mu) >= sum_i min(0, (g_k + A'y - mu)_i)`` by weak duality over the box. We evaluate
  the bound this way only -- from the pricing LPs' duals, clipped to ``y >= 0`` -- so it does
  not rest on HiGHS's tolerances. The vector ``q_k = g_k + A'y_k`` of each output's last
  pricing is kept: it gives a valid bound at every later ``mu`` for the price of a vector
  subtraction, and only outputs whose stored bound is below ``-tau`` (``tau`` = a 20th of the
  target gap spread over the outputs) are priced again.
* Second lower bound, relaxing the *mDP rows* instead of the unit rows: for ``z_k`` in ``C_S``,
  ``A z_k <= 0``, so ``g_k' z_k >= (g_k + A'y_k)' z_k = q_k' z_k`` for any ``y_k >= 0``, and what is
  left is a product of simplices: ``OPT_S >= sum_i min_k q_ki`` (no ``mu`` in it). For the same
  ``q_k`` it is never below the first bound (``min_k q_ki >= mu_i + sum_k min(0, q_ki - mu_i)``),
  and by LP duality it is tight at an optimal ``y``. The certified bound is the best of both
  over all iterations.
* Pricing order: only outputs in use in the RMP (or that just entered) are priced; every output
  when none of those enters (a certified stop needs such a full round).
* Dual stabilisation, boxstep (du Merle): slack columns ``+e_i`` (cost ``mu_c + D``) and ``-e_i``
  (cost ``-(mu_c - D)``) confine the RMP's duals to a box around the best-bound duals ``mu_c``
  (first centre ``mu0_i = p_i min_k c_ik``, where ``L(mu0) = sum mu0``). The centre moves when the
  bound improves; the box widens when nothing enters while it binds; it is dropped when the
  certificates found at boxed duals stay weak (seen at ``eps d ~ 10``). Optional Wentges
  smoothing prices at ``mu_s = a mu_c + (1 - a) mu_RMP``; on a mis-price (nothing enters) the
  next round prices at the RMP's own duals.
* Upper bound: the RMP's mechanism (solved without the box), repaired and verified on the component (and
  before the first master solve a first-order or IPM start's repaired primal, which ends the component
  at once when it is within the gap of the start's bound); the returned
  full matrix is verified again as a whole, and repaired only if it fails (:func:`securelp.solvers.mdp.pmo.finalize_mechanism`).
  A component stopped short of the gap above the exponential mechanism's loss returns that
  mechanism's rows instead (private on every pair; since stop 46).

Start columns: ``1/|S|`` and ``exp(-eps delta(., a_k))``, each for the output where it costs least (``delta`` the shortest-path
distance in the mDP graph, ``a_k`` the record of ``S`` with the smallest loss for output ``k``),
both points of ``C_S``; at large ``eps d`` they are nearly optimal.

Equivalence with Benders. This is Benders decomposition of the PMO's dual: the dual's
complicating variables are the unit-row duals ``mu``; for fixed ``mu`` the dual splits into one
feasibility problem per output column (``g_k - mu + A'y_k >= 0`` for some ``y_k >= 0``, i.e.
``(g_k - mu)' r >= 0`` for every ray ``r`` of ``C_S``), so a pricing solution ``r`` is a Benders
feasibility cut ``mu' r <= g_k' r``; the Benders master ``max {1' mu : collected cuts}`` is the LP
dual of the RMP, and its solution is the RMP's row duals. So it is offered as ``bd --decomposition columns``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import threading
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from securelp.solvers.errors import InputError, SolverError
from securelp.solvers.lp.highs import TIGHT_TOLERANCE, new_highs, pass_lp, set_time_left
from securelp.solvers.lp.model import LinearProgram
from securelp.solvers.mdp.pmo import (
    IterationRecord,
    MechanismResult,
    PMOProblem,
    _upward_closure,
    finalize_mechanism,
    repair_mechanism,
    require_lp_factors,
)
from securelp.solvers.mdp.rowpool import LazyRows
from securelp.solvers.mdp.transport import (
    TRANSPORT_MAX_RECORDS,
    TransportCertifier,
    cone_dominated,
)
from securelp.solvers.mdp.verify import verify_mechanism
from securelp.solvers.resources import available_memory, memory_shortfall

__all__ = ["FIRST_ORDER_METHODS", "available_memory", "mdp_rows_bound", "mdp_rows_matrix", "pdlp_start", "solve_colgen", "undominated_outputs"]

logger = logging.getLogger(__name__)

_RETRY_LOCK = threading.Lock()

#: :func:`undominated_outputs` screens the candidate dominators of an output on this many rows first
DOMINANCE_PROBE_ROWS = 16

#: components with more than this many records x kept outputs get a first-order start by default
DUAL_ASCENT_MIN_SIZE = 300_000

#: first-order starts: HiGHS's PDLP on the whole component LP, the smoothed mDP-row dual ascent, the
#: ascent followed by PDLP on the outputs it screens (``screened``), the ascent followed by the
#: structured interior-point method on the outputs it screens (``ipm``; not first-order, but a start
#: all the same), or ``auto`` (see :func:`solve_colgen`)
FIRST_ORDER_METHODS = ("auto", "pdlp", "smoothed", "screened", "ipm")

#: ``screened`` start, in three parts: the smoothed ascent, PDLP on the component LP restricted to
#: the outputs its certificate marks as near some record's row minimum (for primal columns only: its
#: duals certify nothing about the other outputs), then the ascent again from where it stopped.
#: Shares of the start budget of the first ascent and of the ascent after PDLP
SCREEN_ASCENT_SHARE = 1.0 / 3.0
SCREEN_RESUME_SHARE = 1.0 / 3.0

#: under a time limit the ``screened`` start gets this share of it; the column generation the rest.
#: Gaussian 1,000 at a 300 s cap, one core each: half the cap (ascent, then PDLP) gap 0.041; 90 % in
#: thirds (ascent, PDLP, ascent again) gap 0.026 (lower 1.0662 -> 1.0809; the column generation's
#: master solves take about a minute each there and its first 150 s had raised the bound by 0.01)
SCREEN_BUDGET_SHARE = 0.9

#: at most this many outputs in the screened PDLP (fewer when memory is short): gaussian 1,000's giant
#: component after 100 s of ascent, PDLP 100 s on 100 / 200 screened outputs: repaired start 1.1269 /
#: 1.1054 (PDLP on all 965 outputs for 200 s: 1.1245; docs/benchmarks/mdp.md, stop 16)
SCREEN_MAX_OUTPUTS = 200

#: at most this many PDLP iterations on the screened outputs (the rest of its time goes to the ascent
#: after it): its repaired iterate got worse with longer runs on gaussian 1,000 (1.1000-1.1120 after
#: 1,783-2,259 iterations, 1.1520 after 4,529, 1.1518 after 6,277; docs/benchmarks/mdp.md, stop 16)
SCREEN_PDLP_ITERATIONS = 2_500

#: softmin temperature of :func:`screen_outputs`, relative to each record's row minimum
SCREEN_TEMPERATURE = 1e-3

#: PDLP's seconds per iteration per nonzero of the component LP (Intel Xeon, 2026-11-24: gaussian
#: 1,000's 23.2 M nonzeros, 349 iterations in 150 s and 1,340 in 496 s: 16-19 ns)
PDLP_SECONDS_PER_NONZERO_ITERATION = 17e-9

#: under a time limit ``auto`` takes the PDLP start (PDLP on the whole LP, the ascent from its duals,
#: PDLP on screened outputs) when its PDLP on the whole LP gets at least this many expected
#: iterations, else the screened start. Gaussian 1,000: 228 expected at a 300 s cap (the PDLP start
#: with half the cap, 127 expected, lost there), 456 at 600 s and 684 at 900 s, where it won
#: (:func:`_choose_start`)
AUTO_PDLP_MIN_ITERATIONS = 300

#: ``auto`` runs the smoothed ascent instead of the screened start when its PDLP would get fewer
#: than this many expected iterations on the screened outputs (stop 15's threshold for PDLP on the
#: whole LP: at a 120 s cap, 2 PDLP iterations after its setup lost to the smoothed start)
SCREEN_MIN_ITERATIONS = 300

#: under a time limit a ``pdlp`` start gets this share of it; the column generation the rest (whose
#: master solves take about a minute each on gaussian 1,000). Gaussian 1,000 at 900 s, side by side:
#: gap 0.0096 with 90 %, 0.0119 with half (docs/benchmarks/mdp.md, stop 17)
PDLP_BUDGET_SHARE = 0.9

#: share of a PDLP start's budget given to :func:`smoothed_dual_ascent` started from PDLP's duals, which
#: raises the bound faster than more PDLP iterations (gaussian 1,000, 300 s: PDLP alone 1.0722,
#: 150 s PDLP + 150 s ascent 1.0855; docs/benchmarks/mdp.md, stop 15)
PDLP_POLISH_SHARE = 0.5

#: share of a PDLP start's budget kept for PDLP on the outputs that the ascent after it screens
#: (:func:`_screened_primal`, for primal columns only), after PDLP and that ascent: PDLP on the whole
#: LP gives the better lower bound, the screened PDLP the better upper bound (gaussian 1,000 at 900 s,
#: side by side: gap 0.011 with this part, 0.017 for the screened start; stop 16's PDLP start
#: without it had 0.031; docs/benchmarks/mdp.md, stop 17)
PDLP_SCREEN_SHARE = 1.0 / 3.0

#: the ascent after PDLP starts with smoothing ``beta`` such that its bias ``m beta log K`` is this
#: fraction of the gap PDLP left (its primal value minus its bound). Gaussian 1,000 after 75 s of PDLP
#: (bound 0.50, primal 1.17), 75 s of ascent: 1.0767 with 0.1, 1.0738 with the ascent's own first
#: smoothing, 0.8603 with a bias of 1e-3 of the bound
POLISH_SMOOTHING = 0.1

#: HiGHS's simplex strategies: the column generation's warm master re-solves run the primal simplex
#: (new columns enter at zero and a moved dual box changes only costs, so the last basis stays primal
#: feasible); the re-solve without the box, whose slacks' bounds close, runs the dual simplex. The
#: first solves keep HiGHS's default (the dual simplex). 300 random 2-D points with every pair a
#: neighbour, idle columns retired: 50.3 s of master solves against 66.1 s with the dual simplex
#: throughout, 38.9 s with the boxed basis put back after the unboxed re-solve (stop 38)
PRIMAL_SIMPLEX = 4
DUAL_SIMPLEX = 1

#: master re-solves after a failed warm and cold one: primal simplex, dual simplex (a fallback that
#: sets what is already set is skipped), HiGHS's default (1e-7) tolerances, 1e-6, the interior-point
#: solver (with crossover)
_MASTER_FALLBACKS = ({"simplex_strategy": PRIMAL_SIMPLEX}, {"simplex_strategy": DUAL_SIMPLEX},
                     {"primal_feasibility_tolerance": 1e-7, "dual_feasibility_tolerance": 1e-7},
                     {"primal_feasibility_tolerance": 1e-6, "dual_feasibility_tolerance": 1e-6}, {"solver": "ipm"})

#: a master solve that every fallback leaves without HiGHS's "Optimal" is still taken when a run ended
#: "Unknown" (never "Unbounded" or "Infeasible": a box can make the master unbounded) with a
#: primal and dual solution with unit-row residuals at most this (HiGHS's max primal infeasibility):
#: seen on gaussian 300 with the columns of a PDLP start on 48 screened outputs, where every run
#: ended "Unknown" with residuals 8e-7 to 8e-5 (near-parallel columns). Safe because the master only
#: steers the pricing and proposes a mechanism that is repaired and verified; no bound comes from it
MASTER_ACCEPT_INFEASIBILITY = 1e-5

#: a priced column enters the master only if its reduced cost, normalised to unit mass, is below minus
#: this many times the master's dual feasibility tolerance (:func:`master_tolerance`). Above that the
#: master's simplex does not pivot it in, the duals stay, and the same column is priced again: with a
#: 1e-7 target gap on gaussian 70 (giant component, screened start) 900 iterations each entered a
#: column of reduced cost -4.3e-11 until the iteration cap (a gap of 1e-2 left); such a column now
#: counts as "nothing entered"
ENTER_FACTOR = 10.0


def master_tolerance(gap: float) -> float:
    """The RMP's primal and dual feasibility tolerance at the relative ``gap`` target: a thousandth of
    it, between :data:`~securelp.solvers.lp.highs.TIGHT_TOLERANCE` (1e-9) and HiGHS's default 1e-7 (reached
    at the default gap 1e-4). The master only steers the pricing and proposes mechanisms that are
    repaired and verified; no bound comes from it, so it needs no more. At 1e-9 the master of
    gaussian 2,000's screened start (1,901 rows, 2,302 dense columns, 4.4 M nonzeros) ran 3,903
    simplex iterations in 150 s without finishing (and 63.5 s more ended 'Unknown' when tightened
    after a 1e-7 solve); at 1e-7 it is optimal in 16-19 s (stop 27, docs/benchmarks/mdp.md)."""
    return float(min(1e-7, max(TIGHT_TOLERANCE, 1e-3 * gap)))


#: when the column generation stalls short of the gap (nothing enters at the RMP's duals) the RMP's
#: tolerances are divided by this, down to :data:`~securelp.solvers.lp.highs.TIGHT_TOLERANCE`, and it goes on.
#: A 90-point 2-D instance (eps 1, eta 0.6) stalled at a gap of 2.8e-4 with the 1e-7 of the default
#: gap (stop 27's looser master) and was certified at 1e-9 (stop 29)
MASTER_TIGHTEN = 100.0

#: the floor of that tightening: HiGHS's smallest feasibility tolerance (it refuses 1e-11). The same
#: instance stalled at 1.06e-6 against a 1e-6 target with the floor at 1e-9 (stop 29) and is
#: certified from 1e-10 (stop 30); at a 1e-7 target too, at 1e-8 it still stalls (3.0e-8)
STALL_TOLERANCE = 1e-10


class _OutOfTime(Exception):
    """A master solve reached the component's deadline (HiGHS's time limit) without a solution."""


#: components of at least this many records report their slow phases to ``solve_colgen``'s ``status``
STATUS_MIN_RECORDS = 200


@contextlib.contextmanager
def _highs_options(h: Any, options: dict[str, Any]) -> Any:
    """Set HiGHS ``options`` on ``h`` for the ``with`` block, then put back the values they had."""
    saved = {key: h.getOptionValue(key)[1] for key in options}
    for key, value in options.items():
        h.setOptionValue(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            h.setOptionValue(key, value)


def _say_nothing(_text: str) -> None:
    """The ``status`` of components too small to report."""


#: a component's iterations stop this many times its longest repair and verification of the rows
#: before the time limit: what runs after them (its last verified rows, then the whole matrix's
#: verification, and its repair should that fail) used to run past it (10,000 records with a 120 s limit: 28 s each, the solve's
#: clock 154 s; stop 35)
FINISH_RESERVE = 2.0

#: widenings (x4) of a dual box under which the master has no solution before the box is dropped
BOX_WIDENINGS = 8

#: the RMP retires a column (deletes it from HiGHS's model) after this many master solves in a row
#: at zero weight and with a reduced cost above the entering threshold (:attr:`_ComponentCG.enter_tol`),
#: once it holds more than :data:`COLUMN_POOL_PER_RECORD` columns per record. A retired column that is
#: needed again is priced again; bounds never come from the master. Each simplex pivot of the RMP
#: prices every column, and its columns are dense: 300 random 2-D points with every pair a neighbour
#: grew to 6,825 columns and spent 131 of 326 s in master solves (stop 38)
COLUMN_IDLE_SOLVES = 10
COLUMN_POOL_PER_RECORD = 4

#: the PDLP start is never run on components below this many records x kept outputs
PDLP_MIN_SIZE = 2_500

#: above this many nonzeros in the whole component LP the smoothed dual ascent replaces PDLP (memory)
PDLP_MAX_NONZEROS = 400_000_000

#: components with at least this many mDP rows per record price their outputs through the pricing
#: LP's dual (one basis row per record instead of one per mDP row; side by side at the same duals,
#: two workers: gaussian 2,000's component, 24.6 rows per record, 2.1x faster; gaussian 1,000's,
#: 12.9, 1.1x)
PRICING_DUAL_MIN_RATIO = 8.0

#: components with at least this many mDP rows per record (dense mDP graphs: the text dataset, points
#: with every pair a neighbour) give their pricing LPs only the rows they need
#: (:mod:`securelp.solvers.mdp.rowpool`); gaussian 2,000's component has 24.6 rows per record, text 500's 499
LAZY_ROWS_MIN_RATIO = 64.0

#: under a time limit, the search for outputs dominated in the cone's dual order
#: (:func:`securelp.solvers.mdp.transport.cone_dominated`) gets at most this share of it per component; the
#: outputs not visited by then are kept (gaussian 2,000: 1,215 of 1,971 outputs removed in 16 s)
DOMINANCE_SHARE = 0.05

#: the smoothed ascent's elementwise work is done by this many chunks of mDP rows (a fixed number, so
#: its sums, and with them its iterates, do not depend on the number of threads), and on threads, when
#: its iterates have at least :data:`ASCENT_PARALLEL_MIN` entries (below, the threads' overhead
#: outweighs the work: the test suite, whose components are small, took 1.35x as long)
ASCENT_CHUNKS = 16
ASCENT_PARALLEL_MIN = 1_000_000

#: the ``ipm`` start: iterations of smoothed ascent that screen the outputs, and under a time limit
#: at most this many seconds (at most this share of the start's budget). The iteration cap makes
#: the screen, and with it the rounds that follow, the same from run to run where it binds first
#: (gaussian 1,000: 300 iterations in about 27 s on two threads, 40-49 s on one; with the time cap
#: alone, 364-417 iterations in 60 s on one thread, and two or three rounds, from run to run).
#: Without a time limit only the iterations bind: on gaussian 2,000 the 60 s stopped a slower
#: machine's ascent short of them, and its screen took another, worse path (stop 53)
IPM_ASCENT_ITERATIONS = 300
IPM_ASCENT_SECONDS = 60.0
IPM_ASCENT_SHARE = 0.2
#: outputs the ``ipm`` start screens for its first round (fewer when their inverses would not fit in
#: memory)
IPM_MAX_OUTPUTS = 200
#: the ``ipm`` start's output generation: at most this many IPM rounds, each on the outputs of the
#: last still in use (:data:`IPM_PRUNE_BELOW`) plus those the pricing at its duals finds violated,
#: up to :data:`IPM_MAX_GROWN_OUTPUTS`
#: outputs in all (fewer when they would not fit in memory)
IPM_MAX_ROUNDS = 6
#: ... of which only the first this many may stop at their probe (:data:`IPM_PROBE_GAP`); the later
#: ones run to the gap, and they go on only while the pricing after them finds outputs violated.
#: With 4 rounds in all, gaussian 2,000's fourth left 18 outputs violated and its start 4.05e-4 above
#: the bound, and the master solve that had to close that did not end in 48 minutes (stop 53)
IPM_PROBE_ROUNDS = 3
IPM_MAX_GROWN_OUTPUTS = 400
#: a round's IPM prices the other outputs once on the way, when its relative gap falls to this, and
#: restarts with the violated ones at once (the rest of the round would solve an LP that lacks them)
IPM_PROBE_GAP = 1e-3
#: between rounds, an output of the last round whose largest entry in its primal iterate is below
#: this leaves the next round unless it is some record's largest (gaussian 1,000, 100 evenly spread
#: outputs: at a restricted gap of 1e-3 the 27 outputs the optimum uses all had entries of at least
#: 0.034 and 68 of the 73 it does not use none of 0.01). One the optimum needs after all is found
#: violated by the next pricing and comes back, as every other output does
IPM_PRUNE_BELOW = 1e-2
#: and within a round that holds the cap's outputs, once its relative gap is at most this, such an
#: output leaves the IPM at once (:func:`securelp.solvers.mdp.ipm.structured_ipm`'s ``prune_below``): it
#: makes room for the violated outputs, so that the round's probe can fire, and saves its inverse at
#: every iteration. Without it gaussian 2,000's first three rounds held the cap of 200 outputs each
#: for about 200 iterations (11.8 s apiece), the probe never fired, and they then pruned 142, 99 and
#: 90 of them. Below the cap the probe fires anyway, and pruning there cost gaussian 1,000 a third
#: round (238 s against 211 s; docs/benchmarks/mdp.md, stop 50)
IPM_PRUNE_GAP = 1e-2
#: the ``ipm`` start may plan on at most this share of the memory available
IPM_MEMORY_SHARE = 0.6
#: bytes of :func:`smoothed_dual_ascent` per mDP row and output (its float32 iterates, momentum,
#: trial point, gradient and scratch; tracemalloc's peak on the text dataset's 300 records and on
#: gaussian 500: 28.7 and 33.2, stop 34). Every start but ``pdlp`` begins with the ascent over all
#: kept outputs; on the text dataset's complete mDP graph at 1,000 records that is 999,000 rows x
#: 1,000 outputs, 32 GB, and the ``ipm`` start was killed for memory before stop 34
ASCENT_BYTES_PER_ROW_OUTPUT = 36
#: the ascent may plan on at most this share of the memory available
ASCENT_MEMORY_SHARE = 0.6
#: the ``ipm`` start stops when its restricted LP's relative gap is this share of the target gap
IPM_GAP_SHARE = 0.25
#: ``auto``'s estimate of the IPM's time: iterations that must fit (gaussian 1,000's first round
#: reaches the 1e-3 probe after 70-76; at a 600 s cap on one core 105 fitted and the IPM start
#: ended at gap 0.0063 against the PDLP start's 0.0194 side by side, stop 23) times seconds per
#: output per record cubed and iteration (gaussian 1,000, 894 records, 200 outputs: 4.1 s per
#: iteration on one core, Intel Xeon, stop 23; 2.5 s on two). The cube overestimates larger
#: components, whose inverses a nested dissection cheapens more (gaussian 2,000: 11.7 s per
#: iteration on two cores where the cube predicts 22 s), which errs towards the other starts
IPM_EXPECTED_ITERATIONS = 100
IPM_SECONDS_PER_CUBE = 2.9e-11
#: ``auto`` on a component that gets no start (at most :data:`DUAL_ASCENT_MIN_SIZE` records x kept
#: outputs): when the column generation has not closed the gap after this many iterations, the
#: ``ipm`` start runs after all and the column generation goes on from it. Where the start columns
#: are nearly optimal (large ``eps d``) it closes in a few (Rome 3, the 20x25 grid at eps 1/km 6);
#: on gaussian 500 (409 records, 187 kept outputs) its master was still 5 % above the optimum
#: after 20 iterations and took more than 20 minutes to close, the ``ipm`` start about a minute
IPM_SWITCH_ITERATIONS = 25
#: ... on components of at least this many records (a smaller one's column generation is cheap), and
#: not on dense ones (:data:`LAZY_ROWS_MIN_RATIO`), whose IPM iterations carry every mDP row of every
#: output: 300 random 2-D points with every pair a neighbour, lazy rows both times, switched after 25
#: iterations (2 minutes) and were at a gap of 0.033 after 600 s (4.0 GB); without the switch,
#: optimal in 345.5 s (1.1 GB)
IPM_SWITCH_MIN_RECORDS = 100

#: peak resident bytes of the PDLP start per nonzero of the component LP: the scipy construction,
#: HiGHS's copy of the model and PDLP's own copies (measured 2026-11-24 with ru_maxrss: 194 on
#: gaussian 500's giant component, 2.9 M nonzeros; 168 on gaussian 1,000's, 23.2 M). Gaussian
#: 2,000's 188 M nonzeros would need about 35 GiB at this rate: on a 23 GiB machine the start was killed.
PDLP_BYTES_PER_NONZERO = 200

#: the PDLP start may plan on at most this share of the memory available when it starts
PDLP_MEMORY_SHARE = 0.7


#: :func:`open_shares` works on blocks of about this many certificate entries
SHARES_CHUNK = 1 << 20


def open_shares(Q: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``sum_i min(0, Q_ki - mu_i)`` for every output ``k`` (a row of ``Q``), a block of outputs at a
    time: on 10,000 records x 9,847 outputs the whole-array form made two 790 MB temporaries a call,
    0.9 s in the run (py-spy, stop 35); on random arrays of that size 0.164 s against 0.512 s, a
    peak of 17 MB against 1.58 GB. Each row's sum is computed as in the whole-array form, bit for bit."""
    out = np.empty(Q.shape[0])
    step = max(1, SHARES_CHUNK // max(1, Q.shape[1]))
    for a in range(0, Q.shape[0], step):
        block = Q[a : a + step] - mu
        np.minimum(block, 0.0, out=block)
        out[a : a + step] = block.sum(axis=1)
    return out


def mdp_rows_matrix(problem: PMOProblem) -> sp.csr_matrix:
    """The mDP rows of one output column as ``A z <= 0``: row ``(i, j)`` is ``z_i - exp(eps d_ij) z_j``."""
    er, ec = problem.lp_edges
    w = np.exp(problem.eps * np.asarray(problem.dataset.distance)[er, ec])
    E = er.size
    return sp.csr_matrix((np.column_stack([np.ones(E), -w]).ravel(),
                          (np.repeat(np.arange(E), 2), np.column_stack([er, ec]).ravel())), shape=(E, problem.n))


def mdp_rows_bound(G: np.ndarray, A: sp.spmatrix, Y: np.ndarray) -> float:
    """Lower bound on the PMO optimum from multipliers ``Y`` (rows x outputs, must be >= 0) of the mDP rows.

    ``sum_i min_k (G + A'Y)_ik`` (module docstring). ``G`` is records x outputs (prior-weighted loss).
    """
    Y = np.asarray(Y, dtype=float)
    if np.any(Y < 0):
        raise InputError("mDP-row multipliers must be >= 0 for a valid bound")
    return float(np.min(np.asarray(G) + A.T @ Y, axis=1).sum())


def component_rows(problem: PMOProblem, idx: np.ndarray, rows: sp.csr_matrix | None = None) -> sp.csr_matrix:
    """The mDP rows of the component with records ``idx`` (an mDP pair never crosses components),
    over its records in the order of ``idx``; ``rows``: :func:`mdp_rows_matrix` of the problem, when
    the caller already has it."""
    pos = np.full(problem.n, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.size)
    er, _ = problem.lp_edges
    rows = mdp_rows_matrix(problem) if rows is None else rows
    return rows[np.flatnonzero(pos[er] >= 0)][:, idx].tocsr()


def undominated_outputs(G: np.ndarray, deadline: float = math.inf) -> np.ndarray:
    """Indices of the columns of ``G`` (records x outputs) not dominated by another column.

    Column ``k`` is dominated when some ``k'`` has ``G[:, k'] <= G[:, k]`` entrywise and is either
    smaller somewhere or equal with ``k' < k`` (so of equal columns the first is kept). A column
    that is the strict minimum of some row is never dominated (checked first, cheaply). Rows equal
    in every column (records of prior 0) decide nothing and are left out; a few spread rows screen
    the candidates before whole columns are compared (the 100 x 100 grid with the Gowalla prior,
    10,000 outputs of which 8,133 records have prior 0: over an hour comparing whole columns).
    Past ``deadline`` (``time.perf_counter()`` seconds) the outputs not yet examined are kept: a
    kept output is never wrong, only more work.
    """
    m, K = G.shape
    if K <= 1:
        return np.arange(K)
    G = G[G.max(axis=1) > G.min(axis=1)]  # rows that tell the columns apart
    m = G.shape[0]
    if m == 0:  # all columns equal: the first is kept
        return np.zeros(1, dtype=np.int64)
    keep = np.ones(K, dtype=bool)
    order = np.argsort(G, axis=1, kind="stable")
    best, second = order[:, 0], order[:, 1]
    strict = G[np.arange(m), best] < G[np.arange(m), second]
    sure = np.zeros(K, dtype=bool)
    sure[best[strict]] = True
    GT = np.ascontiguousarray(G.T)
    probe = GT[:, np.unique(np.linspace(0, m - 1, min(m, DOMINANCE_PROBE_ROWS)).astype(np.int64))]
    for n_done, k in enumerate(np.flatnonzero(~sure)):
        if n_done % 64 == 0 and time.perf_counter() > deadline:
            break
        cand = np.flatnonzero(np.all(probe <= probe[k], axis=1))
        cand = cand[cand != k]
        if cand.size == 0:
            continue
        cand = cand[np.all(GT[cand] <= GT[k], axis=1)]
        if cand.size == 0:
            continue
        if np.any(cand < k) or np.any(GT[cand] < GT[k]):
            keep[k] = False
    return np.flatnonzero(keep)


def _softmin(Q: np.ndarray, beta: float) -> tuple[float, np.ndarray]:
    """``sum_i -beta log sum_k exp(-Q_ik / beta)`` and the row-wise softmax weights (``Q`` is overwritten)."""
    mn = Q.min(axis=1, keepdims=True)
    Q -= mn
    Q *= Q.dtype.type(-1.0 / beta)
    np.exp(Q, out=Q)
    s = Q.sum(axis=1, keepdims=True)
    Q /= s
    return float((mn[:, 0] - beta * np.log(s[:, 0])).sum()), Q


def smoothed_dual_ascent(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, max_iterations: int = 100_000,
                         check_every: int = 20, Y0: np.ndarray | None = None,
                         beta: float | None = None, state: dict[str, Any] | None = None,
                         threads: int = 1) -> tuple[np.ndarray, int]:
    """Approximate the mDP-row dual ``max_{Y >= 0} sum_i min_k (G + A'Y)_ik`` by a first-order method.

    Accelerated projected gradient ascent (FISTA with gradient restarts) on the entropy-smoothed
    objective ``sum_i -beta log sum_k exp(-(G + A'Y)_ik / beta)``, whose gradient in ``Y`` is
    ``A P`` with ``P`` the row-wise softmax weights; the step is adapted by backtracking and
    ``beta`` is halved whenever the smoothed value gains little next to its smoothing bias. The
    iterates are kept in float32 for speed; the returned ``Q = G + A'Y`` is recomputed in float64
    from the best ``Y`` seen (which is ``>= 0``), so ``sum_i min_k Q_ik`` is a valid lower bound
    (module docstring) however inaccurate the method. It is a bound only: a first-order method
    does not reach the 1e-4 gaps the column generation certifies (gaussian 300: within 0.2 % of the
    optimum in 30 s, then it stalls; docs/mdp_design.md). Returns ``(Q, iterations)``, ``Q`` records x
    outputs.

    ``Y0`` (mDP rows x outputs, clipped at 0) starts the ascent from given duals, e.g. a PDLP start's
    (:data:`PDLP_POLISH_SHARE`); ``beta`` is then the first smoothing, which should be small next to
    the gap left (a large one first undoes the start). The returned ``Q`` is never worse than ``Y0``'s.
    ``state``: a dict that receives the last iterate ``Y`` (float32) and smoothing ``beta``, to go on
    later (``Y0=state["Y"], beta=state["beta"]``).

    ``threads``: the products with ``A`` and ``A'`` and the softmin run by blocks of rows, and the
    elementwise updates of the iterates by :data:`ASCENT_CHUNKS` fixed chunks of mDP rows, on this
    many threads (scipy's sparse products and numpy's loops release the GIL), when the iterates have
    at least :data:`ASCENT_PARALLEL_MIN` entries; the iterates are the same whatever the number.
    """
    m, K = G.shape
    E = A.shape[0]
    if E == 0 or m == 0 or K == 0:
        return np.array(G, dtype=float), 0
    # the chunks depend on the size only, so the iterates do not depend on the threads
    big = E * K >= ASCENT_PARALLEL_MIN
    n_chunks = ASCENT_CHUNKS if big else 1
    threads = max(1, int(threads)) if big else 1
    if threads == 1:
        return _smoothed_dual_ascent(G, A, deadline, max_iterations, check_every, Y0, beta, state, None, 1, n_chunks)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return _smoothed_dual_ascent(G, A, deadline, max_iterations, check_every, Y0, beta, state, pool, threads,
                                     n_chunks)


def _smoothed_dual_ascent(G: np.ndarray, A: sp.csr_matrix, deadline: float, max_iterations: int, check_every: int,
                          Y0: np.ndarray | None, beta: float | None, state: dict[str, Any] | None,
                          pool: ThreadPoolExecutor | None, threads: int, n_chunks: int) -> tuple[np.ndarray, int]:
    """:func:`smoothed_dual_ascent`'s method, its elementwise work in ``n_chunks`` chunks of mDP rows."""
    from securelp.solvers.mdp.rowops import RowOps, row_blocks

    m, K = G.shape
    E = A.shape[0]
    A = sp.csr_matrix(A)
    AT = A.T.tocsr()
    G32 = G.astype(np.float32)
    ops = RowOps(A.astype(np.float32), AT.astype(np.float32), pool, threads)
    # ||A||_2 by power iteration (a few steps are enough for a first step size; 1.1x margin)
    v = np.ones(m)
    for _ in range(30):
        v = AT @ (A @ v)
        v /= np.linalg.norm(v)
    lip_a = 1.1 * float(np.linalg.norm(A @ v)) ** 2
    beta0 = 0.025 * float(np.mean(G)) if np.mean(G) > 0 else 1.0
    beta = beta0 if beta is None or not beta > 0 else min(float(beta), beta0)

    Qs = np.empty((m, K), dtype=np.float32)

    def smooth(Yv: np.ndarray) -> tuple[float, np.ndarray]:
        # G + A'Y and its softmin, by blocks of records on the threads (each row as on one thread)
        parts: list[float] = []

        def rows(sl: slice) -> None:
            ops.AT_rows(sl, Yv, Qs[sl])
            Qs[sl] += G32[sl]
            parts.append(_softmin(Qs[sl], beta)[0])

        ops.records(rows)
        return math.fsum(parts), Qs

    if Y0 is None:
        Y = np.zeros((E, K), dtype=np.float32)
        best_q = np.array(G, dtype=float)
    else:
        if Y0.shape != (E, K):
            raise ValueError(f"Y0 must be mDP rows x outputs {(E, K)}, got {Y0.shape}")
        Y = np.ascontiguousarray(np.maximum(Y0, 0.0), dtype=np.float32)
        best_q = G + AT @ Y.astype(np.float64)
    best = float(best_q.min(axis=1).sum())
    V = Y.copy()
    Y_new = np.zeros_like(Y)
    tmp = np.zeros_like(Y)
    t = 1.0
    step = beta / lip_a  # 1/L for the smoothed objective; adapted by backtracking below
    coef = np.float32(0.0)
    # the elementwise work on the E x K iterates, fused by chunks of mDP rows on the threads; the
    # chunks (and so the sums of their dot products) do not depend on the number of threads
    chunks = row_blocks(E, n_chunks)

    def on_chunks(fn: Callable[[slice], tuple[float, float]]) -> np.ndarray:
        """``fn`` on every chunk, its two numbers summed in chunk order (``map`` keeps the order)."""
        parts = list(pool.map(fn, chunks)) if pool is not None and len(chunks) > 1 else [fn(c) for c in chunks]
        return np.asarray(parts, dtype=float).sum(axis=0)

    def trial(sl: slice) -> tuple[float, float]:
        """``Y_new = max(V + step grad, 0)``, ``tmp = Y_new - V``; ``grad'tmp`` and ``tmp'tmp``."""
        yn, tm, g = Y_new[sl], tmp[sl], grad[sl]
        np.multiply(g, np.float32(step), out=yn)
        yn += V[sl]
        np.maximum(yn, 0.0, out=yn)
        np.subtract(yn, V[sl], out=tm)
        return float(np.vdot(g, tm)), float(np.vdot(tm, tm))

    def gain(sl: slice) -> tuple[float, float]:
        """``tmp = Y_new - Y``; ``grad'tmp``."""
        tm = tmp[sl]
        np.subtract(Y_new[sl], Y[sl], out=tm)
        return float(np.vdot(grad[sl], tm)), 0.0

    def momentum(sl: slice) -> tuple[float, float]:
        """``V = Y_new + coef tmp``."""
        v = V[sl]
        np.multiply(tmp[sl], coef, out=v)
        v += Y_new[sl]
        return 0.0, 0.0
    prev_phi = -np.inf
    since_beta = 0
    it = 0
    while it < max_iterations and time.perf_counter() < deadline and beta > 1e-5 * beta0:
        it += 1
        since_beta += 1
        phi_v, P = smooth(V)  # P: row-wise softmax weights
        grad = ops.A_all(P)
        for _halving in range(60):
            # preallocated E x K buffers from here on: fresh temporaries of that size cost page faults
            up, sq = on_chunks(trial)
            phi_new, _ = smooth(Y_new)
            # sufficient ascent for a concave function with a step-size curvature model
            if phi_new >= phi_v + up - sq / (2.0 * step) - 1e-7 * abs(phi_v):
                break
            step *= 0.5
        else:
            break  # no ascent even for a vanishing step (non-finite values): keep the best bound so far
        if on_chunks(gain)[0] < 0.0:  # restart the momentum
            t = 1.0
            V[...] = Y
            continue
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        coef = np.float32((t - 1.0) / t_new)
        on_chunks(momentum)
        Y, Y_new = Y_new, Y
        t = t_new
        step *= 1.1
        if it % check_every == 0:
            Q64 = G + AT @ Y.astype(np.float64)
            b = float(Q64.min(axis=1).sum())
            if b > best:
                best, best_q = b, Q64
            phi, _ = _softmin(Q64.copy() if best_q is Q64 else Q64, beta)  # _softmin overwrites its input
            # halve beta when the smoothed value gains little next to its smoothing bias
            if since_beta > 2 * check_every and phi - prev_phi < 0.02 * max(b - phi, 1e-5 * abs(phi)):
                beta *= 0.5
                since_beta = 0
                t = 1.0
                V[...] = Y
            prev_phi = phi
            logger.debug("dual ascent it %d: beta %.3g, step %.3g, bound %.10g, smoothed %.10g", it, beta, step, b, phi)
    if state is not None:
        state.update(Y=Y, beta=beta)
    return best_q, it


@dataclasses.dataclass
class FirstOrderStart:
    """What :func:`pdlp_start` hands the column generation of one component.

    ``Q`` (records x outputs) is ``G + A'Y`` for the clipped mDP-row duals ``Y >= 0``, a valid
    certificate whatever the solver's accuracy; ``mu`` the unit-row duals (a stability centre,
    no guarantee attached); ``Z`` the primal iterate (records x outputs, clipped at 0), whose
    columns, repaired (:meth:`_ComponentCG.add_primal_columns`), become restricted-master columns.
    ``Y`` (outputs x mDP rows) the clipped duals themselves, where the smoothed ascent goes on from.
    """

    Q: np.ndarray
    mu: np.ndarray
    Z: np.ndarray
    iterations: int
    status: str
    Y: np.ndarray | None = None


def _pdlp_too_large(nnz: int) -> str:
    """Why a PDLP start on a component LP of ``nnz`` nonzeros must not run ('' when it may)."""
    if nnz > PDLP_MAX_NONZEROS:
        return f"{nnz:,} nonzeros > {PDLP_MAX_NONZEROS:,}"
    short = memory_shortfall(nnz * PDLP_BYTES_PER_NONZERO, available_memory(), PDLP_MEMORY_SHARE)
    return f"{nnz:,} nonzeros need about {short}" if short else ""


def component_lp_colwise(G: np.ndarray, A: sp.csr_matrix) -> sp.csc_matrix:
    """The whole component LP's matrix, column ``j*m + i`` for ``z[i, j]``: the ``m`` unit rows, then
    output ``j``'s ``E`` mDP rows at ``m + j*E``."""
    m, K = G.shape
    unit = sp.kron(np.ones((1, K)), sp.identity(m, format="csc"), format="csc")
    blocks = sp.kron(sp.identity(K, format="csc"), sp.csc_matrix(A), format="csc")
    return sp.vstack([unit, blocks], format="csc")


def pdlp_start(G: np.ndarray, A: sp.csr_matrix, deadline: float, *, tolerance: float = 1e-7,
               iteration_limit: int | None = None) -> FirstOrderStart | None:
    """Solve the component's PMO approximately with HiGHS's first-order PDLP solver (cuPDLP-C).

    A primal-dual hybrid gradient method with restarts (Applegate et al. 2021; HiGHS's
    implementation); it runs until ``tolerance`` (HiGHS's relative PDLP optimality tolerance;
    :func:`solve_colgen` passes its target gap) or ``deadline``. Nothing it returns is trusted:
    the lower bound is recomputed from the clipped duals (``sum_i min_k Q_ik``, module
    docstring), the primal columns are repaired before they enter the master
    (:meth:`_ComponentCG.add_primal_columns`), and the master's mechanism is verified as always.
    Returns ``None`` when there is no time left or HiGHS returns no solution.
    """
    import highspy

    t_enter = time.perf_counter()
    m, K = G.shape
    E = A.shape[0]
    left = deadline - t_enter
    if E == 0 or m == 0 or K == 0 or left <= 0.0:
        return None
    # cuPDLP-C: returns its iterate at the time limit (HiPDLP returns none)
    h = new_highs({"solver": "pdlp", "pdlp_optimality_tolerance": float(tolerance)}, tight=True)
    if iteration_limit is not None:
        h.setOptionValue("pdlp_iteration_limit", int(iteration_limit))
    lp = LinearProgram(c=np.ascontiguousarray(G.T).ravel(), A=component_lp_colwise(G, A),
                       row_lower=np.concatenate([np.ones(m), np.full(E * K, -np.inf)]),
                       row_upper=np.concatenate([np.ones(m), np.zeros(E * K)]),
                       col_lower=np.zeros(m * K), col_upper=np.ones(m * K))
    if not pass_lp(h, lp):
        raise SolverError("HiGHS rejected the component LP for the PDLP start (passModel failed)")
    del lp
    # the time after the run (solution copies, the bound's Q) is about the time before it (model
    # build, copies): reserve as much again (gaussian 1,000: 164 s for a 150 s budget without)
    now = time.perf_counter()
    h.setOptionValue("time_limit", max(0.01, deadline - now - (now - t_enter)))
    if h.run() == highspy.HighsStatus.kError:
        return None
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    if not sol.value_valid or not sol.dual_valid:
        return None
    x = np.asarray(sol.col_value, dtype=float)
    duals = np.asarray(sol.row_dual, dtype=float)
    iterations = int(h.getInfo().pdlp_iteration_count)
    h.clear()
    Y = np.maximum(0.0, -duals[m:]).reshape(K, E)
    Q = np.asarray(G, dtype=float) + np.asarray(A.T @ Y.T)
    Z = np.clip(x.reshape(K, m).T, 0.0, None)
    return FirstOrderStart(Q=Q, mu=duals[:m].copy(), Z=np.ascontiguousarray(Z), iterations=iterations, status=status, Y=Y)


def output_features(G: np.ndarray, dims: int = 16, seed: int = 0) -> np.ndarray:
    """Every output's cost column (``G``: records x outputs) projected on ``dims`` fixed random
    directions (outputs x dims): outputs whose costs are alike are near each other."""
    R = np.random.default_rng(seed).standard_normal((G.shape[0], dims))
    return np.ascontiguousarray(G.T @ R)


def pricing_chain(F: np.ndarray, js: np.ndarray) -> np.ndarray:
    """``js`` reordered as a greedy chain of nearest neighbours in the features ``F`` (outputs x
    dims), starting at ``js[0]``. Pricing along it warm-starts every first pricing of an output from
    a neighbour's basis: gaussian 1,000, 150 outputs on one worker, 13.0 and 11.9 s against 44.3 and
    45.9 s in the order of their open shares (side by side, the same bound)."""
    js = np.asarray(js)
    if js.size <= 2:
        return js.copy()
    X = F[js]
    left = np.ones(js.size, dtype=bool)
    order = np.empty(js.size, dtype=np.int64)
    cur = 0
    dist = np.empty(js.size)
    for t in range(js.size):
        order[t] = cur
        left[cur] = False
        if t + 1 == js.size:
            break
        np.square(X - X[cur]).sum(axis=1, out=dist)
        dist[~left] = np.inf
        cur = int(np.argmin(dist))
    return js[order]


def prune_outputs(Z: np.ndarray, S: np.ndarray, below: float) -> np.ndarray:
    """The outputs ``S`` (columns of ``Z``, records x outputs, a round's primal iterate) that keep
    some entry of at least ``below`` or are some record's largest; in increasing order."""
    keep = Z.max(axis=0) >= below
    keep[Z.argmax(axis=1)] = True
    return np.sort(S[keep])


def screen_outputs(Q: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` outputs (columns of ``Q``, records x outputs) that a certificate ``Q = G + A'Y``
    marks as most used, in increasing order. At an optimal ``Y`` an output in use attains the row
    minimum in every record it serves; so each record spreads a unit of weight over the outputs by a
    softmin of its row at temperature :data:`SCREEN_TEMPERATURE` x its row minimum, and the outputs
    with the most weight are kept (ties, e.g. outputs far from every minimum, by the smallest
    relative distance to some row's minimum). A poorly converged ``Q`` has many row minima (gaussian
    2,000 after 300 s of ascent: 556 distinct ones), so "near some minimum" alone does not rank."""
    rmin = Q.min(axis=1, keepdims=True)
    scale = np.abs(rmin) + 1e-12 * max(float(np.abs(rmin).mean()), 1e-300)
    with np.errstate(over="ignore"):  # a row minimum near 0: rel overflows to inf, its weight to 0
        rel = (Q - rmin) / scale
        w = np.exp(-rel / SCREEN_TEMPERATURE)
    mass = (w / w.sum(axis=1, keepdims=True)).sum(axis=0)
    order = np.lexsort((rel.min(axis=0), -mass))
    return np.sort(order[:max(1, min(int(n), Q.shape[1]))])


@dataclasses.dataclass
class _SubProblem:
    """A component as :func:`securelp.solvers.mdp.pmo.repair_mechanism` and the verifier take it (pairs never
    cross components): its mDP graph and distances over its records, and, built only when a repair
    mixes, its distances to the outputs and its costs (for the mix with the exponential mechanism)."""

    graph: Any
    dataset: Any
    eps: float
    problem: PMOProblem
    idx: np.ndarray
    kept: np.ndarray

    @functools.cached_property
    def to_outputs(self) -> np.ndarray:
        return np.asarray(self.problem.dataset.distance)[np.ix_(self.idx, self.problem.outputs)]

    @functools.cached_property
    def cost(self) -> np.ndarray:
        return self.problem.cost[self.idx]


class _ComponentCG:
    """Column generation on one connected component (records ``idx``, kept outputs ``kept``)."""

    def __init__(self, problem: PMOProblem, idx: np.ndarray, kept: np.ndarray, workers: int, gap: float,
                 smoothing: float, boxstep: bool = True, A: sp.csr_matrix | None = None,
                 transport: TransportCertifier | None = None) -> None:
        self.boxstep = boxstep
        n = problem.n
        self.problem = problem
        self.idx, self.kept = idx, kept
        self.m, self.Kc = idx.size, kept.size
        self.gap, self.alpha = gap, smoothing
        D = np.asarray(problem.dataset.distance)
        pos = np.full(n, -1, dtype=np.int64)
        pos[idx] = np.arange(self.m)
        self.A = component_rows(problem, idx) if A is None else A
        E = self.A.shape[0]
        self.E = E
        self.AT = self.A.T.tocsr()
        self.G = np.ascontiguousarray(problem.cost[np.ix_(idx, kept)])  # m x Kc
        self.Q = np.ascontiguousarray(self.G.T)  # Kc x m: g_k + A'y_k of the last pricing (y = 0 at first)
        self.bases: list[Any] = [None] * self.Kc
        # component sub-instance for repair and verification (pairs never cross components)
        gr, gc = problem.graph.rows, problem.graph.cols
        gsel = pos[gr] >= 0
        self.sub = _SubProblem(
            graph=types.SimpleNamespace(rows=pos[gr[gsel]], cols=pos[gc[gsel]]),
            dataset=types.SimpleNamespace(distance=D[np.ix_(idx, idx)]), eps=problem.eps, problem=problem, idx=idx,
            kept=kept)
        self.K = problem.K
        # start columns
        adj = sp.csr_matrix((D[gr[gsel], gc[gsel]], (pos[gr[gsel]], pos[gc[gsel]])), shape=(self.m, self.m))
        anchors = np.argmin(self.G, axis=0)
        ua, inv = np.unique(anchors, return_inverse=True)
        delta = dijkstra(adj, directed=False, indices=ua)  # finite: the component is connected
        self.master_tol = master_tolerance(gap)
        self.master_tightenings = 0
        self.master = new_highs({"primal_feasibility_tolerance": self.master_tol,
                                 "dual_feasibility_tolerance": self.master_tol})
        self.master.passModel(_empty_master(self.m))
        self.col_owner: list[int] = []
        self.col_ray: list[np.ndarray] = []
        self.col_idle = np.zeros(0, dtype=np.int64)  # master solves in a row each column sat idle
        self.columns_added = 0
        self.columns_retired = 0
        # du Merle / boxstep stabilisation: columns 0..2m-1 are slacks +e_i (cost mu_c + D) and -e_i
        # (cost -(mu_c - D)), which confine the RMP's duals to the box [mu_c - D, mu_c + D]; their upper
        # bounds are 0 (box off) whenever the RMP must be a restriction of the PMO (upper bounds)
        m = self.m
        self.n_slack = 2 * m
        self.master.addCols(2 * m, np.zeros(2 * m), np.zeros(2 * m), np.zeros(2 * m), 2 * m,
                            np.arange(2 * m, dtype=np.int32), np.concatenate([np.arange(m), np.arange(m)]).astype(np.int32),
                            np.concatenate([np.ones(m), -np.ones(m)]))
        # start columns: the uniform vector and, per anchor, the profile exp(-eps delta(a, .)); a
        # vector enters once, for the output where it costs least: the other copies are the same
        # master column at a higher cost, never in an optimal basis and never binding on the duals
        # (gaussian 1,000: 965 identical dense uniform columns of 894 entries each)
        uni = np.full(self.m, 1.0 / self.m)
        ks, vs = [int(np.argmin(self.G.sum(axis=0)))], [uni]
        for a in range(ua.size):
            prof = np.exp(-problem.eps * delta[a])
            prof /= prof.sum()
            owners = np.flatnonzero(inv == a)
            ks.append(int(owners[np.argmin(prof @ self.G[:, owners])]))
            vs.append(prof)
        self.add_columns(ks, vs)
        nw = max(1, min(workers, self.Kc))
        self.pricers = []
        # dense components price with the rows they need (securelp.solvers.mdp.rowpool), the others with all
        self.lazy = (LazyRows(self.A, self.Kc, nw, TIGHT_TOLERANCE) if E >= LAZY_ROWS_MIN_RATIO * self.m
                     else None)
        self.dual_pricing = self.lazy is not None or E >= PRICING_DUAL_MIN_RATIO * self.m
        if self.lazy is not None:  # each pricing loads its own rows (LazyRows.load)
            pricing = LinearProgram(c=np.zeros(0), A=sp.csc_matrix((0, 0)), row_lower=np.zeros(0),
                                    row_upper=np.zeros(0), col_lower=np.zeros(0), col_upper=np.zeros(0))
        elif self.dual_pricing:
            # min 1't  s.t.  A'y + t >= -(g_k - mu),  y, t >= 0: the pricing LP's dual, whose basis
            # has one row per record instead of one per mDP row; only its right-hand side changes
            # from output to output
            pricing = LinearProgram(c=np.concatenate([np.zeros(E), np.ones(self.m)]),
                                    A=sp.hstack([self.AT, sp.identity(self.m)], format="csc"),
                                    row_lower=np.zeros(self.m), row_upper=np.full(self.m, np.inf),
                                    col_lower=np.zeros(E + self.m), col_upper=np.full(E + self.m, np.inf))
        else:
            pricing = LinearProgram(c=np.zeros(self.m), A=self.A, row_lower=np.full(E, -np.inf), row_upper=np.zeros(E),
                                    col_lower=np.zeros(self.m), col_upper=np.ones(self.m))
        for _ in range(nw):
            # presolve off: when presolve solves a pricing LP outright (e.g. z = 0) its recovered
            # row duals can be far from dual feasible, and the bound is built from them
            h = new_highs({"presolve": "off"}, tight=True)
            if not pass_lp(h, pricing):
                raise SolverError("HiGHS rejected a pricing model (passModel failed)")
            self.pricers.append(h)
        self.pool = ThreadPoolExecutor(max_workers=nw) if nw > 1 else None
        self.lp_solves = 0
        self._cold_retries = [0] * nw  # per worker: each worker index is used by one thread at a time
        self.master_retries = 0  # master solves that needed a cold re-solve or a fallback
        self.box_widenings = 0  # boxes widened because the boxed master had no solution
        self.deadline = float("inf")  # master solves stop here (HiGHS time limit): see run()
        self.start_rows: np.ndarray | None = None  # the repaired first-order start (m x Kc), a fallback
        self.start_gap: float | None = None  # relative gap of start_rows' loss over the start's bound (run())
        self.rows_seconds = 0.0  # the longest repair and verification of the rows so far (:meth:`_verified`)
        self._features: np.ndarray | None = None  # the outputs' cost columns, projected (pricing order)
        self._transport = transport  # built at the first pricing that asks for it, unless given
        self.transport_certified = 0  # outputs certified by a transport plan instead of an LP
        self.say: Callable[[str], None] = _say_nothing  # a note on the start's progress (solve_colgen)

    @property
    def cold_retries(self) -> int:
        """Pricing LPs re-solved cold after a warm solve's certificate fell short, over the workers."""
        return sum(self._cold_retries)

    def tighten_master(self) -> None:
        """Divide the RMP's feasibility tolerances (and with them :attr:`enter_tol`) by
        :data:`MASTER_TIGHTEN`, down to :data:`STALL_TOLERANCE`."""
        self.master_tol = max(STALL_TOLERANCE, self.master_tol / MASTER_TIGHTEN)
        for key in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
            self.master.setOptionValue(key, self.master_tol)
        self.master_tightenings += 1
        logger.info("component of %d records: the column generation stalled short of the gap; master "
                    "tolerance now %.0e", self.m, self.master_tol)

    @property
    def enter_tol(self) -> float:
        """A priced column enters the master below minus this reduced cost at unit mass (:data:`ENTER_FACTOR`)."""
        return ENTER_FACTOR * self.master_tol

    def warm_start(self, Q: np.ndarray) -> None:
        """Take ``Q = G + A'Y`` (records x outputs, from ``Y >= 0``, e.g. :func:`smoothed_dual_ascent`)
        as every output's stored certificate. Stored certificates give both lower bounds (module
        docstring), so they stay valid; the mDP-row bound ``sum_i min_k Q_ik`` of this one is the
        first certified bound, and outputs it already certifies at the RMP's duals are not priced."""
        self.Q = np.ascontiguousarray(Q.T, dtype=float)

    def add_primal_columns(self, Z: np.ndarray) -> int:
        """Add the columns of an approximate component solution ``Z`` (records x kept outputs) to the
        master, twice: closed upward into the cone (``z_j >= z_i exp(-eps d_ij)``), which keeps
        their quality but leaves the unit rows off by the solver's tolerance, and repaired into an
        exactly feasible mechanism on the kept outputs (:func:`securelp.solvers.mdp.pmo.repair_mechanism`:
        closure, row normalisation, a uniform mix), which the master can always take at once
        (on a small instance the first kind alone left the master at its start value). Returns
        how many columns entered.
        """
        Z = np.clip(np.asarray(Z, dtype=float), 0.0, None)
        C = Z.copy()
        C[C < 1e-12 * max(1.0, float(C.max(initial=0.0)))] = 0.0
        g = self.sub.graph
        _upward_closure(C, g.rows, g.cols, np.exp(-self.sub.eps * self.sub.dataset.distance[g.rows, g.cols]))
        try:
            R = repair_mechanism(Z, self.sub)[0]  # type: ignore[arg-type]
            self.start_rows = R
        except SolverError as exc:  # an all-zero row: only the closed columns
            logger.info("first-order start: no repaired columns (%s)", exc)
            R = np.zeros_like(C)
        ks: list[int] = []
        vecs: list[np.ndarray] = []
        for j in range(C.shape[1]):
            sr, sc = float(R[:, j].sum()), float(C[:, j].sum())
            r = R[:, j] / sr if sr > 0 else None
            c = C[:, j] / sc if sc > 0 else None
            for v in (r, c):
                if v is not None:
                    ks.append(j)
                    vecs.append(v)
                # nearly equal columns of both kinds make the master's basis singular (HiGHS
                # "Solve error" seen): the closed one only where it differs from the repaired one
                if r is not None and c is not None and float(np.abs(r - c).max()) <= 1e-6 * float(c.max()):
                    break
        self.add_columns(ks, vecs)
        return len(ks)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def add_columns(self, ks: list[int], vecs: list[np.ndarray]) -> None:
        if not ks:
            return
        costs = np.array([float(self.G[:, k] @ v) for k, v in zip(ks, vecs)])
        idx_list, val_list, starts = [], [], [0]
        for v in vecs:
            nz = np.flatnonzero(v > 0)
            idx_list.append(nz)
            val_list.append(v[nz])
            starts.append(starts[-1] + nz.size)
        index = np.concatenate(idx_list).astype(np.int32)
        value = np.concatenate(val_list)
        self.master.addCols(len(ks), costs, np.zeros(len(ks)), np.full(len(ks), np.inf), int(index.size),
                            np.asarray(starts[:-1], dtype=np.int32), index, value)
        self.col_owner.extend(ks)
        self.col_ray.extend(vecs)
        self.col_idle = np.concatenate([self.col_idle, np.zeros(len(ks), dtype=np.int64)])
        self.columns_added += len(ks)

    def retire_columns(self, lam: np.ndarray) -> np.ndarray:
        """After a master solve with column weights ``lam``: count the solves each column sat idle
        (weight 0, reduced cost above :attr:`enter_tol`, so nonbasic; never the first, the uniform
        vector, which keeps the master feasible), and delete from the master the columns idle for
        :data:`COLUMN_IDLE_SOLVES` solves while it holds more than :data:`COLUMN_POOL_PER_RECORD`
        per record. The basis stays valid (only nonbasic columns go) and so does the solution.
        Returns ``lam`` without the deleted columns' (zero) weights. Call it before anything else
        changes the master: it reads the solution's reduced costs."""
        n = len(self.col_owner)
        if not n:
            return lam
        rc = np.asarray(self.master.getSolution().col_dual, dtype=float)[self.n_slack:]
        idle = (lam <= 0.0) & (rc > self.enter_tol)
        idle[0] = False  # the uniform start column: with it the master is always feasible
        self.col_idle = np.where(idle, self.col_idle + 1, 0)
        if n <= COLUMN_POOL_PER_RECORD * self.m:
            return lam
        drop = np.flatnonzero(self.col_idle >= COLUMN_IDLE_SOLVES)
        if not drop.size:
            return lam
        self.master.deleteCols(int(drop.size), (drop + self.n_slack).astype(np.int32))
        keep = np.ones(n, dtype=bool)
        keep[drop] = False
        self.col_owner = [o for o, k in zip(self.col_owner, keep.tolist()) if k]
        self.col_ray = [r for r, k in zip(self.col_ray, keep.tolist()) if k]
        self.col_idle = self.col_idle[keep]
        self.columns_retired += int(drop.size)
        return lam[keep]

    def set_box(self, center: np.ndarray | None, width: float) -> None:
        """Confine the RMP's duals to ``[center - width, center + width]`` (``center=None``: no box)."""
        m = self.m
        idx = np.arange(2 * m, dtype=np.int32)
        if center is None:
            self.master.changeColsBounds(2 * m, idx, np.zeros(2 * m), np.zeros(2 * m))
            return
        self.master.changeColsCost(2 * m, idx, np.concatenate([center + width, -(center - width)]))
        self.master.changeColsBounds(2 * m, idx, np.zeros(2 * m), np.full(2 * m, np.inf))

    def _master_time_limit(self, reserve: float | None) -> None:
        """HiGHS's time limit on the master: what is left until :meth:`finish_by` of :attr:`deadline`
        with ``reserve`` (none without a deadline)."""
        left = self.finish_by(self.deadline, reserve) - time.perf_counter()
        if left <= 0.0:
            raise _OutOfTime
        set_time_left(self.master, left)

    def solve_master(self, reserve: float | None = None) -> tuple[np.ndarray, float, np.ndarray]:
        """Solve the RMP; its duals, objective and column weights. Raises :class:`_OutOfTime` when
        :attr:`deadline` passes first (on gaussian 1,000 one master solve with a PDLP start's
        columns took 145 s: without the limit a 300 s run took 430 s)."""
        import highspy

        h = self.master
        self._master_time_limit(reserve)
        run_status = h.run()
        status = h.modelStatusToString(h.getModelStatus())
        if status == "Time limit reached":
            raise _OutOfTime
        if run_status == highspy.HighsStatus.kError or status != "Optimal":
            # cold, then the fallbacks: with near-parallel columns (a PDLP start's repaired and closed
            # copies) the dual simplex at 1e-9 tolerances can end "Unknown" or even "Infeasible" on this
            # always-feasible master (seen in about 1 of 7 time-budgeted starts on gaussian 70); primal
            # simplex solved every such saved master. Any master solution is safe: its duals only steer
            # the pricing (every bound is re-derived from pricing certificates) and its mechanism is
            # repaired and verified.
            nearest: tuple[float, tuple[np.ndarray, float, np.ndarray]] | None = None
            for options in ({}, *_MASTER_FALLBACKS):
                if options and all(h.getOptionValue(key)[1] == value for key, value in options.items()):
                    continue  # the cold re-solve just ran with these
                with _RETRY_LOCK:
                    with _highs_options(h, options):
                        h.clearSolver()
                        self._master_time_limit(reserve)
                        h.run()
                    status = h.modelStatusToString(h.getModelStatus())
                    sol = h.getSolution()
                    residual = float(h.getInfo().max_primal_infeasibility)
                    if status == "Optimal":
                        result = self._master_solution()
                    elif (status == "Unknown" and sol.value_valid and sol.dual_valid and np.isfinite(residual)
                          and (nearest is None or residual < nearest[0])):
                        nearest = (residual, self._master_solution())
                if status == "Time limit reached":
                    raise _OutOfTime
                if status == "Optimal":
                    self.master_retries += 1
                    return result
            if nearest is not None and nearest[0] <= MASTER_ACCEPT_INFEASIBILITY:
                logger.info("column-generation master: no run ended 'Optimal' (last: %s); taking the solution "
                            "with unit-row residual %.2g", status, nearest[0])
                self.master_retries += 1
                return nearest[1]
            raise SolverError(f"column-generation master ended with status {status}, also cold and with "
                              "primal simplex, loose tolerances and the interior-point solver"
                              + (f" (smallest unit-row residual {nearest[0]:.2g})" if nearest else ""))
        return self._master_solution()

    def solve_master_in_box(self, center: np.ndarray | None, width: float
                            ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray | None, float]:
        """:meth:`solve_master` under the dual box ``center +- width``; returns the box in force after.

        A box can exclude every dual point the master's columns allow (a first-order start's
        centre above them, with the narrow box of a small gap): the boxed master is then
        unbounded (seen on gaussian 70 with a time-budgeted PDLP start, reported as 'Unbounded').
        The box is widened x4 up to :data:`BOX_WIDENINGS` times, then dropped: without it the
        master is always feasible (the uniform start column) and bounded (costs >= 0).
        """
        if center is not None:
            for _ in range(BOX_WIDENINGS):
                try:
                    return (*self.solve_master(), center, width)
                except SolverError:
                    width *= 4.0
                    self.box_widenings += 1
                    self.set_box(center, width)
            logger.info("master still unsolved after %d box widenings: box dropped", BOX_WIDENINGS)
            self.set_box(None, 0.0)
            self.boxstep = False
        return (*self.solve_master(), None, 0.0)

    def _master_solution(self) -> tuple[np.ndarray, float, np.ndarray]:
        sol = self.master.getSolution()
        return (np.asarray(sol.row_dual, dtype=float), float(self.master.getInfo().objective_function_value),
                np.asarray(sol.col_value, dtype=float)[self.n_slack:])

    def box_binding(self) -> bool:
        x = np.asarray(self.master.getSolution().col_value[: self.n_slack], dtype=float)
        return bool(np.any(x > 1e-3 * self.master_tol))  # 1e-12 at the tight tolerance

    def unboxed_rows(self, center: np.ndarray | None, width: float, lam: np.ndarray | None = None
                     ) -> tuple[np.ndarray, float]:
        """The verified rows of the RMP without the box (a restriction of the PMO). ``lam``: the
        column weights of a boxed solution whose box slacks are all zero, which is already feasible
        without the box and is taken as it is; else the RMP is re-solved without the box."""
        if lam is not None:
            return self.verified_rows(lam)
        # the boxed master's basis is put back after, unless the unboxed optimum's duals lie in the
        # box (then its basis is optimal for the boxed master too: the slacks price out). On 300
        # points the next boxed solve from the unboxed basis took about 1,700 pivots instead of 600;
        # on the 20x25 grid at eps 1/km, after the box had moved onto the unboxed duals, 443 against 0
        basis = self.master.getBasis() if center is not None else None
        if center is not None:
            self.set_box(None, 0.0)
        try:
            # its rows come next and are verified here: only the end's verification remains
            with _highs_options(self.master, {"simplex_strategy": DUAL_SIMPLEX}):  # the slacks' bounds close
                mu, _, lam = self.solve_master(reserve=1.0)
            if center is not None and bool(np.all(np.abs(mu - center) <= width)):
                basis = None
        finally:
            if center is not None:
                self.set_box(center, width)
                if basis is not None and basis.valid:
                    self.master.setBasis(basis)
        return self.verified_rows(lam)

    def fallback_rows(self) -> tuple[np.ndarray, float]:
        """Verified rows without a master solve (the deadline passed first): the repaired
        first-order start's mechanism, else the best single output for every record (a constant
        mechanism, private at any eps)."""
        if self.start_rows is not None:
            return self._verified(self.start_rows)
        Zc = np.zeros((self.m, self.Kc))
        Zc[:, int(np.argmin(self.G.sum(axis=0)))] = 1.0
        return self._verified(Zc)

    def open_shares(self, mu: np.ndarray) -> np.ndarray:
        """Per output, ``sum_i min(0, Q_ki - mu_i)``: its stored certificate's share of the Lagrangian
        bound at ``mu`` (0 where the certificate already certifies the output there); the bound is
        ``mu.sum()`` plus their sum."""
        return open_shares(self.Q, mu)

    def tolerances(self, scale: float) -> tuple[float, float]:
        """``(tau, tol)`` at objective scale ``scale``: an output is worth pricing when its open share
        is below ``-tau``, and its pricing LP is solved to ``tol``."""
        tau = 0.05 * self.gap * scale / self.Kc
        return tau, 0.1 * tau + 1e-12 * scale / self.Kc

    def _certificate(self, j: int, y: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, float]:
        """Output ``j``'s certificate ``q = g_j + A'y`` from mDP-row multipliers ``y >= 0`` and its
        share of the Lagrangian bound at ``mu``, ``sum_i min(0, q_i - mu_i)``."""
        q = self.G[:, j] + self.AT @ y
        return q, float(np.minimum(0.0, q - mu).sum())

    def _keep_certificate(self, j: int, q: np.ndarray, mu: np.ndarray, share: float) -> None:
        """Keep the better of output ``j``'s stored certificate and ``q`` (whose share of the bound at
        ``mu`` is ``share``) for this ``mu``."""
        if share >= float(np.minimum(0.0, self.Q[j] - mu).sum()):
            self.Q[j] = q

    def _run_pricing(self, w: int, attempt: int) -> bool:
        """Solve worker ``w``'s pricing model (``attempt`` > 0: cold, alone; 2: by interior point);
        with lazy rows, add rows its solution violates and solve again until it violates none.
        True when it ends "Optimal"."""
        h = self.pricers[w]
        while True:
            if attempt:
                # a warm re-solve can end "Optimal" with row duals that certify far less than the
                # primal value (seen with HiGHS 1.16 after a cost change); re-solve cold, alone
                with _RETRY_LOCK:
                    h.clearSolver()
                    if attempt == 2:
                        h.setOptionValue("solver", "ipm")
                    h.run()
                    h.setOptionValue("solver", "choose")
            else:
                h.run()
            if h.modelStatusToString(h.getModelStatus()) != "Optimal":
                return False
            if self.lazy is None:
                return True
            new = self.lazy.violated(w, np.asarray(h.getSolution().row_dual, dtype=float))
            if not new.size:
                return True
            self.lazy.extend(h, w, new)
            attempt = 0  # the rows' columns enter nonbasic at zero: the basis stays valid, re-solve warm

    def _price_one(self, w: int, j: int, mu: np.ndarray, tol: float) -> tuple[int, np.ndarray | None]:
        h = self.pricers[w]
        g = self.G[:, j] - mu
        scale = float(np.max(np.abs(g)))
        if scale == 0.0:
            return j, None
        if self.lazy is not None:
            self.lazy.load(h, w, j)
        if self.dual_pricing:
            h.changeRowsBounds(self.m, np.arange(self.m, dtype=np.int32), -g / scale, np.full(self.m, np.inf))
        else:
            h.changeColsCost(self.m, np.arange(self.m, dtype=np.int32), g / scale)
        if self.bases[j] is not None:
            h.setBasis(self.bases[j])
        for attempt in range(3):
            self._cold_retries[w] += attempt > 0
            if not self._run_pricing(w, attempt):
                continue
            sol = h.getSolution()
            if self.dual_pricing:  # z: the row duals; y: the first E columns (lazy: the rows carried)
                z = np.clip(np.asarray(sol.row_dual, dtype=float), 0.0, None)
                y = (self.lazy.multipliers(w, np.asarray(sol.col_value, dtype=float)) if self.lazy is not None
                     else np.maximum(0.0, np.asarray(sol.col_value, dtype=float)[:self.E])) * scale
            else:
                z = np.clip(np.asarray(sol.col_value, dtype=float), 0.0, None)
                y = np.maximum(0.0, -np.asarray(sol.row_dual, dtype=float)) * scale  # mDP-row duals, >= 0
            q, bound = self._certificate(j, y, mu)
            if bound >= float(g @ z) - tol:
                break
        else:
            if h.modelStatusToString(h.getModelStatus()) != "Optimal":
                raise SolverError(f"pricing LP of output {int(self.kept[j])} ended with "
                                  f"{h.modelStatusToString(h.getModelStatus())}")
        self._keep_certificate(j, q, mu, bound)
        if self.lazy is not None:
            self.lazy.keep(h, w, j)
        else:
            self.bases[j] = h.getBasis()
        return j, z

    def price(self, js: np.ndarray, mu: np.ndarray, tol: float, deadline: float = float("inf"),
              transport: bool = False) -> list[tuple[int, np.ndarray | None]]:
        """Price outputs ``js`` at ``mu``; outputs not reached by ``deadline`` are skipped (their stored
        certificates stay, so every bound stays valid; the caller then stops on the time limit).

        ``transport``: first try the greedy transport plan of each output without a basis yet
        (:mod:`securelp.solvers.mdp.transport`, components of at most
        :data:`~securelp.solvers.mdp.transport.TRANSPORT_MAX_RECORDS` records). The plan serves what deficits
        it can (``partial``: what it leaves unserved counts against the output's share of the bound);
        an output whose share from it is at least ``-tol``, the tolerance its LP would be solved to,
        keeps that certificate and needs no LP, and is returned with ``None`` (no column), like an
        output whose LP found nothing. Stop 33: until then a plan had to serve every deficit, and at
        the RMP's duals an output in use is tight (reduced cost 0), so the plan failed by a hair;
        text 300 (every output in use) then certified none of its 783 pricings this way, and 783
        with partial plans (120 s -> 7 s).

        The outputs are priced along a chain of nearest neighbours (:func:`pricing_chain`, from
        ``js[0]``) cut into one stretch per worker: an output priced for the first time starts from
        the basis its worker left, a neighbour's, which is close to its own."""
        certified: list[tuple[int, np.ndarray | None]] = []
        if transport and js.size and self.m <= TRANSPORT_MAX_RECORDS:
            if self._transport is None:
                self._transport = TransportCertifier(self.A)
            left = []
            for j in js.tolist():
                if time.perf_counter() > deadline:
                    break  # the rest is skipped (the LPs below stop at the deadline too)
                if self.bases[j] is not None or (self.lazy is not None and self.lazy.saved[j] is not None):
                    # a warm LP costs about what a plan does (gaussian 1,000: about 5 ms each), and
                    # it also gives the exact bound; plans pay off for cold LPs (25 ms-0.3 s)
                    left.append(j)
                    continue
                y = self._transport.certify(mu - self.G[:, j], partial=True)
                if y is not None:
                    q, share = self._certificate(j, y, mu)
                    if share >= -tol:
                        self._keep_certificate(j, q, mu, share)
                        certified.append((j, None))
                        continue
                left.append(j)
            self.transport_certified += len(certified)
            js = np.asarray(left, dtype=np.int64)
            if not js.size:
                return certified
        nw = len(self.pricers)
        if self._features is None:
            self._features = output_features(self.G)
        parts = np.array_split(pricing_chain(self._features, js), nw)

        def work(w: int) -> list[tuple[int, np.ndarray | None]]:
            out = []
            for j in parts[w]:
                if time.perf_counter() > deadline:
                    break
                out.append(self._price_one(w, int(j), mu, tol))
            return out

        results = work(0) if self.pool is None else [r for part in self.pool.map(work, range(nw)) for r in part]
        self.lp_solves += len(results)
        return certified + results

    def verified_rows(self, lam: np.ndarray) -> tuple[np.ndarray, float]:
        """The RMP's mechanism for column weights ``lam``, repaired and verified."""
        Zc = np.zeros((self.m, self.Kc))
        for j in np.flatnonzero(lam > 0):
            Zc[:, self.col_owner[j]] += lam[j] * self.col_ray[j]
        return self._verified(Zc)

    def _verified(self, Zc: np.ndarray) -> tuple[np.ndarray, float]:
        """Rows ``m x K`` (zero in dropped outputs) from ``Zc`` on the kept outputs, repaired and
        verified, and their loss."""
        t = time.perf_counter()
        Z = np.zeros((self.m, self.K))
        Z[:, self.kept] = Zc
        # past the time limit the repair's mix comes after one closure round (a slightly higher loss)
        X, _ = repair_mechanism(Z, self.sub, self.deadline)  # type: ignore[arg-type]
        verify_mechanism(X, self.sub.dataset.distance, self.problem.eps, eta=self.problem.eta)
        cost = self.problem.cost[self.idx]
        self.rows_seconds = max(self.rows_seconds, time.perf_counter() - t)
        return X, float(np.sum(cost * X))

    def finish_by(self, deadline: float, reserve: float | None = None) -> float:
        """When the iterations must stop for the run to end by ``deadline``: what still runs after
        the last one (this component's verified rows, then the verification of the whole matrix)
        takes about ``reserve`` (default :data:`FINISH_RESERVE`) times the longest
        :meth:`_verified` so far."""
        return deadline - (FINISH_RESERVE if reserve is None else reserve) * self.rows_seconds

    def run(self, deadline: float, max_iterations: int, on_iter: Callable[[float, float], None],
            centre: np.ndarray | None = None, trust_centre: bool = False) -> tuple[np.ndarray, float, float, str, int]:
        """Iterate; returns ``(rows m x K verified, lower, upper, status, iterations)``.

        ``centre``: unit-row duals to start the stabilisation from (e.g. a PDLP start's); kept only
        when their bound from the stored certificates beats the trivial centre's, or always with
        ``trust_centre`` (the IPM start's: near-optimal duals whose stored certificates are weak only
        on the outputs it did not solve for, which the first round prices at the centre)."""
        # first stability centre: mu0_i = p_i min_k c_ik, where every reduced cost g_k - mu0 is >= 0, so
        # L(mu0) = sum mu0 exactly (the trivial bound) -- a sane point to smooth the RMP's duals towards
        mu_c: np.ndarray | None = self.G.min(axis=1)
        best_lb = float(mu_c.sum())
        price_centre = False  # first round: price every output at the given centre (its exact bound)
        if centre is not None:
            lb_centre = float(centre.sum() + self.open_shares(centre).sum())
            if lb_centre > best_lb or trust_centre:
                mu_c, best_lb = np.array(centre, dtype=float), lb_centre
                price_centre = True
        # the best certified lower bound (either Lagrangian bound; the stored certificates may come
        # from warm_start, and pricing replaces them output by output)
        best_bound = max(best_lb, float(self.Q.min(axis=0).sum()))
        upper, rows = np.inf, None
        status = "iteration_limit"
        alpha_next = self.alpha
        full = False  # partial pricing first: only outputs in use in the RMP or just entered
        recent = np.zeros(0, dtype=np.int64)
        box_center: np.ndarray | None = None
        width = 0.0
        self.deadline = deadline
        it = 0
        if self.start_rows is not None and time.perf_counter() < self.finish_by(deadline):
            # a start's repaired primal (the IPM's last round, PDLP's iterate) is an upper bound of its
            # own: when it already closes the gap on the start's bound, no master is solved at all
            # (gaussian 2,000: the IPM start's bounds were 2.6e-5 apart, and the first master solve
            # after it ran for 54 minutes without an iteration, stop 52)
            rows, upper = self._verified(self.start_rows)
            self.start_gap = (upper - best_bound) / max(abs(upper), 1e-300)
            logger.info("component of %d records: the start's repaired rows, loss %.10g, are %.3g above its bound",
                        self.m, upper, self.start_gap)
            on_iter(min(best_bound, upper), upper)
            if self.start_gap <= self.gap:
                return rows, min(best_bound, upper), upper, "optimal", 0
        try:
            if self.boxstep:
                _, obj0, lam0 = self.solve_master()
                # without the box the RMP is a restriction of the PMO: its mechanism is an upper bound
                # at once (kept when a later master solve reaches the time limit)
                rows, upper = self.verified_rows(lam0)
                width = max(abs(obj0), 1e-300) / self.m  # the average unit-row dual
                if price_centre:
                    # a first-order start's duals are close: a box of the gap spread over the records
                    width = min(width, max(obj0 - max(best_lb, best_bound), 1e-9 * abs(obj0)) / self.m)
                box_center = mu_c.copy()
                self.set_box(box_center, width)
            self.master.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX)  # warm re-solves from here on
            for it in range(1, max_iterations + 1):
                mu_r, obj_r, lam, box_center, width = self.solve_master_in_box(box_center, width)
                binding = box_center is not None and self.box_binding()
                lam = self.retire_columns(lam)
                scale = max(abs(obj_r), abs(upper) if np.isfinite(upper) else 0.0, 1e-300)
                tau, price_tol = self.tolerances(scale)
                alpha = alpha_next if mu_c is not None else 0.0
                mu_s = mu_r if alpha == 0.0 else alpha * mu_c + (1.0 - alpha) * mu_r
                if price_centre:
                    mu_s, alpha, full, price_centre = mu_c, 1.0, True, False
                cheap = self.open_shares(mu_s)
                candidates = cheap < -tau
                if not full:
                    in_use = np.zeros(self.Kc, dtype=bool)
                    in_use[np.asarray(self.col_owner, dtype=np.int64)[lam > 0]] = True
                    in_use[recent] = True
                    candidates &= in_use
                js = np.flatnonzero(candidates)
                js = js[np.argsort(cheap[js])]
                out_of_time = time.perf_counter() > self.finish_by(deadline)
                new_k: list[int] = []
                new_v: list[np.ndarray] = []
                if js.size and not out_of_time:
                    for j, z in self.price(js, mu_s, price_tol, self.finish_by(deadline), transport=True):
                        if z is None or z.sum() <= 0:
                            continue
                        rc = float((self.G[:, j] - mu_r) @ z)
                        if rc < -1e-3 * tau * max(1.0, float(z.max())) and rc < -self.enter_tol * float(z.sum()):
                            new_k.append(j)
                            new_v.append(z / z.sum())
                    cheap = self.open_shares(mu_s)
                lb = float(mu_s.sum() + cheap.sum())
                # the Lagrangian bound that relaxes the mDP rows instead (module docstring): for the stored
                # y_k >= 0, OPT >= sum_i min_k (g_k + A'y_k)_i; never below lb, and it needs no mu
                lb_y = float(self.Q.min(axis=0).sum())
                best_bound = max(best_bound, lb, lb_y)
                logger.debug("colgen it %d: rmp %.10g, lb(mu_s) %.10g, lb(y) %.10g, alpha %.2f, box %s %.3g, %s pricing %d, entered %d, "
                             "columns %d", it, obj_r, lb, lb_y, alpha, binding, width, "full" if full else "partial",
                             js.size if not out_of_time else 0, len(new_k), len(self.col_owner))
                if lb > best_lb:
                    best_lb, mu_c = lb, mu_s.copy()
                    if box_center is not None:
                        box_center = mu_c.copy()
                        self.set_box(box_center, width)
                converged = not new_k and alpha == 0.0 and full and not binding
                near = (obj_r - best_bound) / scale <= self.gap and not binding
                out_of_time = out_of_time or time.perf_counter() > self.finish_by(deadline)
                stop_now = near or converged or out_of_time or it == max_iterations
                # every 5th iteration the upper bound is refreshed, unless that would eat the time
                # the end needs (10,000 records: 28 s per repair and verification, stop 35)
                if stop_now or (it % 5 == 0 and time.perf_counter() + self.rows_seconds < self.finish_by(deadline)):
                    X, ub = self.unboxed_rows(box_center, width, None if binding else lam)
                    if ub < upper:
                        upper, rows = ub, X
                on_iter(best_bound, upper)
                if np.isfinite(upper) and (upper - best_bound) / max(abs(upper), 1e-300) <= self.gap:
                    status = "optimal"
                    break
                if out_of_time:
                    status = "time_limit"
                    break
                if converged and box_center is not None:
                    # no column at the RMP's own duals but the gap is open: the pricing certificates found
                    # at boxed duals were weak (seen at eps d ~ 10); drop the box and go on unstabilised
                    self.set_box(None, 0.0)
                    box_center = None
                    self.boxstep = False
                    continue
                if converged and self.master_tol > STALL_TOLERANCE:
                    # nothing enters at the RMP's duals, yet the bound there is short of the gap: at a
                    # loose tolerance the many outputs whose columns price just above the entering
                    # threshold add up (up to outputs x records x the threshold); tighten and go on
                    self.tighten_master()
                    continue
                if converged:
                    status = "stalled"
                    break
                if not new_k:
                    if alpha > 0.0:
                        alpha_next = 0.0  # mis-price: next round at the RMP's own duals
                    elif not full:
                        full = True  # nothing more among the outputs in use: price every output
                    elif binding and box_center is not None:
                        width *= 4.0  # no column at the box's optimum: widen the box
                        self.set_box(box_center, width)
                    continue
                alpha_next = self.alpha
                full = False
                recent = np.asarray(sorted(set(new_k)), dtype=np.int64)
                self.add_columns(new_k, new_v)
            if rows is None:
                rows, upper = self.unboxed_rows(box_center, width)
        except _OutOfTime:
            # the deadline passed inside a master solve: the best verified rows so far, else a fallback;
            # every bound stays valid (it comes from the stored pricing certificates)
            logger.info("component of %d records: a master solve reached the time limit", self.m)
            status = "time_limit"
            if rows is None:
                rows, upper = self.fallback_rows()
        return rows, min(best_bound, upper), upper, status, it


def solve_colgen(problem: PMOProblem, *, gap: float = 1e-4, max_iterations: int = 1000,
                 time_limit: float = float("inf"), workers: int = 2, smoothing: float = 0.0, boxstep: bool = True,
                 exact_check: bool = False, method_name: str = "colgen", dual_ascent: float | None = None,
                 first_order: str = "auto", dominance: bool = True,
                 progress: Callable[[IterationRecord], None] | None = None,
                 status: Callable[[str], None] | None = None) -> MechanismResult:
    """Solve the PMO by column generation over output columns, component by component.

    Returns a verified mechanism with a certified gap (see the module docstring).

    ``dominance``: drop the outputs :func:`securelp.solvers.mdp.transport.cone_dominated` proves dominated
    (components of at most :data:`~securelp.solvers.mdp.transport.TRANSPORT_MAX_RECORDS` records; under a
    time limit for at most :data:`DOMINANCE_SHARE` of it per component).

    ``dual_ascent`` is the wall-clock budget in seconds, per component, of
    :func:`smoothed_dual_ascent` run before the column generation; its certificates seed the
    stored ones (a strong first lower bound on large components, where a full pricing round
    takes minutes). ``None`` (default): a fifth of the time limit (60 s without one) on
    components with more than :data:`DUAL_ASCENT_MIN_SIZE` records x kept outputs, none
    elsewhere; ``0``: never.

    ``progress`` gets every column-generation iteration's bounds (whole problem); ``status`` gets a
    line of text about the slow parts before them on a large component (the dominance search, the
    start and its phases, every IPM iteration), for a terminal.

    Raises
    ------
    InputError
        ``gap`` outside ``(0, 1)``, ``max_iterations < 1`` or ``smoothing`` outside ``[0, 1)``.
    VerificationError
        The assembled mechanism failed verification.
    """
    if not 0 < gap < 1:
        raise InputError(f"the relative gap must be in (0, 1), got {gap}")
    require_lp_factors(problem)
    if int(max_iterations) < 1:
        raise InputError(f"the iteration cap must be >= 1, got {max_iterations}")
    if not 0.0 <= smoothing < 1.0:
        raise InputError(f"the smoothing weight must be in [0, 1), got {smoothing}")
    if dual_ascent is not None and not (math.isfinite(dual_ascent) and dual_ascent >= 0):
        raise InputError(f"the dual-ascent budget must be a number of seconds >= 0, got {dual_ascent}")
    if first_order not in FIRST_ORDER_METHODS:
        raise InputError(f"the first-order start must be one of {', '.join(FIRST_ORDER_METHODS)}, got {first_order!r}")
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    n, K = problem.n, problem.K
    G = problem.cost
    comps = sorted(problem.graph.component_members(), key=lambda g: (g.size, int(g[0])))
    all_rows = mdp_rows_matrix(problem)  # every component's rows are cut from it
    trivial = np.array([float(G[c].min(axis=1).sum()) for c in comps])
    lowers = trivial.copy()
    uppers = np.full(len(comps), np.inf)
    Z = np.zeros((n, K))
    history: list[IterationRecord] = []
    statuses: list[str] = []
    lp_solves = 0
    transport_certified = 0
    cold_retries = 0
    master_retries = 0
    master_tightenings = 0
    n_columns = 0
    columns_retired = 0
    expmech_components = 0
    kept_sizes: list[int] = []
    dominated: list[dict[str, float]] = []
    ascent: list[dict[str, float]] = []
    lazy_rows: list[dict[str, float]] = []
    total_it = 0

    def record(ci: int, lo: float, up: float) -> None:
        nonlocal total_it
        total_it += 1
        others = np.arange(len(comps)) != ci
        lw = float(lowers[others].sum() + lo)
        uw = float(uppers[others].sum() + up)
        history.append(IterationRecord(total_it, lw, uw, time.perf_counter() - t0))
        if progress is not None:
            progress(history[-1])

    for ci, idx in enumerate(comps):
        if idx.size == 1:
            i = int(idx[0])
            k = int(np.argmin(G[i]))
            Z[i, k] = 1.0
            lowers[ci] = uppers[ci] = float(G[i, k])
            kept_sizes.append(1)
            continue
        kept = undominated_outputs(G[idx], min(deadline, time.perf_counter() + DOMINANCE_SHARE * time_limit))
        A_c = component_rows(problem, idx, all_rows)
        say = status if status is not None and idx.size >= STATUS_MIN_RECORDS else _say_nothing
        certifier = None
        if dominance and kept.size > 1 and idx.size <= TRANSPORT_MAX_RECORDS:
            say(f"component of {idx.size} records: looking for dominated outputs among {kept.size}")
            td = time.perf_counter()
            certifier = TransportCertifier(A_c)
            Gc = G[np.ix_(idx, kept)]
            by, visited = cone_dominated(Gc, A_c, certifier, output_features(Gc),
                                         min(deadline, td + DOMINANCE_SHARE * time_limit))
            alive = by < 0
            dominated.append({"records": int(idx.size), "outputs": int(kept.size), "removed": int((~alive).sum()),
                              "visited": int(visited), "seconds": time.perf_counter() - td})
            logger.info("component of %d records: %d of %d outputs dominated in the cone's dual order (%.1f s)",
                        idx.size, dominated[-1]["removed"], kept.size, dominated[-1]["seconds"])
            kept = kept[alive]
        kept_sizes.append(int(kept.size))
        cg = _ComponentCG(problem, idx, kept, workers, gap, smoothing, boxstep, A=A_c, transport=certifier)
        cg.say = say
        try:
            method, budget = _choose_start(first_order, idx.size, cg.E, kept.size, time_limit, dual_ascent)
            centre = None
            if budget > 0:
                ta = time.perf_counter()
                entry: dict[str, Any] = {"records": int(idx.size), "method": method}
                cg.say(f"component of {idx.size} records, {kept.size} outputs: {method} start"
                       + (f" (at most {budget:.0f} s)" if method != "ipm" or math.isfinite(time_limit) else ""))
                if method == "pdlp":
                    screen = PDLP_SCREEN_SHARE * budget
                    polish = PDLP_POLISH_SHARE * (budget - screen)
                    start = pdlp_start(cg.G, cg.A, min(deadline, ta + budget - screen - polish),
                                       tolerance=max(gap, 1e-7))
                    if start is not None:
                        q, its = start.Q, start.iterations
                        end = min(deadline, ta + budget - screen)
                        if start.status == "Optimal":  # PDLP converged early: the ascent gets at most its time
                            end = min(end, 2.0 * time.perf_counter() - ta)
                        if polish > 0 and start.Y is not None and time.perf_counter() < end:
                            q, entry["polish"] = _polish(cg, start, end)
                        start.Y = None
                        entry["columns"] = cg.add_primal_columns(start.Z)
                        entry["status"] = start.status
                        centre = start.mu
                        if screen > 0 and start.status != "Optimal" and time.perf_counter() < deadline:
                            entry["screened"] = _screened_primal(cg, q, min(deadline, time.perf_counter() + screen),
                                                                 max(gap, 1e-7))
                    else:
                        q, its = None, 0
                elif method == "screened":
                    q, its, entry["screened"] = _screened_start(cg, ta, budget, deadline, max(gap, 1e-7))
                elif method == "ipm":
                    start, centre = _ipm_start_columns(cg, entry, ta, budget, deadline, gap,
                                                       not math.isfinite(time_limit))
                    q, its = start.Q, start.iterations
                else:
                    q, its = smoothed_dual_ascent(cg.G, cg.A, min(deadline, ta + budget), threads=len(cg.pricers))
                if q is not None:
                    bound = float(q.min(axis=1).sum())
                    cg.warm_start(q)
                    entry.update(iterations=its, seconds=time.perf_counter() - ta, bound=bound)
                    ascent.append(entry)
                    logger.info("component of %d records: %s start, %d iterations, bound %.10g", idx.size, method,
                                its, bound)
            on_iter = functools.partial(record, ci)
            switch = (first_order == "auto" and dual_ascent is None and budget == 0 and cg.lazy is None
                      and idx.size >= IPM_SWITCH_MIN_RECORDS and int(max_iterations) > IPM_SWITCH_ITERATIONS
                      and _ipm_outputs(idx.size, cg.E, kept.size) > 0)
            rows, lo, up, st, its = cg.run(deadline, IPM_SWITCH_ITERATIONS if switch else int(max_iterations), on_iter,
                                           centre=centre, trust_centre=method == "ipm")
            if budget > 0 and q is not None and cg.start_gap is not None:
                entry["start_gap"] = cg.start_gap  # its repaired primal over its bound (run() stops at once within the gap)
            if switch and st == "iteration_limit" and time.perf_counter() < deadline:
                rows, lo, up, st, its = _switch_to_ipm(cg, rows, lo, up, its, deadline, time_limit, gap,
                                                       int(max_iterations), on_iter, ascent)
            if st != "optimal" and (em := _expmech_rows(problem, idx)) is not None:
                loss = float(np.sum(G[idx] * em))
                if loss < up:
                    logger.info("component of %d records: the exponential mechanism's rows (loss %.10g) replace the "
                                "column generation's (%.10g)", idx.size, loss, up)
                    rows, up = em, loss
                    expmech_components += 1
                    on_iter(lo, up)
        finally:
            cg.close()
        lp_solves += cg.lp_solves
        transport_certified += cg.transport_certified
        cold_retries += cg.cold_retries
        master_retries += cg.master_retries
        master_tightenings += cg.master_tightenings
        n_columns += cg.columns_added
        columns_retired += cg.columns_retired
        if cg.lazy is not None:
            lazy_rows.append({"records": int(cg.m), "mdp_rows": int(cg.E), "start_rows": int(cg.lazy.start.size),
                              "mean_rows_carried": cg.lazy.rows_carried / max(cg.lazy.solves, 1),
                              "separation_rounds": cg.lazy.separation_rounds})
        Z[idx] = rows
        lowers[ci], uppers[ci] = max(lo, trivial[ci]), up
        statuses.append(st)
        logger.info("component of %d records, %d kept outputs: %s after %d iterations", idx.size, kept.size, st, its)
    # the components' rows were each repaired and verified: checked again as a whole, not repaired again
    X, report, info = finalize_mechanism(Z, problem, exact=exact_check, verified_parts=True)
    upper = problem.objective_of(X)
    lower = min(float(lowers.sum()), upper)
    rel_gap = (upper - lower) / max(abs(upper), 1e-300)
    if rel_gap <= gap:
        status = "optimal"
    elif "time_limit" in statuses:
        status = "time_limit"
    elif "stalled" in statuses:
        status = "stalled"
    else:
        status = "iteration_limit"
    if not history:
        history.append(IterationRecord(1, lower, upper, time.perf_counter() - t0))
    sizes = [int(c.size) for c in comps]
    return MechanismResult(
        method=method_name, status=status, mechanism=X, objective=upper, lower_bound=lower, upper_bound=upper,
        rel_gap=rel_gap, iterations=len(history), time_s=time.perf_counter() - t0, verification=report,
        history=tuple(history),
        details={"n_columns": n_columns, "columns_retired": columns_retired, "pricing_lp_solves": lp_solves, "transport_certified": transport_certified,
                 "pricing_cold_retries": cold_retries,
                 "master_retries": master_retries, "master_tightenings": master_tightenings,
                 "component_sizes": sizes, "expmech_components": expmech_components,
                 "kept_outputs": kept_sizes, "dominated_outputs": dominated, "smoothing": smoothing,
                 "dual_ascent": ascent, "lazy_rows": lazy_rows, **info},
    )


def _expmech_rows(problem: PMOProblem, idx: np.ndarray) -> np.ndarray | None:
    """The exponential mechanism's rows (Qiu Eq. 47) for the records ``idx``, over every output:
    private on every pair, so a component's rows where its column generation stopped above their
    loss (the 100x100 grid with the Gowalla prior at a 300 s limit returned 23.03 where these give
    3.953; stop 46). ``None`` where a row's far entries would underflow beside a neighbour's."""
    from securelp.solvers.mdp.expmech import private_exponential_mechanism

    return private_exponential_mechanism(np.asarray(problem.dataset.distance)[np.ix_(idx, problem.outputs)],
                                         problem.eps)


def _polish(cg: _ComponentCG, start: FirstOrderStart, deadline: float) -> tuple[np.ndarray, dict[str, float]]:
    """Go on from a PDLP start's mDP-row duals with :func:`smoothed_dual_ascent` until ``deadline``;
    returns the better certificate ``Q`` and what it did (iterations, seconds, bounds)."""
    before = float(start.Q.min(axis=1).sum())
    m, K = cg.G.shape
    # the gap PDLP left, estimated by its own (unrepaired, maybe slightly infeasible) primal value
    gap_left = max(float(np.sum(cg.G * start.Z)) - before, 1e-3 * abs(before))
    beta = POLISH_SMOOTHING * gap_left / (m * math.log(max(K, 2)))
    return _ascend_from(cg, start.Q, start.Y.T, beta, deadline, "after PDLP")


def _ascend_from(cg: _ComponentCG, q_before: np.ndarray, Y0: np.ndarray, beta: float, deadline: float,
                 what: str) -> tuple[np.ndarray, dict[str, float]]:
    """:func:`smoothed_dual_ascent` from duals ``Y0`` (mDP rows x outputs) with first smoothing ``beta``
    until ``deadline``; returns the better of its certificate and ``q_before`` (the certificate of
    ``Y0``, or of an earlier iterate) and what it did (iterations, seconds, bounds)."""
    t = time.perf_counter()
    before = float(q_before.min(axis=1).sum())
    q, its = smoothed_dual_ascent(cg.G, cg.A, deadline, Y0=Y0, beta=beta, threads=len(cg.pricers))
    after = float(q.min(axis=1).sum())
    if after < before:  # the ascent starts from Y0 rounded to float32: never lose a hair of the bound
        q, after = q_before, before
    logger.info("component of %d records: smoothed ascent %s, %d iterations, bound %.10g -> %.10g", cg.m, what, its,
                before, after)
    return q, {"iterations": its, "seconds": time.perf_counter() - t, "bound_before": before, "bound": after}


def _screened_start(cg: _ComponentCG, ta: float, budget: float, deadline: float, tolerance: float
                    ) -> tuple[np.ndarray, int, dict[str, Any]]:
    """The ``screened`` start begun at ``ta`` with ``budget`` seconds: the ascent
    (:data:`SCREEN_ASCENT_SHARE`), PDLP on the outputs it screens (:func:`_screened_primal`), then
    the ascent again from its last iterate and smoothing (:data:`SCREEN_RESUME_SHARE`). Returns the
    best certificate ``Q``, the ascents' iterations and what the screened PDLP did (with
    ``ascent_after`` when the second ascent ran)."""
    end = min(deadline, ta + budget)
    resume = SCREEN_RESUME_SHARE * budget
    state: dict[str, Any] = {}
    q, its = smoothed_dual_ascent(cg.G, cg.A, min(deadline, ta + SCREEN_ASCENT_SHARE * budget),
                                  state=state if resume > 0 else None, threads=len(cg.pricers))
    info = _screened_primal(cg, q, min(deadline, ta + budget - resume), tolerance)
    if resume > 0 and "Y" in state and time.perf_counter() < end:
        q, info["ascent_after"] = _ascend_from(cg, q, state.pop("Y"), state["beta"], end, "after the screened PDLP")
        its += info["ascent_after"]["iterations"]
    return q, its, info


def _screened_primal(cg: _ComponentCG, Q: np.ndarray, deadline: float, tolerance: float) -> dict[str, Any]:
    """PDLP on the component LP restricted to the outputs :func:`screen_outputs` picks from ``Q``
    (records x outputs), until ``deadline``; its primal columns, repaired, enter the master (the
    restricted LP's mechanisms are mechanisms of the whole: the other outputs get no mass). Returns
    what it did (``outputs``, ``iterations``, ``seconds``, ``status``, ``columns``). PDLP's unit-row
    duals are not used as a stability centre: they are the restricted LP's, and on a 51-record
    component with 10 of 60 outputs screened the column generation around them used up its 1,000
    iterations at a gap of 1e-2 (from the ascent's bound alone it converges)."""
    t = time.perf_counter()
    n = min(SCREEN_MAX_OUTPUTS, cg.Kc)
    while n > 1 and _pdlp_too_large((cg.m + 2 * cg.E) * n):
        n //= 2
    out: dict[str, Any] = {"outputs": 0, "iterations": 0, "status": "none", "columns": 0}
    if why := _pdlp_too_large((cg.m + 2 * cg.E) * n):
        logger.info("component of %d records: no PDLP even on one output (%s)", cg.m, why)
        out["seconds"] = time.perf_counter() - t
        return out
    S = screen_outputs(Q, n)
    start = pdlp_start(cg.G[:, S], cg.A, deadline, tolerance=tolerance, iteration_limit=SCREEN_PDLP_ITERATIONS)
    out["outputs"] = int(S.size)
    if start is not None:
        Z = np.zeros((cg.m, cg.Kc))
        Z[:, S] = start.Z
        out.update(iterations=start.iterations, status=start.status, columns=cg.add_primal_columns(Z))
    out["seconds"] = time.perf_counter() - t
    logger.info("component of %d records: PDLP on %d screened outputs, %d iterations (%s), %d columns", cg.m,
                S.size, out["iterations"], out["status"], out["columns"])
    return out


def _ipm_outputs(m: int, E: int, Kc: int, cap: int | None = None) -> int:
    """How many outputs an IPM round may hold on a component of ``m`` records, ``E`` mDP rows and
    ``Kc`` kept outputs: ``cap`` (:data:`IPM_MAX_OUTPUTS` by default; at most ``Kc``), halved until
    the IPM fits in :data:`IPM_MEMORY_SHARE` of the memory available; 0 when not even one output
    does, or when the ascent that screens them (over all ``Kc``) does not fit (:func:`_ascent_too_large`)."""
    from securelp.solvers.mdp.ipm import memory_needed

    if _ascent_too_large(E, Kc):
        return 0
    n = min(IPM_MAX_OUTPUTS if cap is None else cap, Kc)
    avail = available_memory()
    if avail is None:
        return n
    while n > 1 and memory_needed(m, n, E) > IPM_MEMORY_SHARE * avail:
        n //= 2
    return n if memory_needed(m, n, E) <= IPM_MEMORY_SHARE * avail else 0


def _ascent_too_large(E: int, Kc: int) -> str:
    """Why :func:`smoothed_dual_ascent` over ``E`` mDP rows and ``Kc`` outputs must not run ('' when
    it may): its iterates would not fit in :data:`ASCENT_MEMORY_SHARE` of the memory available."""
    short = memory_shortfall(ASCENT_BYTES_PER_ROW_OUTPUT * E * Kc, available_memory(), ASCENT_MEMORY_SHARE)
    return f"{E:,} mDP rows x {Kc:,} outputs need about {short}" if short else ""


def _ipm_start(cg: _ComponentCG, ta: float, budget: float, deadline: float, gap: float, unlimited: bool
               ) -> tuple[FirstOrderStart, dict[str, Any]]:
    """The ``ipm`` start begun at ``ta``: :data:`IPM_ASCENT_ITERATIONS` of the smoothed ascent (under a
    time limit at most :data:`IPM_ASCENT_SHARE` of ``budget`` and :data:`IPM_ASCENT_SECONDS`), then
    rounds of output generation with :func:`securelp.solvers.mdp.ipm.structured_ipm` as the restricted solver:

    1. the IPM solves the component LP over the outputs ``S`` (first the :data:`IPM_MAX_OUTPUTS`
       the ascent's certificate screens, :func:`screen_outputs`; fewer when their inverses would not
       fit in memory) until its gap is :data:`IPM_GAP_SHARE` of the target, or the time is up
       (``unlimited``: no time limit, only the deadline);
    2. every other output whose stored certificate does not already certify it at the IPM's
       unit-row duals ``mu`` is priced there (:meth:`_ComponentCG.price`): this gives the exact
       Lagrangian bound ``L(mu)``, a valid lower bound on the whole component LP;
    3. when that bound closes the gap, or no output is violated, or the next round would not fit
       in time or memory (:data:`IPM_MAX_GROWN_OUTPUTS`) or :data:`IPM_MAX_ROUNDS` is reached, stop;
       else ``S`` loses the outputs the round left unused (:func:`prune_outputs`) and gains the
       violated ones (most violated first), and the next round starts cold.

    Each of the first :data:`IPM_PROBE_ROUNDS` rounds also prices once on the way, when its restricted
    gap first falls to :data:`IPM_PROBE_GAP`: when outputs are violated there and the next round fits,
    the round stops at once and the next one starts with them (gaussian 1,000: round 1 stopped after
    73 of about 125 iterations, with 31 outputs to add). The later rounds run to the gap.

    The certificate is the last IPM's on ``S``, the pricing's or the ascent's on the others (all
    from multipliers >= 0, so every column is valid); the ``mu`` of the best bound becomes the
    stability centre and the last round's primal iterate, repaired, enters the master. When that
    repaired iterate's loss is within the gap of the bound, :meth:`_ComponentCG.run` stops at once
    (no master solve); else the column generation certifies (or brings in) what the rounds left open."""
    from securelp.solvers.mdp.ipm import structured_ipm

    # without a time limit only the iterations bound the screen, so that it is the same on any machine
    ascent_end = deadline if unlimited else ta + min(IPM_ASCENT_SECONDS, IPM_ASCENT_SHARE * budget)
    q, its = smoothed_dual_ascent(cg.G, cg.A, min(deadline, ascent_end), max_iterations=IPM_ASCENT_ITERATIONS,
                                  threads=len(cg.pricers))
    info: dict[str, Any] = {"ascent_iterations": its, "ascent_seconds": time.perf_counter() - ta,
                            "ascent_bound": float(q.min(axis=1).sum())}
    # without the IPM: the ascent's certificate, the trivial centre, no columns
    ascent_only = FirstOrderStart(Q=q, mu=cg.G.min(axis=1), Z=np.zeros_like(cg.G), iterations=its, status="skipped")
    n = _ipm_outputs(cg.m, cg.E, cg.Kc)
    cg.say(f"component of {cg.m} records: IPM start, screening ascent done ({its} iterations)")
    if n == 0:
        logger.info("component of %d records: no IPM start (not even one output fits in memory)", cg.m)
        info.update(outputs=0, iterations=0, status="skipped", rounds=[])
        return ascent_only, info
    cap = max(n, _ipm_outputs(cg.m, cg.E, cg.Kc, IPM_MAX_GROWN_OUTPUTS))
    S = screen_outputs(q, n)
    end = deadline if unlimited else min(deadline, ta + budget)
    cg.warm_start(q)
    rounds: list[dict[str, Any]] = []
    best: tuple[float, np.ndarray] | None = None
    Z = np.zeros_like(cg.G)
    total = 0
    status = "skipped"

    def summary(found: dict[str, Any]) -> dict[str, Any]:  # what a pricing reports (not its bookkeeping)
        return {k: v for k, v in found.items() if k not in ("js", "complete")}

    def next_fits(t_round: float, S: np.ndarray, grown: int, share: float) -> bool:
        """Whether a round on ``grown`` outputs fits before ``end``: the IPM's time is linear in
        the outputs, and the round begun at ``t_round`` on ``S`` has done ``share`` of its work."""
        now = time.perf_counter()
        return unlimited or now + (now - t_round) / share * grown / S.size <= end

    def price_at(mu: np.ndarray, S: np.ndarray, primal: float) -> dict[str, Any]:
        """Price, at ``mu``, the outputs outside ``S`` that their stored certificates leave open;
        the Lagrangian bound there and the violated outputs, most violated first."""
        nonlocal best
        tau, tol = cg.tolerances(max(abs(primal), 1e-300))
        cheap = cg.open_shares(mu)
        outside = np.ones(cg.Kc, dtype=bool)
        outside[S] = False
        js = np.flatnonzero(outside & (cheap < -tau))
        js = js[np.argsort(cheap[js])]
        tp = time.perf_counter()
        cg.say(f"component of {cg.m} records: IPM round {len(rounds) + 1}, pricing {js.size} other outputs")
        priced = cg.price(js, mu, tol, end, transport=True) if js.size else []
        violated = sorted((float((cg.G[:, j] - mu) @ zj), j) for j, zj in priced if zj is not None)
        violated = [(rc, j) for rc, j in violated if rc < -tau]
        lower = float(mu.sum() + cg.open_shares(mu).sum())
        if best is None or lower > best[0]:
            best = (lower, mu.copy())
        return {"priced": len(priced), "pricing_seconds": time.perf_counter() - tp, "violated": len(violated),
                "lower_bound": lower, "complete": len(priced) == js.size, "js": [j for _, j in violated]}

    while True:
        t_round = time.perf_counter()
        probed: dict[str, Any] = {}

        def probe(mu: np.ndarray, live: np.ndarray, S: np.ndarray = S, t_round: float = t_round,
                  probed: dict[str, Any] = probed) -> bool:
            # halfway (in gap) through the round: are outputs missing? then restart with them now
            # rather than finish a restricted LP that lacks them (the round so far is taken as half
            # of its time when judging whether the next round fits); the outputs pruned on the way
            # are outside the LP, priced like the others, and make room under the cap
            inside = S[live]
            if len(rounds) + 1 > IPM_PROBE_ROUNDS or len(rounds) + 1 >= IPM_MAX_ROUNDS or inside.size >= cap:
                return False
            probed.update(price_at(mu, inside, float(cg.G[:, inside].min(axis=1).sum())))
            fits = next_fits(t_round, S, min(inside.size + probed["violated"], cap), 0.5)
            return bool(probed["violated"]) and probed["complete"] and fits

        def note(it: int, primal: float, bound: float, r: int = len(rounds) + 1, k: int = S.size) -> None:
            cg.say(f"component of {cg.m} records: IPM round {r} on {k} outputs, iteration {it}, restricted LP "
                   f"in [{bound:.8g}, {primal:.8g}]")

        res = structured_ipm(cg.G[:, S], cg.A, end, tolerance=IPM_GAP_SHARE * gap, probe_gap=IPM_PROBE_GAP,
                             probe=probe, threads=len(cg.pricers), on_iteration=note, prune_below=IPM_PRUNE_BELOW,
                             prune_gap=IPM_PRUNE_GAP if S.size >= cap else 0.0)
        total += res.iterations
        if res.iterations == 0:  # no time left for a step: its start point would only weaken the certificate
            break
        status = res.status
        cg.Q[S] = (cg.G[:, S] + np.asarray(cg.A.T @ res.Y)).T  # valid whatever the stop (Y >= 0)
        if res.status != "probed" or all(r["status"] == "probed" for r in rounds):
            # the primal iterate of the last finished round (of a probed one only while none finished)
            Z = np.zeros_like(cg.G)
            Z[:, S] = res.Z
        # the outputs pruned during the round left its LP: from here on they are outside it
        live = np.setdiff1d(np.arange(S.size), res.pruned)
        S_all, S = S, S[live]
        found = probed if res.status == "probed" else price_at(res.mu, S, res.primal)
        rounds.append({"outputs": int(S_all.size), "iterations": res.iterations, "status": res.status,
                       "seconds": res.seconds, "restricted_bound": res.bound, "restricted_primal": res.primal,
                       "pruned_in_round": int(res.pruned.size), **summary(found)})
        if probed and res.status != "probed":
            rounds[-1]["probe"] = summary(probed)
        logger.info("component of %d records: IPM round %d on %d outputs (%d left on the way), %d iterations (%s), "
                    "%.1f s, restricted LP in [%.10g, %.10g]; priced %d outputs in %.1f s, %d violated, bound %.10g",
                    cg.m, len(rounds), S_all.size, res.pruned.size, res.iterations, res.status, res.seconds, res.bound,
                    res.primal, found["priced"],
                    found["pricing_seconds"], found["violated"], found["lower_bound"])
        # the next round: this one's outputs still in use, and the violated ones
        kept_S = prune_outputs(res.Z[:, live], S, IPM_PRUNE_BELOW)
        rounds[-1]["pruned"] = int(S.size - kept_S.size)
        room = cap - kept_S.size
        grown = np.union1d(kept_S, np.array(found["js"][:room], dtype=S.dtype))
        if res.status == "probed":
            S = grown
            continue
        closed = res.primal - found["lower_bound"] <= gap * max(abs(res.primal), 1e-300)
        fits = next_fits(t_round, S, grown.size, 1.0)
        if (closed or not found["violated"] or not found["complete"] or room <= 0 or len(rounds) >= IPM_MAX_ROUNDS
                or not fits or res.status in ("time_limit", "numerical")):
            break
        S = grown
    info.update(outputs=int(S.size), iterations=total, status=status, rounds=rounds,
                seconds=float(sum(r["seconds"] for r in rounds)))
    if best is None:
        logger.info("component of %d records: no time for an IPM step", cg.m)
        return ascent_only, info
    info.update(restricted_bound=rounds[-1]["restricted_bound"], restricted_primal=rounds[-1]["restricted_primal"],
                lower_bound=best[0])
    return FirstOrderStart(Q=np.ascontiguousarray(cg.Q.T), mu=best[1], Z=Z, iterations=its + total, status=status), info


def _ipm_start_columns(cg: _ComponentCG, entry: dict[str, Any], ta: float, budget: float, deadline: float,
                       gap: float, unlimited: bool) -> tuple[FirstOrderStart, np.ndarray | None]:
    """:func:`_ipm_start`, its report in ``entry["ipm"]`` and its last primal iterate's columns in the
    master (``entry["columns"]``); returns the start and the stability centre it gives (its best
    bound's ``mu``; None when it was skipped)."""
    start, entry["ipm"] = _ipm_start(cg, ta, budget, deadline, gap, unlimited)
    if start.status == "skipped":
        return start, None
    entry["columns"] = cg.add_primal_columns(start.Z)
    return start, start.mu


def _switch_to_ipm(cg: _ComponentCG, rows: np.ndarray, lo: float, up: float, its: int, deadline: float,
                   time_limit: float, gap: float, max_iterations: int, on_iter: Callable[[float, float], None],
                   ascent: list[dict[str, Any]]) -> tuple[np.ndarray, float, float, str, int]:
    """The ``ipm`` start on a component whose column generation has run :data:`IPM_SWITCH_ITERATIONS`
    iterations without closing the gap (``rows``, ``lo``, ``up``: what they gave), then the column
    generation again from its columns and duals, the columns found so far kept. Returns what
    :meth:`_ComponentCG.run` does, with the better bounds and rows of the two runs and the
    iterations of both."""
    ta = time.perf_counter()
    unlimited = not math.isfinite(time_limit)
    budget = 300.0 if unlimited else SCREEN_BUDGET_SHARE * (deadline - ta)
    cg.say(f"component of {cg.m} records: the column generation has not closed the gap after {its} iterations: "
           "IPM start")
    logger.info("component of %d records: gap %.3g after %d column-generation iterations: IPM start", cg.m,
                (up - lo) / max(abs(up), 1e-300), its)
    entry: dict[str, Any] = {"records": int(cg.m), "method": "ipm", "after_iterations": int(its)}
    start, centre = _ipm_start_columns(cg, entry, ta, budget, deadline, gap, unlimited)
    bound = float(start.Q.min(axis=1).sum())
    entry.update(iterations=start.iterations, seconds=time.perf_counter() - ta, bound=bound)
    ascent.append(entry)
    logger.info("component of %d records: ipm start, %d iterations, bound %.10g", cg.m, start.iterations, bound)
    rows2, lo2, up2, st, its2 = cg.run(deadline, max_iterations - its, on_iter, centre=centre, trust_centre=True)
    if cg.start_gap is not None:
        entry["start_gap"] = cg.start_gap
    if up2 <= up:
        rows, up = rows2, up2
    lo = max(lo, lo2)
    if (up - lo) / max(abs(up), 1e-300) <= gap:
        st = "optimal"
    return rows, min(lo, up), up, st, its + its2


def _choose_start(first_order: str, m: int, E: int, Kc: int, time_limit: float, dual_ascent: float | None
                  ) -> tuple[str, float]:
    """The first-order start of a component (``m`` records, ``E`` mDP rows, ``Kc`` kept outputs) and
    its budget in seconds (0: none).

    ``auto`` takes ``pdlp`` without a time limit, and under one when its PDLP on the whole LP gets at
    least :data:`AUTO_PDLP_MIN_ITERATIONS` expected iterations; else ``screened`` (gaussian 1,000, side
    by side, one core each, stop 17: the PDLP start, with its screened part, against the screened
    start 0.093 against 0.033 at a 300 s cap, 0.017 against 0.022 at 600 s, 0.011 against 0.017 at
    900 s; docs/benchmarks/mdp.md), and that only if its PDLP gets at least
    :data:`SCREEN_MIN_ITERATIONS` expected iterations on the screened outputs, else ``smoothed``.
    A ``pdlp`` start whose whole component LP would not fit in memory becomes ``screened`` (PDLP on
    as many outputs as fit). PDLP-based starts are skipped on components below
    :data:`PDLP_MIN_SIZE` records x kept outputs (their pricing LPs are cheaper)."""
    size = m * Kc
    per_output = m + 2 * E  # nonzeros of the component LP per output (unit rows, mDP rows)
    method = first_order
    if method == "auto" and size > DUAL_ASCENT_MIN_SIZE and _ipm_fits(m, E, Kc, time_limit, dual_ascent):
        return "ipm", _start_budget("ipm", size, time_limit, dual_ascent)
    if method == "auto":
        method = "pdlp"
        if math.isfinite(time_limit):
            budget = _start_budget("pdlp", size, time_limit, dual_ascent)
            pdlp_seconds = (1.0 - PDLP_SCREEN_SHARE) * (1.0 - PDLP_POLISH_SHARE) * budget
            expected = _expected_pdlp_iterations(pdlp_seconds, per_output * Kc)
            if expected < AUTO_PDLP_MIN_ITERATIONS:
                logger.info("component of %d records: about %.0f PDLP iterations on the whole LP in %.0f s (< %d): "
                            "screened start instead", m, expected, pdlp_seconds, AUTO_PDLP_MIN_ITERATIONS)
                method = "screened"
    if method == "pdlp" and (why := _pdlp_too_large(per_output * Kc)):
        method = "screened"
        logger.info("component of %d records: no PDLP start on the whole LP (%s); PDLP on screened outputs", m, why)
    budget = _start_budget(method, size, time_limit, dual_ascent)
    if first_order == "auto" and method == "screened" and budget > 0 and math.isfinite(time_limit):
        pdlp_seconds = (1.0 - SCREEN_ASCENT_SHARE - SCREEN_RESUME_SHARE) * budget
        expected = _expected_pdlp_iterations(pdlp_seconds, per_output * min(SCREEN_MAX_OUTPUTS, Kc))
        if expected < SCREEN_MIN_ITERATIONS:
            logger.info("component of %d records: about %.0f PDLP iterations on screened outputs in %.0f s (< %d): "
                        "smoothed dual ascent instead", m, expected, pdlp_seconds, SCREEN_MIN_ITERATIONS)
            method = "smoothed"
            budget = _start_budget(method, size, time_limit, dual_ascent)
    if method in ("pdlp", "screened", "ipm") and size < PDLP_MIN_SIZE:
        budget = 0.0
    if budget > 0 and method != "pdlp" and (why := _ascent_too_large(E, Kc)):
        # every start but pdlp begins with the ascent over all kept outputs; without it the column
        # generation starts cold, as below DUAL_ASCENT_MIN_SIZE (an explicit pdlp or ipm start that
        # does not fit is likewise scaled down, not refused)
        log = logger.info if first_order == "auto" else logger.warning
        log("component of %d records: no %s start: its dual ascent's arrays over %s; plain column generation", m,
            method, why)
        budget = 0.0
    return method, budget


def _ipm_fits(m: int, E: int, Kc: int, time_limit: float, dual_ascent: float | None) -> bool:
    """Whether ``auto`` takes the ``ipm`` start on a component of ``m`` records, ``E`` mDP rows and
    ``Kc`` kept outputs: it and its ascent fit in memory and, under a time limit,
    :data:`IPM_EXPECTED_ITERATIONS` iterations fit in the start's budget after the screening ascent."""
    n = min(IPM_MAX_OUTPUTS, Kc)
    if _ipm_outputs(m, E, Kc) < n:
        return False
    if not math.isfinite(time_limit):
        return True
    budget = _start_budget("ipm", m * Kc, time_limit, dual_ascent)
    left = budget - min(IPM_ASCENT_SECONDS, IPM_ASCENT_SHARE * budget)
    expected = IPM_EXPECTED_ITERATIONS * n * float(m) ** 3 * IPM_SECONDS_PER_CUBE
    return expected <= left


def _expected_pdlp_iterations(seconds: float, nnz: int) -> float:
    """PDLP iterations expected in ``seconds`` on an LP of ``nnz`` nonzeros (setup not counted)."""
    return seconds / (nnz * PDLP_SECONDS_PER_NONZERO_ITERATION)


def _start_budget(method: str, size: int, time_limit: float, dual_ascent: float | None) -> float:
    """Seconds of the first-order start on a component of ``size`` records x kept outputs: the
    given ``dual_ascent``, else (components above :data:`DUAL_ASCENT_MIN_SIZE`)
    :data:`PDLP_BUDGET_SHARE` of the time limit (300 s without one) for PDLP,
    :data:`SCREEN_BUDGET_SHARE` of it (300 s) for the screened start and a fifth (60 s) for the
    smoothed ascent."""
    if dual_ascent is not None:
        return float(dual_ascent)
    if size <= DUAL_ASCENT_MIN_SIZE:
        return 0.0
    # looked up per call: the shares are module constants that tests and tuning runs set
    shares = {"pdlp": (PDLP_BUDGET_SHARE, 300.0), "screened": (SCREEN_BUDGET_SHARE, 300.0),
              "ipm": (SCREEN_BUDGET_SHARE, 300.0)}
    share, fallback = shares.get(method, (0.2, 60.0))
    return share * time_limit if math.isfinite(time_limit) else fallback


def _empty_master(n: int) -> Any:
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = 0
    lp.num_row_ = n
    lp.row_lower_ = np.ones(n)
    lp.row_upper_ = np.ones(n)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = 0
    lp.a_matrix_.num_row_ = n
    lp.a_matrix_.start_ = np.zeros(1, dtype=np.int32)
    return lp
