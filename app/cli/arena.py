"""``listenlab arena``: the arena's data from the command line.

``listenlab arena export --format hf --out DIR`` writes the votes as a Hugging Face dataset
(parquet with both clips as ``Audio`` columns, the board, a dataset card;
:mod:`app.arena.export`), ``--format csv`` the votes and the board as CSV; ``--public``
leaves out what only the admin may see and the votes on typed texts; ``--push OWNER/NAME``
uploads the folder to a dataset repo when ``huggingface_hub`` and a token are there.
The store is opened read-only, so a live arena keeps running.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def run_export(args: argparse.Namespace) -> int:
    from app.arena.battles import Arena
    from app.config import arena_settings, resolve_db
    from app.store import open_store

    out = Path(args.out)
    store = open_store(args.db or resolve_db(), read_only=True)
    try:
        setting = Arena(store).setting("min_votes")
        min_votes = arena_settings().min_votes if setting is None else int(setting)
        if args.format == "csv":
            return write_csv(store, out, args.public, min_votes)
        from app.arena.export import export_hf, push

        s = export_hf(store, out, public=args.public, min_votes=min_votes)
    finally:
        store.close()
    left = f"; {s.left_out_typed} votes on typed texts left out" if s.public else ""
    print(f"wrote {s.votes} votes ({s.clips} clips) to {out}: {', '.join(s.files)}{left}")
    if args.push:
        url = push(out, args.push, private=not args.public)
        print(f"pushed to {url}")
    return 0


def write_csv(store, out: Path, public: bool, min_votes: int) -> int:
    """``votes.csv`` (no voter hashes with ``--public``) and ``leaderboard.csv``."""
    import pandas as pd

    from app.arena.battles import Arena
    from evaluation.arena import leaderboard
    from evaluation.report import safe_csv

    arena = Arena(store)
    votes = arena.votes_frame()
    if public:
        votes = votes[votes["text_source"] != "typed"].drop(columns=["voter"])
    counted = votes[(votes["counted"] == 1) & (votes["excluded"] == 0)]
    board = leaderboard(counted, min_votes=min_votes, n_boot=200)
    out.mkdir(parents=True, exist_ok=True)
    (out / "votes.csv").write_text(safe_csv(votes), encoding="utf-8")
    rows = pd.DataFrame(board["listed"] + board["preliminary"])
    (out / "leaderboard.csv").write_text(safe_csv(rows), encoding="utf-8")
    print(f"wrote {len(votes)} votes and the board to {out}: votes.csv, leaderboard.csv")
    return 0


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "arena",
        help="the arena's votes: export them as a Hugging Face dataset (or CSV)",
        description="The arena's data. `arena export --format hf --out DIR` writes the votes "
        "(both clips as Audio columns, the text, the outcome), the board and a dataset card.",
    )
    asub = p.add_subparsers(dest="command_arena", required=True, help="what to do")
    ex = asub.add_parser(
        "export",
        help="write the votes and the board as a Hugging Face dataset or CSV files",
        description="Write every vote (both clips, the text, the outcome, whether it counted) "
        "and the board of the counted votes. The store is opened read-only.",
    )
    ex.add_argument("--db", help="the store (default: $LISTENLAB_DB, as `listenlab serve`)")
    ex.add_argument(
        "--format",
        choices=("hf", "csv"),
        default="hf",
        help="hf: parquet files with Audio columns and a dataset card (default); csv: "
        "votes.csv and leaderboard.csv",
    )
    ex.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    ex.add_argument(
        "--public",
        action="store_true",
        help="for publication: no voter hashes, and no votes on texts visitors typed",
    )
    ex.add_argument(
        "--push",
        metavar="OWNER/NAME",
        help="also upload the folder to this Hugging Face dataset repo (private unless "
        "--public; needs huggingface_hub and a token: HF_TOKEN or `hf auth login`)",
    )
    ex.set_defaults(func=run_export)


__all__ = ["add_cli", "run_export", "write_csv"]
