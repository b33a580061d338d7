"""The arena's votes as a Hugging Face dataset: parquet files with both clips of each vote as
``Audio`` columns, the prompt and the outcome, the board beside them, and a dataset card.

Why parquet written with pyarrow alone: ``datasets`` reads the features it should decode
from the file's own schema metadata (the ``huggingface`` key), so a file written here loads
with ``datasets.load_dataset("parquet", ...)`` and shows its players on the Hub, without
listenlab depending on ``datasets`` (or torch). The rows are what TTS Arena publishes of its
votes (the two clips, the text, which won), with what listenlab knows beside: the voices,
the language, whether the vote counted (first use of its text by its voter) and whether its
voter is excluded now. Voters appear only as a number in order of their first vote (and, in
a non-public export, the keyed hash the admin sees); owner cookies and networks never.

``public=True`` (``--public``), as for a listening test's export: nothing an admin alone may
see (the voter hashes), and no vote on a typed text, which a visitor may have filled with
something not theirs to publish (both clips speak it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.arena.battles import Arena
from backends.errors import BackendError, InvalidRequest, Unsupported
from evaluation.arena import leaderboard

if TYPE_CHECKING:
    import pandas as pd

SHARD_BYTES = 256 * 1024 * 1024
"""Audio bytes per parquet file (the Hub's viewer prefers files of a few hundred MB)."""
ROW_GROUP = 64
"""Votes per row group: the writer holds at most this many votes' clips in memory."""
AUDIO_FEATURE = {"_type": "Audio"}
STRING = {"dtype": "string", "_type": "Value"}
VOTE_COLUMNS: dict[str, tuple[str, dict[str, Any], str]] = {
    "battle_id": ("string", STRING, "the battle's id"),
    "text": ("string", STRING, "what both systems spoke"),
    "text_source": ("string", STRING, "`prompt` (a bundled or configured prompt) or `typed`"),
    "language": ("string", STRING, "the text's language (primary subtag)"),
    "system_a": ("string", STRING, "the system on side A (played first)"),
    "system_b": ("string", STRING, "the system on side B"),
    "voice_a": ("string", STRING, "side A's voice (empty: the system's default)"),
    "voice_b": ("string", STRING, "side B's voice"),
    "audio_a": ("audio", AUDIO_FEATURE, "side A's clip as the voter heard it accepted (native)"),
    "audio_b": ("audio", AUDIO_FEATURE, "side B's clip"),
    "choice": ("string", STRING, "`a`, `b`, `tie` or `both_bad`"),
    "winner": ("string", STRING, "the system that won (empty for a tie or both bad)"),
    "loser": ("string", STRING, "the system that lost (empty for a tie or both bad)"),
    "decision_ms": ("float64", {"dtype": "float64", "_type": "Value"}, "ms from battle to vote"),
    "voted_at": ("string", STRING, "when the vote was cast (UTC, ISO 8601)"),
    "counted": ("bool", {"dtype": "bool", "_type": "Value"}, "first use of the text by the voter"),
    "uncounted": ("string", STRING, "why not counted (`repeat_text`)"),
    "excluded": ("bool", {"dtype": "bool", "_type": "Value"}, "the voter is excluded now"),
    "voter": ("int64", {"dtype": "int64", "_type": "Value"}, "the voter, numbered by first vote"),
}
"""Column -> (arrow type, its ``datasets`` feature, what it holds: the card's dictionary)."""
PRIVATE_COLUMNS = {"voter_hash": ("string", STRING, "the voter's keyed hash (not in --public)")}


class ExportError(Unsupported):
    """The export cannot be written here (pyarrow missing)."""


class PushFailed(BackendError):
    """The dataset was written but could not be pushed to the Hub."""


@dataclass
class ExportSummary:
    out: Path
    votes: int = 0
    clips: int = 0
    files: list[str] = field(default_factory=list)
    left_out_typed: int = 0
    public: bool = False


def arrow():
    """pyarrow and its parquet writer, or a clear error (``pip install listenlab[hf]``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "the Hugging Face export needs pyarrow: pip install 'listenlab[hf]'"
        ) from None
    return pa, pq


def schema(public: bool):
    """The votes' arrow schema, carrying the ``datasets`` features in its metadata."""
    pa, _ = arrow()
    audio = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    cols = {**VOTE_COLUMNS, **({} if public else PRIVATE_COLUMNS)}
    types = {"string": pa.string(), "float64": pa.float64(), "bool": pa.bool_()}
    types |= {"int64": pa.int64(), "audio": audio}
    fields = [pa.field(name, types[t]) for name, (t, _, _) in cols.items()]
    features = {name: feat for name, (_, feat, _) in cols.items()}
    meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    return pa.schema(fields, metadata=meta)


def clip(store: Any, take_id: Any, name: str) -> dict[str, Any] | None:
    """A take's stored audio as an ``Audio`` cell (bytes and a file name), or None."""
    if not isinstance(take_id, str) or not take_id:
        return None
    try:
        path = store.audio_path(take_id)
    except Exception:  # the take is gone (deleted, or never stored): the cell stays empty
        return None
    if not path.is_file():
        return None
    return {"bytes": path.read_bytes(), "path": f"{name}{path.suffix}"}


def vote_records(store: Any, votes: pd.DataFrame, public: bool):
    """Each vote as a row of the dataset (clips read one vote at a time)."""
    first: dict[str, int] = {}
    for raw in votes.to_dict("records"):
        r = {k: None if isinstance(v, float) and v != v else v for k, v in raw.items()}
        number = first.setdefault(str(r["voter"]), len(first) + 1)
        decided = r["choice"] in ("a", "b")
        win, lose = (
            (r["system_a"], r["system_b"]) if r["choice"] == "a" else (r["system_b"], r["system_a"])
        )
        row = {
            **{k: r.get(k) for k in ("battle_id", "text", "text_source", "language")},
            **{k: r.get(k) for k in ("system_a", "system_b", "voice_a", "voice_b", "choice")},
            "audio_a": clip(store, r["take_a"], f"{r['battle_id']}_a"),
            "audio_b": clip(store, r["take_b"], f"{r['battle_id']}_b"),
            "winner": win if decided else None,
            "loser": lose if decided else None,
            "decision_ms": None if r["decision_ms"] is None else float(r["decision_ms"]),
            "voted_at": r["created_at"],
            "counted": bool(r["counted"]),
            "uncounted": r["uncounted"],
            "excluded": bool(r["excluded"]),
            "voter": number,
        }
        if not public:
            row["voter_hash"] = r["voter"]
        yield row


def write_votes(store: Any, votes: pd.DataFrame, out: Path, public: bool) -> ExportSummary:
    """``data/votes-*.parquet`` in row groups of :data:`ROW_GROUP`, a new file past
    :data:`SHARD_BYTES` of audio; the files are numbered ``-NNNNN-of-NNNNN`` at the end."""
    pa, pq = arrow()
    sch = schema(public)
    summary = ExportSummary(out, public=public)
    (out / "data").mkdir(parents=True, exist_ok=True)
    parts: list[Path] = []
    writer, size, batch = None, 0, []

    def flush() -> None:
        nonlocal writer
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=sch))
            batch.clear()

    for row in vote_records(store, votes, public):
        if writer is None:
            parts.append(out / "data" / f"votes-part{len(parts):05d}.parquet")
            writer, size = pq.ParquetWriter(parts[-1], sch), 0
        batch.append(row)
        summary.votes += 1
        for side in ("audio_a", "audio_b"):
            if row[side] is not None:
                summary.clips += 1
                size += len(row[side]["bytes"])
        if len(batch) >= ROW_GROUP or size >= SHARD_BYTES:
            flush()
        if size >= SHARD_BYTES:
            writer.close()
            writer = None
    if writer is None and not parts:  # no vote at all: one empty file keeps the schema
        parts.append(out / "data" / "votes-part00000.parquet")
        writer = pq.ParquetWriter(parts[-1], sch)
    if writer is not None:
        flush()
        writer.close()
    for k, p in enumerate(parts):
        final = p.with_name(f"votes-{k:05d}-of-{len(parts):05d}.parquet")
        p.replace(final)
        summary.files.append(str(final.relative_to(out)))
    return summary


def write_board(board: dict[str, Any], out: Path) -> str:
    """``data/leaderboard.parquet``: the board of the counted votes (listed and preliminary)."""
    pa, pq = arrow()
    rows = board["listed"] + board["preliminary"]
    table = pa.Table.from_pylist(rows) if rows else pa.table({"system": pa.array([], pa.string())})
    path = out / "data" / "leaderboard.parquet"
    pq.write_table(table, path)
    return str(path.relative_to(out))


def export_hf(
    store: Any, out: str | Path, *, public: bool = False, min_votes: int = 20
) -> ExportSummary:
    """Write the arena's votes and board as a dataset folder at ``out`` (README.md, data/)."""
    out = Path(out)
    arena = Arena(store)
    votes = arena.rows.export_frame()
    left_out = 0
    if public:
        typed = votes["text_source"] == "typed"
        left_out = int(typed.sum())
        votes = votes[~typed].reset_index(drop=True)
    summary = write_votes(store, votes, out, public)
    summary.left_out_typed = left_out
    every = arena.votes_frame()
    counted = every[(every["counted"] == 1) & (every["excluded"] == 0)]
    if public:
        counted = counted[counted["text_source"] != "typed"]
    board = leaderboard(counted, min_votes=min_votes, n_boot=200)
    summary.files.append(write_board(board, out))
    (out / "README.md").write_text(dataset_card(summary, board, votes), encoding="utf-8")
    summary.files.append("README.md")
    return summary


CARD_HEADER = """---
pretty_name: listenlab arena votes
task_categories:
- text-to-speech
tags:
- tts
- arena
- preference
- listenlab
configs:
- config_name: votes
  data_files:
  - split: train
    path: data/votes-*.parquet
  default: true
- config_name: leaderboard
  data_files:
  - split: train
    path: data/leaderboard.parquet
---
"""


def card_table(board: dict[str, Any]) -> list[str]:
    rows = board["listed"] + board["preliminary"]
    out = ["| rank | system | rating | 95 % interval | votes | wins | losses | ties | both bad |"]
    out.append("| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        rank = r["rank"] if r["listed"] else "prelim."
        out.append(
            f"| {rank} | {md(r['system'])} | {r['rating']} | {r['ci_low']} – {r['ci_high']} | "
            f"{r['votes']} | {r['wins']} | {r['losses']} | {r['ties']} | {r['both_bad']} |"
        )
    return out


def md(value: Any) -> str:
    """A value in a Markdown table cell: pipes and line breaks cannot break the table."""
    return " ".join(str(value).replace("|", "\\|").split())


def dataset_card(summary: ExportSummary, board: dict[str, Any], votes: pd.DataFrame) -> str:
    """The dataset's README.md: what it holds, its numbers, its columns and the board."""
    cols = {**VOTE_COLUMNS, **({} if summary.public else PRIVATE_COLUMNS)}
    systems = sorted(set(votes["system_a"]) | set(votes["system_b"])) if len(votes) else []
    n_counted = int(((votes["counted"] == 1) & (votes["excluded"] == 0)).sum()) if len(votes) else 0
    lines = [
        CARD_HEADER,
        "# listenlab arena votes",
        "",
        "Blind pairwise votes from a listenlab arena: two systems speak "
        "the same text, the voter hears both to the end (the server checks it) and picks the "
        "better one, a tie, or both bad. Each row is one vote with both clips as heard "
        "(`audio_a`, `audio_b`, the stored native audio), the text and the outcome.",
        "",
        f"- **{summary.votes} votes** on {len(systems)} systems, {summary.clips} clips; "
        f"{n_counted} count on the board.",
        "- A vote counts when it is its voter's first vote on its text (`counted`; a repeat "
        "is kept with `uncounted = repeat_text`) and its voter is not excluded by the admin "
        "(`excluded`: exclusions are reversible and recorded with who, when and why).",
        "- Voters are numbered in order of their first vote (`voter`); no cookie, network "
        "or crowd id is in the dataset.",
    ]
    if summary.public:
        lines.append(
            f"- Public export: no voter hashes, and the {summary.left_out_typed} votes on "
            "texts visitors typed are left out (their clips speak what they typed)."
        )
    lines.append(f"- Systems: {', '.join(md(s) for s in systems) or 'none'}.")
    lines += ["", "## Columns", "", "| column | type | what it holds |", "| --- | --- | --- |"]
    lines += [f"| `{k}` | {t} | {what} |" for k, (t, _, what) in cols.items()]
    lines += [
        "",
        "## The board of the counted votes (`leaderboard` config)",
        "",
        f"{board['method']}. Rank: {board['rank']}. Listing: {board['listing']}. "
        f"Ties: {board['ties']}.",
        "",
        *card_table(board),
        "",
        "## Loading",
        "",
        "```python",
        "import datasets",
        'votes = datasets.load_dataset("parquet", data_files="data/votes-*.parquet")["train"]',
        "```",
        "",
        "Or with pyarrow alone: `pyarrow.parquet.read_table(path)`; each audio cell is a "
        "struct of `bytes` (the file) and `path` (its name).",
        "",
        "If you use these votes, cite listenlab (CITATION.cff in its repository) and the "
        "arena that collected them.",
        "",
    ]
    return "\n".join(lines)


def push(out: str | Path, repo: str, *, private: bool) -> str:
    """Upload the folder to the dataset repo ``repo`` (created if missing; ``private``
    unless the export is public); needs ``huggingface_hub`` and a token."""
    try:
        from huggingface_hub import HfApi, get_token
    except ImportError:
        raise PushFailed("--push needs huggingface_hub: pip install huggingface_hub") from None
    if not repo or repo.count("/") != 1:
        raise InvalidRequest("--push takes a dataset repo as OWNER/NAME")
    if not get_token():
        raise PushFailed("--push needs a Hugging Face token: set HF_TOKEN or run `hf auth login`")
    api = HfApi()
    try:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        info = api.upload_folder(folder_path=str(out), repo_id=repo, repo_type="dataset")
    except Exception as e:  # offline, refused, unknown repo: the folder stays written
        raise PushFailed(
            f"could not push to the Hugging Face dataset {repo}: {type(e).__name__}: "
            f"{str(e)[:300]} (the dataset is written at {out})"
        ) from None
    return str(getattr(info, "commit_url", None) or f"https://huggingface.co/datasets/{repo}")


__all__ = [
    "PRIVATE_COLUMNS",
    "ROW_GROUP",
    "SHARD_BYTES",
    "VOTE_COLUMNS",
    "ExportError",
    "ExportSummary",
    "PushFailed",
    "dataset_card",
    "export_hf",
    "push",
    "schema",
    "write_votes",
]
