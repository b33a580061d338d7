"""Reference clips for cloning: decode anything common, trim silence, validate, emit mono WAV.

Why these rules: vLLM-Omni refuses references outside 1-30 s and uploads over 10 MB
(``/v1/audio/voices``), and every engine wants mono 16-bit PCM. Checking here gives the user a
clear message *before* a remote server answers with a 400, and means a clip that passes plays
the same on every backend. Decoding is soundfile first (wav, flac, ogg, mp3 with libsndfile
>= 1.1) and ffmpeg as the fallback (m4a/aac, webm/opus from the browser recorder, odd wavs).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from backends.base import InvalidRequest

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
"""Same limit as vLLM-Omni's ``POST /v1/audio/voices``."""
MIN_SECONDS = 1.0
MAX_SECONDS = 30.0
MAX_RATE = 48000
"""Clips above this rate are resampled down (soxr); nothing needs more for a reference."""
SILENCE_DBFS = -45.0
"""Frames quieter than this (RMS over 10 ms windows) at the clip's ends are trimmed."""
FFMPEG_TIMEOUT_S = 30.0


class ClipError(InvalidRequest):
    """The uploaded clip cannot be used; the message says why in user terms."""


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


def _decode_soundfile(data: bytes) -> tuple[np.ndarray, int, str] | None:
    try:
        with sf.SoundFile(io.BytesIO(data)) as f:
            fmt = f.format
            x = f.read(dtype="float32", always_2d=True)
            return x, f.samplerate, fmt.lower()
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError):
        return None


def _decode_ffmpeg(data: bytes, suffix: str) -> tuple[np.ndarray, int, str] | None:
    """Decode through ffmpeg via a temp file (mp4/m4a need a seekable input); always cleaned."""
    if shutil.which("ffmpeg") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="listenlab-clip-") as tmp:
        src = Path(tmp) / ("input" + suffix)
        src.write_bytes(data)
        try:
            proc = subprocess.run(
                [
                    "ffmpeg",
                    "-nostdin",
                    "-v",
                    "error",
                    "-i",
                    str(src),
                    "-vn",
                    "-f",
                    "wav",
                    "-acodec",
                    "pcm_s16le",
                    "pipe:1",
                ],
                capture_output=True,
                timeout=FFMPEG_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None
    if proc.returncode != 0 or not proc.stdout:
        return None
    got = _decode_soundfile(proc.stdout)
    if got is None:
        return None
    return got[0], got[1], "ffmpeg"


def _safe_suffix(filename: str | None) -> str:
    """Only a short alphanumeric extension survives from a user file name (a hint for ffmpeg)."""
    if not filename:
        return ".bin"
    ext = Path(filename).suffix.lower()
    return ext if 1 < len(ext) <= 6 and ext[1:].isalnum() else ".bin"


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
    """Validate and convert an uploaded or recorded clip, or raise :class:`ClipError`."""
    if not data:
        raise ClipError("the clip is empty (0 bytes)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ClipError(
            f"the clip is {len(data) / 1e6:.1f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB"
        )
    got = _decode_soundfile(data) or _decode_ffmpeg(data, _safe_suffix(filename))
    if got is None:
        raise ClipError(
            "this file is not readable audio (tried soundfile and ffmpeg); "
            "upload wav, mp3, flac, ogg or m4a"
        )
    x, sr, fmt = got
    if x.size == 0 or sr <= 0:
        raise ClipError("the clip contains no audio samples")
    mono = x.mean(axis=1).astype(np.float32)
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
    buf = io.BytesIO()
    sf.write(buf, np.clip(mono, -1.0, 1.0), sr, format="WAV", subtype="PCM_16")
    return Clip(buf.getvalue(), sr, round(dur, 3), round(original, 3), fmt)


__all__ = ["Clip", "ClipError", "MAX_SECONDS", "MAX_UPLOAD_BYTES", "MIN_SECONDS", "prepare_clip"]
