"""Audex TTS (``nvidia/Nemotron-Labs-Audex-2B``, the ``audex_tts`` deploy): plain English TTS
with one built-in voice and optional classifier-free guidance; the unit.

No embedded adapter: its prompt and CFG pair need the checkpoint's tokenizer folders
(``tts_adapters/audex.py`` ``_get_tokenizer``), so it is served remotely only.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.unit import (
    ADAPTERS_DIR,
    NO_RESAMPLING,
    STRETCHED,
    ChunkSchedule,
    ModelUnit,
    assumed,
    cite,
    rules_text,
)
from backends.vllm_omni.rules import RequestView, RuleContext, SpeechRules

ADAPTER_FILE = f"{ADAPTERS_DIR}/audex.py"
DEPLOY = "vllm_omni/deploy/audex_tts.yaml"
DECODER = "vllm_omni/model_executor/models/audex/speech_decoder"
DECODER_CONFIG = f"{DECODER}/configuration_audex_causal_speech_decoder.py"
CODE2WAV = "vllm_omni/model_executor/models/audex/audex_code2wav.py"

CFG_SCALE = (1.0, 10.0)
"""``AUDEX_CFG_SCALE_MIN`` / ``_MAX``: ``extra_params.cfg_scale`` bounds."""
INTERNAL_CFG_KEYS = ("cfg_role", "cfg_pair_id", "cfg_null_prompt")


def cfg_error(
    extra: object, internal: tuple[str, ...], lo: float, hi: float, hint: str
) -> str | None:
    """Audex's ``extra_params`` check (TTS and TTA): no internal keys, a numeric
    ``cfg_scale`` within ``[lo, hi]``."""
    extra = extra if isinstance(extra, dict) else {}
    for key in internal:
        if key in extra:
            return f"extra_params.{key} is managed internally by the server; only cfg_scale may be set."
    cfg_scale = extra.get("cfg_scale")
    if cfg_scale is None:
        return None
    try:
        value = float(cfg_scale)
    except (TypeError, ValueError):
        return f"extra_params.cfg_scale must be a number in [{lo}, {hi}]; got {cfg_scale!r}."
    if not lo <= value <= hi:
        return f"extra_params.cfg_scale must be within [{lo}, {hi}]; got {cfg_scale!r}. {hint}"
    return None


@dataclass(frozen=True)
class AudexRules(SpeechRules):
    """``AudexAdapter.validate`` (``tts_adapters/audex.py:71``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return "Audex TTS requires non-empty input text"
        voice = (view.voice or "").strip().lower()
        if voice not in ("", "default"):
            return (
                f"Audex has a single built-in voice and no voice cloning; got voice={view.voice!r}. "
                "Omit 'voice' or pass 'default'."
            )
        if view.ref_audio is not None:
            return "Audex does not support reference audio (no voice cloning)."
        lo, hi = CFG_SCALE
        hint = "1.0 disables guidance; 1.5 is the recommended quality setting."
        return cfg_error(view.extra_params, INTERNAL_CFG_KEYS, lo, hi, hint)


RULE_SOURCES = (
    cite(ADAPTER_FILE, 71, "def validate(self, request", "ported as AudexRules.validate"),
    cite(ADAPTER_FILE, 20, "AUDEX_CFG_SCALE_MAX = 10.0"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="audex",
    title="Audex TTS",
    keys=("audex",),
    checkpoint="nvidia/Nemotron-Labs-Audex-2B",
    sample_rate=16000,
    channels=1,
    max_model_len=4096,
    rules=AudexRules("audex", rules_text(RULE_SOURCES)),
    schedule=ChunkSchedule(
        frame_hz=50.0,
        first_frames=(20,),
        chunk_frames=25,
        async_chunk=True,
        sources=(
            cite(DEPLOY, 23, "async_chunk: true"),
            cite(DEPLOY, 35, "initial_codec_chunk_frames: 1", "the first connector chunk"),
            cite(DEPLOY, 33, "codec_chunk_frames: 25"),
            cite(
                DEPLOY, 39, "decoder_emit_chunk_frames: 5", "the decoder emits 5 frames at a time"
            ),
            cite(DECODER_CONFIG, 30, "lookahead_steps: int = 4", "and holds 4 frames back"),
            cite(DECODER_CONFIG, 28, "hop_length: int = 320", "320 samples at 16 kHz: 50 frames/s"),
            cite(
                f"{DECODER}/modeling_audex_causal_speech_decoder.py",
                445,
                "while self.buffer and (flush or ready_frames >= self.chunk_frames):",
                "only whole 5-frame emits past the lookahead leave the decoder",
            ),
        ),
        assumptions=(
            "Derived, not stated: the 1-frame first connector chunk cannot be decoded (5 frames "
            "plus 4 of lookahead are needed), so the first audio comes with the second chunk: "
            "26 frames buffered, 22 ready, four 5-frame emits = 20 frames; every later chunk "
            "of 25 frames leaves 25 (the 4 held back carry over)."
        ),
    ),
    sources={
        "sample_rate": (
            cite(DECODER_CONFIG, 31, "sample_rate: int = 16000", "the decoder config's default"),
            cite(CODE2WAV, 99, "self._sample_rate = int(config.sample_rate)"),
            assumed(
                "the released checkpoint keeps the decoder config's 16 kHz default (its "
                "config.json is not in the wheel)"
            ),
        ),
        "channels": (cite(CODE2WAV, 175, "chunks.append(chunk.reshape(-1))", "1-D: mono"),),
        "cloning": (cite(ADAPTER_FILE, 81, "Audex does not support reference audio"),),
        "instructions": (
            cite(
                ADAPTER_FILE,
                105,
                'prompt = {"prompt": build_cond_prompt(request.input)}',
                "input only",
            ),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 49, "max_model_len: 4096"),),
    },
)
