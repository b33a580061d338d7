"""Qwen3-TTS (12 Hz, 0.6B/1.7B; CustomVoice, VoiceDesign and Base checkpoints).

Read from ``vllm-project/vllm-omni``:

* ``vllm_omni/entrypoints/openai/tts_adapters/qwen3_tts.py`` @ 078de2d1: Base is inferred from
  a reference clip; ``ref_text`` is needed unless ``x_vector_only_mode``; VoiceDesign needs
  instructions; the task must match the checkpoint variant named by the path.
* ``serving_speech.py`` ``_build_tts_params``: every value is a one-item list; ``language``
  "Auto", ``instruct`` "", ``max_new_tokens`` 2048, CustomVoice default speaker Vivian,
  VoiceDesign ``non_streaming_mode`` True; ``ref_audio`` pre-decoded to ``[[samples, sr]]``.
* ``examples/offline_inference/text_to_speech/qwen3_tts/end2end.py`` @ 024a0ec0:
  ``{"prompt_token_ids": [0] * est_len, "additional_information": info}`` with ``est_len`` from
  ``Qwen3TTSPromptEmbedsBuilder.estimate_prompt_len_from_additional_information`` (2048 when
  it cannot be estimated). The server adds a ``cache_salt`` over the conditioning because the
  placeholder ids are the same for every text (``_conditioning_cache_salt``).
* Native rate 24 kHz mono (``docs/serving/speech_api.md``); sampling defaults come from the
  deploy YAML (``vllm_omni/deploy/qwen3_tts.yaml``); without ``async_chunk`` the server asks for
  FINAL_ONLY outputs.
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
from backends.vllm_omni.model_table import QWEN3_LANGUAGES, seed_model
from backends.vllm_omni.models.base import (
    AdapterContext,
    ModelAdapter,
    decode_ref_audio,
    load_tokenizer,
    max_new_tokens,
    no_voice,
)

log = logging.getLogger(__name__)

TASK_TYPES = ("CustomVoice", "VoiceDesign", "Base")
LANGUAGES = QWEN3_LANGUAGES
SPEAKERS = ("aiden", "dylan", "eric", "ono_anna", "ryan", "serena", "sohee", "uncle_fu", "vivian")
"""The CustomVoice presets in vLLM-Omni's docs; the loaded checkpoint's own list wins."""
DEFAULT_MAX_NEW_TOKENS = 2048
FALLBACK_PROMPT_LEN = 2048


def variant_from_path(path: Path) -> str | None:
    """Checkpoint variant from a name ending in -Base / -CustomVoice / -VoiceDesign (as the
    vLLM-Omni adapter does when the config does not say)."""
    names = {"customvoice": "CustomVoice", "voicedesign": "VoiceDesign", "base": "Base"}
    for part in reversed(path.parts):
        m = re.search(r"(?:^|[-_.])(custom[-_.]?voice|voice[-_.]?design|base)$", part.lower())
        if m:
            return names[re.sub(r"[-_.]", "", m.group(1))]
    return None


@dataclass
class _PromptHelpers:
    """Loaded once per engine: what estimating the talker's prompt length needs."""

    tokenizer: Any = None
    talker_config: Any = None
    codec_frame_rate: float | None = None
    warned: set[str] = field(default_factory=set)


class Qwen3TTS(ModelAdapter):
    name = "qwen3_tts"
    facts = seed_model("qwen3_tts")
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
        self.task_type = task or variant_from_path(ctx.model_path)
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
            channels=self.facts.channels,
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
        return SPEAKERS

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
