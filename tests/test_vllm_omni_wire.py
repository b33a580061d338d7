"""Each vLLM-Omni wire format written by one side and read by the other, and the one model table.

``listenlab api`` writes with ``backends/vllm_omni/wire.py`` and the remote backend reads with
it; these round trips hold the two halves of each format together (header, SSE events, error
bodies, WebSocket messages, ``ref_audio`` data URLs, content types, request fields). The model
table is checked against the adapters, the wire profiles, the stand-in engine's rates and the
rate table the remote backend kept before the table was one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.api.schemas import SessionConfig, SpeechBody
from backends.base import SpeechRequest
from backends.errors import BackendError, InvalidRequest
from backends.profile import PROFILES
from backends.registry import load_backend
from backends.vllm_omni import wire
from backends.vllm_omni.models import (
    ADAPTERS,
    MODELS,
    UNITS,
    adapter_class,
    clones,
    model_unit,
    speech_rules,
    table_format,
)
from backends.vllm_omni.request import (
    HTTP_EXTRA,
    WS_EXTRA,
    SpeechFields,
    request_fields,
    speech_request,
)
from tests.vllm_omni_standin.seed_models import RATES

# --------------------------------------------------------------------------- WAV header


@pytest.mark.parametrize(("rate", "channels"), [(22050, 1), (24000, 1), (44100, 2), (48000, 2)])
def test_wav_stream_header_round_trip(rate, channels):
    h = wire.wav_stream_header(rate, channels)
    assert len(h) == 44
    assert wire.parse_wav_header(h) == wire.WavFormat(rate, channels, 44)
    assert wire.parse_wav_header(h + b"\x01\x02") == wire.WavFormat(rate, channels, 44)
    for cut in (0, 11, 12, 30, 43):  # a header split across reads: wait for the rest
        assert wire.parse_wav_header(h[:cut]) is None


def test_parsed_wav_header_refuses_what_it_cannot_play():
    with pytest.raises(BackendError, match="impossible sample rate: 0 Hz"):
        wire.parse_wav_header(wire.wav_stream_header(0, 1))
    with pytest.raises(BackendError, match="raw PCM"):
        wire.parse_wav_header(b"\x00\x01" * 30)


# --------------------------------------------------------------------------- SSE


def events_of(data: bytes, step: int) -> list[wire.SseEvent]:
    """Parse ``data`` fed in pieces of ``step`` bytes (network reads split anything)."""
    p, out = wire.SseParser(), []
    for i in range(0, len(data), step):
        out += p.feed(data[i : i + step])
    assert not p.pending
    return out


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_speech_events_round_trip(step):
    header = wire.wav_stream_header(24000, 1)
    pcm = np.arange(-300, 300, dtype="<i2").tobytes()
    stream = (
        wire.audio_delta(header, "wav")
        + wire.audio_delta(pcm, "wav")
        + wire.audio_delta(b"", "wav")
        + wire.audio_done()
    )
    evs = events_of(stream, step)
    parsed = [wire.speech_event(ev) for ev in evs]
    assert [kind for kind, _ in parsed] == [wire.DELTA] * 3 + [wire.DONE]
    assert [ev.event for ev in evs] == [wire.DELTA] * 3 + [wire.DONE]
    assert [wire.delta_audio(p) for _, p in parsed[:3]] == [header, pcm, b""]
    assert all(p["response_format"] == "wav" for _, p in parsed[:3])
    assert parsed[3][1]["usage"] == wire.NO_USAGE


def test_sse_event_is_one_event_line_and_one_compact_data_line():
    ev = wire.sse_event("speech.audio.done", {"type": "speech.audio.done", "usage": {"a": 1}})
    assert ev == b'event: speech.audio.done\ndata: {"type":"speech.audio.done","usage":{"a":1}}\n\n'


@pytest.mark.parametrize("partial", [True, False])
def test_error_event_round_trip(partial):
    (ev,) = events_of(wire.audio_error("engine died", partial_audio=partial), 5)
    kind, payload = wire.speech_event(ev)
    assert kind == wire.ERROR
    assert wire.ErrorEvent.from_payload(payload) == wire.ErrorEvent("engine died", 500, partial)
    if partial:
        assert payload["action"] == "discard"


def test_malformed_speech_events_are_backend_errors():
    with pytest.raises(BackendError, match="not JSON"):
        wire.speech_event(wire.SseEvent(wire.DELTA, "{nope"))
    with pytest.raises(BackendError, match="not an object"):
        wire.speech_event(wire.SseEvent(wire.DELTA, "[1]"))
    with pytest.raises(BackendError, match="not base64"):
        wire.delta_audio({"type": wire.DELTA, "audio": "***"})
    with pytest.raises(BackendError, match="without an 'audio' string"):
        wire.delta_audio({"type": wire.DELTA})


# --------------------------------------------------------------------------- error bodies


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            wire.error_body("Input text cannot be empty"),
            "BadRequestError: Input text cannot be empty",
        ),
        (
            wire.error_body("The model `x` does not exist.", "NotFoundError", 404, "model"),
            "NotFoundError: The model `x` does not exist. (param model)",
        ),
        (wire.error_body("boom", "server_error", 500), "server_error: boom"),
    ],
)
def test_error_body_round_trip(body, expected):
    raw = json.dumps(body).encode()
    assert wire.error_message(raw) == expected
    code = body["error"]["code"]
    assert wire.error_message(raw, code) == f"server answered {code}: {expected}"


# --------------------------------------------------------------------------- WebSocket messages


def test_audio_start_states_its_format_only_when_told():
    start = wire.ws_audio_start(0, 1, "Hello.", "pcm")
    assert start == {
        "type": "audio.start",
        "utterance_index": 0,
        "sentence_index": 1,
        "sentence_text": "Hello.",
        "format": "pcm",
    }
    assert wire.stated_format(json.loads(json.dumps(start))) is None
    wire.state_format(start, 44100, 2)
    assert wire.stated_format(json.loads(json.dumps(start))) == (44100, 2)
    # vLLM-Omni 0.30.0's early audio.start: a nominal rate and no channels is no statement
    assert wire.stated_format({"type": "audio.start", "sample_rate": 24000}) is None


def test_ws_messages_have_the_reference_fields():
    assert wire.ws_audio_done(2, 3, 100, False) == {
        "type": "audio.done",
        "utterance_index": 2,
        "sentence_index": 3,
        "total_bytes": 100,
        "error": False,
    }
    assert wire.ws_session_done(2, 4) == {
        "type": "session.done",
        "utterance_index": 2,
        "total_sentences": 4,
    }
    assert wire.ws_error("x", partial_audio=True) == {
        "type": "error",
        "message": "x",
        "partial_audio": True,
    }
    assert wire.ws_message(wire.INPUT_DONE) == {"type": "input.done"}


# --------------------------------------------------------------------------- ref_audio, content types


def test_ref_audio_data_url_round_trip():
    wav = bytes(range(256)) * 10
    url = wire.ref_audio_url(wav)
    assert url.startswith("data:audio/wav;base64,")
    assert wire.parse_ref_audio_url(url) == wav


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("https://example.com/a.wav", "scheme 'https'"),
        ("file:///etc/passwd", "scheme 'file'"),
        (["data:audio/wav;base64,AAAA"], "as a list"),
        ("data:audio/wav,AAAA", "must be a data:<mime>;base64"),
        ("AAAA", "must be a data:<mime>;base64"),
    ],
)
def test_ref_audio_that_is_not_inline_base64_is_refused(ref, words):
    with pytest.raises(InvalidRequest, match=words):
        wire.parse_ref_audio_url(ref)


def test_content_types_round_trip():
    kinds = {fmt: wire.body_kind(ct) for fmt, ct in wire.CONTENT_TYPES.items()}
    assert kinds == {"wav": "wav", "pcm": "pcm", "flac": "file", "mp3": "file", "opus": "file"}
    assert wire.body_kind(wire.SSE_TYPE + "; charset=utf-8") == "sse"
    assert wire.body_kind("application/json") is None


# --------------------------------------------------------------------------- request fields


def cloning_backend():
    """A real remote backend that clones (a Base checkpoint's name); nothing is sent."""
    return load_backend("vllm-omni+http://127.0.0.1:1?model=Qwen/Qwen3-TTS-12Hz-0.6B-Base")


REQUESTS = [
    SpeechRequest("Hello there.", voice="vivian", language="English", seed=7),
    SpeechRequest(
        "Say it warmly.",
        instructions="warm",
        speed=1.25,
        extra={"max_new_tokens": 300, "task_type": "CustomVoice"},
    ),
    SpeechRequest(
        "Clone me.",
        ref_audio=b"RIFF-clip-bytes",
        ref_text="The clip's words.",
        extra={"x_vector_only_mode": False, "extra_params": {"temperature": 0.5}},
    ),
]


@pytest.mark.parametrize("req", REQUESTS)
def test_a_request_sent_over_http_arrives_as_sent(req):
    fields = request_fields(req, HTTP_EXTRA, model="m")
    body = SpeechBody.model_validate({"input": req.text, **fields})
    ref = wire.parse_ref_audio_url(body.ref_audio) if body.ref_audio else None
    got = speech_request(
        SpeechFields.of(body),
        body.input,
        ref_audio=ref,
        request_id=req.request_id,
        backend=cloning_backend(),
    )
    extra = dict(req.extra)
    if req.ref_audio is not None:
        extra.setdefault("task_type", "Base")  # cloning is Qwen3-TTS's Base task
    assert got == SpeechRequest(**{**req.__dict__, "extra": extra}).validated()


@pytest.mark.parametrize("req", REQUESTS[:2])
def test_a_request_sent_over_the_websocket_arrives_as_sent(req):
    cfg = SessionConfig.model_validate(request_fields(req, WS_EXTRA, model="m"))
    got = speech_request(
        SpeechFields.of(cfg),
        req.text,
        ref_audio=None,
        request_id=req.request_id,
        backend=cloning_backend(),
    )
    assert got == req.validated()


def test_speech_request_refuses_what_the_backend_cannot_do(piper_det):
    with pytest.raises(InvalidRequest, match="cannot clone voices, so ref_audio"):
        speech_request(SpeechFields(), "Hi.", ref_audio=b"x", request_id="r", backend=piper_det)
    with pytest.raises(InvalidRequest, match="speaker_embedding"):
        speech_request(
            SpeechFields(speaker_embedding=[0.1]),
            "Hi.",
            ref_audio=None,
            request_id="r",
            backend=piper_det,
        )
    req = speech_request(
        SpeechFields(voice=" Default "), "Hi.", ref_audio=None, request_id="r", backend=piper_det
    )
    assert req.voice is None  # vLLM-Omni's placeholder for no voice


# --------------------------------------------------------------------------- the model table

OLD_RATE_TABLE = [
    ("moss-tts-local", 48000, 2),
    ("moss-tts-nano", 48000, 1),
    ("moss-tts", 24000, 1),  # was 48000: the 0.30.0 delay model's codec is 24 kHz (its unit)
    ("qwen3-tts", 24000, 1),
    ("s2-pro", 44100, 1),
    ("fish", 44100, 1),
    ("cosyvoice", 24000, 1),
    ("voxcpm", 48000, 1),
    ("voxtral", 24000, 1),
    ("glm-tts", 24000, 1),
    ("omnivoice", 24000, 1),
    ("higgs-audio-v2", 24000, 1),
    ("indextts", 22050, 1),
    ("audio8", 44100, 1),
    ("gepard", 22050, 1),
    ("dots.tts", 48000, 1),
    ("breeze", 24000, 1),
    ("zonos", 44100, 1),
]
"""The remote backend's own rate table before the three tables became one (every row now a
unit of its own, read in the 0.30.0 wheel, but dots.tts and zonos)."""


@pytest.mark.parametrize(("key", "rate", "channels"), OLD_RATE_TABLE)
def test_the_table_keeps_every_rate_the_remote_backend_knew(key, rate, channels):
    assert table_format(f"Org/{key.upper()}-1B") == (rate, channels)


def test_every_model_unit_is_what_adapters_profiles_and_the_client_read():
    """One module per model: its embedded adapter, its wire profile and the lookups by served
    name all hold the unit's own values (nothing is copied)."""
    assert sorted(ADAPTERS) == sorted(RATES)
    for name, unit in UNITS.items():
        if name in ADAPTERS:
            assert unit.sample_rate == RATES[name]  # the stand-in engine's own rate
            assert adapter_class(name).unit is unit and adapter_class(name).name == name
        p = PROFILES[unit.profile]
        assert (p.model, p.sample_rate, p.channels) == (
            unit.checkpoint,
            unit.sample_rate,
            unit.channels,
        )
        s = unit.schedule
        assert (p.frame_hz, p.first_frames, p.chunk_frames) == (
            s.frame_hz,
            s.first_frames,
            s.chunk_frames,
        )
        # Audex TTA is Audex's checkpoint under another deploy: the name cannot tell them
        # apart, so a backend standing in for it answers by its own unit (ProfileBackend.unit)
        owner = UNITS["audex"] if name == "audex_tta" else unit
        assert model_unit(unit.checkpoint) is owner
        assert speech_rules(unit.checkpoint) is owner.rules
        assert unit.title and p.source and p.assumptions


def test_cloning_from_the_model_name():
    assert clones("Qwen/Qwen3-TTS-12Hz-1.7B-Base")
    assert not clones("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice")
    assert clones("fishaudio/s2-pro") and clones("OpenMOSS-Team/MOSS-TTS-Nano")
    assert not clones("piper") and not clones(None)
    assert [m.name for m in MODELS if m.speed_streaming] == ["indextts2_5"]


def test_the_longest_key_wins_and_no_key_is_claimed_twice():
    keys = [k for m in MODELS for k in m.keys]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert model_unit("OpenMOSS-Team/MOSS-TTS-Nano").name == "moss_tts_nano"
    assert model_unit("OpenMOSS-Team/MOSS-TTS-Local-Transformer").name == "moss_tts_local"
    assert model_unit("OpenMOSS-Team/MOSS-TTS").name == "moss_tts"
    assert model_unit("IndexTeam/IndexTTS-2.5").name == "indextts2_5"
    assert model_unit("IndexTeam/IndexTTS-2").name == "indextts2"
    assert model_unit("/models/fish-speech-s2-pro").name == "fish_speech"
    assert model_unit("tts-1") is None and model_unit(None) is None
