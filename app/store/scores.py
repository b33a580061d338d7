"""Machine scores of takes (``take_scores``): what a metric said of a take, and exactly which
metric said it (name, version, weights' hash).

Why a table of the store and not only the metrics room's file cache: a listening test's
results, the arena board and the Playground read a take's scores wherever the take is kept
(SQLite beside its file, PostgreSQL replicas that share no disk), they are copied with the
study (``listenlab db copy``) and reported with it. A row is keyed by the take and the score's
key (:func:`evaluation.metrics.cache.score_key`: the audio's hash, the metric's name, version
and weights' hash, and the hash of the text or reference voice it read), so scoring again is
a no-op and a new model version adds rows rather than overwriting old ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.store.records import now_iso
from app.store.schema import order_by
from app.store.sql import ConstraintFailed

if TYPE_CHECKING:
    import pandas as pd

    from app.store.sql import Runner
    from evaluation.metrics.base import Item, Metric, Score

CHUNK = 500
"""Take ids per ``IN (…)`` query (SQLite allows 999 parameters by default)."""


@dataclass(frozen=True)
class TakeScore:
    """One metric's result on one take, as stored."""

    take_id: str
    score_key: str
    metric: str
    version: str
    weights_sha256: str
    values: dict[str, Any]
    seconds: float = 0.0
    created_at: str = ""


class ScoreTables:
    """The ``take_scores`` table through an engine's runner (``store.runner``)."""

    def __init__(self, runner: Runner):
        self.sql = runner

    def put(self, s: TakeScore) -> bool:
        """Store one score; False when that take already has that score (a re-run)."""
        row = [
            s.take_id,
            s.score_key,
            s.metric,
            s.version,
            s.weights_sha256,
            json.dumps(s.values, sort_keys=True),
            float(s.seconds),
            s.created_at or now_iso(),
        ]
        try:
            self.sql.execute(
                "INSERT INTO take_scores (take_id, score_key, metric, version, weights_sha256, "
                "score_values, seconds, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        except ConstraintFailed as e:
            if e.kind == "unique" or self.get(s.take_id, s.score_key) is not None:
                return False
            raise
        return True

    def get(self, take_id: str, score_key: str) -> TakeScore | None:
        cur = self.sql.execute(
            "SELECT take_id, score_key, metric, version, weights_sha256, score_values, seconds, "
            "created_at FROM take_scores WHERE take_id = ? AND score_key = ?",
            [take_id, score_key],
        )
        r = cur.fetchone()
        return None if r is None else _score(r)

    def of_takes(self, take_ids: Sequence[str]) -> list[TakeScore]:
        """Every stored score of ``take_ids``, in the table's order."""
        ids = list(dict.fromkeys(take_ids))
        out: list[TakeScore] = []
        for i in range(0, len(ids), CHUNK):
            part = ids[i : i + CHUNK]
            marks = ", ".join("?" for _ in part)
            cur = self.sql.execute(
                "SELECT take_id, score_key, metric, version, weights_sha256, score_values, "
                f"seconds, created_at FROM take_scores WHERE take_id IN ({marks}) "
                + order_by("take_scores"),
                part,
            )
            out += [_score(r) for r in cur.fetchall()]
        return out

    def frame(self, take_ids: Sequence[str]) -> pd.DataFrame:
        """``of_takes`` long: one row per take, metric and column (``take_id``, ``metric``,
        ``version``, ``weights_sha256``, ``column``, ``value``), newest score of a metric per
        take only (an older version's row stays in the table for the record)."""
        import pandas as pd

        cols = ["take_id", "metric", "version", "weights_sha256", "column", "value"]
        if "take_scores" not in self.sql.table_names():  # a store read-only below version 9
            return pd.DataFrame(columns=cols)
        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        for s in sorted(self.of_takes(take_ids), key=lambda s: s.created_at):
            for col, v in s.values.items():
                rows[(s.take_id, s.metric, col)] = {
                    "take_id": s.take_id,
                    "metric": s.metric,
                    "version": s.version,
                    "weights_sha256": s.weights_sha256,
                    "column": col,
                    "value": v,
                }
        return pd.DataFrame(list(rows.values()), columns=cols)


class StoreCache:
    """``take_scores`` as the metrics room's cache (:class:`evaluation.metrics.run.Cache`):
    an item's ``name`` is its take id."""

    def __init__(self, store: Any):
        self.table = scores_of(store)

    def get(self, metric: Metric, item: Item) -> Score | None:
        from evaluation.metrics.base import Score
        from evaluation.metrics.cache import score_key

        got = self.table.get(item.name, score_key(metric, item))
        if got is None or set(got.values) != set(metric.info.columns):
            return None
        return Score(got.metric, got.version, got.weights_sha256, got.values, got.seconds, True)

    def put(self, metric: Metric, item: Item, score: Score) -> None:
        from evaluation.metrics.cache import score_key

        key = score_key(metric, item)
        self.table.put(
            TakeScore(
                item.name,
                key,
                score.metric,
                score.version,
                score.weights_sha256,
                dict(score.values),
                score.seconds,
            )
        )


def _score(r: Sequence[Any]) -> TakeScore:
    return TakeScore(r[0], r[1], r[2], r[3], r[4], json.loads(r[5] or "{}"), r[6] or 0.0, r[7])


def scores_of(store: Any) -> ScoreTables:
    """The score table of ``store`` (SQLite's :class:`app.store.Store` or ``PgStore``)."""
    return ScoreTables(store.runner)


__all__ = ["CHUNK", "ScoreTables", "StoreCache", "TakeScore", "scores_of"]
