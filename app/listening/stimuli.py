"""Stimuli for listening tests: stored takes (generated or imported), loudness-normalised, plus
the screening items, made as the standards describe.

It lives with the listening tests in ``app/`` because it builds tests (the designer calls
:func:`generate`); which screening stimuli a test gets is its kind's answer
(:meth:`evaluation.listening.kinds.TestKind.extra_stimuli`). The stored row is
:class:`app.store.listening.Stimulus`.

Why stored takes: a generated stimulus keeps its recorded chunk arrival timeline, so the *as
streamed* condition can replay the real stream's stalls to every rater, and glitch marks map to
its seams. Imported audio (:mod:`app.listening.imported`) has no timeline: one chunk,
played *whole*.

* Loudness (:func:`normalise`): ITU-R BS.1770 integrated loudness (``pyloudnorm``) measured on
  what each ear hears — each channel on its own, a mono file being heard by both ears — and the
  ears' power mean brought to one target (-23 LUFS by default), so a stereo file does not play
  3 dB quieter than a mono one. The gain is capped so the true peak (4x oversampled,
  ``scipy.signal.resample_poly``) stays under a ceiling (-1 dBTP); the cap is recorded.
* MUSHRA anchors (:func:`lowpass`): the reference low-passed at 3.5 kHz (low anchor) and 7 kHz
  (mid anchor) by a zero-phase Butterworth (``sosfiltfilt``: sample-aligned with the reference,
  so switching keeps the position), nothing else added, then normalised like every stimulus.
* The MOS gold "1" / A/B check's bad side (:func:`degraded_anchor`): a 3.5 kHz low-pass with
  clicks and a gap — obviously bad, which is what a gold "1" must be.
* The MOS gold "5": a natural recording or an admin-marked known-good clip, never a take of a
  system under test.
* The MOS trap (:func:`splice_trap`): the start of a real stimulus, then a spoken instruction
  ("For this item, please select the score two") synthesised by the Piper voice, as P.808's
  trapping clips; the take keeps the real stimulus's text, so the page never shows the
  instruction.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import signal

from app.listening.imported import ImportedAudio, ImportedSet
from app.store.listening import Stimulus
from backends.base import Backend, SpeechRequest
from evaluation.listening.design import (
    ANCHOR,
    GOLD,
    MUSHRA_ANCHORS,
    TRAP,
    TRAP_ANSWER,
    Design,
)
from evaluation.loudness import (
    CEILING_DBTP,
    TARGET_LUFS,
    Normalised,
    as_float,
    ear_lufs,
    measure_lufs,
    normalise,
    true_peak_dbtp,
)
from evaluation.takes import ChunkRecord, Take, record

ANCHOR_CUTOFF_HZ = 3500.0
ANCHOR_GAP_MS = 150.0
LOWPASS_ORDER = 8
"""Butterworth order of the anchors' low-pass (applied forward and backward: 16th-order
magnitude, zero phase)."""
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
TRAP_TEXT = f"For this item, please select the score {NUMBER_WORDS[TRAP_ANSWER]}."
TRAP_LEAD_S = 2.0
"""Seconds of the real stimulus before the instruction (at most half of it)."""
TRAP_PAUSE_S = 0.3
FADE_MS = 5.0
CONDITIONS = ("as_streamed", "whole", "live")


# --------------------------------------------------------------------------- loudness


def lowpass(audio: np.ndarray, sample_rate: int, cutoff_hz: float) -> np.ndarray:
    """Float64 ``(frames, channels)``: a zero-phase Butterworth low-pass of ``audio``.

    Raises when the rate cannot carry the cutoff (an anchor equal to its reference is no
    anchor)."""
    if sample_rate <= 2 * cutoff_hz:
        raise ValueError(
            f"a {cutoff_hz / 1000:g} kHz anchor needs a reference sampled above "
            f"{2 * cutoff_hz / 1000:g} kHz; this one is {sample_rate} Hz"
        )
    x = as_float(audio)
    sos = signal.butter(LOWPASS_ORDER, cutoff_hz, btype="low", fs=sample_rate, output="sos")
    return signal.sosfiltfilt(sos, x, axis=0)


def degraded_anchor(audio: np.ndarray, sample_rate: int, boundaries: list[int]) -> np.ndarray:
    """Float64: a click at every seam, low-pass at 3.5 kHz (the clicks too: no edge sharper
    than the band, so the true peak is what a meter reads), then a 150 ms gap at the middle
    seam. The MOS gold "1" and the A/B check's bad side: obviously bad, not a MUSHRA anchor."""
    x = as_float(audio).copy()
    n = x.shape[0]
    seams = [b for b in boundaries if 0 < b < n] or [n * k // 4 for k in (1, 2, 3)]
    click = int(0.002 * sample_rate) or 1
    level = 0.9 * float(np.abs(x).max() or 1.0)  # as loud as the speech's peaks, not louder
    for b in seams:
        x[b : b + click] = level * np.sign(np.sin(np.arange(min(click, n - b)) + 1))[:, None]
    if sample_rate > 2 * ANCHOR_CUTOFF_HZ:
        x = lowpass(x, sample_rate, ANCHOR_CUTOFF_HZ)
    mid = seams[len(seams) // 2]
    gap = int(ANCHOR_GAP_MS / 1000 * sample_rate)
    x[mid + click : mid + click + gap] = 0.0
    return x


def low_anchor(audio: np.ndarray, sample_rate: int, boundaries: list[int]) -> np.ndarray:
    """int16 :func:`degraded_anchor` (kept for callers of the older name)."""
    return np.clip(
        np.round(degraded_anchor(audio, sample_rate, boundaries) * 32767.0), -32768, 32767
    ).astype(np.int16)


def _fade(n: int, sample_rate: int) -> np.ndarray:
    k = min(n, max(1, int(FADE_MS / 1000 * sample_rate)))
    return 0.5 - 0.5 * np.cos(np.pi * np.arange(k) / k)


def splice_trap(
    carrier: np.ndarray, instruction: np.ndarray, sample_rate: int
) -> tuple[np.ndarray, int]:
    """``(float audio, cut)``: the first :data:`TRAP_LEAD_S` (at most half) of ``carrier``, a
    5 ms raised-cosine fade, a pause, then ``instruction`` (same rate; mixed to the carrier's
    channels). ``cut`` is the frame where the carrier stops."""
    c = as_float(carrier)
    ins = as_float(instruction)
    ins = np.repeat(ins.mean(axis=1, keepdims=True), c.shape[1], axis=1)
    cut = min(int(TRAP_LEAD_S * sample_rate), c.shape[0] // 2)
    lead = c[:cut].copy()
    f = _fade(cut, sample_rate)
    lead[cut - len(f) :] *= f[::-1, None]
    ins = ins.copy()
    g = _fade(len(ins), sample_rate)
    ins[: len(g)] *= g[:, None]
    pause = np.zeros((int(TRAP_PAUSE_S * sample_rate), c.shape[1]))
    return np.concatenate([lead, pause, ins]), cut


# --------------------------------------------------------------------------- takes


def derived_take(
    take: Take, audio: np.ndarray, chunks: list[ChunkRecord] | None = None, **meta: Any
) -> Take:
    """A new take (new id) with ``take``'s request (so its text) and chunk timeline (or
    ``chunks``) and different audio."""
    tid = uuid.uuid4().hex
    a = np.ascontiguousarray(audio if audio.ndim == 2 else audio[:, None])
    return replace(
        take,
        audio=a,
        channels=int(a.shape[1]),
        chunks=list(take.chunks if chunks is None else chunks),
        take_id=tid,
        request=replace(take.request, request_id=tid),
        meta={**take.meta, **meta, "source_take_id": take.take_id},
    )


def imported_take(clip: ImportedAudio, text: str | None, system: str, origin: str) -> Take:
    """A take of an imported file: one chunk (no stream timeline), played *whole*."""
    n = int(clip.audio.shape[0])
    tid = uuid.uuid4().hex
    return Take(
        request=SpeechRequest(text=text or "", request_id=tid),
        backend=f"import:{system}",
        sample_rate=clip.sample_rate,
        channels=int(clip.audio.shape[1]),
        chunks=[ChunkRecord(0, 0.0, 0, n)],
        audio=clip.audio,
        total_ms=0.0,
        take_id=tid,
        meta={"origin": origin},
    )


def _resample(audio: np.ndarray, rate: int, to: int) -> np.ndarray:
    if rate == to:
        return as_float(audio)
    import soxr

    return np.asarray(soxr.resample(as_float(audio), rate, to), dtype=np.float64)


# --------------------------------------------------------------------------- sources


@dataclass
class SystemSource:
    """A system under test made by a backend, plus the request fields that make it this system."""

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


@dataclass
class ImportedSource:
    """A system whose audio was made elsewhere (or recorded: ``natural``), from a checked set."""

    system_id: str
    clips: ImportedSet
    natural: bool = False
    condition: str = "whole"

    @property
    def spec(self) -> str:
        return f"import:{'natural' if self.natural else 'files'}"


@dataclass(frozen=True)
class GoldClip:
    """A clip the admin marked as known-good: the MOS gold "5"."""

    clip: ImportedAudio
    text: str | None = None


Progress = Callable[[float, str], None]
Source = SystemSource | ImportedSource


@dataclass(frozen=True)
class Loudness:
    """The loudness rule of one test: target and true-peak ceiling, or (``normalise`` off)
    the stimuli's own levels, measured and recorded but not changed."""

    target_lufs: float = TARGET_LUFS
    ceiling_dbtp: float = CEILING_DBTP
    normalise: bool = True


def as_is(audio: np.ndarray, sample_rate: int, ceiling_dbtp: float) -> Normalised:
    """A stimulus kept at its own level (gain 0), with its loudness and true peak measured as
    :func:`~evaluation.loudness.normalise` measures them (``limited``: never)."""
    x = as_float(audio)
    lufs = measure_lufs(x, sample_rate)
    y = np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)
    return Normalised(
        y,
        0.0,
        lufs,
        lufs,
        tuple(ear_lufs(x, sample_rate)),
        true_peak_dbtp(x, sample_rate),
        float("nan"),
        ceiling_dbtp,
        False,
    )


class _Writer:
    """Normalise, save and register a test's stimuli (one place for the common steps)."""

    def __init__(self, tests: Any, test_id: str, loud: Loudness):
        self.tests, self.test_id, self.loud = tests, test_id, loud
        self.out: list[Stimulus] = []

    def add(
        self,
        take: Take,
        kind: str,
        system_id: str,
        prompt_id: str | None,
        condition: str,
        *,
        expected: float | None = None,
        source: str | None = None,
        **meta: Any,
    ) -> tuple[Stimulus, Take]:
        loud = self.loud
        n = (
            normalise(take.audio, take.sample_rate, loud.target_lufs, loud.ceiling_dbtp)
            if loud.normalise
            else as_is(take.audio, take.sample_rate, loud.ceiling_dbtp)
        )
        take = derived_take(take, n.audio, gain_db=n.gain_db, system=system_id, kind=kind)
        store = self.tests.store
        real_system = None if system_id.startswith("__") else system_id
        store.save_take(take, system_id=real_system, prompt_id=prompt_id)
        st = Stimulus(
            stimulus_id=uuid.uuid4().hex,
            test_id=self.test_id,
            take_id=take.take_id,
            kind=kind,
            system_id=system_id,
            prompt_id=prompt_id,
            expected=expected,
            condition=condition,
            gain_db=round(n.gain_db, 4),
            loudness_lufs=n.input_lufs if math.isfinite(n.input_lufs) else None,
            target_lufs=loud.target_lufs if loud.normalise else None,
            source_take_id=source or take.meta.get("source_take_id"),
            meta={**n.meta(), **meta},
        )
        self.tests.add_stimulus(st)
        self.out.append(st)
        return st, take


@dataclass
class _Run:
    """One :func:`generate` call: where stimuli go, what they are made from, the progress."""

    w: _Writer
    design: Design
    systems: Mapping[str, Source]
    natural: list[str]
    total: int
    progress: Progress | None
    takes: dict[tuple[str, str], Take] = field(default_factory=dict)
    done: int = 0

    def tick(self, msg: str) -> None:
        if self.progress:
            self.progress(self.done / max(self.total, 1), msg)

    def condition(self, system: str) -> str:
        return self.systems[system].condition


async def generate(
    tests: Any,
    test_id: str,
    design: Design,
    systems: Mapping[str, Source],
    prompts: Mapping[str, str | None],
    *,
    trap_backend: Backend | None = None,
    target_lufs: float = TARGET_LUFS,
    ceiling_dbtp: float = CEILING_DBTP,
    gold_clip: GoldClip | None = None,
    prompt_keys: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    normalise: bool = True,
) -> list[Stimulus]:
    """Record (or import) every system x prompt, normalise and store them, plus the screening
    items the test's kind asks for (:meth:`~evaluation.listening.kinds.TestKind.extra_stimuli`):
    MUSHRA's low and mid anchors per prompt; MOS's gold "1", gold "5" (when there is a natural
    system or ``gold_clip``) and trap; A/B's check pair sides.

    ``tests`` is an :class:`app.store.listening.TestStore`; ``prompts`` maps the test's
    prompt ids to their text (None: an imported prompt without text, only for imported
    systems); ``prompt_keys`` maps a test prompt id to the imported set's prompt id.
    """
    extra = design.test_kind.extra_stimuli(design)
    natural = [s for s, src in systems.items() if isinstance(src, ImportedSource) and src.natural]
    if design.gold and gold_clip is None and not natural:
        raise ValueError("the design expects a gold clip but there is no natural system or clip")
    jobs = [(s, p) for s in design.systems for p in design.prompts]
    run = _Run(
        _Writer(tests, test_id, Loudness(target_lufs, ceiling_dbtp, normalise)),
        design,
        systems,
        natural,
        len(jobs) + (1 if "trap" in extra else 0),
        progress,
    )
    _register(tests.store, systems, prompts)
    keys = dict(prompt_keys or {p: p for p in prompts})
    for sid, pid in jobs:
        run.tick(f"{sid}: {pid}")
        run.takes[sid, pid] = await _item(run, sid, pid, prompts[pid], keys[pid])
        run.done += 1
    if "lowpass_anchors" in extra:
        _lowpass_anchors(run)
    if "degraded_anchor" in extra:
        _degraded_anchor(run)
    if "check_clean" in extra:
        _check_clean(run)
    if "gold" in extra:
        _gold(run, gold_clip)
    if "trap" in extra:
        await _trap(run, trap_backend)
    if progress:
        progress(1.0, "done")
    return run.w.out


def _register(store: Any, systems: Mapping[str, Source], prompts: Mapping[str, str | None]):
    """The test's systems and prompts as store rows (takes refer to them)."""
    from app.store import Prompt, System

    for sid, src in systems.items():
        if isinstance(src, SystemSource):
            sysrow = System(sid, backend=src.spec, voice=src.voice, params=dict(src.params))
        else:
            sysrow = System(sid, backend=src.spec, params={"natural": src.natural})
        store.add_system(replace(sysrow, label=sid))
    for pid, text in prompts.items():
        store.add_prompt(Prompt(pid, text=text or "", category="listening"))


async def _item(run: _Run, sid: str, pid: str, text: str | None, key: str) -> Take:
    """One system's take of one prompt: recorded by its backend or imported, then stored."""
    src = run.systems[sid]
    if isinstance(src, SystemSource):
        if not text:
            raise ValueError(f"system {sid} needs the text of prompt {key!r}")
        take, origin = await record(src.backend, src.request(text)), "generated"
    else:
        clip = src.clips.load(sid, key)
        origin = "natural" if src.natural else "imported"
        take = imported_take(clip, text, sid, origin)
        path = src.clips.files[sid, key]
        return run.w.add(
            take,
            "item",
            sid,
            pid,
            src.condition,
            origin=origin,
            **source_file(path, src.clips.root),
        )[1]
    return run.w.add(take, "item", sid, pid, src.condition, origin=origin)[1]


def source_file(path: Any, root: Any) -> dict[str, str]:
    """An imported stimulus's file (relative to the stimuli folder) and its SHA-256, for the
    export: a reader can check that the study played the files it says."""
    import hashlib
    from pathlib import Path

    p, r = Path(path), Path(root)
    try:
        name = str(p.relative_to(r))
    except ValueError:
        name = p.name
    return {"file": name, "file_sha256": hashlib.sha256(p.read_bytes()).hexdigest()}


def _lowpass_anchors(run: _Run) -> None:
    """BS.1534-3: the reference low-passed at 3.5 and 7 kHz, per prompt."""
    ref = str(run.design.reference)
    for pid in run.design.prompts:
        src_take = run.takes[ref, pid]
        for anchor_sys, (name, hz) in MUSHRA_ANCHORS.items():
            y = lowpass(src_take.audio, src_take.sample_rate, hz)
            run.w.add(
                derived_take(src_take, y),
                "anchor",
                anchor_sys,
                pid,
                run.condition(ref),
                source=src_take.take_id,
                anchor=name,
                lowpass_hz=hz,
            )


def _variants(run: _Run) -> list[tuple[int, str, str | None]]:
    """``(k, prompt, stored prompt id)`` of the check stimuli to make: one per prompt of the
    design's :attr:`~evaluation.listening.design.Design.check_variants` (a test made before
    them: one set from the first prompt, stored without a prompt)."""
    d = run.design
    if d.check_variants <= 0:
        return [(0, d.prompts[0], None)]
    return [(k, p, p) for k, p in enumerate(d.prompts[: d.check_variants])]


def _degraded_anchor(run: _Run) -> None:
    """MOS: the gold "1"; A/B: the check pairs' bad side (from a natural recording, else the
    reference, else the systems in turn), one per check prompt."""
    d = run.design
    for k, pid, stored in _variants(run):
        base = (run.natural[0] if run.natural else None) or d.reference
        base = base or d.systems[k % len(d.systems)]
        src_take = run.takes[base, pid]
        y = degraded_anchor(src_take.audio, src_take.sample_rate, src_take.boundaries)
        run.w.add(
            derived_take(src_take, y),
            "anchor",
            ANCHOR,
            stored,
            run.condition(base),
            expected=1.0,
            source=src_take.take_id,
            anchor="degraded",
            lowpass_hz=ANCHOR_CUTOFF_HZ,
        )


def _check_clean(run: _Run) -> None:
    """A/B: the check pairs' clean side (not a gold "5")."""
    first, p0 = run.design.systems[0], run.design.prompts[0]
    src_take = run.takes[first, p0]
    run.w.add(
        derived_take(src_take, src_take.audio),
        "gold",
        first,
        None,
        run.condition(first),
        expected=5.0,
        source=src_take.take_id,
    )


def _gold(run: _Run, gold_clip: GoldClip | None) -> None:
    """MOS: the gold "5", the admin's known-good clip or the first natural recording (one
    per check prompt)."""
    if gold_clip is not None:
        take = imported_take(gold_clip.clip, gold_clip.text, GOLD, "admin_gold")
        run.w.add(take, "gold", GOLD, None, "whole", expected=5.0, origin="admin_gold")
        return
    nat = run.natural[0]
    for _k, pid, stored in _variants(run):
        src_take = run.takes[nat, pid]
        run.w.add(
            derived_take(src_take, src_take.audio),
            "gold",
            GOLD,
            stored,
            run.condition(nat),
            expected=5.0,
            source=src_take.take_id,
            origin="natural",
        )


async def _trap(run: _Run, trap_backend: Backend | None) -> None:
    """MOS: a real stimulus with the spoken instruction spliced in, one per check prompt
    (carriers: the systems in turn from the last; the instruction is recorded once)."""
    run.tick("attention check (CPU voice)")
    if trap_backend is None:
        raise ValueError("the trap needs the Piper voice")
    spoken = await record(trap_backend, SpeechRequest(text=TRAP_TEXT).validated())
    d = run.design
    for k, pid, stored in _variants(run):
        system = d.systems[-1 - k % len(d.systems)]
        carrier = run.takes[system, pid if stored else d.prompts[-1]]
        _splice_one(run, carrier, spoken, stored, run.condition(system))
    run.done += 1


def _splice_one(run: _Run, carrier: Take, spoken: Take, stored: str | None, cond: str) -> None:
    ins = _resample(spoken.audio, spoken.sample_rate, carrier.sample_rate)
    y, cut = splice_trap(carrier.audio, ins, carrier.sample_rate)
    chunks = [
        ChunkRecord(c.index, c.arrival_ms, c.offset, min(c.frames, cut - c.offset))
        for c in carrier.chunks
        if c.offset < cut
    ]
    last = chunks[-1].arrival_ms if chunks else 0.0
    chunks.append(ChunkRecord(len(chunks), last, cut, int(y.shape[0]) - cut))
    run.w.add(
        derived_take(carrier, y, chunks),
        "trap",
        TRAP,
        stored,
        cond,
        expected=float(TRAP_ANSWER),
        source=carrier.take_id,
        instruction=TRAP_TEXT,
        instruction_at_s=round((cut / carrier.sample_rate) + TRAP_PAUSE_S, 3),
    )


def level_lines(stimuli: list[Stimulus]) -> list[str]:
    """The gains the stimuli got and how many the true-peak ceiling capped: what the admin
    reads before opening a test."""
    if not stimuli:
        return []
    gains = [s.gain_db for s in stimuli]
    capped = [s for s in stimuli if s.meta.get("limited")]
    if all(s.target_lufs is None for s in stimuli):
        loud = [s.loudness_lufs for s in stimuli if s.loudness_lufs is not None]
        span = f"{min(loud):.1f} to {max(loud):.1f} LUFS" if loud else "unmeasured"
        return [f"Levels kept as they came (no normalisation): {len(stimuli)} stimuli, {span}."]
    out = [
        f"Loudness: {len(stimuli)} stimuli normalised to {stimuli[0].target_lufs:g} LUFS with "
        f"gains {min(gains):+.1f} to {max(gains):+.1f} dB; {len(capped)} of {len(stimuli)} "
        "capped by the true-peak ceiling (they play quieter than the target)."
    ]
    out += [
        f"- capped: {s.system_id} / {s.prompt_id or s.kind}: gain {s.gain_db:+.1f} dB, "
        f"{s.meta.get('output_lufs')} LUFS"
        for s in capped[:10]
    ]
    return out


__all__ = [
    "CONDITIONS",
    "level_lines",
    "TRAP_TEXT",
    "GoldClip",
    "ImportedSource",
    "Loudness",
    "Stimulus",
    "SystemSource",
    "degraded_anchor",
    "derived_take",
    "generate",
    "imported_take",
    "low_anchor",
    "lowpass",
    "splice_trap",
]
