"""CosyVoice3 (``FunAudioLLM/Fun-CosyVoice3-0.5B-2512``): zero-shot cloning only.

Read from ``vllm-project/vllm-omni``:

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
from backends.vllm_omni.model_table import seed_model
from backends.vllm_omni.models.base import (
    ModelAdapter,
    decode_ref_audio,
    load_tokenizer,
    max_new_tokens,
)

log = logging.getLogger(__name__)

PROMPT_DELIMITER = "<|endofprompt|>"
PROMPT_PREFIX = f"You are a helpful assistant.{PROMPT_DELIMITER}"
MIN_REF_RATE = 16000
MAX_DYNAMIC_TOKENS = 2048


def wrap_ref_text(ref_text: str) -> str:
    return ref_text if PROMPT_DELIMITER in ref_text else f"{PROMPT_PREFIX}{ref_text}"


class CosyVoice3(ModelAdapter):
    name = "cosyvoice3"
    facts = seed_model("cosyvoice3")
    architectures = frozenset({"CosyVoice3Model"})
    model_types = frozenset({"cosyvoice3"})
    name_keys = ("cosyvoice3",)
    requires_ref_audio = True
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

    def check(self, request: SpeechRequest) -> None:
        super().check(request)
        if not (request.ref_text or "").strip():
            raise InvalidRequest(
                "CosyVoice3 requires 'ref_text' (transcript of the reference audio)"
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
