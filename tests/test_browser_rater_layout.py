"""The rater page for people, in headless Debian Chromium at a phone's size (390 x 844, touch)
and a desktop's (1280 x 800), on the real server and the Piper voice.

What a crowd worker on a phone found: MOS buttons that wrapped 3 + 2, MUSHRA sliders 130 px
wide with squashed band labels and Submit below the fold, a "1 / 19" counter running through
the headphone screen, no outcome of the screen, a familiarisation clip called "Low anchor",
and an admin's instructions replacing the built-in MUSHRA explanation. Each is measured here on
the page's own layout (bounding boxes, visibility, texts), not on wall-clock luck.
"""

from __future__ import annotations

import pytest

from evaluation.listening.kinds import KINDS
from tests.support.app_util import (
    chromium,
    create_test,
    listening_app,
    live_server,
    play_all_and_wait,
    screen_in_page,
)

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
OWN = "Rate how natural the voice sounds, not the content."


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


@pytest.fixture(scope="module", params=["phone", "desktop"])
def sized(request, live):
    kw = PHONE if request.param == "phone" else DESKTOP
    with chromium(["--autoplay-policy=no-user-gesture-required"], **kw) as browser:
        yield request.param, kw["viewport"], browser


def _box(page, selector: str) -> dict:
    return page.locator(selector).bounding_box()


def _in_view(box: dict, vp: dict) -> bool:
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= vp["width"] + 0.5
        and box["y"] + box["height"] <= vp["height"] + 0.5
    )


def test_mos_page_fits_counts_clips_and_reports_the_screen(live, sized):
    size, vp, browser = sized
    tid = create_test(live, name=f"mos {size}", instructions=OWN, screening=True)
    page = browser.new_page()
    page.goto(f"{live.url}listen/{tid}")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-headphones:not([hidden])")
    # the headphone screen: no clip counter yet, says it takes one attempt
    assert page.is_hidden("#lt-progress")
    assert "one attempt" in page.inner_text("#lt-hp-intro")
    assert "5 of 6" in page.inner_text("#lt-hp-intro")
    screen_in_page(page, live, tid, True)
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
    # its outcome, once it is over
    assert page.is_visible("#lt-hp-outcome")
    assert page.inner_text("#lt-hp-outcome").startswith("Headphone check passed (6 of 6 right)")
    # the counter counts the clips to rate: 2 items and the 2 check items (they look alike)
    assert page.is_visible("#lt-progress") and page.inner_text("#lt-count") == "Clip 1 of 4"
    # the built-in instructions, and the researcher's below them
    assert page.inner_text("#lt-instructions") == KINDS["mos"].instructions
    assert OWN in page.inner_text("#lt-admin-instructions")
    # the MOS scale on one row, inside the screen, each button with its number and word
    boxes = [_box(page, f".lt-choice[data-value='{v}']") for v in (5, 4, 3, 2, 1)]
    assert max(b["y"] for b in boxes) - min(b["y"] for b in boxes) < 1, boxes
    assert all(b["x"] + b["width"] <= vp["width"] for b in boxes)
    assert all(b["width"] >= 44 for b in boxes)  # a finger's width (WCAG's 44 px target)
    assert page.inner_text(".lt-choice[data-value='1']").split() == ["1", "Bad"]
    if size == "phone":
        page.screenshot(path=str(_shot("rater-phone-mos")))
    # Submit is on the screen without scrolling, and it works
    play_all_and_wait(page, 1)
    page.click(".lt-choice[data-value='4']")
    assert _in_view(_box(page, "#lt-submit"), vp)
    page.click("#lt-submit")
    page.wait_for_function("document.querySelector('#lt-count').textContent === 'Clip 2 of 4'")
    # #38 item 14: the screen's outcome ("... The test starts now.") is gone once rating began
    assert page.is_hidden("#lt-hp-outcome")


def test_mushra_page_on_a_phone_has_usable_sliders_and_submit_in_view(live, sized):
    size, vp, browser = sized
    tid = create_test(
        live,
        name=f"mushra {size}",
        kind="mushra",
        systems=[{"name": "joe", "backend": "piper"}, {"name": "qwen", "backend": "qwen"}],
        reference="joe",
        prompts=["The birch canoe slid on the smooth planks."],
        items_per_rater=1,
        headphone_check=False,
        screening=False,
        familiarise=True,
        instructions=OWN,
    )
    page = browser.new_page()
    page.goto(f"{live.url}listen/{tid}")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-familiar:not([hidden])", timeout=30_000)
    assert page.is_hidden("#lt-progress")
    labels = page.locator(".lt-fam-play").all_inner_texts()
    assert len(labels) == 2 and not any("anchor" in x.lower() for x in labels), labels
    for k in range(2):
        page.click(f".lt-fam-play[data-clip='{k}']")
        page.wait_for_selector(f".lt-fam-play[data-clip='{k}'].lt-heard", timeout=30_000)
    page.click("#lt-fam-continue")
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
    # the built-in MUSHRA explanation stays; the researcher's text comes in addition
    assert page.inner_text("#lt-instructions") == KINDS["mushra"].instructions
    assert "Move every slider" in page.inner_text("#lt-instructions")
    assert OWN in page.inner_text("#lt-admin-instructions")
    sliders = page.locator(".lt-slider")
    n = sliders.count()
    assert n == 4
    for i in range(n):
        b = sliders.nth(i).bounding_box()
        assert b["width"] >= (330 if size == "phone" else 300), b  # was about 130 px
        assert b["x"] + b["width"] <= vp["width"]
    page.wait_for_selector("#lt-mu-play:not([disabled])", timeout=60_000)
    if size == "phone":
        assert page.is_hidden(".lt-scale")  # the band row would be squashed: the word instead
        sliders.nth(0).fill("72")
        assert page.inner_text(".lt-slot:nth-child(1) .lt-mu-band-name") == "Good"
        page.screenshot(path=str(_shot("rater-phone-mushra")))
    else:
        assert all(page.locator(".lt-band").nth(i).is_visible() for i in range(5))
    assert _in_view(_box(page, "#lt-submit"), vp)  # Submit is on the screen, not below it


def _shot(name: str):
    """Screenshots go to pytest's temp folder (docs/screenshots.py makes the docs' copies)."""
    import tempfile
    from pathlib import Path

    d = Path(tempfile.gettempdir()) / "listenlab-layout"
    d.mkdir(exist_ok=True)
    return d / f"{name}.png"
