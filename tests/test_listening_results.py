"""Listening-test results over the real service: uvicorn on 127.0.0.1, the real Piper voice, a
real SQLite file, scripted raters over HTTP + WebSocket (``tests.support.rater``).

Each test here first reproduced a crash or a wrong number seen on ordinary data (a rater who
joins and leaves, a test nobody has rated, a glitch mark on a one-chunk take, a straight-liner
dropped from the "all raters" table) and now checks the tables a paper would use.
"""

from __future__ import annotations

import asyncio
import io
import zipfile

import httpx
import pandas as pd
import pytest

from tests.support.app_util import LISTENING_BACKENDS, TWO_PROMPTS, create_test, live_server, tmp_db
from tests.support.rater import RaterClient

PW = "results-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
ONE_CHUNK = (
    "piper?deterministic=1&profile=custom&rate=22050&channels=1&first_frames=1000"
    "&chunk_frames=1000&frame_hz=4"
)
"""A system whose whole take arrives as one chunk (no seam to map a glitch mark to)."""


@pytest.fixture(scope="module")
def live():
    import os

    from app.server import create_app

    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    os.environ["LISTENLAB_ADMIN_PASSWORD"] = PW
    try:
        app = create_app({**LISTENING_BACKENDS, "onechunk": ONE_CHUNK}, tmp_db(), mount_ui=False)
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
    with live_server(app) as lv:
        yield lv


def results(live, tid: str, **params) -> dict:
    r = httpx.get(live.url + f"ll/admin/tests/{tid}/results", headers=ADMIN, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def export(live, tid: str) -> dict[str, pd.DataFrame]:
    r = httpx.get(live.url + f"ll/admin/tests/{tid}/export.zip", headers=ADMIN, timeout=60)
    assert r.status_code == 200, r.text
    z = zipfile.ZipFile(io.BytesIO(r.content))
    out = {}
    for n in z.namelist():
        if n.endswith(".csv"):
            data = z.read(n)
            out[n] = pd.read_csv(io.BytesIO(data)) if data.strip() else pd.DataFrame()
        else:
            out[n] = z.read(n).decode()
    return out


async def rate_all(live, tid: str, scores, *, headphones: bool | None = True) -> str:
    """One rater through the whole test: headphone check (when asked), listen to every item
    in real time, vote ``scores(k)`` on the k-th item. Returns the rater id."""
    c = RaterClient(live.url, tid)
    await c.join()
    if headphones is not None:
        await c.headphone(correct=headphones)
    st = await c.status()
    k = 0
    while not st["finished"]:
        it = st["item"]
        await c.listen(it["assignment_id"], 0)
        r = await c.vote({"assignment_id": it["assignment_id"], "score": scores(k)})
        assert r.status_code == 200, r.text
        k += 1
        st = await c.status()
    await c.aclose()
    return st["rater_id"]


def rat_prompts(live, tid: str) -> set[str]:
    return set(live.state.store.answer_frame("mos_ratings", tid)["prompt_id"])


async def drop_out(live, tid: str) -> str:
    """A rater who joins (and consents) and leaves before the headphone check."""
    c = RaterClient(live.url, tid)
    await c.join()
    rid = (await c.status())["rater_id"]
    await c.aclose()
    return rid


def test_empty_test_has_results_and_export(live):
    tid = create_test(live, ADMIN, screening=False)
    res = results(live, tid)
    assert res["raters"] == []
    assert "mos" not in res  # no answers: no MOS table, and nothing crashes
    files = export(live, tid)
    assert "results/raters.csv" in files and "results/methods.csv" in files


def test_dropout_and_straight_liner_leave_results_working(live):
    tid = create_test(live, ADMIN, screening=False, items_per_rater=4)

    async def go():
        gone = await drop_out(live, tid)
        honest, flat = await asyncio.gather(
            rate_all(live, tid, lambda k: [2, 4, 3, 5][k]),
            rate_all(live, tid, lambda k: 3),
        )
        return gone, honest, flat

    gone, honest, flat = asyncio.run(go())
    res = results(live, tid)
    raters = {r["rater_id"]: r for r in res["raters"]}
    assert raters[gone]["finished"] is False and raters[gone]["answered"] == 0
    assert raters[gone]["excluded"] and "headphone check not done" in raters[gone]["reasons"]
    assert raters[honest]["finished"] is True and not raters[honest]["excluded"]
    assert raters[flat]["excluded"] and "variance 0.00" in raters[flat]["reasons"]
    # screened: only the honest rater's 4 ratings; all raters: the straight-liner's 4 too
    assert sum(r["n"] for r in res["mos"]) == 4
    assert sum(r["n"] for r in res["mos_all_raters"]) == 8
    assert {r["table"] for r in res["methods"]} >= {"mos", "mos_all_raters", "mos_pairwise"}
    every = results(live, tid, include_screened="true")
    assert sum(r["n"] for r in every["mos"]) == 8
    assert "screened ones included" in every["methods"][1]["title"]

    # the admin Results tab: summary with exclusions and methods, a plot on the whole scale,
    # only the MOS tables
    from app.listening.admin.results_tab import results_view
    from app.store.listening import TestStore
    from evaluation.listening.results import test_results

    v = results_view(test_results(TestStore(live.state.store).test_data(tid)))
    # the dropout never did the headphone screen; the straight-liner passed it: two kinds
    assert (
        "Raters: 3 joined, 2 finished; 2 excluded (1 headphone screen, 1 rating pattern)"
        in (v["summary"])
    )
    # each heading is its own Markdown block: never on the line of the list above it
    assert "\n\n**MOS (all raters)**\n\n- MOS" in v["summary"]
    assert list(v["raters"].columns) == ["crowd_id", "rater_id", "finished", "headphones"] + [
        "excluded",
        "reasons",
    ]
    assert f"- excluded {flat}: variance 0.00" in v["summary"]
    assert "Wilcoxon signed-rank" in v["summary"] and "MOS a vs b" in v["summary"]
    assert v["plot"].axes[0].get_xlim() == (1.0, 5.0)
    assert set(v["main"]["system_id"]) == {"a", "b"} and len(v["pairwise"]) == 1
    assert set(v["by_prompt"]["prompt_id"]) == set(rat_prompts(live, tid))

    files = export(live, tid)
    rat = files["raw/ratings.csv"]
    assert len(rat) == 8 and rat["system_id"].notna().all()
    assert set(rat["system_id"]) == {"a", "b"} and (rat["time_on_item_ms"] > 0).all()
    ex = files["results/raters.csv"].set_index("rater_id")
    assert set(ex.index) == {gone, honest, flat} and ex.loc[flat, "excluded"]
    methods = files["results/methods.csv"]
    assert "two-way cluster-robust" in " ".join(methods["method"])
    assert "raters and prompts are independent draws" in " ".join(methods["assumes"].fillna(""))

    # the global report and export screen by the same rule as the test's own page
    from evaluation.report import ReportOptions, compute_tables

    t = compute_tables(
        live.state.store,
        ReportOptions(n_boot=20),
        tests=TestStore(live.state.store).all_test_data(),
    )
    scr = t["screening"]
    mine = scr[scr["test_id"] == tid].set_index("rater_id")
    assert mine["excluded"].to_dict() == {gone: True, honest: False, flat: True}
    glob = t["mos"].set_index("system_id")
    mos = live.state.store.answer_frame("mos_ratings")
    kept = mos[
        (mos["role"] == "item") & ~mos["rater_id"].isin(set(scr.loc[scr["excluded"], "rater_id"]))
    ]
    assert glob["n"].sum() == len(kept)


def test_glitch_mark_on_a_one_chunk_take(live):
    tid = create_test(
        live,
        ADMIN,
        kind="glitch",
        systems=[{"name": "one", "backend": "onechunk"}],
        prompts=[TWO_PROMPTS[0]],
        items_per_rater=1,
        screening=False,
        headphone_check=False,
    )

    async def go():
        c = RaterClient(live.url, tid)
        await c.join()
        it = (await c.status())["item"]
        p = await c.listen(it["assignment_id"], 0)
        q = "SELECT take_id FROM assignments WHERE assignment_id=?"  # the page sees frames only
        tk = live.state.store.load_take(
            live.state.store.db.execute(q, [it["assignment_id"]]).fetchone()[0]
        )
        assert len(tk.chunks) == 1
        saved = await c.glitch(it["assignment_id"], 0, p.played_ms / 2)
        r = await c.vote({"assignment_id": it["assignment_id"]})
        await c.aclose()
        return saved, r

    saved, r = asyncio.run(go())
    assert saved["type"] == "listen_glitch_saved" and saved["boundary_index"] is None
    assert r.status_code == 200
    res = results(live, tid)
    assert res["glitch_marks"][0]["marks"] == 1 and res["glitch_marks"][0]["at_seam"] == 0
    assert "glitches_by_seam" not in res  # no seam, no seam table
    files = export(live, tid)
    assert len(files["raw/glitch_reports.csv"]) == 1


def test_results_say_why_a_table_is_empty():
    """Every rater excluded (a MUSHRA slip on few screens): the summary says so and what to
    tick, instead of an empty plot and no table."""
    from app.listening.admin.results_tab import empty_reason, results_view, summary_markdown

    raters = pd.DataFrame(
        {
            "rater_id": ["r1"],
            "crowd_id": [None],
            "answered": [6],
            "finished": [True],
            "headphones": ["6/6"],
            "excluded": [True],
            "reasons": ["hidden reference < 90 on 1/6 items"],
        }
    )
    tables = {"raters": raters, "mushra": pd.DataFrame(columns=["condition", "n"])}
    why = empty_reason(tables)
    assert "every rater who answered (1) was excluded" in why
    assert "Include screened raters" in why
    text = summary_markdown(tables)
    assert why in text and "1 BS.1534-3 post-screening" in text
    assert results_view(tables)["plot"] is None
    assert empty_reason({"raters": raters.assign(answered=0)}).startswith("No answers yet")
