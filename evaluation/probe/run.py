"""The probe's three layers against one backend, and the verdict (see :mod:`evaluation.probe`).

Why a module of its own: the layers hold the run's working state (offline references, solo
takes) while the records (:mod:`evaluation.probe.records`) stay plain data.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
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
from evaluation.probe.records import (
    CROSSTALK_SURE,
    FAIL_KINDS,
    ProbeFinding,
    ProbePrompt,
    ProbeResult,
    TakeRow,
    Thresholds,
    fmt_number,
    load_prompts,
)
from evaluation.takes import ChunkRecord, Take, TakeFailed, load, record

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
    reference: str | Path | None = None,
    parity_margins: dict[str, float | None] | None = None,
    **request_fields: Any,
) -> ProbeResult:
    """Run the three layers against ``backend`` (a spec or a Backend) and return the result.

    ``concurrency`` lists the levels; 1 is the streaming layer (always run). With ``reference``
    (a folder of ``<prompt id>.wav``) the fourth layer compares the solo streams with it
    (:mod:`evaluation.probe.parity`, at ``parity_margins`` over the defaults). Extra keyword
    arguments (``voice``, ``language``, ``instructions``, ``speed``) go into every request.
    """
    levels = sorted({int(n) for n in concurrency} | {1})
    if levels[0] < 1 or levels[-1] > 256:
        raise InvalidRequest(f"concurrency levels must be 1..256, got {list(concurrency)}")
    plist = list(prompts) if isinstance(prompts, list | tuple) else load_prompts(prompts)
    ref_side = None
    if reference is not None:  # the fourth layer's folder, read before anything runs
        from evaluation.probe.parity import read_reference

        ref_side = read_reference(reference, plist)
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
        if ref_side is not None:
            from evaluation.probe.parity import parity_layer

            await parity_layer(result, ref_side, run.solo, parity_margins, log=say)
    finally:
        result.seconds = time.monotonic() - t_start
        if own:
            await be.aclose()
    return result


def probe_sync(backend: str | Backend, **kw: Any) -> ProbeResult:
    """:func:`probe` for synchronous callers."""
    return asyncio.run(probe(backend, **kw))
