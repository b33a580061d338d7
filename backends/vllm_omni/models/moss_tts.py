"""MOSS-TTS (``OpenMOSS-Team/MOSS-TTS``, ``MossTTSDelayModel`` 8B): cloning from a clip, 24 kHz,
and its family, told apart by the checkpoint's name as vLLM-Omni does (``_detect_moss_variant``):
TTSD (two speakers), SoundEffect (``ambient_sound``), VoiceGenerator (``instructions``), Realtime
and Local-Transformer v1.5 (48 kHz stereo); the unit (the TTS variant) and its variants.

No embedded adapter: every variant runs the checkpoint's own processor in the server
(``trust_remote_code``), so it is served remotely only.
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
    ref_audio_format_error,
    uploaded_speaker_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/moss_tts.py"
DEPLOY = "vllm_omni/deploy/moss_tts.yaml"
CODEC = "vllm_omni/model_executor/models/moss_tts/modeling_moss_tts_codec.py"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/moss_tts.py"
LABELS = {"tts": "MOSS-TTS", "realtime": "MOSS-TTS-Realtime", "local": "MOSS-TTS-Local-Transformer"}


def moss_variant(model: str) -> str:
    """``_MossTTSAdapterBase._detect_moss_variant``: the family member named by the model."""
    name = (model or "").lower().replace("-", "").replace("_", "")
    for key, variant in (
        ("realtime", "realtime"),
        ("local", "local"),
        ("ttsd", "ttsd"),
        ("soundeffect", "sound_effect"),
        ("voicegenerator", "voice_generator"),
    ):
        if key in name:
            return variant
    return "tts"


@dataclass(frozen=True)
class MossRules(SpeechRules):
    """``_MossTTSAdapterBase.validate`` (``tts_adapters/moss_tts.py:397``) for the full family,
    the variant read from the served checkpoint's name."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        err = uploaded_speaker_error(view, ctx)
        if err:
            return err
        v = moss_variant(ctx.model)
        if (not view.input or not view.input.strip()) and v != "sound_effect":
            return EMPTY_INPUT
        if v in LABELS:
            if view.ref_audio is None:
                return f"{LABELS[v]} requires 'ref_audio' (reference audio for voice cloning)."
            return ref_audio_format_error(view.ref_audio)
        if v == "ttsd":
            if view.ref_audio is None:
                return "MOSS-TTSD requires 'ref_audio' (speaker 1 reference)."
            err = ref_audio_format_error(view.ref_audio)
            if err or view.ref_audio_2 is None:
                return err
            return ref_audio_format_error(view.ref_audio_2)
        if v == "sound_effect" and (not view.ambient_sound or not view.ambient_sound.strip()):
            return (
                "MOSS-SoundEffect requires 'ambient_sound' (natural language "
                "description of the sound effect to synthesise)."
            )
        if v == "voice_generator" and (not view.instructions or not view.instructions.strip()):
            return (
                "MOSS-VoiceGenerator requires 'instructions' (natural language voice "
                "description, e.g. 'a warm female voice with an American accent')."
            )
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 397, "def validate(self, request", "ported as MossRules.validate"),
    cite(ADAPTER_FILE, 126, "def _detect_moss_variant(self) -> str:", "ported as moss_variant"),
    NO_RESAMPLING,
)
RULES = MossRules(
    "moss_tts",
    rules_text(RULE_SOURCES),
    requires_ref_audio="MOSS-TTS requires 'ref_audio' (reference audio for voice cloning).",
)

MODEL = ModelUnit(
    name="moss_tts",
    title="MOSS-TTS",
    keys=(
        "moss-tts",
        "moss_tts",
        "mossttsd",
        "moss-ttsd",
        "moss-soundeffect",
        "moss-voicegenerator",
    ),
    checkpoint="OpenMOSS-Team/MOSS-TTS",
    sample_rate=24000,
    channels=1,
    cloning=True,
    max_model_len=4096,
    rules=RULES,
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=True,
        left_context_frames=0,
        whole_file=True,
        sources=(
            cite(DEPLOY, 4, "async_chunk: true"),
            cite(DEPLOY, 15, "codec_chunk_frames: 25", "not read by the delay model's processor:"),
            cite(
                PROCESSOR,
                156,
                "chunk_frames: int = 1 << 30",
                "'accumulate all codes and emit only on finish'",
            ),
            cite(DEPLOY, 16, "codec_left_context_frames: 0"),
        ),
        assumptions="One chunk, the whole utterance, until the port gets left context.",
    ),
    sources={
        "sample_rate": (
            cite(CODEC, 255, "_OUTPUT_SAMPLE_RATE: int = 24_000"),
            cite(DEPLOY, 1, "# MOSS-TTS (MossTTSDelayModel, 8B, n_vq=32, 24 kHz)"),
        ),
        "channels": (
            cite(
                CODEC, 810, 'inferred_channels = 2 if "v2" in codec_path.lower() else 1', "v1 codec"
            ),
        ),
        "cloning": (
            cite(ADAPTER_FILE, 431, "f\"{label} requires 'ref_audio' (reference audio for voice"),
        ),
        "instructions": (
            cite(
                ADAPTER_FILE,
                360,
                'user_kwargs["instruction"] = request.instructions or ""',
                "VoiceGenerator only",
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 26, "max_model_len: 4096"),),
    },
)

LOCAL = ModelUnit(
    name="moss_tts_local",
    title="MOSS-TTS-Local-Transformer v1.5",
    keys=("moss-tts-local", "mossttslocal", "moss_tts_local"),
    checkpoint="OpenMOSS-Team/MOSS-TTS-Local-Transformer-v1.5",
    sample_rate=48000,
    channels=2,
    cloning=True,
    rules=RULES,
    sources={
        "sample_rate": (
            assumed("48 kHz per vLLM-Omni's text_to_speech README (not in the wheel)"),
        ),
        "channels": (
            cite(
                CODEC, 810, 'inferred_channels = 2 if "v2" in codec_path.lower() else 1', "v2 codec"
            ),
        ),
    },
)
"""A variant known by name (the remote backend's rate for a raw stream): no profile of its own."""

VARIANTS = (LOCAL,)
