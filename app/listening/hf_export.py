"""A listening test as a Hugging Face dataset: the stimuli with their audio as an ``Audio``
column, every rating, the raters without crowd ids, the test's main results, and its
``methods.md`` as the dataset card (``listenlab test export ID --format hf --out DIR``).

Why here and written with the arena's writer (:func:`app.arena.export.write_rows`): the
files carry the ``datasets`` features in their schema metadata, so ``datasets.load_dataset
("parquet", ...)`` and the Hub's viewer decode the audio column, while listenlab depends on
pyarrow alone (no ``datasets``, no torch); one writer for both datasets keeps their sharding
and their metadata alike. The rows are the zip's (:mod:`app.listening.export`): the same
``raw/ratings.csv``, the same ``raters`` table and the same ``methods.md``. Crowd ids,
Prolific study and session ids and the codes are never in this dataset (a dataset is made to
be shared); ``public=True`` also writes the card from the public ``study.json`` (no private
settings, no values of setting changes), as ``--public`` does for the zip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.arena.export import (
    AUDIO_FEATURE,
    STRING,
    arrow,
    clip,
    md,
    schema_of,
    write_rows,
)
from app.listening.export import PRIVATE_COLUMNS, export_parts

if TYPE_CHECKING:
    import pandas as pd

    from app.store.listening import TestStore

FLOAT = {"dtype": "float64", "_type": "Value"}
STIMULUS_COLUMNS: dict[str, tuple[str, dict[str, Any], str]] = {
    "stimulus_id": ("string", STRING, "the stimulus"),
    "take_id": (
        "string",
        STRING,
        "the stored audio of the stimulus (`<take_id>.wav` in the store)",
    ),
    "kind": ("string", STRING, "`item`, or a check clip: `anchor`, `gold`, `trap`"),
    "system_id": ("string", STRING, "the system (a check clip's pseudo system: `__anchor__`, …)"),
    "prompt_id": ("string", STRING, "the prompt"),
    "text": ("string", STRING, "what the prompt says (empty for a check clip without one)"),
    "condition": (
        "string",
        STRING,
        "`as_streamed` (recorded chunk timeline replayed), `whole`, or `live`",
    ),
    "audio": ("audio", AUDIO_FEATURE, "the stored file the raters heard (bytes and a name)"),
    "audio_sha256": ("string", STRING, "SHA-256 of the audio file (as in study.json)"),
    "gain_db": (
        "float64",
        FLOAT,
        "gain applied to reach the loudness target (0 when levels were kept)",
    ),
    "loudness_lufs": ("float64", FLOAT, "loudness before the gain (BS.1770, ears' power mean)"),
}
"""Column -> (arrow type, its ``datasets`` feature, what it holds: the card's dictionary)."""
CONFIGS = ("stimuli", "ratings", "raters", "results")
"""The dataset's configs, one per table (``data/<config>-*.parquet``)."""


@dataclass
class HfSummary:
    """What :func:`export_hf` wrote."""

    out: Path
    stimuli: int = 0
    clips: int = 0
    ratings: int = 0
    raters: int = 0
    public: bool = False
    files: list[str] = field(default_factory=list)


def stimulus_records(tests: TestStore, test_id: str):
    """Each stimulus as a row, its audio read one stimulus at a time."""
    import hashlib

    texts = tests.prompt_texts(test_id)
    for s in tests.stimuli(test_id):
        audio = clip(tests.store, s.take_id, s.stimulus_id)
        yield {
            "stimulus_id": s.stimulus_id,
            "take_id": s.take_id,
            "kind": s.kind,
            "system_id": s.system_id,
            "prompt_id": s.prompt_id,
            "text": texts.get(s.prompt_id or "", None),
            "condition": s.condition,
            "audio": audio,
            "audio_sha256": hashlib.sha256(audio["bytes"]).hexdigest() if audio else None,
            "gain_db": None if s.gain_db is None else float(s.gain_db),
            "loudness_lufs": None if s.loudness_lufs is None else float(s.loudness_lufs),
        }


def write_frame(df: pd.DataFrame, out: Path, config: str) -> str:
    """``data/<config>-00000-of-00001.parquet``: a table without audio, its types from the
    frame (``datasets`` reads them from the arrow schema)."""
    pa, pq = arrow()
    path = out / "data" / f"{config}-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = df.drop(columns=[c for c in df.columns if c in PRIVATE_COLUMNS])
    pq.write_table(pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False), path)
    return str(path.relative_to(out))


def export_hf(
    tests: TestStore, test_id: str, out: str | Path, *, public: bool = False
) -> HfSummary:
    """Write the test as a dataset folder at ``out``: ``README.md`` and ``data/``."""
    out = Path(out)
    parts = export_parts(tests, test_id, public=public)
    summary = HfSummary(out, public=public)
    written = write_rows(
        stimulus_records(tests, test_id), schema_of(STIMULUS_COLUMNS), out, "stimuli"
    )
    summary.stimuli, summary.clips, summary.files = written.rows, written.clips, written.files
    ratings = parts.ratings
    raters = parts.tables["raters"]
    summary.ratings, summary.raters = len(ratings), len(raters)
    summary.files.append(write_frame(ratings, out, "ratings"))
    summary.files.append(write_frame(raters, out, "raters"))
    kind = parts.kind
    main = parts.tables.get(kind.main_table) if kind else None
    if main is not None:
        summary.files.append(write_frame(main, out, "results"))
    card = dataset_card(summary, parts.files["methods.md"], main is not None, parts.study)
    (out / "README.md").write_text(card, encoding="utf-8")
    summary.files.append("README.md")
    return summary


def card_header(name: str, has_results: bool) -> str:
    """The card's YAML: a config per table, ``stimuli`` the default."""
    lines = [
        "---",
        f"pretty_name: {json_str(name)}",
        "task_categories:",
        "- text-to-speech",
        "tags:",
        "- tts",
        "- listening-test",
        "- listenlab",
        "configs:",
    ]
    for config in CONFIGS:
        if config == "results" and not has_results:
            continue
        lines += [
            f"- config_name: {config}",
            "  data_files:",
            "  - split: train",
            f"    path: data/{config}-*.parquet",
        ]
        if config == "stimuli":
            lines.append("  default: true")
    return "\n".join([*lines, "---", ""])


def json_str(text: str) -> str:
    """A YAML scalar that cannot break the header (JSON strings are YAML)."""
    import json

    return json.dumps(str(text))


def dataset_card(summary: HfSummary, methods: str, has_results: bool, st: dict) -> str:
    """The dataset's README.md: what it holds, how to load it, the stimuli's columns, then
    the test's ``methods.md`` (its methods and results card) as it is in the zip."""
    t = st["test"]
    lines = [
        card_header(f"listenlab listening test {t['test_id']}: {t['name']}", has_results),
        f"# Listening test {md(t['test_id'])}: {md(t['name'])} ({md(t['kind'])})",
        "",
        f"- **{summary.stimuli} stimuli** ({summary.clips} with audio), **{summary.ratings} "
        f"ratings** from **{summary.raters} raters**.",
        "- Configs: `stimuli` (each stimulus with its audio as heard), `ratings` (every "
        "rating: raw/ratings.csv of the zip), `raters` (screening outcomes and exclusions; "
        "no crowd, study or session ids, no codes)"
        + (", `results` (the test's main results table)." if has_results else "."),
        "- A rating joins its stimulus by `system_id`, `prompt_id` and `condition` (a check "
        "clip's `system_id` is its pseudo system, as in the stimuli).",
    ]
    if summary.public:
        lines.append("- Public export: the card is written from the public study.json.")
    lines += [
        "",
        "## Stimuli columns",
        "",
        "| column | type | what it holds |",
        "| --- | --- | --- |",
    ]
    lines += [f"| `{k}` | {ty} | {what} |" for k, (ty, _, what) in STIMULUS_COLUMNS.items()]
    lines += [
        "",
        "## Loading",
        "",
        "```python",
        "import datasets",
        'stimuli = datasets.load_dataset("parquet", data_files="data/stimuli-*.parquet")["train"]',
        'ratings = datasets.load_dataset("parquet", data_files="data/ratings-*.parquet")["train"]',
        "```",
        "",
        "Or with pyarrow alone: `pyarrow.parquet.read_table(path)`; each audio cell is a "
        "struct of `bytes` (the file) and `path` (its name).",
        "",
        *(f"#{x}" if x.startswith("#") else x for x in methods.splitlines()),
    ]
    return "\n".join(lines)


__all__ = ["CONFIGS", "STIMULUS_COLUMNS", "HfSummary", "export_hf", "stimulus_records"]
