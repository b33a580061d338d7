"""``listenlab probe`` and the Playground (real Chromium) against vLLM-Omni's own server.

The probe must pass on the healthy server and fail on the two bugs its streaming path had
(issues #3032 replay, #2907 / #3326 doubled audio), injected in the scripted engine only: the
serving code that relays them is vLLM-Omni's. The Playground must stream Qwen3-TTS (80 ms first
chunk, then 2 s chunks, paced at 2x real time: the fast schedule) with no underrun.
"""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.probe import Thresholds, load_prompts, probe_sync
from tests.conformance.test_remote_backend import SERVED
from tests.support.app_util import (
    chromium,
    live_server,
    open_playground,
    page_pcm,
    speak,
    tmp_db,
    wait_finished,
)

pytestmark = pytest.mark.conformance

# Timing is judged loosely (a shared, loaded 2-core machine); the bugs are not timing.
TH = Thresholds(max_stall_ms=10000)


@pytest.fixture(scope="module")
def prompts():
    return load_prompts()[1:2]  # the paragraph: several 2 s chunks


def spec(omni, target: str, mode: str = "sse") -> str:
    return f"vllm-omni+{omni.url(target)}?model={SERVED['qwen3_tts']}&mode={mode}"


@pytest.mark.parametrize("mode", ["sse", "ws"])
def test_probe_passes_on_vllm_omni(omni, prompts, mode):
    r = probe_sync(
        spec(omni, "qwen3_tts", mode), concurrency=(1, 2), prompts=prompts, thresholds=TH
    )
    assert r.passed, [str(f) for f in r.failures()]
    assert r.deterministic is True
    streams = [t for t in r.takes if t.layer != "offline"]
    assert streams and all(t.sample_rate == 24000 and t.chunks >= 3 for t in streams)
    assert all(t.identical_to_solo for t in r.takes if t.layer == "concurrency")


@pytest.mark.parametrize(("fault", "kinds"), [("replay", {"replay"}), ("doubled", {"duration"})])
def test_probe_fails_on_an_injected_bug(omni, prompts, fault, kinds):
    r = probe_sync(
        spec(omni, f"qwen3_tts:{fault}"), concurrency=(1,), prompts=prompts, thresholds=TH
    )
    assert not r.passed
    assert r.kinds("offline") == set()  # the whole-file path is correct, as in the real bugs
    assert kinds <= r.kinds("streaming"), [str(f) for f in r.findings]


@pytest.mark.browser
def test_playground_streams_from_vllm_omni_without_underruns(omni):
    from app.server import create_app

    app = create_app({"omni": spec(omni, "qwen3_tts:paced")}, tmp_db())
    with live_server(app) as live, chromium() as browser:
        page = open_playground(browser, live.url)
        text = "A short test of the real server. It has two sentences, and a clause or two."
        speak(page, text, "omni")
        g = wait_finished(page, 120_000)
        assert g["status"] == "ok", g["error"]
        assert (g["sr"], g["ch"]) == (24000, 1)
        assert g["underruns"]["count"] == 0, g["underruns"]
        assert g["chunks"] >= 2 and g["firstAudibleMs"] is not None
        last = omni.last("qwen3_tts:paced")
        import base64

        sent = np.frombuffer(base64.b64decode(last["pcm_b64"]), dtype="<i2")
        assert last["text"] == text
        assert np.array_equal(page_pcm(page), sent)  # what played is what vLLM-Omni sent
