"""Pitch statistics with WORLD's DIO and StoneMask (``pyworld``, MIT; no weights).

Why: a monotone voice, a voice at the wrong pitch (a cloned voice that drifted), or a take
with much of its speech unvoiced are audible and measurable without a model. F0 is tracked
every 5 ms between 60 and 500 Hz at 16 kHz; the columns are the median F0 of voiced frames,
the spread between their 10th and 90th percentiles in semitones (DIO makes some octave errors; the 10-90 spread ignores most of them), and the share of frames that
are voiced (of all frames; silence counts as unvoiced).

``pyworld``'s ``__init__`` imports ``pkg_resources`` only to read its own version, and
setuptools 81 and later no longer have it; :func:`world` loads the compiled WORLD module from
the installed package directly instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Item, Metric, MetricInfo, Value, require

_WORLD: list[Any] = []


def world() -> Any:
    """pyworld's compiled module (``pyworld/pyworld.*.so``), without the package's __init__."""
    if not _WORLD:
        import importlib.util

        require("pyworld")
        spec = importlib.util.find_spec("pyworld")
        folder = Path(next(iter(spec.submodule_search_locations)))  # type: ignore[union-attr]
        so = next(folder.glob("pyworld.*.so"), None) or next(folder.glob("pyworld.*.pyd"))
        ext = importlib.util.spec_from_file_location("pyworld.pyworld", so)
        mod = importlib.util.module_from_spec(ext)  # type: ignore[arg-type]
        ext.loader.exec_module(mod)  # type: ignore[union-attr]
        _WORLD.append(mod)
    return _WORLD[0]


F0_FLOOR, F0_CEIL, FRAME_MS = 60.0, 500.0, 5.0


class Pitch(Metric):
    info = MetricInfo(
        name="pitch",
        version="0.3.5-1",
        tier="bundled",
        columns=("f0_median_hz", "f0_range_st", "voiced_ratio"),
        summary="pitch statistics (WORLD DIO + StoneMask)",
        license="MIT",
    )

    def weights(self) -> list[Path]:
        require("pyworld")
        return []

    @property
    def weights_sha256(self) -> str:
        return "none"

    def score(self, item: Item) -> dict[str, Value]:
        pyworld = world()
        x = at_rate(item.audio, MODEL_RATE).astype(np.float64)
        f0, t = pyworld.dio(x, MODEL_RATE, F0_FLOOR, F0_CEIL, frame_period=FRAME_MS)
        f0 = pyworld.stonemask(x, f0, t, MODEL_RATE)
        voiced = f0[f0 > 0]
        if len(voiced) < 3:
            return {"f0_median_hz": None, "f0_range_st": None, "voiced_ratio": 0.0}
        lo, hi = np.percentile(voiced, [10, 90])
        return {
            "f0_median_hz": round(float(np.median(voiced)), 2),
            "f0_range_st": round(float(12 * np.log2(hi / lo)), 3),
            "voiced_ratio": round(len(voiced) / len(f0), 4),
        }


__all__ = ["Pitch"]
