"""A blind view of the player's stream: what an arena page, or a listening-test rater's page
(:mod:`app.listening.ws`: :class:`Blinder` / :func:`take_frames` for stored stimuli,
:class:`BlindSession` with a ``stream_id`` for *live* ones), receives.

The player's usual stream tells the page the sample rate, the channel count, the backend's
learnt start-rule priors, the chunk schedule (``boundaries_ms``, ``arrivals_ms``, ``chunks``),
the time to first audio, the detector's findings and, on failure, the backend's own error
text. Each can hint at which system is speaking (Piper streams 22.05 kHz, most vLLM-Omni models
24 kHz). :class:`BlindSession` runs the one stream implementation (:meth:`Session.run`: queue,
record, save the native take, findings) but rewrites every message of that generation on its
way to the page:

* the audio is converted with soxr's streaming resampler (the same converter the wire profiles
  use) to one **common format** for every system of the arena, mono at
  :func:`common_rate`;
* it is **gain-matched** (:class:`LoudnessMatch`): the first :data:`GAIN_WINDOW_S` of each side
  are held, measured (integrated loudness, ITU-R BS.1770 via pyloudnorm) and the side is
  scaled to :data:`TARGET_LUFS` with one fixed gain (peak-limited, no pumping), so a louder
  system does not win by loudness;
* it is cut into **equal frames** (:class:`Reframer`, :data:`FRAME_S` each; the last one padded
  with silence): a system that sends a few big chunks and one that sends many small ones look
  the same on the wire. Frames are numbered 0, 1, 2 … and carry the arrival time of the audio
  that completed them (the page observes arrival anyway);
* ``start`` carries only that format and the take id; ``done`` only the status, take id,
  duration and frame count; ``queued`` no position; ``findings`` are not sent;
* an ``error`` says only that the side failed (and whether audio arrived); the real reason is
  in the server log and the stored take.

The stored take stays native: the statistics, the detector and the export see what the system
really sent. What still differs between sides: when frames arrive (a system's chunk rhythm and
speed) and the duration, both of which a listener perceives anyway.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from app.player.session import HEADER, Session
from backends.profile import PcmConverter

log = logging.getLogger("listenlab.arena")

DEFAULT_RATE = 24000
"""The rate most vLLM-Omni speech models stream at; used when no configured rate is known."""
CHANNELS = 1
FRAME_S = 0.1
"""Every blind frame holds this much audio (2400 samples at 24 kHz)."""
GAIN_WINDOW_S = 1.0
"""Audio held to measure a side's loudness before its first frame is sent."""
TARGET_LUFS = -23.0
MAX_GAIN_DB = 20.0


class Reframer:
    """Cuts a stream of PCM blocks into frames of exactly ``frame`` samples.

    ``push`` returns the frames completed so far; ``flush`` the last one, padded with silence
    (nothing if no sample is left). Reusable by any blind page (the arena, the listening
    tests' replays): frame sizes then say nothing about a system's chunking.
    """

    def __init__(self, frame: int, channels: int = 1, dtype: str = "<i2"):
        if frame < 1:
            raise ValueError("a frame holds at least one sample")
        self.frame, self.channels, self.dtype = frame, channels, np.dtype(dtype)
        self._buf = np.zeros((0, channels), self.dtype)

    def push(self, block: np.ndarray) -> list[np.ndarray]:
        x = np.concatenate([self._buf, np.asarray(block, self.dtype).reshape(-1, self.channels)])
        n = x.shape[0] // self.frame * self.frame
        self._buf = x[n:]
        return [x[i : i + self.frame] for i in range(0, n, self.frame)]

    def flush(self) -> list[np.ndarray]:
        if not self._buf.shape[0]:
            return []
        pad = np.zeros((self.frame - self._buf.shape[0], self.channels), self.dtype)
        out, self._buf = np.concatenate([self._buf, pad]), self._buf[:0]
        return [out]


def equal_frames(
    blocks: Iterable[np.ndarray], frame: int, channels: int = 1
) -> Iterator[np.ndarray]:
    """``blocks`` (e.g. a stored take's chunks) as frames of exactly ``frame`` samples."""
    r = Reframer(frame, channels)
    for b in blocks:
        yield from r.push(b)
    yield from r.flush()


@dataclass
class LoudnessMatch:
    """One fixed gain per side to ``target_lufs``, measured on its first ``window`` frames.

    Until the window is full, audio is held (``push`` returns nothing); then the gain is set
    (:func:`evaluation.loudness.normalise_loudness`: the ears' loudness, peak-limited,
    silence gets 0 dB) and everything is released scaled. Float32 ``(frames, channels)`` in
    [-1, 1] in and out (a 1-D block is one channel).
    """

    rate: int
    window: int
    target_lufs: float = TARGET_LUFS
    gain_db: float | None = None
    measured_lufs: float | None = None
    _held: list[np.ndarray] = field(default_factory=list)
    _n: int = 0

    _flat: bool = False

    def push(self, y: np.ndarray) -> np.ndarray:
        self._flat = y.ndim == 1
        y = y[:, None] if self._flat else y
        if self.gain_db is None:
            self._held.append(y)
            self._n += len(y)
            if self._n < self.window:
                return self._shape(y[:0])
            y = self._decide()
        return self._shape(self._apply(y))

    def flush(self) -> np.ndarray:
        if self.gain_db is None:
            return self._shape(self._apply(self._decide()))
        return self._shape(np.zeros((0, 1), np.float32))

    def _shape(self, y: np.ndarray) -> np.ndarray:
        return y[:, 0] if self._flat else y

    def _decide(self) -> np.ndarray:
        from evaluation.loudness import normalise_loudness

        held = np.concatenate(self._held) if self._held else np.zeros((0, 1), np.float32)
        self._held = []
        pcm = np.clip(np.rint(held * 32768.0), -32768, 32767).astype(np.int16)
        _y, gain, lufs = normalise_loudness(pcm, self.rate, self.target_lufs)
        self.measured_lufs = lufs
        self.gain_db = (
            float(np.clip(gain, -MAX_GAIN_DB, MAX_GAIN_DB)) if math.isfinite(gain) else 0.0
        )
        return held

    def _apply(self, y: np.ndarray) -> np.ndarray:
        g = np.float32(10 ** ((self.gain_db or 0.0) / 20))
        return np.clip(y * g, -1.0, 32767 / 32768)


def common_rate(rates: Iterable[int | None]) -> int:
    """The highest native rate among the systems (so no side loses bandwidth), else 24 kHz."""
    known = [int(r) for r in rates if r]
    return max(known) if known else DEFAULT_RATE


@dataclass(frozen=True)
class CommonFormat:
    """The one format every stimulus of a blind page reaches the listener in."""

    sample_rate: int
    channels: int

    @property
    def frame(self) -> int:
        """Samples (per channel) in one blind frame."""
        return max(1, int(round(FRAME_S * self.sample_rate)))

    @classmethod
    def of(cls, formats: Iterable[tuple[int | None, int | None]]) -> CommonFormat:
        """For a set of native ``(rate, channels)``: the highest rate, and stereo iff any is
        stereo (a mono stimulus is then heard in both ears). Deterministic for a given set."""
        fs = list(formats)
        stereo = any(int(c or 1) > 1 for _r, c in fs)
        return cls(common_rate(r for r, _c in fs), 2 if stereo else 1)


@dataclass
class Blinder:
    """Native int16 blocks in, equal frames of a :class:`CommonFormat` out.

    soxr's streaming resampler (:class:`PcmConverter`; mono duplicated to both ears, stereo
    mixed only if the common format is mono), an optional :class:`LoudnessMatch` (live audio;
    stored stimuli were normalised when they were made), then :class:`Reframer`. Each frame
    carries the arrival time of the block that completed it. One implementation for the arena's
    sides and the listening tests' stimuli.
    """

    fmt: CommonFormat
    in_channels: int
    converter: PcmConverter
    framer: Reframer
    loudness: LoudnessMatch | None = None
    samples_out: int = 0
    frames_out: int = 0
    last_ms: float = 0.0

    @classmethod
    def make(
        cls, in_rate: int, in_channels: int, fmt: CommonFormat, target_lufs: float | None = None
    ) -> Blinder:
        rate, ch = fmt.sample_rate, fmt.channels
        return cls(
            fmt,
            in_channels,
            PcmConverter(in_rate, in_channels, rate, ch),
            Reframer(fmt.frame, ch),
            None
            if target_lufs is None
            else LoudnessMatch(rate, int(GAIN_WINDOW_S * rate), target_lufs),
        )

    def push(self, pcm: np.ndarray, arrival_ms: float) -> list[tuple[int, float, np.ndarray]]:
        """``(index, arrival ms, frame)`` for every frame this block completed."""
        self.last_ms = arrival_ms
        x = np.asarray(pcm).reshape(-1, self.in_channels).astype(np.float32) / 32768.0
        return self._out(self.converter.push(x))

    def flush(self) -> list[tuple[int, float, np.ndarray]]:
        """The resampler's tail, the held loudness window and the last (padded) frame."""
        out = []
        if self.converter.stream is not None:
            out += self._out(
                self.converter.push(np.zeros((0, self.in_channels), np.float32), last=True)
            )
        if self.loudness is not None:
            out += self._frames(self.framer.push(self._pcm(self.loudness.flush())))
        return out + self._frames(self.framer.flush())

    @property
    def duration_s(self) -> float:
        return self.samples_out / self.fmt.sample_rate

    def _out(self, y: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
        if not len(y):
            return []
        if self.loudness is not None:
            y = self.loudness.push(y)
        return self._frames(self.framer.push(self._pcm(y)))

    @staticmethod
    def _pcm(y: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(y * 32768.0), -32768, 32767).astype("<i2")

    def _frames(self, frames: list[np.ndarray]) -> list[tuple[int, float, np.ndarray]]:
        out = []
        for f in frames:
            out.append((self.frames_out, self.last_ms, f))
            self.frames_out += 1
            self.samples_out += len(f)
        return out


def take_frames(
    take: Any, fmt: CommonFormat
) -> Iterator[tuple[float, list[tuple[int, float, np.ndarray]]]]:
    """A stored take as blind frames: per native chunk, its recorded arrival ms and the frames
    it completed (the last item, at the last arrival, holds the tail)."""
    b = Blinder.make(int(take.sample_rate), int(take.channels), fmt)
    last = 0.0
    for c in take.chunks:
        last = float(c.arrival_ms)
        yield last, b.push(take.audio[c.offset : c.offset + c.frames], last)
    yield last, b.flush()


class BlindSession(Session):
    """The page's :class:`Session`, seen through a filter for one blind generation.

    It shares the page's socket, outbox and bookkeeping (a field-by-field copy of the same
    objects), so :meth:`Session.run` behaves exactly as for the Playground; only :meth:`send`
    differs, and only for messages of ``token``. With a ``stream_id`` (listening tests) the
    messages name that opaque id instead of the take id.
    """

    blind_token: int = -1
    blind_format: CommonFormat = CommonFormat(DEFAULT_RATE, CHANNELS)
    stream_id: str | None = None
    target_lufs: float = TARGET_LUFS
    completed: bool = False
    """``done`` with status ok was sent: every frame of the generation reached the page."""
    _conv: Blinder | None = None

    @classmethod
    def over(
        cls,
        session: Session,
        token: int,
        rate: int,
        *,
        channels: int = CHANNELS,
        stream_id: str | None = None,
        target_lufs: float = TARGET_LUFS,
    ) -> BlindSession:
        view = cls(**{f.name: getattr(session, f.name) for f in fields(Session) if f.init})
        view.blind_token, view.blind_format = token, CommonFormat(rate, channels)
        view.stream_id, view.target_lufs = stream_id, target_lufs
        return view

    @property
    def sent_ms(self) -> float:
        """Audio sent to the page so far (ms of the common format)."""
        return self._conv.duration_s * 1000.0 if self._conv else 0.0

    async def _learnt(self, label: str) -> dict[str, Any] | None:
        return None  # per-backend priors would name the system; the page uses its default rule

    def send(self, obj: dict[str, Any] | bytes) -> None:
        if isinstance(obj, bytes):
            self._send_audio(obj)
            return
        if obj.get("token") != self.blind_token:
            if obj.get("type") == "report_error":  # e.g. "take not saved: <backend reason>"
                obj = {**obj, "message": "the server could not keep this take"}
            super().send(obj)
            return
        out = self._rewrite(obj)
        if out is not None:
            super().send(out)

    def _ident(self, m: dict[str, Any]) -> dict[str, Any]:
        if self.stream_id is not None:
            return {"stream_id": self.stream_id}
        return {"take_id": m.get("take_id")}

    def _rewrite(self, m: dict[str, Any]) -> dict[str, Any] | None:
        kind, tok = m.get("type"), self.blind_token
        if kind == "queued":
            return {"type": "queued", "token": tok}
        if kind in {"generating", "cancelled"}:
            return {"type": kind, "token": tok, **self._ident(m)}
        if kind == "start":
            fmt = self.blind_format
            self._conv = Blinder.make(
                int(m["sample_rate"]), int(m["channels"]), fmt, self.target_lufs
            )
            out = {
                "type": "start",
                "token": tok,
                **self._ident(m),
                "sample_rate": fmt.sample_rate,
                "channels": fmt.channels,
            }
            if self.stream_id is None:  # the arena's sides speak the same text
                out["text_chars"] = m.get("text_chars")
            return out
        if kind == "findings":
            return None  # stored by the detector; the page does not need them to vote
        if kind in {"done", "error"} and self._conv is not None:
            self._send_frames(self._conv.flush())
        if kind == "done":
            c = self._conv
            self.completed = m.get("status", "ok") == "ok"
            return {
                "type": "done",
                "token": tok,
                "status": m.get("status", "ok"),
                **({} if self.stream_id is not None else self._ident(m)),
                # a listening page: frames on the wire; the arena: samples (as before)
                "frames": (c.frames_out if self.stream_id else c.samples_out) if c else 0,
                "duration_s": c.duration_s if c else 0.0,
            }
        if kind == "error":
            if m.get("message"):
                log.warning("blind stream failed (token %s): %s", tok, m.get("message"))
            return {
                "type": "error",
                "token": tok,
                "status": "error",
                "message": "this side could not be generated; try again or start a new battle"
                if self.stream_id is None
                else GENERIC_ERROR,
                "partial": bool(m.get("partial")),
            }
        return {"type": kind, "token": tok}  # a future message type: pass only its kind

    def _send_audio(self, frame: bytes) -> None:
        token, _index, arrival_ms = HEADER.unpack_from(frame)
        c = self._conv
        if token != self.blind_token or c is None:
            return  # not this generation's audio (the page would drop it anyway)
        self._send_frames(c.push(np.frombuffer(frame, dtype="<i2", offset=HEADER.size), arrival_ms))

    def _send_frames(self, frames: list[tuple[int, float, np.ndarray]]) -> None:
        for i, ms, f in frames:  # a listening page gets no server times (the arena: arrival)
            ms = 0.0 if self.stream_id is not None else ms
            super().send(HEADER.pack(self.blind_token, i, ms) + f.tobytes())


GENERIC_ERROR = "this clip could not be played; please try again"
"""What a blind listening page is told when a stimulus fails (the reason is in the log)."""


__all__ = [
    "GENERIC_ERROR",
    "Blinder",
    "BlindSession",
    "CommonFormat",
    "LoudnessMatch",
    "Reframer",
    "common_rate",
    "equal_frames",
    "take_frames",
]
