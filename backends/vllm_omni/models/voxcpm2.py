"""VoxCPM2 (``openbmb/VoxCPM2``): AR base LM + LocDiT + AudioVAE, 48 kHz; the unit.

The model's facts, request rules and chunk schedule (``MODEL``, each fact with the line of
vLLM-Omni 0.30.0 it was read from) and the embedded adapter (:class:`VoxCPM2`, ``ADAPTER``).

The embedded adapter was read from ``vllm-project/vllm-omni``:

* ``vllm_omni/model_executor/models/voxcpm2/voxcpm2_talker.py`` ``build_voxcpm2_prompt``
  (used by the server and the offline example so the talker's prefill-length check holds):
  ``ids`` = ``tokenizer.encode(text, add_special_tokens=True)`` with multi-character CJK tokens
  split into single characters (``build_cjk_split_map``) and the leading BOS dropped;
  ``additional_information = {"text_token_ids": [ids]}``; prefill = ``len(ids) + 1``
  (audio_start). With a clip: ``ref_len = ceil(ceil(n * vae.sample_rate / sr) / (patch_size *
  prod(vae.encoder_rates)))``; with its transcript (continuation) ``prompt_audio: [[samples,
  sr]]`` + ``prompt_text: [ref_text]`` and prefill ``+= ref_len + len(ref_ids)``; without it
  (isolated reference) ``reference_audio: [[samples, sr]]`` and prefill ``+= ref_len + 2``.
  ``prompt_token_ids = [1] * prefill``.
* ``serving_speech.py`` ``_build_voxcpm2_prompt``: ``ref_audio`` (+ optional ``ref_text``) go
  to the builder above; ``hf_config`` is the model's ``config.json``.
* ``tts_adapters/voxcpm2.py``: the only built-in voice is ``"default"`` (zero-shot, no clone);
  ``apply_max_new_tokens``; architecture ``VoxCPM2TalkerForConditionalGeneration``, stage key
  ``latent_generator``.
* ``examples/offline_inference/voxcpm2/end2end.py``: audio under ``model_outputs`` (``audio``
  as a fallback), ``SAMPLE_RATE = 48_000``, mono; engine default sampling params.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from backends.base import SpeechRequest
from backends.errors import InvalidRequest, ModelUnavailable
from backends.vllm_omni.models.base import ModelAdapter, decode_ref_audio, load_tokenizer
from backends.vllm_omni.models.unit import ChunkSchedule, ModelUnit, cite
from backends.vllm_omni.rules import SpeechRules

ADAPTER_FILE = "vllm_omni/entrypoints/openai/tts_adapters/voxcpm2.py"
DEPLOY = "vllm_omni/deploy/voxcpm2.yaml"
TALKER = "vllm_omni/model_executor/models/voxcpm2/voxcpm2_talker.py"
RULE_SOURCES = (
    cite(ADAPTER_FILE, 90, "def validate(self, request", "the shared check of rules.py"),
    cite(ADAPTER_FILE, 101, "Invalid voice '{request.voice}'. Supported: {supported}"),
    cite(ADAPTER_FILE, 178, 'return ["default"]', "its one built-in voice"),
    cite(
        "vllm_omni/entrypoints/openai/tts_adapters/base.py",
        222,
        "supported_output_sample_rates: ClassVar[frozenset[int]] = frozenset()",
        "not overridden: sample_rate is refused",
    ),
)

MODEL = ModelUnit(
    name="voxcpm2",
    title="VoxCPM2",
    keys=("voxcpm",),
    checkpoint="openbmb/VoxCPM2",
    sample_rate=48000,
    channels=1,
    cloning=True,
    presets=("default",),
    max_model_len=4096,
    rules=SpeechRules(
        "voxcpm2",
        "; ".join(str(s) for s in RULE_SOURCES),
        checks_voice=True,
        builtin_voices=("default",),
    ),
    schedule=ChunkSchedule(
        frame_hz=6.25,
        first_frames=(3,),
        chunk_frames=3,
        async_chunk=False,
        sources=(
            cite(DEPLOY, 6, "async_chunk: false"),
            cite(DEPLOY, 34, "audio_emit_every: 1"),
            cite(DEPLOY, 35, "vae_decode_every: 3", "one emit = 3 patches"),
        ),
        assumptions=(
            "One patch = 160 ms (6.25 Hz: patch size 4 over a 25 Hz latent, as VoxCPM 1.5 "
            "documents; VoxCPM2's patch size 4 per llama.cpp-omni's README), not stated in "
            "vLLM-Omni's files. A first chunk of the same 3 patches is assumed (no separate "
            "first-chunk setting was found)."
        ),
    ),
    sources={
        "sample_rate": (
            cite(TALKER, 914, 'self._sample_rate = getattr(self.config, "sample_rate", 48000)'),
        ),
        "channels": (
            cite(
                TALKER,
                3086,
                "chunks = [audio_by_req[req_id].reshape(-1) for req_id in ready_req_ids]",
                "each request's waveform is 1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 72, "if request.ref_audio is not None:"),),
        "instructions": (
            cite(ADAPTER_FILE, 90, "def validate(self, request", "reads no instructions"),
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
        "presets": (cite(ADAPTER_FILE, 178, 'return ["default"]', "its one built-in voice"),),
        "max_model_len": (cite(DEPLOY, 29, "max_model_len: 4096"),),
    },
)


def is_cjk(c: str) -> bool:
    cp = ord(c)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0xF900 <= cp <= 0xFAFF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2F800 <= cp <= 0x2FA1F
    )


class VoxCPM2(ModelAdapter):
    unit = MODEL
    # ASSUMED: openbmb/VoxCPM2's config.json may name another class; the talker class below is
    # what vLLM-Omni registers, and the directory name is the fallback (as vLLM-Omni does).
    architectures = frozenset({"VoxCPM2TalkerForConditionalGeneration", "VoxCPM2Model"})
    model_types = frozenset({"voxcpm2"})
    name_keys = ("voxcpm2",)
    sources = (
        "vllm_omni/model_executor/models/voxcpm2/voxcpm2_talker.py (build_voxcpm2_prompt)",
        "vllm_omni/entrypoints/openai/serving_speech.py (_build_voxcpm2_prompt)",
        "vllm_omni/entrypoints/openai/tts_adapters/voxcpm2.py",
        "examples/offline_inference/voxcpm2/end2end.py",
    )

    def __init__(self, ctx, options):
        super().__init__(ctx, options)
        self._tokenizer: Any = None
        self._split: dict[int, list[int]] = {}

    def load(self, engine: Any) -> None:
        try:
            tok = load_tokenizer(self.ctx.model_path)
        except Exception as e:
            raise ModelUnavailable(
                f"VoxCPM2 needs the tokenizer shipped in {self.ctx.model_path}: {e}"
            ) from e
        split: dict[int, list[int]] = {}
        for token, tid in tok.get_vocab().items():
            clean = token.replace("\u2581", "")
            if len(clean) >= 2 and all(is_cjk(c) for c in clean):
                ids = tok.convert_tokens_to_ids(list(clean))
                if all(i != tok.unk_token_id for i in ids):
                    split[int(tid)] = [int(i) for i in ids]
        self._tokenizer, self._split = tok, split

    def check(self, request: SpeechRequest) -> None:
        super().check(request)
        if request.ref_text and request.ref_audio is None:
            raise InvalidRequest("ref_text needs a reference clip (ref_audio)")

    def encode(self, text: str) -> list[int]:
        tok = self._tokenizer
        ids: list[int] = []
        for tid in tok.encode(text, add_special_tokens=True):
            ids.extend(self._split.get(int(tid), [int(tid)]))
        if ids and ids[0] == tok.bos_token_id:
            ids = ids[1:]
        return ids

    def ref_frames(self, n_samples: int, sr: int) -> int:
        cfg = self.ctx.hf_config
        vae, patch = cfg.get("audio_vae_config"), cfg.get("patch_size")
        if not isinstance(vae, dict) or not patch or "sample_rate" not in vae:
            raise ModelUnavailable(
                "VoxCPM2 cloning needs audio_vae_config.sample_rate/encoder_rates and patch_size "
                f"in {self.ctx.model_path / 'config.json'}"
            )
        patch_samples = int(patch) * math.prod(int(r) for r in vae.get("encoder_rates", [1]))
        return math.ceil(math.ceil(n_samples * int(vae["sample_rate"]) / sr) / patch_samples)

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        self.check(request)
        if self._tokenizer is None:
            raise ModelUnavailable("the VoxCPM2 tokenizer is not loaded (engine not started)")
        ids = self.encode(request.text)
        prefill = len(ids) + 1
        info: dict[str, Any] = {"text_token_ids": [ids]}
        salt = hashlib.sha256(repr((ids, request.ref_text)).encode())
        if request.ref_audio is not None:
            wav, sr = decode_ref_audio(request.ref_audio)
            salt.update(wav.tobytes())
            ref_len = self.ref_frames(len(wav), sr)
            if request.ref_text:
                info["prompt_audio"] = [[wav.tolist(), sr]]
                info["prompt_text"] = [request.ref_text]
                prefill += ref_len + len(self.encode(request.ref_text))
            else:
                info["reference_audio"] = [[wav.tolist(), sr]]
                prefill += ref_len + 2
        return {
            "prompt_token_ids": [1] * prefill,
            "additional_information": info,
            "cache_salt": f"listenlab-{salt.hexdigest()[:32]}",
        }


ADAPTER = VoxCPM2
