"""Models listenlab knows by name only: rate, channels and whether they clone, nothing more.

Why a list here: the remote backend needs a rate for a raw stream that does not state one.
Every TTS adapter vLLM-Omni 0.30.0 registers is a unit of this package (one module each); the
rows here are families served by other vLLM-Omni versions or branches (no adapter in 0.30.0's
``tts_adapters/__init__.py``), so nothing about them can be read in the 0.30.0 wheel. Variants
of a unit that vLLM-Omni tells apart by name (MOSS-TTS-Local) are in their unit's module
(``VARIANTS``). The facts are the model table of ``shared/reference/vllm-omni-speech-api.md``
§6.
"""

from __future__ import annotations

from backends.vllm_omni.models.unit import FACTS, ModelUnit, assumed
from backends.vllm_omni.rules import GENERIC_RULES

REFERENCE = assumed(
    "shared/reference/vllm-omni-speech-api.md section 6 (vLLM-Omni's docs/serving/speech_api.md); "
    "no adapter for it in vLLM-Omni 0.30.0"
)


def named(key: str, rate: int, channels: int, **kw) -> ModelUnit:
    """A model known by its served-name ``key`` only (see the module docstring)."""
    return ModelUnit(
        name=key,
        title=key,
        keys=(key,),
        sample_rate=rate,
        channels=channels,
        rules=kw.pop("rules", GENERIC_RULES),
        sources={fact: (REFERENCE,) for fact in FACTS},
        **kw,
    )


NAMED: tuple[ModelUnit, ...] = (
    named("dots.tts", 48000, 1),
    named("zonos", 44100, 1),
)
"""Most specific key first is not needed: the longest matching key of all models wins."""


__all__ = ["NAMED", "REFERENCE", "named"]
