"""Models listenlab knows by name only: rate, channels and whether they clone, nothing more.

Why a list here: the remote backend needs a rate for a raw stream that does not state one,
and these families are served by vLLM-Omni too. They are not units yet (no schedule, no rules
checked against vLLM-Omni 0.30.0's adapters, no embedded adapter): each becomes its own module
of this package (issue #41), and a module's key then wins over the row here (the longest key
wins, and ``tests/test_vllm_omni_wire.py`` refuses a key claimed twice). The facts are the model
table of ``shared/reference/vllm-omni-speech-api.md`` §6.
"""

from __future__ import annotations

from backends.vllm_omni.models.unit import FACTS, ModelUnit, assumed
from backends.vllm_omni.rules import GENERIC_RULES, SpeechRules

REFERENCE = assumed(
    "shared/reference/vllm-omni-speech-api.md section 6 (vLLM-Omni's docs/serving/speech_api.md); "
    "not yet checked against the 0.30.0 adapter (issue #41)"
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
    named("moss-tts-local", 48000, 2, cloning=True, instructions=True),
    named("moss-tts", 48000, 1, cloning=True, instructions=True),
    named("voxtral", 24000, 1, cloning=True),
    named("glm-tts", 24000, 1, cloning=True),
    named("omnivoice", 24000, 1, cloning=True),
    named("higgs-audio-v2", 24000, 1, cloning=True),
    named("indextts-2.5", 22050, 1, cloning=True, speed_streaming=True),
    named("indextts", 22050, 1, cloning=True),
    named("audio8", 44100, 1, cloning=True),
    named("gepard", 22050, 1),
    named("dots.tts", 48000, 1),
    named(
        "breeze",
        24000,
        1,
        rules=SpeechRules(
            "breeze_tts_2",
            "vllm_omni/entrypoints/openai/tts_adapters/breeze_tts_2.py:34 "
            "`supported_output_sample_rates = frozenset({24000})` (vLLM-Omni 0.30.0)",
            sample_rates=frozenset({24000}),
        ),
    ),
    named("zonos", 44100, 1),
)
"""Most specific key first is not needed: the longest matching key of all models wins."""


__all__ = ["NAMED", "REFERENCE", "named"]
