"""Hostile strings reach the Playground as text, never as markup (real server, real Chromium).

Every source the page shows is fed a payload that would run script if it were parsed as HTML:
a malicious vLLM-Omni-style upstream (model name, languages, built-in and uploaded voice names,
its error message), a voice name tampered with in the library's store, the user's text, the
detector's findings (kind and evidence), the detector's ``checks`` list and a ``start``
message's format note. The test asserts that nothing executed and the literal text is shown.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.player.session import HEADER
from app.server import create_app
from tests.support.app_util import chromium, live_server, open_playground, tmp_db, wait_finished
from tests.test_playout_format import EVIL, odd_upstream, tone

pytestmark = pytest.mark.browser

ASSETS = Path(__file__).resolve().parents[1] / "assets"
PWNED = "window.__pwned === undefined && document.querySelectorAll('#ll-root img, #ll-root svg').length === 0"


def evil_detector(take):
    return [
        {"kind": EVIL, "time_s": 0.1, "boundary_index": None, "evidence": {"note": EVIL}},
        {"kind": EVIL, "time_s": 0.1, "boundary_index": None, "evidence": {"note": EVIL}},
    ]


async def evil_stream(session, msg):
    """A page-specific stream (AppState.ws_handlers) whose every string is hostile."""
    token = int(msg["token"]) & 0xFFFFFFFF

    async def work(t):
        session.send(
            {
                "type": "start",
                "token": t,
                "take_id": "t1",
                "sample_rate": 24000,
                "channels": 1,
                "text_chars": 10,
                "assumed": EVIL,
                "learnt": {"sec_per_char": 0.07, "rate": 2.0, "takes": 1},
            }
        )
        session.send(HEADER.pack(t, 0, 40.0) + tone(seconds=0.3))
        session.send({"type": "done", "token": t, "status": "ok", "ttfa_ms": 40, "rtf": 0.1})
        session.send(
            {
                "type": "findings",
                "token": t,
                "take_id": "t1",
                "available": True,
                "findings": [{"kind": "click", "time_s": 0.1, "evidence": {"note": EVIL}}],
                "checks": [
                    {"name": EVIL, "ran": False, "why": EVIL},
                    {"name": "clicks", "ran": True, "why": None},
                ],
            }
        )

    await session.begin(token, work)


@pytest.fixture(scope="module")
def setup():
    with live_server(odd_upstream()) as up:
        app = create_app(
            {
                "piper": "piper?deterministic=1",
                "evil": f"vllm-omni+http://127.0.0.1:{up.port}/evil?mode=audio&format=wav",
            },
            tmp_db(),
            detector=evil_detector,
        )
        with live_server(app) as live, chromium() as browser:
            live.state.ws_handlers["evil_stream"] = evil_stream
            # a voice whose name was tampered with in the library's store (bypassing the API)
            from voices.clips import prepare_clip

            lib = live.state.library
            clip = prepare_clip((ASSETS / "reference_joe.wav").read_bytes(), "joe.wav")
            v = lib.add("joe", clip, ref_text="The quick brown fox.", consent=True)
            lib._write(dataclasses.replace(v, name=EVIL + "saved"))
            yield live, browser


def texts(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")


def test_remote_strings_and_saved_voice_names_are_text(setup):
    live, browser = setup
    page = open_playground(browser, live.url)
    page.select_option("#ll-backend", "evil")
    voices = texts(page, "#ll-voice option")
    assert EVIL + "builtin" in voices
    assert EVIL + "uploaded (server voice)" in voices
    assert "★ " + EVIL + "saved (cloned)" in voices
    assert EVIL in texts(page, "#ll-language option")
    assert page.inner_text("#ll-vlist .ll-vname") == EVIL + "saved"
    # the server's error message, with markup, is shown as the literal message
    page.fill("#ll-text", "Hello.")
    page.click("#ll-speak")
    page.wait_for_function(
        "document.querySelector('#ll-status').className.includes('error')", timeout=30_000
    )
    assert EVIL in page.inner_text("#ll-status")
    assert page.evaluate(PWNED)
    page.close()


def test_user_text_findings_and_checks_are_text(setup):
    live, browser = setup
    page = open_playground(browser, live.url)
    page.select_option("#ll-backend", "piper")
    page.fill("#ll-text", "Hello there. " + EVIL)
    page.click("#ll-speak")
    g = wait_finished(page, 60_000)
    assert g["status"] == "ok"
    page.wait_for_function("window.listenlab.last.findings", timeout=30_000)
    findings = page.inner_text("#ll-findings")
    assert EVIL + " @ 0.10 s ×2 — " + EVIL in findings  # the duplicate finding is merged
    assert page.evaluate(PWNED)
    page.close()


def test_page_stream_with_hostile_start_findings_and_checks(setup):
    live, browser = setup
    page = open_playground(browser, live.url)
    page.evaluate("window.listenlab.player.request({type: 'evil_stream'})")
    page.wait_for_function(
        "window.listenlab.last && window.listenlab.last.finished && window.listenlab.last.findings",
        timeout=30_000,
    )
    assert page.inner_text("#ll-format-note") == (
        "Format assumed, not read from the stream: " + EVIL
    )
    assert "(assumed)" in page.inner_text("#ll-m-format")
    checks = texts(page, "#ll-checks li")
    assert checks == ["– " + EVIL + " skipped: " + EVIL, "✓ clicks ran"]
    assert "— " + EVIL in page.inner_text("#ll-findings")
    assert page.evaluate(PWNED)
    page.close()
