"""``crosstalk``: the take's onset says other words, or speaks in another voice, than its
reference (another request's audio at the start)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.findings import Finding
from evaluation.glitches.frames import SCALE, Signal, frame_energies, last_active_s, nearest
from evaluation.glitches.spectra import dtw_ends_many, filterbank, frame_bands, ltas, spectra


def _active_frames(
    sig: Signal, xs: np.ndarray, t0: float, t1: float, n: int, scale: np.float32 = SCALE
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n``-sample frames of ``[t0, t1)`` of ``xs`` (samples times ``scale``; int16 or
    float32) and which of them are active. Pauses (natural, or gaps and stalls padded with
    silence) are left out of the prints, so a print covers the same words whatever the
    pausing."""
    seg = xs[max(0, int(t0 * sig.sr)) : max(0, int(t1 * sig.sr))]
    m = len(seg) // n
    if m < 2:
        return np.zeros((0, n), np.float32), np.zeros(0, np.int64)
    fr = seg[: m * n].reshape(m, n)
    db = 10 * np.log10(frame_energies(fr, scale) + 1e-12)
    return fr, np.flatnonzero(db >= sig.thresh)


def _picked(fr: np.ndarray, idx: np.ndarray, scale: np.float32) -> np.ndarray:
    return np.multiply(fr[idx], scale, dtype=np.float32)


def _without_cuts(
    s: Signal, cuts: Sequence[Finding], t_on: float, t_off: float
) -> tuple[np.ndarray, float]:
    """The take's samples with each replay's and gap's audio cut out, and its new last active
    time (cut from the end, so earlier cuts stay where they were found)."""
    x = s.x
    for f in sorted(cuts, key=lambda f: -f.time_s):
        span = f.evidence.get("length_s", f.evidence.get("pause_s", 0.0))
        a, b = int(f.time_s * s.sr), int((f.time_s + span) * s.sr)
        if t_on * s.sr <= a < b <= len(x):
            x = np.concatenate([x[:a], x[b:]])
            t_off -= (b - a) / s.sr if b / s.sr <= t_off else 0.0
    return x, t_off


def _compare_prints(a: np.ndarray, b: np.ndarray, ends: np.ndarray) -> tuple[float, float]:
    """Content cost of ``a`` against as many active frames of ``b``, and the voice distance
    against the prefix of ``b`` that says the same words (found by an open-ended alignment,
    ``ends``: half to twice as long, so the speaking rate does not change which sounds, e.g.
    fricatives, each long-term spectrum holds)."""
    n = len(a)
    lo, hi = max(1, n // 2), min(len(b), 2 * n)
    j = lo - 1 + int(np.argmin(ends[lo - 1 : hi]))
    voice = float(np.sqrt(np.mean((ltas(a) - ltas(b[: j + 1])) ** 2)))
    return float(ends[min(n, len(b)) - 1]), voice


def find_crosstalk(
    s: Signal, ref: Signal, cfg: DetectorConfig, cuts: Sequence[Finding] = ()
) -> list[Finding]:
    """Does the take start with other words or another voice than its reference?

    ``cuts`` are the replays and gaps already found: their audio is cut out before the
    comparison, so a replay or gap near the start is reported once, as itself, not also as
    foreign content. Only active frames are compared (pauses differ between renderings), and
    the reference's side of each comparison is found by an open-ended alignment (its speaking
    rate may be half to twice the take's), so the prints cover the same words."""
    fs = 0.02
    on_s = cfg.crosstalk_onset_s
    t_on = s.first_active_frame() * s.frame_s
    t_off = last_active_s(s)
    x, t_off = _without_cuts(s, cuts, t_on, t_off)
    r_on, r_off = ref.first_active_frame() * ref.frame_s, last_active_s(ref)
    n_on = int(round(on_s / fs))
    n_t_fr, oh_t = filterbank(s.sr, fs)
    n_r_fr, oh_r = filterbank(ref.sr, fs)
    one = np.float32(1)
    t_fr, t_act = _active_frames(s, x, t_on, t_off, n_t_fr, one)
    # the reference's own samples: its float32 copy is never needed here
    r_fr, r_act = _active_frames(ref, ref.raw, r_on, r_off, n_r_fr, ref.raw_scale)
    n_t, n_r = len(t_act), len(r_act)
    if n_t < 0.8 * n_on or n_r < 0.8 * n_on:
        return []

    # only the frames that are compared are transformed (a long take has many more)
    head = (
        frame_bands(_picked(t_fr, t_act[:n_on], one), oh_t, s.sr),
        frame_bands(_picked(r_fr, r_act[: 2 * n_on], ref.raw_scale), oh_r, ref.sr),
    )
    (ends,) = dtw_ends_many([(spectra(head[0]), spectra(head[1]))])
    onset, voice = _compare_prints(*head, ends)
    if onset < cfg.crosstalk_min_dist and voice < cfg.crosstalk_voice_dist:
        return []  # neither test can hold, whatever the rest of the take says
    # the rest of the take is compared at its end (end-aligned, reversed so the open end is
    # the start): foreign audio longer than the onset window must not leak into the
    # comparison that says "the rest matches"
    n_b = min(n_on, n_t - n_on, n_r - n_on)
    body = body_voice = None
    if n_b * fs >= 0.5:
        tail = (
            frame_bands(_picked(t_fr, t_act[-n_b:], one), oh_t, s.sr)[::-1],
            frame_bands(_picked(r_fr, r_act[-2 * n_b :], ref.raw_scale), oh_r, ref.sr)[::-1],
        )
        (ends,) = dtw_ends_many([(spectra(tail[0]), spectra(tail[1]))])
        body, body_voice = _compare_prints(*tail, ends)
    ev = {
        "onset_dist": onset,
        "body_dist": body,
        "onset_voice_dist": voice,
        "body_voice_dist": body_voice,
    }
    content = onset >= cfg.crosstalk_min_dist and (
        body is None or onset >= cfg.crosstalk_ratio * body
    )
    other_voice = voice >= cfg.crosstalk_voice_dist and (
        body_voice is None or voice >= cfg.crosstalk_voice_ratio * body_voice
    )
    if content or other_voice:
        bi, _ = nearest(s.boundaries / s.sr, t_on)
        sev = max(onset / cfg.crosstalk_min_dist, voice / cfg.crosstalk_voice_dist)
        # another voice is the more specific cause: the same words in another voice also
        # move the content distance a little
        ev["foreign"] = "voice" if other_voice else "content"
        return [Finding("crosstalk", t_on, bi, float(sev), ev)]
    return []
