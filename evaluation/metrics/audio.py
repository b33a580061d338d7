"""Audio in for the metrics: bounded file reading, channels to mono, resampling, hashing.

Why one place: every model wants mono at its own rate (16 kHz for all bundled ones). Done per
metric, the mix-down and the resampler would differ from one score to the next, and a file
would be decoded and resampled once per metric. Here a file is read once through the bounded
decoder (:func:`backends.audio.decode_audio`: container sniffed from the bytes, header checked
before decoding, decoded samples capped), mixed to mono by the mean of its channels, and
resampled once per rate with soxr (the same resampler the rest of listenlab uses).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from backends.audio import ALLOWED_FORMATS, MAX_INPUT_SECONDS, decode_audio
from backends.errors import InvalidRequest, NotFound
from evaluation.metrics.base import Audio

MAX_FILE_BYTES = 128 * 1024 * 1024
"""Largest file read at all (before decoding): 60 s of 8-channel 48 kHz 32-bit audio fits."""
MAX_SECONDS = MAX_INPUT_SECONDS
"""Longest file scored: the bounded decoder's limit (``backends.audio.MAX_INPUT_SECONDS``)."""
MODEL_RATE = 16_000
"""The rate every bundled model takes."""
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".mp4", ".webm")
"""Files a folder contributes (an explicitly named file is judged by its bytes, not its name)."""


def audio_sha256(samples: np.ndarray, rate: int) -> str:
    """The cache key of decoded audio: its rate and its float32 mono samples."""
    h = hashlib.sha256(f"{int(rate)}:".encode())
    h.update(np.ascontiguousarray(samples, dtype=np.float32).tobytes())
    return h.hexdigest()


def from_samples(samples: np.ndarray, rate: int) -> Audio:
    """An :class:`Audio` from samples in memory: ``(frames,)`` or ``(frames, channels)``,
    int16 or float; channels are averaged."""
    x = np.asarray(samples)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    x = x.astype(np.float32, copy=False)
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float32)
    if x.ndim != 1:
        raise InvalidRequest(f"audio must be (frames,) or (frames, channels), not {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InvalidRequest("audio has NaN or infinite samples")
    x = np.clip(x, -1.0, 1.0)
    return Audio(x, int(rate), audio_sha256(x, rate))


def read_file(path: str | Path) -> Audio:
    """Read and decode one file, bounded; errors name the file (``ClipError``, ``NotFound``)."""
    p = Path(path)
    what = str(p)
    if not p.is_file():
        raise NotFound(f"{what}: no such file")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidRequest(
            f"{what} is {size / 2**20:.0f} MiB; at most {MAX_FILE_BYTES // 2**20} MiB is read"
        )
    with open(p, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    samples, rate, _fmt = decode_audio(data, what, mono=True, formats=ALLOWED_FORMATS)
    if len(samples) == 0:
        raise InvalidRequest(f"{what} has no samples")
    return from_samples(samples, rate)


def at_rate(audio: Audio, rate: int = MODEL_RATE) -> np.ndarray:
    """``audio``'s samples at ``rate`` (soxr, high quality), computed once per rate."""
    if audio.rate == rate:
        return audio.samples
    got = audio.resampled.get(rate)
    if got is None:
        import soxr

        got = soxr.resample(audio.samples, audio.rate, rate, quality="HQ").astype(np.float32)
        audio.resampled[rate] = got
    return got


__all__ = [
    "AUDIO_SUFFIXES",
    "MAX_FILE_BYTES",
    "MAX_SECONDS",
    "MODEL_RATE",
    "at_rate",
    "audio_sha256",
    "from_samples",
    "read_file",
]
