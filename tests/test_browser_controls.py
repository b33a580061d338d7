"""Browser tests: Stop cancels the backend stream, the glitch button, cloning uploads."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.server import create_app
from backends.registry import load_backend
from tests.support.app_util import (
    TrackingBackend,
    chromium,
    free_port,
    live_server,
    open_playground,
    tmp_db,
    upload_voice,
    wait_finished,
)

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
PARAGRAPH = (
    "The old lighthouse keeper climbed the stairs every evening. At the top, he wiped the salt "
    "from the lens, lit the lamp, and watched the beam sweep the water. Ships he would never "
    "meet passed safely in the night."
)


@pytest.fixture(scope="module")
def api_server():
    """A real ``listenlab api`` process serving vLLM-Omni's protocol over the Piper voice."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "api",
            "--backend",
            "piper?deterministic=1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(
                f"listenlab api did not start: {proc.stderr.read().decode()[-2000:]}"
            )
        time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def setup(api_server):
    slow = TrackingBackend(
        load_backend(
            "piper?deterministic=1&profile=custom&rate=22050&channels=1&first_frames=1"
            "&chunk_frames=1&frame_hz=1&pace=0.67"
        )
    )
    port = api_server.rsplit(":", 1)[1]
    app = create_app(
        {
            "piper": "piper?deterministic=1",
            "slow": slow,
            "remote": f"vllm-omni+http://127.0.0.1:{port}?mode=sse&speed_streaming=0",
        },
        tmp_db(),
    )
    fake_mic = [
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={ASSETS / 'reference_joe.wav'}",
    ]
    with live_server(app) as live, chromium(fake_mic, permissions=["microphone"]) as browser:
        yield live, browser, slow


def test_stop_cancels_the_backend_stream(setup):
    live, browser, slow = setup
    page = open_playground(browser, live.url)
    page.select_option("#ll-backend", "slow")
    page.fill("#ll-text", PARAGRAPH)
    page.click("#ll-speak")
    page.wait_for_function("window.listenlab.last.chunks.length >= 1", timeout=30_000)
    page.click("#ll-stop")
    g = wait_finished(page)
    assert g["status"] == "cancelled" and g["state"] == "stopped"
    # the server closed the backend stream early, and the gate is free again
    deadline = time.monotonic() + 10
    while not slow.events and time.monotonic() < deadline:
        time.sleep(0.05)
    kind, produced = slow.events[-1]
    assert kind == "closed", slow.events
    gate = live.state.backends["slow"].gate
    deadline = time.monotonic() + 10
    while gate.active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gate.active == 0
    # the partial take is kept, marked cancelled (never ok)
    take_id = g["takeId"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = live.state.store.db.execute(
            "SELECT status, chunk_count FROM takes WHERE take_id=?", [take_id]
        ).fetchone()
        if row:
            break
        time.sleep(0.1)
    assert row[0] == "cancelled" and row[1] == produced
    # no stale chunk is played after Stop
    n = g["chunks"]
    time.sleep(2.0)
    assert page.evaluate("window.listenlab.last.chunks.length") == n
    assert "Stopped" in page.inner_text("#ll-status")
    page.close()


def test_glitch_key_writes_a_row_at_the_nearest_boundary(setup):
    live, browser, _ = setup
    page = open_playground(browser, live.url)
    page.fill("#ll-text", PARAGRAPH)
    page.click("#ll-speak")
    page.wait_for_function(
        "window.listenlab.last.chunks.length >= 2 && window.listenlab.last.state === 'play'",
        timeout=30_000,
    )
    b1 = page.evaluate("window.listenlab.last.chunks[1].offset / window.listenlab.last.sr * 1000")
    page.wait_for_function(f"window.listenlab.positionMs() > {b1 + 250}", timeout=30_000)
    page.select_option("#ll-glitch-kind", "click")
    page.locator("body").press("g")
    page.wait_for_function("document.querySelector('#ll-glitch-log').textContent.includes('saved')")
    g = wait_finished(page)
    pressed = page.evaluate("window.listenlab.last.glitches[0]")
    rows = live.state.store.db.execute(
        "SELECT take_id, position_ms, kind, boundary_index, boundary_ms, distance_ms "
        "FROM glitch_reports WHERE take_id=?",
        [g["takeId"]],
    ).fetchall()
    assert len(rows) == 1
    take_id, pos, kind, bidx, bms, dist = rows[0]
    assert kind == "click"
    assert pos == pytest.approx(pressed["position_ms"])
    assert b1 + 200 < pos < b1 + 3000  # the press came a little after the first seam
    take = live.state.store.load_take(take_id)
    seams = [b * 1000 / take.sample_rate for b in take.boundaries]
    want = min(range(len(seams)), key=lambda i: abs(seams[i] - pos))
    assert bidx == want and bms == pytest.approx(seams[want])
    assert dist == pytest.approx(pos - seams[want])
    page.close()


def test_clone_upload_wav_and_mp3_then_remote_says_cloning_unavailable(setup):
    live, browser, _ = setup
    page = open_playground(browser, live.url)
    msg = upload_voice(page, ASSETS / "reference_joe.wav", "Joe wav")
    assert msg.startswith('Saved voice "Joe wav"'), msg
    msg = upload_voice(page, ASSETS / "reference_joe.mp3", "Joe mp3")
    assert msg.startswith('Saved voice "Joe mp3"'), msg
    names = page.locator("#ll-vlist .ll-vname").all_inner_texts()
    assert names == ["Joe mp3", "Joe wav"]
    lib = live.state.library.list()
    assert {v.name for v in lib} == {"Joe wav", "Joe mp3"}
    assert all(3.5 < v.duration_s < 5.5 for v in lib)
    # controls follow the capabilities: Piper has no seed/instructions, speed works streaming
    assert page.is_hidden("#ll-seed-wrap") and page.is_hidden("#ll-instructions-wrap")
    assert page.is_enabled("#ll-speed")
    # the remote server (listenlab api over Piper) cannot clone: the UI says so
    page.select_option("#ll-backend", "remote")
    assert page.is_hidden("#ll-seed-wrap")  # the api server reports Piper's capabilities
    assert page.is_disabled("#ll-speed")  # speed_streaming=0: speed only for whole files
    page.uncheck("#ll-streaming")
    assert page.is_enabled("#ll-speed")
    page.check("#ll-streaming")
    note = page.inner_text("#ll-clone-note")
    assert "cloning is unavailable" in note.lower() and "remote" in note
    disabled = page.evaluate(
        "[...document.querySelectorAll('#ll-voice option')].filter(o => o.value.startsWith('lib:'))"
        ".map(o => o.disabled)"
    )
    assert disabled == [True, True]
    # forcing the cloned voice anyway is refused with the same clear message, and nothing plays
    vid = lib[0].voice_id
    page.evaluate(
        f"(() => {{ const s = document.querySelector('#ll-voice'); const o = [...s.options]"
        f".find(o => o.value === 'lib:{vid}'); o.disabled = false; s.value = o.value; }})()"
    )
    page.fill("#ll-text", "Hello there.")
    page.click("#ll-speak")
    page.wait_for_function(
        "document.querySelector('#ll-status').className.includes('error')", timeout=30_000
    )
    assert "cloning is unavailable" in page.inner_text("#ll-status").lower()
    assert page.evaluate("window.listenlab.last.framesRecv") == 0
    # speaking through the remote backend with its own voice works (the api round trip)
    page.select_option("#ll-backend", "remote")
    page.click("#ll-speak")
    g = wait_finished(page, 60_000)
    assert g["status"] == "ok" and g["frames"] > 0
    # rename and delete in the library
    page.once("dialog", lambda d: d.accept("Joe renamed"))
    page.locator("#ll-vlist tr", has_text="Joe wav").locator(".ll-rename").click()
    page.wait_for_function(
        "[...document.querySelectorAll('#ll-vlist .ll-vname')].some(e => e.textContent === 'Joe renamed')"
    )
    page.locator("#ll-vlist tr", has_text="Joe mp3").locator(".ll-delete").click()
    page.wait_for_function("document.querySelectorAll('#ll-vlist .ll-vname').length === 1")
    assert [v.name for v in live.state.library.list()] == ["Joe renamed"]
    page.close()


def test_bad_files_get_a_clear_error(setup, tmp_path):
    live, browser, _ = setup
    page = open_playground(browser, live.url)
    before = len(live.state.library.list())
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio at all\n" * 20)
    msg = upload_voice(page, bad, "bad")
    assert msg.startswith("Rejected:") and "not readable audio" in msg, msg
    import numpy as np
    import soundfile as sf

    short = tmp_path / "short.wav"
    t = np.arange(int(0.4 * 16000)) / 16000
    sf.write(short, 0.3 * np.sin(2 * np.pi * 220 * t), 16000)
    msg = upload_voice(page, short, "short")
    assert "too short" in msg, msg
    msg = upload_voice(page, ASSETS / "reference_joe.wav", "no consent", consent=False)
    assert "consent" in msg.lower() and msg.startswith("Rejected:"), msg
    assert len(live.state.library.list()) == before
    page.close()


def test_recording_has_processing_off_and_becomes_a_voice(setup):
    """The recorder asks for raw audio (no echo cancellation, noise suppression or AGC)."""
    live, ctx, _ = setup
    page = open_playground(ctx, live.url)
    page.evaluate(
        """() => { const gum = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
        navigator.mediaDevices.getUserMedia = async (c) => { window.__constraints = c;
          const s = await gum(c); window.__settings = s.getAudioTracks()[0].getSettings();
          return s; }; }"""
    )
    began = time.monotonic()
    page.click("#ll-rec")
    page.wait_for_function("document.querySelector('#ll-rec').textContent.includes('Stop')")
    page.wait_for_timeout(2500)
    page.click("#ll-rec")
    page.wait_for_function(
        "document.querySelector('#ll-rec-status').textContent.startsWith('Recorded')"
    )
    held = time.monotonic() - began  # the recording lies inside this span, however busy
    c = page.evaluate("window.__constraints.audio")
    assert c["echoCancellation"] is False
    assert c["noiseSuppression"] is False and c["autoGainControl"] is False
    st = page.evaluate("window.__settings")
    assert st.get("echoCancellation") is False and st.get("autoGainControl") is False
    page.fill("#ll-vname", "Recorded")
    page.fill("#ll-vtext", "The quick brown fox.")
    page.check("#ll-consent")
    page.click("#ll-vsave")
    page.wait_for_function(
        "!document.querySelector('#ll-vmsg').className.includes('busy')", timeout=30_000
    )
    msg = page.inner_text("#ll-vmsg")
    assert msg.startswith('Saved voice "Recorded"'), msg
    v = next(v for v in live.state.library.list() if v.name == "Recorded")
    assert 1.0 <= v.duration_s <= held + 0.25, (v.duration_s, held)
