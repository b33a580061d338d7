"""A CPU voice standing in for a vLLM-Omni model: the model's voices and clone fields, taken as
the model takes them, every one spoken by the CPU voice, and said so.

Why: ``listenlab api --backend 'piper?profile=qwen3-tts'`` is how a player, a client or a study
tries a model without a GPU, so it must answer what that model answers. The model's own rules
(:mod:`backends.vllm_omni.models`) refuse what it refuses; this object supplies what the model
has besides: its built-in voice names (Qwen3-TTS's ``vivian``), the voices uploaded to it, and
a reference clip decoded through the bounded decoder exactly as the model would need it (a bad
clip is refused here too). What the CPU voice then cannot do (speak as ``vivian``, clone the
clip, follow ``instructions``) is never hidden: :meth:`StandIn.note` says it, and
``listenlab api`` puts it in the answer's headers and in ``/v1/models``. The conformance suite
used to wrap Piper in a test class of its own for this (``EngineVoices``); CI now tests what
users run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from backends.base import Capabilities, SpeechRequest, Voice
from backends.errors import InvalidRequest, UnknownVoice
from backends.vllm_omni.models import ModelUnit
from backends.vllm_omni.models.base import decode_ref_audio
from backends.vllm_omni.rules import (
    RequestView,
    RuleContext,
    Uploaded,
    adapter_error,
    default_voice,
)

VIEW_EXTRA = (
    "task_type",
    "x_vector_only_mode",
    "max_new_tokens",
    "initial_codec_chunk_frames",
    "non_streaming_mode",
    "extra_params",
)
"""``SpeechRequest.extra`` keys the model's rules read as request fields."""
INLINE_CLIP = "data:audio/wav;base64,"
"""What a decoded clip stands for in the rules' view (an inline clip of a valid scheme)."""

NOTE_HEADER = "X-Listenlab-Stand-In"
"""The response header ``listenlab api`` answers a stand-in's note in."""


@dataclass
class StandIn:
    """The voices and clone fields of ``unit``, over a CPU voice named ``voice``."""

    unit: ModelUnit
    voice: str
    """What speaks (the inner backend's description, e.g. ``piper``)."""
    uploaded: dict[str, Voice] = field(default_factory=dict)
    """Voices uploaded to this server, by lower-case name (kept for its lifetime)."""

    # -- what the model has

    def voices(self) -> list[Voice]:
        """The model's built-in names, then the uploads (``GET /v1/audio/voices``)."""
        built_in = [Voice(name, "builtin") for name in self.unit.presets]
        return built_in + list(self.uploaded.values())

    def capabilities(self, inner: Capabilities, sample_rate: int, channels: int) -> Capabilities:
        """The model's capabilities at the profile's format (the inner voice's seed rule)."""
        rules = self.unit.rules
        return replace(
            inner,
            cloning=self.unit.cloning,
            clone_required=bool(rules.requires_ref_audio),
            languages=tuple(rules.languages or ()),
            sample_rate=sample_rate,
            channels=channels,
            speed=True,
            speed_streaming=self.unit.speed_streaming,
            instructions=self.unit.instructions,
            voice_library=self.unit.cloning,  # what a voice picker may offer; uploads are kept
        )

    def add_voice(self, name: str, wav: bytes, ref_text: str | None) -> Voice:
        """Keep an uploaded clip's name and transcript, once the clip decodes as a 1-30 s
        reference (vLLM-Omni stores any upload, for every model)."""
        decode_ref_audio(wav)
        voice = Voice(name, "uploaded", ref_text)
        self.uploaded[name.lower()] = voice
        return voice

    def delete_voice(self, name: str) -> None:
        if self.uploaded.pop(name.lower(), None) is None:
            raise UnknownVoice(f"Voice '{name}' not found")

    # -- what the CPU voice is asked

    def check(self, request: SpeechRequest) -> None:
        """The model's own refusals (its adapter's ``validate``) for a ``SpeechRequest``, so
        ``listenlab say``, the Playground and the probe meet them as ``listenlab api`` does."""
        view = RequestView(
            input=request.text,
            voice=request.voice,
            language=request.language,
            instructions=request.instructions,
            ref_audio=INLINE_CLIP if request.ref_audio is not None else None,
            ref_text=request.ref_text,
            speed=request.speed,
            **{k: request.extra[k] for k in VIEW_EXTRA if k in request.extra},
        )
        uploads = {k: Uploaded("audio", v.ref_text) for k, v in self.uploaded.items()}
        ctx = RuleContext(
            self.unit.checkpoint, self.unit.rules, frozenset(self.unit.presets), uploads
        )
        default_voice(view, ctx)
        err = adapter_error(view, ctx)
        if err:
            raise InvalidRequest(err)

    def plain(self, request: SpeechRequest) -> SpeechRequest:
        """The request the CPU voice speaks: the text, speed and seed, once the model's rules
        took it (:meth:`check`). A reference clip of a model that clones is decoded first
        (bounded: size, length, 1-30 s), so a clip the model could not use is refused (a model
        that does not clone never reads the field: Step-Audio2 speaks the same with any value);
        the voice, clip, transcript, style, language and model fields are dropped."""
        self.check(request)
        if request.ref_audio is not None and self.unit.cloning:
            decode_ref_audio(request.ref_audio)
        return replace(
            request,
            voice=None,
            language=None,
            instructions=None,
            ref_audio=None,
            ref_text=None,
            extra={},
        )

    def note(self, request: SpeechRequest | None = None) -> str:
        """What the stand-in did not do for ``request`` (for any request when None), e.g.
        ``cpu voice (piper); voice 'vivian' not applied; clone not applied``."""
        said = [f"cpu voice ({self.voice}) for {self.unit.title}"]
        if request is None:
            said.append("voices, clone, instructions and language not applied")
            return "; ".join(said)
        if request.voice:
            said.append(f"voice {request.voice!r} not applied")
        if request.ref_audio is not None and self.unit.cloning:
            said.append("clone not applied")
        if request.instructions:
            said.append("instructions not applied")
        if request.language:
            said.append("language not applied")
        return "; ".join(said)


__all__ = ["NOTE_HEADER", "StandIn"]
