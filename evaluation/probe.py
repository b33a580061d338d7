"""``listenlab probe``: vLLM-Omni's TTS validation pyramid against one backend, in one command.

vLLM-Omni asks every new speech model to pass three layers: offline inference (duration,
sample rate), streaming playback, and concurrent requests (per-request state leaks, codec
window round-robin gaps, cross-talk or truncation that only happen under load). listenlab has
every part (backends, takes, the glitch detector, the wire profiles); this module runs them as
one pass/fail check so an integrator can gate a model's CI on it::

    from evaluation.probe import probe_sync, Thresholds
    result = probe_sync("vllm-omni+http://gpu:8000?model=Qwen/Qwen3-TTS", concurrency=(1, 4, 8))
    result.passed, result.findings, result.levels[4]["ttfa_ms"]["p95"]
    from evaluation.probe_report import write_outputs
    write_outputs(result, "probe-out")   # probe.json and probe.html (the CLI adds probe.db)

Layers:

offline
    One non-streamed reference per prompt (``Backend.synthesize``): sample rate and channels
    (against the declared capabilities), duration against the text, silence, clipping.
streaming
    Each prompt streamed alone (the first one twice: two identical renderings make the backend
    *deterministic*, so later comparisons can be sample-exact). TTFA, RTF, the chunk schedule,
    what listenlab's player does on it (its start rule: first sound, ideal start, underruns;
    or a fixed prebuffer with ``--prebuffer-ms``), and the glitch detector's findings against
    the offline reference.
concurrency
    For each N > 1, N parallel streams of different prompts. Each must equal its solo rendering
    (sample-exact when deterministic; otherwise the detector compares duration, onset content
    and repeats against the solo take). TTFA/RTF p50/p95 by N, the largest gap between chunks
    by N (round-robin gaps), stalls, failures. Level N = 1 is the streaming layer.

Every finding is ``fail`` or ``warn`` by :class:`Thresholds`; the probe passes when nothing
fails. ``--strict`` (:data:`STRICT`) also fails on warnings and on latency thresholds. Seams are
numbered as everywhere in listenlab: seam k is the start of chunk k (chunks from 0).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from backends.base import Backend, SpeechRequest
from backends.errors import BackendError, InvalidRequest, ListenlabError
from backends.registry import load_backend
from evaluation.glitches import (
    DetectorConfig,
    analyze,
    player_stalls,
    playout,
    predicted_duration_s,
)
from evaluation.playout import learn_from_takes
from evaluation.takes import ChunkRecord, Take, TakeFailed, load, record

PROMPTS_DIR = Path(str(resources.files("assets") / "prompts"))
"""Bundled prompts (the ``assets`` package, so found from any working directory)."""

LAYERS = ("offline", "streaming", "concurrency")


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """What fails the probe. Every field can be set with ``--threshold NAME=VALUE``."""

    prebuffer_ms: float | None = None
    """The simulated player: ``None`` (``rule``) is listenlab's player with its start rule
    (``evaluation.playout``); a number is a simple player that starts once this much audio is
    in, as a naive client would."""
    max_stall_ms: float = 500.0
    """A stream whose simulated playback stalls longer than this at once fails (underrun)."""
    max_start_ms: float = math.inf
    """p95 time from the request to the first sound in listenlab's player (its start rule
    waits until the stream will not run dry, so a slow backend starts late rather than
    stalling)."""
    max_ttfa_ms: float = math.inf
    """p95 time to first audio, per layer and concurrency level."""
    max_rtf: float = math.inf
    """p95 real-time factor (wall time to the end of the stream over audio duration)."""
    max_chunk_gap_ms: float = math.inf
    """Largest gap between two chunks' arrivals in any stream."""
    max_clipped: float = 0.001
    """Fraction of samples at full scale that counts as clipping."""
    min_active: float = 0.2
    """Fraction of the audio that must be above the silence threshold."""
    warnings_fail: bool = False
    """Whether ``warn`` findings (clicks, natural-looking gaps, short stalls) fail too."""

    @classmethod
    def from_pairs(cls, pairs: Sequence[str], base: Thresholds | None = None) -> Thresholds:
        base = base or cls()
        known = {f.name: f for f in fields(cls)}
        over: dict[str, Any] = {}
        for kv in pairs:
            name, sep, raw = kv.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise InvalidRequest(
                    f"--threshold wants NAME=VALUE with NAME one of {', '.join(known)}; got {kv!r}"
                )
            raw = raw.strip().lower()
            if name == "warnings_fail":
                over[name] = raw in {"1", "true", "yes", "on"}
            elif name == "prebuffer_ms" and raw in {"rule", "none", ""}:
                over[name] = None
            else:
                try:
                    over[name] = float("inf" if raw in {"inf", "none", "off"} else raw)
                except ValueError:
                    raise InvalidRequest(
                        f"threshold {name} must be a number, got {raw!r}"
                    ) from None
                if over[name] != over[name] or over[name] < 0:
                    raise InvalidRequest(f"threshold {name} must be >= 0, got {raw!r}")
        return replace(base, **over)

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if v == math.inf else v) for k, v in asdict(self).items()}


STRICT = Thresholds(
    max_stall_ms=20.0,
    max_ttfa_ms=1500.0,
    max_start_ms=2000.0,
    max_rtf=0.8,
    max_chunk_gap_ms=2500.0,
    warnings_fail=True,
)
"""``--strict``: any stall, p95 TTFA > 1.5 s, p95 first sound > 2 s, p95 RTF > 0.8, a 2.5 s gap,
or any warning fails."""

CROSSTALK_SURE = 1.25
"""Cross-talk severity (times the detector's threshold) that fails without sample evidence."""

FAIL_KINDS = frozenset(
    {
        "error",
        "format",
        "silence",
        "clipping",
        "replay",
        "truncation",
        "duration",
        "crosstalk",
        "isolation",
        "ttfa",
        "start",
        "rtf",
        "chunk_gap",
    }
)
"""Finding kinds that always fail; ``underrun`` fails above ``max_stall_ms``; others warn."""


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ProbePrompt:
    prompt_id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class ProbeFinding:
    layer: str
    kind: str
    level: str
    """``fail`` or ``warn``."""
    message: str
    prompt_id: str | None = None
    concurrency: int | None = None
    take_id: str | None = None
    time_s: float | None = None
    seam: int | None = None
    """Seam k is the start of chunk k (chunks numbered from 0), as in the Playground."""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        where = f"{self.layer}" + (f" c={self.concurrency}" if self.concurrency else "")
        at = "" if self.time_s is None else f" at {self.time_s:.2f} s"
        seam = "" if self.seam is None else f" (seam {self.seam})"
        return f"{self.level.upper():4} {where:<14} {self.kind:<10} {self.prompt_id or '-'}{at}{seam}: {self.message}"


@dataclass
class TakeRow:
    """One take's numbers, as the JSON lists them."""

    take_id: str
    layer: str
    prompt_id: str
    concurrency: int
    status: str
    ttfa_ms: float | None
    rtf: float | None
    duration_s: float
    chunks: int
    max_gap_ms: float
    stall_ms: float
    sample_rate: int
    channels: int
    start_ms: float | None = None
    """First sound in listenlab's player (its start rule), from the request."""
    ideal_start_ms: float | None = None
    """The earliest start that never runs dry on this schedule."""
    identical_to_solo: bool | None = None
    schedule: list[tuple[float, int]] = field(default_factory=list)
    """Per chunk: arrival (ms from the request) and frames, as the stream delivered them."""


@dataclass
class ProbeResult:
    backend: str
    started_at: str
    prompts: list[ProbePrompt]
    thresholds: Thresholds
    concurrency: list[int]
    deterministic: bool | None = None
    load_ms: float | None = None
    takes: list[TakeRow] = field(default_factory=list)
    findings: list[ProbeFinding] = field(default_factory=list)
    levels: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per concurrency level: TTFA/RTF p50/p95, largest chunk gap, stalls, failures."""
    offline: dict[str, dict[str, Any]] = field(default_factory=dict)
    learnt: dict[str, Any] = field(default_factory=dict)
    """The simulated player's priors (seconds per character, rate), as last learnt."""
    seconds: float = 0.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    takes_by_id: dict[str, Take] = field(default_factory=dict, repr=False)
    """Every take recorded, by id (the rows in ``takes`` are their summaries)."""

    @property
    def passed(self) -> bool:
        return not any(f.level == "fail" for f in self.findings)

    def failures(self) -> list[ProbeFinding]:
        return [f for f in self.findings if f.level == "fail"]

    def kinds(self, layer: str | None = None, level: str | None = "fail") -> set[str]:
        return {
            f.kind
            for f in self.findings
            if (layer is None or f.layer == layer) and (level is None or f.level == level)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": 1,
            "run_id": self.run_id,
            "backend": self.backend,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 2),
            "passed": self.passed,
            "deterministic": self.deterministic,
            "load_ms": self.load_ms,
            "thresholds": self.thresholds.to_dict(),
            "concurrency": self.concurrency,
            "prompts": [asdict(p) for p in self.prompts],
            "offline": self.offline,
            "player": {
                "simulated": "start rule"
                if self.thresholds.prebuffer_ms is None
                else f"{self.thresholds.prebuffer_ms:g} ms prebuffer",
                "learnt": self.learnt,
            },
            "levels": {str(k): v for k, v in self.levels.items()},
            "takes": [asdict(t) for t in self.takes],
            "findings": [asdict(f) for f in self.findings],
            "seam_numbering": "seam k is the start of chunk k (chunks numbered from 0)",
        }


# --------------------------------------------------------------------------- prompts


def load_prompts(path: str | Path | None = None) -> list[ProbePrompt]:
    """Prompts from a folder of ``.txt`` files (first line the title, as ``assets/prompts``),
    a ``.json`` list of strings or ``{"id", "text"}`` objects, or a text file with one prompt
    per line (``#`` comments and blank lines skipped). Default: the bundled prompts."""
    p = Path(path) if path else PROMPTS_DIR
    out: list[ProbePrompt] = []
    if p.is_dir():
        for f in sorted(p.glob("*.txt")):
            lines = f.read_text(encoding="utf-8").strip().splitlines()
            if len(lines) >= 2:
                text = " ".join(x.strip() for x in lines[1:]).strip()
                out.append(ProbePrompt(f.stem, text, lines[0].strip()))
    elif p.is_file():
        if p.stat().st_size > 1_000_000:
            raise InvalidRequest(f"{p}: prompt file larger than 1 MB")
        raw = p.read_text(encoding="utf-8")
        if p.suffix.lower() == ".json":
            try:
                items = json.loads(raw)
            except json.JSONDecodeError as e:
                raise InvalidRequest(f"{p}: not valid JSON ({e})") from None
            if not isinstance(items, list):
                raise InvalidRequest(f"{p}: expected a JSON list of prompts")
            for i, it in enumerate(items, 1):
                if isinstance(it, str):
                    out.append(ProbePrompt(f"p{i:02d}", it))
                elif isinstance(it, dict) and isinstance(it.get("text"), str):
                    out.append(ProbePrompt(str(it.get("id") or f"p{i:02d}"), it["text"]))
                else:
                    raise InvalidRequest(f"{p}: item {i} is neither a string nor {{id, text}}")
        else:
            lines = [x.strip() for x in raw.splitlines()]
            texts = [x for x in lines if x and not x.startswith("#")]
            out = [ProbePrompt(f"p{i:02d}", t) for i, t in enumerate(texts, 1)]
    else:
        raise InvalidRequest(f"no prompts at {p} (give a folder of .txt, a .json or a .txt file)")
    out = [q for q in out if q.text.strip()]
    if not out:
        raise InvalidRequest(f"{p}: no prompts found")
    ids = [q.prompt_id for q in out]
    if len(set(ids)) != len(ids):
        raise InvalidRequest(f"{p}: prompt ids are not unique")
    return out


# --------------------------------------------------------------------------- helpers


def _pct(xs: Sequence[float | None], q: float) -> float | None:
    v = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.percentile(v, q)) if v else None


def _max_gap_ms(take: Take) -> float:
    arr = [c.arrival_ms for c in take.chunks]
    return float(np.max(np.diff(arr))) if len(arr) > 1 else 0.0


def _seam(take: Take, boundary_index: int | None, time_s: float) -> int | None:
    """User-facing seam of a finding: the detector's boundary index k is the seam where chunk
    k+1 starts; findings farther than 0.25 s from it (an onset, a tail) have no seam."""
    b = take.boundaries
    if boundary_index is None or not 0 <= boundary_index < len(b):
        return None
    if abs(b[boundary_index] / take.sample_rate - time_s) > 0.25:
        return None
    return int(boundary_index) + 1


def _whole_take(request: SpeechRequest, backend: str, audio: Any, total_ms: float) -> Take:
    samples = np.asarray(audio.samples, dtype=np.int16)
    return Take(
        request=request,
        backend=backend,
        sample_rate=int(audio.sample_rate),
        channels=int(samples.shape[1]),
        chunks=[ChunkRecord(0, total_ms, 0, int(samples.shape[0]))],
        audio=samples,
        total_ms=total_ms,
    )


def _first_difference_s(a: Take, b: Take) -> float | None:
    """Seconds into ``a`` where it first differs from ``b`` (None when sample-identical)."""
    x, y = a.audio.reshape(-1), b.audio.reshape(-1)
    n = min(len(x), len(y))
    diff = np.flatnonzero(x[:n] != y[:n])
    if len(diff):
        return float(diff[0] // max(1, a.channels)) / a.sample_rate
    if len(x) != len(y):
        return n / max(1, a.channels) / a.sample_rate
    return None


# --------------------------------------------------------------------------- the probe


class _Run:
    """One probe run's working state (freed when the run ends)."""

    def __init__(
        self,
        backend: Backend,
        result: ProbeResult,
        seed: int | None,
        request_fields: dict[str, Any],
        log: Callable[[str], None],
    ):
        self.backend, self.result, self.seed = backend, result, seed
        self.fields = request_fields
        self.th = result.thresholds
        self.cfg = DetectorConfig(prebuffer_ms=self.th.prebuffer_ms)
        self.log = log
        self.offline: dict[str, Take] = {}
        self.solo: dict[str, Take] = {}

    def request(self, prompt: ProbePrompt) -> SpeechRequest:
        kw = {k: v for k, v in self.fields.items() if v is not None}
        if self.seed is not None and self.backend.capabilities.seed:
            kw["seed"] = self.seed
        return SpeechRequest(text=prompt.text, **kw)

    def add(self, layer: str, kind: str, level: str, message: str, **kw: Any) -> None:
        if level == "warn" and self.th.warnings_fail:
            level = "fail"
        self.result.findings.append(ProbeFinding(layer, kind, level, message, **kw))

    def keep(self, take: Take, layer: str, prompt: ProbePrompt, n: int) -> TakeRow:
        take.meta = {**take.meta, "probe": {"run": self.result.run_id, "layer": layer, "n": n}}
        take.meta["probe"]["prompt_id"] = prompt.prompt_id
        self.result.takes_by_id[take.take_id] = take
        play = playout(take, self.cfg) if layer != "offline" else None
        stalls = player_stalls(take, self.cfg, play) if layer != "offline" else []
        row = TakeRow(
            take_id=take.take_id,
            layer=layer,
            prompt_id=prompt.prompt_id,
            concurrency=n,
            status=take.status,
            ttfa_ms=None if layer == "offline" else take.ttfa_ms,
            rtf=take.rtf,
            duration_s=round(take.duration_s, 4),
            chunks=len(take.chunks),
            max_gap_ms=_max_gap_ms(take),
            stall_ms=float(sum(s.stall_ms for s in stalls)),
            sample_rate=take.sample_rate,
            channels=take.channels,
            start_ms=_ms(play.start_s if play else None),
            ideal_start_ms=_ms(play.ideal_start_s if play else None),
            schedule=[]
            if layer == "offline"
            else [(round(c.arrival_ms, 1), c.frames) for c in take.chunks],
        )
        self.result.takes.append(row)
        return row

    # -- layers

    async def offline_layer(self, prompts: list[ProbePrompt]) -> None:
        caps = self.backend.capabilities
        for p in prompts:
            req = self.request(p)
            t0 = time.monotonic()
            try:
                audio = await self.backend.synthesize(req)
            except ListenlabError as e:
                self.add(
                    "offline", "error", "fail", f"synthesize failed: {e}", prompt_id=p.prompt_id
                )
                continue
            take = _whole_take(req, self.backend.describe(), audio, (time.monotonic() - t0) * 1e3)
            self.offline[p.prompt_id] = take
            self.keep(take, "offline", p, 0)
            info = self.check_whole(take, p, caps)
            self.result.offline[p.prompt_id] = info

    def learn(self, takes: list[Take]) -> None:
        """Give the simulated player the history a returning Playground user's player has: the
        backend's seconds per character and generation rate,
        learnt from the solo streams, for the concurrency layer. (The streaming layer plays as
        a first-ever take does, without history: the start rule then waits for a second
        chunk, so a stall after the first chunk shows as a late first sound, not a stall.)"""
        learnt = learn_from_takes(takes)
        self.result.learnt = learnt.to_dict()
        self.cfg = replace(
            self.cfg,
            sec_per_char=learnt.sec_per_char,
            rate_prior=learnt.rate,
        )

    def check_whole(self, take: Take, p: ProbePrompt, caps: Any) -> dict[str, Any]:
        kw = {"prompt_id": p.prompt_id, "take_id": take.take_id}
        if caps.sample_rate and take.sample_rate != caps.sample_rate:
            self.add(
                "offline",
                "format",
                "fail",
                f"{take.sample_rate} Hz, but the backend declares {caps.sample_rate} Hz",
                **kw,
            )
        if take.channels != caps.channels:
            self.add(
                "offline",
                "format",
                "fail",
                f"{take.channels} channel(s), but the backend declares {caps.channels}",
                **kw,
            )
        a = analyze(take, None, self.cfg)
        active = a.metrics["active_s"] / take.duration_s if take.duration_s else 0.0
        full = np.abs(take.audio.astype(np.int32)) >= 32767
        clipped = float(full.mean()) if take.audio.size else 0.0
        pred = predicted_duration_s(take.request.text, float(take.request.speed or 1), self.cfg)
        if not take.frames:
            self.add("offline", "silence", "fail", "no audio at all", **kw)
        elif active < self.th.min_active:
            self.add(
                "offline",
                "silence",
                "fail",
                f"only {active:.0%} of the audio is above the silence threshold",
                evidence={"active_fraction": active},
                **kw,
            )
        if clipped > self.th.max_clipped:
            self.add(
                "offline",
                "clipping",
                "fail",
                f"{clipped:.2%} of samples at full scale",
                evidence={"clipped_fraction": clipped},
                **kw,
            )
        for f in a.findings:
            if f.kind in {"truncation", "duration"}:
                self.add(
                    "offline",
                    f.kind,
                    "fail",
                    f"{take.duration_s:.2f} s for a text that predicts {pred:.2f} s"
                    if "predicted_s" in f.evidence
                    else f"non-streamed audio ends abruptly ({f.kind})",
                    time_s=f.time_s,
                    evidence=f.evidence,
                    **kw,
                )
        return {
            "sample_rate": take.sample_rate,
            "channels": take.channels,
            "duration_s": round(take.duration_s, 3),
            "predicted_s": round(pred, 3),
            "active_fraction": round(active, 3),
            "clipped_fraction": clipped,
            "wall_ms": round(take.total_ms, 1),
        }

    async def stream_one(self, p: ProbePrompt, layer: str, n: int) -> Take | None:
        try:
            take = await record(self.backend, self.request(p))
        except TakeFailed as e:
            take = e.take
            self.add(
                layer,
                "error",
                "fail",
                f"stream failed after {len(take.chunks)} chunk(s): {e}",
                prompt_id=p.prompt_id,
                concurrency=n,
                take_id=take.take_id,
            )
        except ListenlabError as e:
            self.add(layer, "error", "fail", str(e), prompt_id=p.prompt_id, concurrency=n)
            return None
        return take

    def judge(
        self,
        take: Take,
        reference: Take | None,
        layer: str,
        p: ProbePrompt,
        n: int,
        onset_differs: bool | None = None,
    ) -> list[Any]:
        """Detector findings for a streamed take -> probe findings; returns them.

        ``onset_differs``: for a deterministic backend, whether the take differs from its
        reference within the detector's onset window (None: not known)."""
        found = analyze(take, reference, self.cfg).findings
        kw = {"prompt_id": p.prompt_id, "concurrency": n, "take_id": take.take_id}
        ref_name = "its solo rendering" if layer == "concurrency" else "the offline reference"
        if reference is not None and (take.sample_rate, take.channels) != (
            reference.sample_rate,
            reference.channels,
        ):
            self.add(
                layer,
                "format",
                "fail",
                f"streamed {take.sample_rate} Hz x{take.channels}, {ref_name} "
                f"{reference.sample_rate} Hz x{reference.channels}",
                **kw,
            )
        for f in found:
            if f.kind == "underrun":
                stall = float(f.evidence.get("stall_ms", 0.0))
                level = "fail" if stall > self.th.max_stall_ms else "warn"
                msg = f"{f.evidence.get('player', 'the simulated player')} stalls {stall:.0f} ms"
                solo = self.result.levels.get(1, {}).get("rtf", {}).get("p50")
                if n > 1 and solo and n * solo >= 1:
                    msg += (
                        f" ({n} x solo RTF {solo:.2f} = {n * solo:.1f}: not enough compute for "
                        f"{n} real-time streams)"
                    )
            elif f.kind == "crosstalk":
                # The onset statistics of two renderings of a non-deterministic voice can
                # graze the threshold: a marginal one fails only when the samples confirm it.
                sure = f.severity >= CROSSTALK_SURE or bool(onset_differs)
                if onset_differs is False:
                    sure = False  # sample-identical onset: not another request's audio
                level, msg = ("fail" if sure else "warn"), _describe(f, ref_name)
                if not sure:
                    msg = "possible cross-talk: " + msg
            elif f.kind in FAIL_KINDS:
                level, msg = "fail", _describe(f, ref_name)
            else:
                level, msg = "warn", _describe(f, ref_name)
            if f.kind == "truncation" and take.status != "ok":
                continue  # already reported as an error
            self.add(
                layer,
                f.kind,
                level,
                msg,
                time_s=round(f.time_s, 3),
                seam=_seam(take, f.boundary_index, f.time_s),
                evidence=f.evidence,
                **kw,
            )
        return found

    async def streaming_layer(self, prompts: list[ProbePrompt]) -> None:
        for i, p in enumerate(prompts):
            take = await self.stream_one(p, "streaming", 1)
            if take is None:
                continue
            self.keep(take, "streaming", p, 1)
            self.judge(take, self.offline.get(p.prompt_id), "streaming", p, 1)
            if take.ok:
                self.solo[p.prompt_id] = take
            if i == 0 and take.ok:
                again = await self.stream_one(p, "streaming", 1)
                if again is not None and again.ok:
                    self.result.deterministic = _first_difference_s(again, take) is None
        solo = [self.result.takes_by_id[t] for t in self._ids("streaming", 1)]
        self.level_stats(1, solo, len(solo))
        self.learn(list(self.solo.values()))

    def _ids(self, layer: str, n: int) -> list[str]:
        return [r.take_id for r in self.result.takes if r.layer == layer and r.concurrency == n]

    async def concurrency_layer(self, prompts: list[ProbePrompt], n: int) -> None:
        chosen = [prompts[i % len(prompts)] for i in range(n)]
        takes = await asyncio.gather(*(self.stream_one(p, "concurrency", n) for p in chosen))
        kept: list[Take] = []
        for p, take in zip(chosen, takes, strict=True):
            if take is None:
                continue
            row = self.keep(take, "concurrency", p, n)
            kept.append(take)
            solo = self.solo.get(p.prompt_id)
            exact = solo is not None and bool(self.result.deterministic) and take.ok
            d = _first_difference_s(take, solo) if exact else None
            onset = (d is not None and d < self.cfg.crosstalk_onset_s + 0.5) if exact else None
            self.judge(take, solo, "concurrency", p, n, onset_differs=onset)
            if exact:
                row.identical_to_solo = d is None
                if d is not None:
                    self.add(
                        "concurrency",
                        "isolation",
                        "fail",
                        f"differs from its solo rendering from {d:.3f} s on "
                        f"({take.duration_s:.2f} s vs {solo.duration_s:.2f} s); the backend is "
                        "deterministic, so concurrent streams must be sample-identical",
                        prompt_id=p.prompt_id,
                        concurrency=n,
                        take_id=take.take_id,
                        time_s=round(d, 3),
                        evidence={"first_difference_s": d},
                    )
        self.level_stats(n, kept, len(chosen))

    def level_stats(self, n: int, takes: list[Take], started: int) -> None:
        layer = "streaming" if n == 1 else "concurrency"
        ttfa = [t.ttfa_ms for t in takes]
        rtf = [t.rtf for t in takes if t.ok]
        gaps = [_max_gap_ms(t) for t in takes]
        rows = [r for r in self.result.takes if r.layer == layer and r.concurrency == n]
        start = [r.start_ms for r in rows if r.status == "ok"]
        late = [
            r.start_ms - r.ideal_start_ms
            for r in rows
            if r.status == "ok" and r.start_ms is not None and r.ideal_start_ms is not None
        ]
        solo_rtf = self.result.levels.get(1, {}).get("rtf", {}).get("p50")
        stats = {
            "streams": started,
            "load_factor": None if n == 1 or not solo_rtf else round(n * solo_rtf, 3),
            "failed": started - sum(t.ok for t in takes),
            "ttfa_ms": {"p50": _pct(ttfa, 50), "p95": _pct(ttfa, 95), "max": _pct(ttfa, 100)},
            "rtf": {"p50": _pct(rtf, 50), "p95": _pct(rtf, 95), "max": _pct(rtf, 100)},
            "start_ms": {"p50": _pct(start, 50), "p95": _pct(start, 95), "max": _pct(start, 100)},
            "late_by_ms": {"p50": _pct(late, 50), "max": _pct(late, 100)},
            "max_chunk_gap_ms": max(gaps) if gaps else None,
            "stall_ms_max": max((r.stall_ms for r in rows), default=0.0),
            "findings_failed": sum(
                1
                for f in self.result.findings
                if f.layer == layer and f.level == "fail" and (f.concurrency or 1) == n
            ),
        }
        self.result.levels[n] = stats
        th = self.th
        for key, limit, kind, unit, what in (
            ("ttfa_ms", th.max_ttfa_ms, "ttfa", "ms", "TTFA"),
            ("start_ms", th.max_start_ms, "start", "ms", "first sound"),
            ("rtf", th.max_rtf, "rtf", "", "RTF"),
        ):
            v = stats[key]["p95"]
            if v is not None and v > limit:
                self.add(
                    layer,
                    kind,
                    "fail",
                    f"p95 {what} {v:.3g}{unit} > {limit:g}{unit} at c={n}",
                    concurrency=n,
                    evidence={"p95": v, "limit": limit},
                )
        g = stats["max_chunk_gap_ms"]
        if g is not None and g > th.max_chunk_gap_ms:
            self.add(
                layer,
                "chunk_gap",
                "fail",
                f"a {g:.0f} ms gap between chunks > {th.max_chunk_gap_ms:g} ms at c={n}",
                concurrency=n,
                evidence={"max_chunk_gap_ms": g},
            )
        self.log(
            f"c={n:<3} TTFA p50 {fmt_number(stats['ttfa_ms']['p50'])} p95 {fmt_number(stats['ttfa_ms']['p95'])} ms"
            f"  first sound p50 {fmt_number(stats['start_ms']['p50'])} ms"
            f"  RTF p50 {fmt_number(stats['rtf']['p50'], 3)} p95 {fmt_number(stats['rtf']['p95'], 3)}"
            f"  max gap {fmt_number(g)} ms  failed streams {stats['failed']}/{started}"
        )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def fmt_number(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _describe(f: Any, ref_name: str) -> str:
    e = f.evidence
    if f.kind == "replay":
        if isinstance(e.get("lag_s"), float) and isinstance(e.get("length_s"), float):
            return f"{e['length_s']:.2f} s of audio heard {e['lag_s']:.2f} s earlier is repeated"
        return "audio heard earlier is repeated"
    if f.kind == "duration":
        r = e.get("ratio")
        return f"{r:.2f}x as long as {ref_name}" if r else "much longer than the text predicts"
    if f.kind == "truncation":
        if "ratio" in e:
            return f"only {e['ratio']:.0%} of the speech in {ref_name}: the stream ended early"
        if "abrupt_end_db" in e:
            return "ends mid-sound"
        return "ends early"
    if f.kind == "crosstalk":
        return f"the onset does not match {ref_name} ({e.get('foreign', 'content')} from elsewhere)"
    if f.kind == "gap":
        return "a silence at a seam the speech does not explain"
    if f.kind == "click":
        return "a waveform discontinuity at a seam"
    return f.kind


async def probe(
    backend: str | Backend,
    *,
    concurrency: Sequence[int] = (1, 4),
    prompts: Sequence[ProbePrompt] | str | Path | None = None,
    seed: int | None = None,
    thresholds: Thresholds | None = None,
    log: Callable[[str], None] | None = None,
    **request_fields: Any,
) -> ProbeResult:
    """Run the three layers against ``backend`` (a spec or a Backend) and return the result.

    ``concurrency`` lists the levels; 1 is the streaming layer (always run). Extra keyword
    arguments (``voice``, ``language``, ``instructions``, ``speed``) go into every request.
    """
    levels = sorted({int(n) for n in concurrency} | {1})
    if levels[0] < 1 or levels[-1] > 256:
        raise InvalidRequest(f"concurrency levels must be 1..256, got {list(concurrency)}")
    plist = list(prompts) if isinstance(prompts, list | tuple) else load_prompts(prompts)
    own = isinstance(backend, str)
    be = load_backend(backend) if own else backend
    say = log or (lambda _m: None)
    result = ProbeResult(
        backend=be.describe(),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        prompts=plist,
        thresholds=thresholds or Thresholds(),
        concurrency=levels,
    )
    t_start = time.monotonic()
    try:
        t0 = time.monotonic()
        try:
            loaded = await load(be)
        except ListenlabError as e:
            raise BackendError(f"the backend did not load: {e}") from e
        if loaded:
            result.load_ms = round((time.monotonic() - t0) * 1000, 1)
            say(f"loaded {result.backend} in {result.load_ms:.0f} ms")
        run = _Run(be, result, seed, request_fields, say)
        say(f"offline layer: {len(plist)} prompt(s), non-streamed")
        await run.offline_layer(plist)
        say("streaming layer: each prompt alone")
        await run.streaming_layer(plist)
        say(f"deterministic: {result.deterministic}")
        for n in levels[1:]:
            say(f"concurrency layer: {n} parallel streams")
            await run.concurrency_layer(plist, n)
    finally:
        result.seconds = time.monotonic() - t_start
        if own:
            await be.aclose()
    return result


def probe_sync(backend: str | Backend, **kw: Any) -> ProbeResult:
    """:func:`probe` for synchronous callers."""
    return asyncio.run(probe(backend, **kw))


__all__ = [
    "FAIL_KINDS",
    "STRICT",
    "ProbeFinding",
    "ProbePrompt",
    "ProbeResult",
    "Thresholds",
    "load_prompts",
    "probe",
    "probe_sync",
]
