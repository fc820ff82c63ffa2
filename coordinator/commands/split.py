"""``securelp split FILE.mps (--parties N | --ids a,b,c) [--split n1,n2,n3] --out DIR``: one private block per party.

Writes ``DIR/public.npz`` (row bounds, sense, objective constant, and the roster: party ids,
each block's column count and a random split id -- what every participant may know) and
``DIR/<party>.npz`` (A_.j, c_j and the column bounds of party j's contiguous column block,
plus the split id), each atomically. Hand each party only its own file. ``public`` is a
reserved party id (its block would be ``public.npz``), as ``coordinator`` and ``ca`` are.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from securelp.coordinator.certs import validate_party_ids
from securelp.coordinator.commands.common import add_roster_arguments, party_ids
from securelp.solvers.errors import InputError
from securelp.solvers.files import make_output_dir, refuse_directories, written_together
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import parse_split, save_block, save_public, split_columns

PUBLIC_FILE = "public.npz"
#: party ids that split refuses besides those ``securelp certs`` reserves (case-insensitively), and
#: why: a party named ``public`` would have its private block written over ``public.npz``
SPLIT_RESERVED_IDS = {Path(PUBLIC_FILE).stem: f"its block would overwrite {PUBLIC_FILE}"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("split", help="split an MPS file into one private block per party",
                       description="Split FILE.mps by columns into DIR/public.npz (public row data) and one "
                                   "DIR/<party>.npz per party (contiguous columns, or --split).")
    p.add_argument("file", metavar="FILE.mps")
    add_roster_arguments(p, what="the same ids go to `securelp certs --ids`")
    p.add_argument("--split", default=None, metavar="n1,n2,...", help="columns per party (default: near-equal parts)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    p.add_argument("--force", action="store_true", help="overwrite block files already in DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ids = validate_party_ids(party_ids(args, "split"), SPLIT_RESERVED_IDS)
    lp = read_mps(args.file)
    sizes = parse_split(args.split, lp.n_cols, len(ids))
    public, blocks = split_columns(lp, sizes, ids=ids)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    targets = [out / PUBLIC_FILE] + [out / f"{b.party_id}.npz" for b in blocks]
    refuse_directories(out, [t.name for t in targets])
    existing = [t.name for t in targets if t.exists()]
    if existing and not args.force:
        raise InputError(f"{out} already holds {', '.join(existing)}; pass --force to overwrite")
    make_output_dir(out)
    with written_together():  # the public rows and every party's block, or none of them
        save_public(public, out / PUBLIC_FILE)
        for block in blocks:
            save_block(block, out / f"{block.party_id}.npz")
    print(f"{lp.name or args.file}: {lp.n_rows} rows, {lp.n_cols} columns -> {out / PUBLIC_FILE} and "
          + ", ".join(f"{b.party_id}.npz ({b.n_cols} columns)" for b in blocks))
    return 0
