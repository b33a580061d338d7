"""Scores kept on disk, keyed by the audio's hash and the metric's version.

Why a cache: a listening test's stimuli, a re-run of the CLI on a folder, or the same take
scored for the arena and for a test would otherwise be scored again (seconds per clip). The
key is the audio's SHA-256 (its decoded samples), the metric's name, version and weights' hash,
and the hashes of what else the metric read (the text, the reference voice, the reference
take), so a changed text or a new model version never returns an old score.

Where it lives is the caller's choice (a folder it passes in): the CLI's ``--cache`` folder
today, the app's store later. One small JSON file per score, written to a temporary name and
renamed, so two processes sharing the folder never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from evaluation.metrics.base import Item, Metric, Score


def score_key(metric: Metric, item: Item) -> str:
    """The cache key of ``metric`` on ``item`` (see the module docstring)."""
    info = metric.info
    parts = [info.name, info.version, metric.weights_sha256, item.audio.sha256]
    for need in sorted(info.needs):
        value = getattr(item, need)
        if isinstance(value, str):
            parts.append(hashlib.sha256(value.encode()).hexdigest())
        else:
            parts.append(value.sha256)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class ScoreCache:
    """Scores in ``folder`` (created on first write)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).expanduser()

    def path(self, metric: Metric, key: str) -> Path:
        info = metric.info
        return self.folder / f"{info.name}-{info.version}" / key[:2] / f"{key}.json"

    def get(self, metric: Metric, item: Item) -> Score | None:
        p = self.path(metric, score_key(metric, item))
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(d, dict) or set(d.get("values", {})) != set(metric.info.columns):
            return None
        return Score(
            d["metric"], d["version"], d["weights_sha256"], d["values"], d["seconds"], True
        )

    def put(self, metric: Metric, item: Item, score: Score) -> None:
        p = self.path(metric, score_key(metric, item))
        p.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "metric": score.metric,
            "version": score.version,
            "weights_sha256": score.weights_sha256,
            "values": score.values,
            "seconds": score.seconds,
        }
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(body, f)
        os.replace(tmp, p)


__all__ = ["ScoreCache", "score_key"]
