"""Wire encoding: the streaming WAV header, SSE events, OpenAI error bodies, whole-file encoding,
reference-clip decoding and the per-stream PCM output (resampling, format checks)."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from app.api.limits import REF_MAX_S, REF_MIN_S
from backends.audio import encode_audio
from backends.base import AudioChunk
from backends.errors import BackendError, InvalidRequest

# --------------------------------------------------------------------------- wire helpers


def wav_stream_header(sample_rate: int, channels: int) -> bytes:
    """The 44-byte streaming header: RIFF and data sizes are the 0xFFFFFFFF placeholder."""
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        0xFFFFFFFF,
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        sample_rate,
        sample_rate * channels * 2,
        channels * 2,
        16,
        b"data",
        0xFFFFFFFF,
    )


def sse_event(name: str, payload: dict[str, Any]) -> bytes:
    """One event: an ``event:`` line, one compact ``data:`` line, a blank line (no [DONE])."""
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def error_body(
    message: str, type_: str = "BadRequestError", code: int = 400, param: str | None = None
):
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def encode_file(samples: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """Whole-file encoding with soundfile, as the reference server does (pcm = headerless s16le)."""
    return encode_audio(samples, sample_rate, fmt)


def mp3_available() -> bool:
    import soundfile as sf

    return "MP3" in sf.available_formats()


def decode_audio(data: bytes, what: str) -> tuple[np.ndarray, int]:
    """Decode an untrusted clip to float32 mono (bounded: see :func:`voices.clips.decode_mono`).

    Synchronous: the routes call it through ``ApiState.decode`` (a thread, a time limit).
    """
    from voices.clips import decode_mono

    x, sr, _fmt = decode_mono(data, what)
    return x, sr


def mono_wav(x: np.ndarray, sr: int) -> bytes:
    return encode_audio(x, sr, "wav")


def check_ref_duration(x: np.ndarray, sr: int) -> None:
    dur = len(x) / sr if sr else 0.0
    if dur < REF_MIN_S:
        raise InvalidRequest(
            f"Reference audio too short ({dur:.2f}s). At least {REF_MIN_S:g}s is required."
        )
    if dur > REF_MAX_S:
        raise InvalidRequest(
            f"Reference audio too long ({dur:.2f}s). Maximum {REF_MAX_S:g}s is allowed."
        )


class _Resampler:
    """Streaming resampling to a requested ``sample_rate`` (soxr keeps state across chunks)."""

    def __init__(self, in_rate: int, out_rate: int, channels: int):
        import soxr

        self.channels = channels
        self.rs = soxr.ResampleStream(in_rate, out_rate, channels, dtype="int16")

    def __call__(self, pcm: np.ndarray, last: bool = False) -> np.ndarray:
        x = pcm.reshape(-1, self.channels) if self.channels > 1 else pcm
        y = self.rs.resample_chunk(x, last=last)
        return np.ascontiguousarray(y, dtype=np.int16).reshape(-1)


class _Output:
    """Turns chunks into wire PCM at the output rate; a format change mid-stream raises."""

    def __init__(self, want_rate: int | None):
        self.want = want_rate
        self.fmt: tuple[int, int] | None = None
        self.rs: _Resampler | None = None

    @property
    def rate(self) -> int:
        assert self.fmt
        return self.want or self.fmt[0]

    @property
    def channels(self) -> int:
        assert self.fmt
        return self.fmt[1]

    def pcm(self, c: AudioChunk) -> bytes:
        if self.fmt is None:
            self.fmt = (c.sample_rate, c.channels)
            if self.want and self.want != c.sample_rate:
                self.rs = _Resampler(c.sample_rate, self.want, c.channels)
        elif self.fmt != (c.sample_rate, c.channels):
            raise BackendError(
                f"the backend changed format mid-stream: {self.fmt} then {(c.sample_rate, c.channels)}"
            )
        x = self.rs(c.pcm) if self.rs else c.pcm
        return x.astype("<i2").tobytes()

    def flush(self) -> bytes:
        if self.rs is None:
            return b""
        return self.rs(np.zeros(0, np.int16), last=True).astype("<i2").tobytes()
