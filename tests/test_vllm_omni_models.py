"""Every seed model behind the embedded vLLM-Omni backend, against the STAND-IN engine.

vLLM-Omni cannot run here (no GPU, no vLLM wheels, no weights), so ``tests/vllm_omni_standin``
stands in for it: its ``AsyncOmni`` checks each model's prompt the way that model's stage does
(``vllm_omni/_standin_models.py`` names the vLLM-Omni files) and streams that model's output
shape (key, rate, ``sr`` form, end chunk) with real audio from the bundled Piper voice. The
model directories are built by ``tests/vllm_omni_standin/seed_models.py``. The layouts asserted
here are written out from vLLM-Omni's examples and serving code, independently of the adapters.
``tests/test_vllm_omni_gpu.py`` runs the same models on a real engine where one exists.
"""

from __future__ import annotations

import asyncio
import io
import math

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
    RATES,
    SEED_MODELS,
    make_seed_model,
    model_reference,
    standin_fixture,
    standin_teardown,
)

TEXT = "Every model streams the same words. Nothing is replayed."
REF_TEXT = "This is the reference clip."
SEEDS = sorted(SEED_MODELS)
CLONE_ONLY = {"cosyvoice3", "moss_tts_nano"}
FISH_TAIL = "<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n<|voice|>"


@pytest.fixture
def standin(monkeypatch):
    yield standin_fixture(monkeypatch)
    standin_teardown()


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("models")
    return {name: make_seed_model(name, root) for name in SEED_MODELS}


@pytest.fixture(scope="module")
def expected() -> dict:
    return {name: model_reference(TEXT, RATES[name]) for name in SEED_MODELS}


def clip(seconds: float = 2.0, sr: int = 16000) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    buf = io.BytesIO()
    x = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    sf.write(buf, x, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def clip_samples(seconds: float = 2.0, sr: int = 16000) -> np.ndarray:
    x, _ = sf.read(io.BytesIO(clip(seconds, sr)), dtype="float32")
    return x


def request_for(name: str, text: str = TEXT, **kw) -> SpeechRequest:
    """The request every model can serve: a clone where the model only clones."""
    if name in CLONE_ONLY:
        kw.setdefault("ref_audio", clip())
        kw.setdefault("ref_text", REF_TEXT)
    return SpeechRequest(text, **kw)


async def started(models, name: str, **params):
    query = "".join(f"&{k}={v}" for k, v in params.items())
    backend = load_backend(f"vllm-omni?model={models[name]}{query}")
    await backend.start()
    return backend


def tokenizer(backend):
    return backend.engine.tokenizer()


# --------------------------------------------------------------------------- choosing the adapter


@pytest.mark.parametrize("name", SEEDS)
def test_adapter_is_inferred_from_the_model_directory(standin, models, name):
    backend = load_backend(f"vllm-omni?model={models[name]}")
    assert backend.adapter.name == name


def test_unknown_adapter_lists_the_known_ones(standin, models):
    with pytest.raises(InvalidRequest) as err:
        load_backend(f"vllm-omni?model={models['voxcpm2']}&adapter=bark")
    msg = str(err.value)
    assert "'bark'" in msg
    for name in SEEDS:
        assert name in msg


def test_a_model_nobody_knows_needs_adapter(standin, tmp_path):
    mystery = tmp_path / "my-model"
    mystery.mkdir()
    (mystery / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(InvalidRequest) as err:
        load_backend(f"vllm-omni?model={mystery}")
    msg = str(err.value)
    assert "LlamaForCausalLM" in msg and "adapter=" in msg and "cosyvoice3, fish_speech" in msg
    backend = load_backend(f"vllm-omni?model={mystery}&adapter=fish_tts")  # alias
    assert backend.adapter.name == "fish_speech"


# --------------------------------------------------------------------------- audio


@pytest.mark.parametrize("name", SEEDS)
@pytest.mark.parametrize("mode", ["delta", "cumulative"])
async def test_delta_and_cumulative_give_the_same_take(standin, models, expected, name, mode):
    """Both output forms give the Piper audio at the model's own rate, sample for sample."""
    backend = await started(models, name, chunk_samples=6000, output_mode=mode)
    take = await record(backend, request_for(name, seed=3))
    assert take.status == "ok"
    assert take.sample_rate == RATES[name]  # read from the output's 'sr'
    assert backend.capabilities.sample_rate in (RATES[name], None)  # None: "read the stream"
    assert take.channels == 1
    np.testing.assert_array_equal(take.audio[:, 0], expected[name])
    # one chunk per engine chunk: MOSS-TTS-Nano's empty end chunk adds none
    assert len(take.chunks) == math.ceil(len(expected[name]) / 6000) > 2
    sent = backend.engine.submitted[0]
    assert all(p.output_kind.name == "DELTA" for p in sent["params"])
    await backend.aclose()


async def test_moss_stereo_build_plays_interleaved(standin, models, expected):
    """The older MOSS-TTS-Nano build returned the codec's stereo: the take keeps both channels."""
    backend = await started(models, "moss_tts_nano", channels=2, chunk_samples=8000)
    take = await record(backend, request_for("moss_tts_nano"))
    assert take.channels == 2 and take.sample_rate == 48000
    np.testing.assert_array_equal(take.audio[:, 0], expected["moss_tts_nano"])


@pytest.mark.parametrize("name", SEEDS)
async def test_cancelling_aborts_the_engine_request(standin, models, name):
    backend = await started(models, name, chunk_samples=3000, chunk_delay_s=0.02)
    agen = backend.stream(request_for(name, request_id=f"stop-{name}"))
    first = await agen.__anext__()
    assert first.sample_rate == RATES[name]
    await agen.aclose()
    assert backend.engine.aborted == [f"stop-{name}"]
    assert backend.engine.request_states == {} and backend._active == set()


async def test_two_models_in_one_process_keep_apart(standin, models, expected):
    fish = await started(models, "fish_speech", chunk_samples=5000, chunk_delay_s=0.002)
    vox = await started(models, "voxcpm2", chunk_samples=5000, chunk_delay_s=0.002)
    a, b = await asyncio.gather(
        record(fish, request_for("fish_speech")), record(vox, request_for("voxcpm2"))
    )
    np.testing.assert_array_equal(a.audio[:, 0], expected["fish_speech"])
    np.testing.assert_array_equal(b.audio[:, 0], expected["voxcpm2"])
    assert (a.sample_rate, b.sample_rate) == (44100, 48000)


# --------------------------------------------------------------------------- capabilities


def test_capabilities_show_only_what_each_model_takes(standin, models):
    caps = {n: load_backend(f"vllm-omni?model={models[n]}").capabilities for n in SEEDS}
    for name in ("fish_speech", "cosyvoice3", "moss_tts_nano", "voxcpm2"):
        c = caps[name]
        assert c.cloning and not c.instructions and c.languages == () and not c.speed
        assert c.sample_rate == RATES[name] and c.channels == 1 and c.seed
    q = caps["qwen3_tts"]  # a CustomVoice checkpoint: presets and style, no cloning
    assert not q.cloning and q.instructions and "English" in q.languages
    # zero-shot-only models have no voice of their own: the UI must ask for a clip
    assert {n for n in SEEDS if caps[n].clone_required} == {"cosyvoice3", "moss_tts_nano"}


@pytest.mark.parametrize("name", ["fish_speech", "cosyvoice3", "moss_tts_nano", "voxcpm2"])
async def test_no_preset_voices_are_offered(standin, models, name):
    backend = load_backend(f"vllm-omni?model={models[name]}")
    assert await backend.voices() == []


# --------------------------------------------------------------------------- typed errors


@pytest.mark.parametrize("name", ["fish_speech", "cosyvoice3", "moss_tts_nano", "voxcpm2"])
async def test_unsupported_options_fail_before_the_engine(standin, models, name):
    """Refused before the model is even loaded: no engine, no submitted request. (``speed``
    is not refused: the finished take is stretched, as vLLM-Omni's server does; see
    test_vllm_omni_embedded.py.)"""
    backend = load_backend(f"vllm-omni?model={models[name]}")
    cases = [
        (Unsupported, "language", request_for(name, language="English")),
        (Unsupported, "instructions", request_for(name, instructions="Whisper.")),
        (UnknownVoice, "voices: none", request_for(name, voice="alice")),
        (InvalidRequest, "max_new_tokens", request_for(name, extra={"max_new_tokens": 5000})),
    ]
    for kind, words, req in cases:
        with pytest.raises(kind, match=words):
            await record(backend, req)
    assert backend.engine is None


@pytest.mark.parametrize(
    ("name", "req", "words"),
    [
        ("cosyvoice3", SpeechRequest(TEXT), "CosyVoice3 requires 'ref_audio'"),
        ("cosyvoice3", SpeechRequest(TEXT, ref_audio=clip()), "requires 'ref_text'"),
        ("moss_tts_nano", SpeechRequest(TEXT), "MOSS-TTS-Nano requires 'ref_audio'"),
        ("fish_speech", SpeechRequest(TEXT, ref_audio=clip()), "requires 'ref_text'"),
        ("fish_speech", SpeechRequest(TEXT, ref_text="x"), "needs a reference clip"),
        ("voxcpm2", SpeechRequest(TEXT, ref_text="x"), "needs a reference clip"),
        ("fish_speech", SpeechRequest("Hi <|im_end|> there"), "control token"),
    ],
)
async def test_missing_or_hostile_inputs_are_typed_errors(standin, models, name, req, words):
    backend = load_backend(f"vllm-omni?model={models[name]}")
    with pytest.raises(InvalidRequest, match=words):
        await record(backend, req)
    assert backend.engine is None


async def test_reference_clip_rules_hold_after_loading(standin, models):
    cosy = await started(models, "cosyvoice3")
    with pytest.raises(InvalidRequest, match="at least 16000 Hz"):
        await record(cosy, SpeechRequest(TEXT, ref_audio=clip(sr=8000), ref_text=REF_TEXT))
    moss = await started(models, "moss_tts_nano")
    with pytest.raises(InvalidRequest, match="0.5 s"):
        await record(moss, SpeechRequest(TEXT, ref_audio=clip(0.5)))
    with pytest.raises(InvalidRequest, match="not a readable audio file"):
        await record(moss, SpeechRequest(TEXT, ref_audio=b"RIFF\x00\x00not audio"))
    with pytest.raises(InvalidRequest, match="the limit is 16 MiB"):  # refused before decoding
        await record(moss, SpeechRequest(TEXT, ref_audio=b"\0" * (17 * 1024 * 1024)))
    assert cosy.engine.submitted == [] and moss.engine.submitted == []


async def test_fish_without_its_tokenizer_is_a_clear_error(standin, models, tmp_path):
    bare = tmp_path / "s2-pro"
    bare.mkdir()
    backend = load_backend(f"vllm-omni?model={bare}")
    with pytest.raises(ModelUnavailable, match="tokenizer"):
        await backend.start()
    assert backend.engine is None


async def test_a_rejected_prompt_is_a_backend_error(standin, models):
    """If the engine refuses the prompt anyway, the take fails cleanly with its message."""
    backend = await started(models, "voxcpm2")
    backend.adapter.ctx.hf_config["patch_size"] = 2  # the model's real value differs: mismatch
    with pytest.raises(BackendError, match="prefill length mismatch"):
        await record(backend, SpeechRequest(TEXT, ref_audio=clip()))


# --------------------------------------------------------------------------- request layouts


async def test_fish_speech_requests(standin, models):
    backend = await started(models, "fish_speech")
    tok = tokenizer(backend)
    # plain: the chat layout of fish_speech/prompt_utils.py, text in a one-item list
    await record(backend, SpeechRequest(TEXT, voice="default", seed=9))
    sent = backend.engine.submitted[-1]
    prompt = sent["prompt"]
    system = "<|im_start|>system\nconvert the provided text to speech"
    assert tok.decode(prompt["prompt_token_ids"]) == system + FISH_TAIL.format(TEXT)
    assert prompt["additional_information"] == {"text": [TEXT]}
    assert sent["params"][0].seed == 9 and sent["params"][0].extra_args == {"tts_local_seed": 9}
    assert len(sent["params"]) == 2  # slow AR + DAC decoder, both streamed as deltas
    # legacy speaker tags are normalised; max_new_tokens goes to the prompt and stage 0
    await record(backend, SpeechRequest(f"<speaker:1>{TEXT}", extra={"max_new_tokens": 700}))
    sent = backend.engine.submitted[-1]
    info = sent["prompt"]["additional_information"]
    assert info == {"text": [f"<|speaker:1|>{TEXT}"], "max_new_tokens": [700]}
    assert sent["params"][0].max_tokens == 700
    assert backend.engine.default_sampling_params_list[0].max_tokens == 2048  # untouched
    # cloning: the structured clone with scalars and placeholder ids
    await record(backend, SpeechRequest(TEXT, ref_audio=clip(), ref_text=REF_TEXT))
    prompt = backend.engine.submitted[-1]["prompt"]
    info = prompt["additional_information"]
    assert set(info) == {
        "text",
        "ref_text",
        "ref_audio_wav",
        "ref_audio_sr",
        "fish_structured_voice_clone",
    }
    assert info["text"] == TEXT and info["ref_text"] == f"<|speaker:0|>{REF_TEXT}"
    assert info["fish_structured_voice_clone"] is True and info["ref_audio_sr"] == 16000
    np.testing.assert_array_equal(np.asarray(info["ref_audio_wav"]), clip_samples())
    semantic = math.ceil(math.ceil(32000 * 44100 / 16000) / 2048)
    head = (
        "<|im_start|>system\nconvert the provided text to speech reference to the following:"
        f"\n\nText:\n<|speaker:0|>{REF_TEXT}\n\nSpeech:\n<|audio_start|>"
    )
    n = len(tok.encode(head, add_special_tokens=False)) + semantic + 1
    n += len(tok.encode(FISH_TAIL.format(TEXT), add_special_tokens=False))
    assert prompt["prompt_token_ids"] == [1] * n and semantic == 44
    assert prompt["cache_salt"] != backend.build_prompt(SpeechRequest(TEXT))["cache_salt"]


async def test_cosyvoice3_requests(standin, models):
    backend = await started(models, "cosyvoice3")
    await record(backend, SpeechRequest(TEXT, ref_audio=clip(), ref_text=REF_TEXT, seed=4))
    sent = backend.engine.submitted[-1]
    prompt = sent["prompt"]
    assert set(prompt) == {"prompt", "multi_modal_data", "mm_processor_kwargs"}
    assert prompt["prompt"] == TEXT
    wav, sr = prompt["multi_modal_data"]["audio"]
    assert sr == 16000 and wav.dtype == np.float32
    np.testing.assert_array_equal(wav, clip_samples())
    assert prompt["mm_processor_kwargs"] == {
        "prompt_text": f"You are a helpful assistant.<|endofprompt|>{REF_TEXT}",
        "sample_rate": 16000,
    }
    stage0 = sent["params"][0]
    n = len(TEXT.encode())  # the stand-in tokenizer is byte-level
    assert (stage0.min_tokens, stage0.max_tokens) == (2 * n, min(2048, 20 * n))
    # the deploy YAML's sampling stays (vllm-omni 0.30.0 deploy/cosyvoice3.yaml)
    assert (stage0.top_p, stage0.top_k, stage0.repetition_penalty) == (0.8, 25, 1.0001)
    assert stage0.seed == 4
    # an already formatted transcript is kept as it is
    own = "You are a helpful assistant. Speak slowly.<|endofprompt|>" + REF_TEXT
    built = backend.build_prompt(SpeechRequest(TEXT, ref_audio=clip(), ref_text=own))
    assert built["mm_processor_kwargs"]["prompt_text"] == own
    capped = backend.sampling_params(
        SpeechRequest(TEXT, ref_audio=clip(), ref_text=REF_TEXT, extra={"max_new_tokens": 50})
    )
    assert (capped[0].min_tokens, capped[0].max_tokens) == (50, 50)


async def test_moss_tts_nano_requests(standin, models):
    backend = await started(models, "moss_tts_nano")
    req = SpeechRequest(
        TEXT, ref_audio=clip(), ref_text=REF_TEXT, seed=5, extra={"max_new_tokens": 300}
    )
    await record(backend, req)
    sent = backend.engine.submitted[-1]
    prompt = sent["prompt"]
    assert prompt["prompt_token_ids"] == [1]
    info = prompt["additional_information"]
    assert set(info) == {"text", "mode", "prompt_audio_array", "max_new_frames", "seed"}
    assert info["text"] == [TEXT] and info["mode"] == ["voice_clone"]
    assert info["max_new_frames"] == [300] and info["seed"] == [5]
    ((samples, sr),) = info["prompt_audio_array"]
    assert sr == 16000 and isinstance(samples, list) and len(samples) == 32000
    np.testing.assert_allclose(samples, clip_samples())
    assert len(sent["params"]) == 1  # one stage that runs its own codec
    assert sent["params"][0].max_tokens == 300 and sent["params"][0].seed == 5


async def test_voxcpm2_requests(standin, models):
    backend = await started(models, "voxcpm2")
    tok = tokenizer(backend)
    ids = [1000 + b for b in TEXT.encode()]  # byte-level stand-in tokenizer, BOS dropped
    assert tok.encode(TEXT)[0] == 1  # the BOS the prompt must not carry
    # plain and the "default" voice: zero-shot
    await record(backend, SpeechRequest(TEXT, voice="default"))
    prompt = backend.engine.submitted[-1]["prompt"]
    assert prompt["additional_information"] == {"text_token_ids": [ids]}
    assert prompt["prompt_token_ids"] == [1] * (len(ids) + 1)
    ref_len = math.ceil(math.ceil(32000 * 16000 / 16000) / (4 * 2 * 5 * 8 * 8))
    # clone with transcript: continuation mode
    await record(backend, SpeechRequest(TEXT, ref_audio=clip(), ref_text=REF_TEXT))
    prompt = backend.engine.submitted[-1]["prompt"]
    info = prompt["additional_information"]
    assert set(info) == {"text_token_ids", "prompt_audio", "prompt_text"}
    ((samples, sr),) = info["prompt_audio"]
    assert sr == 16000 and len(samples) == 32000 and info["prompt_text"] == [REF_TEXT]
    assert len(prompt["prompt_token_ids"]) == len(ids) + 1 + ref_len + len(REF_TEXT.encode())
    # clone without transcript: isolated reference, two extra markers
    await record(backend, SpeechRequest(TEXT, ref_audio=clip()))
    prompt = backend.engine.submitted[-1]["prompt"]
    assert set(prompt["additional_information"]) == {"text_token_ids", "reference_audio"}
    assert len(prompt["prompt_token_ids"]) == len(ids) + 1 + ref_len + 2
    assert len(backend.engine.submitted[-1]["params"]) == 1


async def test_qwen3_from_its_model_directory(standin, models):
    """The CustomVoice variant is read from the directory name; presets come from the model."""
    backend = await started(models, "qwen3_tts")
    assert backend.adapter.task_type == "CustomVoice"
    await record(backend, SpeechRequest(TEXT, voice="Aiden", language="english"))
    info = backend.engine.submitted[-1]["prompt"]["additional_information"]
    assert info["speaker"] == ["aiden"] and info["language"] == ["English"]
    assert info["task_type"] == ["CustomVoice"] and info["max_new_tokens"] == [2048]
    with pytest.raises(Unsupported, match="Base checkpoint"):
        await record(backend, SpeechRequest(TEXT, ref_audio=clip(), ref_text=REF_TEXT))


@pytest.mark.parametrize("name", SEEDS)
async def test_say_with_just_the_model_directory(standin, models, expected, name, tmp_path):
    """``listenlab say --backend vllm-omni?model=/models/<seed model>``: the Python twin writes
    the model's audio at the model's rate, with nothing but the directory in the spec."""
    from evaluation.takes import say

    kw = {"ref_audio": clip(), "ref_text": REF_TEXT} if name in CLONE_ONLY else {}
    out = tmp_path / f"{name}.wav"
    take = await say(TEXT, backend=f"vllm-omni?model={models[name]}", out=out, **kw)
    assert take.status == "ok"
    audio, sr = sf.read(out, dtype="int16")
    assert sr == RATES[name]
    np.testing.assert_array_equal(audio, expected[name])


def test_spec_voice_or_language_on_a_model_without_them(standin, models):
    """They are refused at once instead of reaching AsyncOmni as unknown engine kwargs."""
    with pytest.raises(UnknownVoice, match="no preset voices"):
        load_backend(f"vllm-omni?model={models['fish_speech']}&voice=alice")
    with pytest.raises(Unsupported, match="no language"):
        load_backend(f"vllm-omni?model={models['voxcpm2']}&language=English")
    backend = load_backend(f"vllm-omni?model={models['voxcpm2']}&voice=default")
    assert "voice" not in backend.engine_kwargs
