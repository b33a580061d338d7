"""Browser tests: odd rates and stereo, a stream cut mid-way, two users at once.

The cut stream comes from the remote engineer's fault-injection stand-in of a vLLM-Omni server
(``tests/support/fault_server.py``, real HTTP on 127.0.0.1), because a real vLLM-Omni needs a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.server import create_app
from tests.support.app_util import (
    chromium,
    live_server,
    open_playground,
    page_pcm,
    speak,
    tmp_db,
    wait_finished,
)
from tests.support.playout_check import assert_follows_the_rule, speak_record

pytestmark = pytest.mark.browser

TEXT = "A short test. It has two sentences, and a clause or two."


@pytest.fixture(scope="module")
def setup():
    from tests.support.fault_server import create_fault_app
    from tests.support.remote_util import serve_app

    with serve_app(create_fault_app()) as fault:
        app = create_app(
            {
                "piper": "piper?deterministic=1",
                "stereo48": "piper?deterministic=1&profile=custom&rate=48000&channels=2"
                "&first_frames=2&chunk_frames=4&frame_hz=4&pace=3",
                "cut": f"vllm-omni+http://{fault[7:]}/cut,after=3,chunks=6?mode=sse",
                "slow": "piper?deterministic=1&profile=custom&rate=22050&channels=1"
                "&first_frames=1&chunk_frames=1&frame_hz=4&pace=0.8",
            },
            tmp_db(),
        )
        with live_server(app) as live, chromium() as browser:
            yield live, browser


def test_stereo_48k_plays_at_its_own_rate(setup):
    live, browser = setup
    page = open_playground(browser, live.url)
    rec = speak_record(page, "stereo48", TEXT)
    g = wait_finished(page)
    assert g["status"] == "ok" and (g["sr"], g["ch"]) == (48000, 2)
    assert g["ctxRate"] == 48000
    take = live.state.store.load_take(g["takeId"])
    assert take.channels == 2 and take.sample_rate == 48000
    assert np.array_equal(page_pcm(page), take.audio.reshape(-1))
    # the rate and channels are what this test is about; the start and any stall are the
    # rule's on the player's own record (a full machine can send the chunks late)
    assert_follows_the_rule(page, rec)
    assert g["firstAudibleMs"] is not None
    assert page.inner_text("#ll-m-format") == "48000 Hz × 2"
    page.close()


def test_a_cut_stream_is_an_error_with_partial_audio(setup):
    live, browser = setup
    page = open_playground(browser, live.url)
    speak(page, TEXT, "cut")
    g = wait_finished(page, 60_000)
    assert g["status"] == "error" and g["frames"] > 0
    status = page.inner_text("#ll-status")
    assert status.startswith("Error:") and "partial audio" in status and "Done" not in status
    assert page.inner_text("#ll-download") == "Download partial WAV"
    assert page.get_attribute("#ll-download", "download").endswith(".partial.wav")
    take = live.state.store.load_take(g["takeId"])
    assert take.status == "error"
    assert np.array_equal(page_pcm(page), take.audio.reshape(-1))
    page.close()


def test_two_users_at_once_each_hear_their_own_take(setup):
    live, browser = setup
    a = open_playground(browser, live.url)
    b = open_playground(browser, live.url)
    a.fill("#ll-text", "This is the first user, speaking a sentence of their own.")
    b.fill("#ll-text", "And this is somebody else entirely.")
    a.click("#ll-speak")
    b.click("#ll-speak")
    ga, gb = wait_finished(a), wait_finished(b)
    assert ga["status"] == gb["status"] == "ok" and ga["takeId"] != gb["takeId"]
    for page, g in ((a, ga), (b, gb)):
        take = live.state.store.load_take(g["takeId"])
        assert np.array_equal(page_pcm(page), take.audio.reshape(-1))
    ta = live.state.store.load_take(ga["takeId"])
    tb = live.state.store.load_take(gb["takeId"])
    assert ta.request.text.startswith("This is the first") and tb.request.text.startswith("And")
    sa = a.evaluate("window.listenlab.session")
    sb = b.evaluate("window.listenlab.session")
    assert sa != sb
    assert ta.meta["session"] == sa and tb.meta["session"] == sb
    a.close()
    b.close()


def test_speaking_again_drops_the_old_generation(setup):
    """A second Speak mid-stream: nothing of the first generation is played after it."""
    live, browser = setup
    page = open_playground(browser, live.url)
    speak(page, TEXT + " " + TEXT, "slow")
    page.wait_for_function("window.listenlab.last.chunks.length >= 2", timeout=30_000)
    first = page.evaluate("window.listenlab.last.takeId")
    speak(page, "Something else now.")
    g = wait_finished(page)
    assert g["status"] == "ok" and g["takeId"] != first
    take = live.state.store.load_take(g["takeId"])
    assert take.request.text == "Something else now."
    assert np.array_equal(page_pcm(page), take.audio.reshape(-1))
    old = page.evaluate(
        "(({state, token, framesRecv}) => ({state, token, framesRecv}))(window.listenlab.gens[0])"
    )
    assert old["state"] == "stopped" and old["token"] != g["token"]
    page.wait_for_timeout(1500)  # late frames of the first token would arrive now
    assert page.evaluate("window.listenlab.gens[0].framesRecv") == old["framesRecv"]
    assert np.array_equal(page_pcm(page), take.audio.reshape(-1))
    page.close()
