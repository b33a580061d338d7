"""vLLM-Omni's request refusals, in its order and its words, from one model's rules.

Why here: ``listenlab api`` must refuse what vLLM-Omni 0.30.0 refuses, with the same message,
and the remote backend must never send a field the served model refuses. Both read the model's
:class:`~backends.vllm_omni.model_table.SpeechRules` (the one model table) through this module,
which ports the checks of ``serving_speech.py`` (``_validate_speech_sample_rate``,
``_apply_uploaded_speaker``, ``_validate_ref_audio_format``) and of each seed model's adapter
``validate()`` (``tts_adapters/qwen3_tts.py``, ``fish_speech.py``, ``cosyvoice3.py``,
``moss_tts.py``, ``voxcpm2.py``). Each check returns the reference's message, or None.

The request is a :class:`RequestView`, changed in place the way the adapters change
``OpenAICreateSpeechRequest`` (Qwen3-TTS lower-cases the voice, title-cases the language and
infers ``task_type: "Base"`` from ``ref_audio``/``ref_text``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from backends.vllm_omni.model_table import MAX_NEW_TOKENS_RANGE, SpeechRules

REF_AUDIO_FORMAT = (
    "ref_audio must be a URL (http/https), base64 data URL (data:...), or file URI (file://...)"
)
"""``serving_speech.py`` ``_validate_ref_audio_format``."""

_VARIANT = re.compile(r"(?:^|[-_.])(custom[-_.]?voice|voice[-_.]?design|base)$")
_VARIANTS = {"customvoice": "CustomVoice", "voicedesign": "VoiceDesign", "base": "Base"}


@dataclass(frozen=True)
class Uploaded:
    """A voice uploaded to the server: from audio (``source="audio"``) or an embedding."""

    source: str = "audio"
    ref_text: str | None = None


@dataclass(frozen=True)
class RuleContext:
    """What the checks read besides the request: the model and the voices the server has."""

    model: str
    rules: SpeechRules
    speakers: frozenset[str] = frozenset()
    """Built-in voices, lower-case (a listenlab backend's own voices)."""
    uploaded: dict[str, Uploaded] = field(default_factory=dict)
    """Uploaded voices by lower-case name."""

    @property
    def available(self) -> frozenset[str]:
        """``_get_available_speakers``: built-in and uploaded."""
        base = self.speakers | frozenset(self.uploaded)
        return base | {"default"} if self.rules.reference_type == "voxcpm2" else base


@dataclass
class RequestView:
    """The fields of a speech request the checks read (and change, as the adapters do)."""

    input: str = ""
    voice: str | None = None
    task_type: str | None = None
    language: str | None = None
    instructions: str | None = None
    ref_audio: Any = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list | None = None
    max_new_tokens: int | None = None
    sample_rate: int | None = None

    @classmethod
    def of(cls, source: object) -> RequestView:
        """The fields of a validated body or session config (a missing one is None)."""
        return cls(**{k: getattr(source, k, None) for k in cls.__dataclass_fields__})


# --------------------------------------------------------------------------- server-level checks


def default_voice(view: RequestView, ctx: RuleContext) -> None:
    """``voice: "default"`` is the placeholder for none unless a speaker has that name."""
    if (
        view.voice is not None
        and view.voice.lower() == "default"
        and "default" not in ctx.available
    ):
        view.voice = None


def sample_rate_error(rules: SpeechRules, sample_rate: int | None) -> str | None:
    """``_validate_speech_sample_rate`` (listenlab's generic rule: a resampling range)."""
    if sample_rate is None:
        return None
    if rules.rate_range is not None:
        lo, hi = rules.rate_range
        if lo <= sample_rate <= hi:
            return None
        return (
            f"sample_rate={sample_rate} is not supported by the current TTS model; "
            f"supported rates: {lo}-{hi}"
        )
    if sample_rate in rules.sample_rates:
        return None
    if rules.sample_rates:
        rates = ", ".join(str(r) for r in sorted(rules.sample_rates))
        return (
            f"sample_rate={sample_rate} is not supported by the current TTS model; "
            f"supported rates: {rates}"
        )
    return "sample_rate is not supported by the current TTS model"


def ref_audio_format_error(ref_audio: Any) -> str | None:
    """``_validate_ref_audio_format``: a string with an http(s), data or file scheme."""
    if not isinstance(ref_audio, str):
        return REF_AUDIO_FORMAT
    if (urlparse(ref_audio).scheme or "").lower() not in {"http", "https", "data", "file"}:
        return REF_AUDIO_FORMAT
    return None


def max_new_tokens_error(value: int | None) -> str | None:
    lo, hi = MAX_NEW_TOKENS_RANGE
    if value is None:
        return None
    if value < lo:
        return f"max_new_tokens must be at least {lo}"
    if value > hi:
        return f"max_new_tokens cannot exceed {hi}"
    return None


def uploaded_speaker_error(view: RequestView, ctx: RuleContext) -> str | None:
    """``_apply_uploaded_speaker`` for models without built-in speakers (Fish Speech,
    CosyVoice3, MOSS-TTS-Nano): the voice must be uploaded (listenlab: or the backend's own);
    an uploaded voice lends its ``ref_text``."""
    if view.voice is None or view.ref_audio is not None:
        return None
    lower = view.voice.lower()
    if lower in ctx.uploaded:
        up = ctx.uploaded[lower]
        if up.source == "direct":
            return (
                f"Uploaded voice '{view.voice}' uses a speaker embedding "
                f"(Qwen3-only). Re-upload with an audio file for this model."
            )
        view.ref_audio = f"voice:{lower}"  # stands for the stored clip
        if (not view.ref_text or not view.ref_text.strip()) and up.ref_text:
            view.ref_text = up.ref_text
        return None
    if lower in ctx.speakers:
        return None  # a listenlab backend's own voice (docs/api.md: voice names)
    return (
        f"Unknown voice '{view.voice}'. {ctx.rules.no_speakers_label} has no "
        f"built-in speakers. Upload a voice first via "
        f"POST /v1/audio/voices, or use ref_audio + ref_text."
    )


# --------------------------------------------------------------------------- the adapters


def adapter_error(view: RequestView, ctx: RuleContext) -> str | None:
    """The model adapter's ``validate()``: the first refusal, or None."""
    rules = ctx.rules
    if rules.task_types:
        return qwen3_error(view, ctx)
    if rules.no_speakers_label:
        err = uploaded_speaker_error(view, ctx)
        if err:
            return err
    if not view.input or not view.input.strip():
        return "Input text cannot be empty"
    if rules.checks_voice and view.voice is not None:
        view.voice = view.voice.lower()
        if view.voice not in ctx.available:
            supported = ", ".join(sorted(ctx.available)) or "none"
            return f"Invalid voice '{view.voice}'. Supported: {supported}"
    if rules.requires_ref_audio and view.ref_audio is None:
        return rules.requires_ref_audio
    if view.ref_audio is not None and (rules.requires_ref_audio or rules.ref_text_message):
        err = ref_audio_format_error(view.ref_audio)
        if err:
            return err
        if rules.ref_text_message and (not view.ref_text or not view.ref_text.strip()):
            return rules.ref_text_message
    limit = rules.max_instructions
    if limit is not None and view.instructions and len(view.instructions) > limit:
        return f"Instructions too long (max {limit} characters)"
    if rules.checks_max_new_tokens:
        return max_new_tokens_error(view.max_new_tokens)
    return None


def qwen3_variant(model: str) -> str | None:
    """``Qwen3TTSAdapter._get_model_variant`` from the served name (the checkpoint's)."""
    for component in reversed(re.split(r"[\\/]+", model.rstrip("/\\"))):
        m = _VARIANT.search(component.lower())
        if m is not None:
            return _VARIANTS[re.sub(r"[-_.]", "", m.group(1))]
    return None


def embedding_dim(ctx: RuleContext) -> int | None:
    """The talker hidden size of the served Qwen3-TTS checkpoint (by its size in the name)."""
    name = ctx.model.lower()
    return next((dim for size, dim in ctx.rules.embedding_dims if size in name), None)


def qwen3_error(view: RequestView, ctx: RuleContext) -> str | None:
    """``Qwen3TTSAdapter.validate``, check for check."""
    if view.task_type is None and (view.ref_audio is not None or view.ref_text is not None):
        view.task_type = "Base"
    if view.voice is not None:
        view.voice = view.voice.lower()
        if view.voice in ctx.uploaded:
            view.task_type = "Base"
    task = view.task_type or "CustomVoice"
    variant = qwen3_variant(ctx.model)
    if variant is not None and task != variant:
        return (
            f"Qwen3-TTS {variant} checkpoint does not support task_type='{task}'. "
            f"Use task_type='{variant}' or load the matching {task} checkpoint."
        )
    if not view.input or not view.input.strip():
        return "Input text cannot be empty"
    err = qwen3_language_error(view, ctx.rules)
    if err:
        return err
    err = qwen3_task_error(view, ctx, task)
    if err:
        return err
    limit = ctx.rules.max_instructions
    if limit is not None and view.instructions and len(view.instructions) > limit:
        return f"Instructions too long (max {limit} characters)"
    return max_new_tokens_error(view.max_new_tokens)


def qwen3_language_error(view: RequestView, rules: SpeechRules) -> str | None:
    if view.language is None or rules.languages is None:
        return None
    view.language = view.language.title()
    if view.language not in rules.languages:
        return (
            f"Invalid language '{view.language}'. Supported: {', '.join(sorted(rules.languages))}"
        )
    return None


def qwen3_task_error(view: RequestView, ctx: RuleContext, task: str) -> str | None:
    """The task-dependent half of ``Qwen3TTSAdapter.validate``."""
    available = ctx.speakers | frozenset(ctx.uploaded)
    if task == "CustomVoice":
        if not available:
            return (
                "This model does not support CustomVoice task (no speakers configured). "
                "Use task_type='Base' with ref_audio/ref_text for voice cloning, "
                "or use a CustomVoice model."
            )
        if view.voice is not None and view.voice not in available:
            return f"Invalid voice '{view.voice}'. Supported: {', '.join(sorted(available))}"
    if view.speaker_embedding is not None:
        if task != "Base":
            return "'speaker_embedding' is only valid for Base task"
        if not view.speaker_embedding:
            return "'speaker_embedding' must be a non-empty list of floats"
        view.x_vector_only_mode = True
        dim = embedding_dim(ctx)
        if dim is not None and len(view.speaker_embedding) != dim:
            return (
                f"speaker_embedding has {len(view.speaker_embedding)} dimensions; expected {dim} "
                "for the loaded Qwen3-TTS model"
            )
    if task == "Base":
        err = qwen3_base_error(view, ctx)
        if err:
            return err
    if task != "Base":
        if view.ref_text is not None:
            return "'ref_text' is only valid for Base task"
        if view.x_vector_only_mode is not None:
            return "'x_vector_only_mode' is only valid for Base task"
    if task == "VoiceDesign" and not view.instructions:
        return "VoiceDesign task requires 'instructions' to describe the voice"
    return None


BASE_REF_TEXT = (
    "Base task requires non-empty 'ref_text' (transcript of "
    "the reference audio) unless 'x_vector_only_mode' is enabled"
)


def qwen3_base_error(view: RequestView, ctx: RuleContext) -> str | None:
    """What a Base (cloning) request needs: a clip or an embedding, and its transcript."""
    if view.voice is not None and view.voice in ctx.uploaded:
        return None
    if view.voice is None and view.ref_audio is None and view.speaker_embedding is None:
        return "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning"
    if view.voice is not None and view.ref_audio is None:
        return (
            f"Base task with built-in speaker '{view.voice}' requires 'ref_audio' for voice cloning"
        )
    if view.ref_audio is not None:
        err = ref_audio_format_error(view.ref_audio)
        if err:
            return err
    if not view.x_vector_only_mode and (not view.ref_text or not view.ref_text.strip()):
        return BASE_REF_TEXT
    return None


__all__ = [
    "BASE_REF_TEXT",
    "REF_AUDIO_FORMAT",
    "RequestView",
    "RuleContext",
    "Uploaded",
    "adapter_error",
    "default_voice",
    "embedding_dim",
    "max_new_tokens_error",
    "qwen3_variant",
    "ref_audio_format_error",
    "sample_rate_error",
]
