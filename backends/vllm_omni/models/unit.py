"""What one model is, as a unit: its facts, request rules and chunk schedule, each with the
place in vLLM-Omni 0.30.0 it was read from.

Why a unit: a model's rate lived in a table, its request rules in a second place, its refusals
in a third and its chunk schedule in the wire profiles; a correction made in one had to be
found and made in the others, and the map's "a profile is derived from the row" was true for
two numbers. Now each model is one module of ``backends/vllm_omni/models/`` holding one
:class:`ModelUnit` (``MODEL``) and, where listenlab can drive it in-process, its embedded
adapter (``ADAPTER``), as vLLM-Omni keeps one adapter file per model in
``entrypoints/openai/tts_adapters/``. The wire profile (``piper?profile=NAME``), ``listenlab
api``'s refusals and the remote client all read the unit.

Every fact names its source (:class:`Source`): a file of the vllm-omni 0.30.0 wheel, the line
and the words found there (``tests/conformance/test_embedded_real.py`` reads each cited line in
the installed wheel), or ``assumed`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.vllm_omni.rules import SpeechRules

VERSION = "0.30.0"
"""The vLLM-Omni release every cited line is from."""


@dataclass(frozen=True)
class Source:
    """Where one fact was read: ``path:line`` of the vllm-omni wheel holding ``quote``, or an
    assumption (``path`` empty) with the reason in ``note``."""

    path: str = ""
    """A file of the vllm-omni wheel, from its top package (``vllm_omni/deploy/qwen3_tts.yaml``)."""
    line: int = 0
    quote: str = ""
    """Words found on that line (the conformance stage checks them in the installed wheel)."""
    note: str = ""
    """What the line means for the fact, or why it is assumed."""

    @property
    def assumed(self) -> bool:
        return not self.path

    def __str__(self) -> str:
        if self.assumed:
            return f"assumed: {self.note}"
        said = f" ({self.note})" if self.note else ""
        return f"{self.path}:{self.line} `{self.quote}`{said} (vLLM-Omni {VERSION})"


def cite(path: str, line: int, quote: str, note: str = "") -> Source:
    """A fact read in the wheel (``path`` under ``vllm_omni/``, at ``line``, saying ``quote``)."""
    return Source(path, line, quote, note)


def assumed(why: str) -> Source:
    """A fact vLLM-Omni's code does not state: chosen here, and why."""
    return Source(note=why)


ADAPTERS_DIR = "vllm_omni/entrypoints/openai/tts_adapters"
BASE_ADAPTER = f"{ADAPTERS_DIR}/base.py"
SERVING = "vllm_omni/entrypoints/openai/serving_speech.py"

STRETCHED = Source(
    BASE_ADAPTER,
    219,
    "native_speed_control: ClassVar[bool] = False",
    "not overridden: speed is a stretch of the whole file",
)
"""The fact most models share: no native speed control."""
NO_RESAMPLING = Source(
    BASE_ADAPTER,
    222,
    "supported_output_sample_rates: ClassVar[frozenset[int]] = frozenset()",
    "not overridden: sample_rate is refused",
)
"""The fact most models share: ``sample_rate`` in a request is refused."""


def rules_text(sources: tuple[Source, ...]) -> str:
    """A rules' ``source`` text: its sources on one line."""
    return "; ".join(str(s) for s in sources)


@dataclass(frozen=True)
class ChunkSchedule:
    """How the model's server cuts its audio into chunks, in codec frames (its deploy config
    and stage input processor): first chunk(s), then steady chunks; the last is the remainder."""

    frame_hz: float
    """Codec frames per second; a chunk is whole frames of ``sample_rate / frame_hz`` samples."""
    first_frames: tuple[int, ...]
    """Sizes of the first chunks, in frames (Fish Speech sends six 4-frame chunks first)."""
    chunk_frames: int
    """Steady chunk size, in frames, after ``first_frames``."""
    async_chunk: bool
    """The deploy's ``async_chunk``: the stages stream to each other (False: the model's own
    loop emits, one chunk per forward or decode)."""
    left_context_frames: int | None = None
    """Frames of left context the decoder re-reads per chunk (not sent twice; None: not used)."""
    whole_file: bool = False
    """The server streams nothing until the end: one chunk, the whole utterance (the model
    makes its audio in one piece, e.g. IndexTTS-2's full-payload stages); the frame numbers
    above are then unused."""
    sources: tuple[Source, ...] = ()
    assumptions: str = ""
    """What the deploy config does not say and was chosen here, and why."""


FACTS = ("sample_rate", "channels", "cloning", "instructions", "speed_streaming", "rules")
"""The facts every unit sources (``ModelUnit.sources``; ``presets`` and ``max_model_len`` too
when it has them, and ``codec_channels`` under ``channels``); a schedule sources itself."""
OPTIONAL_FACTS = ("presets", "max_model_len")


@dataclass(frozen=True)
class ModelUnit:
    """One TTS model as vLLM-Omni 0.30.0 serves it (see the module docstring)."""

    name: str
    """listenlab's name for it: the module name, the embedded ``adapter=`` value, and with
    dashes the wire profile (``fish_speech`` → ``piper?profile=fish-speech``)."""
    title: str
    keys: tuple[str, ...]
    """Lower-case substrings of a served model name that identify the model (the longest
    matching key of all units wins: ``moss-tts-nano`` before ``moss-tts``)."""
    sample_rate: int
    """The rate the server sends (native; ``sample_rate`` in a request resamples, where the
    rules accept it)."""
    channels: int
    """Channels the server sends (after any down-mix)."""
    rules: SpeechRules
    checkpoint: str = ""
    """The Hugging Face id listenlab imitates and tests (the profile's model name)."""
    codec_channels: int | None = None
    """Channels the model's codec makes, when the server changes them (MOSS-TTS-Nano: 2,
    served mono); None: as served."""
    cloning: bool = False
    """Its adapter takes ``ref_audio`` (voice cloning)."""
    instructions: bool = False
    """It takes a style prompt (``instructions``)."""
    speed_streaming: bool = False
    """Native speed control (the adapter's ``native_speed_control``): the model itself changes
    speed, also while streaming; every other model is stretched after generation, whole files
    only (``serving_speech.py`` ``_validate_speech_streaming_request``)."""
    presets: tuple[str, ...] = ()
    """The model's built-in voice names, lower-case, as vLLM-Omni lists them (the loaded
    checkpoint's list wins on a real server): a wire profile offers exactly these (spoken by
    the CPU voice). Empty: no built-in voice (clone, or the model's single unnamed one)."""
    open_voices: bool = False
    """The adapter takes any ``voice`` string without checking it (Breeze's ``[S0]`` speaker
    tags, Ming's ``IP`` labels, models whose ``validate`` never reads ``voice``)."""
    max_model_len: int | None = None
    """Stage 0's ``max_model_len`` in the deploy config: the prompt's token limit, the only
    bound vLLM-Omni puts on ``input`` (None: the deploy sets none)."""
    diffusion: bool = False
    """Served by vLLM-Omni's pure-diffusion path (OmniVoice: ``serving_speech.py``
    ``_create_diffusion_speech``): every request, a stream too, is answered with the whole
    file, the request's ``model`` is not checked, and the WebSocket has no speech."""
    schedule: ChunkSchedule | None = None
    """How its server streams (None: not modelled yet; no wire profile)."""
    sources: dict[str, tuple[Source, ...]] = field(default_factory=dict)
    """Where each of :data:`FACTS` was read."""

    @property
    def profile(self) -> str:
        """The wire profile's name (``piper?profile=…``)."""
        return self.name.replace("_", "-")

    def source_text(self, *facts: str) -> str:
        """The sources of ``facts`` as one line of text (docs, profiles, model cards)."""
        parts = [str(s) for f in facts for s in self.sources.get(f, ())]
        return "; ".join(dict.fromkeys(parts))


__all__ = [
    "ADAPTERS_DIR",
    "BASE_ADAPTER",
    "FACTS",
    "NO_RESAMPLING",
    "OPTIONAL_FACTS",
    "SERVING",
    "STRETCHED",
    "VERSION",
    "ChunkSchedule",
    "ModelUnit",
    "Source",
    "assumed",
    "cite",
    "rules_text",
]
