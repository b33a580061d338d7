"""MOSS-TTS-Nano (``OpenMOSS-Team/MOSS-TTS-Nano``): one AR stage with its codec, cloning only;
the unit.

The model's facts, request rules and chunk schedule (``MODEL``, each fact with the line of
vLLM-Omni 0.30.0 it was read from) and the embedded adapter (:class:`MossTTSNano`, ``ADAPTER``).

The embedded adapter was read from ``vllm-project/vllm-omni``:

* ``vllm_omni/entrypoints/openai/tts_adapters/moss_tts.py`` @ 0131cb55
  (``_build_moss_tts_params``, the "legacy nano path", and ``build``): placeholder prompt
  ``prompt_token_ids = [1]`` with ``additional_information = {"text": [text], "mode":
  ["voice_clone"], "prompt_audio_array": [[samples, sr]]}`` (+ ``"max_new_frames": [n]`` for
  ``max_new_tokens``, + ``"seed": [seed]`` because the model samples internally); ``ref_audio``
  is required ("MOSS-TTS-Nano requires 'ref_audio'"); ``ref_text`` and ``voice`` are not used;
  ``apply_max_new_tokens`` sets stage-0 ``max_tokens``; a ``cache_salt`` over the conditioning.
* ``vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py``: outputs come
  under ``model_outputs`` with ``sr`` = ``audio_tokenizer_sample_rate`` (48000) as a list of
  0-d tensors, and a last empty chunk marks the end. That version downmixes the codec's stereo
  to mono (``_to_mono_1d``); the older ``moss_tts_nano/gradio_demo.py`` played 2-channel
  interleaved audio. listenlab reads the layout of each chunk (``[T]`` mono, ``[2, T]``
  stereo), so either build plays correctly; Capabilities say mono (the current one).

The server accepts ``ref_text`` and drops it; listenlab does the same (the voice library always
sends a transcript with a clip), and says so in the README.
"""

from __future__ import annotations

import hashlib
from typing import Any

from backends.base import SpeechRequest
from backends.vllm_omni.models.base import ModelAdapter, decode_ref_audio, max_new_tokens
from backends.vllm_omni.models.unit import ChunkSchedule, ModelUnit, cite
from backends.vllm_omni.rules import SpeechRules

ADAPTER_FILE = "vllm_omni/entrypoints/openai/tts_adapters/moss_tts.py"
MODELING = "vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py"
RULE_SOURCES = (
    cite(ADAPTER_FILE, 506, 'name = "moss_tts_nano"'),
    cite(
        ADAPTER_FILE,
        397,
        "def validate(self, request",
        "the shared check of rules.py; the nano path returns after the ref_audio format check, "
        "so max_new_tokens is not checked",
    ),
    cite(
        ADAPTER_FILE,
        431,
        "requires 'ref_audio' (reference audio for voice cloning).",
        "label MOSS-TTS-Nano",
    ),
    cite(
        "vllm_omni/entrypoints/openai/tts_adapters/base.py",
        222,
        "supported_output_sample_rates: ClassVar[frozenset[int]] = frozenset()",
        "not overridden: sample_rate is refused",
    ),
)

MODEL = ModelUnit(
    name="moss_tts_nano",
    title="MOSS-TTS-Nano",
    keys=("moss-tts-nano",),
    checkpoint="OpenMOSS-Team/MOSS-TTS-Nano",
    sample_rate=48000,
    channels=1,
    codec_channels=2,
    cloning=True,
    max_model_len=4096,
    rules=SpeechRules(
        "moss_tts_nano",
        "; ".join(str(s) for s in RULE_SOURCES),
        requires_ref_audio="MOSS-TTS-Nano requires 'ref_audio' (reference audio for voice cloning).",
        no_speakers_label="MOSS-TTS-Nano",
        checks_max_new_tokens=False,
    ),
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(1, 2, 4),
        chunk_frames=8,
        async_chunk=False,
        sources=(
            cite(
                "vllm_omni/deploy/moss_tts_nano.yaml",
                15,
                "async_chunk: false",
                "single stage: the model's own inference_stream() loop emits",
            ),
        ),
        assumptions=(
            "The schedule is not in vLLM-Omni: upstream MossTTSNanoForCausalLM."
            "_resolve_stream_decode_frame_budget sends 1, 2, 4, then 8 frames as the stream "
            "gets ahead, and OpenMOSS/MOSS-TTS-Nano moss_tts_nano_runtime.py says 'one decode "
            "frame (about 80 ms audio)' (12.5 Hz)."
        ),
    ),
    sources={
        "sample_rate": (
            cite(MODELING, 468, 'sr = getattr(self.config, "audio_tokenizer_sample_rate", 48000)'),
        ),
        "channels": (
            cite(MODELING, 140, "configured for stereo (number_channels=2)", "the codec's 2"),
            cite(MODELING, 150, "return chunk.mean(dim=0).contiguous()", "served mono"),
        ),
        "cloning": (cite(ADAPTER_FILE, 431, "requires 'ref_audio'"),),
        "instructions": (
            cite(
                ADAPTER_FILE,
                307,
                '"mode": ["voice_clone"],',
                "the nano path sends text, mode and the clip: no instructions",
            ),
        ),
        "speed_streaming": (
            cite(
                "vllm_omni/entrypoints/openai/tts_adapters/base.py",
                219,
                "native_speed_control: ClassVar[bool] = False",
                "not overridden",
            ),
        ),
        "rules": RULE_SOURCES,
        "max_model_len": (cite("vllm_omni/deploy/moss_tts_nano.yaml", 25, "max_model_len: 4096"),),
    },
)


class MossTTSNano(ModelAdapter):
    unit = MODEL
    aliases = ("moss-tts-nano",)
    architectures = frozenset({"MossTTSNanoForCausalLM"})
    model_types = frozenset({"moss_tts_nano"})
    name_keys = ("mossttsnano",)
    sources = (
        "vllm_omni/entrypoints/openai/tts_adapters/moss_tts.py",
        "vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py",
        "examples/online_serving/text_to_speech/moss_tts_nano/gradio_demo.py",
    )

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        self.check(request)
        wav, sr = decode_ref_audio(request.ref_audio or b"")
        info: dict[str, Any] = {
            "text": [request.text],
            "mode": ["voice_clone"],
            "prompt_audio_array": [[wav.tolist(), sr]],
        }
        n = max_new_tokens(request, self.default_max_new_tokens)
        if n is not None:
            info["max_new_frames"] = [n]
        if request.seed is not None:
            info["seed"] = [int(request.seed)]
        salt = hashlib.sha256(repr((request.text, n, request.seed)).encode())
        salt.update(wav.tobytes())
        return {
            "prompt_token_ids": [1],
            "additional_information": info,
            "cache_salt": f"listenlab-{salt.hexdigest()[:32]}",
        }


ADAPTER = MossTTSNano
