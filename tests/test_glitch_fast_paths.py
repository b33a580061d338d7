"""The detector's fast paths (issue #10's speed target) compute exactly what their plain
definitions do: a batched DTW equals the textbook recurrence, band sums equal the filter-bank
product, the partial-sort percentile equals numpy's, the matrix-product NCC equals the FFT one
and both equal a direct correlation, and the refine step finds the true lag of real speech."""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from evaluation.glitches.correlation import correlate, ncc_batch, refine
from evaluation.glitches.frames import percentile
from evaluation.glitches.spectra import band_sum, dtw_ends, dtw_ends_many, filterbank, frame_bands
from tests.support.evaluation_util import synthesize


def _dtw_plain(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Open-end DTW by the textbook recurrence (a Python double loop), per-step normalised."""
    an = a / (np.linalg.norm(a, axis=1, keepdims=True) + 1e-9)
    bn = b / (np.linalg.norm(b, axis=1, keepdims=True) + 1e-9)
    c = 1 - an @ bn.T
    n, m = c.shape
    acc = np.full((n, m), np.inf)
    for i in range(n):
        for j in range(m):
            if i == 0 and j == 0:
                best = 0.0
            else:
                best = min(
                    acc[i - 1, j - 1] if i and j else np.inf,
                    acc[i - 1, j] if i else np.inf,
                    acc[i, j - 1] if j else np.inf,
                )
            acc[i, j] = c[i, j] + best
    return acc[-1] / (n + np.arange(1, m + 1))


def test_batched_dtw_equals_the_recurrence():
    rng = np.random.default_rng(7)
    shapes = [(30, 60), (12, 25), (1, 4), (20, 8), (5, 5)]
    pairs = [(rng.standard_normal((n, 24)), rng.standard_normal((m, 24))) for n, m in shapes]
    got = dtw_ends_many(pairs)
    assert [len(g) for g in got] == [m for _, m in shapes]
    for (a, b), g in zip(pairs, got, strict=True):
        np.testing.assert_allclose(g, _dtw_plain(a, b), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dtw_ends(a, b), g, rtol=0, atol=0)
    # an empty side gives the neutral "no alignment" answer and does not disturb the others
    empty = dtw_ends_many([(np.zeros((0, 24)), pairs[0][1]), pairs[1]])
    assert np.all(empty[0] == 1.0) and len(empty[0]) == 60
    np.testing.assert_allclose(empty[1], _dtw_plain(*pairs[1]), rtol=1e-12)


@pytest.mark.parametrize("sr", [16000, 22050, 24000, 44100, 48000])
def test_band_sums_equal_the_filter_bank_product(sr):
    n, onehot = filterbank(sr, 0.02)
    assert n == int(sr * 0.02)
    assert not onehot.flags.writeable  # cached and shared: nobody may change it
    p = np.random.default_rng(sr).random((9, onehot.shape[0])).astype(np.float32)
    np.testing.assert_allclose(band_sum(p, onehot), p.astype(np.float64) @ onehot, rtol=1e-9)


def test_partial_sort_percentile_equals_numpy():
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 10, 449, 4500):
        a = rng.normal(-40, 15, n)
        for q in (0, 5, 50, 95, 100):
            assert percentile(a, q) == pytest.approx(float(np.percentile(a, q)), abs=1e-12)


@pytest.mark.parametrize("n_frames", [450, 60_000])  # the matrix-product path, the FFT path
def test_envelope_ncc_equals_direct_correlation(n_frames):
    rng = np.random.default_rng(n_frames)
    y = np.cumsum(rng.standard_normal(n_frames))  # a wandering, envelope-like signal
    c1, c2 = np.r_[0.0, np.cumsum(y)], np.r_[0.0, np.cumsum(y * y)]
    L = 20
    starts = np.array([5, n_frames // 2, n_frames - L - 1])
    got = ncc_batch(y, c1, c2, y[starts[:, None] + np.arange(L)[None, :]])
    assert got.shape == (3, n_frames - L + 1)
    for r, s in enumerate(starts):
        assert got[r, s] == pytest.approx(1.0, abs=1e-6)  # each query matches itself
        for j in (0, 17, n_frames // 3, n_frames - L):
            want = np.corrcoef(y[s : s + L], y[j : j + L])[0, 1]
            assert got[r, j] == pytest.approx(want, abs=1e-6)


def test_refine_finds_the_lag_of_a_real_repeat(piper_det):
    """Real Piper speech with its own first 0.3 s pasted again later: the refine step, started a
    few samples off, finds the exact source sample and an NCC of 1."""
    (take,) = synthesize(piper_det, ["The birch canoe slid on the smooth planks."])
    x = take.audio.reshape(-1).astype(np.float32) / 32768
    sr = take.sample_rate
    src, n = int(0.35 * sr), int(0.3 * sr)
    y = np.concatenate([x, x[src : src + n], x[: sr // 2]])
    qs = len(x)
    v, st = refine(y, src + 7, qs, n, 11)
    assert st == src and v == pytest.approx(1.0, abs=1e-6)
    v2, st2 = refine(y, src - 30, qs, n, 11)  # out of reach: a lesser match, never 1
    assert st2 != src and v2 < 0.99


@pytest.mark.parametrize("sr", [24000, 44100, 48000])
def test_frame_bands_equal_the_full_rate_spectrum(piper_det, sr):
    """Real Piper speech resampled to each rate: the band energies of the fast path (at 44.1-48
    kHz: pair-averaged frames, half the FFT, the filter's gain undone) equal those of the plain
    full-rate FFT of every Hann-windowed 20 ms frame, in every band that has bins."""
    (take,) = synthesize(piper_det, ["A large size in stockings is hard to sell."])
    x = soxr.resample(take.audio.reshape(-1).astype(np.float32) / 32768, take.sample_rate, sr)
    n, onehot = filterbank(sr, 0.02)
    m = len(x) // n
    fr = x[: m * n].reshape(m, n).astype(np.float32)
    spec = np.fft.rfft(fr * np.hanning(n), 2 * (onehot.shape[0] - 1), axis=1)
    plain = (np.abs(spec) ** 2) @ onehot
    fast = frame_bands(fr, onehot, sr)
    assert fast.shape == plain.shape == (m, 24)
    speech = plain.sum(axis=1) > plain.sum(axis=1).max() * 1e-3
    bands = onehot.sum(axis=0) > 0
    assert speech.sum() > 50 and bands.sum() >= 20
    d = np.abs(np.log(fast[speech][:, bands]) - np.log(plain[speech][:, bands]))
    assert d.max() < 0.01  # nepers: under 0.05 dB in every band of every speech frame


@pytest.mark.parametrize("n", [100, 8192, 8193, 20_000, 30_001])
def test_piecewise_correlation_equals_numpy(n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n + 48), rng.standard_normal(n)
    np.testing.assert_allclose(correlate(a, b), np.correlate(a, b, "valid"), rtol=1e-10, atol=1e-9)
