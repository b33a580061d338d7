"""Normalised cross-correlation, batched and kept on one BLAS thread: the replay search's arithmetic."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import fft as sp_fft

# OpenBLAS runs a product on one thread up to m*n*k = 65536 * 4 multiply-adds, and a dot
# product up to 10000 terms; past that it wakes a second thread, which on a busy 2-core machine
# costs more CPU than it saves. The detector keeps its products under these sizes.
_BLAS_ONE_THREAD = 65536 * 4
_DOT_ONE_THREAD = 8192


def ncc(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    # (einsum, not BLAS: a long block would wake a second BLAS thread)
    d = float(np.sqrt(np.einsum("i,i->", a, a) * np.einsum("i,i->", b, b)))
    return float(np.einsum("i,i->", a, b) / d) if d > 0 else 0.0


def refine(x: np.ndarray, src0: int, qs: int, n: int, q: int) -> tuple[float, int]:
    """Best full-rate NCC (and source start) within ``q`` samples of ``src0``."""
    lo, hi = max(0, src0 - q), min(src0 + q, qs - n)
    if hi < lo:
        return -1.0, src0
    a = x[lo : hi + n].astype(np.float64)
    b = x[qs : qs + n].astype(np.float64)
    b = b - b.mean()
    num = correlate(a, b)  # a few dozen lags: direct (dot products)
    c1 = np.r_[0.0, np.cumsum(a)]
    c2 = np.r_[0.0, np.cumsum(a * a)]
    ssum = c1[n:] - c1[:-n]
    var = np.maximum(c2[n:] - c2[:-n] - ssum * ssum / n, 1e-30)
    v = num / np.sqrt(var * max(float(np.einsum("i,i->", b, b)), 1e-30))  # (no BLAS threads)
    j = int(np.argmax(v))
    return float(v[j]), lo + j


def correlate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.correlate(a, b, "valid")`` as sums over pieces of ``b`` short enough for BLAS to
    compute each dot product on one thread."""
    if len(b) <= _DOT_ONE_THREAD:
        return np.correlate(a, b, "valid")
    lags = len(a) - len(b) + 1
    out = np.zeros(lags)
    for k in range(0, len(b), _DOT_ONE_THREAD):
        piece = b[k : k + _DOT_ONE_THREAD]
        out += np.correlate(a[k : k + len(piece) + lags - 1], piece, "valid")
    return out


def ncc_batch(y: np.ndarray, c1: np.ndarray, c2: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """NCC of each row of ``queries`` at every start in ``y`` (one batched FFT for all seams)."""
    m, L = queries.shape
    N = len(y)
    qn = queries - queries.mean(axis=1, keepdims=True)
    qe = np.sqrt(np.einsum("ij,ij->i", qn, qn))
    rows = _BLAS_ONE_THREAD // max(1, (N - L + 1) * L)
    if rows >= 4:
        # short queries on a short take (the usual case: 0.15-0.6 s of 10 ms frames): matrix
        # products over the sliding windows are several times cheaper than the FFTs; a few
        # queries each, so that BLAS stays on one thread (on a busy machine a second thread
        # waits for a core and doubles the CPU time)
        win = sliding_window_view(y, L).T
        num = np.concatenate([qn[k : k + rows] @ win for k in range(0, m, rows)])
    else:
        n = sp_fft.next_fast_len(N + L - 1, real=True)
        num = sp_fft.irfft(
            sp_fft.rfft(y, n)[None, :] * np.conj(sp_fft.rfft(qn, n, axis=1)), n, axis=1
        )
        num = num[:, : N - L + 1]
    ssum = c1[L : N + 1] - c1[: N - L + 1]
    var = np.maximum(c2[L : N + 1] - c2[: N - L + 1] - ssum * ssum / L, 1e-12)
    return num / (np.maximum(qe, 1e-12)[:, None] * np.sqrt(var)[None, :])


def envelope_precheck(
    env: np.ndarray,
    e1: np.ndarray,
    e2: np.ndarray,
    first: np.ndarray,
    lookback: np.ndarray,
    frames: np.ndarray,
    floor: float,
    most: int = 3,
) -> np.ndarray:
    """Best envelope matches of each query (``first`` frame, ``frames`` long) against the
    earlier envelope (from ``lookback``; the match ends before the query begins). Queries of one
    length are batched, 64 at a time (bounded memory). Returns ``(len(first), most)`` frames of
    the best matches >= ``floor`` (greedy, at least a query length apart, best first; -1: none)."""
    out = np.full((len(first), most), -1, np.int64)
    for L in np.unique(frames):
        rows = np.flatnonzero(frames == L)
        for k in range(0, len(rows), 64):
            blk = rows[k : k + 64]
            c = ncc_batch(env, e1, e2, env[first[blk, None] + np.arange(L)[None, :]])
            j = np.arange(c.shape[1])[None, :]
            ok = (j >= lookback[blk, None]) & (
                j < np.maximum(lookback[blk], first[blk] - L + 1)[:, None]
            )
            c = np.where(ok, c, -np.inf)
            top = np.maximum(floor, c.max(axis=1) - 0.05)
            rr = np.arange(len(blk))
            for m in range(most):  # greedy: the best, then the best at least L away, ...
                a = c.argmax(axis=1)
                v = c[rr, a]
                hit = v >= top
                out[blk[hit], m] = a[hit]
                if not hit.any():
                    break
                c = np.where(np.abs(j - a[:, None]) < L, -np.inf, c)
    return out


def coarse_check(
    y: np.ndarray, qs: np.ndarray, qlen: np.ndarray, cand: np.ndarray, d: int, floor: float
) -> np.ndarray:
    """Best NCC at the search rate within ``d`` samples of each candidate source start ``cand``
    for the query starting at ``qs`` (``qlen`` samples; all at the search rate), batched over
    every (query, candidate) pair. Returns the best start per pair, or -1 below ``floor``."""
    out = np.full(len(cand), -1, np.int64)
    c1 = np.r_[0.0, np.cumsum(y, dtype=np.float64)]
    c2 = np.r_[0.0, np.cumsum(np.square(y, dtype=np.float64))]
    for L in np.unique(qlen):
        rows = np.flatnonzero(qlen == L)
        if L < 8:
            continue
        q_ = y[qs[rows, None] + np.arange(L)[None, :]]
        q_ = q_ - q_.mean(axis=1, keepdims=True)
        base = cand[rows] - d
        seg = y[np.clip(base[:, None] + np.arange(L + 2 * d)[None, :], 0, len(y) - 1)]
        n = sp_fft.next_fast_len(L + 2 * d, real=True)
        num = sp_fft.irfft(sp_fft.rfft(seg, n, axis=1) * np.conj(sp_fft.rfft(q_, n, axis=1)), n)
        num = num[:, : 2 * d + 1]
        st = base[:, None] + np.arange(2 * d + 1)[None, :]  # source starts
        # window sums from the take's running sums (starts outside the take are masked below)
        a, b = np.clip(st, 0, len(y) - L), np.clip(st + L, L, len(y))
        s1 = c1[b] - c1[a]
        var = np.maximum(c2[b] - c2[a] - s1 * s1 / L, 0.0)
        den = np.sqrt(var * np.einsum("pl,pl->p", q_, q_)[:, None])
        ok = (st >= 0) & (st + L <= qs[rows, None])  # the source ends before the query starts
        cc = np.where(ok, num / np.maximum(den, 1e-12), -np.inf)
        a = cc.argmax(axis=1)
        r = np.arange(len(rows))
        good = cc[r, a] >= floor
        out[rows[good]] = st[r, a][good]
    return out
