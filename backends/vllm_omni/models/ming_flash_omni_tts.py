"""Ming-flash-omni-2.0 as a standalone TTS talker (``inclusionAI/Ming-flash-omni-2.0``, the
``ming_flash_omni_tts`` deploy): preset voices (IP labels) and a style caption, 44.1 kHz,
whole files; the unit.

No embedded adapter: the talker needs the checkpoint's tokenizer, AudioVAE and voice presets.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    assumed,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import EMPTY_INPUT, RequestView, RuleContext, SpeechRules

ADAPTER_FILE = f"{ADAPTERS_DIR}/ming_flash_omni_tts.py"
DEPLOY = "vllm_omni/deploy/ming_flash_omni_tts.yaml"
TALKER = "vllm_omni/model_executor/models/ming_flash_omni/ming_flash_omni_talker.py"
LABEL = "Ming-flash-omni TTS"


@dataclass(frozen=True)
class MingFlashRules(SpeechRules):
    """``MingFlashOmniTTSAdapter.validate`` (``tts_adapters/ming_flash_omni_tts.py:28``)."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if view.instructions is not None:
            if not isinstance(view.instructions, str):
                return "instructions must be a string"
            if len(view.instructions) > ctx.max_instructions:
                return f"instructions exceeds max length {ctx.max_instructions}"
        for name in ("task_type", "language", "x_vector_only_mode", "initial_codec_chunk_frames"):
            if getattr(view, name) is not None:
                said = " (language is inferred from input text)" if name == "language" else ""
                return f"'{name}' is not supported for {LABEL}{said}"
        if view.ref_audio is not None:
            return (
                f"'ref_audio' is not yet supported for {LABEL}; "
                "use a preset 'voice' or 'speaker_embedding' instead"
            )
        if view.ref_text is not None:
            return f"'ref_text' is not yet supported for {LABEL}"
        if view.max_new_tokens is not None and view.max_new_tokens <= 0:
            return "'max_new_tokens' must be a positive integer"
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 28, "def validate(self, request", "ported as MingFlashRules.validate"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="ming_flash_omni_tts",
    title="Ming-flash-omni-2.0 TTS",
    keys=("ming-flash-omni",),
    checkpoint="inclusionAI/Ming-flash-omni-2.0",
    sample_rate=44100,
    channels=1,
    instructions=True,
    open_voices=True,
    rules=MingFlashRules("ming_flash_omni_tts", rules_text(RULE_SOURCES)),
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=False,
        whole_file=True,
        sources=(
            cite(DEPLOY, 7, "async_chunk: false"),
            cite(DEPLOY, 21, "max_tokens: 1", "one engine step decodes the whole utterance"),
        ),
        assumptions="One chunk, the whole utterance; the frame rate is not used.",
    ),
    sources={
        "sample_rate": (
            cite(
                TALKER,
                505,
                'multimodal_outputs["sr"] = torch.tensor(self.audio_vae.config.sample_rate)',
            ),
            cite(
                "vllm_omni/model_executor/models/common/ming/audio_vae.py",
                21,
                "sample_rate=44100,",
                "the AudioVAE config's default",
            ),
        ),
        "channels": (assumed("the AudioVAE decodes one waveform per request (mono)"),),
        "cloning": (
            cite(ADAPTER_FILE, 54, "'ref_audio' is not yet supported for Ming-flash-omni TTS"),
        ),
        "instructions": (
            cite(
                ADAPTER_FILE, 76, "caption_fields = parse_ming_instruction_fields(server, request)"
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "presets": (
            cite(
                ADAPTER_FILE,
                85,
                '"voice_name": request.voice or None,',
                "any voice name goes to the talker's preset registry, unchecked",
            ),
        ),
    },
)
