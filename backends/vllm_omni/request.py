"""vLLM-Omni's speech request both ways: a :class:`~backends.base.SpeechRequest` as body fields
(the remote backend writes them) and body fields as a ``SpeechRequest`` (``listenlab api``).

Why here: the HTTP body (``OpenAICreateSpeechRequest``) and the WebSocket ``session.config``
(``StreamingSpeechSessionConfig``) carry the same fields, and ``listenlab api`` used to turn each
into a ``SpeechRequest`` its own way. :func:`speech_request` is the one way, and
:func:`request_fields` is its inverse, so a request sent by the remote backend to ``listenlab
api`` arrives as the request that was sent (``tests/test_vllm_omni_wire.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backends.base import Backend, SpeechRequest
from backends.errors import InvalidRequest
from backends.vllm_omni.wire import ref_audio_url

REQUEST_EXTRA = (
    "task_type",
    "x_vector_only_mode",
    "max_new_tokens",
    "initial_codec_chunk_frames",
    "non_streaming_mode",
)
"""Fields of both the body and the session config that travel in ``SpeechRequest.extra``."""

HTTP_EXTRA = frozenset(
    {
        *REQUEST_EXTRA,
        "ref_audio_2",
        "ambient_sound",
        "duration_seconds",
        "speaker_embedding",
        "guidance_scale",
        "num_inference_steps",
        "extra_params",
    }
)
"""Top-level fields of ``OpenAICreateSpeechRequest`` that ``SpeechRequest.extra`` may carry;
any other ``extra`` key goes into ``extra_params`` (the server drops unknown top-level fields)."""
WS_EXTRA = frozenset({*REQUEST_EXTRA, "speaker_embedding"})
"""The same for the WebSocket's ``session.config`` (it has no ``extra_params``)."""


# --------------------------------------------------------------------------- SpeechRequest -> body


def request_fields(
    request: SpeechRequest,
    allowed_extra: frozenset[str],
    *,
    model: str | None = None,
    language: str | None = None,
    task_types: bool = True,
) -> dict[str, Any]:
    """The body fields (HTTP) or session-config fields (WebSocket) for ``request``; ``model``
    and ``language`` are the remote backend's defaults. A clip goes inline as a data URL, with
    ``task_type: "Base"`` unless the request names a task, when the served model has task
    types (``task_types``: Qwen3-TTS clones in its Base task; Gepard, Higgs-Audio v2 and
    Ming-flash refuse any ``task_type``)."""
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    for key in ("voice", "instructions", "seed"):
        v = getattr(request, key)
        if v is not None:
            body[key] = v
    lang = request.language or language
    if lang:
        body["language"] = lang
    if request.speed != 1.0:
        body["speed"] = request.speed
    extra_params: dict[str, Any] = {}
    for k, v in (request.extra or {}).items():
        if k == "extra_params" and isinstance(v, dict):
            extra_params.update(v)
        elif k in allowed_extra:
            body[k] = v
        else:
            extra_params[k] = v
    if extra_params and "extra_params" in allowed_extra:
        body["extra_params"] = extra_params
    if request.ref_audio is not None:
        body["ref_audio"] = ref_audio_url(request.ref_audio)
        if request.ref_text:
            body["ref_text"] = request.ref_text
        if task_types:
            body.setdefault("task_type", "Base")
    return body


# --------------------------------------------------------------------------- body -> SpeechRequest


@dataclass(frozen=True)
class SpeechFields:
    """The fields of a speech body or session config that become a ``SpeechRequest`` (the text
    and the reference clip come separately: per unit on the WebSocket, decoded off the loop)."""

    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    speed: float = 1.0
    seed: int | None = None
    ref_text: str | None = None
    task_type: str | None = None
    x_vector_only_mode: bool | None = None
    max_new_tokens: int | None = None
    initial_codec_chunk_frames: int | None = None
    non_streaming_mode: bool | None = None
    extra_params: dict[str, Any] | None = None
    speaker_embedding: list[float] | None = None

    @classmethod
    def of(cls, source: object) -> SpeechFields:
        """The fields of a validated body or session config (any object with these
        attributes; a missing one is None). An absent ``speed`` is 1.0."""
        values = {name: getattr(source, name, None) for name in cls.__dataclass_fields__}
        if values["speed"] is None:
            values["speed"] = 1.0
        return cls(**values)


def speech_request(
    fields: SpeechFields,
    text: str,
    *,
    ref_audio: bytes | None,
    request_id: str,
    backend: Backend,
) -> SpeechRequest:
    """The one way a body or session config becomes a validated ``SpeechRequest`` for
    ``backend``. ``ref_audio`` is the decoded clip as mono WAV (or None). A voice named
    ``default`` is vLLM-Omni's placeholder for none."""
    if ref_audio is not None and not backend.capabilities.cloning and backend.unit is None:
        raise InvalidRequest(
            f"the {backend.describe()} backend cannot clone voices, so ref_audio is not supported"
        )
    if fields.speaker_embedding is not None:
        raise InvalidRequest("speaker_embedding is not supported by listenlab api")
    voice = fields.voice.strip().lower() if fields.voice else None
    extra: dict[str, Any] = {
        k: getattr(fields, k) for k in REQUEST_EXTRA if getattr(fields, k) is not None
    }
    if fields.extra_params is not None:
        extra["extra_params"] = fields.extra_params
    return SpeechRequest(
        text=text,
        voice=None if voice == "default" else voice,
        language=fields.language,
        instructions=fields.instructions,
        speed=fields.speed,
        seed=fields.seed,
        ref_audio=ref_audio,
        ref_text=fields.ref_text,
        extra=extra,
        request_id=request_id,
    ).validated(None)  # the backend applies its own bound (CPU voice) or none (vLLM-Omni)


__all__ = [
    "HTTP_EXTRA",
    "REQUEST_EXTRA",
    "WS_EXTRA",
    "SpeechFields",
    "request_fields",
    "speech_request",
]
