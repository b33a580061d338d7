"""Speech engines behind one contract (``backends.base``), resolved by spec string."""

from backends.base import Audio, AudioChunk, Backend, Capabilities, Health, SpeechRequest, Voice
from backends.errors import BackendError, InvalidRequest
from backends.registry import BackendSpec, known_backends, load_backend, register

__all__ = [
    "Audio",
    "AudioChunk",
    "Backend",
    "BackendError",
    "BackendSpec",
    "Capabilities",
    "Health",
    "InvalidRequest",
    "SpeechRequest",
    "Voice",
    "known_backends",
    "load_backend",
    "register",
]
