"""Browser test: the Playground's system picker says which vLLM-Omni model a profile stands in
for, how it streams, and what the CPU voice does not do; a model's own voice speaks.

Real app, real Piper under each profile, real Chromium (headless).
"""

from __future__ import annotations

import pytest

from app.server import create_app
from tests.support.app_util import chromium, live_server, open_playground, tmp_db, wait_finished

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page():
    app = create_app(
        {
            "piper": "piper?deterministic=1",
            "qwen3": "piper?deterministic=1&profile=qwen3-tts&pace=4",
            "index": "piper?deterministic=1&profile=indextts2&pace=4",
        },
        tmp_db(),
    )
    with live_server(app) as live, chromium() as browser:
        yield open_playground(browser, live.url)


def test_the_picker_names_the_model_and_its_schedule(page):
    labels = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#ll-backend option')]"
        ".map(o => [o.value, o.textContent]))"
    )
    assert labels["qwen3"].endswith("· Qwen3-TTS: 24 kHz mono, 80 ms then 2 s chunks")
    assert labels["index"].endswith("· IndexTTS-2: 22.05 kHz mono, the whole file at the end")
    assert "·" not in labels["piper"]
    page.select_option("#ll-backend", "qwen3")
    note = page.inner_text("#ll-caps-note")
    assert "cpu voice (piper?deterministic=1) for Qwen3-TTS" in note
    voices = page.evaluate("[...document.querySelectorAll('#ll-voice option')].map(o => o.value)")
    assert "vivian" in voices and "joe" not in voices


def test_a_models_voice_speaks_at_its_rate(page):
    page.select_option("#ll-backend", "qwen3")
    page.select_option("#ll-voice", "vivian")
    page.fill("#ll-text", "Hello there.")
    page.click("#ll-speak")
    g = wait_finished(page, 120_000)
    assert g["status"] == "ok" and g["sr"] == 24000 and g["ch"] == 1, g
