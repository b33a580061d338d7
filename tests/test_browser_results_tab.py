"""The admin page's Results tab in headless Chromium (1280 x 800), after raters voted over the
real routes: each table's heading is a paragraph of its own (it used to run into the last line
of the list above it: "… n=2, raters=1 **MOS (all raters)**"), the rater table is not cut off
on the right, and exclusions are counted by kind. Measured on the page's DOM and layout; a
screenshot of the tab is saved beside the rater page's (``listenlab-layout`` in the temp
folder) for the docs."""

from __future__ import annotations

import asyncio
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from app.server import create_app
from tests.support.app_util import chromium, live_server, tmp_db
from tests.support.rater import RaterClient

pytestmark = pytest.mark.browser


def _folder(root: Path) -> Path:
    rng = np.random.default_rng(3)
    for s in ("natural", "sysa", "sysb"):
        (root / s).mkdir(parents=True)
        for p in ("p1", "p2", "p3"):
            sf.write(root / s / f"{p}.wav", rng.standard_normal(8000) * 0.1, 16000)
    return root


async def _rate(url: str, tid: str, scores: list[int]) -> None:
    c = RaterClient(url, tid, crowd_id=f"P-{'-'.join(map(str, scores))}")
    await c.join()
    st = await c.status()
    k = 0
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        await c.listen(aid, 0)
        r = await c.vote({"assignment_id": aid, "score": scores[k % len(scores)]})
        assert r.status_code == 200, r.text
        k += 1
        st = await c.status()
    await c.aclose()


def test_results_tab_headings_apart_and_rater_table_fits(tmp_path):
    os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin
    app = create_app({"piper": "piper?deterministic=1"}, tmp_db())
    with live_server(app) as live:
        r = httpx.post(
            live.url + "ll/admin/tests",
            json={
                "name": "results tab",
                "kind": "mos",
                "systems": [],
                "prompts": [],
                "stimuli": str(_folder(tmp_path / "stim")),
                "items_per_rater": 6,
                "screening": False,
                "headphone_check": False,
                "familiarise": False,
            },
            timeout=300,
        )
        assert r.status_code == 200, r.text
        tid = r.json()["test_id"]

        async def raters():
            await asyncio.gather(
                _rate(live.url, tid, [5, 4, 3]),
                _rate(live.url, tid, [4, 3, 2]),
                _rate(live.url, tid, [3, 3, 3]),  # one score throughout: screened out
                _rate(live.url, tid, [5, 3, 4]),
            )

        with ThreadPoolExecutor(1) as ex:  # playwright's sync API owns this thread's loop
            ex.submit(asyncio.run, raters()).result()

        with chromium(viewport={"width": 1280, "height": 800}) as browser:
            page = browser.new_page()
            page.goto(live.url + "admin/tests/")
            page.wait_for_selector("text=Generate the stimuli", timeout=60_000)
            page.get_by_role("tab", name="Results").click()
            page.locator("#lt-results-pick input").click()
            page.get_by_role("option", name=tid, exact=False).first.click()
            page.click("#lt-results-show")
            page.wait_for_selector("#lt-results-summary :text('MOS (all raters)')", timeout=60_000)
            page.wait_for_timeout(1000)  # the tables render after the summary

            heads = page.evaluate(
                """() => [...document.querySelectorAll('#lt-results-summary strong')].map(s => ({
                    text: s.textContent, para: s.parentElement.tagName,
                    alone: s.parentElement.textContent.trim() === s.textContent.trim(),
                    prev: (s.parentElement.previousElementSibling || {}).textContent || ''}))"""
            )
            titles = [h["text"] for h in heads]
            assert "MOS (all raters)" in titles, titles
            for h in heads:  # every heading a paragraph of its own, not the list's last line
                assert h["para"] == "P" and h["alone"], h
                assert h["text"] not in h["prev"], h
            summary = page.inner_text("#lt-results-summary")
            # counted by kind: a straight-liner is a rating pattern, not a failed screen
            assert "Raters: 4 joined, 4 finished; 1 excluded (1 rating pattern)" in summary
            assert "excluded P-3-3-3: variance 0.00 < 0.1" in summary
            assert "headphone" not in summary.split("Methods")[0], summary

            # every table (the rater table and the methods' long texts too): every column
            # visible, nothing scrolled or clipped past the right edge
            for tab in ("#lt-main", "#lt-pairwise", "#lt-by-prompt", "#lt-raters", "#lt-methods"):
                box = page.locator(tab).bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= 1280 + 0.5, (tab, box)
                over = page.evaluate(
                    """(sel) => [...document.querySelectorAll(sel + ' *')]
                        .filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0
                                     && getComputedStyle(e).overflowX !== 'visible')
                        .map(e => [e.tagName, e.className, e.scrollWidth, e.clientWidth])""",
                    tab,
                )
                assert over == [], (tab, over)
                if tab == "#lt-methods":  # a list (long texts), not a table
                    assert "Assumes:" in page.inner_text(tab)
                    continue
                cells = page.locator(f"{tab} table thead th")
                assert cells.count() >= 4, tab
                for i in range(cells.count()):
                    b = cells.nth(i).bounding_box()
                    assert b is not None and b["x"] + b["width"] <= 1280 + 0.5, (tab, i, b)
            shots = Path(tempfile.gettempdir()) / "listenlab-layout"
            shots.mkdir(exist_ok=True)
            page.screenshot(path=str(shots / "results-tab.png"), full_page=True)
