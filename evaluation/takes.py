"""Takes: one streamed utterance with its chunk timeline, the unit everything else reads.

A take records what arrived and *when*: per chunk its arrival time (ms since the request was
made), its sample offset and length. From that follow TTFA, RTF, the playback-deadline margin
and the chunk boundaries the glitch detector and the raters' marks are mapped to.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from backends.audio import write_audio_file
from backends.base import AudioChunk, Backend, SpeechRequest
from backends.errors import BackendError, InvalidRequest, ListenlabError
from backends.registry import load_backend

TAKE_FORMAT = 1


@dataclass(frozen=True)
class ChunkRecord:
    index: int
    arrival_ms: float
    offset: int
    """First frame of this chunk in the take's audio."""
    frames: int


@dataclass
class Take:
    request: SpeechRequest
    backend: str
    sample_rate: int
    channels: int
    chunks: list[ChunkRecord]
    audio: np.ndarray
    """int16, shape ``(frames, channels)``."""
    total_ms: float
    status: str = "ok"
    """``ok``, ``error`` (partial audio: never to be scored as a success) or ``cancelled``."""
    error: str | None = None
    take_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def frames(self) -> int:
        return int(self.audio.shape[0])

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate if self.sample_rate else 0.0

    @property
    def ttfa_ms(self) -> float | None:
        return self.chunks[0].arrival_ms if self.chunks else None

    @property
    def rtf(self) -> float | None:
        """Wall time to the end of the stream over audio duration (< 1 = faster than real time)."""
        return (self.total_ms / 1000) / self.duration_s if self.duration_s else None

    @property
    def boundaries(self) -> list[int]:
        """Frame offsets where a chunk ends and the next begins (the seams)."""
        return [c.offset for c in self.chunks[1:]]

    def mono(self) -> np.ndarray:
        """Float32 mono mix in [-1, 1], for analysis."""
        return self.audio.astype(np.float32).mean(axis=1) / 32768.0

    def summary(self) -> dict[str, Any]:
        return {
            "take_id": self.take_id,
            "status": self.status,
            "chunks": len(self.chunks),
            "ttfa_ms": None if self.ttfa_ms is None else round(self.ttfa_ms, 1),
            "rtf": None if self.rtf is None else round(self.rtf, 4),
            "duration_s": round(self.duration_s, 3),
            "sample_rate": self.sample_rate,
            "channels": self.channels,
        }

    # -- persistence

    def sidecar(self, audio_name: str) -> dict[str, Any]:
        return {
            "format": TAKE_FORMAT,
            "take_id": self.take_id,
            "created_at": self.created_at,
            "backend": self.backend,
            "request": self.request.to_dict(),
            "status": self.status,
            "error": self.error,
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "frames": self.frames,
            "total_ms": self.total_ms,
            "ttfa_ms": self.ttfa_ms,
            "rtf": self.rtf,
            "chunks": [asdict(c) for c in self.chunks],
            "audio": audio_name,
            "meta": self.meta,
        }

    def save(self, path: str | Path) -> Path:
        """Write audio (``.wav`` or ``.flac``, by suffix) and a ``.take.json`` sidecar beside it.

        Returns the sidecar path. Both are written to temporary names first, so a crash never
        leaves a half-written take.
        """
        path = check_audio_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        side = path.with_name(path.stem + ".take.json")
        tmp_side = side.with_name(f".{side.name}.tmp")
        tmp_side.write_text(json.dumps(self.sidecar(path.name), indent=1), encoding="utf-8")
        write_audio_file(path, self.audio, self.sample_rate)
        tmp_side.replace(side)
        return side

    @classmethod
    def load(cls, path: str | Path) -> Take:
        """Load from the sidecar or the audio file next to it."""
        path = Path(path)
        side = (
            path if path.name.endswith(".take.json") else path.with_name(path.stem + ".take.json")
        )
        if not side.is_file():
            raise FileNotFoundError(f"no take sidecar at {side}")
        d = json.loads(side.read_text(encoding="utf-8"))
        audio, sr = sf.read(side.parent / d["audio"], dtype="int16", always_2d=True)
        if sr != d["sample_rate"] or audio.shape[1] != d["channels"]:
            raise ValueError(f"{side}: audio file does not match its sidecar")
        return cls(
            request=SpeechRequest.from_dict(d["request"]),
            backend=d["backend"],
            sample_rate=d["sample_rate"],
            channels=d["channels"],
            chunks=[ChunkRecord(**c) for c in d["chunks"]],
            audio=audio,
            total_ms=d["total_ms"],
            status=d["status"],
            error=d.get("error"),
            take_id=d["take_id"],
            created_at=d["created_at"],
            meta=d.get("meta", {}),
        )


AUDIO_SUFFIXES = (".wav", ".flac")


def check_audio_path(path: str | Path) -> Path:
    """A take's audio path must say WAV or FLAC: writing another name's bytes as WAV (or
    renaming it) would leave the user with a file that is not what they asked for."""
    path = Path(path)
    if path.suffix.lower() not in AUDIO_SUFFIXES:
        raise InvalidRequest(
            f"cannot write {path.name!r}: takes are saved as .wav or .flac, not "
            f"{path.suffix or 'a file without a suffix'!s} (convert afterwards, e.g. with ffmpeg)"
        )
    return path


class TakeFailed(BackendError):
    """The stream failed; ``.take`` holds what arrived, marked ``status='error'``."""

    def __init__(self, take: Take, cause: BaseException):
        super().__init__(
            str(cause), status=getattr(cause, "status", None), partial=bool(take.chunks)
        )
        self.take = take
        self.cause = cause


class Recorder:
    """Wraps a backend stream; pass chunks through while building the take.

    ``async for chunk in recorder: ...`` then read ``recorder.take``. The clock starts when
    the recorder is created, i.e. when the request is made.
    """

    def __init__(self, backend: Backend, request: SpeechRequest):
        self.backend, self.request = backend, request
        self.t0 = time.monotonic()
        self._chunks: list[ChunkRecord] = []
        self._pcm: list[np.ndarray] = []
        self._fmt: tuple[int, int] | None = None
        self._frames = 0
        self.take: Take | None = None

    def _add(self, c: AudioChunk) -> None:
        if self._fmt is None:
            self._fmt = (c.sample_rate, c.channels)
        elif self._fmt != (c.sample_rate, c.channels):
            raise BackendError(
                f"stream changed format mid-way: {self._fmt} then {(c.sample_rate, c.channels)}"
            )
        self._chunks.append(
            ChunkRecord(len(self._chunks), (c.arrived - self.t0) * 1000.0, self._frames, c.frames)
        )
        self._pcm.append(c.pcm)
        self._frames += c.frames

    def _finish(self, status: str, error: str | None = None) -> Take:
        sr, ch = self._fmt or (self.backend.capabilities.sample_rate or 0, 1)
        audio = (
            np.concatenate(self._pcm).reshape(-1, ch) if self._pcm else np.zeros((0, ch), np.int16)
        )
        self.take = Take(
            request=self.request,
            backend=self.backend.describe(),
            sample_rate=sr,
            channels=ch,
            chunks=self._chunks,
            audio=audio,
            total_ms=(time.monotonic() - self.t0) * 1000.0,
            status=status,
            error=error,
            take_id=self.request.request_id,
        )
        return self.take

    async def __aiter__(self) -> AsyncIterator[AudioChunk]:
        stream = self.backend.stream(self.request)
        try:
            async for c in stream:
                self._add(c)
                yield c
        except (asyncio.CancelledError, GeneratorExit):
            self._finish("cancelled", "cancelled by the client")
            raise
        except InvalidRequest:
            raise  # bad input is refused before any audio: there is no take to keep
        except Exception as e:
            self._finish("error", str(e))
            raise TakeFailed(self.take, e) from e
        finally:
            await stream.aclose()
        if not self._chunks:
            self._finish("error", "the stream ended without any audio")
            raise TakeFailed(self.take, BackendError("the stream ended without any audio"))
        self._finish("ok")


async def record(
    backend: Backend, request: SpeechRequest, on_chunk: Callable[[AudioChunk], None] | None = None
) -> Take:
    """Stream ``request`` through ``backend`` and return the finished take.

    Invalid input raises :class:`~backends.base.InvalidRequest` before anything is recorded; a
    failure mid-stream raises :class:`TakeFailed` carrying the partial take.
    """
    rec = Recorder(backend, request)
    async for chunk in rec:
        if on_chunk:
            on_chunk(chunk)
    assert rec.take is not None
    return rec.take


async def load(backend: Backend) -> bool:
    """Load the backend's model before timing anything: the engine's :meth:`Backend.start`
    (embedded vLLM-Omni) and :meth:`Backend.warm_up` (Piper, wrappers). Returns whether the
    backend has a model to load (``Backend.loads_model``), so its time is worth reporting."""
    await backend.start()
    await asyncio.to_thread(backend.warm_up)
    return backend.loads_model


async def say(
    text: str,
    backend: str | Backend = "piper",
    out: str | Path | None = None,
    **request_fields: Any,
) -> Take:
    """Python twin of ``listenlab say``: stream, record, optionally save, return the take.

    The backend is loaded (``warm_up``) before the request is made, so the take's TTFA is a
    warm one; the load time is ``take.meta["load_ms"]`` (None when nothing needed loading).
    ``out`` must end in ``.wav`` or ``.flac`` (checked before anything is generated). On failure
    nothing is written at ``out``; a partial take (if any audio came) is saved as
    ``<out>.partial.<suffix>`` so it can be inspected, and the error is re-raised.
    """
    if out is not None:
        out = check_audio_path(out)
    own = isinstance(backend, str)
    be = load_backend(backend) if own else backend
    try:
        t0 = time.monotonic()
        load_ms = (time.monotonic() - t0) * 1000.0 if await load(be) else None
        request = SpeechRequest(
            text=text, **{k: v for k, v in request_fields.items() if v is not None}
        )
        try:
            take = await record(be, request)
        except TakeFailed as e:
            if out and e.take.chunks:
                p = Path(out)
                e.take.save(p.with_name(p.stem + ".partial" + p.suffix))
            raise
        take.meta["load_ms"] = load_ms
        if out:
            take.save(out)
        return take
    finally:
        if own:
            await be.aclose()


__all__ = [
    "AUDIO_SUFFIXES",
    "check_audio_path",
    "load",
    "ChunkRecord",
    "ListenlabError",
    "Recorder",
    "Take",
    "TakeFailed",
    "record",
    "say",
]
