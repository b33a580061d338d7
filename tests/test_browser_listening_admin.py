"""The Gradio admin page in Chromium: design a test with the native form (progress bar,
bundled Harvard prompts), then read its results after scripted raters voted."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.listening.client import RaterClient
from app.server import create_app
from tests._app_util import chromium, live_server, tmp_db

pytestmark = pytest.mark.browser


def test_designer_generates_and_results_show_mos(tmp_path):
    os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin (the page says so)
    app = create_app({"piper": "piper?deterministic=1"}, tmp_db())
    with live_server(app) as live, chromium() as browser:
        page = browser.new_page()
        page.goto(live.url + "admin/tests/")
        page.wait_for_selector("text=Generate the stimuli", timeout=60_000)
        assert page.locator("text=only requests from this machine").count() >= 1
        page.get_by_label("How many Harvard sentences").fill("2")
        page.get_by_label("Items per rater").fill("2")
        page.get_by_label("Screening items (anchor, gold, trap)").uncheck()
        page.get_by_label("Headphone check").uncheck()
        page.click("text=Generate the stimuli and open the test")
        page.wait_for_selector("text=is open", timeout=240_000)
        tests = live.state.store.db.execute("SELECT test_id, status FROM tests").fetchall()
        assert len(tests) == 1 and tests[0][1] == "open"
        tid = tests[0][0]
        stim = live.state.store.db.execute(
            "SELECT count(*), min(gain_db), max(abs(target_lufs + 23)) FROM stimuli "
            "WHERE test_id=?",
            [tid],
        ).fetchone()
        assert stim[0] == 4 and stim[2] == 0  # 2 systems x 2 Harvard sentences, -23 LUFS

        async def rate(score):
            c = RaterClient(live.url, tid)
            await c.join()
            st = await c.status()
            while not st["finished"]:
                await c.listen(st["item"]["assignment_id"], 0)
                r = await c.vote({"assignment_id": st["item"]["assignment_id"], "score": score})
                assert r.status_code == 200
                st = await c.status()
            await c.aclose()

        with ThreadPoolExecutor(1) as ex:  # playwright's sync API owns this thread's loop
            ex.submit(asyncio.run, rate(4)).result()
            ex.submit(asyncio.run, rate(2)).result()
        page.reload()
        page.wait_for_selector("text=Generate the stimuli", timeout=60_000)
        page.get_by_role("tab", name="Results").click()
        page.get_by_label("Include screened raters").check()  # no headphone check here
        page.click("#lt-results-show")
        page.wait_for_selector("#lt-results-summary :text('MOS (all raters)')", timeout=60_000)
        text = page.inner_text("#lt-results-summary")
        assert "Raters: 2" in text
        # each system got one 4 and one 2: mean 3; two raters are too few for an interval
        # over raters and prompts (a t-interval would say [-9.71, 15.71], off the 1-5 scale)
        assert text.count("3.00 (too few ratings) n=2, raters=2") == 4, text
