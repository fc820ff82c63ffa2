"""Leakage statements that follow from the attacks that ran, in words a data owner understands.

Each party's ``leakage`` entry in a report (docs/reports.md) is built here from its
:class:`~securelp.coordinator.audit.session.PartyAudit`, in three strengths:

* **exact** (``coordinator_can_reconstruct``): what a check confirms from the transcript alone,
  naming the check (:data:`~securelp.coordinator.audit.results.CHECKS`: the revealed solution
  fitting the scaled columns one way only, the mask rows of rows mode, a single dense column
  with its value, a recomputed seeded mask), and what the protocol reveals by construction
  (directions of bounded columns, the column space, row activity, message sizes);
* **best guesses** (also under ``coordinator_can_reconstruct``): values or positions an attack
  guesses from round numbers, sparsity or the usual order of columns, never claimed, each with
  the hit rate measured for its class (:mod:`~securelp.coordinator.audit.hit_rates`);
* **not recovered** (``not_recovered_by_our_attacks``): only what no attack guessed with any
  strength, worded "our attacks ... did not ..." or "only weak guesses", with what would give it
  away (one number of a monomial column gives all of it); a skipped attack is named with its
  reason and nothing is claimed for it.

With the truth (simulations), the ``truth`` entry says how many claims were right
(``claims_hold`` is false as soon as one claimed column or position is wrong) and how many best
guesses of each class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from securelp.coordinator.audit.hit_rates import hit_rate
from securelp.coordinator.audit.results import CHECKS, GUESS, AttackOutcome, AttackStatus
from securelp.coordinator.audit.session import PartyAudit, SessionAudit, _merged_dense, _merged_monomial
from securelp.party.session import SCALE_SPREAD

#: attack names in words
ATTACK_WORDS = {
    "monomial_normalization": "normalization (an entry, the cost or a bound of size 1, primitive integers, "
                              "round-number scales in the public range)",
    "monomial_positions": "matching to the revealed solution",
    "monomial_column_order": "the usual column order of MPS files (sorting by row pattern)",
    "known_mask_rows": "the mask rows sent as bound rows (Bednarz et al.)",
    "mask_rows_free_columns": "the bound rows with free columns: the sparsest reading off the free columns' span",
    "dense_row_support": "zero rows of the masked product",
    "dense_column_space": "the column space of the masked product",
    "dense_row_gram": "the row Gram estimate M M'/k",
    "dense_mask_structure": "a check for a mask that does not mix columns",
    "dense_single_column": "a single dense column from the revealed solution (a = M u / x_f)",
    "dense_sparse_recovery": "sparse recovery by random pivot rows",
    "dense_l1_recovery": "sparse recovery by l1 minimization",
    "dense_costs": "costs from the masked costs, then normalization and the revealed solution",
    "seed_guess": "guessing the seed of a seeded mask",
    "known_rows": "equations from rows of A assumed known",
    "known_rows_monomial": "rows of A assumed known, against the scaled columns",
    "solution_row_activity": "the row activity at the solution",
    "solution_revealed": "the revealed solution",
}

#: classes of best guesses of values, in words (``x_`` prefixed: among the factors the revealed
#: solution allows; ``dense_``, ``single_dense_``: the same readings of dense columns' factors)
GUESS_WORDS = {
    "round": "the one factor that makes every number of the column round",
    "round_alternatives": "a factor that makes every number round where other factors do too (integer data "
                          "read with an entry of 1, say)",
    "partly_round": "the factor that makes the most numbers round (two or more)",
    "learnt": "one number of size 1, on a pattern that held on the confirmed columns (a row of ones, upper bounds "
              "of 1)",
    "weak": "one number made round (an entry, the cost or a bound of size 1)",
    "ambiguous": "one of several equally round factors",
    "sparsest_decomposition": "the sparsest reading of each bounded column off the free columns' span, checked "
                              "(the free columns' mask rows it implies are independent of your bound rows)",
    "sparsest_unchecked": "the sparsest reading off the free columns' span, failing that check",
}
POSITION_WORDS = {
    "x_scale": "the single entry of your revealed x_j equal to d_t y_t under the guessed factor",
    "column_order": "the usual column order of MPS files (sorting your columns by the rows they touch)",
    "dense_x_scale": "the entry of your revealed x_j that the guessed factor of a dense column gives",
    "bound_rows_x": "the entry of your revealed x_j equal to x_b = B_b'u (exact for the mask row; the column's "
                    "values there are the guess above)",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _ran(pa: PartyAudit, name: str) -> AttackOutcome | None:
    o = pa.outcome(name)
    return o if o is not None and o.status is AttackStatus.RAN else None


def _skipped_lines(pa: PartyAudit) -> list[str]:
    return [f"our attack '{ATTACK_WORDS.get(o.attack, o.attack)}' did not run ({o.reason}); nothing is claimed "
            "for it" for o in pa.outcomes if o.status is AttackStatus.SKIPPED]


def measured(cls: str, *, positions: bool = False) -> str:
    """How often guesses of class ``cls`` were right where they were measured, in words."""
    rate = hit_rate(cls, positions=positions)
    if rate is None or rate[1] == 0:
        return "such guesses were not measured yet"
    right, guessed = rate
    return f"such guesses were right in {right:,} of {guessed:,} cases we measured (docs/threat_model.md)"


def _class_words(cls: str) -> str:
    key = cls.removeprefix(GUESS)
    lead = ""
    for prefix, words in (("single_dense_", "(the value of your single dense column among those x_j allows) "),
                          ("dense_", "(the dense columns' factors) ")):
        if key.startswith(prefix):
            key, lead = key[len(prefix):], words
            break
    tail = ""
    if key.startswith("x_"):
        key, tail = key[2:], ", among the factors your revealed solution allows"
    return lead + GUESS_WORDS.get(key, key) + tail


def _guess_line(counts: dict[str, int], what: str) -> str:
    parts = [f"{n} by {_class_words(cls)} ({measured(cls)})" for cls, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return f"best guesses (not confirmed) of the values of {what}: " + "; ".join(parts)


def _position_guess_line(counts: dict[str, int], total: int, extra: str = "") -> str:
    parts = [f"{n} from {POSITION_WORDS.get(cls.removeprefix(GUESS), cls)} ({measured(cls, positions=True)})"
             for cls, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return (f"best guesses (not confirmed) of the original positions of {sum(counts.values())} of these {total} "
            "columns: " + "; ".join(parts) + extra)


def _split(counts: dict[str, int], weak: tuple[str, ...]) -> tuple[dict[str, int], dict[str, int]]:
    strong = {k: v for k, v in counts.items() if k.removeprefix(GUESS).removeprefix("x_") not in weak}
    return strong, {k: v for k, v in counts.items() if k not in strong}


def _monomial_lines(pa: PartyAudit, can: list[str], not_rec: list[str]) -> None:
    v = pa.view
    nb = v.n_monomial
    if not nb:
        return
    if v.n_bounded == v.n_cols:
        can.append(f"all {v.n_cols} of your columns have a bound (such as x >= 0), so no dense random mask protects "
                   "any of them: the coordinator receives each column multiplied by a secret positive factor, in a "
                   "shuffled order")
    else:
        can.append(f"your {_plural(nb, 'bounded column')} are not under the dense mask: the coordinator receives "
                   "each multiplied by a secret positive factor, in a shuffled order")
    can.append(f"for each of these {nb} columns: which constraints it touches, its signs and the ratios between its "
               "entries, its cost and its bounds, exactly; only one positive factor per column is hidden, so anyone "
               "who knows or guesses one number of a column (an entry, its cost or a bound, such as a coefficient "
               "or an upper bound of 1) has all of it")
    rec = _merged_monomial(pa, with_assumed=False)
    norm = _ran(pa, "monomial_normalization")
    if rec is None or norm is None:
        return
    certain = np.asarray(rec.scale_known, dtype=bool)
    if certain.any():
        placed = int((rec.position[certain] >= 0).sum())
        can.append(f"the exact values (entries and cost) of {int(certain.sum())} of these {nb} columns, confirmed by "
                   f"{CHECKS['solution_matching']} [1/{SCALE_SPREAD:g}, {SCALE_SPREAD:g}]"
                   + (f"; {placed} of them at their original position" if placed else ""))
    guessed = rec.bases[rec.guessed]
    counts = {str(k): int(n) for k, n in zip(*np.unique(guessed.astype(str), return_counts=True))} if guessed.size else {}
    strong, weak = _split(counts, ("weak", "ambiguous"))
    if strong:
        can.append(_guess_line(strong, f"{sum(strong.values())} {'more ' if certain.any() else ''}of these columns"))
    if weak:
        not_rec.append(f"for {sum(weak.values())} of your {nb} bounded columns our attacks have only weak guesses: "
                       + "; ".join(f"{n} by {_class_words(c)} ({measured(c)})" for c, n in weak.items())
                       + "; anyone who knows one number of such a column has it exactly")
    none = nb - int(certain.sum()) - int(guessed.size)
    if none > 0:
        not_rec.append(f"our attacks ({ATTACK_WORDS['monomial_normalization']}) found no candidate factor for "
                       f"{none} of your {nb} bounded columns; anyone who knows one number of such a column has it "
                       "exactly")
    if norm.reason:
        not_rec.append(f"our normalization stopped early: {norm.reason}")
    # positions
    pos = int((rec.position >= 0).sum())
    if pos and not certain.any():
        can.append(f"the original position of {pos} of these columns")
    pg = rec.position_guesses >= 0
    pcounts = {str(k): int(n) for k, n in zip(*np.unique(rec.position_bases[pg].astype(str), return_counts=True))} \
        if pg.any() else {}
    if pcounts:
        order = _ran(pa, "monomial_column_order")
        extra = ""
        if order is not None and order.figures.get("checked_on_certain_positions"):
            extra = (f"; on the {order.figures['checked_on_certain_positions']} of your columns whose positions are "
                     f"certain, that order was right for {order.figures['right_on_certain_positions']}")
        can.append(_position_guess_line(pcounts, nb, extra))
    unplaced = nb - pos - int(pg.sum())
    if unplaced > 0:
        how = [ATTACK_WORDS["monomial_positions"]] if v.x is not None else []
        if _ran(pa, "monomial_column_order") is not None:
            how.append(ATTACK_WORDS["monomial_column_order"])
        which = ", ".join(how) or ("none applies: no revealed solution, and dense columns sit at unknown positions "
                                   "among the bounded ones")
        not_rec.append(f"our attacks ({which}) have no guess of the original position of {unplaced} of your {nb} "
                       "bounded columns")


def _aggregated_lines(pa: PartyAudit, audit: SessionAudit, can: list[str], not_rec: list[str]) -> None:
    """A party whose dense product reached the coordinator only as a share of the sum (secure aggregation)."""
    v = pa.view
    nd = v.n_dense
    joint = [o for o in audit.shared if pa.party_id in o.parties]
    others = sorted({p for o in joint for p in o.parties} - {pa.party_id})
    everyone = len(others) + 1
    total = max((o.columns for o in joint), default=nd)
    can.append(f"your {_plural(nd, 'column')} under the dense mask reached the coordinator only inside the sum of the "
               f"masked products of {everyone} parties (secure aggregation, with {', '.join(others)}): what the "
               f"attacks found in that sum ({total} columns) is about all of you together; only what a line below says "
               "is yours is attributed to you")
    ran = {o.attack: o for o in joint if o.ran}
    if "dense_row_support" in ran:
        sup = ran["dense_row_support"]
        can.append(f"which of the {sup.figures['rows']} constraints the {everyone} parties' dense columns touch together "
                   f"({sup.figures['support_rows']} rows)")
    if "dense_column_space" in ran:
        cs = ran["dense_column_space"]
        can.append(f"the subspace spanned by all {total} of those columns together (dimension {cs.figures['rank']} of "
                   f"{cs.figures['rows']}), not the one spanned by yours")
    if "dense_row_gram" in ran:
        can.append("an estimate of the sum over the aggregating parties of the inner products between their rows "
                   "(sum_j A_j A_j'), not yours alone")
    found = max((o.up_to_scale for o in joint if o.ran and o.attack in ("dense_mask_structure", "dense_sparse_recovery",
                                                                        "dense_l1_recovery")), default=0)
    if found:
        can.append(f"{found} of the {total} columns of the sum up to a factor each (by themselves they do not say "
                   "whose they are)")
    mine = [o for o in pa.outcomes if o.ran and o.figures.get("from_sum") and o.recovered is not None]
    placed = max((o.positions for o in mine), default=0)
    exact = max((o.claimed for o in mine), default=0)
    if placed:
        how = ("your mask rows" if any(o.attack == "known_mask_rows" for o in mine)
               else "matching them to your revealed solution x_j")
        can.append(f"{placed} of your {nd} dense-masked columns told apart from the others' and placed at their "
                   f"original position ({how})" + (f", {exact} of them with their exact values and costs" if exact else ""))
    guessed = max((int((o.recovered.position_guesses >= 0).sum()) for o in mine if o.recovered is not None),
                  default=0)
    if guessed:
        cls = next(str(c) for o in mine if o.recovered is not None
                   for c in o.recovered.position_bases[o.recovered.position_guesses >= 0])
        can.append(f"best guesses (not confirmed): {guessed} of your {nd} dense-masked columns told apart from the "
                   f"others' and placed among your columns by {POSITION_WORDS.get(cls.removeprefix(GUESS), cls)} "
                   f"({measured(cls, positions=True)}), with guesses of their values")
        placed += guessed
    can.append("a power-of-two bound on the magnitude of your dense product and of your masked costs (reported for "
               "the fixed-point encoding)")
    full = next((c for c in audit.collusion if c.honest == (pa.party_id,)), None)
    colluders = ("the other aggregating party" if len(others) == 1
                 else f"all {len(others)} other aggregating parties")
    if full is not None and not full.skipped:
        gained = full.added
        can.append(f"with {colluders} colluding: your own dense product exactly (the sum "
                   "minus theirs), as without secure aggregation"
                   + (f"; on it our attacks recovered {gained} of your columns exactly" if gained else ""))
    else:
        can.append(f"with {colluders} colluding: your own dense product exactly (the sum "
                   "minus theirs), as without secure aggregation (not measured in this audit: the colluders' own "
                   "products are not in the transcript)")
    not_rec.append("your own dense product: the coordinator received only a share of the sum, uniformly distributed "
                   "given the sum (the attacks above ran on the sum)")
    if nd - placed > 0:
        not_rec.append(f"our attacks did not tell {nd - placed} of your {nd} dense-masked columns apart from the other "
                       "aggregating parties' columns")


def _rows_free_lines(pa: PartyAudit, can: list[str], not_rec: list[str]) -> None:
    """Rows mode with free columns: the bound rows fix the bounded columns up to the free columns' span."""
    v = pa.view
    o = _ran(pa, "mask_rows_free_columns")
    if o is None or o.recovered is None:
        return
    f = o.figures
    can.append(f"the mask rows and the bounds of your {_plural(f['bound_rows'], 'bounded column')} (sent as constraint "
               f"rows in rows mode): with your {_plural(f['free_columns'], 'free column')} they fix each bounded "
               f"column up to a vector of the span of your free columns, which the masked block reveals (dimension "
               f"{f['free_rank']})")
    if v.u is not None:
        can.append(f"the solution values of your {_plural(f['bound_rows'], 'bounded column')} exactly: x_b = B_b'u "
                   "from your bound rows")
    if f["free_columns"] == 1 and f["free_rank"] == 1:
        can.append("your free column up to a factor (its direction is the span above)")
    rec = o.recovered
    guessed = rec.bases[rec.guessed]
    counts = {str(k): int(n) for k, n in zip(*np.unique(guessed.astype(str), return_counts=True))} if guessed.size else {}
    if counts:
        can.append(_guess_line(counts, f"{int(guessed.size)} of your {v.n_dense} columns (entries and costs"
                               + (", the free column's from M u = A_b x_b + a_f x_f" if f.get("free_values_from_x")
                                  else "") + ")"))
    pg = rec.position_guesses >= 0
    if pg.any():
        can.append(_position_guess_line({"bound_rows_x": int(pg.sum())}, v.n_dense))


def _dense_lines(pa: PartyAudit, audit: SessionAudit, can: list[str], not_rec: list[str]) -> None:
    v = pa.view
    nd = v.n_dense
    if not nd:
        return
    kmr = _ran(pa, "known_mask_rows")
    if kmr is not None and kmr.claimed == nd:
        can.append(f"your whole block (all {nd} columns and their costs) exactly and in its original order, confirmed "
                   f"by {CHECKS['mask_rows']}: in rows mode every bound travels as a row of your mask")
        return
    if _ran(pa, "mask_rows_free_columns") is not None:
        _rows_free_lines(pa, can, not_rec)
    elif kmr is not None:
        can.append(f"the mask rows and the bounds of your {_plural(int(kmr.figures.get('mask_rows', 0)), 'bounded column')} "
                   "(sent as constraint rows in rows mode)")
    if v.aggregated:
        _aggregated_lines(pa, audit, can, not_rec)
        return
    can.append(f"your {_plural(nd, 'column')} under the dense mask are mixed by a secret random matrix; still:")
    sup = _ran(pa, "dense_row_support")
    if sup is not None:
        can.append(f"which of the {sup.figures['rows']} constraints they touch ({sup.figures['support_rows']} rows), "
                   "exactly")
    cs = _ran(pa, "dense_column_space")
    if cs is not None:
        r, m = cs.figures["rank"], cs.figures["rows"]
        extra = (" - here all of it, which says nothing more" if cs.figures["whole_space"]
                 else ", the space in which the sparse-recovery attacks search")
        can.append(f"the subspace their columns span (dimension {r} of {m}){extra}")
    gram = _ran(pa, "dense_row_gram")
    if gram is not None and gram.figures.get("expected_rel_error") is not None:
        can.append("an estimate of the inner products between the rows of these columns (A A'), with a relative "
                   f"error of about {gram.figures['expected_rel_error']:.2g}")
    if v.x is not None and v.u is not None and v.masked_a.shape[1]:
        can.append("with your revealed x_j: the combination A_d x_d = M u of your dense columns weighted by their "
                   "solution values, and their share c_d'x_d = (B c)'u of the optimal value, exactly"
                   + ("; with one dense column that is the column itself once its value is known" if nd == 1 else
                      f"; each of your {nd} dense columns follows exactly once the other {nd - 1} are known"))
    single = _ran(pa, "dense_single_column")
    if single is not None and single.claimed:
        can.append(f"the exact values (entries and cost) of your dense-masked column, confirmed by "
                   f"{CHECKS['single_dense_column']}" + (", at its original position" if single.positions else ""))
    structure = _ran(pa, "dense_mask_structure")
    search_names = ("dense_mask_structure", "dense_sparse_recovery", "dense_l1_recovery")
    found = max((o.up_to_scale for o in pa.outcomes if o.attack in search_names and o.ran), default=0)
    searched = [o for o in pa.outcomes if o.attack in search_names and o.ran]
    if structure is not None and structure.up_to_scale:
        can.append(f"all {nd} of these columns up to a factor each: the mask does not mix them (each column of the "
                   "masked product is one of your columns, scaled)")
    elif found:
        can.append(f"{found} of these {nd} columns up to a factor each (the sparsest vectors of that subspace, each "
                   "the only one with its zero pattern, with no other pair as sparse in the plane of two of them, and "
                   "independent rows of the implied mask)")
    rec = _merged_dense(pa, with_assumed=False)
    guessed_n = 0
    if rec is not None and not (kmr is not None and kmr.claimed) and _ran(pa, "mask_rows_free_columns") is None:
        guessed = rec.bases[rec.guessed]
        guessed_n = int(guessed.size)
        counts = {str(k): int(n) for k, n in zip(*np.unique(guessed.astype(str), return_counts=True))} \
            if guessed.size else {}
        if counts:
            can.append(_guess_line(counts, f"{guessed_n} of them (entries and cost)"))
        pg = rec.position_guesses >= 0
        if pg.any():
            pc = {str(k): int(n) for k, n in zip(*np.unique(rec.position_bases[pg].astype(str), return_counts=True))}
            can.append(_position_guess_line(pc, nd))
    elif rec is not None:
        guessed_n = int(rec.guessed.sum())
    direction_known = max(found, int(rec.directions_claimed.sum()) if rec is not None else 0)
    exact = int(rec.scale_known.sum()) if rec is not None else 0
    if searched and nd - max(direction_known, guessed_n, exact) > 0:
        candidates = max((int(o.figures.get("found", 0)) for o in searched), default=0)
        why = (f" (the sparse search proposed {candidates} sparse vectors, but they failed the checks that they are "
               "your columns: unique with their zero pattern and in their plane, and independent rows of the implied "
               "mask)" if candidates > found else "")
        not_rec.append(f"our attacks ({', '.join(ATTACK_WORDS[o.attack] for o in searched)}) did not recover "
                       f"{nd - max(direction_known, guessed_n, exact)} of your {nd} dense-masked columns even up to a "
                       f"factor{why}")
    tried = [o for o in pa.outcomes if o.attack in ("dense_mask_structure", "dense_sparse_recovery",
                                                    "dense_l1_recovery", "dense_costs", "dense_single_column")
             and o.status is not AttackStatus.SKIPPED]
    rest = nd - exact - guessed_n
    if rest > 0 and tried:
        reasons = [o.reason for o in tried if o.status is AttackStatus.NOT_APPLICABLE and o.reason]
        not_rec.append(f"our attacks did not guess the values of {rest} of your {nd} dense-masked columns"
                       + (f" ({reasons[0]})" if reasons else ""))


def _seed_lines(pa: PartyAudit, audit: SessionAudit, can: list[str], not_rec: list[str]) -> None:
    """A party whose mask came from a seed (reproducible-simulation mode)."""
    v = pa.view
    if not v.reproducible:
        return
    can.append("your masks were drawn from a seed (reproducible-simulation mode), not fresh entropy: anyone who knows "
               "or guesses the seed recomputes them and has every one of your columns exactly and in place; "
               "`securelp solve --seed S` and `demo --seed S` give every party the seed 'S/<party id>', so one S "
               "gives every party's masks (they are not independent)")
    o = _ran(pa, "seed_guess")
    if o is not None and o.claimed:
        can.append(f"all {o.claimed} of your columns exactly, confirmed by {CHECKS['seed']}: our guesses found your "
                   f"seed among {o.figures.get('guesses', 0)} tried (integers and common words)")
    elif o is not None:
        not_rec.append(f"our seed guesses ({o.figures.get('guesses', 0)} tried: integers 0-999 and common words) did "
                       f"not find your seed ({o.reason}); whoever knows it has every column")


def _size_lines(pa: PartyAudit, can: list[str]) -> None:
    """What the sizes of the party's messages reveal (they travel in the clear around TLS records)."""
    v = pa.view
    if not v.sent_bytes:
        return
    parts = [f"n_j = {v.n_cols}"]
    if v.n_monomial:
        parts.append(f"the number of nonzeros of your bounded columns ({int(v.scaled_a.nnz)}: 16 bytes each in the "
                     "masked block)")
    if v.masked_a.shape[1] or v.aggregated:
        parts.append(f"m and k of your dense block ({v.n_rows} x {v.k})")
    if v.bound_rows.shape[0]:
        parts.append(f"the number of your bounded columns ({v.bound_rows.shape[0]} bound rows)")
    if v.x is not None:
        parts.append("that you revealed x_j")
    can.append(f"from the sizes of your messages alone ({v.sent_bytes:,} bytes sent, {v.block_bytes:,} of them the "
               "masked block; visible to anyone on the network path despite TLS, and in this report's bytes_sent): "
               + ", ".join(parts))


def _solution_lines(pa: PartyAudit, can: list[str], not_rec: list[str]) -> None:
    v = pa.view
    if _ran(pa, "solution_row_activity") is not None:
        can.append("how much of each constraint your columns use at the optimum (A_j x_j), from u and y, and your "
                   "share of the optimal value (c_j'x_j = (B c)'u + c~'y), exactly")
    if _ran(pa, "solution_revealed") is not None:
        can.append("x_j, your part of the solution (revealed by agreement)")
        return
    if not v.status:
        return
    if v.y is None and v.u is None:
        not_rec.append("x_j: you kept it, and the session sent no solution")
        return
    known: list[str] = []
    mono = _merged_monomial(pa, with_assumed=False)
    if v.n_monomial and v.y is not None:
        zero = int(np.count_nonzero(v.y == 0))
        known.append(f"which of your bounded columns are zero at the optimum ({zero} of {v.n_monomial}, each known by "
                     "its values up to a factor: y_t = 0 means x = 0)")
        if mono is not None:
            live = v.y != 0
            exact = int((np.asarray(mono.scale_known, dtype=bool) & live).sum())
            guessed = int((mono.guessed & live).sum())
            if exact:
                known.append(f"x_i = d_t y_t exactly for the {exact} nonzero ones whose factor is confirmed")
            if guessed:
                known.append(f"x_i = d_t y_t as best guesses for {guessed} more (the guessed factors above)")
    if v.mode == "rows" and v.bound_rows.shape[0] and v.u is not None:
        if v.bound_rows.shape[0] == v.n_cols:
            known.append("all of x_j exactly and in order: x = B'u with B' from your bound rows")
        else:
            known.append(f"the values of your {v.bound_rows.shape[0]} bounded columns exactly (x_b = B_b'u)")
    if known:
        can.append("of x_j, which you did not send: " + "; ".join(known))
        not_rec.append("x_j: you did not send it, but the coordinator computes what the line \"of x_j, which you did "
                       "not send\" above says")
    else:
        not_rec.append("x_j: you kept it (the coordinator holds A_j x_j and c_j'x_j, above)")


def describe(pa: PartyAudit, audit: SessionAudit) -> tuple[list[str], list[str]]:
    """(what the coordinator can reconstruct, what our attacks did not recover) for one party."""
    v = pa.view
    can = [f"n_j = {v.n_cols} columns ({v.n_free} free, {v.n_bounded} bounded)"]
    not_rec: list[str] = []
    _seed_lines(pa, audit, can, not_rec)
    family_can: list[str] = []
    family_not: list[str] = []
    _monomial_lines(pa, family_can, family_not)
    _dense_lines(pa, audit, family_can, family_not)
    seed = _ran(pa, "seed_guess")
    if seed is not None and seed.claimed >= v.n_cols:
        # the recomputed masks give every column exactly: the other families' guesses and gaps say less
        family_can = [line for line in family_can if not line.startswith("best guesses")]
        family_not = []
    can += family_can
    not_rec += family_not
    _solution_lines(pa, can, not_rec)
    _size_lines(pa, can)
    if audit.collusion and len(audit.parties) > 1:
        added = max((c.added for c in audit.collusion if pa.party_id in c.honest), default=0)
        seeded = [p for p, a in audit.parties.items() if a.view.reproducible]
        if seeded and v.reproducible:
            can.append("with colluding parties: seeded masks are not independent (one seed gives every party's), so "
                       "any colluder who knows the session's seed recomputes yours and has every column")
        elif added == 0:
            why = ("what colluders subtract from the sum leaves your dense product, above" if v.aggregated
                   else "their masks are independent of yours")
            not_rec.append(f"our attacks recovered nothing more of your columns exactly when the coordinator colluded "
                           f"with up to {len(audit.parties) - 1} other parties ({why}; measured for the worst "
                           "coalition of each size)")
        else:
            can.append(f"with colluding parties, {added} more columns (worst coalition)")
    not_rec.extend(_skipped_lines(pa))
    return can, not_rec


def leakage_entry(pa: PartyAudit, audit: SessionAudit) -> dict[str, Any]:
    """The ``parties[].leakage`` entry of a report (docs/reports.md)."""
    v = pa.view
    can, not_rec = describe(pa, audit)
    entry: dict[str, Any] = {
        "mode": v.mode or audit.mode, "dense_masked_columns": v.n_dense, "monomial_columns": v.n_monomial,
        "bound_rows": int(v.bound_rows.shape[0]), "revealed_solution": v.x is not None,
        "every_column_bounded": bool(v.n_cols and v.n_bounded == v.n_cols and v.mode == "monomial"),
        "reproducible": v.reproducible,
        "coordinator_can_reconstruct": can, "not_recovered_by_our_attacks": not_rec,
        "summary": dict(pa.summary), "attacks": [o.to_json() for o in pa.outcomes],
    }
    if pa.assumed:
        entry["with_known_rows"] = {"rows": audit.known_rows, "count": audit.known_rows_count,
                                    "attacks": [o.to_json() for o in pa.assumed]}
        if pa.assumed_truth is not None:
            entry["with_known_rows"]["truth"] = dict(pa.assumed_truth)
    if pa.truth is not None:
        entry["truth"] = dict(pa.truth)
    return entry


def audit_entry(audit: SessionAudit) -> dict[str, Any]:
    """The session-level ``audit`` entry of a report: budget, time, skipped attacks, collusion."""
    out: dict[str, Any] = {"budget_s": audit.budget_s, "seconds": round(audit.seconds, 4),
                           "evaluation_seconds": round(audit.evaluation_seconds, 4) if audit.truth_source else None,
                           "known_rows": audit.known_rows, "known_rows_count": audit.known_rows_count,
                           "skipped": audit.skipped,
                           "collusion": [c.to_json() for c in audit.collusion],
                           "shared_products": [o.to_json() for o in audit.shared],
                           "truth_source": audit.truth_source or None, "claims_hold": audit.claims_hold}
    return out


def _guess_score(t: dict[str, Any]) -> str:
    g = t.get("guesses", {})
    right, total = sum(e["right"] for e in g.values()), sum(e["guessed"] for e in g.values())
    pg = t.get("position_guesses", {})
    p_right, p_total = sum(e["right"] for e in pg.values()), sum(e["guessed"] for e in pg.values())
    out = f"; best guesses of values right: {right} of {total}" if total else ""
    return out + (f", of positions: {p_right} of {p_total}" if p_total else "")


def text_lines(pa: PartyAudit, audit: SessionAudit) -> list[str]:
    """The readable report's lines for one party."""
    can, not_rec = describe(pa, audit)
    lines = [f"{pa.party_id}: the coordinator can reconstruct"]
    lines += [f"  - {c}" for c in can[1:]] or ["  - nothing beyond the sizes"]
    if not_rec:
        lines.append(f"{pa.party_id}: not recovered by our attacks")
        lines += [f"  - {c}" for c in not_rec]
    if pa.truth is not None:
        t = pa.truth
        lines.append(f"{pa.party_id}: checked against the real data: {t['recovered_exact']} of {t['columns']} "
                     f"columns right to 1e-6, {t['claimed_wrong']} wrong claims, {t['positions_right']} of "
                     f"{t['positions_assigned']} claimed positions right" + _guess_score(t)
                     + ("" if t["claims_hold"] else "  -- THE STATEMENT ABOVE IS WRONG"))
    if pa.assumed_truth is not None and audit.known_rows_count:
        t = pa.assumed_truth
        lines.append(f"{pa.party_id}: if the coordinator also knew {_plural(audit.known_rows_count, 'row')} of A "
                     f"({audit.known_rows}): {t['recovered_exact']} of {t['columns']} columns right")
    return lines
