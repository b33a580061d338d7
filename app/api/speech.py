"""``POST /v1/audio/speech``: one utterance as a whole file, an SSE stream or a raw pcm/wav stream.

Why the answer waits for the first chunk: until audio exists, a failure can still be an HTTP
status with vLLM-Omni's error body; after the 200, a raw stream can only be cut (it has no error
marker) and SSE ends with one ``speech.audio.error`` event. A client that goes away stops the
generation at once (the backend stream is closed), also while it waits in the queue.
"""

import asyncio
import contextlib
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask

from app.api.checks import check_speech, native_speed, whole_files_only
from app.api.clips import ref_audio_wav
from app.api.errors import ApiError, api_error, declared, validation_error
from app.api.output import StreamOutput, file_bytes
from app.api.schemas import VALIDATION_TYPE, SessionConfig, SpeechBody, body_errors, sanitize
from app.api.state import (
    ApiState,
    ClientGone,
    Lease,
    RequestState,
    acquire_unless_gone,
    api_state,
)
from app.web.inputs import JsonTooDeep, loads_limited
from app.web.openapi import DeclaredRoute, JsonBody
from backends.base import AudioChunk, SpeechRequest
from backends.stand_in import NOTE_HEADER
from backends.vllm_omni import wire
from backends.vllm_omni.request import SpeechFields, speech_request
from backends.vllm_omni.rules import RequestView

router = APIRouter(route_class=DeclaredRoute)

BIG_BODY = 256 * 1024
"""A body bigger than this (an inline ``ref_audio``) is parsed off the event loop."""
UNSUPPORTED_MEDIA = "Unsupported Media Type: Only 'application/json' is allowed"


# --------------------------------------------------------------------------- the request


async def read_json(http: Request, json_depth: int):
    """The JSON body, or vLLM's refusal (``validate_json_request``, FastAPI's decode error)."""
    media = http.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(f"1 validation error:\n  {UNSUPPORTED_MEDIA}", 400, VALIDATION_TYPE)
    raw = await http.body()
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise validation_error([missing])
    try:
        if len(raw) > BIG_BODY:
            return await asyncio.to_thread(loads_limited, raw, json_depth)
        return loads_limited(raw, json_depth)
    except JsonTooDeep as e:
        raise ApiError(f"Invalid JSON body: {e}", 400, VALIDATION_TYPE, "body") from None
    except ValueError as e:
        pos = getattr(e, "pos", 0)
        err = {
            "type": "json_invalid",
            "loc": ("body", pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": getattr(e, "msg", str(e))},
        }
        raise validation_error([err]) from None


async def parse_body(http: Request, json_depth: int, schema=SpeechBody):
    """The JSON body, validated; errors in vLLM's shape and words (``Bad Request``, ``param``)."""
    data = await read_json(http, json_depth)
    try:
        # FastAPI validates a body model ``from_attributes`` (its ``ModelField.validate``):
        # a non-object body gets its words ("model_attributes_type"), as vLLM answers.
        return schema.model_validate(data, from_attributes=True)
    except ValidationError as e:
        raise validation_error(body_errors(e)) from None
    except TypeError as e:  # a validator's TypeError: vLLM's handler makes it a 400
        raise ApiError(str(e)) from None


class VllmJson(JsonBody):
    """A body read as vLLM-Omni reads it (:func:`parse_body`), validated by ``model``, the
    class whose schema ``/openapi.json`` declares (:class:`app.web.openapi.DeclaredRoute`)."""

    async def __call__(self, request: Request) -> Any:
        return await parse_body(request, api_state(request).limits.json_depth, self.model)


SPEECH = VllmJson(SpeechBody)
AUDIO_TYPES = (*dict.fromkeys(wire.CONTENT_TYPES.values()), wire.SSE_TYPE)
"""What a speech answer can be: a file or raw stream of ``response_format``, or SSE."""
SPEECH_ERRORS = declared(400, 404, 500, 502, 503)
"""vLLM-Omni's refusals (400 the body, 404 the model, 500 a failed generation), a remote
server's failure, and a full queue."""


def backend_request(
    body: SpeechBody | SessionConfig,
    view: RequestView,
    ref: bytes | None,
    rid: str,
    state: ApiState,
    text: str | None = None,
) -> SpeechRequest:
    """The ``SpeechRequest`` the backend gets, from an HTTP body or a WebSocket session's
    config (then ``text`` is the unit's): the fields as the checks left them. ``speed``
    reaches the backend only when the served model changes speed itself; otherwise the whole
    file is stretched afterwards, as vLLM-Omni does (:mod:`backends.vllm_omni.speed`)."""
    speed = (body.speed or 1.0) if native_speed(state) else 1.0
    fields = replace(
        SpeechFields.of(body),
        voice=view.voice,
        language=view.language,
        task_type=view.task_type,
        ref_text=view.ref_text,
        speed=speed,
        speaker_embedding=None,
    )
    text = body.input if text is None else text
    return speech_request(fields, text, ref_audio=ref, request_id=rid, backend=state.backend)


def note_headers(state: ApiState, req: SpeechRequest) -> dict[str, str]:
    """What a stand-in backend did not do for ``req`` (``X-Listenlab-Stand-In``), if anything."""
    note = state.backend.note(req)
    return {NOTE_HEADER: note} if note else {}


def post_speed(body: SpeechBody, state: ApiState) -> float:
    """The stretch applied to the finished file (1.0 when the model did it natively)."""
    return 1.0 if native_speed(state) else float(body.speed or 1.0)


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


def generated(http: Request, frames: int, rate: int) -> None:
    """A generation ended with ``frames`` of audio: its time from arrival (``e2e``), duration
    and real-time factor for ``GET /metrics``."""
    arrival = getattr(http.state, "arrival", None)
    if arrival is not None:
        http.app.state.api.metrics.generated(time.monotonic() - arrival, frames, rate)


async def first_chunk(http: Request, it: AsyncIterator[AudioChunk]) -> AudioChunk:
    """Wait for the first audio before answering, so validation errors still get a status."""
    c = await pull(http, it)
    if c is None:
        raise ApiError("Speech generation failed: the backend produced no audio")
    arrival = getattr(http.state, "arrival", None)
    if arrival is not None:  # vLLM-Omni's audio_ttfp_s: arrival to the first audio
        http.app.state.api.metrics.first_audio(time.monotonic() - arrival)
    return c


# --------------------------------------------------------------------------- the route


BINARY = {"type": "string", "format": "binary"}
SPEECH_ANSWER = {
    "description": "The audio: the whole file, or with ``stream: true`` a raw stream "
    "(``stream_format: audio``), in ``response_format``'s type (wav audio/wav, pcm audio/pcm, "
    "flac audio/flac, mp3 audio/mpeg, opus audio/ogg); or SSE events (``stream_format: sse``, "
    "text/event-stream). Never JSON: a refusal before the first audio is an error status.",
    "content": {
        t: {"schema": {"type": "string"} if t == wire.SSE_TYPE else BINARY} for t in AUDIO_TYPES
    },
}
"""The 200 of ``POST /v1/audio/speech`` (``response_class=Response``: FastAPI adds no JSON)."""


@router.post(
    "/v1/audio/speech", response_class=Response, responses={200: SPEECH_ANSWER, **SPEECH_ERRORS}
)
async def create_speech(
    http: Request, state: ApiState = Depends(api_state), body: SpeechBody = Depends(SPEECH)
):
    rid = f"speech-{uuid.uuid4().hex}"
    view = await check_speech(body, state)
    ref = await ref_audio_wav(state, view.ref_audio)  # decoded off the loop, before queueing
    req = backend_request(body, view, ref, rid, state)
    state.check_queue()
    lease = Lease(state.gate)
    waited = time.monotonic()
    if not await acquire_unless_gone(lease, http.is_disconnected):
        return Response(status_code=499)
    state.metrics.queued(time.monotonic() - waited)
    if not body.is_streaming or whole_files_only(state):  # OmniVoice: a file for a stream too
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
    if body.is_sse_stream:
        gen, media = sse_body(answer, fmt), wire.SSE_TYPE
    else:
        gen, media = raw_body(answer, fmt), wire.CONTENT_TYPES[fmt]
    weakref.finalize(gen, lease.release_soon)
    return StreamingResponse(
        gen,
        media_type=media,
        headers={"X-Request-Id": rid, "Cache-Control": "no-cache", **note_headers(state, req)},
        background=BackgroundTask(lease.release),
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
            response = await _whole_file(http, body, stream, st)
            response.headers.update(note_headers(state, req))
            return response
        except ClientGone:
            return Response(status_code=499)
        except Exception as e:
            raise api_error(e) from None
        finally:
            await stream.aclose()


async def _whole_file(
    http: Request, body: SpeechBody, stream: AsyncIterator[AudioChunk], st: RequestState
) -> Response:
    out = StreamOutput(None)
    parts: list[bytes] = []
    frames = rate = 0
    chunk: AudioChunk | None = await first_chunk(http, stream)
    while chunk is not None:
        parts.append(out.pcm(chunk))
        st.chunks += 1
        frames, rate = frames + chunk.frames, chunk.sample_rate
        chunk = await pull(http, stream)
    state = http.app.state.api
    generated(http, frames, rate)
    data = await encode_file(out, parts, body, state)
    usage = wire.usage_headers(state.backend.usage(st.request_id))
    return Response(
        data,
        media_type=wire.CONTENT_TYPES[body.response_format],
        headers={"X-Request-Id": st.request_id, **usage},
    )


async def collect_file(
    state: ApiState,
    body: SpeechBody,
    req: SpeechRequest,
    on_audio: Callable[[int, int], None] = lambda _frames, _rate: None,
) -> bytes:
    """The whole utterance as ``body.response_format`` bytes (batch items: their batch watches
    the client). ``on_audio(frames, rate)`` sees each chunk first and may raise to stop it."""
    out = StreamOutput(None)
    parts: list[bytes] = []
    with state.track("speech-batch", req.request_id):
        stream = state.backend.stream(req)
        try:
            async for chunk in stream:
                on_audio(chunk.frames, chunk.sample_rate)
                parts.append(out.pcm(chunk))
        finally:
            await stream.aclose()
    if out.fmt is None:
        raise ApiError("No output generated from the model.")
    return await encode_file(out, parts, body, state)


async def encode_file(
    out: StreamOutput, parts: list[bytes], body: SpeechBody, state: ApiState
) -> bytes:
    """The collected PCM as one ``body.response_format`` file, off the event loop."""
    try:
        data, _rate = await asyncio.to_thread(
            file_bytes,
            out.samples(parts),
            out.rate,
            post_speed(body, state),
            body.sample_rate,
            body.response_format,
        )
    except Exception as e:  # libsndfile refusing a rate, as it does on vLLM-Omni
        raise ApiError(sanitize(f"Speech generation failed: {e}"), 500) from None
    return data


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
    frames: int = 0
    """Audio frames pulled after the first chunk (for ``GET /metrics``)."""

    async def next_pcm(self) -> bytes | None:
        """Wire PCM of the next chunk, None at the end (:class:`ClientGone` if the client left)."""
        c = await pull(self.http, self.stream)
        if c is None:
            generated(self.http, self.first.frames + self.frames, self.first.sample_rate)
            return None
        self.frames += c.frames
        return self.out.pcm(c)

    async def close(self) -> None:
        await self.stream.aclose()
        await self.lease.release()


async def raw_body(s: SpeechStream, fmt: str) -> AsyncIterator[bytes]:
    """pcm/wav bytes. A failure after the 200 cuts the connection (no end marker exists)."""
    with s.state.track("speech-stream", s.rid) as st:
        ended: str | None = "cancelled"  # vLLM-Omni's abort reasons (create_speech)
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
            ended = None
        except (ClientGone, GeneratorExit, asyncio.CancelledError) as e:
            ended = "closed"  # the client left (the server cancels the body task then)
            if not isinstance(e, ClientGone):
                raise
        except Exception:
            ended = "error"
            raise
        finally:
            s.state.metrics.stream_end(ended)
            await s.close()


async def sse_body(s: SpeechStream, fmt: str) -> AsyncIterator[bytes]:
    """``speech.audio.delta`` events, then exactly one ``speech.audio.done`` or ``.error``."""
    with s.state.track("speech-sse", s.rid) as st:
        ended: str | None = "cancelled"
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
            ended = None
        except (ClientGone, GeneratorExit, asyncio.CancelledError) as e:
            ended = "closed"  # the client left (the server cancels the body task then)
            if not isinstance(e, ClientGone):
                raise
            return
        except Exception as e:
            ended = "error"
            # Audio was always sent by now (the response starts with the first chunk).
            yield wire.audio_error(api_error(e).message, partial_audio=True)
            return
        finally:
            s.state.metrics.stream_end(ended)
            await s.close()
        yield wire.audio_done(s.state.backend.usage(s.rid))
