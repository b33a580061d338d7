"""The PCM one ``listenlab api`` answer sends: at the requested rate, in one format throughout.

Why: a client asks for ``sample_rate`` and gets every chunk resampled with one streaming
resampler (soxr keeps its state across chunks, so the seams are inaudible); a backend that
changed rate or channels mid-stream would corrupt a raw stream silently, so it is an error.
"""

from __future__ import annotations

import numpy as np

from backends.base import AudioChunk
from backends.errors import BackendError


class Resampler:
    """Streaming resampling to a requested ``sample_rate`` (soxr keeps state across chunks)."""

    def __init__(self, in_rate: int, out_rate: int, channels: int):
        import soxr

        self.channels = channels
        self.rs = soxr.ResampleStream(in_rate, out_rate, channels, dtype="int16")

    def __call__(self, pcm: np.ndarray, last: bool = False) -> np.ndarray:
        x = pcm.reshape(-1, self.channels) if self.channels > 1 else pcm
        y = self.rs.resample_chunk(x, last=last)
        return np.ascontiguousarray(y, dtype=np.int16).reshape(-1)


class StreamOutput:
    """Turns chunks into wire PCM at the output rate; a format change mid-stream raises."""

    def __init__(self, want_rate: int | None):
        self.want = want_rate
        self.fmt: tuple[int, int] | None = None
        self.rs: Resampler | None = None

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
                self.rs = Resampler(c.sample_rate, self.want, c.channels)
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

    def samples(self, parts: list[bytes]) -> np.ndarray:
        """Pieces of :meth:`pcm` joined as ``(frames, channels)`` int16, for a whole file."""
        return np.frombuffer(b"".join(parts), dtype="<i2").reshape(-1, self.channels)


def resample_whole(x: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    """A whole file to ``out_rate`` (``(frames, channels)`` int16), ``ceil(frames * out / in)``
    frames long as vLLM-Omni's ``AudioMixin._resample_audio`` (torchaudio) makes it; the
    samples are soxr's (docs/api.md lists the difference)."""
    import math

    import soxr

    if in_rate == out_rate or not len(x):
        return x
    want = math.ceil(out_rate * len(x) / in_rate)
    y = soxr.resample(x.astype(np.float32) / 32768.0, in_rate, out_rate, quality="HQ")
    y = y.reshape(len(y), -1)
    if len(y) < want:
        y = np.concatenate([y, np.zeros((want - len(y), y.shape[1]), np.float32)])
    y = y[:want]
    return np.clip(np.rint(y * 32768.0), -32768, 32767).astype(np.int16)


def file_bytes(
    x: np.ndarray, rate: int, speed: float, out_rate: int | None, fmt: str
) -> tuple[bytes, int]:
    """``AudioMixin.create_audio``'s order: the speed stretch at the model's rate, then the
    requested rate, then the container. Returns the bytes and the rate they are at. A format
    libsndfile cannot write at that rate (Opus at 44.1 kHz) raises its own error, as there."""
    import io

    import soundfile as sf

    from backends.audio import encode_audio
    from backends.vllm_omni.speed import stretch_pcm

    channels = x.shape[1] if x.ndim == 2 else 1
    if speed != 1.0:
        x = stretch_pcm(x.reshape(-1), channels, speed).reshape(-1, channels)
    if out_rate is not None and out_rate != rate:
        x, rate = resample_whole(x, rate, out_rate), out_rate
    if fmt == "pcm":
        return encode_audio(x, rate, fmt), rate
    # vLLM-Omni hands soundfile float samples: encoders (MP3, Opus) see the same input here
    container, subtype = {"wav": ("WAV", None), "flac": ("FLAC", None), "mp3": ("MP3", None)}.get(
        fmt, ("OGG", "OPUS")
    )
    buf = io.BytesIO()
    y = x.astype(np.float32) / np.float32(32768.0)
    sf.write(buf, y[:, 0] if y.shape[1] == 1 else y, rate, format=container, subtype=subtype)
    return buf.getvalue(), rate


__all__ = ["Resampler", "StreamOutput", "file_bytes", "resample_whole"]
