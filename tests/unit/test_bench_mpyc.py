"""benchmarks/bench_mpyc.py: the LP conversion to MPyC's demo form, the clear replay of its
integer simplex, the docs table, and (with the optional ``bench`` extra) a real three-process
MPyC solve.

Everything but the last test runs without mpyc installed.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_mpyc as bm
from benchmarks import mpyc_lp
from securelp.solvers.errors import InputError
from securelp.solvers.lp import HighsBackend, LinearProgram, Sense, SolveStatus, read_mps
from tests.lp_fixtures import random_feasible_lp

AFIRO = Path(__file__).resolve().parents[2] / "deploy" / "afiro.mps"


def _small_general_lp(sense: Sense = Sense.MINIMIZE) -> LinearProgram:
    """Every bound kind the conversion handles: lower, box, upper-only, free, fixed; rows <=, >=
    with a positive right-hand side (artificial), a nonzero equality (artificial), a zero
    equality and a range."""
    A = np.array([[1.0, 2.0, -1.0, 1.0, 0.5],
                  [3.0, -1.0, 2.0, 0.0, 1.0],
                  [1.0, 1.0, 1.0, 1.0, 0.0],
                  [1.0, -1.0, 0.0, 2.0, 1.0],
                  [0.0, 1.0, -2.0, 1.0, 1.0]])
    inf = np.inf
    return LinearProgram(c=np.array([1.0, -2.0, 0.5, 1.5, 1.0]) * (1 if sense == Sense.MINIMIZE else -1), A=A,
                         row_lower=np.array([-inf, 1.5, 4.0, 0.0, -3.0]),
                         row_upper=np.array([10.0, inf, 4.0, 0.0, 6.0]),
                         col_lower=np.array([0.0, -1.0, -inf, -inf, 0.25]),
                         col_upper=np.array([inf, 3.0, 2.5, inf, 0.25]), sense=sense, offset=1.25, name="small")


def _check_same_optimum(lp: LinearProgram, owners: np.ndarray, **kw: float) -> tuple[float, float]:
    std = bm.to_standard_form(lp, owners, **kw)
    assert (std.b >= 0).all(), "the origin must be feasible"
    orig = HighsBackend().solve(lp)
    conv = HighsBackend().solve(std.as_lp())
    assert orig.status == SolveStatus.OPTIMAL and conv.status == SolveStatus.OPTIMAL
    # the converted optimum maps back to the original one, and so does its solution
    x = std.recover @ conv.x + std.shift
    assert lp.max_violation(x) <= 1e-7
    assert lp.objective_value(x) == pytest.approx(orig.objective, rel=1e-9, abs=1e-9)
    return std.original_objective(conv.objective), orig.objective


@pytest.mark.parametrize("sense", [Sense.MINIMIZE, Sense.MAXIMIZE])
def test_the_converted_small_lp_has_the_original_optimum(sense: Sense) -> None:
    lp = _small_general_lp(sense)
    got, want = _check_same_optimum(lp, np.array([0, 0, 1, 2, 2]))
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_the_converted_afiro_has_the_original_optimum() -> None:
    lp = read_mps(AFIRO)
    got, want = _check_same_optimum(lp, bm.owners_from_split([11, 11, 10]))
    assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_converted_random_general_lps_keep_their_optimum(seed: int) -> None:
    lp = random_feasible_lp(np.random.default_rng(seed), 8, 12, free_fraction=0.4)
    got, want = _check_same_optimum(lp, bm.owners_from_split([4, 4, 4]))
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_a_too_small_big_m_changes_the_optimum() -> None:
    """Negative control: the optimum check above can fail. With M below the artificial rows'
    duals the penalty is cheaper than feasibility and the converted optimum moves."""
    # min x0 + x1 s.t. x0 + 2 x1 >= 4, x >= 0: optimum 2, the row's dual is 1/2
    lp = LinearProgram(c=np.array([1.0, 1.0]), A=np.array([[1.0, 2.0]]), row_lower=np.array([4.0]),
                       row_upper=np.array([np.inf]), col_lower=np.zeros(2), col_upper=np.full(2, np.inf))
    for big_m, same in ((0.1, False), (bm.to_standard_form(lp, [0, 1]).big_m, True)):
        std = bm.to_standard_form(lp, [0, 1], big_m=big_m)
        assert std.artificial.any()
        conv = HighsBackend().solve(std.as_lp())
        assert (abs(std.original_objective(conv.objective) - 2.0) <= 1e-9) is same


def test_columns_and_rows_are_grouped_by_owner() -> None:
    lp = _small_general_lp()
    owners = np.array([0, 0, 1, 2, 2])
    std = bm.to_standard_form(lp, owners)
    # the free column of party 2 became two columns of party 2; public surplus columns come last
    assert list(std.col_owner) == [0, 0, 1, 2, 2, 2] + [-1] * (std.n_cols - 6)
    assert (std.col_owner == -1).sum() >= 1
    # box columns of party 0 (col 1) and party 2 (col 4) give bound rows after the public rows
    assert list(std.row_owner[-2:]) == [0, 2] and (std.row_owner[:-2] == -1).all()
    # every original column is recovered from converted columns of its own party only
    for j in range(lp.n_cols):
        assert set(std.col_owner[np.flatnonzero(std.recover[j])]) == {owners[j]}
    with pytest.raises(InputError, match="one party index"):
        bm.to_standard_form(lp, np.array([0, 1]))


def test_the_integer_tableau_is_exact_when_decimals_suffice_and_says_when_rounded() -> None:
    std = bm.to_standard_form(read_mps(AFIRO), bm.owners_from_split([11, 11, 10]))
    tab = bm.integer_tableau(std, 6, row_gcd=False)
    assert tab.exact and tab.scale == 1000
    assert all(isinstance(v, int) for v in tab.T.flat)
    assert np.allclose(tab.T[1:, :-1].astype(float) / tab.scale, std.A)
    rounded = bm.integer_tableau(std, 1)
    assert not rounded.exact and rounded.scale == 10


def test_tournament_argmin_keeps_the_first_of_equals() -> None:
    less = mpyc_lp._fraction_less
    assert mpyc_lp.tournament_argmin([3, 1, 1, 2], lambda a, b: a < b) == 1
    assert mpyc_lp.tournament_argmin([5, 4, 4], lambda a, b: a < b) == 1
    assert mpyc_lp.tournament_argmin([(2, 4), (1, 2), (3, 1)], less) == 0  # 1/2 == 1/2: the first
    assert mpyc_lp.tournament_argmin([7], less) == 0


@pytest.mark.parametrize("row_gcd", [True, False])
def test_the_clear_integer_simplex_reaches_highs_optimum_with_a_certificate(row_gcd: bool) -> None:
    for lp, owners in ((read_mps(AFIRO), bm.owners_from_split([11, 11, 10])),
                       (_small_general_lp(), np.array([0, 0, 1, 2, 2]))):
        std = bm.to_standard_form(lp, owners)
        tab = bm.integer_tableau(std, row_gcd=row_gcd)
        run = bm.exact_simplex(tab)
        assert run.status == "optimal" and run.iterations > 0
        value = Fraction(run.value_num, run.cd * tab.scale)
        assert std.original_objective(value) == pytest.approx(HighsBackend().solve(lp).objective, rel=1e-9)
        # the demo's certificate, exactly: A x <= b cd, x >= 0, y A >= c cd, y >= 0, c x == y b
        A, b, c = tab.T[1:, :-1], tab.T[1:, -1], -tab.T[0, :-1]
        x, y = np.array(run.x_num, dtype=object), np.array(run.y_num, dtype=object)
        assert all(v <= 0 for v in A.dot(x) - b * run.cd) and all(v >= 0 for v in x)
        assert all(v >= 0 for v in y.dot(A) - c * run.cd) and all(v >= 0 for v in y)
        assert c.dot(x) == y.dot(b) == run.value_num
        assert run.required_bit_length() >= 2 * run.max_bits
        # the float replay of the same rules needs about as many pivots
        assert abs(bm.float_replay(std) - run.iterations) <= max(3, run.iterations // 4)


def test_the_clear_run_stops_at_its_budget() -> None:
    std = bm.to_standard_form(read_mps(AFIRO), bm.owners_from_split([11, 11, 10]))
    run = bm.exact_simplex(bm.integer_tableau(std), max_iterations=3)
    assert run.status == "budget" and run.iterations == 3


def _record(lp: str, system: str, transport: str, **kw: object) -> dict[str, object]:
    machine = {"cpu": "Test CPU", "cores": 2, "ram_gib": 8.0, "versions": {"mpyc": "0.11"}}
    base = {"run_id": "r1", "lp": lp, "m": 3, "n": 4, "central_objective": -2.5, "central_s": 0.001,
            "date": "2026-12-06T00:00:00+00:00", "commit": "abc1234", "command": "python -m benchmarks.bench_mpyc",
            "machine": machine, "versions": machine["versions"], "system": system, "transport": transport}
    return {**base, **kw}


def test_render_rewrites_only_the_marked_section(tmp_path: Path) -> None:
    conv = {"m": 4, "n": 5, "artificial_rows": 1, "big_m": 100.0, "scale": 10, "exact_scaling": True,
            "converted_rel_diff": 0.0, "bit_length_source": "clear run of the same simplex",
            "clear_run": {"status": "optimal", "iterations": 7, "max_entry_bits": 20, "seconds": 0.1}}
    records = [
        _record("tiny", "mpyc", "mpyc-processes", status="optimal", objective=-2.5, rel_diff=0.0, solve_s=12.0,
                wall_s=14.0, bytes=2_000_000, iterations=7, bit_length=44, certificate_check=True, conversion=conv,
                time_limit_s=60.0),
        _record("tiny", "securelp", "inprocess", status="optimal", objective=-2.5, rel_diff=1e-16, solve_s=0.02,
                wall_s=0.03, bytes=5000),
        _record("tiny", "securelp", "grpc-processes", status="optimal", objective=-2.5, rel_diff=1e-16,
                solve_s=0.04, wall_s=3.0, bytes=5000),
        _record("slow", "mpyc", "mpyc-processes", status="time_limit", solve_s=50.0, wall_s=60.2, bytes=0,
                iterations=0, bit_length=900, conversion={**conv, "clear_run": {**conv["clear_run"], "status": "budget"},
                                                          "float_replay_iterations": 190}, time_limit_s=60.0),
        _record("slow", "securelp", "inprocess", status="optimal", objective=-2.5, rel_diff=0.0, solve_s=0.02,
                wall_s=0.03, bytes=5000),
    ]
    results = tmp_path / "mpyc.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    page = tmp_path / "mpc.md"
    page.write_text(f"# head\n\n{bm.TABLE_BEGIN}\nold table\n{bm.TABLE_END}\n\ntail text\n")
    bm.render(results, page)
    text = page.read_text()
    assert text.startswith("# head\n") and text.endswith("tail text\n") and "old table" not in text
    assert "600x / 300x" in text  # 12 s against 0.02 s and 0.04 s
    assert "optimal, 7 iterations, check passed" in text and "2.0 MB" in text
    assert "../threat_model.md" in text and "t < p/2" in text
    # a run stopped at its limit: the time reached, a lower-bound ratio, no figure from before the limit
    assert "**not finished** at the 60 s limit: 0 of about 190 iterations |" in text
    assert "| > 60.2 s | 60.2 s | - | > 3,010x |" in text
    page.write_text("# no markers\n")
    with pytest.raises(InputError, match="table markers"):
        bm.render(results, page)


def test_a_run_without_mpyc_names_the_bench_extra(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setattr(bm, "mpyc_available", lambda: False)
    code = bm.main(["--lps", "afiro", "--netlib-dir", str(AFIRO.parent), "--results", str(tmp_path / "r.jsonl")])
    assert code == 4  # ExitCode.CONFIG
    err = capsys.readouterr().err
    assert "mpyc is not installed" in err and ".[bench]" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_mpyc_counts_as_installed_only_with_its_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    def absent(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    assert bm.mpyc_available() is False


@pytest.mark.integration
def test_mpyc_three_processes_solve_a_small_lp_exactly() -> None:
    if not bm.mpyc_available():
        pytest.skip("MPyC is an optional benchmark dependency: pip install -e '.[bench]'")
    lp = _small_general_lp()
    std = bm.to_standard_form(lp, np.array([0, 0, 1, 2, 2]))
    tab = bm.integer_tableau(std)
    clear = bm.exact_simplex(tab)
    res = bm.run_mpyc(std, tab, clear.required_bit_length(), parties=3, time_limit_s=300)
    assert res["status"] == "optimal", res.get("error")
    assert res["check"] is True and res["iterations"] == clear.iterations
    assert res["value"] == Fraction(clear.value_num, clear.cd * tab.scale)
    x = std.recover @ res["x"] + std.shift
    assert lp.max_violation(x) <= 1e-9
    assert lp.objective_value(x) == pytest.approx(HighsBackend().solve(lp).objective, rel=1e-9)
    assert res["bytes"] > 0 and res["solve_s"] > 0


@pytest.mark.integration
def test_the_securelp_side_runs_in_process_and_over_grpc_processes() -> None:
    lp = read_mps(AFIRO)
    rows = bm._securelp_runs(lp, [11, 11, 10])
    assert [r["transport"] for r in rows] == ["inprocess", "grpc-processes"]
    want = HighsBackend().solve(lp).objective
    for r in rows:
        assert r["status"] == "optimal" and r["bounds_mode"] == "monomial"
        assert r["objective"] == pytest.approx(want, rel=1e-9)
        assert r["bytes"] > 0 and 0 < r["solve_s"] <= r["wall_s"]
        assert r["audit_claims_hold"] is True
    assert rows[0]["process_start_s"] is None and rows[1]["process_start_s"] > 0
