"""Fish Speech S2 Pro (``fishaudio/s2-pro``): slow AR (Qwen3 chat prompt) + DAC decoder; the unit.

The model's facts, request rules and chunk schedule (``MODEL``, each fact with the line of
vLLM-Omni 0.30.0 it was read from) and the embedded adapter (:class:`FishSpeech`, ``ADAPTER``).

The embedded adapter was read from ``vllm-project/vllm-omni``:

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
from backends.vllm_omni.models.base import (
    ModelAdapter,
    as_tensor,
    decode_ref_audio,
    load_tokenizer,
    max_new_tokens,
)
from backends.vllm_omni.models.unit import ChunkSchedule, ModelUnit, cite
from backends.vllm_omni.rules import CLONE_REF_TEXT, SpeechRules

log = logging.getLogger(__name__)

TEXT_ONLY_SYSTEM = "convert the provided text to speech"
CLONE_SYSTEM_PREFIX = "convert the provided text to speech reference to the following:\n\nText:\n"
CLONE_SYSTEM_SUFFIX = "\n\nSpeech:\n"
DAC_SAMPLE_RATE = 44100
"""``fish_speech/dac_utils.py:11``: the DAC codec's rate (the served rate)."""
DAC_HOP_LENGTH = 2048
"""``fish_speech/dac_utils.py:12``: samples per codec frame."""
_LEGACY_SPEAKER = re.compile(r"<speaker:(\d+)>")
_SPEAKER = re.compile(r"<\|speaker:\d+\|>")
_CONTROL = re.compile(r"<\|[^>]+\|>")


# --------------------------------------------------------------------------- the unit

ADAPTER_FILE = "vllm_omni/entrypoints/openai/tts_adapters/fish_speech.py"
DEPLOY = "vllm_omni/deploy/fish_qwen3_omni.yaml"
DAC = "vllm_omni/model_executor/models/fish_speech/dac_utils.py"
RULE_SOURCES = (
    cite(ADAPTER_FILE, 28, 'name = "fish_tts"'),
    cite(ADAPTER_FILE, 125, "def validate(self, request", "the shared check of rules.py"),
    cite(ADAPTER_FILE, 128, "server._apply_uploaded_speaker(request)", "no built-in speakers"),
    cite(ADAPTER_FILE, 139, "Voice cloning requires 'ref_text'"),
    cite(
        "vllm_omni/entrypoints/openai/tts_adapters/base.py",
        222,
        "supported_output_sample_rates: ClassVar[frozenset[int]] = frozenset()",
        "not overridden: sample_rate is refused",
    ),
)

MODEL = ModelUnit(
    name="fish_speech",
    title="Fish Speech S2 Pro",
    keys=("s2-pro", "fish"),
    checkpoint="fishaudio/s2-pro",
    sample_rate=DAC_SAMPLE_RATE,
    channels=1,
    cloning=True,
    max_model_len=16384,
    rules=SpeechRules(
        "fish_tts",
        "; ".join(str(s) for s in RULE_SOURCES),
        ref_text_message=CLONE_REF_TEXT,
        no_speakers_label="Fish Speech",
    ),
    schedule=ChunkSchedule(
        frame_hz=DAC_SAMPLE_RATE / DAC_HOP_LENGTH,
        first_frames=(4,) * 6,
        chunk_frames=25,
        async_chunk=True,
        left_context_frames=25,
        sources=(
            cite(DEPLOY, 5, "async_chunk: true"),
            cite(DEPLOY, 19, "initial_codec_chunk_frames: 4"),
            cite(DEPLOY, 17, "codec_chunk_frames: 25"),
            cite(DEPLOY, 18, "codec_left_context_frames: 25"),
            cite(
                "vllm_omni/model_executor/stage_input_processors/fish_speech.py",
                200,
                "elif initial_chunk_size > 0 and length <= chunk_size:",
                "initial-size chunks while the stream is at most codec_chunk_frames long",
            ),
            cite(
                "vllm_omni/model_executor/stage_input_processors/fish_speech.py",
                211,
                "initial_coverage = (chunk_size // initial_chunk_size) * initial_chunk_size",
                "(25 // 4) * 4 = 24 frames as six 4-frame chunks, then 25-frame chunks",
            ),
            cite(DAC, 12, "DAC_HOP_LENGTH = 2048", "one codec frame: 44100 / 2048 = 21.53 Hz"),
        ),
        assumptions=(
            "The high-concurrency deploys add fish_speech_single_initial_chunk (one 4-frame "
            "chunk) and backlog-adaptive steady chunks; the profile follows the default deploy."
        ),
    ),
    sources={
        "sample_rate": (cite(DAC, 11, "DAC_SAMPLE_RATE = 44100"),),
        "channels": (
            cite(
                "vllm_omni/model_executor/models/fish_speech/fish_speech_dac_decoder.py",
                472,
                "audios[idx] = wav.to(dtype=torch.float32).reshape(-1)",
                "each request's waveform is 1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 134, "if request.ref_audio is not None:"),),
        "instructions": (
            cite(ADAPTER_FILE, 125, "def validate(self, request", "reads no instructions"),
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
        "max_model_len": (cite(DEPLOY, 34, "max_model_len: 16384", "stage 0"),),
    },
)


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
    unit = MODEL
    aliases = ("fish_tts", "fish_speech_slow_ar")
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


ADAPTER = FishSpeech
