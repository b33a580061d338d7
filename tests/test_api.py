"""``listenlab api`` over the real Piper voice, spoken to as a vLLM-Omni client would.

Real uvicorn on 127.0.0.1, real httpx / websockets / openai clients. Wire details (event
framing, the 44-byte streaming WAV header, error shapes and statuses) are checked byte by byte
against the reference (``shared/reference/vllm-omni-speech-api.md``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import struct
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import soundfile as sf
from websockets.asyncio.client import connect

from app.api import create_api_app
from backends.base import Backend, SpeechRequest
from tests.support.remote_util import ServerThread, serve_app

pytestmark = pytest.mark.timeout(90)

TEXT = "Hello from the speech server. It streams, one clause at a time."


@pytest.fixture(scope="module")
def direct(piper_det) -> np.ndarray:
    return asyncio.run(piper_det.synthesize(SpeechRequest(TEXT))).samples


@pytest.fixture(scope="module")
def api(piper_det):
    app = create_api_app(piper_det, config_timeout=1.0, idle_timeout=1.5)
    srv = ServerThread(app).start()
    yield srv
    srv.stop()


def post(srv, body: dict, **kw) -> httpx.Response:
    return httpx.post(srv.url + "/v1/audio/speech", json=body, timeout=60, trust_env=False, **kw)


def assert_error(r: httpx.Response, status: int, type_: str, needle: str) -> None:
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert e["type"] == type_ and e["code"] == status and "param" in e
    assert needle in e["message"], e["message"]


# --------------------------------------------------------------------------- non-streaming


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_whole_file_equals_direct_take(api, direct, fmt):
    r = post(api, {"input": TEXT, "response_format": fmt, "model": "piper", "voice": "joe"})
    assert r.status_code == 200 and r.headers["content-type"] == f"audio/{fmt}"
    x, sr = sf.read(io.BytesIO(r.content), dtype="int16", always_2d=True)
    assert sr == 22050
    np.testing.assert_array_equal(x, direct)


def test_pcm_is_headerless_s16le(api, direct):
    r = post(api, {"input": TEXT, "response_format": "pcm"})
    assert r.headers["content-type"] == "audio/pcm"
    np.testing.assert_array_equal(np.frombuffer(r.content, "<i2"), direct[:, 0])


def test_mp3_if_libsndfile_writes_it(api, direct):
    from backends.audio import mp3_available

    r = post(api, {"input": TEXT, "response_format": "mp3"})
    if not mp3_available():
        assert_error(r, 400, "BadRequestError", "mp3")
        return
    assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg"
    x, sr = sf.read(io.BytesIO(r.content), dtype="float32")
    assert sr == 22050 and abs(len(x) - len(direct)) < 0.1 * sr


def test_opus_needs_an_opus_rate(api, direct):
    # libsndfile refuses Opus at 22.05 kHz; vLLM-Omni answers that as a failed generation
    assert_error(
        post(api, {"input": TEXT, "response_format": "opus"}),
        500,
        "InternalServerError",
        "Speech generation failed: Error opening <_io.BytesIO object>: Error : Opus only "
        "supports sample rates of 8000, 12000, 16000, 24000, and 48000.",
    )
    r = post(api, {"input": TEXT, "response_format": "opus", "sample_rate": 24000})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/ogg"
    x, sr = sf.read(io.BytesIO(r.content))
    assert sr == 24000 and abs(len(x) / sr - len(direct) / 22050) < 0.1


def test_sample_rate_resamples(api, direct):
    r = post(api, {"input": TEXT, "response_format": "wav", "sample_rate": 16000})
    x, sr = sf.read(io.BytesIO(r.content), dtype="int16")
    assert sr == 16000
    assert abs(len(x) - len(direct) * 16000 / 22050) <= 2


def test_speaker_alias_voice_id_and_default(api, direct):
    for voice in ({"speaker": "JOE"}, {"voice": {"id": "joe"}}, {"voice": "default"}):
        r = post(api, {"input": TEXT, "response_format": "pcm", **voice})
        assert r.status_code == 200, (voice, r.text)
        np.testing.assert_array_equal(np.frombuffer(r.content, "<i2"), direct[:, 0])


# --------------------------------------------------------------------------- validation


def test_validation_errors_match_the_reference(api):
    assert_error(post(api, {"input": "   "}), 400, "BadRequestError", "Input text cannot be empty")
    # body validation: vLLM's handler type "Bad Request" with the field as param
    r = post(api, {"input": TEXT, "stream": True, "response_format": "mp3"})
    assert r.json()["error"]["param"] == "body"
    assert_error(
        r,
        400,
        "Bad Request",
        "Streaming (stream=true, stream_format='audio', or stream_format='sse') requires "
        "response_format='pcm' or 'wav'. Got response_format='mp3'.",
    )
    r = post(api, {"input": TEXT, "speed": 5})
    assert_error(r, 400, "Bad Request", "speed")
    assert r.json()["error"]["param"] == "body.speed"
    assert_error(
        post(api, {"input": TEXT, "response_format": "aac"}),
        400,
        "Bad Request",
        "response_format",
    )
    assert_error(
        post(api, {"input": TEXT, "max_new_tokens": 4097}),
        400,
        "BadRequestError",
        "max_new_tokens cannot exceed 4096",
    )
    r = post(api, {"input": TEXT, "model": "tts-1"})
    assert_error(r, 404, "NotFoundError", "The model `tts-1` does not exist.")
    assert r.json()["error"]["param"] == "model"
    assert_error(
        post(api, {"input": TEXT, "voice": "nobody"}),
        400,
        "BadRequestError",
        "Invalid voice 'nobody'. Supported: joe",
    )
    assert_error(
        post(api, {"input": TEXT, "word_timestamps": True}),
        400,
        "BadRequestError",
        "--forced-aligner",
    )
    assert_error(
        post(api, {"input": TEXT, "instructions": "x" * 501}),
        400,
        "BadRequestError",
        "Instructions too long (max 500 characters)",
    )
    r = httpx.post(
        api.url + "/v1/audio/speech", content=b"input=hi", headers={"content-type": "text/plain"}
    )
    assert_error(r, 400, "Bad Request", "Only 'application/json' is allowed")
    clip = io.BytesIO()
    sf.write(clip, np.zeros(22050 * 2), 22050, format="WAV")
    ref = "data:audio/wav;base64," + base64.b64encode(clip.getvalue()).decode()
    r = post(api, {"input": TEXT, "ref_audio": ref, "ref_text": "hi"})
    assert_error(r, 400, "BadRequestError", "cannot clone voices")
    # on a backend that cannot clone, any ref_audio is refused for that first (a URL too;
    # a cloning backend refuses a URL as "send it inline": docs/api.md, fetches-nothing)
    assert_error(
        post(api, {"input": TEXT, "ref_audio": "https://example.com/a.wav"}),
        400,
        "BadRequestError",
        "cannot clone voices",
    )
    # (a too-short clip on a cloning backend: test_voice_upload_and_delete_through_a_cloning_backend)
    assert api.server.config.app.state.api.requests == {}


def test_unknown_fields_are_ignored(api, direct):
    r = post(api, {"input": TEXT, "response_format": "pcm", "temperature": 0.1, "frobnicate": True})
    assert r.status_code == 200
    np.testing.assert_array_equal(np.frombuffer(r.content, "<i2"), direct[:, 0])


# --------------------------------------------------------------------------- streaming


def test_raw_wav_stream_header_then_pcm(api, direct):
    with httpx.stream(
        "POST",
        api.url + "/v1/audio/speech",
        json={"input": TEXT, "stream_format": "audio", "response_format": "wav"},
        timeout=60,
        trust_env=False,
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
        assert "content-length" not in r.headers
        body = r.read()
    fields = struct.unpack("<4sI4s4sIHHIIHH4sI", body[:44])
    assert fields == (
        b"RIFF",
        0xFFFFFFFF,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        22050,
        44100,
        2,
        16,
        b"data",
        0xFFFFFFFF,
    )
    np.testing.assert_array_equal(np.frombuffer(body[44:], "<i2"), direct[:, 0])


def test_raw_pcm_stream(api, direct):
    r = post(
        api, {"input": TEXT, "stream": True, "stream_format": "audio", "response_format": "pcm"}
    )
    assert r.headers["content-type"] == "audio/pcm"
    np.testing.assert_array_equal(np.frombuffer(r.content, "<i2"), direct[:, 0])


@pytest.mark.parametrize("how", [{"stream": True}, {"stream_format": "sse"}])
def test_sse_events_exactly_as_the_reference(api, direct, how):
    r = post(api, {"input": TEXT, "response_format": "wav", **how})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    text = r.text
    assert "[DONE]" not in text and "\nid:" not in text and text.endswith("\n\n")
    blocks = text.split("\n\n")[:-1]
    events = []
    for b in blocks:
        lines = b.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: ")
        payload = json.loads(lines[1][6:])
        assert lines[1][6:] == json.dumps(payload, separators=(",", ":"))
        assert payload["type"] == lines[0][7:]
        events.append(payload)
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert events[-1]["type"] == "speech.audio.done" and "usage" in events[-1]
    first = base64.b64decode(events[0]["audio"])
    assert len(first) == 44 and first[:4] == b"RIFF"  # the header is its own delta
    assert all(e["response_format"] == "wav" for e in events[:-1])
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[1:-1])
    np.testing.assert_array_equal(np.frombuffer(pcm, "<i2"), direct[:, 0])


def test_speed_is_the_references_stretch(api, direct):
    # vLLM-Omni stretches the finished file to exactly int(frames / speed), pitch kept; a
    # stream cannot be stretched, so it is refused (only IndexTTS-2.5 changes speed itself)
    for speed in (1.5, 0.5):
        r = post(api, {"input": TEXT, "response_format": "pcm", "speed": speed})
        assert r.status_code == 200 and len(r.content) // 2 == int(len(direct) / speed)
    r = post(api, {"input": TEXT, "stream_format": "audio", "response_format": "pcm", "speed": 1.5})
    assert_error(
        r,
        400,
        "BadRequestError",
        "Streaming is not supported with speed adjustment. "
        "Use a non-streaming request or remove the speed parameter.",
    )


class _NoStreamSpeed(Backend):
    """The real Piper voice, declaring no streaming speed control (as most vLLM-Omni models)."""

    name = "piper-nss"

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def from_params(cls, params, target=None):  # pragma: no cover - not registered
        raise NotImplementedError

    @property
    def capabilities(self):
        from dataclasses import replace

        return replace(self.inner.capabilities, speed_streaming=False)

    def stream(self, request):
        return self.inner.stream(request)


def test_speed_with_streaming_is_400_unless_the_backend_supports_it(piper_det):
    with serve_app(create_api_app(_NoStreamSpeed(piper_det))) as url:
        r = httpx.post(
            url + "/v1/audio/speech",
            json={"input": TEXT, "stream": True, "response_format": "pcm", "speed": 1.5},
            timeout=30,
        )
        assert_error(r, 400, "BadRequestError", "SSE streaming is not supported with speed")
        r = httpx.post(
            url + "/v1/audio/speech", json={"input": "Hi there.", "speed": 1.5}, timeout=30
        )
        assert r.status_code == 200  # non-streaming is fine


# --------------------------------------------------------------------------- cancellation


class _Watched(Backend):
    """The real Piper voice, recording how many chunks each stream produced and whether it closed."""

    name = "piper-watched"

    def __init__(self, inner):
        self.inner = inner
        self.log: list[tuple[int, bool]] = []

    @classmethod
    def from_params(cls, params, target=None):  # pragma: no cover - not registered
        raise NotImplementedError

    @property
    def capabilities(self):
        return self.inner.capabilities

    async def stream(self, request):
        n, finished = 0, False
        try:
            async for c in self.inner.stream(request):
                n += 1
                yield c
            finished = True
        finally:
            self.log.append((n, finished))


LONG = " ".join(f"This is sentence number {i}, spoken slowly to take a while." for i in range(30))


@pytest.mark.parametrize(
    "body", [{"stream_format": "audio", "response_format": "pcm"}, {"stream": True}]
)
async def test_client_disconnect_cancels_generation(piper_det, body):
    be = _Watched(piper_det)
    app = create_api_app(be)
    with serve_app(app) as url:
        async with (
            httpx.AsyncClient(timeout=30, trust_env=False) as client,
            client.stream("POST", url + "/v1/audio/speech", json={"input": LONG, **body}) as r,
        ):
            assert r.status_code == 200
            async for _ in r.aiter_raw():
                break
        deadline = time.monotonic() + 15
        while not be.log and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert be.log, "the backend stream was never closed"
        n, finished = be.log[0]
        assert not finished and n < 20  # LONG has 60 pieces
        assert app.state.api.requests == {}


async def test_ws_disconnect_cancels_generation(piper_det):
    be = _Watched(piper_det)
    app = create_api_app(be)
    with serve_app(app) as url:
        async with connect(url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
            await ws.send(
                json.dumps(
                    {"type": "session.config", "response_format": "pcm", "stream_audio": True}
                )
            )
            await ws.send(json.dumps({"type": "input.text", "text": LONG}))
            await ws.send(json.dumps({"type": "input.done"}))
            start = json.loads(await ws.recv())
            assert start["type"] == "audio.start"
            assert isinstance(await ws.recv(), bytes)
        deadline = time.monotonic() + 15
        while not be.log and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert be.log and not be.log[0][1] and be.log[0][0] < 20
        assert app.state.api.requests == {}


# --------------------------------------------------------------------------- websocket


def ws_url(srv) -> str:
    return f"ws://127.0.0.1:{srv.port}/v1/audio/speech/stream"


async def test_ws_stream_audio_two_utterances_on_one_socket(api, direct):
    async with connect(ws_url(api)) as ws:
        await ws.send(
            json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True})
        )
        for u in range(2):
            await ws.send(json.dumps({"type": "input.text", "text": TEXT[:20]}))
            await ws.send(json.dumps({"type": "input.text", "text": TEXT[20:]}))
            await ws.send(json.dumps({"type": "input.done"}))
            start = json.loads(await ws.recv())
            assert start == {
                "type": "audio.start",
                "utterance_index": u,
                "sentence_index": 0,
                "sentence_text": TEXT,
                "format": "pcm",
                "sample_rate": 22050,
                "channels": 1,
            }
            pcm = b""
            while isinstance(m := await ws.recv(), bytes):
                pcm += m
            done = json.loads(m)
            assert done == {
                "type": "audio.done",
                "utterance_index": u,
                "sentence_index": 0,
                "total_bytes": len(pcm),
                "error": False,
            }
            assert json.loads(await ws.recv()) == {
                "type": "session.done",
                "utterance_index": u,
                "total_sentences": 1,
            }
            np.testing.assert_array_equal(np.frombuffer(pcm, "<i2"), direct[:, 0])
        await ws.send(json.dumps({"type": "session.close"}))
        with pytest.raises(Exception):  # noqa: B017 - the server closes the socket
            await asyncio.wait_for(ws.recv(), 5)


async def test_ws_whole_file_per_unit_and_sentence_split(api):
    async with connect(ws_url(api)) as ws:
        cfg = {"type": "session.config", "response_format": "wav", "split_granularity": "sentence"}
        await ws.send(json.dumps(cfg))
        await ws.send(json.dumps({"type": "input.text", "text": "First sentence here. Second one"}))
        start = json.loads(await ws.recv())  # the finished sentence is synthesized at once
        assert start["sentence_text"] == "First sentence here." and "sample_rate" not in start
        wav = await ws.recv()
        x, sr = sf.read(io.BytesIO(wav), dtype="int16")
        assert sr == 22050 and len(x) > 0.5 * sr
        assert json.loads(await ws.recv())["type"] == "audio.done"
        await ws.send(json.dumps({"type": "input.done"}))
        start = json.loads(await ws.recv())
        assert (start["sentence_index"], start["sentence_text"]) == (1, "Second one")
        assert isinstance(await ws.recv(), bytes)
        assert json.loads(await ws.recv())["type"] == "audio.done"
        assert json.loads(await ws.recv()) == {
            "type": "session.done",
            "utterance_index": 0,
            "total_sentences": 2,
        }


async def _first_error(srv, *messages: str, raw: bool = False) -> tuple[dict, bool]:
    async with connect(ws_url(srv)) as ws:
        for m in messages:
            await ws.send(m)
        err = json.loads(await asyncio.wait_for(ws.recv(), 10))
        try:
            await asyncio.wait_for(ws.recv(), 3)
            closed = False
        except Exception:
            closed = True
        return err, closed


async def test_ws_errors_as_the_reference(api):
    cfg = json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True})
    err, closed = await _first_error(api, json.dumps({"type": "input.text", "text": "hi"}))
    assert (
        err == {"type": "error", "message": "Expected session.config, got: input.text"} and closed
    )
    err, closed = await _first_error(api, "{nope")
    assert err["message"] == "Invalid JSON message" and closed
    err, closed = await _first_error(api, "[1, 2]")
    assert err["message"] == "WebSocket messages must be JSON objects" and closed
    err, closed = await _first_error(
        api, json.dumps({"type": "session.config", "stream_audio": True})
    )
    assert (
        err["message"].startswith("Invalid session config:")
        and "response_format='pcm'" in err["message"]
    )
    assert closed
    err, closed = await _first_error(api, json.dumps({"type": "session.config", "model": "qwen"}))
    assert err["message"] == (  # str() of vLLM's ErrorResponse, as vLLM-Omni sends it
        "error=ErrorInfo(message='The model `qwen` does not exist.', type='NotFoundError', "
        "param='model', code=404)"
    )
    assert closed
    err, closed = await _first_error(api, cfg, json.dumps({"type": "frobnicate"}))
    assert err["message"] == "Unknown message type: frobnicate" and not closed
    err, closed = await _first_error(api, cfg, json.dumps({"type": "input.text", "text": 5}))
    assert err["message"] == "input.text requires a string value" and not closed
    err, closed = await _first_error(
        api, cfg, json.dumps({"type": "input.text", "text": "open"}), cfg
    )
    assert err["message"].startswith(
        "session.config cannot be applied while an utterance is in progress"
    )


async def test_ws_config_and_idle_timeouts(api):
    t0 = time.monotonic()
    err, closed = await _first_error(api)
    assert err["message"] == "Timeout waiting for session.config" and closed
    assert time.monotonic() - t0 < 8
    err, closed = await _first_error(api, json.dumps({"type": "session.config"}))
    assert err["message"] == "Idle timeout: no message received" and closed


async def test_ws_generation_failure_message(api):
    cfg = json.dumps(
        {
            "type": "session.config",
            "response_format": "pcm",
            "stream_audio": True,
            "voice": "nobody",
        }
    )
    async with connect(ws_url(api)) as ws:
        await ws.send(cfg)
        await ws.send(json.dumps({"type": "input.text", "text": "hello"}))
        await ws.send(json.dumps({"type": "input.done"}))
        msgs = [json.loads(await ws.recv()) for _ in range(4)]
    assert [m["type"] for m in msgs] == ["audio.start", "error", "audio.done", "session.done"]
    assert msgs[1]["message"].startswith(
        "Generation failed for utterance 0, sentence 0: Invalid voice 'nobody'. Supported: joe"
    )
    assert "partial_audio" not in msgs[1]
    assert msgs[2]["error"] is True and msgs[2]["total_bytes"] == 0


# --------------------------------------------------------------------------- other routes


def test_voices_models_health(api):
    r = httpx.get(api.url + "/v1/audio/voices")
    assert r.json() == {"voices": ["default", "joe"], "uploaded_voices": []}
    clip = io.BytesIO()
    sf.write(clip, np.zeros(22050 * 2), 22050, format="WAV")
    r = httpx.post(
        api.url + "/v1/audio/voices",
        data={"name": "me", "consent": "yes"},
        files={"audio_sample": ("me.wav", clip.getvalue(), "audio/wav")},
    )
    assert_error(
        r, 400, "BadRequestError", "cannot clone voices, so voice uploads are not supported"
    )
    r = httpx.delete(api.url + "/v1/audio/voices/me")
    assert_error(r, 404, "NotFoundError", "Voice 'me' not found")
    models = httpx.get(api.url + "/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == "piper" and card["object"] == "model"
    assert card["listenlab"]["sample_rate"] == 22050 and card["listenlab"]["cloning"] is False
    assert httpx.get(api.url + "/health").json() == {"status": "healthy"}


# --------------------------------------------------------------------------- openai SDK


async def test_openai_sdk_streaming_response(api, direct):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=api.url + "/v1", api_key="unused", max_retries=0)
    async with client.audio.speech.with_streaming_response.create(
        model="piper", voice="joe", input=TEXT, response_format="pcm", stream_format="audio"
    ) as resp:
        assert resp.headers["content-type"] == "audio/pcm"
        pcm = b"".join([b async for b in resp.iter_bytes()])
    np.testing.assert_array_equal(np.frombuffer(pcm, "<i2"), direct[:, 0])
    async with client.audio.speech.with_streaming_response.create(
        model="piper", voice="joe", input=TEXT, response_format="wav"
    ) as resp:
        x, sr = sf.read(io.BytesIO(await resp.read()), dtype="int16", always_2d=True)
    assert sr == 22050
    np.testing.assert_array_equal(x, direct)
    from openai import BadRequestError

    with pytest.raises(BadRequestError, match="Input text cannot be empty"):
        await client.audio.speech.create(model="piper", voice="joe", input=" ")
    await client.close()


# --------------------------------------------------------------------------- failures mid-stream


@pytest.fixture(scope="module")
def faults():
    from tests.support.fault_server import create_fault_app

    srv = ServerThread(create_fault_app()).start()
    yield srv
    srv.stop()


@contextlib.contextmanager
def _over_faults(faults, fault: str) -> Iterator[ServerThread]:
    """listenlab api over a remote backend pointed at the fault server (a real chain)."""
    from backends.registry import load_backend

    inner = load_backend(f"vllm-omni+http://127.0.0.1:{faults.port}/{fault}?mode=sse&format=pcm")
    # served as "faults": listenlab's generic rules (the fault server names a Qwen3 Base model)
    srv = ServerThread(create_api_app(inner, served_model="faults", own_backend=True)).start()
    try:
        yield srv
    finally:
        srv.stop()


def test_failure_after_200_cuts_a_raw_stream(faults):
    with (
        _over_faults(faults, "cut,after=2") as srv,
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST",
            srv.url + "/v1/audio/speech",
            json={"input": TEXT, "stream_format": "audio", "response_format": "pcm"},
            timeout=30,
        ) as r,
    ):
        assert r.status_code == 200
        for _ in r.iter_raw():
            pass


def test_failure_after_200_is_one_sse_error_event(faults):
    with _over_faults(faults, "error_event,after=2") as srv:
        r = httpx.post(
            srv.url + "/v1/audio/speech", json={"input": TEXT, "stream": True}, timeout=30
        )
        blocks = [json.loads(b.split("\n")[1][6:]) for b in r.text.split("\n\n") if b]
        assert [b["type"] for b in blocks[:-1]] == ["speech.audio.delta"] * (len(blocks) - 1)
        last = blocks[-1]
        assert last["type"] == "speech.audio.error"
        assert last["partial_audio"] is True and last["action"] == "discard"
        assert last["error"]["type"] == "server_error" and last["error"]["code"] == 500
        assert "did not emit codec EOS" in last["error"]["message"]


def test_error_before_audio_keeps_the_upstream_status(faults):
    with _over_faults(faults, "http500") as srv:
        r = httpx.post(
            srv.url + "/v1/audio/speech", json={"input": TEXT, "stream": True}, timeout=30
        )
        assert_error(r, 500, "InternalServerError", "engine exploded")


async def test_ws_failure_mid_stream(faults):
    with _over_faults(faults, "cut,after=2") as srv:
        async with connect(ws_url(srv)) as ws:
            await ws.send(
                json.dumps(
                    {"type": "session.config", "response_format": "pcm", "stream_audio": True}
                )
            )
            await ws.send(json.dumps({"type": "input.text", "text": TEXT}))
            await ws.send(json.dumps({"type": "input.done"}))
            msgs = []
            while True:
                m = await asyncio.wait_for(ws.recv(), 20)
                msgs.append(m if isinstance(m, bytes) else json.loads(m))
                if isinstance(msgs[-1], dict) and msgs[-1]["type"] == "session.done":
                    break
        kinds = [m if isinstance(m, dict) else "bin" for m in msgs]
        assert kinds[0]["type"] == "audio.start" and kinds[0]["sample_rate"] == 24000
        err = next(m for m in msgs if isinstance(m, dict) and m["type"] == "error")
        assert err["message"].startswith("Generation failed for utterance 0, sentence 0:")
        assert (
            "cut" in err["message"] and err["partial_audio"] is True and err["action"] == "discard"
        )
        done = next(m for m in msgs if isinstance(m, dict) and m["type"] == "audio.done")
        assert done["error"] is True and done["total_bytes"] > 0


def test_voice_upload_and_delete_through_a_cloning_backend(faults):
    with _over_faults(faults, "ok") as srv:
        clip = io.BytesIO()
        sf.write(clip, np.sin(np.arange(16000 * 3) / 10) * 0.3, 16000, format="WAV")
        r = httpx.post(
            srv.url + "/v1/audio/voices",
            data={
                "name": "Narrator",
                "consent": "user-7",
                "ref_text": "words",
                "speaker_description": "warm",
            },
            files={"audio_sample": ("n.wav", clip.getvalue(), "audio/wav")},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        v = r.json()["voice"]
        assert r.json()["success"] is True
        assert (v["name"], v["consent"], v["ref_text"], v["speaker_description"]) == (
            "narrator",
            "user-7",
            "words",
            "warm",
        )
        listed = httpx.get(srv.url + "/v1/audio/voices").json()
        assert "narrator" in listed["voices"] and "default" in listed["voices"]
        up = {u["name"]: u for u in listed["uploaded_voices"]}
        assert up["narrator"]["consent"] == "user-7" and up["narrator"]["ref_text"] == "words"
        bad = httpx.post(
            srv.url + "/v1/audio/voices",
            data={"name": "x", "consent": "y"},
            files={"audio_sample": ("x.txt", b"hello", "text/plain")},
        )
        assert_error(bad, 400, "BadRequestError", "Unsupported MIME type: text/plain. Allowed:")
        short = io.BytesIO()
        sf.write(short, np.zeros(800), 16000, format="WAV")
        bad = httpx.post(
            srv.url + "/v1/audio/voices",
            data={"name": "x", "consent": "y"},
            files={"audio_sample": ("x.wav", short.getvalue(), "audio/wav")},
        )
        assert_error(bad, 400, "BadRequestError", "Reference audio too short")
        r = httpx.delete(srv.url + "/v1/audio/voices/narrator")
        assert r.json() == {"success": True, "message": "Voice 'narrator' deleted successfully"}
        assert_error(
            httpx.delete(srv.url + "/v1/audio/voices/narrator"),
            404,
            "NotFoundError",
            "Voice 'narrator' not found",
        )


# --------------------------------------------------------------------------- the other routes


def metric(text: str, name: str) -> float:
    """The sum of a metric's samples (every label set)."""
    vals = [float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(name)]
    return sum(vals)


def test_ping_version_and_metrics_count_requests_and_first_audio(piper_det):
    with serve_app(create_api_app(piper_det)) as url:
        get = lambda p: httpx.get(url + p, timeout=30, trust_env=False)  # noqa: E731
        assert [(r.status_code, r.content) for r in (get("/ping"),)] == [(200, b"")]
        assert httpx.post(url + "/ping", trust_env=False).status_code == 200
        assert get("/version").json() == {"version": "0.30.0"}
        before = get("/metrics").text
        assert metric(before, "vllm_omni:audio_ttfp_s_count") == 0
        body = {"input": "Hi there.", "response_format": "pcm", "stream_format": "audio"}
        assert httpx.post(url + "/v1/audio/speech", json=body, timeout=60).status_code == 200
        body["stream_format"] = "sse"
        assert httpx.post(url + "/v1/audio/speech", json=body, timeout=60).status_code == 200
        m = get("/metrics")
        assert m.headers["content-type"].startswith("text/plain; version=0.0.4")
        # two streams and their first audio: each counted once, with a positive time
        assert metric(m.text, "vllm_omni:audio_ttfp_s_count") == 2
        assert metric(m.text, "vllm_omni:audio_ttfp_s_sum") > 0
        assert metric(m.text, "vllm_omni:speech_stream_completed_total") == 2
        assert 'listenlab_api_requests_total{route="/v1/audio/speech",status="200"} 2' in m.text


def test_routes_vllm_omni_mounts_answer_in_its_error_shape(piper_det):
    with serve_app(create_api_app(piper_det)) as url:
        r = httpx.post(url + "/v1/audio/generate", json={"input": "x"}, trust_env=False)
        assert_error(r, 404, "NotFoundError", "The model does not support Audio Generate API")
        r = httpx.get(url + "/v1/realtime/sessions/abc/status", trust_env=False)
        assert_error(r, 501, "Not Implemented", "RL rollout serving not available")
        r = httpx.post(url + "/invocations", json={}, trust_env=False)
        assert_error(r, 404, "NotFoundError", "Invocations API")
        r = httpx.get(url + "/nowhere", trust_env=False)  # a path vLLM-Omni does not mount
        assert r.status_code == 404


def test_batch_answers_each_item(piper_det, direct):
    with serve_app(create_api_app(piper_det)) as url:
        items = [{"input": TEXT}, {"input": "Hi.", "voice": "nobody"}, {"input": " "}]
        r = httpx.post(
            url + "/v1/audio/speech/batch",
            json={"items": items, "response_format": "pcm"},
            timeout=60,
            trust_env=False,
        )
        body = r.json()
        assert r.status_code == 200 and (body["total"], body["succeeded"], body["failed"]) == (
            3,
            1,
            2,
        )
        assert body["id"].startswith("speech-batch-") and len(body["id"]) == 29
        ok, voice, blank = body["results"]
        pcm = np.frombuffer(base64.b64decode(ok["audio_data"]), "<i2")
        np.testing.assert_array_equal(pcm, direct[:, 0])
        assert (voice["index"], voice["status"]) == (1, "error")
        assert voice["error"].startswith("Invalid voice 'nobody'"), voice
        assert blank["error"] == "Input text cannot be empty"
        too_many = {"items": [{"input": "a"}] * 33}
        r = httpx.post(url + "/v1/audio/speech/batch", json=too_many, trust_env=False)
        assert_error(r, 400, "Bad Request", "Batch contains 33 items, exceeding the maximum of 32")
