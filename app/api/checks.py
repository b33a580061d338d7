"""What ``listenlab api`` refuses before it generates, in vLLM-Omni's order and words.

Why one module: ``POST /v1/audio/speech``, its batch and the WebSocket session each refuse the
same requests as vLLM-Omni 0.30.0's ``create_speech``, ``create_speech_batch`` and
``_prepare_speech_generation``. The checks themselves are the served model's rules
(:mod:`backends.vllm_omni.rules`, read from the model's module); this module supplies what they
read (the backend's voices, the uploads) and adds the refusals that are listenlab's own, each
listed with its reason in docs/api.md ("Where listenlab api answers differently").
"""

from __future__ import annotations

import time
from typing import Any

from app.api.errors import ApiError
from app.api.state import ApiState
from backends.vllm_omni.models import ModelUnit, model_unit
from backends.vllm_omni.rules import (
    GENERIC_RULES,
    RequestView,
    RuleContext,
    Uploaded,
    VoiceClip,
    adapter_error,
    default_voice,
    sample_rate_error,
)

VOICE_CACHE_S = 5.0
"""The backend's voice list is read at most this often (a remote backend's is a request)."""

WS_WORD_TIMESTAMPS = (
    "word_timestamps=true is currently supported by the WebSocket "
    "/v1/audio/speech/stream path. Use session.config with "
    "stream_audio=true and response_format='pcm'."
)
NO_ALIGNER = "word_timestamps=true requires the server to be launched with --forced-aligner."


def served_unit(state: ApiState) -> ModelUnit | None:
    """The model whose rules ``listenlab api`` answers by: the one the backend runs or stands
    in for (a profile, the embedded engine, the remote server's model), else the one the
    served name names. A served name (``--served-model-name tts-1``) never changes it: vLLM-Omni
    applies its model's rules under any name."""
    return state.backend.unit or model_unit(state.served_model)


def checkpoint_name(state: ApiState, unit: ModelUnit | None) -> str:
    """The model the rules read variants from (Qwen3-TTS's task, MOSS-TTS's family member):
    the served name when it names that model, else the model's checkpoint."""
    if unit is None or model_unit(state.served_model) is unit:
        return state.served_model
    return unit.checkpoint


async def rule_context(state: ApiState) -> RuleContext:
    """The served model's rules and the voices the backend has (built-in and uploaded)."""
    now = time.monotonic()
    cached = state.voice_cache
    if cached is None or now - cached[0] > VOICE_CACHE_S:
        voices = await state.backend.voices()
        cached = (now, voices)
        state.voice_cache = cached
    speakers, uploaded = set(), {}
    for v in cached[1]:
        if v.kind == "uploaded":
            uploaded[v.name.lower()] = Uploaded("audio", v.ref_text)
        else:
            speakers.add(v.name.lower())
    for name, meta in state.uploads.items():
        if meta.get("embedding_source") == "direct":
            uploaded[name] = Uploaded("direct")
    unit = served_unit(state)
    rules = unit.rules if unit is not None else GENERIC_RULES
    return RuleContext(checkpoint_name(state, unit), rules, frozenset(speakers), uploaded)


def whole_files_only(state: ApiState) -> bool:
    """The served model is vLLM-Omni's pure-diffusion path (OmniVoice): every request is
    answered with the whole file, streams too, and its ``model`` is not checked."""
    unit = served_unit(state)
    return bool(unit and unit.diffusion)


def native_speed(state: ApiState) -> bool:
    """The served model changes speed itself (IndexTTS-2.5), so streams may ask for it."""
    model = served_unit(state)
    return bool(model and model.speed_streaming)


def refuse(message: str | None) -> None:
    if message:
        raise ApiError(message)


def check_stream_speed(speed: float | None, label: str, state: ApiState) -> None:
    """``_validate_speech_streaming_request``: no speed on streams without native control."""
    if speed is not None and speed != 1.0 and not native_speed(state):
        raise ApiError(
            f"{label} is not supported with speed adjustment. "
            "Use a non-streaming request or remove the speed parameter."
        )


async def check_speech(body: Any, state: ApiState) -> RequestView:
    """``create_speech`` up to generation: the refusals in the reference's order. Returns the
    request as the adapter left it (voice lower-cased, language title-cased, task inferred)."""
    ctx = await rule_context(state)
    view = RequestView.of(body)
    default_voice(view, ctx)
    refuse(sample_rate_error(ctx.rules, body.sample_rate))
    if whole_files_only(state):  # _create_diffusion_speech: its own checks, nothing else
        refuse(adapter_error(view, ctx))
        return view
    state.check_model(body.model)
    if body.is_streaming and body.word_timestamps:
        raise ApiError(WS_WORD_TIMESTAMPS)
    if body.word_timestamps:
        raise ApiError(NO_ALIGNER)
    if body.is_streaming:
        label = "Streaming" if body.is_raw_audio_stream else "SSE streaming"
        check_stream_speed(body.speed, label, state)
    refuse(adapter_error(view, ctx))
    refuse_unhonoured(view, state, ctx)
    return unread_fields_dropped(view, ctx)


async def check_unit(config: Any, text: str, state: ApiState) -> RequestView:
    """``_prepare_speech_generation`` for one WebSocket unit: the adapter's checks (the
    session never maps ``voice: "default"`` to none, so neither does this)."""
    ctx = await rule_context(state)
    view = RequestView.of(config)
    view.input = text  # "default" stays a voice name here: only create_speech maps it
    refuse(adapter_error(view, ctx))
    refuse_unhonoured(view, state, ctx)
    return unread_fields_dropped(view, ctx)


def unread_fields_dropped(view: RequestView, ctx: RuleContext) -> RequestView:
    """A model whose adapter never reads ``ref_audio`` (Step-Audio2) speaks the same with any
    value there, so the clip is neither decoded nor passed on."""
    if not ctx.rules.reads_ref_audio:
        view.ref_audio = None
        view.ref_text = None
    return view


def refuse_unhonoured(view: RequestView, state: ApiState, ctx: RuleContext) -> None:
    """Fields the model would act on but this backend cannot: refused, never ignored."""
    caps = state.backend.capabilities
    if view.speaker_embedding is not None and ctx.rules.task_types:
        raise ApiError(
            "speaker_embedding is not supported by listenlab api: its voices clone from audio "
            "(send ref_audio, or upload the voice as audio)"
        )
    if ctx.rules.task_types and view.x_vector_only_mode:
        raise ApiError(
            "x_vector_only_mode is not supported by listenlab api: its voices clone from the "
            "whole reference clip"
        )
    inline = view.ref_audio is not None and not isinstance(view.ref_audio, VoiceClip)
    # a model's own rules decide whether it takes a clip (a stand-in takes it and says it did
    # not clone); a backend that imitates no model refuses what it cannot do
    if inline and not caps.cloning and served_unit(state) is None:
        raise ApiError(
            f"the {state.backend.describe()} backend cannot clone voices, so ref_audio is "
            "not supported"
        )


__all__ = [
    "NO_ALIGNER",
    "WS_WORD_TIMESTAMPS",
    "check_speech",
    "check_stream_speed",
    "check_unit",
    "checkpoint_name",
    "native_speed",
    "rule_context",
    "served_unit",
    "whole_files_only",
]
