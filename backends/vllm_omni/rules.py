"""vLLM-Omni's request refusals, in its order and its words: the checks every model shares.

Why here: ``listenlab api`` must refuse what vLLM-Omni 0.30.0 refuses, with the same message,
and the remote backend must never send a field the served model refuses. A model's own rules
are a :class:`SpeechRules` value in its module (``backends/vllm_omni/models/<model>.py``); this
module holds the type, the server-level checks of ``serving_speech.py``
(``_validate_speech_sample_rate``, ``_apply_uploaded_speaker``, ``_validate_ref_audio_format``)
and the adapter check that most models share (:meth:`SpeechRules.validate`, the shape of
Fish Speech's, CosyVoice3's, MOSS-TTS-Nano's and VoxCPM2's ``validate()``). A model whose
adapter checks more (Qwen3-TTS's task types) subclasses :class:`SpeechRules` in its module and
overrides ``validate``. Each check returns the reference's message, or None.

The request is a :class:`RequestView`, changed in place the way the adapters change
``OpenAICreateSpeechRequest`` (Qwen3-TTS lower-cases the voice, title-cases the language and
infers ``task_type: "Base"`` from ``ref_audio``/``ref_text``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

MAX_NEW_TOKENS_RANGE = (1, 4096)
"""What every model's adapter accepts as ``max_new_tokens``: vLLM-Omni 0.30.0
``tts_adapters/base.py:224`` ``max_new_tokens_min = 1`` and ``:226`` ``max_new_tokens_max = 4096``."""

MAX_INSTRUCTIONS = 500
"""``serving_speech.py:115`` ``_TTS_MAX_INSTRUCTIONS_LENGTH = 500`` (vLLM-Omni 0.30.0)."""

REF_AUDIO_FORMAT = (
    "ref_audio must be a URL (http/https), base64 data URL (data:...), or file URI (file://...)"
)
"""``serving_speech.py`` ``_validate_ref_audio_format``."""

EMPTY_INPUT = "Input text cannot be empty"
"""The refusal of a blank ``input`` most adapters share (some name themselves instead)."""

CLONE_REF_TEXT = "Voice cloning requires 'ref_text' (transcript of the reference audio)"
"""Fish Speech's and Audio8-TTS's refusal of a clip without its transcript (the same words in
both adapters: ``tts_adapters/fish_speech.py``, ``tts_adapters/audio8_tts.py``)."""


@dataclass(frozen=True)
class SpeechRules:
    """One model's request rules as its vLLM-Omni adapter applies them (``validate``).

    A value of this class lives in the model's module; ``listenlab api`` answers with it and
    the remote backend checks it before it sends anything. The fields are data (a
    ``listenlab api`` model card carries them to a remote client as JSON); what a model checks
    beyond them is its subclass's :meth:`validate`.
    """

    reference_type: str
    """vLLM-Omni's model type (the adapter's ``name``): ``qwen3_tts``, ``fish_tts``, …"""
    source: str
    """Where these rules were read (file and line of vLLM-Omni 0.30.0)."""
    sample_rates: frozenset[int] = frozenset()
    """The adapter's ``supported_output_sample_rates``; empty: ``sample_rate`` is refused."""
    rate_range: tuple[int, int] | None = None
    """listenlab's generic rule instead: any rate in this range (resampled)."""
    languages: tuple[str, ...] | None = None
    """Accepted ``language`` values (title-cased), or None when the adapter reads none."""
    task_types: bool = False
    """Qwen3-TTS: ``task_type`` must match the checkpoint (CustomVoice, VoiceDesign, Base),
    ``ref_text``/``x_vector_only_mode`` only with Base, ``speaker_embedding`` only with Base."""
    requires_ref_audio: str = ""
    """The refusal when ``ref_audio`` is missing ("" when it is optional)."""
    ref_text_message: str = ""
    """The refusal when ``ref_audio`` comes without ``ref_text`` ("" when it may)."""
    no_speakers_label: str = ""
    """Models without built-in speakers name themselves in "Unknown voice …" ("" otherwise)."""
    checks_voice: bool = False
    """An unknown ``voice`` is "Invalid voice …" (Qwen3-TTS, VoxCPM2)."""
    builtin_voices: tuple[str, ...] = ()
    """Voices the adapter itself lists whatever the server has (VoxCPM2's ``default``)."""
    checks_max_new_tokens: bool = True
    """``max_new_tokens`` is checked against 1..4096 (MOSS-TTS-Nano does not check it)."""
    max_instructions: int | None = None
    """``instructions`` longer than this is refused (``serving_speech.py``
    ``_TTS_MAX_INSTRUCTIONS_LENGTH``, checked in Qwen3-TTS's ``validate`` only)."""
    embedding_dims: tuple[tuple[str, int], ...] = ()
    """``speaker_embedding`` dimension by checkpoint size (Qwen3-TTS: the talker hidden size)."""
    reads_ref_audio: bool = True
    """The adapter reads ``ref_audio`` at all (to clone or to refuse it). False: it never looks
    at the field (Covo-Audio, Step-Audio2), so any value, even one that is not a clip, is
    ignored and the same speech comes back."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        """The adapter's ``validate()``: the first refusal, or None. This is the check most
        models share; a model that checks more overrides it in its module."""
        if self.no_speakers_label:
            err = uploaded_speaker_error(view, ctx)
            if err:
                return err
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        if self.checks_voice and view.voice is not None:
            view.voice = view.voice.lower()
            if view.voice not in ctx.available:
                supported = ", ".join(sorted(ctx.available)) or "none"
                return f"Invalid voice '{view.voice}'. Supported: {supported}"
        if self.requires_ref_audio and view.ref_audio is None:
            return self.requires_ref_audio
        if view.ref_audio is not None and (self.requires_ref_audio or self.ref_text_message):
            err = ref_audio_format_error(view.ref_audio)
            if err:
                return err
            if self.ref_text_message and (not view.ref_text or not view.ref_text.strip()):
                return self.ref_text_message
        err = instructions_error(self, view.instructions)
        if err:
            return err
        return max_new_tokens_error(view.max_new_tokens) if self.checks_max_new_tokens else None


GENERIC_RULES = SpeechRules(
    "listenlab",
    "listenlab's own rules for a voice that imitates no vLLM-Omni model: any sample_rate from "
    "8000 to 192000 Hz (resampled); instructions up to 500 characters (Qwen3-TTS's limit)",
    rate_range=(8000, 192000),
    checks_voice=True,
    max_instructions=MAX_INSTRUCTIONS,
)
"""A backend that imitates no model (``piper``) has listenlab's rules, listed in
docs/api.md: any rate it can resample to, no language or task rules."""


class VoiceClip(str):
    """An uploaded voice's clip in ``RequestView.ref_audio`` (``voice:<name>``), where
    vLLM-Omni's ``_apply_uploaded_speaker`` puts the stored clip's data URL: a valid clip for
    the checks that follow. Only the checks make one; a client's string never is one."""


@dataclass(frozen=True)
class Uploaded:
    """A voice uploaded to the server: from audio (``source="audio"``) or an embedding."""

    source: str = "audio"
    ref_text: str | None = None


@dataclass(frozen=True)
class RuleContext:
    """What the checks read besides the request: the model and the voices the server has."""

    model: str
    """The model the server runs (its checkpoint's name or path: Qwen3-TTS reads the variant
    from it), which is not always the name it is served under."""
    rules: SpeechRules
    speakers: frozenset[str] = frozenset()
    """Built-in voices, lower-case (a listenlab backend's own voices)."""
    uploaded: dict[str, Uploaded] = field(default_factory=dict)
    """Uploaded voices by lower-case name."""
    max_instructions: int = MAX_INSTRUCTIONS
    """The server's ``_max_instructions_length`` (Ming's checks read it)."""

    @property
    def available(self) -> frozenset[str]:
        """``_get_available_speakers``: built-in (the backend's and the adapter's) and uploaded."""
        return self.speakers | frozenset(self.uploaded) | frozenset(self.rules.builtin_voices)


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
    speed: float | None = None
    extra_params: Any = None
    word_timestamps: bool | None = None
    response_format: str | None = None
    ref_audio_2: Any = None
    ambient_sound: str | None = None
    duration_seconds: float | None = None
    initial_codec_chunk_frames: int | None = None
    non_streaming_mode: bool | None = None

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
    if isinstance(ref_audio, VoiceClip):
        return None
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


def instructions_error(rules: SpeechRules, instructions: str | None) -> str | None:
    """``instructions`` over the model's limit (only the models that check one)."""
    limit = rules.max_instructions
    if limit is not None and instructions and len(instructions) > limit:
        return f"Instructions too long (max {limit} characters)"
    return None


def uploaded_speaker_error(view: RequestView, ctx: RuleContext) -> str | None:
    """``_apply_uploaded_speaker`` (``serving_speech.py:749``): an uploaded voice lends its clip
    and ``ref_text``; for the models in vLLM-Omni's label list (Fish Speech, CosyVoice3,
    MOSS-TTS-Nano, …: ``no_speakers_label``) any other voice is refused (listenlab: unless it
    is the backend's own), for the rest it passes unchanged."""
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
        view.ref_audio = VoiceClip(f"voice:{lower}")  # stands for the stored clip
        if (not view.ref_text or not view.ref_text.strip()) and up.ref_text:
            view.ref_text = up.ref_text
        return None
    if lower in ctx.speakers or not ctx.rules.no_speakers_label:
        # a listenlab backend's own voice (docs/api.md: voice names), or a model vLLM-Omni
        # lets through with any name (MOSS-TTS, IndexTTS-2, Ming: not in its label list)
        return None
    return (
        f"Unknown voice '{view.voice}'. {ctx.rules.no_speakers_label} has no "
        f"built-in speakers. Upload a voice first via "
        f"POST /v1/audio/voices, or use ref_audio + ref_text."
    )


def adapter_error(view: RequestView, ctx: RuleContext) -> str | None:
    """The served model's adapter ``validate()`` (its module's rules): the first refusal."""
    return ctx.rules.validate(view, ctx)


def embedding_dim(ctx: RuleContext) -> int | None:
    """The talker hidden size of the served checkpoint (by its size in the name)."""
    name = ctx.model.lower()
    return next((dim for size, dim in ctx.rules.embedding_dims if size in name), None)


def rules_from_card(card: dict[str, Any]) -> SpeechRules:
    """A ``listenlab api`` model card's ``rules`` (JSON lists where the type has sets): the
    data only, for a remote client to check against (it never runs a model's ``validate``)."""
    d = dict(card)
    d["sample_rates"] = frozenset(int(x) for x in d.get("sample_rates") or ())
    if d.get("languages") is not None:
        d["languages"] = tuple(str(x) for x in d["languages"])
    if d.get("rate_range") is not None:
        lo, hi = d["rate_range"]
        d["rate_range"] = (int(lo), int(hi))
    d["embedding_dims"] = tuple((str(a), int(b)) for a, b in d.get("embedding_dims") or ())
    d["builtin_voices"] = tuple(str(v) for v in d.get("builtin_voices") or ())
    known = SpeechRules.__dataclass_fields__
    return SpeechRules(**{k: v for k, v in d.items() if k in known})


__all__ = [
    "CLONE_REF_TEXT",
    "EMPTY_INPUT",
    "GENERIC_RULES",
    "MAX_INSTRUCTIONS",
    "MAX_NEW_TOKENS_RANGE",
    "REF_AUDIO_FORMAT",
    "RequestView",
    "RuleContext",
    "SpeechRules",
    "Uploaded",
    "VoiceClip",
    "adapter_error",
    "default_voice",
    "embedding_dim",
    "instructions_error",
    "max_new_tokens_error",
    "ref_audio_format_error",
    "rules_from_card",
    "sample_rate_error",
    "uploaded_speaker_error",
]
