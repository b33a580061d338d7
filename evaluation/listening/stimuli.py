"""Stimuli for listening tests: stored takes, loudness-normalised, plus the screening items.

Why stored takes: a stimulus keeps its recorded chunk arrival timeline, so the *as streamed*
condition can replay the real stream's stalls to every rater, and glitch marks map to its seams.

* :func:`normalise_loudness` — ITU-R BS.1770 integrated loudness (``pyloudnorm``) to one target
  (−23 LUFS by default) so loudness does not bias votes; the gain applied is returned and stored.
  The gain is capped so no sample clips (the cap is recorded: the take is then quieter).
* :func:`low_anchor` — the MUSHRA-style low anchor: a 3.5 kHz low-pass of a take, with clicks at
  its chunk boundaries and a 150 ms gap at the middle seam (obviously bad: a gold "1").
* :func:`generate` — every system x prompt as a take through the real backend, normalised and
  saved, plus the screening takes (anchor, gold, P.808-style trap spoken by the CPU voice).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import signal

from backends.base import Backend, SpeechRequest
from evaluation.listening.design import ANCHOR, Design
from evaluation.takes import Take, record

TARGET_LUFS = -23.0
PEAK_LIMIT = 10 ** (-1.0 / 20)  # -1 dBFS
ANCHOR_CUTOFF_HZ = 3500.0
ANCHOR_GAP_MS = 150.0
TRAP_TEXT = "This is an attention check. Please select the answer two."
CONDITIONS = ("as_streamed", "whole", "live")


def measure_lufs(audio: np.ndarray, sample_rate: int) -> float:
    """Integrated loudness in LUFS (-inf for silence; NaN when shorter than one 400 ms block)."""
    import pyloudnorm

    a = np.asarray(audio)
    x = a.astype(np.float64) / (32768.0 if np.issubdtype(a.dtype, np.integer) else 1.0)
    if x.shape[0] < int(0.4 * sample_rate) + 1:
        return float("nan")
    return float(pyloudnorm.Meter(sample_rate).integrated_loudness(x))


def normalise_loudness(
    audio: np.ndarray, sample_rate: int, target_lufs: float = TARGET_LUFS
) -> tuple[np.ndarray, float, float]:
    """``(int16 audio, gain_db, measured_lufs)``: ``audio`` scaled to ``target_lufs``.

    Silence or a clip too short to measure gets gain 0. The gain never lets a sample exceed
    -1 dBFS; when that limits it, the returned gain is the one actually applied.
    """
    lufs = measure_lufs(audio, sample_rate)
    if not math.isfinite(lufs):
        return np.asarray(audio, dtype=np.int16).copy(), 0.0, lufs
    gain_db = target_lufs - lufs
    x = np.asarray(audio, dtype=np.float64) / 32768.0
    peak = float(np.abs(x).max()) if x.size else 0.0
    if peak > 0:
        gain_db = min(gain_db, 20 * math.log10(PEAK_LIMIT / peak))
    y = np.clip(np.round(x * 10 ** (gain_db / 20) * 32768.0), -32768, 32767).astype(np.int16)
    return y, float(gain_db), lufs


def low_anchor(audio: np.ndarray, sample_rate: int, boundaries: list[int]) -> np.ndarray:
    """Low-pass at 3.5 kHz, a click at every seam and a 150 ms gap at the middle seam."""
    x = np.asarray(audio, dtype=np.float64) / 32768.0
    if x.ndim == 1:
        x = x[:, None]
    if sample_rate > 2 * ANCHOR_CUTOFF_HZ and x.shape[0] > 64:
        sos = signal.butter(8, ANCHOR_CUTOFF_HZ, btype="low", fs=sample_rate, output="sos")
        x = signal.sosfiltfilt(sos, x, axis=0)
    n = x.shape[0]
    seams = [b for b in boundaries if 0 < b < n] or [n * k // 4 for k in (1, 2, 3)]
    click = int(0.002 * sample_rate) or 1
    for b in seams:
        x[b : b + click] = 0.9 * np.sign(np.sin(np.arange(min(click, n - b)) + 1))[:, None]
    mid = seams[len(seams) // 2]
    gap = int(ANCHOR_GAP_MS / 1000 * sample_rate)
    x[mid + click : mid + click + gap] = 0.0
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def derived_take(take: Take, audio: np.ndarray, **meta: Any) -> Take:
    """A new take (new id) with ``take``'s request and chunk timeline and different audio."""
    tid = uuid.uuid4().hex
    return replace(
        take,
        audio=np.ascontiguousarray(audio.reshape(take.audio.shape)),
        take_id=tid,
        request=replace(take.request, request_id=tid),
        meta={**take.meta, **meta, "source_take_id": take.take_id},
    )


@dataclass
class SystemSource:
    """A system under test: a backend plus the request fields that make it this system."""

    system_id: str
    backend: Backend
    spec: str
    voice: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    """Request fields: ``seed``, ``speed``, ``language``, ``instructions``."""
    condition: str = "as_streamed"

    def request(self, text: str) -> SpeechRequest:
        p = self.params
        return SpeechRequest(
            text=text,
            voice=self.voice,
            language=p.get("language"),
            instructions=p.get("instructions"),
            speed=float(p.get("speed", 1.0)),
            seed=None if p.get("seed") in (None, "") else int(p["seed"]),
        ).validated()


@dataclass(frozen=True)
class Stimulus:
    stimulus_id: str
    test_id: str
    take_id: str
    kind: str
    """``item``, ``anchor``, ``gold`` or ``trap``."""
    system_id: str | None = None
    prompt_id: str | None = None
    expected: float | None = None
    condition: str = "as_streamed"
    gain_db: float = 0.0
    loudness_lufs: float | None = None
    target_lufs: float = TARGET_LUFS
    source_take_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


Progress = Callable[[float, str], None]


async def generate(
    tests: Any,
    test_id: str,
    design: Design,
    systems: Mapping[str, SystemSource],
    prompts: Mapping[str, str],
    *,
    trap_backend: Backend | None = None,
    target_lufs: float = TARGET_LUFS,
    progress: Progress | None = None,
) -> list[Stimulus]:
    """Record every system x prompt (streamed, timeline kept), normalise and store them.

    ``tests`` is an :class:`evaluation.listening.tables.TestStore`. Screening items are added for MOS
    tests with screening (anchor, gold, trap), A/B tests with screening (the anchor and its
    clean source, for the check pairs), and MUSHRA tests (their low anchor).
    """
    from evaluation.store import Prompt, System

    store = tests.store
    out: list[Stimulus] = []
    jobs = [(s, p) for s in design.systems for p in design.prompts]
    need_trap = design.kind == "mos" and design.screening
    need_gold = design.kind in {"mos", "ab"} and design.screening
    total = len(jobs) + (1 if need_trap else 0)
    done = 0

    def tick(msg: str) -> None:
        if progress:
            progress(done / max(total, 1), msg)

    for sid, src in systems.items():
        store.add_system(
            System(sid, backend=src.spec, voice=src.voice, params=dict(src.params), label=sid)
        )
    for pid, text in prompts.items():
        store.add_prompt(Prompt(pid, text=text, category="listening"))
    takes: dict[tuple[str, str], Take] = {}
    for sid, pid in jobs:
        tick(f"{sid}: {pid}")
        src = systems[sid]
        take = await record(src.backend, src.request(prompts[pid]))
        audio, gain, lufs = normalise_loudness(take.audio, take.sample_rate, target_lufs)
        take = derived_take(take, audio, gain_db=gain, loudness_lufs=lufs, system=sid)
        out.append(_save(tests, test_id, take, "item", sid, pid, src.condition, gain, lufs))
        takes[sid, pid] = take
        done += 1
    base_sys = design.reference or design.systems[0]
    base = takes[base_sys, design.prompts[0]]
    anchor_prompts = (
        design.prompts if design.kind == "mushra" else design.prompts[:1] if need_gold else ()
    )
    for pid in anchor_prompts:  # MUSHRA: one per screen; MOS: a gold "1"; A/B: the bad side
        src = takes[base_sys, pid]
        anchor = derived_take(
            src, low_anchor(src.audio, src.sample_rate, src.boundaries), kind="anchor"
        )
        out.append(
            _save(
                tests,
                test_id,
                anchor,
                "anchor",
                ANCHOR,
                pid,
                systems[base_sys].condition,
                0.0,
                None,
                expected=1.0,
                source=src.take_id,
            )
        )
    if need_gold:  # MOS: a gold "5"; A/B: the clean side of the check pairs
        gold = derived_take(base, base.audio, kind="gold")
        out.append(
            _save(
                tests,
                test_id,
                gold,
                "gold",
                base_sys,
                None,
                systems[base_sys].condition,
                0.0,
                None,
                expected=5.0,
                source=base.take_id,
            )
        )
    if need_trap:
        tick("attention check (CPU voice)")
        tb = trap_backend or systems[base_sys].backend
        take = await record(tb, SpeechRequest(text=TRAP_TEXT).validated())
        audio, gain, lufs = normalise_loudness(take.audio, take.sample_rate, target_lufs)
        take = derived_take(take, audio, gain_db=gain, loudness_lufs=lufs, kind="trap")
        out.append(
            _save(
                tests,
                test_id,
                take,
                "trap",
                "__trap__",
                None,
                "whole",
                gain,
                lufs,
                expected=2.0,
            )
        )
        done += 1
    if progress:
        progress(1.0, "done")
    return out


def _save(
    tests: Any,
    test_id: str,
    take: Take,
    kind: str,
    system_id: str | None,
    prompt_id: str | None,
    condition: str,
    gain: float,
    lufs: float | None,
    *,
    expected: float | None = None,
    source: str | None = None,
) -> Stimulus:
    store = tests.store
    real_system = system_id if system_id and not system_id.startswith("__") else None
    store.save_take(take, system_id=real_system, prompt_id=prompt_id)
    st = Stimulus(
        stimulus_id=uuid.uuid4().hex,
        test_id=test_id,
        take_id=take.take_id,
        kind=kind,
        system_id=system_id,
        prompt_id=prompt_id,
        expected=expected,
        condition=condition,
        gain_db=gain,
        loudness_lufs=None if lufs is None or not math.isfinite(lufs) else lufs,
        source_take_id=source or take.meta.get("source_take_id"),
    )
    tests.add_stimulus(st)
    return st


__all__ = [
    "CONDITIONS",
    "TARGET_LUFS",
    "TRAP_TEXT",
    "Stimulus",
    "SystemSource",
    "derived_take",
    "generate",
    "low_anchor",
    "measure_lufs",
    "normalise_loudness",
]
