"""Round trips: ``listenlab api`` over Piper, read back by the remote backend in every mode.

With ``deterministic=1`` the remote take must equal the direct Piper take sample for sample,
through SSE, raw audio and the WebSocket; once through the ``listenlab say`` CLI against a
``listenlab api`` child process, and once through a chain api -> remote -> api -> Piper.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.api import create_api_app
from backends.base import SpeechRequest
from backends.registry import load_backend
from evaluation.takes import TakeFailed, record
from tests.support.remote_util import ROOT, ServerThread, api_subprocess, serve_app

pytestmark = pytest.mark.timeout(120)

TEXT = "Round trip through the speech server. Every sample should survive, in every mode."
MODES = [
    ("sse", "wav"),
    ("sse", "pcm"),
    ("audio", "wav"),
    ("audio", "pcm"),
    ("ws", "pcm"),
    ("ws", "wav"),
]


@pytest.fixture(scope="module")
def direct(piper_det):
    return asyncio.run(record(piper_det, SpeechRequest(TEXT)))


@pytest.fixture(scope="module")
def api(piper_det):
    srv = ServerThread(create_api_app(piper_det)).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize(("mode", "fmt"), MODES)
async def test_remote_take_equals_direct_take(api, direct, mode, fmt):
    be = load_backend(f"vllm-omni+http://127.0.0.1:{api.port}?mode={mode}&format={fmt}&model=piper")
    try:
        t = await record(be, SpeechRequest(TEXT))
    finally:
        await be.aclose()
    assert t.ok and (t.sample_rate, t.channels) == (22050, 1)
    np.testing.assert_array_equal(t.audio, direct.audio)
    if (mode, fmt) in {("sse", "wav"), ("sse", "pcm"), ("ws", "pcm")}:
        # every server chunk is its own event / frame, so the chunking survives too
        assert [c.frames for c in t.chunks] == [c.frames for c in direct.chunks]


async def test_remote_backend_reuses_one_client(api, direct):
    be = load_backend(f"vllm-omni+http://127.0.0.1:{api.port}?mode=audio&format=pcm")
    try:
        for _ in range(3):
            t = await record(be, SpeechRequest(TEXT))
            np.testing.assert_array_equal(t.audio, direct.audio)
        client = be.server.http()
        assert client is be.server.http()
        assert be.capabilities.sample_rate == 22050  # learnt from /v1/models (pcm has no header)
    finally:
        await be.aclose()
    assert client.is_closed


async def test_remote_errors_from_listenlab_api(api):
    be = load_backend(f"vllm-omni+http://127.0.0.1:{api.port}?mode=sse&voice=nobody")
    with pytest.raises(TakeFailed) as ei:
        await record(be, SpeechRequest(TEXT))
    # vLLM-Omni's words (serving_speech.py _validate_voice): the voice and the ones there are
    assert ei.value.status == 400 and "Invalid voice 'nobody'. Supported: joe" in str(ei.value)
    await be.aclose()
    be = load_backend(f"vllm-omni+http://127.0.0.1:{api.port}?mode=ws&model=wrong")
    with pytest.raises(TakeFailed, match="The model `wrong` does not exist."):
        await record(be, SpeechRequest(TEXT))
    await be.aclose()


async def test_chain_api_over_remote_over_api(api, direct):
    """listenlab api serving a remote backend that points at another listenlab api."""
    inner = load_backend(f"vllm-omni+http://127.0.0.1:{api.port}?mode=ws")
    with serve_app(create_api_app(inner, own_backend=True)) as outer_url:
        outer = load_backend(f"vllm-omni+{outer_url}?mode=sse&format=wav")
        try:
            t = await record(outer, SpeechRequest(TEXT))
            voices = await outer.voices()
        finally:
            await outer.aclose()
    np.testing.assert_array_equal(t.audio, direct.audio)
    assert [v.name for v in voices] == ["joe"]


async def test_cancel_through_the_chain_frees_the_server(piper_det):
    app = create_api_app(piper_det)
    with serve_app(app) as url:
        be = load_backend(f"vllm-omni+{url}?mode=audio&format=pcm")
        long = " ".join(f"Sentence {i} goes on for a little while longer." for i in range(40))
        stream = be.stream(SpeechRequest(long))
        await stream.__anext__()
        assert app.state.api.requests  # the request is live on the server
        await stream.aclose()
        for _ in range(200):
            if not app.state.api.requests:
                break
            await asyncio.sleep(0.05)
        assert app.state.api.requests == {}
        await be.aclose()


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
def test_listenlab_say_cli_against_listenlab_api(tmp_path, direct, mode, request):
    url = request.getfixturevalue("api_proc")
    out = tmp_path / f"{mode}.wav"
    spec = f"vllm-omni+{url}?mode={mode}"
    r = subprocess.run(
        [sys.executable, "-m", "app.cli", "say", TEXT, "--backend", spec, "-o", str(out), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["sample_rate"] == 22050
    x, sr = sf.read(out, dtype="int16", always_2d=True)
    np.testing.assert_array_equal(x, direct.audio)


def test_listenlab_say_cli_reports_a_cut_stream(tmp_path):
    from tests.support.fault_server import create_fault_app

    with serve_app(create_fault_app()) as url:
        out = tmp_path / "cut.wav"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.cli",
                "say",
                "hello",
                "--backend",
                f"vllm-omni+{url}/cut,after=2?mode=audio",
                "-o",
                str(out),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 1
    assert "the connection was cut mid-stream" in r.stderr
    assert not out.exists() and (tmp_path / "cut.partial.wav").exists()


def test_listenlab_say_signs_with_the_key_from_the_environment(tmp_path):
    """``LISTENLAB_VLLM_API_KEY`` is read by app/config.py at start and reaches the server as
    Bearer (the backends never read the environment); the key is never printed."""
    seen: list[str] = []
    app = FastAPI()

    @app.post("/v1/audio/speech")
    async def speech(request: Request):
        seen.append(request.headers.get("authorization", ""))
        return JSONResponse({"error": {"message": "no such key", "code": 401}}, status_code=401)

    with serve_app(app) as url:
        r = subprocess.run(
            [sys.executable, "-m", "app.cli", "say", "hello", "--backend", f"vllm-omni+{url}"]
            + ["-o", str(tmp_path / "x.wav")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "LISTENLAB_VLLM_API_KEY": "sk-from-env"},
        )
    assert r.returncode == 1 and "no such key" in r.stderr
    assert seen == ["Bearer sk-from-env"]
    assert "sk-from-env" not in r.stdout + r.stderr


@pytest.fixture(scope="module")
def api_proc():
    with api_subprocess("piper?deterministic=1") as url:
        yield url


def test_whole_file_from_subprocess_api(api_proc, direct):
    import httpx

    r = httpx.post(api_proc + "/v1/audio/speech", json={"input": TEXT}, timeout=60, trust_env=False)
    x, sr = sf.read(io.BytesIO(r.content), dtype="int16", always_2d=True)
    np.testing.assert_array_equal(x, direct.audio)


async def test_the_client_never_sends_a_field_the_served_model_refuses(piper_det):
    """The served model's rules come from the server's model card (a ``listenlab api``
    serving a Qwen3-TTS CustomVoice name states them): a refused ``sample_rate`` or language
    is a clear error naming the field, and the server never sees the request."""
    from backends.errors import InvalidRequest

    served = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    app = create_api_app(piper_det, served_model=served)
    with serve_app(app) as url:
        metrics = app.state.api.metrics
        for params, req, words in (
            ("sample_rate=16000", SpeechRequest(TEXT), "sample_rate=16000"),
            ("", SpeechRequest(TEXT, language="Klingon"), "language='Klingon'"),
        ):
            be = load_backend(f"vllm-omni+{url}?model={served}&mode=sse&{params}")
            try:
                with pytest.raises(InvalidRequest, match=words):
                    await record(be, req)
            finally:
                await be.aclose()
        assert not any(route == "/v1/audio/speech" for route, _ in metrics.requests)
        # the rate it accepts goes through (resampled by the server to 8 kHz)
        be = load_backend(f"vllm-omni+{url}?model={served}&mode=sse&sample_rate=8000")
        try:
            take = await record(be, SpeechRequest(TEXT, voice="joe"))
        finally:
            await be.aclose()
        assert take.sample_rate == 8000
