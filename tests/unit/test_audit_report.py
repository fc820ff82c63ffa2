"""Statements that follow from the attacks: the report's leakage entries, the plain words for
bounded columns, "our attacks did not recover" (never "cannot"), the truth beside them, a wrong
claim caught; and the CLI: --transcript, securelp audit, its exit codes and errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from securelp.coordinator.examples import random_solvable_lp
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.report import REPORT_VERSION, build_report, format_report
from securelp.coordinator.simulation import owners_consent, simulate
from securelp.solvers.lp import LinearProgram
from securelp.solvers.lp.partition import parse_split, split_columns
from tests.audit_fixtures import audit, bounded, netlib, run_session, sparse_lp

REPO = Path(__file__).resolve().parents[2]
LEAKAGE_KEYS = {"mode", "dense_masked_columns", "monomial_columns", "bound_rows", "revealed_solution",
                "every_column_bounded", "coordinator_can_reconstruct", "not_recovered_by_our_attacks", "summary",
                "attacks", "truth", "with_known_rows", "reproducible"}


def _statements(leak: dict) -> list[str]:
    return leak["coordinator_can_reconstruct"] + leak["not_recovered_by_our_attacks"]


def test_every_bounded_column_is_said_to_be_unprotected() -> None:
    lp = netlib("blend")
    public, blocks = split_columns(lp, parse_split(None, lp.n_cols, 3))
    config = SessionConfig(reveal=True)  # owners who reveal x_j: the normalization claims are checked against it
    outcome, a = simulate(public, blocks, config, central=lp, policy=owners_consent(config))
    report = json.loads(json.dumps(build_report(outcome, a)))
    assert report["report_version"] == REPORT_VERSION == 2
    assert {"budget_s", "seconds", "skipped", "collusion", "claims_hold"} <= set(report["audit"])
    for p in report["parties"]:
        leak = p["leakage"]
        assert set(leak) == LEAKAGE_KEYS
        assert leak["every_column_bounded"] and leak["dense_masked_columns"] == 0
        assert any("no dense random mask protects any of them" in s for s in leak["coordinator_can_reconstruct"])
        assert all("cannot" not in s for s in _statements(leak))
        exact, guessed = leak["summary"]["recovered_exact"], leak["summary"]["best_guess"]
        if exact:
            assert any(f"exact values (entries and cost) of {exact} of these" in s
                       for s in leak["coordinator_can_reconstruct"])
        assert exact + guessed == p["n_cols"]  # every bounded column's values: a claim or a best guess
        assert any(s.startswith("best guesses (not confirmed) of the values of") for s in
                   leak["coordinator_can_reconstruct"]) == (guessed > 0)
        assert leak["truth"]["claims_hold"] and leak["truth"]["claimed_right"] == exact
        assert {a_["attack"] for a_ in leak["attacks"]} >= {"monomial_normalization", "monomial_positions",
                                                            "dense_column_space", "solution_revealed"}
    text = format_report(outcome, audit=a)
    assert "no dense random mask protects" in text and "cannot" not in text


def test_dense_statements_come_from_attacks_that_ran_and_failed() -> None:
    lp, _ = random_solvable_lp(60, 20, np.random.default_rng(81))
    public, blocks = split_columns(lp, [12, 8])
    outcome, a = simulate(public, blocks, SessionConfig(), central=lp)
    for p in build_report(outcome, a)["parties"]:
        leak = p["leakage"]
        assert not leak["every_column_bounded"]
        not_rec = " ".join(leak["not_recovered_by_our_attacks"])
        assert "our attacks (" in not_rec and "did not recover" in not_rec
        assert "sparse recovery by random pivot rows" in not_rec and "l1 minimization" in not_rec
        ran = {x["attack"] for x in leak["attacks"] if x["status"] == "ran"}
        assert {"dense_sparse_recovery", "dense_l1_recovery", "dense_column_space"} <= ran
        assert all("cannot" not in s for s in _statements(leak))
        assert leak["truth"]["recovered_exact"] == 0


def _root2_lp() -> LinearProgram:
    """Bounded columns whose entries are +-0.70710678 with cost 1.41421356 (as in netlib's scsd1):
    the rounder reading, entries +-1 and cost 2, is the normalization's best guess, and it is wrong."""
    rng = np.random.default_rng(91)
    m, n = 20, 12
    rows = np.concatenate([rng.choice(m, 4, replace=False) for _ in range(n)])
    vals = 0.70710678 * rng.choice([-1.0, 1.0], rows.size)
    A = sp.csc_matrix((vals, (rows, np.repeat(np.arange(n), 4))), shape=(m, n))
    return LinearProgram(c=np.full(n, 1.41421356), A=A, row_lower=np.full(m, -10.0), row_upper=np.full(m, 10.0),
                         col_lower=np.zeros(n), col_upper=np.full(n, 5.0))


def test_a_round_reading_is_a_guess_not_a_claim() -> None:
    """Without x_j nothing confirms a factor: the rounder (wrong) reading of the sqrt(2) data stays a
    best guess, the truth marks the guess wrong, and no claim is wrong."""
    _, transcript, blocks = run_session(_root2_lp(), parties=1, reveal=False, seed="root2")
    a = audit(transcript, blocks)
    pa = a.parties["party1"]
    assert pa.summary["recovered_exact"] == 0 and pa.summary["best_guess"] == 12
    guesses = pa.truth["guesses"]
    assert sum(e["guessed"] for e in guesses.values()) == 12 and sum(e["right"] for e in guesses.values()) == 0
    assert pa.truth["claimed_wrong"] == 0 and pa.truth["claims_hold"]


def test_fresh_randomness() -> None:
    """Unseeded data, masks and pivot orders: the planted weak party is flagged fully recovered and the
    generic dense one resists, whatever the draw."""
    rng = np.random.default_rng()
    lp = bounded(sparse_lp(rng, 30, 24, 3, values="unit"))
    _, transcript, blocks = run_session(lp, parties=2, reveal=False, masks=None)
    a = audit(transcript, blocks, seed=None)
    for pa in a.parties.values():
        assert pa.summary["best_guess"] == pa.view.n_cols == pa.truth["recovered_exact"]
        assert pa.truth["claimed_wrong"] == 0
    dense, _ = random_solvable_lp(50, 16, rng)
    _, transcript, blocks = run_session(dense, split=[8, 8], planted={"party1": "identity"}, masks=None)
    a = audit(transcript, blocks, seed=None)
    assert a.parties["party1"].outcome("dense_mask_structure").up_to_scale == 8
    assert a.parties["party1"].truth["recovered_up_to_scale"] == 8
    honest = a.parties["party2"]
    assert honest.summary["recovered_exact"] == 0 and honest.truth["recovered_up_to_scale"] == 0


def test_the_quoted_hit_rates_are_the_measured_ones() -> None:
    """The hit rates the statements quote are the sums over the newest benchmark runs (a stale or
    edited table fails), and a statement quotes them for its class."""
    from benchmarks.bench_leakage import hit_rates
    from securelp.coordinator.audit import hit_rates as quoted
    from securelp.coordinator.audit.statements import measured

    rates = hit_rates()
    assert quoted.MEASURED == rates["values"] and quoted.POSITIONS == rates["positions"]
    assert quoted.MEASURED, "no hit rates measured: run bench_leakage and --render-hit-rates"
    cls, (right, made) = max(quoted.MEASURED.items(), key=lambda kv: kv[1][1])
    assert f"right in {right:,} of {made:,} cases" in measured("guess:" + cls)
    assert measured("guess:no_such_class") == "such guesses were not measured yet"
