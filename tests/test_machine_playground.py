"""The Playground shows a take's machine scores after it ends: real Chromium on a real server
(uvicorn on 127.0.0.1, the Piper voice, a SQLite file), the models of the ``[metrics]`` extra.
The take's text gives the word check's WER; the scores are stored once (``take_scores``);
another session's take is refused, and the queue's limit is a 429 naming it.

Skips without the extra (``LISTENLAB_METRICS_REQUIRED=1`` makes that a failure).
"""

from __future__ import annotations

import importlib.util
import os

import httpx
import pytest

from app.server import create_app
from app.store.scores import scores_of
from app.web import take_scores
from tests.support.app_util import live_server, open_playground, speak, tmp_db, wait_finished

EXTRA = ("torch", "distillmos", "speechmos", "pocketsphinx", "jiwer")
MISSING = [m for m in EXTRA if importlib.util.find_spec(m) is None]
if MISSING:
    if os.environ.get("LISTENLAB_METRICS_REQUIRED"):
        pytest.fail(f"the [metrics] extra is required here; missing: {MISSING}", pytrace=False)
    pytest.skip(f"the [metrics] extra is not installed ({MISSING})", allow_module_level=True)

pytestmark = pytest.mark.browser

TEXT = "I would like a cup of coffee."
"""PocketSphinx hears this clean take of the CPU voice word for word (WER 0)."""


@pytest.fixture(scope="module")
def server():
    """With an admin password: without one, localhost is the admin and sees every take."""
    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    os.environ["LISTENLAB_ADMIN_PASSWORD"] = "playground-pw"
    try:
        app = create_app({"piper": "piper?deterministic=1"}, tmp_db(), mount_ui=True)
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
    with live_server(app) as live:
        yield live


def test_a_take_shows_its_scores_after_it_ends(server, browser):
    page = open_playground(browser, server.url)
    speak(page, TEXT)
    g = wait_finished(page)
    assert g["takeId"]
    box = page.locator("#ll-scores")
    page.wait_for_function(
        "document.getElementById('ll-scores').dataset.take === " + repr(g["takeId"]),
        timeout=240_000,
    )
    words = box.text_content()
    assert words.startswith("Machine scores: Predicted MOS ")
    assert "DNSMOS " in words and "WER (word check) " in words and "heard: “" in words
    mos = float(words.split("Predicted MOS ")[1].split(" ")[0])
    # a clean 2 s take: 3.06 measured (DistillMOS zero-pads to 7.68 s, which costs a short
    # take; Harvard sentences score 4.2, docs/metrics.md)
    assert 2.5 <= mos <= 5.0
    # the same JSON for the page's session; stored once, with the models' hashes
    cookies = {c["name"]: c["value"] for c in browser.cookies()}
    r = httpx.get(server.url + f"ll/api/takes/{g['takeId']}/scores", cookies=cookies, timeout=30)
    job = r.json()
    assert r.status_code == 200 and job["state"] == "done", job
    assert job["scores"]["sphinx_wer"] == 0.0 and "WER (word check) 0.00" in words
    assert job["scores"]["sphinx_text"] == "i would like a cup of coffee"
    assert job["scores"]["predicted_mos"] == pytest.approx(mos, abs=0.006)
    assert {m["metric"] for m in job["models"]} == {"distillmos", "dnsmos", "words"}
    assert all(len(m["weights_sha256"]) == 64 for m in job["models"])
    rows = scores_of(server.state.store).of_takes([g["takeId"]])
    assert sorted(r.metric for r in rows) == ["distillmos", "dnsmos", "words"]
    assert rows[0].values and rows[0].take_id == g["takeId"]
    # another session (no cookie) may not ask for it, nor for a take that is not there
    r = httpx.get(server.url + f"ll/api/takes/{g['takeId']}/scores", timeout=30)
    assert r.status_code == 403 and "another session" in r.json()["detail"]
    admin = {"Authorization": "Bearer playground-pw"}
    r = httpx.get(server.url + f"ll/api/takes/{g['takeId']}/scores", headers=admin, timeout=30)
    assert r.status_code == 200 and r.json()["scores"] == job["scores"]  # the admin sees all
    r = httpx.get(server.url + "ll/api/takes/nosuchtake/scores", cookies=cookies, timeout=30)
    assert r.status_code == 404
    r = httpx.get(server.url + "ll/api/takes/..%2Fetc/scores", cookies=cookies, timeout=30)
    assert r.status_code == 404


def test_a_full_queue_is_refused_with_its_limit(server):
    """The queue holds :data:`QUEUE_LIMIT` takes: the next one is refused, nothing is lost."""
    store = server.state.store
    scorer = take_scores.TakeScorer(store)  # a scorer of its own whose worker never starts
    scorer.worker = _Alive()
    for i in range(take_scores.QUEUE_LIMIT):
        assert scorer.request(f"t{i}").state == "queued"
    with pytest.raises(Exception, match=f"{take_scores.QUEUE_LIMIT} takes are waiting"):
        scorer.request("one-more")
    assert scorer.request("one-more", refuse_when_full=False).state == "not_queued"
    assert scorer.request("t0").state == "queued"  # one job per take: asking again joins it
    assert scorer.waiting.qsize() == take_scores.QUEUE_LIMIT


class _Alive:
    """Stands in for a busy worker thread, so the queue fills (the real worker is tested above)."""

    def is_alive(self) -> bool:
        return True
