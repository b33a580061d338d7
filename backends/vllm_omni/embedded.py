"""The embedded GPU engine: vLLM-Omni's ``AsyncOmni`` running a TTS model inside this process.

Spec: ``vllm-omni?model=/models/<model dir>[&adapter=NAME][&…]``. The model-specific part (the
prompt dict, sampling params, capabilities, voices) lives in one adapter per model under
``backends/vllm_omni/models/`` (Qwen3-TTS, Fish Speech S2 Pro, CosyVoice3, MOSS-TTS-Nano, VoxCPM2);
the adapter comes from ``adapter=`` or is inferred from the model directory. ``vllm_omni`` is
imported lazily (the registry imports every backend module at discovery and ``vllm_omni`` is a
GPU-only extra: ``pip install 'listenlab[gpu]'``).

Engine interface, read from ``vllm-project/vllm-omni`` (facts, not code, carried over):

* ``vllm_omni/entrypoints/async_omni.py`` @ 012213c4: ``AsyncOmni(*, model, **kwargs)``;
  ``generate(prompt, request_id=…, *, sampling_params_list=…, output_modalities=…)`` is an
  async generator of ``OmniRequestOutput``; the caller's request id is used for ``abort``
  (internally it gets a random suffix) and is set back on every output; the loop ends on the
  output with ``finished``; ``abort(request_id)``, ``shutdown()``, ``check_health()``,
  ``default_sampling_params_list``, ``model_config``. Closing the generator aborts too.
* ``vllm_omni/outputs.py`` (the version with ``error`` / ``from_error``): the payload is the
  ``multimodal_output`` mapping of the first completion output, else the output's own.
* ``vllm_omni/entrypoints/openai/serving_speech.py`` ``_extract_audio_output`` (key ``audio``
  or ``model_outputs``) and ``_generate_audio_chunks`` (a list is the cumulative list of
  chunks: emit ``audio[prev_count:]``; a bare tensor is one new chunk and counts as one; ``sr``
  may be an int, a 0-d tensor or a list whose last item counts; a rate change mid-stream is an
  error; ``_infer_audio_num_channels``: ``[T]`` mono, ``[C, T]`` or ``[T, C]`` with C in 1-2).
* ``vllm_omni/entrypoints/utils.py``: ``coerce_param_message_types(params, is_streaming)``
  (CUMULATIVE/DELTA/FINAL_ONLY, PR #2911 which fixed replayed audio, issues #3032/#2907).
* ``vllm_omni.platforms.current_omni_platform.is_available()`` / ``is_cuda()`` for the device.

Weights are never downloaded: the model must be a local directory or already in the local
Hugging Face cache, and the engine runs with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backends.base import AudioChunk, Backend, Capabilities, Health, SpeechRequest, Voice
from backends.errors import BackendError, InvalidRequest, ModelUnavailable
from backends.registry import register
from backends.vllm_omni.models import ModelAdapter, adapter_class, make_adapter

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'listenlab[gpu]' on a CUDA machine"
# Spec parameters the backend consumes; adapters add theirs (``spec_options``); every other one
# is passed to AsyncOmni as an engine kwarg.
_OWN_PARAMS = {"model", "adapter", "max_new_tokens", "stage_configs", "deploy_config"}


# --------------------------------------------------------------------------- preflight
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


def audio_payload(res: Any) -> tuple[Mapping[str, Any], str] | None:
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
class OutputCursor:
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


@register
class VllmOmniBackend(Backend):
    """``vllm-omni?model=/path[&adapter=fish_speech][&deploy_config=/x.yaml][&…]``

    Unknown spec parameters are passed to ``AsyncOmni`` as engine kwargs (``async_chunk``,
    ``stage_init_timeout``, ``enforce_eager``, …). The model loads on :meth:`start` or on the
    first request.
    """

    loads_model = True
    name = "vllm-omni"

    def __init__(
        self,
        model_path: Path,
        *,
        adapter: ModelAdapter,
        engine_kwargs: dict[str, Any] | None = None,
    ):
        self.model_path = model_path
        self.adapter = adapter
        self.unit = getattr(adapter, "unit", None)  # its model's rules, whatever the served name
        self.engine_kwargs = dict(engine_kwargs or {})
        self._engine: Any = None
        self._start_lock = asyncio.Lock()
        self._active: set[str] = set()
        """Request ids in flight: ``abort`` is by id, so two live requests may not share one."""

    @classmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> VllmOmniBackend:
        params = dict(params)
        model = params.get("model")
        if not model:
            raise InvalidRequest("the vllm-omni backend needs model=/local/path/or/hf-id")
        name = params.get("adapter")
        if name:
            adapter_class(name)  # an unknown name fails before anything heavy
        _import_vllm_omni()
        _require_accelerator()
        path = resolve_model(model)
        if not name:
            from backends.vllm_omni.models import infer_adapter

            name = infer_adapter(path)
        spec_options = adapter_class(name).spec_options
        options = {k: v for k, v in params.items() if k in spec_options or k == "max_new_tokens"}
        adapter = make_adapter(path, name, options)
        own = _OWN_PARAMS | spec_options
        kwargs = {k: _engine_kwarg(v) for k, v in params.items() if k not in own}
        if params.get("stage_configs"):
            # vllm-omni 0.30.0 refuses it (entrypoints/utils.prepare_stage_config_inputs)
            raise InvalidRequest(
                "stage_configs= is no longer supported by vLLM-Omni (0.30.0 refuses "
                "stage_configs_path): pass the deploy YAML as deploy_config=/path/to/deploy.yaml"
            )
        if params.get("deploy_config"):
            kwargs["deploy_config"] = params["deploy_config"]
        for key in ("deploy_config",):
            if key in kwargs and not Path(kwargs[key]).is_file():
                raise InvalidRequest(f"{key} file {kwargs[key]!r} does not exist")
        return cls(path, adapter=adapter, engine_kwargs=kwargs)

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
            try:
                await asyncio.to_thread(self.adapter.load, engine)
            except BaseException:
                engine.shutdown()
                raise
            self._engine = engine

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()

    # -- metadata

    @property
    def capabilities(self) -> Capabilities:
        return self.adapter.capabilities()

    async def voices(self) -> list[Voice]:
        return self.adapter.voices()

    async def health(self) -> Health:
        label = f"vllm-omni {self.adapter.name} {self.model_path.name}"
        if self._engine is None:
            return Health(True, f"{label} (not loaded yet)")
        try:
            await self._engine.check_health()
        except Exception as e:
            return Health(False, f"vllm-omni engine is not healthy: {e}")
        return Health(True, label)

    # -- request mapping

    def _check(self, request: SpeechRequest) -> SpeechRequest:
        request = request.validated(None)  # vLLM refuses a prompt over max_model_len itself
        if request.request_id in self._active:
            raise InvalidRequest(f"request id {request.request_id!r} is already streaming")
        self.adapter.check(request)
        return request

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        """The engine prompt for one request (the adapter's layout for this model)."""
        return self.adapter.build_prompt(request)

    def sampling_params(self, request: SpeechRequest) -> list[Any]:
        """The engine's per-stage defaults, set for streaming, with the model's and the
        request's overrides (copies; the engine's defaults are never changed)."""
        return self.adapter.sampling_params(self._engine, request)

    # -- streaming

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """The engine's audio as it comes; with ``speed != 1``, vLLM-Omni's post-processing
        instead: the model generates at its own pace and the finished audio is stretched to
        ``1/speed`` of its length (:mod:`backends.vllm_omni.speed`), one chunk at the end."""
        request = self._check(request)  # typed errors before the engine is loaded or called
        if request.speed == 1.0:
            async with contextlib.aclosing(self._generate(request)) as gen:
                async for chunk in gen:  # closing this stream closes (aborts) the engine's
                    yield chunk
            return
        from dataclasses import replace

        from backends.vllm_omni.speed import stretch_pcm

        async with contextlib.aclosing(self._generate(replace(request, speed=1.0))) as gen:
            chunks = [c async for c in gen]
        pcm = np.concatenate([c.pcm for c in chunks])
        rate, channels = chunks[0].sample_rate, chunks[0].channels
        yield AudioChunk(stretch_pcm(pcm, channels, request.speed), rate, channels, 0)

    async def _generate(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        await self.start()
        engine = self._engine
        prompt = self.build_prompt(request)
        params = self.sampling_params(request)
        rid = request.request_id
        self._active.add(rid)
        generator = engine.generate(
            prompt=prompt, request_id=rid, sampling_params_list=params, output_modalities=["audio"]
        )
        cursor = OutputCursor()
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
                    if (found := audio_payload(res)) is not None:
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
