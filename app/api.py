"""``listenlab api``: serve vLLM-Omni's speech API over any listenlab backend.

Field names, event names, the streaming WAV header and the error shapes follow vLLM-Omni
(``shared/reference/vllm-omni-speech-api.md`` §2-§5), so any vLLM-Omni or OpenAI client can use
the CPU voice, and the remote backend can be tested end to end over real sockets here.

Routes: ``POST /v1/audio/speech`` (whole file, SSE, raw pcm/wav stream), ``WS
/v1/audio/speech/stream``, ``GET/POST/DELETE /v1/audio/voices``, ``GET /v1/models``,
``GET /health``. A client that goes away cancels generation: the backend stream is closed.
"""

import argparse
import asyncio
import base64
import binascii
import contextlib
import io
import json
import re
import struct
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from backends.base import (
    AudioChunk,
    Backend,
    BackendError,
    InvalidRequest,
    SpeechRequest,
    UnknownVoice,
    Unsupported,
)

MAX_INSTRUCTIONS = 500
REF_MIN_S, REF_MAX_S = 1.0, 30.0
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
RESAMPLE_RANGE = (8000, 192000)
UPLOAD_MIME = {
    "audio/mpeg",
    "audio/wav",
    "audio/x-wav",
    "audio/ogg",
    "audio/aac",
    "audio/flac",
    "audio/webm",
    "audio/mp4",
}
CONTENT_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
OPUS_RATES = {8000, 12000, 16000, 24000, 48000}
CONFIG_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0
MAX_CONFIG_MESSAGE = 4 * 1024 * 1024
MAX_TEXT_MESSAGE = 128 * 1024
_NO_USAGE = {
    "input_tokens": 0,
    "output_tokens": 0,
    "total_tokens": 0,
    "input_token_details": {"text_tokens": 0, "audio_tokens": 0},
}


# --------------------------------------------------------------------------- wire helpers


def wav_stream_header(sample_rate: int, channels: int) -> bytes:
    """The 44-byte streaming header: RIFF and data sizes are the 0xFFFFFFFF placeholder."""
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        0xFFFFFFFF,
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        sample_rate,
        sample_rate * channels * 2,
        channels * 2,
        16,
        b"data",
        0xFFFFFFFF,
    )


def sse_event(name: str, payload: dict[str, Any]) -> bytes:
    """One event: an ``event:`` line, one compact ``data:`` line, a blank line (no [DONE])."""
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def error_body(
    message: str, type_: str = "BadRequestError", code: int = 400, param: str | None = None
):
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def encode_file(samples: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """Whole-file encoding with soundfile, as the reference server does (pcm = headerless s16le)."""
    import soundfile as sf

    if fmt == "pcm":
        return np.ascontiguousarray(samples, dtype="<i2").tobytes()
    buf = io.BytesIO()
    kinds = {
        "wav": ("WAV", "PCM_16"),
        "flac": ("FLAC", "PCM_16"),
        "mp3": ("MP3", None),
        "opus": ("OGG", "OPUS"),
    }
    container, subtype = kinds[fmt]
    sf.write(buf, samples, sample_rate, format=container, subtype=subtype)
    return buf.getvalue()


def mp3_available() -> bool:
    import soundfile as sf

    return "MP3" in sf.available_formats()


def decode_audio(data: bytes, what: str) -> tuple[np.ndarray, int]:
    """Decode any soundfile-readable clip to float32 mono; raises InvalidRequest if it cannot."""
    import soundfile as sf

    try:
        x, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as e:
        raise InvalidRequest(f"could not decode {what}: {e}") from None
    return x.mean(axis=1), int(sr)


def mono_wav(x: np.ndarray, sr: int) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, x, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def check_ref_duration(x: np.ndarray, sr: int) -> None:
    dur = len(x) / sr if sr else 0.0
    if dur < REF_MIN_S:
        raise InvalidRequest(
            f"Reference audio too short ({dur:.2f}s). At least {REF_MIN_S:g}s is required."
        )
    if dur > REF_MAX_S:
        raise InvalidRequest(
            f"Reference audio too long ({dur:.2f}s). Maximum {REF_MAX_S:g}s is allowed."
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
    def _streaming_format(self) -> "SpeechBody":
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
    def _stream_rules(self) -> "SessionConfig":
        if self.stream_audio and self.response_format != "pcm":
            raise ValueError("stream_audio=true requires response_format='pcm'")
        if self.stream_audio and self.speed != 1.0:
            raise ValueError("speed must be 1.0 when stream_audio=true")
        return self


def validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


# --------------------------------------------------------------------------- per-request state


@dataclass
class RequestState:
    request_id: str
    route: str
    started: float = field(default_factory=time.monotonic)
    chunks: int = 0
    bytes_sent: int = 0


@dataclass
class ApiState:
    """Everything one app instance keeps; per-request entries are freed when they end."""

    backend: Backend
    served_model: str
    own_backend: bool = False
    config_timeout: float = CONFIG_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    requests: dict[str, RequestState] = field(default_factory=dict)
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Metadata of voices uploaded through this server (consent, created_at, size, ...)."""
    created: int = field(default_factory=lambda: int(time.time()))

    @contextlib.contextmanager
    def track(self, route: str, request_id: str | None = None):
        rid = request_id or f"speech-{uuid.uuid4().hex}"
        st = RequestState(rid, route)
        self.requests[rid] = st
        try:
            yield st
        finally:
            self.requests.pop(rid, None)


class _Resampler:
    """Streaming resampling to a requested ``sample_rate`` (soxr keeps state across chunks)."""

    def __init__(self, in_rate: int, out_rate: int, channels: int):
        import soxr

        self.channels = channels
        self.rs = soxr.ResampleStream(in_rate, out_rate, channels, dtype="int16")

    def __call__(self, pcm: np.ndarray, last: bool = False) -> np.ndarray:
        x = pcm.reshape(-1, self.channels) if self.channels > 1 else pcm
        y = self.rs.resample_chunk(x, last=last)
        return np.ascontiguousarray(y, dtype=np.int16).reshape(-1)


class _Output:
    """Turns chunks into wire PCM at the output rate; a format change mid-stream raises."""

    def __init__(self, want_rate: int | None):
        self.want = want_rate
        self.fmt: tuple[int, int] | None = None
        self.rs: _Resampler | None = None

    @property
    def rate(self) -> int:
        assert self.fmt
        return self.want or self.fmt[0]

    @property
    def channels(self) -> int:
        assert self.fmt
        return self.fmt[1]

    def pcm(self, c: AudioChunk) -> bytes:
        if self.fmt is None:
            self.fmt = (c.sample_rate, c.channels)
            if self.want and self.want != c.sample_rate:
                self.rs = _Resampler(c.sample_rate, self.want, c.channels)
        elif self.fmt != (c.sample_rate, c.channels):
            raise BackendError(
                f"the backend changed format mid-stream: {self.fmt} then {(c.sample_rate, c.channels)}"
            )
        x = self.rs(c.pcm) if self.rs else c.pcm
        return x.astype("<i2").tobytes()

    def flush(self) -> bytes:
        if self.rs is None:
            return b""
        return self.rs(np.zeros(0, np.int16), last=True).astype("<i2").tobytes()


# --------------------------------------------------------------------------- the app


class ApiError(Exception):
    """An error answered as vLLM-Omni's OpenAI-shaped JSON."""

    def __init__(
        self, message: str, status: int = 400, type_: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.message, self.status, self.param = message, status, param
        self.type = type_ or ("BadRequestError" if status < 500 else "server_error")
        if status == 404 and type_ is None:
            self.type = "NotFoundError"


def _error_from(exc: BaseException) -> ApiError:
    """Map listenlab errors to the reference's statuses (generic failures are 400 there too)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InvalidRequest):
        return ApiError(str(exc), 400)
    if isinstance(exc, BackendError):
        st = exc.status if exc.status and 400 <= exc.status < 600 else 500
        return ApiError(str(exc), st)
    return ApiError(f"Speech generation failed: {exc}", 400)


def create_api_app(
    backend: Backend,
    *,
    served_model: str | None = None,
    own_backend: bool = False,
    config_timeout: float = CONFIG_TIMEOUT,
    idle_timeout: float = IDLE_TIMEOUT,
):
    """A FastAPI app speaking vLLM-Omni's speech API over ``backend``.

    ``own_backend`` closes the backend when the app shuts down (the CLI owns its backend;
    tests and other apps that mount this one usually do not).
    """
    # FastAPI is imported here, not at module level, so every other ``listenlab`` command
    # (which imports this module for its parser) starts 0.3 s faster.
    from fastapi import FastAPI, File, Form, Request, UploadFile, WebSocket
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response, StreamingResponse

    state = ApiState(
        backend,
        served_model or backend.name,
        own_backend=own_backend,
        config_timeout=config_timeout,
        idle_timeout=idle_timeout,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        # A remote backend learns its capabilities (cloning, rate) from its server's model card.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(backend.health(), 5)
        try:
            yield
        finally:
            if state.own_backend:
                await backend.aclose()

    app = FastAPI(title="listenlab speech API (vLLM-Omni compatible)", lifespan=lifespan)
    app.state.api = state

    def err_response(e: ApiError) -> JSONResponse:
        return JSONResponse(error_body(e.message, e.type, e.status, e.param), status_code=e.status)

    @app.exception_handler(ApiError)
    async def _api_error(_req, e: ApiError):
        return err_response(e)

    @app.exception_handler(InvalidRequest)
    async def _invalid(_req, e: InvalidRequest):
        return err_response(ApiError(str(e), 400))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_req, e: RequestValidationError):
        # vLLM answers body validation errors with 400 and the OpenAI shape.
        msgs = [str(x.get("msg", x)) if isinstance(x, dict) else str(x) for x in e.errors()]
        return err_response(ApiError("; ".join(msgs), 400))

    def check_model(model: str | None) -> None:
        if model and model != state.served_model:
            raise ApiError(f"The model `{model}` does not exist.", 404, "NotFoundError", "model")

    def ref_audio_wav(ref: str | list[str] | None) -> bytes | None:
        if ref is None:
            return None
        if isinstance(ref, list):
            raise ApiError(
                "ref_audio as a list is only for multi-speaker models; send one data: URL"
            )
        scheme = ref.split(":", 1)[0].lower()
        if scheme in ("http", "https", "file") or "://" in ref[:10]:
            raise ApiError(
                f"ref_audio with scheme {scheme!r} is not accepted by listenlab api; "
                "send it inline as data:audio/wav;base64,…"
            )
        m = re.match(r"(?is)^data:([^;,]*)(;[^,]*)?,(.*)$", ref)
        if not m or "base64" not in (m.group(2) or "").lower():
            raise ApiError("ref_audio must be a data:<mime>;base64,… URL")
        try:
            raw = base64.b64decode(m.group(3), validate=False)
        except (binascii.Error, ValueError):
            raise ApiError("ref_audio is not valid base64") from None
        x, sr = decode_audio(raw, "ref_audio")
        check_ref_duration(x, sr)
        return mono_wav(x, sr)

    def build_request(body: SpeechBody, request_id: str) -> SpeechRequest:
        check_model(body.model)
        if not body.input or not body.input.strip():
            raise ApiError("Input text cannot be empty")
        if body.instructions and len(body.instructions) > MAX_INSTRUCTIONS:
            raise ApiError(
                f"instructions is too long ({len(body.instructions)} characters); the maximum is {MAX_INSTRUCTIONS}"
            )
        if body.word_timestamps:
            if body.is_streaming:
                raise ApiError(
                    "word_timestamps=true is not supported with streaming; use the WebSocket instead."
                )
            raise ApiError(
                "word_timestamps=true requires the server to be launched with --forced-aligner."
            )
        caps = backend.capabilities
        speed = 1.0 if body.speed is None else body.speed
        if body.is_streaming and speed != 1.0 and not caps.speed_streaming:
            raise ApiError(
                f"Speed adjustment (speed={speed:g}) is not supported with streaming by the current "
                "TTS model; use speed=1.0 or a non-streaming request."
            )
        if speed != 1.0 and not caps.speed:
            raise ApiError("speed is not supported by the current TTS model")
        if (
            body.sample_rate is not None
            and not RESAMPLE_RANGE[0] <= body.sample_rate <= RESAMPLE_RANGE[1]
        ):
            lo, hi = RESAMPLE_RANGE
            raise ApiError(
                f"sample_rate={body.sample_rate} is not supported by the current TTS model; "
                f"supported rates: {lo}-{hi} (resampled)"
            )
        if body.response_format == "mp3" and not mp3_available():
            raise ApiError(
                "response_format='mp3' is not available: this libsndfile cannot write MP3"
            )
        ref = ref_audio_wav(body.ref_audio)
        if ref is not None and not caps.cloning:
            raise ApiError(
                f"the {backend.describe()} backend cannot clone voices, so ref_audio is not supported"
            )
        if body.ref_text and ref is None and not body.voice:
            raise ApiError("ref_text needs ref_audio (or an uploaded voice)")
        voice = body.voice.strip().lower() if body.voice else None
        if voice == "default":
            voice = None
        extra: dict[str, Any] = {}
        for key in (
            "task_type",
            "x_vector_only_mode",
            "max_new_tokens",
            "initial_codec_chunk_frames",
            "non_streaming_mode",
        ):
            v = getattr(body, key)
            if v is not None:
                extra[key] = v
        if body.extra_params is not None:
            extra["extra_params"] = body.extra_params
        req = SpeechRequest(
            text=body.input,
            voice=voice,
            language=body.language,
            instructions=body.instructions,
            speed=speed,
            seed=body.seed,
            ref_audio=ref,
            ref_text=body.ref_text,
            extra=extra,
            request_id=request_id,
        )
        return req.validated()

    async def pull(http: Request, it: AsyncIterator[AudioChunk]) -> AudioChunk | None:
        """The next chunk (None at the end), or :class:`_ClientGone` as soon as the client
        disconnects, so generation stops without waiting for the next write to fail."""
        task = asyncio.ensure_future(it.__anext__())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.2)
                if done:
                    try:
                        return task.result()
                    except StopAsyncIteration:
                        return None
                if await http.is_disconnected():
                    raise _ClientGone
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def first_chunk(http: Request, it: AsyncIterator[AudioChunk]) -> AudioChunk:
        """Wait for the first audio before answering, so validation errors still get a status."""
        c = await pull(http, it)
        if c is None:
            raise ApiError("Speech generation failed: the backend produced no audio")
        return c

    async def parse_body(http: Request) -> SpeechBody:
        media = http.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise ApiError("Unsupported Media Type: Only 'application/json' is allowed")
        raw = await http.body()
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise ApiError(f"Invalid JSON body: {e}") from None
        if not isinstance(data, dict):
            raise ApiError("The request body must be a JSON object")
        try:
            return SpeechBody.model_validate(data)
        except ValidationError as e:
            raise ApiError(validation_message(e)) from None

    @app.post("/v1/audio/speech")
    async def create_speech(http: Request):
        body = await parse_body(http)
        rid = f"speech-{uuid.uuid4().hex}"
        req = build_request(body, rid)
        with state.track("speech", rid) as st:
            stream = backend.stream(req)
            try:
                if not body.is_streaming:
                    return await whole_file(http, body, stream, st)
                first = await first_chunk(http, stream)
            except _ClientGone:
                await stream.aclose()
                return Response(status_code=499)
            except BaseException as e:
                await stream.aclose()
                if isinstance(e, Exception):
                    raise _error_from(e) from None
                raise
        # The streaming body owns the stream (and the request state) from here on.
        out = _Output(body.sample_rate)
        headers = {"X-Request-Id": rid, "Cache-Control": "no-cache"}
        if body.is_sse_stream:
            gen = sse_body(http, stream, first, out, body.response_format, rid)
            return StreamingResponse(gen, media_type="text/event-stream", headers=headers)
        gen = raw_body(http, stream, first, out, body.response_format, rid)
        return StreamingResponse(
            gen, media_type=CONTENT_TYPES[body.response_format], headers=headers
        )

    async def whole_file(http: Request, body: SpeechBody, stream, st: RequestState):
        out = _Output(body.sample_rate)
        parts: list[bytes] = []
        try:
            chunk = await first_chunk(http, stream)
            while chunk is not None:
                parts.append(out.pcm(chunk))
                st.chunks += 1
                chunk = await pull(http, stream)
            parts.append(out.flush())
        finally:
            await stream.aclose()
        ch = out.channels
        samples = np.frombuffer(b"".join(parts), dtype="<i2").reshape(-1, ch)
        fmt = body.response_format
        if fmt == "opus" and out.rate not in OPUS_RATES:
            raise ApiError(
                f"response_format='opus' needs an Opus sample rate ({sorted(OPUS_RATES)}); the audio is "
                f"{out.rate} Hz: pass sample_rate=24000 or 48000"
            )
        data = encode_file(samples, out.rate, fmt)
        return Response(
            data, media_type=CONTENT_TYPES[fmt], headers={"X-Request-Id": st.request_id}
        )

    async def raw_body(http: Request, stream, first: AudioChunk, out: _Output, fmt: str, rid: str):
        """pcm/wav bytes. A failure after the 200 cuts the connection (no end marker exists)."""
        with state.track("speech-stream", rid) as st:
            try:
                pcm = out.pcm(first)
                if fmt == "wav":  # emitted just before the first audio
                    yield wav_stream_header(out.rate, out.channels)
                yield pcm
                while (c := await pull(http, stream)) is not None:
                    data = out.pcm(c)
                    st.chunks += 1
                    st.bytes_sent += len(data)
                    if data:
                        yield data
                tail = out.flush()
                if tail:
                    yield tail
            except _ClientGone:
                return
            finally:
                await stream.aclose()

    async def sse_body(http: Request, stream, first: AudioChunk, out: _Output, fmt: str, rid: str):
        """``speech.audio.delta`` events, then exactly one ``speech.audio.done`` or ``.error``."""

        def delta(data: bytes) -> bytes:
            payload = {
                "type": "speech.audio.delta",
                "audio": base64.b64encode(data).decode(),
                "response_format": fmt,
            }
            return sse_event("speech.audio.delta", payload)

        with state.track("speech-sse", rid) as st:
            try:
                pcm = out.pcm(first)
                if fmt == "wav":  # the first delta holds only the header
                    yield delta(wav_stream_header(out.rate, out.channels))
                yield delta(pcm)
                st.bytes_sent += len(pcm)
                while (c := await pull(http, stream)) is not None:
                    data = out.pcm(c)
                    st.chunks += 1
                    if data:
                        st.bytes_sent += len(data)
                        yield delta(data)
                tail = out.flush()
                if tail:
                    yield delta(tail)
            except _ClientGone:
                return
            except Exception as e:
                err = _error_from(e)
                payload: dict[str, Any] = {
                    "type": "speech.audio.error",
                    "error": {
                        "message": err.message,
                        "type": "server_error",
                        "param": None,
                        "code": 500,
                    },
                }
                # Audio was always sent by now (the response starts with the first chunk).
                payload.update(partial_audio=True, action="discard")
                yield sse_event("speech.audio.error", payload)
                return
            finally:
                await stream.aclose()
            yield sse_event("speech.audio.done", {"type": "speech.audio.done", "usage": _NO_USAGE})

    # -- voices

    @app.get("/v1/audio/voices")
    async def list_voices():
        try:
            voices = await backend.voices()
        except Exception as e:
            raise _error_from(e) from None
        names = sorted({v.name.lower() for v in voices} | {"default"})
        uploaded = []
        for v in voices:
            if v.kind != "uploaded":
                continue
            meta = state.uploads.get(v.name.lower(), {})
            d: dict[str, Any] = {
                "name": v.name,
                "consent": meta.get("consent", ""),
                "created_at": meta.get("created_at", 0),
                "file_size": meta.get("file_size", 0),
                "mime_type": meta.get("mime_type", "audio/wav"),
                "embedding_source": "audio",
                "embedding_dim": None,
            }
            if v.ref_text:
                d["ref_text"] = v.ref_text
            desc = v.description or meta.get("speaker_description")
            if desc:
                d["speaker_description"] = desc
            uploaded.append(d)
        return {"voices": names, "uploaded_voices": uploaded}

    @app.post("/v1/audio/voices")
    async def upload_voice(
        name: str = Form(...),
        consent: str = Form(...),
        audio_sample: UploadFile | None = File(None),
        speaker_embedding: str | None = Form(None),
        ref_text: str | None = Form(None),
        speaker_description: str | None = Form(None),
    ):
        caps = backend.capabilities
        refresh = getattr(backend, "refresh", None)
        if not caps.cloning and callable(refresh):
            with contextlib.suppress(Exception):
                caps = await refresh()
        if not caps.cloning:
            raise ApiError(
                f"the {backend.describe()} backend cannot clone voices, so voice uploads are not supported"
            )
        if speaker_embedding is not None:
            if audio_sample is not None:
                raise ApiError("Provide either audio_sample or speaker_embedding, not both")
            raise ApiError(
                "speaker_embedding uploads are Qwen3-only and not supported by listenlab api"
            )
        if audio_sample is None:
            raise ApiError("Either audio_sample or speaker_embedding is required")
        clean = name.strip()
        if not clean or clean in (".", "..") or any(c in clean for c in "/\\\x00"):
            raise ApiError(f"Invalid voice name {name!r}")
        data = await audio_sample.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            raise ApiError(f"Audio file too large (max {MAX_UPLOAD_BYTES // (1024 * 1024)} MB)")
        mime = (audio_sample.content_type or "").lower()
        if mime in ("", "application/octet-stream"):
            import mimetypes

            mime = (mimetypes.guess_type(audio_sample.filename or "")[0] or "").lower()
        if mime not in UPLOAD_MIME:
            raise ApiError(
                f"Unsupported audio MIME type {mime or 'unknown'!r}; allowed: {', '.join(sorted(UPLOAD_MIME))}"
            )
        try:
            x, sr = decode_audio(data, "the uploaded audio")
            check_ref_duration(x, sr)
            v = await backend.add_voice(
                clean, mono_wav(x, sr), ref_text=ref_text or None, consent=consent
            )
        except Exception as e:
            raise _error_from(e) from None
        meta = {
            "name": v.name,
            "consent": consent,
            "created_at": int(time.time()),
            "mime_type": mime,
            "file_size": len(data),
        }
        if v.ref_text or ref_text:
            meta["ref_text"] = v.ref_text or ref_text
        if speaker_description:
            meta["speaker_description"] = speaker_description
        state.uploads[clean.lower()] = meta
        return {"success": True, "voice": meta}

    @app.delete("/v1/audio/voices/{name}")
    async def delete_voice(name: str):
        try:
            await backend.delete_voice(name)
        except UnknownVoice:
            raise ApiError(f"Voice '{name}' not found", 404) from None
        except Unsupported as e:
            raise ApiError(str(e), 400) from None
        except Exception as e:
            raise _error_from(e) from None
        state.uploads.pop(name.lower(), None)
        return {"success": True, "message": f"Voice '{name}' deleted successfully"}

    # -- models and health

    @app.get("/v1/models")
    async def list_models():
        caps = backend.capabilities
        return {
            "object": "list",
            "data": [
                {
                    "id": state.served_model,
                    "object": "model",
                    "created": state.created,
                    "owned_by": "listenlab",
                    "root": backend.describe(),
                    "parent": None,
                    "permission": [],
                    # Extension (ignored by OpenAI clients): lets a remote listenlab learn the
                    # capabilities, rate and channels before the first request.
                    "listenlab": {
                        "backend": backend.describe(),
                        "streaming": caps.streaming,
                        "cloning": caps.cloning,
                        "languages": list(caps.languages),
                        "sample_rate": caps.sample_rate,
                        "channels": caps.channels,
                        "speed": caps.speed,
                        "speed_streaming": caps.speed_streaming,
                        "instructions": caps.instructions,
                        "seed": caps.seed,
                        "voice_library": caps.voice_library,
                    },
                }
            ],
        }

    @app.get("/health")
    async def health():
        try:
            h = await backend.health()
        except Exception as e:
            return JSONResponse({"status": "unhealthy", "reason": str(e)}, status_code=503)
        if h.ok:
            return {"status": "healthy"}
        return JSONResponse({"status": "unhealthy", "reason": h.detail}, status_code=503)

    # -- websocket

    @app.websocket("/v1/audio/speech/stream")
    async def speech_stream(ws: WebSocket):
        await _WsSession(state, ws).run()

    return app


# --------------------------------------------------------------------------- websocket session

_SENTENCE = re.compile(r"(?<=[.!?。！？।؟])\s*")
_CLAUSE = re.compile(r"(?<=[.!?。！？।؟,;，；、])\s*")


class _Splitter:
    """``split_granularity``: none buffers until input.done; sentence/clause emit finished units."""

    def __init__(self, granularity: str):
        self.pattern = {"sentence": _SENTENCE, "clause": _CLAUSE}.get(granularity)
        self.buf = ""

    def feed(self, text: str) -> list[str]:
        self.buf += text
        if self.pattern is None:
            return []
        parts = self.pattern.split(self.buf)
        self.buf = parts.pop()  # unfinished tail
        return [p.strip() for p in parts if p.strip()]

    def flush(self) -> list[str]:
        rest, self.buf = self.buf.strip(), ""
        return [rest] if rest else []


class _WsSession:
    """One WebSocket connection: any number of utterances, each ended by ``input.done``.

    A reader task receives client messages into a queue, so a disconnect is noticed while
    generating (and cancels it at once); messages sent meanwhile wait in order, as on vLLM-Omni.
    """

    def __init__(self, state: ApiState, ws):
        self.state, self.ws = state, ws
        self.queue: asyncio.Queue = asyncio.Queue()
        self.closed = asyncio.Event()

    async def reader(self) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            while True:
                msg = await self.ws.receive()
                if msg["type"] == "websocket.disconnect":
                    break
                await self.queue.put(msg)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            self.closed.set()
            await self.queue.put(None)

    async def send_error(self, message: str, **extra: Any) -> None:
        with contextlib.suppress(Exception):
            await self.ws.send_json({"type": "error", "message": message, **extra})

    async def next_message(self, timeout: float) -> dict | None | str:
        """A parsed message, None if the client left, "timeout", or "bad" after an error."""
        try:
            msg = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return "timeout"
        if msg is None:
            return None
        raw = msg.get("text")
        if raw is None:
            await self.send_error(
                "Internal error: binary frames are not accepted; send JSON text frames"
            )
            return "fatal"
        if len(raw) > MAX_CONFIG_MESSAGE:
            await self.send_error("WebSocket message too large")
            return "bad"
        try:
            data = json.loads(raw)
        except ValueError:
            await self.send_error("Invalid JSON message")
            return "bad"
        if not isinstance(data, dict):
            await self.send_error("WebSocket messages must be JSON objects")
            return "bad"
        if data.get("type") == "session.config":
            if len(raw) > MAX_CONFIG_MESSAGE:
                await self.send_error("session.config message too large")
                return "bad"
        elif len(raw) > MAX_TEXT_MESSAGE:
            await self.send_error("input.text message too large")
            return "bad"
        return data

    async def run(self) -> None:
        await self.ws.accept()
        reader = asyncio.create_task(self.reader())
        config: SessionConfig | None = None
        splitter = _Splitter("none")
        utterance = sentence = 0
        open_utterance = False
        try:
            while True:
                msg = await self.next_message(
                    self.state.config_timeout if config is None else self.state.idle_timeout
                )
                if msg == "timeout":
                    await self.send_error(
                        "Timeout waiting for session.config"
                        if config is None
                        else "Idle timeout: no message received"
                    )
                    return
                if msg is None or msg == "fatal":
                    return
                if msg == "bad":
                    if config is None:
                        return
                    continue
                kind = msg.get("type")
                if kind == "session.config":
                    if open_utterance:
                        await self.send_error(
                            "session.config cannot be applied while an utterance is in progress; send input.done first"
                        )
                        continue
                    new = await self.build_config(msg)
                    if new is None:
                        if config is None:
                            return
                        continue
                    config, splitter = new, _Splitter(new.split_granularity)
                elif config is None:
                    await self.send_error(f"Expected session.config, got: {kind}")
                    return
                elif kind == "input.text":
                    text = msg.get("text", "")
                    if not isinstance(text, str):
                        await self.send_error("input.text requires a string value")
                        continue
                    if text:
                        open_utterance = True
                    for unit in splitter.feed(text):
                        if not await self.generate(config, unit, utterance, sentence):
                            return
                        sentence += 1
                elif kind == "input.done":
                    for unit in splitter.flush():
                        if not await self.generate(config, unit, utterance, sentence):
                            return
                        sentence += 1
                    await self.ws.send_json(
                        {
                            "type": "session.done",
                            "utterance_index": utterance,
                            "total_sentences": sentence,
                        }
                    )
                    utterance, sentence, open_utterance = utterance + 1, 0, False
                elif kind == "session.close":
                    return
                else:
                    await self.send_error(f"Unknown message type: {kind}")
        except Exception as e:  # the socket went away mid-send, or a bug: report if possible
            if not self.closed.is_set():
                await self.send_error(f"Internal error: {e}")
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def build_config(self, msg: dict) -> SessionConfig | None:
        try:
            cfg = SessionConfig.model_validate({k: v for k, v in msg.items() if k != "type"})
        except ValidationError as e:
            await self.send_error(f"Invalid session config: {validation_message(e)}")
            return None
        if cfg.model and cfg.model != self.state.served_model:
            await self.send_error(f"The model `{cfg.model}` does not exist.")
            return None
        if cfg.word_timestamps:
            # Checked here rather than per unit: listenlab has no forced aligner.
            pass
        return cfg

    def request_for(self, cfg: SessionConfig, text: str, rid: str) -> SpeechRequest:
        backend = self.state.backend
        ref = None
        if cfg.ref_audio:
            m = re.match(r"(?is)^data:([^;,]*)(;[^,]*)?,(.*)$", cfg.ref_audio)
            if not m:
                raise InvalidRequest("ref_audio must be a data:<mime>;base64,… URL")
            x, sr = decode_audio(base64.b64decode(m.group(3)), "ref_audio")
            check_ref_duration(x, sr)
            ref = mono_wav(x, sr)
            if not backend.capabilities.cloning:
                raise InvalidRequest(
                    f"the {backend.describe()} backend cannot clone voices, so ref_audio is not supported"
                )
        if cfg.speaker_embedding is not None:
            raise InvalidRequest("speaker_embedding is not supported by listenlab api")
        voice = cfg.voice.strip().lower() if cfg.voice else None
        extra = {
            k: getattr(cfg, k)
            for k in (
                "task_type",
                "x_vector_only_mode",
                "max_new_tokens",
                "initial_codec_chunk_frames",
                "non_streaming_mode",
            )
            if getattr(cfg, k) is not None
        }
        return SpeechRequest(
            text=text,
            voice=None if voice == "default" else voice,
            language=cfg.language,
            instructions=cfg.instructions,
            speed=cfg.speed,
            seed=cfg.seed,
            ref_audio=ref,
            ref_text=cfg.ref_text,
            extra=extra,
            request_id=rid,
        ).validated()

    async def generate(self, cfg: SessionConfig, text: str, u: int, s: int) -> bool:
        """Synthesize one unit and send it; False if the client has gone (stop the session)."""
        ws = self.ws
        fmt = cfg.response_format
        if cfg.word_timestamps:
            await self.send_error(
                "word_timestamps=true but the server was launched without --forced-aligner; either "
                "restart the server with that flag or set word_timestamps=false in session.config."
            )
            return True
        start: dict[str, Any] = {
            "type": "audio.start",
            "utterance_index": u,
            "sentence_index": s,
            "sentence_text": text,
            "format": fmt,
        }
        describe = cfg.stream_audio and fmt == "pcm"
        started = False

        async def send_start(out: _Output | None = None) -> None:
            nonlocal started
            if started:
                return
            started = True
            if describe and out is not None and out.fmt:
                start["sample_rate"], start["channels"] = out.rate, out.channels
            await ws.send_json(start)

        if not describe:
            await send_start()
        total, failed = 0, False
        rid = f"speech-{uuid.uuid4().hex}"
        with self.state.track("speech-ws", rid) as st:
            stream = None
            try:
                req = self.request_for(cfg, text, rid)
                stream = self.state.backend.stream(req)
                if cfg.stream_audio:
                    out = _Output(None)
                    it = stream.__aiter__()
                    while True:
                        c = await self.until_closed(it.__anext__())
                        if c is None:
                            break
                        data = out.pcm(c)
                        await send_start(out)
                        total += len(data)
                        st.bytes_sent = total
                        await ws.send_bytes(data)
                else:
                    out = _Output(None)
                    parts = []
                    it = stream.__aiter__()
                    while (c := await self.until_closed(it.__anext__())) is not None:
                        parts.append(out.pcm(c))
                    if out.fmt is None:
                        raise BackendError("the backend produced no audio")
                    samples = np.frombuffer(b"".join(parts), dtype="<i2").reshape(-1, out.channels)
                    if fmt == "opus" and out.rate not in OPUS_RATES:
                        raise InvalidRequest(
                            f"opus needs an Opus sample rate; the audio is {out.rate} Hz"
                        )
                    if fmt == "mp3" and not mp3_available():
                        raise InvalidRequest(
                            "mp3 is not available: this libsndfile cannot write MP3"
                        )
                    data = encode_file(samples, out.rate, fmt)
                    total = len(data)
                    await ws.send_bytes(data)
            except _ClientGone:
                return False
            except Exception as e:
                if self.closed.is_set():
                    return False
                failed = True
                await send_start()
                extra = {"partial_audio": True, "action": "discard"} if total else {}
                reason = (
                    str(e) if isinstance(e, ListenlabErrorTypes) else f"{type(e).__name__}: {e}"
                )
                await self.send_error(
                    f"Generation failed for utterance {u}, sentence {s}: {reason}", **extra
                )
            finally:
                if stream is not None:
                    await stream.aclose()
        if self.closed.is_set():
            return False
        await send_start()
        await ws.send_json(
            {
                "type": "audio.done",
                "utterance_index": u,
                "sentence_index": s,
                "total_bytes": total,
                "error": failed,
            }
        )
        return True

    async def until_closed(self, aw) -> AudioChunk | None:
        """Await the next chunk, or give up at once when the client disconnects."""
        task = asyncio.ensure_future(aw)
        closer = asyncio.ensure_future(self.closed.wait())
        try:
            done, _ = await asyncio.wait({task, closer}, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                try:
                    return task.result()
                except StopAsyncIteration:
                    return None
            raise _ClientGone
        finally:
            closer.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class _ClientGone(Exception):
    pass


ListenlabErrorTypes = (InvalidRequest, BackendError)


# --------------------------------------------------------------------------- CLI


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "api", help="serve vLLM-Omni's speech API (HTTP, SSE, WebSocket) over any listenlab backend"
    )
    p.add_argument("--backend", default="piper", help="backend spec (default: piper)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--served-model-name", help="model id clients must send (default: the backend's name)"
    )
    p.add_argument("--log-level", default="warning")
    p.set_defaults(func=_run_api)


def _run_api(args: argparse.Namespace) -> int:
    import uvicorn

    from backends.registry import load_backend

    backend = load_backend(args.backend)
    warm = getattr(backend, "warm_up", None)
    if callable(warm):
        warm()
    app = create_api_app(backend, served_model=args.served_model_name, own_backend=True)
    print(
        f"listenlab api: {backend.describe()} as model {app.state.api.served_model!r} on "
        f"http://{args.host}:{args.port}",
        flush=True,
    )
    uvicorn.run(
        app, host=args.host, port=args.port, log_level=args.log_level, ws="websockets-sansio"
    )
    return 0
