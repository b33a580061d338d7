"""The rater page's screening in headless Debian Chromium (the server's audio, played through
the page's AudioContext): an honest listener clicks through the headphone screen and passes,
the familiarisation page gates Continue until both ends were played, and a failed screen
shows the screen-out code and sends the rater to the study's screen-out link.
"""

from __future__ import annotations

import pytest

from tests.support.app_util import (
    chromium,
    create_test,
    listening_app,
    live_server,
    screen_in_page,
)

pytestmark = pytest.mark.browser

OUT = "https://screenout.example/end"


@pytest.fixture(scope="module")
def setup():
    app = listening_app()  # localhost admin
    with live_server(app) as live, chromium(["--autoplay-policy=no-user-gesture-required"]) as b:
        yield live, b


def open_rater(ctx, url):
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    return page


def test_honest_rater_passes_the_screen_and_familiarisation_gates_continue(setup):
    live, browser = setup
    tid = create_test(
        live, screen="huggins", familiarise=True, prompts=["Rice is often served in round bowls."]
    )
    page = open_rater(
        browser, f"{live.url}listen/{tid}?PROLIFIC_PID=hp-1&STUDY_ID=s1&SESSION_ID=x1"
    )
    page.click("#lt-agree")
    page.wait_for_selector("#lt-headphones:not([hidden])")
    assert "faint tone" in page.inner_text("#lt-hp-question")
    assert page.is_disabled(".lt-hp-answer[data-answer='0']")  # nothing played yet
    screen_in_page(page, live, tid, True)
    page.wait_for_selector("#lt-familiar:not([hidden])", timeout=30_000)
    st = page.evaluate("window.listenTest.status")
    assert st["headphone"]["passed"] and st["stage"] == "familiarise"
    clips = page.locator(".lt-fam-play")
    assert clips.count() == 2 and page.is_disabled("#lt-fam-continue")
    clips.nth(0).click()
    page.wait_for_selector(".lt-fam-play[data-clip='0'].lt-heard", timeout=30_000)
    assert page.is_disabled("#lt-fam-continue")  # one end heard, not both
    clips.nth(1).click()
    page.wait_for_selector("#lt-fam-continue:not([disabled])", timeout=30_000)
    page.click("#lt-fam-continue")
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
    row = live.state.store.db.execute(
        "SELECT familiarised_at, study_id, session_id, headphone_pass FROM test_raters "
        "WHERE test_id=? AND crowd_id='hp-1'",
        [tid],
    ).fetchone()
    assert row[0] and row[1:] == ("s1", "x1", 1)


def test_failed_screen_shows_the_code_and_redirects(setup):
    live, browser = setup
    tid = create_test(
        live,
        screen="antiphase",
        screenout_url=OUT + "?cc={code}",
        screenout_code="HPFAIL",
        prompts=["Rice is often served in round bowls."],
    )
    page = browser.new_page()
    page.route(
        "https://screenout.example/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body="<p>bye</p>"),
    )
    page.goto(f"{live.url}listen/{tid}?PROLIFIC_PID=spk-1")
    page.wait_for_selector("#lt-root[data-ready='1']")
    page.click("#lt-agree")
    page.wait_for_selector("#lt-headphones:not([hidden])")
    screen_in_page(page, live, tid, False)  # picks the antiphase tone, as over loudspeakers
    page.wait_for_selector("#lt-screenout:not([hidden])", timeout=30_000)
    assert page.inner_text("#lt-so-code") == "HPFAIL"
    assert page.is_hidden("#lt-item") and page.is_hidden("#lt-done")
    page.wait_for_url(OUT + "?cc=HPFAIL", timeout=15_000)
    # the test link again from another origin (no stored token): the same crowd id gets its
    # screen-out again, not a second try
    page2 = browser.new_page()
    page2.route(
        "https://screenout.example/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body="<p>bye</p>"),
    )
    url2 = f"{live.url}listen/{tid}?PROLIFIC_PID=spk-1".replace("127.0.0.1", "localhost")
    page2.goto(url2)
    page2.wait_for_selector("#lt-root[data-ready='1']")
    page2.click("#lt-agree")
    page2.wait_for_selector("#lt-screenout:not([hidden])", timeout=30_000)
    assert page2.inner_text("#lt-so-code") == "HPFAIL" and page2.is_hidden("#lt-headphones")
    n = live.state.store.db.execute(
        "SELECT count(*) FROM test_raters WHERE test_id=? AND crowd_id='spk-1'", [tid]
    ).fetchone()[0]
    assert n == 1
