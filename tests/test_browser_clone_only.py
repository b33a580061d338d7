"""Browser test: a model that only clones (CosyVoice3, embedded) asks for a saved voice.

The engine is vLLM-Omni's ``AsyncOmni`` STAND-IN (``tests/vllm_omni_standin``: vLLM-Omni cannot
run here); it follows the real interface, checks CosyVoice3's request shape and speaks with the
Piper voice at CosyVoice3's 24 kHz. Everything else is real: the app, the library, Chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.server import create_app
from tests.support.app_util import (
    chromium,
    live_server,
    open_playground,
    tmp_db,
    upload_voice,
    wait_finished,
)
from tests.vllm_omni_standin.seed_models import (
    RATES,
    make_seed_model,
    standin_fixture,
    standin_teardown,
)

pytestmark = pytest.mark.browser
ASSETS = Path(__file__).resolve().parent.parent / "assets"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    standin_fixture(mp)
    try:
        cosy = make_seed_model("cosyvoice3", tmp_path_factory.mktemp("models"))
        app = create_app(
            {"piper": "piper?deterministic=1", "cosy": f"vllm-omni?model={cosy}"}, tmp_db()
        )
        with live_server(app) as live, chromium() as browser:
            yield live, browser
    finally:
        standin_teardown()
        mp.undo()


def test_clone_only_model_asks_for_a_saved_voice_then_speaks_in_it(setup):
    live, browser = setup
    page = open_playground(browser, live.url)
    page.select_option("#ll-backend", "cosy")
    # no voice of its own: the only built-in entry is a disabled prompt, and the page says why
    opts = page.evaluate(
        "[...document.querySelectorAll('#ll-voice option')].map(o => [o.value, o.disabled])"
    )
    assert opts == [["", True]], opts
    assert "cosy speaks only in a cloned voice" in page.inner_text("#ll-caps-note")
    page.fill("#ll-text", "Hello there.")
    page.click("#ll-speak")
    status = page.inner_text("#ll-status")
    assert "speaks only in a cloned voice" in status and "choose a saved voice" in status
    assert page.evaluate("window.listenlab.last == null")  # nothing was requested
    # save a clip: it becomes the selected voice, and the model speaks in it
    msg = upload_voice(page, ASSETS / "reference_joe.wav", "Joe")
    assert msg.startswith('Saved voice "Joe"'), msg
    vid = live.state.library.list()[0].voice_id
    page.select_option("#ll-backend", "piper")
    piper_voice = page.evaluate("document.querySelector('#ll-voice').value")
    assert not piper_voice.startswith("lib:")  # Piper cannot clone: its own voice
    page.select_option("#ll-backend", "cosy")
    assert page.evaluate("document.querySelector('#ll-voice').value") == f"lib:{vid}"
    page.click("#ll-speak")
    g = wait_finished(page, 120_000)
    assert g["status"] == "ok" and g["frames"] > 0, g
    assert g["sr"] == RATES["cosyvoice3"] == 24000 and g["ch"] == 1
    # the stored take says what was asked: the clip's transcript went with the clip
    take = live.state.store.load_take(g["takeId"])
    assert take.request.ref_text == "The quick brown fox." and take.meta["backend_label"] == "cosy"
    page.close()
