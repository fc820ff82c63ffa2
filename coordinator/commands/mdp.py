"""``securelp mdp``: optimal metric-DP perturbation matrices (direct LP, Qiu's BD, or the EM baseline).

Loads a secret dataset, builds the PMO LP (Qiu Eq. 4-7), solves it, verifies the mechanism
and writes the JSON report whose keys are documented in docs/reference/reports.md. A progress line (tqdm)
shows the iterations on a terminal (quiet with ``--json -``, ``--quiet`` or without a TTY).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from securelp.coordinator.api.mdp import partition_seed
from securelp.coordinator.commands.common import add_output_arguments, grid_size, print_summary, refuse_inapplicable
from securelp.coordinator.progress import ProgressLine, progress_enabled
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.solvers.errors import ExitCode, InputError, SecureLPError
from securelp.solvers.files import write_atomically, written_together

logger = logging.getLogger(__name__)

NAME = "mdp"
METHODS = ("direct", "bd", "colgen", "expmech")
#: Qiu's BD's partition when --decomposition records is chosen without --partitioner / --subsets
DEFAULT_PARTITIONER = "kmdv"
DEFAULT_SUBSETS = 25
#: ``--seed`` when none is given (the gaussian points' and the partitions' default all along)
DEFAULT_SEED = "0"
#: the flags (or the way out) for the parameter an engine's error names (``SecureLPError.parameter``)
MDP_FLAGS = {
    "method": "use --method bd --decomposition columns",
    "decomposition": "use --decomposition columns",
    "eta": "--eta, --eps or --method expmech",
    "eps": "--eps",
    "n_outputs": "--outputs",
    "loss": "--loss",
    "name": "--dataset",
    "gap": "--gap",
    "time_limit": "--time-limit",
    "max_iterations": "--max-iterations",
    "dual_ascent": "--dual-ascent",
    "first_order": "--first-order",
    "partitioner": "--partitioner",
    "n_subsets": "--subsets",
}


@contextmanager
def naming_flags(flags: dict[str, str]) -> Iterator[None]:
    """Re-raise an engine's error whose ``parameter`` is in ``flags`` as the same type, its message
    ending with that parameter's flags (engines name their own parameters, never the CLI's flags)."""
    try:
        yield
    except SecureLPError as exc:
        hint = flags.get(exc.parameter or "")
        if hint is None:
            raise
        raise type(exc)(f"{exc} ({hint})", parameter=exc.parameter) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mdp`` subcommand."""
    from securelp.solvers.mdp.records import PARTITIONERS

    p = subparsers.add_parser(
        NAME,
        help="optimal metric-DP perturbation (direct LP or Benders)",
        description=(
            "Compute a verified eps-mDP perturbation matrix minimising the expected loss (Qiu's PMO LP): "
            "'direct' solves the whole LP with HiGHS; 'bd' runs a Benders decomposition with a certified gap: "
            "by output column (column generation on the PMO's dual, our addition beyond the paper; the "
            "default) or Qiu's, over a partitioned dataset (--decomposition records, or --partitioner / "
            "--subsets); 'colgen' is the column decomposition by its own name; 'expmech' is the "
            "exponential-mechanism baseline."
        ),
    )
    add_dataset_options(p)
    p.add_argument("--prior", default=None, help="prior file, one probability per record (default uniform)")
    p.add_argument("--eps", type=float, default=None, help="privacy parameter per distance unit (dataset default)")
    p.add_argument("--eta", type=float, default=None, help="neighbourhood radius (dataset default)")
    p.add_argument("--outputs", type=int, default=None, help="number of outputs K (default: every record)")
    p.add_argument("--loss", default="distance", choices=["distance", "travel"], help="loss (default distance)")
    p.add_argument("--method", default="bd", choices=METHODS, help="method (default bd)")
    p.add_argument("--decomposition", default=None, choices=["records", "columns"],
                   help="bd: 'columns' = Benders on the PMO's dual by output column, i.e. column generation per "
                        "mDP-graph component (certifies Rome and the 20x25 grids in seconds); 'records' = Qiu's "
                        "BD over a record partition (stalls short of 1e-4 at large eps*d). Default: 'records' "
                        "when a partition is asked for (--partitioner, --subsets or --no-initial-cuts), else "
                        "'columns' (docs/explanation/mdp.md)")
    p.add_argument("--partitioner", default=None, choices=list(PARTITIONERS),
                   help=f"Qiu's BD: the partitioner (default {DEFAULT_PARTITIONER}); implies --decomposition records")
    p.add_argument("--subsets", type=int, default=None,
                   help=f"Qiu's BD: subsets M (default {DEFAULT_SUBSETS}); implies --decomposition records")
    p.add_argument("--gap", type=float, default=1e-4,
                   help="relative gap: bd and colgen stop there; direct is 'optimal' only within it (default 1e-4)")
    p.add_argument("--max-iterations", type=int, default=500, help="BD iteration cap (default 500)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="wall-clock limit in seconds, counted from the command's start (loading and the mDP "
                        "graph included); direct: HiGHS's limit on what is left; bd and colgen: held inside "
                        "their iterations. At the limit the best verified mechanism is returned with its "
                        "certified gap (exit code 8)")
    p.add_argument("--workers", type=int, default=2,
                   help="threads for the BD blocks, the column generation's pricing and the IPM start (default 2)")
    p.add_argument("--dual-ascent", type=float, default=None, metavar="SECONDS",
                   help="columns: seconds of the first-order start per large component before the column "
                        "generation, for strong early bounds (default on components with more than 300,000 "
                        "records x outputs: 90%% of --time-limit, 300 s without one, for pdlp and screened; a "
                        "fifth, 60 s without one, for smoothed; 0 = off)")
    p.add_argument("--first-order", default=None, choices=["auto", "pdlp", "smoothed", "screened", "ipm"],
                   help="columns: the first-order start: 'pdlp' (HiGHS's PDLP on the whole component LP: "
                        "start columns, duals and a certified bound), 'smoothed' (the mDP-row dual ascent: a "
                        "certified bound only), 'screened' (the ascent, PDLP on the outputs it marks as used "
                        "for start columns, the ascent again), 'ipm' (the ascent, then the structured interior-"
                        "point method on the outputs it marks as used: columns, duals and a bound) or 'auto' "
                        "(default: by the component's size and the time limit, and 'ipm' after all on a "
                        "component whose column generation has not closed the gap in 25 iterations; "
                        "docs/explanation/mdp.md)")
    p.add_argument("--no-initial-cuts", action="store_true", default=None,
                   help="Qiu's BD without Property 3.2's initial cuts; implies --decomposition records")
    p.add_argument("--exact-check", action="store_true", help="also verify in exact rational arithmetic (small instances)")
    p.add_argument("--seed", default=None, help="seed for the outputs of --outputs, the travel destinations, the gaussian "
                   "points and the partitions (default 0: the same command builds the same LP); it seeds no noise: "
                   "the mechanism's noise is drawn by 'securelp perturb', whose --seed seeds the noise and is "
                   "NOT private)")
    p.add_argument("--save-mechanism", default=None, help="write the verified n x K matrix here, in the format of "
                   "its suffix: .npz (numpy), .csv (text, every float to 17 digits) or .mat (MATLAB, variable Z), each "
                   "with its description (dataset, eps, eta, outputs) for 'securelp perturb'; or .npy (the bare matrix)")
    p.add_argument("--plot", default=None, help="write an image (.png, .pdf or .svg): the bounds and the relative gap "
                   "per iteration (as Qiu's Figs. 17-20) and, for 2-D data, the partition; needs matplotlib "
                   "(pip install 'securelp[plot]')")
    add_output_arguments(p, dest="json_path")
    p.set_defaults(func=run)


def add_dataset_options(p: argparse.ArgumentParser) -> None:
    """The secret dataset's options, shared by ``mdp`` and ``perturb`` (read by :func:`load_secret_dataset`)."""
    p.add_argument("--dataset", default="grid", choices=["grid", "rome", "gaussian", "points", "text", "road"],
                   help="secret dataset (default grid)")
    p.add_argument("--rows", type=int, default=None, help="grid rows (default 10)")
    p.add_argument("--cols", type=int, default=None, help="grid columns (default 10)")
    p.add_argument("--cell-km", type=float, default=None, help="grid cell size in km (default 1)")
    p.add_argument("--records", type=int, default=None, help="records of gaussian/text/road (default 500)")
    p.add_argument("--points", default=None, help="CSV of coordinates for --dataset points")
    p.add_argument("--metric", default=None, choices=["euclidean", "haversine"],
                   help="metric of a points file (default euclidean; haversine: lat,lon in degrees, km)")


def mechanism_writer(path: str) -> Callable[[Any, np.ndarray, dict[str, Any]], None]:
    """How ``--save-mechanism PATH`` is written, by its suffix
    (:data:`securelp.solvers.mdp.perturb.MECHANISM_FORMATS`); another suffix is an :class:`InputError`,
    raised before the solve."""
    from securelp.solvers.mdp.perturb import MECHANISM_FORMATS, mechanism_suffix

    return MECHANISM_FORMATS[mechanism_suffix(path, f"cannot write --save-mechanism {path}")]


def check_eps_eta(args: argparse.Namespace) -> None:
    """Refuse a given ``--eps`` or ``--eta`` that is not > 0 (``mdp`` and ``perturb``), before anything is loaded."""
    if args.eps is not None and not args.eps > 0:
        raise InputError(f"--eps must be > 0, got {args.eps}")
    if args.eta is not None and not args.eta > 0:
        raise InputError(f"--eta must be > 0, got {args.eta}")


def dataset_options(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The dataset that :func:`add_dataset_options`' options (and ``--seed``) name, as its name and the
    options :func:`securelp.solvers.mdp.datasets.load_dataset` takes (the prior apart)."""
    name = args.dataset
    refuse_inapplicable(args, "--dataset", name, {
        "rows": ("--rows", ("grid",)), "cols": ("--cols", ("grid",)), "cell_km": ("--cell-km", ("grid",)),
        "records": ("--records", ("gaussian", "text", "road")), "points": ("--points", ("points",)),
        "metric": ("--metric", ("points",))})
    params: dict[str, Any] = {}
    if name == "grid":
        rows, cols, cell_km = grid_size(args)
        params.update(rows=rows, cols=cols, cell_km=cell_km)
    elif name == "points":
        if not args.points:
            raise InputError("--dataset points needs --points FILE")
        params.update(path=args.points, metric=args.metric or "euclidean")
    elif name in ("gaussian", "text", "road"):
        params.update(n_records=args.records if args.records is not None else 500)
        if name == "gaussian" or args.seed is not None:
            params.update(seed=args.seed if args.seed is not None else 0)
    return name, params


def load_secret_dataset(args: argparse.Namespace):
    """The dataset that :func:`add_dataset_options`' options (and ``--prior``, ``--seed``) name."""
    from securelp.solvers.mdp.datasets import load_dataset

    name, params = dataset_options(args)
    return load_dataset(name, prior=getattr(args, "prior", None), **params)


def saved_dataset_options(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`dataset_options` as a saved mechanism's description keeps them: a points file by its
    absolute path, so ``securelp perturb`` finds it from another directory."""
    options = dataset_options(args)[1]
    if "path" in options:
        options["path"] = str(Path(options["path"]).resolve())
    return options


def report_dict(result: Any, problem: Any) -> dict[str, Any]:
    """The stable JSON report (keys documented in docs/reference/reports.md)."""
    part = result.partition or {}
    return {
        "status": result.status,
        "method": result.method,
        "objective": result.objective,
        "lower_bound": result.lower_bound,
        "upper_bound": result.upper_bound,
        "rel_gap": result.rel_gap,
        "iterations": result.iterations,
        "time_s": result.time_s,
        "n_records": problem.n,
        "n_outputs": problem.K,
        "n_edges": problem.graph.n_edges,
        "outputs": problem.outputs.tolist(),
        "verification": result.verification.as_dict(),
        "partition": {
            "sizes": part.get("sizes", []),
            "n_boundary": part.get("n_boundary", 0),
            "mp_component_sizes": part.get("mp_component_sizes", []),
        },
        "history": [{"lower": h.lower, "upper": h.upper, "seconds": h.seconds} for h in result.history],
        "dataset": problem.dataset.name,
        "eps": problem.eps,
        "eta": problem.eta,
        "unit": problem.dataset.unit,
        "loss": problem.loss_name,
        "n_components": problem.graph.n_components,
        "isolated_records": problem.graph.n_isolated,
        "partitioner": part.get("method"),
        "decomposition": part.get("decomposition", "records" if result.method == "bd" else None),
        "dual_ascent": list((result.details or {}).get("dual_ascent", [])),
        "dominated_outputs": list((result.details or {}).get("dominated_outputs", [])),
        "lazy_rows": list((result.details or {}).get("lazy_rows", [])),
        "expmech_components": (result.details or {}).get("expmech_components"),
    }


#: the options of Qiu's record BD and of the column decomposition, by ``dest``
RECORD_OPTIONS = {"partitioner": "--partitioner", "subsets": "--subsets", "no_initial_cuts": "--no-initial-cuts"}
COLUMN_OPTIONS = {"dual_ascent": "--dual-ascent", "first_order": "--first-order"}


def resolve_decomposition(args: argparse.Namespace) -> None:
    """Settle ``args.decomposition`` and the options that belong to one decomposition, before
    anything is loaded.

    ``--method bd`` without ``--decomposition`` runs the column decomposition, which certifies the
    benchmark's instances in seconds to minutes, unless a partition is asked for (any of
    :data:`RECORD_OPTIONS`): then Qiu's record BD, as the issue's ``--partitioner kmdv --subsets
    25`` command means (the record BD by default would stall on Rome for ten minutes at a gap of
    0.01). An option the chosen method or decomposition does not use is refused, not ignored.

    Raises
    ------
    InputError
        Naming the options that do not apply, or both kinds of options given without a
        ``--decomposition``.
    """
    records = [flag for dest, flag in RECORD_OPTIONS.items() if getattr(args, dest) is not None]
    columns = [flag for dest, flag in COLUMN_OPTIONS.items() if getattr(args, dest) is not None]
    if args.method != "bd":
        applies = {"decomposition": ("--decomposition", ("bd",))}
        applies.update({dest: (flag, ("bd",)) for dest, flag in RECORD_OPTIONS.items()})
        applies.update({dest: (flag, ("bd", "colgen")) for dest, flag in COLUMN_OPTIONS.items()})
        refuse_inapplicable(args, "--method", args.method, applies)
    else:
        if args.decomposition is None:
            if records and columns:
                raise InputError(f"{', '.join(records)} {'ask' if len(records) > 1 else 'asks'} for Qiu's record BD "
                                 f"and {', '.join(columns)} for the column decomposition: give the options of one, "
                                 "or --decomposition")
            args.decomposition = "records" if records else "columns"
        refuse_inapplicable(args, "--decomposition", args.decomposition, {
            **{dest: (flag, ("records",)) for dest, flag in RECORD_OPTIONS.items()},
            **{dest: (flag, ("columns",)) for dest, flag in COLUMN_OPTIONS.items()}})
    if args.subsets is not None and args.subsets < 1:
        raise InputError(f"--subsets must be >= 1, got {args.subsets}")
    args.partition_flags = records  # for exit 8's hint
    args.partitioner = args.partitioner or DEFAULT_PARTITIONER
    args.subsets = DEFAULT_SUBSETS if args.subsets is None else args.subsets
    args.no_initial_cuts = bool(args.no_initial_cuts)
    args.first_order = args.first_order or "auto"


def method_label(args: argparse.Namespace) -> str:
    """What ran, for the terminal: ``bd (columns)``, ``bd (records, kmdv, 25 subsets)``, ``direct``."""
    if args.method != "bd":
        return args.method
    if args.decomposition == "columns":
        return "bd (columns)"
    return f"bd (records, {args.partitioner}, {args.subsets} subsets)"


def _solve(args: argparse.Namespace, problem: Any, seed: Any, progress: Callable[[Any], None],
           status: Callable[[str], None], time_limit: float | None = None) -> Any:
    """The solve ``args.method`` names, reporting to the terminal's progress line; ``time_limit``:
    the seconds left of ``--time-limit`` (``None``: none)."""
    if args.method == "direct":
        from securelp.solvers.mdp.direct import solve_direct

        return solve_direct(problem, gap=args.gap, exact_check=args.exact_check, time_limit=time_limit)
    elif args.method == "bd":
        from securelp.solvers.mdp.bd import solve_bd

        return solve_bd(problem, partitioner=args.partitioner, n_subsets=args.subsets, gap=args.gap,
                        decomposition=args.decomposition, max_iterations=args.max_iterations,
                        time_limit=time_limit if time_limit is not None else float("inf"),
                        workers=args.workers, seed=partition_seed(seed), initial_cuts=not args.no_initial_cuts,
                        exact_check=args.exact_check, dual_ascent=args.dual_ascent,
                        first_order=args.first_order, progress=progress, status=status)
    elif args.method == "colgen":
        from securelp.solvers.mdp.columns import solve_colgen

        return solve_colgen(problem, gap=args.gap, max_iterations=args.max_iterations,
                            time_limit=time_limit if time_limit is not None else float("inf"),
                            workers=args.workers, dual_ascent=args.dual_ascent, first_order=args.first_order,
                            progress=progress, status=status)
    else:
        from securelp.solvers.mdp.expmech import solve_expmech

        return solve_expmech(problem)


def run(args: argparse.Namespace) -> int:
    """Run ``securelp mdp``; an engine's error names the flag to change (:data:`MDP_FLAGS`)."""
    with naming_flags(MDP_FLAGS):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from securelp.coordinator.cli import exit_promptly_on_interrupt
    from securelp.solvers.mdp.graph import weak_guarantees
    from securelp.solvers.mdp.pmo import build_pmo

    exit_promptly_on_interrupt()
    t_command = time.perf_counter()  # --time-limit counts from here: loading and the mDP graph included

    if args.method in ("direct", "bd", "colgen") and not (0 < args.gap < 1):
        # the relative gap (U - L) / U of a non-negative loss is at most 1: a gap >= 1 would call
        # any mechanism optimal
        raise InputError(f"--gap must be in (0, 1), got {args.gap}")
    resolve_decomposition(args)
    if args.method in ("bd", "colgen"):
        if args.max_iterations < 1:
            raise InputError(f"--max-iterations must be >= 1, got {args.max_iterations}")
        if args.workers < 1:
            raise InputError(f"--workers must be >= 1, got {args.workers}")
        if args.dual_ascent is not None and not (math.isfinite(args.dual_ascent) and args.dual_ascent >= 0):
            raise InputError(f"--dual-ascent must be a number of seconds >= 0, got {args.dual_ascent}")
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and args.time_limit > 0):
        raise InputError(f"--time-limit must be a positive number of seconds, got {args.time_limit}")
    check_eps_eta(args)
    if args.outputs is not None and args.outputs < 1:
        raise InputError(f"--outputs (K) must be >= 1, got {args.outputs}")
    # every output is checked before the solve, which can take an hour
    check_writable(args.save_mechanism, "--save-mechanism")
    if args.save_mechanism:
        save = mechanism_writer(args.save_mechanism)
    check_writable(args.plot, "--plot")
    check_writable(args.json_path, "--json")
    check_distinct([("--save-mechanism", args.save_mechanism), ("--plot", args.plot), ("--json", args.json_path)],
                   [("--points", args.points), ("--prior", args.prior)])
    if args.plot:
        from securelp.solvers.mdp.plotting import plot_format, require_plotting

        plot_format(args.plot)
        require_plotting("mdp --plot")  # the extra securelp[plot], before the solve
    dataset = load_secret_dataset(args)
    # the default seed 0 draws the same outputs and travel destinations every run: the same command
    # solves the same LP, and a saved mechanism's columns can be matched to their outputs again by
    # `securelp perturb`
    seed = DEFAULT_SEED if args.seed is None else args.seed
    problem = build_pmo(dataset, args.eps, args.eta, n_outputs=args.outputs, loss=args.loss, seed=seed)
    for note in weak_guarantees(problem.graph, dataset.distance, problem.eps):
        logger.warning("%s", note)
    line = ProgressLine(progress_enabled(args.json_path, args.quiet), desc=method_label(args))
    t_start = time.perf_counter()

    def progress(rec: Any) -> None:
        gap = (rec.upper - rec.lower) / abs(rec.upper) if np.isfinite(rec.upper) and rec.upper != 0 else float("inf")
        line.status(f"iter {rec.iteration:4d}  lower {rec.lower:.8g}  upper {rec.upper:.8g}  gap {gap:.2e}  "
                    f"{rec.seconds:7.1f}s")

    def status(text: str) -> None:  # the slow phases of the column decomposition before its iterations
        line.status(f"{text}  {time.perf_counter() - t_start:7.1f}s")

    # what is left of --time-limit after loading and building the mDP graph (a complete graph's
    # essential-pair search can take a large share of a short limit)
    limit = None if args.time_limit is None else max(1e-3, args.time_limit - (time.perf_counter() - t_command))
    with line.active():  # the line is gone before anything else is written, an error message included
        result = _solve(args, problem, seed, progress, status, limit)
    report = report_dict(result, problem)
    with written_together():  # the mechanism, the plot and the report appear together or not at all
        if args.save_mechanism:
            from securelp.solvers.mdp.perturb import describe_mechanism

            description = describe_mechanism(dataset, saved_dataset_options(args), problem.eps, problem.eta,
                                             problem.outputs, seed)
            write_atomically(args.save_mechanism, lambda handle: save(handle, result.mechanism, description))
        if args.plot:
            from securelp.solvers.mdp.plotting import plot_result

            plot_result(result, problem, args.plot)
        if args.json_path:
            write_json_report(args.json_path, report)
    v = report["verification"]
    print_summary(args, f"{method_label(args)}: status {result.status}, objective {result.objective:.10g}, "
              f"bounds [{result.lower_bound:.10g}, {result.upper_bound:.10g}], gap {result.rel_gap:.2e}, "
                  f"{result.iterations} iterations, {result.time_s:.2f}s; verified (row err {v['max_row_sum_error']:.1e}, "
                  f"min entry {v['min_entry']:.1e}, mDP violation {v['max_mdp_violation']:.1e})", dest="json_path")
    if result.method in ("direct", "bd", "colgen") and result.status != "optimal":
        print(f"securelp mdp: {stop_hint(result.status, result.rel_gap, args)}", file=sys.stderr)
        return int(ExitCode.SOLVER)
    return int(ExitCode.OK)


def stop_hint(status: str, rel_gap: float, args: argparse.Namespace) -> str:
    """Why exit code 8, and what to change (one line on stderr; the report is written all the same)."""
    what = {"time_limit": "at the time limit", "iteration_limit": "at the iteration cap",
            "stalled": "with no violated cut left (stalled)",
            "no_progress": "because its bounds had stopped moving (no_progress)",
            "numerical_trouble": "after HiGHS failed",
            "memory_limit": "because memory was running out (memory_limit)"}.get(status, f"with status {status}")
    if args.method == "direct" and status != "time_limit":
        text = (f"direct: HiGHS called the LP optimal, but its duals certify a gap of only {rel_gap:.3g} "
                f"(--gap {args.gap:g}); the verified mechanism is returned (exit code 8)")
    else:
        text = (f"{method_label(args)} stopped {what} before the gap {args.gap:g}: the certified gap is {rel_gap:.3g}; "
                f"the verified mechanism is returned (exit code 8)")
    fixes = []
    if status == "time_limit":
        fixes.append("raise --time-limit")
    elif status == "iteration_limit":
        fixes.append("raise --max-iterations")
    if args.method == "direct":
        fixes.append("use --method bd --decomposition columns (certified; docs/explanation/mdp.md)")
    if args.method == "bd" and args.decomposition == "records":
        instead = f" in place of {', '.join(args.partition_flags)}" if getattr(args, "partition_flags", None) else ""
        fixes.append(f"use --decomposition columns{instead} (Qiu's record BD stalls at large eps*d, and its master, every "
                     "boundary record for every output, is slow on large data; docs/explanation/mdp.md, Known weaknesses)")
    return text + (": " + ", or ".join(fixes) if fixes else "")
