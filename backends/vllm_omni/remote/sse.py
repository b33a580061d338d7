"""Server-Sent Events bodies: ``speech.audio.delta`` events carrying base64 audio, then exactly
one terminal event (``speech.audio.done`` or ``speech.audio.error``).

Why a transport of its own: an SSE stream that ends without its terminal event was cut, and one
that sends anything after it is broken; a WAV stream's first deltas carry only its header; a
``pcm`` stream does not say its rate. The events are parsed with
:class:`backends.vllm_omni.wire.SseParser`, the module ``listenlab api`` writes them with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from backends.base import AudioChunk
from backends.errors import BackendError
from backends.vllm_omni import wire
from backends.vllm_omni.remote.framing import Framer, Reader, error_event
from backends.vllm_omni.remote.raw import start_wav
from backends.vllm_omni.remote.server import RemoteServer
from backends.vllm_omni.wire import ErrorEvent, SseParser, not_wav_message


@dataclass
class SseState:
    """What one SSE stream has seen: its audio so far, a WAV header being read, the end."""

    framer: Framer = field(default_factory=Framer)
    header: bytes = b""
    fmt_name: str | None = None
    finished: bool = False


async def parse_sse(
    reader: Reader, server: RemoteServer, request_id: str | None = None
) -> AsyncIterator[AudioChunk]:
    """An SSE body as chunks of whole frames (see the module docstring); the usage its
    ``speech.audio.done`` reports is kept for ``request_id`` (:meth:`RemoteServer.record_usage`)."""
    parser, st = SseParser(), SseState()
    while (data := await reader.next()) is not None:
        for ev in parser.feed(data):
            if st.finished:
                raise BackendError(
                    f"the SSE stream sent {ev.event!r} after speech.audio.done "
                    "(exactly one terminal event is allowed)",
                    partial=True,
                )
            kind, payload = wire.speech_event(ev)
            if kind == wire.DELTA:
                chunk = await delta(payload, st, server)
            elif kind == wire.DONE:
                chunk = st.framer.take(final=True)
                st.finished = True  # read on to EOF: nothing may follow the terminal event
                server.record_usage(request_id, payload.get("usage"))
            elif kind == wire.ERROR:
                raise error_event(ErrorEvent.from_payload(payload), st.framer)
            else:
                continue  # other events (future additions) are ignored on purpose
            if chunk is not None:
                yield chunk
            if kind == wire.DONE:
                st.framer.check_end(
                    "the SSE audio", "the server finished (speech.audio.done) without any audio"
                )
    if st.finished and not parser.pending:
        return
    partial = st.framer.index > 0
    if parser.pending:
        raise BackendError(
            "the SSE stream was cut in the middle of an event (malformed or truncated SSE)",
            partial=partial,
        )
    raise BackendError(
        "the SSE stream ended without speech.audio.done or speech.audio.error "
        f"after {st.framer.total_bytes} audio bytes: the connection was cut",
        partial=partial,
    )


async def delta(payload: dict[str, Any], st: SseState, server: RemoteServer) -> AudioChunk | None:
    """One ``speech.audio.delta``: a wav stream's first deltas hold its header."""
    raw = wire.delta_audio(payload)
    st.fmt_name = st.fmt_name or payload.get("response_format") or server.options.format
    framer = st.framer
    if not framer.known:
        if st.fmt_name == "wav":
            st.header += raw
            body = start_wav(server, framer, st.header)
            if body is None:
                return None
            raw = body
        else:
            if server.options.format == "wav":
                raise BackendError(not_wav_message(raw))
            await server.assume_format(framer, "the PCM SSE stream")
    framer.feed(raw)
    return framer.take()


__all__ = ["SseState", "delta", "parse_sse"]
