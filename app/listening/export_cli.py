"""``listenlab test export ID``: a test's export as the zip (the default) or as a Hugging
Face dataset (``--format hf``), optionally pushed to the Hub (``--push OWNER/NAME``).

Why a module of its own: ``app/listening/cli.py`` holds the other ``listenlab test``
commands; this one only lays out its flags and calls :func:`app.listening.export.export_all`
(the zip's files, figures included) or :func:`app.listening.hf_export.export_hf`. Like the
rest of ``listenlab test``, it imports only the standard library at the top.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

FORMATS = ("zip", "hf")


def run_export(args: argparse.Namespace) -> int:
    """Write the export; 1 with a clear line when pushing fails (the files stay written)."""
    from app.config import resolve_db
    from app.store import open_store
    from app.store.listening import TestStore

    if args.push and args.format != "hf":
        print("--push needs --format hf (a dataset is pushed, not a zip)", file=sys.stderr)
        return 2
    out = Path(args.out)
    store = open_store(args.db or resolve_db(), read_only=True)
    try:
        tests = TestStore(store)
        tests.require_test(args.test_id)
        if args.format == "zip":
            return write_zip(tests, args.test_id, out, args.public)
        from app.listening.hf_export import export_hf

        s = export_hf(tests, args.test_id, out, public=args.public)
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


def write_zip(tests, test_id: str, out: Path, public: bool) -> int:
    """``OUT/<test>-<time>[-public].zip``: the Results tab's zip."""
    from app.listening.export import export_zip

    out.mkdir(parents=True, exist_ok=True)
    f = out / f"{test_id}-{int(time.time())}{'-public' if public else ''}.zip"
    f.write_bytes(export_zip(tests, test_id, public=public))
    print(f"wrote {f}")
    return 0


def add_export(tsub: argparse._SubParsersAction, db_help: str) -> None:
    """``listenlab test export ID [--format zip|hf] --out DIR [--public] [--push REPO]``."""
    e = tsub.add_parser(
        "export",
        help="a test's export: the zip (default) or a Hugging Face dataset (--format hf)",
        description="Write a test's export into DIR: the zip of the Results tab (raw/, "
        "results/, figures/, study.json, methods.md), or with --format hf a Hugging Face "
        "dataset (data/*.parquet with the stimuli's audio as an Audio column, the ratings, "
        "the raters without crowd ids, the main results; README.md is the methods card).",
    )
    e.add_argument("test_id", metavar="ID")
    e.add_argument("--db", help=db_help)
    e.add_argument("--format", choices=FORMATS, default="zip", help="zip (default) or hf")
    e.add_argument("--out", metavar="DIR", required=True, help="the folder to write into")
    e.add_argument(
        "--public",
        action="store_true",
        help="leave out crowd ids, Prolific study/session ids, the codes and private settings",
    )
    e.add_argument(
        "--push",
        metavar="OWNER/NAME",
        help="with --format hf: upload the folder to this Hugging Face dataset repo (needs "
        "huggingface_hub and a token; private unless --public)",
    )
    e.set_defaults(func=run_export)


__all__ = ["FORMATS", "add_export", "run_export"]
