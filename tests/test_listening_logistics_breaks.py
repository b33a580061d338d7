"""The session cap (issue #42): after every ``break_after`` answered items the rater gets a
break page with a minimum pause; a reload keeps the break (and its time left); a vote during
it is refused; after it the rater continues at the next item. On a real server over a SQLite
file and a PostgreSQL database (the rater's breaks are a ``test_raters`` column, schema 9),
the real Piper voice, a scripted rater over the real routes."""

from __future__ import annotations

import asyncio
import json
import os

import httpx

from app.listening import refill
from app.store import open_store
from tests.support.app_util import LISTENING_BACKENDS, create_test, live_server
from tests.support.postgres import db_target_fixture, pg_cluster_fixture, pg_url_fixture
from tests.support.rater import RaterClient

__all__ = ["db_target_fixture", "pg_cluster_fixture", "pg_url_fixture"]  # pytest's fixtures

PROMPTS = ["The birch canoe slid on the smooth planks.", "Rice is often served in round bowls."]
MIN_S = 5.0


def app_over(target: str):
    from app.server import create_app

    old = os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
    try:
        return create_app(dict(LISTENING_BACKENDS), target, mount_ui=False)
    finally:
        if old is not None:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old


async def answer(c: RaterClient, st: dict) -> dict:
    aid = st["item"]["assignment_id"]
    await c.listen(aid, 0)
    r = await c.vote({"assignment_id": aid, "score": 4})
    assert r.status_code == 200, r.text
    return await c.status()


def test_break_page_after_n_items_survives_a_reload_and_resumes(db_target, tmp_path):
    target = str(db_target)
    with live_server(app_over(target)) as live:
        tid = create_test(
            live,
            prompts=PROMPTS,
            items_per_rater=4,  # 2 systems x 2 prompts: every stimulus once
            headphone_check=False,
            screening=False,
            break_after=2,
            break_min_s=MIN_S,
        )

        async def go():
            c = RaterClient(live.url, tid)
            await c.join()
            st = await c.status()
            assert st["stage"] == "item" and st["test"]["texts"]["break"]["heading"]
            st = await answer(c, st)
            assert st["stage"] == "item"  # one answered: no break yet
            st = await answer(c, st)
            assert (st["stage"], st["item"], st["answered"]) == ("break", None, 2)
            b = st["break"]
            assert (b["after"], b["min_s"], b["number"]) == (2, MIN_S, 1)
            assert 0 < b["left_s"] <= MIN_S
            nxt = next(
                a.assignment_id
                for a in live.state.store.assignments(tid, st["rater_id"])
                if a.position == 2
            )
            refused = await c.vote({"assignment_id": nxt, "score": 3})
            assert refused.status_code == 403 and "break" in refused.json()["detail"]
            early = await c.post("resume")
            assert early.status_code == 409 and "at least 5 s" in early.json()["detail"]
            await asyncio.sleep(1.2)
            again = await c.status()  # a reload: the same break, less time left
            assert again["stage"] == "break" and again["break"]["left_s"] < b["left_s"]
            assert again["break"]["number"] == 1
            await asyncio.sleep(again["break"]["left_s"] + 0.2)
            ok = await c.post("resume")
            assert ok.status_code == 200 and ok.json() == {"resumed": True}
            st = await c.status()
            assert st["stage"] == "item" and st["item"]["position"] == 2
            st = await answer(c, st)
            st = await answer(c, st)
            assert st["finished"] and st["stage"] == "done"  # no break after the last item
            rid = st["rater_id"]
            await c.aclose()
            return rid

        rid = asyncio.run(go())
        tests = live.app.state.listening.tests
        breaks = tests.rater(tid, rid).breaks
        # the refill's count on this engine: the rater answered 4 to every clip, which the
        # screening excludes (straight-lining): no valid rater, one excluded, no target
        p = refill.test_places(tests, tid)
        assert (p.target, p.valid, p.excluded, p.places_left) == (None, 0, 1, None)
        assert [r.rater_id for r in tests.raters(tid)] == [rid]
    got = json.loads(breaks)
    assert len(got) == 1 and got[0]["after"] == 2
    assert got[0]["ended"] - got[0]["started"] >= MIN_S
    with open_store(target, local_dir=tmp_path) as s:  # stored in the engine's own column
        assert s.schema_version >= 9


def test_bad_break_settings_are_refused(tmp_path):
    with live_server(app_over(str(tmp_path / "lab.db"))) as live:
        body = {
            "name": "t",
            "kind": "mos",
            "systems": [{"name": "a", "backend": "piper"}],
            "prompts": PROMPTS,
        }
        for extra, words in (
            ({"break_after": 0.5}, "break_after"),
            ({"break_after": 501}, "break_after"),
            ({"break_after": 2, "break_min_s": 1}, "break_min_s"),
            ({"break_after": 2, "break_min_s": 4000}, "break_min_s"),
            ({"break_after": True}, "break_after"),
        ):
            r = httpx.post(f"{live.url}ll/admin/tests", json={**body, **extra}, timeout=60)
            assert r.status_code == 400 and words in r.text, (extra, r.text)


def test_the_break_text_is_only_for_tests_with_a_cap():
    from app.listening.texts import rater_texts

    assert rater_texts("mos", {}, "c")["break"] is None
    got = rater_texts("mos", {"break_after": 3}, "c")["break"]
    assert "{left}" in got["wait"] and got["continue"] == "Continue"
