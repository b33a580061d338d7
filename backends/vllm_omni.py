"""The embedded GPU engine: vLLM-Omni's ``AsyncOmni`` running Qwen3-TTS inside this process.

Spec: ``vllm-omni?model=/models/Qwen3-TTS-12Hz-1.7B-CustomVoice&voice=vivian&…``. ``vllm_omni``
is imported lazily (the registry imports every backend module at discovery and ``vllm_omni``
is a GPU-only extra: ``pip install 'listenlab[gpu]'``).

Interface assumptions, all read from ``vllm-project/vllm-omni`` (facts, not code, carried over):

* ``vllm_omni/entrypoints/async_omni.py`` @ 012213c4: ``AsyncOmni(*, model, **kwargs)``;
  ``generate(prompt, request_id=…, *, sampling_params_list=…, output_modalities=…)`` is an
  async generator of ``OmniRequestOutput``; the caller's request id is used for ``abort``
  (internally it gets a random suffix) and is set back on every output; the loop ends on the
  output with ``finished``; ``abort(request_id)``, ``shutdown()``, ``check_health()``,
  ``default_sampling_params_list``, ``model_config``. Closing the generator aborts too.
* ``vllm_omni/outputs.py`` (the version with ``error`` / ``from_error``): the payload is the
  ``multimodal_output`` mapping of the first completion output, else the output's own.
* ``vllm_omni/entrypoints/openai/serving_speech.py`` (the 117 KB adapter version, RFC #4327):
  ``_prepare_speech_generation`` (sampling params: ``coerce_param_message_types`` to DELTA for
  streaming, FINAL_ONLY for Qwen3 without ``async_chunk``; ``extra_params`` into stage-0
  ``extra_args`` with ``temperature``/``top_p``/``top_k`` as attributes; ``seed`` plus
  ``extra_args["tts_local_seed"]``), ``_extract_audio_output`` (key ``audio`` or
  ``model_outputs``) and ``_generate_audio_chunks`` (a list is the cumulative list of chunks:
  emit ``audio[prev_count:]``; a bare tensor is one new chunk and counts as one; ``sr`` may be
  an int, a 0-d tensor or a list whose last item counts; a rate change mid-stream is an error).
* ``vllm_omni/entrypoints/utils.py``: ``coerce_param_message_types(params, is_streaming)``
  (CUMULATIVE/DELTA/FINAL_ONLY, PR #2911 which fixed replayed audio, issues #3032/#2907).
* The Qwen3-TTS prompt: ``tts_adapters/qwen3_tts.py`` @ 078de2d1 (validation: Base inferred
  from a reference clip, ``ref_text`` needed unless ``x_vector_only_mode``, VoiceDesign needs
  instructions, task must match the checkpoint variant named by the path), the older
  ``_build_tts_params`` (every value a one-item list; ``language`` "Auto", ``instruct`` "",
  ``max_new_tokens`` 2048, VoiceDesign ``non_streaming_mode``; ``ref_audio`` pre-decoded to
  ``[[samples, sr]]``) and ``examples/offline_inference/text_to_speech/qwen3_tts/end2end.py``
  @ 024a0ec0 (``{"prompt_token_ids": [0] * est_len, "additional_information": info}``,
  ``est_len`` from ``Qwen3TTSPromptEmbedsBuilder``, 2048 when it cannot be estimated;
  ``VLLM_WORKER_MULTIPROC_METHOD=spawn`` before import). The prompt carries a ``cache_salt``
  over the conditioning because the placeholder token ids are the same for every text.
* ``vllm_omni.platforms.current_omni_platform.is_available()`` / ``is_cuda()`` for the device.

Weights are never downloaded: the model must be a local directory or already in the local
Hugging Face cache, and the engine runs with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import importlib.util
import io
import json
import logging
import math
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from backends.base import (
    AudioChunk,
    Backend,
    BackendError,
    Capabilities,
    Health,
    InvalidRequest,
    ModelUnavailable,
    SpeechRequest,
    UnknownVoice,
    Unsupported,
    Voice,
)
from backends.registry import register

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'listenlab[gpu]' on a CUDA machine"
TASK_TYPES = ("CustomVoice", "VoiceDesign", "Base")
QWEN3_LANGUAGES = (
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
QWEN3_SPEAKERS = (
    "aiden",
    "dylan",
    "eric",
    "ono_anna",
    "ryan",
    "serena",
    "sohee",
    "uncle_fu",
    "vivian",
)
"""The CustomVoice presets in vLLM-Omni's docs; the loaded checkpoint's own list wins."""
DEFAULT_MAX_NEW_TOKENS = 2048
FALLBACK_PROMPT_LEN = 2048
REF_AUDIO_SECONDS = (1.0, 30.0)

# OpenAICreateSpeechRequest fields that SpeechRequest.extra may carry and that become Qwen3
# prompt fields; any other key (and ``extra_params``) goes to stage-0 ``extra_args``.
_PROMPT_EXTRA = {
    "task_type",
    "x_vector_only_mode",
    "max_new_tokens",
    "initial_codec_chunk_frames",
    "non_streaming_mode",
}
_SAMPLING_ATTRS = ("temperature", "top_p", "top_k")
# Spec parameters listenlab consumes; every other one is passed to AsyncOmni as an engine kwarg.
_OWN_PARAMS = {
    "model",
    "adapter",
    "task_type",
    "voice",
    "language",
    "max_new_tokens",
    "stage_configs",
    "deploy_config",
}


# --------------------------------------------------------------------------- preflight


def _import_vllm_omni():
    """Import the engine package, or explain how to get it."""
    if importlib.util.find_spec("vllm_omni") is None:
        raise ModelUnavailable(
            f"the embedded vllm-omni backend needs the vllm_omni package: {INSTALL_HINT} "
            "(on this machine use 'piper', or a server with 'vllm-omni+http://HOST:PORT')"
        )
    import vllm_omni

    return vllm_omni


def _require_accelerator() -> str:
    """Fail with a clear message where vLLM-Omni has no GPU to run on."""
    try:
        from vllm_omni.platforms import current_omni_platform as platform
    except Exception as e:  # pragma: no cover - depends on the installed vllm_omni
        raise ModelUnavailable(
            f"vllm_omni is installed but its platform layer failed to import: {e}"
        ) from e
    if not platform.is_available():
        raise ModelUnavailable(
            "vllm_omni found no GPU: the embedded vllm-omni backend needs a CUDA device "
            f"({INSTALL_HINT}); on a CPU machine use 'piper' or 'vllm-omni+http://HOST:PORT'"
        )
    return "cuda" if platform.is_cuda() else "accelerator"


def resolve_model(model: str) -> Path:
    """A local model directory: the path itself, or a repo id already in the local HF cache.

    Never downloads (``local_files_only``), so a missing model fails at once instead of hanging.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model) and not path.exists():
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(repo_id=model, local_files_only=True))
        except Exception:
            pass
        raise ModelUnavailable(
            f"model {model!r} is not on this machine (not a local directory, not in the local "
            "Hugging Face cache); listenlab runs vLLM-Omni with HF_HUB_OFFLINE=1 and never downloads "
            f"weights: fetch it first (huggingface-cli download {model}) or pass model=/local/path"
        )
    raise ModelUnavailable(f"model path {model!r} does not exist (expected a model directory)")


def _force_offline() -> None:
    """No hub access from the engine or its spawned workers: a missing file fails, never hangs.

    ``huggingface_hub`` reads the variable at import, so an already imported copy is set too.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if (constants := sys.modules.get("huggingface_hub.constants")) is not None:
        constants.HF_HUB_OFFLINE = True


def _variant_from_path(path: Path) -> str | None:
    """Checkpoint variant from a name ending in -Base / -CustomVoice / -VoiceDesign (as the
    vLLM-Omni adapter does when the config does not say)."""
    names = {"customvoice": "CustomVoice", "voicedesign": "VoiceDesign", "base": "Base"}
    for part in reversed(path.parts):
        m = re.search(r"(?:^|[-_.])(custom[-_.]?voice|voice[-_.]?design|base)$", part.lower())
        if m:
            return names[re.sub(r"[-_.]", "", m.group(1))]
    return None


def _engine_kwarg(raw: str) -> Any:
    """Spec strings to Python values for AsyncOmni kwargs (``true``, ``300``, ``0.3``)."""
    low = raw.lower()
    if low in {"true", "false"}:
        return low == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


# --------------------------------------------------------------------------- output decoding


def _audio_payload(res: Any) -> tuple[Mapping[str, Any], str] | None:
    """The multimodal mapping and its audio key, as ``_extract_audio_output`` finds them."""
    mm = getattr(res, "multimodal_output", None)
    if not mm:
        for completion in getattr(res, "outputs", None) or ():
            if cm := getattr(completion, "multimodal_output", None):
                mm = cm
                break
    if not mm or not isinstance(mm, Mapping):
        return None
    key = "audio" if "audio" in mm else ("model_outputs" if "model_outputs" in mm else None)
    return (mm, key) if key else None


def _scalar_rate(raw: Any) -> int:
    if isinstance(raw, list | tuple):
        raw = raw[-1]
    value = raw.item() if hasattr(raw, "item") else raw
    rate = int(value)
    if rate <= 0:
        raise BackendError(f"engine reported a non-positive sample rate: {raw!r}")
    return rate


def _frames(chunk: Any) -> np.ndarray:
    """One engine chunk (torch tensor or array) as ``(frames, channels)``.

    vLLM-Omni gives mono as ``[T]`` or ``[1, T]`` and stereo as ``[2, T]``; ``[T, 2]`` is
    accepted too.
    """
    if hasattr(chunk, "detach"):
        chunk = chunk.detach().float().cpu().numpy()
    x = np.asarray(chunk)
    while x.ndim > 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim == 1:
        return x.reshape(-1, 1)
    if x.ndim == 2 and x.shape[0] in (1, 2):
        return x.T
    if x.ndim == 2 and x.shape[1] in (1, 2):
        return x
    raise BackendError(f"cannot tell the channel layout of an audio chunk shaped {x.shape}")


def _to_int16(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.int16:
        return x
    x = np.nan_to_num(np.asarray(x, dtype=np.float32))
    return (np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)


@dataclass
class _Cursor:
    """What one request has emitted so far, so cumulative outputs never replay audio."""

    chunks_seen: int = 0
    sample_rate: int | None = None
    channels: int | None = None

    def new_pcm(self, mm: Mapping[str, Any], key: str) -> list[np.ndarray]:
        """Interleaved int16 arrays for the chunks of this output not emitted before."""
        if mm.get("sr") is not None:
            rate = _scalar_rate(mm["sr"])
            if self.sample_rate is not None and rate != self.sample_rate:
                raise BackendError(
                    f"sample rate changed mid-stream: {self.sample_rate} Hz to {rate} Hz"
                )
            self.sample_rate = rate
        audio = mm[key]
        if isinstance(audio, list | tuple):  # the cumulative list of every chunk so far
            new = list(audio[self.chunks_seen :])
            self.chunks_seen = max(self.chunks_seen, len(audio))
        elif audio is None:
            new = []
        else:  # one new chunk (DELTA)
            new = [audio]
            self.chunks_seen += 1
        out = []
        for chunk in new:
            frames = _frames(chunk)
            if not frames.size:
                continue
            if self.sample_rate is None:
                raise BackendError("the engine sent audio without a sample rate ('sr')")
            if self.channels is None:
                self.channels = frames.shape[1]
            elif frames.shape[1] != self.channels:
                raise BackendError(
                    f"channel count changed mid-stream: {self.channels} to {frames.shape[1]}"
                )
            out.append(_to_int16(frames).reshape(-1))
        return out


# --------------------------------------------------------------------------- backend


@dataclass
class _Qwen3Defaults:
    task_type: str | None
    """Checkpoint variant (spec ``task_type`` or inferred from the model directory name)."""
    voice: str | None = None
    language: str | None = None
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS


@dataclass
class _PromptHelpers:
    """Loaded once per engine: what estimating the talker's prompt length needs."""

    tokenizer: Any = None
    talker_config: Any = None
    codec_frame_rate: float | None = None
    warned: set[str] = field(default_factory=set)


@register
class VllmOmniBackend(Backend):
    """``vllm-omni?model=/path&task_type=CustomVoice&voice=vivian&stage_configs=/x.yaml&…``

    Unknown spec parameters are passed to ``AsyncOmni`` as engine kwargs (``async_chunk``,
    ``stage_init_timeout``, ``enforce_eager``, …). The model loads on :meth:`start` or on the
    first request.
    """

    name = "vllm-omni"

    def __init__(
        self,
        model_path: Path,
        *,
        defaults: _Qwen3Defaults,
        engine_kwargs: dict[str, Any] | None = None,
    ):
        self.model_path = model_path
        self.defaults = defaults
        self.engine_kwargs = dict(engine_kwargs or {})
        self._engine: Any = None
        self._helpers = _PromptHelpers()
        self._start_lock = asyncio.Lock()
        self._active: set[str] = set()
        """Request ids in flight: ``abort`` is by id, so two live requests may not share one."""

    @classmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> VllmOmniBackend:
        params = dict(params)
        model = params.get("model")
        if not model:
            raise InvalidRequest("the vllm-omni backend needs model=/local/path/or/hf-id")
        adapter = params.get("adapter", "qwen3_tts")
        if adapter != "qwen3_tts":
            raise InvalidRequest(f"unsupported vllm-omni adapter {adapter!r}; supported: qwen3_tts")
        _import_vllm_omni()
        _require_accelerator()
        path = resolve_model(model)
        task = params.get("task_type")
        if task is not None and task not in TASK_TYPES:
            raise InvalidRequest(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task!r}")
        try:
            max_new = int(params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
        except ValueError:
            raise InvalidRequest("max_new_tokens must be an integer") from None
        defaults = _Qwen3Defaults(
            task_type=task or _variant_from_path(path),
            voice=params["voice"].lower() if params.get("voice") else None,
            language=params["language"].title() if params.get("language") else None,
            max_new_tokens=max_new,
        )
        kwargs = {k: _engine_kwarg(v) for k, v in params.items() if k not in _OWN_PARAMS}
        if params.get("stage_configs"):
            kwargs["stage_configs_path"] = params["stage_configs"]
        if params.get("deploy_config"):
            kwargs["deploy_config"] = params["deploy_config"]
        for key in ("stage_configs_path", "deploy_config"):
            if key in kwargs and not Path(kwargs[key]).is_file():
                raise InvalidRequest(f"{key} file {kwargs[key]!r} does not exist")
        return cls(path, defaults=defaults, engine_kwargs=kwargs)

    # -- engine lifecycle

    @property
    def engine(self) -> Any:
        """The ``AsyncOmni`` instance (None until started)."""
        return self._engine

    async def start(self) -> None:
        """Load the model. Blocks the event loop while vLLM-Omni starts its stages (as
        ``vllm serve`` does), so call it at app start-up rather than on the first click."""
        async with self._start_lock:
            if self._engine is not None:
                return
            os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # as end2end.py
            _force_offline()
            _import_vllm_omni()
            _require_accelerator()
            from vllm_omni import AsyncOmni

            try:
                engine = AsyncOmni(model=str(self.model_path), **self.engine_kwargs)
            except Exception as e:
                raise ModelUnavailable(f"vLLM-Omni could not load {self.model_path}: {e}") from e
            self._engine = engine
            self._helpers = await asyncio.to_thread(self._load_prompt_helpers, engine)

    def _load_prompt_helpers(self, engine: Any) -> _PromptHelpers:
        """Tokenizer, talker config and codec frame rate for the prompt-length estimate."""
        helpers = _PromptHelpers()
        hf_config = getattr(getattr(engine, "model_config", None), "hf_config", None)
        helpers.talker_config = getattr(hf_config, "talker_config", None)
        try:
            from transformers import AutoTokenizer

            helpers.tokenizer = AutoTokenizer.from_pretrained(
                str(self.model_path), trust_remote_code=True, padding_side="left"
            )
        except Exception as e:
            log.warning(
                "vllm-omni: no tokenizer for the prompt-length estimate (%s); using %d",
                e,
                FALLBACK_PROMPT_LEN,
            )
        st = self.model_path / "speech_tokenizer" / "config.json"
        if st.is_file():
            cfg = json.loads(st.read_text(encoding="utf-8"))
            sr, down = cfg.get("output_sample_rate"), cfg.get("encode_downsample_rate")
            if sr and down:
                helpers.codec_frame_rate = float(sr) / float(down)
        return helpers

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()

    # -- metadata

    @property
    def capabilities(self) -> Capabilities:
        task = self.defaults.task_type
        return Capabilities(
            streaming=True,
            cloning=task in (None, "Base"),
            languages=self._languages(),
            sample_rate=None,
            channels=1,
            speed=False,
            speed_streaming=False,
            instructions=task != "Base",
            seed=True,
            voice_library=False,
        )

    def _languages(self) -> tuple[str, ...]:
        ids = getattr(self._helpers.talker_config, "codec_language_id", None)
        if isinstance(ids, Mapping) and ids:
            return ("Auto", *sorted({str(k).title() for k in ids} - {"Auto"}))
        return QWEN3_LANGUAGES

    def _speakers(self) -> tuple[str, ...]:
        ids = getattr(self._helpers.talker_config, "spk_id", None)
        if isinstance(ids, Mapping) and ids:
            return tuple(sorted(str(k).lower() for k in ids))
        return QWEN3_SPEAKERS

    async def voices(self) -> list[Voice]:
        if self.defaults.task_type not in (None, "CustomVoice"):
            return []  # Base clones from a clip; VoiceDesign describes the voice in words
        return [
            Voice(s, "builtin", description="Qwen3-TTS CustomVoice preset")
            for s in self._speakers()
        ]

    async def health(self) -> Health:
        if self._engine is None:
            return Health(True, f"vllm-omni {self.model_path.name} (not loaded yet)")
        try:
            await self._engine.check_health()
        except Exception as e:
            return Health(False, f"vllm-omni engine is not healthy: {e}")
        return Health(True, f"vllm-omni {self.model_path.name}")

    # -- request mapping

    def _task_for(self, request: SpeechRequest) -> str:
        cloning = request.ref_audio is not None or request.ref_text is not None
        task = (
            request.extra.get("task_type")
            or ("Base" if cloning else self.defaults.task_type)
            or "CustomVoice"
        )
        if task not in TASK_TYPES:
            raise InvalidRequest(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task!r}")
        variant = self.defaults.task_type
        if variant is not None and task != variant:
            raise Unsupported(
                f"this Qwen3-TTS {variant} checkpoint does not support task_type={task!r}"
                + (" (cloning needs a Base checkpoint)" if task == "Base" else "")
            )
        return task

    def _check(self, request: SpeechRequest) -> SpeechRequest:
        request = request.validated()
        if request.speed != 1.0:
            raise Unsupported("vLLM-Omni streams at the model's own speed; speed must be 1.0")
        if request.request_id in self._active:
            raise InvalidRequest(f"request id {request.request_id!r} is already streaming")
        return request

    def _additional_information(self, request: SpeechRequest) -> dict[str, list[Any]]:
        """The Qwen3-TTS talker input, as vLLM-Omni's ``_build_tts_params`` builds it."""
        task = self._task_for(request)
        extra = request.extra
        info: dict[str, list[Any]] = {"text": [request.text], "task_type": [task]}
        language = (request.language or self.defaults.language or "Auto").title()
        if language not in self._languages():
            raise InvalidRequest(
                f"unsupported language {language!r}; supported: {', '.join(self._languages())}"
            )
        info["language"] = [language]
        voice = (request.voice or "").lower() or None
        if voice == "default":
            voice = None
        if task == "CustomVoice":
            speakers = self._speakers()
            voice = (
                voice or self.defaults.voice or ("vivian" if "vivian" in speakers else speakers[0])
            )
            if voice not in speakers:
                raise UnknownVoice(
                    f"unknown voice {voice!r}; available: {', '.join(self._speakers())}"
                )
        if voice:
            info["speaker"] = [voice]
        if task == "VoiceDesign" and not request.instructions:
            raise InvalidRequest("VoiceDesign needs instructions describing the voice")
        info["instruct"] = [request.instructions or ""]
        x_vector_only = bool(extra.get("x_vector_only_mode", False))
        if task == "Base":
            if request.ref_audio is None:
                raise InvalidRequest("cloning (Base task) needs a reference clip (ref_audio)")
            info["ref_audio"] = [list(_decode_ref_audio(request.ref_audio))]
            if not x_vector_only and not (request.ref_text or "").strip():
                raise InvalidRequest(
                    "cloning needs ref_text (the clip's transcript) unless x_vector_only_mode is set"
                )
            if request.ref_text:
                info["ref_text"] = [request.ref_text]
            info["x_vector_only_mode"] = [x_vector_only]
        elif request.ref_text is not None or "x_vector_only_mode" in extra:
            raise InvalidRequest(
                "ref_text and x_vector_only_mode are only valid for cloning (Base task)"
            )
        info["max_new_tokens"] = [int(extra.get("max_new_tokens", self.defaults.max_new_tokens))]
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
                return (
                    math.ceil(len(samples) / sr * h.codec_frame_rate)
                    if h.codec_frame_rate
                    else None
                )

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
        """``{"prompt_token_ids", "additional_information", "cache_salt"}`` for one request.

        The token ids are placeholders (the talker builds its own embeddings), so the salt keeps
        the prefix cache from handing one request's conditioning to another.
        """
        info = self._additional_information(request)
        digest = hashlib.sha256(json.dumps(info, sort_keys=True, default=str).encode()).hexdigest()
        return {
            "prompt_token_ids": [0] * self._prompt_len(info),
            "additional_information": info,
            "cache_salt": f"listenlab-{digest[:32]}",
        }

    def sampling_params(self, request: SpeechRequest) -> list[Any]:
        """The engine's per-stage defaults, set for streaming, with seed and extra params."""
        from vllm_omni.entrypoints.utils import coerce_param_message_types

        engine = self._engine
        full_payload = not bool(getattr(engine.model_config, "async_chunk", True))
        params = coerce_param_message_types(
            list(engine.default_sampling_params_list), not full_payload
        )
        extra_params = dict(request.extra.get("extra_params") or {})
        extra_params.update(
            {k: v for k, v in request.extra.items() if k not in _PROMPT_EXTRA | {"extra_params"}}
        )
        if not extra_params and request.seed is None:
            return params
        params = copy.deepcopy(params)
        stage0 = params[0]
        if stage0.extra_args is None:
            stage0.extra_args = {}
        for attr in _SAMPLING_ATTRS:
            if extra_params.get(attr) is not None:
                setattr(stage0, attr, extra_params[attr])
        stage0.extra_args.update(extra_params)
        if request.seed is not None:
            stage0.seed = int(request.seed)
            stage0.extra_args["tts_local_seed"] = int(request.seed)
        return params

    # -- streaming

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        request = self._check(request)
        await self.start()
        engine = self._engine
        prompt = self.build_prompt(request)
        params = self.sampling_params(request)
        rid = request.request_id
        self._active.add(rid)
        generator = engine.generate(
            prompt=prompt, request_id=rid, sampling_params_list=params, output_modalities=["audio"]
        )
        cursor = _Cursor()
        index = 0
        finished = False
        try:
            try:
                async for res in generator:
                    if getattr(res, "error", None):
                        raise BackendError(
                            f"vLLM-Omni request {rid} failed: {res.error}",
                            status=getattr(res, "error_status_code", None),
                            partial=index > 0,
                        )
                    if (found := _audio_payload(res)) is not None:
                        for pcm in cursor.new_pcm(*found):
                            yield AudioChunk(pcm, cursor.sample_rate, cursor.channels, index)
                            index += 1
                    # No break: the engine's generator ends by itself after the final output,
                    # and closing it early would make it abort a request that is already done.
                    finished = finished or bool(getattr(res, "finished", False))
            except BackendError as e:
                e.partial = e.partial or index > 0
                raise
            except Exception as e:
                raise BackendError(f"vLLM-Omni request {rid} failed: {e}", partial=index > 0) from e
            if not finished:
                raise BackendError(
                    f"vLLM-Omni request {rid} ended without its final output", partial=index > 0
                )
            if index == 0:
                raise BackendError(f"vLLM-Omni request {rid} finished without any audio")
        finally:
            self._active.discard(rid)
            if not finished:
                try:
                    await engine.abort(rid)
                except Exception as e:  # the request may already be gone; nothing to free then
                    log.debug("vllm-omni: abort(%s) failed: %s", rid, e)
            await generator.aclose()


def _decode_ref_audio(wav: bytes) -> tuple[list[float], int]:
    """WAV bytes to mono ``(samples, sr)``, the form vLLM-Omni's server hands the talker."""
    import soundfile as sf

    try:
        x, sr = sf.read(io.BytesIO(wav), dtype="float32", always_2d=True)
    except Exception as e:
        raise InvalidRequest(f"the reference clip is not a readable audio file: {e}") from e
    x = x.mean(axis=1)
    seconds = len(x) / sr
    lo, hi = REF_AUDIO_SECONDS
    if not lo <= seconds <= hi:
        raise InvalidRequest(
            f"the reference clip is {seconds:.1f} s; it must be {lo:.0f}-{hi:.0f} s"
        )
    return x.tolist(), int(sr)
