"""The Python API ``securelp.solve`` and the result files of ``solve --out``: each owner gets its own
x_j with its column names, the blocks concatenate to the central optimum, bad input is a typed error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import securelp
from securelp.coordinator.cli import main
from securelp.party.results import read_party_solution, write_party_solution
from securelp.solvers.errors import ConfigError, ExitCode, InputError
from securelp.solvers.lp import HighsBackend, SolveStatus

AFIRO = Path(__file__).resolve().parents[2] / "tests" / "data" / "netlib" / "afiro.mps"


@pytest.fixture(scope="module")
def afiro():
    return securelp.read_mps(AFIRO)


@pytest.fixture(scope="module")
def central(afiro):
    return HighsBackend().solve(afiro)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def test_each_owner_gets_its_block_of_the_central_optimum(afiro, central):
    res = securelp.solve(afiro, parties=3, seed="api-test")
    assert res.success and res.status is SolveStatus.OPTIMAL
    assert abs(res.objective - central.objective) <= 1e-9 * max(1.0, abs(central.objective))
    assert list(res.parties) == ["party1", "party2", "party3"]
    blocks = [res.parties[p].x for p in res.parties]
    assert sum(b.size for b in blocks) == afiro.n_cols
    assert _rel(np.concatenate(blocks), central.x) <= 1e-9  # afiro's optimum is unique
    assert _rel(res.x, central.x) <= 1e-9
    assert _rel(res.y, central.row_duals) <= 1e-9  # the coordinator's row duals are the LP's
    names = sum((res.parties[p].columns for p in res.parties), ())
    assert names == afiro.col_names
    assert res.bytes["sent"] > 0 and res.timings["total"] > 0
    assert set(res.leakage) == set(res.parties)
    assert "coordinator_can_reconstruct" in res.parties["party1"].leakage


def test_parties_as_column_counts_or_named_blocks(afiro):
    by_counts = securelp.solve(afiro, parties=[10, 22], seed=1)
    assert [p.x.size for p in by_counts.parties.values()] == [10, 22]
    named = securelp.solve(afiro, parties={"alice": 5, "bob": 27}, seed=1, reveal=False)
    assert list(named.parties) == ["alice", "bob"]
    # the owners keep x_j (nothing revealed to the coordinator), yet each has its own block
    assert not named.parties["alice"].revealed and named.parties["alice"].x.size == 5
    assert named.report["parties"][0]["revealed"] is False


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"parties": 0}, InputError, "must be >= 1"),
    ({"parties": 40}, InputError, "only 32 columns"),
    ({"parties": [10, 10]}, InputError, "sums to 20"),
    ({"parties": {"a": 40}}, InputError, "sums to 40"),
    ({"parties": "3"}, InputError, "parties must be"),
    ({"transport": "carrier-pigeon"}, ConfigError, "transport 'carrier-pigeon'"),
    ({"bounds": "cubes"}, ConfigError, "bounds mode 'cubes'"),
    ({"insecure": True}, ConfigError, "grpc transport only"),
])
def test_bad_arguments_are_typed_errors(afiro, kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        securelp.solve(afiro, **kwargs)


def test_a_problem_that_is_not_an_lp_or_a_path_is_refused():
    with pytest.raises(InputError, match="LinearProgram or the path"):
        securelp.solve(42)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        securelp.solve("no-such-file.mps")


def test_result_files_read_back_bit_for_bit(tmp_path, afiro):
    res = securelp.solve(afiro, parties=2, seed=2)
    where = securelp.write_results(tmp_path / "res", res)
    for pid, path in where["parties"].items():
        names, x = read_party_solution(path)
        assert names == res.parties[pid].columns and np.array_equal(x, res.parties[pid].x)
    public = json.loads(Path(where["public"]).read_text())
    assert public["status"] == "optimal" and public["objective"] == res.objective
    assert public["rows"] == list(afiro.row_names) and np.array_equal(public["y"], res.y)


@pytest.mark.parametrize("suffix", [".csv", ".json", ".npz"])
def test_each_format_round_trips(tmp_path, suffix):
    x = np.array([0.1, -2.5e-17, 3.0])
    write_party_solution(tmp_path / f"r{suffix}", "p", ["a", "b", "c"], x, status="optimal", objective=1.5)
    names, back = read_party_solution(tmp_path / f"r{suffix}")
    assert names == ("a", "b", "c") and np.array_equal(back, x)


def test_a_failed_write_leaves_no_result_file(tmp_path, afiro):
    res = securelp.solve(afiro, parties=2, seed=3)
    out = tmp_path / "res"
    (out / "party2.csv").mkdir(parents=True)  # the second owner's file cannot be written
    with pytest.raises(InputError):
        securelp.write_results(out, res)
    assert not (out / "party1.csv").exists() and not (out / "public.json").exists()


def test_solve_out_writes_one_file_per_party_and_says_where(tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(["solve", str(AFIRO), "--parties", "3", "--out", str(tmp_path / "res"), "--json", str(report)]) == 0
    results = json.loads(report.read_text())["results"]
    assert sorted(results["parties"]) == ["party1", "party2", "party3"]
    xs = [read_party_solution(results["parties"][p])[1] for p in ("party1", "party2", "party3")]
    central = HighsBackend().solve(securelp.read_mps(AFIRO))
    assert _rel(np.concatenate(xs), central.x) <= 1e-9
    assert "results:" in capsys.readouterr().out


def test_solve_out_refuses_a_file_before_the_session(tmp_path, capsys):
    existing = tmp_path / "taken"
    existing.write_text("x")
    assert main(["solve", str(AFIRO), "--out", str(existing)]) == ExitCode.INPUT
    err = capsys.readouterr().err.strip()
    assert "exists and is not a directory" in err and len(err.splitlines()) == 1
    assert existing.read_text() == "x"
