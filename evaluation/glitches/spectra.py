"""Band-energy prints and their alignment (DTW): what the replay check asks of a reference and
what the cross-talk check compares."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from scipy import fft as sp_fft

from evaluation.glitches.frames import Signal


@functools.lru_cache(maxsize=16)
def filterbank(sr: int, fs: float) -> tuple[int, np.ndarray]:
    """Frame length for ``fs`` seconds, and the FFT-bin -> band matrix (24 log-spaced bands,
    100 Hz to 7 kHz) for it."""
    n = max(64, int(sr * fs))
    nfft = 1 << (n - 1).bit_length()
    freqs = np.fft.rfftfreq(nfft, 1 / sr)
    edges = np.geomspace(100, min(7000, sr / 2 - 1), 25)
    band = np.digitize(freqs, edges) - 1
    onehot = (band[:, None] == np.arange(24)[None, :]).astype(np.float32)
    onehot.flags.writeable = False  # cached: shared by every call
    return n, onehot


def band_sum(p: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """``p @ onehot`` (bins -> bands) as one ``reduceat`` over runs of bins: each band is a run
    of bins, and a BLAS product of these small matrices spends more on threads than on sums."""
    cols = np.flatnonzero(onehot.any(axis=1))
    start = np.searchsorted(np.argmax(onehot[cols], axis=1), np.arange(25), side="left")
    # a zero column after the last bin: every start is a valid index, an empty band sums to 0
    seg = np.pad(p[:, cols[0] : cols[-1] + 1], ((0, 0), (0, 1)))
    out = np.add.reduceat(seg, start[:-1], axis=1, dtype=np.float64)
    out[:, start[1:] == start[:-1]] = 0.0
    return out


@functools.lru_cache(maxsize=16)
def _band_plan(n: int, nfft: int, sr: int) -> tuple[int, np.ndarray, np.ndarray]:
    """How frames of ``n`` samples become band energies: the decimation (2 at >= 32 kHz: the
    bands end at 7 kHz), the Hann window, and per FFT bin the power gain that undoes the
    pair-sum filter (1 / cos(pi f / sr)^2), so the bands hold what the full-rate FFT saw."""
    dec = 2 if sr >= 32000 and n % 2 == 0 and nfft % 4 == 0 else 1
    win = np.hanning(n).astype(np.float32)
    f = np.arange(nfft // (2 * dec) + 1) * sr / nfft
    gain = (1.0 / np.maximum(np.cos(np.pi * f / sr) ** 2, 1e-6)).astype(np.float32)
    for a in (win, gain):
        a.flags.writeable = False
    return dec, win, gain


def frame_bands(fr: np.ndarray, onehot: np.ndarray, sr: int) -> np.ndarray:
    """Band energies of Hann-windowed frames (rows of ``fr``), as the full-rate FFT of
    ``2 * (bins - 1)`` points gives them. At 44.1-48 kHz each windowed frame is pair-summed
    first and the filter's gain undone per bin: half the FFT for the same bands (what folds
    back is above 17 kHz, attenuated >= 7 dB more, where speech has almost no energy)."""
    nfft = 2 * (onehot.shape[0] - 1)
    dec, win, gain = _band_plan(fr.shape[1], nfft, sr)
    w = fr * win
    if dec == 1:
        spec = sp_fft.rfft(w, nfft, axis=1)  # float32
        return band_sum(spec.real**2 + spec.imag**2, onehot)
    w = w[:, 0::2] + w[:, 1::2]  # x[2m] + x[2m+1]: half the DFT sums, gain 2 cos (pi f / sr)
    spec = sp_fft.rfft(w, nfft // 2, axis=1)
    p = (spec.real**2 + spec.imag**2) * gain
    return band_sum(p, onehot[: len(gain)])


def spectra(e: np.ndarray) -> np.ndarray:
    """Log band energies with the mean removed: a content print (the words, not the channel)."""
    if not len(e):
        return e
    f = np.log(e + 1e-9)
    return f - f.mean(axis=0, keepdims=True)


def prints(sig: Signal, fs: float = 0.02) -> np.ndarray:
    """Content prints of every ``fs`` frame of a take (see :func:`spectra`)."""
    n, onehot = filterbank(sig.sr, fs)
    m = sig.n // n
    if m < 2:
        return np.zeros((0, onehot.shape[1]))
    return spectra(frame_bands(sig.x[: m * n].reshape(m, n), onehot, sig.sr))


def ltas(e: np.ndarray) -> np.ndarray:
    """Long-term spectrum of active frames (pauses already left out), level removed: a voice
    print. Every active frame counts: picking only the louder ones made the high bands depend
    on whether a few fricatives crossed the cut (two renderings of one text then differed)."""
    if not len(e):
        return np.zeros(24)
    f = np.log(e.mean(axis=0) + 1e-12)
    return f - f.mean()


def dtw_ends(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dynamic-time-warping cost (cosine frame distance, per path step) of all of ``a`` against
    every prefix of ``b``: entry j is the cost of ending at ``b[j]`` (open end).

    Same words in the same voice align cheaply even when timing differs (~0.01-0.09 for two
    Piper renditions of one text); other words or another voice do not (>= 0.2).
    """
    return dtw_ends_many([(a, b)])[0]


def dtw_ends_many(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """:func:`dtw_ends` of several pairs in one pass over the rows (the row loop is Python:
    running the pairs side by side halves its cost when a take needs two alignments)."""
    out: list[np.ndarray | None] = [None] * len(pairs)
    costs = []
    for k, (a, b) in enumerate(pairs):
        if not len(a) or not len(b):
            out[k] = np.ones(max(1, len(b)))
            continue
        an = a / (np.linalg.norm(a, axis=1, keepdims=True) + 1e-9)
        bn = b / (np.linalg.norm(b, axis=1, keepdims=True) + 1e-9)
        costs.append((k, 1 - np.einsum("ik,jk->ij", an, bn)))  # (small: no BLAS threads)
    if costs:
        n_max = max(c.shape[0] for _, c in costs)
        m_max = max(c.shape[1] for _, c in costs)
        # padding on the right never reaches the columns before it (a path only moves right);
        # the pairs are the last axis, so each row's scan runs over contiguous memory
        cc = np.full((n_max, m_max, len(costs)), 4.0)
        for r, (_, c) in enumerate(costs):
            cc[: c.shape[0], : c.shape[1], r] = c
        prev = np.full((m_max + 1, len(costs)), np.inf)
        prev[0] = 0.0
        # the (i, j-1) step: row[j] = min(down[j], row[j-1] + c[i, j]) is a min-plus prefix
        # scan, i.e. C[j] + min_{k<=j}(down[k] - C[k]) with C the running sum of c[i]
        run = np.cumsum(cc, axis=1)
        step = cc - run
        down = np.empty((m_max, len(costs)))
        done: dict[int, list[tuple[int, int, int]]] = {}
        for r, (k, c) in enumerate(costs):
            done.setdefault(c.shape[0] - 1, []).append((r, k, c.shape[1]))
        for i in range(n_max):
            np.minimum(prev[1:], prev[:-1], out=down)  # from (i-1, j) or (i-1, j-1)
            down += step[i]
            np.minimum.accumulate(down, axis=0, out=prev[1:])
            prev[1:] += run[i]
            prev[0] = np.inf  # (only the first row starts from the corner)
            for r, k, m in done.get(i, ()):
                out[k] = prev[1 : m + 1, r] / (i + 1 + np.arange(1, m + 1))
    return out  # type: ignore[return-value]


def dtw_cost(a: np.ndarray, b: np.ndarray) -> float:
    """DTW cost of all of ``a`` against all of ``b`` (see :func:`dtw_ends`)."""
    return float(dtw_ends(a, b)[-1]) if len(a) and len(b) else 1.0


def dtw_path(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of ``a``, the median row of ``b`` it is aligned to (full DTW path)."""
    an = a / (np.linalg.norm(a, axis=1, keepdims=True) + 1e-9)
    bn = b / (np.linalg.norm(b, axis=1, keepdims=True) + 1e-9)
    c = 1 - np.einsum("ik,jk->ij", an, bn)
    n, m = c.shape
    acc = np.empty((n, m))
    prev = np.full(m + 1, np.inf)
    prev[0] = 0.0
    for i in range(n):
        down = np.minimum(prev[1:], prev[:-1]) + c[i]
        cs = np.cumsum(c[i])
        prev[1:] = cs + np.minimum.accumulate(down - cs)
        prev[0] = np.inf
        acc[i] = prev[1:]
    i, j = n - 1, m - 1
    pairs = [(i, j)]
    while i > 0 or j > 0:
        steps = [
            (acc[i - 1, j - 1] if i and j else np.inf, i - 1, j - 1),
            (acc[i - 1, j] if i else np.inf, i - 1, j),
            (acc[i, j - 1] if j else np.inf, i, j - 1),
        ]
        _, i, j = min(steps)
        pairs.append((i, j))
    pa = np.array(pairs[::-1])
    out = np.zeros(n, np.int64)
    for k in range(n):
        out[k] = int(np.median(pa[pa[:, 0] == k, 1]))
    return out
