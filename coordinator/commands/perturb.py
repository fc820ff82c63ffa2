"""``securelp perturb``: release true records through a mechanism saved by ``securelp mdp``.

A mechanism file keeps its description (dataset, ``eps``, ``eta``, outputs; every format but a bare
``.npy``), so the dataset need not be named again; dataset options that are given must name the
same dataset. The mechanism is verified again against the dataset's metric, ``eps`` and ``eta``
before anything is drawn; each true record is then replaced by an output drawn exactly from its row
(:mod:`securelp.solvers.mdp.perturb`). The released outputs go to ``--out`` (CSV, in the order of the true
records); the report (``--json``) holds counts and the verification, never a record. Everything that leaves
the command is part of the release, so the report and the summary line hold only public figures (the
mechanism, its verification, the number of records, which the released file shows anyway) and no timing:
the time of drawing depends on which rows the true records select.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import sys
from typing import Any

import numpy as np

from securelp.coordinator.commands.common import (
    DeprecatedAlias,
    add_output_arguments,
    not_private_seed_help,
    print_summary,
)
from securelp.coordinator.commands.mdp import (
    DEFAULT_SEED,
    add_dataset_options,
    check_eps_eta,
    load_secret_dataset,
    naming_flags,
)
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.solvers.errors import InputError
from securelp.solvers.files import write_atomically, written_together

logger = logging.getLogger(__name__)

NAME = "perturb"

#: the dataset options (flag, argparse key) whose presence means the dataset is named on the command line
DATASET_FLAGS = (("--dataset", "dataset"), ("--rows", "rows"), ("--cols", "cols"), ("--cell-km", "cell_km"),
                 ("--records", "records"), ("--points", "points"), ("--metric", "metric"))
#: the flags (or the way out) for the parameter an engine's error names (``SecureLPError.parameter``)
PERTURB_FLAGS = {"by_index": "use --by-index for record numbers", "outputs": "the dataset options, --outputs, --mdp-seed",
                 "name": "--dataset"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``perturb`` subcommand."""
    p = subparsers.add_parser(
        NAME,
        help="release true records through a saved mDP mechanism (verified, sampled exactly)",
        description=(
            "Read a mechanism written by 'securelp mdp --save-mechanism', verify it against the "
            "dataset's metric, --eps and --eta, and replace each true record by an output drawn "
            "exactly from its row, with noise from the OS's entropy. A .npz, .csv or .mat file says "
            "which dataset, eps, eta and outputs it was computed for, so no dataset option is needed "
            "(those given are checked against it); for a bare .npy give the dataset options, --eps, "
            "--eta, --outputs and, as --mdp-seed, the --seed that 'securelp mdp' was run with."
        ),
    )
    add_dataset_options(p)
    p.set_defaults(dataset=None)  # grid for a bare .npy; a described file's own dataset otherwise
    p.add_argument("--eps", type=float, default=None,
                   help="the privacy parameter per distance unit to verify the mechanism at (default: the "
                        "file's, else the dataset's)")
    p.add_argument("--eta", type=float, default=None,
                   help="neighbourhood radius (default: the file's, else the dataset's)")
    p.add_argument("--outputs", type=int, default=None,
                   help="number of outputs K the mechanism was computed with (default: the file's, else every "
                        "record)")
    p.add_argument("--mdp-seed", dest="seed", default=None,
                   help="the --seed 'securelp mdp' was given (it drew the outputs of --outputs and the gaussian "
                        "points; default: the file's, else 0 as there); it seeds no noise")
    p.add_argument("--mechanism-file", dest="mechanism", required=True, metavar="FILE",
                   help="the saved mechanism: .npz, .csv or .mat (with its description) or .npy (the bare matrix)")
    p.add_argument("--mechanism", dest="mechanism", action=DeprecatedAlias, new="--mechanism-file")
    p.add_argument("--true", dest="true_path", required=True,
                   help="the true records ('-' = standard input), one per line: a record's label (a grid's r2c3, a word of --dataset "
                        "text, a points file's label or p<i>), or with --by-index its 0-based index")
    p.add_argument("--by-index", action="store_true", help="--true holds record indices, not labels")
    p.add_argument("--out", required=True,
                   help="CSV written here: per true record, in order, the released output's label, index and "
                        "coordinates")
    p.add_argument("--seed", dest="noise_seed", default=None, help=not_private_seed_help("the noise", "the noise"))
    p.add_argument("--noise-seed", dest="noise_seed", action=DeprecatedAlias, new="--seed")
    add_output_arguments(p, dest="json_path")
    p.set_defaults(func=run)


def released_csv(dataset: Any, released: np.ndarray) -> str:
    """The ``--out`` file: a header, then per released record its label, index and coordinates."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    coords = dataset.coords
    d = 0 if coords is None else coords.shape[1]
    w.writerow(["label", "index", *[f"coord{c + 1}" for c in range(d)]])
    for i in released.tolist():
        w.writerow([dataset.labels[i], i, *([] if coords is None else [repr(float(x)) for x in coords[i]])])
    return buf.getvalue()


#: a described file's dataset options, as the ``args`` keys they fill when some dataset options are given
OPTION_KEYS = {"rows": "rows", "cols": "cols", "cell_km": "cell_km", "path": "points", "metric": "metric",
               "n_records": "records", "seed": "seed"}


def _dataset_and_outputs(args: argparse.Namespace, description: dict[str, Any] | None) -> tuple[Any, np.ndarray]:
    """The dataset and the outputs to release through. A described file's own dataset, loaded again;
    dataset options that are given replace the file's (the others are the file's) and the result is
    checked against it; ``--mdp-seed`` and ``--outputs`` must be the file's. For a bare ``.npy``: the
    options' dataset (grid by default) and the outputs ``--outputs`` and ``--mdp-seed`` draw."""
    from securelp.solvers.mdp.datasets import load_dataset
    from securelp.solvers.mdp.perturb import check_same_dataset, describe_dataset
    from securelp.solvers.mdp.pmo import choose_outputs

    where = f"mechanism file {args.mechanism}"
    given = [flag for flag, key in DATASET_FLAGS if getattr(args, key) is not None]
    if description is None:
        if args.dataset is None:
            args.dataset = "grid"
        logger.warning("%s holds no description of its dataset, eps, eta and outputs (a .npy never does): they are "
                       "taken from the options given (save it as .npz, .csv or .mat to keep them)", where)
        dataset = load_secret_dataset(args)
        return dataset, choose_outputs(dataset.n, args.outputs, DEFAULT_SEED if args.seed is None else args.seed)
    name, options = description["dataset"], description["dataset_options"]
    outputs = np.asarray(description["outputs"], dtype=np.int64)
    if args.seed is not None and str(args.seed) != description["seed"]:
        raise InputError(f"{where} was computed with --seed {description['seed'][:80]}, not --mdp-seed "
                         f"{str(args.seed)[:80]}; omit --mdp-seed to use the file's")
    if args.outputs is not None and args.outputs != outputs.size:
        raise InputError(f"{where} has {outputs.size} outputs, not --outputs {args.outputs}; omit --outputs to use "
                         "the file's")
    if given:
        if args.dataset in (None, name):
            args.dataset = name
            for key, value in options.items():
                if key in OPTION_KEYS and getattr(args, OPTION_KEYS[key]) is None:
                    setattr(args, OPTION_KEYS[key], value)
        dataset = load_secret_dataset(args)
        check_same_dataset(description, dataset, where, f"named by {', '.join(given)}")
    else:
        try:
            dataset = load_dataset(name, **options)
        except (InputError, TypeError, ValueError, OverflowError) as exc:  # the others: an edited description's values
            raise InputError(f"{where} was computed for {describe_dataset(name, options, description['n_records'])}, "
                             f"which cannot be loaded again ({str(exc)[:200]}); name it with the dataset options") from None
        check_same_dataset(description, dataset, where, "loaded again from its description")
    return dataset, outputs


def _parameter(given: float | None, description: dict[str, Any] | None, key: str, default: float
               ) -> tuple[float, str]:
    """``eps`` or ``eta`` and where it came from: the option, else the file's, else the dataset's default."""
    if given is not None:
        return float(given), "option"
    if description is not None:
        return float(description[key]), "file"
    return float(default), "dataset default"


def run(args: argparse.Namespace) -> int:
    """Run ``securelp perturb``; an engine's error names the flag to change (:data:`PERTURB_FLAGS`)."""
    with naming_flags(PERTURB_FLAGS):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from securelp.solvers.errors import VerificationError
    from securelp.solvers.mdp.graph import build_graph, weak_guarantees
    from securelp.solvers.mdp.perturb import load_mechanism, perturb_records, read_true_records

    check_eps_eta(args)
    check_writable(args.out, "--out")
    check_writable(args.json_path, "--json")
    if args.out == "-" and args.json_path == "-":
        raise InputError("--out and --json cannot both be standard output")
    written = [("--out", args.out), ("--json", args.json_path)]
    check_distinct(written, [("--mechanism-file", args.mechanism), ("--true", args.true_path),
                             ("--points", args.points)])
    saved = load_mechanism(args.mechanism)
    desc = saved.description
    dataset, outputs = _dataset_and_outputs(args, desc)
    if dataset.name == "points":  # the file's own points file, which the options did not name
        check_distinct(written, [("--points", args.points or (desc or {}).get("dataset_options", {}).get("path"))])
    eps, eps_from = _parameter(args.eps, desc, "eps", dataset.default_eps)
    eta, eta_from = _parameter(args.eta, desc, "eta", dataset.default_eta)
    true_records = read_true_records(args.true_path, dataset.labels, by_index=args.by_index)
    graph = build_graph(dataset.distance, eta)
    for note in weak_guarantees(graph, dataset.distance, eps):
        logger.warning("%s", note)
    if args.noise_seed is not None:
        logger.warning("--seed: the noise is reproducible, so this release is NOT private (simulations only)")
    try:
        result = perturb_records(saved.Z, true_records, dataset.distance, eps, eta, outputs, seed=args.noise_seed)
    except VerificationError as exc:
        raise VerificationError(f"mechanism file {args.mechanism} is not private at eps {eps:g} ({eps_from}), eta {eta:g} "
                                f"({eta_from}); nothing released: {exc}") from None
    text = released_csv(dataset, result.released)
    report = {
        "command": NAME,
        "dataset": dataset.name,
        "eps": eps,
        "eta": eta,
        "eps_from": eps_from,
        "eta_from": eta_from,
        "unit": dataset.unit,
        "n_records": dataset.n,
        "n_outputs": int(outputs.size),
        "n_released": int(true_records.size),
        "isolated_records": graph.n_isolated,
        "verification": result.verification.as_dict(),
        "described": desc is not None,
        "private": not result.reproducible,
        "reproducible": result.reproducible,
    }
    if args.out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    with written_together():  # the released records and the report appear together or not at all
        if args.out != "-":
            write_atomically(args.out, text, what="released records ")
        if args.json_path:
            write_json_report(args.json_path, report)
    v = report["verification"]
    n = report["n_released"]
    source = "" if eps_from == eta_from == "option" else f" ({eps_from}, {eta_from})"
    summary = (f"perturb: released {n} record{'s' if n != 1 else ''} through a verified {dataset.n} x {outputs.size} "
               f"mechanism at eps {eps:g}, eta {eta:g}{source} (row err {v['max_row_sum_error']:.1e}, mDP violation "
               f"{v['max_mdp_violation']:.1e}); wrote {'them above' if args.out == '-' else args.out}")
    if args.out == "-":  # the released records take standard output
        if not args.quiet:
            print(summary, file=sys.stderr)
    else:
        print_summary(args, summary, dest="json_path")
    return 0
