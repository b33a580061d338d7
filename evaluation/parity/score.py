"""Every take's numbers: the metrics room's scores, loudness, duration, the glitch detector and
speaker similarity, measured the same way on both sides.

Why one place: a paired comparison is only fair when both sides are measured by the same code
with the same models, so each side's takes go through :func:`evaluation.metrics.score_items`
(cached by the audio's hash), :mod:`evaluation.loudness` and :func:`evaluation.glitches.analyze`
(without a reference on either side: the findings of each take alone) here, once.

Words: the hub tier's Whisper when its weights are named (``HubConfig``), else the bundled
PocketSphinx word check, and the report says which. Speaker similarity: the hub tier's WavLM
when named, else GE2E. Each take is compared with the prompt's voice: the ``ref_audio`` clip of a
clone prompt, else the reference side's own voice, the mean embedding of its takes of the
*other* prompts in the same voice (so neither side is compared with its own take of the text).
``speaker_between`` compares each candidate take with the reference's first take of the prompt,
and the reference's further takes with the same first take (its own take-to-take spread): a
reference with one take, or identical takes, leaves it reported, not decided.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from backends.errors import ListenlabError
from evaluation.metrics import Audio, HubConfig, Item, Metric, build, from_samples, score_items
from evaluation.parity.prompts import ParityPrompt
from evaluation.parity.sides import Key, Side
from evaluation.takes import Take

IGNORED_FINDINGS = frozenset({"underrun"})
"""Playback stalls depend on the machine's load and the player, not on how the audio sounds:
the latencies (``ttfa_ms``, ``rtf``) are their measures."""


@dataclass
class Tiers:
    """Which models measure words and voices, and why (for the report)."""

    words: str = "words"
    speaker: str = "speaker"
    notes: list[str] = field(default_factory=list)

    @property
    def hub_words(self) -> bool:
        return self.words == "whisper"


def choose_tiers(hub: HubConfig | None) -> Tiers:
    """The hub tier's Whisper and WavLM when their weights are named and present, else the
    bundled word check and GE2E; the report says which (and why not the hub)."""
    t = Tiers()
    for hub_name, bundled, attr in (("whisper", "words", "words"), ("wavlm", "speaker", "speaker")):
        if hub is None or not (hub.paths.get(hub_name) or hub.cache_dir):
            t.notes.append(f"{attr}: the bundled {bundled!r} metric (no hub weights named)")
            continue
        try:
            (m,) = build([hub_name], hub)
            _ = m.weights_sha256
            setattr(t, attr, hub_name)
        except ListenlabError as e:
            t.notes.append(f"{attr}: the bundled {bundled!r} metric ({hub_name}: {e})")
    return t


def audio_of(take: Take) -> Audio:
    return from_samples(take.audio, take.sample_rate)


def _metrics(tiers: Tiers, hub: HubConfig | None) -> tuple[list[Metric], Any]:
    ms = build(["distillmos", "pauses", "pitch", tiers.words], hub)
    (embedder,) = build([tiers.speaker], hub)
    return ms, embedder


def _words(v: dict[str, Any], tiers: Tiers) -> dict[str, Any]:
    wer, cer, text = (
        ("wer", "cer", "asr_text")
        if tiers.hub_words
        else ("sphinx_wer", "sphinx_cer", "sphinx_text")
    )
    return {
        "wer": None if v.get(wer) is None else 100.0 * float(v[wer]),
        "cer": None if v.get(cer) is None else 100.0 * float(v[cer]),
        "transcript": v.get(text),
    }


def take_values(take: Take, v: dict[str, Any], tiers: Tiers) -> dict[str, Any]:
    """One take's measures (and details) from its metric columns and its own audio."""
    from evaluation.glitches import analyze
    from evaluation.loudness import measure_lufs, true_peak_dbtp

    text = take.request.text or ""
    found = [f for f in analyze(take, None).findings if f.kind not in IGNORED_FINDINGS]
    timeline = len(take.chunks) > 1 or any(c.arrival_ms > 0 for c in take.chunks)
    out = {
        **_words(v, tiers),
        "predicted_mos": v.get("predicted_mos"),
        "ms_per_char": 1000.0 * take.duration_s / max(1, len(text)),
        "pauses": v.get("pauses"),
        "longest_pause_s": v.get("longest_pause_s"),
        "loudness_lufs": measure_lufs(take.audio, take.sample_rate),
        "true_peak_dbtp": true_peak_dbtp(take.audio, take.sample_rate),
        "f0_median": v.get("f0_median_hz"),
        "f0_range_st": v.get("f0_range_st"),
        "glitches": len(found),
        "ttfa_ms": take.ttfa_ms if timeline else None,
        "rtf": take.rtf if timeline and take.total_ms > 0 else None,
        "findings": [{"kind": f.kind, "time_s": round(f.time_s, 3), "seam": f.seam} for f in found],
        "duration_s": round(take.duration_s, 3),
    }
    for k in ("loudness_lufs", "true_peak_dbtp"):
        if not math.isfinite(out[k]):
            out[k] = None
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def speaker_values(
    prompts: list[ParityPrompt], ref: Side, cand: Side, embed: Callable[[Audio], np.ndarray]
) -> dict[tuple[str, Key], dict[str, float | None]]:
    """``speaker_sim`` and ``speaker_between`` per (role, take) (see the module docstring)."""
    emb = {
        (s.role, key): _unit(np.asarray(embed(audio_of(t)), dtype=float))
        for s in (ref, cand)
        for key, t in s.takes.items()
    }
    voice_of = {q.prompt_id: q.voice_key for q in prompts}
    total: dict[str, np.ndarray] = {}  # per voice: the sum of the reference's embeddings
    own: dict[str, np.ndarray] = {}  # per prompt: the sum of its own reference takes'
    count: dict[str, int] = {}
    for (role, (pid, _)), e in emb.items():
        if role == ref.role:
            v = voice_of[pid]
            total[v] = total.get(v, 0) + e
            own[pid] = own.get(pid, 0) + e
            count[v] = count.get(v, 0) + 1
    by_prompt: dict[tuple[str, str], list[tuple[int, Take]]] = {}
    for s in (ref, cand):
        for (pid, k), t in sorted(s.takes.items()):
            by_prompt.setdefault((s.role, pid), []).append((k, t))
    clips: dict[str, np.ndarray] = {}
    out: dict[tuple[str, Key], dict[str, float | None]] = {}
    for p in prompts:
        mine = len(by_prompt.get((ref.role, p.prompt_id), []))
        if p.ref_audio:
            if p.ref_audio not in clips:
                from evaluation.metrics import read_file

                clips[p.ref_audio] = _unit(np.asarray(embed(read_file(p.ref_audio)), dtype=float))
            voice = clips[p.ref_audio]
        elif count.get(p.voice_key, 0) > mine:  # leave this prompt's own takes out
            voice = _unit(total[p.voice_key] - own.get(p.prompt_id, 0))
        else:
            voice = None
        first = emb.get((ref.role, (p.prompt_id, 1)))
        first_take = ref.takes.get((p.prompt_id, 1))
        for s in (ref, cand):
            for k, t in by_prompt.get((s.role, p.prompt_id), []):
                e = emb[s.role, (p.prompt_id, k)]
                same = s is ref and (k == 1 or (first_take is not None and _same(t, first_take)))
                out[s.role, (p.prompt_id, k)] = {
                    "speaker_sim": None if voice is None else float(e @ voice),
                    "speaker_between": None if first is None or same else float(e @ first),
                }
    return out


def _same(a: Take, b: Take) -> bool:
    return a.audio.shape == b.audio.shape and bool(np.array_equal(a.audio, b.audio))


def measure_sides(
    prompts: list[ParityPrompt],
    ref: Side,
    cand: Side,
    *,
    hub: HubConfig | None = None,
    cache: str | Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[dict[tuple[str, Key], dict[str, Any]], Tiers, dict[str, Any]]:
    """Every take's measures on both sides, the tiers used, and the metrics' versions."""
    tiers = choose_tiers(hub)
    ms, embedder = _metrics(tiers, hub)
    keys = [(s.role, key) for s in (ref, cand) for key in sorted(s.takes)]
    side = {ref.role: ref, cand.role: cand}
    items = [
        Item(audio_of(side[r].takes[k]), side[r].takes[k].request.text, name=f"{r}/{k[0]}/{k[1]}")
        for r, k in keys
    ]
    results = score_items(items, ms, cache, progress)
    out: dict[tuple[str, Key], dict[str, Any]] = {}
    for (r, k), res in zip(keys, results, strict=True):
        out[r, k] = take_values(side[r].takes[k], res.values(), tiers)
        if res.errors:
            out[r, k]["errors"] = dict(res.errors)
    embedder.load()
    for key, v in speaker_values(prompts, ref, cand, embedder.embed).items():
        out[key].update(v)
    versions = {
        m.info.name: {"version": m.info.version, "weights_sha256": m.weights_sha256}
        for m in [*ms, embedder]
    }
    return out, tiers, versions


__all__ = [
    "IGNORED_FINDINGS",
    "Tiers",
    "audio_of",
    "choose_tiers",
    "measure_sides",
    "speaker_values",
    "take_values",
]
