"""Ming-omni-tts, the dense 0.5B (``inclusionAI/Ming-omni-tts-0.5B``): an LLM with a flow head
and AudioVAE, 44.1 kHz; voices are IP labels, cloning from one clip (or several, "podcast"
style) or a 192-d speaker embedding; the unit.

No embedded adapter: its prompt comes from the checkpoint's tokenizer
(``ming_tts/prompt_assembly.py``), so it is served remotely only.
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
    RequestView,
    RuleContext,
    SpeechRules,
    max_new_tokens_error,
    ref_audio_format_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/ming_tts.py"
DEPLOY = "vllm_omni/deploy/ming_tts.yaml"
MODELS = "vllm_omni/model_executor/models/ming_tts"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/ming_tts.py"
SPEAKER_EMBEDDING_DIM = 192
"""``ming_tts/constants.py`` ``SPEAKER_EMBEDDING_DIM``."""


@dataclass(frozen=True)
class MingRules(SpeechRules):
    """``MingTTSAdapter.validate`` (``tts_adapters/ming_tts.py:168``): one speaker, or the
    "podcast" form when ``ref_audio`` is a list."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if isinstance(view.ref_audio, list):
            return podcast_error(view, ctx)
        return single_error(view, ctx)


def tail_error(view: RequestView, ctx: RuleContext) -> str | None:
    """The instructions and ``max_new_tokens`` checks both forms end with."""
    if view.instructions and len(view.instructions) > ctx.max_instructions:
        return f"Instructions too long (max {ctx.max_instructions} characters)"
    return max_new_tokens_error(view.max_new_tokens)


def single_error(view: RequestView, ctx: RuleContext) -> str | None:
    """``_validate_ming_tts_single_speaker_request``."""
    if view.ref_audio is not None:
        err = ref_audio_format_error(view.ref_audio)
        if err:
            return err
    if view.speaker_embedding is not None and not view.speaker_embedding:
        return "'speaker_embedding' must be a non-empty list of floats"
    voice = view.voice.lower() if isinstance(view.voice, str) else None
    uploaded = bool(voice and voice in ctx.uploaded)
    clone = view.ref_audio is not None or view.speaker_embedding is not None or uploaded
    if view.task_type == "Base" and not clone:
        return "Base task requires 'ref_audio', 'speaker_embedding', or an uploaded voice sample"
    if view.ref_audio is not None and view.ref_text is not None and not view.ref_text.strip():
        return "'ref_text' must be non-empty when provided with 'ref_audio'"
    if view.ref_text is not None and view.ref_audio is None and not uploaded:
        return "'ref_text' requires 'ref_audio' or an uploaded voice sample"
    return tail_error(view, ctx)


def podcast_error(view: RequestView, ctx: RuleContext) -> str | None:
    """``_validate_ming_tts_podcast_request``: two or more clips, one transcript."""
    clips = view.ref_audio
    if len(clips) < 2:
        return "Podcast-style Ming requests require at least two 'ref_audio' clips"
    for clip in clips:
        err = ref_audio_format_error(clip)
        if err:
            return err
    if not view.ref_text or not view.ref_text.strip():
        return "Podcast-style Ming requests require non-empty 'ref_text'"
    embeddings = view.speaker_embedding
    if embeddings is not None:
        nested = bool(embeddings) and isinstance(embeddings[0], list)
        count = len(embeddings) if nested else 1
        if count != len(clips):
            return (
                "Podcast-style Ming requests require one speaker embedding per ref_audio clip; "
                f"got {count} embeddings for {len(clips)} clips"
            )
        if nested and any(len(item) != SPEAKER_EMBEDDING_DIM for item in embeddings):
            return (
                "Podcast-style Ming speaker embeddings must each have "
                f"{SPEAKER_EMBEDDING_DIM} dimensions"
            )
    return tail_error(view, ctx)


RULE_SOURCES = (
    cite(ADAPTER_FILE, 168, "def validate(self, request", "ported as MingRules.validate"),
    cite(ADAPTER_FILE, 243, "def _validate_ming_tts_single_speaker_request(self, request"),
    cite(ADAPTER_FILE, 286, "def _validate_ming_tts_podcast_request(self, request"),
    cite(f"{MODELS}/constants.py", 46, "SPEAKER_EMBEDDING_DIM = 192"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="ming_tts",
    title="Ming-omni-tts (dense)",
    keys=("ming-omni-tts", "ming_tts", "ming-tts"),
    checkpoint="inclusionAI/Ming-omni-tts-0.5B",
    sample_rate=44100,
    channels=1,
    cloning=True,
    instructions=True,
    open_voices=True,
    max_model_len=8192,
    rules=MingRules("ming_tts", rules_text(RULE_SOURCES)),
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(4,),
        chunk_frames=25,
        async_chunk=True,
        left_context_frames=None,
        sources=(
            cite(DEPLOY, 8, "async_chunk: true"),
            cite(DEPLOY, 18, "initial_latent_chunk_size: 4"),
            cite(DEPLOY, 17, "latent_chunk_size: 25"),
            cite(
                PROCESSOR,
                239,
                "use_first_chunk = 0 < initial_chunk_size < chunk_size and seen_patch_len == 0",
            ),
            cite(
                ADAPTER_FILE,
                345,
                "rate = float(sample_rate) / float(audio_frame_hop * patch_size)",
                "44100 / (882 x 4) = 12.5 patches per second",
            ),
            cite(f"{MODELS}/constants.py", 49, "AUDIO_FRAME_HOP = 882"),
        ),
        assumptions=(
            "A latent patch is 4 AudioVAE frames of 882 samples (80 ms); the VAE keeps its own "
            "state per request, so each chunk is exactly its patches' audio (no left context)."
        ),
    ),
    sources={
        "sample_rate": (cite(f"{MODELS}/constants.py", 45, "SAMPLE_RATE = 44100"),),
        "channels": (
            cite(
                f"{MODELS}/ming_tts_audio_vae.py",
                92,
                "waveform_parts.append(waveform.reshape(-1).to(torch.float32))",
                "1-D: mono",
            ),
        ),
        "cloning": (
            cite(ADAPTER_FILE, 264, "clone_source_present = request.ref_audio is not None"),
        ),
        "instructions": (
            cite(ADAPTER_FILE, 130, "instruction=self._parse_ming_instruction(request),"),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "presets": (
            cite(
                ADAPTER_FILE,
                28,
                'instruction_dict["IP"] = request.voice',
                "any voice is an IP label",
            ),
        ),
        "max_model_len": (cite(DEPLOY, 29, "max_model_len: 8192", "stage 0"),),
    },
)
