"""OmniVoice (``k2-fsa/OmniVoice``): a single diffusion stage (text, iterative unmasking, codebook
tokens, DAC), 24 kHz; optional cloning (a clip, its transcript optional); the unit.

Served through vLLM-Omni's pure-diffusion path: every answer is a whole file, streams included.
No embedded adapter (the diffusion engine is not ``AsyncOmni``'s AR path).
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    NO_RESAMPLING,
    SERVING,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import (
    EMPTY_INPUT,
    RequestView,
    RuleContext,
    SpeechRules,
    ref_audio_format_error,
    uploaded_speaker_error,
)

DEPLOY = "vllm_omni/deploy/omnivoice.yaml"
PIPELINE = "vllm_omni/model_executor/models/omnivoice/pipeline.py"


@dataclass(frozen=True)
class OmniVoiceRules(SpeechRules):
    """``_create_diffusion_speech``'s checks (``serving_speech.py:2326``): a non-blank input, a
    clip's scheme, then the voice, which must be uploaded (``_get_normalized_voice``)."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if view.ref_audio is not None:
            err = ref_audio_format_error(view.ref_audio)
            if err:
                return err
        if view.voice is not None:
            view.voice = view.voice.lower()
            available = ctx.available
            if view.voice not in available:
                supported = ", ".join(sorted(available | {"default"}))
                return f"Invalid voice '{view.voice}'. Supported: {supported}"
        return uploaded_speaker_error(view, ctx)


RULE_SOURCES = (
    cite(SERVING, 2326, "async def _create_diffusion_speech(", "ported as OmniVoiceRules.validate"),
    cite(SERVING, 2311, "def _get_normalized_voice(self, voice: str | None) -> str | None:"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="omnivoice",
    title="OmniVoice",
    keys=("omnivoice",),
    checkpoint="k2-fsa/OmniVoice",
    sample_rate=24000,
    channels=1,
    cloning=True,
    instructions=True,
    diffusion=True,
    rules=OmniVoiceRules(
        "omnivoice", rules_text(RULE_SOURCES), checks_voice=True, no_speakers_label="OmniVoice"
    ),
    schedule=ChunkSchedule(
        frame_hz=75.0,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=False,
        whole_file=True,
        sources=(
            cite(DEPLOY, 4, "async_chunk: false"),
            cite(PIPELINE, 23, "execution_type=StageExecutionType.DIFFUSION,"),
            cite(
                SERVING,
                2419,
                "final_output: OmniRequestOutput | None = None",
                "the diffusion path waits for the final output and answers a whole file",
            ),
        ),
        assumptions="One chunk, the whole utterance, for every request; the frame rate is not used.",
    ),
    sources={
        "sample_rate": (
            cite(
                "vllm_omni/transformers_utils/configs/omnivoice.py",
                80,
                'self.sample_rate = getattr(self, "sample_rate", 24000)',
            ),
        ),
        "channels": (cite(SERVING, 2442, "audio_tensor = audio_tensor.squeeze()", "one channel"),),
        "cloning": (
            cite(SERVING, 2353, 'prompt["ref_audio"] = (np.asarray(wav, dtype=np.float32), sr)'),
        ),
        "instructions": (cite(SERVING, 2363, 'prompt["instruct"] = request.instructions'),),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
    },
)
