"""The SMOS kind end to end: designed (the registry's kind, the reference system, the hidden
reference check), created from the command line, rated over the real HTTP and WebSocket routes
(both clips must be played), analysed (per system with the MOS kind's interval, pairs with Holm,
the reference not rated against itself) and exported; then in Chromium at phone and desktop
width. Real parts: the Piper voice, a real server on 127.0.0.1, a real SQLite file.
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
from evaluation.listening.design import Design, plan
from evaluation.listening.kinds import kind_of
from evaluation.listening.kinds.base import Familiar
from evaluation.listening.kinds.smos import LABELS, QUESTION
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


JOE = "joe=piper?deterministic=1"
FAST = "fast=piper?deterministic=1&speed=1.25"


def test_the_design_puts_the_reference_first_and_never_rates_it_against_itself():
    d = Design("smos", ("natural", "a", "b"), ("p1", "p2", "p3", "p4"), 4, reference="natural")
    assert d.units == 2  # the reference is not a cell of the cycle
    items = plan(d, 0)
    rated = [it for it in items if it.role == "item"]
    assert len(rated) == 4 and len(items) == 5
    for it in rated:
        assert [s.role for s in it.slots] == ["reference", "item"]
        assert it.slots[0].system == "natural" and it.slots[1].system in {"a", "b"}
    assert sorted(it.slots[1].system for it in rated) == ["a", "a", "b", "b"]
    (check,) = [it for it in items if it.role != "item"]
    assert (check.role, check.expected, check.meta) == ("gold", 5.0, {"check": "hidden_reference"})
    assert [s.system for s in check.slots] == ["natural", "natural"]
    assert [it for it in plan(Design("smos", d.systems, d.prompts, 4, "natural", screening=False), 0) if it.role != "item"] == []  # fmt: skip
    with pytest.raises(ValueError, match="an SMOS test needs a reference voice"):
        Design("smos", ("a", "b"), ("p",), 1).validate()
    with pytest.raises(ValueError, match="at least two systems"):
        Design("smos", ("a",), ("p",), 1, reference="a").validate()
    k = kind_of("smos")
    assert (
        k.scale("")["question"] == QUESTION == "How similar is this voice to the reference voice?"
    )
    assert [v for v, _ in k.scale("")["labels"]] == [5, 4, 3, 2, 1]
    assert k.labels(2) == ["reference voice", "voice to rate"]
    # familiarisation: the reference voice, then a rated system's take (in turn per rater)
    f = Familiar(take=lambda kind, system, prompt: f"{kind}:{system}:{prompt}", seq=1, natural=None)
    assert k.familiar(d, f) == [
        ("The reference voice", "item:natural:p1"),
        ("A voice you will compare with it", "item:b:p1"),
    ]


def test_create_from_the_command_line_with_a_named_reference(tmp_path):
    db = tmp_path / "lab.db"
    base = ["test", "create", "--db", str(db), "--type", "smos", "--system", JOE]
    base += ["--system", FAST, "--harvard", "2", "--items-per-rater", "2", "--no-headphone-check"]
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        refused = main(base)
    assert refused != 0 and "an SMOS test needs a reference voice" in err.getvalue()
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main([*base, "--reference", "joe", "--json"])
    assert code == 0, err.getvalue()
    made = json.loads(out.getvalue())
    from app.store import Store

    with Store.open(db, read_only=True) as store:
        row = store.db.execute("SELECT kind, config FROM tests").fetchone()
    assert row[0] == "smos"
    design = json.loads(row[1])["design"]
    assert design["reference"] == "joe" and design["systems"] == ["joe", "fast"]
    assert made["design"]["plan"][0]["items_per_rater"] == 2


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


def smos_test(live, **kw) -> str:
    spec = dict(
        name="similar",
        kind="smos",
        systems=[{"name": "joe", "backend": "piper"}, {"name": "qwen", "backend": "qwen"}],
        reference="joe",
        prompts=list(TWO_PROMPTS),
        items_per_rater=2,
        headphone_check=False,
        screening=True,
        completion_code="SIM",
    )
    return create_test(live, **{**spec, **kw})


async def rate(live, tid: str, scores: dict[str, int]) -> list[int]:
    """One rater: each screen's vote refused before any play, after the voice alone, and with
    a bad score; then the score for its role (``item`` / ``gold``: the hidden reference)."""
    r = RaterClient(live.url, tid, crowd_id="smos-rater")
    codes = []
    try:
        await r.join()
        st = await r.status()
        while st["item"] is not None:
            it = st["item"]
            aid = it["assignment_id"]
            assert it["kind"] == "smos" and it["slots"] == 2
            assert it["labels"] == ["reference voice", "voice to rate"]
            codes.append((await r.vote({"assignment_id": aid, "score": 3})).status_code)
            await r.listen(aid, 1)
            early = await r.vote({"assignment_id": aid, "score": 3})
            codes.append(early.status_code)
            assert "the reference voice" in early.json()["detail"]
            await r.listen(aid, 0)
            bad = await r.vote({"assignment_id": aid, "score": 6})
            assert bad.status_code == 400 and "1..5" in bad.json()["detail"]
            row = live.state.store.db.execute(
                "SELECT role FROM assignments WHERE assignment_id = ?", [aid]
            ).fetchone()
            ok = await r.vote({"assignment_id": aid, "score": scores[row[0]]})
            codes.append(ok.status_code)
            st = await r.status()
        assert st["completion_code"] == "SIM"
    finally:
        await r.aclose()
    return codes


def test_rated_over_the_real_routes_analysed_and_exported(live):
    tid = smos_test(live)
    codes = asyncio.run(rate(live, tid, {"item": 4, "gold": 5}))
    assert codes == [409, 409, 200] * 3  # two screens and the hidden reference
    db = live.state.store.db
    rows = db.execute(
        "SELECT role, score, take_id, reference_take_id, played_ms, reference_played_ms "
        "FROM smos_ratings WHERE test_id = ? ORDER BY created_at",
        [tid],
    ).fetchall()
    assert sorted(r[0] for r in rows) == ["gold", "item", "item"]
    for role, _score, take, ref, played, ref_played in rows:
        assert ref and played > 0 and ref_played > 0
        assert (take == ref) == (role == "gold")  # the hidden reference is the same clip
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json()
    (main_row,) = res["smos"]  # qwen only: the reference is not rated against itself
    assert (main_row["system_id"], main_row["n"], main_row["mean"]) == ("qwen", 2, 4.0)
    (hidden,) = res["smos_hidden_reference"]
    assert (hidden["system_id"], hidden["n"], hidden["mean"]) == ("joe", 1, 5.0)
    (rater,) = res["raters"]
    assert rater["hidden_ref_failed"] == 0 and rater["excluded"] is False
    assert {"smos", "smos_pairwise", "smos_hidden_reference"} <= {
        m["table"] for m in res["methods"]
    }
    view = results_view({k: pd.DataFrame(v) for k, v in res.items() if isinstance(v, list)})
    assert [t.get_text() for t in view["plot"].axes[0].get_yticklabels()] == ["qwen"]
    assert "- SMOS qwen: 4.00" in view["summary"] and "- SMOS joe: 5.00" in view["summary"]
    z = zipfile.ZipFile(io.BytesIO(httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip").content))
    head = z.read("raw/smos_ratings.csv").decode().splitlines()[0].split(",")
    assert set(head) <= set(columns()["raw/smos_ratings.csv"]) and "reference_take_id" in head
    study = json.loads(z.read("study.json"))
    assert study["texts"]["scale"]["question"] == QUESTION
    err, out = io.StringIO(), io.StringIO()  # `listenlab test results` prints the same
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["test", "results", tid, "--db", str(live.state.store.path)])
    assert code == 0, err.getvalue()
    (main_block,) = [b for b in out.getvalue().split("\n== ") if b.startswith("smos ==")]
    assert [ln.split()[:4] for ln in main_block.splitlines()[2:]] == [["qwen", "2", "1", "2"]]
    rule = study["screening"]["smos_rules"]["hidden_reference"]
    assert rule.endswith("expected 5; fails below 4")


def test_a_rater_who_rates_the_hidden_reference_low_is_excluded(live):
    tid = smos_test(live)
    asyncio.run(rate(live, tid, {"item": 4, "gold": 2}))
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json()
    (rater,) = res["raters"]
    assert rater["hidden_ref_failed"] == 1 and rater["excluded"] is True
    assert "gold failed" in rater["reasons"]
    assert res["smos"] == []  # no rater kept
    assert [r["n"] for r in res["smos_all_raters"]] == [2]


PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.mark.browser
@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_the_smos_page_in_chromium(live, size):
    kw = PHONE if size == "phone" else DESKTOP
    vp = kw["viewport"]
    tid = smos_test(live, name=f"smos {size}", screening=False)
    with chromium(["--autoplay-policy=no-user-gesture-required"], **kw) as ctx:
        page = ctx.new_page()
        page.goto(f"{live.url}listen/{tid}")
        page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
        page.click("#lt-agree")
        page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
        for n in range(2):
            assert page.inner_text("#lt-question") == QUESTION
            assert page.locator(".lt-play").all_inner_texts() == [
                "Play reference voice",
                "Play voice to rate",
            ]
            words = [t.split("\n")[-1] for t in page.locator(".lt-choice").all_inner_texts()]
            assert words == list(LABELS.values())
            for b in page.locator(".lt-choice").all():  # every answer on the screen
                box = b.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= vp["width"] + 0.5
            page.click(".lt-choice[data-value='2']")
            # the voice alone is not enough: the reference must be played too
            page.click(".lt-play[data-slot='1']")
            page.wait_for_function(
                "(window.listenTest.played[window.listenTest.status.item.assignment_id + ':1']"
                " || 0) >= window.listenTest.status.item.need_ms[1]",
                timeout=60_000,
            )
            assert page.is_disabled("#lt-submit")
            play_all_and_wait(page, 2)
            page.wait_for_selector("#lt-submit:not([disabled])", timeout=30_000)
            page.click("#lt-submit")
            if n == 0:
                page.wait_for_function("window.listenTest.status.answered === 1", timeout=30_000)
        page.wait_for_selector("#lt-done:not([hidden])", timeout=30_000)
        assert page.inner_text("#lt-code") == "SIM"
    rows = live.state.store.db.execute(
        "SELECT score, reference_played_ms FROM smos_ratings WHERE test_id = ?", [tid]
    ).fetchall()
    assert [s for s, _ in rows] == [2.0, 2.0] and all(p > 0 for _, p in rows)


def test_the_statistics_page_states_the_smos_and_p835_cells():
    """The SMOS and P.835 cells of the simulation benchmark (rater and prompt effects, bad
    raters, the kinds' screening and interval) are in the JSON of the repo, complete, every
    cell at coverage >= 0.93, and printed on the statistics page as the benchmark prints them."""
    from pathlib import Path

    from benchmarks.listening_validity import KINDS_STATS, kinds_grid_markdown
    from evaluation import inference

    root = Path(__file__).resolve().parents[1]
    res = json.loads((root / "benchmarks/results/listening_validity.json").read_text())
    assert res["kinds_grid_state"]["method"] == inference.INTERVAL_METHOD
    g = res["kinds_grid"]
    assert (
        g["complete"] and len(g["cells"]) == 27 and g["bad_raters"] == {"random": 2, "straight": 2}
    )
    for key, cell in g["cells"].items():
        assert set(cell) == set(KINDS_STATS), key
        assert all(v["coverage"] >= 0.93 for v in cell.values()), key
    page = (root / "docs" / "statistics.md").read_text(encoding="utf-8")
    assert kinds_grid_markdown(res) in page
    assert f"{g['sims_per_cell']} simulated tests per cell" in page
    assert res["checks"]["SMOS and P.835 cells: coverage >= 0.93 in every cell"] is True
