"""Every limit of ``listenlab api`` in one place (documented in the README, "Security and limits")."""

from __future__ import annotations

MAX_INSTRUCTIONS = 500
REF_MIN_S, REF_MAX_S = 1.0, 30.0
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
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
CONTENT_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
OPUS_RATES = {8000, 12000, 16000, 24000, 48000}
CONFIG_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0
MAX_CONFIG_MESSAGE = 4 * 1024 * 1024
MAX_TEXT_MESSAGE = 128 * 1024
_NO_USAGE = {
    "input_tokens": 0,
    "output_tokens": 0,
    "total_tokens": 0,
    "input_token_details": {"text_tokens": 0, "audio_tokens": 0},
}
