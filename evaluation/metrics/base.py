"""The metric contract: what a machine score is, what it needs, and what it returns.

Why one small contract: the CLI, the benchmark and (later) the listening-test results, the
arena board and the probe all call the same metrics. Each metric says its name, its version
(bumped when its numbers can change: a new package, new weights, a new rule), what an item
must carry for it to score (the input text, a reference voice, a reference take), the columns
it writes, and which files are its weights (their SHA-256 goes into every result, so a methods
section can name exactly what scored the audio).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

Need = Literal["text", "reference_voice", "reference_take"]
Value = float | int | str | None
Tier = Literal["bundled", "hub"]


@dataclass(frozen=True)
class Audio:
    """Mono float32 samples in [-1, 1] at ``rate``; ``sha256`` names the samples (cache key)."""

    samples: np.ndarray
    rate: int
    sha256: str
    resampled: dict[int, np.ndarray] = field(default_factory=dict, compare=False, repr=False)
    """Samples at other rates, filled by :func:`evaluation.metrics.audio.at_rate`."""

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate if self.rate else 0.0


@dataclass(frozen=True)
class Item:
    """One thing to score: the audio and whatever the metrics may need beside it."""

    audio: Audio
    text: str | None = None
    reference_voice: Audio | None = None
    reference_take: Audio | None = None
    name: str = ""

    def has(self, need: Need) -> bool:
        return getattr(self, need) not in (None, "")


@dataclass(frozen=True)
class MetricInfo:
    """What a metric is, for the docs, ``--metrics`` and a methods section."""

    name: str
    version: str
    tier: Tier
    columns: tuple[str, ...]
    needs: frozenset[Need] = frozenset()
    summary: str = ""
    license: str = ""


@dataclass(frozen=True)
class Score:
    """One metric's result on one item: its columns' values and exactly what produced them."""

    metric: str
    version: str
    weights_sha256: str
    values: dict[str, Value]
    seconds: float = 0.0
    cached: bool = False


def file_sha256(*paths: Path) -> str:
    """SHA-256 over the bytes of ``paths`` in order (a metric's weights' hash)."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


INSTALL_HINT = "pip install 'listenlab[metrics]' (docs/metrics.md: the CPU build of torch first)"


def package_file(package: str, *parts: str) -> Path:
    """A file shipped inside an installed package, found without importing the package (some
    import torchaudio at the top, which fails beside the CPU torch; see docs/metrics.md)."""
    import importlib.util

    from backends.errors import ModelUnavailable

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the package {package!r} is not installed: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise ModelUnavailable(f"{package} has no {'/'.join(parts)}: reinstall it ({INSTALL_HINT})")
    return path


def require(module: str) -> None:
    """Fail with the install hint (not an ImportError deep in a model) when ``module`` is
    missing."""
    import importlib.util

    from backends.errors import ModelUnavailable

    if importlib.util.find_spec(module) is None:
        raise ModelUnavailable(f"the package {module!r} is not installed: {INSTALL_HINT}")


class Metric(ABC):
    """A scorer. ``load`` is separate from construction so a metric can be listed, checked for
    its package and keyed in the cache without loading a model."""

    info: ClassVar[MetricInfo]

    @abstractmethod
    def weights(self) -> list[Path]:
        """The files whose bytes define the model (raises ModelUnavailable when absent)."""

    @cached_property
    def weights_sha256(self) -> str:
        return file_sha256(*self.weights())

    def load(self) -> None:  # noqa: B027 (optional hook)
        """Load the model once (weights from the wheel or a local path; never the network)."""

    @abstractmethod
    def score(self, item: Item) -> dict[str, Value]:
        """The metric's columns for ``item`` (every column of ``info.columns``)."""


__all__ = [
    "INSTALL_HINT",
    "Audio",
    "Item",
    "Metric",
    "MetricInfo",
    "Need",
    "Score",
    "Value",
    "file_sha256",
    "package_file",
    "require",
]
