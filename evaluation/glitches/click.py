"""``click``: a waveform discontinuity at a seam, told by how badly short-term linear
prediction fails there from both sides, against the same statistic away from the seams."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import fft as sp_fft

from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.findings import Finding
from evaluation.glitches.frames import Signal


def _lpc_scores(
    x: np.ndarray,
    pts: np.ndarray,
    w: int,
    p: int,
    floor: float,
    search: int = 0,
    screen: tuple[float, float] | None = None,
    top: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric short-term prediction failure at each point ``t`` (a seam between t-1 and t),
    and at the ``search`` samples either side of it.

    Returns ``(score, jump)``, each ``(len(pts), 2 * search + 1)``: score = min(forward,
    backward) residual over in-window residual RMS; jump = the smaller of the two absolute
    residuals (what would be heard). One predictor per side and point is fit on the ``w + p``
    samples before the earliest (forward) or after the latest (backward) searched offset, and
    used for all offsets (a one-sample shift of the fit window changes nothing that matters).
    With ``screen = (min_score, min_jump)`` the backward side is computed only where the
    forward side reaches both (elsewhere the minimum cannot; the forward values are returned
    there, an upper bound that is still below the screen). With ``top = k`` only the k largest
    scores are exact (the backward side is computed in order of the forward score until no
    other point can reach them); the rest are upper bounds below them.
    """
    n_off = 2 * search + 1
    if not len(pts):
        return np.zeros((0, n_off)), np.zeros((0, n_off))
    k = 2
    win = np.hanning(w + p).astype(np.float32)
    lags = np.abs(np.arange(p)[:, None] - np.arange(p)[None, :])
    nfft = sp_fft.next_fast_len(2 * (w + p), real=True)
    off = np.arange(n_off)  # offset index o: point pts + o - search
    lo = w // 2  # residuals are needed from here on (the in-window RMS) ...
    span = w + 2 * search + k - lo  # ... to the last searched point + k

    def one_side(seg: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``seg`` (n, w + p + 2 * search + k); ``pos`` the residual index of each offset."""
        # float32 transforms and residuals (twice as fast; the conditioning below is 1e-4,
        # far above float32's 1e-7), the normal equations solved in float64
        spec = sp_fft.rfft(seg[:, : w + p] * win, nfft, axis=1)
        r = sp_fft.irfft(spec.real**2 + spec.imag**2, nfft, axis=1)[:, : p + 1]
        r = r.astype(np.float64)
        r[:, 0] = r[:, 0] * (1 + 1e-4) + 1e-10  # a little white-noise conditioning
        a = np.linalg.solve(r[:, lags], r[:, 1:, None])[:, :, 0].astype(np.float32)
        lagged = sliding_window_view(seg[:, lo:], p + 1, axis=1)[:, :span]  # x[j-p .. j]
        e = lagged[:, :, -1] - np.einsum("nwk,nk->nw", lagged[:, :, -2::-1], a)
        e2 = np.pad(np.cumsum(np.square(e, dtype=np.float64), axis=1), ((0, 0), (1, 0)))
        rows = np.arange(len(seg))[:, None]
        # in-window residual RMS over the w/2 samples before each offset's point
        sig = np.sqrt((e2[rows, pos - lo] - e2[rows, pos - lo - w // 2]) / (w // 2))
        ae = np.abs(e)
        out = np.maximum(ae[rows, pos - lo], ae[rows, pos - lo + 1])
        return out / np.maximum(sig, floor), out

    n_seg = w + p + 2 * search + k
    fwd = x[pts[:, None] - search - w - p + np.arange(n_seg)[None, :]]
    # residual index (segment index - p) of offset o's point: forward x[t], backward x[t-1]
    sf_, jf = one_side(fwd, (w + off)[None, :])

    def backward(todo: np.ndarray) -> None:
        if len(todo):
            bwd = x[pts[todo, None] + search + w + p - 1 - np.arange(n_seg)[None, :]]
            sb_, jb = one_side(bwd, (w + 2 * search - off)[None, :])
            sf_[todo] = np.minimum(sf_[todo], sb_)
            jf[todo] = np.minimum(jf[todo], jb)

    if screen is not None:
        backward(np.flatnonzero(((sf_ >= screen[0]) & (jf >= screen[1])).any(axis=1)))
    elif top is not None:
        _backward_top(sf_, backward, top)
    else:
        backward(np.arange(len(pts)))
    return sf_, jf


def _backward_top(sf_: np.ndarray, backward: Callable[[np.ndarray], None], top: int) -> None:
    """Run ``backward`` on points in order of their forward score until no other point can
    reach the ``top`` largest scores (``sf_`` is updated in place)."""
    order = np.argsort(-sf_.max(axis=1), kind="stable")
    done, m = 0, min(len(sf_), 8 * top)
    while True:
        backward(order[done:m])
        done = m
        kth = np.sort(sf_[order[:m]].max(axis=1))[-min(top, m)]
        if m == len(sf_) or sf_[order[m]].max() <= kth:
            break
        m = min(len(sf_), 4 * m)


def find_clicks(s: Signal, cfg: DetectorConfig) -> list[Finding]:
    w = max(32, int(s.sr * cfg.click_window_ms / 1000))
    p = cfg.click_order
    margin = w + p + 4 + cfg.click_search_samples
    b = s.boundaries[(s.boundaries >= margin) & (s.boundaries <= s.n - margin)]
    if not len(b):
        return []
    floor = max(3e-4, 10 ** ((s.level - 60) / 20))
    off = np.arange(-cfg.click_search_samples, cfg.click_search_samples + 1)
    # the backward side only where the forward side already fails (most seams never need it)
    score, jump = _lpc_scores(
        s.x, b, w, p, floor, cfg.click_search_samples, (cfg.click_min_score, cfg.click_min_amp)
    )
    best = score.argmax(axis=1)
    bs = score[np.arange(len(b)), best]
    bj = jump[np.arange(len(b)), best]
    cand = (bs >= cfg.click_min_score) & (bj >= cfg.click_min_amp)
    if not cand.any():
        return []
    # Only now (rarely) look at the same statistic away from the seams of this take.
    rng = np.random.default_rng(s.n)
    ref = rng.integers(margin, s.n - margin, size=cfg.click_ref_points * 2)
    near = np.abs(ref[:, None] - s.boundaries[None, :]).min(axis=1) <= w
    ref = ref[~near][: cfg.click_ref_points]
    # the 99.9th percentile depends only on the few largest scores: only they need be exact
    top = len(ref) - int(np.floor(0.999 * (len(ref) - 1)))
    ref_score = _lpc_scores(s.x, ref, w, p, floor, top=top)[0][:, 0]
    q = float(np.quantile(ref_score, 0.999)) if len(ref_score) else 0.0
    need = max(cfg.click_min_score, cfg.click_ref_factor * q)
    all_b = s.boundaries.tolist()
    out = []
    for i in np.flatnonzero(cand & (bs >= need)):
        t = int(b[i] + off[best[i]])
        out.append(
            Finding(
                "click",
                t / s.sr,
                all_b.index(int(b[i])),
                float(bs[i] / need) if need else float("inf"),
                {"score": float(bs[i]), "jump": float(bj[i]), "nonseam_p999": q, "threshold": need},
            )
        )
    return out
