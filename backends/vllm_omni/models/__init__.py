"""Every model vLLM-Omni serves that listenlab knows, one module per model, and the lookups.

Why discovery: adding a model is one new module here (``MODEL``, a
:class:`~backends.vllm_omni.models.unit.ModelUnit`, and ``ADAPTER`` where the embedded engine
can drive it), with no list to extend elsewhere. Every module of this package except the
helpers (:data:`HELPERS`) must be a unit; one that is not fails at import, never silently.

Readers: the wire profiles (``backends/profile.py``: a profile per unit with a schedule),
``listenlab api`` (:func:`speech_rules` for the served name), the remote backend (rates and
rules by served name) and the embedded engine (:func:`make_adapter`).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from backends.errors import InvalidRequest
from backends.vllm_omni.models.base import AdapterContext, ModelAdapter, basename_key, read_config
from backends.vllm_omni.models.named import NAMED
from backends.vllm_omni.models.unit import ModelUnit
from backends.vllm_omni.rules import GENERIC_RULES, SpeechRules

HELPERS = frozenset({"base", "unit", "named"})
"""Modules of this package that are not a model."""

CLONING_VARIANT = "-base"
"""Qwen3-TTS's Base checkpoints clone (CustomVoice and VoiceDesign do not): a served name
ending so takes ``ref_audio`` whatever its family."""


def discover() -> tuple[dict[str, ModelUnit], dict[str, type[ModelAdapter]]]:
    """Import every module of this package: the units by name, and the embedded adapters of
    those that have one. A module that is neither a helper nor a unit is an ImportError."""
    units, adapters, _variants = discover_all()
    return units, adapters


def discover_all() -> tuple[
    dict[str, ModelUnit], dict[str, type[ModelAdapter]], tuple[ModelUnit, ...]
]:
    """:func:`discover`, and the variants the modules name (``VARIANTS``: known by name)."""
    units: dict[str, ModelUnit] = {}
    adapters: dict[str, type[ModelAdapter]] = {}
    variants: list[ModelUnit] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in HELPERS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        unit = getattr(module, "MODEL", None)
        if not isinstance(unit, ModelUnit) or unit.name != info.name:
            raise ImportError(
                f"backends/vllm_omni/models/{info.name}.py is no model unit: it needs "
                f"MODEL = ModelUnit(name={info.name!r}, …)"
            )
        units[unit.name] = unit
        adapter = getattr(module, "ADAPTER", None)
        if adapter is not None:
            adapters[unit.name] = adapter
        variants += getattr(module, "VARIANTS", ())
    return units, adapters, tuple(variants)


UNITS, ADAPTERS, VARIANTS = discover_all()
"""The model units by name, the embedded adapters of those that have one, and the variants
of units vLLM-Omni tells apart by name (known by name, no profile)."""
MODELS: tuple[ModelUnit, ...] = (*UNITS.values(), *VARIANTS, *NAMED)
"""Every model known by name: the units, their variants, then the models known by name only."""
_ALIASES = {alias: cls.unit.name for cls in ADAPTERS.values() for alias in cls.aliases}


def model_unit(model: str | None) -> ModelUnit | None:
    """The model a served name belongs to: the one with the longest key in the (lower-cased)
    name, or None."""
    if not model:
        return None
    name = model.lower()
    hits = [(len(k), m) for m in MODELS for k in m.keys if k in name]
    return max(hits, key=lambda h: h[0])[1] if hits else None


def unit(name: str) -> ModelUnit:
    """A model unit by its name (``qwen3_tts``); an unknown name lists the known ones."""
    if name not in UNITS:
        raise InvalidRequest(f"unknown model {name!r}; known models: {', '.join(sorted(UNITS))}")
    return UNITS[name]


def table_format(model: str | None) -> tuple[int, int] | None:
    """``(sample_rate, channels)`` for a served model name, or None for an unknown model."""
    m = model_unit(model)
    return (m.sample_rate, m.channels) if m else None


def clones(model: str | None) -> bool:
    """Whether a served model takes ``ref_audio``, from its name alone."""
    m = model_unit(model)
    return CLONING_VARIANT in (model or "").lower() or bool(m and m.cloning)


def speech_rules(model: str | None) -> SpeechRules:
    """The request rules for a served model name: its model's, else listenlab's generic ones."""
    m = model_unit(model)
    return m.rules if m else GENERIC_RULES


# --------------------------------------------------------------------------- embedded adapters


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
    for name, cls in ADAPTERS.items():
        if cls.architectures.intersection(archs):
            return name
    model_type = cfg.get("model_type")
    for name, cls in ADAPTERS.items():
        if isinstance(model_type, str) and model_type in cls.model_types:
            return name
    key = basename_key(model_path)
    hits = [(len(k), name) for name, cls in ADAPTERS.items() for k in cls.name_keys if k in key]
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
    "CLONING_VARIANT",
    "HELPERS",
    "MODELS",
    "UNITS",
    "VARIANTS",
    "AdapterContext",
    "ModelAdapter",
    "ModelUnit",
    "adapter_class",
    "clones",
    "discover",
    "discover_all",
    "infer_adapter",
    "known_adapters",
    "make_adapter",
    "model_unit",
    "speech_rules",
    "table_format",
    "unit",
]
