"""Refill and the session cap in headless Debian Chromium (issue #42): raters on the real
rater page, some careless (they answer 5 to everything and the screening excludes them);
the test with ``target_valid`` reopens their places until every stimulus has its valid
ratings, then turns joiners away. Every rater gets a break page after two clips; a reload
during it keeps the break and its countdown. Real server, real SQLite file, real Piper."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.app_util import chromium, create_test, listening_app, live_server

pytestmark = pytest.mark.browser

PROMPTS = ["The birch canoe slid on the smooth planks.", "Rice is often served in round bowls."]
BREAK_S = 5


@pytest.fixture(scope="module")
def setup():
    app = listening_app()  # localhost admin
    with live_server(app) as live, chromium(["--autoplay-policy=no-user-gesture-required"]) as b:
        yield live, b


def places(live, tid: str) -> dict:
    return httpx.get(f"{live.url}ll/admin/tests/{tid}/places", timeout=60).json()


def answer_current(page, live, tid: str, careful: bool) -> None:
    pos = page.get_attribute("#lt-root", "data-position")
    st = page.evaluate("window.listenTest.status")
    a = next(
        x
        for x in live.state.store.assignments(tid, st["rater_id"])
        if x.assignment_id == st["item"]["assignment_id"]
    )
    page.click(".lt-play[data-slot='0']")
    score = 5
    if careful:
        score = int(a.expected) if a.role in {"gold", "trap"} and a.expected else 4
    page.click(f".lt-choice[data-value='{score}']")
    page.wait_for_function("!document.querySelector('#lt-submit').disabled", timeout=60_000)
    page.click("#lt-submit")
    page.wait_for_function(
        f"document.querySelector('#lt-root').dataset.position !== '{pos}' || "
        "document.querySelector('#lt-root').dataset.stage === 'break'",
        timeout=30_000,
    )


def take_break(page, reload: bool) -> None:
    page.wait_for_selector("#lt-break:not([hidden])", timeout=30_000)
    assert page.is_disabled("#lt-break-continue")
    assert "at least 5 seconds" in page.inner_text("#lt-break-text")
    if reload:  # the break stays, with its time left (not a new break)
        first = page.evaluate("window.listenTest.status.break")
        page.wait_for_timeout(1500)
        page.reload()
        page.wait_for_selector("#lt-root[data-ready='1']")
        page.wait_for_selector("#lt-break:not([hidden])", timeout=30_000)
        again = page.evaluate("window.listenTest.status.break")
        assert again["number"] == first["number"] == 1
        assert again["left_s"] <= first["left_s"] - 1.0
        assert "You can continue in" in page.inner_text("#lt-break-wait")
    page.wait_for_selector("#lt-break-continue:not([disabled])", timeout=(BREAK_S + 5) * 1000)
    page.click("#lt-break-continue")
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)


def rater(browser, live, tid: str, n: int, careful: bool) -> str:
    """One rater's whole session on the page; returns the code the page shows."""
    page = browser.new_page()
    page.goto(f"{live.url}listen/{tid}?PROLIFIC_PID=pp-{n}")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
    answered = 0
    while page.get_attribute("#lt-root", "data-position") != "done":
        if page.get_attribute("#lt-root", "data-stage") == "break":
            take_break(page, reload=n == 2)
            continue
        answer_current(page, live, tid, careful)
        answered += 1
    page.wait_for_selector("#lt-done:not([hidden])")
    code = page.inner_text("#lt-code")
    page.evaluate("localStorage.clear()")  # the next rater is someone else
    page.close()
    assert answered == 4  # 2 items, the low anchor and the trap
    return code


def test_careless_raters_are_replaced_until_the_target_and_breaks_hold(setup):
    live, browser = setup
    tid = create_test(
        live,
        prompts=PROMPTS,
        items_per_rater=2,
        headphone_check=False,
        target_valid=1,
        completion_code="DONE-OK",
        excluded_code="DONE-EXCL",
        break_after=2,
        break_min_s=BREAK_S,
    )
    assert places(live, tid)["places_left"] == 2
    assert rater(browser, live, tid, 1, careful=False) == "DONE-EXCL"
    assert places(live, tid)["places_left"] == 2  # the careless rater's place reopened
    assert rater(browser, live, tid, 2, careful=True) == "DONE-OK"
    assert places(live, tid)["places_left"] == 1
    assert rater(browser, live, tid, 3, careful=False) == "DONE-EXCL"
    assert places(live, tid)["places_left"] == 1
    assert rater(browser, live, tid, 4, careful=True) == "DONE-OK"
    p = places(live, tid)
    assert (p["places_left"], p["valid"], p["excluded"], p["lowest"]) == (0, 2, 2, 1)

    page = browser.new_page()  # the target is reached: the next joiner is told so
    page.goto(f"{live.url}listen/{tid}?PROLIFIC_PID=pp-5")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_function(
        "document.querySelector('#lt-status').textContent.includes('full')", timeout=30_000
    )
    page.close()
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json()
    by = {r["crowd_id"]: r for r in res["raters"]}
    assert [by[f"pp-{n}"]["excluded"] for n in (1, 2, 3, 4)] == [True, False, True, False]
    assert sorted(r["n"] for r in res["mos"]) == [2, 2]  # every stimulus: its valid rating
    rows = live.state.store.db.execute(
        "SELECT crowd_id, breaks FROM test_raters WHERE test_id=? ORDER BY seq", [tid]
    ).fetchall()
    assert len(rows) == 4 and all(b and '"after": 2' in b for _, b in rows)


HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_questionnaire_pages_are_drawn_as_text_and_answered_in_place(setup):
    live, browser = setup
    pages = [
        {
            "at": "start",
            "title": "About you " + HOSTILE,
            "fields": [
                {
                    "key": "band",
                    "label": "Age " + HOSTILE,
                    "type": "choice",
                    "options": ["<b>young</b>", "older"],
                },
                {
                    "key": "hours",
                    "label": "Hours a day",
                    "type": "number",
                    "min": 0,
                    "max": 24,
                    "required": False,
                },
            ],
        },
        {
            "at": "end",
            "title": "Last",
            "fields": [{"key": "comments", "label": "Comments", "type": "text", "max_length": 300}],
        },
    ]
    tid = create_test(
        live,
        prompts=PROMPTS[:1],
        items_per_rater=2,
        headphone_check=False,
        screening=False,
        questionnaire=pages,
        completion_code="Q-OK",
    )
    page = browser.new_page()
    page.goto(f"{live.url}listen/{tid}?PROLIFIC_PID=q-1")
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
    page.click("#lt-agree")
    page.wait_for_selector("#lt-questionnaire:not([hidden])", timeout=30_000)
    assert page.inner_text("#lt-q-intro") == "About you " + HOSTILE  # text, not markup
    assert (
        page.evaluate("document.querySelectorAll('#lt-questionnaire img, #lt-q-form b').length")
        == 0
    )
    assert "Age " + HOSTILE in page.inner_text("#lt-q-form")
    assert page.is_disabled("#lt-q-send")  # the required choice is not answered yet
    page.fill("input[name='hours']", "30")  # out of range: not sent
    page.check("input[name='band'][value='<b>young</b>']")
    assert not page.is_disabled("#lt-q-send")
    page.fill("input[name='hours']", "3.5")
    page.click("#lt-q-send")
    page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
    for _ in range(2):
        pos = page.get_attribute("#lt-root", "data-position")
        page.click(".lt-play[data-slot='0']")
        page.click(".lt-choice[data-value='4']")
        page.wait_for_function("!document.querySelector('#lt-submit').disabled", timeout=60_000)
        page.click("#lt-submit")
        page.wait_for_function(
            f"document.querySelector('#lt-root').dataset.position !== '{pos}'", timeout=30_000
        )
    page.wait_for_selector("#lt-questionnaire:not([hidden])", timeout=30_000)
    assert page.inner_text("#lt-q-intro") == "Last"
    assert page.is_disabled("#lt-q-send")
    page.fill("textarea[name='comments']", HOSTILE)
    page.click("#lt-q-send")
    page.wait_for_selector("#lt-done:not([hidden])", timeout=30_000)
    assert page.inner_text("#lt-code") == "Q-OK"
    assert page.evaluate("window.pwned") is None
    rid = page.evaluate("window.listenTest.status.rater_id")
    page.evaluate("localStorage.clear()")
    page.close()
    got = live.app.state.listening.tests.rater(tid, rid).questionnaire
    assert json.loads(got) == {
        "band": "<b>young</b>",
        "hours": 3.5,
        "comments": HOSTILE,
        "_pages": ["start", "end"],
    }
