"""Scoring: items through metrics, with the cache, per-item errors and progress.

Why here and not in the CLI: the CLI, the benchmark and (later) the app's background job all
need the same loop: a metric whose inputs an item lacks writes empty columns instead of
failing the batch; a failing metric on one item is reported on that item's row; each metric's
model loads once; cached scores are returned without loading any model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from backends.errors import ListenlabError
from evaluation.metrics.base import Item, Metric, Score, Value
from evaluation.metrics.cache import ScoreCache


class Cache(Protocol):
    """Where scores are kept between runs: :class:`ScoreCache` (files) or the app's store
    (:mod:`app.listening.scoring`): ``get`` a score of ``metric`` on ``item`` or None."""

    def get(self, metric: Metric, item: Item) -> Score | None: ...

    def put(self, metric: Metric, item: Item, score: Score) -> None: ...


Progress = Callable[[int, int, str], None]
"""``progress(done, total, name)`` after each item."""


@dataclass
class ItemResult:
    """One item's scores (one per metric that ran) and the reasons others did not."""

    name: str
    seconds: float
    scores: list[Score] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, Value]:
        out: dict[str, Value] = {}
        for s in self.scores:
            out.update(s.values)
        return out


def score_one(metric: Metric, item: Item, cache: Cache | None) -> Score:
    if cache is not None:
        got = cache.get(metric, item)
        if got is not None:
            return got
    t0 = time.perf_counter()
    values = metric.score(item)
    info = metric.info
    s = Score(info.name, info.version, metric.weights_sha256, values, time.perf_counter() - t0)
    if cache is not None:
        cache.put(metric, item, s)
    return s


THREADS = 1
"""torch's threads while scoring. One: on a shared 2-core machine two OpenMP threads spin
against other processes (DistillMOS on 10 P.835 clips: 10.6 CPU seconds and 42 s with two
threads, 2.9 and 21 s with one; docs/metrics.md); one thread alone is well past real time."""


def set_threads(threads: int | None) -> None:
    """torch's intra-op threads for the models (None leaves torch's own setting)."""
    import importlib.util

    if threads is not None and importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(threads)


def score_items(
    items: Sequence[Item],
    metrics: Iterable[Metric],
    cache: Cache | str | Path | None = None,
    progress: Progress | None = None,
    threads: int | None = THREADS,
) -> list[ItemResult]:
    """Every metric on every item. An item missing a metric's input (text, reference) gets
    that metric in ``skipped``; a metric that fails on an item gets its message in ``errors``
    (a missing model fails the same way on every item, so it is raised instead). ``threads``
    sets torch's thread count for the process (see :data:`THREADS`)."""
    metrics = list(metrics)
    set_threads(threads)
    if isinstance(cache, str | Path):
        cache = ScoreCache(cache)
    for m in metrics:  # a missing package or model fails before any scoring
        _ = m.weights_sha256
    out = []
    for i, item in enumerate(items):
        r = ItemResult(item.name, item.audio.seconds)
        for m in metrics:
            lacking = [n for n in sorted(m.info.needs) if not item.has(n)]
            if lacking:
                r.skipped[m.info.name] = f"no {' or '.join(lacking).replace('_', ' ')}"
                continue
            try:
                r.scores.append(score_one(m, item, cache))
            except ListenlabError as e:
                r.errors[m.info.name] = str(e)
            except Exception as e:  # a model failing on one file must not lose the others
                r.errors[m.info.name] = f"{type(e).__name__}: {e}"
        out.append(r)
        if progress is not None:
            progress(i + 1, len(items), item.name)
    return out


__all__ = ["THREADS", "Cache", "ItemResult", "Progress", "score_items", "score_one", "set_threads"]
