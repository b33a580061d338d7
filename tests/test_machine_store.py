"""``take_scores`` on both engines (a real SQLite file and a throwaway PostgreSQL server): a
score is stored once per take and key, read back with its metric's name, version and weights'
hash, the newest version is what the long frame shows, the metrics room's cache interface
reads it, and ``listenlab db copy`` carries the rows between engines."""

from __future__ import annotations

import numpy as np
import pytest

from app.store import System, open_store
from app.store.engines import copy_store
from app.store.scores import StoreCache, TakeScore, scores_of
from backends.base import SpeechRequest
from evaluation.metrics import Item, from_samples
from evaluation.metrics.base import Metric, MetricInfo
from evaluation.takes import ChunkRecord, Take
from tests.support.postgres import db_target_fixture, pg_cluster_fixture, pg_url_fixture  # noqa: F401

H = "ab" * 32


def take(store) -> str:
    store.add_system(System("s1", backend="piper"))
    pcm = (np.sin(np.arange(24000) / 9) * 8000).astype(np.int16)[:, None]
    t = Take(
        request=SpeechRequest(text="Hello there."),
        backend="piper",
        sample_rate=24000,
        channels=1,
        chunks=[ChunkRecord(0, 10.0, 0, 24000)],
        audio=pcm,
        total_ms=10.0,
    )
    return store.save_take(t, system_id="s1")


class Loud(Metric):
    """A metric of the contract's shape (no model): the samples' peak."""

    info = MetricInfo("loud", "1-1", "bundled", ("peak",))

    def weights(self):
        return []

    def score(self, item):
        return {"peak": float(np.abs(item.audio.samples).max())}


def test_scores_round_trip_once_per_key_on_each_engine(db_target, tmp_path):
    with open_store(db_target, local_dir=tmp_path) as store:
        tid = take(store)
        table = scores_of(store)
        s = TakeScore(tid, "k1", "distillmos", "0.9.1-1", H, {"predicted_mos": 4.25}, 1.5)
        assert table.put(s) is True
        assert table.put(s) is False  # a re-run stores nothing new
        got = table.get(tid, "k1")
        assert (got.metric, got.version, got.weights_sha256) == ("distillmos", "0.9.1-1", H)
        assert got.values == {"predicted_mos": 4.25} and got.seconds == 1.5
        newer = TakeScore(tid, "k2", "distillmos", "0.9.2-1", H, {"predicted_mos": 4.5}, 1.0)
        table.put(newer)
        assert [r.score_key for r in table.of_takes([tid, "nosuchtake"])] == ["k1", "k2"]
        f = table.frame([tid])
        assert f.to_dict("records") == [
            {
                "take_id": tid,
                "metric": "distillmos",
                "version": "0.9.2-1",
                "weights_sha256": H,
                "column": "predicted_mos",
                "value": 4.5,
            }
        ]
        cache, metric = StoreCache(store), Loud()
        item = Item(from_samples(np.full(100, 0.25, np.float32), 16000), name=tid)
        assert cache.get(metric, item) is None
        cache.put(metric, item, metric_score(metric, item))
        hit = cache.get(metric, item)
        assert hit.cached and hit.values == {"peak": 0.25}


def metric_score(metric, item):
    from evaluation.metrics.base import Score

    return Score(metric.info.name, metric.info.version, metric.weights_sha256, metric.score(item))


def test_db_copy_carries_the_scores(tmp_path, pg_url):
    src = tmp_path / "lab.db"
    with open_store(src) as store:
        tid = take(store)
        scores_of(store).put(TakeScore(tid, "k1", "dnsmos", "0.0.1.1-1", H, {"dnsmos_p808": 3.5}))
    checks = copy_store(src, pg_url, local_dir=tmp_path)
    by = {a.table: (a, b) for a, b in checks}
    a, b = by["take_scores"]
    assert a.rows == b.rows == 1 and a.digest == b.digest
    with open_store(pg_url, local_dir=tmp_path) as pg:
        assert scores_of(pg).get(tid, "k1").values == {"dnsmos_p808": 3.5}


@pytest.mark.parametrize("bad", ["", "x" * 10])
def test_unknown_takes_read_as_nothing(tmp_path, bad):
    with open_store(tmp_path / "lab.db") as store:
        assert scores_of(store).of_takes([bad]) == [] and scores_of(store).frame([bad]).empty
