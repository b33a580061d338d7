"""``POST /v1/audio/speech``: one utterance as a whole file, an SSE stream or a raw pcm/wav stream.

Why the answer waits for the first chunk: until audio exists, a failure can still be an HTTP
status with vLLM-Omni's error body; after the 200, a raw stream can only be cut (it has no error
marker) and SSE ends with one ``speech.audio.error`` event. A client that goes away stops the
generation at once (the backend stream is closed), also while it waits in the queue.
"""

import asyncio
import contextlib
import uuid
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask

from app.api.clips import ref_audio_wav
from app.api.errors import ApiError, api_error
from app.api.limits import MAX_INSTRUCTIONS, MAX_NEW_TOKENS, OPUS_RATES, RESAMPLE_RANGE
from app.api.output import StreamOutput
from app.api.schemas import VALIDATION_TYPE, SpeechBody, validation_message, validation_param
from app.api.state import (
    ApiState,
    ClientGone,
    Lease,
    RequestState,
    acquire_unless_gone,
    api_state,
)
from app.web.inputs import JsonTooDeep, loads_limited
from backends.audio import encode_audio, mp3_available
from backends.base import AudioChunk, SpeechRequest
from backends.vllm_omni import wire
from backends.vllm_omni.request import SpeechFields, speech_request

router = APIRouter()

BIG_BODY = 256 * 1024
"""A body bigger than this (an inline ``ref_audio``) is parsed off the event loop."""


# --------------------------------------------------------------------------- the request


async def parse_body(http: Request, json_depth: int) -> SpeechBody:
    """The JSON body, validated; errors in vLLM's shape (``"Bad Request"``, ``param``)."""
    media = http.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(
            "Unsupported Media Type: Only 'application/json' is allowed", 400, VALIDATION_TYPE
        )
    raw = await http.body()
    try:
        if len(raw) > BIG_BODY:
            data = await asyncio.to_thread(loads_limited, raw, json_depth)
        else:
            data = loads_limited(raw, json_depth)
    except JsonTooDeep as e:
        raise ApiError(f"Invalid JSON body: {e}", 400, VALIDATION_TYPE, "body") from None
    except ValueError as e:
        # vLLM names the character where decoding failed: body.<position>
        pos = getattr(e, "pos", None)
        param = "body" if pos is None else f"body.{pos}"
        raise ApiError(f"Invalid JSON body: {e}", 400, VALIDATION_TYPE, param) from None
    if not isinstance(data, dict):
        raise ApiError("The request body must be a JSON object", 400, VALIDATION_TYPE, "body")
    try:
        return SpeechBody.model_validate(data)
    except ValidationError as e:
        raise ApiError(validation_message(e), 400, VALIDATION_TYPE, validation_param(e)) from None


def check_body(body: SpeechBody, state: ApiState, ref: bytes | None) -> None:
    """What the HTTP route refuses before anything runs (vLLM-Omni's rules and messages)."""
    state.check_model(body.model)
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
    if body.max_new_tokens is not None and body.max_new_tokens > MAX_NEW_TOKENS:
        # vLLM-Omni's adapters (tts_adapters/base.py _TTS_MAX_NEW_TOKENS_MAX)
        raise ApiError(f"max_new_tokens cannot exceed {MAX_NEW_TOKENS}")
    check_output(body, state)
    if body.ref_text and ref is None and not body.voice:
        raise ApiError("ref_text needs ref_audio (or an uploaded voice)")


def check_output(body: SpeechBody, state: ApiState) -> None:
    """Speed, rate and format the backend (or this libsndfile) can give."""
    caps = state.backend.capabilities
    speed = 1.0 if body.speed is None else body.speed
    if body.is_streaming and speed != 1.0 and not caps.speed_streaming:
        raise ApiError(
            f"Speed adjustment (speed={speed:g}) is not supported with streaming by the current "
            "TTS model; use speed=1.0 or a non-streaming request."
        )
    if speed != 1.0 and not caps.speed:
        raise ApiError("speed is not supported by the current TTS model")
    lo, hi = RESAMPLE_RANGE
    if body.sample_rate is not None and not lo <= body.sample_rate <= hi:
        raise ApiError(
            f"sample_rate={body.sample_rate} is not supported by the current TTS model; "
            f"supported rates: {lo}-{hi} (resampled)"
        )
    if body.response_format == "mp3" and not mp3_available():
        raise ApiError("response_format='mp3' is not available: this libsndfile cannot write MP3")


# --------------------------------------------------------------------------- reading the backend


async def pull(http: Request, it: AsyncIterator[AudioChunk]) -> AudioChunk | None:
    """The next chunk (None at the end), or :class:`ClientGone` as soon as the client
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
                raise ClientGone
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


# --------------------------------------------------------------------------- the route


@router.post("/v1/audio/speech")
async def create_speech(http: Request, state: ApiState = Depends(api_state)):
    body = await parse_body(http, state.limits.json_depth)
    rid = f"speech-{uuid.uuid4().hex}"
    ref = await ref_audio_wav(state, body.ref_audio)  # decoded off the loop, before queueing
    check_body(body, state, ref)
    req = speech_request(
        SpeechFields.of(body), body.input, ref_audio=ref, request_id=rid, backend=state.backend
    )
    state.check_queue()
    lease = Lease(state.gate)
    if not await acquire_unless_gone(lease, http.is_disconnected):
        return Response(status_code=499)
    if not body.is_streaming:
        try:
            return await whole_file(http, state, body, req)
        finally:
            await lease.release()
    try:
        started = await start_stream(http, state, req)
    except BaseException:
        await lease.release()
        raise
    if started is None:
        await lease.release()
        return Response(status_code=499)
    stream, first = started
    # The streaming body owns the stream, the request state and the slot from here on.
    answer = SpeechStream(http, state, stream, first, StreamOutput(body.sample_rate), rid, lease)
    fmt = body.response_format
    headers = {"X-Request-Id": rid, "Cache-Control": "no-cache"}
    if body.is_sse_stream:
        gen, media = sse_body(answer, fmt), wire.SSE_TYPE
    else:
        gen, media = raw_body(answer, fmt), wire.CONTENT_TYPES[fmt]
    weakref.finalize(gen, lease.release_soon)
    return StreamingResponse(
        gen, media_type=media, headers=headers, background=BackgroundTask(lease.release)
    )


async def start_stream(
    http: Request, state: ApiState, req: SpeechRequest
) -> tuple[AsyncIterator[AudioChunk], AudioChunk] | None:
    """The backend stream and its first chunk; None if the client left meanwhile."""
    with state.track("speech", req.request_id):
        stream = state.backend.stream(req)
        try:
            return stream, await first_chunk(http, stream)
        except ClientGone:
            await stream.aclose()
            return None
        except BaseException as e:
            await stream.aclose()
            if isinstance(e, Exception):
                raise api_error(e) from None
            raise


async def whole_file(http: Request, state: ApiState, body: SpeechBody, req: SpeechRequest):
    """The whole utterance, encoded as ``response_format`` (with vLLM-Omni's usage headers)."""
    with state.track("speech", req.request_id) as st:
        stream = state.backend.stream(req)
        try:
            return await _whole_file(http, body, stream, st)
        except ClientGone:
            return Response(status_code=499)
        except Exception as e:
            raise api_error(e) from None
        finally:
            await stream.aclose()


async def _whole_file(
    http: Request, body: SpeechBody, stream: AsyncIterator[AudioChunk], st: RequestState
) -> Response:
    out = StreamOutput(body.sample_rate)
    parts: list[bytes] = []
    chunk: AudioChunk | None = await first_chunk(http, stream)
    while chunk is not None:
        parts.append(out.pcm(chunk))
        st.chunks += 1
        chunk = await pull(http, stream)
    parts.append(out.flush())
    fmt = body.response_format
    if fmt == "opus" and out.rate not in OPUS_RATES:
        raise ApiError(
            f"response_format='opus' needs an Opus sample rate ({sorted(OPUS_RATES)}); the audio is "
            f"{out.rate} Hz: pass sample_rate=24000 or 48000"
        )
    data = encode_audio(out.samples(parts), out.rate, fmt)
    return Response(
        data,
        media_type=wire.CONTENT_TYPES[fmt],
        headers={"X-Request-Id": st.request_id, **wire.USAGE_HEADERS},
    )


# --------------------------------------------------------------------------- streaming bodies


@dataclass
class SpeechStream:
    """One streaming answer: the backend stream from its first chunk on, and the queue slot
    it holds until the body ends."""

    http: Request
    state: ApiState
    stream: AsyncIterator[AudioChunk]
    first: AudioChunk
    out: StreamOutput
    rid: str
    lease: Lease

    async def next_pcm(self) -> bytes | None:
        """Wire PCM of the next chunk, None at the end (:class:`ClientGone` if the client left)."""
        c = await pull(self.http, self.stream)
        return None if c is None else self.out.pcm(c)

    async def close(self) -> None:
        await self.stream.aclose()
        await self.lease.release()


async def raw_body(s: SpeechStream, fmt: str) -> AsyncIterator[bytes]:
    """pcm/wav bytes. A failure after the 200 cuts the connection (no end marker exists)."""
    with s.state.track("speech-stream", s.rid) as st:
        try:
            pcm = s.out.pcm(s.first)
            if fmt == "wav":  # emitted just before the first audio
                yield wire.wav_stream_header(s.out.rate, s.out.channels)
            yield pcm
            while (data := await s.next_pcm()) is not None:
                st.chunks += 1
                st.bytes_sent += len(data)
                if data:
                    yield data
            tail = s.out.flush()
            if tail:
                yield tail
        except ClientGone:
            return
        finally:
            await s.close()


async def sse_body(s: SpeechStream, fmt: str) -> AsyncIterator[bytes]:
    """``speech.audio.delta`` events, then exactly one ``speech.audio.done`` or ``.error``."""
    with s.state.track("speech-sse", s.rid) as st:
        try:
            pcm = s.out.pcm(s.first)
            if fmt == "wav":  # the first delta holds only the header
                yield wire.audio_delta(wire.wav_stream_header(s.out.rate, s.out.channels), fmt)
            yield wire.audio_delta(pcm, fmt)
            st.bytes_sent += len(pcm)
            while (data := await s.next_pcm()) is not None:
                st.chunks += 1
                if data:
                    st.bytes_sent += len(data)
                    yield wire.audio_delta(data, fmt)
            tail = s.out.flush()
            if tail:
                yield wire.audio_delta(tail, fmt)
        except ClientGone:
            return
        except Exception as e:
            # Audio was always sent by now (the response starts with the first chunk).
            yield wire.audio_error(api_error(e).message, partial_audio=True)
            return
        finally:
            await s.close()
        yield wire.audio_done()
