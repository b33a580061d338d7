"""The per-model contract of the embedded vLLM-Omni backend, and the helpers models share.

``backends/vllm_omni/embedded.py`` owns the engine (start, stream, abort, output decoding); a
:class:`ModelAdapter` owns everything that differs per model: which spec options it takes, the
prompt dict built from a :class:`~backends.base.SpeechRequest`, the per-stage sampling params,
what the Playground may offer (:class:`~backends.base.Capabilities`) and its voices. This is the
shape of vLLM-Omni's own ``vllm_omni/entrypoints/openai/tts_adapters/`` (``base.py``:
``validate`` / ``build`` / ``apply_sampling_overrides``), written for an in-process engine.

Facts shared by every model, read from ``vllm-project/vllm-omni``:

* ``serving_speech.py`` ``_resolve_ref_audio``: the reference clip is decoded, multichannel
  audio is averaged to mono, and it must be 1-30 s (``_REF_AUDIO_MIN/MAX_DURATION``).
* ``serving_speech.py`` ``_prepare_speech_generation``: stage-0 ``SamplingParams`` get
  ``seed`` (+ ``extra_args["tts_local_seed"]``) and ``extra_params`` merged into ``extra_args``,
  with ``temperature`` / ``top_p`` / ``top_k`` also set as attributes; streaming coerces every
  stage to DELTA outputs (``coerce_param_message_types``, PR #2911).
* ``tts_adapters/base.py`` ``apply_max_new_tokens``: ``max_new_tokens`` (1-4096,
  ``_TTS_MAX_NEW_TOKENS_MIN/MAX``) becomes stage-0 ``max_tokens`` for the models in
  ``_SAMPLING_MAX_TOKENS_TTS_MODEL_TYPES`` (fish, qwen3, cosyvoice3, voxcpm2, …).
"""

from __future__ import annotations

import copy
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from backends.audio import REF_MAX_SECONDS, REF_MIN_SECONDS, ClipError, UnreadableAudio, decode_mono
from backends.base import Capabilities, SpeechRequest, Voice
from backends.errors import InvalidRequest, UnknownVoice, Unsupported
from backends.vllm_omni.models.unit import ModelUnit
from backends.vllm_omni.rules import MAX_NEW_TOKENS_RANGE

log = logging.getLogger(__name__)

REF_AUDIO_SECONDS = (REF_MIN_SECONDS, REF_MAX_SECONDS)
MAX_REF_AUDIO_BYTES = 16 * 1024 * 1024
"""Refuse to decode a bigger reference file (30 s of 48 kHz stereo float WAV is ~11.5 MB)."""
SAMPLING_ATTRS = ("temperature", "top_p", "top_k")


@dataclass
class AdapterContext:
    """What an adapter may read about the model it serves (never the network)."""

    model_path: Path
    hf_config: dict[str, Any] = field(default_factory=dict)
    """``config.json`` of the model directory ({} when the directory has none)."""

    @classmethod
    def for_model(cls, model_path: Path) -> AdapterContext:
        return cls(model_path, read_config(model_path))


def read_config(model_path: Path) -> dict[str, Any]:
    """The model's ``config.json`` as a dict; a missing or unreadable one is ``{}``."""
    path = model_path / "config.json"
    if not path.is_file() or path.stat().st_size > 4 * 1024 * 1024:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_tokenizer(path: Path) -> Any:
    """The Hugging Face tokenizer shipped in ``path``, loaded the way vLLM-Omni's serving code
    loads it (``AutoTokenizer.from_pretrained(model, trust_remote_code=True)``), offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), trust_remote_code=True, local_files_only=True)


def decode_ref_audio(wav: bytes) -> tuple[np.ndarray, int]:
    """Reference clip bytes to mono float32 samples and their rate, as vLLM-Omni resolves them.

    The size is bounded before decoding, the decoding is :func:`backends.audio.decode_mono`'s
    (container from the bytes, header limits, bounded reads), and 1-30 s is enforced like the
    server does.
    """
    if len(wav) > MAX_REF_AUDIO_BYTES:
        raise InvalidRequest(
            f"the reference clip is {len(wav) / 2**20:.1f} MiB; the limit is "
            f"{MAX_REF_AUDIO_BYTES // 2**20} MiB"
        )
    try:
        mono, sr, _fmt = decode_mono(wav, "the reference clip")
    except UnreadableAudio as e:
        raise ClipError(f"the reference clip is not a readable audio file: {e.why}") from None
    seconds = len(mono) / sr if sr else 0.0
    lo, hi = REF_AUDIO_SECONDS
    if not lo <= seconds <= hi:
        raise InvalidRequest(
            f"the reference clip is {seconds:.1f} s; it must be {lo:.0f}-{hi:.0f} s"
        )
    return np.ascontiguousarray(mono, dtype=np.float32), int(sr)


def as_tensor(x: np.ndarray) -> Any:
    """A torch tensor where torch exists (the real engine), else the array itself."""
    try:
        import torch
    except ImportError:
        return x
    return torch.from_numpy(np.ascontiguousarray(x))


def no_voice(voice: str | None) -> str | None:
    """``voice`` lower-cased, with vLLM-Omni's ``"default"`` placeholder meaning none."""
    v = (voice or "").strip().lower()
    return None if v in ("", "default") else v


def max_new_tokens(request: SpeechRequest, default: int | None = None) -> int | None:
    """``extra["max_new_tokens"]`` checked against the server's 1-4096 bounds."""
    raw = request.extra.get("max_new_tokens", default)
    if raw is None:
        return None
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise InvalidRequest(f"max_new_tokens must be an integer, got {raw!r}") from None
    lo, hi = MAX_NEW_TOKENS_RANGE
    if not lo <= n <= hi:
        raise InvalidRequest(f"max_new_tokens must be between {lo} and {hi}, got {n}")
    return n


def basename_key(path: Path) -> str:
    """A model directory name folded like vLLM-Omni's ``_try_resolve_omni_model_type``."""
    return re.sub(r"[-_.\s]", "", path.name.lower())


class ModelAdapter:
    """One model family behind the embedded engine. Subclasses set the class attributes and
    override :meth:`check`, :meth:`build_prompt` and, where the model needs it,
    :meth:`adjust_sampling`.

    Per-request state never lives here: an adapter is shared by concurrent requests.
    """

    name: ClassVar[str]
    """The ``adapter=`` value: the unit's name (set from :attr:`unit`)."""
    unit: ClassVar[ModelUnit]
    """The model this adapter drives (its module's ``MODEL``): title, rate, channels, cloning
    and request rules, which the remote backend and the wire profiles read too."""
    aliases: ClassVar[tuple[str, ...]] = ()
    architectures: ClassVar[frozenset[str]] = frozenset()
    """``config.json`` ``architectures`` entries that identify the model."""
    model_types: ClassVar[frozenset[str]] = frozenset()
    name_keys: ClassVar[tuple[str, ...]] = ()
    """Folded directory-name substrings (vLLM-Omni matches deploy YAML stems the same way)."""
    spec_options: ClassVar[frozenset[str]] = frozenset({"voice", "language"})
    """Spec parameters this adapter consumes (besides the backend's own). ``voice`` and
    ``language`` are taken by every adapter so they never reach ``AsyncOmni`` as engine
    kwargs; models without them refuse them here."""
    own_spec_options: ClassVar[frozenset[str]] = frozenset()
    """The subset of ``spec_options`` the model really has (Qwen3-TTS: voice, language)."""
    prompt_extra: ClassVar[frozenset[str]] = frozenset({"max_new_tokens"})
    """``SpeechRequest.extra`` keys that are prompt fields, not stage-0 ``extra_args``."""
    final_only_without_async_chunk: ClassVar[bool] = False
    sources: ClassVar[tuple[str, ...]] = ()
    """vLLM-Omni files each mapping was read from (shown in the README)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "unit" in cls.__dict__:
            cls.name = cls.unit.name

    def __init__(self, ctx: AdapterContext, options: dict[str, str]):
        self.ctx = ctx
        self.options = dict(options)
        if no_voice(options.get("voice")) is not None and "voice" not in self.own_spec_options:
            raise UnknownVoice(
                f"{self.title} has no preset voices (voice={options['voice']!r}); clone from a "
                "reference clip instead"
            )
        if options.get("language") and "language" not in self.own_spec_options:
            raise Unsupported(f"{self.title} takes no language option")
        self.default_max_new_tokens: int | None = None
        if "max_new_tokens" in options:
            self.default_max_new_tokens = max_new_tokens(
                SpeechRequest("x", extra={"max_new_tokens": options["max_new_tokens"]})
            )

    @property
    def title(self) -> str:
        return self.unit.title

    @property
    def requires_ref_audio(self) -> bool:
        """Zero-shot cloners with no preset voice (the model's rules require ``ref_audio``)."""
        return bool(self.unit.rules.requires_ref_audio)

    # -- lifecycle

    def load(self, engine: Any) -> None:
        """Called once in a worker thread after the engine started: tokenizers and the like."""

    # -- metadata

    def capabilities(self) -> Capabilities:
        return Capabilities(
            streaming=True,
            cloning=self.unit.cloning,
            clone_required=self.requires_ref_audio,
            sample_rate=self.unit.sample_rate,
            channels=self.unit.channels,
            speed=False,
            speed_streaming=False,
            instructions=False,
            seed=True,
            voice_library=False,
        )

    def voices(self) -> list[Voice]:
        return []

    # -- requests

    def check(self, request: SpeechRequest) -> None:
        """Refuse what this model cannot do with a typed error, before the engine is called.

        The default refuses every option the model has no field for; subclasses call it and
        add their own rules.
        """
        caps = self.capabilities()
        if request.language and not caps.languages:
            raise Unsupported(f"{self.title} takes no language option; leave language empty")
        if request.instructions and not caps.instructions:
            raise Unsupported(f"{self.title} takes no instructions (style prompt)")
        if (request.ref_audio is not None or request.ref_text) and not caps.cloning:
            raise Unsupported(f"{self.title} cannot clone a voice from a reference clip")
        voice = no_voice(request.voice)
        if voice is not None and voice not in {v.name for v in self.voices()}:
            names = ", ".join(v.name for v in self.voices()) or "none (clone with a reference clip)"
            raise UnknownVoice(f"unknown voice {request.voice!r} for {self.title}; voices: {names}")
        max_new_tokens(request, self.default_max_new_tokens)
        rules = self.unit.rules
        if rules.requires_ref_audio and request.ref_audio is None:
            raise InvalidRequest(rules.requires_ref_audio)
        clip_only = request.ref_audio is not None and not (request.ref_text or "").strip()
        if rules.ref_text_message and clip_only:
            raise InvalidRequest(rules.ref_text_message)

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        raise NotImplementedError

    def adjust_sampling(self, params: list[Any], request: SpeechRequest) -> None:
        """Model-specific changes to the (already copied) per-stage params."""
        n = max_new_tokens(request, self.default_max_new_tokens)
        if n is not None:
            params[0].max_tokens = n

    def sampling_params(self, engine: Any, request: SpeechRequest) -> list[Any]:
        """Engine defaults set for streaming, then this model's and the request's overrides.

        The engine's own defaults are never mutated (each request gets deep copies).
        """
        from vllm_omni.entrypoints.utils import coerce_param_message_types

        streaming = True
        if self.final_only_without_async_chunk:
            streaming = bool(getattr(engine.model_config, "async_chunk", True))
        params = coerce_param_message_types(
            copy.deepcopy(list(engine.default_sampling_params_list)), streaming
        )
        self.adjust_sampling(params, request)
        extra_params = dict(request.extra.get("extra_params") or {})
        extra_params.update(
            {
                k: v
                for k, v in request.extra.items()
                if k not in self.prompt_extra | {"extra_params"}
            }
        )
        stage0 = params[0]
        if extra_params or request.seed is not None:
            if stage0.extra_args is None:
                stage0.extra_args = {}
            for attr in SAMPLING_ATTRS:
                if extra_params.get(attr) is not None:
                    setattr(stage0, attr, extra_params[attr])
            stage0.extra_args.update(extra_params)
            if request.seed is not None:
                stage0.seed = int(request.seed)
                stage0.extra_args["tts_local_seed"] = int(request.seed)
        return params
