"""``securelp mdp``: JSON keys, artefacts, and one-line errors with the input exit code."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import securelp.coordinator.commands.mdp as mdp_cmd
from securelp.coordinator.cli import main
from securelp.solvers.benders import BendersOptions
from securelp.solvers.benders import driver as benders_driver
from securelp.solvers.errors import ExitCode, SolverError
from securelp.solvers.mdp import direct as direct_module
from securelp.solvers.mdp.bd import solve_bd
from securelp.solvers.mdp.columns import ColumnGenerationOptions, solve_colgen
from securelp.solvers.mdp.datasets import load_dataset
from securelp.solvers.mdp.expmech import solve_expmech
from securelp.solvers.mdp.plotting import plot_result
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.records import RecordOptions
from securelp.solvers.mdp.verify import verify_mechanism

KEYS = {"status", "method", "objective", "lower_bound", "upper_bound", "rel_gap", "iterations", "time_s",
        "n_records", "n_outputs", "n_edges", "verification", "partition", "history"}


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "r.json"
    rc = main(["mdp", *extra, "--json", str(out)])
    return rc, (json.loads(out.read_text()) if out.exists() else {})


def test_save_mechanism_writes_the_format_of_its_suffix_and_refuses_others_first(tmp_path: Path, capsys) -> None:
    """.npy, .npz, .csv and .mat (any case) hold the same doubles (a .csv's description line is a comment
    to numpy); another suffix is refused before the solve (exit 3, nothing written), not given a numpy
    file under a .txt name."""
    from scipy.io import loadmat

    base = ["--dataset", "grid", "--rows", "3", "--cols", "4", "--eps", "1", "--eta", "1.5", "--method", "direct"]
    for name in ("z.npy", "z.npz", "z.csv", "Z.MAT"):
        rc, _ = _run(tmp_path, *base, "--save-mechanism", str(tmp_path / name))
        assert rc == 0
    Z = np.load(tmp_path / "z.npy")
    assert Z.shape == (12, 12)
    assert np.array_equal(np.loadtxt(tmp_path / "z.csv", delimiter=","), Z)
    assert np.array_equal(loadmat(tmp_path / "Z.MAT")["Z"], Z)
    with np.load(tmp_path / "z.npz") as f:
        assert np.array_equal(f["Z"], Z)
    capsys.readouterr()
    for name in ("z.txt", "z"):
        (tmp_path / "r.json").unlink(missing_ok=True)
        rc, rep = _run(tmp_path, *base, "--save-mechanism", str(tmp_path / name))
        assert rc == 3 and rep == {} and not (tmp_path / name).exists()
        assert "must end in one of .npz, .csv, .mat, .npy" in capsys.readouterr().err


def test_bd_report_keys_plot_and_mechanism(tmp_path: Path) -> None:
    z = tmp_path / "z.npy"
    png = tmp_path / "p.png"
    rc, rep = _run(tmp_path, "--dataset", "grid", "--rows", "3", "--cols", "4", "--cell-km", "1", "--eps", "1",
                   "--eta", "1.5", "--method", "bd", "--partitioner", "kmrec", "--subsets", "2", "--gap", "1e-6",
                   "--save-mechanism", str(z), "--plot", str(png))
    assert rc == 0
    assert KEYS <= set(rep)
    assert set(rep["verification"]) == {"max_row_sum_error", "min_entry", "max_mdp_violation"}
    assert set(rep["partition"]) == {"sizes", "n_boundary", "mp_component_sizes"}
    assert rep["status"] == "optimal" and rep["rel_gap"] <= 1e-6 and rep["n_records"] == 12
    assert len(rep["history"]) > 1 and all(set(h) == {"lower", "upper", "seconds"} for h in rep["history"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    P = np.load(z)
    verify_mechanism(P, load_dataset("grid", rows=3, cols=4).distance, 1.0, eta=1.5)
    rc, direct = _run(tmp_path, "--dataset", "grid", "--rows", "3", "--cols", "4", "--eps", "1", "--eta", "1.5",
                      "--method", "direct")
    assert rc == 0 and direct["objective"] == pytest.approx(rep["objective"], rel=1e-6)


@pytest.mark.parametrize("extra, decomposition, partitioner", [
    ([], "columns", None),                                       # bd's default: the column decomposition
    (["--subsets", "3"], "records", "kmdv"),                     # a partition asked for: Qiu's record BD
    (["--partitioner", "kmrec"], "records", "kmrec"),
    (["--no-initial-cuts"], "records", "kmdv"),
    (["--decomposition", "records"], "records", "kmdv"),
    (["--first-order", "pdlp"], "columns", None),
])
def test_bd_runs_the_column_decomposition_unless_a_partition_is_asked_for(
        tmp_path: Path, extra: list[str], decomposition: str, partitioner: str | None) -> None:
    rc, rep = _run(tmp_path, "--dataset", "grid", "--rows", "4", "--cols", "4", "--eps", "1", "--eta", "1.5",
                   "--method", "bd", "--gap", "1e-6", *extra)
    assert rc == 0 and rep["status"] == "optimal"
    assert rep["decomposition"] == decomposition and rep["partitioner"] == partitioner
    assert (rep["partition"]["n_boundary"] > 0) == (decomposition == "records")


def test_the_summary_line_names_the_decomposition_that_ran(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "bd"]
    assert main(base) == 0
    assert capsys.readouterr().out.startswith("bd (columns): status optimal")
    assert main([*base, "--subsets", "2"]) == 0
    assert capsys.readouterr().out.startswith("bd (records, kmdv, 2 subsets): status optimal")


@pytest.mark.parametrize("args, needle", [
    (["--method", "bd", "--decomposition", "columns", "--subsets", "3"],
     "--decomposition columns does not use --subsets (for --decomposition records)"),
    (["--method", "bd", "--decomposition", "records", "--first-order", "ipm"],
     "--decomposition records does not use --first-order (for --decomposition columns)"),
    (["--method", "bd", "--partitioner", "bsc", "--dual-ascent", "5"],
     "--partitioner asks for Qiu's record BD and --dual-ascent for the column decomposition"),
    (["--method", "direct", "--subsets", "3"], "--method direct does not use --subsets (for --method bd)"),
    (["--method", "colgen", "--decomposition", "records"], "--method colgen does not use --decomposition"),
    (["--method", "expmech", "--first-order", "pdlp"], "does not use --first-order (for --method bd, colgen)"),
    (["--method", "bd", "--subsets", "0"], "--subsets must be >= 1, got 0"),
])
def test_an_option_of_another_method_or_decomposition_is_refused(tmp_path: Path, capsys, args, needle) -> None:
    rc, rep = _run(tmp_path, "--dataset", "grid", "--rows", "3", "--cols", "3", *args)
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT) and needle in err and not rep
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_points_file_via_cli(tmp_path: Path) -> None:
    f = tmp_path / "pts.csv"
    f.write_text("41.90,12.49\n41.905,12.50\n41.91,12.495\n41.93,12.52\n41.935,12.525\n")
    rc, rep = _run(tmp_path, "--dataset", "points", "--points", str(f), "--metric", "haversine", "--eps", "2",
                   "--eta", "2", "--method", "expmech")
    assert rc == 0 and rep["method"] == "expmech" and rep["n_records"] == 5


@pytest.mark.parametrize(
    "args, needle",
    [(["--eps", "0"], "eps"), (["--eta", "-1"], "eta"), (["--method", "bd", "--gap", "0"], "gap"),
     (["--method", "direct", "--gap", "0"], "gap"), (["--method", "direct", "--gap", "nan"], "gap"),
     (["--method", "bd", "--gap", "1"], "gap"), (["--method", "colgen", "--gap", "2"], "gap"),
     (["--outputs", "0"], "K"),
     # eps d = 30 * 1.41 km on the grid's diagonals: a factor exp(eps d) of 2.6e18, no LP solver takes it
     (["--eps", "30", "--method", "direct"], "exp(eps d) exceeds 1e+15"),
     # the engine names its parameter (eta), the command the flags to change
     (["--eps", "30", "--method", "direct"], "which needs no LP (--eta, --eps or --method expmech)"),
     (["--eps", "30", "--method", "bd"], "exp(eps d) exceeds 1e+15"),
     (["--eps", "30", "--method", "bd", "--decomposition", "columns"], "exp(eps d) exceeds 1e+15")],
)
def test_bad_values_are_one_line_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                              needle: str) -> None:
    rc, _ = _run(tmp_path, "--dataset", "grid", "--rows", "3", "--cols", "3", *args)
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT)
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, needle", [
    (["--dataset", "rome", "--records", "10"], "--dataset rome does not use --records (for --dataset gaussian, text, road)"),
    (["--dataset", "gaussian", "--records", "20", "--cell-km", "2"], "does not use --cell-km (for --dataset grid)"),
    (["--dataset", "grid", "--metric", "haversine"], "does not use --metric (for --dataset points)"),
])
def test_an_option_the_dataset_does_not_use_is_refused_not_ignored(tmp_path: Path, capsys, args, needle) -> None:
    rc, rep = _run(tmp_path, *args, "--method", "expmech")
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT) and needle in err and not rep


def test_the_exponential_mechanism_needs_no_lp_and_takes_any_eps(tmp_path: Path) -> None:
    rc, rep = _run(tmp_path, "--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "30", "--method", "expmech")
    assert rc == 0 and rep["method"] == "expmech"


def test_bad_prior_and_points_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prior = tmp_path / "prior.txt"
    prior.write_text("0.5 0.5")
    rc, _ = _run(tmp_path, "--dataset", "grid", "--rows", "2", "--cols", "2", "--prior", str(prior))
    assert rc == int(ExitCode.INPUT) and "prior.txt" in capsys.readouterr().err
    pts = tmp_path / "p.csv"
    pts.write_text("0,0\n1,x\n")
    rc, _ = _run(tmp_path, "--dataset", "points", "--points", str(pts))
    assert rc == int(ExitCode.INPUT) and "line 2" in capsys.readouterr().err
    dup = tmp_path / "d.csv"
    dup.write_text("0,0\n1,1\n0,0\n")
    rc, _ = _run(tmp_path, "--dataset", "points", "--points", str(dup))
    assert rc == int(ExitCode.INPUT) and "duplicate" in capsys.readouterr().err
    semi = tmp_path / "s.csv"  # semicolons: the fields are not split, the first line looks like a header
    semi.write_text("0;0\n1;1\n2;2\n")
    rc, _ = _run(tmp_path, "--dataset", "points", "--points", str(semi))
    err = capsys.readouterr().err
    assert rc == int(ExitCode.INPUT) and "line 2: no coordinates, only '1;1'" in err and "commas or whitespace" in err


def test_colgen_via_cli_matches_direct(tmp_path: Path) -> None:
    base = ["--dataset", "grid", "--rows", "5", "--cols", "5", "--eps", "10", "--eta", "2"]
    rc, cg = _run(tmp_path, *base, "--method", "colgen", "--gap", "1e-7")
    assert rc == 0 and cg["method"] == "colgen" and cg["status"] == "optimal" and cg["rel_gap"] <= 1e-7
    rc, d = _run(tmp_path, *base, "--method", "direct")
    assert rc == 0 and cg["objective"] == pytest.approx(d["objective"], rel=1e-6)


def test_a_stop_before_the_gap_says_why_and_what_to_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    args = ["mdp", "--dataset", "grid", "--rows", "5", "--cols", "5", "--eps", "10", "--method", "bd",
            "--partitioner", "kmrec", "--subsets", "2", "--max-iterations", "3", "--json", str(out)]
    assert main(args) == ExitCode.SOLVER
    report = json.loads(out.read_text())  # the report is written all the same
    assert report["status"] == "iteration_limit" and report["rel_gap"] > 1e-4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stopped at the iteration cap before the gap" in err[0]
    assert "raise --max-iterations" in err[0]
    assert "--decomposition columns in place of --partitioner, --subsets" in err[0]
    # the hint as written: the partition's options are refused beside the column decomposition ...
    assert main([*args[:-2], "--decomposition", "columns", "--json", str(out)]) == ExitCode.INPUT
    assert "--decomposition columns does not use --partitioner" in capsys.readouterr().err
    # ... and in their place it certifies the instance
    columns = [a for a in args[:-2] if a not in ("--partitioner", "kmrec", "--subsets", "2")]
    assert main([*columns, "--decomposition", "columns", "--json", str(out)]) == ExitCode.OK
    assert capsys.readouterr().err == ""


def test_record_bd_whose_bounds_stop_moving_ends_early_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # without the pace rule a run whose bounds are fixed runs to the iteration cap (hours on Rome). The
    # 5x5 grid at eps 7/km with the cuts as they come and no going back to the master's point on weak
    # cuts: its bounds barely move after iteration 10. Its iterations take milliseconds: the rule's
    # minute is 0 here
    stalling = RecordOptions(benders=BendersOptions(pace_min_seconds=0.0, visible_violation=0.0, in_out_weak_share=0.0))

    def solve(args, problem, seed, progress, status, time_limit=None):  # the command's solve, with those options
        return solve_bd(problem, partitioner=args.partitioner, n_subsets=args.subsets, gap=args.gap,
                        max_iterations=args.max_iterations, progress=progress, status=status, options=stalling)

    monkeypatch.setattr(mdp_cmd, "_solve", solve)
    out = tmp_path / "r.json"
    args = ["mdp", "--dataset", "grid", "--rows", "5", "--cols", "5", "--eps", "7", "--method", "bd",
            "--partitioner", "kmrec", "--subsets", "2", "--json", str(out)]
    assert main(args) == ExitCode.SOLVER
    report = json.loads(out.read_text())
    assert report["status"] == "no_progress" and report["iterations"] <= 25 and report["rel_gap"] > 1e-4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "because its bounds had stopped moving (no_progress)" in err[0]
    assert "--decomposition columns" in err[0]


def test_record_bd_short_of_memory_returns_its_mechanism_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # an iteration that leaves less than twice what it took stops the run (memory read through a fake)
    left = iter([8 << 30, 5 << 30])
    monkeypatch.setattr(benders_driver, "available_memory", lambda: next(left, 5 << 30))  # environment probe
    out = tmp_path / "r.json"
    args = ["mdp", "--dataset", "grid", "--rows", "5", "--cols", "5", "--eps", "4", "--method", "bd",
            "--partitioner", "kmrec", "--subsets", "2", "--json", str(out)]
    assert main(args) == ExitCode.SOLVER
    report = json.loads(out.read_text())
    assert report["status"] == "memory_limit" and report["iterations"] == 1
    assert report["verification"]["max_mdp_violation"] <= 1e-9
    err = capsys.readouterr().err.strip().splitlines()
    assert "because memory was running out (memory_limit)" in err[-1] and "--decomposition columns" in err[-1]


def test_direct_whose_duals_do_not_certify_it_exits_8_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.json"
    args = ["mdp", "--dataset", "grid", "--rows", "4", "--cols", "4", "--eps", "1", "--method", "direct",
            "--json", str(out)]
    assert main(args) == ExitCode.OK
    assert json.loads(out.read_text())["status"] == "optimal"
    solve_lp = direct_module.highs_solve_lp

    def off_duals(*a, **kw):  # HiGHS as on Rome at eps 10/km: "optimal", with duals that certify less
        status, x, duals, obj, h = solve_lp(*a, **kw)
        return status, x, 0.9 * duals, obj, h

    monkeypatch.setattr(direct_module, "highs_solve_lp", off_duals)  # fault injection
    capsys.readouterr()
    assert main(args) == ExitCode.SOLVER
    report = json.loads(out.read_text())
    assert report["status"] == "numerical_trouble" and report["rel_gap"] > 1e-4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("securelp mdp: direct: HiGHS called the LP optimal")
    assert "--decomposition columns" in err[0]


def test_the_terminal_progress_line_shows_the_start_and_ends_before_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the column decomposition shows one progress line (tqdm) with its slow phases and
    iterations; when the solve fails the line is removed first, so the error message starts a line of
    its own. Without a terminal (the other tests) nothing is shown."""
    monkeypatch.setattr(mdp_cmd, "progress_enabled", lambda *_args: True)  # as on a terminal

    def solve(args, problem, seed, progress, status, time_limit=None):  # the phases shown from 1 record on
        return solve_colgen(problem, gap=args.gap, progress=progress, status=status,
                            options=ColumnGenerationOptions(status_min_records=1))

    monkeypatch.setattr(mdp_cmd, "_solve", solve)
    rc, rep = _run(tmp_path, "--dataset", "grid", "--rows", "4", "--cols", "4", "--method", "colgen")
    err = capsys.readouterr().err
    assert rc == 0 and rep["status"] == "optimal"
    assert "colgen, component of 16 records: looking for dominated outputs" in err
    assert "colgen, iter    1  lower " in err and err.split("\r")[-1].strip() == ""  # the line removed at the end

    def fail(args, problem, seed, progress, status, time_limit=None):  # a solver that reports, then fails
        status("component of 16 records: ipm start")
        raise SolverError("HiGHS failed on the master")

    monkeypatch.setattr(mdp_cmd, "_solve", fail)
    (tmp_path / "failed").mkdir()
    rc, rep = _run(tmp_path / "failed", "--dataset", "grid", "--rows", "4", "--cols", "4", "--method", "colgen")
    err = capsys.readouterr().err
    assert rc == ExitCode.SOLVER and not rep
    assert "ipm start" in err and err.split("\r")[-1].lstrip(" ").startswith("securelp mdp: error: HiGHS failed")


@pytest.mark.parametrize("method", ["direct", "bd", "colgen"])
def test_time_limit_counts_loading_and_the_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 method: str) -> None:
    """--time-limit is the command's: the solve gets what loading and building the mDP graph left of
    it (1,500 points with --eta 1000 spend 40 s before the solve). A negative limit is refused for
    every LP method."""
    real_load, real_solve = mdp_cmd.load_secret_dataset, mdp_cmd._solve
    seen: list[float | None] = []

    def slow_load(args):
        time.sleep(0.2)
        return real_load(args)

    def spy(*args, **kwargs):
        seen.append(args[5] if len(args) > 5 else kwargs.get("time_limit"))
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(mdp_cmd, "load_secret_dataset", slow_load)
    monkeypatch.setattr(mdp_cmd, "_solve", spy)
    base = ["--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "1", "--eta", "1.5", "--method", method]
    rc, rep = _run(tmp_path, *base, "--time-limit", "100")
    assert rc == 0 and rep["status"] == "optimal"
    assert seen[-1] is not None and 99.0 < seen[-1] <= 99.8
    rc, _ = _run(tmp_path, *base)
    assert rc == 0 and seen[-1] is None
    rc, _ = _run(tmp_path, *base, "--time-limit", "-1")
    assert rc == int(ExitCode.INPUT)


def test_the_map_of_lat_lon_records_is_labelled_and_to_scale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig) or close(fig))
    f = tmp_path / "pts.csv"
    f.write_text("lat,lon\n60.0,24.90\n60.01,24.92\n60.02,24.91\n60.005,24.95\n")
    latlon = build_pmo(load_dataset("points", path=f, metric="haversine"), 2.0, 3.0)
    grid = build_pmo(load_dataset("grid", rows=3, cols=4), 1.0, 2.0)
    for problem in (latlon, grid):
        plot_result(solve_expmech(problem), problem, tmp_path / "p.png")
    maps = [fig.axes[1] for fig in figures]
    # at latitude 60 a degree of longitude is half as long as one of latitude
    assert maps[0].get_xlabel() == "longitude (degrees)" and maps[0].get_ylabel() == "latitude (degrees)"
    assert maps[0].get_aspect() == pytest.approx(1 / np.cos(np.radians(60.00875)), rel=1e-6)
    assert maps[1].get_xlabel() == "" and maps[1].get_aspect() == 1.0


def test_any_seed_gives_a_reproducible_partition(tmp_path: Path) -> None:
    """``--seed -1`` (which numpy's k-means generator refuses) and a word (which Python's salted ``hash``
    would map differently in every process) both give a fixed partition, and a non-negative integer
    the one it names (the same in other processes: tests/integration/test_mdp_cli_processes.py)."""
    assert mdp_cmd.partition_seed(None) == 0 and mdp_cmd.partition_seed("7") == 7 and mdp_cmd.partition_seed(12) == 12
    for seed in ("-1", "abc", "1.5", "\u00b2"):
        assert 0 <= mdp_cmd.partition_seed(seed) < 2**31 and mdp_cmd.partition_seed(seed) == mdp_cmd.partition_seed(seed)
    assert len({mdp_cmd.partition_seed(s) for s in ("-1", "abc", "1.5", "0")}) == 4
    base = ["--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "1", "--eta", "1.5", "--method", "bd",
            "--subsets", "2"]
    rc, rep = _run(tmp_path, *base, "--seed", "-1")
    assert rc == 0 and rep["status"] == "optimal"
