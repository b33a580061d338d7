"""Reference clips for cloning: decode anything common, trim silence, validate, emit mono WAV.

Why these rules: vLLM-Omni refuses references outside 1-30 s and uploads over 10 MB
(``/v1/audio/voices``), and every engine wants mono 16-bit PCM. Checking here gives the user a
clear message *before* a remote server answers with a 400, and means a clip that passes plays
the same on every backend.

Every byte is untrusted (a public Space). The decoding itself (container sniffed from the bytes,
header limits before decoding, bounded soundfile/ffmpeg) is :mod:`backends.audio`'s, shared with
``listenlab api`` and the embedded engine's adapters; this module adds what a *voice* needs:
silence trimming, the length rules and the conversion to mono WAV. :class:`ClipError` is the one
error to catch for a clip that cannot be used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backends.audio import (
    ALLOWED_FORMATS,
    MAX_CLIP_BYTES,
    MAX_INPUT_SECONDS,
    REF_MAX_SECONDS,
    REF_MIN_SECONDS,
    ClipError,
    decode_audio,
    decode_mono,
    encode_audio,
    sniff_format,
)

MAX_UPLOAD_BYTES = MAX_CLIP_BYTES
"""Same limit as vLLM-Omni's ``POST /v1/audio/voices``."""
MIN_SECONDS = REF_MIN_SECONDS
MAX_SECONDS = REF_MAX_SECONDS
MAX_RATE = 48000
"""Clips above this rate are resampled down (soxr); nothing needs more for a reference."""
SILENCE_DBFS = -45.0
"""Frames quieter than this (RMS over 10 ms windows) at the clip's ends are trimmed."""


@dataclass(frozen=True)
class Clip:
    """A validated reference clip: mono 16-bit WAV bytes plus what was done to it."""

    wav: bytes
    sample_rate: int
    duration_s: float
    original_duration_s: float
    source_format: str

    @property
    def trimmed_s(self) -> float:
        return round(self.original_duration_s - self.duration_s, 3)


def trim_silence(mono: np.ndarray, sr: int, threshold_dbfs: float = SILENCE_DBFS) -> np.ndarray:
    """Cut leading/trailing frames whose 10 ms RMS is below the threshold (keep 50 ms pad)."""
    win = max(1, sr // 100)
    n = len(mono) // win
    if n == 0:
        return mono[:0]
    rms = np.sqrt(np.mean(mono[: n * win].reshape(n, win) ** 2, axis=1) + 1e-12)
    loud = np.flatnonzero(20 * np.log10(rms) > threshold_dbfs)
    if not len(loud):
        return mono[:0]
    pad = sr // 20
    start = max(0, loud[0] * win - pad)
    end = min(len(mono), (loud[-1] + 1) * win + pad)
    return mono[start:end]


def prepare_clip(data: bytes, filename: str | None = None) -> Clip:
    """Validate and convert an uploaded or recorded clip, or raise :class:`ClipError`.

    ``filename`` is not used to decode (the format comes from the bytes); it is accepted so
    callers can pass what the browser sent.
    """
    if not data:
        raise ClipError("the clip is empty (0 bytes)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ClipError(
            f"the clip is {len(data) / 1e6:.1f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB"
        )
    mono, sr, fmt = decode_mono(data, "the clip")
    if mono.size == 0:
        raise ClipError("the clip contains no audio samples")
    if not np.all(np.isfinite(mono)):
        raise ClipError("the clip contains invalid (non-finite) samples")
    original = len(mono) / sr
    if sr > MAX_RATE:
        import soxr

        mono = soxr.resample(mono, sr, MAX_RATE).astype(np.float32)
        sr = MAX_RATE
    mono = trim_silence(mono, sr)
    dur = len(mono) / sr
    if dur == 0:
        raise ClipError("the clip is silent: no speech found after trimming silence")
    if dur < MIN_SECONDS:
        raise ClipError(
            f"the clip is too short: {dur:.2f} s of sound after trimming silence "
            f"(at least {MIN_SECONDS:.0f} s needed)"
        )
    if dur > MAX_SECONDS:
        raise ClipError(
            f"the clip is too long: {dur:.1f} s after trimming silence "
            f"(at most {MAX_SECONDS:.0f} s); cut it shorter"
        )
    return Clip(encode_audio(mono, sr), sr, round(dur, 3), round(original, 3), fmt)


__all__ = [
    "ALLOWED_FORMATS",
    "Clip",
    "ClipError",
    "MAX_INPUT_SECONDS",
    "MAX_SECONDS",
    "MAX_UPLOAD_BYTES",
    "MIN_SECONDS",
    "decode_audio",
    "decode_mono",
    "prepare_clip",
    "sniff_format",
]
