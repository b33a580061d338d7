"""``WS /v1/audio/speech/stream``: vLLM-Omni's streaming speech session."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import re
import uuid
from typing import Any

import numpy as np
from pydantic import (
    ValidationError,
)

from app.api.encoding import (
    _Output,
    check_ref_duration,
    encode_file,
    mono_wav,
    mp3_available,
)
from app.api.limits import (
    MAX_CONFIG_MESSAGE,
    MAX_TEXT_MESSAGE,
    OPUS_RATES,
    WS_MESSAGE_OVERHEAD,
)
from app.api.schemas import SessionConfig, validation_message
from app.api.state import ApiError, ApiState, Lease, ListenlabErrorTypes, _ClientGone
from app.web.inputs import JsonTooDeep, loads_limited
from backends.base import AudioChunk, SpeechRequest
from backends.errors import BackendError, InvalidRequest

log = logging.getLogger("listenlab.api")

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
    The queue holds at most ``limits.ws_inbound_bytes``: a client that keeps sending past it
    while a generation runs is told so and disconnected (1008), never buffered without bound.
    """

    def __init__(self, state: ApiState, ws):
        self.state, self.ws = state, ws
        self.queue: asyncio.Queue = asyncio.Queue()
        self.queued_bytes = 0
        """What the messages waiting in ``queue`` cost (see ``ApiLimits.ws_inbound_bytes``)."""
        self.closed = asyncio.Event()
        self.ref: tuple[SessionConfig, bytes] | None = None
        """The config whose ``ref_audio`` was decoded (once, off the loop) and its WAV."""

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
            await self.ws.send_json({"type": "error", "message": message, **extra})

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
        if len(raw) > MAX_CONFIG_MESSAGE:
            await self.send_error("WebSocket message too large")
            return "bad"
        try:
            data = loads_limited(raw, self.state.limits.json_depth)
        except JsonTooDeep as e:
            await self.send_error(f"Invalid JSON message: {e}")
            return "bad"
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
                    cap = self.state.limits.ws_session_text_chars
                    if len(splitter.buf) + len(text) > cap:
                        await self.send_error(
                            f"input.text refused: the text waiting to be spoken would be over "
                            f"{cap} characters; send input.done (or use split_granularity) first"
                        )
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
                log.error("websocket session failed", exc_info=e)
                await self.send_error(f"Internal error ({type(e).__name__}); see the server log")
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
        if cfg.ref_audio:
            try:
                self.ref = (cfg, await self.decode_ref(cfg.ref_audio))
            except (InvalidRequest, ApiError) as e:
                await self.send_error(f"Invalid session config: {e}")
                return None
        return cfg

    async def decode_ref(self, ref_audio: str) -> bytes:
        m = re.match(r"(?is)^data:([^;,]*)(;[^,]*)?,(.*)$", ref_audio)
        if not m:
            raise InvalidRequest("ref_audio must be a data:<mime>;base64,… URL")
        try:
            raw = await asyncio.to_thread(base64.b64decode, m.group(3))
        except (binascii.Error, ValueError):
            raise InvalidRequest("ref_audio is not valid base64") from None
        x, sr = await self.state.decode(raw, "ref_audio")
        check_ref_duration(x, sr)
        return await asyncio.to_thread(mono_wav, x, sr)

    def request_for(self, cfg: SessionConfig, text: str, rid: str) -> SpeechRequest:
        backend = self.state.backend
        ref = None
        if cfg.ref_audio:
            if self.ref is None or self.ref[0] is not cfg:
                raise InvalidRequest("ref_audio was not decoded")  # build_config always does
            ref = self.ref[1]
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
        lease = Lease(self.state.gate)
        with self.state.track("speech-ws", rid) as st:
            stream = None
            try:
                req = self.request_for(cfg, text, rid)
                self.state.check_queue()
                await self.until_closed(lease.acquire())  # FIFO with every other request
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
                if isinstance(e, ApiError):
                    reason = e.message
                elif isinstance(e, ListenlabErrorTypes):
                    reason = str(e)
                else:
                    log.error("generation failed", exc_info=e)
                    reason = f"internal error ({type(e).__name__}); see the server log"
                await self.send_error(
                    f"Generation failed for utterance {u}, sentence {s}: {reason}", **extra
                )
            finally:
                if stream is not None:
                    await stream.aclose()
                await lease.release()
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
