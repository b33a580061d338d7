"""A blind view of the player's stream: what an arena page receives before its vote.

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

from app.stream_routes import HEADER, Session
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
    """One fixed gain per side to ``target_lufs``, measured on its first ``window`` samples.

    Until the window is full, audio is held (``push`` returns nothing); then the gain is set
    (:func:`evaluation.listening.stimuli.normalise_loudness`: peak-limited to -1 dBFS, silence
    gets 0 dB) and everything is released scaled. Float32 mono in [-1, 1] in and out.
    """

    rate: int
    window: int
    target_lufs: float = TARGET_LUFS
    gain_db: float | None = None
    measured_lufs: float | None = None
    _held: list[np.ndarray] = field(default_factory=list)
    _n: int = 0

    def push(self, y: np.ndarray) -> np.ndarray:
        if self.gain_db is None:
            self._held.append(y)
            self._n += len(y)
            if self._n < self.window:
                return y[:0]
            y = self._decide()
        return self._apply(y)

    def flush(self) -> np.ndarray:
        if self.gain_db is None:
            return self._apply(self._decide())
        return np.zeros(0, np.float32)

    def _decide(self) -> np.ndarray:
        from evaluation.listening.stimuli import normalise_loudness

        held = np.concatenate(self._held) if self._held else np.zeros(0, np.float32)
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


@dataclass
class _Conversion:
    token: int
    in_rate: int
    in_channels: int
    converter: PcmConverter
    loudness: LoudnessMatch
    framer: Reframer
    frames_out: int = 0
    index: int = 0
    last_ms: float = 0.0


class BlindSession(Session):
    """The page's :class:`Session`, seen through a filter for one blind generation.

    It shares the page's socket, outbox and bookkeeping (a field-by-field copy of the same
    objects), so :meth:`Session.run` behaves exactly as for the Playground; only :meth:`send`
    differs, and only for messages of ``token``.
    """

    blind_token: int = -1
    blind_rate: int = DEFAULT_RATE
    _conv: _Conversion | None = None

    @classmethod
    def over(cls, session: Session, token: int, rate: int) -> BlindSession:
        view = cls(**{f.name: getattr(session, f.name) for f in fields(Session) if f.init})
        view.blind_token, view.blind_rate = token, rate
        return view

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

    def _rewrite(self, m: dict[str, Any]) -> dict[str, Any] | None:
        kind, tok = m.get("type"), self.blind_token
        if kind == "queued":
            return {"type": "queued", "token": tok}
        if kind in {"generating", "cancelled"}:
            return {"type": kind, "token": tok, "take_id": m.get("take_id")}
        if kind == "start":
            rate = self.blind_rate
            self._conv = _Conversion(
                tok,
                int(m["sample_rate"]),
                int(m["channels"]),
                PcmConverter(int(m["sample_rate"]), int(m["channels"]), rate, CHANNELS),
                LoudnessMatch(rate, int(GAIN_WINDOW_S * rate)),
                Reframer(int(FRAME_S * rate), CHANNELS),
            )
            return {
                "type": "start",
                "token": tok,
                "take_id": m.get("take_id"),
                "sample_rate": self.blind_rate,
                "channels": CHANNELS,
                "text_chars": m.get("text_chars"),
            }
        if kind == "findings":
            return None  # stored by the detector; the page does not need them to vote
        if kind in {"done", "error"}:
            self._flush()
        if kind == "done":
            frames = self._conv.frames_out if self._conv else 0
            return {
                "type": "done",
                "token": tok,
                "status": m.get("status", "ok"),
                "take_id": m.get("take_id"),
                "frames": frames,
                "duration_s": frames / self.blind_rate,
            }
        if kind == "error":
            if m.get("message"):
                log.warning("arena side failed (token %s): %s", tok, m.get("message"))
            return {
                "type": "error",
                "token": tok,
                "status": "error",
                "message": "this side could not be generated; try again or start a new battle",
                "partial": bool(m.get("partial")),
            }
        return {"type": kind, "token": tok}  # a future message type: pass only its kind

    def _send_audio(self, frame: bytes) -> None:
        token, _index, arrival_ms = HEADER.unpack_from(frame)
        c = self._conv
        if token != self.blind_token or c is None:
            return  # not this generation's audio (the page would drop it anyway)
        pcm = np.frombuffer(frame, dtype="<i2", offset=HEADER.size)
        x = pcm.reshape(-1, c.in_channels).astype(np.float32) / 32768.0
        self._emit(c.converter.push(x), arrival_ms)

    def _flush(self) -> None:
        c = self._conv
        if c is None:
            return
        if c.converter.stream is not None:  # a resampler holds a tail
            tail = c.converter.push(np.zeros((0, c.in_channels), np.float32), last=True)
            self._emit(tail, c.last_ms)
        self._send_frames(c.framer.push(self._pcm(c.loudness.flush())) + c.framer.flush())

    def _emit(self, y: np.ndarray, arrival_ms: float) -> None:
        c = self._conv
        assert c is not None
        c.last_ms = arrival_ms
        if not len(y):
            return
        self._send_frames(c.framer.push(self._pcm(c.loudness.push(y.reshape(-1)))))

    @staticmethod
    def _pcm(y: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(y * 32768.0), -32768, 32767).astype("<i2")

    def _send_frames(self, frames: list[np.ndarray]) -> None:
        c = self._conv
        assert c is not None
        for f in frames:
            super().send(HEADER.pack(c.token, c.index, c.last_ms) + f.tobytes())
            c.index += 1
            c.frames_out += len(f)


__all__ = ["BlindSession", "LoudnessMatch", "Reframer", "common_rate", "equal_frames"]
