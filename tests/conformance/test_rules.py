"""Every model's request rules against vLLM-Omni 0.30.0's own adapters, request for request.

Each unit of ``backends/vllm_omni/models/`` ports its adapter's ``validate``. Here the same
requests (:data:`CASES`: blank input, voices built-in, uploaded, unknown and ``default``, clips
of each scheme, transcripts, languages, instructions at their limits, task types, embeddings,
``max_new_tokens`` and ``speed`` at their bounds, each model's ``extra_params``, …) are answered by
the port and by vLLM-Omni's code itself (``rules_check.py`` in the conformance environment:
every registered adapter on the real serving methods), and every answer must be the same words,
or both none. The registry itself is read too: the units are exactly its 23 adapters.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from backends.vllm_omni.models import UNITS
from backends.vllm_omni.rules import (
    RequestView,
    RuleContext,
    Uploaded,
    adapter_error,
    default_voice,
    sample_rate_error,
)
from tests.conformance.conftest import ROOT, conformance_python

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(1200)]

CLIP = "data:audio/wav;base64,AAAA"
"""An inline clip of a valid scheme (the checks never decode it)."""
T = "Hello there."

CASES: list[dict] = [
    {"input": T},
    {"input": "   "},
    {"input": "[SPEAKER1] Hello."},
    *({"input": T, "voice": v} for v in ("default", "Default", "nobody", "vivian", "Vivian")),
    *({"input": T, "voice": v} for v in ("up1", "UP1", "emb1", "neutral_male", "S3")),
    {"input": T, "ref_audio": CLIP},
    {"input": T, "ref_audio": CLIP, "ref_text": "A transcript."},
    {"input": T, "ref_audio": CLIP, "ref_text": "   "},
    {"input": T, "ref_audio": "not-a-url", "ref_text": "A transcript."},
    {"input": T, "ref_audio": "file:///tmp/x.wav", "ref_text": "A transcript."},
    {"input": T, "ref_audio": [CLIP, CLIP], "ref_text": "A transcript."},
    {"input": T, "ref_audio": [CLIP], "ref_text": "A transcript."},
    {"input": T, "ref_text": "A transcript."},
    {"input": T, "voice": "up1", "ref_text": "Another transcript."},
    {"input": T, "voice": "vivian", "ref_audio": CLIP, "ref_text": "A transcript."},
    *({"input": T, "language": v} for v in ("English", "english", "Auto", "Klingon")),
    {"input": T, "instructions": "Speak warmly."},
    {"input": T, "instructions": "x" * 501},
    {"input": T, "instructions": "x" * 20001},
    *({"input": T, "task_type": v} for v in ("CustomVoice", "VoiceDesign", "Base")),
    {"input": T, "task_type": "Base", "ref_audio": CLIP, "ref_text": "A transcript."},
    {"input": T, "task_type": "VoiceDesign", "instructions": "A calm voice."},
    {"input": T, "x_vector_only_mode": True},
    {"input": T, "speaker_embedding": [0.1] * 192},
    {"input": T, "speaker_embedding": [0.1] * 1024, "task_type": "Base"},
    *({"input": T, "max_new_tokens": n} for n in (1, 4096, 4097, 9000, 9001)),
    *({"input": T, "speed": s} for s in (0.25, 0.5, 1.5, 2.0, 3.0)),
    *({"input": T, "sample_rate": r} for r in (8000, 16000, 24000, 44100)),
    {"input": T, "extra_params": {"temperature": 0.5}},
    {"input": T, "extra_params": {"cfg_scale": 1.5}},
    {"input": T, "extra_params": {"cfg_scale": 20}},
    {"input": T, "extra_params": {"cfg_scale": "loud"}},
    {"input": T, "extra_params": {"cfg_role": "cond"}},
    {"input": T, "extra_params": {"guidance_scale": 0}},
    {"input": T, "extra_params": {"top_k": 1.5}},
    {"input": T, "extra_params": {"bogus": 1}},
    {"input": T, "extra_params": {"emo_vector": [0.5] * 8, "emo_alpha": 0.6}},
    {"input": T, "extra_params": {"emo_vector": [2.0] * 8}},
    {"input": T, "extra_params": {"emo_audio": "nope"}},
    {"input": T, "extra_params": {"use_random": "yes"}},
    {"input": T, "extra_params": {"lang": "en"}},
    {"input": T, "extra_params": {"lang": "Klingon"}},
    {"input": T, "extra_params": {"text_normalization": 1}},
    {"input": T, "word_timestamps": True},
    {"input": T, "response_format": "opus"},
    {"input": T, "initial_codec_chunk_frames": 5},
    {"input": T, "non_streaming_mode": True},
    {"input": T, "ambient_sound": "Rain on a tin roof."},
    {"input": "", "ambient_sound": "Rain on a tin roof."},
    {"input": T, "duration_seconds": 3.0},
    {"input": T, "ref_audio": CLIP, "ref_audio_2": "not-a-url"},
    {"input": T, "ref_audio": CLIP, "ref_audio_2": CLIP},
    {"input": "La la la.", "instructions": "Slow piano ballad, 70 BPM."},
    {"input": "La la la.", "instructions": "   "},
]
"""Requests every model is asked (valid for both request schemas)."""

VOXTRAL_PRESETS = UNITS["voxtral_tts"].presets
MODELS = {
    **{name: {"unit": name, "checkpoint": u.checkpoint} for name, u in UNITS.items()},
    "qwen3_tts base": {"unit": "qwen3_tts", "checkpoint": "Qwen/Qwen3-TTS-12Hz-1.7B-Base"},
    "qwen3_tts design": {"unit": "qwen3_tts", "checkpoint": "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"},
    **{
        f"moss_tts {v}": {"unit": "moss_tts", "checkpoint": f"OpenMOSS-Team/{v}"}
        for v in (
            "MOSS-TTSD-v1.0",
            "MOSS-SoundEffect",
            "MOSS-VoiceGenerator",
            "MOSS-TTS-Realtime",
            "MOSS-TTS-Local-Transformer-v1.5",
        )
    },
}
"""Each unit on its checkpoint, and the variants vLLM-Omni tells apart by the checkpoint's name."""

REGISTRY_NAME = {"fish_speech": "fish_tts"}
"""Units whose adapter registers under another name."""


def built_in(unit) -> dict[str, list[str]]:
    """The speakers the checkpoint's config lists (Qwen3-TTS's talker, Voxtral's audio config),
    as the reference reads them: the unit's documented presets stand for the config here."""
    if unit.name == "qwen3_tts":
        return {"talker": list(unit.presets)}
    if unit.name == "voxtral_tts":
        return {"audio": list(VOXTRAL_PRESETS)}
    return {}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    spec = {
        "cases": CASES,
        "models": {
            label: {
                "adapter": REGISTRY_NAME.get(m["unit"], m["unit"]),
                "checkpoint": m["checkpoint"],
                "speakers": built_in(UNITS[m["unit"]]),
            }
            for label, m in MODELS.items()
        },
    }
    path = tmp_path_factory.mktemp("rules") / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    p = subprocess.run(
        [conformance_python(), str(Path(__file__).with_name("rules_check.py")), str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{"))
    return json.loads(line)


def ours(label: str, body: dict) -> str | None:
    """listenlab's answer: the unit's rules as ``listenlab api`` applies them."""
    m = MODELS[label]
    unit = UNITS[m["unit"]]
    uploaded = {"up1": Uploaded("audio", "An uploaded voice."), "emb1": Uploaded("direct")}
    ctx = RuleContext(m["checkpoint"], unit.rules, frozenset(unit.presets), uploaded)
    view = RequestView.of(SimpleNamespace(**body))
    default_voice(view, ctx)
    return sample_rate_error(unit.rules, view.sample_rate) or adapter_error(view, ctx)


def test_the_units_are_the_registry(reference):
    registry = set(reference["registry"])
    assert registry == {REGISTRY_NAME.get(n, n) for n in UNITS}, registry ^ set(UNITS)
    assert len(registry) == 23


@pytest.mark.parametrize("label", sorted(MODELS))
def test_every_refusal_is_the_adapters(reference, label):
    answers = reference["answers"][label]
    differ = []
    for body, theirs in zip(CASES, answers, strict=True):
        if theirs == "<schema>":
            continue
        mine = ours(label, body)
        if mine != theirs:
            differ.append(
                f"{json.dumps(body)[:120]}\n    vLLM-Omni: {theirs}\n    listenlab: {mine}"
            )
    refused = sum(a not in (None, "<schema>") for a in answers)
    assert refused > 5 and answers.count(None) > 0, (refused, answers.count(None))
    assert not differ, "\n".join(differ)
