"""Seeded masks: a party whose mask came from a seed can be unmasked by anyone who guesses it.

In the reproducible-simulation mode (``--seed``, flagged ``reproducible`` in each MaskedBlock) a
party's random source is ChaCha20 keyed with SHA-256 of ``securelp/seed/{seed}/party/{id}``
(:class:`securelp.solvers.randomness.SecureRandom`), and ``securelp solve``/``demo`` give every
simulated party the seed ``{S}/{id}``: the masks of all parties follow from one S, so they are
not independent, and anyone who knows or guesses S recomputes every mask. ``securelp party --seed
S`` keys the party with S itself.

``seed_guess``
    Tries small integers and common words, in both forms, replays the party's draws in the order
    the protocol makes them (the aggregation key when secure aggregation was asked for, then the
    dense mask B (k x n_d), then the permutation and the scales of the monomial columns), and
    keeps a seed only when a check confirms it: the masked block's rows lie in the row space of
    the recomputed B' (k > n_d makes this fail for a wrong B), or every recomputed d_t y_t is the
    entry of the revealed x_j at the recomputed position, with at least one y_t != 0 (a solution at
    zero fits every seed, so it confirms none). A confirmed seed gives every column
    exactly and, where the positions follow, in place.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.audit.budget import Budget
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns, not_applicable
from securelp.coordinator.audit.view import PartyView
from securelp.party.session import SCALE_SPREAD
from securelp.solvers.randomness import SecureRandom

FAMILY = "seed"
#: integer seeds tried (0 .. SEED_INTEGERS - 1), then these words
SEED_INTEGERS = 1000
SEED_WORDS = ("seed", "test", "securelp", "demo", "secret", "default", "password", "key", "abc", "foo")
#: relative residual of M against the row space of the recomputed B' that confirms a seed
RESIDUAL_TOL = 1e-9
#: rows of the masked block tested first for each guess (the whole block only for a seed that passes)
PROBE_ROWS = 8


def seed_forms(party: str) -> list[tuple[str, str]]:
    """(the seed given, the key string the party derives from it) for every guess, both forms."""
    guesses = [str(i) for i in range(SEED_INTEGERS)] + list(SEED_WORDS)
    return [(g, f"{g}/{party}") for g in guesses] + [(g, g) for g in guesses]


def _replay(view: PartyView, key: str, n_dense: int) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The party's draws under ``key``: (B or None, permutation, scales of the monomial columns in the
    order sent: d[t] for column t, and the original bounded index perm[t])."""
    rng = SecureRandom(key, label=f"party/{view.party_id}")
    if view.aggregation_requested:
        rng.bytes(32)
    B = rng.standard_normal((view.k, n_dense)) if n_dense else None
    nb = view.n_monomial
    if nb:
        perm = rng.permutation(nb)
        scale = np.exp(rng.uniform(-np.log(SCALE_SPREAD), np.log(SCALE_SPREAD), nb))
        return B, perm, scale[perm]
    return B, np.zeros(0, dtype=np.int64), np.zeros(0)


def _columns_in_place(view: PartyView, B: np.ndarray | None, n_dense: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Original positions of the dense columns (in mask order) and of the bounded ones (in their order):
    known outright when the party has only one kind; else from the revealed x_j (x_d = B'u matched to
    its entries, the bounded columns taking the others in order). -1 / None where unknown."""
    unknown = np.full(n_dense, -1, dtype=np.int64)
    if view.n_monomial == 0:
        return np.arange(n_dense), None
    if n_dense == 0:
        return unknown, np.arange(view.n_monomial)
    if B is None or view.x is None or view.u is None or view.u.size != B.shape[0]:
        return unknown, None
    x_d = B.T @ view.u
    taken = np.zeros(view.x.size, dtype=bool)
    dense_at = unknown.copy()
    for j, value in enumerate(x_d):
        hit = np.flatnonzero(~taken & (np.abs(view.x - value) <= 1e-9 * max(abs(value), 1e-12)))
        if hit.size != 1:
            return unknown, None
        dense_at[j] = hit[0]
        taken[hit[0]] = True
    return dense_at, np.flatnonzero(~taken)


def attack_seed(view: PartyView, budget: Budget) -> AttackOutcome:
    """``seed_guess`` on one party (see the module docstring)."""
    name = "seed_guess"
    parties = (view.party_id,)
    if not view.reproducible:
        return not_applicable(name, FAMILY, parties, "the party drew its mask from fresh entropy, not a seed")
    if not view.masked:
        return not_applicable(name, FAMILY, parties, "no masked block was received")
    t0 = time.perf_counter()
    n_dense = view.n_dense
    M = view.masked_a if view.masked_a.shape[1] else None
    can_check_dense = M is not None and view.k > n_dense > 0
    # x_i = d_t y_t tests a guessed seed only where y_t != 0: a solution at zero fits every seed
    can_check_x = (view.x is not None and view.y is not None and view.n_monomial > 0 and n_dense == 0
                   and bool(np.any(view.y != 0)))
    figures: dict = {"guesses": 0}
    if not (can_check_dense or can_check_x):
        return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=view.n_cols, figures=figures,
                             reason="no check could confirm a guessed seed here (no dense product to test against, "
                                    "no revealed x_j with a nonzero entry); the masks are recomputable all the same",
                             seconds=time.perf_counter() - t0)
    found = None
    rows = np.flatnonzero(np.any(M != 0, axis=1))[:PROBE_ROWS] if M is not None else np.zeros(0, dtype=np.int64)
    for given, key in seed_forms(view.party_id):
        if budget.expired():
            figures["stopped_by"] = "the budget"
            break
        figures["guesses"] += 1
        B, perm, d = _replay(view, key, n_dense)
        if can_check_dense:
            assert M is not None and B is not None
            Q, _ = np.linalg.qr(B)  # the rows of M = A_d B' lie in range(B) (k > n_d: a wrong B fails)
            probe = M[rows].T
            if np.linalg.norm(probe - Q @ (Q.T @ probe)) > RESIDUAL_TOL * max(np.linalg.norm(probe), 1e-300):
                continue
            coef = np.linalg.lstsq(B, M.T, rcond=None)[0]  # M' = B A_d'
            res = np.linalg.norm(B @ coef - M.T) / max(np.linalg.norm(M), 1e-300)
            if res <= RESIDUAL_TOL:
                found = (given, key, B, coef.T, perm, d)
                break
        else:
            assert view.x is not None and view.y is not None
            target = d * view.y
            if np.all(np.abs(view.x[perm] - target) <= 1e-9 * np.maximum(np.abs(target), 1e-300)):
                found = (given, key, B, None, perm, d)
                break
    if found is None:
        return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=view.n_cols, figures=figures,
                             reason=f"none of the {figures['guesses']} guessed seeds fits; a seed outside that list "
                                    "recomputes the masks all the same", seconds=time.perf_counter() - t0)
    given, key, B, A_d, perm, d = found
    figures.update({"seed_form": "{seed}/{party}" if key != given else "{seed}"})
    dense_at, bounded_at = _columns_in_place(view, B, n_dense)
    cols, costs, pos = [], [], []
    if B is not None and A_d is not None:
        cols.append(A_d)
        costs.append(np.linalg.lstsq(B, view.masked_c, rcond=None)[0])
        pos.append(dense_at)
    if view.n_monomial:
        S = sp.csc_matrix(view.scaled_a)
        cols.append((S @ sp.diags(1.0 / d)).toarray())
        costs.append(view.scaled_c / d)
        pos.append(bounded_at[perm] if bounded_at is not None else np.full(perm.size, -1, dtype=np.int64))
    A = np.hstack(cols)
    A[np.abs(A) <= 1e-12 * np.maximum(np.abs(A).max(axis=0, keepdims=True), 1e-300)] = 0.0
    n = A.shape[1]
    position = np.concatenate(pos).astype(np.int64)
    rec = RecoveredColumns(sp.csc_matrix(A), np.concatenate(costs), np.ones(n, dtype=bool), position,
                           signed_scale=True, basis=np.full(n, "seed", dtype=object))
    return AttackOutcome(name, FAMILY, parties, AttackStatus.RAN, columns=view.n_cols, claimed=n, up_to_scale=n,
                         positions=int((position >= 0).sum()), figures=figures, seconds=time.perf_counter() - t0,
                         recovered=rec)
