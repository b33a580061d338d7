"""The one contract every speech engine implements.

Data flows one way: a :class:`SpeechRequest` goes in, :class:`AudioChunk` objects come out of
:meth:`Backend.stream`. Everything else in listenlab (takes, the player, the glitch detector, the
listening tests) only ever sees these types, so a new engine is one new file in ``backends/``.
"""

from __future__ import annotations

import abc
import re
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from backends.errors import (
    BackendError,
    EmptyText,
    SpeedOutOfRange,
    TextTooLong,
    Unsupported,
)

MAX_TEXT_CHARS = 5000
"""Longest text listenlab's own pages and tests take (characters after clean-up): the
Playground, the arena, listening-test stimuli. Not a bound on what a client of
``listenlab api`` may send: vLLM-Omni has no character cap (only the model's token limit,
``max_model_len``), so each backend states its own (:data:`CPU_VOICE_MAX_CHARS`, none for a
vLLM-Omni engine)."""

CPU_VOICE_MAX_CHARS = 50_000
"""Longest text the CPU voice (Piper, and every wire profile over it) speaks in one request:
about an hour of speech, generated sentence by sentence (memory stays flat), so the bound is
the time a request may hold a CPU, not a model limit."""

SPEED_RANGE = (0.25, 4.0)
"""Accepted ``speed`` range, as vLLM-Omni's ``OpenAICreateSpeechRequest``."""


# --------------------------------------------------------------------------- request

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(text: str) -> str:
    """Drop control characters and fold whitespace; keep every script and emoji."""
    text = unicodedata.normalize("NFC", text)
    text = _CONTROL.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


@dataclass(frozen=True)
class SpeechRequest:
    """What to say and how. Field names follow vLLM-Omni's ``/v1/audio/speech`` body."""

    text: str
    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    speed: float = 1.0
    seed: int | None = None
    ref_audio: bytes | None = None
    """Reference clip for cloning, as WAV bytes (mono 16-bit, see ``voices.clips``)."""
    ref_text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def validated(self, max_chars: int | None = MAX_TEXT_CHARS) -> SpeechRequest:
        """Return a cleaned copy, or raise a typed :class:`InvalidRequest`. ``max_chars`` None:
        no character bound (a vLLM-Omni engine counts tokens itself)."""
        if not isinstance(self.text, str):
            raise EmptyText("text must be a string")
        text = clean_text(self.text)
        if not text:
            raise EmptyText("Input text cannot be empty")
        if max_chars is not None and len(text) > max_chars:
            raise TextTooLong(f"Input text is {len(text)} characters; the limit is {max_chars}")
        lo, hi = SPEED_RANGE
        try:
            speed = float(self.speed)
        except (TypeError, ValueError):
            raise SpeedOutOfRange(f"speed must be a number, got {self.speed!r}") from None
        if not lo <= speed <= hi or speed != speed:
            raise SpeedOutOfRange(f"speed must be between {lo} and {hi}, got {self.speed}")
        return replace(self, text=text, speed=speed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (the reference clip is summarised, not embedded)."""
        d = asdict(self)
        d["ref_audio"] = None if self.ref_audio is None else f"<{len(self.ref_audio)} bytes>"
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpeechRequest:
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if not isinstance(d.get("ref_audio"), bytes | None):
            d["ref_audio"] = None
        return cls(**d)


# --------------------------------------------------------------------------- chunks


@dataclass(frozen=True)
class AudioChunk:
    """One piece of audio as the engine delivered it.

    ``pcm`` is int16, interleaved when ``channels`` > 1 (exactly the wire layout). ``arrived``
    is ``time.monotonic()`` when listenlab got it, so arrival timelines can be measured.
    """

    pcm: np.ndarray
    sample_rate: int
    channels: int
    index: int
    arrived: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.pcm.dtype != np.int16 or self.pcm.ndim != 1:
            raise TypeError("AudioChunk.pcm must be a 1-D int16 array")
        if self.channels < 1 or len(self.pcm) % self.channels:
            raise ValueError("AudioChunk.pcm length is not a whole number of frames")

    @property
    def frames(self) -> int:
        return len(self.pcm) // self.channels

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate


@dataclass(frozen=True)
class Audio:
    """A whole (non-streamed) result: int16 samples shaped ``(frames, channels)``."""

    samples: np.ndarray
    sample_rate: int

    @property
    def channels(self) -> int:
        return self.samples.shape[1]

    @property
    def duration(self) -> float:
        return self.samples.shape[0] / self.sample_rate


def chunks_to_audio(chunks: list[AudioChunk]) -> Audio:
    """Join chunks; rate or channel changes mid-stream are an engine bug, so they raise."""
    if not chunks:
        raise BackendError("the stream ended without any audio")
    sr, ch = chunks[0].sample_rate, chunks[0].channels
    for c in chunks:
        if (c.sample_rate, c.channels) != (sr, ch):
            raise BackendError(
                f"stream changed format mid-way: {sr} Hz/{ch} ch then {c.sample_rate} Hz/{c.channels} ch"
            )
    pcm = np.concatenate([c.pcm for c in chunks])
    return Audio(pcm.reshape(-1, ch), sr)


# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class Capabilities:
    """What the engine supports; the UI hides controls for what it does not."""

    streaming: bool = True
    cloning: bool = False
    clone_required: bool = False
    """Every request needs a reference clip (zero-shot-only models such as CosyVoice3 and
    MOSS-TTS-Nano have no built-in voice): the UI asks for a voice before Speak."""
    languages: tuple[str, ...] = ()
    sample_rate: int | None = None
    """Native rate if known before the first chunk; None means 'read it from the stream'."""
    channels: int = 1
    speed: bool = True
    speed_streaming: bool = False
    """Whether ``speed`` != 1 is allowed while streaming (vLLM-Omni: native-speed adapters only)."""
    instructions: bool = False
    seed: bool = True
    voice_library: bool = False
    """Whether voices can be uploaded to / deleted from the engine itself."""


@dataclass(frozen=True)
class Voice:
    name: str
    kind: str = "builtin"  # builtin | uploaded
    ref_text: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str = ""


# --------------------------------------------------------------------------- backend


class Backend(abc.ABC):
    """An engine that turns a :class:`SpeechRequest` into a stream of :class:`AudioChunk`.

    Subclasses set ``name`` (the registry key used in spec strings) and implement
    :meth:`stream`. Closing the async iterator returned by :meth:`stream` (``aclose()``, a
    ``break`` in ``async for``, or task cancellation) must stop generation and free the
    request's state.
    """

    name: ClassVar[str]
    spec: str = ""
    unit: Any = None
    """The vLLM-Omni model (a ``backends.vllm_omni.models.ModelUnit``) whose rules this backend
    answers by, when it stands in for one (a wire profile) or runs one (the embedded engine);
    None otherwise. ``listenlab api`` applies its rules whatever name it is served under."""

    @classmethod
    @abc.abstractmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> Backend:
        """Build from a parsed spec: query parameters and, for remote engines, the URL."""

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Yield audio as it is generated. Raises InvalidRequest before any audio on bad input."""

    async def synthesize(self, request: SpeechRequest) -> Audio:
        """Whole result at once. The default joins the stream; engines may do better."""
        chunks = [c async for c in self.stream(request)]
        return chunks_to_audio(chunks)

    async def voices(self) -> list[Voice]:
        return []

    async def add_voice(
        self, name: str, wav: bytes, *, ref_text: str | None = None, consent: str = ""
    ) -> Voice:
        raise Unsupported(f"the {self.name} backend cannot store cloned voices")

    async def delete_voice(self, name: str) -> None:
        raise Unsupported(f"the {self.name} backend cannot store cloned voices")

    async def health(self) -> Health:
        return Health(True, "ok")

    # -- optional lifecycle hooks: engines override what applies to them

    loads_model: ClassVar[bool] = False
    """Whether :meth:`start` or :meth:`warm_up` load something worth timing apart (a model):
    ``listenlab say`` then reports the load time separately from the warm TTFA."""

    async def start(self) -> None:
        """Start the engine (an embedded model's stages). Nothing to start by default."""
        return None

    def warm_up(self) -> None:
        """Load weights and run one tiny synthesis so the first real request is warm. Blocking:
        call it at start-up or in a thread. Nothing to warm by default."""
        return None

    async def refresh(self) -> Capabilities:
        """Learn the capabilities again (a remote engine asks its server's model card); by
        default they are fixed, so this returns them."""
        return self.capabilities

    async def aclose(self) -> None:
        """Free engine resources (sessions, connections). Nothing to free by default."""
        return None

    def describe(self) -> str:
        return self.spec or self.name

    def usage(self, request_id: str) -> dict[str, Any] | None:
        """The token counts a remote server reported for the request ``request_id`` (its
        ``speech.audio.done`` usage or usage headers), taken once; None when none were
        reported (listenlab's own voices count no tokens)."""
        return None

    def note(self, request: SpeechRequest | None = None) -> str | None:
        """What this backend does not do that its model would (a CPU voice standing in for a
        GPU model: "cpu voice; clone not applied"), for ``request`` or any request; None when
        it does what it is asked."""
        return None
