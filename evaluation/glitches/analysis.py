"""The entry points: every check on one take, merged into one finding per event, with the
per-take metrics and which checks ran."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from evaluation.glitches.click import find_clicks
from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.crosstalk import find_crosstalk
from evaluation.glitches.findings import KINDS, Analysis, Check, Finding
from evaluation.glitches.frames import Signal
from evaluation.glitches.gap import find_gaps
from evaluation.glitches.length import find_length_faults, predicted_duration_s
from evaluation.glitches.replay import find_replays
from evaluation.glitches.underrun import find_underruns, player_name, player_stalls, playout
from evaluation.takes import Take


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per event: the same kind at the same place (within 50 ms; truncation and
    duration once per take) is merged into the most severe one, keeping all evidence."""
    # a word cut off by a gap is heard as one event: the jump into the silence is the gap's
    gaps = {f.boundary_index: f for f in findings if f.kind == "gap" and f.evidence.get("cut_in")}
    findings = [f for f in findings if not (f.kind == "click" and f.boundary_index in gaps)]
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (KINDS.index(f.kind), f.time_s)):
        prev = out[-1] if out and out[-1].kind == f.kind else None
        if prev is not None and (
            f.kind in {"truncation", "duration"} or abs(f.time_s - prev.time_s) <= 0.05
        ):
            a, b = (prev, f) if prev.severity >= f.severity else (f, prev)
            ev = {**b.evidence, **a.evidence}
            ev["merged"] = int(prev.evidence.get("merged", 1)) + 1
            out[-1] = replace(a, evidence=ev)
        else:
            out.append(f)
    out.sort(key=lambda f: (f.time_s, KINDS.index(f.kind)))
    return out


def _has_timeline(take: Take) -> bool:
    """A take recorded from a stream has arrival times; a bare file is one chunk at 0 ms."""
    return len(take.chunks) > 1 or any(c.arrival_ms > 0 for c in take.chunks)


def _checks(take: Take, ref: Signal | None, cfg: DetectorConfig) -> list[Check]:
    seams = bool(take.boundaries)
    text = (take.request.text or "").strip()
    speed = float(take.request.speed or 1.0)
    no_seams = "no timeline (one chunk: no seams)"
    text_ok = text and predicted_duration_s(text, speed, cfg) - cfg.overhead_s >= 0
    return [
        Check("click", seams, "" if seams else no_seams),
        Check(
            "replay",
            bool(take.frames),
            "" if take.frames else "no audio",
        ),
        Check("gap", seams, "" if seams else no_seams),
        Check(
            "gap vs reference",
            seams and ref is not None,
            "" if ref is not None and seams else ("no reference" if seams else no_seams),
        ),
        Check(
            "underrun",
            _has_timeline(take),
            "" if _has_timeline(take) else "no timeline (no arrival times)",
        ),
        Check("truncation (status, abrupt end)", True),
        Check(
            "length vs text",
            bool(text_ok) and ref is None,
            "" if text_ok and ref is None else ("reference used instead" if text else "no text"),
        ),
        Check("length vs reference", ref is not None, "" if ref is not None else "no reference"),
        Check("crosstalk", ref is not None, "" if ref is not None else "no reference"),
    ]


def analyze(
    take: Take, reference: Take | None = None, config: DetectorConfig | None = None
) -> Analysis:
    """Run every detector on ``take`` (and compare with ``reference`` when given)."""
    cfg = config or DetectorConfig()
    s = Signal(take, cfg)
    ref = Signal(reference, cfg) if reference is not None and reference.frames else None
    dur = s.n / s.sr
    findings: list[Finding] = []
    if s.n:
        findings += find_clicks(s, cfg)
        findings += find_replays(
            s, cfg, dur, take.request.text or "", float(take.request.speed or 1.0), ref
        )
        findings += find_gaps(s, cfg, float(take.request.speed or 1.0), ref)
        if ref is not None:
            findings += find_crosstalk(
                s, ref, cfg, [f for f in findings if f.kind in ("replay", "gap")]
            )
    timeline = _has_timeline(take)
    play = playout(take, cfg) if timeline else None
    stalls = player_stalls(take, cfg, play) if timeline else []
    findings += find_underruns(stalls, cfg)
    findings += find_length_faults(take, s, cfg, ref, reference)
    findings = _merge(findings)
    runs = s.silent_runs() if s.n else np.zeros((0, 2))
    metrics = {
        "take_id": take.take_id,
        "duration_s": dur,
        "chunk_count": len(take.chunks),
        "ttfa_ms": take.ttfa_ms,
        "rtf": take.rtf,
        "speech_level_db": s.level if s.n else None,
        "active_s": s.active_s() if s.n else 0.0,
        "max_silence_ms": float((runs[:, 1] - runs[:, 0]).max() * s.frame_s * 1000)
        if len(runs)
        else 0.0,
        "stall_count": len(stalls),
        "stall_ms": float(sum(st.stall_ms for st in stalls)),
        "player": player_name(cfg) if timeline else None,
        # listenlab's player on this timeline: its first sound, and the earliest start that
        # never runs dry (from the request, ms); also when the findings use a fixed prebuffer
        "start_ms": None if play is None or play.start_s is None else play.start_s * 1000,
        "ideal_start_ms": None
        if play is None or play.ideal_start_s is None
        else play.ideal_start_s * 1000,
        "reference_duration_s": reference.duration_s if reference is not None else None,
        "duration_ratio_vs_reference": (dur / reference.duration_s)
        if reference is not None and reference.duration_s
        else None,
        "findings": len(findings),
    }
    return Analysis(findings, metrics, _checks(take, ref, cfg))


def detect(
    take: Take, reference: Take | None = None, config: DetectorConfig | None = None
) -> list[Finding]:
    """The findings of :func:`analyze`, sorted by time."""
    return analyze(take, reference, config).findings
