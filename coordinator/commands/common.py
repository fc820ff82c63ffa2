"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import math

from securelp.solvers.errors import ExitCode, InputError
from securelp.solvers.lp import SolveStatus

STATUS_EXIT = {
    SolveStatus.OPTIMAL: ExitCode.OK,
    SolveStatus.INFEASIBLE: ExitCode.INFEASIBLE,
    SolveStatus.UNBOUNDED: ExitCode.UNBOUNDED,
    SolveStatus.INFEASIBLE_OR_UNBOUNDED: ExitCode.INFEASIBLE,
    SolveStatus.LIMIT: ExitCode.SOLVER,
    SolveStatus.ERROR: ExitCode.SOLVER,
}


#: the grid options of ``mdp`` and ``ldp`` (argparse defaults None, so that another dataset or
#: domain can tell them given) and the values a grid takes when they are not
GRID_DEFAULTS = {"rows": 10, "cols": 10, "cell_km": 1.0}


def grid_size(args: argparse.Namespace) -> tuple[int, int, float]:
    """``--rows``, ``--cols`` and ``--cell-km`` as given, else :data:`GRID_DEFAULTS`."""
    rows, cols, cell_km = (GRID_DEFAULTS[k] if getattr(args, k) is None else getattr(args, k) for k in GRID_DEFAULTS)
    return int(rows), int(cols), float(cell_km)


def refuse_inapplicable(args: argparse.Namespace, option: str, choice: str,
                        applies: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    """Refuse options given on the command line that the chosen ``option`` value ``choice`` does
    not use, rather than ignore them (``--records 10`` with ``--dataset rome`` used to solve all
    500 records). ``applies`` maps an argument's ``dest`` (default None: not given) to its flag and
    the choices it applies to.

    Raises
    ------
    InputError
        Naming each such option and the choices it is for.
    """
    unused = [f"{flag} (for {option} {', '.join(choices)})" for dest, (flag, choices) in applies.items()
              if getattr(args, dest, None) is not None and choice not in choices]
    if unused:
        raise InputError(f"{option} {choice} does not use {'; '.join(unused)}")


def _int_at_least(text: str, least: int, what: str, most: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < least or (most is not None and value > most):
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds of numpy's generators, counts): ``--data-seed -1`` and
    ``--synthetic-seed -1`` ended in numpy's traceback until stop 41."""
    return _int_at_least(text, 0, "a non-negative integer")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def add_secure_aggregation_argument(p: argparse.ArgumentParser) -> None:
    """--secure-aggregation (``SessionConfig.secure_aggregation``)."""
    p.add_argument("--secure-aggregation", action="store_true",
                   help="sum the parties' dense products under secure aggregation: the coordinator receives "
                        "pairwise-masked shares in Z_2^64, never one party's product (needs two or more parties "
                        "with free columns; docs/protocol.md)")


def add_session_arguments(p: argparse.ArgumentParser, *, reveal_default: bool) -> None:
    """--bounds, --k, --reveal/--no-reveal, --secure-aggregation, --deadline, --json."""
    p.add_argument("--bounds", choices=["monomial", "rows"], default="monomial",
                   help="how column bounds are protected (default: monomial; rows reveals the masks)")
    p.add_argument("--k", type=positive_int, default=None,
                   help="dimension of the dense mask (default: the number of dense-masked columns n plus 10, "
                        "which keeps the stacked masks well conditioned; must be >= n)")
    p.add_argument("--reveal", dest="reveal", action=argparse.BooleanOptionalAction, default=reveal_default,
                   help="ask the parties for their decoded x_j (assembled solution, feasibility check); "
                        "--no-reveal: they keep it (default: "
                        f"{'--reveal' if reveal_default else '--no-reveal, as a party keeps x_j unless started with --reveal'})")
    add_secure_aggregation_argument(p)
    p.add_argument("--deadline", type=positive_float, default=120.0, metavar="S",
                   help="deadline in seconds for every call to a party (default 120)")
    p.add_argument("--json", metavar="PATH", default=None, help="write the JSON report here ('-' for stdout)")
