"""Covo-Audio-Chat (``tencent/Covo-Audio-Chat``): a spoken-dialogue model whose fused
thinker-talker reads the text aloud in its one fixed voice, 24 kHz; the unit.

The speech endpoint checks nothing but a blank input: voice, language, instructions and a
reference clip are accepted and unused. No embedded adapter: its prompt needs the checkpoint's
chat tokenizer (``covo_audio/prompt_utils.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    SERVING,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    assumed,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import EMPTY_INPUT, RequestView, RuleContext, SpeechRules

ADAPTER_FILE = f"{ADAPTERS_DIR}/covo_audio.py"
DEPLOY = "vllm_omni/deploy/covo_audio.yaml"
MODELS = "vllm_omni/model_executor/models/covo_audio"


@dataclass(frozen=True)
class InputOnlyRules(SpeechRules):
    """An adapter whose ``validate`` only refuses a blank input (Covo-Audio, Step-Audio2)."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 30, "def validate(self, request", "ported as InputOnlyRules.validate"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="covo_audio",
    title="Covo-Audio-Chat",
    keys=("covo-audio", "covo_audio"),
    checkpoint="tencent/Covo-Audio-Chat",
    sample_rate=24000,
    channels=1,
    open_voices=True,
    rules=InputOnlyRules("covo_audio", rules_text(RULE_SOURCES), reads_ref_audio=False),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=False,
        whole_file=True,
        sources=(
            cite(DEPLOY, 6, "async_chunk: false — pipeline defines no async-chunk processor"),
            cite(DEPLOY, 14, "async_chunk: false"),
            cite(
                f"{MODELS}/pipeline.py",
                33,
                'custom_process_next_stage_input_func=f"{_PROC}.llm2code2wav_full_payload"',
                "the vocoder gets the full code sequence once",
            ),
        ),
        assumptions="One chunk, the whole utterance; the frame rate is not used.",
    ),
    sources={
        "sample_rate": (
            cite(SERVING, 2241, 'sr_raw = audio_output.get("sr", 24000)', "its output has no sr"),
            cite(f"{MODELS}/covo_audio_code2wav.py", 78, '"sample_rate": 24000,'),
        ),
        "channels": (
            cite(
                f"{MODELS}/covo_audio.py",
                419,
                '"model_outputs": audio_tensor.reshape(1, -1)',
                "(1, n): one channel",
            ),
        ),
        "cloning": (
            cite(
                f"{MODELS}/covo_audio_code2wav.py",
                59,
                'prompt_dir = os.path.join(os.path.dirname(__file__), "speaker_prompt")',
                "one fixed speaker prompt shipped with the code",
            ),
        ),
        "instructions": (
            cite(
                ADAPTER_FILE,
                54,
                "build_covo_audio_prompt_token_ids(self._tokenizer, request.input)",
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "presets": (
            assumed("validate never reads voice: any name is accepted and the fixed voice speaks"),
        ),
    },
)
