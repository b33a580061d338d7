"""Raw audio bodies: a PCM stream, a streaming WAV (44-byte header with placeholder sizes, then
PCM), or a whole encoded file from a server that ignored the streaming flags.

Why a transport of its own: a raw stream has no end or error marker, so a cut connection (or a
body ending mid-frame) must fail here, never pass as a short success; and raw PCM does not say
its rate, so it comes from :meth:`~backends.vllm_omni.remote.server.RemoteServer.assume_format`
and every chunk says it was assumed.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import numpy as np

from backends.base import AudioChunk
from backends.errors import BackendError
from backends.vllm_omni.remote.framing import Framer, Reader
from backends.vllm_omni.remote.server import RemoteServer
from backends.vllm_omni.wire import not_wav_message, parse_wav_header


def start_wav(server: RemoteServer, framer: Framer, header: bytes) -> bytes | None:
    """Once ``header`` holds a whole WAV header: set ``framer``'s format from it and return the
    audio after it (None: the header is not complete yet)."""
    fmt = parse_wav_header(header)
    if fmt is None:
        return None
    server.check_rate(fmt.sample_rate)
    framer.sample_rate, framer.channels = fmt.sample_rate, fmt.channels
    return header[fmt.data_offset :]


async def parse_raw(
    reader: Reader, server: RemoteServer, *, wav: bool
) -> AsyncIterator[AudioChunk]:
    """A raw PCM (``wav`` False) or streaming WAV body as chunks of whole frames."""
    framer = Framer()
    header = b""
    while (data := await reader.next()) is not None:
        if not wav and not framer.known:
            if server.options.format == "wav":
                raise BackendError(not_wav_message(data))
            await server.assume_format(framer, "the raw PCM stream")
        if wav and not framer.known:
            header += data
            body = start_wav(server, framer, header)
            if body is None:
                continue
            data = body
        framer.feed(data)
        chunk = framer.take()
        if chunk is not None:
            yield chunk
    if wav and not framer.known:
        raise BackendError(
            f"the WAV stream ended after {len(header)} bytes, before its header was complete"
        )
    chunk = framer.take(final=True)
    if chunk is not None:
        yield chunk
    framer.check_end(
        "the audio stream",
        "the server ended the stream without sending any audio",
        cut_note=": the connection was cut",
    )


def decode_file(data: bytes, what: str) -> tuple[np.ndarray, int]:
    """A whole encoded file as ``(frames, channels)`` int16 and its rate; an empty or
    undecodable one is the server's failure."""
    import soundfile as sf

    try:
        x, sr = sf.read(io.BytesIO(data), dtype="int16", always_2d=True)
    except Exception as e:
        raise BackendError(f"could not decode the server's {what}: {e}") from None
    return np.ascontiguousarray(x), int(sr)


async def parse_whole_file(reader: Reader, ctype: str) -> AsyncIterator[AudioChunk]:
    """A server that ignored the streaming flags (pure-diffusion models) sends a whole file."""
    parts = []
    while (data := await reader.next()) is not None:
        parts.append(data)
    x, sr = decode_file(b"".join(parts), f"{ctype} body")
    if not len(x):
        raise BackendError("the server returned an empty audio file")
    yield AudioChunk(x.reshape(-1), sr, int(x.shape[1]), 0)


__all__ = ["decode_file", "parse_raw", "parse_whole_file", "start_wav"]
