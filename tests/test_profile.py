"""Wire profiles on the real Piper voice: format, chunk schedule, content, pacing, cancellation.

Timing assertions are one-sided where the code guarantees it (a chunk is never sent before its
due time) and generous where the shared 2-core machine may add delay (lateness). Schedule tests
feed the wrapper a *recorded* real Piper take (:class:`PiperTake`), so that they measure the
profile's pacing and not how fast Piper happens to run while other engineers' tests load the
machine; the live voice is covered by the content, lifecycle and live-pacing tests.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import soxr

import backends.profile  # noqa: F401  (registers the wrapper even if engines were imported first)
from backends.audio import encode_audio
from backends.base import AudioChunk, Backend, Capabilities, SpeechRequest
from backends.errors import BackendError, InvalidRequest
from backends.profile import PROFILES, ProfileBackend, WireProfile, profile_from_params
from backends.registry import load_backend
from evaluation.takes import TakeFailed, record

TEXT = "Hello there. This is a test of the wire profile, with a longer second sentence."
SHORT = "One two three four five."
LONG = " ".join(
    [TEXT, "And a third sentence, so that slow schedules reach their steady chunks."] * 2
)
EARLY_S = 0.003  # clock granularity: a chunk may not arrive earlier than this before it is due
LATE_S = 0.5  # generous: the machine is shared


CLIP = encode_audio(0.3 * np.sin(np.arange(32000) * 2 * np.pi * 220 / 16000), 16000)
"""A 2 s reference clip (the stand-in checks and decodes it, never clones it)."""


def accepted(backend: Backend, text: str) -> SpeechRequest:
    """``text`` as a request the backend's model takes: a clip for the clone-only models, a
    caption for MiniMax Music 3, a preset voice for Voxtral (its open checkpoint needs one)."""
    unit = getattr(backend, "unit", None)
    if unit is None:
        return SpeechRequest(text)
    kw: dict = {}
    if unit.rules.requires_ref_audio:
        kw |= {"ref_audio": CLIP, "ref_text": "A tone."}
    if unit.name == "minimax_music3":
        kw["instructions"] = "Slow piano ballad."
    if unit.name == "voxtral_tts":
        kw["voice"] = unit.presets[0]
    return SpeechRequest(text, **kw)


async def collect(backend: Backend, text: str = TEXT) -> tuple[float, list[AudioChunk]]:
    t0 = time.monotonic()
    chunks = [c async for c in backend.stream(accepted(backend, text))]
    return t0, chunks


def reference(direct: np.ndarray, rate: int) -> np.ndarray:
    """The direct Piper take resampled in one go, as int16 mono."""
    x = soxr.resample(direct.astype(np.float32) / 32768.0, 22050, rate, quality="HQ")
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int16)


@pytest.fixture(scope="module")
def direct_takes(piper_det) -> dict[str, np.ndarray]:
    """Direct (unwrapped) Piper audio for each test text, 22050 Hz mono int16."""

    async def go():
        out = {}
        for t in (TEXT, SHORT, LONG):
            audio = await piper_det.synthesize(SpeechRequest(t))
            assert audio.sample_rate == 22050 and audio.channels == 1
            out[t] = audio.samples[:, 0].copy()
        return out

    return asyncio.run(go())


def wrap(piper_det, name: str, **knobs: object) -> ProfileBackend:
    params = {"profile": name, **{k: str(v) for k, v in knobs.items()}}
    return ProfileBackend(piper_det, profile_from_params(params))


class PiperTake(Backend):
    """A real Piper take, recorded once, played back in ``piece_s`` pieces.

    With ``piece_delay`` each piece is released that long after the previous one (a slow
    voice); ``released`` keeps the release times to check that nothing is sent before its audio.
    """

    name = "piper-take"

    def __init__(
        self, takes: dict[str, np.ndarray], piece_s=0.25, piece_delay=0.0, fail_after=None
    ):
        self.takes, self.piece = takes, int(22050 * piece_s)
        self.piece_delay, self.fail_after = piece_delay, fail_after
        self.released: list[float] = []

    @classmethod
    def from_params(cls, params, target=None):  # pragma: no cover - not used via specs
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(sample_rate=22050, channels=1)

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        x = self.takes[request.text]
        for i, start in enumerate(range(0, len(x), self.piece)):
            if i == self.fail_after:
                raise BackendError("engine died mid-stream", status=500, partial=True)
            if self.piece_delay:
                await asyncio.sleep(self.piece_delay)
            self.released.append(time.monotonic())
            yield AudioChunk(x[start : start + self.piece].copy(), 22050, 1, i)


# --------------------------------------------------------------------------- format and schedule


@pytest.mark.parametrize("name", [n for n in PROFILES])
async def test_profile_format_schedule_and_audio(piper_det, direct_takes, name):
    """Rate, channels, exact chunk sizes in codec frames, and the audio itself."""
    p = PROFILES[name]
    backend = wrap(piper_det, name, pace=0)  # unpaced: this test is about the samples
    assert backend.capabilities.sample_rate == p.sample_rate
    assert backend.capabilities.channels == p.channels
    # slow schedules (MiniMax's 5 s first window) get a text long enough for steady chunks
    text = (
        TEXT
        if len(reference(direct_takes[TEXT], p.sample_rate)) > p.chunk_end(len(p.first_frames))
        else LONG
    )
    _, chunks = await collect(backend, text)
    assert {(c.sample_rate, c.channels) for c in chunks} == {(p.sample_rate, p.channels)}
    assert [c.index for c in chunks] == list(range(len(chunks)))

    ref = reference(direct_takes[text], p.sample_rate)
    sizes = [c.frames for c in chunks]
    assert sum(sizes) == len(ref)
    assert sizes == p.chunk_sizes(len(ref))
    spf = p.samples_per_frame
    assert spf == int(spf), "every table profile has a whole number of samples per frame"
    if p.whole_file:
        assert sizes == [len(ref)], "a whole-file model sends nothing until the end"
    else:
        # First chunk(s) and steady chunks are exact codec frames; only the last is a remainder.
        for i, n in enumerate(sizes[:-1]):
            assert n == p.frames_in_chunk(i) * spf, (i, n)
        assert sizes[0] == p.first_frames[0] * spf
        assert 0 < sizes[-1] <= p.frames_in_chunk(len(sizes) - 1) * spf
        assert len(sizes) > len(p.first_frames) + 1, "the text must reach steady chunks"

    pcm = np.concatenate([c.pcm for c in chunks]).reshape(-1, p.channels)
    for ch in range(1, p.channels):
        assert np.array_equal(pcm[:, ch], pcm[:, 0]), "channels must be identical copies"
    # Streaming resampler == whole-take resampler (up to int16 rounding).
    diff = np.abs(pcm[:, 0].astype(np.int32) - ref.astype(np.int32))
    assert diff.max() <= 2, diff.max()
    assert np.abs(pcm[:, 0]).max() > 3000, "real speech, not silence"


def test_table_schedules_match_the_sources():
    """The numbers the issue and the vLLM-Omni deploy configs give."""
    q = PROFILES["qwen3-tts"]
    assert (q.sample_rate, q.channels, q.frame_hz, q.first_frames, q.chunk_frames) == (
        24000,
        1,
        12.5,
        (1,),
        25,
    )
    assert q.chunk_end(0) == 1920 and q.chunk_end(1) - q.chunk_end(0) == 48000  # 80 ms, 2 s
    assert PROFILES["fish-speech"].sample_rate == 44100
    assert PROFILES["fish-speech"].samples_per_frame == 2048
    assert PROFILES["cosyvoice3"].sample_rate == 24000
    m = PROFILES["moss-tts-nano"]
    assert (m.sample_rate, m.channels) == (48000, 1)  # vllm-omni 0.30.0 downmixes to mono
    assert PROFILES["voxcpm2"].sample_rate == 48000
    for p in PROFILES.values():
        assert p.source and p.assumptions, p.name
        d = p.describe()
        assert d["whole_file"] is p.whole_file
        assert (d["first_chunk_ms"] is None) if p.whole_file else d["first_chunk_ms"] > 0
    whole = sorted(n for n, p in PROFILES.items() if p.whole_file)
    assert whole == [
        "audex-tta",
        "covo-audio",
        "higgs-audio-v2",
        "indextts2",
        "indextts2-5",
        "ming-flash-omni-tts",
        "moss-tts",
        "omnivoice",
        "step-audio2",
    ]
    assert (PROFILES["minimax-music3"].sample_rate, PROFILES["minimax-music3"].channels) == (
        32000,
        2,
    )


async def test_custom_spec_every_knob(direct_takes):
    """The issue's example spec, through the registry, with every format knob."""
    spec = (
        "piper?deterministic=1&profile=custom&rate=48000&channels=2&first_frames=1"
        "&chunk_frames=25&frame_hz=12.5&pace=0&jitter_ms=0&ttfa_ms=0&seed=3"
    )
    backend = load_backend(spec)
    try:
        assert isinstance(backend, ProfileBackend)
        assert backend.spec == spec
        caps = backend.capabilities
        assert isinstance(caps, Capabilities)
        assert (caps.sample_rate, caps.channels) == (48000, 2)
        _, chunks = await collect(backend)
        sizes = [c.frames for c in chunks]
        assert sizes[0] == 3840 and set(sizes[1:-1]) == {96000}
        pcm = np.concatenate([c.pcm for c in chunks]).reshape(-1, 2)
        assert np.array_equal(pcm[:, 0], pcm[:, 1])
        ref = reference(direct_takes[TEXT], 48000)
        assert len(pcm) == len(ref) and np.abs(pcm[:, 0].astype(int) - ref).max() <= 2
    finally:
        await backend.aclose()


async def test_several_first_chunks_and_fractional_frames(piper_det, direct_takes):
    """first_frames as a list, and a frame length that is not a whole number of samples."""
    backend = wrap(piper_det, "custom", first_frames="2,3", chunk_frames=7, frame_hz=21.5, pace=0)
    _, chunks = await collect(backend, SHORT)
    sizes = [c.frames for c in chunks]
    spf = 24000 / 21.5
    bounds = np.cumsum(sizes)
    assert bounds[0] == round(2 * spf) and bounds[1] == round(5 * spf)
    for i in range(2, len(sizes) - 1):
        assert bounds[i] == round((5 + 7 * (i - 1)) * spf)
    assert bounds[-1] == len(reference(direct_takes[SHORT], 24000))


async def test_same_rate_is_not_resampled(piper_det, direct_takes):
    backend = wrap(piper_det, "custom", rate=22050, pace=0)
    _, chunks = await collect(backend, SHORT)
    pcm = np.concatenate([c.pcm for c in chunks])
    assert np.array_equal(pcm, direct_takes[SHORT])


async def test_profile_on_a_profile_keeps_stereo(piper_det, direct_takes):
    """A stereo inner stream (a profile itself) with the same channel count stays stereo."""
    inner = wrap(piper_det, "custom", rate=48000, pace=0, channels=2)
    outer = ProfileBackend(
        inner, profile_from_params({"profile": "qwen3-tts", "pace": "0", "channels": "2"})
    )
    _, chunks = await collect(outer, SHORT)
    pcm = np.concatenate([c.pcm for c in chunks]).reshape(-1, 2)
    assert np.array_equal(pcm[:, 0], pcm[:, 1])
    twice = soxr.resample(
        soxr.resample(direct_takes[SHORT].astype(np.float32) / 32768, 22050, 48000), 48000, 24000
    )
    assert abs(len(pcm) - len(twice)) <= 2
    n = min(len(pcm), len(twice))
    corr = np.corrcoef(pcm[:n, 0].astype(float), twice[:n])[0, 1]
    assert corr > 0.999


# --------------------------------------------------------------------------- pacing


def assert_on_schedule(
    p: WireProfile, t0: float, chunks: list[AudioChunk], jitter=None, late: float = LATE_S
):
    sizes = [c.frames for c in chunks]
    planned = p.planned_offsets(sizes)
    if jitter is not None:
        planned = [t + j for t, j in zip(planned, jitter, strict=True)]
    for c, due in zip(chunks, planned, strict=True):
        at = c.arrived - t0
        assert at >= due - EARLY_S, f"chunk {c.index} came {1000 * (due - at):.0f} ms early"
        assert at <= due + late, f"chunk {c.index} came {1000 * (at - due):.0f} ms late"
    arrived = [c.arrived for c in chunks]
    assert arrived == sorted(arrived)


@pytest.mark.parametrize("name", [n for n in PROFILES])
async def test_profile_pacing(direct_takes, name):
    """At pace 4 each chunk arrives when the schedule says: produced audio / 4 after start."""
    p = profile_from_params({"profile": name, "pace": "4", "ttfa_ms": "100"})
    t0, chunks = await collect(ProfileBackend(PiperTake(direct_takes), p))
    assert_on_schedule(p, t0, chunks)
    # The whole stream takes duration / 4 (+ the 100 ms latency), whatever the voice's speed.
    total = sum(c.frames for c in chunks) / p.sample_rate
    span = chunks[-1].arrived - t0
    assert 0.1 + total / 4 - EARLY_S <= span <= 0.1 + total / 4 + LATE_S
    if p.whole_file:  # one chunk, when the simulated server has made all of it
        assert len(chunks) == 1
        return
    if len(chunks) == 1:  # MiniMax: 5 s of audio fit in its first 5 s window
        assert chunks[0].frames <= p.chunk_end(0)
        return
    gaps = np.diff([c.arrived for c in chunks])
    due = np.diff(p.planned_offsets([c.frames for c in chunks]))
    assert np.median(np.abs(gaps - due)) < 0.1, "typical gaps follow the schedule"


async def test_live_piper_is_paced_and_never_early(piper_det):
    """With the live voice: nothing before its due time, and the end is not before duration/2."""
    p = PROFILES["fish-speech"]
    t0, chunks = await collect(ProfileBackend(piper_det, p))
    assert_on_schedule(p, t0, chunks, late=30.0)  # lateness depends on the machine's load
    total = sum(c.frames for c in chunks) / p.sample_rate
    assert chunks[-1].arrived - t0 >= total / p.pace - EARLY_S


async def test_never_sent_before_the_voice_made_it(direct_takes):
    """A voice slower than the schedule: each chunk waits for the inner audio it carries."""
    inner = PiperTake(direct_takes, piece_s=0.25, piece_delay=0.15)  # 0.25 s audio per 0.15 s
    p = profile_from_params({"profile": "qwen3-tts", "pace": "8"})  # wants 0.25 s per 31 ms
    _, chunks = await collect(ProfileBackend(inner, p), SHORT)
    end = 0
    for c in chunks[:-1]:
        end += c.frames
        needed = end * 22050 / p.sample_rate - 2  # input samples this chunk's audio comes from
        piece = int(needed // inner.piece)
        assert c.arrived >= inner.released[piece], f"chunk {c.index} before its audio"
    assert chunks[-1].arrived >= inner.released[-1]


async def test_qwen3_default_pace_reproduces_the_anchor_stall(direct_takes):
    """Default pace 2: 80 ms of audio, then the next chunk ~1.04 s later (a ~920 ms hole)."""
    p = PROFILES["qwen3-tts"]
    assert p.pace == 2.0
    t0, chunks = await collect(ProfileBackend(PiperTake(direct_takes), p))
    assert chunks[0].duration == pytest.approx(0.08)
    gap = chunks[1].arrived - chunks[0].arrived
    # due gap = 2.0 s / 2 = 1.0 s; chunk 0 may be late (Piper's first piece), never early
    assert 1.0 - LATE_S <= gap <= 1.0 + LATE_S
    hole = gap - chunks[0].duration
    assert hole > 0.6, "a player starting on chunk 0 runs dry"
    assert_on_schedule(p, t0, chunks)


async def test_slow_pace_timeline(direct_takes):
    """pace 0.67: every chunk of d seconds arrives d / 0.67 after the previous one."""
    p = profile_from_params(
        {"profile": "custom", "first_frames": "5", "chunk_frames": "5", "pace": "0.67"}
    )
    t0, chunks = await collect(ProfileBackend(PiperTake(direct_takes), p), SHORT)
    assert len(chunks) >= 3
    assert_on_schedule(p, t0, chunks)
    for a, b in zip(chunks[:-1], chunks[1:], strict=False):
        gap = b.arrived - a.arrived
        expect = b.duration / 0.67
        assert expect - LATE_S <= gap <= expect + LATE_S
    # Slower than real time: steady gaps exceed the audio they carry (a player underruns).
    steady = [b.arrived - a.arrived for a, b in zip(chunks[:-2], chunks[1:-1], strict=False)]
    assert np.median(steady) > 0.4 * 1.2  # 400 ms chunks


async def test_stall_gap_timeline(direct_takes):
    """stall=5:1.0 -> a 1 s hole between chunks 5 and 6; later chunks shift by 1 s."""
    p = profile_from_params(
        {
            "profile": "custom",
            "first_frames": "2",
            "chunk_frames": "2",
            "pace": "4",
            "stall": "5:1.0",
            "ttfa_ms": "300",
        }
    )
    assert p.stall_before(5) == 0 and p.stall_before(6) == 1.0
    t0, chunks = await collect(ProfileBackend(PiperTake(direct_takes), p), SHORT)
    assert len(chunks) > 8
    assert_on_schedule(p, t0, chunks)
    gaps = np.diff([c.arrived for c in chunks])
    assert 1.0 <= gaps[5] <= 1.0 + 0.04 + LATE_S
    others = np.delete(gaps, 5)
    assert np.median(others) < 0.2


def test_stall_spec_parsing():
    p = profile_from_params({"profile": "qwen3-tts", "stall": "12:1.4,3:0.5"})
    assert [(s.after, s.seconds) for s in p.stalls] == [(12, 1.4), (3, 0.5)]
    assert p.stall_before(13) == pytest.approx(1.9) and p.stall_before(4) == 0.5
    assert "stall=12:1.4,3:0.5" in p.assumptions


async def test_jitter_is_seeded_late_never_early(direct_takes):
    p = profile_from_params(
        {
            "profile": "custom",
            "first_frames": "3",
            "chunk_frames": "3",
            "pace": "4",
            "jitter_ms": "150",
            "seed": "7",
            "ttfa_ms": "300",
        }
    )
    t0, chunks = await collect(ProfileBackend(PiperTake(direct_takes), p), SHORT)
    rng = random.Random(7)
    jitter = [rng.uniform(0, 150) / 1000 for _ in chunks]
    assert max(jitter) > 0.05
    assert_on_schedule(p, t0, chunks, jitter)


# --------------------------------------------------------------------------- lifecycle


class ClosingSpy(Backend):
    """The real Piper voice, noting when its stream is closed (to observe cancellation)."""

    name = "spy"

    def __init__(self, inner: Backend):
        self.inner = inner
        self.closed: list[str] = []
        self.started: list[str] = []

    @classmethod
    def from_params(cls, params, target=None):  # pragma: no cover - not used via specs
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        self.started.append(request.request_id)
        s = self.inner.stream(request)
        try:
            async for c in s:
                yield c
        finally:
            await s.aclose()
            self.closed.append(request.request_id)


async def test_aclose_closes_the_inner_stream(piper_det):
    spy = ClosingSpy(piper_det)
    backend = ProfileBackend(spy, profile_from_params({"profile": "qwen3-tts", "pace": "1"}))
    req = SpeechRequest(TEXT)
    gen = backend.stream(req)
    first = await gen.__anext__()
    assert first.index == 0 and spy.started == [req.request_id] and spy.closed == []
    await gen.aclose()
    assert spy.closed == [req.request_id]


async def test_task_cancellation_closes_the_inner_stream(piper_det):
    spy = ClosingSpy(piper_det)
    backend = ProfileBackend(spy, profile_from_params({"profile": "qwen3-tts", "pace": "0.5"}))
    req = SpeechRequest(TEXT)
    got: list[AudioChunk] = []

    async def consume():
        async for c in backend.stream(req):
            got.append(c)

    task = asyncio.create_task(consume())
    for _ in range(200):
        if got:
            break
        await asyncio.sleep(0.01)
    assert got, "the first chunk came"
    task.cancel()  # while it sleeps for chunk 1 (due 4 s later at pace 0.5)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert spy.closed == [req.request_id]
    assert len(got) == 1


async def test_inner_errors_pass_through(piper_det):
    backend = wrap(piper_det, "custom")
    with pytest.raises(InvalidRequest, match="empty"):
        await collect(backend, "   ")
    with pytest.raises(InvalidRequest, match="unknown voice"):
        async for _ in backend.stream(SpeechRequest(SHORT, voice="nobody")):
            pass


async def test_a_model_profile_answers_by_its_models_rules(piper_det):
    """A model's profile refuses what its model refuses, in its words, before any audio."""
    qwen = wrap(piper_det, "qwen3-tts", pace=0)
    with pytest.raises(InvalidRequest, match=r"^Invalid voice 'nobody'\. Supported: aiden, "):
        [c async for c in qwen.stream(SpeechRequest(SHORT, voice="nobody"))]
    with pytest.raises(InvalidRequest, match=r"^Input text cannot be empty$"):
        [c async for c in qwen.stream(SpeechRequest("   "))]
    fish = wrap(piper_det, "fish-speech", pace=0)
    with pytest.raises(InvalidRequest, match="^Unknown voice 'joe'. Fish Speech has no built-in"):
        [c async for c in fish.stream(SpeechRequest(SHORT, voice="joe"))]


async def test_inner_failure_mid_stream_fails_the_take(direct_takes):
    """Audio already sent stays recorded, the take is an error, never a short success."""
    inner = PiperTake(direct_takes, piece_s=0.25, fail_after=8)  # dies after 2 s of audio
    backend = ProfileBackend(inner, profile_from_params({"profile": "voxcpm2", "pace": "0"}))
    with pytest.raises(TakeFailed, match="engine died mid-stream") as e:
        await record(backend, SpeechRequest(TEXT))
    take = e.value.take
    assert take.status == "error" and take.chunks, "chunks sent before the failure are kept"
    assert all(r.frames == 23040 for r in take.chunks), "only whole scheduled chunks went out"
    assert take.duration_s < 2.0


async def test_concurrent_requests_are_independent(piper_det, direct_takes):
    backend = wrap(piper_det, "fish-speech", pace=0, jitter_ms=0)
    (_, a), (_, b) = await asyncio.gather(collect(backend, TEXT), collect(backend, SHORT))
    for chunks, text in ((a, TEXT), (b, SHORT)):
        pcm = np.concatenate([c.pcm for c in chunks])
        ref = reference(direct_takes[text], 44100)
        assert len(pcm) == len(ref) and np.abs(pcm.astype(int) - ref).max() <= 2


async def test_take_records_profile_format_and_arrivals(piper_det):
    backend = wrap(piper_det, "moss-tts-nano", pace=4, channels=2)
    take = await record(backend, accepted(backend, SHORT))
    assert take.status == "ok"
    assert (take.sample_rate, take.channels) == (48000, 2)
    assert take.audio.shape[1] == 2
    assert [r.frames for r in take.chunks][:3] == [3840, 7680, 15360]
    arrivals = [r.arrival_ms for r in take.chunks]
    assert arrivals == sorted(arrivals)
    # pace 4: the last chunk is due at duration / 4
    assert arrivals[-1] >= 1000 * take.duration_s / 4 - 5


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"profile": "nope"}, "unknown profile 'nope'; known profiles: " + ", ".join(PROFILES)),
        ({"profile": "custom", "rate": "100"}, "rate must be 8000..192000"),
        ({"profile": "custom", "channels": "0"}, "channels must be 1..8"),
        ({"profile": "custom", "pace": "-1"}, "pace must be >= 0"),
        ({"profile": "custom", "pace": "fast"}, "pace must be a number"),
        ({"profile": "custom", "stall": "12"}, "stall must be AFTER:SECONDS"),
        ({"profile": "custom", "first_frames": "0"}, "first_frames must be whole frames >= 1"),
        ({"profile": "custom", "first_frames": "a,b"}, "first_frames must be whole frames"),
        ({"profile": "custom", "frame_hz": "inf"}, "frame_hz must be finite"),
        ({"profile": "custom", "bogus": "1"}, "unknown profile knob"),
    ],
)
def test_bad_knobs_are_refused_clearly(params, message):
    with pytest.raises(InvalidRequest, match=message.replace("(", r"\(").replace(".", r"\.")):
        profile_from_params(params)


def test_spec_errors_through_the_registry():
    with pytest.raises(InvalidRequest, match="unknown profile"):
        load_backend("piper?profile=qwen4")
    with pytest.raises(InvalidRequest, match="wrapper"):
        ProfileBackend.from_params({})


def test_the_docs_table_and_sources_are_the_units():
    """docs/profiles.md's table gives each profile's real rate, channels and schedule, and
    names every line of vLLM-Omni each unit cites for them."""
    from backends.vllm_omni.models import UNITS

    docs = (Path(__file__).resolve().parents[1] / "docs" / "profiles.md").read_text()
    rows = {
        cells[0].strip("`"): cells
        for line in docs.splitlines()
        if line.startswith("| `")
        and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 8
    }
    assert list(rows) == list(PROFILES)
    for name, p in PROFILES.items():
        cells = rows[name]
        assert cells[1] == ("anything" if name == "custom" else p.model)
        assert cells[2] == f"{p.sample_rate} Hz" and cells[3].split()[0] == str(p.channels)
        if p.whole_file:
            assert cells[4:7] == ["—", "whole file", "whole file"], cells
            continue
        assert cells[4].startswith(f"{round(p.frame_hz, 2):g} Hz")
        first = p.first_frames
        assert (
            cells[5].startswith(f"{first[0]} frame")
            or cells[5].startswith(", ".join(map(str, first)))
            or (len(set(first)) == 1 and cells[5].startswith(f"{len(first)} × {first[0]} frames"))
        ), cells[5]
        assert cells[6].startswith(f"{p.chunk_frames} ")
    for unit in UNITS.values():
        assert rows[unit.profile][7] == str(unit.schedule.async_chunk).lower()
        cited = [*unit.sources["sample_rate"], *unit.sources["channels"], *unit.schedule.sources]
        for s in cited:
            assert s.assumed or f"`{s.path}:{s.line}`" in docs, (unit.name, s.path, s.line)
