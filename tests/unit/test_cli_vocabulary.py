"""One vocabulary across the CLI: the same flag means the same thing in every command.

``--parties N`` is a count and ``--ids`` names; ``--dataset`` names the data (ldp's ``--domain`` is a
deprecated alias); ``--mechanism`` names a mechanism, a mechanism file is ``--mechanism-file``;
``--json PATH`` is optional everywhere and comes with ``--quiet``; ``securelp --version``; old
spellings still work for one release, with a warning.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from securelp.coordinator import cli
from securelp.coordinator.cli import COMMANDS, main
from securelp.solvers.errors import ExitCode


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its name (``census release``, ...)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, p in action.choices.items():
                    walk(f"{name} {sub}".strip(), p)

    walk("", cli.build_parser())
    return found


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import securelp

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"securelp {securelp.__version__}"


def test_every_json_is_optional_and_comes_with_quiet() -> None:
    parsers = _parsers()
    with_json = {name: p for name, p in parsers.items() if _option(p, "--json") is not None}
    assert {"solve", "demo", "coordinator", "mdp", "perturb", "ldp", "audit", "census release",
            "census postprocess", "census evaluate"} <= set(with_json)
    for name, p in with_json.items():
        assert not _option(p, "--json").required, name
        assert _option(p, "--quiet") is not None, name


def test_one_meaning_per_flag() -> None:
    parsers = _parsers()
    for name, p in parsers.items():
        parties = _option(p, "--parties")
        if parties is not None:  # a count wherever it appears
            assert parties.metavar == "N" and parties.type(  # type: ignore[misc]
                "3") == 3, name
        domain = _option(p, "--domain")
        assert domain is None or domain.help == argparse.SUPPRESS, name  # only the hidden deprecated alias
        mechanism = _option(p, "--mechanism")
        if mechanism is not None and mechanism.help != argparse.SUPPRESS:
            assert mechanism.choices, f"{name}: --mechanism names a mechanism"
    assert _option(parsers["perturb"], "--mechanism-file").required
    for name in ("split", "certs"):
        assert _option(parsers[name], "--ids") is not None
    assert "bench" not in COMMANDS  # benchmarks run from a checkout: python -m benchmarks.bench_NAME


def test_certs_counts_or_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "--out", str(tmp_path / "a"), "--parties", "3"]) == 0
    assert sorted(p.name for p in (tmp_path / "a").glob("party*.pem")) == ["party1.pem", "party2.pem", "party3.pem"]
    assert main(["certs", "--out", str(tmp_path / "b"), "--ids", "alice,bob"]) == 0
    assert (tmp_path / "b" / "bob.key").exists()
    assert main(["certs", "--out", str(tmp_path / "c"), "--parties", "2", "--ids", "x,y,z"]) == ExitCode.INPUT
    assert "--ids names 3 parties but --parties is 2" in capsys.readouterr().err
    assert main(["certs", "--out", str(tmp_path / "d")]) == ExitCode.INPUT
    assert "--parties N" in capsys.readouterr().err
    # the old spelling: a list of names after --parties, still accepted with a warning
    assert main(["certs", "--out", str(tmp_path / "e"), "--parties", "carol,dave"]) == 0
    assert "use --ids carol,dave" in capsys.readouterr().err
    assert (tmp_path / "e" / "dave.pem").exists()


def test_split_takes_ids_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afiro = Path(__file__).resolve().parents[1] / "data" / "netlib" / "afiro.mps"
    assert main(["split", str(afiro), "--ids", "alice,bob", "--out", str(tmp_path / "blocks")]) == 0
    assert sorted(p.name for p in (tmp_path / "blocks").iterdir()) == ["alice.npz", "bob.npz", "public.npz"]
    assert main(["split", str(afiro), "--parties", "2", "--out", str(tmp_path / "b2")]) == 0
    assert (tmp_path / "b2" / "party2.npz").exists()


def test_ldp_dataset_and_its_deprecated_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["ldp", "--rows", "2", "--cols", "2", "--eps", "1", "--users", "50", "--seed", "1"]
    assert main([*base, "--dataset", "grid", "--json", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["dataset"] == "grid"
    err = capsys.readouterr().err
    assert "deprecated" not in err
    assert main([*base, "--domain", "grid", "--json", str(tmp_path / "b.json")]) == 0
    assert "--domain is deprecated" in capsys.readouterr().err
    assert json.loads((tmp_path / "b.json").read_text())["dataset"] == "grid"


def test_summary_on_stdout_unless_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["census", "release", "--synthetic", "census", "--max-size", "10", "--eps", "1", "--mechanism", "hdp"]
    assert main(argv) == 0  # no --json: the release is the summary line (and --out, when given)
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1 and out.startswith("census release hdp eps=1: 1 release of 3194")
    assert main([*argv, "--json", str(tmp_path / "r.json"), "--quiet"]) == 0
    assert capsys.readouterr().out == "" and (tmp_path / "r.json").exists()
    assert main([*argv, "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["mechanism"] == "hdp" and captured.err.startswith("census release hdp")


def test_examples_writes_the_tour_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from securelp.solvers.lp import read_mps

    assert main(["examples", "--out", str(tmp_path)]) == 0
    assert read_mps(tmp_path / "afiro.mps").n_cols == 32
    assert main(["examples", "--out", str(tmp_path)]) == ExitCode.INPUT  # kept unless --force
    assert "pass --force" in capsys.readouterr().err
    assert main(["examples", "--out", str(tmp_path), "--force", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
