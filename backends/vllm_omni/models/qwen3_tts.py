"""Qwen3-TTS (12 Hz, 0.6B/1.7B; CustomVoice, VoiceDesign and Base checkpoints): the unit.

The model's facts, request rules and chunk schedule (``MODEL``, each fact with the line of
vLLM-Omni 0.30.0 it was read from), the port of its adapter's ``validate`` (:class:`Qwen3Rules`)
and the embedded adapter (:class:`Qwen3TTS`, ``ADAPTER``).

The embedded adapter was read from ``vllm-project/vllm-omni``:

* ``vllm_omni/entrypoints/openai/tts_adapters/qwen3_tts.py``: Base is inferred from a reference
  clip; ``ref_text`` is needed unless ``x_vector_only_mode``; VoiceDesign needs instructions;
  the task must match the checkpoint variant named by the path.
* ``serving_speech.py`` ``_build_tts_params``: every value is a one-item list; ``language``
  "Auto", ``instruct`` "", ``max_new_tokens`` 2048, CustomVoice default speaker Vivian,
  VoiceDesign ``non_streaming_mode`` True; ``ref_audio`` pre-decoded to ``[[samples, sr]]``.
* ``examples/offline_inference/text_to_speech/qwen3_tts/end2end.py`` @ 024a0ec0:
  ``{"prompt_token_ids": [0] * est_len, "additional_information": info}`` with ``est_len`` from
  ``Qwen3TTSPromptEmbedsBuilder.estimate_prompt_len_from_additional_information`` (2048 when
  it cannot be estimated). The server adds a ``cache_salt`` over the conditioning because the
  placeholder ids are the same for every text (``_conditioning_cache_salt``).
* Sampling defaults come from the deploy YAML (``vllm_omni/deploy/qwen3_tts.yaml``); without
  ``async_chunk`` the server asks for FINAL_ONLY outputs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.base import Capabilities, SpeechRequest, Voice
from backends.errors import InvalidRequest, UnknownVoice, Unsupported
from backends.vllm_omni.models.base import (
    AdapterContext,
    ModelAdapter,
    decode_ref_audio,
    load_tokenizer,
    max_new_tokens,
    no_voice,
)
from backends.vllm_omni.models.unit import ChunkSchedule, ModelUnit, assumed, cite
from backends.vllm_omni.rules import (
    MAX_INSTRUCTIONS,
    RequestView,
    RuleContext,
    SpeechRules,
    embedding_dim,
    instructions_error,
    max_new_tokens_error,
    ref_audio_format_error,
)

log = logging.getLogger(__name__)

ADAPTER_FILE = "vllm_omni/entrypoints/openai/tts_adapters/qwen3_tts.py"
DEPLOY = "vllm_omni/deploy/qwen3_tts.yaml"
TASK_TYPES = ("CustomVoice", "VoiceDesign", "Base")
LANGUAGES = (
    "Auto",
    "Chinese",
    "English",
    "Japanese",
    "Korean",
    "German",
    "French",
    "Russian",
    "Portuguese",
    "Spanish",
    "Italian",
)
"""``tts_adapters/base.py`` ``DEFAULT_TTS_LANGUAGES`` in its order: the official Qwen3-TTS
languages, which the adapter uses when the checkpoint's ``codec_language_id`` names none."""
DEFAULT_MAX_NEW_TOKENS = 2048
FALLBACK_PROMPT_LEN = 2048
_VARIANT = re.compile(r"(?:^|[-_.])(custom[-_.]?voice|voice[-_.]?design|base)$")
_VARIANTS = {"customvoice": "CustomVoice", "voicedesign": "VoiceDesign", "base": "Base"}


def checkpoint_variant(model: str | Path) -> str | None:
    """``Qwen3TTSAdapter._get_model_variant`` from a served name or model path: the task of a
    component ending in -Base / -CustomVoice / -VoiceDesign, leaf first."""
    for component in reversed(re.split(r"[\\/]+", str(model).rstrip("/\\"))):
        m = _VARIANT.search(component.lower())
        if m is not None:
            return _VARIANTS[re.sub(r"[-_.]", "", m.group(1))]
    return None


# --------------------------------------------------------------------------- request rules

BASE_REF_TEXT = (
    "Base task requires non-empty 'ref_text' (transcript of "
    "the reference audio) unless 'x_vector_only_mode' is enabled"
)


@dataclass(frozen=True)
class Qwen3Rules(SpeechRules):
    """``Qwen3TTSAdapter.validate`` (``tts_adapters/qwen3_tts.py:117``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if view.task_type is None and (view.ref_audio is not None or view.ref_text is not None):
            view.task_type = "Base"
        if view.voice is not None:
            view.voice = view.voice.lower()
            if view.voice in ctx.uploaded:
                view.task_type = "Base"
        task = view.task_type or "CustomVoice"
        variant = checkpoint_variant(ctx.model)
        if variant is not None and task != variant:
            return (
                f"Qwen3-TTS {variant} checkpoint does not support task_type='{task}'. "
                f"Use task_type='{variant}' or load the matching {task} checkpoint."
            )
        if not view.input or not view.input.strip():
            return "Input text cannot be empty"
        return (
            self.language_error(view)
            or task_error(view, ctx, task)
            or instructions_error(self, view.instructions)
            or max_new_tokens_error(view.max_new_tokens)
        )

    def language_error(self, view: RequestView) -> str | None:
        if view.language is None or self.languages is None:
            return None
        view.language = view.language.title()
        if view.language not in self.languages:
            return f"Invalid language '{view.language}'. Supported: {', '.join(sorted(self.languages))}"
        return None


def task_error(view: RequestView, ctx: RuleContext, task: str) -> str | None:
    """The task-dependent half of ``Qwen3TTSAdapter.validate``."""
    available = ctx.speakers | frozenset(ctx.uploaded)
    if task == "CustomVoice":
        if not available:
            return (
                "This model does not support CustomVoice task (no speakers configured). "
                "Use task_type='Base' with ref_audio/ref_text for voice cloning, "
                "or use a CustomVoice model."
            )
        if view.voice is not None and view.voice not in available:
            return f"Invalid voice '{view.voice}'. Supported: {', '.join(sorted(available))}"
    if view.speaker_embedding is not None:
        if task != "Base":
            return "'speaker_embedding' is only valid for Base task"
        if not view.speaker_embedding:
            return "'speaker_embedding' must be a non-empty list of floats"
        view.x_vector_only_mode = True
        dim = embedding_dim(ctx)
        if dim is not None and len(view.speaker_embedding) != dim:
            return (
                f"speaker_embedding has {len(view.speaker_embedding)} dimensions; expected {dim} "
                "for the loaded Qwen3-TTS model"
            )
    if task == "Base":
        err = base_error(view, ctx)
        if err:
            return err
    if task != "Base":
        if view.ref_text is not None:
            return "'ref_text' is only valid for Base task"
        if view.x_vector_only_mode is not None:
            return "'x_vector_only_mode' is only valid for Base task"
    if task == "VoiceDesign" and not view.instructions:
        return "VoiceDesign task requires 'instructions' to describe the voice"
    return None


def base_error(view: RequestView, ctx: RuleContext) -> str | None:
    """What a Base (cloning) request needs: a clip or an embedding, and its transcript."""
    if view.voice is not None and view.voice in ctx.uploaded:
        return None
    if view.voice is None and view.ref_audio is None and view.speaker_embedding is None:
        return "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning"
    if view.voice is not None and view.ref_audio is None:
        return (
            f"Base task with built-in speaker '{view.voice}' requires 'ref_audio' for voice cloning"
        )
    if view.ref_audio is not None:
        err = ref_audio_format_error(view.ref_audio)
        if err:
            return err
    if not view.x_vector_only_mode and (not view.ref_text or not view.ref_text.strip()):
        return BASE_REF_TEXT
    return None


# --------------------------------------------------------------------------- the unit

RULE_SOURCES = (
    cite(ADAPTER_FILE, 51, "supported_output_sample_rates = frozenset({8000, 24000})"),
    cite(ADAPTER_FILE, 117, "def validate(self, request", "ported as Qwen3Rules.validate"),
    cite(
        "vllm_omni/entrypoints/openai/tts_adapters/base.py",
        29,
        "DEFAULT_TTS_LANGUAGES = frozenset(",
        "the languages when the checkpoint lists none",
    ),
    cite(
        "vllm_omni/entrypoints/openai/serving_speech.py",
        115,
        "_TTS_MAX_INSTRUCTIONS_LENGTH = 500",
    ),
    cite(
        "vllm_omni/entrypoints/openai/protocol/audio.py",
        150,
        "1024-dim for 0.6B",
        "speaker_embedding: 1024 for 0.6B, 2048 for 1.7B",
    ),
)

MODEL = ModelUnit(
    name="qwen3_tts",
    title="Qwen3-TTS",
    keys=("qwen3-tts",),
    checkpoint="Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
    sample_rate=24000,
    channels=1,
    instructions=True,
    max_model_len=4096,
    presets=("aiden", "dylan", "eric", "ono_anna", "ryan", "serena", "sohee", "uncle_fu", "vivian"),
    rules=Qwen3Rules(
        "qwen3_tts",
        "; ".join(str(s) for s in RULE_SOURCES),
        sample_rates=frozenset({8000, 24000}),
        languages=LANGUAGES,
        task_types=True,
        checks_voice=True,
        max_instructions=MAX_INSTRUCTIONS,
        embedding_dims=(("0.6b", 1024), ("1.7b", 2048)),
    ),
    schedule=ChunkSchedule(
        frame_hz=12.5,
        first_frames=(1,),
        chunk_frames=25,
        async_chunk=True,
        left_context_frames=72,
        sources=(
            cite(DEPLOY, 21, "async_chunk: true"),
            cite(
                DEPLOY,
                35,
                "initial_codec_chunk_frames: 1",
                "'Emit only the first audio chunk early, then return to codec_chunk_frames'",
            ),
            cite(DEPLOY, 32, "codec_chunk_frames: 25"),
            cite(DEPLOY, 33, "codec_left_context_frames: 72"),
            cite(
                "vllm_omni/model_executor/stage_input_processors/chunk_size_utils.py",
                170,
                "FRAME_DURATION_MS: ClassVar[float] = 80.0",
                "12.5 frames per second",
            ),
        ),
        assumptions=(
            "Without initial_codec_chunk_frames the server picks a dynamic first chunk "
            "(2..16 frames by load, chunk_size_utils.compute_dynamic_initial_chunk_size) and an "
            "opt-in codec_chunk_ramp [4,4,8,16,25] exists; the profile uses the shipped deploy "
            "value 1."
        ),
    ),
    sources={
        "sample_rate": (
            cite(
                "vllm_omni/model_executor/models/qwen3_tts/qwen3_tts_code2wav.py",
                116,
                "self._output_sample_rate = int(tok_config.output_sample_rate)",
                "the checkpoint's speech_tokenizer output_sample_rate, 24000 for the 12 Hz models",
            ),
            cite(
                "vllm_omni/model_executor/models/qwen3_tts/qwen3_tts_talker.py",
                1408,
                "sr = 24000",
                "the codec's rate",
            ),
        ),
        "channels": (
            cite(
                "vllm_omni/model_executor/models/qwen3_tts/qwen3_tts_code2wav.py",
                528,
                ".reshape(-1)",
                "each request's waveform is 1-D: mono",
            ),
        ),
        "cloning": (
            cite(
                ADAPTER_FILE,
                138,
                "if model_variant is not None and task_type != model_variant:",
                "cloning is the Base task: only a -Base checkpoint takes ref_audio",
            ),
        ),
        "instructions": (
            cite(ADAPTER_FILE, 247, 'if task_type == "VoiceDesign" and not request.instructions'),
        ),
        "speed_streaming": (
            cite(
                "vllm_omni/entrypoints/openai/tts_adapters/base.py",
                219,
                "native_speed_control: ClassVar[bool] = False",
                "not overridden by Qwen3TTSAdapter: speed is a stretch of the whole file",
            ),
        ),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 84, "max_model_len: 4096", "stage 0"),),
        "presets": (
            assumed(
                "the CustomVoice speakers in vLLM-Omni's docs/serving/speech_api.md (not in the "
                "wheel); the loaded checkpoint's talker_config.spk_id wins"
            ),
        ),
    },
)


# --------------------------------------------------------------------------- embedded adapter


@dataclass
class _PromptHelpers:
    """Loaded once per engine: what estimating the talker's prompt length needs."""

    tokenizer: Any = None
    talker_config: Any = None
    codec_frame_rate: float | None = None
    warned: set[str] = field(default_factory=set)


class Qwen3TTS(ModelAdapter):
    unit = MODEL
    architectures = frozenset(
        {"Qwen3TTSForConditionalGeneration", "Qwen3TTSTalkerForConditionalGeneration"}
    )
    model_types = frozenset({"qwen3_tts"})
    name_keys = ("qwen3tts",)
    spec_options = frozenset({"task_type", "voice", "language"})
    own_spec_options = frozenset({"voice", "language"})
    prompt_extra = frozenset(
        {
            "task_type",
            "x_vector_only_mode",
            "max_new_tokens",
            "initial_codec_chunk_frames",
            "non_streaming_mode",
        }
    )
    final_only_without_async_chunk = True
    sources = (
        "vllm_omni/entrypoints/openai/tts_adapters/qwen3_tts.py",
        "vllm_omni/entrypoints/openai/serving_speech.py (_build_tts_params)",
        "examples/offline_inference/text_to_speech/qwen3_tts/end2end.py",
        "vllm_omni/model_executor/models/qwen3_tts/prompt_embeds_builder.py",
        "vllm_omni/deploy/qwen3_tts.yaml",
    )

    def __init__(self, ctx: AdapterContext, options: dict[str, str]):
        super().__init__(ctx, options)
        task = options.get("task_type")
        if task is not None and task not in TASK_TYPES:
            raise InvalidRequest(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task!r}")
        self.task_type = task or checkpoint_variant(ctx.model_path)
        self.voice = options["voice"].lower() if options.get("voice") else None
        self.language = options["language"].title() if options.get("language") else None
        if self.default_max_new_tokens is None:
            self.default_max_new_tokens = DEFAULT_MAX_NEW_TOKENS
        self._helpers = _PromptHelpers()

    # -- lifecycle

    def load(self, engine: Any) -> None:
        """Tokenizer, talker config and codec frame rate for the prompt-length estimate."""
        helpers = _PromptHelpers()
        hf_config = getattr(getattr(engine, "model_config", None), "hf_config", None)
        helpers.talker_config = getattr(hf_config, "talker_config", None)
        try:
            helpers.tokenizer = load_tokenizer(self.ctx.model_path)
        except Exception as e:
            log.warning(
                "vllm-omni: no tokenizer for the prompt-length estimate (%s); using %d",
                e,
                FALLBACK_PROMPT_LEN,
            )
        st = self.ctx.model_path / "speech_tokenizer" / "config.json"
        if st.is_file():
            cfg = json.loads(st.read_text(encoding="utf-8"))
            sr, down = cfg.get("output_sample_rate"), cfg.get("encode_downsample_rate")
            if sr and down:
                helpers.codec_frame_rate = float(sr) / float(down)
        self._helpers = helpers

    # -- metadata

    def capabilities(self) -> Capabilities:
        task = self.task_type
        return Capabilities(
            streaming=True,
            cloning=task in (None, "Base"),
            languages=self.languages(),
            # 24 kHz in the model table, but read from the stream (the stand-in and old builds differ)
            sample_rate=None,
            channels=self.unit.channels,
            speed=False,
            speed_streaming=False,
            instructions=task != "Base",
            seed=True,
            voice_library=False,
        )

    def languages(self) -> tuple[str, ...]:
        ids = getattr(self._helpers.talker_config, "codec_language_id", None)
        if isinstance(ids, Mapping) and ids:
            return ("Auto", *sorted({str(k).title() for k in ids} - {"Auto"}))
        return LANGUAGES

    def speakers(self) -> tuple[str, ...]:
        ids = getattr(self._helpers.talker_config, "spk_id", None)
        if isinstance(ids, Mapping) and ids:
            return tuple(sorted(str(k).lower() for k in ids))
        return self.unit.presets

    def voices(self) -> list[Voice]:
        if self.task_type not in (None, "CustomVoice"):
            return []  # Base clones from a clip; VoiceDesign describes the voice in words
        return [
            Voice(s, "builtin", description="Qwen3-TTS CustomVoice preset") for s in self.speakers()
        ]

    # -- request mapping

    def _task_for(self, request: SpeechRequest) -> str:
        cloning = request.ref_audio is not None or request.ref_text is not None
        task = request.extra.get("task_type") or ("Base" if cloning else self.task_type)
        task = task or "CustomVoice"
        if task not in TASK_TYPES:
            raise InvalidRequest(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task!r}")
        if self.task_type is not None and task != self.task_type:
            raise Unsupported(
                f"this Qwen3-TTS {self.task_type} checkpoint does not support task_type={task!r}"
                + (" (cloning needs a Base checkpoint)" if task == "Base" else "")
            )
        return task

    def check(self, request: SpeechRequest) -> None:
        self.additional_information(request, decode=False)

    def additional_information(
        self, request: SpeechRequest, *, decode: bool = True
    ) -> dict[str, list[Any]]:
        """The Qwen3-TTS talker input, as vLLM-Omni's ``_build_tts_params`` builds it."""
        task = self._task_for(request)
        extra = request.extra
        info: dict[str, list[Any]] = {"text": [request.text], "task_type": [task]}
        language = (request.language or self.language or "Auto").title()
        if language not in self.languages():
            raise InvalidRequest(
                f"unsupported language {language!r}; supported: {', '.join(self.languages())}"
            )
        info["language"] = [language]
        voice = no_voice(request.voice)
        if task == "CustomVoice":
            speakers = self.speakers()
            voice = voice or self.voice or ("vivian" if "vivian" in speakers else speakers[0])
            loaded = self._helpers.talker_config is not None
            if voice not in speakers and (loaded or decode):
                raise UnknownVoice(f"unknown voice {voice!r}; available: {', '.join(speakers)}")
        if voice:
            info["speaker"] = [voice]
        if task == "VoiceDesign" and not request.instructions:
            raise InvalidRequest("VoiceDesign needs instructions describing the voice")
        info["instruct"] = [request.instructions or ""]
        x_vector_only = bool(extra.get("x_vector_only_mode", False))
        if task == "Base":
            if request.ref_audio is None:
                raise InvalidRequest("cloning (Base task) needs a reference clip (ref_audio)")
            if not x_vector_only and not (request.ref_text or "").strip():
                raise InvalidRequest(
                    "cloning needs ref_text (the clip's transcript) unless x_vector_only_mode is set"
                )
            if decode:
                samples, sr = decode_ref_audio(request.ref_audio)
                info["ref_audio"] = [[samples.tolist(), sr]]
            if request.ref_text:
                info["ref_text"] = [request.ref_text]
            info["x_vector_only_mode"] = [x_vector_only]
        elif request.ref_text is not None or "x_vector_only_mode" in extra:
            raise InvalidRequest(
                "ref_text and x_vector_only_mode are only valid for cloning (Base task)"
            )
        info["max_new_tokens"] = [max_new_tokens(request, self.default_max_new_tokens)]
        for key in ("initial_codec_chunk_frames", "non_streaming_mode"):
            if key in extra:
                info[key] = [extra[key]]
        if task == "VoiceDesign":
            info.setdefault("non_streaming_mode", [True])
        return info

    def _prompt_len(self, info: dict[str, list[Any]]) -> int:
        """Talker prefill length; the offline example falls back to 2048 the same way."""
        h = self._helpers
        try:
            from vllm_omni.model_executor.models.qwen3_tts.prompt_embeds_builder import (
                Qwen3TTSPromptEmbedsBuilder,
            )

            if h.tokenizer is None:
                raise RuntimeError("no tokenizer")

            def ref_code_len(ref_audio: Any) -> int | None:
                samples, sr = info["ref_audio"][0]
                rate = h.codec_frame_rate
                return math.ceil(len(samples) / sr * rate) if rate else None

            return int(
                Qwen3TTSPromptEmbedsBuilder.estimate_prompt_len_from_additional_information(
                    additional_information=info,
                    task_type=info["task_type"][0],
                    tokenize_prompt=lambda t: h.tokenizer(t, padding=False)["input_ids"],
                    codec_language_id=getattr(h.talker_config, "codec_language_id", None),
                    spk_is_dialect=getattr(h.talker_config, "spk_is_dialect", None),
                    estimate_ref_code_len=ref_code_len,
                )
            )
        except Exception as e:
            if "prompt_len" not in h.warned:
                h.warned.add("prompt_len")
                log.warning(
                    "vllm-omni: prompt length not estimated (%s); using %d", e, FALLBACK_PROMPT_LEN
                )
            return FALLBACK_PROMPT_LEN

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        """``{"prompt_token_ids", "additional_information", "cache_salt"}`` for one request."""
        info = self.additional_information(request)
        digest = hashlib.sha256(json.dumps(info, sort_keys=True, default=str).encode()).hexdigest()
        return {
            "prompt_token_ids": [0] * self._prompt_len(info),
            "additional_information": info,
            "cache_salt": f"listenlab-{digest[:32]}",
        }

    def adjust_sampling(self, params: list[Any], request: SpeechRequest) -> None:
        """Qwen3 carries ``max_new_tokens`` in the prompt; the deploy defaults stay."""


ADAPTER = Qwen3TTS
