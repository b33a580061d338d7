"""Machine ears: objective scores of speech (predicted MOS, speaker similarity, pauses, pitch,
word checks), offline, each with its name, version and weights' hash.

Why a room: every place that shows a human result (the CLI today; listening-test results,
the arena and the probe next) needs the same scores from the same models, computed once and
cached. Start at :func:`score_files` (files in, rows out), or :func:`score_items` with
:class:`Item`s for audio already in memory. The bundled tier needs ``pip install
'listenlab[metrics]'``; the hub tier (:mod:`evaluation.metrics.hub`) needs weights on disk.
Model packages are imported only when a metric loads.
"""

from evaluation.metrics.audio import from_samples, read_file
from evaluation.metrics.base import Audio, Item, Metric, MetricInfo, Score
from evaluation.metrics.cache import ScoreCache
from evaluation.metrics.files import Row, score_files, write_csv
from evaluation.metrics.hub import HubConfig
from evaluation.metrics.registry import ALL_INFO, DEFAULT, build, parse
from evaluation.metrics.run import ItemResult, score_items

__all__ = [
    "ALL_INFO",
    "DEFAULT",
    "Audio",
    "HubConfig",
    "Item",
    "ItemResult",
    "Metric",
    "MetricInfo",
    "Row",
    "Score",
    "ScoreCache",
    "build",
    "from_samples",
    "parse",
    "read_file",
    "score_files",
    "score_items",
    "write_csv",
]
