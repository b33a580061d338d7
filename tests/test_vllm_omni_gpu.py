"""The embedded vLLM-Omni backend on a real engine: runs only where ``vllm_omni`` and CUDA exist.

Set ``LISTENLAB_VLLM_MODEL`` to a local Qwen3-TTS CustomVoice directory (or a repo id already in
the Hugging Face cache), e.g.
``LISTENLAB_VLLM_MODEL=/models/Qwen3-TTS-12Hz-0.6B-CustomVoice pytest -m gpu``.
Everywhere else this module is skipped; ``test_vllm_omni_embedded.py`` covers the backend
against a stand-in engine.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import pytest_asyncio

pytest.importorskip("vllm_omni")
torch = pytest.importorskip("torch")


def _cuda() -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


if not _cuda():
    pytest.skip("needs a CUDA device", allow_module_level=True)
MODEL = os.environ.get("LISTENLAB_VLLM_MODEL")
if not MODEL:
    pytest.skip("set LISTENLAB_VLLM_MODEL to a local Qwen3-TTS model", allow_module_level=True)

from backends import SpeechRequest, load_backend  # noqa: E402
from evaluation.takes import record  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def backend():
    b = load_backend(f"vllm-omni?model={MODEL}")
    await b.start()
    yield b
    await b.aclose()


@pytest.mark.asyncio(loop_scope="module")
async def test_short_take_is_real_speech(backend):
    take = await record(backend, SpeechRequest("Hello from the embedded engine.", seed=1))
    assert take.status == "ok" and take.channels in (1, 2)
    assert take.sample_rate >= 8000
    assert 0.5 < take.duration_s < 10.0  # six words; a replayed stream would be far longer
    level = float(np.sqrt(np.mean(take.mono().astype(np.float64) ** 2)))
    assert level > 0.005  # not silence
    again = await record(backend, SpeechRequest("Hello from the embedded engine.", seed=1))
    assert abs(again.duration_s - take.duration_s) < 0.25 * take.duration_s


@pytest.mark.asyncio(loop_scope="module")
async def test_abort_then_next_request_works(backend):
    agen = backend.stream(
        SpeechRequest("A longer sentence that we stop after its first chunk arrives.")
    )
    first = await agen.__anext__()
    assert first.frames > 0
    await agen.aclose()
    take = await record(backend, SpeechRequest("Still here."))
    assert take.status == "ok" and take.duration_s > 0.2
