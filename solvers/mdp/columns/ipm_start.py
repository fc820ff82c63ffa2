"""The ``ipm`` start of the column decomposition: output generation with the structured IPM.

The smoothed ascent (:mod:`~securelp.solvers.mdp.columns.ascent`) screens the outputs its certificate
marks as used; then rounds:

1. the structured IPM (:mod:`securelp.solvers.mdp.ipm`) solves the component LP restricted to the
   outputs ``S`` until its gap is ``gap_share`` of the target, or the time is up;
2. every other output whose stored certificate does not already certify it at the IPM's unit-row
   duals ``mu`` is priced there: this gives the exact Lagrangian bound ``L(mu)``, a valid lower bound
   on the whole component LP (:mod:`~securelp.solvers.mdp.columns.bounds`);
3. when that bound closes the gap, or no output is violated, or the next round would not fit in time
   or memory, or ``max_rounds`` is reached, stop; else ``S`` loses the outputs the round left unused
   (:func:`prune_outputs`) and gains the violated ones (most violated first), and the next round
   starts cold.

Each of the first ``probe_rounds`` rounds also prices once on the way, when its restricted gap first
falls to ``probe_gap``: when outputs are violated there and the next round fits, the round stops at
once and the next one starts with them. The certificate is the last IPM's on ``S``, the pricing's or
the ascent's on the others (all from multipliers ``>= 0``, so every bound is valid); the ``mu`` of the
best bound becomes the stability centre and the last round's primal iterate, repaired, enters the
master (:class:`~securelp.solvers.mdp.columns.options.IPMStartOptions`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from securelp.solvers.mdp.columns.ascent import ascent_too_large, smoothed_dual_ascent
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions
from securelp.solvers.mdp.columns.pdlp import FirstOrderStart, screen_outputs
from securelp.solvers.mdp.ipm import IPMResult, memory_needed, structured_ipm
from securelp.solvers.resources import available_memory

__all__ = ["ipm_outputs", "ipm_start", "ipm_start_columns", "prune_outputs"]

logger = logging.getLogger(__name__)


def prune_outputs(Z: np.ndarray, S: np.ndarray, below: float) -> np.ndarray:
    """The outputs ``S`` (columns of ``Z``, records x outputs, a round's primal iterate) that keep
    some entry of at least ``below`` or are some record's largest; in increasing order."""
    keep = Z.max(axis=0) >= below
    keep[Z.argmax(axis=1)] = True
    return np.sort(S[keep])


def ipm_outputs(m: int, E: int, Kc: int, options: ColumnGenerationOptions, cap: int | None = None) -> int:
    """How many outputs an IPM round may hold on a component of ``m`` records, ``E`` mDP rows and ``Kc``
    kept outputs: ``cap`` (``ipm_start.max_outputs`` by default; at most ``Kc``), halved until the IPM
    fits in ``ipm_start.memory_share`` of the memory available; 0 when not even one output does, or
    when the ascent that screens them (over all ``Kc``) does not fit."""
    o = options.ipm_start
    if ascent_too_large(E, Kc, options.starts.ascent_memory_share):
        return 0
    n = min(o.max_outputs if cap is None else cap, Kc)
    avail = available_memory()
    if avail is None:
        return n
    while n > 1 and memory_needed(m, n, E) > o.memory_share * avail:
        n //= 2
    return n if memory_needed(m, n, E) <= o.memory_share * avail else 0


def _summary(found: dict[str, Any]) -> dict[str, Any]:
    """What a pricing reports (not its bookkeeping)."""
    return {k: v for k, v in found.items() if k not in ("js", "complete")}


class _Rounds:
    """The IPM rounds of one start on ``cg``, until ``end`` (``unlimited``: no time limit, only the
    deadline), at most ``cap`` outputs a round."""

    def __init__(self, cg: ComponentCG, gap: float, end: float, unlimited: bool, cap: int) -> None:
        self.cg, self.gap, self.end, self.unlimited, self.cap = cg, gap, end, unlimited, cap
        self.o = cg.options.ipm_start
        self.rounds: list[dict[str, Any]] = []
        self.best: tuple[float, np.ndarray] | None = None
        self.Z = np.zeros_like(cg.G)
        self.total = 0
        self.status = "skipped"

    def next_fits(self, t_round: float, S: np.ndarray, grown: int, share: float) -> bool:
        """Whether a round on ``grown`` outputs fits before the end: the IPM's time is linear in the
        outputs, and the round begun at ``t_round`` on ``S`` has done ``share`` of its work."""
        now = time.perf_counter()
        return self.unlimited or now + (now - t_round) / share * grown / S.size <= self.end

    def price_at(self, mu: np.ndarray, S: np.ndarray, primal: float) -> dict[str, Any]:
        """Price, at ``mu``, the outputs outside ``S`` that their stored certificates leave open; the
        Lagrangian bound there and the violated outputs, most violated first."""
        cg = self.cg
        tau, tol = cg.tolerances(max(abs(primal), 1e-300))
        cheap = cg.open_shares(mu)
        outside = np.ones(cg.Kc, dtype=bool)
        outside[S] = False
        js = np.flatnonzero(outside & (cheap < -tau))
        js = js[np.argsort(cheap[js])]
        tp = time.perf_counter()
        cg.say(f"component of {cg.m} records: IPM round {len(self.rounds) + 1}, pricing {js.size} other outputs")
        priced = cg.pricer.price(js, mu, tol, self.end, transport=True) if js.size else []
        violated = sorted((float((cg.G[:, j] - mu) @ zj), j) for j, zj in priced if zj is not None)
        violated = [(rc, j) for rc, j in violated if rc < -tau]
        lower = float(mu.sum() + cg.open_shares(mu).sum())
        if self.best is None or lower > self.best[0]:
            self.best = (lower, mu.copy())
        return {"priced": len(priced), "pricing_seconds": time.perf_counter() - tp, "violated": len(violated),
                "lower_bound": lower, "complete": len(priced) == js.size, "js": [j for _, j in violated]}

    def solve_round(self, S: np.ndarray, t_round: float, probed: dict[str, Any]) -> IPMResult:
        """The IPM on the outputs ``S``; its probe (the first ``probe_rounds`` rounds, below the cap)
        prices the others halfway (in gap) and stops the round when outputs are missing and the next
        round fits (the round so far taken as half of its time); the outputs pruned on the way are
        outside the LP, priced like the others, and make room under the cap."""
        cg, o = self.cg, self.o
        r = len(self.rounds) + 1

        def probe(mu: np.ndarray, live: np.ndarray) -> bool:
            inside = S[live]
            if r > o.probe_rounds or r >= o.max_rounds or inside.size >= self.cap:
                return False
            probed.update(self.price_at(mu, inside, float(cg.G[:, inside].min(axis=1).sum())))
            fits = self.next_fits(t_round, S, min(inside.size + probed["violated"], self.cap), 0.5)
            return bool(probed["violated"]) and probed["complete"] and fits

        def note(it: int, primal: float, bound: float) -> None:
            cg.say(f"component of {cg.m} records: IPM round {r} on {S.size} outputs, iteration {it}, restricted LP "
                   f"in [{bound:.8g}, {primal:.8g}]")

        return structured_ipm(cg.G[:, S], cg.A, self.end, tolerance=o.gap_share * self.gap, probe_gap=o.probe_gap,
                              probe=probe, threads=cg.workers, on_iteration=note, prune_below=o.prune_below,
                              prune_gap=o.prune_gap if S.size >= self.cap else 0.0, options=o.ipm)

    def run(self, S: np.ndarray) -> np.ndarray:
        """The rounds from the outputs ``S``; the outputs of the last."""
        cg, o = self.cg, self.o
        while True:
            t_round = time.perf_counter()
            probed: dict[str, Any] = {}
            res = self.solve_round(S, t_round, probed)
            self.total += res.iterations
            if res.iterations == 0:  # no time left for a step: its start point would only weaken the certificate
                break
            self.status = res.status
            cg.certs.Q[S] = (cg.G[:, S] + np.asarray(cg.A.T @ res.Y)).T  # valid whatever the stop (Y >= 0)
            if res.status != "probed" or all(rd["status"] == "probed" for rd in self.rounds):
                # the primal iterate of the last finished round (of a probed one only while none finished)
                self.Z = np.zeros_like(cg.G)
                self.Z[:, S] = res.Z
            # the outputs pruned during the round left its LP: from here on they are outside it
            live = np.setdiff1d(np.arange(S.size), res.pruned)
            S_all, S = S, S[live]
            found = probed if res.status == "probed" else self.price_at(res.mu, S, res.primal)
            self._record(res, S_all, found, probed)
            # the next round: this one's outputs still in use, and the violated ones
            kept_S = prune_outputs(res.Z[:, live], S, o.prune_below)
            self.rounds[-1]["pruned"] = int(S.size - kept_S.size)
            room = self.cap - kept_S.size
            grown = np.union1d(kept_S, np.array(found["js"][:room], dtype=S.dtype))
            if res.status == "probed":
                S = grown
                continue
            closed = res.primal - found["lower_bound"] <= self.gap * max(abs(res.primal), 1e-300)
            fits = self.next_fits(t_round, S, grown.size, 1.0)
            if (closed or not found["violated"] or not found["complete"] or room <= 0
                    or len(self.rounds) >= o.max_rounds or not fits or res.status in ("time_limit", "numerical")):
                break
            S = grown
        return S

    def _record(self, res: IPMResult, S_all: np.ndarray, found: dict[str, Any], probed: dict[str, Any]) -> None:
        """The round's entry in the report, and a log line."""
        self.rounds.append({"outputs": int(S_all.size), "iterations": res.iterations, "status": res.status,
                            "seconds": res.seconds, "restricted_bound": res.bound, "restricted_primal": res.primal,
                            "pruned_in_round": int(res.pruned.size), **_summary(found)})
        if probed and res.status != "probed":
            self.rounds[-1]["probe"] = _summary(probed)
        logger.info("component of %d records: IPM round %d on %d outputs (%d left on the way), %d iterations (%s), "
                    "%.1f s, restricted LP in [%.10g, %.10g]; priced %d outputs in %.1f s, %d violated, bound %.10g",
                    self.cg.m, len(self.rounds), S_all.size, res.pruned.size, res.iterations, res.status, res.seconds,
                    res.bound, res.primal, found["priced"], found["pricing_seconds"], found["violated"],
                    found["lower_bound"])


def ipm_start(cg: ComponentCG, ta: float, budget: float, deadline: float, gap: float, unlimited: bool
              ) -> tuple[FirstOrderStart, dict[str, Any]]:
    """The ``ipm`` start begun at ``ta`` (module docstring): ``ipm_start.ascent_iterations`` of the
    smoothed ascent (under a time limit at most ``ascent_share`` of ``budget`` and ``ascent_seconds``;
    without one, ``unlimited``, only the iterations bound the screen, so that it is the same on any
    machine), then the rounds until ``ta + budget`` (``unlimited``: ``deadline``). Returns the start
    (status ``skipped`` without an IPM step: the ascent's certificate, the trivial centre, no columns)
    and its report."""
    o, starts = cg.options.ipm_start, cg.options.starts
    ascent_end = deadline if unlimited else ta + min(o.ascent_seconds, o.ascent_share * budget)
    q, its = smoothed_dual_ascent(cg.G, cg.A, min(deadline, ascent_end), max_iterations=o.ascent_iterations,
                                  threads=cg.workers, parallel_min=starts.ascent_parallel_min)
    info: dict[str, Any] = {"ascent_iterations": its, "ascent_seconds": time.perf_counter() - ta,
                            "ascent_bound": float(q.min(axis=1).sum())}
    ascent_only = FirstOrderStart(Q=q, mu=cg.G.min(axis=1), Z=np.zeros_like(cg.G), iterations=its, status="skipped")
    n = ipm_outputs(cg.m, cg.E, cg.Kc, cg.options)
    cg.say(f"component of {cg.m} records: IPM start, screening ascent done ({its} iterations)")
    if n == 0:
        logger.info("component of %d records: no IPM start (not even one output fits in memory)", cg.m)
        info.update(outputs=0, iterations=0, status="skipped", rounds=[])
        return ascent_only, info
    cap = max(n, ipm_outputs(cg.m, cg.E, cg.Kc, cg.options, o.max_grown_outputs))
    S = screen_outputs(q, n, starts.screen_temperature)
    end = deadline if unlimited else min(deadline, ta + budget)
    cg.warm_start(q)
    rounds = _Rounds(cg, gap, end, unlimited, cap)
    S = rounds.run(S)
    info.update(outputs=int(S.size), iterations=rounds.total, status=rounds.status, rounds=rounds.rounds,
                seconds=float(sum(r["seconds"] for r in rounds.rounds)))
    if rounds.best is None:
        logger.info("component of %d records: no time for an IPM step", cg.m)
        return ascent_only, info
    info.update(restricted_bound=rounds.rounds[-1]["restricted_bound"],
                restricted_primal=rounds.rounds[-1]["restricted_primal"], lower_bound=rounds.best[0])
    return (FirstOrderStart(Q=np.ascontiguousarray(cg.certs.Q.T), mu=rounds.best[1], Z=rounds.Z,
                            iterations=its + rounds.total, status=rounds.status), info)


def ipm_start_columns(cg: ComponentCG, entry: dict[str, Any], ta: float, budget: float, deadline: float,
                      gap: float, unlimited: bool) -> tuple[FirstOrderStart, np.ndarray | None]:
    """:func:`ipm_start`, its report in ``entry["ipm"]`` and its last primal iterate's columns in the
    master (``entry["columns"]``); returns the start and the stability centre it gives (its best bound's
    ``mu``; None when it was skipped)."""
    start, entry["ipm"] = ipm_start(cg, ta, budget, deadline, gap, unlimited)
    if start.status == "skipped":
        return start, None
    entry["columns"] = cg.add_primal_columns(start.Z)
    return start, start.mu


def ipm_fits(m: int, E: int, Kc: int, time_limit: float, budget: float, options: ColumnGenerationOptions) -> bool:
    """Whether ``auto`` takes the ``ipm`` start on a component of ``m`` records, ``E`` mDP rows and ``Kc``
    kept outputs: it and its ascent fit in memory and, under a time limit, ``expected_iterations``
    iterations (``seconds_per_cube`` each per output and record cubed) fit in the start's ``budget``
    after the screening ascent."""
    o = options.ipm_start
    n = min(o.max_outputs, Kc)
    if ipm_outputs(m, E, Kc, options) < n:
        return False
    if not math.isfinite(time_limit):
        return True
    left = budget - min(o.ascent_seconds, o.ascent_share * budget)
    expected = o.expected_iterations * n * float(m) ** 3 * o.seconds_per_cube
    return expected <= left
