"""``listenlab db``: move a study between SQLite and PostgreSQL, and check a store.

Why a command: a study made locally on SQLite moves to a managed PostgreSQL (so several
replicas can serve it) and back (to analyse it offline) with ``listenlab db copy FROM TO``;
both ends are then read back and compared table by table, rows and checksums, and the command
fails unless every one matches. ``listenlab db check DB`` prints the same rows and checksums
for one store, so two stores can be compared by eye or by script.
"""

from __future__ import annotations

import argparse
import sys

HELP_DB = "a SQLite .db file or a postgresql:// URL (default: $LISTENLAB_DB)"


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "db",
        help="copy a study between SQLite and PostgreSQL (checked); row counts and checksums",
        description=__doc__.splitlines()[0],
    )
    dsub = p.add_subparsers(
        dest="db_command", required=True, metavar="{copy,check}", help="what to do"
    )
    c = dsub.add_parser(
        "copy",
        help="copy every table and take's audio into a new or empty store, then compare",
    )
    c.add_argument("source", help="the store to copy: " + HELP_DB.split(" (")[0])
    c.add_argument(
        "dest", help="the new or empty store to fill: a SQLite .db path or a postgresql:// URL"
    )
    c.set_defaults(func=_run_copy)
    k = dsub.add_parser("check", help="rows and SHA-256 checksum of every table and the audio")
    k.add_argument("db", nargs="?", default=None, help=HELP_DB)
    k.set_defaults(func=_run_check)


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _run_copy(args: argparse.Namespace) -> int:
    from app.config import local_data_dir
    from app.store import copy_store, masked

    pairs = copy_store(args.source, args.dest, local_dir=local_data_dir())
    rows = [("table", "rows", "copied", "checksum")]
    rows += [(b.table, str(b.rows), str(a.rows), b.digest[:16]) for b, a in pairs]
    _print_table(rows)
    total = sum(b.rows for b, _ in pairs)
    print(
        f"copied {total} rows of {len(pairs) - 1} tables and their audio from "
        f"{masked(str(args.source))} to {masked(str(args.dest))}: every count and checksum matches"
    )
    return 0


def _run_check(args: argparse.Namespace) -> int:
    from app.config import local_data_dir, resolve_db
    from app.store import open_store
    from app.store.copy import digests

    with open_store(args.db or resolve_db(), read_only=True, local_dir=local_data_dir()) as s:
        checks = digests(s)
        print(f"{s.location} ({s.engine}, schema version {s.schema_version})")
    _print_table(
        [("table", "rows", "checksum")] + [(c.table, str(c.rows), c.digest) for c in checks]
    )
    sys.stdout.flush()
    return 0
