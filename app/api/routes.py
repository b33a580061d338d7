"""The HTTP routes of ``listenlab api`` (speech, voices, models, health) and the app factory."""

import asyncio
import base64
import binascii
import contextlib
import re
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
from pydantic import (
    ValidationError,
)

from app.api.encoding import (
    _Output,
    check_ref_duration,
    encode_file,
    error_body,
    mono_wav,
    mp3_available,
    sse_event,
    wav_stream_header,
)
from app.api.limits import (
    _NO_USAGE,
    CONFIG_TIMEOUT,
    CONTENT_TYPES,
    IDLE_TIMEOUT,
    MAX_INSTRUCTIONS,
    MAX_NEW_TOKENS,
    MAX_UPLOAD_BYTES,
    OPUS_RATES,
    RESAMPLE_RANGE,
    UPLOAD_MIME,
    USAGE_HEADERS,
    ApiLimits,
)
from app.api.schemas import (
    VALIDATION_TYPE,
    SpeechBody,
    validation_message,
    validation_param,
)
from app.api.state import (
    ApiError,
    ApiState,
    Lease,
    RequestState,
    _ClientGone,
    _error_from,
    acquire_unless_gone,
)
from app.api.ws import _WsSession
from app.web.guard import GuardConfig, GuardMiddleware, default_allowed_hosts
from app.web.inputs import JsonTooDeep, loads_limited
from backends.base import AudioChunk, Backend, SpeechRequest
from backends.errors import InvalidRequest, UnknownVoice, Unsupported


def create_api_app(
    backend: Backend,
    *,
    served_model: str | None = None,
    own_backend: bool = False,
    config_timeout: float = CONFIG_TIMEOUT,
    idle_timeout: float = IDLE_TIMEOUT,
    limits: ApiLimits | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
):
    """A FastAPI app speaking vLLM-Omni's speech API over ``backend``.

    ``own_backend`` closes the backend when the app shuts down (the CLI owns its backend;
    tests and other apps that mount this one usually do not). ``limits``: see
    :class:`~app.api.limits.ApiLimits`; hosts and origins: see :mod:`app.web.guard`.
    """
    # FastAPI is imported here, not at module level, so every other ``listenlab`` command
    # (which imports this module for its parser) starts 0.3 s faster.
    from fastapi import FastAPI, File, Form, Request, UploadFile, WebSocket
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response, StreamingResponse
    from starlette.background import BackgroundTask

    state = ApiState(
        backend,
        served_model or backend.name,
        own_backend=own_backend,
        config_timeout=config_timeout,
        idle_timeout=idle_timeout,
        limits=limits or ApiLimits(),
    )
    lim = state.limits

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
    guard = GuardConfig(
        allowed_hosts=list(allowed_hosts) if allowed_hosts else default_allowed_hosts(),
        body_limits=[
            ("POST", "/v1/audio/speech", lim.speech_body_bytes),
            ("POST", "/v1/audio/voices", lim.upload_body_bytes),
        ],
        default_body_limit=lim.other_body_bytes,
        error_body=lambda msg, status: error_body(msg, "BadRequestError", status),
        **({"allowed_origins": list(allowed_origins)} if allowed_origins is not None else {}),
    )
    app.state.guard = guard
    app.add_middleware(GuardMiddleware, config=guard)

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
        return err_response(ApiError("; ".join(msgs), 400, VALIDATION_TYPE))

    def check_model(model: str | None) -> None:
        if model and model != state.served_model:
            raise ApiError(f"The model `{model}` does not exist.", 404, "NotFoundError", "model")

    async def ref_audio_wav(ref: str | list[str] | None) -> bytes | None:
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
        try:  # megabytes of base64: decoded in a thread, like the audio
            raw = await asyncio.to_thread(base64.b64decode, m.group(3), validate=False)
        except (binascii.Error, ValueError):
            raise ApiError("ref_audio is not valid base64") from None
        x, sr = await state.decode(raw, "ref_audio")
        check_ref_duration(x, sr)
        return await asyncio.to_thread(mono_wav, x, sr)

    def build_request(body: SpeechBody, request_id: str, ref: bytes | None) -> SpeechRequest:
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
        if body.max_new_tokens is not None and body.max_new_tokens > MAX_NEW_TOKENS:
            # vLLM-Omni's adapters (tts_adapters/base.py _TTS_MAX_NEW_TOKENS_MAX)
            raise ApiError(f"max_new_tokens cannot exceed {MAX_NEW_TOKENS}")
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
            raise ApiError(
                "Unsupported Media Type: Only 'application/json' is allowed", 400, VALIDATION_TYPE
            )
        raw = await http.body()
        try:
            if len(raw) > 256 * 1024:  # a big body (an inline ref_audio) is parsed off the loop
                data = await asyncio.to_thread(loads_limited, raw, lim.json_depth)
            else:
                data = loads_limited(raw, lim.json_depth)
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
            raise ApiError(
                validation_message(e), 400, VALIDATION_TYPE, validation_param(e)
            ) from None

    @app.post("/v1/audio/speech")
    async def create_speech(http: Request):
        body = await parse_body(http)
        rid = f"speech-{uuid.uuid4().hex}"
        ref = await ref_audio_wav(body.ref_audio)  # decoded off the loop, before queueing
        req = build_request(body, rid, ref)
        state.check_queue()
        lease = Lease(state.gate)
        if not await acquire_unless_gone(lease, http.is_disconnected):
            return Response(status_code=499)
        try:
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
        except BaseException:
            await lease.release()
            raise
        if not body.is_streaming:
            await lease.release()
        # The streaming body owns the stream, the request state and the slot from here on.
        out = _Output(body.sample_rate)
        headers = {"X-Request-Id": rid, "Cache-Control": "no-cache"}
        if body.is_sse_stream:
            gen = sse_body(http, stream, first, out, body.response_format, rid, lease)
            media = "text/event-stream"
        else:
            gen = raw_body(http, stream, first, out, body.response_format, rid, lease)
            media = CONTENT_TYPES[body.response_format]
        weakref.finalize(gen, lease.release_soon)
        return StreamingResponse(
            gen, media_type=media, headers=headers, background=BackgroundTask(lease.release)
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
            data,
            media_type=CONTENT_TYPES[fmt],
            headers={"X-Request-Id": st.request_id, **USAGE_HEADERS},
        )

    async def raw_body(
        http: Request, stream, first: AudioChunk, out: _Output, fmt: str, rid: str, lease: Lease
    ):
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
                await lease.release()

    async def sse_body(
        http: Request, stream, first: AudioChunk, out: _Output, fmt: str, rid: str, lease: Lease
    ):
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
                await lease.release()
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
        if not caps.cloning:
            with contextlib.suppress(Exception):
                caps = await backend.refresh()
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
            x, sr = await state.decode(data, "the uploaded audio")
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
