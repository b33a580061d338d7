"""The one audio writer: samples to WAV (or FLAC, MP3, Opus, raw PCM) bytes or files.

Why one: takes, stored stimuli, cloned voices' clips, screening tones and ``listenlab api``'s
whole-file answers are all 16-bit files; written in six places they could differ in subtype,
channel layout or in what a half-written file looks like. Here: int16 samples are written as
they are, float samples go through libsndfile's conversion (clipped to [-1, 1] first), and a
file is written to a temporary name beside it and moved into place, so a reader never sees a
half-written file.

It lives at the bottom of the import order (``backends``) because every layer writes audio.
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import numpy as np

FORMATS = {
    "wav": ("WAV", "PCM_16"),
    "flac": ("FLAC", "PCM_16"),
    "mp3": ("MP3", None),
    "opus": ("OGG", "OPUS"),
}
"""Container and subtype per format name (``pcm`` is raw little-endian int16, no container)."""


def _samples(samples: np.ndarray) -> np.ndarray:
    x = np.asarray(samples)
    if x.dtype == np.int16:
        return x
    return np.clip(x.astype(np.float32, copy=False), -1.0, 1.0)


def encode_audio(samples: np.ndarray, sample_rate: int, fmt: str = "wav") -> bytes:
    """``samples`` (``(frames,)`` or ``(frames, channels)``, int16 or float) as ``fmt`` bytes."""
    if fmt == "pcm":
        x = np.asarray(samples)
        if x.dtype != np.int16:
            x = np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)
        return np.ascontiguousarray(x, dtype="<i2").tobytes()
    import soundfile as sf

    container, subtype = FORMATS[fmt]
    buf = io.BytesIO()
    sf.write(buf, _samples(samples), sample_rate, format=container, subtype=subtype)
    return buf.getvalue()


def write_audio_file(path: str | Path, samples: np.ndarray, sample_rate: int) -> Path:
    """Write a 16-bit ``.wav`` or ``.flac`` file atomically (temporary name, then rename)."""
    import soundfile as sf

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("wav", "flac"):
        raise ValueError(f"audio files are .wav or .flac, got {path.name!r}")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp.{fmt}")
    try:
        sf.write(tmp, _samples(samples), sample_rate, format=FORMATS[fmt][0], subtype="PCM_16")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


__all__ = ["FORMATS", "encode_audio", "write_audio_file"]
