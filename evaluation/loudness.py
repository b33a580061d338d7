"""Loudness as listeners hear it: BS.1770 integrated loudness (LUFS) per ear, true peak, and
normalisation to a target with a true-peak ceiling.

Why in ``evaluation``: listening-test stimuli are levelled with it when a test is made
(:mod:`app.listening.stimuli`), live streams are levelled the same way on their way to a
rater's page (:mod:`app.player.blind`), and the results must be able to say what gain each
stimulus got. One implementation, below both rooms. NumPy and SciPy are imported inside the
functions: the store reads :data:`TARGET_LUFS`, and ``listenlab test list`` must not pay for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


TARGET_LUFS = -23.0
"""EBU R128's programme loudness; the default target of every test."""
CEILING_DBTP = -1.0
OVERSAMPLE = 4
"""True peak per BS.1770-4 Annex 2: the peak of the signal oversampled 4x."""


def as_float(audio: np.ndarray) -> np.ndarray:
    """``(frames, channels)`` float64 in [-1, 1] from int16 or float input."""
    import numpy as np

    a = np.asarray(audio)
    x = a.astype(np.float64) / (32768.0 if np.issubdtype(a.dtype, np.integer) else 1.0)
    return x[:, None] if x.ndim == 1 else x


def ear_lufs(audio: np.ndarray, sample_rate: int) -> list[float]:
    """BS.1770 integrated loudness of each channel as one ear hears it (NaN: under 400 ms)."""
    import pyloudnorm

    x = as_float(audio)
    if x.shape[0] < int(0.4 * sample_rate) + 1:
        return [float("nan")] * x.shape[1]
    meter = pyloudnorm.Meter(sample_rate)
    return [float(meter.integrated_loudness(x[:, c])) for c in range(x.shape[1])]


def measure_lufs(audio: np.ndarray, sample_rate: int) -> float:
    """Loudness as listened to: the power mean of the ears' loudness (-inf for silence; NaN
    when shorter than one 400 ms block). Equal to BS.1770 for mono; for a stereo file with the
    same signal in both channels it is the per-channel value, not 3 dB more."""
    ears = [v for v in ear_lufs(audio, sample_rate) if not math.isnan(v)]
    if not ears:
        return float("nan")
    finite = [v for v in ears if math.isfinite(v)]
    if not finite:
        return float("-inf")
    return float(10 * math.log10(sum(10 ** (v / 10) for v in finite) / len(ears)))


def true_peak_dbtp(audio: np.ndarray, sample_rate: int | None = None) -> float:
    """True peak in dBTP: the largest magnitude of the 4x oversampled signal (polyphase FIR)."""
    import numpy as np
    from scipy import signal

    x = as_float(audio)
    if not x.size:
        return float("-inf")
    peak = 0.0
    for c in range(x.shape[1]):
        up = signal.resample_poly(x[:, c], OVERSAMPLE, 1)
        peak = max(peak, float(np.abs(up).max()), float(np.abs(x[:, c]).max()))
    return 20 * math.log10(peak) if peak > 0 else float("-inf")


@dataclass(frozen=True)
class Normalised:
    """A stimulus after loudness normalisation and what was measured on the way."""

    audio: np.ndarray
    """int16 ``(frames, channels)``."""
    gain_db: float
    input_lufs: float
    output_lufs: float
    ear_lufs: tuple[float, ...]
    true_peak_dbtp: float
    target_lufs: float
    ceiling_dbtp: float
    limited: bool
    """The true-peak ceiling capped the gain: the stimulus is quieter than the target."""

    def meta(self) -> dict[str, Any]:
        def r(v: float) -> float | None:
            return round(v, 3) if math.isfinite(v) else None

        return {
            "output_lufs": r(self.output_lufs),
            "ear_lufs": [r(v) for v in self.ear_lufs],
            "true_peak_dbtp": r(self.true_peak_dbtp),
            "ceiling_dbtp": self.ceiling_dbtp,
            "limited": self.limited,
        }


def _gained(x: np.ndarray, gain_db: float) -> np.ndarray:
    import numpy as np

    y = np.round(x * 10 ** (gain_db / 20) * 32768.0)
    return np.clip(y, -32768, 32767).astype(np.int16)


def normalise(
    audio: np.ndarray,
    sample_rate: int,
    target_lufs: float = TARGET_LUFS,
    ceiling_dbtp: float = CEILING_DBTP,
) -> Normalised:
    """Scale ``audio`` (one gain for all channels: the stereo image stays) so the ears hear
    ``target_lufs``, unless that would put the true peak over ``ceiling_dbtp``.

    Silence or a clip too short to measure gets gain 0.
    """
    x = as_float(audio)
    lufs = measure_lufs(x, sample_rate)
    tp = true_peak_dbtp(x, sample_rate)
    gain, limited = 0.0, False
    if math.isfinite(lufs):
        gain = target_lufs - lufs
        if math.isfinite(tp) and tp + gain > ceiling_dbtp:
            gain, limited = ceiling_dbtp - tp - 0.02, True  # margin for int16 rounding
    y = _gained(x, gain)
    out_tp = true_peak_dbtp(y, sample_rate)
    while math.isfinite(out_tp) and out_tp > ceiling_dbtp and gain > -60:
        gain, limited = gain - 0.05, True
        y = _gained(x, gain)
        out_tp = true_peak_dbtp(y, sample_rate)
    ears = tuple(ear_lufs(y, sample_rate))
    return Normalised(
        y,
        float(gain),
        lufs,
        measure_lufs(y, sample_rate),
        ears,
        out_tp,
        target_lufs,
        ceiling_dbtp,
        limited,
    )


def normalise_loudness(
    audio: np.ndarray, sample_rate: int, target_lufs: float = TARGET_LUFS
) -> tuple[np.ndarray, float, float]:
    """``(int16 audio, gain_db, measured_lufs)``: :func:`normalise` in the older tuple form."""
    n = normalise(audio, sample_rate, target_lufs)
    return n.audio, n.gain_db, n.input_lufs


# --------------------------------------------------------------------------- anchors and checks
