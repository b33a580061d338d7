"""Audio8-TTS Preview (``Audio8/Audio8-TTS-Preview-0.6b``): slow AR + codec, 44.1 kHz, text-only
synthesis or zero-shot cloning with the clip's transcript; the unit.

No embedded adapter: its clone prompt is built model-side from the reference's codec codes
(``tts_adapters/audio8_tts.py`` ``_build_prompt``), so it is served remotely only.
"""

from __future__ import annotations

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import CLONE_REF_TEXT, SpeechRules

ADAPTER_FILE = f"{ADAPTERS_DIR}/audio8_tts.py"
DEPLOY = "vllm_omni/deploy/audio8_tts.yaml"
MODELS = "vllm_omni/model_executor/models/audio8_tts"
CONFIG = f"{MODELS}/configuration_audio8_tts.py"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/audio8_tts.py"

RULE_SOURCES = (
    cite(ADAPTER_FILE, 44, "def validate(self, request", "the shared check of rules.py"),
    cite(ADAPTER_FILE, 46, "err = server._apply_uploaded_speaker(request)", "no built-in speakers"),
    cite(ADAPTER_FILE, 57, "Voice cloning requires 'ref_text'"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="audio8_tts",
    title="Audio8-TTS Preview",
    keys=("audio8",),
    checkpoint="Audio8/Audio8-TTS-Preview-0.6b",
    sample_rate=44100,
    channels=1,
    cloning=True,
    max_model_len=2048,
    rules=SpeechRules(
        "audio8_tts",
        rules_text(RULE_SOURCES),
        ref_text_message=CLONE_REF_TEXT,
        no_speakers_label="Audio8 TTS",
    ),
    schedule=ChunkSchedule(
        frame_hz=44100 / 2048,
        first_frames=(4,) * 6,
        chunk_frames=25,
        async_chunk=True,
        left_context_frames=25,
        sources=(
            cite(DEPLOY, 9, "async_chunk: true"),
            cite(DEPLOY, 23, "initial_codec_chunk_frames: 4"),
            cite(DEPLOY, 21, "codec_chunk_frames: 25"),
            cite(DEPLOY, 22, "codec_left_context_frames: 25"),
            cite(
                PROCESSOR,
                125,
                "if initial_chunk_frames > 0 and length <= chunk_frames:",
                "initial-size chunks while the stream is at most codec_chunk_frames long",
            ),
            cite(
                PROCESSOR,
                137,
                "(chunk_frames // initial_chunk_frames) * initial_chunk_frames",
                "(25 // 4) * 4 = 24 frames as six 4-frame chunks, then 25-frame chunks",
            ),
            cite(
                CONFIG, 21, "ARKTTS_CODEC_FRAME_SIZE = 2048", "one frame: 44100 / 2048 = 21.53 Hz"
            ),
        ),
        assumptions="The schedule is Fish Speech's (the same stage input processor rule).",
    ),
    sources={
        "sample_rate": (
            cite(CONFIG, 22, "ARKTTS_CODEC_SAMPLE_RATE = 44100"),
            cite(f"{MODELS}/audio8_tts_codec_decoder.py", 78, '"codec_sample_rate", ARKTTS_CODEC'),
        ),
        "channels": (
            cite(
                f"{MODELS}/audio8_tts_codec_decoder.py",
                254,
                "waveform = waveform.reshape(-1).to(dtype=torch.float32)",
                "1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 52, "if request.ref_audio is not None:"),),
        "instructions": (
            cite(ADAPTER_FILE, 44, "def validate(self, request", "reads no instructions"),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 47, "max_model_len: 2048", "stage 0"),),
    },
)
