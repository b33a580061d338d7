"""Crowd codes right (issue #28): the completion and screen-out codes and URLs can be changed
while a test is open, through the admin route and the Tests tab's handler; each change is a
``test_changes`` row with its time; the next rater gets the new values at once while a rater
who finished keeps the code they were shown; bad values are refused and change nothing;
Duplicate picks an editable draft copy. Real server, real SQLite, real HTTP/WebSocket raters.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from app.listening.admin.page import AdminPage
from app.listening.admin.tests_tab import crowd_values, duplicate_test, save_crowd
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


def page(live, tmp_path) -> AdminPage:
    return AdminPage(live.state, live.app.state.listening, tmp_path)


def crowd(live, tid: str, **body) -> httpx.Response:
    return httpx.post(live.url + f"ll/admin/tests/{tid}/crowd", json=body, timeout=60)


def changes(live, tid: str) -> list[tuple]:
    return live.state.store.db.execute(
        "SELECT field, old_value, new_value, changed_at FROM test_changes WHERE test_id=? "
        "ORDER BY changed_at, field",
        [tid],
    ).fetchall()


async def fail_screen(live, tid: str) -> dict:
    c = RaterClient(live.url, tid)
    await c.join()
    r = await c.headphone(correct=False)
    assert r["screened_out"] is True, r
    out = await c.status()  # what the page shows: the screen-out code and link
    await c.aclose()
    return out


def test_codes_change_while_open_recorded_and_used_at_once(live):
    tid = create_test(
        live,
        completion_code="FIRST-1",
        redirect_url="https://example.org/done?cc={code}",
        screenout_code="OUT-1",
        screenout_url="https://example.org/out?cc={code}",
        headphone_check=True,
        screen="huggins",
        screening=False,
    )
    assert changes(live, tid) == []
    st1 = asyncio.run(finish_after_screen(live, tid))
    assert st1["completion_code"] == "FIRST-1"
    assert st1["redirect_url"] == "https://example.org/done?cc=FIRST-1"

    r = crowd(
        live,
        tid,
        completion_code="SECOND-2",
        redirect_url="https://example.org/v2?cc={code}",
        screenout_code="OUT-2",
    )
    assert r.status_code == 200, r.text
    assert r.json()["changed"] == ["completion_code", "redirect_url", "screenout_code"]
    assert r.json()["crowd"] == {
        "completion_code": "SECOND-2",
        "redirect_url": "https://example.org/v2?cc={code}",
        "screenout_code": "OUT-2",
        "screenout_url": "https://example.org/out?cc={code}",
        "excluded_code": None,
    }
    rows = changes(live, tid)
    assert [r_[:3] for r_ in rows] == [
        ("completion_code", "FIRST-1", "SECOND-2"),
        ("redirect_url", "https://example.org/done?cc={code}", "https://example.org/v2?cc={code}"),
        ("screenout_code", "OUT-1", "OUT-2"),  # one save: one time, ordered by field
    ]
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", r_[3]) for r_ in rows)

    st2 = asyncio.run(finish_after_screen(live, tid))  # the next rater: the new values
    assert st2["completion_code"] == "SECOND-2"
    assert st2["redirect_url"] == "https://example.org/v2?cc=SECOND-2"
    out = asyncio.run(fail_screen(live, tid))
    assert out["screenout_code"] == "OUT-2"
    assert out["redirect_url"] == "https://example.org/out?cc=OUT-2"
    codes = dict(
        live.state.store.db.execute(
            "SELECT rater_id, completion_code FROM test_raters WHERE test_id=? "
            "AND completion_code IS NOT NULL",
            [tid],
        ).fetchall()
    )
    assert sorted(codes.values()) == ["FIRST-1", "SECOND-2"]  # the first rater keeps theirs

    # the same settings again: nothing changes, nothing is recorded
    again = crowd(live, tid, completion_code="SECOND-2")
    assert again.json()["changed"] == [] and len(changes(live, tid)) == 3
    # empty: one code per rater again
    assert crowd(live, tid, completion_code="").json()["changed"] == ["completion_code"]
    a = asyncio.run(finish_after_screen(live, tid))["completion_code"]
    b = asyncio.run(finish_after_screen(live, tid))["completion_code"]
    assert re.fullmatch(r"[0-9A-F]{8}", a) and re.fullmatch(r"[0-9A-F]{8}", b) and a != b


async def finish_after_screen(live, tid: str) -> dict:
    c = RaterClient(live.url, tid)
    await c.join()
    await c.headphone(correct=True)
    st = await c.status()
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        await c.listen(aid, 0)
        r = await c.vote({"assignment_id": aid, "score": 2 + len(aid) % 3})
        assert r.status_code == 200, r.text
        st = await c.status()
    await c.aclose()
    return st


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"redirect_url": "http://example.org/x"}, "redirect_url must start with https://"),
        ({"completion_code": "has space"}, "completion_code may hold only letters, digits"),
        ({"completion_code": "X" * 65}, "completion_code is over 64 characters"),
        ({"title": "new"}, "'title' is not a crowd setting"),
        ({"screenout_code": 5}, "screenout_code must be a string or null"),
        ({}, "give one or more of completion_code"),
    ],
)
def test_bad_crowd_settings_are_refused_and_change_nothing(live, body, message):
    tid = create_test(live, completion_code="KEEP-1")
    r = crowd(live, tid, **body)
    assert r.status_code == 400 and r.json()["detail"].startswith(message), r.text
    assert changes(live, tid) == []
    assert live.app.state.listening.tests.require_test(tid).config["completion_code"] == ("KEEP-1")


async def rate_through(live, tid: str, crowd_id: str, careless: bool) -> dict:
    """A rater who answers every item (no headphone screen): attentively (the low anchor 1,
    the trap what it asks, the items 3 to 5) or carelessly (5 for everything). The item's role
    is read from the store: the page is never told it. The last status."""
    c = RaterClient(live.url, tid, crowd_id=crowd_id)
    try:
        await c.join()
        st = await c.status()
        while st["item"] is not None:
            aid = st["item"]["assignment_id"]
            a = next(
                x
                for x in live.state.store.assignments(tid, st["rater_id"])
                if x.assignment_id == aid
            )
            await c.listen(aid, 0)
            score = 5 if careless else int(a.expected) if a.role != "item" else 3 + len(aid) % 3
            r = await c.vote({"assignment_id": aid, "score": score})
            assert r.status_code == 200, r.text
            st = await c.status()
        return st
    finally:
        await c.aclose()


def test_a_rater_the_screening_excludes_gets_the_excluded_code(live):
    """#38 item 14: a careless rater who answers every item still finishes; with an
    ``excluded_code`` set they are shown it (and sent to the redirect with it) instead of the
    completion code, so a researcher can withhold payment; an attentive rater gets the
    completion code. Without one, the careless rater gets the completion code too (as the
    docs say)."""
    spec = dict(
        completion_code="PAY-1",
        redirect_url="https://example.org/done?cc={code}",
        headphone_check=False,
        screening=True,
        items_per_rater=2,
    )
    tid = create_test(live, excluded_code="NOPAY-1", **spec)
    good = asyncio.run(rate_through(live, tid, "attentive", careless=False))
    bad = asyncio.run(rate_through(live, tid, "careless", careless=True))
    assert good["completion_code"] == "PAY-1"
    assert bad["completion_code"] == "NOPAY-1"
    assert bad["redirect_url"] == "https://example.org/done?cc=NOPAY-1"
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", timeout=60).json()
    excluded = {r["rater_id"]: r["excluded"] for r in res["raters"]}
    assert excluded == {good["rater_id"]: False, bad["rater_id"]: True}
    again = asyncio.run(rate_through(live, tid, "careless", careless=True))  # resumed: kept
    assert again["completion_code"] == "NOPAY-1"
    plain = create_test(live, **spec)
    bad2 = asyncio.run(rate_through(live, plain, "careless2", careless=True))
    assert bad2["completion_code"] == "PAY-1"
    r = crowd(live, tid, excluded_code="has space")
    assert r.status_code == 400 and "excluded_code may hold only letters" in r.json()["detail"]


def test_unknown_test_is_404(live):
    r = crowd(live, "nosuchtest", completion_code="A")
    assert r.status_code == 404 and "no test 'nosuchtest'" in r.json()["detail"]


def test_duplicate_picks_an_editable_draft_copy(live, tmp_path):
    p = page(live, tmp_path)
    tid = create_test(live, completion_code="ORIG-1", screenout_code="SO-1")
    msg, _table, pick, _kept = duplicate_test(p, tid)
    new = pick["value"]
    assert new != tid and f"duplicated as {new}" in msg
    assert p.tests.require_test(new).status == "draft"
    values = crowd_values(p, new)
    assert values[:5] == ["ORIG-1", "", "SO-1", "", ""] and values[5] == ""
    note = save_crowd(p, new, "COPY-2", "https://example.org/c?x={code}", "SO-1", "", "")
    assert note.startswith("Saved completion_code, redirect_url for " + new)
    assert [r_[:3] for r_ in changes(live, new)] == [
        ("completion_code", "ORIG-1", "COPY-2"),
        ("redirect_url", None, "https://example.org/c?x={code}"),
    ]
    assert changes(live, tid) == []  # the original is untouched
    assert p.tests.require_test(tid).config["completion_code"] == "ORIG-1"
    assert "2 change(s) recorded" in crowd_values(p, new)[5]


def test_only_the_admin_changes_crowd_settings():
    pw = "crowd-admin-pw"
    with live_server(listening_app(pw)) as lv:
        tid = create_test(lv, {"Authorization": f"Bearer {pw}"}, completion_code="SAFE-1")
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = httpx.post(
                lv.url + f"ll/admin/tests/{tid}/crowd",
                json={"completion_code": "STOLEN"},
                headers=headers,
                timeout=30,
            )
            assert r.status_code in (401, 403), r.text
        assert changes(lv, tid) == []
        assert lv.app.state.listening.tests.require_test(tid).config["completion_code"] == (
            "SAFE-1"
        )
        ok = httpx.post(
            lv.url + f"ll/admin/tests/{tid}/crowd",
            json={"completion_code": "NEW-1"},
            headers={"Authorization": f"Bearer {pw}"},
            timeout=30,
        )
        assert ok.status_code == 200 and ok.json()["changed"] == ["completion_code"]
