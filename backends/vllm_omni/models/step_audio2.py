"""Step-Audio2 (``stepfun-ai/Step-Audio2``): a thinker that reads the text aloud after
``<tts_start>``, then Token2Wav, 24 kHz; one voice (its prompt wav), no cloning; the unit.

The speech endpoint checks nothing but a blank input; ``instructions`` becomes the system
prompt. No embedded adapter (the thinker runs with its multimodal stack on a GPU).
"""

from __future__ import annotations

from backends.vllm_omni.models.covo_audio import InputOnlyRules
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

ADAPTER_FILE = f"{ADAPTERS_DIR}/step_audio2.py"
DEPLOY = "vllm_omni/deploy/step_audio_2.yaml"
MODELS = "vllm_omni/model_executor/models/step_audio2"

RULE_SOURCES = (
    cite(ADAPTER_FILE, 26, "def validate(self, request", "ported as InputOnlyRules.validate"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="step_audio2",
    title="Step-Audio2",
    keys=("step-audio2", "step-audio-2", "step_audio2", "stepaudio2"),
    checkpoint="stepfun-ai/Step-Audio2",
    sample_rate=24000,
    channels=1,
    instructions=True,
    open_voices=True,
    rules=InputOnlyRules("step_audio2", rules_text(RULE_SOURCES), reads_ref_audio=False),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=False,
        whole_file=True,
        sources=(
            cite(
                DEPLOY,
                4,
                "async_chunk: false",
                "'Sequential mode waits for the full Thinker output'",
            ),
            cite(
                f"{MODELS}/step_audio2_constants.py",
                60,
                "chunk_size: int = 25",
                "used only by the opt-in async deploy",
            ),
        ),
        assumptions=(
            "The pipeline names no default deploy; the shipped step_audio_2.yaml is sequential "
            "(one chunk, the whole utterance). step_audio_2_async_chunk.yaml would stream 25 "
            "tokens per chunk with 3 of lookahead."
        ),
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/step_audio2_constants.py", 52, "sample_rate: int = 24000"),
        ),
        "channels": (
            cite(
                f"{MODELS}/step_audio2_token2wav.py", 434, "return speech.squeeze(0)", "one channel"
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 20, "no uploaded-voice / ref-audio handling"),),
        "instructions": (
            cite(
                ADAPTER_FILE,
                39,
                'system_prompt = request.instructions or "You are a voice assistant',
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "presets": (assumed("validate never reads voice: any name is accepted, one voice speaks"),),
    },
)
