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


ADAPTERS = "vllm_omni/entrypoints/openai/tts_adapters"
"""Where each model's request rules live in vLLM-Omni 0.30.0 (one adapter file per model)."""

QWEN3_LANGUAGES = (
    "Auto",
    "Chinese",
    "English",
    "Japanese",
    "Korean",
    "German",
    "French",
    "Russian",
    "Portuguese",
    "Spanish",
    "Italian",
)
"""The official Qwen3-TTS languages in vLLM-Omni's order (the embedded engine lists them when
the checkpoint does not name its own)."""
DEFAULT_LANGUAGES = frozenset(QWEN3_LANGUAGES)
"""``tts_adapters/base.py`` ``DEFAULT_TTS_LANGUAGES``: the official Qwen3-TTS languages (its
checkpoints' ``talker_config.codec_language_id`` plus ``Auto``)."""


@dataclass(frozen=True)
class SpeechRules:
    """One model's request rules as its vLLM-Omni adapter applies them (``validate``).

    :mod:`backends.vllm_omni.rules` turns these into the reference's refusals, in its order and
    words; ``listenlab api`` answers with them and the remote backend checks them before it
    sends anything.
    """

    reference_type: str
    """vLLM-Omni's model type (the adapter's ``name``): ``qwen3_tts``, ``fish_tts``, …"""
    source: str
    sample_rates: frozenset[int] = frozenset()
    """The adapter's ``supported_output_sample_rates``; empty: ``sample_rate`` is refused."""
    rate_range: tuple[int, int] | None = None
    """listenlab's generic rule instead: any rate in this range (resampled)."""
    languages: frozenset[str] | None = None
    """Accepted ``language`` values (title-cased), or None when the adapter reads none."""
    task_types: bool = False
    """Qwen3-TTS: ``task_type`` must match the checkpoint (CustomVoice, VoiceDesign, Base),
    ``ref_text``/``x_vector_only_mode`` only with Base, ``speaker_embedding`` only with Base."""
    requires_ref_audio: str = ""
    """The refusal when ``ref_audio`` is missing ("" when it is optional)."""
    ref_text_message: str = ""
    """The refusal when ``ref_audio`` comes without ``ref_text`` ("" when it may)."""
    no_speakers_label: str = ""
    """Models without built-in speakers name themselves in "Unknown voice …" ("" otherwise)."""
    checks_voice: bool = False
    """An unknown ``voice`` is "Invalid voice …" (Qwen3-TTS, VoxCPM2)."""
    checks_max_new_tokens: bool = True
    """``max_new_tokens`` is checked against 1..4096 (MOSS-TTS-Nano does not check it)."""
    max_instructions: int | None = None
    """``instructions`` longer than this is refused (Qwen3-TTS only, ``serving_speech.py``
    ``_TTS_MAX_INSTRUCTIONS_LENGTH`` = 500)."""
    embedding_dims: tuple[tuple[str, int], ...] = ()
    """``speaker_embedding`` dimension by checkpoint size (Qwen3-TTS: the talker hidden size)."""


QWEN3_RULES = SpeechRules(
    "qwen3_tts",
    f"{ADAPTERS}/qwen3_tts.py Qwen3TTSAdapter (0.30.0): supported_output_sample_rates "
    "{8000, 24000}; validate(): task_type against the checkpoint variant, language in "
    "codec_language_id + Auto, voice in the speakers, ref_text/x_vector_only_mode only for Base, "
    "speaker_embedding only for Base with the talker hidden size (1024 for 0.6B, 2048 for 1.7B: "
    "protocol/audio.py), instructions <= 500 (serving_speech.py), max_new_tokens 1..4096",
    sample_rates=frozenset({8000, 24000}),
    languages=DEFAULT_LANGUAGES,
    task_types=True,
    checks_voice=True,
    max_instructions=500,
    embedding_dims=(("0.6b", 1024), ("1.7b", 2048)),
)
FISH_RULES = SpeechRules(
    "fish_tts",
    f"{ADAPTERS}/fish_speech.py FishSpeechAdapter (0.30.0): no sample rates; uploaded voices "
    "only ('Fish Speech has no built-in speakers'); ref_audio needs ref_text; max_new_tokens "
    "1..4096",
    ref_text_message="Voice cloning requires 'ref_text' (transcript of the reference audio)",
    no_speakers_label="Fish Speech",
)
COSYVOICE3_RULES = SpeechRules(
    "cosyvoice3",
    f"{ADAPTERS}/cosyvoice3.py CosyVoice3Adapter (0.30.0): no sample rates; ref_audio and "
    "ref_text required; max_new_tokens 1..4096",
    requires_ref_audio="CosyVoice3 requires 'ref_audio' (reference audio for voice cloning)",
    ref_text_message="CosyVoice3 requires 'ref_text' (transcript of the reference audio)",
    no_speakers_label="CosyVoice3",
)
MOSS_NANO_RULES = SpeechRules(
    "moss_tts_nano",
    f"{ADAPTERS}/moss_tts.py MossTTSNanoAdapter (0.30.0): no sample rates; ref_audio required; "
    "max_new_tokens not checked",
    requires_ref_audio="MOSS-TTS-Nano requires 'ref_audio' (reference audio for voice cloning).",
    no_speakers_label="MOSS-TTS-Nano",
    checks_max_new_tokens=False,
)
VOXCPM2_RULES = SpeechRules(
    "voxcpm2",
    f"{ADAPTERS}/voxcpm2.py VoxCPM2Adapter (0.30.0): no sample rates; voice must be 'default' or "
    "uploaded; ref_audio optional; max_new_tokens 1..4096",
    checks_voice=True,
)
GENERIC_RULES = SpeechRules(
    "listenlab",
    "listenlab's own rules for a voice that imitates no vLLM-Omni model: any sample_rate from "
    "8000 to 192000 Hz (resampled); instructions up to 500 characters (Qwen3-TTS's limit)",
    rate_range=(8000, 192000),
    checks_voice=True,
    max_instructions=500,
)
"""A backend that imitates no model (``piper``) has listenlab's rules, listed in
docs/api.md: any rate it can resample to, no language or task rules."""


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
    """Native speed control (the adapter's ``native_speed_control``): the model itself changes
    speed, also while streaming; every other model is stretched after generation, whole files
    only (``serving_speech.py`` ``_validate_speech_streaming_request``)."""
    rules: SpeechRules | None = None
    """What the model's adapter in vLLM-Omni accepts and refuses (None: the generic rules)."""
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
        rules=MOSS_NANO_RULES,
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
        rules=QWEN3_RULES,
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
        rules=FISH_RULES,
        model="fishaudio/s2-pro",
        adapter="fish_speech",
        profile="fish-speech",
    ),
    ModelFacts("fish", 44100, 1, REFERENCE, cloning=True, rules=FISH_RULES),
    ModelFacts(
        "cosyvoice",
        24000,
        1,
        "vllm_omni/transformers_utils/configs/cosyvoice3.py CosyVoice3Config (0.30.0): "
        "sample_rate 24000, mono",
        cloning=True,
        title="CosyVoice3",
        rules=COSYVOICE3_RULES,
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
        rules=VOXCPM2_RULES,
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
    ModelFacts(
        "breeze",
        24000,
        1,
        REFERENCE,
        rules=SpeechRules(
            "breeze_tts_2",
            f"{ADAPTERS}/breeze_tts_2.py (0.30.0): supported_output_sample_rates {{24000}}",
            sample_rates=frozenset({24000}),
        ),
    ),
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


def speech_rules(model: str | None) -> SpeechRules:
    """The request rules for a served model name: its row's, else listenlab's generic ones."""
    facts = model_facts(model)
    return facts.rules if facts and facts.rules else GENERIC_RULES


def seed_model(adapter: str) -> ModelFacts:
    """A seed model's facts by its adapter name (a KeyError names a missing table row)."""
    return SEED_MODELS[adapter]


__all__ = [
    "CLONING_VARIANT",
    "DEFAULT_LANGUAGES",
    "QWEN3_LANGUAGES",
    "GENERIC_RULES",
    "SpeechRules",
    "speech_rules",
    "MAX_NEW_TOKENS_RANGE",
    "MODELS",
    "SEED_MODELS",
    "ModelFacts",
    "clones",
    "model_facts",
    "seed_model",
    "table_format",
]
