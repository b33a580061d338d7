"""Reference clips sent to ``listenlab api``: inline ``ref_audio`` and voice uploads.

Why one path: the HTTP body, the WebSocket's ``session.config`` and ``POST /v1/audio/voices``
all take a clip from a client. Each is decoded by the one bounded decoder (off the event loop,
limited in time and in decodes at once: :meth:`~app.api.state.ApiState.decode`), must be 1-30 s
as on vLLM-Omni, and reaches the backend as mono 16-bit WAV (``SpeechRequest.ref_audio``).
"""

from __future__ import annotations

import asyncio

import numpy as np

from app.api.errors import ApiError
from app.api.limits import REF_MAX_S, REF_MIN_S
from app.api.state import ApiState
from backends.audio import UnreadableAudio, encode_audio
from backends.errors import InvalidRequest
from backends.vllm_omni.wire import parse_ref_audio_url


def check_ref_duration(x: np.ndarray, sr: int) -> None:
    """vLLM-Omni's length rule, in its words (``serving_speech.py``
    ``_finalize_fetched_ref_audio``)."""
    dur = len(x) / sr if sr else 0.0
    if dur < REF_MIN_S:
        raise InvalidRequest(
            f"Reference audio too short ({dur:.1f}s). "
            f"At least {REF_MIN_S:.0f}s of clear speech is required."
        )
    if dur > REF_MAX_S:
        raise InvalidRequest(
            f"Reference audio too long ({dur:.1f}s). "
            f"Maximum {REF_MAX_S:.0f}s supported — use a shorter clip."
        )


CORRUPT = (
    "Invalid or corrupted audio data. Ensure the input is a valid audio or video file "
    "(e.g. a complete WAV, MP3, or MP4)."
)
"""vLLM's ``MediaConnector`` for bytes that are not audio (a ``data:`` URL's included)."""


async def reference_wav(state: ApiState, data: bytes, what: str) -> bytes:
    """An untrusted clip as mono 16-bit WAV, or a typed error saying why not (in vLLM's words
    when it is not audio at all; listenlab's size and time limits say their own)."""
    try:
        x, sr = await state.decode(data, what)
    except UnreadableAudio:
        raise InvalidRequest(CORRUPT) from None
    check_ref_duration(x, sr)
    return await asyncio.to_thread(encode_audio, x, sr)


async def ref_audio_wav(state: ApiState, ref: str | list[str] | None) -> bytes | None:
    """``ref_audio`` (an inline data URL) as mono WAV; None when the request has none, or names
    an uploaded voice (``voice:<name>``, left by the checks: the backend has that clip).

    The URL can be megabytes of base64, so it is parsed off the loop, like the audio."""
    if ref is None or (isinstance(ref, str) and ref.startswith("voice:")):
        return None
    if isinstance(ref, list):  # only models without a format check get here (VoxCPM2)
        raise ApiError(
            "Speech generation failed: 'list' object has no attribute 'decode'",
            500,
            "InternalServerError",
        )
    raw = await asyncio.to_thread(parse_ref_audio_url, ref)
    return await reference_wav(state, raw, "ref_audio")


__all__ = ["check_ref_duration", "ref_audio_wav", "reference_wav"]
