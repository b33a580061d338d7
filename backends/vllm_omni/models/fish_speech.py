"""Fish Speech S2 Pro (``fishaudio/s2-pro``): slow AR (Qwen3 chat prompt) + DAC decoder.

Read from ``vllm-project/vllm-omni``:

* ``vllm_omni/model_executor/models/fish_speech/prompt_utils.py``: the text-only prompt is
  ``<|im_start|>system\\nconvert the provided text to speech<|im_end|>\\n<|im_start|>user\\n
  {text}<|im_end|>\\n<|im_start|>assistant\\n<|voice|>`` (control tokens by id, plain text
  encoded without special tokens); cloning puts ``convert the provided text to speech reference
  to the following:\\n\\nText:\\n{ref_text}\\n\\nSpeech:\\n`` plus ``<|audio_start|>`` semantic
  codes ``<|audio_end|>`` in the system turn. Text normalisation turns ``<speaker:N>`` into
  ``<|speaker:N|>`` and refuses any other ``<|…|>`` control token; the reference transcript gets
  ``<|speaker:0|>`` when it names no speaker.
* ``serving_speech.py`` ``_build_fish_speech_prompt``: text-only
  ``additional_information = {"text": [normalized_text]}`` (+ ``max_new_tokens: [n]``); the
  structured clone sends scalars ``{"text", "ref_text", "ref_audio_wav": float32 tensor,
  "ref_audio_sr": int, "fish_structured_voice_clone": True}`` (+ ``max_new_tokens``) with
  placeholder ids ``[1] * prompt_len``; ``_estimate_fish_prompt_len`` /
  ``_estimate_fish_ref_code_len``: semantic length = ceil(ceil(n * 44100 / sr) / 2048)
  (``fish_speech/dac_utils.py``: ``DAC_SAMPLE_RATE`` 44100, ``DAC_HOP_LENGTH`` 2048).
* ``tts_adapters/fish_speech.py``: no preset voices; a reference clip needs ``ref_text``
  ("Voice cloning requires 'ref_text'"); ``max_new_tokens`` 1-4096; stage key
  ``fish_speech_slow_ar``; a ``cache_salt`` over the conditioning.
* ``examples/offline_inference/fish_speech/end2end.py``: engine defaults for sampling
  (``AsyncOmni.generate`` without params), output ``mm["audio"]`` + ``mm["sr"]``; 44.1 kHz mono
  (``examples/online_serving/text_to_speech/README.md``, ``fish_speech/gradio_demo.py``).
  That (older) example still builds ``<|speaker:0|>{text}`` through the chat template and passes
  ``ref_audio`` as a path; listenlab follows the newer serving layout above.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from typing import Any

from backends.base import SpeechRequest
from backends.errors import InvalidRequest, ModelUnavailable
from backends.vllm_omni.model_table import seed_model
from backends.vllm_omni.models.base import (
    ModelAdapter,
    as_tensor,
    decode_ref_audio,
    load_tokenizer,
    max_new_tokens,
)

log = logging.getLogger(__name__)

TEXT_ONLY_SYSTEM = "convert the provided text to speech"
CLONE_SYSTEM_PREFIX = "convert the provided text to speech reference to the following:\n\nText:\n"
CLONE_SYSTEM_SUFFIX = "\n\nSpeech:\n"
DAC_SAMPLE_RATE = 44100
DAC_HOP_LENGTH = 2048
_LEGACY_SPEAKER = re.compile(r"<speaker:(\d+)>")
_SPEAKER = re.compile(r"<\|speaker:\d+\|>")
_CONTROL = re.compile(r"<\|[^>]+\|>")


def normalize_text(text: str, *, default_speaker: bool = False) -> str:
    """Speaker tags to ``<|speaker:N|>``; any other control token is refused (prompt injection)."""
    text = _LEGACY_SPEAKER.sub(r"<|speaker:\1|>", text)
    bad = sorted({t for t in _CONTROL.findall(text) if not _SPEAKER.fullmatch(t)})
    if bad:
        raise InvalidRequest(f"Fish Speech input contains unsupported control token(s): {bad}")
    if default_speaker and not _SPEAKER.search(text):
        text = f"<|speaker:0|>{text}"
    return text


def semantic_len(n_samples: int, sr: int) -> int:
    """DAC frames the reference clip becomes (``_estimate_fish_ref_code_len``)."""
    return max(1, math.ceil(max(1, math.ceil(n_samples * DAC_SAMPLE_RATE / sr)) / DAC_HOP_LENGTH))


class FishSpeech(ModelAdapter):
    name = "fish_speech"
    aliases = ("fish_tts", "fish_speech_slow_ar")
    facts = seed_model("fish_speech")
    # ASSUMED: the s2-pro config.json names; vLLM-Omni registers the stage architectures below
    # (vllm_omni/model_executor/models/registry.py) and falls back to the directory name.
    architectures = frozenset(
        {"FishSpeechSlowARForConditionalGeneration", "FishQwen3OmniForCausalLM"}
    )
    model_types = frozenset({"fish_speech", "fish_qwen3_omni"})
    name_keys = ("fishspeech", "s2pro", "fishaudio")
    sources = (
        "vllm_omni/model_executor/models/fish_speech/prompt_utils.py",
        "vllm_omni/entrypoints/openai/serving_speech.py (_build_fish_speech_prompt, "
        "_estimate_fish_prompt_len)",
        "vllm_omni/entrypoints/openai/tts_adapters/fish_speech.py",
        "vllm_omni/model_executor/models/fish_speech/dac_utils.py",
        "examples/offline_inference/fish_speech/end2end.py",
    )

    def __init__(self, ctx, options):
        super().__init__(ctx, options)
        self._tokenizer: Any = None

    def load(self, engine: Any) -> None:
        try:
            self._tokenizer = load_tokenizer(self.ctx.model_path)
        except Exception as e:
            raise ModelUnavailable(
                f"Fish Speech needs the tokenizer shipped in {self.ctx.model_path}: {e}"
            ) from e

    def check(self, request: SpeechRequest) -> None:
        super().check(request)
        normalize_text(request.text)
        if request.ref_audio is not None:
            if not (request.ref_text or "").strip():
                raise InvalidRequest(
                    "Voice cloning requires 'ref_text' (transcript of the reference audio)"
                )
            normalize_text(request.ref_text or "", default_speaker=True)
        elif request.ref_text:
            raise InvalidRequest("ref_text needs a reference clip (ref_audio)")

    # -- token layout

    def _control(self, token: str) -> list[int]:
        tok = self._tokenizer
        tid = tok.convert_tokens_to_ids(token)
        if tid is None or tid == getattr(tok, "unk_token_id", None):
            raise ModelUnavailable(f"the Fish Speech tokenizer lacks the control token {token}")
        return [int(tid)]

    def _plain(self, text: str) -> list[int]:
        return [int(t) for t in self._tokenizer.encode(text, add_special_tokens=False)]

    def _turn(self, role: str) -> list[int]:
        return self._control("<|im_start|>") + self._plain(f"{role}\n")

    def _tail(self, text: str) -> list[int]:
        """User turn with the text, then the assistant turn opened in voice mode."""
        return (
            self._control("<|im_end|>")
            + self._plain("\n")
            + self._turn("user")
            + self._plain(text)
            + self._control("<|im_end|>")
            + self._plain("\n")
            + self._turn("assistant")
            + self._control("<|voice|>")
        )

    def text_only_ids(self, text: str) -> list[int]:
        return self._turn("system") + self._plain(TEXT_ONLY_SYSTEM) + self._tail(text)

    def clone_prompt_len(self, text: str, ref_text: str, n_semantic: int) -> int:
        system = CLONE_SYSTEM_PREFIX + ref_text + CLONE_SYSTEM_SUFFIX
        head = (
            self._turn("system")
            + self._plain(system)
            + self._control("<|audio_start|>")
            + [0] * n_semantic
            + self._control("<|audio_end|>")
        )
        return len(head) + len(self._tail(text))

    # -- request

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        self.check(request)
        if self._tokenizer is None:
            raise ModelUnavailable("the Fish Speech tokenizer is not loaded (engine not started)")
        n = max_new_tokens(request, self.default_max_new_tokens)
        text = normalize_text(request.text)
        salt = hashlib.sha256(repr((text, request.ref_text, n)).encode())
        if request.ref_audio is None:
            info: dict[str, Any] = {"text": [text]}
            if n is not None:
                info["max_new_tokens"] = [n]
            ids = self.text_only_ids(text)
        else:
            ref_text = normalize_text(request.ref_text or "", default_speaker=True)
            wav, sr = decode_ref_audio(request.ref_audio)
            salt.update(wav.tobytes())
            info = {
                "text": text,
                "ref_text": ref_text,
                "ref_audio_wav": as_tensor(wav),
                "ref_audio_sr": sr,
                "fish_structured_voice_clone": True,
            }
            if n is not None:
                info["max_new_tokens"] = n
            ids = [1] * self.clone_prompt_len(text, ref_text, semantic_len(len(wav), sr))
        return {
            "prompt_token_ids": ids,
            "additional_information": info,
            "cache_salt": f"listenlab-{salt.hexdigest()[:32]}",
        }
