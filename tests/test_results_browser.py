"""The admin Results tab of a 13-system MOS test in headless Chromium, at desktop (1280 x 800)
and phone (390 x 844) width: the study is made with the CPU voice and 13 kinds of damage and
rated over the real routes (:mod:`tests.support.results_study`); one system is then renamed in
the store to ``<img src=x onerror=…>`` (names reach the page from a copied or older store).
The tab shows the forest plot, the 13 x 13 pairwise matrix (escaped, the hostile name as text,
no script run), the per-prompt and per-rater figures, a sortable per-system table and one
summary line for the 78 pairs; nothing runs off the page's right edge at either width."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.server import create_app
from tests.support.app_util import chromium, live_server, tmp_db
from tests.support.results_study import SYSTEMS, run_study, stimuli_folder

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__pwned=1">'


def rename(db: Path, old: str, new: str) -> None:
    """A system renamed in the store's rows (the app's designer never names one so)."""
    with sqlite3.connect(db) as c:
        c.execute("UPDATE takes SET system_id = ? WHERE system_id = ?", (new, old))
        c.execute("UPDATE stimuli SET system_id = ? WHERE system_id = ?", (new, old))


def open_results(page, url: str, tid: str) -> None:
    page.goto(url + "admin/tests/")
    page.wait_for_selector("text=Generate the stimuli", timeout=60_000)
    page.get_by_role("tab", name="Results").click()
    page.locator("#lt-results-pick input").click()
    page.get_by_role("option", name=tid, exact=False).first.click()
    page.click("#lt-results-show")
    page.wait_for_selector("#lt-matrix-table", timeout=120_000)
    page.wait_for_timeout(1000)  # the tables render after the HTML


def column(page, index: int) -> list:
    """The per-system table's column ``index`` (1-based) in the order shown on screen (the
    grid may keep rows out of order in the DOM); numbers as floats."""
    cells = page.evaluate(
        """(i) => [...document.querySelectorAll(
                `#lt-main [role=gridcell][aria-colindex="${i}"]`)]
            .map(e => [e.getBoundingClientRect().top, e.innerText.trim()])
            .sort((a, b) => a[0] - b[0]).map(x => x[1])""",
        index,
    )
    return [float(c) for c in cells] if index > 1 else cells


@pytest.fixture(scope="module")
def served(tmp_path_factory, piper_det):
    os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin
    folder = stimuli_folder(tmp_path_factory.mktemp("stim"), piper_det)
    db = tmp_db()
    app = create_app({"piper": "piper?deterministic=1"}, db)
    with live_server(app) as live:
        with ThreadPoolExecutor(1) as ex:  # playwright's sync API owns this thread's loop
            s = ex.submit(run_study, live.url, live.state.store, folder, 4).result()
        rename(db, "s07", HOSTILE)
        yield live, s


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_the_results_tab_shows_forest_matrix_and_views(served, width, height):
    live, s = served
    with chromium(viewport={"width": width, "height": height}) as browser:
        page = browser.new_page()
        open_results(page, live.url, s.test_id)
        assert page.evaluate("window.__pwned") is None  # the name was text, not markup

        # the matrix: 13 rows best first, each row header a system, the hostile one as text
        heads = page.eval_on_selector_all(
            "#lt-matrix-table tbody th", "els => els.map(e => e.textContent)"
        )
        assert len(heads) == len(SYSTEMS) and HOSTILE in heads
        cells = page.locator("#lt-matrix-table tbody td")
        assert cells.count() == 13 * 13
        from app.listening.admin.results_html import NO_TEST  # lazily: the package is Gradio's

        tips = page.eval_on_selector_all(
            "#lt-matrix-table tbody tr:first-child td[title]", "els => els.map(e => e.title)"
        )
        assert len(tips) == 12 and all(t.startswith(f"{heads[0]} vs ") for t in tips), tips
        # each pair's Holm p, or why it has none (every rater gave the two the same mean: a
        # random study can draw that for a pair, so which pairs have a p is not fixed)
        assert all(("Holm p = " in t) != (NO_TEST in t) for t in tips), tips
        assert any("Holm p = " in t for t in tips), tips
        assert page.locator("#lt-matrix-table img").count() == 0

        summary = page.inner_text("#lt-results-summary")
        assert "of 78 pairs differ significantly" in summary
        assert f"MOS {HOSTILE}:" in summary  # the name as its characters, in every list
        assert page.locator("#lt-results-summary img, #lt-figures img[onerror]").count() == 0
        assert "MOS s00 vs" not in summary  # no list of 78 lines

        # the forest plot and the per-prompt and per-rater figures
        assert page.locator("#lt-forest img, #lt-forest canvas, #lt-forest svg").count() >= 1
        for fig in ("by_prompt", "by_rater"):
            img = page.locator(f"#lt-fig-{fig} img")
            assert img.count() == 1
            box = img.bounding_box()
            assert box["width"] > 100 and box["x"] + box["width"] <= width + 0.5, (fig, box)
        assert page.locator("#lt-by-rater table thead th").count() >= 5

        # the per-system table sorts by any column (Gradio's header menu): ascending by mean
        main = page.locator("#lt-main")
        main.scroll_into_view_if_needed()
        means = column(page, 5)
        assert means == sorted(means, reverse=True), means  # best first
        assert column(page, 1)[0] == heads[0]  # the matrix's first row is the best system
        main.locator("th[title=mean]").click()  # selects the header: its menu button shows
        main.locator("th[title=mean] button[aria-label='Open cell menu']").click()
        page.get_by_text("Sort ascending", exact=True).first.click()
        page.wait_for_timeout(500)
        assert column(page, 5) == sorted(means), column(page, 5)  # now worst first

        # nothing past the right edge: wide content scrolls inside its own box
        doc = page.evaluate("document.documentElement.scrollWidth")
        assert doc <= width + 1, doc
        box = page.locator(".ll-matrix").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, box
        assert page.evaluate("window.__pwned") is None
        shots = Path(tempfile.gettempdir()) / "listenlab-layout"
        shots.mkdir(exist_ok=True)
        page.screenshot(path=str(shots / f"results-tab-13-{width}.png"), full_page=True)
