"""``listenlab test export ID``'s formats: the zip (the default, written by
:mod:`app.cli.remote`, locally or from ``--server``) or a Hugging Face dataset
(``--format hf --out DIR``), optionally pushed to the Hub (``--push OWNER/NAME``).

Why a module of its own: the ``export`` command is laid out in :mod:`app.cli.remote` (it
fetches the zip from a server too); its dataset flags and the dataset's run live here, beside
:mod:`app.listening.hf_export`. Like the rest of ``listenlab test``, it imports only the
standard library at the top.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FORMATS = ("zip", "hf")


def export_flags(ex: argparse.ArgumentParser) -> None:
    """``--format zip|hf``, ``--public`` and ``--push OWNER/NAME`` on ``test export``."""
    ex.add_argument(
        "--format",
        choices=FORMATS,
        default="zip",
        help="zip (default: raw/, results/, figures/, study.json, methods.md) or hf (a "
        "Hugging Face dataset folder: data/*.parquet with the stimuli's audio as an Audio "
        "column, the ratings, the raters without crowd ids, the main results; README.md is "
        "the methods card)",
    )
    ex.add_argument(
        "--public",
        action="store_true",
        help="leave out crowd ids, Prolific study/session ids, the codes and private settings",
    )
    ex.add_argument(
        "--push",
        metavar="OWNER/NAME",
        help="with --format hf: upload the folder to this Hugging Face dataset repo (needs "
        "huggingface_hub and a token; the repo is private unless --public)",
    )


def run_hf(args: argparse.Namespace) -> int:
    """Write the dataset at ``--out``; 1 with a clear line when pushing fails (the folder
    stays written), 2 when the flags do not fit."""
    from app.config import resolve_db
    from app.store import open_store
    from app.store.listening import TestStore

    if args.format != "hf":
        print("--push needs --format hf (a dataset is pushed, not a zip)", file=sys.stderr)
        return 2
    if getattr(args, "server", None) or not args.out:
        print(
            "--format hf writes a folder from a local store: give --out DIR (and --db, "
            "not --server)",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    store = open_store(args.db or resolve_db(), read_only=True)
    try:
        from app.listening.hf_export import export_hf

        s = export_hf(TestStore(store), args.test_id, out, public=args.public)
    finally:
        store.close()
    print(
        f"wrote {s.stimuli} stimuli ({s.clips} clips), {s.ratings} ratings and {s.raters} "
        f"raters to {out} ({', '.join(s.files)})"
    )
    if args.push:
        from app.arena.export import PushFailed, push

        try:
            url = push(out, args.push, private=not args.public)
        except PushFailed as e:
            print(str(e), file=sys.stderr)
            return 1
        print(f"pushed to {url}")
    return 0


__all__ = ["FORMATS", "export_flags", "run_hf"]
