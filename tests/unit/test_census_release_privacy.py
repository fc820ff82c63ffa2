"""Everything that leaves a release is a function of the noisy measurements (docs/explanation/testing.md).

A DP release may reveal the noisy measurements and what is computed from them and from public
parameters (the hierarchy, G, the size domain 1..N, eps); a figure computed from the true counts
(an error against the truth, a true total, a timing of work on the truth) breaks the guarantee:
an outsider told two neighbouring datasets apart from ``l1_error_by_level`` and the released CSV
in 93 % of trials at eps = 1, where eps = 1 allows at most e / (1 + e) = 73.1 %.

The tests couple the noise of two neighbouring datasets x and x' (one person more in one group):
with noise z for x, the neighbour gets z' = z + (x - x'), so both noisy measurements are the same
array. A release that depends on the data only through its noisy measurements must then write,
print and log exactly the same thing for both (timings masked: they measure the post-processing of
those same noisy values). Negative controls: the same comparison on ``census evaluate``'s output,
which holds errors against the truth, and on a release with a planted leak, must find differences.
"""

from __future__ import annotations

import json
import logging
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from securelp.coordinator import cli
from securelp.coordinator.cli import main
from securelp.coordinator.commands import census as census_cmd
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv, read_noisy_csv
from securelp.solvers.hierarchy.model import to_cumulative
from securelp.solvers.randomness import SecureRandom

#: sizes 1..4 of the leaves a1, a2 (children of A) and b1 (child of B); R is the root
LEAVES = {"a1": [5, 3, 1, 0], "a2": [2, 2, 0, 1], "b1": [4, 1, 2, 1]}
PARENTS = {"A": ("R", ["a1", "a2"]), "B": ("R", ["b1"])}
N = 4
SEED = "neighbours"


def _counts_csv(leaves: dict[str, list[int]]) -> str:
    """The consistent CSV of these leaf counts (sizes beyond the list's length allowed)."""
    width = max(len(v) for v in leaves.values())
    leaf = {k: np.array(v + [0] * (width - len(v))) for k, v in leaves.items()}
    mid = {p: sum(leaf[c] for c in kids) for p, (_, kids) in PARENTS.items()}
    rows = ["level,region_id,parent_id,size,count"]
    for level, parent, table in ((1, "", {"R": sum(mid.values())}), (2, "R", mid)):
        rows += [f"{level},{r},{parent},{s + 1},{v}" for r, c in table.items() for s, v in enumerate(c) if v]
    for p, (_, kids) in PARENTS.items():
        rows += [f"3,{k},{p},{s + 1},{v}" for k in kids for s, v in enumerate(leaf[k]) if v]
    return "\n".join(rows) + "\n"


def _moved(leaves: dict[str, list[int]], leaf: str, size: int) -> dict[str, list[int]]:
    """The neighbour: one person joins a group of ``size`` in ``leaf`` (that group's size becomes size + 1)."""
    out = {k: list(v) for k, v in leaves.items()}
    row = out[leaf] + [0] * max(0, size + 1 - len(out[leaf]))
    assert row[size - 1] >= 1
    row[size - 1] -= 1
    row[size] += 1
    out[leaf] = row
    return out


DATA = _counts_csv(LEAVES)
NEIGHBOUR = _counts_csv(_moved(LEAVES, "a2", 2))  # a group of 2 in a2 becomes a group of 3
TOP_NEIGHBOUR = _counts_csv(_moved(LEAVES, "b1", N))  # a group of N in b1 becomes N + 1: top-coded at N

_DURATION = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)? ?s\b")


def _mask(obj: Any) -> Any:
    """Timings (keys ending in ``time_s`` or ``time_s_sd``) replaced by a placeholder, recursively."""
    if isinstance(obj, dict):
        return {k: "<time>" if re.search(r"time_s(_sd)?$", k) else _mask(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask(v) for v in obj]
    return obj


def _mask_text(text: str) -> str:
    return _DURATION.sub("<time>", text)


def _couple_noise(monkeypatch: pytest.MonkeyPatch, reference: str, tmp_path: Path) -> None:
    """Every noisy measurement becomes that of ``reference`` under the same random stream: for data x
    the noise is z + (x_ref - x), where z is what the stream draws (the DP coupling of neighbours)."""
    real = mech.add_noise
    ref = read_counts_csv(_write(tmp_path / "reference", reference), max_size=N, top_code=True)

    def coupled(mechanism: str, data: Any, eps: Fraction, rng: SecureRandom) -> np.ndarray:
        assert data.counts.shape == ref.counts.shape
        return real(mechanism, ref, eps, rng)

    monkeypatch.setattr(mech, "add_noise", coupled)


def _write(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "data.csv"
    path.write_text(text)
    return path


def _run(tmp_path: Path, text: str, argv: list[str], capsys: pytest.CaptureFixture[str],
         caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    """Run ``securelp -v census ...`` on ``text`` (always at the same path) and collect all it leaves."""
    data = _write(tmp_path / "run", text)
    outputs = {name: tmp_path / "run" / name for name in ("report.json", "released.csv", "noisy.csv")}
    for path in outputs.values():
        path.unlink(missing_ok=True)
    capsys.readouterr()
    caplog.clear()
    rc = main(["-v", "census", *[a.format(data=data, **{k.split(".")[0]: v for k, v in outputs.items()})
                                 for a in argv]])
    captured = capsys.readouterr()
    found: dict[str, Any] = {
        "exit": rc,
        "stdout": _mask_text(captured.out),
        "stderr": _mask_text(captured.err),
        "log": [f"{r.name} {r.levelname} {_mask_text(r.getMessage())}" for r in caplog.records],
    }
    for name, path in outputs.items():
        if path.exists():
            text = path.read_text()
            found[name] = _mask(json.loads(text)) if name.endswith(".json") else text
    return found


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


RELEASE = ["release", "--data", "{data}", "--max-size", str(N), "--eps", "1", "--seed", SEED, "--repeat", "2",
           "--json", "{report}", "--out", "{released}", "--noisy-out", "{noisy}"]


@pytest.fixture
def loud(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Progress lines on (as on a terminal) and every log record captured."""
    monkeypatch.setattr(census_cmd, "quiet_output", lambda json_path: False)
    caplog.set_level(logging.DEBUG)


def _counts(tmp_path: Path, text: str, **options: Any) -> np.ndarray:
    return read_counts_csv(_write(tmp_path / f"t{abs(hash(text))}", text), **options).counts


def test_the_fixtures_are_neighbours(tmp_path: Path) -> None:
    x = _counts(tmp_path, DATA, max_size=N)
    y = _counts(tmp_path, NEIGHBOUR, max_size=N)
    diff = y - x
    assert int(np.abs(diff).sum()) == 6 and set(np.abs(diff).sum(axis=1).tolist()) == {0, 2}  # 2 cells per level
    assert int((diff.sum(axis=1)).sum()) == 0  # G unchanged: a person moved between group sizes
    top = _counts(tmp_path, TOP_NEIGHBOUR, max_size=N, top_code=True)
    assert np.array_equal(top, x)  # the group of N + 1 is counted at N
    assert _counts(tmp_path, TOP_NEIGHBOUR).shape[1] == N + 1  # a size domain read from the data grows


@pytest.mark.parametrize("mechanism", mech.MECHANISMS)
def test_neighbours_under_coupled_noise_leave_identical_releases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, caplog, loud, mechanism: str) -> None:
    _couple_noise(monkeypatch, DATA, tmp_path)
    argv = [*RELEASE, "--mechanism", mechanism]
    first = _run(tmp_path, DATA, argv, capsys, caplog)
    second = _run(tmp_path, NEIGHBOUR, argv, capsys, caplog)
    assert first["exit"] == 0 and {"report.json", "released.csv", "noisy.csv"} <= set(first)
    assert any("post-processed in" in line for line in first["stderr"].splitlines())  # the progress lines ran
    assert _differences(first, second) == []


def test_evaluation_under_coupled_noise_differs_negative_control(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, caplog, loud) -> None:
    """The same comparison on ``census evaluate`` (errors against the truth) must find the difference."""
    _couple_noise(monkeypatch, DATA, tmp_path)
    argv = ["evaluate", "--data", "{data}", "--max-size", str(N), "--eps", "1", "--seed", SEED, "--repeat", "2",
            "--mechanism", "hdp", "--json", "{report}"]
    first = _run(tmp_path, DATA, argv, capsys, caplog)
    second = _run(tmp_path, NEIGHBOUR, argv, capsys, caplog)
    assert first["exit"] == 0 and "report.json" in first
    assert _differences(first, second) == ["report.json", "stdout"]
    assert first["report.json"]["l1_error_by_level"] != second["report.json"]["l1_error_by_level"]


@pytest.mark.parametrize("channel", ["report", "log"])
def test_a_planted_leak_is_caught_negative_control(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, caplog, loud, channel: str) -> None:
    """A release that writes one figure of the truth (the number of persons) into its report's source
    description, or logs it, must fail the comparison."""
    real = census_cmd._true_data

    def leaky(args: Any, *, public_max_size: bool) -> tuple[Any, str]:
        data, source = real(args, public_max_size=public_max_size)
        persons = int((data.counts[0] * np.arange(1, data.max_size + 1)).sum())
        if channel == "log":
            logging.getLogger(census_cmd.__name__).info("read %d persons", persons)
            return data, source
        return data, f"{source} ({persons} persons)"

    monkeypatch.setattr(census_cmd, "_true_data", leaky)
    _couple_noise(monkeypatch, DATA, tmp_path)
    argv = [*RELEASE, "--mechanism", "cdp"]
    first = _run(tmp_path, DATA, argv, capsys, caplog)
    second = _run(tmp_path, NEIGHBOUR, argv, capsys, caplog)
    found = _differences(first, second)
    if channel == "report":
        assert found == ["report.json"]
    else:  # the log records, and stderr where a handler writes them there
        assert "log" in found and set(found) <= {"log", "stderr"}


@pytest.mark.parametrize("mechanism", mech.MECHANISMS)
def test_the_release_is_the_postprocessing_of_its_noisy_measurements(tmp_path: Path, mechanism: str) -> None:
    """With real noise: ``postprocess`` of the written noisy measurements gives the same release."""
    data = _write(tmp_path, DATA)
    rel, noisy, rep = tmp_path / "rel.csv", tmp_path / "noisy.csv", tmp_path / "rel.json"
    assert main(["census", "release", "--data", str(data), "--max-size", str(N), "--eps", "1", "--seed", SEED,
                 "--mechanism", mechanism, "--json", str(rep), "--out", str(rel), "--noisy-out", str(noisy)]) == 0
    again, rep2 = tmp_path / "again.csv", tmp_path / "again.json"
    total = read_counts_csv(data).total
    assert main(["census", "postprocess", "--noisy", str(noisy), "--total", str(total), "--max-size", str(N),
                 "--mechanism", mechanism, "--json", str(rep2), "--out", str(again)]) == 0
    assert rel.read_text() == again.read_text()
    run, post = _mask(json.loads(rep.read_text())["runs"][0]), _mask(json.loads(rep2.read_text()))
    for key in ("objective", "constraint_violations", "negative_counts", "non_integer_counts", "total_matches",
                "details"):
        assert run[key] == post[key], key
    # and the noisy measurements are the true values plus the noise of the seeded stream
    truth = read_counts_csv(data, max_size=N).counts
    base = to_cumulative(truth) if mechanism in mech.CUMULATIVE else truth
    z = read_noisy_csv(noisy, max_size=N).values - base
    expected = mech.add_noise(mechanism, read_counts_csv(data, max_size=N), Fraction(1),
                              SecureRandom(seed=SEED, label="census/release").spawn("run0")) - base
    assert np.array_equal(z, expected)


def test_the_same_noise_moves_the_neighbours_measurements_only_where_the_truth_moved(tmp_path: Path) -> None:
    """Seeded: the noise does not depend on the data, so the two noisy measurements differ exactly by
    the difference of the true cumulative counts (one cell per level)."""
    files = {}
    for name, text in (("x", DATA), ("y", NEIGHBOUR)):
        data = _write(tmp_path / name, text)
        files[name] = tmp_path / name / "noisy.csv"
        assert main(["census", "release", "--data", str(data), "--max-size", str(N), "--eps", "1", "--seed", SEED,
                     "--mechanism", "chain", "--json", str(tmp_path / name / "r.json"),
                     "--noisy-out", str(files[name])]) == 0
    moved = read_noisy_csv(files["y"]).values - read_noisy_csv(files["x"]).values
    truth = [to_cumulative(_counts(tmp_path, t, max_size=N)) for t in (DATA, NEIGHBOUR)]
    assert np.array_equal(moved, truth[1] - truth[0]) and int(np.abs(moved).sum()) == 3


def test_a_group_beyond_the_public_largest_size_changes_nothing(tmp_path: Path) -> None:
    """Top-coding: a group growing from N to N + 1 leaves the release (same seed) byte for byte equal;
    with the size domain read from the data it would have grown a column."""
    outs = []
    for name, text in (("x", DATA), ("y", TOP_NEIGHBOUR)):
        data = _write(tmp_path / name, text)
        rep, rel = tmp_path / name / "r.json", tmp_path / name / "rel.csv"
        assert main(["census", "release", "--data", str(data), "--max-size", str(N), "--eps", "1", "--seed", SEED,
                     "--mechanism", "hdp", "--json", str(rep), "--out", str(rel)]) == 0
        report = _mask(json.loads(rep.read_text()))
        report["dataset"]["source"] = None  # the two files' paths
        outs.append((report, rel.read_text()))
    assert outs[0] == outs[1]


def test_a_release_from_data_needs_a_public_largest_size(tmp_path: Path, capsys) -> None:
    data = _write(tmp_path, DATA)
    rc = main(["census", "release", "--data", str(data), "--eps", "1", "--mechanism", "hdp", "--json", "-"])
    err = capsys.readouterr().err
    assert rc == 3 and "--data needs --max-size N" in err and "Traceback" not in err
    assert not re.search(r"\d", err.split("error:", 1)[1])  # no figure of the data in the message


def test_releases_say_private_and_evaluations_say_not_private_first(tmp_path: Path, capsys) -> None:
    data = _write(tmp_path, DATA)
    assert main(["census", "release", "--data", str(data), "--max-size", str(N), "--eps", "1", "--mechanism", "cdp",
                 "--json", "-"]) == 0
    release = json.loads(capsys.readouterr().out)
    assert release["private"] is True and release["reproducible"] is False and "l1_error_by_level" not in release
    assert all("l1_error_by_level" not in run for run in release["runs"])
    rep = tmp_path / "e.json"
    assert main(["census", "evaluate", "--data", str(data), "--eps", "1", "--mechanism", "cdp", "--repeat", "2",
                 "--json", str(rep)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("NOT PRIVATE: evaluation against the true counts")
    evaluation = json.loads(rep.read_text())
    assert evaluation["private"] is False and evaluation["evaluation"].startswith("NOT PRIVATE")
    assert set(evaluation["l1_error_by_level"]) == {"1", "2", "3"} and len(evaluation["runs"]) == 2
    # with the JSON on stdout, the human output (NOT PRIVATE first) goes to stderr
    assert main(["census", "evaluate", "--data", str(data), "--eps", "1", "--mechanism", "hdp", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["private"] is False
    assert captured.err.splitlines()[0].startswith("NOT PRIVATE: evaluation against the true counts")


def test_evaluation_errors_are_the_releases_errors(tmp_path: Path) -> None:
    """``evaluate`` with a seed runs the releases ``release`` makes with that seed, and its L1 error per
    level is computed from them and the truth."""
    data = _write(tmp_path, DATA)
    rel, ev = tmp_path / "r.json", tmp_path / "e.json"
    out = tmp_path / "rel.csv"
    common = ["--data", str(data), "--max-size", str(N), "--eps", "1", "--seed", SEED, "--mechanism", "topdown"]
    assert main(["census", "release", *common, "--json", str(rel), "--out", str(out)]) == 0
    assert main(["census", "evaluate", *common, "--json", str(ev)]) == 0
    released, truth = read_counts_csv(out, max_size=N), read_counts_csv(data, max_size=N)
    assert released.hierarchy.ids == truth.hierarchy.ids
    expected = mech.l1_error_by_level(truth.hierarchy, released.counts, truth.counts)
    evaluation = json.loads(ev.read_text())
    assert evaluation["l1_error_by_level"] == expected
    assert evaluation["runs"][0]["objective"] == json.loads(rel.read_text())["runs"][0]["objective"]


def _option_help(command: list[str], flag: str) -> str:
    parser = cli.build_parser(only=command[0])
    for name in command:
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = sub.choices[name]
    action = next(a for a in parser._actions if flag in a.option_strings)
    return " ".join(str(action.help).split())


@pytest.mark.parametrize("command, flag", [
    (["census", "release"], "--seed"), (["census", "evaluate"], "--seed"), (["perturb"], "--seed"),
    (["ldp"], "--seed"), (["mdp"], "--seed"), (["solve"], "--seed"), (["demo"], "--seed"), (["party"], "--seed"),
])
def test_seed_help_says_not_private(command: list[str], flag: str) -> None:
    assert "not private" in _option_help(command, flag).lower()


def test_ldp_is_an_evaluation_and_says_so_first(tmp_path: Path, capsys) -> None:
    rep = tmp_path / "ldp.json"
    assert main(["ldp", "--rows", "2", "--cols", "2", "--eps", "1", "--users", "200", "--seed", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("NOT PRIVATE: simulation against")
    assert main(["ldp", "--rows", "2", "--cols", "2", "--eps", "1", "--users", "200", "--json", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["private"] is False and report["evaluation"].startswith("NOT PRIVATE")


def test_perturb_reports_of_neighbouring_records_are_identical(tmp_path: Path, capsys) -> None:
    """``perturb``'s report and summary line hold no figure of the true records: with one record changed
    they are the same (its released records are the release itself, drawn by the verified mechanism)."""
    z = tmp_path / "Z.npz"
    assert main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--save-mechanism", str(z)]) == 0
    found = []
    for name, records in (("x", "r0c0\nr1c1\nr2c2\n"), ("y", "r0c0\nr1c1\nr0c1\n")):
        true = tmp_path / f"{name}.txt"
        true.write_text(records)
        capsys.readouterr()
        for seed in ("1", None):
            json_path = tmp_path / f"{name}-{seed}.json"
            argv = ["perturb", "--mechanism-file", str(z), "--true", str(true), "--out", str(tmp_path / f"{name}.csv"),
                    "--json", str(json_path)]
            assert main(argv + (["--seed", seed] if seed else [])) == 0
            report = json.loads(json_path.read_text())
            assert report["private"] is (seed is None) and "time_s" not in report
            found.append((seed, report))
        assert main(["perturb", "--mechanism-file", str(z), "--true", str(true), "--out", str(tmp_path / "o.csv")]) == 0
        found.append(("summary", capsys.readouterr().out.replace(str(tmp_path / "o.csv"), "OUT")
                            .replace(str(tmp_path / f"{name}.csv"), "OUT")))
    half = len(found) // 2
    assert found[:half] == found[half:]
