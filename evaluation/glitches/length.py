"""``truncation`` and ``duration``: a take shorter or longer than its reference or its text
predicts, a failed stream, an abrupt end."""

from __future__ import annotations

import math

import numpy as np

from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.findings import Finding
from evaluation.glitches.frames import Signal
from evaluation.takes import Take


def predicted_duration_s(text: str, speed: float, cfg: DetectorConfig) -> float:
    return cfg.overhead_s + len(text) / (cfg.chars_per_s * max(speed, 0.25))


def find_length_faults(
    take: Take, s: Signal, cfg: DetectorConfig, ref: Signal | None, ref_take: Take | None
) -> list[Finding]:
    out: list[Finding] = []
    dur = s.n / s.sr
    bounds_s = s.boundaries / s.sr
    end_b = len(bounds_s) - 1 if len(bounds_s) else None
    if take.status != "ok":
        out.append(
            Finding(
                "truncation", dur, end_b, 1.0, {"status": take.status, "error": take.error or ""}
            )
        )
    if s.n == 0:
        if take.status == "ok":
            out.append(Finding("truncation", 0.0, None, 1.0, {"empty": True}))
        return out
    act = s.active_s()
    cut = take.status != "ok"
    text = take.request.text or ""
    speed = float(take.request.speed or 1.0)
    pred = predicted_duration_s(text, speed, cfg)
    if ref is not None and ref.n:
        ra = ref.active_s()
        ratio = act / ra if ra else math.inf
        ev = {"active_s": act, "reference_active_s": ra, "ratio": ratio, "duration_s": dur}
        if ratio < cfg.truncation_ratio:
            cut = True
            out.append(
                Finding("truncation", dur, end_b, cfg.truncation_ratio / max(ratio, 1e-6), ev)
            )
        elif ratio > cfg.duration_ratio:
            out.append(Finding("duration", dur, end_b, ratio / cfg.duration_ratio, ev))
    elif text.strip():  # without text (a bare file) there is no expected duration: no guess
        ev = {"duration_s": dur, "predicted_s": pred, "ratio": dur / pred}
        if pred - cfg.overhead_s >= cfg.min_predicted_s and dur < cfg.truncation_text_ratio * pred:
            cut = True
            out.append(
                Finding(
                    "truncation", dur, end_b, cfg.truncation_text_ratio * pred / max(dur, 1e-6), ev
                )
            )
        elif dur > cfg.duration_text_ratio * pred and dur - pred >= cfg.duration_min_excess_s:
            out.append(Finding("duration", dur, end_b, dur / (cfg.duration_text_ratio * pred), ev))
    if not cut:
        out += _abrupt_end(s, cfg, end_b)
    del ref_take
    return out


def _abrupt_end(s: Signal, cfg: DetectorConfig, end_b: int | None) -> list[Finding]:
    """The take stops mid-sound: its last 20 ms are still near speech level, and well above the
    take's own background (a recording that ends in its room noise or a breath has not been cut:
    on the dev split, clean human recordings ended at most 9.3 dB above their background, streams
    stopped mid-word at least 38.8 dB above it)."""
    tail = max(1, int(round(0.02 / s.frame_s)))
    if len(s.db) <= tail:
        return []
    t_db = float(np.mean(s.db[-tail:]))
    if t_db < s.level + cfg.tail_abrupt_db or t_db < s.floor + cfg.tail_floor_db:
        return []
    ev = {"abrupt_end_db": t_db - s.level, "above_background_db": t_db - s.floor}
    ev["duration_s"] = s.n / s.sr
    sev = float(10 ** ((t_db - s.level - cfg.tail_abrupt_db) / 20))
    return [Finding("truncation", s.n / s.sr, end_b, sev, ev)]
