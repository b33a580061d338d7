"""Automatic refill (issue #42): a test with ``target_valid`` takes raters until every
stimulus has that many *valid* ratings; a rater the screening excludes frees their place,
which the next joiner gets. Real server on 127.0.0.1, real SQLite file, the real Piper voice,
scripted raters over the real HTTP and WebSocket routes; the CLI through ``app.cli.main``."""

from __future__ import annotations

import asyncio
import contextlib
import io

import httpx
import pytest

from app.cli import main
from app.listening.refill import Places, places_left, rater_rows
from evaluation.listening.design import Design, RaterRow
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient

PW = "refill-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
PROMPTS = ["The birch canoe slid on the smooth planks.", "Rice is often served in round bowls."]


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


def places(live, tid: str) -> dict:
    r = httpx.get(f"{live.url}ll/admin/tests/{tid}/places", headers=ADMIN, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


async def rate_all(live, tid: str, careful: bool) -> dict:
    """Join and answer every item after listening to it: a careful rater answers the trap as
    it asks and rates the low anchor 1 and items 4; a careless one answers 5 to everything."""
    c = RaterClient(live.url, tid)
    await c.join()
    st = await c.status()
    store = live.state.store
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        a = next(x for x in store.assignments(tid, st["rater_id"]) if x.assignment_id == aid)
        await c.listen(aid, 0)
        score = 5
        if careful:
            score = int(a.expected) if a.role in {"trap", "gold"} and a.expected else 4
        r = await c.vote({"assignment_id": aid, "score": score})
        assert r.status_code == 200, r.text
        st = await c.status()
    await c.aclose()
    return st


def test_excluded_raters_places_reopen_until_the_target_of_valid_ratings(live, tmp_path):
    tid = create_test(
        live,
        ADMIN,
        prompts=PROMPTS,  # 2 systems x 2 prompts, 2 items each: two rows of two stimuli
        items_per_rater=2,
        headphone_check=False,
        target_valid=1,
        excluded_code="EXCL-1",
        completion_code="DONE-1",
    )
    before = places(live, tid)
    assert (before["target"], before["rule"], before["stimuli"]) == (1, "valid", 4)
    assert before["places_left"] == 2 and before["lowest"] == 0
    assert before["line"].startswith("Places left: 2 (target 1 valid ratings per stimulus")

    careless = asyncio.run(rate_all(live, tid, careful=False))
    assert careless["completion_code"] == "EXCL-1"  # the screening excludes them
    after_bad = places(live, tid)
    assert after_bad["places_left"] == 2 and after_bad["excluded"] == 1  # the place reopened
    first = asyncio.run(rate_all(live, tid, careful=True))
    assert first["completion_code"] == "DONE-1"
    assert places(live, tid)["places_left"] == 1
    asyncio.run(rate_all(live, tid, careful=True))
    done = places(live, tid)
    assert (done["places_left"], done["valid"], done["excluded"], done["lowest"]) == (0, 2, 1, 1)
    full = httpx.post(f"{live.url}ll/listen/{tid}/join", json={}, timeout=60)
    assert full.status_code == 403 and "full" in full.json()["detail"]

    # the careless rater's row went to the next joiner: the two valid raters cover every cell
    rows = live.state.store.db.execute(
        "SELECT rater_id, design_row, completion_code FROM test_raters WHERE test_id=? "
        "ORDER BY seq",
        [tid],
    ).fetchall()
    assert [r[1] for r in rows] == [0, 0, 1]
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", headers=ADMIN, timeout=60).json()
    kept = [r for r in res["raters"] if not r["excluded"]]
    assert len(kept) == 2 and sorted(r["n"] for r in res["mos"]) == [2, 2]
    # each rater's reliability columns are in the results (two raters: too few to agree)
    assert {"agreement", "checks_passed", "time_ratio", "reliability"} <= set(res["raters"][0])

    # the Tests tab's crowd editor shows the same line under the crowd settings
    from app.listening.admin.page import AdminPage
    from app.listening.admin.tests_tab import crowd_values

    note = crowd_values(AdminPage(live.state, live.app.state.listening, tmp_path), tid)[-1]
    assert "Places left: 0 (target 1 valid ratings per stimulus" in note

    # listenlab test results says the same (its own process reads the same SQLite file)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["test", "results", tid, "--db", live.state.storage.path]) == 0
    assert "Places left: 0 (target 1 valid ratings per stimulus" in out.getvalue()
    assert "2 valid and 1 excluded raters finished" in out.getvalue()


def test_the_designer_reports_the_places_and_refuses_a_bad_target(live):
    tid = create_test(live, ADMIN, prompts=PROMPTS, items_per_rater=2, target_valid=3)
    body = {"name": "t", "kind": "mos", "systems": [{"name": "a", "backend": "piper"}]}
    r = httpx.get(f"{live.url}ll/admin/tests/{tid}/places", headers=ADMIN, timeout=60)
    assert r.json()["places_left"] == 6  # 4 stimuli, 2 per rater, 3 valid ratings each
    from app.listening.designer import design_report

    lines = design_report(live.app.state.listening.tests, tid)
    assert any(ln.startswith("Refill: 3 valid ratings per stimulus need 6 raters") for ln in lines)
    for bad in (0.5, -1, 10_001, "many"):
        got = httpx.post(
            f"{live.url}ll/admin/tests",
            json={**body, "prompts": PROMPTS, "target_valid": bad},
            headers=ADMIN,
            timeout=60,
        )
        assert got.status_code == 400, (bad, got.text)
        assert "target" in got.text or bad == "many", got.text


def test_places_left_follows_the_join_rule():
    d = Design("mos", ("a", "b", "c"), ("p1", "p2", "p3"), 3, screening=False).validate()
    assert places_left(d, [], 2) == 6  # 9 stimuli, 3 per rater, twice
    # a usable rater on row 0 and an unusable one on row 1: four more raters
    assert places_left(d, [RaterRow(0, True), RaterRow(1, False)], 2) == 5
    p = Places(2, "valid", 9, 0, 0, 0, 0, 6)
    assert p.line().startswith("Places left: 6 (target 2 valid ratings per stimulus")
    assert rater_rows([], set(), 0.0, 1.0) == []
