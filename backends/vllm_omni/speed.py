"""``speed`` as vLLM-Omni applies it: a phase-vocoder time stretch of the finished audio.

Why here: vLLM-Omni 0.30.0 does not pass ``speed`` to a model unless the model has native speed
control (IndexTTS-2.5). Every other model generates at its own pace and the server stretches
the whole file afterwards, so the audio is exactly ``int(frames / speed)`` frames long
(``entrypoints/openai/audio_utils_mixin.py`` ``AudioMixin._apply_speed_adjustment``:
torchaudio ``Spectrogram`` -> ``TimeStretch`` -> ``InverseSpectrogram`` with a 768-sample Hann
window and a 192-sample hop). ``listenlab api`` answers ``speed`` the same way over every
backend, so a client gets the same length from it as from vLLM-Omni.

This is the same algorithm in NumPy (torchaudio's ``phase_vocoder`` and ``torch.istft``, step
by step), so listenlab needs no torch. ``tests/conformance`` compares it with torchaudio.
"""

from __future__ import annotations

import math

import numpy as np

N_FFT = 768
"""``_apply_speed_adjustment``'s ``n_fft`` ("a speech-sized analysis window")."""
HOP = N_FFT // 4


def hann(n: int = N_FFT) -> np.ndarray:
    """``torch.hann_window(n)``: the periodic Hann window."""
    return (0.5 - 0.5 * np.cos(2 * math.pi * np.arange(n) / n)).astype(np.float32)


def stft(x: np.ndarray, window: np.ndarray) -> np.ndarray:
    """``torch.stft(center=True, pad_mode="reflect", onesided=True)``: (freq, frames)."""
    pad = N_FFT // 2
    y = np.pad(x, (pad, pad), mode="reflect")
    frames = 1 + (len(y) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(frames)[:, None]
    return np.fft.rfft(y[idx] * window, axis=1).T.astype(np.complex64)


def linspace32(end: float, n: int) -> np.ndarray:
    """``torch.linspace(0, end, n)`` in float32 to the last bit: the first half counts up from
    0, the second down from ``end``, each with one rounding (the CPU kernel's fused multiply-add).
    The phase advance is accumulated over every frame, so its last bits matter."""
    e = np.float32(end)
    step = np.float32(e / np.float32(n - 1))
    idx = np.arange(n)
    up = (np.float64(step) * idx).astype(np.float32)
    down = (np.float64(e) - np.float64(step) * (n - 1 - idx)).astype(np.float32)
    return np.where(idx < n // 2, up, down)


def angle(z: np.ndarray) -> np.ndarray:
    """``torch.angle`` of complex64 values: atan2 rounded to float32 (NumPy's own float32
    atan2 differs from torch's in the last bit for a third of the values, torch's and a
    float64 atan2 rounded for 2 %)."""
    return np.arctan2(z.imag.astype(np.float64), z.real.astype(np.float64)).astype(np.float32)


def phase_vocoder(spec: np.ndarray, rate: float) -> np.ndarray:
    """``torchaudio.functional.phase_vocoder`` for one channel's (freq, frames) spectrogram."""
    n_freq = spec.shape[0]
    phase_advance = linspace32(math.pi * HOP, n_freq)[:, None]
    steps = np.arange(0, spec.shape[1], rate, dtype=np.float32)
    alphas = steps % 1.0
    phase_0 = angle(spec[:, :1])
    padded = np.pad(spec, ((0, 0), (0, 2)))
    s0 = padded[:, steps.astype(np.int64)]
    s1 = padded[:, (steps + 1).astype(np.int64)]
    two_pi = np.float32(2 * math.pi)
    phase = angle(s1) - angle(s0) - phase_advance
    phase = phase - two_pi * np.round(phase / two_pi)
    phase = phase + phase_advance
    phase = np.concatenate([phase_0, phase[:, :-1]], axis=1)
    acc = np.cumsum(phase, axis=1, dtype=np.float64).astype(np.float32)
    mag = alphas * np.abs(s1) + (np.float32(1) - alphas) * np.abs(s0)
    cos = np.cos(acc.astype(np.float64)).astype(np.float32)
    sin = np.sin(acc.astype(np.float64)).astype(np.float32)
    return (mag * cos + 1j * (mag * sin)).astype(np.complex64)


def istft(spec: np.ndarray, window: np.ndarray, length: int) -> np.ndarray:
    """``torch.istft(center=True, length=length)``: overlap-add over the squared window."""
    frames = spec.shape[1]
    parts = (np.fft.irfft(spec.T, n=N_FFT, axis=1) * window).astype(np.float32)
    total = N_FFT + HOP * (frames - 1)
    y = np.zeros(total, np.float32)
    env = np.zeros(total, np.float32)
    w2 = window * window
    for i in range(frames):
        y[i * HOP : i * HOP + N_FFT] += parts[i]
        env[i * HOP : i * HOP + N_FFT] += w2
    start = N_FFT // 2
    y, env = y[start : start + length], env[start : start + length]
    out = np.zeros(length, np.float32)
    n = min(length, len(y))
    ok = env[:n] > 1e-11
    out[:n][ok] = y[:n][ok] / env[:n][ok]
    return out


def stretch(audio: np.ndarray, speed: float) -> np.ndarray:
    """``audio`` (float, ``(frames,)`` or ``(frames, channels)``) ``speed`` times as fast:
    ``int(frames / speed)`` frames, pitch kept. ``speed == 1`` returns it unchanged."""
    if speed == 1.0:
        return audio
    x = np.asarray(audio, dtype=np.float32)
    length = int(x.shape[0] / speed)
    window = hann()
    channels = x[:, None] if x.ndim == 1 else x
    if len(channels) <= N_FFT // 2:
        raise ValueError("Failed to apply speed adjustment.")  # reflect padding needs more
    out = np.stack(
        [istft(phase_vocoder(stft(c, window), speed), window, length) for c in channels.T], axis=1
    ).astype(np.float32)
    return out[:, 0] if x.ndim == 1 else out


def stretch_pcm(pcm: np.ndarray, channels: int, speed: float) -> np.ndarray:
    """Interleaved int16 PCM through :func:`stretch`, back to int16 as vLLM-Omni writes it
    (samples over 32768, rounded to nearest, clipped)."""
    if speed == 1.0:
        return pcm
    x = pcm.reshape(-1, channels).astype(np.float32) / 32768.0
    y = stretch(x if channels > 1 else x[:, 0], speed)
    return np.clip(np.rint(np.asarray(y).reshape(-1) * 32768.0), -32768, 32767).astype(np.int16)


__all__ = ["HOP", "N_FFT", "stretch", "stretch_pcm"]
