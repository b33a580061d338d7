"""IndexTTS-2 (``IndexTeam/IndexTTS-2``): GPT talker, then s2mel and BigVGAN, 22.05 kHz; zero-shot
cloning only, whole files only (``async_chunk: false``); the unit.

No embedded adapter: its prompt length comes from the checkpoint's tokenizer and text
normalizer (``indextts2/prompt_utils.py``), so it is served remotely only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import (
    EMPTY_INPUT,
    MAX_NEW_TOKENS_RANGE,
    RequestView,
    RuleContext,
    SpeechRules,
    ref_audio_format_error,
)

ADAPTER_FILE = f"{ADAPTERS_DIR}/indextts2.py"
DEPLOY = "vllm_omni/deploy/indextts2.yaml"
MODELS = "vllm_omni/model_executor/models/indextts2"
NEEDS_CLIP = "IndexTTS2 requires 'ref_audio' or an uploaded audio voice for voice cloning"


@dataclass(frozen=True)
class IndexTTS2Rules(SpeechRules):
    """``IndexTTS2Adapter.validate`` and ``_validate_extra_params``
    (``tts_adapters/indextts2.py:140``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return EMPTY_INPUT
        voice = view.voice.lower() if isinstance(view.voice, str) else None
        uploaded = ctx.uploaded.get(voice) if voice else None
        has_uploaded_voice = uploaded is not None and uploaded.source != "direct"
        if view.ref_audio is None and not has_uploaded_voice:
            return NEEDS_CLIP
        if view.ref_audio is not None:
            err = ref_audio_format_error(view.ref_audio)
            if err:
                return err
        lo, hi = MAX_NEW_TOKENS_RANGE
        if view.max_new_tokens is not None and view.max_new_tokens < lo:
            return f"max_new_tokens must be at least {lo}"
        if view.max_new_tokens is not None and view.max_new_tokens > hi:
            return f"max_new_tokens cannot exceed {hi}"
        if view.extra_params is not None:
            if not isinstance(view.extra_params, dict):
                return "extra_params must be a JSON object/dict."
            return self.extra_error(view.extra_params)
        return None

    def extra_error(self, extras: dict) -> str | None:
        """The emotion controls of ``extra_params`` and their types."""
        if "emo_audio" in extras:
            value = extras["emo_audio"]
            if not isinstance(value, str):
                return (
                    "extra_params.emo_audio must be a URL (http/https), base64 data URL "
                    "(data:...), or file URI (file://...)"
                )
            err = ref_audio_format_error(value)
            if err:
                return err.replace("ref_audio", "extra_params.emo_audio", 1)
        return emotion_error(extras)


def is_number(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(float(value))
    )


def emotion_error(extras: dict) -> str | None:
    """``emo_vector`` (8 numbers in [0, 1.2]), ``emo_alpha``, ``emo_text`` and the flags."""
    if "emo_vector" in extras:
        value = extras["emo_vector"]
        if not isinstance(value, list) or len(value) != 8:
            return "extra_params.emo_vector must be a list of 8 numbers"
        for item in value:
            if not is_number(item):
                return "extra_params.emo_vector must be a list of 8 finite numbers"
            if float(item) < 0.0 or float(item) > 1.2:
                return "extra_params.emo_vector values must be in [0, 1.2]"
    if "emo_alpha" in extras and not is_number(extras["emo_alpha"]):
        return "extra_params.emo_alpha must be a finite number"
    emo_text = extras.get("emo_text")
    if emo_text is not None and not isinstance(emo_text, str):
        return "extra_params.emo_text must be a string"
    for key in ("use_emo_text", "use_random"):
        if key in extras and not isinstance(extras[key], bool):
            return f"extra_params.{key} must be a boolean"
    return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 140, "def validate(self, request", "ported as IndexTTS2Rules.validate"),
    cite(ADAPTER_FILE, 170, "def _validate_extra_params(self, extras", "ported as extra_error"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="indextts2",
    title="IndexTTS-2",
    keys=("indextts", "index-tts-2"),
    checkpoint="IndexTeam/IndexTTS-2",
    sample_rate=22050,
    channels=1,
    cloning=True,
    max_model_len=2560,
    rules=IndexTTS2Rules("indextts2", rules_text(RULE_SOURCES), requires_ref_audio=NEEDS_CLIP),
    schedule=ChunkSchedule(
        frame_hz=22050 / 256,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=False,
        whole_file=True,
        sources=(cite(DEPLOY, 1, "async_chunk: false", "the s2mel stage runs once, on all codes"),),
        assumptions="One chunk, the whole utterance; the frame rate is not used.",
    ),
    sources={
        "sample_rate": (
            cite(f"{MODELS}/configuration_indextts2.py", 78, '"sr": 22050,'),
            cite(
                f"{MODELS}/indextts2_s2mel_decoder.py",
                631,
                '"sr": torch.tensor(22050, dtype=torch.int32),',
            ),
        ),
        "channels": (
            cite(
                f"{MODELS}/indextts2_s2mel_decoder.py",
                1310,
                "wav = vocode(mel_input.to(voc_dtype)).float().squeeze(0).squeeze(0)",
                "1-D: mono",
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 152, "IndexTTS2 requires 'ref_audio' or an uploaded"),),
        "instructions": (
            cite(
                ADAPTER_FILE,
                257,
                'params: dict[str, Any] = {"text": [request.input]}',
                "emotion via extra_params",
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 20, "max_model_len: 2560"),),
    },
)
