"""Breeze-TTS-2 (``BreezeBlue/Breeze-TTS-2``): voice design from
instructions, or cloning from one clip and its transcript, 24 kHz; the unit.

No embedded adapter: its prompt (``build_breeze_prompt``) needs the checkpoint's tokenizer and
reference encoder, so it is served remotely only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    assumed,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import (
    EMPTY_INPUT,
    RequestView,
    RuleContext,
    SpeechRules,
    ref_audio_format_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/breeze_tts_2.py"
DEPLOY = "vllm_omni/deploy/breeze_tts_2.yaml"
MODELS = "vllm_omni/model_executor/models/breeze_tts_2"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/breeze_tts_2.py"
EXTRA_KEYS = frozenset(
    {"guidance_scale", "cfg_scale", "temperature", "top_k", "top_p", "repetition_penalty"}
)


@dataclass(frozen=True)
class BreezeRules(SpeechRules):
    """``BreezeTTS2Adapter.validate`` (``tts_adapters/breeze_tts_2.py:74``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not (view.input or "").strip():
            return EMPTY_INPUT
        if view.speed is not None and view.speed != 1.0:
            return "Breeze does not support speed adjustment"
        if view.language is not None:
            return "Breeze infers the language from the input text; the language field is not supported"
        if view.ref_audio_2 is not None or view.speaker_embedding is not None:
            return "Breeze accepts one reference recording and its transcript"
        err = reference_error(view)
        if err:
            return err
        expected = "Base" if view.ref_audio is not None else "VoiceDesign"
        if view.task_type not in (None, "CustomVoice", expected):
            return f"Breeze requires task_type='{expected}' for this conditioning"
        if view.x_vector_only_mode:
            return "Breeze does not support x_vector_only_mode"
        return extra_error(view.extra_params or {})


def reference_error(view: RequestView) -> str | None:
    """One clip (a one-item list is taken), a URL, with a non-empty transcript."""
    if view.ref_audio is None:
        return "Breeze ref_text requires ref_audio" if view.ref_text is not None else None
    reference = view.ref_audio
    if isinstance(reference, list):
        if len(reference) != 1:
            return "Breeze supports exactly one reference recording"
        reference = reference[0]
    text = view.ref_text
    if not isinstance(reference, str) or not isinstance(text, str) or not text.strip():
        return "Breeze voice cloning requires one ref_audio URL and a non-empty ref_text transcript"
    return ref_audio_format_error(reference)


def extra_error(extra: dict) -> str | None:
    """The sampling knobs Breeze takes in ``extra_params``, and their ranges."""
    if unknown := set(extra) - EXTRA_KEYS:
        return f"Unsupported Breeze parameters: {sorted(unknown)}"
    for key, value in extra.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            return f"Breeze {key} must be a finite number"
    if (
        extra.get("guidance_scale", extra.get("cfg_scale", 1.0)) <= 0
        or extra.get("repetition_penalty", 1.1) <= 0
    ):
        return "Breeze guidance_scale and repetition_penalty must be positive"
    if extra.get("temperature", 0.9) < 0 or not 0 < extra.get("top_p", 1.0) <= 1:
        return "Breeze requires temperature >= 0 and 0 < top_p <= 1"
    top_k = extra.get("top_k", 50)
    if not isinstance(top_k, int) or top_k < -1:
        return "Breeze top_k must be -1, 0, or a positive integer"
    return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 77, "def validate(self, request", "ported as BreezeRules.validate"),
    cite(ADAPTER_FILE, 34, "supported_output_sample_rates = frozenset({24000})"),
)

MODEL = ModelUnit(
    name="breeze_tts_2",
    title="Breeze-TTS-2",
    keys=("breeze",),
    checkpoint="BreezeBlue/Breeze-TTS-2",
    sample_rate=24000,
    channels=1,
    cloning=True,
    instructions=True,
    open_voices=True,
    max_model_len=2048,
    rules=BreezeRules("breeze_tts_2", rules_text(RULE_SOURCES), sample_rates=frozenset({24000})),
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(1, 2, 4),
        chunk_frames=5,
        async_chunk=True,
        left_context_frames=0,
        sources=(
            cite(DEPLOY, 3, "async_chunk: true"),
            cite(DEPLOY, 11, "codec_chunk_ramp: [1, 2, 4, 5]"),
            cite(DEPLOY, 9, "codec_chunk_frames: 5"),
            cite(DEPLOY, 12, "codec_left_context_frames: 0"),
            cite(PROCESSOR, 69, 'chunk_size = int(ramp[state["chunks"]])', "the ramp, then 5"),
            cite(ADAPTER_FILE, 43, "return 24000 / 1920", "12.5 frames per second"),
        ),
        assumptions="One frame per AR step, so each chunk carries exactly its ramp size.",
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/prompt.py", 15, "SAMPLE_RATE = 24000"),
            cite(
                f"{MODELS}/code2wav.py",
                7,
                "class BreezeCode2Wav(Qwen3TTSCode2Wav):",
                "Qwen3-TTS's 24 kHz codec",
            ),
        ),
        "channels": (
            cite(
                "vllm_omni/model_executor/models/qwen3_tts/qwen3_tts_code2wav.py",
                528,
                ".reshape(-1)",
                "each request's waveform is 1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 86, "has_reference = request.ref_audio is not None"),),
        "instructions": (
            cite(ADAPTER_FILE, 137, "DEFAULT_INSTRUCTION if request.instructions is None"),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "presets": (
            assumed(
                "no speaker list is checked: the voice becomes the prompt's speaker tag "
                "(speaker=request.voice, default S0; tts_adapters/breeze_tts_2.py)"
            ),
        ),
        "max_model_len": (cite(DEPLOY, 21, "max_model_len: 2048", "stage 0"),),
    },
)
