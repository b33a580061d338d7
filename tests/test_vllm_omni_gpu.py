"""Every seed model on a REAL embedded vLLM-Omni engine: runs only where ``vllm_omni``, CUDA and
the model's local weights exist.

Point one variable per model at a local directory (or a repo id already in the Hugging Face
cache; nothing is downloaded):

==================================  =========================================================
``LISTENLAB_VLLM_MODEL_QWEN3_TTS``  e.g. ``/models/Qwen3-TTS-12Hz-0.6B-CustomVoice``
``LISTENLAB_VLLM_MODEL_FISH_SPEECH``  ``/models/s2-pro``
``LISTENLAB_VLLM_MODEL_COSYVOICE3``  ``/models/Fun-CosyVoice3-0.5B-2512``
``LISTENLAB_VLLM_MODEL_MOSS_TTS_NANO``  ``/models/MOSS-TTS-Nano``
``LISTENLAB_VLLM_MODEL_VOXCPM2``  ``/models/VoxCPM2``
==================================  =========================================================

``LISTENLAB_VLLM_MODEL`` (the older name) still selects a Qwen3-TTS model. Then
``pytest -m gpu tests/test_vllm_omni_gpu.py``. Each model streams one sentence (a clone of the
bundled reference clip where the model only clones) and the take must have the model's rate and
channels, a duration that fits the text, real signal and no glitch findings. Elsewhere every
test is skipped with the reason; ``test_vllm_omni_models.py`` covers the same backend against
the stand-in engine.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from backends.base import SpeechRequest
from backends.registry import load_backend
from evaluation.glitches import DetectorConfig, detect, predicted_duration_s
from evaluation.takes import record

pytestmark = pytest.mark.gpu

TEXT = "The embedded engine speaks this sentence once, without gaps or repeats."
RATES = {
    "qwen3_tts": {24000},
    "fish_speech": {44100},
    "cosyvoice3": {24000},
    "moss_tts_nano": {48000},
    "voxcpm2": {48000},
}
CLONE_ONLY = {"cosyvoice3", "moss_tts_nano"}


def _cuda() -> str | None:
    """Why the GPU tests cannot run here, or None when they can."""
    if importlib.util.find_spec("vllm_omni") is None:
        return "needs the vllm_omni package (pip install 'listenlab[gpu]')"
    try:
        import torch
    except ImportError:
        return "needs torch"
    try:
        if not torch.cuda.is_available():
            return "needs a CUDA device"
    except Exception as e:  # a broken driver is a skip reason too
        return f"CUDA is not usable: {e}"
    return None


def _model(name: str) -> str | None:
    value = os.environ.get(f"LISTENLAB_VLLM_MODEL_{name.upper()}")
    if not value and name == "qwen3_tts":
        value = os.environ.get("LISTENLAB_VLLM_MODEL")
    return value or None


def _reference_clip() -> tuple[bytes, str]:
    """A real spoken reference: the bundled Piper voice reading a known sentence."""
    import io

    import soundfile as sf

    from tests.vllm_omni_standin.seed_models import piper_float

    text = "This reference clip was spoken by the bundled voice for cloning."
    x, sr = piper_float(text)
    buf = io.BytesIO()
    sf.write(buf, x, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue(), text


@pytest.mark.parametrize("name", sorted(RATES))
async def test_model_streams_one_clean_sentence(name):
    reason = _cuda()
    if reason:
        pytest.skip(reason)
    model = _model(name)
    if not model:
        pytest.skip(f"set LISTENLAB_VLLM_MODEL_{name.upper()} to a local {name} model")
    if not Path(model).expanduser().exists() and "/" not in model:
        pytest.skip(f"{model} is not on this machine")
    backend = load_backend(f"vllm-omni?model={model}&adapter={name}")
    await backend.start()
    try:
        kw = {}
        if name in CLONE_ONLY:
            kw["ref_audio"], kw["ref_text"] = _reference_clip()
        take = await record(backend, SpeechRequest(TEXT, seed=1, **kw))
        assert take.status == "ok"
        assert take.sample_rate in RATES[name]
        # MOSS-TTS-Nano builds before the mono downmix streamed the codec's stereo
        allowed = {1, 2} if name == "moss_tts_nano" else {backend.capabilities.channels}
        assert take.channels in allowed
        expected = predicted_duration_s(TEXT, 1.0, DetectorConfig())
        assert 0.4 * expected < take.duration_s < 2.5 * expected  # a replayed stream is 2x
        level = float(np.sqrt(np.mean(take.mono().astype(np.float64) ** 2)))
        assert level > 0.005  # not silence
        findings = detect(take)
        assert findings == [], [f.kind for f in findings]
        # stopping after the first chunk aborts; the engine keeps serving
        agen = backend.stream(SpeechRequest(TEXT, **kw))
        assert (await agen.__anext__()).frames > 0
        await agen.aclose()
        again = await record(backend, SpeechRequest("Still here.", **kw))
        assert again.status == "ok" and again.duration_s > 0.2
    finally:
        await backend.aclose()
