"""Wire profiles: make any voice stream the way a given vLLM-Omni model streams.

listenlab's users run models we cannot run here (Qwen3-TTS, Fish Speech, CosyVoice3,
MOSS-TTS-Nano, VoxCPM2 on a GPU). What breaks players and clients is not the voice but the
*wire*: the sample rate, the channel layout and the chunk schedule (Qwen3-TTS's default deploy
sends 80 ms, then 2 s chunks; a player that starts on the first chunk stalls for ~920 ms).
A profile takes the real CPU voice's audio and re-emits it exactly as that model's server
would send it:

* resampled to the profile's rate with soxr's *streaming* resampler (the first chunk does not
  wait for the whole utterance, and the result equals ``soxr.resample`` of the whole take);
* duplicated to interleaved stereo when the model sends two channels;
* cut to the model's codec-frame schedule (first chunk(s), then steady chunks; the last chunk
  is the remainder), as vLLM-Omni's stage input processors cut it;
* paced from the schedule, not from how fast Piper runs: at ``pace=2`` a chunk of ``d`` seconds
  of audio is sent ``d/2`` seconds after the previous one, like a server generating at 2x real
  time. Optional jitter and stalls ("1.4 s gap after chunk 12", vLLM-Omni issue #2562). A chunk
  is never sent before the inner voice has produced its audio. The schedule counts from the
  request, unless the inner voice's first audio comes later than chunk 0 is due: then it counts
  from that first audio, so the gaps between chunks do not depend on the machine's load.

The profiles are derived from the model units (``backends/vllm_omni/models/<model>.py``: rate,
channels, chunk schedule and where each was read), one per unit with a schedule, plus
``custom``. Use it on any spec: ``piper?profile=qwen3-tts``, ``piper?deterministic=1&profile=custom&rate=48000
&channels=2&first_frames=1&chunk_frames=25&frame_hz=12.5&pace=0.67``. Every profile records
where each of its numbers came from (``source``) and what was assumed (``assumptions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import numpy as np

from backends.base import AudioChunk, Backend, Capabilities, Health, SpeechRequest, Voice
from backends.errors import BackendError, InvalidRequest
from backends.registry import WrapperBackend, register_wrapper
from backends.stand_in import StandIn
from backends.vllm_omni.models import UNITS, ModelUnit

# --------------------------------------------------------------------------- profile types


@dataclass(frozen=True)
class Stall:
    """An extra gap of ``seconds`` between chunk ``after`` and chunk ``after + 1`` (0-based).

    Everything after the stall is late by the same amount, as when a server falls behind.
    """

    after: int
    seconds: float


@dataclass(frozen=True)
class WireProfile:
    """How one model's server streams: format, chunk schedule in codec frames, and pacing."""

    name: str
    model: str
    """The model this profile imitates (Hugging Face id), or a description for ``custom``."""
    sample_rate: int
    channels: int
    frame_hz: float
    """Codec frames per second; chunk sizes are whole frames of ``sample_rate / frame_hz``."""
    first_frames: tuple[int, ...]
    """Sizes of the first chunks, in frames (Fish Speech sends six 4-frame chunks first)."""
    chunk_frames: int
    """Steady chunk size, in frames, after ``first_frames``. The last chunk is the remainder."""
    pace: float = 2.0
    """Speed of the simulated server relative to real time (2 = twice as fast); 0 = unpaced."""
    jitter_ms: float = 0.0
    """Each chunk is late by a uniform random 0..jitter_ms (never early)."""
    stalls: tuple[Stall, ...] = ()
    ttfa_ms: float = 0.0
    """Fixed server latency before the first chunk's generation starts (prefill)."""
    seed: int | None = None
    """Seed for the jitter; None draws a fresh one per request."""
    whole_file: bool = False
    """The model's server streams nothing until the end: one chunk, the whole utterance,
    due when the simulated server has made all of it (IndexTTS-2, OmniVoice, …)."""
    unit: str | None = None
    """The model unit this profile is made from (its voices, clone fields and rules), or None
    (``custom``: the inner voice's own voices, no model's rules)."""
    source: str = ""
    """Which vLLM-Omni (or upstream) file each parameter came from, and what it says."""
    assumptions: str = ""
    """What is not documented and was chosen here, and why."""

    def __post_init__(self) -> None:
        problems = []
        if not 8000 <= self.sample_rate <= 192000:
            problems.append(f"rate must be 8000..192000 Hz, got {self.sample_rate}")
        if not 1 <= self.channels <= 8:
            problems.append(f"channels must be 1..8, got {self.channels}")
        if not (self.frame_hz > 0 and math.isfinite(self.frame_hz)):
            problems.append(f"frame_hz must be a positive number, got {self.frame_hz}")
        if not self.first_frames or any(f < 1 for f in self.first_frames):
            problems.append(f"first_frames must be whole frames >= 1, got {self.first_frames}")
        if self.chunk_frames < 1:
            problems.append(f"chunk_frames must be >= 1, got {self.chunk_frames}")
        if not (self.pace >= 0 and math.isfinite(self.pace)):
            problems.append(f"pace must be >= 0 (0 = unpaced), got {self.pace}")
        if not self.jitter_ms >= 0:
            problems.append(f"jitter_ms must be >= 0, got {self.jitter_ms}")
        if not self.ttfa_ms >= 0:
            problems.append(f"ttfa_ms must be >= 0, got {self.ttfa_ms}")
        for s in self.stalls:
            if s.after < 0 or not s.seconds >= 0:
                problems.append(f"a stall needs chunk >= 0 and seconds >= 0, got {s}")
        if problems:
            raise InvalidRequest(f"profile {self.name!r}: " + "; ".join(problems))

    # -- the schedule

    @property
    def samples_per_frame(self) -> float:
        return self.sample_rate / self.frame_hz

    def frames_in_chunk(self, index: int) -> int:
        return self.first_frames[index] if index < len(self.first_frames) else self.chunk_frames

    def chunk_end(self, index: int) -> int:
        """Sample (per channel) where chunk ``index`` ends if the audio is long enough."""
        if self.whole_file:
            return WHOLE
        n = len(self.first_frames)
        frames = (
            sum(self.first_frames[: index + 1])
            if index < n
            else sum(self.first_frames) + (index + 1 - n) * self.chunk_frames
        )
        return round(frames * self.samples_per_frame)

    def chunk_sizes(self, total: int) -> list[int]:
        """Samples per channel of each chunk for an utterance of ``total`` samples."""
        sizes, start, i = [], 0, 0
        while start < total:
            end = min(self.chunk_end(i), total)
            sizes.append(end - start)
            start, i = end, i + 1
        return sizes

    def stall_before(self, index: int) -> float:
        """Seconds of stalls that delay chunk ``index`` (all stalls after earlier chunks)."""
        return sum(s.seconds for s in self.stalls if s.after < index)

    def planned_offsets(self, sizes: list[int]) -> list[float]:
        """Seconds after the request at which each chunk is due (before jitter)."""
        out, produced = [], 0
        for i, n in enumerate(sizes):
            produced += n
            gen = produced / self.sample_rate / self.pace if self.pace else 0.0
            out.append(self.ttfa_ms / 1000.0 + gen + self.stall_before(i))
        return out

    def summary(self) -> str:
        """The wire in a few words, for a system picker: ``24 kHz mono, 80 ms then 2 s chunks``."""
        khz = f"{self.sample_rate / 1000:g} kHz"
        layout = {1: "mono", 2: "stereo"}.get(self.channels, f"{self.channels} channels")
        if self.whole_file:
            return f"{khz} {layout}, the whole file at the end"
        first = [1000.0 * f / self.frame_hz for f in self.first_frames]
        steady = 1000.0 * self.chunk_frames / self.frame_hz
        head = ", ".join(_ms(x) for x in dict.fromkeys(first))
        return f"{khz} {layout}, {head} then {_ms(steady)} chunks"

    def describe(self) -> dict[str, object]:
        """JSON-safe summary for the README, the Playground and the API."""
        whole = self.whole_file
        return {
            "name": self.name,
            "model": self.model,
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "frame_hz": self.frame_hz,
            "samples_per_frame": self.samples_per_frame,
            "first_frames": None if whole else list(self.first_frames),
            "chunk_frames": None if whole else self.chunk_frames,
            "first_chunk_ms": None if whole else 1000.0 * self.first_frames[0] / self.frame_hz,
            "steady_chunk_ms": None if whole else 1000.0 * self.chunk_frames / self.frame_hz,
            "whole_file": self.whole_file,
            "unit": self.unit,
            "summary": self.summary(),
            "pace": self.pace,
            "jitter_ms": self.jitter_ms,
            "stalls": [[s.after, s.seconds] for s in self.stalls],
            "ttfa_ms": self.ttfa_ms,
            "source": self.source,
            "assumptions": self.assumptions,
        }


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


WHOLE = 2**62
"""A whole-file profile's one chunk ends here: past any utterance."""

# --------------------------------------------------------------------------- the table

COMMON_ASSUMPTION = (
    "Pace 2x real time (the speed of the fast server in streaming-anchor.md), no jitter, no "
    "stalls, no prefill latency: all four are knobs. Each chunk carries exactly its codec "
    "frames' worth of audio (a decoder with left context returns only the new frames)."
)


def unit_profile(unit: ModelUnit) -> WireProfile:
    """The wire profile of a model unit: its rate, channels and chunk schedule, and their
    sources, as the unit's module states them (nothing here is per model)."""
    schedule = unit.schedule
    if schedule is None:
        raise InvalidRequest(f"model {unit.name!r} has no chunk schedule, so no wire profile")
    sources = [unit.source_text("sample_rate", "channels")]
    sources += [str(s) for s in schedule.sources]
    return WireProfile(
        name=unit.profile,
        model=unit.checkpoint,
        sample_rate=unit.sample_rate,
        channels=unit.channels,
        frame_hz=schedule.frame_hz,
        first_frames=schedule.first_frames,
        chunk_frames=schedule.chunk_frames,
        whole_file=schedule.whole_file,
        unit=unit.name,
        source=f"backends/vllm_omni/models/{unit.name}.py, read from " + "; ".join(sources),
        assumptions=" ".join(x for x in (schedule.assumptions, COMMON_ASSUMPTION) if x),
    )


CUSTOM = WireProfile(
    name="custom",
    model="listenlab/custom-profile",
    sample_rate=24000,
    channels=1,
    frame_hz=12.5,
    first_frames=(25,),
    chunk_frames=25,
    source=(
        "Defaults: the 'uniform 25-frame chunks' schedule of streaming-anchor.md at "
        "vLLM-Omni's default 24 kHz mono."
    ),
    assumptions="Everything is meant to be overridden by knobs. " + COMMON_ASSUMPTION,
)

PROFILES: dict[str, WireProfile] = {
    p.name: p for p in (*(unit_profile(u) for u in UNITS.values() if u.schedule), CUSTOM)
}
"""One profile per model unit with a chunk schedule, then ``custom``."""


# --------------------------------------------------------------------------- knobs

KNOBS: dict[str, str] = {
    "profile": "profile name: " + ", ".join(PROFILES),
    "rate": "output sample rate in Hz",
    "channels": "output channels (interleaved; the voice is duplicated to each)",
    "frame_hz": "codec frames per second (chunk sizes are whole frames)",
    "first_frames": "first chunk size in frames, or a comma list for several first chunks",
    "chunk_frames": "steady chunk size in frames",
    "pace": "speed relative to real time (2 = twice as fast, 0.67 = slower, 0 = unpaced)",
    "jitter_ms": "each chunk is late by a uniform random 0..jitter_ms",
    "stall": "extra gaps, 'AFTER:SECONDS[,AFTER:SECONDS]' (0-based chunk index), e.g. 12:1.4",
    "ttfa_ms": "fixed latency before the first chunk",
    "seed": "seed for the jitter",
}


def _parse_int_list(name: str, raw: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in raw.replace(" ", "").split(",") if x)
    except ValueError:
        raise InvalidRequest(
            f"{name} must be whole frames (e.g. 1 or 4,4,8), got {raw!r}"
        ) from None
    if not vals:
        raise InvalidRequest(f"{name} is empty")
    return vals


def _parse_stalls(raw: str) -> tuple[Stall, ...]:
    out = []
    for part in (p for p in raw.replace(" ", "").split(",") if p):
        after, sep, secs = part.partition(":")
        try:
            if not sep:
                raise ValueError
            out.append(Stall(int(after), float(secs)))
        except ValueError:
            raise InvalidRequest(
                f"stall must be AFTER:SECONDS (e.g. 12:1.4 for a 1.4 s gap after chunk 12), "
                f"got {part!r}"
            ) from None
    return tuple(out)


def _number(name: str, raw: str, kind: type) -> float | int:
    try:
        v = kind(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be a number, got {raw!r}") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise InvalidRequest(f"{name} must be finite, got {raw!r}")
    return v


def profile_from_params(params: dict[str, str]) -> WireProfile:
    """A table profile with knob overrides. Unknown names and bad values raise InvalidRequest."""
    name = params.get("profile", "").strip().lower()
    if name not in PROFILES:
        raise InvalidRequest(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}")
    unknown = set(params) - set(KNOBS)
    if unknown:
        raise InvalidRequest(f"unknown profile knob(s): {', '.join(sorted(unknown))}")
    over: dict[str, object] = {}
    if "rate" in params:
        over["sample_rate"] = _number("rate", params["rate"], int)
    if "channels" in params:
        over["channels"] = _number("channels", params["channels"], int)
    if "frame_hz" in params:
        over["frame_hz"] = _number("frame_hz", params["frame_hz"], float)
    if "first_frames" in params:
        over["first_frames"] = _parse_int_list("first_frames", params["first_frames"])
    if "chunk_frames" in params:
        over["chunk_frames"] = _number("chunk_frames", params["chunk_frames"], int)
    for knob in ("pace", "jitter_ms", "ttfa_ms"):
        if knob in params:
            over[knob] = _number(knob, params[knob], float)
    if "stall" in params:
        over["stalls"] = _parse_stalls(params["stall"])
    if "seed" in params:
        over["seed"] = _number("seed", params["seed"], int)
    base = PROFILES[name]
    if not over:
        return base
    changed = ", ".join(f"{k}={params[k]}" for k in params if k != "profile")
    return replace(
        base,
        **over,
        assumptions=base.assumptions + f" Overridden from the spec: {changed}.",
    )


# --------------------------------------------------------------------------- the wrapper

_END = object()


@dataclass
class _Pending:
    """Resampled audio not yet sent, as float32 ``(frames, channels)`` pieces."""

    parts: list[np.ndarray] = field(default_factory=list)
    frames: int = 0

    def add(self, x: np.ndarray) -> None:
        if len(x):
            self.parts.append(x)
            self.frames += len(x)

    def take(self, n: int) -> np.ndarray:
        joined = np.concatenate(self.parts) if len(self.parts) != 1 else self.parts[0]
        head, tail = joined[:n], joined[n:]
        self.parts = [tail] if len(tail) else []
        self.frames = len(tail)
        return head


def _to_float(chunk: AudioChunk) -> np.ndarray:
    return chunk.pcm.reshape(-1, chunk.channels).astype(np.float32) / 32768.0


def _to_pcm(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x.reshape(-1) * 32768.0), -32768, 32767).astype(np.int16)


class PcmConverter:
    """Per-request rate and channel conversion; soxr's stream state lives here."""

    def __init__(self, in_rate: int, in_channels: int, out_rate: int, out_channels: int):
        import soxr

        self.in_rate, self.in_channels = in_rate, in_channels
        self.out_channels = out_channels
        # Same channel count: keep each channel. Otherwise mix to mono, then duplicate.
        self.mix = in_channels != out_channels
        work_channels = 1 if self.mix else in_channels
        self.stream = (
            soxr.ResampleStream(in_rate, out_rate, work_channels, dtype="float32", quality="HQ")
            if in_rate != out_rate
            else None
        )

    def push(self, x: np.ndarray, last: bool = False) -> np.ndarray:
        if self.mix:
            x = x.mean(axis=1, keepdims=True)
        if self.stream is not None:
            x = self.stream.resample_chunk(x, last=last)
        if self.mix and self.out_channels > 1:
            x = np.repeat(x, self.out_channels, axis=1)
        return x


class ProfileBackend(WrapperBackend):
    """Any backend, re-emitted on the wire as ``profile`` (see the module docstring).

    ``synthesize`` is the base class's join of the stream, so a non-streaming answer comes when
    the simulated server would have finished.
    """

    name = "profile"
    trigger = "profile"
    example = "piper?profile=qwen3-tts"

    def __init__(self, inner: Backend, profile: WireProfile, *, queue_chunks: int = 16):
        self.inner = inner
        self.profile = profile
        self._queue_chunks = queue_chunks
        # Served under the imitated model's id (``listenlab api`` uses it as the default model
        # name), so clients that pick settings by model id meet what that server would say.
        self.name = profile.model
        self.unit = UNITS.get(profile.unit) if profile.unit else None
        self.stand_in = StandIn(self.unit, inner.describe()) if self.unit else None
        """The model's voices and clone fields over the inner voice (None: ``custom``)."""

    @property
    def capabilities(self) -> Capabilities:
        p = self.profile
        if self.stand_in is not None:
            return self.stand_in.capabilities(self.inner.capabilities, p.sample_rate, p.channels)
        return replace(self.inner.capabilities, sample_rate=p.sample_rate, channels=p.channels)

    def trigger_value(self) -> str:
        return self.profile.name

    def note(self, request: SpeechRequest | None = None) -> str | None:
        """What this stand-in does not do (for ``request``), or None for ``custom``."""
        return self.stand_in.note(request) if self.stand_in is not None else None

    async def voices(self) -> list[Voice]:
        if self.stand_in is not None:
            return self.stand_in.voices()
        return await self.inner.voices()

    async def add_voice(
        self, name: str, wav: bytes, *, ref_text: str | None = None, consent: str = ""
    ) -> Voice:
        if self.stand_in is not None:
            return await asyncio.to_thread(self.stand_in.add_voice, name, wav, ref_text)
        return await self.inner.add_voice(name, wav, ref_text=ref_text, consent=consent)

    async def delete_voice(self, name: str) -> None:
        if self.stand_in is not None:
            self.stand_in.delete_voice(name)
            return
        await self.inner.delete_voice(name)

    async def health(self) -> Health:
        h = await self.inner.health()
        return Health(h.ok, f"{h.detail} as profile {self.profile.name}")

    async def refresh(self) -> Capabilities:
        """Let a remote inner engine learn its capabilities; the format stays the profile's."""
        await self.inner.refresh()
        return self.capabilities

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        p = self.profile
        t0 = time.monotonic()
        rng = random.Random(p.seed)
        # A reader task pulls the inner voice while this generator sleeps on the schedule, so
        # the voice keeps generating; the bounded queue keeps it from running far ahead.
        queue: asyncio.Queue = asyncio.Queue(maxsize=self._queue_chunks)
        reader = asyncio.create_task(
            self._pump(request, queue), name=f"profile-{request.request_id}"
        )
        pending = _Pending()
        converter: PcmConverter | None = None
        fmt: tuple[int, int] | None = None
        index = produced = 0

        shift = 0.0

        async def emit(n: int) -> AudioChunk:
            nonlocal index, produced, shift
            pcm = _to_pcm(pending.take(n))
            produced += n
            due = t0 + shift + p.ttfa_ms / 1000.0 + p.stall_before(index)
            if p.pace:
                due += produced / p.sample_rate / p.pace
            if p.jitter_ms:
                due += rng.uniform(0.0, p.jitter_ms) / 1000.0
            delay = due - time.monotonic()
            if index == 0 and delay < 0:
                # The inner voice was late with its first audio: the schedule starts from that
                # audio, so the gaps between chunks (and any stall) are what the profile says
                # whatever the machine's load, instead of being absorbed by the late start.
                shift = -delay
            if delay > 0:
                await asyncio.sleep(delay)
            chunk = AudioChunk(pcm, p.sample_rate, p.channels, index, arrived=time.monotonic())
            index += 1
            return chunk

        try:
            while True:
                item = await queue.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                c: AudioChunk = item
                if fmt is None:
                    fmt = (c.sample_rate, c.channels)
                    converter = PcmConverter(c.sample_rate, c.channels, p.sample_rate, p.channels)
                elif fmt != (c.sample_rate, c.channels):
                    raise BackendError(
                        f"inner stream changed format mid-way: {fmt} then "
                        f"{(c.sample_rate, c.channels)}",
                        partial=index > 0,
                    )
                pending.add(converter.push(_to_float(c)))
                while pending.frames >= p.chunk_end(index) - produced:
                    yield await emit(p.chunk_end(index) - produced)
            if converter is not None:
                pending.add(converter.push(np.zeros((0, converter.in_channels), np.float32), True))
            while pending.frames:
                yield await emit(min(pending.frames, p.chunk_end(index) - produced))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _pump(self, request: SpeechRequest, queue: asyncio.Queue) -> None:
        """Read the inner stream into ``queue``; always close the inner stream. A stand-in asks
        the inner voice for the text alone (its clip decoded and checked first)."""
        try:
            if self.stand_in is not None:
                request = await asyncio.to_thread(self.stand_in.plain, request)
            inner = self.inner.stream(request)
        except Exception as e:  # handed to the consumer, which raises it before any audio
            await queue.put(e)
            return
        try:
            async for c in inner:
                await queue.put(c)
            await queue.put(_END)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # handed to the consumer, which raises it in order
            await queue.put(e)
        finally:
            await inner.aclose()


def _wrap(inner: Backend, params: dict[str, str]) -> Backend:
    return ProfileBackend(inner, profile_from_params(params))


register_wrapper("profile", _wrap, consumes=set(KNOBS))


def profile_names() -> list[str]:
    return list(PROFILES)


def profile_table() -> list[dict[str, object]]:
    """Every profile's summary, for the README, the Playground's system picker and the API."""
    return [p.describe() for p in PROFILES.values()]


__all__ = [
    "KNOBS",
    "PROFILES",
    "ProfileBackend",
    "Stall",
    "WireProfile",
    "profile_from_params",
    "profile_names",
    "profile_table",
]
