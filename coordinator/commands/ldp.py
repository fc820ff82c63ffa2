"""``securelp ldp``: local d-privacy -- the Linear-Equations mechanism and its baselines.

Builds the chosen mechanism on a grid (or a metric dataset), verifies it, simulates
``--users`` users drawn from the prior, and reports theory next to simulation for the
range error and the frequency-estimation MSE (keys documented in docs/reference/reports.md).

It releases nothing: every simulated figure is computed from the simulated users' true values
(and the prior), so the command is an evaluation, NOT private. Its human output says so in its
first line (:data:`NOT_PRIVATE`) and its report carries ``"private": false``.
"""

from __future__ import annotations

import argparse
import logging

from securelp.coordinator.commands.common import (
    DeprecatedAlias,
    add_output_arguments,
    grid_size,
    not_private_seed_help,
    print_summary,
    refuse_inapplicable,
)
from securelp.coordinator.commands.mdp import naming_flags
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.solvers.errors import InputError

logger = logging.getLogger(__name__)

NAME = "ldp"
#: the value domains ``--dataset`` names: a grid, or a metric dataset of ``securelp.solvers.mdp.datasets``
DATASETS = ["grid", "text", "road", "rome"]
#: The first line of the human output: the figures are errors against the simulated truth.
NOT_PRIVATE = ("NOT PRIVATE: simulation against the simulated users' true values (errors and MSE computed "
               "from them and the prior); not a release")
#: the flags for the parameter an engine's error names (``SecureLPError.parameter``)
LDP_FLAGS = {"eps": "--eps", "users": "--users", "domain": "--dataset, --rows, --cols", "prior": "--prior",
             "radius": "--range", "mechanism": "--mechanism", "name": "--dataset"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``ldp`` subcommand."""
    p = subparsers.add_parser(
        NAME,
        help="local d-privacy: Linear-Equations mechanism and baselines",
        description=(
            "Build a verified local d-privacy mechanism (le, grr, oue, em, pl), simulate users drawn "
            "from a prior, and report Error_range and MSE_freq, theory next to simulation."
        ),
    )
    p.add_argument("--dataset", default="grid", choices=DATASETS,
                   help="the users' value domain: a rows x cols grid (default) or a metric dataset")
    p.add_argument("--domain", dest="dataset", choices=DATASETS, action=DeprecatedAlias, new="--dataset")
    p.add_argument("--rows", type=int, default=None, help="grid rows (default 10)")
    p.add_argument("--cols", type=int, default=None, help="grid columns (default 10)")
    p.add_argument("--cell-km", type=float, default=None, help="grid cell size in km (default 1); eps is per km")
    p.add_argument("--records", type=int, default=None, help="records of a text/road dataset (default 500)")
    p.add_argument("--eps", type=float, required=True, help="privacy parameter per distance unit (> 0)")
    p.add_argument("--mechanism", default="le", choices=["le", "grr", "oue", "em", "pl"], help="mechanism (default le)")
    p.add_argument("--users", type=int, default=10000, help="simulated users (default 10,000)")
    p.add_argument("--prior", default=None, help="prior file (comma/whitespace separated, one value per domain element)")
    p.add_argument("--range", dest="radius", type=float, default=None,
                   help="range r of Error_range in distance units (default: one grid cell)")
    p.add_argument("--seed", default=None, help=not_private_seed_help("the simulated users and the mechanism's noise",
                                                                      "the noise"))
    add_output_arguments(p, dest="json_path")
    p.set_defaults(func=run)


def _domain(args: argparse.Namespace):
    from securelp.solvers.ldp import DenseDomain, GridDomain

    refuse_inapplicable(args, "--dataset", args.dataset, {
        "rows": ("--rows", ("grid",)), "cols": ("--cols", ("grid",)), "cell_km": ("--cell-km", ("grid",)),
        "records": ("--records", ("text", "road"))})
    if args.dataset == "grid":
        args.rows, args.cols, args.cell_km = grid_size(args)  # the report shows them
        if args.rows < 1 or args.cols < 1:
            raise InputError(f"--rows and --cols must be >= 1, got {args.rows} x {args.cols}")
        if args.rows * args.cols < 2:
            raise InputError("the grid needs at least 2 cells")
        return GridDomain(args.rows, args.cols, args.cell_km), None
    from securelp.solvers.mdp.datasets import load_dataset

    params = {"n_records": args.records} if args.dataset in ("text", "road") else {}
    ds = load_dataset(args.dataset, **params)
    if ds.n < 2:
        raise InputError(f"--dataset {args.dataset} needs at least 2 records, got {ds.n}")
    return DenseDomain(ds.distance, ds.name), ds


def run(args: argparse.Namespace) -> int:
    """Run one simulated LDP collection and report it; an engine's error names the flag to change
    (:data:`LDP_FLAGS`)."""
    with naming_flags(LDP_FLAGS):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from securelp.solvers.ldp import simulate

    check_writable(args.json_path, "--json")
    check_distinct([("--json", args.json_path)], [("--prior", args.prior)])
    domain, _ = _domain(args)
    prior = None
    if args.prior is not None:
        from securelp.solvers.mdp.datasets import load_prior

        prior = load_prior(args.prior, domain.m)
    if args.users < 1:
        raise InputError(f"--users must be >= 1, got {args.users}")
    seed = args.seed
    if seed is not None and isinstance(seed, str) and seed.lstrip("-").isdigit():
        seed = int(seed)
    result = simulate(domain, args.mechanism, args.eps, args.users, prior=prior, radius=args.radius, seed=seed)
    report = {"command": "ldp", "private": False, "evaluation": NOT_PRIVATE, "dataset": args.dataset}
    if args.dataset == "grid":
        report.update({"rows": args.rows, "cols": args.cols, "cell_km": args.cell_km})
    report["prior"] = args.prior or "uniform"
    report.update(result.as_dict())
    report["seed"] = args.seed
    if args.json_path:
        write_json_report(args.json_path, report)

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.6g}"

    print_summary(args, NOT_PRIVATE + "\n" + (
        f"{result.mechanism} eps={result.eps:g} m={result.m} users={result.users}: "
        f"Error_range(r={result.range_r:g}) {fmt(result.error_range)} (theory {fmt(result.error_range_theory)}), "
        f"MSE_freq {fmt(result.mse_freq)} (theory {fmt(result.mse_freq_theory)}), "
        f"verified [{result.verification.get('method')}], {result.time_s:.2f} s"), dest="json_path")
    del np
    return 0
