"""Leakage benchmark: every attack of ``securelp audit`` on real and demo LPs, per protection mode.

For each LP and mode it runs one secure session with simulated parties (in-process; every
message recorded), the attacks of :mod:`securelp.coordinator.audit` on the transcript, and their
evaluation against the blocks, and appends one JSON line per run to
``benchmarks/results/leakage.jsonl`` (machine, command, commit, date, figures). Modes:

* ``monomial``: the default; every netlib column is bounded (x >= 0), so every column is under
  the positive monomial transform;
* ``rows``: every column under the dense mask, bounds sent as mask rows (Bednarz et al.);
* ``dense``: the same LP with every column bound removed, so the default mode masks every
  column densely (what the dense mask protects, on the structure of real data; the session's LP
  may be unbounded, the transcript and its attacks do not need an optimum).

``--synthetic`` adds the random sparse LP of the outside measurement (m = 300, n = 120, 4
nonzeros per column, split 60/40/20, k = 130; free columns, so dense masks only), with integer
and with Gaussian values.

``--heldout`` adds the held-out cases of the outside review (each LP generated here with its own
seed, so none of them is an LP the attacks were tuned on): integer data without unit entries
(with and without the revealed solution), an assignment LP, a transportation LP with real costs
and capacities, a knapsack relaxation, a public row of ones (also with that row assumed known),
free real-valued columns with one column per party and with three parties, bounded and free
columns mixed (default and rows mode), a seeded session, and netlib LPs with one and with three
free columns per party in rows mode. Each line records the claims, their truth, and how many
best guesses of each class were right.

``python -m benchmarks.render`` (or ``--render docs/threat_model.md``) rewrites the tables of
docs/threat_model.md from the newest line of each (problem, mode) in the results file: the
leakage table between ``<!-- leakage-table:begin -->`` and ``<!-- leakage-table:end -->``
(:func:`table`), the held-out table between ``<!-- heldout-table:begin -->`` and
``<!-- heldout-table:end -->`` (:func:`heldout_table`) and the hit rates between
``<!-- hit-rates:begin -->`` and ``<!-- hit-rates:end -->`` (:func:`hit_rates_table`);
``--render-hit-rates`` writes the same sums of the best guesses' hits per class into
``coordinator/audit/hit_rates.py``, whence the reports quote them. ``--transport-lp SOURCESxSINKS`` writes the transportation
LP of the scaling check (supply rows <= , demand rows >=, x >= 0, integer costs) as MPS::

    python -m benchmarks.bench_leakage --netlib ../shared/data/netlib --examples
    python -m benchmarks.bench_leakage --heldout --netlib ../shared/data/netlib
    python -m benchmarks.bench_leakage --render-hit-rates
    python -m benchmarks.render
    python -m benchmarks.bench_leakage --transport-lp 200x500 --out /tmp/transport.mps
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks.results import commit
from securelp.coordinator.examples import mangasarian_example
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.simulation import owners_consent
from securelp.solvers.files import write_atomically
from securelp.solvers.lp import LinearProgram, read_mps
from securelp.solvers.lp.partition import parse_split, split_columns

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "leakage.jsonl"
BEGIN, END = "<!-- leakage-table:begin -->", "<!-- leakage-table:end -->"
HELDOUT_BEGIN, HELDOUT_END = "<!-- heldout-table:begin -->", "<!-- heldout-table:end -->"
RATES_BEGIN, RATES_END = "<!-- hit-rates:begin -->", "<!-- hit-rates:end -->"
HIT_RATES = REPO / "coordinator" / "audit" / "hit_rates.py"
MODES = ("monomial", "rows", "dense")
#: netlib LPs of the held-out rows mode with free columns (as in the outside review)
FREE_NETLIB = ("brandy", "e226", "sc205", "scagr7", "share2b", "stocfor1")


def transportation_lp(sources: int, sinks: int, seed: int = 0) -> LinearProgram:
    """min c'x over x_ij >= 0 with sum_j x_ij <= supply_i and sum_i x_ij >= demand_j; integer costs
    in 1..100, integer demands in 1..100, supplies covering them with 10% slack. Every coefficient
    of A is 1 (what makes the audit's matching of columns large: sources * sinks columns)."""
    rng = np.random.default_rng(seed)
    n = sources * sinks
    i = np.repeat(np.arange(sources), sinks)
    j = np.tile(np.arange(sinks), sources)
    rows = np.concatenate([i, sources + j])
    cols = np.concatenate([np.arange(n), np.arange(n)])
    A = sp.csc_matrix((np.ones(2 * n), (rows, cols)), shape=(sources + sinks, n))
    demand = rng.integers(1, 101, sinks).astype(float)
    supply = np.full(sources, np.ceil(1.1 * demand.sum() / sources))
    return LinearProgram(c=rng.integers(1, 101, n).astype(float), A=A,
                         row_lower=np.concatenate([np.full(sources, -np.inf), demand]),
                         row_upper=np.concatenate([supply, np.full(sinks, np.inf)]),
                         col_lower=np.zeros(n), col_upper=np.full(n, np.inf), name=f"transport{sources}x{sinks}")


def write_mps(lp: LinearProgram, path: Path) -> None:
    """Write ``lp`` as an MPS file (through HiGHS's writer), atomically."""
    import tempfile

    from securelp.solvers.lp.highs import new_highs, pass_lp

    h = new_highs()
    if not pass_lp(h, lp):
        raise SystemExit("HiGHS refused the LP")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lp.mps"
        h.writeModel(str(out))
        write_atomically(path, out.read_bytes())


def _free(lp: LinearProgram) -> LinearProgram:
    n = lp.n_cols
    return LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper,
                         col_lower=np.full(n, -np.inf), col_upper=np.full(n, np.inf), sense=lp.sense,
                         offset=lp.offset, name=lp.name)


def _attack_figures(audit: Any) -> dict[str, Any]:
    """Per attack: columns targeted, columns recovered exactly (truth), seconds; summed over parties."""
    out: dict[str, dict[str, Any]] = {}
    for pa in audit.parties.values():
        for o in pa.outcomes + pa.assumed:
            e = out.setdefault(o.attack, {"ran": 0, "skipped": 0, "columns": 0, "claimed": 0, "right": 0,
                                          "up_to_scale_right": 0, "positions_right": 0, "seconds": 0.0})
            e["ran"] += int(o.ran)
            e["skipped"] += int(o.status.value == "skipped")
            e["seconds"] += o.seconds
            if o.ran:
                e["columns"] += o.columns
                e["claimed"] += o.claimed
                if o.truth is not None:
                    e["right"] += int(o.truth.get("recovered_exact", 0))
                    e["up_to_scale_right"] += int(o.truth.get("recovered_up_to_scale", 0))
                    e["positions_right"] += int(o.truth.get("positions_right", 0))
                    if "max_principal_angle_sine" in o.truth:
                        e["max_principal_angle_sine"] = max(e.get("max_principal_angle_sine", 0.0),
                                                            o.truth["max_principal_angle_sine"])
                    if o.truth.get("rel_error") is not None:
                        e["gram_rel_error_max"] = max(e.get("gram_rel_error_max", 0.0), o.truth["rel_error"])
    return out


def sparse_lp(m: int, n: int, per_col: int, seed: int, *, integer: bool) -> LinearProgram:
    """The outsider's random sparse LP: ``min c'x s.t. Ax >= b``, x free, ``per_col`` nonzeros per
    column (integers 1..9 with random signs and integer costs, or Gaussian values and costs), a
    known optimum (c = A'y, y >= 0; b = A x0 less slack on inactive rows)."""
    rng = np.random.default_rng(seed)
    rows = np.concatenate([rng.choice(m, per_col, replace=False) for _ in range(n)])
    if integer:
        vals = (rng.integers(1, 10, rows.size) * rng.choice([-1, 1], rows.size)).astype(float)
    else:
        vals = rng.standard_normal(rows.size)
    A = sp.csc_matrix((vals, (rows, np.repeat(np.arange(n), per_col))), shape=(m, n))
    active = rng.random(m) < 0.5
    y = np.where(active, rng.integers(1, 10, m) if integer else rng.uniform(0, 10, m), 0.0).astype(float)
    b = A @ rng.uniform(-5, 5, n) - np.where(active, 0.0, 1.0)
    kind = "integer" if integer else "gaussian"
    return LinearProgram(c=A.T @ y, A=A, row_lower=b, row_upper=np.full(m, np.inf), col_lower=np.full(n, -np.inf),
                         col_upper=np.full(n, np.inf), name=f"sparse-{m}x{n}-{per_col}nz-{kind}")


# -- held-out LPs (the kinds of the outside review, generated here with their own seeds) ----------------
def _packing(rng: np.random.Generator, m: int, n: int, per_col: int, values: Any, name: str) -> LinearProgram:
    """max v'x s.t. Ax <= b, x >= 0 with A >= 0 sparse (``per_col`` nonzeros per column drawn by
    ``values(k)``), b a random share of the row sums: bounded and feasible."""
    rows = np.concatenate([rng.choice(m, per_col, replace=False) for _ in range(n)])
    A = sp.csc_matrix((values(rows.size), (rows, np.repeat(np.arange(n), per_col))), shape=(m, n))
    b = np.asarray(A.sum(axis=1)).ravel() * rng.uniform(0.2, 0.6, m)
    return LinearProgram(c=-values(n), A=A, row_lower=np.full(m, -np.inf), row_upper=b, col_lower=np.zeros(n),
                         col_upper=np.full(n, np.inf), name=name)


def _with_bounds(lp: LinearProgram, lower: np.ndarray, upper: np.ndarray, name: str) -> LinearProgram:
    return LinearProgram(c=lp.c, A=lp.A, row_lower=lp.row_lower, row_upper=lp.row_upper, col_lower=lower,
                         col_upper=upper, sense=lp.sense, offset=lp.offset, name=name)


def _bipartite(S: int, D: int) -> sp.csc_matrix:
    n = S * D
    i, j = np.repeat(np.arange(S), D), np.tile(np.arange(D), S)
    return sp.csc_matrix((np.ones(2 * n), (np.concatenate([i, S + j]), np.tile(np.arange(n), 2))), shape=(S + D, n))


def heldout_lp(kind: str, seed: int) -> LinearProgram:
    """One held-out LP of the outside review's kinds (see the module docstring)."""
    rng = np.random.default_rng(seed)
    name = f"heldout-{kind}"
    if kind == "integer":  # integer coefficients 2..20, no entry of 1
        return _packing(rng, 60, 90, 4, lambda k: rng.integers(2, 21, k).astype(float), name)
    if kind == "real":  # real-valued coefficients
        return _packing(rng, 60, 90, 4, lambda k: rng.uniform(0.3, 5.0, k), name)
    if kind == "public_rows":  # real packing LP and a public budget row of ones over every column
        lp = _packing(rng, 60, 90, 4, lambda k: rng.uniform(0.3, 5.0, k), name)
        return LinearProgram(c=lp.c, A=sp.vstack([lp.A, sp.csc_matrix(np.ones((1, 90)))], format="csc"),
                             row_lower=np.append(lp.row_lower, -np.inf), row_upper=np.append(lp.row_upper, 50.0),
                             col_lower=lp.col_lower, col_upper=lp.col_upper, name=name)
    if kind == "assignment":  # N x N, 0 <= x <= 1, real costs
        N = 10
        return LinearProgram(c=rng.uniform(0, 10, N * N), A=_bipartite(N, N), row_lower=np.ones(2 * N),
                             row_upper=np.ones(2 * N), col_lower=np.zeros(N * N), col_upper=np.ones(N * N), name=name)
    if kind == "transport_real":  # real costs and real capacities as upper bounds
        S, D = 8, 12
        sup, dem = rng.uniform(50, 150, S), rng.uniform(20, 60, D)
        dem *= sup.sum() * 0.9 / dem.sum()
        return LinearProgram(c=rng.uniform(1, 20, S * D), A=_bipartite(S, D),
                             row_lower=np.concatenate([np.full(S, -np.inf), dem]),
                             row_upper=np.concatenate([sup, np.full(D, np.inf)]), col_lower=np.zeros(S * D),
                             col_upper=rng.uniform(10, 40, S * D), name=name)
    if kind == "knapsack":  # multi-knapsack relaxation, real weights, 0 <= x <= 1
        m, n = 5, 80
        A = sp.csc_matrix(rng.uniform(1, 30, (m, n)) * (rng.random((m, n)) < 0.6))
        return LinearProgram(c=-rng.uniform(1, 50, n), A=A, row_lower=np.full(m, -np.inf),
                             row_upper=np.asarray(A.sum(axis=1)).ravel() * 0.3, col_lower=np.zeros(n),
                             col_upper=np.ones(n), name=name)
    if kind == "free_real":  # free columns, sparse real values, ranged rows around a feasible point
        m, n = 80, 40
        A = _packing(rng, m, n, 3, lambda k: rng.uniform(-5, 5, k), name).A
        ax = A @ rng.uniform(-5, 5, n)
        return LinearProgram(c=rng.uniform(-5, 5, n), A=A, row_lower=ax - rng.uniform(1, 5, m),
                             row_upper=ax + rng.uniform(1, 5, m), col_lower=np.full(n, -np.inf),
                             col_upper=np.full(n, np.inf), name=name)
    if kind == "mixed":  # real bounded columns with six free ones
        m, n = 60, 60
        A = _packing(rng, m, n, 4, lambda k: rng.uniform(0.3, 5.0, k), name).A
        ax = A @ rng.uniform(0, 3, n)
        lower = np.zeros(n)
        lower[rng.choice(n, 6, replace=False)] = -np.inf
        return LinearProgram(c=rng.uniform(-5, 5, n), A=A, row_lower=ax - rng.uniform(1, 5, m),
                             row_upper=ax + rng.uniform(1, 5, m), col_lower=lower, col_upper=np.full(n, np.inf),
                             name=name)
    raise ValueError(f"unknown held-out kind {kind!r}")


def with_free_columns(lp: LinearProgram, parties: int, per_party: int, seed: int = 0) -> LinearProgram:
    """``lp`` with ``per_party`` columns of each of the contiguous party blocks made free."""
    lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
    rng = np.random.default_rng(seed)
    start = 0
    for n in parse_split(None, lp.n_cols, parties):
        pick = start + rng.choice(n, per_party, replace=False)
        lower[pick], upper[pick] = -np.inf, np.inf
        start += n
    return _with_bounds(lp, lower, upper, f"{lp.name}-free{per_party}")


@dataclass(frozen=True)
class Case:
    """One run of the benchmark: an LP, its split, and how the session runs."""

    lp: LinearProgram
    split: list[int]
    mode: str  # monomial, rows, dense (bounds removed), or a held-out setting below
    bounds: str = "monomial"
    reveal: bool = True
    seed: str | None = None
    known_rows: str = "singletons"
    k: int | None = None


def heldout_cases(netlib: Path | None) -> list[Case]:
    """The held-out cases (see the module docstring)."""
    cases = []
    for kind in ("integer", "assignment", "transport_real", "knapsack", "public_rows", "real"):
        lp = heldout_lp(kind, 2)
        cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "monomial"))
    lp = heldout_lp("integer", 2)
    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "no_reveal", reveal=False))
    lp = heldout_lp("public_rows", 2)
    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "row_of_ones_known", known_rows=str(lp.n_rows - 1)))
    lp = heldout_lp("real", 2)
    cases.append(Case(lp, parse_split(None, lp.n_cols, 10), "10_parties"))
    lp = heldout_lp("free_real", 2)
    cases.append(Case(lp, [1] * lp.n_cols, "one_column_per_party"))
    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "monomial"))
    lp = heldout_lp("mixed", 2)
    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "monomial"))
    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "rows", bounds="rows"))
    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), "seeded", seed="42"))
    if netlib is not None:
        for name in FREE_NETLIB:
            f = Path(netlib) / f"{name}.mps"
            if f.is_file():
                base = read_mps(f)
                for per in (1, 3):
                    lp = with_free_columns(base, 3, per)
                    cases.append(Case(lp, parse_split(None, lp.n_cols, 3), f"rows_free{per}", bounds="rows"))
    return cases


def _sum_classes(truths: list[dict[str, Any]], key: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for t in truths:
        for cls, e in t.get(key, {}).items():
            slot = out.setdefault(cls, {"guessed": 0, "right": 0})
            slot["guessed"] += int(e["guessed"])
            slot["right"] += int(e["right"])
    return out


def run_case(case: Case, budget: float) -> dict[str, Any]:
    """One session and its audit; the figures of one JSON line."""
    from securelp.coordinator.audit import Truth, audit_transcript, known_rows_from_truth
    from securelp.coordinator.simulation import party_seed
    from securelp.coordinator.transcript import run_recorded
    from securelp.coordinator.transport import InProcessLink
    from securelp.party.session import PartySession

    lp = case.lp
    target = _free(lp) if case.mode == "dense" else lp
    public, blocks = split_columns(target, case.split, ids=[f"party{i + 1}" for i in range(len(case.split))])
    config = SessionConfig(bounds_mode=case.bounds, k=case.k, reveal=case.reveal)
    policy = owners_consent(config)  # owners who allow the mode measured
    t0 = time.perf_counter()
    sessions = [PartySession(b, seed=party_seed(case.seed, b.party_id), policy=policy) for b in blocks]
    outcome, transcript = run_recorded(public, [InProcessLink(s) for s in sessions], config, central=target)
    truth = Truth.of(blocks, "simulation")
    known = known_rows_from_truth(truth, [b.party_id for b in blocks], case.known_rows)
    audit = audit_transcript(transcript, truth=truth, known_rows=known, budget_s=budget, seed=0)
    wall = time.perf_counter() - t0
    truths = [pa.truth for pa in audit.parties.values() if pa.truth is not None]
    assumed = [pa.assumed_truth for pa in audit.parties.values() if pa.assumed_truth is not None]
    cols = sum(t["columns"] for t in truths)
    right = sum(t["recovered_exact"] for t in truths)
    up = sum(t["recovered_up_to_scale"] for t in truths)
    guesses = _sum_classes(truths, "guesses")
    pos_guesses = _sum_classes(truths, "position_guesses")
    return {"problem": lp.name, "mode": case.mode, "m": lp.n_rows, "n": lp.n_cols, "parties": len(case.split),
            "bounds": case.bounds, "reveal": case.reveal, "seeded": case.seed is not None, "known_rows": case.known_rows,
            "status": outcome.status.value, "session_s": outcome.timings_s["total"], "audit_s": audit.seconds,
            "wall_s": wall, "columns": cols, "recovered_exact": right, "fraction_exact": right / cols if cols else 0.0,
            "recovered_up_to_scale": up, "fraction_up_to_scale": up / cols if cols else 0.0,
            "claimed_exact": sum(int(pa.summary["recovered_exact"]) for pa in audit.parties.values()),
            "claimed_up_to_scale": sum(int(pa.summary["recovered_up_to_scale"]) for pa in audit.parties.values()),
            "claimed_wrong": sum(t["claimed_wrong"] for t in truths),
            "direction_claimed_wrong": sum(t["direction_claimed_wrong"] for t in truths),
            "unclaimed_right": sum(t["unclaimed_right"] for t in truths),
            "positions_claimed": sum(t["positions_assigned"] for t in truths),
            "positions_right": sum(t["positions_right"] for t in truths),
            "guesses": guesses, "position_guesses": pos_guesses,
            "guesses_right": sum(e["right"] for e in guesses.values()),
            "guesses_made": sum(e["guessed"] for e in guesses.values()),
            "position_guesses_right": sum(e["right"] for e in pos_guesses.values()),
            "position_guesses_made": sum(e["guessed"] for e in pos_guesses.values()),
            "with_known_rows_exact": sum(t["recovered_exact"] for t in assumed) if assumed else None,
            "with_known_rows_claimed": sum(t["claimed_right"] + t["claimed_wrong"] for t in assumed) if assumed
            else None,
            "with_singleton_rows_exact": sum(t["recovered_exact"] for t in assumed)
            if assumed and case.known_rows == "singletons" else None,
            "claims_hold": audit.claims_hold,
            "collusion_added": max((c.added for c in audit.collusion), default=0),
            "skipped": audit.skipped, "attacks": _attack_figures(audit)}


def run_one(lp: LinearProgram, split: list[int], mode: str, budget: float, k: int | None = None) -> dict[str, Any]:
    """One session of ``lp`` in ``mode`` (monomial, rows, dense) and its audit."""
    return run_case(Case(lp, split, mode, bounds="rows" if mode == "rows" else "monomial", k=k), budget)


def _append(record: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def _instances(args: argparse.Namespace) -> list[Case]:
    """Every run asked for."""
    modes = tuple(m for m in args.modes.split(",") if m)
    out: list[Case] = []

    def standard(lp: LinearProgram, split: list[int], k: int | None, which: tuple[str, ...]) -> None:
        for mode in which:
            out.append(Case(lp, split, mode, bounds="rows" if mode == "rows" else "monomial", k=k))

    if args.examples:
        for number in (1, 2):
            lp, split, _ = mangasarian_example(number)
            standard(lp, list(split), None, modes)
    if args.synthetic:
        # the outsider's instance (m = 300, n = 120, 4 nonzeros per column, split 60/40/20, k = 130);
        # its columns are free, so only the dense masks apply
        for integer in (True, False):
            standard(sparse_lp(300, 120, 4, 20260101, integer=integer), [60, 40, 20], 130, ("dense",))
    if args.netlib and not args.heldout_only:
        names = args.only.split(",") if args.only else None
        for f in sorted(Path(args.netlib).glob("*.mps")):
            if names is None or f.stem in names:
                lp = read_mps(f)
                standard(lp, parse_split(None, lp.n_cols, args.parties), None, modes)
    if args.heldout:
        out.extend(heldout_cases(Path(args.netlib) if args.netlib else None))
    return out


def _fmt_frac(right: int, cols: int) -> str:
    return f"{right}/{cols}" if cols else "-"


def _newest(records: list[dict[str, Any]] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """The newest record of each (problem, mode), of ``records`` (None: the results file)."""
    from benchmarks.results import load

    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in load(RESULTS) if records is None else records:
        newest[(rec["problem"], rec["mode"])] = rec
    return newest


def _placed(rec: dict[str, Any]) -> str:
    claimed = int(rec.get("positions_claimed", rec.get("positions_right", 0)))
    guessed = rec.get("position_guesses_made")
    if guessed is None:
        return f"{rec['positions_right']} placed"
    return (f"{rec['positions_right']}/{claimed} placed, {rec['position_guesses_right']}/{guessed} guessed")


def _claimed(rec: dict[str, Any]) -> str:
    return f"{rec.get('claimed_exact', 0)} claimed"


def _stamp(records: list[dict[str, Any]]) -> str:
    stamps = sorted({(r["commit"], r["date"][:10], r["machine"]) for r in records})
    return "; ".join(f"commit {c}, {d}, {mach}" for c, d, mach in stamps)


def _is_heldout(rec: dict[str, Any]) -> bool:
    return rec["problem"].startswith("heldout-") or "-free" in rec["problem"]


GENERATED = ("Generated by `python -m benchmarks.render` (or `python -m benchmarks.bench_leakage --render "
             "docs/threat_model.md`) from `benchmarks/results/leakage.jsonl`")


def table(records: list[dict[str, Any]]) -> str:
    """The leakage table of the demo examples, the sparse LP and netlib, from the newest result of each
    (problem, mode) (``python -m benchmarks.render``)."""
    standard = {k: r for k, r in _newest(records).items() if not _is_heldout(r)}
    problems = list(dict.fromkeys(p for p, _ in standard))
    order = sorted(problems, key=lambda p: (not p.startswith("mangasarian"), not p.startswith("sparse"), p))
    head = ("| LP | m x n | default mode: right (claimed; placed claimed right/claimed, guessed right/guessed) | rows "
            "mode: right (claimed) | dense masks (bounds removed): up to scale, claimed / right; exact right | "
            "default + singleton rows known: right | wrong claims | audit s (default / rows / dense) |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for p in order:
        mono, rows, dense = (standard.get((p, mode)) for mode in MODES)
        any_rec = mono or rows or dense
        size = f"{any_rec['m']} x {any_rec['n']}" if any_rec else ""
        wrong = sum(int(r.get("claimed_wrong", 0)) + int(r.get("direction_claimed_wrong", 0))
                    for r in (mono, rows, dense) if r)
        cells = [
            f"{_fmt_frac(mono['recovered_exact'], mono['columns'])} ({_claimed(mono)}; {_placed(mono)})" if mono else "-",
            f"{_fmt_frac(rows['recovered_exact'], rows['columns'])} ({_claimed(rows)})" if rows else "-",
            (f"{dense.get('claimed_up_to_scale', '?')} / {_fmt_frac(dense['recovered_up_to_scale'], dense['columns'])}; "
             f"{_fmt_frac(dense['recovered_exact'], dense['columns'])}") if dense else "-",
            _fmt_frac(mono["with_singleton_rows_exact"], mono["columns"])
            if mono and mono.get("with_singleton_rows_exact") is not None else "-",
            str(wrong),
            " / ".join(f"{r['audit_s']:.2f}" if r else "-" for r in (mono, rows, dense)),
        ]
        lines.append(f"| {p} | {size} | " + " | ".join(cells) + " |")
    lines += ["", f"{GENERATED} (runs: {_stamp(list(standard.values()))})."]
    return "\n".join(lines) + "\n"


SETTINGS = {"monomial": "default (x_j revealed)", "no_reveal": "--no-reveal", "rows": "--bounds rows",
            "seeded": "--seed 42", "10_parties": "default (x_j revealed)",
            "one_column_per_party": "default (x_j revealed), one column per party",
            "row_of_ones_known": "default; the row of ones assumed known",
            "rows_free1": "--bounds rows", "rows_free3": "--bounds rows"}


def heldout_table(records: list[dict[str, Any]]) -> str:
    """The table of the held-out cases of the outside review (``python -m benchmarks.render``)."""
    held = sorted((r for r in _newest(records).values() if _is_heldout(r)), key=lambda r: (r["problem"], r["mode"]))
    hl = [("| case | m x n | parties | setting | right / columns | claimed exact (wrong) | best guesses right / made | "
           "positions: claimed right / claimed; guessed right / made | with the assumed rows: right | audit s |"),
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in held:
        known = "-" if r.get("with_known_rows_exact") is None or r.get("known_rows") == "singletons" else \
            _fmt_frac(r["with_known_rows_exact"], r["columns"])
        hl.append(f"| {r['problem'].removeprefix('heldout-')} | {r['m']} x {r['n']} | {r['parties']} | "
                  f"{SETTINGS.get(r['mode'], r['mode'])} | {_fmt_frac(r['recovered_exact'], r['columns'])} | "
                  f"{r['claimed_exact']} ({r['claimed_wrong'] + r['direction_claimed_wrong']}) | "
                  f"{r['guesses_right']}/{r['guesses_made']} | {r['positions_right']}/{r['positions_claimed']}; "
                  f"{r['position_guesses_right']}/{r['position_guesses_made']} | {known} | {r['audit_s']:.2f} |")
    hl += ["", f"{GENERATED} (runs: {_stamp(held) if held else 'none'})."]
    return "\n".join(hl) + "\n"


def hit_rates_table(records: list[dict[str, Any]]) -> str:
    """The measured hit rates of each class of best guess (``python -m benchmarks.render``)."""
    rates = hit_rates(_newest(records))
    rl = ["| best guess | right / made |", "|---|---|"]
    rl += [f"| values: `{c}` | {r}/{g} |" for c, (r, g) in sorted(rates["values"].items())]
    rl += [f"| positions: `{c}` | {r}/{g} |" for c, (r, g) in sorted(rates["positions"].items())]
    return "\n".join(rl) + "\n"


def render(doc: Path) -> None:
    """Rewrite the three marked tables of ``doc`` from the results file (what ``python -m benchmarks.render``
    does for docs/threat_model.md)."""
    from benchmarks.render import replace_section
    from benchmarks.results import load

    records = load(RESULTS)
    text = doc.read_text(encoding="utf-8")
    for begin, end, fn in ((BEGIN, END, table), (HELDOUT_BEGIN, HELDOUT_END, heldout_table),
                           (RATES_BEGIN, RATES_END, hit_rates_table)):
        text = replace_section(text, begin, end, fn(records), str(doc))
    write_atomically(doc, text, what="docs page ")
    print(f"rewrote the leakage tables of {doc}")


def hit_rates(newest: dict[tuple[str, str], dict[str, Any]] | None = None) -> dict[str, dict[str, tuple[int, int]]]:
    """(right, guessed) per class of best guess, summed over the newest line of each (problem, mode)."""
    newest = _newest() if newest is None else newest
    out: dict[str, dict[str, tuple[int, int]]] = {"values": {}, "positions": {}}
    for rec in newest.values():
        for key, where in (("guesses", "values"), ("position_guesses", "positions")):
            for cls, e in rec.get(key, {}).items():
                name = cls.removeprefix("guess:")
                r, g = out[where].get(name, (0, 0))
                out[where][name] = (r + int(e["right"]), g + int(e["guessed"]))
    return out


def render_hit_rates(path: Path = HIT_RATES) -> None:
    """Rewrite the measured table of :mod:`securelp.coordinator.audit.hit_rates`."""
    newest = _newest()
    rates = hit_rates(newest)
    runs = [r for r in newest.values() if "guesses" in r]

    def literal(d: dict[str, tuple[int, int]]) -> str:
        body = "".join(f"    {c!r}: ({r}, {g}),\n" for c, (r, g) in sorted(d.items()))
        return "{\n" + body + "}" if body else "{}"

    block = (f"MEASURED: dict[str, tuple[int, int]] = {literal(rates['values'])}\n"
             f"POSITIONS: dict[str, tuple[int, int]] = {literal(rates['positions'])}\n"
             f"SOURCE = {('benchmarks/results/leakage.jsonl: ' + str(len(runs)) + ' runs (' + _stamp(runs) + ')')!r}")
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(r"# hit-rates:begin\n.*?# hit-rates:end", re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{path} has no # hit-rates:begin ... # hit-rates:end section")
    write_atomically(path, pattern.sub(lambda _: "# hit-rates:begin\n" + block + "\n# hit-rates:end", text)
                     .encode("utf-8"))
    print(f"rewrote {path} ({len(rates['values'])} value classes, {len(rates['positions'])} position classes)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--netlib", default=None, metavar="DIR", help="run every netlib MPS file in DIR")
    ap.add_argument("--only", default=None, metavar="a,b", help="only these netlib names")
    ap.add_argument("--examples", action="store_true", help="Mangasarian's Examples 1 and 2")
    ap.add_argument("--synthetic", action="store_true",
                    help="the random sparse LP m=300, n=120, 4 nonzeros per column, k=130 (integer and Gaussian)")
    ap.add_argument("--heldout", action="store_true",
                    help="the held-out cases of the outside review (with --netlib also its netlib LPs with free columns "
                         "in rows mode)")
    ap.add_argument("--heldout-only", action="store_true", help="with --netlib: only the held-out netlib runs")
    ap.add_argument("--modes", default=",".join(MODES), help=f"modes to run (default {','.join(MODES)})")
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0, help="audit budget per run, seconds (default 120)")
    ap.add_argument("--render", default=None, metavar="DOC", help="rewrite the marked tables in DOC and exit")
    ap.add_argument("--render-hit-rates", action="store_true",
                    help="rewrite the measured hit rates in coordinator/audit/hit_rates.py and exit")
    ap.add_argument("--transport-lp", default=None, metavar="SxT", help="write the SxT transportation LP as MPS")
    ap.add_argument("--out", default=None, metavar="FILE.mps", help="where --transport-lp writes")
    args = ap.parse_args(argv)
    if args.render or args.render_hit_rates:
        if args.render_hit_rates:
            render_hit_rates()
        if args.render:
            render(Path(args.render))
        return 0
    if args.transport_lp:
        s, t = (int(v) for v in args.transport_lp.lower().split("x"))
        lp = transportation_lp(s, t)
        write_mps(lp, Path(args.out or f"transport{s}x{t}.mps"))
        print(f"wrote {args.out or f'transport{s}x{t}.mps'}: {lp.n_rows} rows, {lp.n_cols} columns")
        return 0
    meta = {"machine": f"{platform.node()} ({platform.processor() or platform.machine()}, {platform.system()})",
            "command": "python -m benchmarks.bench_leakage " + " ".join(sys.argv[1:] if argv is None else argv),
            "commit": commit()}
    for case in _instances(args):
        rec = {**meta, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               **run_case(case, args.budget)}
        _append(rec)
        print(f"{case.lp.name:<24} {case.mode:<20} right {rec['recovered_exact']:>5}/{rec['columns']:<5} claimed "
              f"{rec['claimed_exact']:>5} wrong {rec['claimed_wrong'] + rec['direction_claimed_wrong']:>3} guesses "
              f"{rec['guesses_right']:>5}/{rec['guesses_made']:<5} positions {rec['positions_right']:>4}/"
              f"{rec['positions_claimed']:<4} guessed {rec['position_guesses_right']:>5}/{rec['position_guesses_made']:<5}"
              f" audit {rec['audit_s']:7.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
