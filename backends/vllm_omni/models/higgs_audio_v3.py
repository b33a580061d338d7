"""Higgs-Audio v3 TTS (``bosonai/higgs-audio-v3-tts-4b``, the ``higgs_multimodal_qwen3``
deploy): text to speech, cloning from a clip (its transcript optional); the unit.

No embedded adapter: its prompt and reference codes come from the checkpoint's tokenizer and
codec (``tts_adapters/higgs_audio_v3.py``), so it is served remotely only.
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
    MAX_NEW_TOKENS_RANGE,
    RequestView,
    RuleContext,
    SpeechRules,
    uploaded_speaker_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/higgs_audio_v3.py"
DEPLOY = "vllm_omni/deploy/higgs_multimodal_qwen3.yaml"
CODE2WAV = "vllm_omni/model_executor/models/higgs_audio_v3/higgs_audio_v3_code2wav.py"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/higgs_audio_v3.py"


@dataclass(frozen=True)
class HiggsV3Rules(SpeechRules):
    """``HiggsAudioV3Adapter.validate`` (``tts_adapters/higgs_audio_v3.py:185``): an uploaded
    voice or none, a non-blank input, ``max_new_tokens`` at least 1; nothing else."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        err = uploaded_speaker_error(view, ctx)
        if err:
            return err
        if not view.input or not view.input.strip():
            return "higgs_audio_v3: input text cannot be empty"
        lo, _ = MAX_NEW_TOKENS_RANGE
        if view.max_new_tokens is not None and view.max_new_tokens < lo:
            return f"max_new_tokens must be at least {lo}"
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 185, "def validate(self, request", "ported as HiggsV3Rules.validate"),
    cite(ADAPTER_FILE, 194, "# Voice clone ref_text is optional for v3"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="higgs_audio_v3",
    title="Higgs-Audio v3 TTS",
    keys=("higgs-audio-v3", "higgs_audio_v3", "higgsaudiov3"),
    checkpoint="bosonai/higgs-audio-v3-tts-4b",
    sample_rate=24000,
    channels=1,
    cloning=True,
    max_model_len=8192,
    rules=HiggsV3Rules(
        "higgs_audio_v3", rules_text(RULE_SOURCES), no_speakers_label="Higgs-Audio V3"
    ),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(1,),
        chunk_frames=25,
        async_chunk=True,
        left_context_frames=25,
        sources=(
            cite(DEPLOY, 13, "async_chunk: true"),
            cite(DEPLOY, 30, "initial_codec_chunk_frames: 1"),
            cite(DEPLOY, 27, "codec_chunk_frames: 25"),
            cite(DEPLOY, 28, "codec_left_context_frames: 25"),
            cite(DEPLOY, 29, "codec_right_holdback_frames: 4", "held back until the next chunk"),
            cite(
                PROCESSOR,
                296,
                "if emitted == 0 and 0 < configured_initial_chunk_size < chunk_size:",
            ),
            cite(CODE2WAV, 87, "self.hop_length: int = 960", "960 samples a frame"),
        ),
        assumptions=(
            "25 frames per second (the hop of 960 at 24 kHz); the 4 held-back frames come with "
            "the next chunk, so chunk sizes stay 1, then 25."
        ),
    ),
    sources={
        "sample_rate": (
            cite(CODE2WAV, 84, "self.sample_rate: int = int(self.config.sample_rate)"),
            assumed(
                "24 kHz: the checkpoint config's sample_rate is not in the wheel; the hop of "
                "960 is v2's 25 fps at 24 kHz"
            ),
        ),
        "channels": (
            cite(
                CODE2WAV,
                561,
                "wavs.append(pcm.squeeze(0).squeeze(0).to(torch.float32).cpu())",
                "1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 60, "# Voice clone"),),
        "instructions": (
            cite(ADAPTER_FILE, 57, "prompt_ids = adapter.build_prompt(request.input)"),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 55, "max_model_len: 8192"),),
    },
)
