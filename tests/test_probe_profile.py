"""Profile pacing counts from the first audio when the inner voice is late (load-proof gaps).

The Playground's forced-stall test and the probe's timing both rely on this: a profile's gaps
between chunks (and its stalls) must not be absorbed by a slow start of the inner voice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import numpy as np

from backends.base import AudioChunk, Backend, Capabilities, SpeechRequest
from backends.profile import ProfileBackend, profile_from_params


class LateVoice(Backend):
    """A stand-in voice (not an engine) that is ``late`` seconds slow to its first audio."""

    name = "late"

    def __init__(self, late: float):
        self.late = late

    @classmethod
    def from_params(cls, params, target=None):  # pragma: no cover - not registered
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(sample_rate=22050)

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        await asyncio.sleep(self.late)
        t = np.arange(22050 * 4) / 22050
        pcm = (3000 * np.sin(2 * np.pi * 220 * t)).astype(np.int16)
        yield AudioChunk(pcm, 22050, 1, 0)


async def test_stall_survives_a_late_first_audio():
    # 0.5 s chunks at 3x real time, a 1.2 s stall after chunk 2 (as the browser test uses)
    p = profile_from_params(
        {
            "profile": "custom",
            "rate": "22050",
            "first_frames": "1",
            "chunk_frames": "1",
            "frame_hz": "2",
            "pace": "3",
            "stall": "2:1.2",
        }
    )
    t0 = time.monotonic()
    chunks = [c async for c in ProfileBackend(LateVoice(1.5), p).stream(SpeechRequest("x"))]
    arrived = np.array([c.arrived for c in chunks])
    assert len(chunks) == 8
    assert arrived[0] - t0 >= 1.5  # never before the voice made it
    # relative to chunk 0 the schedule is as planned: 1/6 s steps, 1.2 s more before chunk 3.
    # Send times are absolute, so on a busy machine one late chunk shortens the next gap:
    # each chunk is checked against its own planned time, never early, late by little
    offset = arrived - arrived[0]
    planned = np.arange(8) / 6 + np.where(np.arange(8) >= 3, 1.2, 0.0)
    assert np.all(offset >= planned - 0.02), (offset, planned)
    assert np.all(offset <= planned + 0.3), (offset, planned)
    # counted from the request, chunks 0-2 would have come together and the stall shrunk to 0.37 s


async def test_on_time_voice_keeps_the_request_clock():
    p = profile_from_params(
        {
            "profile": "custom",
            "rate": "22050",
            "frame_hz": "2",
            "first_frames": "1",
            "chunk_frames": "1",
            "pace": "2",
            "ttfa_ms": "300",
        }
    )
    t0 = time.monotonic()
    chunks = [c async for c in ProfileBackend(LateVoice(0.0), p).stream(SpeechRequest("x"))]
    # chunk 0 due 0.3 + 0.25 s after the request (the voice was ready at once)
    assert 0.55 - 0.02 <= chunks[0].arrived - t0 <= 0.55 + 0.3
