"""What listenlab knows about each model vLLM-Omni serves: rate, channels, cloning, and where
each fact was read.

Why one table: the embedded engine's adapters (:mod:`backends.vllm_omni.models`), the remote
backend (:mod:`backends.vllm_omni.client`, which needs a rate when a stream does not state one)
and the wire profiles (:mod:`backends.profile`, which imitate a model on the CPU) each kept
their own copy of a model's rate and channels; a correction made in one (MOSS-TTS-Nano is served
mono) had to be found and made in the others. They all read this table now.

A served model name is matched by lower-case substring, most specific entry first (a server may
name its model ``Qwen/Qwen3-TTS-12Hz-1.7B-Base`` or ``/models/s2-pro``). The five *seed* models
(Qwen3-TTS, Fish Speech S2 Pro, CosyVoice3, MOSS-TTS-Nano, VoxCPM2) also name their embedded
adapter, their wire profile and the checkpoint they stand for. "§6" below is the model table of
``shared/reference/vllm-omni-speech-api.md`` (vLLM-Omni's ``docs/serving/speech_api.md`` and
each model's serving code); other sources are files of ``vllm-project/vllm-omni``.
"""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE = "vllm-omni-speech-api.md §6"

MAX_NEW_TOKENS_RANGE = (1, 4096)
"""What every model's adapter accepts as ``max_new_tokens``: vLLM-Omni's
``tts_adapters/base.py`` ``_TTS_MAX_NEW_TOKENS_MIN`` / ``_TTS_MAX_NEW_TOKENS_MAX``."""


@dataclass(frozen=True)
class ModelFacts:
    """One model family as vLLM-Omni serves it."""

    key: str
    """Lower-case substring of a served model name that identifies the family."""
    sample_rate: int
    channels: int
    source: str
    """Where ``sample_rate`` and ``channels`` were read."""
    cloning: bool = False
    """Its adapter takes ``ref_audio`` (voice cloning; §6)."""
    instructions: bool = False
    """It takes a style prompt (``instructions``)."""
    speed_streaming: bool = False
    """It changes speed while streaming (most models stretch only whole files)."""
    title: str = ""
    model: str = ""
    """Seed models: the Hugging Face id of the checkpoint listenlab imitates and tests."""
    adapter: str = ""
    """Seed models: the embedded engine's adapter (``adapter=`` in a spec); "" for the others."""
    profile: str = ""
    """Seed models: the wire profile (``profile=`` in a spec); "" for the others."""


MODELS: tuple[ModelFacts, ...] = (
    ModelFacts("moss-tts-local", 48000, 2, REFERENCE, cloning=True, instructions=True),
    ModelFacts(
        "moss-tts-nano",
        48000,
        1,
        "vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py (0.30.0): "
        "audio_tokenizer_sample_rate 48000; _to_mono_1d downmixes the codec's stereo to mono",
        cloning=True,
        instructions=True,
        title="MOSS-TTS-Nano",
        model="OpenMOSS-Team/MOSS-TTS-Nano",
        adapter="moss_tts_nano",
        profile="moss-tts-nano",
    ),
    ModelFacts("moss-tts", 48000, 1, REFERENCE, cloning=True, instructions=True),
    ModelFacts(
        "qwen3-tts",
        24000,
        1,
        f"{REFERENCE} (docs/serving/speech_api.md, "
        "vllm_omni/entrypoints/openai/tts_adapters/qwen3_tts.py): 24 kHz mono",
        instructions=True,
        title="Qwen3-TTS",
        model="Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
        adapter="qwen3_tts",
        profile="qwen3-tts",
    ),
    ModelFacts(
        "s2-pro",
        44100,
        1,
        f"{REFERENCE}; vllm_omni/model_executor/models/fish_speech/dac_utils.py "
        "DAC_SAMPLE_RATE 44100; examples/online_serving/text_to_speech/README.md (mono)",
        cloning=True,
        title="Fish Speech S2 Pro",
        model="fishaudio/s2-pro",
        adapter="fish_speech",
        profile="fish-speech",
    ),
    ModelFacts("fish", 44100, 1, REFERENCE, cloning=True),
    ModelFacts(
        "cosyvoice",
        24000,
        1,
        "vllm_omni/transformers_utils/configs/cosyvoice3.py CosyVoice3Config (0.30.0): "
        "sample_rate 24000, mono",
        cloning=True,
        title="CosyVoice3",
        model="FunAudioLLM/Fun-CosyVoice3-0.5B-2512",
        adapter="cosyvoice3",
        profile="cosyvoice3",
    ),
    ModelFacts(
        "voxcpm",
        48000,
        1,
        f"{REFERENCE}; vllm_omni/model_executor/models/voxcpm2/voxcpm2_talker.py "
        "('AudioVAE -> 48kHz waveform'); examples/offline_inference/voxcpm2/end2end.py "
        "SAMPLE_RATE = 48_000, mono",
        cloning=True,
        title="VoxCPM2",
        model="openbmb/VoxCPM2",
        adapter="voxcpm2",
        profile="voxcpm2",
    ),
    ModelFacts("voxtral", 24000, 1, REFERENCE, cloning=True),
    ModelFacts("glm-tts", 24000, 1, REFERENCE, cloning=True),
    ModelFacts("omnivoice", 24000, 1, REFERENCE, cloning=True),
    ModelFacts("higgs-audio-v2", 24000, 1, REFERENCE, cloning=True),
    ModelFacts("indextts-2.5", 22050, 1, REFERENCE, cloning=True, speed_streaming=True),
    ModelFacts("indextts", 22050, 1, REFERENCE, cloning=True),
    ModelFacts("audio8", 44100, 1, REFERENCE, cloning=True),
    ModelFacts("gepard", 22050, 1, REFERENCE),
    ModelFacts("dots.tts", 48000, 1, REFERENCE),
    ModelFacts("breeze", 24000, 1, REFERENCE),
    ModelFacts("zonos", 44100, 1, REFERENCE),
)

CLONING_VARIANT = "-base"
"""Qwen3-TTS's Base checkpoints clone (CustomVoice and VoiceDesign do not): a served name
ending so takes ``ref_audio`` whatever its family."""

SEED_MODELS: dict[str, ModelFacts] = {m.adapter: m for m in MODELS if m.adapter}
"""The seed models by adapter name."""


def model_facts(model: str | None) -> ModelFacts | None:
    """The first entry whose key is in the (lower-cased) served model name, or None."""
    if not model:
        return None
    name = model.lower()
    return next((m for m in MODELS if m.key in name), None)


def table_format(model: str | None) -> tuple[int, int] | None:
    """``(sample_rate, channels)`` for a served model name, or None for an unknown model."""
    facts = model_facts(model)
    return (facts.sample_rate, facts.channels) if facts else None


def clones(model: str | None) -> bool:
    """Whether a served model takes ``ref_audio``, from its name alone."""
    facts = model_facts(model)
    return CLONING_VARIANT in (model or "").lower() or bool(facts and facts.cloning)


def seed_model(adapter: str) -> ModelFacts:
    """A seed model's facts by its adapter name (a KeyError names a missing table row)."""
    return SEED_MODELS[adapter]


__all__ = [
    "CLONING_VARIANT",
    "MAX_NEW_TOKENS_RANGE",
    "MODELS",
    "SEED_MODELS",
    "ModelFacts",
    "clones",
    "model_facts",
    "seed_model",
    "table_format",
]
