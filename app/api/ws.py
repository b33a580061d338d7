"""``WS /v1/audio/speech/stream``: vLLM-Omni's streaming speech session.

Why a session object: one connection carries any number of utterances (each ended by
``input.done``), text may arrive in pieces and be spoken sentence by sentence, and a disconnect
must stop the generation at once. :class:`WsSession` keeps that per-connection state; the
messages it sends and reads are :mod:`backends.vllm_omni.wire`'s.
"""

import asyncio
import contextlib
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, WebSocket
from pydantic import ValidationError

from app.api.checks import check_unit, native_speed, whole_files_only
from app.api.clips import ref_audio_wav
from app.api.errors import ApiError
from app.api.limits import MAX_CONFIG_MESSAGE, MAX_TEXT_MESSAGE, WS_MESSAGE_OVERHEAD
from app.api.output import StreamOutput, file_bytes
from app.api.schemas import SessionConfig, sanitize
from app.api.speech import backend_request
from app.api.state import ApiState, ClientGone, Lease, RequestState, api_state
from app.web.inputs import JsonTooDeep, loads_limited
from backends.base import AudioChunk, SpeechRequest
from backends.errors import BackendError, InvalidRequest, ListenlabError
from backends.vllm_omni import wire

NOMINAL_RATE = 24000
"""vLLM-Omni's ``audio.start`` rate when nothing better is known (``_PCM_SAMPLE_RATE``)."""


class SessionFailed(Exception):
    """A unit that vLLM-Omni's session cannot even turn into a request: the session ends with
    "Internal error: …"."""


def as_http_request(cfg: SessionConfig, text: str) -> None:
    """``_generate_and_send`` builds an ``OpenAICreateSpeechRequest`` from the config for each
    unit; what that refuses (``speaker_embedding`` beside ``ref_audio``) ends the session."""
    from app.api.schemas import OpenAICreateSpeechRequest

    fields = {
        "input": text,
        "model": cfg.model,
        "voice": cfg.voice,
        "task_type": cfg.task_type,
        "language": cfg.language,
        "instructions": cfg.instructions,
        "response_format": cfg.response_format or "wav",
        "speed": cfg.speed,
        "max_new_tokens": cfg.max_new_tokens,
        "initial_codec_chunk_frames": cfg.initial_codec_chunk_frames,
        "non_streaming_mode": cfg.non_streaming_mode,
        "ref_audio": cfg.ref_audio,
        "ref_text": cfg.ref_text,
        "x_vector_only_mode": cfg.x_vector_only_mode,
        "speaker_embedding": cfg.speaker_embedding,
        "stream": cfg.stream_audio,
        "word_timestamps": cfg.word_timestamps,
        "seed": cfg.seed,
    }
    try:
        OpenAICreateSpeechRequest(**fields)
    except ValidationError as e:
        raise SessionFailed(f"Internal error: {e}") from None


def model_error_text(e: ApiError) -> str:
    """What vLLM-Omni's session sends for a wrong model: ``str()`` of its ``ErrorResponse``."""
    return (
        f"error=ErrorInfo(message={e.message!r}, type={e.type!r}, param={e.param!r}, "
        f"code={e.status})"
    )


log = logging.getLogger("listenlab.api")

router = APIRouter()


@router.websocket("/v1/audio/speech/stream")
async def speech_stream(ws: WebSocket, state: ApiState = Depends(api_state)):
    if whole_files_only(state):  # vLLM-Omni's pure-diffusion server has no streaming handler
        await ws.accept()
        await ws.send_json({"type": "error", "message": "Streaming speech is not available"})
        await ws.close()
        return
    await WsSession(state, ws).run()


# --------------------------------------------------------------------------- text units

_SENTENCE = re.compile(r"(?<=[.!?。！？।؟])\s*")
_CLAUSE = re.compile(r"(?<=[.!?。！？।؟,;，；、])\s*")


class Splitter:
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


@dataclass
class Unit:
    """One unit's answer under way: its ``audio.start`` (sent once) and the bytes sent."""

    start: dict[str, Any]
    deferred: bool
    """``audio.start`` waits for the first audio, so it can state the format (pcm streams)."""
    started: bool = False
    total: int = 0


# --------------------------------------------------------------------------- the session


class WsSession:
    """One WebSocket connection: any number of utterances, each ended by ``input.done``.

    A reader task receives client messages into a queue, so a disconnect is noticed while
    generating (and cancels it at once); messages sent meanwhile wait in order, as on vLLM-Omni.
    The queue holds at most ``limits.ws_inbound_bytes``: a client that keeps sending past it
    while a generation runs is told so and disconnected (1008), never buffered without bound.
    """

    def __init__(self, state: ApiState, ws: WebSocket):
        self.state, self.ws = state, ws
        self.queue: asyncio.Queue = asyncio.Queue()
        self.queued_bytes = 0
        """What the messages waiting in ``queue`` cost (see ``ApiLimits.ws_inbound_bytes``)."""
        self.closed = asyncio.Event()
        self.ref: tuple[SessionConfig, bytes] | None = None
        """The config whose ``ref_audio`` was decoded (once, off the loop) and its WAV."""
        self.config: SessionConfig | None = None
        self.splitter = Splitter("none")
        self.utterance = self.sentence = 0
        self.open_utterance = False

    # -- reading

    async def reader(self) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            while True:
                msg = await self.ws.receive()
                if msg["type"] == "websocket.disconnect":
                    break
                size = len(msg.get("text") or msg.get("bytes") or b"") + WS_MESSAGE_OVERHEAD
                budget = self.state.limits.ws_inbound_bytes
                if self.queued_bytes + size > budget:
                    log.warning("ws client over its inbound budget (%d bytes): closing", budget)
                    await self.send_error(
                        f"too many messages waiting: more than {budget} bytes were sent "
                        "while the server was still handling earlier ones; closing"
                    )
                    with contextlib.suppress(Exception):
                        await self.ws.close(code=1008)
                    break
                self.queued_bytes += size
                await self.queue.put((msg, size))
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            self.closed.set()
            await self.queue.put(None)

    async def send_error(self, message: str, **extra: Any) -> None:
        with contextlib.suppress(Exception):
            await self.ws.send_json(wire.ws_error(message, **extra))

    async def next_message(self, timeout: float) -> dict | None | str:
        """A parsed message, None if the client left, "timeout", or "bad" after an error."""
        try:
            item = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return "timeout"
        if item is None:
            return None
        msg, size = item
        self.queued_bytes -= size
        raw = msg.get("text")
        if raw is None:
            await self.send_error("binary frames are not accepted; send JSON text frames")
            return "bad"
        data, problem = self.parse(raw)
        if problem is not None:
            await self.send_error(problem)
            return "bad"
        return data

    def parse(self, raw: str) -> tuple[dict | None, str | None]:
        """The message as a dict, or why it cannot be used (too large, not JSON, not an object)."""
        if len(raw) > MAX_CONFIG_MESSAGE:
            return None, "WebSocket message too large"
        try:
            data = loads_limited(raw, self.state.limits.json_depth)
        except JsonTooDeep as e:
            return None, f"Invalid JSON message: {e}"
        except ValueError:
            return None, "Invalid JSON message"
        if not isinstance(data, dict):
            return None, "WebSocket messages must be JSON objects"
        if data.get("type") == wire.SESSION_CONFIG:
            if len(raw) > MAX_CONFIG_MESSAGE:
                return None, "session.config message too large"
        elif len(raw) > MAX_TEXT_MESSAGE:
            return None, "input.text message too large"
        return data, None

    # -- the session

    async def run(self) -> None:
        await self.ws.accept()
        reader = asyncio.create_task(self.reader())
        try:
            while await self.step():
                pass
        except SessionFailed as e:  # vLLM-Omni reports it and ends the session
            await self.send_error(str(e))
        except Exception as e:  # the socket went away mid-send, or a bug: report if possible
            if not self.closed.is_set():
                log.error("websocket session failed", exc_info=e)
                await self.send_error(f"Internal error ({type(e).__name__}); see the server log")
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def step(self) -> bool:
        """Handle the next client message; False ends the session."""
        waiting_for_config = self.config is None
        msg = await self.next_message(
            self.state.config_timeout if waiting_for_config else self.state.idle_timeout
        )
        if msg == "timeout":
            await self.send_error(
                "Timeout waiting for session.config"
                if waiting_for_config
                else "Idle timeout: no message received"
            )
            return False
        if msg is None:
            return False
        if msg == "bad":
            return not waiting_for_config
        assert isinstance(msg, dict)
        kind = msg.get("type")
        if kind == wire.SESSION_CONFIG:
            return await self.on_config(msg)
        if waiting_for_config:
            await self.send_error(f"Expected session.config, got: {kind}")
            return False
        if kind == wire.INPUT_TEXT:
            return await self.on_text(msg)
        if kind == wire.INPUT_DONE:
            return await self.on_done()
        if kind == wire.SESSION_CLOSE:
            return False
        await self.send_error(f"Unknown message type: {kind}")
        return True

    async def on_config(self, msg: dict) -> bool:
        if self.open_utterance:
            await self.send_error(
                "session.config cannot be applied while an utterance is in progress; send input.done first"
            )
            return True
        new = await self.build_config(msg)
        if new is None:
            return self.config is not None
        self.config, self.splitter = new, Splitter(new.split_granularity)
        return True

    async def on_text(self, msg: dict) -> bool:
        text = msg.get("text", "")
        if not isinstance(text, str):
            await self.send_error("input.text requires a string value")
            return True
        cap = self.state.limits.ws_session_text_chars
        if len(self.splitter.buf) + len(text) > cap:
            await self.send_error(
                f"input.text refused: the text waiting to be spoken would be over "
                f"{cap} characters; send input.done (or use split_granularity) first"
            )
            return True
        if text:
            self.open_utterance = True
        return await self.speak(self.splitter.feed(text))

    async def on_done(self) -> bool:
        if not await self.speak(self.splitter.flush()):
            return False
        await self.ws.send_json(wire.ws_session_done(self.utterance, self.sentence))
        self.utterance, self.sentence, self.open_utterance = self.utterance + 1, 0, False
        return True

    async def speak(self, units: list[str]) -> bool:
        assert self.config is not None
        for unit in units:
            if not await self.generate(self.config, unit, self.utterance, self.sentence):
                return False
            self.sentence += 1
        return True

    async def build_config(self, msg: dict) -> SessionConfig | None:
        """``_build_config``: the config validated (pydantic's own message) and its model."""
        try:
            cfg = SessionConfig(**{k: v for k, v in msg.items() if k != "type"})
        except ValidationError as e:
            await self.send_error(f"Invalid session config: {e}")
            return None
        except TypeError as e:  # a non-string key
            await self.send_error(f"Invalid session config: {e}")
            return None
        try:
            self.state.check_model(cfg.model)
        except ApiError as e:
            await self.send_error(model_error_text(e))
            return None
        return cfg

    async def request_for(self, cfg: SessionConfig, text: str, rid: str) -> SpeechRequest:
        """``_prepare_speech_generation`` for one unit: the model's checks (in the reference's
        words), then the clip, decoded once per config (off the loop)."""
        view = await check_unit(cfg, text, self.state)
        ref = None
        if isinstance(view.ref_audio, str) and not view.ref_audio.startswith("voice:"):
            if self.ref is None or self.ref[0] is not cfg:
                self.ref = (cfg, await ref_audio_wav(self.state, view.ref_audio))
            ref = self.ref[1]
        return backend_request(cfg, view, ref, rid, self.state, text=text)

    # -- one unit

    async def generate(self, cfg: SessionConfig, text: str, u: int, s: int) -> bool:
        """Synthesize one unit and send it; False if the client has gone (stop the session)."""
        if cfg.word_timestamps:
            await self.send_error(
                "word_timestamps=true but the server was launched without --forced-aligner; either "
                "restart the server with that flag or set word_timestamps=false in session.config."
            )
            return True
        as_http_request(cfg, text)
        fmt = cfg.response_format
        unit = Unit(wire.ws_audio_start(u, s, text, fmt), cfg.stream_audio and fmt == "pcm")
        if not unit.deferred:
            await self.send_start(unit)
        failed = False
        rid = f"speech-{uuid.uuid4().hex}"
        lease = Lease(self.state.gate)
        with self.state.track("speech-ws", rid) as st:
            stream = None
            try:
                req = await self.request_for(cfg, text, rid)
                self.state.check_queue()
                await self.until_closed(lease.acquire())  # FIFO with every other request
                stream = self.state.backend.stream(req)
                if cfg.stream_audio:
                    await self.send_stream(stream, unit, st)
                else:
                    speed = 1.0 if native_speed(self.state) else float(cfg.speed or 1.0)
                    await self.send_file(stream, fmt, unit, speed)
            except ClientGone:
                return False
            except Exception as e:
                if self.closed.is_set():
                    return False
                failed = True
                await self.send_start(unit)
                await self.send_failure(e, u, s, unit.total)
            finally:
                if stream is not None:
                    await stream.aclose()
                await lease.release()
        if self.closed.is_set():
            return False
        await self.send_start(unit)
        await self.ws.send_json(wire.ws_audio_done(u, s, unit.total, failed))
        return True

    async def send_start(self, unit: Unit, out: StreamOutput | None = None) -> None:
        """``audio.start``, once; deferred, it states the rate and channels of the audio (when
        a unit fails before any audio, those the backend says it has)."""
        if unit.started:
            return
        unit.started = True
        if unit.deferred and out is not None and out.fmt:
            wire.state_format(unit.start, out.rate, out.channels)
        elif unit.deferred:
            caps = self.state.backend.capabilities
            wire.state_format(unit.start, caps.sample_rate or NOMINAL_RATE, caps.channels or 1)
        await self.ws.send_json(unit.start)

    async def send_stream(self, stream: Any, unit: Unit, st: RequestState) -> None:
        """``stream_audio``: each chunk as a binary frame of PCM, as it comes."""
        out = StreamOutput(None)
        it = stream.__aiter__()
        while (c := await self.until_closed(it.__anext__())) is not None:
            data = out.pcm(c)
            await self.send_start(unit, out)
            unit.total += len(data)
            st.bytes_sent = unit.total
            await self.ws.send_bytes(data)

    async def send_file(self, stream: Any, fmt: str, unit: Unit, speed: float) -> None:
        """Without ``stream_audio``: the whole unit as one encoded file in one binary frame
        (``speed`` stretched afterwards, as vLLM-Omni's ``_generate_audio_bytes`` does)."""
        out = StreamOutput(None)
        parts = []
        it = stream.__aiter__()
        while (c := await self.until_closed(it.__anext__())) is not None:
            parts.append(out.pcm(c))
        if out.fmt is None:
            raise BackendError("the backend produced no audio")
        try:
            data, _ = await asyncio.to_thread(
                file_bytes, out.samples(parts), out.rate, speed, None, fmt
            )
        except Exception as e:  # libsndfile refusing a rate (Opus at 44.1 kHz)
            raise InvalidRequest(sanitize(str(e))) from None
        unit.total = len(data)
        await self.ws.send_bytes(data)

    async def send_failure(self, e: Exception, u: int, s: int, total: int) -> None:
        extra = {"partial_audio": True, "action": "discard"} if total else {}
        if isinstance(e, ApiError):
            reason = e.message
        elif isinstance(e, ListenlabError):
            reason = str(e)
        else:
            log.error("generation failed", exc_info=e)
            reason = f"internal error ({type(e).__name__}); see the server log"
        await self.send_error(
            f"Generation failed for utterance {u}, sentence {s}: {reason}", **extra
        )

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
            raise ClientGone
        finally:
            closer.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
