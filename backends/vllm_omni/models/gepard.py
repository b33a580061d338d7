"""Gepard-1.0 (``nineninesix/gepard-1.0``): one AR stage over NeMo's NanoCodec, 22.05 kHz,
zero-shot only (its one voice is ``default``); the unit.

No embedded adapter: its prompt layout needs the checkpoint's Gepard config
(``tts_adapters/gepard.py`` ``_build_prompt``), so it is served remotely only.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    ChunkSchedule,
    ModelUnit,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import (
    EMPTY_INPUT,
    MAX_NEW_TOKENS_RANGE,
    RequestView,
    RuleContext,
    SpeechRules,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/gepard.py"
DEPLOY = "vllm_omni/deploy/gepard.yaml"
MODELS = "vllm_omni/model_executor/models/gepard"
UNSUPPORTED = (
    "ref_audio",
    "ref_text",
    "ref_audio_2",
    "speaker_embedding",
    "x_vector_only_mode",
    "task_type",
    "non_streaming_mode",
    "instructions",
    "language",
    "ambient_sound",
    "duration_seconds",
    "initial_codec_chunk_frames",
)
"""``_UNSUPPORTED_OPTIONAL_FIELDS``: declared fields Gepard refuses rather than ignores."""


@dataclass(frozen=True)
class GepardRules(SpeechRules):
    """``GepardAdapter.validate`` (``tts_adapters/gepard.py:65``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if view.voice is not None and view.voice.lower() != "default":
            return (
                f"Invalid voice '{view.voice}'. Supported: default. "
                "Voice cloning from reference audio is not available yet."
            )
        if view.speed is not None and view.speed != 1.0:
            return "Gepard does not support 'speed' adjustments; audio is rendered at the native 22.05 kHz rate"
        if view.extra_params:
            keys = ", ".join(sorted(view.extra_params))
            return (
                f"Gepard does not accept extra_params (got: {keys}). "
                "Sampling is fixed in-model; temperature/top_p/top_k cannot be overridden."
            )
        if view.word_timestamps:
            return "Gepard does not support 'word_timestamps'; there is no forced-aligner stage in this pipeline"
        if (view.response_format or "").lower() == "opus":
            return (
                "Gepard does not support 'response_format'='opus'; "
                "native 22.05 kHz is not an Opus sample rate (8000, 12000, 16000, 24000, 48000)"
            )
        lo, hi = MAX_NEW_TOKENS_RANGE
        if view.max_new_tokens is not None and not lo <= view.max_new_tokens <= hi:
            return f"max_new_tokens must be between {lo} and {hi} frames"
        for name in UNSUPPORTED:
            if getattr(view, name, None) is not None:
                return f"Gepard does not support '{name}'"
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 65, "def validate(self, request", "ported as GepardRules.validate"),
    cite(ADAPTER_FILE, 34, "_UNSUPPORTED_OPTIONAL_FIELDS: tuple[tuple[str, str], ...] = ("),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="gepard",
    title="Gepard-1.0",
    keys=("gepard",),
    checkpoint="nineninesix/gepard-1.0",
    sample_rate=22050,
    channels=1,
    presets=("default",),
    max_model_len=4096,
    rules=GepardRules("gepard", rules_text(RULE_SOURCES), builtin_voices=("default",)),
    schedule=ChunkSchedule(
        frame_hz=22050 / 1024,
        first_frames=(10,),
        chunk_frames=86,
        async_chunk=False,
        sources=(
            cite(DEPLOY, 9, "async_chunk: false", "one stage: the talker's own decode cadence"),
            cite(
                f"{MODELS}/gepard_talker.py",
                37,
                'FIRST_CHUNK_FRAMES = int(os.environ.get("VLLM_GEPARD_FIRST_CHUNK_FRAMES", "10"))',
            ),
            cite(
                f"{MODELS}/gepard_talker.py",
                38,
                'CHUNK_FRAMES = int(os.environ.get("VLLM_GEPARD_CHUNK_FRAMES", "86"))',
            ),
            cite(ADAPTER_FILE, 7, "one token = one 1024-sample frame", "22050 / 1024 = 21.5 Hz"),
        ),
        assumptions=(
            "The talker decodes once 10 frames are pending, then every 86 (environment "
            "defaults); a step is one frame, so each chunk is exactly that many frames."
        ),
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/configuration_gepard.py", 88, 'cc.get("sample_rate", 22050)'),
        ),
        "channels": (
            cite(
                f"{MODELS}/gepard_talker.py",
                523,
                '"model_outputs": [by_req[r].reshape(-1) for r in ready_req_ids]',
                "1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 35, '("ref_audio", "ref_audio"),'),),
        "instructions": (cite(ADAPTER_FILE, 42, '("instructions", "instructions"),'),),
        "speed_streaming": (
            cite(
                ADAPTER_FILE,
                78,
                "Gepard does not support 'speed' adjustments",
                "refused, even stretched",
            ),
        ),
        "rules": RULE_SOURCES,
        "presets": (
            cite(ADAPTER_FILE, 29, '_DEFAULT_VOICE = "default"', "its one built-in voice"),
        ),
        "max_model_len": (cite(DEPLOY, 21, "max_model_len: 4096"),),
    },
)
