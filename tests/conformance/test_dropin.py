"""``listenlab api`` is a drop-in for vLLM-Omni's server: the same requests, the same answers.

Each request goes to vLLM-Omni's own serving code (Qwen3-TTS, scripted engine) and to
``listenlab api`` serving the Qwen3-TTS profile (``piper?deterministic=1&profile=qwen3-tts``:
24 kHz mono, its chunk schedule, its speakers and rules) under the same model name. What a client can see is reduced to a "shape" (status, the headers clients
read, SSE event names and JSON keys, the WAV header fields, error JSON keys, types, params and
messages, WebSocket message types, keys and messages) and the two shapes must be equal. The
generated matrix (``test_matrix.py``) compares every seed model and the audio byte for byte;
this file keeps the hand-picked client flows (the openai SDK, the example clients' requests).

Known, deliberate differences are listed in ``NOT_COPIED`` with the reason; nothing else may
differ.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from app.api import create_api_app
from app.api.not_served import RL_MESSAGE
from backends.registry import load_backend
from tests.support.remote_util import ServerThread

pytestmark = pytest.mark.conformance

SERVED = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
TEXT = "Hello from the speech server. It streams, one clause at a time."

# Headers a client reads (content type, length on whole files, the usage headers).
READ_HEADERS = (
    "content-type",
    "x-vllm-omni-input-tokens",
    "x-vllm-omni-output-tokens",
    "x-vllm-omni-total-tokens",
    "x-vllm-omni-input-text-tokens",
    "x-vllm-omni-input-audio-tokens",
)

NOT_COPIED = {
    "X-Request-Id / Cache-Control": (
        "listenlab adds them to streams (extra headers break no client); vLLM-Omni sends none."
    ),
    "audio.start channels": "docs/api.md, 'Where listenlab api answers differently': "
    "audio-start-format.",
    "X-Listenlab-Stand-In": (
        "listenlab's stand-in says what the CPU voice did not do (extra headers break no client)."
    ),
    "/v1/models extras": (
        "listenlab's model card adds a 'listenlab' object (capabilities, the stand-in's note); "
        "OpenAI clients ignore it."
    ),
}


@pytest.fixture(scope="module")
def pair(omni):
    """(vLLM-Omni URL, listenlab api URL) over the same voice and model name."""
    be = load_backend("piper?deterministic=1&profile=qwen3-tts&pace=0")
    srv = ServerThread(create_api_app(be, served_model=SERVED, own_backend=True)).start()
    try:
        yield omni.url("qwen3_tts"), srv.url
    finally:
        srv.stop()


def post(url: str, body: Any, **kw) -> httpx.Response:
    if isinstance(body, bytes):
        kw["content"] = body
    else:
        kw["json"] = body
    return httpx.post(url + "/v1/audio/speech", timeout=120, trust_env=False, **kw)


def wav_fields(data: bytes) -> dict[str, Any]:
    riff, size, wave, fmt, fmt_size, tag, ch, sr, brate, align, bits = struct.unpack(
        "<4sI4s4sIHHIIHH", data[:36]
    )
    return {
        "riff": riff,
        "wave": wave,
        "fmt": fmt,
        "fmt_size": fmt_size,
        "tag": tag,
        "channels": ch,
        "rate": sr,
        "byte_rate": brate,
        "align": align,
        "bits": bits,
        "data_at": data.find(b"data"),
        "streaming_sizes": size == 0xFFFFFFFF,
    }


def error_shape(r: httpx.Response) -> dict[str, Any]:
    """Everything a client reads from an error: status, keys, type, param, code and message."""
    body = r.json()
    e = body.get("error", {})
    return {
        "status": r.status_code,
        "keys": sorted(body),
        "error_keys": sorted(e),
        "type": e.get("type"),
        "param": e.get("param"),
        "code": e.get("code"),
        "message": e.get("message"),
    }


def sse_shape(r: httpx.Response) -> dict[str, Any]:
    events = []
    for block in r.text.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert [ln.split(":", 1)[0] for ln in lines] == ["event", "data"], block[:200]
        name = lines[0].removeprefix("event: ")
        payload = json.loads(lines[1].removeprefix("data: "))
        assert lines[1] == "data: " + json.dumps(payload, separators=(",", ":"))  # compact JSON
        events.append((name, payload))
    names = [n for n, _ in events]
    first = base64.b64decode(events[0][1]["audio"])
    shape = {
        "status": r.status_code,
        "content-type": r.headers["content-type"],
        "first": names[0],
        "last": names[-1],
        "middle": sorted(set(names[1:-1])),
        "delta_keys": sorted(events[0][1]),
        "done": {k: sorted(v) if isinstance(v, dict) else v for k, v in events[-1][1].items()},
        "types_match_names": all(p["type"] == n for n, p in events),
    }
    if events[0][1]["response_format"] == "wav":
        assert len(first) == 44  # the first delta is the header alone
        shape["wav"] = wav_fields(first)
    return shape


def headers_shape(r: httpx.Response) -> dict[str, Any]:
    return {h: r.headers.get(h) for h in READ_HEADERS} | {"status": r.status_code}


# --------------------------------------------------------------------------- HTTP


@pytest.mark.parametrize("fmt", ["wav", "pcm"])
def test_whole_file_answers_alike(pair, fmt):
    omni, ours = (post(u, {"input": TEXT, "response_format": fmt}) for u in pair)
    assert headers_shape(omni) == headers_shape(ours)
    if fmt == "wav":
        a, b = wav_fields(omni.content), wav_fields(ours.content)
        assert a == b and not a["streaming_sizes"]


@pytest.mark.parametrize("fmt", ["wav", "pcm"])
@pytest.mark.parametrize("how", [{"stream": True}, {"stream_format": "sse"}])
def test_sse_events_alike(pair, fmt, how):
    omni, ours = (post(u, {"input": TEXT, "response_format": fmt, **how}) for u in pair)
    assert sse_shape(omni) == sse_shape(ours)


@pytest.mark.parametrize("fmt", ["wav", "pcm"])
def test_raw_stream_alike(pair, fmt):
    body = {"input": TEXT, "response_format": fmt, "stream": True, "stream_format": "audio"}
    omni, ours = (post(u, body) for u in pair)
    assert headers_shape(omni) == headers_shape(ours)
    assert "content-length" not in omni.headers and "content-length" not in ours.headers
    if fmt == "wav":
        assert wav_fields(omni.content) == wav_fields(ours.content)
        assert wav_fields(omni.content)["streaming_sizes"]


ERRORS = {
    "unknown voice": {"input": "Hi.", "voice": "nobody"},
    "empty input": {"input": "  "},
    "wrong model": {"input": "Hi.", "model": "someone/else"},
    "speed out of range": {"input": "Hi.", "speed": 9},
    "stream as mp3": {"input": "Hi.", "stream": True, "response_format": "mp3"},
    "bad enum": {"input": "Hi.", "response_format": "aac"},
    "missing input": {"voice": "vivian"},
    "max_new_tokens over 4096": {"input": "Hi.", "max_new_tokens": 5000},
    "word_timestamps without aligner": {"input": "Hi.", "word_timestamps": True},
    "not a JSON object": [1, 2],
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_alike(pair, case):
    omni, ours = (post(u, ERRORS[case]) for u in pair)
    assert error_shape(omni) == error_shape(ours), (omni.text, ours.text)


def test_non_json_body_alike(pair):
    omni, ours = (
        post(u, b"input=hi", headers={"content-type": "application/x-www-form-urlencoded"})
        for u in pair
    )
    assert error_shape(omni) == error_shape(ours), (omni.text, ours.text)
    omni, ours = (post(u, b"{not json", headers={"content-type": "application/json"}) for u in pair)
    assert error_shape(omni) == error_shape(ours), (omni.text, ours.text)


def test_voices_models_health_alike(pair):
    def get(u, path):
        return httpx.get(u + path, timeout=30, trust_env=False)

    v = [get(u, "/v1/audio/voices").json() for u in pair]
    assert [sorted(x) for x in v] == [["uploaded_voices", "voices"]] * 2
    assert all("default" in x["voices"] and x["uploaded_voices"] == [] for x in v)
    m = [get(u, "/v1/models").json() for u in pair]
    assert [x["object"] for x in m] == ["list", "list"]
    assert [x["data"][0]["id"] for x in m] == [SERVED, SERVED]
    common = {"id", "object", "created", "owned_by", "root", "parent", "permission"}
    assert all(common <= set(x["data"][0]) for x in m)
    h = [get(u, "/health") for u in pair]
    assert [(r.status_code, r.json()) for r in h] == [(200, {"status": "healthy"})] * 2


# --------------------------------------------------------------------------- WebSocket


async def ws_session(url: str, config: dict, texts: list[str]) -> list[Any]:
    """One utterance: the messages as (type, sorted keys) and ("binary", n) for audio."""
    out: list[Any] = []
    async with connect("ws" + url[4:] + "/v1/audio/speech/stream", proxy=None) as ws:
        await ws.send(json.dumps({"type": "session.config", **config}))
        for t in texts:
            await ws.send(json.dumps({"type": "input.text", "text": t}))
        await ws.send(json.dumps({"type": "input.done"}))
        while True:
            msg = await asyncio.wait_for(ws.recv(), 60)
            if isinstance(msg, bytes):
                if out and out[-1][0] == "binary":
                    out[-1] = ("binary", out[-1][1] + 1)
                else:
                    out.append(("binary", 1))
                continue
            m = json.loads(msg)
            out.append((m["type"], sorted(m), {k: m[k] for k in ("format", "error") if k in m}))
            if m["type"] in ("session.done", "error"):
                if m["type"] == "error":
                    continue
                break
    return out


def ws_shape(msgs: list[Any]) -> list[Any]:
    """Binary runs are compared as 'one or more' (chunk counts differ by design), and
    audio.start's extra ``channels`` (NOT_COPIED) is left out."""
    out = []
    for m in msgs:
        if m[0] == "binary":
            out.append(("binary", "1+"))
        elif m[0] == "audio.start":
            out.append((m[0], [k for k in m[1] if k != "channels"], m[2]))
        else:
            out.append(m)
    return out


@pytest.mark.parametrize(
    "config",
    [
        {"response_format": "pcm", "stream_audio": True},
        {"response_format": "wav"},
        {"response_format": "pcm", "stream_audio": True, "split_granularity": "sentence"},
        # vLLM-Omni's own streaming_speech_client.py defaults (its --speaker is model-specific)
        {"task_type": "CustomVoice", "language": "Auto", "speed": 1.0, "response_format": "wav"},
    ],
)
async def test_ws_messages_alike(pair, config):
    omni, ours = [await ws_session(u, config, TEXT.split(" ", 3)) for u in pair]
    assert ws_shape(omni) == ws_shape(ours), (omni, ours)
    if config.get("stream_audio"):
        assert omni[0][0] == "audio.start" and "sample_rate" in omni[0][1]


async def test_ws_errors_alike(pair):
    async def errors(url: str) -> list[Any]:
        got = []
        async with connect("ws" + url[4:] + "/v1/audio/speech/stream", proxy=None) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "nobody"}))
            await ws.send("{oops")
            await ws.send(json.dumps({"type": "what"}))
            await ws.send(json.dumps({"type": "input.text", "text": "Hi."}))
            await ws.send(json.dumps({"type": "input.done"}))
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), 60))
                # an error's text is under "message"; audio.done's flag under "error"
                got.append((m["type"], sorted(m), m.get("message"), m.get("error")))
                if m["type"] == "session.done":
                    return got

    omni, ours = [await errors(u) for u in pair]
    assert omni == ours


# --------------------------------------------------------------------------- vLLM-Omni's clients


def test_example_openai_speech_client_requests(pair):
    """The requests of vLLM-Omni's examples/online_serving/text_to_speech/qwen3_tts/
    openai_speech_client.py (rewritten here: a Bearer key, model + voice + response_format, and
    its error test: a non-200 status or a body starting with '{"error"')."""
    for fmt in ("wav", "flac", "pcm"):
        got = []
        for u in pair:
            r = httpx.post(
                u + "/v1/audio/speech",
                json={"model": SERVED, "input": TEXT, "voice": "default", "response_format": fmt},
                headers={"Authorization": "Bearer EMPTY"},
                timeout=120,
                trust_env=False,
            )
            ok = r.status_code == 200 and not r.content.startswith(b'{"error"')
            got.append((ok, r.headers["content-type"], len(r.content) > 1000))
        assert got[0] == got[1] == (True, got[0][1], True), got


async def test_openai_sdk_against_both(pair):
    from openai import AsyncOpenAI, BadRequestError

    seen = []
    for u in pair:
        client = AsyncOpenAI(base_url=u + "/v1", api_key="EMPTY", max_retries=0)
        async with client.audio.speech.with_streaming_response.create(
            model=SERVED, voice="default", input=TEXT, response_format="pcm", stream_format="audio"
        ) as resp:
            ctype = resp.headers["content-type"]
            n = len(b"".join([b async for b in resp.iter_bytes()]))
        with pytest.raises(BadRequestError) as e:
            await client.audio.speech.create(model=SERVED, voice="default", input=" ")
        await client.close()
        seen.append(
            (ctype, n > 1000, e.value.status_code, "Input text cannot be empty" in str(e.value))
        )
    assert seen[0] == seen[1] == ("audio/pcm", True, 400, True), seen


# --------------------------------------------------------------------------- other routes


def call(url: str, method: str, path: str, **kw) -> httpx.Response:
    return httpx.request(method, url + path, timeout=120, trust_env=False, **kw)


def answer_view(r: httpx.Response) -> tuple:
    """Status, media type, and the body (an error by its shape)."""
    ctype = r.headers.get("content-type", "").split(";")[0]
    if ctype == "application/json" and isinstance(r.json(), dict) and "error" in r.json():
        return r.status_code, ctype, error_shape(r)
    return r.status_code, ctype, r.content


@pytest.mark.parametrize(
    "method, path", [("GET", "/ping"), ("POST", "/ping"), ("GET", "/version"), ("GET", "/load")]
)
def test_service_routes_alike(pair, method, path):
    omni, ours = (answer_view(call(u, method, path)) for u in pair)
    assert omni == ours


def metric_types(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))


def test_metrics_are_the_references_families(pair):
    """listenlab's ``/metrics`` is Prometheus text; every ``vllm_omni:`` family it exports is
    one vLLM-Omni exports too, of the same type, and the request it just served is counted."""
    post(pair[1], {"input": "Hi.", "response_format": "pcm", "stream_format": "audio"})
    omni, ours = (call(u, "GET", "/metrics") for u in pair)
    assert omni.status_code == ours.status_code == 200
    assert all(r.headers["content-type"].startswith("text/plain") for r in (omni, ours))
    theirs, mine = metric_types(omni.text), metric_types(ours.text)
    shared = {k: v for k, v in mine.items() if not k.startswith("listenlab_")}
    assert shared and all(theirs.get(k) == v for k, v in shared.items()), (shared, theirs)
    # every family of theirs is exported here or listed absent with its reason
    from app.api.metrics import ABSENT

    missing = set(theirs) - set(mine) - set(ABSENT)
    missing -= {k for k in theirs if k.endswith("_created")}  # prometheus_client's timestamps
    assert not missing, sorted(missing)
    assert set(ABSENT) <= set(theirs), set(ABSENT) - set(theirs)
    count = re.search(r"^vllm_omni:audio_ttfp_s_count(?:\{[^}]*\})? (\S+)$", ours.text, re.M)
    assert count and float(count.group(1)) >= 1


SERVED_HERE = {
    "/v1/audio/speech",
    "/v1/audio/speech/batch",
    "/v1/audio/voices",
    "/v1/audio/voices/{name}",
    "/v1/models",
    "/health",
    "/ping",
    "/version",
    "/load",
    "/metrics",
}
NOT_FOR_CLIENTS = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


def test_every_route_the_reference_mounts_answers_in_its_shape(pair):
    """Each HTTP route of vLLM-Omni's app: the same answer, or (docs/api.md, ``not-served``)
    404 ``NotFoundError`` "The model does not support <API> API" in the reference's error
    shape, never FastAPI's bare ``{"detail": "Not Found"}``."""
    routes = httpx.get(pair[0] + "/_conformance/routes", timeout=30, trust_env=False).json()
    checked, refused = 0, []
    for path, methods in routes:
        if path in SERVED_HERE or path in NOT_FOR_CLIENTS:
            continue
        concrete = path.replace("{video_id}", "v1").replace("{session_id}", "s1")
        for method in set(methods) - {"WEBSOCKET", "HEAD"}:
            kw = {"json": {}} if method == "POST" else {}
            a, b = (answer_view(call(u, method, concrete, **kw)) for u in pair)
            checked += 1
            if a == b:
                continue
            # listenlab does not validate the body of a request it does not serve
            assert isinstance(b[2], dict), (path, a, b)
            assert (b[0], b[2]["type"]) in ((404, "NotFoundError"), (501, "Not Implemented"))
            assert b[2]["message"].startswith("The model does not support ") or (
                b[2]["message"] == RL_MESSAGE and a[2]["type"] == "Bad Request"
            ), (path, a, b)
            refused.append(path)
    assert checked >= 20 and "/v1/audio/generate" in refused
    # the RL rollout routes without a body answer exactly as vLLM-Omni does for TTS (501)
    rollout = {p for p in refused if p.startswith("/v1/realtime/sessions/")}
    assert rollout == {"/v1/realtime/sessions/{session_id}/step"}, rollout


def test_voice_route_errors_alike(pair):
    for method, path, kw in (
        ("DELETE", "/v1/audio/voices/nobody", {}),
        ("POST", "/v1/audio/voices", {"data": {}}),
        ("POST", "/v1/audio/voices", {"data": {"name": "x"}}),
    ):
        a, b = (answer_view(call(u, method, path, **kw)) for u in pair)
        assert a == b, (method, path, kw)


def batch_view(r: httpx.Response) -> dict:
    """A batch answer: status, keys, and each item's status, error and audio (header, samples)."""
    body = r.json()
    if "error" in body:
        return error_shape(r)
    items = []
    for it in body["results"]:
        v = {k: it[k] for k in sorted(it) if k != "audio_data"}
        if "audio_data" in it:
            audio = base64.b64decode(it["audio_data"])
            v["audio"] = (wav_fields(audio), audio[44:]) if audio[:4] == b"RIFF" else len(audio)
        items.append(v)
    return {
        "status": r.status_code,
        "keys": sorted(body),
        "id": (body["id"][:13], len(body["id"])),
        "totals": (body["total"], body["succeeded"], body["failed"]),
        "items": items,
    }


@pytest.mark.parametrize(
    "case",
    [
        {"items": [{"input": "Hi there."}, {"input": "Yo.", "voice": "nobody"}]},
        {"items": [{"input": "Hi there.", "voice": "ryan"}], "voice": "vivian"},
        {"items": [{"input": "  "}, {"input": "Hi.", "max_new_tokens": 5000}]},
        {"items": [{"input": "Hi."}], "model": "someone/else"},
        {"items": []},
        {"items": [{"input": "a"}] * 33},
        {"items": [{"input": "Hi."}], "response_format": "mp3"},
        {"items": [{"input": "Hi."}], "stream": True},
    ],
    ids=["bad voice", "item voice", "bad items", "wrong model", "empty", "33", "mp3", "stream"],
)
def test_batch_alike(pair, case):
    """``/v1/audio/speech/batch`` (its example client's requests): the same statuses, item
    results and messages, and each item's audio byte for byte."""
    a, b = (batch_view(call(u, "POST", "/v1/audio/speech/batch", json=case)) for u in pair)
    assert a == b


def test_batch_speed_is_the_same_stretch(pair):
    body = {"items": [{"input": "Hi there."}], "response_format": "pcm", "speed": 1.5}
    a, b = (call(u, "POST", "/v1/audio/speech/batch", json=body).json() for u in pair)
    lens = [len(base64.b64decode(x["results"][0]["audio_data"])) for x in (a, b)]
    assert lens[0] == lens[1] > 0  # samples: float32 rounding apart (``speed-rounding``)
