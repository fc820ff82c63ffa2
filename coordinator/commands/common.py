"""Argument helpers shared by the subcommands: one vocabulary for every command.

The same flag means the same thing in every command (docs/reference/cli.md):

- ``--parties N`` is a count of parties; ``--ids a,b,c`` names them (``split``, ``certs``);
- ``--dataset NAME`` names the data a mechanism is built on (``mdp``, ``perturb``, ``ldp``);
- ``--mechanism NAME`` names a mechanism (``ldp``, ``census``); a mechanism FILE is
  ``--mechanism-file`` (``perturb``);
- ``--seed S`` makes a run's randomness reproducible; where that randomness protects data (masks,
  noise) its help says NOT private;
- ``--json PATH`` (optional everywhere; ``-`` is standard output) writes the machine-readable
  report, and a one-line human summary goes to standard output unless ``--quiet`` (to standard
  error when the report takes standard output).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from securelp.solvers.errors import ExitCode, InputError
from securelp.solvers.lp import SolveStatus

if TYPE_CHECKING:
    from securelp.coordinator.shaping import LinkShape

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
    not use, rather than ignore them (ignored, ``--records 10`` with ``--dataset rome`` would solve
    all 500 records). ``applies`` maps an argument's ``dest`` (default None: not given) to its flag and
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
    """An integer >= 0 (seeds of numpy's generators, counts), so that ``--data-seed -1`` is a usage
    error rather than numpy's traceback."""
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


#: ``--keepalive`` (securelp.protos.stream.DEFAULT_KEEPALIVE_S; not imported: building a parser loads no protobuf)
DEFAULT_KEEPALIVE_S = 10.0


def add_keepalive_argument(p: argparse.ArgumentParser, *, grpc_only: bool = False) -> None:
    """--keepalive S: the protocol runtime's liveness interval (docs/protocol.md, "Liveness")."""
    p.add_argument("--keepalive", type=positive_float, default=DEFAULT_KEEPALIVE_S, metavar="S",
                   help="name a peer from which nothing arrived for S seconds as unresponsive, in every phase of a "
                        f"session (heartbeats flow every S/4; default {DEFAULT_KEEPALIVE_S:g})"
                        + ("; gRPC only" if grpc_only else ""))


def add_link_argument(p: argparse.ArgumentParser) -> None:
    """--link SPEC (repeatable): shaped links between the coordinator and the parties (gRPC only)."""
    p.add_argument("--link", action="append", default=[], metavar="SPEC",
                   help="shape the links between coordinator and parties through a user-space proxy: "
                        "latency=50ms,jitter=5ms,bandwidth=10mbit,cut=2MB,down=3s (any subset; every party), or "
                        "ID:latency=200ms for one party on top of that; repeatable; gRPC only "
                        "(docs/howto/hosts.md)")


def link_shapes(args: argparse.Namespace, ids: Sequence[str]) -> dict[str, LinkShape]:
    """Each party's shape from ``--link`` (ConfigError for a malformed spec or an unknown id)."""
    from securelp.coordinator.shaping import parse_link_specs

    return parse_link_specs(args.link, list(ids)) if args.link else {}


def add_session_arguments(p: argparse.ArgumentParser, *, reveal_default: bool) -> None:
    """--bounds, --k, --reveal/--no-reveal, --secure-aggregation, --deadline, --json, --quiet."""
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
    add_output_arguments(p)


#: the help of a ``--seed`` whose randomness protects data (a mask, noise): with it the run is a
#: reproducible simulation, not a private one
NOT_PRIVATE_SEED_HELP = ("seed {what}, for reproducible simulations and tests only: NOT private (anyone who "
                         "knows the seed can recompute {it}; the report says so); default: the OS's entropy")


def not_private_seed_help(what: str, it: str = "it") -> str:
    """The help text of a ``--seed`` that seeds ``what`` (masks or noise)."""
    return NOT_PRIVATE_SEED_HELP.format(what=what, it=it)


def add_output_arguments(p: argparse.ArgumentParser, *, dest: str = "json") -> None:
    """``--json PATH`` (optional; ``-`` for standard output) and ``--quiet`` (no human summary)."""
    p.add_argument("--json", dest=dest, metavar="PATH", default=None,
                   help="write the JSON report here ('-' for standard output)")
    p.add_argument("--quiet", action="store_true",
                   help="no human-readable summary (errors are still printed on standard error)")


def summary_stream(args: argparse.Namespace, *, dest: str = "json") -> TextIO | None:
    """Where the human summary goes: standard output, standard error when the JSON report takes
    standard output, or nowhere with ``--quiet``."""
    if getattr(args, "quiet", False):
        return None
    return sys.stderr if getattr(args, dest, None) == "-" else sys.stdout


def print_summary(args: argparse.Namespace, text: str, *, dest: str = "json") -> None:
    """Print ``text`` to :func:`summary_stream` (nothing with ``--quiet``)."""
    out = summary_stream(args, dest=dest)
    if out is not None:
        print(text, file=out, flush=True)


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag, kept for one release: it stores into the new flag's ``dest`` and
    says on standard error which spelling to use instead (CHANGELOG.md lists the renames)."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated and will be removed in the next release; "
              f"use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def default_party_ids(count: int) -> list[str]:
    """The ids ``--parties N`` gives when ``--ids`` is not given: party1, ..., partyN (as ``securelp split``
    names the blocks, so ``split``, ``certs`` and ``party`` agree without ``--ids``)."""
    return [f"party{i + 1}" for i in range(count)]


def add_roster_arguments(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--parties N`` (a count) and ``--ids NAME,NAME,...`` (names) of ``split`` and ``certs``."""
    p.add_argument("--parties", type=_count_or_names, default=None, metavar="N",
                   help="number of parties (ids party1 ... partyN unless --ids names them)")
    p.add_argument("--ids", default=None, metavar="NAME,NAME,...",
                   help=f"party ids, letters, digits and inner hyphens ({what}); their number is the number of "
                        "parties (default party1, party2, ...)")


class _Names(list):  # type: ignore[type-arg]
    """``--parties a,b,c``: the old spelling of ``--ids``, kept for one release."""


def _count_or_names(text: str) -> int | _Names:
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        if "," in text or (text and not text.lstrip("-").isdigit()):
            return _Names(text.split(","))
        raise


def party_ids(args: argparse.Namespace, command: str) -> list[str]:
    """The party ids that ``--parties N`` and ``--ids`` name (one of them required; both must agree).

    Raises
    ------
    InputError
        Neither given, or ``--ids`` naming another number of parties than ``--parties``.
    """
    count, ids = args.parties, args.ids
    if isinstance(count, _Names):  # the old --parties NAME,NAME,...
        print(f"securelp {command}: warning: --parties with names is deprecated and will be removed in the next "
              f"release; use --ids {','.join(count)}", file=sys.stderr)
        if ids is not None:
            raise InputError("--parties names parties and --ids too; give the names once, with --ids")
        count, ids = None, ",".join(count)
    if ids is not None:
        names = ids.split(",")
        if count is not None and len(names) != count:
            raise InputError(f"--ids names {len(names)} parties but --parties is {count}")
        return names
    if count is None:
        raise InputError("give the number of parties (--parties N) or their ids (--ids NAME,NAME,...)")
    return default_party_ids(count)


def check_output_dir(path: str | None) -> None:
    """Refuse, before the session, an ``--out`` that is not a directory or cannot be made."""
    if path is None:
        return
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {target}: exists and is not a directory")
    parent = target.parent if not target.exists() else target
    if not parent.is_dir():
        raise InputError(f"--out {target}: its parent directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"--out {target}: {parent} is not writable")


def add_results_argument(p: argparse.ArgumentParser) -> None:
    """--out DIR: every simulated owner's x_j and the public part of the solution."""
    p.add_argument("--out", metavar="DIR", default=None,
                   help="write each party's x_j (with its column names) to DIR/<party>.csv and the public part "
                        "(status, objective, row duals y) to DIR/public.json")
