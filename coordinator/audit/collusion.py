"""The coordinator colluding with t of the p parties (t = 1 .. p-1).

Colluders bring their own blocks, masks, masked products and decoded x_c. What that adds
against the honest parties depends on how the masked products are attributed:

* In the plain protocol (Mangasarian 2011) every party masks with its own independent B_j and
  its product M_j reaches the coordinator alone: a colluder's mask says nothing about another
  party's, so every attack on an honest party's product gives what it gave without collusion.
  The "residual equations" (equality rows: sum over honest h of A_h x_h = b - sum over colluders
  c of A_c x_c) add nothing either: the coordinator already knows each party's A_j x_j = M_j u
  + S_j y_j (its row activity) on its own.
* Where a product is a sum over several parties (secure aggregation), colluders subtract their
  own contributions; what remains is a product attributed to the honest parties in it, and with
  t = p - 1 it is one honest party's product in the clear. The dense attacks run on it.

:func:`attack_collusion` measures this for every coalition size: for each t, the coalition
whose honest parties lose the most columns (the worst case), by running the attacks on the
residual products (cached: a residual attributed to the same parties is attacked once).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from securelp.coordinator.audit.view import MaskedProduct

#: coalitions of one size enumerated at most (beyond: a greedy coalition)
MAX_COALITIONS = 64


@dataclass(eq=False)
class CollusionResult:
    """The worst coalition of one size and what the attacks recovered of its honest parties."""

    size: int
    coalition: tuple[str, ...]
    honest: tuple[str, ...]
    honest_columns: int
    claimed_without: int
    claimed_with: int
    residual_products: int
    skipped: list[str] = field(default_factory=list)
    truth: dict[str, Any] | None = None

    @property
    def added(self) -> int:
        return self.claimed_with - self.claimed_without

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"colluders": self.size, "coalition": list(self.coalition), "honest": list(self.honest),
                               "honest_columns": self.honest_columns, "claimed_exact_without": self.claimed_without,
                               "claimed_exact_with": self.claimed_with, "added": self.added,
                               "residual_products_attacked": self.residual_products}
        if self.skipped:
            out["skipped"] = list(self.skipped)
        if self.truth is not None:
            out["truth"] = dict(self.truth)
        return out


def _coalitions(parties: Sequence[str], t: int, score: Callable[[tuple[str, ...]], float]) -> list[tuple[str, ...]]:
    if math.comb(len(parties), t) <= MAX_COALITIONS:
        return list(itertools.combinations(parties, t))
    # greedy: add the party whose joining hurts the remaining honest parties most
    chosen: list[str] = []
    for _ in range(t):
        rest = [p for p in parties if p not in chosen]
        chosen.append(max(rest, key=lambda p: score(tuple(chosen + [p]))))
    return [tuple(chosen)]


def attack_collusion(parties: Sequence[str], n_cols: Mapping[str, int], products: Sequence[MaskedProduct],
                     claimed_alone: Mapping[str, int],
                     attack_residual: Callable[[MaskedProduct], Mapping[str, int]],
                     own_products: Mapping[str, MaskedProduct] | None = None) -> list[CollusionResult]:
    """The worst coalition of each size 1 .. p-1.

    Parameters
    ----------
    parties, n_cols : the session's parties and their column counts.
    products : the masked products the coordinator received.
    claimed_alone : per party, the columns the attacks claimed without collusion (all families).
    attack_residual : runs the dense attacks on a residual product; returns columns claimed per
        honest party it covers.
    own_products : each colluder's own contribution to a shared product (known to it), needed to
        reduce a product of several parties; plain products need none.
    """
    results: list[CollusionResult] = []
    cache: dict[frozenset[str], Mapping[str, int]] = {}
    shared = [pr for pr in products if len(pr.parties) > 1]

    def evaluate(coalition: tuple[str, ...]) -> tuple[int, int, int, list[str]]:
        honest = [p for p in parties if p not in coalition]
        without = sum(int(claimed_alone.get(h, 0)) for h in honest)
        gained = 0
        residuals = 0
        skipped: list[str] = []
        for pr in shared:
            rest = frozenset(pr.parties) - frozenset(coalition)
            if not rest or rest == frozenset(pr.parties):
                continue
            inside = [c for c in pr.parties if c in coalition]
            if own_products is None or any(c not in own_products for c in inside):
                skipped.append(f"the product of {pr.label}: the colluders' own contributions are not known here")
                continue
            if rest not in cache:
                M = pr.M - sum(own_products[c].M for c in inside)
                Bc = pr.Bc - sum(own_products[c].Bc for c in inside)
                n_rest = sum(int(n_cols[p]) for p in pr.parties if p in rest)
                residual = MaskedProduct(parties=tuple(p for p in pr.parties if p in rest), M=M, Bc=Bc, n_cols=n_rest,
                                         known_mask_rows=np.zeros((0, M.shape[1])),
                                         known_mask_index=np.zeros(0, dtype=np.int64),
                                         known_mask_lower=np.zeros(0), known_mask_upper=np.zeros(0), u=pr.u,
                                         x=None, x_values=None)
                cache[rest] = attack_residual(residual)
                residuals += 1
            gained += sum(int(v) for v in cache[rest].values())
        return without, without + gained, residuals, skipped

    for t in range(1, len(parties)):
        def damage(c: tuple[str, ...]) -> float:
            honest_cols = sum(int(n_cols[p]) for p in parties if p not in c)
            return evaluate(c)[1] / honest_cols if honest_cols else 0.0

        best: CollusionResult | None = None
        best_frac = -1.0
        for coalition in _coalitions(parties, t, damage):
            without, with_, residuals, skipped = evaluate(coalition)
            honest = tuple(p for p in parties if p not in coalition)
            cols = sum(int(n_cols[p]) for p in honest)
            frac = with_ / cols if cols else 0.0
            if frac > best_frac:
                best_frac = frac
                best = CollusionResult(t, tuple(coalition), honest, cols, without, with_, residuals, skipped)
        if best is not None:
            results.append(best)
    return results
