"""Known damage done to a take on purpose: noise, a gap, cut words, another voice, a replay.

Why in the parity room: the claim that each measure catches its damage is checked by the tests
and measured by ``benchmarks/parity.py`` (power per damage type and size) on the same damaged
audio; one implementation keeps the two honest. Each function takes int16 ``(frames,
channels)`` audio and returns a new array (the input is never changed); the cut point is the
quietest 20 ms near the middle, so a cut or an inserted gap sits where a real seam could.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from evaluation.takes import ChunkRecord, Take

Damage = Callable[[np.ndarray, int, float], np.ndarray]


def _f(audio: np.ndarray) -> np.ndarray:
    return audio.astype(np.float64) / 32768.0


def _i(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int16)


def middle(audio: np.ndarray, rate: int) -> int:
    """The start of the quietest 20 ms window within the middle third (a frame index)."""
    x = _f(audio).mean(axis=1)
    win = max(1, rate // 50)
    lo, hi = len(x) // 3, 2 * len(x) // 3
    if hi - lo <= win:
        return len(x) // 2
    e = np.convolve(x[lo:hi] ** 2, np.ones(win), "valid")
    return lo + int(np.argmin(e))


def noise(audio: np.ndarray, rate: int, snr_db: float, seed: int = 0) -> np.ndarray:
    """White noise at ``snr_db`` below the speech's power (over its active frames)."""
    x = _f(audio)
    active = np.abs(x).max(axis=1) > 10 ** (-40 / 20)
    power = float(np.mean(x[active] ** 2)) if active.any() else 1e-6
    rng = np.random.default_rng(seed)
    return _i(x + rng.normal(0, np.sqrt(power / 10 ** (snr_db / 10)), x.shape))


def gap(audio: np.ndarray, rate: int, seconds: float) -> np.ndarray:
    """``seconds`` of silence inserted mid-take."""
    at = middle(audio, rate)
    pad = np.zeros((int(seconds * rate), audio.shape[1]), np.int16)
    return np.concatenate([audio[:at], pad, audio[at:]])


def cut(audio: np.ndarray, rate: int, seconds: float) -> np.ndarray:
    """``seconds`` of speech removed from the middle (words cut out)."""
    n = int(seconds * rate)
    at = max(0, middle(audio, rate) - n // 2)
    return np.concatenate([audio[:at], audio[at + n :]])


def other_voice(audio: np.ndarray, rate: int, factor: float) -> np.ndarray:
    """The take played ``factor`` times faster: pitch and formants up, as another speaker's
    (``factor`` 1.35 is the metrics benchmark's ``other_voice``)."""
    import soxr

    x = _f(audio)
    return _i(
        np.asarray(soxr.resample(x, rate * factor, rate), dtype=np.float64).reshape(-1, x.shape[1])
    )


def replay(audio: np.ndarray, rate: int, seconds: float) -> np.ndarray:
    """The ``seconds`` of audio before mid-take heard again (a decoder re-emitting its left
    context)."""
    n = int(seconds * rate)
    at = max(n, middle(audio, rate))
    return np.concatenate([audio[:at], audio[at - n : at], audio[at:]])


DAMAGES: dict[str, tuple[Damage, tuple[float, ...], str]] = {
    "noise": (noise, (30.0, 20.0, 10.0), "dB SNR"),
    "gap": (gap, (0.15, 0.3, 0.6), "s of silence mid-take"),
    "cut": (cut, (0.15, 0.3, 0.6), "s of speech cut out mid-take"),
    "other_voice": (other_voice, (1.05, 1.15, 1.35), "x speed (pitch and formants up)"),
    "replay": (replay, (0.15, 0.3, 0.6), "s replayed mid-take"),
}
"""Each damage, its sizes (mildest first) and the sizes' unit."""
CATCHES = {
    "noise": ("predicted_mos",),
    "gap": ("longest_pause_s", "pauses"),
    "cut": ("ms_per_char", "wer", "cer"),
    "other_voice": ("speaker_sim", "f0_median"),
    "replay": ("glitches", "ms_per_char"),
}
"""The measures meant to catch each damage (the tests hold each damage to them)."""


def damaged(take: Take, kind: str, size: float) -> Take:
    """A copy of ``take`` with one damage, as one chunk (a file has no timeline)."""
    fn = DAMAGES[kind][0]
    audio = fn(take.audio, take.sample_rate, size)
    return replace(
        take,
        audio=audio,
        chunks=[ChunkRecord(0, 0.0, 0, len(audio))],
        total_ms=0.0,
        meta={**take.meta, "damage": f"{kind} {size:g}"},
    )


__all__ = [
    "CATCHES",
    "DAMAGES",
    "cut",
    "damaged",
    "gap",
    "middle",
    "noise",
    "other_voice",
    "replay",
]
