"""The ranking screen (the rank kind's page.js) in headless Debian Chromium at a phone's size
(390 x 844, touch) and a desktop's (1280 x 800), on the real server and the Piper voice.

A rater plays every clip (Submit stays off until the server has counted each), places them
with the pickers (a place another clip holds swaps the two: never a tie) and the up/down
buttons, sees the order so far, and submits; the ranks land in SQLite's ``rank_ratings`` as
placed. Measured on the page's own layout (every control inside the screen's width).
"""

from __future__ import annotations

import pytest

from tests.support.app_util import (
    chromium,
    create_test,
    listening_app,
    live_server,
    play_all_and_wait,
)

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


@pytest.fixture(scope="module", params=["phone", "desktop"])
def sized(request, live):
    kw = PHONE if request.param == "phone" else DESKTOP
    with chromium(["--autoplay-policy=no-user-gesture-required"], **kw) as browser:
        yield request.param, kw["viewport"], browser


def places(page) -> list[str]:
    return page.eval_on_selector_all(".lt-rank-pick", "s => s.map((x) => x.value)")


def test_ranking_in_the_browser(live, sized):
    size, vp, browser = sized
    tid = create_test(
        live,
        name=f"rank {size}",
        kind="rank",
        systems=[
            {"name": "joe", "backend": "piper"},
            {"name": "qwen", "backend": "qwen"},
            {"name": "fast", "backend": "piper", "params": {"speed": "1.3"}},
        ],
        prompts=["The birch canoe slid on the smooth planks."],
        items_per_rater=1,
        screening=False,
        headphone_check=False,
        completion_code="RANKED",
    )
    page = browser.new_page()
    page.goto(f"{live.url}listen/{tid}")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
    assert page.inner_text("#lt-question").startswith("Put the clips in order of quality")
    assert page.inner_text("#lt-rank-ends") == "1 = best, 3 = worst"
    assert page.locator(".lt-play").all_inner_texts() == ["Play A", "Play B", "Play C"]
    assert places(page) == ["", "", ""] and page.is_disabled("#lt-submit")
    # every control inside the screen's width (no sideways scrolling on a phone)
    for sel in (".lt-play", ".lt-rank-pick", ".lt-rank-move", "#lt-submit"):
        for i in range(page.locator(sel).count()):
            box = page.locator(sel).nth(i).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= vp["width"] + 0.5, (sel, i, box)
    if size == "phone":  # big enough to touch
        assert page.locator(".lt-rank-pick").first.bounding_box()["height"] >= 36
    # placed before playing: Submit stays off until the server counted every clip
    page.select_option(".lt-rank-pick[data-slot='0']", "1")
    page.select_option(".lt-rank-pick[data-slot='1']", "2")
    page.select_option(".lt-rank-pick[data-slot='2']", "3")
    assert places(page) == ["1", "2", "3"] and page.is_disabled("#lt-submit")
    # a place another clip holds swaps the two: never a tie
    page.select_option(".lt-rank-pick[data-slot='2']", "1")
    assert places(page) == ["3", "2", "1"]
    # up and down move a clip one place, swapping with its neighbour; the ends are disabled
    page.click(".lt-rank-move[data-slot='1'][data-move='down']")
    assert places(page) == ["2", "3", "1"]
    assert page.is_disabled(".lt-rank-move[data-slot='2'][data-move='up']")
    assert page.is_disabled(".lt-rank-move[data-slot='1'][data-move='down']")
    assert page.locator("#lt-rank-order li").all_inner_texts() == ["Clip C", "Clip A", "Clip B"]
    play_all_and_wait(page, 3)
    page.wait_for_selector("#lt-submit:not([disabled])", timeout=30_000)
    page.click("#lt-submit")
    page.wait_for_selector("#lt-done:not([hidden])", timeout=30_000)
    assert page.inner_text("#lt-code") == "RANKED"
    a = live.state.store.assignments(
        tid,
        live.state.store.db.execute(
            "SELECT rater_id FROM test_raters WHERE test_id = ?", [tid]
        ).fetchone()[0],
    )[0]
    rows = live.state.store.db.execute(
        "SELECT slot, system_id, rank FROM rank_ratings WHERE test_id = ? ORDER BY slot", [tid]
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        (i, s, r) for i, (s, r) in enumerate(zip(a.meta["systems"], [2, 3, 1], strict=True))
    ]
