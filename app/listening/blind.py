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
  :func:`common_rate`; frames are numbered 0, 1, 2 … and keep their arrival time (which the
  page observes anyway);
* ``start`` carries only that format and the take id; ``done`` only the status, take id,
  duration and frame count; ``queued`` no position; ``findings`` are not sent;
* an ``error`` says only that the side failed (and whether audio arrived); the real reason is
  in the server log and the stored take.

The stored take stays native: the statistics, the detector and the export see what the system
really sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from app.stream_routes import HEADER, Session
from backends.profile import PcmConverter

log = logging.getLogger("listenlab.arena")

DEFAULT_RATE = 24000
"""The rate most vLLM-Omni speech models stream at; used when no configured rate is known."""
CHANNELS = 1


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
            self._conv = _Conversion(
                tok,
                int(m["sample_rate"]),
                int(m["channels"]),
                PcmConverter(int(m["sample_rate"]), int(m["channels"]), self.blind_rate, CHANNELS),
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
        if c is not None and c.converter.stream is not None:
            tail = c.converter.push(np.zeros((0, c.in_channels), np.float32), last=True)
            self._emit(tail, c.last_ms)

    def _emit(self, y: np.ndarray, arrival_ms: float) -> None:
        c = self._conv
        assert c is not None
        c.last_ms = arrival_ms
        if not len(y):
            return
        pcm = np.clip(np.rint(y.reshape(-1) * 32768.0), -32768, 32767).astype("<i2")
        super().send(HEADER.pack(c.token, c.index, arrival_ms) + pcm.tobytes())
        c.index += 1
        c.frames_out += len(y)


__all__ = ["BlindSession", "common_rate"]
