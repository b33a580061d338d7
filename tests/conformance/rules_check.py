"""vLLM-Omni 0.30.0's own refusals for a list of speech requests, for every TTS adapter it
registers. Runs in the conformance environment; prints one JSON line.

Why this file: listenlab ports each adapter's ``validate`` into the model's unit
(``backends/vllm_omni/models/<model>.py``). ``tests/conformance/test_rules.py`` sends the same
requests through those ports, and this script answers them with vLLM-Omni's code itself: every
adapter of ``TTS_ADAPTER_REGISTRY``, constructed on a serving object that carries the real
``OmniOpenAIServingSpeech`` methods the adapters call (``_apply_uploaded_speaker``,
``_validate_ref_audio_format``, ``_get_available_speakers``, ``_validate_speech_sample_rate``,
…) and a model config that names the checkpoint. The steps ``create_speech`` takes before the
adapter run too, in its order: the ``"default"`` placeholder, ``sample_rate``. OmniVoice is
served by the pure-diffusion path (``_create_diffusion_speech``), whose checks are its own
methods run in its order; Voxtral's refusal of a clip on the open checkpoint is its
``_build_prompt``'s, called with ``_encoder_loaded`` false.

Only the GPU is missing: no adapter is changed, no message is written here.

    .venv-conformance/bin/python tests/conformance/rules_check.py CASES.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the checkpoint names are names, not downloads
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

UPLOADED = {
    "up1": {
        "name": "up1",
        "embedding_source": "audio",
        "ref_text": "An uploaded voice.",
        "created_at": 1,
    },
    "emb1": {"name": "emb1", "embedding_source": "direct", "created_at": 2},
}
"""Voices uploaded to the server before every case: one from audio, one as an embedding."""
UPLOADED_AUDIO = "data:audio/wav;base64,UklGRg=="
"""What ``_get_uploaded_audio_data`` hands back for the audio upload (a data URL)."""


WORKDIR = Path(tempfile.mkdtemp(prefix="ll-rules-"))


def model_dir(checkpoint: str) -> str:
    """A local directory named like the checkpoint (the adapters read variants from the name;
    a local path keeps the capability loaders off the network)."""
    path = WORKDIR / checkpoint.split("/")[-1]
    path.mkdir(exist_ok=True)
    return str(path)


def serving_stub(model_type: str, checkpoint: str, speakers: dict[str, list[str]]):
    """An object with the serving methods the adapters call (borrowed from the real class)."""
    from vllm_omni.entrypoints.openai.serving_speech import OmniOpenAIServingSpeech as S

    hf = SimpleNamespace(
        talker_config=SimpleNamespace(
            spk_id={s: i for i, s in enumerate(speakers.get("talker", []))},
            # Qwen3-TTS's talker width: 2048 for the 1.7B checkpoints, 1024 for the 0.6B
            hidden_size=2048 if "1.7b" in checkpoint.lower() else 1024,
        ),
        audio_config=SimpleNamespace(
            speaker_id={s: i for i, s in enumerate(speakers.get("audio", []))}
        ),
    )
    engine = SimpleNamespace(
        model_config=SimpleNamespace(model=model_dir(checkpoint), hf_config=hf, async_chunk=True),
        stage_configs=[],
        errored=False,
    )

    class Stub:
        _apply_uploaded_speaker = S._apply_uploaded_speaker
        _validate_ref_audio_format = S._validate_ref_audio_format
        _get_available_speakers = S._get_available_speakers
        _get_available_voices = S._get_available_voices
        _get_normalized_voice = S._get_normalized_voice
        _validate_speech_sample_rate = S._validate_speech_sample_rate
        _voice_created_at = S._voice_created_at

        def _get_uploaded_audio_data(self, voice_name: str) -> str | None:
            info = self.uploaded_speakers.get(voice_name.lower())
            return UPLOADED_AUDIO if info and info["embedding_source"] == "audio" else None

    stub = Stub()
    stub.engine_client = engine
    stub.model_config = engine.model_config
    stub.uploaded_speakers = {k: dict(v) for k, v in UPLOADED.items()}
    for name, info in stub.uploaded_speakers.items():  # Qwen3-TTS's Base check looks for it
        voice_file = WORKDIR / f"{name}.safetensors"
        voice_file.touch()
        info["file_path"] = str(voice_file)
    stub._tts_model_type = model_type
    stub._max_instructions_length = 500
    stub._tts_executor = None
    stub._tts_tokenizer = None
    stub._tts_stage = None
    stub._diffusion_mode = model_type == "omnivoice"
    stub._adapter = None
    return stub


def make_adapter(cls, stub):
    from vllm_omni.entrypoints.openai.tts_adapters.base import SpeechServingContext

    adapter = cls(SpeechServingContext(server=stub, engine_client=stub.engine_client))
    adapter.load_capabilities()
    stub._adapter = adapter
    return adapter


def diffusion_refusal(stub, request) -> str | None:
    """``_create_diffusion_speech``'s checks, its own methods in its order (OmniVoice)."""
    if not request.input or not request.input.strip():
        return "Input text cannot be empty"
    if request.ref_audio is not None:
        err = stub._validate_ref_audio_format(request.ref_audio)
        if err:
            return err
    try:
        request.voice = stub._get_normalized_voice(request.voice)
    except ValueError as e:
        return str(e)
    return stub._apply_uploaded_speaker(request)


def refusal(adapter, stub, body: dict[str, Any]) -> str | None:
    """What vLLM-Omni answers ``body`` with before generating (None: it would generate)."""
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest
    from vllm_omni.entrypoints.openai.serving_speech import _is_default_voice

    request = OpenAICreateSpeechRequest(**body)
    if request.voice is not None and _is_default_voice(
        request.voice.lower(), stub._get_available_speakers()
    ):
        request.voice = None
    err = stub._validate_speech_sample_rate(request)
    if err:
        return err
    if adapter is None:
        return diffusion_refusal(stub, request)
    err = adapter.validate(request)
    if err is None and adapter.name == "voxtral_tts" and request.ref_audio is not None:
        adapter._encoder_loaded = False  # the open checkpoint (no encoder weights)
        try:
            adapter._build_prompt(request)
        except ValueError as e:
            err = str(e)
    return err


def main() -> None:
    from pydantic import ValidationError
    from vllm_omni.entrypoints.openai.tts_adapters import TTS_ADAPTER_REGISTRY

    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out: dict[str, Any] = {"registry": sorted(TTS_ADAPTER_REGISTRY), "answers": {}}
    for name, model in spec["models"].items():
        cls = TTS_ADAPTER_REGISTRY[model["adapter"]]
        answers = []
        for body in spec["cases"] + model.get("cases", []):
            stub = serving_stub(cls.name, model["checkpoint"], model.get("speakers", {}))
            adapter = None if cls.name == "omnivoice" else make_adapter(cls, stub)
            try:
                answers.append(refusal(adapter, stub, body))
            except ValidationError:
                answers.append("<schema>")
        out["answers"][name] = answers
    print(json.dumps(out))


if __name__ == "__main__":
    main()
