"""The MUSHRA screen (the MUSHRA kind's page.js) in headless Debian Chromium, on the real server
and Piper voice.

A rater's screen is fetched once (every stimulus whole, over the page's one WebSocket: the
player's), decoded, and played by one source per stimulus in step: switching moves only the
gains, so the playhead stays; Loop with a segment repeats only that segment. Sliders start unset and each must be moved; the
scale shows its five bands; the vote lands in SQLite with the scores moved to. Assertions read
what the page's player recorded (its switch log and playhead), not the wall clock.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.app_util import create_test, play_all_and_wait
from tests.test_browser_listening import (
    setup,  # noqa: F401 - the rater pages' server + Chromium
)

pytestmark = pytest.mark.browser


def mushra_test(live) -> str:
    return create_test(
        live,
        name="internal mushra",
        kind="mushra",
        systems=[{"name": "joe", "backend": "piper"}, {"name": "qwen", "backend": "qwen"}],
        reference="joe",
        prompts=["The birch canoe slid on the smooth planks."],
        items_per_rater=1,
        headphone_check=False,
        screening=False,
    )


def test_mushra_screen_switches_seamlessly_loops_and_needs_every_slider(setup):  # noqa: F811
    live, browser = setup
    tid = mushra_test(live)
    page = browser.new_page()
    sent: list[dict] = []
    sockets: list[str] = []

    def on_ws(ws):
        sockets.append(ws.url)
        ws.on("framesent", lambda f: sent.append(json.loads(f)) if isinstance(f, str) else None)

    page.on("websocket", on_ws)
    page.goto(f"{live.url}listen/{tid}")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-item:not([hidden])")
    # the scale: five labelled bands, visible
    bands = page.locator(".lt-band")
    assert bands.count() == 5
    texts = [bands.nth(i).inner_text().replace("\n", " ") for i in range(5)]
    assert texts == ["Bad 0–20", "Poor 20–40", "Fair 40–60", "Good 60–80", "Excellent 80–100"]
    assert all(bands.nth(i).is_visible() for i in range(5))
    # sliders start unset: no value shown, marked unset, Submit disabled
    sliders = page.locator(".lt-slider")
    n = sliders.count()
    assert n == 4  # qwen, the hidden reference, the 3.5 kHz and 7 kHz anchors
    assert page.locator(".lt-slider.lt-unset").count() == n
    assert [page.locator(".lt-val").nth(i).inner_text() for i in range(n)] == ["–"] * n
    assert page.is_disabled("#lt-submit")
    page.wait_for_selector("#lt-mu-play:not([disabled])", timeout=60_000)
    # fetched once, whole: the open reference and every slot
    stim = [m for m in sent if m.get("type") == "stimulus"]
    assert sorted(m["slot"] for m in stim) == [-1, 0, 1, 2, 3]
    assert {m.get("delivery") for m in stim} == {"whole"}
    assert len(sockets) == 1  # the page's one socket (the player's): no second one for MUSHRA

    mu = "window.listenTest.view"
    page.click(".lt-play[data-slot='0']")
    page.wait_for_function(f"{mu}.position() > 0.6", timeout=20_000)
    page.click(".lt-play[data-slot='1']")
    page.wait_for_timeout(150)
    sw = page.evaluate(f"{mu}.state.log.filter((e) => e.type === 'switch')")
    assert len(sw) == 1 and (sw[0]["from"], sw[0]["to"]) == (0, 1)
    assert sw[0]["position_before"] > 0.6
    assert abs(sw[0]["position_after"] - sw[0]["position_before"]) < 0.02  # same position
    gains = page.evaluate(f"[0, 1, 2, 3, -1].map((s) => {mu}.state.gains[s].gain.value)")
    assert [round(g, 3) for g in gains] == [0, 1, 0, 0, 0]  # only the chosen one is heard
    page.click("#lt-ref")  # the open reference, at the same position too
    page.wait_for_timeout(100)
    sw = page.evaluate(f"{mu}.state.log.filter((e) => e.type === 'switch')")[-1]
    assert sw["to"] == -1 and abs(sw["position_after"] - sw["position_before"]) < 0.02
    # no new fetch for any of it
    assert len([m for m in sent if m.get("type") == "stimulus"]) == 5
    # the glitch hint belongs to glitch tests only: hidden here, and G does nothing
    assert page.is_hidden("#lt-hint")
    page.keyboard.press("g")
    page.wait_for_timeout(200)
    assert not [m for m in sent if m.get("type") in {"listen_glitch", "glitch"}]

    # loop a segment: the playhead stays inside it and wraps
    page.click("#lt-mu-play")  # pause
    page.fill("#lt-mu-from", "0.5")
    page.fill("#lt-mu-to", "1.0")
    page.dispatch_event("#lt-mu-to", "change")
    assert page.is_checked("#lt-mu-loop")
    page.click(".lt-play[data-slot='2']")
    seen = []
    t_end = time.monotonic() + 1.6
    while time.monotonic() < t_end:
        seen.append(page.evaluate(f"{mu}.position()"))
        page.wait_for_timeout(40)
    play = page.evaluate(f"{mu}.state.log.filter((e) => e.type === 'play')")[-1]
    assert (play["from"], play["to"], play["loop"]) == (0.5, 1.0, True)
    assert all(0.5 - 1e-6 <= p <= 1.0 + 1e-6 for p in seen), seen
    assert any(b < a for a, b in zip(seen, seen[1:], strict=False))  # wrapped to 0.5
    assert page.evaluate(f"{mu}.state.sources[2].node.loopStart") == 0.5

    # credit: every slot audible long enough (the server's listen gate)
    play_all_and_wait(page, n)
    values = [83, 100, 12, 47]
    for i in range(n - 1):
        sliders.nth(i).fill(str(values[i]))
        assert page.is_disabled("#lt-submit")  # one is still unset
    # the server refuses a vote with a missing score (the page never sends one)
    r = page.evaluate(
        """async () => { const S = window.listenTest;
        const r = await fetch('/ll/listen/' + document.querySelector('#lt-root').dataset.testId + '/vote', {
          method: 'POST', headers: {'Content-Type': 'application/json', 'X-Rater-Token': S.token},
          body: JSON.stringify({answer_id: 'nullvote1', assignment_id: S.status.item.assignment_id,
                                scores: [83, 100, 12, null]})});
        return [r.status, (await r.json()).detail]; }"""
    )
    assert r[0] == 400 and "every MUSHRA score" in r[1]
    sliders.nth(n - 1).fill(str(values[-1]))
    assert page.locator(".lt-slider.lt-unset").count() == 0
    page.wait_for_selector("#lt-submit:not([disabled])")
    page.click("#lt-submit")
    page.wait_for_selector("#lt-done:not([hidden])", timeout=30_000)
    rows = live.state.store.db.execute(
        "SELECT slot, score FROM mushra_ratings WHERE test_id=? ORDER BY slot", [tid]
    ).fetchall()
    assert rows == [(i, float(v)) for i, v in enumerate(values)]
    # play credit: per slot never over the wall time of the screen, summed over its slots
    ev = live.state.store.db.execute(
        "SELECT slot, max(played_ms) FROM play_events WHERE test_id=? GROUP BY slot", [tid]
    ).fetchall()
    assert len(ev) == n and all(p > 0 for _s, p in ev)
    page.close()


def test_glitch_hint_shows_in_a_glitch_test(setup):  # noqa: F811
    live, browser = setup
    tid = create_test(
        live,
        kind="glitch",
        systems=[{"name": "joe", "backend": "piper"}],
        prompts=["The birch canoe slid on the smooth planks."],
        items_per_rater=1,
        headphone_check=False,
        screening=False,
    )
    page = browser.new_page()
    page.goto(f"{live.url}listen/{tid}")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-item:not([hidden])")
    assert page.is_visible("#lt-hint") and page.is_visible("#lt-glitch")
    page.click(".lt-play[data-slot='0']")
    page.wait_for_function("(window.listenTest.player.positionMs() || 0) > 300", timeout=30_000)
    page.keyboard.press("g")
    page.wait_for_function("window.listenTest.view.marks === 1", timeout=30_000)
    n = live.state.store.db.execute(
        "SELECT count(*) FROM glitch_reports WHERE test_id=?", [tid]
    ).fetchone()[0]
    assert n == 1
    page.close()
