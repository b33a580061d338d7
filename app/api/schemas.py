"""Request schemas of vLLM-Omni's speech API (HTTP body and WebSocket session config)."""

from __future__ import annotations

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

# --------------------------------------------------------------------------- request schema


class SpeechBody(BaseModel):
    """``OpenAICreateSpeechRequest``: unknown fields are dropped, as on vLLM-Omni."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    input: str
    model: str | None = None
    voice: str | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    sample_rate: int | None = Field(None, gt=0)
    speed: float | None = Field(1.0, ge=0.25, le=4.0)
    stream: bool = False
    stream_format: Literal["sse", "audio"] | None = None
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    ref_audio: str | list[str] | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    max_new_tokens: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    initial_codec_chunk_frames: int | None = Field(None, ge=0)
    non_streaming_mode: bool | None = None
    extra_params: dict[str, Any] | None = None
    word_timestamps: bool = False

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_id(cls, v: Any) -> Any:
        return v.get("id") if isinstance(v, dict) else v

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
    def _streaming_format(self) -> SpeechBody:
        if self.is_streaming and self.response_format not in ("pcm", "wav"):
            raise ValueError(
                "Streaming (stream=true, stream_format='audio', or stream_format='sse') requires "
                f"response_format='pcm' or 'wav'. Got response_format='{self.response_format}'."
            )
        return self


class SessionConfig(BaseModel):
    """``StreamingSpeechSessionConfig`` of the WebSocket; unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model: str | None = None
    voice: str | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    max_new_tokens: int | None = Field(None, ge=1)
    initial_codec_chunk_frames: int | None = Field(None, ge=0)
    non_streaming_mode: bool | None = None
    seed: int | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    stream_audio: bool = False
    word_timestamps: bool = False
    split_granularity: Literal["none", "sentence", "clause"] = "none"

    @model_validator(mode="after")
    def _stream_rules(self) -> SessionConfig:
        if self.stream_audio and self.response_format != "pcm":
            raise ValueError("stream_audio=true requires response_format='pcm'")
        if self.stream_audio and self.speed != 1.0:
            raise ValueError("speed must be 1.0 when stream_audio=true")
        return self


VALIDATION_TYPE = "Bad Request"
"""vLLM's ``error.type`` for a request body that fails parsing or validation (its
``validation_exception_handler``: ``HTTPStatus.BAD_REQUEST.phrase``), unlike the handler's
own ``BadRequestError``s."""


def validation_param(e: ValidationError) -> str:
    """vLLM's ``error.param`` for a body validation error: the first error's location under
    ``body`` (``body.speed``; ``body`` for whole-body rules such as streaming + mp3)."""
    errors = e.errors()
    loc = [str(x) for x in (errors[0].get("loc", ()) if errors else ())]
    return ".".join(["body", *loc])


def validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
