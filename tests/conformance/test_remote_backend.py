"""listenlab's remote backend against vLLM-Omni's own serving code (scripted engine, real wire).

Every seed model in every mode: the audio listenlab assembles must be the exact samples the
serving code encoded from the engine's output (``/_conformance/last``), at the rate and channel
count listenlab believes the model has. Then each of vLLM-Omni's own error answers must become a
clear listenlab error, quickly, and a cancelled stream must reach the engine as an abort.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time

import httpx
import numpy as np
import pytest

from backends.base import SpeechRequest
from backends.errors import BackendError, InvalidRequest
from backends.registry import load_backend
from backends.vllm_omni.models import UNITS, table_format
from tests.conformance.conftest import OmniServers
from tests.conformance.engine import SEEDS
from tests.vllm_omni_standin.seed_models import RATES

pytestmark = pytest.mark.conformance

TEXT = "The quick brown fox jumps over the lazy dog. Then it runs home again."
MODELS = tuple(m for m in SEEDS if ":" not in m)
"""Every model the scripted engine serves."""
SERVED = {m: SEEDS[m].served for m in MODELS}
NEEDS_REF = {m for m in MODELS if UNITS[m].rules.requires_ref_audio}


@pytest.fixture(scope="module")
def ref_wav(piper_det) -> bytes:
    """A 1-30 s reference clip (the Piper voice) for the models that only clone."""
    import soundfile as sf

    audio = asyncio.run(piper_det.synthesize(SpeechRequest("This is my reference voice clip.")))
    buf = io.BytesIO()
    sf.write(buf, audio.samples, audio.sample_rate, format="WAV")
    return buf.getvalue()


def request_for(model: str, ref_wav: bytes, text: str = TEXT) -> SpeechRequest:
    if model in NEEDS_REF:
        return SpeechRequest(text, ref_audio=ref_wav, ref_text="This is my reference voice clip.")
    return SpeechRequest(text, voice="vivian" if model == "qwen3_tts" else None)


async def collect(spec: str, req: SpeechRequest):
    be = load_backend(spec)
    try:
        chunks = [c async for c in be.stream(req)]
    finally:
        await be.aclose()
    return chunks


def expected(omni: OmniServers, target: str) -> tuple[np.ndarray, int, int, dict]:
    last = omni.last(target)
    pcm = np.frombuffer(base64.b64decode(last["pcm_b64"]), dtype="<i2")
    return pcm, last["sample_rate"], last["channels"], last


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
@pytest.mark.parametrize("model", MODELS)
async def test_every_seed_model_in_every_mode_is_sample_exact(omni, ref_wav, model, mode):
    spec = f"vllm-omni+{omni.url(model)}?model={SERVED[model]}&mode={mode}"
    chunks = await collect(spec, request_for(model, ref_wav))
    pcm, rate, channels, last = expected(omni, model)
    assert last["text"] == TEXT  # the adapter's prompt carried the text to the engine
    got = np.concatenate([c.pcm for c in chunks])
    assert {(c.sample_rate, c.channels) for c in chunks} == {(rate, channels)}
    # rate and channels are vLLM-Omni's own (engine.reference_format reads its code and
    # configs); listenlab's model table and its embedded stand-in must agree with them
    assert table_format(SERVED[model]) == (rate, channels)
    assert RATES.get(model, UNITS[model].sample_rate) == rate
    if model == "moss_tts_nano":  # a stereo codec, mixed down by the model's own _to_mono_1d
        assert (last["codec_channels"], channels) == (2, 1)
    assert len(got) == len(pcm) and np.array_equal(got, pcm)
    notes = {getattr(c, "assumed_format", None) for c in chunks}
    if mode == "ws":
        # vLLM-Omni 0.30.0's audio.start says a nominal 24000 without channels whatever the
        # model: listenlab takes the model's rate from its table instead, and says so
        assert len(notes) == 1 and "nominal" in notes.pop()
    else:  # sse and audio send WAV here: the header states the format
        assert notes == {None}
    if not UNITS[model].schedule.whole_file:
        assert len(chunks) >= 2  # it streamed, in more than one piece


@pytest.mark.parametrize("model", ["qwen3_tts", "moss_tts_nano"])
async def test_pcm_format_over_http_uses_the_rate_table(omni, ref_wav, model):
    """Raw PCM states no rate; listenlab takes it from its table and says so."""
    spec = f"vllm-omni+{omni.url(model)}?model={SERVED[model]}&mode=audio&format=pcm"
    chunks = await collect(spec, request_for(model, ref_wav))
    pcm, rate, _, _ = expected(omni, model)
    assert np.array_equal(np.concatenate([c.pcm for c in chunks]), pcm)
    assert chunks[0].sample_rate == rate
    assert "model-name table" in chunks[0].assumed_format


async def test_whole_file_and_models_and_voices(omni):
    be = load_backend(f"vllm-omni+{omni.url('qwen3_tts')}?model={SERVED['qwen3_tts']}")
    try:
        assert await be.models() == [SERVED["qwen3_tts"]]
        names = {v.name for v in await be.voices()}
        assert names == set(UNITS["qwen3_tts"].presets)  # "default" is a placeholder, dropped
        assert (await be.health()).ok
        audio = await be.synthesize(SpeechRequest(TEXT, voice="ryan"))
    finally:
        await be.aclose()
    pcm, rate, _, _ = expected(omni, "qwen3_tts")
    assert audio.sample_rate == rate and np.array_equal(audio.samples.reshape(-1), pcm)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_unknown_voice_is_a_clear_error(omni, mode):
    spec = f"vllm-omni+{omni.url('qwen3_tts')}?model={SERVED['qwen3_tts']}&mode={mode}"
    t0 = time.monotonic()
    with pytest.raises(BackendError) as e:
        await collect(spec, SpeechRequest("Hello.", voice="nobody"))
    assert "Invalid voice 'nobody'" in str(e.value)
    # the server's list of voices reaches the user
    assert ", ".join(UNITS["qwen3_tts"].presets) in str(e.value)
    if mode != "ws":
        assert e.value.status == 400
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_a_refused_field_is_never_sent(omni, mode):
    """max_new_tokens out of vLLM-Omni's 1..4096 (the adapter's range check): the remote
    backend knows the rule from the model table, names the field and sends nothing."""
    spec = f"vllm-omni+{omni.url('qwen3_tts')}?model={SERVED['qwen3_tts']}&mode={mode}"
    before = len(omni.engine("qwen3_tts")["submitted"])
    req = SpeechRequest("Hello.", voice="vivian", extra={"max_new_tokens": 5000})
    with pytest.raises(InvalidRequest) as e:
        await collect(spec, req)
    assert "max_new_tokens=5000: max_new_tokens cannot exceed 4096" in str(e.value)
    # and the server would have refused it with the same words
    body = {"input": "Hello.", "voice": "vivian", "max_new_tokens": 5000}
    r = httpx.post(omni.url("qwen3_tts") + "/v1/audio/speech", json=body, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["message"] == (
        "max_new_tokens cannot exceed 4096"
    )
    assert len(omni.engine("qwen3_tts")["submitted"]) == before


async def test_fish_with_its_own_rate_pinned_works(omni):
    """``sample_rate=44100`` on Fish Speech (which accepts no sample_rate): the pin is the
    model's own rate, so it is not sent, and the stream is checked against it."""
    spec = f"vllm-omni+{omni.url('fish_speech')}?model={SERVED['fish_speech']}&sample_rate=44100"
    chunks = await collect(spec, SpeechRequest(TEXT))
    assert {c.sample_rate for c in chunks} == {44100}
    with pytest.raises(InvalidRequest) as e:
        await collect(spec.replace("44100", "16000"), SpeechRequest(TEXT))
    assert "sample_rate=16000 cannot be asked of fishaudio/s2-pro" in str(e.value)
    assert "sample_rate is not supported by the current TTS model" in str(e.value)


async def test_wrong_model_name_is_404(omni):
    spec = f"vllm-omni+{omni.url('qwen3_tts')}?model=someone/else&mode=sse"
    with pytest.raises(BackendError) as e:
        await collect(spec, SpeechRequest("Hello.", voice="vivian"))
    assert e.value.status == 404
    assert "The model `someone/else` does not exist" in str(e.value)


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_over_long_text_is_a_clear_error(omni, mode):
    """VoxCPM2's prompt is one token per byte here; over max_model_len (4096) vLLM refuses it
    inside the engine, after the 200 on streams: SSE and WS carry the reason, a raw stream can
    only be cut (listenlab says so instead of returning a short success)."""
    spec = f"vllm-omni+{omni.url('voxcpm2')}?model={SERVED['voxcpm2']}&mode={mode}"
    text = ("A long sentence that keeps going. " * 140)[:4700]
    t0 = time.monotonic()
    with pytest.raises(BackendError) as e:
        await collect(spec, SpeechRequest(text))
    msg = str(e.value)
    if mode == "audio":
        assert "cut" in msg and "0 bytes" in msg
    else:
        assert "longer than the maximum model length of 4096" in msg
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("mode", ["sse", "ws"])
async def test_cancelled_request_aborts_the_engine(omni, mode):
    """Closing listenlab's stream mid-way closes the connection; vLLM-Omni then stops that very
    request in the engine (its generator is closed, or ``abort`` is called with its id: the
    scripted engine records both) and keeps serving."""
    target = "qwen3_tts:paced"
    spec = f"vllm-omni+{omni.url(target)}?model={SERVED['qwen3_tts']}&mode={mode}"
    be = load_backend(spec)
    try:
        # ~40 s of audio paced at 2x: still generating when the close arrives, even on a
        # loaded machine (a finished request has nothing left to abort)
        it = be.stream(SpeechRequest(TEXT * 8, voice="vivian"))
        first = await it.__anext__()
        assert first.frames > 0
        rid = omni.engine(target)["submitted"][-1]["request_id"]
        await it.aclose()
    finally:
        await be.aclose()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        stats = omni.engine(target)
        stopped = rid in stats["closed"] or rid in stats["aborted"]
        if stopped and not stats["live"]:
            break
        await asyncio.sleep(0.2)
    assert rid in stats["closed"] or rid in stats["aborted"], (rid, stats)
    assert stats["live"] == []
    # and the server still answers
    chunks = await collect(spec, SpeechRequest("Still here.", voice="vivian"))
    assert sum(c.frames for c in chunks) > 0


async def test_usage_reaches_the_client_of_listenlab_api(omni):
    """listenlab api in front of vLLM-Omni passes on the usage the server reported for the
    request: its usage headers on a whole file and its speech.audio.done on SSE, both read from
    the remote backend's SSE stream (its default mode). A raw stream (``mode=audio``) and the
    WebSocket carry no usage from vLLM-Omni: over them the counts are zeros."""
    mode = "sse"
    from app.api import create_api_app
    from tests.support.remote_util import ServerThread

    served = SERVED["fish_speech"]
    be = load_backend(f"vllm-omni+{omni.url('fish_speech')}?model={served}&mode={mode}")
    srv = ServerThread(create_api_app(be, served_model=served, own_backend=True)).start()
    body = {"model": served, "input": "Hello, how are you?", "voice": "default"}
    try:
        ref = httpx.post(omni.url("fish_speech") + "/v1/audio/speech", json=body, timeout=120)
        ours = httpx.post(srv.url + "/v1/audio/speech", json=body, timeout=120)
        sse = body | {"stream": True, "response_format": "pcm"}
        ref_sse = httpx.post(omni.url("fish_speech") + "/v1/audio/speech", json=sse, timeout=120)
        our_sse = httpx.post(srv.url + "/v1/audio/speech", json=sse, timeout=120)
    finally:
        srv.stop()
    keys = [k for k in ref.headers if k.startswith("x-vllm-omni-")]
    assert keys and int(ref.headers["x-vllm-omni-input-tokens"]) > 0
    assert {k: ours.headers.get(k) for k in keys} == {k: ref.headers[k] for k in keys}

    def done(text: str) -> dict:
        line = text.split("event: speech.audio.done\ndata: ")[1].split("\n")[0]
        return json.loads(line)["usage"]

    assert done(our_sse.text) == done(ref_sse.text)
    assert done(ref_sse.text)["input_tokens"] == int(ref.headers["x-vllm-omni-input-tokens"])
