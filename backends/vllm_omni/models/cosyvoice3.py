"""CosyVoice3 (``FunAudioLLM/Fun-CosyVoice3-0.5B-2512``): zero-shot cloning only; the unit.

The model's facts, request rules and chunk schedule (``MODEL``, each fact with the line of
vLLM-Omni 0.30.0 it was read from) and the embedded adapter (:class:`CosyVoice3`, ``ADAPTER``).

The embedded adapter was read from ``vllm-project/vllm-omni``:

* ``examples/offline_inference/cosyvoice3/verify_e2e_cosyvoice.py``: the prompt is
  ``{"prompt": text, "multi_modal_data": {"audio": (float32 samples, sr)},
  "mm_processor_kwargs": {"prompt_text": "You are a helpful assistant.<|endofprompt|>…",
  "sample_rate": sr}}``; the reference must be at least 16 kHz; stage-0 sampling
  ``temperature 1.0, top_p 0.8, top_k 25, repetition_penalty 2.0``, ``min_tokens`` /
  ``max_tokens`` = text tokens × ``min_token_text_ratio`` (2) / ``max_token_text_ratio`` (20),
  ``stop_token_ids [6562]`` (6561 + 1). That is the example's; the served engine uses the
  deploy YAML's stage 0 (vllm-omni 0.30.0 ``deploy/cosyvoice3.yaml``: ``max_tokens 2048,
  top_k 25, top_p 0.8, repetition_penalty 1.0001``), which this backend keeps.
* ``tts_adapters/cosyvoice3.py``: ``ref_audio`` and ``ref_text`` are both required; the
  transcript is wrapped in ``You are a helpful assistant.<|endofprompt|>`` unless it already
  holds the delimiter (issue #4644: without it the talker re-speaks the reference); stage key
  ``cosyvoice3_talker``.
* ``serving_speech.py`` ``_apply_cosyvoice3_dynamic_tokens``: on top of the deploy defaults,
  stage-0 ``min_tokens = max(1, n * min_ratio)`` and ``max_tokens = min(2048, n * max_ratio)``
  with ``n`` the tokenized text length (tokenizer in ``<model>/<qwen_pretrain_path>``).
* ``vllm_omni/model_executor/models/cosyvoice3/config.py``: ``sample_rate`` 24000 (mono).

ASSUMED: the text is counted with the Hugging Face tokenizer of ``qwen_pretrain_path``
(default ``CosyVoice-BlankEN``) instead of vLLM-Omni's ``get_qwen_tokenizer`` wrapper (same
Qwen BPE; the wrapper only adds special tokens that plain text never contains).
"""

from __future__ import annotations

import logging
from typing import Any

from backends.base import SpeechRequest
from backends.errors import InvalidRequest
from backends.vllm_omni.models.base import (
    ModelAdapter,
    decode_ref_audio,
    load_tokenizer,
    max_new_tokens,
)
from backends.vllm_omni.models.unit import ChunkSchedule, ModelUnit, cite
from backends.vllm_omni.rules import SpeechRules

log = logging.getLogger(__name__)

PROMPT_DELIMITER = "<|endofprompt|>"
PROMPT_PREFIX = f"You are a helpful assistant.{PROMPT_DELIMITER}"
MIN_REF_RATE = 16000
MAX_DYNAMIC_TOKENS = 2048


# --------------------------------------------------------------------------- the unit

ADAPTER_FILE = "vllm_omni/entrypoints/openai/tts_adapters/cosyvoice3.py"
DEPLOY = "vllm_omni/deploy/cosyvoice3.yaml"
CONFIG = "vllm_omni/transformers_utils/configs/cosyvoice3.py"
PROCESSOR = "vllm_omni/model_executor/stage_input_processors/cosyvoice3.py"
RULE_SOURCES = (
    cite(ADAPTER_FILE, 59, "def validate(self, request", "the shared check of rules.py"),
    cite(ADAPTER_FILE, 70, "CosyVoice3 requires 'ref_audio'"),
    cite(ADAPTER_FILE, 77, "CosyVoice3 requires 'ref_text'"),
    cite(
        "vllm_omni/entrypoints/openai/tts_adapters/base.py",
        222,
        "supported_output_sample_rates: ClassVar[frozenset[int]] = frozenset()",
        "not overridden: sample_rate is refused",
    ),
)

MODEL = ModelUnit(
    name="cosyvoice3",
    title="CosyVoice3",
    keys=("cosyvoice",),
    checkpoint="FunAudioLLM/Fun-CosyVoice3-0.5B-2512",
    sample_rate=24000,
    channels=1,
    cloning=True,
    rules=SpeechRules(
        "cosyvoice3",
        "; ".join(str(s) for s in RULE_SOURCES),
        requires_ref_audio="CosyVoice3 requires 'ref_audio' (reference audio for voice cloning)",
        ref_text_message="CosyVoice3 requires 'ref_text' (transcript of the reference audio)",
        no_speakers_label="CosyVoice3",
    ),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(15, 30),
        chunk_frames=60,
        async_chunk=True,
        left_context_frames=25,
        sources=(
            cite(DEPLOY, 27, "async_chunk: true"),
            cite(
                DEPLOY,
                36,
                "codec_chunk_frames: 15",
                "the first hop; the deploy sets no initial_codec_chunk_frames",
            ),
            cite(DEPLOY, 37, "codec_left_context_frames: 25"),
            cite(
                PROCESSOR,
                114,
                'stream_scale_factor = int(cfg.get("codec_stream_scale_factor", 2))',
                "the hop doubles after every emit",
            ),
            cite(
                PROCESSOR,
                113,
                'max_chunk_size = int(cfg.get("codec_max_chunk_frames", 4 * chunk_size))',
                "up to 4 x 15 = 60 frames: hops 15, 30, 60, 60, ...",
            ),
            cite(CONFIG, 24, "self.token_frame_rate = 25", "25 speech tokens per second"),
        ),
        assumptions=(
            "The first chunk assumes a reference prompt whose token count is already a multiple "
            "of 15 (prompt padding 0; real clips add 0-14 tokens to chunk 0). HiFT's overlap "
            "cache can move seams by a few ms."
        ),
    ),
    sources={
        "sample_rate": (cite(CONFIG, 16, "self.sample_rate = 24000"),),
        "channels": (
            cite(
                "vllm_omni/model_executor/models/cosyvoice3/cosyvoice3.py",
                1239,
                "audio = tts_speech.reshape(-1).to(dtype=torch.float32)",
                "each request's waveform is 1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 70, "CosyVoice3 requires 'ref_audio'"),),
        "instructions": (
            cite(ADAPTER_FILE, 59, "def validate(self, request", "reads no instructions"),
        ),
        "speed_streaming": (
            cite(
                "vllm_omni/entrypoints/openai/tts_adapters/base.py",
                219,
                "native_speed_control: ClassVar[bool] = False",
                "not overridden",
            ),
        ),
        "rules": RULE_SOURCES,
    },
)


def wrap_ref_text(ref_text: str) -> str:
    return ref_text if PROMPT_DELIMITER in ref_text else f"{PROMPT_PREFIX}{ref_text}"


class CosyVoice3(ModelAdapter):
    unit = MODEL
    architectures = frozenset({"CosyVoice3Model"})
    model_types = frozenset({"cosyvoice3"})
    name_keys = ("cosyvoice3",)
    sources = (
        "examples/offline_inference/cosyvoice3/verify_e2e_cosyvoice.py",
        "vllm_omni/entrypoints/openai/tts_adapters/cosyvoice3.py",
        "vllm_omni/entrypoints/openai/serving_speech.py (_apply_cosyvoice3_dynamic_tokens)",
        "vllm_omni/model_executor/models/cosyvoice3/config.py",
    )

    def __init__(self, ctx, options):
        super().__init__(ctx, options)
        self._tokenizer: Any = None
        cfg = ctx.hf_config
        self.min_ratio = float(cfg.get("min_token_text_ratio", 2))
        self.max_ratio = float(cfg.get("max_token_text_ratio", 20))

    def load(self, engine: Any) -> None:
        path = self.ctx.model_path / str(
            self.ctx.hf_config.get("qwen_pretrain_path", "CosyVoice-BlankEN")
        )
        try:
            self._tokenizer = load_tokenizer(path)
        except Exception as e:
            log.warning(
                "vllm-omni cosyvoice3: no text tokenizer at %s (%s); token limits stay at the "
                "deploy defaults",
                path,
                e,
            )

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        self.check(request)
        wav, sr = decode_ref_audio(request.ref_audio or b"")
        if sr < MIN_REF_RATE:
            raise InvalidRequest(
                f"CosyVoice3 needs a reference clip of at least {MIN_REF_RATE} Hz; this one is "
                f"{sr} Hz"
            )
        return {
            "prompt": request.text,
            "multi_modal_data": {"audio": (wav, sr)},
            "mm_processor_kwargs": {
                "prompt_text": wrap_ref_text(request.ref_text or ""),
                "sample_rate": sr,
            },
        }

    def text_tokens(self, text: str) -> int | None:
        if self._tokenizer is None:
            return None
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def adjust_sampling(self, params: list[Any], request: SpeechRequest) -> None:
        stage0 = params[0]
        n = self.text_tokens(request.text)
        if n is not None:
            stage0.min_tokens = max(1, int(n * self.min_ratio))
            stage0.max_tokens = min(MAX_DYNAMIC_TOKENS, int(n * self.max_ratio))
        cap = max_new_tokens(request, self.default_max_new_tokens)
        if cap is not None:
            stage0.max_tokens = cap
            stage0.min_tokens = min(getattr(stage0, "min_tokens", 0) or 0, cap)


ADAPTER = CosyVoice3
