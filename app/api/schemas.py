"""Request schemas of vLLM-Omni's speech API, field for field, and vLLM's validation message.

Why copied rather than approximated: a body that vLLM-Omni 0.30.0 refuses at parsing must be
refused here with the same status, ``type``, ``param`` and message, and one it accepts must be
accepted. The classes mirror ``vllm_omni/entrypoints/openai/protocol/audio.py``
(``OpenAICreateSpeechRequest``, ``StreamingSpeechSessionConfig``, ``BatchSpeechRequest``) with
their validators and messages; :func:`vllm_validation_message` is vLLM's
``validation_exception_handler`` (``vllm/entrypoints/serve/exception_handling/handlers/
validation.py``). ``tests/conformance`` sends the same bodies to both servers.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_EMBEDDING_DIM = 8192
Format = Literal["wav", "pcm", "flac", "mp3", "opus"]
TaskType = Literal["CustomVoice", "VoiceDesign", "Base"]
HIGGS_V2_RESERVED = ("messages", "reference_audio", "voice_prompt", "speaker_audio", "speakers")

VALIDATION_TYPE = "Bad Request"
"""vLLM's ``error.type`` for a request body that fails parsing or validation
(``HTTPStatus.BAD_REQUEST.phrase``), unlike the handlers' own ``BadRequestError``s."""


# --------------------------------------------------------------------------- field validators


def normalize_ref_audio(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        if not all(isinstance(item, str) for item in value):
            raise TypeError("'ref_audio' list entries must be strings")
        if not value:
            raise ValueError("'ref_audio' list cannot be empty")
        return list(value)
    raise TypeError("'ref_audio' must be a string or list of strings")


def check_embedding(v: Any) -> Any:
    """``validate_speaker_embedding``: flat or nested, non-empty vectors, finite values."""
    if v is None:
        return None
    if not isinstance(v, list | tuple):
        raise TypeError(
            "'speaker_embedding' must be a list of numbers or list of embedding vectors"
        )
    if not v:
        return []
    if isinstance(v[0], list | tuple):
        out = []
        for item in v:
            if not isinstance(item, list | tuple):
                raise TypeError("'speaker_embedding' must not mix flat and nested values")
            out.append([float(x) for x in item])
        for item in out:
            if not item:
                raise ValueError("'speaker_embedding' nested vectors must be non-empty")
            if not all(math.isfinite(x) for x in item):
                raise ValueError("'speaker_embedding' values must be finite (no NaN or Inf)")
        return out
    flat = [float(x) for x in v]
    if not all(math.isfinite(x) for x in flat):
        raise ValueError("'speaker_embedding' values must be finite (no NaN or Inf)")
    return flat


def references_alias(data: Any) -> Any:
    """``normalize_references_alias``: Higgs Audio's ``references`` becomes ``ref_audio``."""
    if not isinstance(data, dict) or data.get("references") is None:
        return data
    refs = data["references"]
    if not isinstance(refs, list) or len(refs) == 0:
        raise ValueError("'references' must be a non-empty array of {audio_path, text} objects")
    if len(refs) > 1:
        raise ValueError(
            "'references' only supports a single reference; multi-shot voice clone is not supported"
        )
    first = refs[0]
    if not isinstance(first, dict):
        raise ValueError("'references[0]' must be an object with 'audio_path' and optional 'text'")
    audio_path = first.get("audio_path")
    if not isinstance(audio_path, str) or not audio_path:
        raise ValueError(
            "'references[0].audio_path' is required and must be a string (URL, data: URI, or file path)"
        )
    existing = data.get("ref_audio")
    if existing and existing != audio_path:
        raise ValueError("'references' and 'ref_audio' are mutually exclusive")
    data["ref_audio"] = audio_path
    text = first.get("text")
    if isinstance(text, str) and text.strip():
        if data.get("ref_text") and data["ref_text"] != text:
            raise ValueError("'references[0].text' and 'ref_text' conflict; supply only one")
        data["ref_text"] = text
    data.pop("references", None)
    return data


def higgs_reserved(data: Any) -> Any:
    """``reject_higgs_audio_v2_unsupported_aliases``."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), str):
        return data
    if "higgsaudiov2" not in data["model"].lower().replace("-", "").replace("_", ""):
        return data
    offending = sorted(k for k in HIGGS_V2_RESERVED if k in data)
    if offending:
        raise ValueError(
            "higgs_audio_v2 v1 does not support these rich-input fields: "
            f"{offending}. Supply plain text via the 'input' field instead."
        )
    return data


# --------------------------------------------------------------------------- the HTTP body


class OpenAICreateSpeechRequest(BaseModel):
    """``OpenAICreateSpeechRequest``: unknown fields are dropped, as on vLLM-Omni."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    input: str
    model: str | None = None
    voice: str | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    instructions: str | None = None
    response_format: Format = "wav"
    sample_rate: int | None = Field(None, gt=0)
    speed: float | None = Field(1.0, ge=0.25, le=4.0)
    stream_format: Literal["sse", "audio"] | None = None
    stream: bool = False
    task_type: TaskType | None = None
    language: str | None = None
    ref_audio: str | list[str] | None = None
    ref_text: str | None = None
    ref_audio_2: str | None = None
    ambient_sound: str | None = None
    duration_seconds: float | None = Field(None, ge=0.0)
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | list[list[float]] | None = Field(
        None, max_length=MAX_EMBEDDING_DIM
    )
    max_new_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    initial_codec_chunk_frames: int | None = Field(None, ge=0, le=INT64_MAX)
    non_streaming_mode: bool | None = None
    extra_params: dict[str, Any] | None = None
    word_timestamps: bool = False

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_id(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if "id" not in v:
                raise ValueError("voice dict must contain 'id'")
            return v["id"]
        return v

    @field_validator("ref_audio", mode="before")
    @classmethod
    def _ref_audio(cls, v: Any) -> Any:
        return normalize_ref_audio(v)

    @field_validator("speaker_embedding")
    @classmethod
    def _embedding(cls, v: Any) -> Any:
        return check_embedding(v)

    @model_validator(mode="before")
    @classmethod
    def _references(cls, data: Any) -> Any:
        return references_alias(data)

    @model_validator(mode="before")
    @classmethod
    def _higgs(cls, data: Any) -> Any:
        return higgs_reserved(data)

    @model_validator(mode="after")
    def _embedding_alone(self) -> OpenAICreateSpeechRequest:
        ref = self.ref_audio
        if self.speaker_embedding is not None and ref is not None and not isinstance(ref, list):
            raise ValueError("'speaker_embedding' and 'ref_audio' are mutually exclusive")
        return self

    @property
    def is_raw_audio_stream(self) -> bool:
        return self.stream_format == "audio"

    @property
    def is_sse_stream(self) -> bool:
        return (self.stream or self.stream_format == "sse") and not self.is_raw_audio_stream

    @property
    def is_streaming(self) -> bool:
        return self.is_raw_audio_stream or self.is_sse_stream

    @model_validator(mode="after")
    def _streaming_format(self) -> OpenAICreateSpeechRequest:
        if self.is_streaming:
            if self.response_format not in ("pcm", "wav"):
                raise ValueError(
                    "Streaming (stream=true, stream_format='audio', or stream_format='sse') "
                    "requires response_format='pcm' or 'wav'. "
                    f"Got response_format='{self.response_format}'."
                )
            if self.speed is None:
                self.speed = 1.0
        return self


SpeechBody = OpenAICreateSpeechRequest
"""The HTTP body (its class name is the reference's: pydantic puts it in messages)."""


# --------------------------------------------------------------------------- the WebSocket config


class StreamingSpeechSessionConfig(BaseModel):
    """``StreamingSpeechSessionConfig`` of the WebSocket (its class name is in its messages)."""

    model: str | None = None
    voice: str | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    task_type: TaskType | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Format = "wav"
    speed: float | None = Field(1.0, ge=0.25, le=4.0)
    max_new_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    initial_codec_chunk_frames: int | None = Field(None, ge=0, le=INT64_MAX)
    non_streaming_mode: bool | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = Field(None, max_length=MAX_EMBEDDING_DIM)
    stream_audio: bool = False
    word_timestamps: bool = False
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    split_granularity: Literal["none", "sentence", "clause"] = "none"

    @model_validator(mode="after")
    def _stream_rules(self) -> StreamingSpeechSessionConfig:
        if self.stream_audio:
            if self.response_format != "pcm":
                raise ValueError(
                    "WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
                    f"Got response_format='{self.response_format}'."
                )
            if self.speed is None:
                self.speed = 1.0
            elif self.speed != 1.0:
                raise ValueError(
                    "WebSocket stream_audio=true currently requires speed=1.0; "
                    "native speed control is only available through HTTP streaming."
                )
        return self


SessionConfig = StreamingSpeechSessionConfig


# --------------------------------------------------------------------------- batch


class SpeechBatchItem(BaseModel):
    """One item of ``POST /v1/audio/speech/batch``: its fields override the batch's."""

    input: str
    voice: str | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    instructions: str | None = None
    response_format: Format | None = None
    sample_rate: int | None = Field(None, gt=0)
    speed: float | None = Field(None, ge=0.25, le=4.0)
    task_type: TaskType | None = None
    language: str | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    max_new_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    initial_codec_chunk_frames: int | None = Field(None, ge=0, le=INT64_MAX)
    non_streaming_mode: bool | None = None


class BatchSpeechRequest(BaseModel):
    """``BatchSpeechRequest``: shared defaults and 1+ items (the limit is the server's)."""

    model: str | None = None
    items: list[SpeechBatchItem] = Field(..., min_length=1)
    voice: str | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    instructions: str | None = None
    response_format: Format = "wav"
    sample_rate: int | None = Field(None, gt=0)
    speed: float | None = Field(1.0, ge=0.25, le=4.0)
    task_type: TaskType | None = None
    language: str | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    max_new_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    initial_codec_chunk_frames: int | None = Field(None, ge=0, le=INT64_MAX)
    non_streaming_mode: bool | None = None


BATCH_FIELDS = tuple(f for f in SpeechBatchItem.model_fields if f != "input")


def merge_batch_item(batch: BatchSpeechRequest, item: SpeechBatchItem) -> SpeechBody:
    """``_merge_batch_item``: the item's field where set, else the batch's."""
    picked = {
        f: getattr(item, f) if getattr(item, f) is not None else getattr(batch, f)
        for f in BATCH_FIELDS
    }
    if picked["speed"] is None:
        picked["speed"] = 1.0
    picked["response_format"] = picked["response_format"] or "wav"
    return SpeechBody.model_validate({"input": item.input, "model": batch.model, **picked})


# --------------------------------------------------------------------------- answers


class ErrorInfo(BaseModel):
    """``ErrorInfo`` of vLLM's ``ErrorResponse``: what every refusal carries."""

    model_config = ConfigDict(extra="allow")

    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(BaseModel):
    """``ErrorResponse``: vLLM-Omni's error shape (:func:`backends.vllm_omni.wire.error_body`
    writes it; ``/openapi.json`` declares it under the reference's name)."""

    model_config = ConfigDict(extra="allow")

    error: ErrorInfo


class SpeechInputTokenDetails(BaseModel):
    """``SpeechInputTokenDetails``: the input tokens by modality (zeros: nothing counted)."""

    text_tokens: int = 0
    audio_tokens: int = 0


class SpeechTokenUsage(BaseModel):
    """``SpeechTokenUsage``: a speech request's tokens (:data:`backends.vllm_omni.wire.NO_USAGE`
    for listenlab's voices, which have none)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_token_details: SpeechInputTokenDetails = SpeechInputTokenDetails()


class SpeechBatchItemResult(BaseModel):
    """``SpeechBatchItemResult``: one item's result in a batch's answer, its audio (base64)
    or its error."""

    index: int
    status: Literal["success", "error"]
    audio_data: str | None = None
    media_type: str | None = None
    error: str | None = None
    usage: SpeechTokenUsage | None = None


class BatchSpeechResponse(BaseModel):
    """``POST /v1/audio/speech/batch``'s answer, as vLLM-Omni 0.30.0 writes it (an item's
    unset fields are left out)."""

    id: str
    results: list[SpeechBatchItemResult]
    total: int
    succeeded: int
    failed: int


# --------------------------------------------------------------------------- vLLM's messages

_MAX_REPORTED_ERRORS = 10
_MAX_ERROR_INPUT_CHARS = 200
_MAX_ERROR_CHARS = 1000
_INTERNAL = re.compile(r"[\[\]{}()]")
_INTERNAL_MARKERS = frozenset(
    [
        "function-wrap",
        "function-after",
        "function-before",
        "function-plain",
        "json-or-python",
        "lax-or-strict",
        "chain",
        "default",
        "nullable",
        "tagged-union",
        "union",
        "call",
        "arguments",
        "is-instance",
        "is-subclass",
        "callable",
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "bytearray",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "complex",
        "none",
        "nonetype",
    ]
)


def summarize_input(value: object) -> object:
    """``_summarize_error_input``: containers described, long values cut."""
    if isinstance(value, str):
        return value[:_MAX_ERROR_INPUT_CHARS] + "...[truncated]" if len(value) > 200 else value
    if isinstance(value, bytes | bytearray):
        return f"<{type(value).__name__} of {len(value)} bytes>"
    if isinstance(value, list | tuple | set | frozenset | dict):
        return f"<{type(value).__name__} of {len(value)} items>"
    try:
        text = str(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text[:_MAX_ERROR_INPUT_CHARS] + "...[truncated]" if len(text) > 200 else text


def clean_loc(loc: tuple) -> str:
    """``clean_loc_for_param``: the dotted location without pydantic's internal markers."""
    parts = [
        str(p) for p in loc if not (_INTERNAL.search(str(p)) or str(p).lower() in _INTERNAL_MARKERS)
    ]
    return ".".join(parts) if parts else ".".join(str(p) for p in loc)


def format_error(err: dict) -> str:
    err = dict(err)
    if "input" in err:
        err["input"] = summarize_input(err["input"])
    if isinstance(err.get("loc"), tuple | list):
        err["loc"] = clean_loc(tuple(err["loc"]))
    text = str(err)
    return text[:_MAX_ERROR_CHARS] + "...[truncated]" if len(text) > _MAX_ERROR_CHARS else text


def body_errors(e: ValidationError) -> list[dict]:
    """The errors as FastAPI reports a body's: located under ``body``, without URLs."""
    return [{**err, "loc": ("body", *err["loc"])} for err in e.errors(include_url=False)]


def vllm_validation_message(errors: list) -> str:
    """``validation_exception_handler``'s message: the count, then one line per error."""
    if not errors:
        return "Validation error"
    count = len(errors)
    label = "error" if count == 1 else "errors"
    reported = errors[:_MAX_REPORTED_ERRORS]
    message = f"{count} validation {label}:\n"
    message += "".join(
        f"  {format_error(err) if isinstance(err, dict) else err}\n" for err in reported
    )
    if count > len(reported):
        message += f"  ...and {count - len(reported)} more {label}\n"
    return sanitize(message.rstrip())


def sanitize(message: str) -> str:
    """``sanitize_message``: no memory addresses, tracebacks or file paths."""
    message = re.sub(r" at 0x[0-9a-f]+>", ">", message)
    message = re.sub(r'\n?\s*File "[^"]+", line \d+, in \S+(\n\s+.*)?', "", message)
    message = re.sub(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+", "<path>", message)
    message = re.sub(r"(?:/[\w\-]+)+/[\w\-]+\.\w+", "<path>", message)
    return message.strip()


def validation_param(errors: list) -> str | None:
    """vLLM's ``error.param``: the first error's cleaned location (``body.speed``)."""
    first = errors[0] if errors else None
    loc = first.get("loc") if isinstance(first, dict) else None
    return clean_loc(tuple(loc)) if loc else None


__all__ = [
    "VALIDATION_TYPE",
    "BatchSpeechRequest",
    "BatchSpeechResponse",
    "ErrorInfo",
    "ErrorResponse",
    "SessionConfig",
    "SpeechBatchItem",
    "SpeechBatchItemResult",
    "SpeechInputTokenDetails",
    "SpeechTokenUsage",
    "OpenAICreateSpeechRequest",
    "SpeechBody",
    "StreamingSpeechSessionConfig",
    "body_errors",
    "merge_batch_item",
    "validation_param",
    "vllm_validation_message",
]
