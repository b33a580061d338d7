"""MiniMax Music 3 (``MiniMaxAI/MiniMax-Music3``): text to music on the speech endpoint (lyrics in
``input``, the caption in ``instructions``), 32 kHz stereo; the unit.

No embedded adapter: the checkpoint's tokenizer and the two-stage AR + DiT pipeline need a
large GPU; it is served remotely only.
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
from backends.vllm_omni.rules import RequestView, RuleContext, SpeechRules

ADAPTER_FILE = f"{ADAPTERS_DIR}/minimax_music3.py"
DEPLOY = "vllm_omni/deploy/minimax_music3.yaml"
MODELS = "vllm_omni/model_executor/models/minimax_music3"
MAX_CAPTION_CHARS = 20_000
MAX_AUDIO_FRAMES = 9_000
"""``constants.MAX_AUDIO_FRAMES``: six minutes at 25 frames per second."""
INTERNAL_CFG_KEYS = ("cfg_role", "cfg_pair_id", "cfg_null_prompt")
FIXED_SAMPLING = ("temperature", "top_p", "top_k", "repetition_penalty")
NAME = "MiniMax Music 3"


@dataclass(frozen=True)
class MusicRules(SpeechRules):
    """``MiniMaxMusic3Adapter.validate`` (``tts_adapters/minimax_music3.py:61``)."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return f"{NAME} requires non-empty 'input' carrying the lyrics"
        caption = view.instructions
        if not isinstance(caption, str) or not caption.strip():
            return (
                f"{NAME} requires 'instructions' describing the music "
                "(genre, instrumentation, tempo, mood); it is what decides the arrangement"
            )
        if len(caption) > MAX_CAPTION_CHARS:
            return f"'instructions' exceeds the maximum length of {MAX_CAPTION_CHARS} characters"
        if view.max_new_tokens is not None and view.max_new_tokens < 1:
            return "'max_new_tokens' must be at least 1"
        if view.max_new_tokens is not None and view.max_new_tokens > MAX_AUDIO_FRAMES:
            return (
                "'max_new_tokens' counts audio frames at 25 per second "
                f"and cannot exceed {MAX_AUDIO_FRAMES}"
            )
        return refused_field_error(view)


def refused_field_error(view: RequestView) -> str | None:
    """What a speech request may carry and music has no use for."""
    voice = (view.voice or "").strip().lower()
    if voice not in ("", "default"):
        return (
            f"{NAME} has no speaker to select; the vocal comes from "
            f"'instructions'. Omit 'voice' or pass 'default'; got {view.voice!r}"
        )
    if view.ref_audio is not None or view.ref_text is not None:
        return f"{NAME} does not support reference-audio conditioning"
    if view.language is not None:
        return f"{NAME} has no language tag; the language follows the lyrics"
    if view.task_type is not None:
        return f"{NAME} does not support 'task_type'"
    if view.speed is not None and float(view.speed) != 1.0:
        return f"{NAME} only supports speed=1.0; put the tempo in 'instructions', e.g. 'at 92 BPM'"
    extra = view.extra_params if isinstance(view.extra_params, dict) else {}
    for key in INTERNAL_CFG_KEYS:
        if key in extra:
            return f"extra_params.{key} is managed internally by the server and cannot be set"
    rejected = sorted(k for k in FIXED_SAMPLING if extra.get(k) is not None)
    if rejected:
        return f"{NAME} has fixed sampling and does not accept: " + ", ".join(rejected)
    return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 61, "def validate(self, request", "ported as MusicRules.validate"),
    cite(ADAPTER_FILE, 36, "_MAX_CAPTION_CHARS = 20_000"),
    cite(f"{MODELS}/constants.py", 14, "MAX_AUDIO_FRAMES = 9_000"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="minimax_music3",
    title="MiniMax Music 3",
    keys=("minimax-music", "minimax_music"),
    checkpoint="MiniMaxAI/MiniMax-Music3",
    sample_rate=32000,
    channels=2,
    instructions=True,
    max_model_len=10240,
    rules=MusicRules(
        "minimax_music3", rules_text(RULE_SOURCES), max_instructions=MAX_CAPTION_CHARS
    ),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(125,),
        chunk_frames=100,
        async_chunk=True,
        sources=(
            cite(DEPLOY, 13, "async_chunk: true"),
            cite(f"{MODELS}/constants.py", 50, "AR_CHUNK_FRAMES = 200", "200-frame windows"),
            cite(f"{MODELS}/constants.py", 51, "AR_CHUNK_HOP_FRAMES = 100", "on a 100-frame hop"),
            cite(f"{MODELS}/constants.py", 13, "AUDIO_FRAME_RATE = 25"),
            cite(
                f"{MODELS}/chunking.py",
                87,
                "right = 0 if window.is_last else (HOP_MEL_FRAMES - BLEND_MEL_FRAMES) * DAV_HOP_SAMPLES",
                "each window keeps its unique part",
            ),
        ),
        assumptions=(
            "Derived: the first window keeps its head and loses (344 - 86) mel frames of 512 "
            "samples at 44.1 kHz (about 3 s, 75 AR frames) on the right, so the first chunk is "
            "about 125 frames (5 s); each later window adds one 100-frame hop (4 s). Music is "
            "slow to make: the deploy waits up to 30 s for the first window."
        ),
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/constants.py", 55, "OUTPUT_SAMPLE_RATE = 32_000"),
            cite(
                f"{MODELS}/acoustic.py",
                441,
                "sr_tensor = torch.tensor(OUTPUT_SAMPLE_RATE, dtype=torch.int32)",
            ),
        ),
        "channels": (cite(f"{MODELS}/constants.py", 56, "OUTPUT_CHANNELS = 2"),),
        "cloning": (cite(ADAPTER_FILE, 90, "does not support reference-audio conditioning"),),
        "instructions": (
            cite(ADAPTER_FILE, 114, "prompt = build_prompt(request.instructions, request.input)"),
        ),
        "speed_streaming": (
            cite(ADAPTER_FILE, 96, "only supports speed=1.0", "refused, even stretched"),
        ),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 49, "max_model_len: 10240", "stage 0"),),
    },
)
