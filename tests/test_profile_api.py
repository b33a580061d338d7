"""``listenlab api`` over a model's profile answers as that model: its voices, its clone fields,
its refusals under any served name, what the stand-in did not do, and the drop-in details
issue #41 found missing (no character cap in front of a real server, ``max_model_len``, the
metrics families, a disconnect counted as ``closed``).

Real uvicorn on 127.0.0.1 (one thread per server), real httpx and websockets, the real Piper
voice under each profile.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re

import httpx
import numpy as np
import pytest
import soundfile as sf
from websockets.asyncio.client import connect

from app.api import create_api_app
from backends.base import SpeechRequest
from backends.errors import BackendError
from backends.registry import load_backend
from tests.support.remote_util import serve_app

pytestmark = pytest.mark.timeout(300)

TEXT = "Hello there, this is the stand-in."


def post(url: str, body: dict, **kw) -> httpx.Response:
    return httpx.post(url + "/v1/audio/speech", json=body, timeout=120, trust_env=False, **kw)


def error(r: httpx.Response) -> str:
    assert r.status_code == 400, (r.status_code, r.text)
    return r.json()["error"]["message"]


@pytest.fixture(scope="module")
def clip(piper_det) -> str:
    """A 2 s reference clip as a data URL (the Piper voice)."""
    audio = asyncio.run(piper_det.synthesize(SpeechRequest("This is my reference clip.")))
    buf = io.BytesIO()
    sf.write(buf, audio.samples, audio.sample_rate, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def qwen_as_tts1():
    """The Qwen3-TTS profile served under another name, as ``--served-model-name tts-1``."""
    backend = load_backend("piper?deterministic=1&profile=qwen3-tts&pace=0")
    with serve_app(create_api_app(backend, served_model="tts-1", own_backend=True)) as url:
        yield url


def test_a_served_name_keeps_its_models_rules(qwen_as_tts1):
    url = qwen_as_tts1
    assert error(post(url, {"model": "tts-1", "input": TEXT, "language": "Klingon"})).startswith(
        "Invalid language 'Klingon'. Supported: Auto, Chinese"
    )
    assert error(post(url, {"input": TEXT, "sample_rate": 16000})) == (
        "sample_rate=16000 is not supported by the current TTS model; supported rates: 8000, 24000"
    )
    assert error(
        post(url, {"input": TEXT, "task_type": "VoiceDesign", "instructions": "Calm."})
    ) == (
        "Qwen3-TTS CustomVoice checkpoint does not support task_type='VoiceDesign'. "
        "Use task_type='CustomVoice' or load the matching VoiceDesign checkpoint."
    )
    assert error(post(url, {"input": TEXT, "voice": "joe"})).startswith(
        "Invalid voice 'joe'. Supported: aiden, dylan, eric, ono_anna, ryan, serena, sohee"
    )


def test_qwen3s_vivian_speaks_and_says_who_did(qwen_as_tts1):
    r = post(qwen_as_tts1, {"model": "tts-1", "input": TEXT, "voice": "vivian"})
    assert r.status_code == 200, r.text
    audio, sr = sf.read(io.BytesIO(r.content), dtype="int16")
    assert sr == 24000 and audio.ndim == 1 and len(audio) > sr  # the model's rate, mono
    assert r.headers["x-listenlab-stand-in"] == (
        "cpu voice (piper?deterministic=1) for Qwen3-TTS; voice 'vivian' not applied"
    )
    voices = httpx.get(qwen_as_tts1 + "/v1/audio/voices", trust_env=False).json()["voices"]
    assert {"vivian", "ryan", "aiden", "uncle_fu"} <= set(voices) and "joe" not in voices


def test_the_model_card_says_the_limit_and_the_stand_in(qwen_as_tts1):
    card = httpx.get(qwen_as_tts1 + "/v1/models", trust_env=False).json()["data"][0]
    assert card["id"] == "tts-1" and card["max_model_len"] == 4096
    ll = card["listenlab"]
    assert ll["model"] == "qwen3_tts" and ll["rules"]["reference_type"] == "qwen3_tts"
    assert ll["stand_in"].startswith("cpu voice (piper?deterministic=1) for Qwen3-TTS")
    # a CustomVoice checkpoint: no cloning to offer (uploads are still kept, as vLLM-Omni does)
    assert (ll["sample_rate"], ll["channels"], ll["cloning"]) == (24000, 1, False)


def test_a_clone_only_model_takes_a_clip_and_says_it_did_not_clone(clip):
    backend = load_backend("piper?deterministic=1&profile=cosyvoice3&pace=0")
    with serve_app(create_api_app(backend, own_backend=True)) as url:
        assert error(post(url, {"input": TEXT})) == (
            "CosyVoice3 requires 'ref_audio' (reference audio for voice cloning)"
        )
        assert error(post(url, {"input": TEXT, "ref_audio": clip})) == (
            "CosyVoice3 requires 'ref_text' (transcript of the reference audio)"
        )
        short = "data:audio/wav;base64," + base64.b64encode(_wav(0.5)).decode()
        assert error(post(url, {"input": TEXT, "ref_audio": short, "ref_text": "Hi."})) == (
            "Reference audio too short (0.5s). At least 1s of clear speech is required."
        )
        r = post(url, {"input": TEXT, "ref_audio": clip, "ref_text": "My reference clip."})
        assert r.status_code == 200, r.text
        assert sf.info(io.BytesIO(r.content)).samplerate == 24000
        assert r.headers["x-listenlab-stand-in"].endswith("for CosyVoice3; clone not applied")


def _wav(seconds: float) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, 0.2 * np.sin(np.arange(int(16000 * seconds)) / 5.0), 16000, format="WAV")
    return buf.getvalue()


def test_fish_has_no_built_in_voice_not_even_pipers(clip):
    backend = load_backend("piper?deterministic=1&profile=fish-speech&pace=0")
    with serve_app(create_api_app(backend, own_backend=True)) as url:
        voices = httpx.get(url + "/v1/audio/voices", trust_env=False).json()
        assert voices["voices"] == ["default"] and voices["uploaded_voices"] == []
        assert error(post(url, {"input": TEXT, "voice": "joe"})).startswith(
            "Unknown voice 'joe'. Fish Speech has no built-in speakers."
        )
        r = post(url, {"input": TEXT, "ref_audio": clip, "ref_text": "My reference clip."})
        assert r.status_code == 200 and sf.info(io.BytesIO(r.content)).samplerate == 44100


def test_omnivoice_answers_a_stream_with_the_whole_file():
    """OmniVoice is served by vLLM-Omni's pure-diffusion path: a stream request gets a WAV
    file, any ``model`` name passes, and the WebSocket has no speech."""
    backend = load_backend("piper?deterministic=1&profile=omnivoice&pace=0")
    with serve_app(create_api_app(backend, own_backend=True)) as url:
        r = post(url, {"input": TEXT, "stream": True, "model": "someone/else"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("audio/wav")
        assert sf.info(io.BytesIO(r.content)).samplerate == 24000

        async def ws() -> list:
            async with connect("ws" + url[4:] + "/v1/audio/speech/stream", proxy=None) as w:
                first = json.loads(await w.recv())
                try:
                    await asyncio.wait_for(w.recv(), 5)
                except Exception as e:  # noqa: BLE001 - the socket closes
                    return [first, type(e).__name__]
            return [first]

        msgs = asyncio.run(ws())
        assert msgs[0] == {"type": "error", "message": "Streaming speech is not available"}
        assert msgs[1] == "ConnectionClosedOK"


def test_no_character_cap_in_front_of_a_server(qwen_as_tts1):
    """The remote backend forwards a 20,209-character input; the server answers it (here with
    the model's own refusal of the voice, not a length error)."""
    remote = load_backend(f"vllm-omni+{qwen_as_tts1}?model=tts-1&mode=audio&format=pcm")

    async def go():
        try:
            return [c async for c in remote.stream(SpeechRequest("x" * 20209, voice="nobody"))]
        finally:
            await remote.aclose()

    with pytest.raises(BackendError) as e:
        asyncio.run(go())
    assert "Invalid voice 'nobody'" in str(e.value) and "20209" not in str(e.value)


def metric(text: str, name: str, **labels: str) -> float:
    """One sample of the scrape (labels in any order), or 0 when absent."""
    for line in text.splitlines():
        m = re.match(r"^([^{ ]+)(?:\{([^}]*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


def test_metrics_families_and_a_disconnect_counted_closed():
    backend = load_backend("piper?deterministic=1&profile=qwen3-tts&pace=1")
    with serve_app(create_api_app(backend, own_backend=True)) as url:
        model = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
        assert post(url, {"input": "Hi there.", "voice": "ryan"}).status_code == 200
        body = {"input": TEXT * 3, "voice": "ryan", "stream": True, "response_format": "pcm"}
        with httpx.stream("POST", url + "/v1/audio/speech", json=body, trust_env=False) as r:
            assert r.status_code == 200
            next(r.iter_bytes())  # the first audio, then the client goes away
        for _ in range(100):  # the server sees the disconnect within its poll interval
            text = httpx.get(url + "/metrics", trust_env=False).text
            if metric(text, "vllm_omni:speech_stream_aborted_total", reason="closed"):
                break
            asyncio.run(asyncio.sleep(0.1))
        assert metric(text, "vllm_omni:speech_stream_aborted_total", reason="closed") == 1
        assert metric(text, "vllm_omni:speech_stream_aborted_total", reason="cancelled") == 0
        assert metric(text, "vllm_omni:requests_failed_total", reason="client_disconnect") == 1
        assert metric(text, "vllm_omni:e2e_request_latency_s_count", model_name=model) == 1
        assert metric(text, "vllm_omni:audio_frames_total", stage="0") > 12000  # 0.5 s at 24 kHz
        assert metric(text, "vllm_omni:num_requests_running", model_name=model) == 0
        assert metric(text, "process_resident_memory_bytes") > 10e6
        assert metric(text, "http_requests_total", handler="/v1/audio/speech", status="2xx") == 2
        assert metric(text, "python_gc_collections_total", generation="0") > 0


def test_the_playground_lists_each_models_rate_and_schedule(tmp_path):
    from app.server import create_app
    from tests.support.app_util import live_server

    app = create_app(
        {
            "piper": "piper?deterministic=1",
            "qwen3": "piper?deterministic=1&profile=qwen3-tts",
            "cosy": "piper?deterministic=1&profile=cosyvoice3",
            "index": "piper?deterministic=1&profile=indextts2",
            "music": "piper?deterministic=1&profile=minimax-music3",
        },
        tmp_path / "listenlab.db",
    )
    with live_server(app) as live:
        d = httpx.get(live.url + "ll/api/config", trust_env=False).json()
    systems = {b["label"]: b for b in d["backends"]}
    assert systems["piper"]["model"] is None
    qwen = systems["qwen3"]
    assert qwen["model"]["title"] == "Qwen3-TTS"
    assert qwen["model"]["schedule"] == "24 kHz mono, 80 ms then 2 s chunks"
    assert qwen["model"]["stand_in"].startswith("cpu voice (piper?deterministic=1) for Qwen3-TTS")
    assert {"vivian", "ryan"} <= {v["name"] for v in qwen["voices"]} and not qwen["can_clone"]
    cosy = systems["cosy"]
    assert cosy["model"]["schedule"] == "24 kHz mono, 600 ms, 1.2 s then 2.4 s chunks"
    assert cosy["capabilities"]["clone_required"] and cosy["can_clone"]
    assert systems["index"]["model"]["schedule"] == "22.05 kHz mono, the whole file at the end"
    assert systems["music"]["model"]["schedule"] == "32 kHz stereo, 5 s then 4 s chunks"
