"""What the player is told about the stream's format: read from it, or assumed (and from what).

A small real upstream on 127.0.0.1 (``odd_upstream``) speaks vLLM-Omni's HTTP API but
misbehaves: it ignores ``response_format`` (raw PCM labelled WAV, or raw PCM whatever was asked),
and, for the XSS test, puts markup in every string it returns. vLLM-Omni itself needs a GPU, so
this stands in for it; it follows the real routes (``/v1/models``, ``/v1/audio/voices``,
``/v1/audio/speech``, ``/health``).
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import websockets
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from backends.base import SpeechRequest
from backends.errors import BackendError
from backends.registry import load_backend
from tests.support.app_util import live_server, tmp_db

MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
EVIL = '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">'
EVIL_MODEL = "Qwen/Qwen3-TTS-evil" + EVIL


def tone(rate: int = 24000, seconds: float = 0.6) -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    return (0.3 * 32767 * np.sin(2 * np.pi * 220 * t)).astype("<i2").tobytes()


def odd_upstream() -> FastAPI:
    """Faults by the first path segment: ``wavignored``, ``pcmonly``, ``evil``."""
    app = FastAPI()

    @app.get("/{fault}/health")
    async def health(fault: str):
        return {"status": "ok"}

    @app.get("/{fault}/v1/models")
    async def models(fault: str):
        if fault == "evil":
            card = {"id": EVIL_MODEL, "listenlab": {"languages": [EVIL, "English"]}}
        else:
            card = {"id": MODEL}
        return {"object": "list", "data": [card]}

    @app.get("/{fault}/v1/audio/voices")
    async def voices(fault: str):
        if fault == "evil":
            return {
                "voices": ["vivian", EVIL + "builtin"],
                "uploaded_voices": [{"name": EVIL + "uploaded", "ref_text": EVIL}],
            }
        return {"voices": ["vivian", "ryan"], "uploaded_voices": []}

    @app.post("/{fault}/v1/audio/speech")
    async def speech(fault: str, request: Request):
        await request.json()
        if fault == "evil":
            return JSONResponse(
                {"error": {"message": "Speech generation failed: " + EVIL, "code": 400}},
                status_code=400,
            )
        if fault == "wavignored":  # raw PCM although WAV was requested, labelled WAV
            return Response(tone(), media_type="audio/wav")
        return Response(tone(), media_type="audio/pcm")  # pcmonly: raw PCM whatever was asked

    return app


@pytest.fixture(scope="module")
def upstream():
    with live_server(odd_upstream()) as live:
        yield live.url.rstrip("/")


async def take_of(spec: str):
    b = load_backend(spec)
    try:
        return [c async for c in b.stream(SpeechRequest(text="Hello there."))]
    finally:
        await b.aclose()


@pytest.mark.parametrize(("fault", "mode"), [("wavignored", "audio"), ("pcmonly", "audio")])
def test_wav_requested_raw_pcm_received_says_so(upstream, fault, mode):
    with pytest.raises(BackendError) as e:
        asyncio.run(take_of(f"vllm-omni+http://{upstream[7:]}/{fault}?mode={mode}&format=wav"))
    msg = str(e.value)
    assert "the server sent raw PCM although WAV was requested (it ignored response_format)" in msg
    assert "RIFF" not in msg


def test_not_wav_message_names_other_formats():
    from backends.vllm_omni.wire import not_wav_message

    assert "sent MP3 although WAV" in not_wav_message(b"ID3\x04\x00")
    assert "sent FLAC although WAV" in not_wav_message(b"fLaC\x00\x00")
    assert "sent raw PCM although WAV" in not_wav_message(b"\x01\x02\x03\x04")


def test_raw_pcm_rate_from_the_model_table_is_marked_assumed(upstream):
    chunks = asyncio.run(take_of(f"vllm-omni+http://{upstream[7:]}/pcmonly?mode=audio&format=pcm"))
    assert chunks and chunks[0].sample_rate == 24000 and chunks[0].channels == 1
    note = chunks[0].assumed_format
    assert "24000 Hz assumed from the model-name table" in note and MODEL in note
    assert "1 channel(s) from the model-name table" in note
    assert sum(c.frames for c in chunks) == int(24000 * 0.6)


def test_pinned_rate_is_marked_as_taken_from_the_setting(upstream):
    chunks = asyncio.run(
        take_of(f"vllm-omni+http://{upstream[7:]}/pcmonly?mode=audio&format=pcm&sample_rate=16000")
    )
    assert chunks[0].sample_rate == 16000
    assert "16000 Hz assumed from the backend's sample_rate=16000 setting" in (
        chunks[0].assumed_format
    )


async def _start_message(live, backend: str) -> dict:
    """Speak once over the page protocol; the ``start`` message (after the take is stored)."""
    url = f"ws://127.0.0.1:{live.port}/ll/ws"
    start = None
    async with websockets.connect(url) as ws:
        await ws.send(
            json.dumps({"type": "speak", "token": 5, "backend": backend, "text": "Hello there."})
        )
        while True:
            m = await asyncio.wait_for(ws.recv(), 60)
            if isinstance(m, bytes):
                continue
            d = json.loads(m)
            if d.get("type") == "start":
                start = d
            if d.get("type") in {"done", "error"}:  # the take is saved before `done` is sent
                assert d["type"] == "done", d
                return start


def test_start_message_carries_the_assumption_and_the_learnt_priors(upstream):
    from app.server import create_app

    app = create_app(
        {
            "piper": "piper?deterministic=1",
            "odd": f"vllm-omni+http://{upstream[7:]}/pcmonly?mode=audio&format=pcm",
        },
        tmp_db(),
    )
    with live_server(app) as live:
        odd = asyncio.run(_start_message(live, "odd"))
        assert odd["type"] == "start" and odd["sample_rate"] == 24000
        assert "assumed from the model-name table" in odd["assumed"]
        first = asyncio.run(_start_message(live, "piper"))
        assert first["assumed"] is None  # Piper states its format
        assert first["learnt"] == {"sec_per_char": None, "rate": None, "chunk_s": None, "takes": 0}
        # once a take of that backend is stored, the next start carries what it taught
        again = asyncio.run(_start_message(live, "piper"))
        assert again["learnt"]["takes"] >= 1
        assert 0.02 < again["learnt"]["sec_per_char"] < 0.2
