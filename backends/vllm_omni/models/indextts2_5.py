"""IndexTTS-2.5: IndexTTS-2 with a multilingual tokenizer and native speed (duration) control,
22.05 kHz, zero-shot cloning only, whole files only; the unit.

No embedded adapter (see :mod:`backends.vllm_omni.models.indextts2`).
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.indextts2 import NEEDS_CLIP, IndexTTS2Rules
from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    ChunkSchedule,
    ModelUnit,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import RequestView, RuleContext

ADAPTER_FILE = f"{ADAPTERS_DIR}/indextts2.py"
DEPLOY = "vllm_omni/deploy/indextts2_5.yaml"
MODELS = "vllm_omni/model_executor/models/indextts2"
TOKENIZER = f"{MODELS}/tokenizer_v2_5.py"
SPEED_RANGE = (0.5, 2.0)
"""``INDEXTTS25_MIN_DURATION_FACTOR`` / ``_MAX_``: speed becomes ``duration_factor = 1 / speed``."""

# tokenizer_v2_5.py LANGUAGES, TO_LANGUAGE_CODE and _FRONTEND_LANGUAGE_TO_EMBEDDING (data).
LANGUAGES = [
    "en",
    "zh",
    "de",
    "es",
    "ru",
    "ko",
    "fr",
    "ja",
    "pt",
    "tr",
    "pl",
    "ca",
    "nl",
    "ar",
    "sv",
    "it",
    "id",
    "hi",
    "fi",
    "vi",
    "he",
    "uk",
    "el",
    "ms",
    "cs",
    "ro",
    "da",
    "hu",
    "ta",
    "no",
    "th",
    "ur",
    "hr",
    "bg",
    "lt",
    "la",
    "mi",
    "ml",
    "cy",
    "sk",
    "te",
    "fa",
    "lv",
    "bn",
    "sr",
    "az",
    "sl",
    "kn",
    "et",
    "mk",
    "br",
    "eu",
    "is",
    "hy",
    "ne",
    "mn",
    "bs",
    "kk",
    "sq",
    "sw",
    "gl",
    "mr",
    "pa",
    "si",
    "km",
    "sn",
    "yo",
    "so",
    "af",
    "oc",
    "ka",
    "be",
    "tg",
    "sd",
    "gu",
    "am",
    "yi",
    "lo",
    "uz",
    "fo",
    "ht",
    "ps",
    "tk",
    "nn",
    "mt",
    "sa",
    "lb",
    "my",
    "bo",
    "tl",
    "mg",
    "as",
    "tt",
    "haw",
    "ln",
    "ha",
    "ba",
    "jw",
    "su",
    "yue",
    "minnan",
    "wuyu",
    "dialect",
    "zh/en",
    "en/zh",
    "common",
]
TO_LANGUAGE_CODE = {
    "english": "en",
    "chinese": "zh",
    "german": "de",
    "spanish": "es",
    "russian": "ru",
    "korean": "ko",
    "french": "fr",
    "japanese": "ja",
    "portuguese": "pt",
    "turkish": "tr",
    "cantonese": "yue",
    "mandarin": "zh",
    "burmese": "my",
    "valencian": "ca",
    "flemish": "nl",
    "haitian": "ht",
    "letzeburgesch": "lb",
    "pushto": "ps",
    "panjabi": "pa",
    "moldavian": "ro",
    "moldovan": "ro",
    "sinhalese": "si",
    "castilian": "es",
}
FRONTEND_LANGUAGES = ("zhen",)


def language_error(lang: str) -> str | None:
    """``normalize_language_code``'s refusal of a language it does not know."""
    normalized = TO_LANGUAGE_CODE.get(lang.strip().lower(), lang.strip().lower())
    if normalized in LANGUAGES or normalized in FRONTEND_LANGUAGES:
        return None
    supported = (*LANGUAGES, *sorted(FRONTEND_LANGUAGES))
    return f"Unsupported IndexTTS 2.5 language {lang!r}; expected one of {', '.join(supported)}"


@dataclass(frozen=True)
class IndexTTS25Rules(IndexTTS2Rules):
    """``IndexTTS25Adapter.validate`` (``tts_adapters/indextts2.py:291``): IndexTTS-2's checks,
    then the speed range; ``extra_params.lang`` and ``text_normalization`` too."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        err = super().validate(view, ctx)
        if err is not None:
            return err
        speed = view.speed if view.speed is not None else 1.0
        lo, hi = SPEED_RANGE
        if speed < lo or speed > hi:
            return "IndexTTS 2.5 speed must be between 0.5 and 2.0"
        return None

    def extra_error(self, extras: dict) -> str | None:
        err = super().extra_error(extras)
        if err is not None:
            return err
        if "lang" in extras:
            if not isinstance(extras["lang"], str):
                return "extra_params.lang must be a string"
            err = language_error(extras["lang"])
            if err:
                return err
        if "text_normalization" in extras and not isinstance(extras["text_normalization"], bool):
            return "extra_params.text_normalization must be a boolean"
        return None


RULE_SOURCES = (
    cite(ADAPTER_FILE, 291, "def validate(self, request", "ported as IndexTTS25Rules.validate"),
    cite(ADAPTER_FILE, 300, "def _validate_extra_params(self, extras", "ported as extra_error"),
    cite(TOKENIZER, 209, "def normalize_language_code(lang: str) -> str:", "its languages copied"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="indextts2_5",
    title="IndexTTS-2.5",
    keys=("indextts-2.5", "indextts2.5", "indextts2_5", "index-tts-2.5"),
    checkpoint="IndexTeam/IndexTTS-2.5",
    sample_rate=22050,
    channels=1,
    cloning=True,
    speed_streaming=True,
    max_model_len=2560,
    rules=IndexTTS25Rules("indextts2_5", rules_text(RULE_SOURCES), requires_ref_audio=NEEDS_CLIP),
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
        "speed_streaming": (
            cite(ADAPTER_FILE, 289, "native_speed_control: ClassVar[bool] = True"),
            cite(ADAPTER_FILE, 337, 'params["duration_factor"] = [1.0 / speed]'),
        ),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 24, "max_model_len: 2560"),),
    },
)
