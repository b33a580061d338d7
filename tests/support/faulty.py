"""A deliberately broken backend: any engine plus one streaming bug, for testing the probe.

vLLM-Omni's TTS integration checklist names the bugs a new model's streaming path tends to
have. ``listenlab probe`` must catch each one; this wrapper reproduces them on a real voice so
the probe (and anything else that claims to catch them) can be tested without a GPU:

``replay``
    After seam ``fault_seam`` the chunk starts with the last ``fault_s`` seconds of the
    previous audio again (a decoder that re-emits its left context).
``doubled``
    Every chunk carries all audio so far: cumulative output treated as a delta.
``crosstalk`` (only under load)
    The first ``fault_s`` seconds of a stream are another in-flight request's onset (a buffer
    handed to the wrong request).
``gap`` (only under load)
    Before chunk ``fault_seam`` the stream stalls until the audio already sent has played out
    and ``fault_s`` seconds more (a codec window served round-robin that starves a request).
``truncate`` (only under load)
    The stream ends cleanly after ~40% of the audio its text predicts (a per-request state
    slot reused by another request), with no error.

"Under load" means another request is streaming on the same backend instance at that moment.
The non-streamed path (``synthesize``) is the inner engine's and stays correct, as it usually
does in the real bugs: the probe compares streams against it.

Spec: ``piper?deterministic=1&fault=replay`` (knobs ``fault_seam``, ``fault_s``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from backends.base import Audio, AudioChunk, Backend, Capabilities, Health, SpeechRequest
from backends.errors import InvalidRequest
from backends.registry import WrapperBackend, register_wrapper

FAULTS = {
    "replay": "re-send the last fault_s seconds after seam fault_seam",
    "doubled": "cumulative audio sent as if it were new (every chunk repeats all before it)",
    "crosstalk": "under load, another request's onset in the first fault_s seconds",
    "gap": "under load, a stall before chunk fault_seam longer than the audio in hand",
    "truncate": "under load, end cleanly after ~40% of the predicted audio",
}
_DEFAULT_S = {"replay": 0.6, "crosstalk": 0.8, "gap": 1.0}
_CHARS_PER_S = 15.0


@dataclass
class _Live:
    """One in-flight request: what the other requests may see of it."""

    onset: np.ndarray | None = None
    sample_rate: int = 0
    channels: int = 1
    order: int = 0


class FaultyBackend(WrapperBackend):
    """``inner`` with the bug ``fault``; per-request state lives in ``_live`` until it ends."""

    name = "faulty"
    trigger = "fault"
    example = "piper?deterministic=1&fault=replay"

    def __init__(self, inner: Backend, fault: str, seam: int = 1, seconds: float = 0.6):
        self.inner, self.fault, self.seam, self.seconds = inner, fault, seam, seconds
        self._live: dict[str, _Live] = {}
        self._started = 0
        if self.fault not in FAULTS:
            raise InvalidRequest(
                f"unknown fault {self.fault!r}; known faults: "
                + ", ".join(f"{k} ({v})" for k, v in FAULTS.items())
            )
        if self.seam < 1:
            raise InvalidRequest(
                f"fault_seam must be >= 1 (seam k starts chunk k), got {self.seam}"
            )
        if not self.seconds > 0:
            raise InvalidRequest(f"fault_s must be > 0, got {self.seconds}")

    # -- delegation

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def trigger_value(self) -> str:
        return self.fault

    async def synthesize(self, request: SpeechRequest) -> Audio:
        return await self.inner.synthesize(request)

    async def health(self) -> Health:
        h = await self.inner.health()
        return Health(h.ok, f"{h.detail} with fault {self.fault}")

    # -- the faults

    def _others(self, request_id: str) -> list[_Live]:
        return [v for k, v in self._live.items() if k != request_id]

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        rid = request.request_id
        self._started += 1
        me = self._live[rid] = _Live(order=self._started)
        inner = self.inner.stream(request)
        sent: list[np.ndarray] = []  # int16 pcm sent so far (for replay / doubled)
        frames_sent = 0
        t_first: float | None = None
        index = 0
        try:
            async for c in inner:
                pcm = c.pcm
                if me.onset is None:
                    me.onset, me.sample_rate, me.channels = pcm.copy(), c.sample_rate, c.channels
                if self.fault == "doubled":
                    sent.append(pcm)
                    pcm = np.concatenate(sent)
                elif self.fault == "replay" and index == self.seam and sent:
                    n = int(self.seconds * c.sample_rate) * c.channels
                    prev = np.concatenate(sent)
                    pcm = np.concatenate([prev[-n:], pcm])
                elif self.fault == "crosstalk" and index == 0:
                    pcm = self._cross(rid, pcm, c)
                elif self.fault == "gap" and index == self.seam and self._others(rid):
                    played = frames_sent / c.sample_rate
                    due = (t_first or time.monotonic()) + played + self.seconds
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                elif self.fault == "truncate" and self._others(rid):
                    limit = int(0.4 * len(request.text) / _CHARS_PER_S * c.sample_rate)
                    left = max(0, limit - frames_sent) * c.channels
                    if left < len(pcm):
                        if left:
                            yield AudioChunk(pcm[:left], c.sample_rate, c.channels, index)
                        return
                if self.fault != "doubled":
                    sent.append(c.pcm)
                t_first = t_first or time.monotonic()
                frames_sent += len(pcm) // c.channels
                yield AudioChunk(pcm, c.sample_rate, c.channels, index)
                index += 1
        finally:
            await inner.aclose()
            self._live.pop(rid, None)

    def _cross(self, rid: str, pcm: np.ndarray, c: AudioChunk) -> np.ndarray:
        """Overwrite the onset with the onset of another request already in flight."""
        for o in sorted(self._others(rid), key=lambda v: v.order):
            if o.onset is not None and (o.sample_rate, o.channels) == (c.sample_rate, c.channels):
                n = min(int(self.seconds * c.sample_rate) * c.channels, len(o.onset), len(pcm))
                n -= n % c.channels
                out = pcm.copy()
                out[:n] = o.onset[:n]
                return out
        return pcm


KNOBS = {"fault", "fault_seam", "fault_s"}


def _wrap(inner: Backend, params: dict[str, str]) -> Backend:
    fault = params.get("fault", "").strip().lower()
    try:
        seam = int(params.get("fault_seam", 1))
        seconds = float(params.get("fault_s", _DEFAULT_S.get(fault, 0.6)))
    except ValueError:
        raise InvalidRequest(
            f"fault_seam must be a whole number and fault_s a number, got {params}"
        ) from None
    return FaultyBackend(inner, fault, seam, seconds)


register_wrapper("fault", _wrap, consumes=KNOBS)

__all__ = ["FAULTS", "FaultyBackend"]
