"""The designer's upload box in Chromium: a ~38 MB study .zip sent in 16 MiB chunks with a
progress bar, imported on the server, and used by Generate; a .zip with a text file among the
WAVs is refused with the file named in an error that stays on screen, and nothing is left."""

from __future__ import annotations

import os
import zipfile

import pytest

from app.server import create_app
from tests.support.app_util import chromium, live_server, tmp_db
from tests.support.upload_util import make_set

pytestmark = pytest.mark.browser


def zipped(folder, out):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f"study/{f.relative_to(folder)}")
    return out


def open_designer(browser, live):
    page = browser.new_page()
    page.goto(live.url + "admin/tests/")
    page.wait_for_selector("text=Generate the stimuli", timeout=60_000)
    page.wait_for_selector("#lt-stimuli-zip input[type=file]", timeout=60_000)
    return page


def test_upload_box_shows_progress_and_generate_uses_the_set(tmp_path):
    make_set(tmp_path / "s", ["natural", "modelx"], 4, seconds=50.0)
    up = zipped(tmp_path / "s", tmp_path / "study.zip")
    assert up.stat().st_size > 36e6  # three chunks
    os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin
    app = create_app({"piper": "piper?deterministic=1"}, tmp_db())
    with live_server(app) as live, chromium() as browser:
        page = open_designer(browser, live)
        page.evaluate(
            """() => { window.llProgress = [];
            const box = document.querySelector('#lt-stimuli-zip');
            new MutationObserver(() => {
              const el = box.querySelector('[data-progress]') || box.closest('[data-progress]');
              const v = (el || box).dataset.progress; if (v) window.llProgress.push(+v);
            }).observe(box.parentElement, {attributes: true, subtree: true}); }"""
        )
        page.locator("#lt-stimuli-zip input[type=file]").set_input_files(str(up))
        page.locator("#lt-stimuli-zip :text('Imported study.zip')").wait_for(timeout=120_000)
        status = page.locator("#lt-stimuli-zip .ll-up-status").inner_text()
        assert "8 files, 2 systems (modelx, natural) × 4 prompts" in status
        seen = page.evaluate("window.llProgress")
        assert seen[-1] == 100 and any(0 < p < 100 for p in seen), seen
        assert page.locator("#lt-stimuli-zip .ll-up-bar").evaluate("b => b.value") == 100
        path = page.locator("#lt-stimuli-dir textarea, #lt-stimuli-dir input").first.input_value()
        sets = list((live.state.store.root / "stimuli").iterdir())
        assert len(sets) == 1 and path == str(sets[0])
        assert not any((live.state.store.root / "uploads").iterdir())
        # only the imported systems: drop the two default rows, one answer at a time (a second
        # click before the first answer sends the same table and drops the same row)
        table = "(t) => !document.querySelector('#lt-systems').innerText.includes(t)"
        assert "piper-qwen-wire" in page.inner_text("#lt-systems")
        page.click("#lt-drop-system")
        page.wait_for_function(table, arg="piper-qwen-wire", timeout=60_000)
        page.click("#lt-drop-system")
        page.wait_for_function(table, arg="piper", timeout=60_000)
        page.get_by_label("Headphone check").uncheck()
        page.get_by_label("Items per rater").fill("2")
        page.click("#lt-generate")
        page.wait_for_selector("#lt-made :text('is open')", timeout=300_000)
        (tid,) = live.state.store.db.execute("SELECT test_id FROM tests").fetchone()
        rows = live.state.store.db.execute(
            "SELECT DISTINCT system_id FROM stimuli WHERE test_id=? AND kind='item'", [tid]
        ).fetchall()
        assert sorted(r[0] for r in rows) == ["modelx", "natural"]


def test_a_bad_file_is_named_in_an_error_that_stays(tmp_path):
    make_set(tmp_path / "s", ["a", "b"], 5, seconds=1.0)
    (tmp_path / "s" / "b" / "p003.wav").write_text("not audio at all\n" * 100)
    up = zipped(tmp_path / "s", tmp_path / "broken.zip")
    os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
    app = create_app({"piper": "piper?deterministic=1"}, tmp_db())
    with live_server(app) as live, chromium() as browser:
        page = open_designer(browser, live)
        page.locator("#lt-stimuli-zip input[type=file]").set_input_files(str(up))
        err = page.locator("#lt-stimuli-zip .ll-up-errors li")
        err.first.wait_for(timeout=120_000)
        assert "broken.zip" in err.first.inner_text()
        assert "b/p003.wav" in err.first.inner_text()
        page.wait_for_timeout(6000)  # a toast would be gone by now
        assert err.count() == 1 and err.first.is_visible()
        assert "not imported" in page.locator("#lt-stimuli-zip .ll-up-status").inner_text()
        assert (
            page.locator("#lt-stimuli-dir textarea, #lt-stimuli-dir input").first.input_value()
            == ""
        )
        root = live.state.store.root
        assert not (root / "stimuli").exists() or not any((root / "stimuli").iterdir())
        assert not any((root / "uploads").iterdir())
        assert live.state.store.db.execute("SELECT count(*) FROM tests").fetchone()[0] == 0
