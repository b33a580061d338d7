"""``underrun``: the arrival timeline played by listenlab's player (or a fixed prebuffer);
every stall it would make."""

from __future__ import annotations

import numpy as np

from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.findings import Finding, Stall
from evaluation.playout import POLICY, PlayoutResult
from evaluation.playout import simulate as simulate_start_rule
from evaluation.takes import Take


def playout(take: Take, cfg: DetectorConfig | None = None) -> PlayoutResult:
    """What listenlab's player (its start rule, ``evaluation.playout``) does on this take's
    arrival timeline: when it starts, the ideal start, and every underrun."""
    cfg = cfg or DetectorConfig()
    sr = take.sample_rate or 1
    arr = [c.arrival_ms / 1000 for c in take.chunks]
    if any(b < a for a, b in zip(arr, arr[1:], strict=False)):
        arr = list(np.maximum.accumulate(arr))  # a clock that went back: as received
    done = max(take.total_ms / 1000, arr[-1]) if arr else None
    return simulate_start_rule(
        arr,
        [c.frames / sr for c in take.chunks],
        len((take.request.text or "").strip()),
        sec_per_char=cfg.sec_per_char,
        rate_prior=cfg.rate_prior,
        done_s=done,
    )


def simulate_playback(take: Take, prebuffer_ms: float | None = None) -> list[Stall]:
    """Every stall (length > 0) of a player on this take's arrival timeline.

    ``prebuffer_ms=None``: listenlab's player (the start rule; see :func:`playout`). A number: a
    simple player that starts once that much audio is in (or the stream has ended), plays in
    real time, and resumes as soon as the late chunk arrives."""
    return player_stalls(take, DetectorConfig(prebuffer_ms=prebuffer_ms))


def player_stalls(take: Take, cfg: DetectorConfig, res: PlayoutResult | None = None) -> list[Stall]:
    """The stalls of the player ``cfg`` describes (``prebuffer_ms``, and the start rule's
    priors); ``res``: the start rule's result on this take when already computed."""
    if not take.chunks or not take.sample_rate:
        return []
    sr = take.sample_rate
    prebuffer_ms = cfg.prebuffer_ms
    if prebuffer_ms is None:
        res = res or playout(take, cfg)
        offsets = [c.offset for c in take.chunks]
        out = []
        for (pos_s, stall_s), resumed in zip(res.underruns, res.decisions[1:], strict=True):
            k = min(range(len(offsets)), key=lambda i: abs(offsets[i] / sr - pos_s))
            dry = resumed + POLICY.lead_s - stall_s
            out.append(Stall(pos_s * 1000, dry * 1000, stall_s * 1000, k))
        return out
    arr = np.array([c.arrival_ms for c in take.chunks], dtype=np.float64)
    start = np.array([c.offset for c in take.chunks], dtype=np.float64) * 1000 / sr
    end = start + np.array([c.frames for c in take.chunks], dtype=np.float64) * 1000 / sr
    ready = np.flatnonzero(end >= prebuffer_ms)
    j = int(ready[0]) if len(ready) else len(arr) - 1
    t0 = float(arr[: j + 1].max())  # playback starts when enough audio is buffered
    late = arr - (t0 + start)  # how late chunk i is against a player that never stalled
    cum = np.maximum.accumulate(np.maximum(late, 0.0))  # total stall time up to chunk i
    stall = np.diff(np.r_[0.0, cum])
    idx = np.flatnonzero(stall > 0)
    return [
        Stall(float(start[i]), float(t0 + start[i] + cum[i] - stall[i]), float(stall[i]), int(i))
        for i in idx
    ]


def player_name(cfg: DetectorConfig) -> str:
    if cfg.prebuffer_ms is None:
        return "listenlab's player (start rule)"
    return f"a {cfg.prebuffer_ms:.0f} ms prebuffer player"


def find_underruns(stalls: list[Stall], cfg: DetectorConfig) -> list[Finding]:
    out = []
    for st in stalls:
        if st.stall_ms < cfg.underrun_min_ms:
            continue
        out.append(
            Finding(
                "underrun",
                st.position_ms / 1000,
                st.chunk_index - 1 if st.chunk_index > 0 else None,
                st.stall_ms / cfg.underrun_min_ms,
                {
                    "stall_ms": st.stall_ms,
                    "wall_ms": st.wall_ms,
                    "player": player_name(cfg),
                    "prebuffer_ms": cfg.prebuffer_ms,
                },
            )
        )
    return out
