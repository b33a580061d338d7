"""Byte pieces into whole-frame audio chunks, and the clock that bounds each wait.

Why shared: raw PCM, streaming WAV, SSE deltas and WebSocket frames all arrive as byte pieces
that split samples (and stereo frames) anywhere, and every transport must fail the same way on
a cut stream, a stray byte or a server that goes quiet. Timeouts count *audio progress*, not
bytes, so a server dripping one byte per second is caught too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from backends.base import AudioChunk
from backends.errors import BackendError, StreamTimeout
from backends.vllm_omni.remote.options import RemoteOptions
from backends.vllm_omni.wire import ErrorEvent

MIN_CHUNK_MS = 10.0
"""Raw streams are cut into chunks of at least this much audio (except the last)."""

T = TypeVar("T")


@dataclass(frozen=True)
class AssumedFormatChunk(AudioChunk):
    """A chunk whose rate/channels the stream did not state; ``assumed_format`` says from what
    they were taken (the Playground's card shows it, via the ``start`` message)."""

    assumed_format: str | None = None


@dataclass
class Framer:
    """Turns byte pieces into whole-frame :class:`AudioChunk` s; carries partial frames over."""

    min_bytes_ms: float = MIN_CHUNK_MS
    sample_rate: int | None = None
    channels: int | None = None
    buf: bytearray = field(default_factory=bytearray)
    index: int = 0
    total_bytes: int = 0
    assumed: str | None = None
    """Set when the rate/channels were not read from the stream: from what they were taken."""

    @property
    def known(self) -> bool:
        return self.sample_rate is not None and self.channels is not None

    def feed(self, data: bytes) -> None:
        self.buf += data
        self.total_bytes += len(data)

    def take(self, *, final: bool = False, min_ms: float | None = None) -> AudioChunk | None:
        """Pop the buffered whole frames as a chunk once there is enough (or at the end)."""
        assert self.sample_rate and self.channels
        frame = 2 * self.channels
        whole = len(self.buf) - len(self.buf) % frame
        need = (
            int(self.sample_rate * (self.min_bytes_ms if min_ms is None else min_ms) / 1000) * frame
        )
        if whole == 0 or (not final and whole < max(need, frame)):
            return None
        pcm = np.frombuffer(bytes(self.buf[:whole]), dtype="<i2").astype(np.int16)
        del self.buf[:whole]
        return self.chunk(pcm, self.sample_rate, self.channels)

    def chunk(self, pcm: np.ndarray, sample_rate: int, channels: int) -> AudioChunk:
        """The next chunk (numbered in order), marked with the assumption if there was one."""
        if self.assumed:
            chunk: AudioChunk = AssumedFormatChunk(
                pcm, sample_rate, channels, self.index, assumed_format=self.assumed
            )
        else:
            chunk = AudioChunk(pcm, sample_rate, channels, self.index)
        self.index += 1
        return chunk

    def leftover(self) -> int:
        return len(self.buf)

    def check_end(self, what: str, empty: str, *, cut_note: str = "") -> None:
        """After the final :meth:`take`: stray bytes mean a cut stream, no chunk means no audio."""
        if self.leftover():
            raise BackendError(
                f"{what} ended mid-frame ({self.leftover()} stray bytes){cut_note}", partial=True
            )
        if self.index == 0:
            raise BackendError(empty)


def error_event(err: ErrorEvent, framer: Framer) -> BackendError:
    """A server's error event as the take's failure; audio already sent is a failed take."""
    msg = err.message
    if err.discard or framer.index:
        msg += f" (the server asked to discard the partial audio: {framer.total_bytes} bytes)"
    return BackendError(
        f"server error event: {msg}", status=err.code, partial=bool(err.discard or framer.index)
    )


class Clock:
    """One deadline at a time: first audio after the request, then between audio chunks."""

    def __init__(self, options: RemoteOptions):
        self.o = options
        self.t0 = time.monotonic()
        self.deadline = self.t0 + options.first_audio_timeout
        self.audio = False
        self.bytes_in_phase = 0

    def got_audio(self) -> None:
        self.audio = True
        self.bytes_in_phase = 0
        self.deadline = time.monotonic() + self.o.chunk_timeout

    async def wait(self, aw: Awaitable[T], what: str) -> T:
        try:
            async with asyncio.timeout(max(0.0, self.deadline - time.monotonic())):
                return await aw
        except TimeoutError:
            if self.audio:
                raise StreamTimeout(
                    f"no audio for {self.o.chunk_timeout:g} s (chunk_timeout) while waiting for "
                    f"{what}; {self.bytes_in_phase} bytes trickled in meanwhile"
                ) from None
            raise StreamTimeout(
                f"no audio within {self.o.first_audio_timeout:g} s of the request "
                f"(first_audio_timeout) while waiting for {what}; {self.bytes_in_phase} bytes "
                "arrived"
            ) from None


class Reader:
    """Network reads bounded by the clock; transport errors become clear failures."""

    def __init__(self, it: AsyncIterator[bytes], clock: Clock):
        self.it = it.__aiter__()
        self.clock = clock
        self.total = 0

    async def next(self) -> bytes | None:
        import httpx

        try:
            data = await self.clock.wait(
                self.it.__anext__(), "audio" if not self.clock.audio else "the next chunk"
            )
        except StopAsyncIteration:
            return None
        except httpx.HTTPError as e:
            raise BackendError(
                f"the connection was cut mid-stream after {self.total} bytes "
                f"({type(e).__name__}: {e})",
                partial=self.total > 0,
            ) from None
        self.total += len(data)
        self.clock.bytes_in_phase += len(data)
        return data


__all__ = ["MIN_CHUNK_MS", "AssumedFormatChunk", "Clock", "Framer", "Reader", "error_event"]
