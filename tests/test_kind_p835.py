"""The P.835 kind end to end: three ratings per clip in P.835's order (SIG, BAK, OVRL) with its
own words and anchors, stored in one row of the kind's table, screened on OVRL with the MOS
kind's check items, analysed per scale (intervals, pairs with Holm within each scale) and
exported; created from the command line; rated in Chromium at phone and desktop width. Real
parts: the Piper voice, a real server on 127.0.0.1, a real SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import zipfile

import httpx
import pandas as pd
import pytest

from app.cli import main
from app.listening.columns import columns
from evaluation.listening.kinds import kind_of
from evaluation.listening.kinds.p835 import ORDER, SCALES
from tests.support.app_util import (
    TWO_PROMPTS,
    chromium,
    create_test,
    listening_app,
    live_server,
    play_all_and_wait,
)
from tests.support.rater import RaterClient


def results_view(tables):
    """The Results tab's view (imported when called: the admin page pulls in Gradio, which
    collecting the suite must not)."""
    from app.listening.admin.results_tab import results_view as view

    return view(tables)


def test_the_three_scales_in_p835s_order_and_words():
    k = kind_of("p835")
    got = k.scale("")["scales"]
    assert [s["name"] for s in got] == ["SIG", "BAK", "OVRL"] and ORDER == ("sig", "bak", "ovrl")
    assert got[0]["question"].startswith("Attending ONLY to the SPEECH SIGNAL")
    assert got[1]["question"].startswith("Attending ONLY to the BACKGROUND")
    assert "everyday speech communication" in got[2]["question"]
    assert [w for _, w in got[0]["labels"]][::4] == ["Not distorted", "Very distorted"]
    assert [w for _, w in got[1]["labels"]] == [
        "Not noticeable",
        "Slightly noticeable",
        "Noticeable but not intrusive",
        "Somewhat intrusive",
        "Very intrusive",
    ]
    assert [w for _, w in got[2]["labels"]] == ["Excellent", "Good", "Fair", "Poor", "Bad"]
    assert all([v for v, _ in s["labels"]] == [5, 4, 3, 2, 1] for s in SCALES)


def test_create_from_the_command_line(tmp_path):
    db = tmp_path / "lab.db"
    argv = ["test", "create", "--db", str(db), "--type", "p835", "--system", "joe=piper"]
    argv += ["--harvard", "2", "--items-per-rater", "1", "--no-headphone-check", "--json"]
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert main(argv) == 0, err.getvalue()
    from app.store import Store

    with Store.open(db, read_only=True) as store:
        kind, cfg = store.db.execute("SELECT kind, config FROM tests").fetchone()
        stim = sorted(r[0] for r in store.db.execute("SELECT kind FROM stimuli").fetchall())
    assert kind == "p835" and json.loads(cfg)["design"]["systems"] == ["joe"]
    assert stim == ["anchor", "anchor", "item", "item", "trap", "trap"]  # MOS's check clips


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


def p835_test(live, **kw) -> str:
    spec = dict(
        name="three scales",
        kind="p835",
        systems=[{"name": "joe", "backend": "piper"}, {"name": "qwen", "backend": "qwen"}],
        prompts=list(TWO_PROMPTS),
        items_per_rater=2,
        headphone_check=False,
        screening=False,
        completion_code="P835",
    )
    return create_test(live, **{**spec, **kw})


async def rate(live, tid: str, crowd: str, answer) -> list[int]:
    """One rater: each clip's vote refused unplayed, refused with a scale missing or out of
    range, then ``answer(system)`` (``{sig, bak, ovrl}``)."""
    r = RaterClient(live.url, tid, crowd_id=crowd)
    codes = []
    try:
        await r.join()
        st = await r.status()
        while st["item"] is not None:
            aid = st["item"]["assignment_id"]
            good = answer(live, aid)
            codes.append((await r.vote({"assignment_id": aid, **good})).status_code)
            await r.listen(aid, 0)
            missing = await r.vote({"assignment_id": aid, "sig": 3, "ovrl": 3})
            assert missing.status_code == 400
            assert missing.json()["detail"] == "bak (BAK, background) must be an integer 1..5"
            off = await r.vote({"assignment_id": aid, **good, "ovrl": 0})
            assert off.status_code == 400 and "ovrl (OVRL" in off.json()["detail"]
            codes.append((await r.vote({"assignment_id": aid, **good})).status_code)
            st = await r.status()
    finally:
        await r.aclose()
    return codes


def by_system(live, aid: str) -> dict[str, int]:
    """joe: SIG 5, BAK 4, OVRL 4; qwen: SIG 3, BAK 4, OVRL 2 (check items: OVRL as asked)."""
    role, expected, take = live.state.store.db.execute(
        "SELECT role, expected, take_id FROM assignments WHERE assignment_id = ?", [aid]
    ).fetchone()
    if role != "item":
        return {"sig": 1, "bak": 3, "ovrl": int(expected)}
    system = live.state.store.db.execute(
        "SELECT system_id FROM takes WHERE take_id = ?", [take]
    ).fetchone()[0]
    return {"sig": 5, "bak": 4, "ovrl": 4} if system == "joe" else {"sig": 3, "bak": 4, "ovrl": 2}


def test_rated_over_the_real_routes_analysed_per_scale_and_exported(live):
    tid = p835_test(live)
    for i in range(2):  # two raters: each hears both systems, one per prompt
        assert asyncio.run(rate(live, tid, f"p835-{i}", by_system)) == [409, 200] * 2
    rows = live.state.store.db.execute(
        "SELECT sig, bak, ovrl, played_ms FROM p835_ratings WHERE test_id = ?", [tid]
    ).fetchall()
    assert len(rows) == 4 and all(p > 0 for *_, p in rows)
    assert sorted((s, b, o) for s, b, o, _ in rows) == [(3, 4, 2)] * 2 + [(5, 4, 4)] * 2
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json()
    got = {(r["scale"], r["system_id"]): (r["n"], r["mean"]) for r in res["p835"]}
    assert got == {
        ("SIG", "joe"): (2, 5.0),
        ("SIG", "qwen"): (2, 3.0),
        ("BAK", "joe"): (2, 4.0),
        ("BAK", "qwen"): (2, 4.0),
        ("OVRL", "joe"): (2, 4.0),
        ("OVRL", "qwen"): (2, 2.0),
    }
    assert [r["scale"] for r in res["p835"]] == ["SIG", "SIG", "BAK", "BAK", "OVRL", "OVRL"]
    pairs = {r["scale"]: r for r in res["p835_pairwise"]}
    assert set(pairs) == {"SIG", "BAK", "OVRL"}
    assert pairs["SIG"]["diff_y_minus_x"] == -2.0 and pairs["BAK"]["diff_y_minus_x"] == 0.0
    assert pairs["OVRL"]["raters"] == 2
    # the Results tab: the plot has a point per scale and system, the summary a line each
    view = results_view({k: pd.DataFrame(v) for k, v in res.items() if isinstance(v, list)})
    labels = {t.get_text() for t in view["plot"].axes[0].get_yticklabels()}
    assert labels == {f"{sc} {s}" for sc in ("SIG", "BAK", "OVRL") for s in ("joe", "qwen")}
    assert (
        "- OVRL qwen: 2.00" in view["summary"]
        and "- SIG joe vs qwen: qwen - joe = -2.00" in view["summary"]
    )
    assert view["main"] is not None and list(view["pairwise"]["scale"]) == ["SIG", "BAK", "OVRL"]
    z = zipfile.ZipFile(io.BytesIO(httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip").content))
    head = z.read("raw/p835_ratings.csv").decode().splitlines()[0].split(",")
    assert {"sig", "bak", "ovrl"} <= set(head) <= set(columns()["raw/p835_ratings.csv"])
    assert set(z.read("results/p835.csv").decode().splitlines()[0].split(",")) <= set(
        columns()["results/p835.csv"]
    )
    err, out = io.StringIO(), io.StringIO()  # `listenlab test results` prints the same
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["test", "results", tid, "--db", str(live.state.store.path)])
    assert code == 0, err.getvalue()
    printed = out.getvalue().split("\n== ")
    (main_block,) = [b for b in printed if b.startswith("p835 ==")]
    assert [ln.split()[:3] for ln in main_block.splitlines()[2:]] == [
        ["SIG", "joe", "2"],
        ["SIG", "qwen", "2"],
        ["BAK", "joe", "2"],
        ["BAK", "qwen", "2"],
        ["OVRL", "joe", "2"],
        ["OVRL", "qwen", "2"],
    ]
    texts = json.loads(z.read("study.json"))["texts"]["scale"]
    assert [s["name"] for s in texts["scales"]] == ["SIG", "BAK", "OVRL"]


def test_screening_judges_the_check_items_on_ovrl(live):
    tid = p835_test(live, screening=True)

    def careless(live, aid):
        got = by_system(live, aid)
        return {**got, "ovrl": 5} if got["sig"] == 1 else got  # anchor and trap: OVRL 5

    asyncio.run(rate(live, tid, "careless", careless))
    asyncio.run(rate(live, tid, "careful", by_system))
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json()
    raters = {r["crowd_id"]: r for r in res["raters"]}
    assert raters["careless"]["excluded"] is True and raters["careless"]["p835_trap_failed"] == 1
    assert raters["careless"]["p835_check_failed"] == 1
    assert raters["careful"]["excluded"] is False and raters["careful"]["p835_trap_failed"] == 0
    assert {r["n"] for r in res["p835"]} == {1}  # the careful rater's two clips only


PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.mark.browser
@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_the_p835_page_in_chromium(live, size):
    kw = PHONE if size == "phone" else DESKTOP
    vp = kw["viewport"]
    tid = p835_test(live, name=f"p835 {size}")
    with chromium(["--autoplay-policy=no-user-gesture-required"], **kw) as ctx:
        page = ctx.new_page()
        page.goto(f"{live.url}listen/{tid}")
        page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
        page.click("#lt-agree")
        page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
        for n in range(2):
            legends = page.locator(".lt-p835-scale legend b").all_inner_texts()
            assert legends == ["1. SIG (Speech signal)", "2. BAK (Background)", "3. OVRL (Overall quality)"]  # fmt: skip
            # the standard order: BAK and OVRL are closed until the scale before is answered
            assert page.is_disabled(".lt-p835-scale[data-scale='bak'] button >> nth=0")
            assert page.is_disabled(".lt-p835-scale[data-scale='ovrl'] button >> nth=0")
            for b in page.locator(".lt-choice").all():
                box = b.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= vp["width"] + 0.5
            page.click(".lt-choice[data-scale='sig'][data-value='4']")
            assert page.is_enabled(".lt-choice[data-scale='bak'][data-value='1']")
            assert page.is_disabled(".lt-choice[data-scale='ovrl'][data-value='1']")
            page.click(".lt-choice[data-scale='bak'][data-value='5']")
            play_all_and_wait(page, 1)
            assert page.is_disabled("#lt-submit")  # OVRL not answered yet
            page.click(".lt-choice[data-scale='ovrl'][data-value='3']")
            page.wait_for_selector("#lt-submit:not([disabled])", timeout=30_000)
            page.click("#lt-submit")
            if n == 0:
                page.wait_for_function("window.listenTest.status.answered === 1", timeout=30_000)
        page.wait_for_selector("#lt-done:not([hidden])", timeout=30_000)
        assert page.inner_text("#lt-code") == "P835"
    rows = live.state.store.db.execute(
        "SELECT sig, bak, ovrl FROM p835_ratings WHERE test_id = ?", [tid]
    ).fetchall()
    assert rows == [(4.0, 5.0, 3.0)] * 2
