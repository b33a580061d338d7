"""GLM-TTS (``zai-org/GLM-TTS``): an AR speech-token LM, then a DiT and a vocoder, 24 kHz;
zero-shot cloning only (a clip and its transcript every time); the unit.

No embedded adapter: its text frontend and tokenizer come with the checkpoint
(``tts_adapters/glm_tts.py``), so it is served remotely only.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    STRETCHED,
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
    ref_audio_format_error,
    uploaded_speaker_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/glm_tts.py"
DEPLOY = "vllm_omni/deploy/glm_tts.yaml"
MODELS = "vllm_omni/model_executor/models/glm_tts"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/glm_tts.py"
NEEDS_CLIP = "GLM-TTS requires 'ref_audio' for zero-shot voice cloning"
NEEDS_TRANSCRIPT = "GLM-TTS voice cloning requires 'ref_text' (transcript of the reference audio)"


@dataclass(frozen=True)
class GlmRules(SpeechRules):
    """``GlmTTSAdapter.validate`` (``tts_adapters/glm_tts.py:90``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        err = uploaded_speaker_error(view, ctx)
        if err:
            return err
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if view.ref_audio is None:
            return NEEDS_CLIP
        err = ref_audio_format_error(view.ref_audio)
        if err:
            return err
        if not view.ref_text or not view.ref_text.strip():
            return NEEDS_TRANSCRIPT
        lo, hi = MAX_NEW_TOKENS_RANGE
        if view.max_new_tokens is not None and view.max_new_tokens < lo:
            return f"max_new_tokens must be >= {lo}"
        if view.max_new_tokens is not None and view.max_new_tokens > hi:
            return f"max_new_tokens cannot exceed {hi}"
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 90, "def validate(self, request", "ported as GlmRules.validate"),
    cite(ADAPTER_FILE, 100, "requires 'ref_audio' for zero-shot voice cloning"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="glm_tts",
    title="GLM-TTS",
    keys=("glm-tts", "glm_tts"),
    checkpoint="zai-org/GLM-TTS",
    sample_rate=24000,
    channels=1,
    cloning=True,
    max_model_len=2048,
    rules=GlmRules(
        "glm_tts",
        rules_text(RULE_SOURCES),
        requires_ref_audio=NEEDS_CLIP,
        ref_text_message=NEEDS_TRANSCRIPT,
        no_speakers_label="GLM-TTS",
    ),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(25, 50),
        chunk_frames=200,
        async_chunk=True,
        left_context_frames=25,
        sources=(
            cite(DEPLOY, 14, "async_chunk: true"),
            cite(DEPLOY, 26, "codec_chunk_frames: [25, 50, 200]"),
            cite(DEPLOY, 27, "codec_left_context_frames: 25"),
            cite(PROCESSOR, 337, "idx = min(chunk_count, len(progressive_chunk_sizes) - 1)"),
            cite(f"{MODELS}/glm_tts_dit_wrapper.py", 52, '"input_frame_rate": 25,', "25 tokens/s"),
        ),
        assumptions=(
            "Each chunk's audio is its speech tokens' share (the DiT re-reads 25 tokens of "
            "left context and returns only the new part)."
        ),
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/glm_tts_dit_wrapper.py", 56, '"sample_rate": 24000,'),
            cite(f"{MODELS}/vocoder.py", 78, "self.sample_rate = 24000"),
        ),
        "channels": (
            cite(
                f"{MODELS}/glm_tts_dit_wrapper.py",
                536,
                "audios[idx] = audio.reshape(-1).to(dtype=torch.float32)",
                "1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 99, "if request.ref_audio is None:"),),
        "instructions": (
            cite(ADAPTER_FILE, 90, "def validate(self, request", "reads no instructions"),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 41, "max_model_len: 2048", "stage 0"),),
    },
)
