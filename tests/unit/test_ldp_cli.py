"""``securelp ldp``: JSON keys, exit codes for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode
from securelp.solvers.ldp import estimator

KEYS = {"error_range", "error_range_theory", "mse_freq", "mse_freq_theory", "time_s", "mechanism", "eps", "m",
        "users", "range", "verification", "reproducible", "mse_freq_theory_stderr", "mse_freq_theory_method"}


@pytest.mark.parametrize("mech", ["le", "grr", "oue", "em", "pl"])
def test_cli_json_report(tmp_path: Path, mech: str) -> None:
    out = tmp_path / "r.json"
    rc = main(["ldp", "--dataset", "grid", "--rows", "5", "--cols", "4", "--eps", "1.5", "--mechanism", mech,
               "--users", "2000", "--range", "1", "--seed", "7", "--json", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert KEYS <= set(rep)
    assert rep["mechanism"] == mech and rep["m"] == 20 and rep["reproducible"] is True
    assert rep["verification"]["max_mdp_violation"] <= 1e-9
    assert rep["mse_freq"] > 0 and rep["mse_freq_theory"] > 0
    if mech == "oue":
        assert rep["error_range"] is None
    else:
        assert 0 <= rep["error_range"] <= 1


def test_cli_seeded_runs_are_reproducible(tmp_path: Path) -> None:
    reps = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        assert main(["ldp", "--rows", "4", "--cols", "4", "--eps", "2", "--users", "500", "--seed", "3",
                     "--json", str(out)]) == 0
        reps.append(json.loads(out.read_text()))
    assert reps[0]["mse_freq"] == reps[1]["mse_freq"]


def test_cli_prior_file(tmp_path: Path) -> None:
    prior = tmp_path / "p.csv"
    prior.write_text(",".join(["0.25"] * 4) + "\n")
    out = tmp_path / "r.json"
    assert main(["ldp", "--rows", "2", "--cols", "2", "--eps", "2", "--prior", str(prior), "--json", str(out)]) == 0


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--eps", "0"], "eps"),
        (["--eps", "-1"], "eps"),
        (["--eps", "1", "--users", "0"], "users"),
        (["--eps", "0.3", "--rows", "30", "--cols", "30"], "no non-negative solution"),
        (["--eps", "1", "--records", "5"], "--dataset grid does not use --records (for --dataset text, road)"),
    ],
)
def test_cli_bad_input_is_one_line_error(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    rc = main(["ldp", "--rows", "4", "--cols", "4", *args])
    assert rc == int(ExitCode.INPUT)
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


@pytest.mark.parametrize("content, needle", [
    ("0.5,0.5", "has 2 entries but there are 4 records"),
    (",".join(["0.3"] * 4), "sums to"),
    (b"\xff\xfe\x00\x01", "not UTF-8 text (byte 0)"),  # not a UnicodeDecodeError traceback
    ("0.25 0.25 0.25 0.2_5", "line 1: '0.2_5' is not a number"),  # float() would take it
    ("0.25 0.25 0.25 \u0660.25", "is not a number"),  # an Arabic-Indic zero
])
def test_cli_bad_prior(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, needle: str) -> None:
    prior = tmp_path / "p.csv"
    if isinstance(content, bytes):
        prior.write_bytes(content)
    else:
        prior.write_text(content)
    rc = main(["ldp", "--rows", "2", "--cols", "2", "--eps", "1", "--prior", str(prior)])
    assert rc == int(ExitCode.INPUT)
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_a_prior_with_a_byte_order_mark_and_exponents_is_read(tmp_path: Path) -> None:
    prior = tmp_path / "p.csv"
    prior.write_text("\ufeff0.25, .25 2.5e-1\n+0.25\n", encoding="utf-8")
    assert main(["ldp", "--rows", "2", "--cols", "2", "--eps", "1", "--users", "100", "--prior", str(prior),
                 "--json", str(tmp_path / "r.json")]) == 0


@pytest.mark.parametrize("args, needle", [
    (["--rows", "100000", "--cols", "100000", "--eps", "100"], "le on a domain of 10,000,000,000 values needs about"),
    (["--dataset", "text", "--records", "1", "--eps", "1"], "--dataset text needs at least 2 records, got 1"),
    (["--rows", "3", "--cols", "3", "--cell-km", "1e-300", "--eps", "1"], "the kernel exp(-eps d) is singular"),
])
def test_cli_domains_that_cannot_be_computed_are_one_line_errors(capsys: pytest.CaptureFixture[str], args: list[str],
                                                                 needle: str) -> None:
    """Not numpy's MemoryError traceback (a 10^10-cell grid), "range must be >= 0, got inf" (one
    record), or scipy's LinAlgWarning lines before the error (a singular kernel)."""
    rc = main(["ldp", *args, "--users", "100"])
    err = capsys.readouterr().err
    assert rc in (int(ExitCode.INPUT), int(ExitCode.RESOURCE)) and needle in err
    assert "Traceback" not in err and "Warning" not in err and len(err.strip().splitlines()) == 1


def test_more_users_than_memory_holds_are_refused_before_any_allocation(capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch) -> None:
    rc = main(["ldp", "--rows", "3", "--cols", "3", "--eps", "1", "--users", str(10**11)])
    err = capsys.readouterr().err
    assert rc == int(ExitCode.RESOURCE) and "simulated users need about" in err and "Traceback" not in err
    # the limit follows the memory this machine has: 1 MB holds 10,000 users at 80 bytes (80 %)
    monkeypatch.setattr(estimator, "available_memory", lambda: 1_000_000)  # environment probe
    assert main(["ldp", "--rows", "3", "--cols", "3", "--eps", "1", "--users", "10001"]) == int(ExitCode.RESOURCE)
    err = capsys.readouterr().err
    assert "simulate at most 10,000" in err and "(--users)" in err  # the engine's parameter as the command's flag
    assert main(["ldp", "--rows", "3", "--cols", "3", "--eps", "1", "--users", "10000"]) == int(ExitCode.OK)
