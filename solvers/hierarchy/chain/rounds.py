"""The rounds of ``chain``: windowed LPs around a fixed centre, widened until a certificate passes.

Fioretto, Van Hentenryck, Zhu (AIJ 2021), Model 3 (M_c^ch). Each round solves the windowed
piecewise-linear LP of every size block (:mod:`.lp`), rounds its point, reads its duals as
multiples of 1/D (D = 1, 2 or 4: degenerate vertices give half-integral duals; others are
rounded to integers), completes the multipliers of the zero tails (:mod:`.tails`) and checks the
Lagrangian certificate over the whole domain [0, G] (:mod:`.certificate`). No release without a
passing check. Cells that fail:

- on an artificial window bound (a lower end > 0 or an upper end < G): widened x4 on both sides
  with their chain neighbours, ancestors and plateaus (:mod:`.windows`);
- inside a zero tail: the tail is shortened and the freed cells get windows again;
- inside their windows (wider windows change nothing: degenerate duals): the same multipliers'
  exact Lagrangian bound L may prove the LP point (U - L < 1, f being an integer); else a block
  with fractional duals is rebuilt once and solved from the slack basis, for other duals.

A fractional LP optimum first widens the cells whose window binds the bound (so L is as tight as
the windows allow), then takes the integer path of :mod:`.integer`.

Rounds are incremental (widening only adds columns to the live models). Once a warm re-solve of
a block has taken longer than its cold build, a round that adds more than
``ChainOptions.rebuild_growth`` of its segment columns rebuilds it cold (with the chunked start)
instead; a warm re-solve also has a budget of ``ChainOptions.warm_budget_factor`` times the
block's last cold build, after which it is stopped and the block rebuilt, so a slow warm
re-solve costs at most about two builds. A size split is kept while the assembled point
satisfies the C8 rows it drops; otherwise the two blocks merge and are solved again in the same
round.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from securelp.solvers.errors import VerificationError
from securelp.solvers.hierarchy.chain.certificate import (
    ChainCertificate,
    WindowBound,
    binding_cells,
    check_certificate,
    fractional_duals,
    scaled_multipliers,
    window_bound,
)
from securelp.solvers.hierarchy.chain.integer import LevelSetOptimum, level_set_search, local_integer_point
from securelp.solvers.hierarchy.chain.lp import BlockLP, chunked_start, integer_objective, time_left
from securelp.solvers.hierarchy.chain.options import ChainOptions
from securelp.solvers.hierarchy.chain.tails import complete_multipliers, fixed_cells, ladder_starts, restart_after
from securelp.solvers.hierarchy.chain.windows import boundary_violations, plateaus, size_blocks, spread
from securelp.solvers.hierarchy.consistency import model3_feasible, squared_distance
from securelp.solvers.hierarchy.errors import ChainLimitError, NoCertificateError, TimeLimitReached
from securelp.solvers.hierarchy.model import Hierarchy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainLPResult:
    """Certified exact optimum of Model 3."""

    cumulative: np.ndarray
    objective: float
    rounds: int
    blocks: int
    segments: int
    max_halfwidth: int
    certificate: ChainCertificate
    lp_time_s: float
    integer_program: str | None = None  # fractional LP optimum: the branch-and-bound runs
    integrality_gap: float = 0.0  # U - L of the Lagrangian bound (0 with the per-cell certificate)
    mip_time_s: float = 0.0
    #: "lagrangian" (the per-cell certificate), "lagrangian-bound" (an integer point within 1 of
    #: the exact Lagrangian bound) or "level-set+branch-and-bound"
    certificate_kind: str = "lagrangian"


def warm_budget(build_seconds: float | None, options: ChainOptions) -> float | None:
    """Seconds a block's warm re-solve may take before it is stopped and the block rebuilt cold:
    ``warm_budget_factor`` x its last cold build (at least ``warm_budget_min_s``); None (no budget)
    when the build time is unknown or the factor is 0."""
    if build_seconds is None or options.warm_budget_factor <= 0:
        return None
    return max(options.warm_budget_min_s, options.warm_budget_factor * build_seconds)


def warm_is_slow(warm_seconds: float, build_seconds: float | None) -> bool:
    """Whether a block's warm re-solve took longer than its last cold build (then grown rounds rebuild it)."""
    return build_seconds is not None and warm_seconds > build_seconds


def solve_model3_certified(hier: Hierarchy, noisy_cum: np.ndarray, total: int, center: np.ndarray,
                           options: ChainOptions | None = None, *, tail_starts: np.ndarray | None = None,
                           deadline: float | None = None) -> ChainLPResult:
    """Exact Model 3 optimum by windowed PWL LPs and the Lagrangian certificate (module docstring).

    ``options`` default to ``ChainOptions()`` (its ``time_limit`` is the caller's: here ``deadline``).

    ``center`` is a feasible integer Model 3 point (e.g. the M_c^dp release, cumulative).
    ``tail_starts`` (per leaf, in ``hier.leaves`` order; N = no tail) proposes the first zero
    tails; ``center`` must be 0 on them. Default: :func:`.tails.ladder_starts` on the centre.
    ``deadline`` (``time.perf_counter`` clock) bounds the whole search: past it the LP and
    branch-and-bound solves stop and TimeLimitReached says in which round.

    Raises
    ------
    ChainLimitError
        The windows needed exceed the segment limits, or the round limit was reached.
    NoCertificateError
        A fractional LP optimum without a proof.
    TimeLimitReached
        ``deadline`` passed.
    VerificationError
        The certificate failed with full windows (never expected).
    ValueError
        ``tail_starts`` of the wrong shape, or a centre that is not 0 on them.
    """
    return _Rounds(hier, noisy_cum, total, center, ChainOptions() if options is None else options, tail_starts,
                   deadline).run()


class _Rounds:
    """The state of :func:`solve_model3_certified`: windows, tails, size blocks and their live LPs."""

    def __init__(self, hier: Hierarchy, noisy_cum: np.ndarray, total: int, center: np.ndarray,
                 options: ChainOptions, tail_starts: np.ndarray | None, deadline: float | None) -> None:
        self.hier, self.options, self.deadline = hier, options, deadline
        self.y = np.asarray(noisy_cum)
        self.yf = self.y.astype(np.float64)
        self.integral = np.issubdtype(self.y.dtype, np.integer)
        self.total = int(total)
        self.n_regions, self.n_sizes = self.y.shape
        self.leaves = np.asarray(hier.leaves, dtype=np.int64)
        self.center = np.asarray(center, dtype=np.int64).copy()
        self.center[0, 0] = self.total  # fixed (C6); the LP rows hold for any centre, the bounds carry its activities
        # halfwidth per cell and side; the window is [centre - half_down, centre + half_up] within [0, G]
        self.h0 = max(1, int(options.initial_halfwidth))
        self.half_up = np.full((self.n_regions, self.n_sizes), self.h0, dtype=np.int64)
        self.half_down = self.half_up.copy()
        self.starts = self._first_tails(tail_starts)
        self.fixed = fixed_cells(hier, self.starts, self.n_sizes)
        if np.any(self.center[self.fixed] != 0):
            raise ValueError("the centre is not 0 on the proposed zero tails")
        self.half_up[self.fixed] = 0
        self.half_down[self.fixed] = 0
        if self.fixed.any():
            logger.info("chain: zero tails fix %d of %d cells at 0", int(self.fixed.sum()), self.fixed.size)
        self.lp_time = self.mip_time = 0.0
        self.fractional_rounds = 0
        self.blocks: list[tuple[int, int]] = []
        self.models: list[BlockLP | None] = []
        self.cold: set[tuple[int, int]] = set()  # blocks to (re)build from the slack basis, no chunked start
        self.recold: set[tuple[int, int]] = set()  # blocks already rebuilt cold for fractional multipliers
        self.build_seconds: dict[tuple[int, int], float] = {}  # last cold build + solve of a block
        self.slow_warm: set[tuple[int, int]] = set()  # blocks whose warm re-solve took longer than a build
        self.pending = 0  # cells whose check failed in the last round (for a time-limit message)
        self.rounds = 1
        self.segments = 0
        self.n_up = self.n_down = np.zeros((self.n_regions, self.n_sizes), dtype=np.int64)

    def _first_tails(self, tail_starts: np.ndarray | None) -> np.ndarray:
        """Zero tails: leaf suffixes where the centre is 0 and the isotonic condition holds stay at 0
        outside the LPs (window [0, 0], rows dropped)."""
        if not self.options.zero_tails or self.n_sizes < 2:
            return np.full(self.leaves.size, self.n_sizes)
        if tail_starts is not None:
            starts = np.minimum(np.asarray(tail_starts, dtype=np.int64), self.n_sizes)
            if starts.shape != self.leaves.shape:
                raise ValueError(f"tail_starts has shape {starts.shape}, expected ({self.leaves.size},)")
            return starts
        return ladder_starts(self.hier, self.y, self.center)

    def run(self) -> ChainLPResult:
        try:
            for rounds in range(1, self.options.max_rounds + 1):
                self.rounds = rounds
                result = self._round()
                if result is not None:
                    return result
        except TimeLimitReached as exc:
            after = f" ({self.pending} cells not yet certified after round {self.rounds - 1})" if self.rounds > 1 else ""
            raise exc.at(f"LP round {self.rounds}{after}") from None
        raise ChainLimitError("max_rounds", f"no certificate after {self.options.max_rounds} widening rounds")

    def _round(self) -> ChainLPResult | None:
        """One round: solve, then certify or widen (None: go on)."""
        time_left(self.deadline, "before")
        self.n_up = np.minimum(self.half_up, self.total - self.center)
        self.n_down = np.minimum(self.half_down, self.center)
        self.n_up[0, 0] = self.n_down[0, 0] = 0  # c_1^root = G (C6)
        lo, hi = self.center - self.n_down, self.center + self.n_up
        self.segments = int((self.n_up + self.n_down).sum())
        if self.segments > self.options.max_total_segments:
            raise ChainLimitError("max_total_segments", f"the certified windows need {self.segments:,} LP segment "
                                  f"columns (> {self.options.max_total_segments:,}); the exact Model 3 solve does "
                                  f"not fit this instance")
        if not self.blocks:
            self.blocks = size_blocks(lo, hi, self.leaves, self.options.min_block_share)
            self.models = [None] * len(self.blocks)
        x, lam, mu, lp_round, iterations = self._solve_blocks()
        cum = np.rint(x).astype(np.int64)
        frac = np.abs(x - cum)
        if (frac > 1e-6).any():
            return self._fractional(x, frac, lam, mu, lo, hi)
        cert, scale, lam_c = self._certify(cum, lam, mu)
        logger.info(
            "chain round %d: %d blocks, %d segments, LP %.2fs (%d simplex iterations), total LP %.2fs, certificate %s",
            self.rounds, len(self.blocks), self.segments, lp_round, iterations, self.lp_time, cert.reason,
        )
        if cert.ok:
            return self._result(cum, squared_distance(cum, self.y), cert)
        if not cert.failing.any():
            raise VerificationError(f"chain: certificate check failed: {cert.reason}")
        return self._after_failure(cert, cum, lam, mu, lam_c / scale, lo, hi)

    def _result(self, point: np.ndarray, objective: float, cert: ChainCertificate, **kind: object) -> ChainLPResult:
        return ChainLPResult(point, objective, self.rounds, len(self.blocks), self.segments,
                             int(max(self.half_up.max(), self.half_down.max())), cert, self.lp_time, **kind)

    def _solve_blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
        """Every block's LP (merging blocks whose dropped C8 rows break): x, lam, mu, seconds, iterations."""
        x = np.zeros((self.n_regions, self.n_sizes))
        lam = np.zeros((self.n_regions, self.n_sizes))
        mu = np.zeros((self.n_regions, max(self.n_sizes - 1, 0)))
        t0 = time.perf_counter()
        iterations = 0
        todo = list(range(len(self.blocks)))
        while todo:
            for j in todo:
                iterations += self._solve_block(j, x, lam, mu)
            # a split is kept while the assembled point satisfies the C8 rows it drops (then mu = 0
            # on them is exact, :mod:`.windows`); otherwise the two blocks are merged
            todo = []
            for j in reversed(boundary_violations(x, self.blocks, self.leaves)):
                (a, cut), (_, b) = self.blocks[j], self.blocks[j + 1]
                logger.info("chain round %d: C8 broken between sizes %d and %d: merging two blocks", self.rounds, cut,
                            cut + 1)
                self.blocks[j : j + 2] = [(a, b)]
                self.models[j : j + 2] = [None]
                todo = sorted({i - 1 if i > j else i for i in todo} | {j})
        lp_round = time.perf_counter() - t0
        self.lp_time += lp_round
        return x, lam, mu, lp_round, iterations

    def _solve_block(self, j: int, x: np.ndarray, lam: np.ndarray, mu: np.ndarray) -> int:
        """Block j's LP on this round's windows, into x, lam, mu; returns its simplex iterations."""
        a, b = self.blocks[j]
        n_up, n_down = self.n_up[:, a:b], self.n_down[:, a:b]
        seg_b = int((n_up + n_down).sum())
        if seg_b > self.options.max_block_segments:
            raise ChainLimitError("max_block_segments", f"one block of sizes {a + 1}..{b} needs {seg_b:,} LP segment "
                                  f"columns (> {self.options.max_block_segments:,}); the exact Model 3 solve does not "
                                  f"fit this instance")
        model = self.models[j]
        if model is not None and (a, b) in self.slow_warm and self.options.rebuild_growth > 0:
            grow = model.new_segments(n_up, n_down)
            if grow > self.options.rebuild_growth * model.segments:
                logger.info("chain round %d: sizes %d..%d gain %d segment columns (%d now): rebuilt", self.rounds,
                            a + 1, b, grow, model.segments)
                model = self.models[j] = None
        iterations = 0
        t_start = time.perf_counter()
        built = model is None
        if model is None:
            model = self.models[j] = self._build(a, b)
            solved = model.solve(self.deadline)
        else:
            model.extend(n_up, n_down)
            solved = model.solve(self.deadline, warm_budget(self.build_seconds.get((a, b)), self.options))
            if solved is None:  # slower than a cold build: stop it and rebuild
                iterations += model.iterations
                logger.info("chain round %d: sizes %d..%d: warm re-solve stopped after %.1f s (%d simplex iterations; "
                            "the block's cold build took %.1f s): rebuilt", self.rounds, a + 1, b,
                            time.perf_counter() - t_start, model.iterations, self.build_seconds[(a, b)])
                self.slow_warm.add((a, b))
                t_start = time.perf_counter()
                built = True
                model = self.models[j] = self._build(a, b)
                solved = model.solve(self.deadline)
        assert solved is not None  # only a budgeted (warm) solve stops early
        iterations += model.iterations
        elapsed = time.perf_counter() - t_start
        if built:
            self.build_seconds[(a, b)] = elapsed
        elif warm_is_slow(elapsed, self.build_seconds.get((a, b))):
            self.slow_warm.add((a, b))
        x[:, a:b], lam[:, a:b], mu[:, a : b - 1] = solved
        if a > 0:
            mu[:, a - 1] = 0  # the C8 rows between blocks are not in any LP
        return iterations

    def _build(self, a: int, b: int) -> BlockLP:
        """A cold model of the block of sizes a+1..b on the current windows (chunked start unless cold)."""
        args = (self.hier, self.yf[:, a:b], self.center[:, a:b], self.n_up[:, a:b], self.n_down[:, a:b])
        model = BlockLP(*args, self.options)
        if (a, b) not in self.cold:
            chunks, chunk_it = chunked_start(model, *args, self.deadline)
            if chunks > 1:
                logger.info("chain round %d: sizes %d..%d start from the bases of %d chunks (%d simplex iterations)",
                            self.rounds, a + 1, b, chunks, chunk_it)
        return model

    def _certify(self, cum: np.ndarray, lam: np.ndarray, mu: np.ndarray) -> tuple[ChainCertificate, int, np.ndarray]:
        """The certificate of the rounded LP point with the LP's multipliers: (check, scale D, D lam)."""
        scale = 1
        if self.integral:
            # duals that are multiples of 1/D (degenerate vertices give half-integers) are checked
            # exactly in D-scaled integers; others are rounded to integers
            scale, lam_c, mu_c, on_grid = scaled_multipliers(lam, mu, self.options.max_dual_scale)
            if not on_grid:
                scale, lam_c, mu_c = 1, np.rint(lam).astype(np.int64), np.rint(mu).astype(np.int64)
        else:
            lam_c, mu_c = lam, mu
        if self.fixed.any():
            lam_c, mu_c = complete_multipliers(self.hier, self.y, self.fixed, lam_c, mu_c, scale)
        return check_certificate(self.hier, cum, self.y, self.total, lam_c, mu_c, scale), scale, lam_c

    def _bound(self, lam: np.ndarray, mu: np.ndarray) -> tuple[WindowBound, np.ndarray]:
        """The exact Lagrangian bound of the LP's multipliers completed on the zero tails, and those lam."""
        lam_f, mu_f = complete_multipliers(self.hier, self.yf, self.fixed, lam, mu) if self.fixed.any() else (lam, mu)
        return window_bound(self.hier, self.y, self.total, lam_f, mu_f, self.options.bound_max_scale), lam_f

    def _bound_proof(self, point: np.ndarray, upper: int, gap: Fraction, what: str,
                     note: str | None = None) -> ChainLPResult:
        """The result for an integer point with U - L < 1 against the exact Lagrangian bound L."""
        cert = ChainCertificate(True, True, float(1 - gap), np.zeros(point.shape, dtype=bool),
                                f"Lagrangian bound L and {what} with U - L = {gap} < 1")
        return self._result(point, float(upper), cert, integer_program=note, integrality_gap=float(gap),
                            mip_time_s=self.mip_time, certificate_kind="lagrangian-bound")

    def _widen(self, cells: np.ndarray, freed: np.ndarray | None = None) -> None:
        """Windows of ``cells`` x4 on both sides; ``freed`` tail cells back to the first half-width."""
        self.half_up = np.where(cells, self.half_up * 4, self.half_up)
        self.half_down = np.where(cells, self.half_down * 4, self.half_down)
        if freed is not None:
            self.half_up = np.where(freed, self.h0, self.half_up)
            self.half_down = np.where(freed, self.h0, self.half_down)

    def _free_tails(self, cells: np.ndarray, lam_now: np.ndarray) -> np.ndarray:
        """Shorten the zero tails holding ``cells`` (fixed cells); returns the freed cells."""
        down = cells.copy()
        par = np.asarray(self.hier.parent, dtype=np.int64)
        for r in range(1, self.hier.size):  # parents first: an internal fixed cell fixes its leaves' cells
            down[r] |= down[par[r]] & self.fixed[r]
        fail_leaf = down[self.leaves]
        last = np.where(fail_leaf.any(axis=1), self.n_sizes - 1 - np.argmax(fail_leaf[:, ::-1], axis=1), -1)
        self.starts = restart_after(self.hier, self.y, self.center, lam_now, self.starts, last)
        new_fixed = fixed_cells(self.hier, self.starts, self.n_sizes)
        if not (self.fixed & ~new_fixed).any():  # not expected: no tails at all
            self.starts = np.full(self.leaves.size, self.n_sizes)
            new_fixed = np.zeros_like(self.fixed)
        freed = self.fixed & ~new_fixed
        self.fixed = new_fixed
        return freed

    def _fractional(self, x: np.ndarray, frac: np.ndarray, lam: np.ndarray, mu: np.ndarray, lo: np.ndarray,
                    hi: np.ndarray) -> ChainLPResult | None:
        """A fractional LP optimum: tighten the bound by widening binding windows, then the integer path."""
        fractional = frac > 1e-6
        self.fractional_rounds += 1
        logger.info("chain round %d: fractional LP optimum on %d cells", self.rounds, int(fractional.sum()))
        if not self.integral:
            raise NoCertificateError(f"the windowed LP has a fractional optimum ({int(fractional.sum())} cells, largest "
                                     f"distance to an integer {frac.max():.3g}) and the noisy values are not integers "
                                     f"(no exact level-set bound); no certificate is available for this instance")
        # the LP's multipliers confine every good integer point to small windows (the level set W_T
        # of :mod:`.certificate`); first make the bound as tight as these windows allow: cells whose
        # window binds (their Lagrangian best lies outside) are widened, tails freed, and the LP re-solved
        wb, lam_f = self._bound(lam, mu)
        bind = binding_cells(wb, self.y, lo, hi)
        if bind.any() and self.fractional_rounds <= self.options.max_fractional_rounds:
            tails = bind & self.fixed
            freed = self._free_tails(tails, lam_f) if tails.any() else np.zeros_like(bind)
            widen = spread(self.hier, bind & ~self.fixed)
            logger.info("chain round %d: fractional LP; %d cells bind their windows: widening %d, %d leave the tails",
                        self.rounds, int(bind.sum()), int(widen.sum()), int(freed.sum()))
            self._widen(widen, freed)
            return None
        return self._integer_point(x, wb)

    def _integer_point(self, x: np.ndarray, wb: WindowBound) -> ChainLPResult:
        """An integer point near the fractional LP point x, proved by the bound or by a level set."""
        # U - L < 1 proves it (f is an integer); else it shrinks the level set to T = U - 1 - L. First
        # the fractional cells' chains and ancestors, then also their siblings (counts move between children)
        incumbent: tuple[np.ndarray, int, str] | None = None
        found: LevelSetOptimum | str = "no integer point was found near the LP optimum"
        for siblings in (False, True):
            t1 = time.perf_counter()
            local = local_integer_point(self.hier, self.y, self.total, x, self.options, self.deadline, siblings=siblings)
            self.mip_time += time.perf_counter() - t1
            if local is not None and (incumbent is None or local[1] < incumbent[1]):
                incumbent = local
            if incumbent is None:
                continue
            point, upper, note = incumbent
            gap = Fraction(upper) - wb.lower
            if gap < 1:
                logger.info("chain round %d: %s; U - L = %s < 1 proves it optimal", self.rounds, note, gap)
                return self._bound_proof(point, upper, gap, "an integer point", note)
            logger.info("chain round %d: %s; U = %d, L = %s: searching the level set below U", self.rounds, note,
                        upper, wb.lower)
            found = self._level_set(wb, (point, upper))
            if isinstance(found, LevelSetOptimum):
                break
        if isinstance(found, str) and incumbent is None:
            found = self._level_set(wb, None)
        if isinstance(found, LevelSetOptimum):
            margin = found.slack - (found.gap - 1)  # L + T - (U - 1) >= 0: no better point
            cert = ChainCertificate(True, True, float(margin), np.zeros(x.shape, dtype=bool),
                                    f"level-set bound (U - L = {found.gap}, T = {found.slack}) + HiGHS branch and bound")
            note = found.note if incumbent is None else f"{incumbent[2]}; level set: {found.note}"
            return self._result(found.cumulative, float(found.upper), cert, integer_program=note,
                                integrality_gap=float(found.gap), mip_time_s=self.mip_time,
                                certificate_kind="level-set+branch-and-bound")
        raise NoCertificateError(f"the windowed LP optimum is fractional and {found}; no certified release")

    def _level_set(self, wb: WindowBound, incumbent: tuple[np.ndarray, int] | None) -> LevelSetOptimum | str:
        t1 = time.perf_counter()
        found = level_set_search(self.hier, self.y, self.total, wb, self.options, self.deadline, incumbent=incumbent)
        self.mip_time += time.perf_counter() - t1
        return found

    def _after_failure(self, cert: ChainCertificate, cum: np.ndarray, lam: np.ndarray, mu: np.ndarray,
                       lam_now: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> ChainLPResult | None:
        """Cells failed the per-cell test: shorten tails, try the bound, or widen (None: go on)."""
        fail = cert.failing
        self.pending = int(fail.sum())
        tail_fail = fail & self.fixed
        if tail_fail.any():
            # a zero tail is not optimal as proposed: restart those leaves' tails after their last
            # failing size (with the current multipliers); the freed cells get windows again
            freed = self._free_tails(tail_fail, lam_now)
            logger.info("chain round %d: %d zero-tail cells fail; %d cells leave the tails", self.rounds,
                        int(tail_fail.sum()), int(freed.sum()))
            self._widen(np.zeros_like(freed), freed)
            fail = fail & ~tail_fail  # the models add the freed cells' rows and columns when extended
            if not fail.any():
                return None
        away = fail & ~(((cum == lo) & (lo > 0)) | ((cum == hi) & (hi < self.total)))
        if away.any() and not (fail & ~away).any() and self.integral and model3_feasible(self.hier, cum, self.total):
            # every failing cell is inside its window (wider windows change nothing), but the same
            # multipliers' exact Lagrangian bound L (any mu >= 0 gives a valid bound) may be within 1
            # of this integer point's U, which proves it (f is an integer)
            wb, _ = self._bound(lam, mu)
            upper = integer_objective(cum, self.y)
            gap = Fraction(upper) - wb.lower
            if gap < 1:
                logger.info("chain round %d: %d cells fail the per-cell test, but U - L = %s < 1 proves the LP point "
                            "optimal", self.rounds, int(cert.failing.sum()), gap)
                return self._bound_proof(cum, upper, gap, "the LP point")
        if away.any():
            self._recold_fractional_blocks(away, lam, mu)
        # widen the failing cells, their chain neighbours and ancestors (x4, both sides); the centre
        # stays, so the models only gain columns
        widen = spread(self.hier, plateaus(cum, fail))
        logger.info("chain round %d: widening %d cells", self.rounds, int(widen.sum()))
        self._widen(widen)
        return None

    def _recold_fractional_blocks(self, away: np.ndarray, lam: np.ndarray, mu: np.ndarray) -> None:
        """Cells fail off their window bounds: the LP's multipliers did not round to a certificate (e.g.
        half-integral duals of an integral point). Wider windows do not change them; a block with
        fractional duals is rebuilt once and solved from the slack basis, which gives other duals."""
        logger.info("chain round %d: %d cells fail away from window bounds", self.rounds, int(away.sum()))
        for j, (a, b) in enumerate(self.blocks):
            if away[:, a:b].any() and (a, b) not in self.recold and fractional_duals(lam[:, a:b], mu[:, a : b - 1]):
                logger.info("chain round %d: fractional multipliers in sizes %d..%d: re-solving cold", self.rounds,
                            a + 1, b)
                self.models[j] = None
                self.cold.add((a, b))
                self.recold.add((a, b))
