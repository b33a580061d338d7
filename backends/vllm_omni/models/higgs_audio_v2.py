"""Higgs-Audio v2 (``bosonai/higgs-audio-v2-generation-3B-base``): plain text to 24 kHz speech,
or a shallow clone from a clip and its transcript together; the unit.

No embedded adapter: its prompt comes from the checkpoint's ``AutoProcessor``
(``tts_adapters/higgs_audio_v2.py``), so it is served remotely only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    ChunkSchedule,
    ModelUnit,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import (
    MAX_NEW_TOKENS_RANGE,
    RequestView,
    RuleContext,
    SpeechRules,
    uploaded_speaker_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/higgs_audio_v2.py"
DEPLOY = "vllm_omni/deploy/higgs_audio_v2.yaml"
MODELS = "vllm_omni/model_executor/models/higgs_audio_v2"
MULTI_SPEAKER_TAG = re.compile(r"\[SPEAKER\d+\]", re.IGNORECASE)
"""``higgs_audio_v2_tokenizer.MULTI_SPEAKER_TAG_PATTERN``."""
PAIR = "higgs_audio_v2 voice clone requires both 'ref_audio' and 'ref_text'; "


@dataclass(frozen=True)
class HiggsV2Rules(SpeechRules):
    """``HiggsAudioV2Adapter.validate`` (``tts_adapters/higgs_audio_v2.py:81``), check for
    check (it never checks an upper bound on ``max_new_tokens``)."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        err = uploaded_speaker_error(view, ctx)
        if err:
            return err
        if not view.input or not view.input.strip():
            return "higgs_audio_v2: input text cannot be empty"
        if view.ref_audio is not None and not view.ref_text:
            return PAIR + "received ref_audio without ref_text"
        if view.ref_text and view.ref_audio is None:
            return PAIR + "received ref_text without ref_audio"
        return unsupported_error(view)


def unsupported_error(view: RequestView) -> str | None:
    """The fields Higgs-Audio v2 v1 refuses, in the adapter's order."""
    label = "higgs_audio_v2 v1 does not support"
    if view.x_vector_only_mode is not None:
        return f"{label} 'x_vector_only_mode' (voice-cloning helper field)"
    if view.speaker_embedding is not None:
        return f"{label} 'speaker_embedding' (voice-cloning helper field)"
    if view.voice and view.ref_audio is None:
        return (
            f"{label} 'voice'/'speaker' selection for built-in voices; "
            "upload a voice first via POST /v1/audio/voices, or use ref_audio + ref_text. "
            f"Got voice={view.voice!r}"
        )
    if view.instructions:
        return f"{label} 'instructions' (voice style/emotion control); supply plain text instead"
    if view.task_type is not None:
        return f"{label} 'task_type'; the model is single-mode plain text -> speech"
    if view.language is not None:
        return (
            "higgs_audio_v2 v1 does not accept 'language' overrides; the model infers "
            "language from the input text"
        )
    if view.speed is not None and view.speed != 1.0:
        return f"{label} 'speed' adjustments; the audio is rendered at native rate (24 kHz)"
    if MULTI_SPEAKER_TAG.search(view.input):
        return f"{label} multi-speaker [SPEAKERn] tags; remove the tag from the input"
    lo, _ = MAX_NEW_TOKENS_RANGE
    if view.max_new_tokens is not None and view.max_new_tokens < lo:
        return f"max_new_tokens must be at least {lo}"
    return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 104, "def validate(self, request", "ported as HiggsV2Rules.validate"),
    cite(
        f"{MODELS}/higgs_audio_v2_tokenizer.py",
        52,
        'MULTI_SPEAKER_TAG_PATTERN = re.compile(r"\\[SPEAKER\\d+\\]", re.IGNORECASE)',
    ),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="higgs_audio_v2",
    title="Higgs-Audio v2",
    keys=("higgs-audio-v2", "higgs_audio_v2", "higgsaudiov2"),
    checkpoint="bosonai/higgs-audio-v2-generation-3B-base",
    sample_rate=24000,
    channels=1,
    cloning=True,
    max_model_len=4096,
    rules=HiggsV2Rules(
        "higgs_audio_v2", rules_text(RULE_SOURCES), no_speakers_label="Higgs-Audio V2"
    ),
    schedule=ChunkSchedule(
        frame_hz=25.0,
        first_frames=(1,),
        chunk_frames=25,
        async_chunk=False,
        whole_file=True,
        sources=(
            cite(DEPLOY, 14, "async_chunk: false", "the stages hand over the full payload"),
            cite(
                f"{MODELS}/higgs_audio_v2_code2wav.py", 99, "self.hop_length: int = 960", "25 fps"
            ),
        ),
        assumptions=(
            "One chunk, the whole utterance: the deploy's connector numbers (25 frames, first "
            "1, left context 25) only apply once async_chunk is turned on."
        ),
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/configuration_higgs_audio_v2.py", 71, "sample_rate: int = 24000,"),
            cite(ADAPTER_FILE, 166, "the audio is rendered at native rate (24 kHz)"),
        ),
        "channels": (
            cite(
                f"{MODELS}/higgs_audio_v2_code2wav.py",
                363,
                "wavs.append(pcm.squeeze(0).squeeze(0).to(torch.float32).cpu())",
                "1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 130, "received ref_audio without ref_text"),),
        "instructions": (cite(ADAPTER_FILE, 155, "does not support 'instructions' (voice"),),
        "speed_streaming": (
            cite(ADAPTER_FILE, 166, "does not support 'speed' adjustments", "refused"),
        ),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 42, "max_model_len: 4096"),),
    },
)
