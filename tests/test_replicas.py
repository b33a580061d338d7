"""Two ``listenlab serve`` replicas on one PostgreSQL database, with Chromium raters.

A test made on replica A is rated on both: rater 1 answers two items on A and finishes on B
(another origin, so the page has no token: the crowd id resumes the same rater); rater 2
answers on B, B is SIGKILLed mid-test, and rater 2 finishes on A. At the end every answer the
pages saw acknowledged is stored exactly once, each rater has one row, every rater finished,
and both replicas' stimuli came from the one database (B never generated audio).
"""

from __future__ import annotations

import httpx
import pytest

from app.store import open_store
from app.store.listening import TestStore
from tests.support.app_util import chromium
from tests.support.postgres import pg_cluster_fixture, pg_url_fixture  # noqa: F401
from tests.support.replicas import replicas

pytestmark = pytest.mark.browser
ITEMS = 4


def open_rater(ctx, url: str):
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector("#lt-root[data-ready='1']", timeout=60_000)
    if not page.is_hidden("#lt-consent"):
        page.click("#lt-agree")
    page.wait_for_selector("#lt-item:not([hidden]), #lt-done:not([hidden])", timeout=60_000)
    return page


def answer(page, score: int) -> str:
    """Play the current item to its end, vote, and wait for the next one; returns the
    assignment answered (acknowledged: the page moved on only after the server stored it)."""
    pos = page.get_attribute("#lt-root", "data-position")
    aid = page.evaluate("window.listenTest.status.item.assignment_id")
    page.click(".lt-play[data-slot='0']")
    page.click(f".lt-choice[data-value='{score}']")
    page.wait_for_function("!document.querySelector('#lt-submit').disabled", timeout=60_000)
    page.click("#lt-submit")
    page.wait_for_function(
        f"document.querySelector('#lt-root').dataset.position !== '{pos}'", timeout=30_000
    )
    return aid


def create_test(url: str) -> str:
    body = {
        "name": "replicas",
        "kind": "mos",
        "systems": [
            {"name": "joe", "backend": "joe"},
            {"name": "qwen-wire", "backend": "qwen-wire"},
        ],
        "prompts": [
            "The birch canoe slid on the smooth planks.",
            "Glue the sheet to the dark blue background.",
        ],
        "items_per_rater": ITEMS,
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
    }
    r = httpx.post(url + "/ll/admin/tests", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["test_id"]


def test_two_replicas_one_killed_nothing_lost_or_doubled(pg_url, tmp_path):
    with (
        replicas(pg_url, tmp_path, n=2) as (a, b),
        chromium(["--autoplay-policy=no-user-gesture-required"]) as browser,
    ):
        tid = create_test(a.url)
        acked: dict[str, list[str]] = {"pp-1": [], "pp-2": []}
        # rater 1: two items on A, then the same crowd id on B resumes at item 3
        p1 = open_rater(browser, f"{a.url}/listen/{tid}?PROLIFIC_PID=pp-1")
        acked["pp-1"] += [answer(p1, 4) for _ in range(2)]
        p1.close()
        p1 = open_rater(browser, f"{b.url}/listen/{tid}?PROLIFIC_PID=pp-1")
        assert p1.inner_text("#lt-count") == f"Clip 3 of {ITEMS}"
        while p1.get_attribute("#lt-root", "data-position") != "done":
            acked["pp-1"].append(answer(p1, 5))
        # rater 2 (another origin: its own localStorage): one item on B; B dies (SIGKILL)
        # with the rater's page open
        b2, a2 = (r.url.replace("127.0.0.1", "localhost") for r in (b, a))
        p2 = open_rater(browser, f"{b2}/listen/{tid}?PROLIFIC_PID=pp-2")
        acked["pp-2"].append(answer(p2, 2))
        b.kill()
        assert a.alive and not b.alive
        p2.close()
        p2 = open_rater(browser, f"{a2}/listen/{tid}?PROLIFIC_PID=pp-2")
        assert p2.inner_text("#lt-count") == f"Clip 2 of {ITEMS}"
        while p2.get_attribute("#lt-root", "data-position") != "done":
            acked["pp-2"].append(answer(p2, 3))
        assert p2.is_visible("#lt-done")
        b_audio = list((b.data / "pg_audio").rglob("*.wav"))  # <hash of take id>/<file>

    with open_store(pg_url, read_only=True, local_dir=tmp_path / "check") as store:
        tests = TestStore(store)
        raters = tests.raters_frame(tid).set_index("crowd_id")
        assert sorted(raters.index) == ["pp-1", "pp-2"]  # one rater each, across replicas
        assert raters["finished_at"].notna().all()
        ans = tests.answers_frame(tid)
        for crowd, aids in acked.items():
            rid = raters.loc[crowd, "rater_id"]
            stored = ans[ans["rater_id"] == rid]["assignment_id"].tolist()
            assert sorted(stored) == sorted(aids) and len(aids) == ITEMS, crowd  # none lost
        assert ans["answer_id"].is_unique and len(ans) == 2 * ITEMS  # none doubled
        mos = store.answer_frame("mos_ratings", tid)
        assert len(mos) == 2 * ITEMS and not mos.duplicated(["rater_id", "take_id"]).any()
        r1 = mos[mos["rater_id"] == raters.loc["pp-1", "rater_id"]]["score"].tolist()
        assert sorted(r1) == [4.0, 4.0, 5.0, 5.0]
    # replica B played stimuli it never generated: copies of the database's audio
    assert b_audio, "replica B served no audio from the database"
