"""Speech and pause statistics from Silero VAD (silero-vad 6.2.3, MIT).

Why: a take that starts late, stops early, or pauses where the text has no comma is a problem
people hear that no predicted MOS reports. The network is the ``silero_vad`` wheel's ONNX file,
run here with onnxruntime on 32 ms windows (512 samples at 16 kHz, each with the previous 64
samples as context and the recurrent state carried over), which is what the package's
``OnnxWrapper`` does. Importing the package itself is avoided: its ``__init__`` sets torch's
thread count to 1 for the whole process.

Segments follow the package's defaults: speech starts at probability >= 0.5 and ends below
0.35 after at least 100 ms; speech shorter than 250 ms is dropped; 30 ms of padding each side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Audio, Item, Metric, MetricInfo, Value, package_file

WINDOW, CONTEXT = 512, 64
ON, OFF = 0.5, 0.35
MIN_SILENCE_S, MIN_SPEECH_S, PAD_S = 0.100, 0.250, 0.030
MIN_PAUSE_S = 0.200
"""A silence between two speech segments counts as a pause from this length."""


class Vad:
    """Speech segments of 16 kHz audio (seconds), remembered for the last few clips."""

    def __init__(self) -> None:
        self.sess: Any = None
        self.memo: dict[str, list[tuple[float, float]]] = {}

    def path(self) -> Path:
        return package_file("silero_vad", "data", "silero_vad.onnx")

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        if self.sess is None:
            from evaluation.metrics.dnsmos import session

            self.sess = session(self.path())
        n = int(np.ceil(len(x) / WINDOW))
        x = np.concatenate([np.zeros(CONTEXT, np.float32), x, np.zeros(n * WINDOW - len(x))])
        state = np.zeros((2, 1, 128), np.float32)
        sr = np.array(MODEL_RATE, dtype=np.int64)
        out = np.empty(n, np.float32)
        for i in range(n):
            chunk = x[i * WINDOW : i * WINDOW + WINDOW + CONTEXT].astype(np.float32)[None]
            p, state = self.sess.run(None, {"input": chunk, "state": state, "sr": sr})
            out[i] = p[0][0]
        return out

    def segments(self, audio: Audio) -> list[tuple[float, float]]:
        got = self.memo.get(audio.sha256)
        if got is None:
            x = at_rate(audio, MODEL_RATE)
            got = to_segments(self.probabilities(x), len(x) / MODEL_RATE)
            if len(self.memo) > 64:
                self.memo.clear()
            self.memo[audio.sha256] = got
        return got


def to_segments(probs: np.ndarray, seconds: float) -> list[tuple[float, float]]:
    """Hysteresis on per-window probabilities -> padded speech segments in seconds."""
    step = WINDOW / MODEL_RATE
    segs, start, quiet_since = [], None, None
    for i, p in enumerate(probs):
        t = i * step
        if start is None:
            if p >= ON:
                start, quiet_since = t, None
        elif p < OFF:
            quiet_since = t if quiet_since is None else quiet_since
            if t + step - quiet_since >= MIN_SILENCE_S:
                segs.append((start, quiet_since))
                start, quiet_since = None, None
        else:
            quiet_since = None
    if start is not None:
        segs.append((start, seconds if quiet_since is None else quiet_since))
    segs = [(a, b) for a, b in segs if b - a >= MIN_SPEECH_S]
    return [(max(0.0, a - PAD_S), min(seconds, b + PAD_S)) for a, b in segs]


class Pauses(Metric):
    info = MetricInfo(
        name="pauses",
        version="6.2.3-1",
        tier="bundled",
        columns=(
            "speech_s",
            "speech_ratio",
            "pauses",
            "longest_pause_s",
            "lead_silence_s",
            "trail_silence_s",
        ),
        summary="speech and pause statistics (Silero VAD)",
        license="MIT",
    )

    def __init__(self, vad: Vad | None = None) -> None:
        self.vad = vad or Vad()

    def weights(self) -> list[Path]:
        return [self.vad.path()]

    def score(self, item: Item) -> dict[str, Value]:
        segs = self.vad.segments(item.audio)
        total = item.audio.seconds
        if not segs:
            return dict.fromkeys(self.info.columns, 0.0) | {
                "lead_silence_s": round(total, 3),
                "trail_silence_s": round(total, 3),
                "pauses": 0,
            }
        speech = sum(b - a for a, b in segs)
        gaps = [b[0] - a[1] for a, b in zip(segs, segs[1:], strict=False)]
        return {
            "speech_s": round(speech, 3),
            "speech_ratio": round(speech / total, 4) if total else 0.0,
            "pauses": sum(g >= MIN_PAUSE_S for g in gaps),
            "longest_pause_s": round(max(gaps, default=0.0), 3),
            "lead_silence_s": round(segs[0][0], 3),
            "trail_silence_s": round(total - segs[-1][1], 3),
        }


__all__ = ["Pauses", "Vad", "to_segments"]
