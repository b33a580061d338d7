"""``replay``: audio at a seam that repeats audio heard earlier, unless the text or the
reference says those words twice."""

from __future__ import annotations

import re

import numpy as np

from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.correlation import (
    coarse_check,
    envelope_precheck,
    ncc,
    refine,
)
from evaluation.glitches.findings import Finding
from evaluation.glitches.frames import Signal, nearest
from evaluation.glitches.spectra import dtw_cost, dtw_path, prints


def text_repeats(text: str) -> list[tuple[int, int, int]]:
    """Where the text says a run of clauses twice: ``(first_char, second_char, run_chars)``.

    Deterministic engines render a repeated sentence or clause ("The end. The end.") as
    identical audio: that repeat is the content, not a replay bug, but only *there*.
    """
    spans = [
        (m.start(), m.end(), " ".join(re.findall(r"[\w']+", m.group().lower())))
        for m in re.finditer(r"[^.!?;:,\n…]+", text)
    ]
    spans = [x for x in spans if x[2]][:400]
    units = [u for _, _, u in spans]
    first: dict[str, list[int]] = {}
    out = []
    for j, u in enumerate(units):
        for i in first.get(u, []):
            m = 0
            while j + m < len(units) and i + m < j and units[i + m] == units[j + m]:
                m += 1
            out.append((spans[i][0], spans[j][0], spans[j + m - 1][1] - spans[j][0]))
        first.setdefault(u, []).append(j)
    return out


def _content_repeat(f: Finding, text: str, s: Signal, cfg: DetectorConfig) -> bool:
    """Is this repeat where the text repeats itself (source and copy at the two occurrences,
    no longer than the repeated words)? Positions are mapped by the take's own speaking rate."""
    reps = text_repeats(text)
    act = np.flatnonzero(~s.silent)
    if not reps or not len(act):
        return False
    t_on, t_off = act[0] * s.frame_s, (act[-1] + 1) * s.frame_s
    rate = len(text) / max(t_off - t_on, 1e-3)  # characters per second of this take
    tol = 0.1 * (t_off - t_on) + 0.3
    src, dst, length = f.evidence["source_s"], f.time_s, f.evidence["length_s"]
    return any(
        abs(src - t_on - c1 / rate) <= tol
        and abs(dst - t_on - c2 / rate) <= tol
        and length <= cfg.replay_text_factor * n / rate + 0.3
        for c1, c2, n in reps
    )


def find_replays(
    s: Signal,
    cfg: DetectorConfig,
    duration_s: float,
    text: str = "",
    speed: float = 1.0,
    ref: Signal | None = None,
) -> list[Finding]:
    # audio alone: a repeat with other speech between its source and its copy is a voice
    # saying those words again, not a stream re-sending what it had just sent
    alone = not text and ref is None
    found = _replay_scan(s, cfg, duration_s, cfg.replay_max_between_s if alone else None)
    if not found:
        return found
    if text:
        found = [f for f in found if not _content_repeat(f, text, s, cfg)]
    if found and ref is not None:
        # the reference repeats itself the same way: the repetition is in the content
        own = [f.evidence["lag_s"] for f in _replay_scan(ref, cfg, ref.n / ref.sr)]
        found = [f for f in found if not any(abs(f.evidence["lag_s"] - lag) <= 0.15 for lag in own)]
    if found and ref is not None:
        found = [f for f in found if not _said_twice_in_reference(f, s, ref, cfg)]
    del speed
    return found


def _said_twice_in_reference(f: Finding, s: Signal, ref: Signal, cfg: DetectorConfig) -> bool:
    """Does the reference (an independent rendering of the same request) say this repeat's
    words twice too, at the places the take's source and copy align to? Then the repeat is the
    content (a deterministic engine renders a repeated phrase identically), not a replay.

    A replayed chunk has no counterpart in the reference: aligned over the whole take, the copy
    maps onto the source's place in the reference (or onto a few frames at the seam), never onto
    a second, distinct saying of the same words."""
    fs = 0.02
    tp, rp = prints(s, fs), prints(ref, fs)
    if len(tp) < 4 or len(rp) < 4 or len(tp) * len(rp) > 4_000_000:
        return False
    path = dtw_path(tp, rp)

    def mapped(t0: float, length: float) -> tuple[int, int]:
        a = min(len(tp) - 1, max(0, int(t0 / fs)))
        b = min(len(tp), max(a + 1, int((t0 + length) / fs)))
        return int(path[a]), int(path[b - 1]) + 1

    length = f.evidence["length_s"]
    n = max(1, int(length / fs))
    s0, s1 = mapped(f.evidence["source_s"], length)
    c0, c1 = mapped(f.time_s, length)
    overlap = max(0, min(s1, c1) - max(s0, c0))
    if c1 - c0 < 0.5 * n or s1 - s0 < 0.5 * n or overlap > 0.5 * min(s1 - s0, c1 - c0):
        return False  # the copy has no distinct counterpart in the reference
    cost = dtw_cost(rp[s0:s1], rp[c0:c1])
    return cost <= cfg.crosstalk_min_dist


def _repeat_length(s: Signal, src: int, qs: int, start: int, blk: int, min_ncc: float) -> int:
    """How long the audio from ``qs`` keeps repeating the audio from ``src`` (block by block)."""
    length = voiced = start
    nfr = max(1, blk // s.hop)
    while qs + length + blk <= s.n:
        fa, fb = (src + length) // s.hop, (qs + length) // s.hop
        if s.silent[fa : fa + nfr].all() and s.silent[fb : fb + nfr].all():
            length += blk  # shared silence continues the repeat (but does not end it)
            continue
        a = s.x[src + length : src + length + blk]
        b = s.x[qs + length : qs + length + blk]
        if ncc(a, b) < min_ncc:
            break
        length += blk
        voiced = length
    return voiced


def _replay_queries(
    s: Signal, cfg: DetectorConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every seam's query at once (vectorised: with 80 ms chunks a take has ~12 seams a
    second), as sample start and frame span ``(qs, qf0, qf1)``; None when there is none."""
    starts = s.boundaries
    if not len(starts):  # no timeline (a bare file): look at every pause-to-speech onset
        runs = s.silent_runs()
        starts = runs[:, 1][runs[:, 1] < len(s.silent)] * s.hop
    starts = np.asarray(starts, dtype=np.int64)
    if not len(starts):
        return None
    ends = np.r_[starts[1:], s.n]
    nf = len(s.silent)
    t_first = s.first_active_frame() * s.frame_s
    # The query starts at the first active frame after the seam (silence matches silence), up
    # to 0.5 s after it.
    act = np.flatnonzero(~s.silent)
    if not len(act):
        return None
    f0 = -(-starts // s.hop)
    pos = np.minimum(np.searchsorted(act, f0), len(act) - 1)
    fa = act[pos]
    keep = (fa >= f0) & (fa < np.minimum(f0 + int(0.5 / s.frame_s), nf))
    starts, ends, fa = starts[keep], ends[keep], fa[keep]
    qs = fa * s.hop
    # The query stays inside this chunk when it is long enough (a re-sent chunk is followed
    # by new audio); after a short chunk (80 ms codec frames) it runs on across the next
    # seams for replay_min_query_s, since a replay is then sent as several short chunks.
    # The source of a repeat is audio, so it starts at or after the take's first active
    # frame and ends before the query begins: a query longer than that could never match
    # (a re-sent first chunk, "Hello!" "Hello!", has only its own length to look back on;
    # two frames spare for frame rounding).
    room = np.minimum(
        np.minimum(cfg.replay_query_s, qs / s.sr - t_first - 2 * s.frame_s), (s.n - qs) / s.sr
    )
    chunk_s = (np.maximum(ends, qs + 1) - qs) / s.sr
    L_s = np.minimum(
        room, np.where(chunk_s >= cfg.replay_min_query_s, chunk_s, cfg.replay_min_query_s)
    )
    keep = L_s >= cfg.replay_min_query_s
    qs, L_s = qs[keep], L_s[keep]
    qf0 = qs // s.hop
    qf1 = (qs + np.floor(L_s * s.sr).astype(np.int64)) // s.hop
    n_act = np.r_[0, np.cumsum(~s.silent)]
    keep = (qf1 - qf0 >= 4) & ((n_act[qf1] - n_act[qf0]) * s.frame_s >= cfg.replay_min_active_s)
    qs, qf0, qf1 = qs[keep], qf0[keep], qf1[keep]
    return (qs, qf0, qf1) if len(qs) else None


def _replay_candidates(
    s: Signal, cfg: DetectorConfig, q: int, qs: np.ndarray, qf0: np.ndarray, qf1: np.ndarray
) -> dict[int, list[int]]:
    """Query index -> earlier places (search-rate samples) whose level envelope and
    search-rate signal both match it."""
    m = s.n // q
    rate = s.sr / q
    lo = np.maximum(0, qs // q - int(cfg.replay_max_lookback_s * rate))
    # The envelope pre-check for every seam at once: a repeat has the same level envelope
    # (dB per 10 ms frame, floored at the silence threshold) too. Then each envelope match is
    # checked at the search rate, all (seam, match) pairs in one batched product, so only a
    # few candidates per take reach the full-rate FFT below.
    env = np.maximum(s.db, s.thresh).astype(np.float64)
    e1 = np.r_[0.0, np.cumsum(env)]
    e2 = np.r_[0.0, np.cumsum(env * env)]
    peaks = envelope_precheck(env, e1, e2, qf0, lo * q // s.hop, qf1 - qf0, cfg.replay_envelope_ncc)
    pi, pk = np.nonzero(peaks >= 0)
    if not len(pi):
        return {}
    # the search rate: block means (as a matrix-vector product: ten times faster than .mean)
    y = s.x[: m * q].reshape(m, q) @ np.full(q, 1 / q, np.float32)
    Lf = (qf1 - qf0) * s.hop
    coarse = coarse_check(
        y,
        qs[pi] // q,
        Lf[pi] // q,
        peaks[pi, pk] * s.hop // q,
        s.hop // q + 1,
        cfg.replay_coarse_ncc,
    )
    cand: dict[int, list[int]] = {}
    for i, c in zip(pi[coarse >= 0].tolist(), coarse[coarse >= 0].tolist(), strict=True):
        cand.setdefault(i, []).append(c)
    return cand


def _walk_back(s: Signal, cfg: DetectorConfig, src: int, qs_: int) -> int:
    """Samples the repeat began before the query did (with silence, or before a later seam's
    active onset): walked back 10 ms at a time while it still matches, up to 0.5 s."""
    back, h = 0, s.hop
    while back < int(0.5 * s.sr) and src - back - h >= 0 and qs_ - back - h > src:
        fa, fb = (src - back - h) // h, (qs_ - back - h) // h
        both_silent = s.silent[fa] and s.silent[fb]
        a_ = s.x[src - back - h : src - back]
        b_ = s.x[qs_ - back - h : qs_ - back]
        if not (both_silent or ncc(a_, b_) >= cfg.replay_min_ncc):
            break
        back += h
    return back


def _best_source(
    s: Signal,
    cfg: DetectorConfig,
    cands: list[int],
    q: int,
    qs_: int,
    Lf_: int,
    blk: int,
    max_between_s: float | None,
) -> tuple[float, int, int, int, float] | None:
    """The earlier place this seam's query repeats: ``(ncc, source, length, back, between_s)``.

    Each match is confirmed at the full rate within one search-rate sample of it (one FFT).
    Several earlier places may match (the text repeats itself, or the audio was repeated more
    than once): keep the one whose repeat goes on longest. ``between_s`` is the active speech
    between the source's end and the copy's start: a restart, a re-sent chunk or window and a
    second copy all re-send the audio up to the seam, so a place with ``max_between_s`` or
    more of it is passed over (audio alone: a voice saying those words again)."""
    out = None
    for c in cands:
        v, st = refine(s.x, c * q, qs_, Lf_, q)
        if v < cfg.replay_min_ncc:
            continue
        n_ = _repeat_length(s, st, qs_, Lf_, blk, cfg.replay_min_ncc)
        if out is not None and n_ <= out[2]:
            continue
        back = _walk_back(s, cfg, st, qs_)
        h = s.hop
        between = float((~s.silent[min(st + n_, qs_ - back) // h : (qs_ - back) // h]).sum())
        between *= s.frame_s
        if max_between_s is not None and between >= max_between_s:
            continue
        out = (v, st, n_, back, between)
    return out


def _replay_scan(
    s: Signal, cfg: DetectorConfig, duration_s: float, max_between_s: float | None = None
) -> list[Finding]:
    """Every repeat at a seam. ``max_between_s``: skip a repeat with this much active speech
    between its source's end and its copy's start (and let it hide no later seam)."""
    q = max(1, int(round(s.sr / cfg.replay_rate_hz)))
    if s.n // q < 8:
        return []
    queries = _replay_queries(s, cfg)
    if queries is None:
        return []
    qs, qf0, qf1 = queries
    cand = _replay_candidates(s, cfg, q, qs, qf0, qf1)
    Lf = (qf1 - qf0) * s.hop
    out: list[Finding] = []
    bounds_s = s.boundaries / s.sr
    skip_until = -1
    blk = max(1, int(cfg.replay_block_s * s.sr))
    for n in sorted(cand):
        qs_, Lf_ = int(qs[n]), int(Lf[n])
        if qs_ < skip_until:  # still inside a repeat already reported
            continue
        got = _best_source(s, cfg, cand[n], q, qs_, Lf_, blk, max_between_s)
        if got is None:
            continue
        best, src, length, back, between = got
        lag = qs_ - src
        skip_until = qs_ + length
        start, length, src = qs_ - back, length + back, src - back
        # the repeat and the block after it (a re-sent chunk may end in a word's first sound,
        # too short to match block by block)
        peak = float(s.db[start // s.hop : (start + length + blk) // s.hop + 1].max())
        if peak < s.level + cfg.replay_min_level_db:
            continue  # a repeat of room noise or breath is not heard as a repeat
        t = start / s.sr
        bi, _ = nearest(bounds_s, t)
        evidence = {
            "ncc": float(best),
            "peak_db": peak - s.level,
            "source_s": src / s.sr,
            "lag_s": lag / s.sr,
            "length_s": length / s.sr,
            "from_start": bool(src / s.sr <= s.first_active_frame() * s.frame_s + 0.15),
            "share_of_take": length / s.sr / duration_s if duration_s else 0.0,
            "between_active_s": between,
        }
        out.append(Finding("replay", t, bi, float(best / cfg.replay_min_ncc), evidence))
    return out
