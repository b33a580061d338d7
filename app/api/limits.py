"""Every limit of ``listenlab api`` in one place (documented in docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass

from backends.audio import MAX_CLIP_BYTES, REF_MAX_SECONDS, REF_MIN_SECONDS
from backends.vllm_omni.rules import MAX_NEW_TOKENS_RANGE

MAX_INSTRUCTIONS = 500
REF_MIN_S, REF_MAX_S = REF_MIN_SECONDS, REF_MAX_SECONDS
"""A reference clip's length (vLLM-Omni's, kept with the decoder in :mod:`backends.audio`)."""
MAX_UPLOAD_BYTES = MAX_CLIP_BYTES
RESAMPLE_RANGE = (8000, 192000)
UPLOAD_MIME = {
    "audio/mpeg",
    "audio/wav",
    "audio/x-wav",
    "audio/ogg",
    "audio/aac",
    "audio/flac",
    "audio/webm",
    "audio/mp4",
}
OPUS_RATES = {8000, 12000, 16000, 24000, 48000}
CONFIG_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0
MAX_CONFIG_MESSAGE = 4 * 1024 * 1024
MAX_TEXT_MESSAGE = 128 * 1024
WS_MESSAGE_OVERHEAD = 512
"""What one queued WebSocket message costs besides its payload (counted in the inbound budget,
so a flood of tiny messages is bounded too)."""
BATCH_SECONDS_PER_CHAR = 0.1
"""How long a batch's text is taken to speak, before any work: 10 characters a second is slow
speech (the bundled voice reads ordinary text at 14-16; digits and spelled letters are slower,
which is why the samples are also counted while they are made)."""
MAX_NEW_TOKENS = MAX_NEW_TOKENS_RANGE[1]
"""vLLM-Omni's adapters refuse a larger ``max_new_tokens`` (``_TTS_MAX_NEW_TOKENS_MAX``)."""


@dataclass(frozen=True)
class ApiLimits:
    """What one ``listenlab api`` server accepts; every field has a CLI flag or a fixed default.

    Why each exists: a public server must bound memory and time *before* it reads, buffers or
    decodes anything a client sent (see docs/security.md).
    """

    concurrency: int = 2
    """Generations running at once on the backend; the rest wait in a FIFO queue."""
    max_queue: int = 256
    """Requests waiting beyond this are refused at once with 503 (the server is saturated)."""
    speech_body_bytes: int = 14 * 1024 * 1024
    """``POST /v1/audio/speech``: room for a 10 MB ``ref_audio`` in base64."""
    batch_body_bytes: int = 14 * 1024 * 1024
    """``POST /v1/audio/speech/batch``: as much as one speech body (items share its room)."""
    upload_body_bytes: int = MAX_UPLOAD_BYTES + 256 * 1024
    """``POST /v1/audio/voices`` (multipart)."""
    other_body_bytes: int = 64 * 1024
    ws_frame_bytes: int = MAX_CONFIG_MESSAGE + 64 * 1024
    """uvicorn closes the socket (1009) on a bigger frame."""
    ws_inbound_bytes: int = 2 * MAX_CONFIG_MESSAGE + 256 * 1024
    """Client messages waiting to be handled (sent while a generation runs), in bytes with
    :data:`WS_MESSAGE_OVERHEAD` each: room for two full ``session.config`` messages and any
    honest text stream; past it the socket is closed with an error (1008), so a client that
    floods a slow generation cannot grow the server's memory without bound."""
    ws_session_text_chars: int = 20_000
    """Text buffered in one utterance (until ``input.done``) or one sentence."""
    batch_chars: int = 8_000
    """``POST /v1/audio/speech/batch``: the characters of all its items' ``input`` together
    (vLLM-Omni bounds only the count of items, 32; 32 items of 5,000 characters would be 30
    minutes of generation for one request)."""
    batch_samples: int = 20_000_000
    """``POST /v1/audio/speech/batch``: the audio of all its items together, in samples at each
    item's output rate after its ``speed`` (about 14 minutes at 24 kHz; 40 MB as 16-bit PCM).
    Estimated from the text (:data:`BATCH_SECONDS_PER_CHAR`) before any work, then counted
    while generating: an item that would pass it stops with an error."""
    json_depth: int = 32
    decode_timeout_s: float = 30.0
    decode_concurrency: int = 2
