"""``gap``: a silence at a seam that the speech does not explain (cut in, cut off, too long,
or longer than the reference's pause)."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.findings import Finding
from evaluation.glitches.frames import Signal


def _pauses(s: Signal) -> np.ndarray:
    """Interior silent runs as ``(start_frame, end_frame, speech_frames_before)``."""
    runs = s.silent_runs()
    if not len(runs):
        return np.zeros((0, 3), np.int64)
    runs = runs[(runs[:, 0] > 0) & (runs[:, 1] < len(s.silent))]
    active_before = np.cumsum(np.r_[0, (~s.silent).astype(np.int64)])
    return (
        np.column_stack([runs, active_before[runs[:, 0]]])
        if len(runs)
        else np.zeros((0, 3), np.int64)
    )


def _dropouts(s: Signal, cfg: DetectorConfig) -> list[tuple[int, int, float, float]]:
    """Seams where near-silence is cut into speech: ``(seam, start, length, drop_db)``.

    A dropout starts *at* the seam (a stream that lost or padded a chunk): the 5 ms before the
    seam are speech, the 5 ms after it at least ``dropout_drop_db`` quieter, and the level stays
    down for ``dropout_min_s`` or more. Natural pauses and stop closures fade over 10-30 ms, so
    a random seam almost never sits at such a cliff. Zeros and low noise (-60..-45 dBFS)
    count the same: the test is the drop, not an absolute silence level.
    """
    w = max(8, int(s.sr * 0.005))
    b = s.boundaries[(s.boundaries >= w) & (s.boundaries <= s.n - w)]
    if not len(b):
        return []
    x = s.x
    around = x[b[:, None] + np.arange(-w, w)[None, :]]  # the 5 ms either side of each seam
    pre = np.einsum("ij,ij->i", around[:, :w], around[:, :w], dtype=np.float64) / w
    post = np.einsum("ij,ij->i", around[:, w:], around[:, w:], dtype=np.float64) / w
    pre_db = 10 * np.log10(pre + 1e-12)
    post_db = 10 * np.log10(post + 1e-12)
    cand = np.flatnonzero(
        (pre_db >= s.level + cfg.dropout_speech_db) & (post_db <= pre_db - cfg.dropout_drop_db)
    )
    out = []
    max_frames = int(s.sr * 3.0) // w
    for i in cand:
        st = int(b[i])
        lim = pre_db[i] - cfg.dropout_drop_db / 2  # it stays down (low noise fluctuates)
        seg = x[st : st + max_frames * w]
        m = len(seg) // w
        if m == 0:
            continue
        fr = seg[: m * w].reshape(m, w)
        db = 10 * np.log10(np.einsum("ij,ij->i", fr, fr) / w + 1e-12)
        loud = np.flatnonzero(db > lim)
        n = int(loud[0]) if len(loud) else m
        length = n * w / s.sr
        if length >= cfg.dropout_min_s:
            out.append((int(i), st, length, float(pre_db[i] - post_db[i])))
    return out


def find_gaps(s: Signal, cfg: DetectorConfig, speed: float, ref: Signal | None) -> list[Finding]:
    """Silences at seams the speech does not explain. Each pause is reported once, at the
    first seam inside it; the reference is extra evidence, never the only rule."""
    if not len(s.boundaries):
        return []
    all_b = s.boundaries.tolist()
    out: list[Finding] = []
    covered: list[tuple[float, float]] = []
    for _, st, length, drop in _dropouts(s, cfg):
        t0 = st / s.sr
        covered.append((t0 - 0.02, t0 + length + 0.02))
        out.append(
            Finding(
                "gap",
                t0,
                all_b.index(st),
                float(length / cfg.dropout_min_s),
                {"pause_s": length, "drop_db": drop, "abrupt": True, "cut_in": True},
            )
        )
    pauses = _pauses(s)
    if not len(pauses):
        return out
    ref_pauses = _pauses(ref) if ref is not None else None
    long_s = cfg.gap_long_s / min(1.0, max(speed, 0.25))
    edge = max(1, int(round(0.02 / s.frame_s)))
    for pi, k in _first_seams(s, pauses):
        st, en, before = (int(v) for v in pauses[pi])
        length = (en - st) * s.frame_s
        t0 = st * s.frame_s
        if length < cfg.gap_min_s or any(a <= t0 + 0.03 and t0 <= z for a, z in covered):
            continue
        pre = float(s.db[max(0, st - edge) : st].mean())
        post = float(s.db[en : en + edge].mean())
        abrupt = pre >= s.level + cfg.gap_edge_db
        ev: dict[str, Any] = {
            "pause_s": length,
            "edge_before_db": pre - s.level,
            "edge_after_db": post - s.level,
            "abrupt": abrupt,
        }
        flagged = abrupt or length >= long_s
        sev = max(length / long_s, length / cfg.gap_min_s if abrupt else 0.0)
        ref_len = (
            None
            if ref is None or ref_pauses is None
            else _reference_pause_s(ref, ref_pauses, before * s.frame_s, t0, cfg)
        )
        if ref_len is not None:
            extra = length - ref_len
            ev["reference_pause_s"] = ref_len
            if extra >= max(cfg.gap_extra_s, cfg.gap_extra_ratio * ref_len):
                flagged = True
                sev = max(sev, extra / cfg.gap_extra_s)
        if flagged:
            out.append(Finding("gap", t0, k, float(sev), ev))
    return out


def _first_seams(s: Signal, pauses: np.ndarray) -> list[tuple[int, int]]:
    """``(pause, seam)``: each pause a seam falls in (+-1 frame), with the first such seam."""
    bf = s.boundaries / s.hop
    j = np.searchsorted(pauses[:, 0] - 1, bf, side="right") - 1
    hit = np.full(len(bf), -1, np.int64)
    for d in (0, 1):  # the pause before may reach this seam too (when they are 1-2 frames apart)
        jj = j - d
        ok = (jj >= 0) & (bf <= pauses[np.maximum(jj, 0), 1] + 1)
        hit[ok] = jj[ok]
    pause_ids, first_seam = np.unique(hit, return_index=True)
    return [
        (pi, k) for pi, k in zip(pause_ids.tolist(), first_seam.tolist(), strict=True) if pi >= 0
    ]


def _reference_pause_s(
    ref: Signal, ref_pauses: np.ndarray, speech_before: float, t0: float, cfg: DetectorConfig
) -> float | None:
    """The longest reference pause after the same amount of speech or at the same time (0.0:
    none there), or None when the reference has ended before this much speech."""
    if speech_before > ref.active_s() + cfg.gap_align_tol_s:
        return None
    if not len(ref_pauses):
        return 0.0
    d1 = np.abs(ref_pauses[:, 2] * ref.frame_s - speech_before)
    d2 = np.abs(ref_pauses[:, 0] * ref.frame_s - t0)
    j = np.flatnonzero(np.minimum(d1, d2) <= cfg.gap_align_tol_s)
    return float(((ref_pauses[j, 1] - ref_pauses[j, 0]) * ref.frame_s).max()) if len(j) else 0.0
