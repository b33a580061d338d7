"""Per-model adapters of the embedded vLLM-Omni backend, one file per model, and their registry.

Not a backend: ``backends/registry.py`` only discovers the modules of ``backends/`` itself, not
packages. The backend (``backends/vllm_omni/embedded.py``) picks an adapter from the spec's ``adapter=``
or, failing that, from the model directory (:func:`infer_adapter`).
"""

from __future__ import annotations

from pathlib import Path

from backends.errors import InvalidRequest
from backends.vllm_omni.models.base import AdapterContext, ModelAdapter, basename_key, read_config
from backends.vllm_omni.models.cosyvoice3 import CosyVoice3
from backends.vllm_omni.models.fish_speech import FishSpeech
from backends.vllm_omni.models.moss_tts_nano import MossTTSNano
from backends.vllm_omni.models.qwen3_tts import Qwen3TTS
from backends.vllm_omni.models.voxcpm2 import VoxCPM2

ADAPTERS: dict[str, type[ModelAdapter]] = {
    cls.name: cls for cls in (Qwen3TTS, FishSpeech, CosyVoice3, MossTTSNano, VoxCPM2)
}
_ALIASES = {alias: cls.name for cls in ADAPTERS.values() for alias in cls.aliases}


def known_adapters() -> list[str]:
    return sorted(ADAPTERS)


def adapter_class(name: str) -> type[ModelAdapter]:
    """The adapter named ``name`` (or one of its aliases); unknown names list the known ones."""
    key = _ALIASES.get(name, name)
    if key not in ADAPTERS:
        raise InvalidRequest(
            f"unknown vllm-omni adapter {name!r}; known adapters: {', '.join(known_adapters())}"
        )
    return ADAPTERS[key]


def infer_adapter(model_path: Path) -> str:
    """Which adapter serves the model in ``model_path``.

    ``config.json`` ``architectures`` first, then its ``model_type``, then the directory name
    (vLLM-Omni resolves models whose config.json says nothing useful, such as CosyVoice3, by
    matching the name against its deploy YAMLs, longest match first).
    """
    cfg = read_config(model_path)
    archs = cfg.get("architectures") or []
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    for cls in ADAPTERS.values():
        if cls.architectures.intersection(archs):
            return cls.name
    model_type = cfg.get("model_type")
    for cls in ADAPTERS.values():
        if isinstance(model_type, str) and model_type in cls.model_types:
            return cls.name
    key = basename_key(model_path)
    hits = [(len(k), cls.name) for cls in ADAPTERS.values() for k in cls.name_keys if k in key]
    if hits:
        return max(hits)[1]
    said = f"architectures {archs}" if archs else "no architectures"
    raise InvalidRequest(
        f"cannot tell which model {model_path} holds (its config.json has {said}"
        f"{f', model_type {model_type!r}' if model_type else ''}); pass adapter=NAME, one of: "
        f"{', '.join(known_adapters())}"
    )


def make_adapter(model_path: Path, name: str | None, options: dict[str, str]) -> ModelAdapter:
    cls = adapter_class(name) if name else ADAPTERS[infer_adapter(model_path)]
    return cls(AdapterContext.for_model(model_path), options)


__all__ = [
    "ADAPTERS",
    "AdapterContext",
    "ModelAdapter",
    "adapter_class",
    "infer_adapter",
    "known_adapters",
    "make_adapter",
]
