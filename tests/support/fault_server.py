"""A fault-injection stand-in for a vLLM-Omni speech server (real HTTP/WS on 127.0.0.1).

vLLM-Omni needs a GPU, so this server follows its wire protocol (reference §3-§5) and
misbehaves on request. Well-formed bytes (WAV header, SSE events, error bodies) come from
``backends.vllm_omni.wire``, the module ``listenlab api`` writes them with; the faults are this
file's own. The fault is the first path segment, so a remote backend selects it
by its base URL: ``vllm-omni+http://127.0.0.1:PORT/<fault>?mode=…``. Faults take options
after commas, e.g. ``/ok,rate=48000,ch=2`` or ``/cut,after=2``.

HTTP ``/v1/audio/speech`` faults (each honours the requested SSE/raw mode and wav/pcm):

=================  ==============================================================
``ok``             well-behaved: ``chunks`` chunks of ``ms`` ms at ``rate``/``ch``
``cut``            cut the connection after ``after`` chunks (no terminal event)
``http500``        500 with an OpenAI-shaped error before any audio
``http400``        400 ``"Speech generation failed: …"`` (a generic server failure)
``detail``         422 FastAPI ``{"detail": [...]}`` validation error
``error_event``    SSE: audio, then ``speech.audio.error`` with ``partial_audio``
``malformed``      SSE: ``kind`` = json | base64 | noaudio | truncated
``no_terminal``    SSE: audio, then a clean EOF without done/error
``two_terminal``   SSE: a delta after ``speech.audio.done``
``drip``           1 byte per second
``hang``           accept, then never send the response headers
``hang_body``      send 200 headers, then nothing
``bad_rate``       WAV header with sample rate ``hdr`` (default 0)
``split``          odd-sized writes: samples and stereo frames split across reads
``old_server``     ignores ``stream_format``: raw pcm for ``stream:true`` (pre-#4679)
``sse_only``       always SSE, whatever was asked (post-#4679 with stream_format ignored)
``json200``        200 with a JSON body instead of audio
``whole``          a whole FLAC file whatever was asked (pure-diffusion servers)
``slow``           ``chunks`` chunks ``gap`` s apart; logs when the client goes away
=================  ==============================================================

WebSocket ``/v1/audio/speech/stream``: ``ok``, ``ws_error`` (audio, then ``error`` with
``partial_audio``), ``ws_cut`` (close before ``session.done``), ``ws_hang``, ``split``,
``ws_norate`` (``audio.start`` without a rate, as older servers), ``drip``, ``slow``.

Voices (``/v1/audio/voices``), ``/v1/models`` and ``/health`` behave like vLLM-Omni; the
``oldvoices`` fault answers a missing delete with the old ``{"success":false,...}`` shape and
``unhealthy`` answers ``/health`` with 503.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import (
    APIRouter,
    Depends,
    FastAPI,
    File,
    Form,
    Request,
    UploadFile,
    WebSocket,
    WebSocketDisconnect,
)
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import HTTPConnection

from backends.audio import encode_audio
from backends.vllm_omni.wire import (
    audio_delta,
    audio_done,
    error_body,
    sse_event,
    wav_stream_header,
    ws_audio_done,
    ws_audio_start,
    ws_error,
    ws_session_done,
)

MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
CONTENT = {"wav": "audio/wav", "pcm": "audio/pcm"}


def signal(frames: int, rate: int, channels: int, start: int = 0) -> np.ndarray:
    """Deterministic test audio, interleaved int16: a distinct tone per channel."""
    t = (np.arange(start, start + frames) / rate)[:, None]
    freqs = np.array([440.0, 660.0, 550.0, 770.0][:channels])[None, :]
    x = (np.sin(2 * np.pi * freqs * t) * 12000).astype(np.int16)
    return x.reshape(-1)


def delta(data: bytes, fmt: str) -> bytes:
    return audio_delta(data, fmt)


DONE = audio_done({"input_tokens": 3, "output_tokens": 5})


def openai_error(message: str, code: int, type_: str | None = None) -> JSONResponse:
    type_ = type_ or ("BadRequestError" if code < 500 else "server_error")
    return JSONResponse(error_body(message, type_, code), status_code=code)


@dataclass
class Fault:
    name: str
    opts: dict[str, str]

    @classmethod
    def parse(cls, seg: str) -> Fault:
        name, *rest = seg.split(",")
        return cls(name, dict(kv.split("=", 1) for kv in rest if "=" in kv))

    def int(self, key: str, default: int) -> int:
        return int(self.opts.get(key, default))

    def float(self, key: str, default: float) -> float:
        return float(self.opts.get(key, default))


@dataclass
class FaultState:
    """What the server saw, for tests to assert on (per app instance)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    voices: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def wait_for(self, event: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if event in self.events:
                return True
            await asyncio.sleep(0.02)
        return False


class Cut(Exception):
    """Raised inside a streaming body: uvicorn then drops the connection mid-body."""


def faults(conn: HTTPConnection) -> FaultState:
    """FastAPI dependency: what this app instance saw."""
    return conn.app.state.faults


router = APIRouter()


# --------------------------------------------------------------------------- HTTP speech


@dataclass
class SpeechCall:
    """One ``POST /v1/audio/speech`` and the audio the fault server has ready for it."""

    f: Fault
    body: dict[str, Any]
    request: Request
    st: FaultState
    fmt: str
    sse_mode: bool
    rate: int
    ch: int
    audio: list[bytes]
    header: bytes

    @classmethod
    def make(cls, f: Fault, body: dict[str, Any], request: Request, st: FaultState) -> SpeechCall:
        fmt = body.get("response_format", "wav")
        sse_mode = (body.get("stream") or body.get("stream_format") == "sse") and body.get(
            "stream_format"
        ) != "audio"
        if f.name == "old_server":
            sse_mode = False
        if f.name == "sse_only":
            sse_mode = True
        rate = f.int("rate", body.get("sample_rate") or 24000)
        ch = f.int("ch", 1)
        chunks, ms = f.int("chunks", 3), f.int("ms", 200)
        frames = rate * ms // 1000
        audio = [
            signal(frames, rate, ch, i * frames).astype("<i2").tobytes() for i in range(chunks)
        ]
        header = wav_stream_header(f.int("hdr", 0) if f.name == "bad_rate" else rate, ch)
        return cls(f, body, request, st, fmt, bool(sse_mode), rate, ch, audio, header)


@router.post("/{fault}/v1/audio/speech")
async def speech(fault: str, request: Request, st: FaultState = Depends(faults)):
    f = Fault.parse(fault)
    body = await request.json()
    st.requests.append(body)
    call = SpeechCall.make(f, body, request, st)
    answer = await whole_answer(call)
    if answer is not None:
        return answer
    if f.name == "hang_body":
        media = "text/event-stream" if call.sse_mode else CONTENT[call.fmt]
        return StreamingResponse(hang_body(call), media_type=media)
    if f.name == "slow":
        media = "text/event-stream" if call.sse_mode else "audio/pcm"
        return StreamingResponse(slow_gen(call), media_type=media)
    if call.sse_mode:
        return StreamingResponse(sse_gen(call), media_type="text/event-stream")
    return StreamingResponse(raw_gen(call), media_type=CONTENT[call.fmt])


async def whole_answer(call: SpeechCall) -> Response | None:
    """The faults answered in one piece (errors, a whole file, JSON, a hang), else None."""
    f = call.f
    if f.name == "http500":
        return openai_error("engine exploded: CUDA error: an illegal memory access", 500)
    if f.name == "http400":
        return openai_error("Speech generation failed: CUDA out of memory", 400)
    if f.name == "detail":
        return JSONResponse(
            {
                "detail": [
                    {
                        "loc": ["body", "speed"],
                        "msg": "Input should be less than or equal to 4",
                        "type": "x",
                    }
                ]
            },
            status_code=422,
        )
    if f.name == "whole":  # pure-diffusion servers ignore streaming flags
        x = np.concatenate([np.frombuffer(a, "<i2") for a in call.audio]).reshape(-1, call.ch)
        return Response(encode_audio(x, call.rate, "flac"), media_type="audio/flac")
    if f.name == "json200":
        return JSONResponse({"hello": "not audio"})
    if f.name == "hang":
        while not await call.request.is_disconnected():
            await asyncio.sleep(0.1)
        call.st.events.append("client gone")
        return Response(status_code=499)
    return None


async def slow_gen(call: SpeechCall):
    f, st = call.f, call.st
    try:
        for i in range(f.int("chunks", 100)):
            await asyncio.sleep(f.float("gap", 0.2))
            st.events.append(f"slow chunk {i}")
            yield (delta(call.audio[0], call.fmt) if call.sse_mode else call.audio[0])
    except (asyncio.CancelledError, GeneratorExit, OSError):
        st.events.append("client gone")
        raise
    finally:
        st.events.append("slow end")


async def hang_body(call: SpeechCall):
    while not await call.request.is_disconnected():
        await asyncio.sleep(0.1)
    call.st.events.append("client gone")
    yield b""


async def split_writes(a: bytes):
    """Odd sizes: split int16 samples (and stereo frames) across writes."""
    pos, step = 0, 1
    while pos < len(a):
        yield a[pos : pos + step]
        pos += step
        step = step + 2 if step < 301 else 1
        await asyncio.sleep(0.001)


async def drip(a: bytes):
    for b in a:
        yield bytes([b])
        await asyncio.sleep(1.0)


async def raw_gen(call: SpeechCall):
    f = call.f
    for i, a in enumerate(call.audio):
        if f.name == "cut" and i == f.int("after", 1):
            raise Cut("cut on purpose")
        if i == 0 and call.fmt == "wav":
            a = call.header + a
        if f.name == "drip":
            async for b in drip(a):
                yield b
        elif f.name == "split":
            async for piece in split_writes(a):
                yield piece
        else:
            yield a
        await asyncio.sleep(0.01)


MALFORMED = {
    "json": b"event: speech.audio.delta\ndata: {not json\n\n",
    "base64": b'event: speech.audio.delta\ndata: {"type":"speech.audio.delta","audio":"***"}\n\n',
    "noaudio": b'event: speech.audio.delta\ndata: {"type":"speech.audio.delta"}\n\n',
    "truncated": b'event: speech.audio.done\ndata: {"type":"speech.au',
}

ERROR_EVENT = sse_event(
    "speech.audio.error",
    {
        "type": "speech.audio.error",
        "error": {
            "message": "Qwen3-TTS Base did not emit codec EOS before its token budget",
            "type": "server_error",
            "param": None,
            "code": 500,
        },
        "partial_audio": True,
        "action": "discard",
    },
)


async def sse_gen(call: SpeechCall):
    f, fmt, audio = call.f, call.fmt, call.audio
    if f.name == "malformed":
        yield (
            delta(audio[0], fmt) if fmt == "pcm" else delta(call.header, fmt) + delta(audio[0], fmt)
        )
        bad = MALFORMED.get(f.opts.get("kind", "json"))
        if bad is not None:
            yield bad
        return
    if fmt == "wav":
        yield delta(call.header, fmt)  # header-only first delta, as vLLM-Omni does
    for i, a in enumerate(audio):
        if f.name == "cut" and i == f.int("after", 1):
            raise Cut("cut on purpose")
        if f.name == "error_event" and i == f.int("after", 1):
            yield ERROR_EVENT
            return
        ev = delta(a, fmt)
        if f.name == "drip":
            async for b in drip(ev):
                yield b
        elif f.name == "split":
            half = len(ev) // 2 + 1
            yield ev[:half]
            await asyncio.sleep(0.01)
            yield ev[half:]
        else:
            yield ev
        await asyncio.sleep(0.01)
    if f.name != "no_terminal":
        yield DONE
    if f.name == "two_terminal":
        yield delta(audio[0], fmt)


# --------------------------------------------------------------------------- WebSocket


@router.websocket("/{fault}/v1/audio/speech/stream")
async def stream(ws: WebSocket, fault: str, st: FaultState = Depends(faults)):
    f = Fault.parse(fault)
    await ws.accept()
    try:
        text = await read_utterance(ws, st)
        if text is None:
            return
        if f.name == "ws_hang":
            await ws.receive_text()  # returns (raises) when the client closes
        if await send_audio(ws, f, st, text):
            with contextlib.suppress(Exception):
                m = json.loads(await asyncio.wait_for(ws.receive_text(), 5))
                st.events.append(f"ws got {m.get('type')}")
    except (WebSocketDisconnect, RuntimeError):
        st.events.append("client gone")
    finally:
        st.events.append("ws end")


async def read_utterance(ws: WebSocket, st: FaultState) -> str | None:
    """The session config (recorded), then the text up to ``input.done`` (None: closed)."""
    config = json.loads(await ws.receive_text())
    st.requests.append(config)
    text = ""
    while True:
        m = json.loads(await ws.receive_text())
        if m["type"] == "input.text":
            text += m["text"]
        elif m["type"] == "input.done":
            return text
        elif m["type"] == "session.close":
            return None


async def send_audio(ws: WebSocket, f: Fault, st: FaultState, text: str) -> bool:
    """``audio.start``, the audio (with the fault), ``audio.done`` and ``session.done``;
    False when the fault ended the session early."""
    rate, ch = f.int("rate", 24000), f.int("ch", 1)
    frames = rate * f.int("ms", 200) // 1000
    start = ws_audio_start(0, 0, text, "pcm")
    if f.name != "ws_norate":
        start.update(sample_rate=rate, channels=ch)
    await ws.send_json(start)
    total = 0
    for i in range(f.int("chunks", 3) if f.name != "slow" else 1000):
        a = signal(frames, rate, ch, i * frames).astype("<i2").tobytes()
        if f.name == "ws_error" and i == f.int("after", 1):
            await ws.send_json(
                ws_error(
                    "Generation failed for utterance 0, sentence 0: engine died",
                    partial_audio=True,
                    action="discard",
                )
            )
            await ws.send_json(ws_audio_done(0, 0, total, True))
            await ws.send_json(ws_session_done(0, 1))
            return False
        if f.name == "ws_cut" and i == f.int("after", 1):
            await ws.close()
            return False
        await send_chunk(ws, f, st, a, i)
        total += len(a)
    await ws.send_json(ws_audio_done(0, 0, total, False))
    await ws.send_json(ws_session_done(0, 1))
    return True


async def send_chunk(ws: WebSocket, f: Fault, st: FaultState, a: bytes, i: int) -> None:
    if f.name == "split":
        pos, step = 0, 1
        while pos < len(a):
            await ws.send_bytes(a[pos : pos + step])
            pos += step
            step = step + 2 if step < 301 else 1
    elif f.name == "drip":
        for b in a:
            await ws.send_bytes(bytes([b]))
            await asyncio.sleep(1.0)
    elif f.name == "slow":
        await asyncio.sleep(f.float("gap", 0.2))
        st.events.append(f"slow chunk {i}")
        await ws.send_bytes(a)
    else:
        await ws.send_bytes(a)


# --------------------------------------------------------------------------- voices, models, health


@router.get("/{fault}/v1/audio/voices")
async def voices(fault: str, st: FaultState = Depends(faults)):
    names = sorted({"default", "vivian", "ryan"} | set(st.voices))
    return {"voices": names, "uploaded_voices": list(st.voices.values())}


@router.post("/{fault}/v1/audio/voices")
async def upload(
    fault: str,
    name: str = Form(...),
    consent: str = Form(...),
    audio_sample: UploadFile = File(...),
    ref_text: str | None = Form(None),
    st: FaultState = Depends(faults),
):
    data = await audio_sample.read()
    if not data.startswith(b"RIFF"):
        return openai_error("Could not decode the audio sample", 400)
    meta = {
        "name": name.strip().lower(),
        "consent": consent,
        "created_at": int(time.time()),
        "file_size": len(data),
        "mime_type": audio_sample.content_type,
    }
    if ref_text:
        meta["ref_text"] = ref_text
    st.voices[meta["name"]] = meta
    return {"success": True, "voice": meta}


@router.delete("/{fault}/v1/audio/voices/{name}")
async def delete(fault: str, name: str, st: FaultState = Depends(faults)):
    if name.lower() not in st.voices:
        if fault == "oldvoices":
            return JSONResponse(
                {"success": False, "error": f"Voice '{name}' not found"}, status_code=404
            )
        return openai_error(f"Voice '{name}' not found", 404, "NotFoundError")
    del st.voices[name.lower()]
    return {"success": True, "message": f"Voice '{name}' deleted successfully"}


@router.get("/{fault}/v1/models")
async def models(fault: str):
    return {
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "owned_by": "vllm-omni"}],
    }


@router.get("/{fault}/health")
async def health(fault: str):
    if fault == "unhealthy":
        return JSONResponse(
            {"status": "unhealthy", "reason": "No engine initialized"}, status_code=503
        )
    return {"status": "healthy"}


async def _cut(_req, _e):  # pragma: no cover - only reached before the body starts
    return Response(status_code=500)


def create_fault_app() -> FastAPI:
    app = FastAPI(title="listenlab fault server (vLLM-Omni stand-in)")
    app.state.faults = FaultState()
    app.include_router(router)
    app.add_exception_handler(Cut, _cut)
    return app


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description="vLLM-Omni fault-injection stand-in")
    p.add_argument("--port", type=int, default=8091)
    args = p.parse_args()
    uvicorn.run(create_fault_app(), host="127.0.0.1", port=args.port, ws="websockets-sansio")


if __name__ == "__main__":
    main()
