"""Audex text-to-audio (``nvidia/Nemotron-Labs-Audex-2B``, the ``audex_tta`` deploy): a caption
in, general audio out (no voices, no speech); the unit.

No embedded adapter: the RVQ phase mask and the CFG pair need the checkpoint's tokenizer
(``tts_adapters/audex_tta.py``), so it is served remotely only.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.vllm_omni.models.audex import cfg_error
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

ADAPTER_FILE = f"{ADAPTERS_DIR}/audex_tta.py"
DEPLOY = "vllm_omni/deploy/audex_tta.yaml"
XCODEC = "vllm_omni/model_executor/models/audex/audex_xcodec.py"

CFG_SCALE = (1.0, 10.0)
"""``AUDEX_TTA_CFG_SCALE_MIN`` / ``_MAX``; the default scale is 3.0."""
INTERNAL_KEYS = ("cfg_role", "cfg_pair_id", "cfg_null_prompt", "tta_rvq")


@dataclass(frozen=True)
class AudexTTARules(SpeechRules):
    """``AudexTTAAdapter.validate`` (``tts_adapters/audex_tta.py:58``), check for check."""

    def validate(self, view: RequestView, ctx: RuleContext) -> str | None:
        if not view.input or not view.input.strip():
            return "Audex TTA requires a non-empty caption"
        voice = (view.voice or "").strip().lower()
        if voice not in ("", "default"):
            return f"Audex TTA generates general audio and has no voices; got voice={view.voice!r}."
        if view.ref_audio is not None:
            return "Audex TTA does not support reference audio."
        lo, hi = CFG_SCALE
        hint = "The official TTA setting is 3.0; 1.0 disables guidance."
        return cfg_error(view.extra_params, INTERNAL_KEYS, lo, hi, hint)


RULE_SOURCES = (
    cite(ADAPTER_FILE, 58, "def validate(self, request", "ported as AudexTTARules.validate"),
    cite(ADAPTER_FILE, 24, "AUDEX_TTA_CFG_SCALE_MAX = 10.0"),
    NO_RESAMPLING,
)

MODEL = ModelUnit(
    name="audex_tta",
    title="Audex TTA (text to audio)",
    keys=("audex-tta", "audex_tta"),
    checkpoint="nvidia/Nemotron-Labs-Audex-2B",
    sample_rate=16000,
    channels=1,
    max_model_len=8192,
    rules=AudexTTARules("audex_tta", rules_text(RULE_SOURCES)),
    schedule=ChunkSchedule(
        frame_hz=50.0,
        first_frames=(1,),
        chunk_frames=1,
        async_chunk=False,
        whole_file=True,
        sources=(cite(DEPLOY, 18, "async_chunk: false", "XCodec1 decodes the full sequence once"),),
        assumptions=(
            "One chunk, the whole clip (the sync full-payload path); decode truncates at 500 "
            "frames, about 10 s (audex_tta.yaml's header)."
        ),
    ),
    sources={
        "sample_rate": (
            cite(XCODEC, 82, 'self._sample_rate = int(getattr(config, "sampling_rate", 16000))'),
            assumed("hf-audio/xcodec-hubert-general-balanced's config keeps 16 kHz"),
        ),
        "channels": (
            cite(
                XCODEC, 141, 'return audio.reshape(-1).to(dtype=torch.float32, device="cpu")', "1-D"
            ),
        ),
        "cloning": (cite(ADAPTER_FILE, 65, "Audex TTA does not support reference audio."),),
        "instructions": (
            cite(ADAPTER_FILE, 90, 'prompt = {"prompt": build_tta_cond_prompt(request.input)}'),
        ),
        "speed_streaming": (STRETCHED,),
        "rules": RULE_SOURCES,
        "max_model_len": (cite(DEPLOY, 38, "max_model_len: 8192", "stage 0"),),
    },
)
