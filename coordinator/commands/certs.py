"""``securelp certs --out DIR (--parties N | --ids NAME,NAME,...)``: session CA, coordinator and party certificates."""

from __future__ import annotations

import argparse

from securelp.coordinator.certs import DEFAULT_VALID_DAYS, MAX_VALID_DAYS, write_session_certs
from securelp.coordinator.commands.common import _int_at_least, add_roster_arguments, party_ids


def valid_days(text: str) -> int:
    """``--days``: 1 to :data:`MAX_VALID_DAYS` (3,000,000 days ended in an OverflowError of the date
    arithmetic, after the output directory had been created)."""
    return _int_at_least(text, 1, f"1 to {MAX_VALID_DAYS} days", most=MAX_VALID_DAYS)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("certs", help="make a session CA, a coordinator and party certificates",
                       description="Write ca.pem, coordinator.pem/.key and <party>.pem/.key (EC P-256, keys 0600) "
                                   "into DIR. The CA key is not kept: rerun for a new session. Give each host only "
                                   "ca.pem and its own pair.")
    p.add_argument("--out", required=True, metavar="DIR", help="directory to create (must be empty unless --force)")
    add_roster_arguments(p, what="each becomes its certificate's DNS name; the ids of `securelp split --ids`")
    p.add_argument("--days", type=valid_days, default=DEFAULT_VALID_DAYS,
                   help=f"validity of every certificate in days, 1 to {MAX_VALID_DAYS} (default {DEFAULT_VALID_DAYS})")
    p.add_argument("--force", action="store_true", help="overwrite certificates in a non-empty DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    written = write_session_certs(args.out, party_ids(args, "certs"), force=args.force, days=args.days)
    print(f"wrote {written.ca} (session CA), {written.coordinator[0].name} and "
          f"{len(written.parties)} party certificates ({', '.join(written.parties)}) to {written.directory}")
    return 0
