"""Voxtral TTS (``mistralai/Voxtral-4B-TTS-2603``): a generator and Mistral's audio tokenizer,
24 kHz, preset voices (the open checkpoint cannot clone: it has no encoder weights); the unit.

No embedded adapter: its prompt is ``mistral_common``'s speech request encoding with the
checkpoint's tokenizer (``tts_adapters/voxtral.py``), so it is served remotely only.
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
from backends.vllm_omni.rules import (
    EMPTY_INPUT,
    RequestView,
    RuleContext,
    SpeechRules,
    max_new_tokens_error,
    ref_audio_format_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/voxtral.py"
DEPLOY = "vllm_omni/deploy/voxtral_tts.yaml"
TOKENIZER = "vllm_omni/model_executor/models/voxtral_tts/voxtral_tts_audio_tokenizer.py"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/voxtral_tts.py"
NO_ENCODER = (
    "Voice cloning with 'ref_audio' requires the full Voxtral checkpoint "
    "with encoder weights. The open-source variant only supports "
    "preset voices via the 'voice' parameter."
)
PRESETS = (
    "casual_female",
    "casual_male",
    "cheerful_female",
    "neutral_female",
    "neutral_male",
    "ar_male",
    *(
        f"{lang}_{sex}"
        for lang in ("de", "es", "fr", "hi", "it", "nl", "pt")
        for sex in ("female", "male")
    ),
)


@dataclass(frozen=True)
class VoxtralRules(SpeechRules):
    """``VoxtralTTSAdapter.validate`` (``tts_adapters/voxtral.py:68``), then ``_build_prompt``'s
    refusal of a clip on the open checkpoint (raised before generation: a 400 too)."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if view.voice is None and view.ref_audio is None:
            return "Either 'voice' (preset speaker) or 'ref_audio' (voice cloning) must be provided"
        if view.ref_audio is not None:
            err = ref_audio_format_error(view.ref_audio)
            if err:
                return err
        if view.voice is not None:
            view.voice = view.voice.lower()
            presets = ctx.speakers
            if presets and view.voice not in presets:
                return f"Invalid speaker '{view.voice}'. Supported: {', '.join(sorted(presets))}"
        err = max_new_tokens_error(view.max_new_tokens)
        if err:
            return err
        if view.ref_audio is not None:
            return NO_ENCODER
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 68, "def validate(self, request", "ported as VoxtralRules.validate"),
    cite(ADAPTER_FILE, 36, "if ref_audio is not None and not self._encoder_loaded:"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="voxtral_tts",
    title="Voxtral TTS",
    keys=("voxtral",),
    checkpoint="mistralai/Voxtral-4B-TTS-2603",
    sample_rate=24000,
    channels=1,
    presets=PRESETS,
    max_model_len=4096,
    rules=VoxtralRules("voxtral_tts", rules_text(RULE_SOURCES), checks_voice=True),
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(5,) * 5,
        chunk_frames=25,
        async_chunk=True,
        left_context_frames=25,
        sources=(
            cite(DEPLOY, 7, "async_chunk: true"),
            cite(DEPLOY, 18, "codec_chunk_frames_at_begin: 5"),
            cite(DEPLOY, 17, "codec_chunk_frames: 25"),
            cite(DEPLOY, 19, "codec_left_context_frames: 25"),
            cite(PROCESSOR, 84, "if length <= chunk_size:", "5-frame chunks until 25 frames"),
        ),
        assumptions=(
            "12.5 frames per second: 24000 / (patch 240 x the encoder's strides), the strides "
            "being the checkpoint's (assumed to multiply to 8, an 80 ms frame)."
        ),
    ),
    sources={
        "sample_rate": (cite(TOKENIZER, 62, "sampling_rate: int = 24000"),),
        "channels": (cite(TOKENIZER, 61, "channels: int = 1"),),
        "cloning": (cite(ADAPTER_FILE, 39, "The open-source variant only supports"),),
        "instructions": (
            cite(
                ADAPTER_FILE, 55, "SpeechRequest(input=request.input, voice=request.voice)", "none"
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "presets": (
            cite(
                ADAPTER_FILE,
                112,
                "config = self.ctx.engine_client.model_config.hf_config.audio_config",
            ),
            assumed(
                "the names: the voxtral_tts gradio demo's fallback list "
                "(shared/reference/vllm-omni-speech-api.md section 6); the checkpoint's wins"
            ),
        ),
        "max_model_len": (cite(DEPLOY, 30, "max_model_len: 4096", "stage 0"),),
    },
)
