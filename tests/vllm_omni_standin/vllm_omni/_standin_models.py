"""STAND-IN ONLY (no such module in vLLM-Omni): what each seed model's real stage accepts and
returns, so the stand-in ``AsyncOmni`` rejects the request shapes the real model would reject
and streams the output shape the real model streams. Each model names the vLLM-Omni files its
rules were read from. The audio is always the bundled Piper voice, resampled (soxr) to the
model's native rate.

Models are told apart as vLLM-Omni does: ``config.json`` ``architectures`` / ``model_type``, and
for configs that say nothing the model directory name (``_try_resolve_omni_model_type``). A
directory with neither (a bare Piper voice) is treated as Qwen3-TTS, the model the embedded
backend first supported.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


class RejectedPrompt(ValueError):
    """The real stage would fail on this input (the message says which rule)."""


def _one_item_list(info: dict, key: str, kind: type | tuple, required: bool = True) -> Any:
    if key not in info:
        if required:
            raise RejectedPrompt(f"additional_information[{key!r}] is required")
        return None
    value = info[key]
    if not isinstance(value, list) or len(value) != 1:
        raise RejectedPrompt(f"additional_information[{key!r}] must be a one-item list")
    if not isinstance(value[0], kind):
        raise RejectedPrompt(f"additional_information[{key!r}][0] has the wrong type")
    return value[0]


def _wav_pair(value: Any, key: str) -> tuple[list, int]:
    """``[samples_list, sr]`` as the server's ``_resolve_ref_audio`` produces (lists survive
    msgspec IPC; MOSS-TTS-Nano / VoxCPM2 / Qwen3 read them back)."""
    if not (isinstance(value, list) and len(value) == 2):
        raise RejectedPrompt(f"{key} must be [samples, sample_rate]")
    samples, sr = value
    if not isinstance(samples, list) or not samples or not isinstance(samples[0], float):
        raise RejectedPrompt(f"{key} samples must be a non-empty list of floats")
    if not isinstance(sr, int) or sr <= 0:
        raise RejectedPrompt(f"{key} sample rate must be a positive int")
    return samples, sr


def _token_prompt(prompt: Any) -> tuple[list[int], dict]:
    if not isinstance(prompt, dict):
        raise RejectedPrompt("the prompt must be a dict")
    ids = prompt.get("prompt_token_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
        raise RejectedPrompt("prompt_token_ids must be a non-empty list of ints")
    info = prompt.get("additional_information")
    if not isinstance(info, dict):
        raise RejectedPrompt("the prompt needs an 'additional_information' dict")
    return ids, info


@dataclass(frozen=True)
class StandInModel:
    name: str
    sample_rate: int
    audio_key: str = "audio"
    sr_format: str = "int"
    """How ``sr`` is reported: ``int``, ``list`` (one per chunk) or ``tensor`` (0-d)."""
    end_sentinel: bool = False
    """The last output carries an extra empty chunk (MOSS-TTS-Nano)."""
    stages: int = 2
    """Pipeline stages, so ``sampling_params_list`` must have this many entries."""
    stage0: tuple[tuple[str, Any], ...] = (
        ("temperature", 0.9),
        ("top_k", 50),
        ("max_tokens", 4096),
    )
    """Stage-0 deploy defaults (values as in the model's deploy YAML / example where read)."""

    def speak(self, prompt: Any, params: list, engine: Any) -> str:
        """The text to synthesise, after checking the prompt like the real stage does."""
        return getattr(self, f"_{self.name}")(prompt, params, engine)

    # -- Qwen3-TTS: tts_adapters/qwen3_tts.py, serving_speech.py _build_tts_params,
    #    examples/offline_inference/text_to_speech/qwen3_tts/end2end.py
    def _qwen3_tts(self, prompt, params, engine) -> str:
        ids, info = _token_prompt(prompt)
        for key, value in info.items():
            if not isinstance(value, list) or len(value) != 1:
                raise RejectedPrompt(f"additional_information[{key!r}] must be a one-item list")
        return _one_item_list(info, "text", str)

    # -- Fish Speech S2 Pro: fish_speech/prompt_utils.py, serving_speech.py
    #    _build_fish_speech_prompt / _estimate_fish_prompt_len, fish_speech/dac_utils.py
    def _fish_speech(self, prompt, params, engine) -> str:
        ids, info = _token_prompt(prompt)
        tok = engine.tokenizer()
        im_end = "<|im_end|>\n"
        tail = "<|im_end|>\n<|im_start|>user\n{}" + im_end + "<|im_start|>assistant\n<|voice|>"
        if info.get("fish_structured_voice_clone") is True:
            text, ref_text = info.get("text"), info.get("ref_text")
            if not isinstance(text, str) or not isinstance(ref_text, str):
                raise RejectedPrompt("structured clone needs scalar 'text' and 'ref_text'")
            if not re.match(r"<\|speaker:\d+\|>", ref_text):
                raise RejectedPrompt("ref_text must be normalised with a <|speaker:N|> tag")
            wav = np.asarray(info.get("ref_audio_wav"))
            if wav.ndim != 1 or wav.dtype != np.float32 or not wav.size:
                raise RejectedPrompt("ref_audio_wav must be a 1-D float32 tensor")
            sr = info.get("ref_audio_sr")
            if not isinstance(sr, int) or sr <= 0:
                raise RejectedPrompt("ref_audio_sr must be a positive int")
            semantic = math.ceil(max(1, math.ceil(wav.size * 44100 / sr)) / 2048)
            system = (
                "<|im_start|>system\nconvert the provided text to speech reference to the "
                f"following:\n\nText:\n{ref_text}\n\nSpeech:\n<|audio_start|>"
            )
            n = len(tok.encode(system, add_special_tokens=False)) + semantic + 1
            n += len(tok.encode(tail.format(text), add_special_tokens=False))
            if ids != [1] * n:
                raise RejectedPrompt(f"clone prompt must be {n} placeholder ids, got {len(ids)}")
            if "max_new_tokens" in info and not isinstance(info["max_new_tokens"], int):
                raise RejectedPrompt("structured clone max_new_tokens must be a scalar int")
        else:
            text = _one_item_list(info, "text", str)
            _one_item_list(info, "max_new_tokens", int, required=False)
            if "ref_audio" in info or "ref_text" in info:
                raise RejectedPrompt("cloning needs the structured clone layout")
            expected = "<|im_start|>system\nconvert the provided text to speech" + tail.format(text)
            if tok.decode(ids) != expected:
                raise RejectedPrompt("prompt_token_ids do not follow the Fish Speech layout")
        if re.search(r"<\|(?!speaker:\d+\|>)[^>]+\|>", text):
            raise RejectedPrompt("text carries a control token")
        return re.sub(r"<\|speaker:\d+\|>", "", text)

    # -- CosyVoice3: examples/offline_inference/cosyvoice3/verify_e2e_cosyvoice.py,
    #    tts_adapters/cosyvoice3.py, serving_speech.py _apply_cosyvoice3_dynamic_tokens
    def _cosyvoice3(self, prompt, params, engine) -> str:
        if not isinstance(prompt, dict) or set(prompt) != {
            "prompt",
            "multi_modal_data",
            "mm_processor_kwargs",
        }:
            raise RejectedPrompt("CosyVoice3 takes prompt + multi_modal_data + mm_processor_kwargs")
        text = prompt["prompt"]
        if not isinstance(text, str) or not text.strip():
            raise RejectedPrompt("prompt must be the text")
        audio = prompt["multi_modal_data"].get("audio")
        if not (isinstance(audio, tuple) and len(audio) == 2):
            raise RejectedPrompt("multi_modal_data['audio'] must be (samples, sample_rate)")
        wav, sr = audio
        if not isinstance(wav, np.ndarray) or wav.dtype != np.float32 or wav.ndim != 1:
            raise RejectedPrompt("reference samples must be a 1-D float32 array")
        kw = prompt["mm_processor_kwargs"]
        if kw.get("sample_rate") != sr or not isinstance(sr, int):
            raise RejectedPrompt("mm_processor_kwargs sample_rate must equal the clip's rate")
        if sr < 16000:
            raise RejectedPrompt(f"Audio sample rate {sr} Hz is too low. Minimum 16000 Hz")
        if "<|endofprompt|>" not in str(kw.get("prompt_text", "")):
            raise RejectedPrompt("prompt_text must hold <|endofprompt|> (issue #4644)")
        lo, hi = getattr(params[0], "min_tokens", 0), params[0].max_tokens
        if hi is not None and lo > hi:
            raise RejectedPrompt(f"min_tokens {lo} > max_tokens {hi}")
        return text

    # -- MOSS-TTS-Nano: tts_adapters/moss_tts.py (nano path),
    #    moss_tts_nano/modeling_moss_tts_nano.py
    def _moss_tts_nano(self, prompt, params, engine) -> str:
        ids, info = _token_prompt(prompt)
        if ids != [1]:
            raise RejectedPrompt("MOSS-TTS-Nano takes the placeholder prompt [1]")
        text = _one_item_list(info, "text", str)
        if _one_item_list(info, "mode", str) != "voice_clone":
            raise RejectedPrompt("mode must be voice_clone")
        _wav_pair(_one_item_list(info, "prompt_audio_array", list), "prompt_audio_array")
        _one_item_list(info, "max_new_frames", int, required=False)
        _one_item_list(info, "seed", int, required=False)
        return text

    # -- VoxCPM2: voxcpm2/voxcpm2_talker.py build_voxcpm2_prompt (the talker checks the
    #    prefill length), examples/offline_inference/voxcpm2/end2end.py
    def _voxcpm2(self, prompt, params, engine) -> str:
        ids, info = _token_prompt(prompt)
        text_ids = _one_item_list(info, "text_token_ids", list)
        if not text_ids or not all(isinstance(i, int) for i in text_ids):
            raise RejectedPrompt("text_token_ids must be [[int, …]]")
        tok, cfg = engine.tokenizer(), engine.model_config.hf_config
        if text_ids[0] == tok.bos_token_id:
            raise RejectedPrompt("text_token_ids must not start with BOS")
        prefill = len(text_ids) + 1
        modes = [k for k in ("reference_audio", "prompt_audio") if k in info]
        if len(modes) > 1:
            raise RejectedPrompt("reference_audio and prompt_audio are exclusive")
        if modes:
            samples, sr = _wav_pair(_one_item_list(info, modes[0], list), modes[0])
            vae = cfg.audio_vae_config
            patch = cfg.patch_size * math.prod(vae["encoder_rates"])
            ref_len = math.ceil(math.ceil(len(samples) * vae["sample_rate"] / sr) / patch)
            if modes[0] == "prompt_audio":
                ref_text = _one_item_list(info, "prompt_text", str)
                ref_ids = tok.encode(ref_text, add_special_tokens=True)
                prefill += ref_len + len(ref_ids) - (ref_ids[:1] == [tok.bos_token_id])
            else:
                if "prompt_text" in info:
                    raise RejectedPrompt("prompt_text belongs to prompt_audio")
                prefill += ref_len + 2
        if ids != [1] * prefill:
            raise RejectedPrompt(f"prefill length mismatch: expected {prefill}, got {len(ids)}")
        return tok.decode(text_ids)


# Stage-0 defaults: ``default_sampling_params`` of stage 0 in each model's deploy YAML as shipped
# in vllm-omni 0.30.0 (vllm_omni/deploy/*.yaml; checked by tests/conformance).
MODELS = {
    "qwen3_tts": StandInModel(
        "qwen3_tts",
        24000,
        stage0=(
            ("temperature", 0.9),
            ("top_k", 50),
            ("max_tokens", 4096),
            ("min_tokens", 2),
            ("repetition_penalty", 1.05),
        ),
    ),
    "fish_speech": StandInModel(
        "fish_speech",
        44100,
        stage0=(
            ("temperature", 0.8),
            ("top_k", 30),
            ("top_p", 0.9),
            ("max_tokens", 2048),
            ("seed", 42),
            ("repetition_penalty", 1.0),
        ),
    ),
    # talker + code2wav
    "cosyvoice3": StandInModel(
        "cosyvoice3",
        24000,
        stage0=(
            ("max_tokens", 2048),
            ("top_k", 25),
            ("top_p", 0.8),
            ("repetition_penalty", 1.0001),
        ),
    ),
    # one AR stage that runs its own codec (modeling_moss_tts_nano.py)
    "moss_tts_nano": StandInModel(
        "moss_tts_nano",
        48000,
        audio_key="model_outputs",
        sr_format="tensor",  # 0.30.0: sr is metadata, its latest value (a 0-d tensor)
        end_sentinel=True,
        stages=1,
        stage0=(
            ("temperature", 1.0),
            ("top_p", 1.0),
            ("top_k", 50),
            ("max_tokens", 4096),
            ("seed", 42),
        ),
    ),
    # single-stage native AR pipeline (examples/offline_inference/voxcpm2/end2end.py)
    "voxcpm2": StandInModel(
        "voxcpm2",
        48000,
        audio_key="model_outputs",
        sr_format="tensor",
        stages=1,
        stage0=(
            ("temperature", 0.0),
            ("top_p", 1.0),
            ("top_k", -1),
            ("max_tokens", 4096),
            ("seed", 42),
            ("repetition_penalty", 1.0),
        ),
    ),
}
_ARCHS = {
    "Qwen3TTSForConditionalGeneration": "qwen3_tts",
    "FishSpeechSlowARForConditionalGeneration": "fish_speech",
    "CosyVoice3Model": "cosyvoice3",
    "MossTTSNanoForCausalLM": "moss_tts_nano",
    "VoxCPM2TalkerForConditionalGeneration": "voxcpm2",
}
_NAMES = {
    "qwen3tts": "qwen3_tts",
    "fishspeech": "fish_speech",
    "s2pro": "fish_speech",
    "cosyvoice3": "cosyvoice3",
    "mossttsnano": "moss_tts_nano",
    "voxcpm2": "voxcpm2",
}


def detect(model_dir: Path, config: dict) -> StandInModel:
    for arch in config.get("architectures") or []:
        if arch in _ARCHS:
            return MODELS[_ARCHS[arch]]
    if config.get("model_type") in MODELS:
        return MODELS[config["model_type"]]
    key = re.sub(r"[-_.]", "", model_dir.name.lower())
    hits = [(len(k), v) for k, v in _NAMES.items() if k in key]
    return MODELS[max(hits)[1]] if hits else MODELS["qwen3_tts"]
