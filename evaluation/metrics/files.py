"""Files in, rows out: ``listenlab metrics`` in Python (:func:`score_files`).

Why its own module: turning paths, folders, a texts CSV and a reference clip into items, and
items' scores into rows with one column per score, is what the CLI and a notebook both want;
the CLI adds only argument parsing and the progress bar.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backends.errors import InvalidRequest, ListenlabError, NotFound
from evaluation.metrics.audio import AUDIO_SUFFIXES, read_file
from evaluation.metrics.base import Audio, Item, Metric, Value
from evaluation.metrics.hub import HubConfig
from evaluation.metrics.registry import ALL_INFO, build, parse
from evaluation.metrics.run import THREADS, ItemResult, Progress, score_items

MAX_TEXTS_BYTES = 16 * 1024 * 1024
"""Largest ``--texts`` CSV read."""
MAX_FILES = 100_000
"""Most audio files one call scores (a folder with more is refused before any is read)."""


def collect(paths: Iterable[str | Path]) -> list[Path]:
    """Files as named, and audio files (by suffix, recursively, sorted) inside folders."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(
                f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in AUDIO_SUFFIXES
            )
        elif p.is_file():
            out.append(p)
        else:
            raise NotFound(f"{p}: no such file or folder")
        if len(out) > MAX_FILES:
            raise InvalidRequest(f"more than {MAX_FILES} audio files; score them in parts")
    if not out:
        raise InvalidRequest("no audio files found in " + ", ".join(map(str, paths)))
    return out


def read_texts(path: str | Path) -> dict[str, str]:
    """``id,text`` rows (a header row is required) -> {id: text}; ids are file stems."""
    p = Path(path)
    if not p.is_file():
        raise NotFound(f"{p}: no such texts file")
    if p.stat().st_size > MAX_TEXTS_BYTES:
        raise InvalidRequest(f"{p} is larger than {MAX_TEXTS_BYTES // 2**20} MiB")
    try:
        rows = list(csv.DictReader(io.StringIO(p.read_text(encoding="utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error) as e:
        raise InvalidRequest(f"{p} is not a UTF-8 CSV file ({e})") from None
    if not rows or not {"id", "text"} <= set(rows[0]):
        raise InvalidRequest(f"{p} needs a header row with the columns id,text")
    return {r["id"].strip(): (r["text"] or "").strip() for r in rows if r.get("id")}


@dataclass
class Row:
    """One file's line of the CSV: ``path``, every score column, and what went wrong."""

    path: str
    seconds: float | None
    values: dict[str, Value] = field(default_factory=dict)
    error: str = ""


def columns(names: Sequence[str]) -> list[str]:
    return [c for n in names for c in ALL_INFO[n].columns]


def rows_of(paths: list[Path], results: dict[Path, ItemResult], bad: dict[Path, str]) -> list[Row]:
    rows = []
    for p in paths:
        r = results.get(p)
        if r is None:
            rows.append(Row(str(p), None, error=bad[p]))
            continue
        notes = [f"{k}: {v}" for k, v in r.errors.items()]
        notes += [f"{k}: skipped ({v})" for k, v in r.skipped.items()]
        rows.append(Row(str(p), round(r.seconds, 3), r.values(), "; ".join(notes)))
    return rows


def score_all(
    items: list[Item],
    ms: list[Metric],
    names: list[str],
    hub: HubConfig | None,
    cache_dir: str | Path | None,
    progress: Progress | None,
    threads: int | None,
    workers: int,
) -> list[ItemResult]:
    """In this process, or items not fully in the cache on ``workers`` processes (a cached
    item never waits for a worker to start)."""
    if workers <= 1 or len(items) <= 1:
        return score_items(items, ms, cache_dir, progress, threads)
    from evaluation.metrics.cache import ScoreCache
    from evaluation.metrics.parallel import score_parallel

    cache = None if cache_dir is None else ScoreCache(cache_dir)
    todo = [
        i
        for i, it in enumerate(items)
        if cache is None
        or any(cache.get(m, it) is None for m in ms if all(it.has(n) for n in m.info.needs))
    ]
    done = set(range(len(items))) - set(todo)
    out: dict[int, ItemResult] = {}
    if done:
        for i, r in zip(
            sorted(done), score_items([items[i] for i in sorted(done)], ms, cache), strict=True
        ):
            out[i] = r
    rest = score_parallel(
        [items[i] for i in todo], names, hub, cache_dir, progress, threads, workers
    )
    out.update(zip(todo, rest, strict=True))
    return [out[i] for i in range(len(items))]


def score_files(
    paths: Iterable[str | Path],
    *,
    texts: dict[str, str] | str | Path | None = None,
    reference_voice: str | Path | Audio | None = None,
    metrics: str | Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    hub: HubConfig | None = None,
    progress: Progress | None = None,
    threads: int | None = THREADS,
    workers: int = 1,
) -> tuple[list[str], list[Row]]:
    """Score audio files; returns the score columns (in order) and one :class:`Row` per file.

    ``texts`` (a dict or an ``id,text`` CSV) gives each file, by stem, its input text;
    ``reference_voice`` is the clip similarity is measured against; ``metrics`` a list or a
    comma-separated string (default: :data:`evaluation.metrics.registry.DEFAULT`, plus the
    word check with texts and speaker similarity with a reference voice); ``threads`` is
    torch's thread count (:data:`evaluation.metrics.run.THREADS`) and ``workers`` the processes
    that score (:mod:`evaluation.metrics.parallel`). A file that cannot be
    read gets a row with ``error`` set; an unknown metric, a missing file or a missing model
    raises before anything is scored."""
    files = collect(paths)
    text_of = read_texts(texts) if isinstance(texts, str | Path) else (texts or {})
    ref = reference_voice
    if ref is not None and not isinstance(ref, Audio):
        ref = read_file(ref)
    met = {"text"} if text_of else set()
    met |= {"reference_voice"} if ref is not None else set()
    names = parse(metrics, met)
    ms = build(names, hub)
    for m in ms:
        _ = m.weights_sha256  # a missing package or model fails before any file is read
    items, bad, by_item = [], {}, {}
    for f in files:
        try:
            audio = read_file(f)
        except ListenlabError as e:
            bad[f] = str(e)
            continue
        item = Item(audio, text_of.get(f.stem), ref, None, str(f))
        items.append(item)
        by_item[id(item)] = f
    results = score_all(items, ms, names, hub, cache_dir, progress, threads, workers)
    by_path = {by_item[id(it)]: r for it, r in zip(items, results, strict=True)}
    return columns(names), rows_of(files, by_path, bad)


def write_csv(path: str | Path, cols: Sequence[str], rows: Sequence[Row]) -> None:
    """``path,seconds,<score columns>,error`` (empty cells for scores that did not run)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["path", "seconds", *cols, "error"])
        for r in rows:
            cells = ["" if r.values.get(c) is None else r.values[c] for c in cols]
            w.writerow([r.path, "" if r.seconds is None else r.seconds, *cells, r.error])


__all__ = [
    "MAX_FILES",
    "MAX_TEXTS_BYTES",
    "Row",
    "collect",
    "read_texts",
    "score_files",
    "write_csv",
]
