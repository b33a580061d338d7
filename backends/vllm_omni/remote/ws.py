"""A speech request over the WebSocket ``/v1/audio/speech/stream``: ``session.config``, the
text, ``input.done``; then ``audio.start``, binary audio, ``audio.done`` and ``session.done``.

Why a transport of its own: the socket has its own format rules (``audio.start`` states the
rate only in listenlab's and newer servers' form; vLLM-Omni 0.30.0 sends a nominal 24000), its
own end (``session.done``; a close before it is a cut stream) and its own way to stop the
server generating (closing the socket: there is no cancel message). The messages are
:mod:`backends.vllm_omni.wire`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from backends.base import AudioChunk
from backends.errors import BackendError, StreamTimeout
from backends.vllm_omni import wire
from backends.vllm_omni.remote.framing import Clock, Framer
from backends.vllm_omni.remote.raw import decode_file
from backends.vllm_omni.remote.server import RemoteServer
from backends.vllm_omni.wire import error_message

STREAM = "/v1/audio/speech/stream"


@dataclass
class WsState:
    """What one WebSocket utterance has seen (``ending``: session.done came, audio flushed)."""

    stream_audio: bool
    framer: Framer = field(default_factory=Framer)
    started: bool = False
    ending: bool = False
    done: bool = False


def session_config(server: RemoteServer, fields: dict[str, Any]) -> dict[str, Any]:
    """The ``session.config`` message: the request's fields, one unit, PCM streamed or not."""
    cfg = wire.ws_message(wire.SESSION_CONFIG, **fields)
    cfg["response_format"] = server.options.format
    cfg["stream_audio"] = server.options.format == "pcm"
    cfg["split_granularity"] = "none"
    return cfg


async def connect(server: RemoteServer) -> Any:
    from websockets.asyncio.client import connect as ws_connect
    from websockets.exceptions import InvalidHandshake, InvalidStatus

    url = server.ws_url(STREAM)
    o = server.options
    try:
        return await ws_connect(
            url,
            open_timeout=o.connect_timeout,
            max_size=64 * 1024 * 1024,
            ping_interval=None,
            close_timeout=2,
            proxy=None,
            additional_headers=server.auth_headers(),
        )
    except TimeoutError:
        raise StreamTimeout(
            f"could not open {url} within {o.connect_timeout} s (connect_timeout)"
        ) from None
    except InvalidStatus as e:
        r = e.response
        raise BackendError(
            error_message(r.body or b"", r.status_code), status=r.status_code
        ) from None
    except (OSError, InvalidHandshake) as e:
        raise BackendError(f"cannot open {url}: {e!r}") from None


async def stream_ws(
    server: RemoteServer, fields: dict[str, Any], text: str
) -> AsyncIterator[AudioChunk]:
    """One utterance over a fresh socket, its audio as it comes (see the module docstring)."""
    from websockets.exceptions import ConnectionClosed

    clock = Clock(server.options)
    ws = await connect(server)
    st = WsState(stream_audio=server.options.format == "pcm")
    framer = st.framer
    try:
        for m in (
            session_config(server, fields),
            wire.ws_message(wire.INPUT_TEXT, text=text),
            wire.ws_message(wire.INPUT_DONE),
        ):
            await ws.send(json.dumps(m))
        while True:
            try:
                msg = await clock.wait(ws.recv(), "audio" if not framer.index else "the next chunk")
            except ConnectionClosed as e:
                raise BackendError(
                    f"the WebSocket closed before session.done ({e}) after "
                    f"{framer.total_bytes} audio bytes",
                    partial=framer.index > 0,
                ) from None
            binary = isinstance(msg, bytes)
            chunk = on_audio(msg, st, server) if binary else await on_text(msg, st, server)
            if chunk is not None:
                yield chunk
                if binary:
                    clock.got_audio()
            if st.ending:
                framer.check_end(
                    "the WebSocket audio", "the server finished (session.done) without any audio"
                )
                st.done = True
                return
    finally:
        await close(ws, polite=st.done)


async def close(ws: Any, *, polite: bool) -> None:
    """``session.close`` after a finished session; then close (the only way to stop the
    server generating) and drop the transport whatever happens."""
    if polite:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.send(json.dumps(wire.ws_message(wire.SESSION_CLOSE))), 1)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(ws.close(), 2)
    with contextlib.suppress(Exception):
        ws.transport.abort()


def on_audio(data: bytes, st: WsState, server: RemoteServer) -> AudioChunk | None:
    """A binary frame: PCM to frame (``stream_audio``), else one whole encoded file."""
    if not st.started:
        raise BackendError("WebSocket protocol error: audio before audio.start")
    framer = st.framer
    if st.stream_audio:
        framer.feed(data)
        return framer.take()
    x, sr = decode_file(data, f"{server.options.format} frame")
    framer.sample_rate, framer.channels = sr, int(x.shape[1])
    framer.total_bytes += len(data)
    return framer.chunk(x.reshape(-1), sr, int(x.shape[1]))


async def on_text(msg: str, st: WsState, server: RemoteServer) -> AudioChunk | None:
    """A JSON message; at ``session.done`` the audio still buffered."""
    try:
        m = json.loads(msg)
    except ValueError:
        raise BackendError(f"WebSocket protocol error: not JSON: {msg[:120]!r}") from None
    kind = m.get("type") if isinstance(m, dict) else None
    framer = st.framer
    if kind == wire.AUDIO_START:
        st.started = True
        if st.stream_audio and not framer.known:
            await stream_format(server, framer, m)
    elif kind == wire.AUDIO_DONE:
        if m.get("error"):
            raise BackendError("the server reported a failed utterance (audio.done error:true)")
    elif kind == wire.SESSION_DONE:
        st.ending = True
        return framer.take(final=True)
    elif kind == wire.WS_ERROR:
        text = str(m.get("message") or m)
        if m.get("partial_audio"):
            text += f" (the server asked to discard the partial audio: {framer.total_bytes} bytes)"
        raise BackendError(
            f"server error: {text}", partial=bool(m.get("partial_audio") or framer.index)
        )
    # audio.chunk (word timestamps) and unknown messages are ignored
    return None


async def stream_format(server: RemoteServer, framer: Framer, start: dict[str, Any]) -> None:
    """The PCM format from ``audio.start``.

    Only an ``audio.start`` with ``sample_rate`` *and* ``channels`` states the format
    (listenlab api; the deferred form of newer vLLM-Omni). vLLM-Omni 0.30.0 sends
    ``audio.start`` before generating, with a constant nominal ``"sample_rate": 24000``
    and no ``channels`` (``serving_speech_stream.py`` ``_PCM_SAMPLE_RATE``) whatever the
    model's rate: that value is used only when nothing better is known.
    """
    stated = wire.stated_format(start)
    if stated is not None:
        server.check_rate(stated[0])
        framer.sample_rate, framer.channels = stated
        return
    sr, ch = start.get("sample_rate"), start.get("channels")
    what = (
        f"the WebSocket stream (audio.start's sample_rate={sr} is nominal: no channels)"
        if isinstance(sr, int) and sr > 0
        else "the WebSocket stream (audio.start has no sample_rate)"
    )
    try:
        await server.assume_format(framer, what, ch if isinstance(ch, int) else None)
    except BackendError:
        if not (isinstance(sr, int) and sr > 0):
            raise
        framer.sample_rate, framer.channels = sr, int(ch or 1)
        framer.assumed = f"{what}: {sr} Hz taken as stated, mono assumed"


__all__ = ["STREAM", "WsState", "close", "connect", "on_audio", "on_text", "stream_ws"]
