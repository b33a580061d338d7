"""Speaker similarity to a reference voice with Resemblyzer's GE2E d-vector (Apache-2.0).

Why this loader: ``resemblyzer`` imports ``webrtcvad`` at its top, which needs
``pkg_resources`` (gone from recent setuptools). The encoder is three LSTM layers and a
linear layer (``resemblyzer/voice_encoder.py`` 0.1.4), built here with the same names and
loaded from the wheel's ``pretrained.pt``. Its rules are kept: 40-band mel spectrogram (25 ms
window, 10 ms hop) at 16 kHz, volume raised to -30 dBFS (never lowered), partial utterances
of 1.6 s at 1.3 per second (the last kept when it covers >= 75 %), the utterance embedding is
the L2-normed mean of the partials'. Long silences are cut with Silero VAD instead of
WebRTC's (:mod:`evaluation.metrics.pauses`).

The score is the cosine of the two embeddings. GE2E embeddings are non-negative, so unrelated
voices still score around 0.5-0.8: compare systems with one another, never with a fixed bar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Audio, Item, Metric, MetricInfo, Value, package_file, require
from evaluation.metrics.pauses import Vad

PARTIAL_FRAMES, HOP = 160, 160
RATE_PER_S, MIN_COVERAGE = 1.3, 0.75
TARGET_DBFS = -30.0


def mel(x: np.ndarray) -> np.ndarray:
    import librosa

    m = librosa.feature.melspectrogram(y=x, sr=MODEL_RATE, n_fft=400, hop_length=HOP, n_mels=40)
    return m.astype(np.float32).T


def partial_slices(n_samples: int) -> list[slice]:
    """Resemblyzer's ``compute_partial_slices`` (mel-frame slices)."""
    n_frames = int(np.ceil((n_samples + 1) / HOP))
    step = int(np.round((MODEL_RATE / RATE_PER_S) / HOP))
    slices = [
        slice(i, i + PARTIAL_FRAMES)
        for i in range(0, max(1, n_frames - PARTIAL_FRAMES + step + 1), step)
    ]
    last = slices[-1]
    coverage = (n_samples - last.start * HOP) / (PARTIAL_FRAMES * HOP)
    if coverage < MIN_COVERAGE and len(slices) > 1:
        slices = slices[:-1]
    return slices


class SpeakerSim(Metric):
    info = MetricInfo(
        name="speaker",
        version="0.1.4-1",
        tier="bundled",
        columns=("speaker_sim",),
        needs=frozenset({"reference_voice"}),
        summary="speaker similarity to the reference voice, cosine of GE2E d-vectors",
        license="Apache-2.0",
    )

    def __init__(self, vad: Vad | None = None) -> None:
        self.net: Any = None
        self.vad = vad or Vad()
        self.memo: dict[str, np.ndarray] = {}

    def weights(self) -> list[Path]:
        return [package_file("resemblyzer", "pretrained.pt")]

    def load(self) -> None:
        if self.net is not None:
            return
        require("torch")
        import torch
        from torch import nn

        class VoiceEncoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lstm = nn.LSTM(40, 256, 3, batch_first=True)
                self.linear = nn.Linear(256, 256)

            def forward(self, mels: torch.Tensor) -> torch.Tensor:
                _, (hidden, _) = self.lstm(mels)
                e = torch.relu(self.linear(hidden[-1]))
                return e / torch.norm(e, dim=1, keepdim=True)

        net = VoiceEncoder()
        state = torch.load(self.weights()[0], map_location="cpu", weights_only=False)
        net.load_state_dict(state["model_state"], strict=False)
        self.net = net.eval()

    def prepare(self, audio: Audio) -> np.ndarray:
        """Speech only (VAD segments), volume raised to -30 dBFS."""
        x = at_rate(audio, MODEL_RATE)
        segs = self.vad.segments(audio)
        if segs:
            x = np.concatenate([x[int(a * MODEL_RATE) : int(b * MODEL_RATE)] for a, b in segs])
        rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) if len(x) else 0.0
        if rms > 0:
            gain_db = TARGET_DBFS - 20 * np.log10(rms)
            if gain_db > 0:
                x = x * 10 ** (gain_db / 20)
        return x.astype(np.float32)

    def embed(self, audio: Audio) -> np.ndarray:
        got = self.memo.get(audio.sha256)
        if got is not None:
            return got
        import torch

        self.load()
        x = self.prepare(audio)
        slices = partial_slices(len(x))
        x = np.pad(x, (0, max(0, slices[-1].stop * HOP - len(x))))
        m = mel(x)
        batch = np.stack([m[s] for s in slices])
        with torch.inference_mode():
            partial = self.net(torch.from_numpy(batch)).numpy()
        raw = partial.mean(axis=0)
        got = raw / np.linalg.norm(raw)
        if len(self.memo) > 64:
            self.memo.clear()
        self.memo[audio.sha256] = got
        return got

    def score(self, item: Item) -> dict[str, Value]:
        assert item.reference_voice is not None
        a, b = self.embed(item.audio), self.embed(item.reference_voice)
        return {"speaker_sim": round(float(np.dot(a, b)), 4)}


__all__ = ["SpeakerSim", "partial_slices"]
