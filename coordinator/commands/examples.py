"""``securelp examples --out DIR``: write the example inputs that the README's tour and the tutorial use.

The files ship with the package (``securelp/solvers/data/examples``), so the tour runs from any empty
folder after ``pip install``: ``afiro.mps`` (netlib's afiro LP), ``words.txt`` (true records of the
``text`` dataset for ``securelp perturb``) and ``counts.csv`` (a small group-size hierarchy for
``securelp census release --data``). Each file is written atomically; files already in DIR are kept
unless ``--force``.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from securelp.coordinator.commands.common import print_summary
from securelp.solvers.errors import InputError
from securelp.solvers.files import make_output_dir, refuse_directories, write_atomically, written_together

#: the example files, in the order the tour uses them
EXAMPLE_FILES = ("afiro.mps", "words.txt", "counts.csv")


def example_bytes(name: str) -> bytes:
    """The content of the shipped example file ``name`` (one of :data:`EXAMPLE_FILES`)."""
    return resources.files("securelp.solvers").joinpath("data", "examples", name).read_bytes()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("examples", help="write the example inputs of the tour and the tutorial",
                       description="Write " + ", ".join(EXAMPLE_FILES) + " into DIR (created if missing): the "
                                   "inputs that README.md's tour and docs/tutorial.md use.")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory ('.' for the current one)")
    p.add_argument("--force", action="store_true", help="overwrite example files already in DIR")
    p.add_argument("--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    refuse_directories(out, list(EXAMPLE_FILES))
    existing = [name for name in EXAMPLE_FILES if (out / name).exists()]
    if existing and not args.force:
        raise InputError(f"{out} already holds {', '.join(existing)}; pass --force to overwrite")
    make_output_dir(out)
    with written_together():
        for name in EXAMPLE_FILES:
            write_atomically(out / name, example_bytes(name), what="example ")
    print_summary(args, f"wrote {', '.join(EXAMPLE_FILES)} to {out}")
    return 0
