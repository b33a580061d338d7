"""The generated request matrix (``matrix.py``) sent to vLLM-Omni 0.30.0 and to ``listenlab api``
for every seed model, over HTTP and the WebSocket: every answer must be the same, byte for
byte where it is audio, except the differences docs/api.md lists (``EXCEPTIONS`` here: each id
is a row of that table, with its reason there).

``listenlab api`` serves each seed model's name over the model's own wire profile
(``piper?deterministic=1&profile=NAME&pace=0``, exactly what a user runs: the model's voices,
clone fields and rules, spoken by Piper); the scripted engine speaks the same Piper samples
(``engine.py`` ``PiperVoice``), so audio must match to the byte. The voices each server has come
from vLLM-Omni's side (its docs' Qwen3-TTS speakers in the scripted checkpoint) and from the
unit's (its presets): a difference between the two lists is a difference the matrix shows.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import re
from pathlib import Path

import httpx
import pytest

from app.api import create_api_app
from backends.registry import load_backend
from backends.vllm_omni.models import UNITS
from tests.conformance.engine import SEEDS
from tests.conformance.matrix import (
    MODEL_FIELDS,
    SUMMARY,
    Case,
    field_cases,
    mode_cases,
    run_cases,
    ws_mode_cases,
)
from tests.support.remote_util import ServerThread

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
MODELS = tuple(SEEDS)
"""Every model the scripted engine serves (its prompt built without the checkpoint)."""
REF_TEXT = "This is my reference voice clip."


def profile_spec(model: str) -> str:
    """The model's own profile over the deterministic CPU voice, unpaced: what a user runs."""
    return f"piper?deterministic=1&profile={UNITS[model].profile}&pace=0"


def base_request(model: str, clip: str) -> dict:
    """The smallest request the model takes: a clip where it only clones."""
    if UNITS[model].rules.requires_ref_audio:
        return {"input": "Hi there.", "ref_audio": clip, "ref_text": REF_TEXT}
    return {"input": "Hi there."}


def _resampled(case: Case, a, b) -> bool:
    """sample_rate other than the model's: the same length, other resampler's samples."""
    if not isinstance(case.body.get("sample_rate"), int) or not isinstance(a, dict):
        return False
    return _same_but_samples(a, b)


def _stretched(case: Case, a, b) -> bool:
    """speed != 1 on a whole file: the same length, float32 rounding of the stretch."""
    speed = case.body.get("speed")
    if not isinstance(speed, int | float) or speed == 1.0:
        return False
    if isinstance(a, list):

        def drop(msgs):
            out = []
            for m in msgs:
                if m[0] == "binary":
                    out.append(("binary",))
                elif m[0] == "audio.done":
                    out.append((m[0], m[1], {k: v for k, v in m[2].items() if k != "total_bytes"}))
                else:
                    out.append(m)
            return out

        return drop(a) == drop(b)
    return _same_but_samples(a, b)


def _same_but_samples(a: dict, b: dict) -> bool:
    strip = ("pcm",)
    a2 = {k: v for k, v in a.items() if k not in strip and k != "audio"}
    b2 = {k: v for k, v in b.items() if k not in strip and k != "audio"}
    if "audio" in a and "audio" in b:
        a2["audio"] = {k: v for k, v in a["audio"].items() if k != "pcm"}
        b2["audio"] = {k: v for k, v in b["audio"].items() if k != "pcm"}
    return a2 == b2


def _ws_same_but_samples(a: list, b: list) -> bool:
    def drop(msgs):
        return [(m[0], m[2]) if m[0] == "binary" else m for m in msgs]

    return drop(a) == drop(b)


def _ws_codes(msgs: list) -> list:
    return [("closed",) if m[0] == "closed" else m for m in msgs]


def _ws_close_frame(case: Case, a, b) -> bool:
    """After refusing a session, vLLM-Omni drops the TCP connection without a close frame
    (the client sees 1006, and may lose the refusal itself to the reset); listenlab sends the
    refusal and closes properly (1000)."""
    if not isinstance(a, list):
        return False
    lost = len(a) == 1 and a[0][0] == "closed" and [m[0] for m in b] == ["error", "closed"]
    return lost or (_ws_codes(a) == _ws_codes(b) and a != b)


def _audio_start_format(case: Case, a, b) -> bool:
    """``audio.start`` with ``stream_audio``: listenlab states the true rate and channels;
    vLLM-Omni 0.30.0 states a nominal 24000 and no channels, whatever the model's rate."""
    if not isinstance(a, list):
        return False

    def strip(msgs):
        out = []
        for m in _ws_codes(msgs):
            if m[0] == "audio.start":
                keys = tuple(k for k in m[1] if k != "channels")
                out.append((m[0], keys, {k: v for k, v in m[2].items() if k != "sample_rate"}))
            else:
                out.append(m)
        return out

    return strip(a) == strip(b)


def _fetches_nothing(case: Case, a, b) -> bool:
    """``ref_audio`` by ``file://`` or with no scheme: listenlab fetches nothing."""
    ref = case.body.get("ref_audio")
    return isinstance(ref, str) and not ref.startswith("data:")


EXCEPTIONS = {
    "ws-close-frame": _ws_close_frame,
    "audio-start-format": _audio_start_format,
    "resampler": _resampled,
    "speed-rounding": _stretched,
    "fetches-nothing": _fetches_nothing,
}
"""Each id is a row of docs/api.md's "Where listenlab api answers differently" table."""


@pytest.fixture(scope="module")
def clip(piper_det) -> str:
    """A 1-30 s reference clip as a data URL."""
    import soundfile as sf

    from backends.base import SpeechRequest

    audio = asyncio.run(piper_det.synthesize(SpeechRequest(REF_TEXT)))
    buf = io.BytesIO()
    sf.write(buf, audio.samples, audio.sample_rate, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def pairs(omni):
    """(reference URL, listenlab api URL) per seed model, the same model name on both."""
    servers, out = [], {}
    try:
        for model in MODELS:
            be = load_backend(profile_spec(model))
            srv = ServerThread(create_api_app(be, served_model=SEEDS[model].served)).start()
            servers.append(srv)
            out[model] = (omni.url(model), srv.url)
        yield out
    finally:
        for srv in servers:
            srv.stop()


def all_cases(omni, pairs, clip) -> list[Case]:
    schemas = httpx.get(omni.url("qwen3_tts") + "/_conformance/schema", timeout=60).json()
    cases = []
    only = os.environ.get("LISTENLAB_MATRIX_MODELS")  # development: a subset
    for model in MODELS if not only else only.split(","):
        base = base_request(model, clip)
        voices = list(UNITS[model].presets)
        first = model == "qwen3_tts"
        fields = None if first else MODEL_FIELDS
        formats = ("wav", "pcm", "flac", "mp3", "opus") if first else ("wav", "pcm", "opus")
        cases += field_cases(model, "http", schemas["speech"], base, clip, voices, fields)
        cases += mode_cases(model, base, formats)
        cases += field_cases(model, "ws", schemas["session"], base, clip, voices, fields)
        cases += ws_mode_cases(model, base, formats)
    return cases


def explained(case: Case, a, b) -> str | None:
    return next((k for k, pred in EXCEPTIONS.items() if pred(case, a, b)), None)


@pytest.mark.timeout(1800)
def test_the_matrix_answers_alike(omni, pairs, clip, record_property):
    cases = all_cases(omni, pairs, clip)
    result = asyncio.run(run_cases(pairs, cases))
    unexplained = [(c, a, b) for c, a, b in result.differ if not explained(c, a, b)]
    by_exception: dict[str, int] = {}
    for c, a, b in result.differ:
        k = explained(c, a, b)
        if k:
            by_exception[k] = by_exception.get(k, 0) + 1
    summary = (
        f"request matrix: {result.sent} requests sent to both servers "
        f"(vLLM-Omni 0.30.0 and listenlab api), {len(result.differ)} differ, "
        f"{len(unexplained)} outside the listed exceptions (listed: {by_exception})"
    )
    print("\n" + summary)
    record_property(SUMMARY, summary)  # printed at the end of the run (conftest.py)
    for c, a, b in unexplained[:40]:
        print(f"- {c.model} {c.transport} {c.name}:\n    vLLM-Omni: {a}\n    listenlab: {b}")
    assert result.sent == len(cases) and (
        result.sent > 500 or os.environ.get("LISTENLAB_MATRIX_MODELS")
    )
    assert unexplained == []


def test_every_exception_is_documented():
    doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = doc.split("## Where listenlab api answers differently", 1)[1]
    ids = set(re.findall(r"^\| `([a-z-]+)` \|", section, flags=re.M))
    assert set(EXCEPTIONS) <= ids, set(EXCEPTIONS) - ids
