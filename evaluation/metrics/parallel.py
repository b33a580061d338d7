"""Scoring on several processes: one model copy and one torch thread per process.

Why processes, not threads: the models hold the GIL in their Python glue and torch's own
threads spin against each other on a small shared machine (:data:`evaluation.metrics.run.THREADS`).
Two processes with one thread each use both cores of a 2-core machine fully. Each worker
builds the metrics once (``spawn``: no fork of a process that has torch's thread pools) and
scores items one at a time; the results come back in order. The cache folder is shared: its
writes are atomic renames.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation.metrics.base import Item
from evaluation.metrics.hub import HubConfig
from evaluation.metrics.run import ItemResult, Progress, score_items

WORKERS = 1
"""Default processes. One: starting a worker costs its imports and model loads (tens of
seconds on a loaded machine), which a batch of a few minutes of audio does not win back;
``--workers 2`` pays off on long batches on an otherwise idle 2-core machine."""
MAX_WORKERS = min(2, os.cpu_count() or 1)

_STATE: dict[str, Any] = {}


def init_worker(
    names: list[str], hub: HubConfig | None, cache: str | None, threads: int | None
) -> None:
    from evaluation.metrics.registry import build
    from evaluation.metrics.run import set_threads

    set_threads(threads)
    _STATE.update(metrics=build(names, hub), cache=cache, threads=threads)


def score_in_worker(item: Item) -> ItemResult:
    return score_items([item], _STATE["metrics"], _STATE["cache"], None, _STATE["threads"])[0]


def score_parallel(
    items: Sequence[Item],
    names: list[str],
    hub: HubConfig | None,
    cache: str | Path | None,
    progress: Progress | None,
    threads: int | None,
    workers: int,
) -> list[ItemResult]:
    """:func:`score_items` over ``workers`` processes (in this process when one is enough)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from evaluation.metrics.registry import build

    workers = max(1, min(workers, len(items), MAX_WORKERS))
    if workers == 1:
        return score_items(items, build(names, hub), cache, progress, threads)
    out = []
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=init_worker,
        initargs=(names, hub, None if cache is None else str(cache), threads),
    ) as pool:
        for i, r in enumerate(pool.map(score_in_worker, items)):
            out.append(r)
            if progress is not None:
                progress(i + 1, len(items), r.name)
    return out


__all__ = ["MAX_WORKERS", "WORKERS", "score_parallel"]
