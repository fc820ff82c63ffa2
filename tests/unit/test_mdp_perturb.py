"""``securelp perturb``: a saved mechanism is verified again, then each true record is released
through an exact draw from its row; bad files and mismatched options are one-line errors."""

from __future__ import annotations

import ast
import csv
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode, InputError, VerificationError
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.perturb import load_mechanism, perturb_records, read_true_records
from securelp.solvers.mdp.pmo import choose_outputs
from securelp.solvers.mdp.sampling import chi_square_test

GRID = ["--dataset", "grid", "--rows", "4", "--cols", "4", "--eps", "1", "--eta", "1.5"]


def _save_every_format(d: Path, options: list[str]) -> Path:
    """``securelp mdp OPTIONS`` with the mechanism saved as ``d/Z.<suffix>`` in every format (report ``d/r.json``)."""
    for suffix in (".npy", ".npz", ".csv", ".mat"):
        assert main(["mdp", *options, "--save-mechanism", str(d / f"Z{suffix}"), "--json", str(d / "r.json")]) == 0
    return d


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4x4 grid's optimal mechanism, saved in every format."""
    return _save_every_format(tmp_path_factory.mktemp("mech"), GRID)


def _perturb(tmp_path: Path, mechanism: Path, lines: list[str], *extra: str, grid: list[str] = GRID
             ) -> tuple[int, list[dict[str, str]], dict]:
    true = tmp_path / "true.txt"
    true.write_text("".join(f"{x}\n" for x in lines))
    out, rep = tmp_path / "released.csv", tmp_path / "p.json"
    for f in (out, rep):
        f.unlink(missing_ok=True)
    grid = ["--mdp-seed" if a == "--seed" else a for a in grid]  # the seed mdp was given
    rc = main(["perturb", *grid, "--mechanism-file", str(mechanism), "--true", str(true), "--out", str(out),
               "--json", str(rep), *extra])
    rows = list(csv.DictReader(out.open())) if out.exists() else []
    return rc, rows, (json.loads(rep.read_text()) if rep.exists() else {})


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv", ".mat"])
def test_every_saved_format_releases_one_record_per_true_record(saved: Path, tmp_path: Path, suffix: str) -> None:
    truth = ["r0c0", "r3c3", "r1c2", "r1c2", "# a comment", ""]
    rc, rows, rep = _perturb(tmp_path, saved / f"Z{suffix}", truth)
    assert rc == 0 and len(rows) == 4 and rep["described"] is (suffix != ".npy")
    labels = load_dataset("grid", rows=4, cols=4).labels
    assert all(labels[int(r["index"])] == r["label"] for r in rows)
    assert set(rows[0]) == {"label", "index", "coord1", "coord2"}
    assert rep["n_released"] == 4 and rep["n_records"] == rep["n_outputs"] == 16 and rep["reproducible"] is False
    assert rep["verification"]["max_mdp_violation"] <= 1e-9
    # the report holds counts and the verification, never a record
    assert not any(label in json.dumps(rep) for label in labels)


def test_a_seeded_release_repeats_and_says_it_is_not_private(saved: Path, tmp_path: Path, caplog) -> None:
    truth = [f"r{i % 4}c{i // 4 % 4}" for i in range(200)]
    runs = [_perturb(tmp_path, saved / "Z.npy", truth, "--seed", s)[1] for s in ("7", "7", "8")]
    assert runs[0] == runs[1] and runs[0] != runs[2]
    assert "NOT private" in caplog.text


def test_a_mechanism_not_private_at_the_given_eps_releases_nothing(saved: Path, tmp_path: Path, capsys) -> None:
    # computed at eps 1: private at 2 (looser), not at 0.5
    rc, rows, _ = _perturb(tmp_path, saved / "Z.npy", ["r0c0"], grid=[*GRID[:-4], "--eps", "2", "--eta", "1.5"])
    assert rc == 0 and len(rows) == 1
    rc, rows, rep = _perturb(tmp_path, saved / "Z.npy", ["r0c0"], grid=[*GRID[:-4], "--eps", "0.5", "--eta", "1.5"])
    err = capsys.readouterr().err
    assert rc == int(ExitCode.VERIFICATION) and rows == [] and rep == {} and "mDP violated" in err
    # a tampered file: one entry moved within its row (the row still sums to 1)
    Z = np.load(saved / "Z.npy")
    assert np.array_equal(Z, load_mechanism(saved / "Z.csv").Z)  # every format reads back the same doubles
    Z[5, 5] += 0.05
    Z[5, 6] -= 0.05
    np.save(tmp_path / "T.npy", Z)
    rc, rows, _ = _perturb(tmp_path, tmp_path / "T.npy", ["r0c0"])
    assert rc == int(ExitCode.VERIFICATION) and rows == []


@pytest.mark.parametrize("lines, extra, needle", [
    (["r0c0", "r9c9"], [], "line 2: no record has that label"),
    (["3"], [], "line 1: no record has that label (use --by-index for record numbers)"),
    (["3", "16"], ["--by-index"], "line 2: the record index is outside 0..15"),
    (["r0c0"], ["--by-index"], "line 1: not a record index (digits 0-9 only)"),
    (["1_0"], ["--by-index"], "line 1: not a record index"),
    (["\u0663"], ["--by-index"], "line 1: not a record index"),
    (["# only a comment"], [], "no records in it"),
    (["r0c0"], ["--outputs", "8", "--mdp-seed", "1"], "the mechanism is 16 x 16, but the dataset has 16 records and 8 outputs"),
    (["r0c0"], ["--out", "{mechanism}"], "--out {mechanism} is the input --mechanism-file"),
    (["r0c0"], ["--json", "{true}"], "is the input --true"),
    (["r0c0"], ["--eps", "0"], "--eps must be > 0"),
])
def test_bad_true_records_and_options_are_one_line_errors(saved: Path, tmp_path: Path, capsys, lines, extra,
                                                          needle) -> None:
    paths = {"mechanism": str(saved / "Z.npy"), "true": str(tmp_path / "true.txt")}
    extra = tuple(x.format(**paths) for x in extra)
    before = (saved / "Z.npy").read_bytes()
    rc, rows, rep = _perturb(tmp_path, saved / "Z.npy", lines, *extra)
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT) and rows == [] and rep == {}
    assert needle.format(**paths) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (saved / "Z.npy").read_bytes() == before and (tmp_path / "true.txt").exists()
    # an error names the line of the true records, never what is on it (private data)
    assert not any(line.strip() and line.strip() in err for line in lines if line.strip() not in ("3", "16"))


def test_bad_mechanism_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "a.npy").write_text("not numpy")
    (tmp_path / "b.csv").write_text("0.5,0.5\nx,1\n")
    (tmp_path / "c.mat").write_text("garbage")
    np.save(tmp_path / "d.npy", np.ones(4))
    np.save(tmp_path / "e.npy", np.array([{"a": 1}], dtype=object))
    from scipy.io import savemat

    savemat(tmp_path / "f.mat", {"Y": np.eye(2)})
    cases = {"a.npy": "not a .npy file", "b.csv": "cannot read it as csv", "c.mat": "cannot read it as mat",
             "d.npy": "expected a records x outputs matrix, got shape (4,)", "e.npy": "cannot read it as npy",
             "f.mat": "no variable Z (found Y)", "g.npy": "no such file",
             "Z.txt": "must end in one of .npz, .csv, .mat, .npy", "h.npz": "not a .npz file (not a zip archive)",
             "i.npz": "no array Z (found Y)"}
    (tmp_path / "h.npz").write_text("not a zip")
    np.savez(tmp_path / "i.npz", Y=np.eye(2))
    for name, needle in cases.items():
        with pytest.raises(InputError) as exc:
            load_mechanism(tmp_path / name)
        assert needle in str(exc.value) and name in str(exc.value)


def test_labels_given_twice_in_a_points_file_are_refused_only_where_asked_for(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("b\n")
    assert read_true_records(f, ("a", "b", "a")).tolist() == [1]
    f.write_text("a\n")
    with pytest.raises(InputError, match="names more than one record; read the records by index") as caught:
        read_true_records(f, ("a", "b", "a"))
    assert caught.value.parameter == "by_index" and "--" not in str(caught.value)  # the command names the flag


def test_the_release_is_an_exact_draw_from_the_true_records_row(saved: Path) -> None:
    """Chi-square (alpha 1e-6, docs/explanation/testing.md) of 20,000 releases of one record against its row;
    the same draws against a neighbour's row are rejected, so the test can fail."""
    Z = load_mechanism(saved / "Z.npy").Z
    ds = load_dataset("grid", rows=4, cols=4)
    released = perturb_records(Z, np.full(20_000, 5), ds.distance, 1.0, 1.5, choose_outputs(16), seed="chi2")
    assert not chi_square_test(released.columns, Z[5]).rejected
    assert chi_square_test(released.columns, Z[6]).rejected
    with pytest.raises(VerificationError):  # and nothing is drawn from an unverified matrix
        perturb_records(Z, np.zeros(3, dtype=np.int64), ds.distance, 0.5, 1.5, choose_outputs(16), seed=1)


@pytest.mark.parametrize("seed", [[], ["--seed", "11"]])
def test_the_outputs_of_a_run_are_drawn_again(tmp_path: Path, seed: list[str]) -> None:
    """``--outputs K`` draws K records with ``--seed`` (default 0): the same command gives the same
    outputs, which perturb draws again."""
    grid = [*GRID, "--outputs", "6", *seed]
    drawn = []
    for _ in range(2):
        assert main(["mdp", *grid, "--save-mechanism", str(tmp_path / "Z.npy"), "--json", str(tmp_path / "m.json")]) == 0
        drawn.append(json.loads((tmp_path / "m.json").read_text())["outputs"])
    assert drawn[0] == drawn[1] and len(drawn[0]) == 6 and drawn[0] == sorted(drawn[0])
    rc, rows, rep = _perturb(tmp_path, tmp_path / "Z.npy", ["r0c0"] * 50, grid=grid)
    assert rc == 0 and rep["n_outputs"] == 6 and {int(r["index"]) for r in rows} <= set(drawn[0])
    other = [*GRID, "--outputs", "6", "--seed", "12" if seed else "11"]
    assert json.loads((tmp_path / "m.json").read_text())["outputs"] != choose_outputs(16, 6, other[-1]).tolist()


def test_the_python_example_in_the_docs_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "api.md").read_text()
    script = tmp_path / "example.py"
    script.write_text(text.split("## Metric DP", 1)[1].split("```python\n", 1)[1].split("```", 1)[0])
    runpy.run_path(str(script))
    released = ast.literal_eval(capsys.readouterr().out.strip().splitlines()[-1])  # (after HiGHS's banner, if any)
    assert len(released) == 3 and all(label.startswith("r") for label in released)


def test_true_records_from_standard_input(saved: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("r0c0\nr3c3\n"))
    assert main(["perturb", *GRID, "--mechanism-file", str(saved / "Z.npy"), "--true", "-", "--out", "-"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[0] == "label,index,coord1,coord2" and len(out.out.splitlines()) == 3
    assert "released 2 records" in out.err


# --- a mechanism file's description: no dataset options needed, mismatched ones refused ---

SIX = [*GRID, "--outputs", "6", "--seed", "3"]


@pytest.fixture(scope="module")
def described(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 4x4 grid at eps 1 with 6 outputs drawn by seed 3, saved in every format."""
    return _save_every_format(tmp_path_factory.mktemp("described"), SIX)


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".mat"])
def test_a_described_file_needs_no_dataset_options(described: Path, tmp_path: Path, suffix: str) -> None:
    outputs = json.loads((described / "r.json").read_text())["outputs"]
    assert load_mechanism(described / f"Z{suffix}").description["outputs"] == outputs
    rc, rows, rep = _perturb(tmp_path, described / f"Z{suffix}", ["r0c0", "r3c3"] * 40, grid=[])
    assert rc == 0 and rep["described"] is True and rep["n_outputs"] == 6 and (rep["eps"], rep["eta"]) == (1.0, 1.5)
    assert {int(r["index"]) for r in rows} <= set(outputs) and len(rows) == 80
    # the same options as mdp's are accepted, and checked
    rc, rows, rep = _perturb(tmp_path, described / f"Z{suffix}", ["r0c0"], grid=SIX)
    assert rc == 0 and int(rows[0]["index"]) in outputs


def test_a_bare_npy_without_its_options_is_taken_for_the_default_grid(described: Path, tmp_path: Path, capsys,
                                                                       caplog) -> None:
    """The negative control: the same matrix as a bare .npy, with no options, is read against the
    default 10x10 grid and refused, and the warning says why."""
    rc, rows, _ = _perturb(tmp_path, described / "Z.npy", ["r0c0"], grid=[])
    assert rc == int(ExitCode.INPUT) and rows == []
    assert "the mechanism is 16 x 6, but the dataset has 100 records" in capsys.readouterr().err
    assert "holds no description" in caplog.text


@pytest.mark.parametrize("options, needle", [
    (["--rows", "4", "--cols", "4", "--cell-km", "2"], ("not for the dataset named by --rows, --cols, --cell-km: its "
                                                        "metric differs (records r0c0 and r2c1: 4.47214 km apart, "
                                                        "2.23607 in the file)")),
    (["--rows", "5", "--cols", "4"], "not for the dataset named by --rows, --cols: that is grid with 20 records"),
    (["--dataset", "rome"], "that is rome with 500 records"),
    (["--seed", "4"], "was computed with --seed 3, not --mdp-seed 4; omit --mdp-seed to use the file's"),
    (["--outputs", "7"], "has 6 outputs, not --outputs 7; omit --outputs"),
    (["--cell-km", "2"], "its metric differs"),
    (["--records", "5"], "--dataset grid does not use --records"),
])
def test_options_that_name_another_dataset_or_outputs_are_refused(described: Path, tmp_path: Path, capsys, options,
                                                                 needle) -> None:
    rc, rows, rep = _perturb(tmp_path, described / "Z.npz", ["r0c0"], grid=options)
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT) and rows == [] and rep == {}
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    if "Z.npz was computed for" in err:
        assert "computed for grid (rows 4, cols 4, cell_km 1.0; 16 records)" in err


def test_eps_and_eta_default_to_the_files(tmp_path: Path) -> None:
    """A mechanism computed at eps 2 is verified at 2 without --eps; the grid's default, 1, would refuse it."""
    grid = ["--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "2", "--eta", "1.5"]
    assert main(["mdp", *grid, "--save-mechanism", str(tmp_path / "Z.npz"), "--json", str(tmp_path / "m.json")]) == 0
    rc, _, rep = _perturb(tmp_path, tmp_path / "Z.npz", ["r1c1"], grid=[])
    assert rc == 0 and (rep["eps"], rep["eta"]) == (2.0, 1.5)
    rc, rows, _ = _perturb(tmp_path, tmp_path / "Z.npz", ["r1c1"], grid=["--eps", "1"])
    assert rc == int(ExitCode.VERIFICATION) and rows == []


def test_a_points_file_is_found_from_elsewhere_and_its_changes_are_seen(tmp_path: Path, monkeypatch, capsys) -> None:
    pts = tmp_path / "pts.csv"
    pts.write_text("x,y\n0,0\n1,0\n0,1\n1,1\n2,2\n")
    monkeypatch.chdir(tmp_path)
    assert main(["mdp", "--dataset", "points", "--points", "pts.csv", "--save-mechanism", "P.csv",
                 "--json", "m.json"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    rc, rows, rep = _perturb(elsewhere, tmp_path / "P.csv", ["p0"], grid=[])
    assert rc == 0 and rep["n_records"] == 5 and rows[0]["label"].startswith("p")
    # the points file the description names is an input too: --out may not overwrite it
    true = elsewhere / "t.txt"
    true.write_text("p0\n")
    assert main(["perturb", "--mechanism-file", str(tmp_path / "P.csv"), "--true", str(true), "--out", str(pts)]) == 3
    assert "is the input --points" in capsys.readouterr().err and pts.read_text().startswith("x,y")
    moved = tmp_path / "moved.csv"
    pts.rename(moved)
    capsys.readouterr()
    rc, rows, _ = _perturb(elsewhere, tmp_path / "P.csv", ["p0"], grid=[])
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT) and "which cannot be loaded again" in err and "name it with the dataset options" in err
    rc, rows, _ = _perturb(elsewhere, tmp_path / "P.csv", ["p0"], grid=["--points", str(moved)])
    assert rc == 0 and len(rows) == 1
    moved.write_text("x,y\n0,0\n1,0\n0,1\n1,1\n2,3\n")  # one point moved: another metric
    rc, rows, _ = _perturb(elsewhere, tmp_path / "P.csv", ["p0"], grid=["--dataset", "points", "--points", str(moved)])
    assert rc == int(ExitCode.INPUT) and rows == [] and "its metric differs" in capsys.readouterr().err


def test_a_damaged_description_is_named(described: Path, tmp_path: Path, capsys) -> None:
    text = (described / "Z.csv").read_text()
    first, body = text.split("\n", 1)
    desc = json.loads(first.removeprefix("# securelp-mechanism "))

    def write(d: object) -> Path:
        f = tmp_path / "D.csv"
        f.write_text(f"# securelp-mechanism {d if isinstance(d, str) else json.dumps(d)}\n{body}")
        return f

    cases = [
        ("{not json", "its description is not JSON"),
        ({**desc, "format": "other"}, "is not a securelp-mdp-mechanism description"),
        ({**desc, "version": 2}, "its description has version 2; this securelp reads version 1"),
        ({**desc, "version": 1.0}, "has version 1.0"),
        ("[" * 100_000 + "]" * 100_000, "its description is not JSON"),  # too deep for the parser
        ({k: v for k, v in desc.items() if k != "eps"}, "description's eps is not a finite number > 0"),
        ({**desc, "eta": -1}, "description's eta is not a finite number > 0"),
        ({**desc, "eps": float("inf")}, "description's eps is not a finite number > 0"),
        ({**desc, "dataset": "x" * 1000}, "description's dataset is not a dataset name"),
        ({**desc, "dataset_options": {"rows": [4], "cols": 4}}, "description's dataset_options are not"),
        ({**desc, "dataset_options": {"rows": float("inf"), "cols": 4}}, "description's dataset_options are not"),
        ({**desc, "dataset_options": {"rows": 4, "cols": 4, "cell_km": True}}, "description's dataset_options are not"),
        ({**desc, "seed": 3}, "description's seed is not a text"),
        ({**desc, "outputs": desc["outputs"][:5]}, "its description (16 records, 5 outputs) does not fit the 16 x 6 matrix"),
        ({**desc, "outputs": [*desc["outputs"][:5], 16]}, "description's outputs are not record indices in increasing"),
        ({**desc, "outputs": desc["outputs"][::-1]}, "description's outputs are not record indices in increasing"),
        ({**desc, "outputs": [True] * 6}, "description's outputs are not"),
        ({**desc, "labels_sha256": "xyz"}, "description's labels_sha256 is not a SHA-256"),
        ({**desc, "distance_probe": []}, "description's distance_probe is not a list"),
        ({**desc, "distance_probe": [1, 2, 3]}, "description's distance_probe is not a list"),
        ({**desc, "distance_probe": [[True, False, 1.0]]}, "description's distance_probe is not a list"),
        ({**desc, "distance_probe": [[0, 99, 1.0]]}, "description's distance_probe is not a list"),
    ]
    for d, needle in cases:
        with pytest.raises(InputError) as exc:
            load_mechanism(write(d))
        assert needle in str(exc.value) and "D.csv" in str(exc.value)
    # loaded, but its dataset cannot be: both are one-line errors through the CLI
    for d, needle in [({**desc, "dataset_options": {"rows": 4, "colz": 4}}, "unexpected keyword argument 'colz'"),
                      ({**desc, "dataset_options": {"rows": "four", "cols": 4}}, "which cannot be loaded again"),
                      ({**desc, "dataset": "nope"}, "unknown dataset 'nope'"),
                      ({**desc, "labels_sha256": "0" * 64}, "its records are other records (their labels differ)")]:
        capsys.readouterr()
        rc, rows, _ = _perturb(tmp_path, write(d), ["r0c0"], grid=[])
        err = capsys.readouterr().err
        assert rc == int(ExitCode.INPUT) and rows == [] and needle in err and len(err.strip().splitlines()) == 1


def test_options_given_replace_the_files_and_the_rest_are_the_files(described: Path, tmp_path: Path) -> None:
    """``--dataset grid`` or ``--rows 4`` alone name the file's 4x4 grid (the missing options are the
    file's, not the 10x10 default's); ``--cell-km 2`` alone names another metric (refused above)."""
    for options in (["--dataset", "grid"], ["--rows", "4"], ["--cols", "4", "--cell-km", "1", "--seed", "3",
                                                            "--outputs", "6"]):
        rc, released, rep = _perturb(tmp_path, described / "Z.npz", ["r0c0"], grid=options)
        assert rc == 0 and rep["n_records"] == 16 and rep["n_outputs"] == 6 and len(released) == 1, options


def test_the_release_says_where_eps_and_eta_came_from_and_a_failure_names_them(described: Path, tmp_path: Path,
                                                                                capsys) -> None:
    rc, _, rep = _perturb(tmp_path, described / "Z.npz", ["r0c0"], "--eps", "2", grid=[])
    assert rc == 0 and (rep["eps"], rep["eps_from"], rep["eta"], rep["eta_from"]) == (2.0, "option", 1.5, "file")
    rc, _, rep = _perturb(tmp_path, described / "Z.npy", ["r0c0"], grid=["--rows", "4", "--cols", "4", "--outputs",
                                                                          "6", "--seed", "3", "--eta", "1.5"])
    assert rc == 0 and (rep["eps_from"], rep["eta_from"], rep["described"]) == ("dataset default", "option", False)
    capsys.readouterr()
    rc, rows, _ = _perturb(tmp_path, described / "Z.npz", ["r0c0"], "--eps", "0.5", grid=[])
    err = capsys.readouterr().err
    assert rc == int(ExitCode.VERIFICATION) and rows == []
    assert "Z.npz is not private at eps 0.5 (option), eta 1.5 (file); nothing released: " in err


def test_records_without_neighbours_are_warned_of(tmp_path: Path, caplog) -> None:
    """At eta below the cell size no record has a neighbour: the mechanism mDP allows is the identity,
    which releases every record unchanged. It verifies (the definition holds), and both commands say so."""
    grid = ["--dataset", "grid", "--rows", "3", "--cols", "3", "--eta", "0.5"]
    assert main(["mdp", *grid, "--save-mechanism", str(tmp_path / "Z.npz"), "--json", str(tmp_path / "m.json")]) == 0
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["isolated_records"] == 9 and report["objective"] == 0.0
    assert "9 of 9 records have no neighbour within eta = 0.5" in caplog.text
    caplog.clear()
    rc, rows, rep = _perturb(tmp_path, tmp_path / "Z.npz", ["r1c1"] * 5, grid=[])
    assert rc == 0 and rep["isolated_records"] == 9 and {r["label"] for r in rows} == {"r1c1"}
    assert "9 of 9 records have no neighbour" in caplog.text
    caplog.clear()
    rc, _, rep = _perturb(tmp_path, tmp_path / "Z.npz", ["r1c1"], "--eps", "1000", "--eta", "1.5", grid=[])
    assert rc == int(ExitCode.VERIFICATION)  # the identity is not private where records have neighbours
    assert "eps x d is above 700 on every neighbouring pair" in caplog.text
    caplog.clear()
    assert main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--json", str(tmp_path / "g.json")]) == 0
    assert "no neighbour" not in caplog.text and json.loads((tmp_path / "g.json").read_text())["isolated_records"] == 0
