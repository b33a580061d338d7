"""Listening tests over the real routes: uvicorn on 127.0.0.1, the real Piper voice, a real
SQLite file, scripted raters over HTTP + WebSocket (``tests.support.rater``).

Checks the server's rules, not the page's: listen-gating, one vote per item (re-sends, two
tabs), rater tokens, admin-only results, bounded input, A/B sign correction, MUSHRA
post-screening and the *as streamed* replay of a recorded stall.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from app.web.inputs import JSON_BODY_BYTES
from tests.support.app_util import create_one_item_test, create_test, listening_app, live_server
from tests.support.rater import RaterClient

PW = "s3cret-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
STALL_PROMPT = "A large size in stockings is hard to sell, and the stall is in the middle."


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


def make_test(live, **spec) -> str:
    return create_test(live, ADMIN, **spec)


def one_item_test(live, system: dict, prompt: str, **spec) -> str:
    return create_one_item_test(live, system, prompt, ADMIN, **spec)


def assignment_of(store, test_id: str, st: dict):
    """The stored assignment (roles, systems, expected answer) of the status's current item:
    what the server knows and the page does not."""
    aid = st["item"]["assignment_id"]
    return next(x for x in store.assignments(test_id, st["rater_id"]) if x.assignment_id == aid)


async def first_item(live, test_id: str) -> tuple[RaterClient, dict]:
    """A new rater of ``test_id`` (joined, consented) and its first item."""
    c = RaterClient(live.url, test_id)
    await c.join()
    return c, (await c.status())["item"]


@pytest.fixture(scope="module")
def mos_test(live):
    return make_test(live, screening=False, headphone_check=False)


def run(coro):
    return asyncio.run(coro)


async def together(*raters):
    """Scripted raters at the same time (each waits out its clips' real time)."""
    return await asyncio.gather(*raters)


def test_vote_before_listening_is_refused_by_the_server(live):
    # sent whole, so the server's clock (not a recorded stream that a busy machine made almost
    # as slow as real time) is what caps the claim below
    tid = one_item_test(
        live,
        {"name": "a", "backend": "piper", "condition": "whole"},
        "The birch canoe slid on the smooth planks.",
    )

    async def go():
        c, it = await first_item(live, tid)
        r = await c.vote({"assignment_id": it["assignment_id"], "score": 4})
        assert r.status_code == 409 and "listen first" in r.json()["detail"]
        # a page that claims it played the clip without being sent it gets nothing
        ev = await c.play_event(it["assignment_id"], 0, 99_000)
        assert ev["type"] == "listen_error" and "no stream" in ev["message"]
        # streamed but not waited for: the claim is capped by the server's clock
        p = await c.listen(it["assignment_id"], 0, realtime=False, report=False)
        ev = await c.play_event(it["assignment_id"], 0, p.played_ms)
        assert ev["played_ms"] < p.played_ms * 0.95
        r = await c.vote({"assignment_id": it["assignment_id"], "score": 4})
        assert r.status_code == 409
        await c.listen(it["assignment_id"], 0)
        r = await c.vote({"assignment_id": it["assignment_id"], "score": 4})
        assert r.status_code == 200 and r.json()["stored"] and r.json()["answered"] == 1
        await c.aclose()
        return c

    c = run(go())
    mos = live.state.store.answer_frame("mos_ratings", tid)
    assert len(mos) == 1 and mos["score"].tolist() == [4.0] and c.token not in str(mos)


def test_double_submit_and_two_tabs_count_once(live, mos_test):
    async def go():
        c, it = await first_item(live, mos_test)
        await c.listen(it["assignment_id"], 0)
        body = {"answer_id": "fixed-answer-id-1", "assignment_id": it["assignment_id"], "score": 2}
        r1, r2 = await asyncio.gather(c.post("vote", body), c.post("vote", body))
        assert sorted([r1.json()["stored"], r2.json()["stored"]]) == [False, True]
        # a second tab of the same rater (same token, its own answer id) cannot add a vote
        tab2 = RaterClient(live.url, mos_test)
        tab2.token = c.token
        r3 = await tab2.vote({"assignment_id": it["assignment_id"], "score": 5})
        assert r3.status_code == 409 and "already answered" in r3.json()["detail"]
        # both tabs racing on the next item with different answers: exactly one is stored
        it2 = (await c.status())["item"]
        await c.listen(it2["assignment_id"], 0)
        ra, rb = await asyncio.gather(
            c.vote({"assignment_id": it2["assignment_id"], "score": 1}),
            tab2.vote({"assignment_id": it2["assignment_id"], "score": 5}),
        )
        assert sorted([ra.status_code, rb.status_code]) == [200, 409]
        st = await c.status()
        await c.aclose()
        await tab2.aclose()
        return it, st

    it, st = run(go())
    mos = live.state.store.answer_frame("mos_ratings", mos_test)
    mine = mos[mos["rater_id"] == st["rater_id"]]
    assert len(mine) == 2 and st["answered"] == 2 and st["finished"]
    first = mine[mine["assignment_id"] == it["assignment_id"]]
    assert first["score"].tolist() == [2.0]  # the re-sent vote, stored once


def test_tokens_and_ownership(live, mos_test):
    async def go():
        a, b = RaterClient(live.url, mos_test), RaterClient(live.url, mos_test)
        await a.join()
        await b.join()
        ita = (await a.status())["item"]
        # b cannot stream, report on or vote on a's item
        b_err = None
        try:
            await b.listen(ita["assignment_id"], 0, realtime=False, report=False)
        except RuntimeError as e:
            b_err = str(e)
        r = await b.vote({"assignment_id": ita["assignment_id"], "score": 3})
        assert r.status_code == 403 and "not one of yours" in r.json()["detail"]
        # forged and missing tokens
        for tok in ("x" * 43, "", "short", "a" * 300):
            r = await a.http.get(f"/ll/listen/{mos_test}/status", headers={"X-Rater-Token": tok})
            assert r.status_code == 403
        # a rater token is not an admin credential, and there is no route to others' votes
        r = await a.http.get(
            f"/ll/admin/tests/{mos_test}/results", headers={"X-Rater-Token": a.token}
        )
        assert r.status_code == 403
        await a.aclose()
        await b.aclose()
        return b_err

    assert "not one of yours" in run(go())


def test_admin_routes_and_pages_refuse_without_password(live, mos_test):
    u = live.url
    assert httpx.get(u + f"ll/admin/tests/{mos_test}/results").status_code == 403
    assert httpx.get(u + "ll/admin/tests").status_code == 403
    assert httpx.post(u + "ll/admin/tests", json={}).status_code == 403
    page = httpx.get(u + "admin/tests/", headers={"Accept": "text/html"})
    assert page.status_code == 403 and "LISTENLAB_ADMIN_PASSWORD" in page.text
    assert httpx.get(u + "admin/tests/gradio_api/info").status_code == 403
    wrong = httpx.get(u + "ll/admin/tests", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403
    ok = httpx.get(u + f"ll/admin/tests/{mos_test}/results", headers=ADMIN)
    assert ok.status_code == 200 and "raters" in ok.json()
    z = httpx.get(u + f"ll/admin/tests/{mos_test}/export.zip", headers=ADMIN)
    assert z.status_code == 200 and z.content[:2] == b"PK" and b"token_hash" not in z.content


def test_hostile_input_is_bounded_and_refused(live, mos_test):
    async def go():
        c = RaterClient(live.url, mos_test)
        r = await c.post("join", {"crowd_id": "<script>alert(1)</script>"})
        assert r.status_code == 400
        big = b"{" + b" " * JSON_BODY_BYTES + b"}"  # just past the documented 64 KiB
        r = await c.http.post(f"/ll/listen/{mos_test}/join", content=big)
        assert r.status_code == 413
        r = await c.http.post(f"/ll/listen/{mos_test}/join", content=b"[1,2]")
        assert r.status_code == 400
        assert (await c.http.get("/ll/listen/no..such/status")).status_code in {400, 403, 404}
        assert (await c.http.get("/listen/%3Cb%3E")).status_code == 404
        await c.join()
        it = (await c.status())["item"]
        await c.listen(it["assignment_id"], 0)
        for bad in (7, 0, 3.5, "5", True, None):
            r = await c.vote({"assignment_id": it["assignment_id"], "score": bad})
            assert r.status_code == 400, bad
        r = await c.vote({"assignment_id": "../../etc", "score": 3})
        assert r.status_code == 400
        r = await c.post("headphone", {"answers": ["x"] * 6})
        assert r.status_code == 400
        await c.aclose()

    run(go())


def test_ab_sides_randomised_and_cmos_sign_corrected(live):
    tid = make_test(  # capped at 2; the check pairs have a test of their own
        live, kind="ab", items_per_rater=4, headphone_check=False, screening=False
    )
    store = live.state.store

    async def rater() -> list[str]:
        shown_first = []
        c = RaterClient(live.url, tid)
        await c.join()
        st = await c.status()
        while not st["finished"]:
            it = st["item"]
            a = assignment_of(store, tid, st)
            first = a.meta["systems"][0]
            shown_first.append(first)
            await c.listen(it["assignment_id"], 0)
            await c.listen(it["assignment_id"], 1)
            # this rater always prefers system b by 2 points
            r = await c.vote(
                {"assignment_id": it["assignment_id"], "cmos": -2 if first == "b" else 2}
            )
            assert r.status_code == 200, r.text
            st = await c.status()
        await c.aclose()
        return shown_first

    shown = sum(run(together(rater(), rater())), [])  # two raters at once, as a crowd rates
    assert set(shown) == {"a", "b"} and shown.count("a") == shown.count("b") == 2
    votes = store.answer_frame("ab_votes", tid)
    assert len(votes) == 4 and set(votes["cmos"]) == {-2.0, 2.0}  # raw, as presented
    for _, v in votes.iterrows():  # presentation order stored: take_a is the first side
        assert store.load_take(v["take_a"]).meta["system"] == v["system_a"]
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", headers=ADMIN).json()
    (row,) = res["ab"]
    assert (row["x"], row["y"], row["y_wins"], row["x_wins"]) == ("a", "b", 4, 0)
    assert row["cmos_y"] == 2.0 and row["cmos_n"] == 4


def test_ab_check_pairs_flag_a_rater_who_prefers_the_anchor(live):
    """A/B screening: two hidden check pairs per rater (the low anchor against its clean
    source, once on each side). A rater who prefers the anchor is flagged with the reason and
    left out of the A/B table unless screened raters are included."""
    tid = make_test(live, kind="ab", items_per_rater=2, headphone_check=False)
    store = live.state.store

    async def rate(attentive: bool) -> tuple[str, list[dict]]:
        c = RaterClient(live.url, tid)
        await c.join()
        st = await c.status()
        assert st["total"] == 4  # 2 items + 2 check pairs, indistinguishable on the page
        seen = []
        while not st["finished"]:
            it = st["item"]
            assert set(it) >= {"assignment_id", "labels"} and "role" not in it
            a = assignment_of(store, tid, st)
            seen.append({"role": a.role, "systems": a.meta["systems"], "expected": a.expected})
            await c.listen(it["assignment_id"], 0)
            await c.listen(it["assignment_id"], 1)
            if a.role == "gold":  # the clean side is where the anchor is not
                clean_is_b = a.meta["systems"][0] == "__anchor__"
                prefers_b = clean_is_b if attentive else not clean_is_b
                cmos = 3 if prefers_b else -3
            else:  # both raters prefer system b by 1 on the real items
                cmos = -1 if a.meta["systems"][0] == "b" else 1
            r = await c.vote({"assignment_id": it["assignment_id"], "cmos": cmos})
            assert r.status_code == 200, r.text
            st = await c.status()
        await c.aclose()
        return st["rater_id"], seen

    (good, seen), (bad, seen_bad) = run(together(rate(True), rate(False)))
    clean_sides = set()
    for rater_seen in (seen, seen_bad):
        checks = [s for s in rater_seen if s["role"] == "gold"]
        assert len(checks) == 2
        assert sorted(c["expected"] for c in checks) == [-1.0, 1.0]  # clean once as A, once as B
        (pair,) = {tuple(sorted(c["systems"])) for c in checks}  # one clean system per rater
        assert pair[0] == "__anchor__"
        clean_sides.add(pair[1])
    # the clean side takes the systems in turn, rater by rater (whichever joined first)
    assert clean_sides == {"a", "b"}
    # the check pairs are not A/B votes: only the 2 real items of each rater are
    votes = store.answer_frame("ab_votes", tid)
    assert len(votes) == 4 and set(votes["system_a"]) | set(votes["system_b"]) == {"a", "b"}
    answers = store.db.execute("SELECT count(*) FROM answers WHERE test_id = ?", [tid])
    assert answers.fetchone()[0] == 8
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", headers=ADMIN).json()
    raters = {r["rater_id"]: r for r in res["raters"]}
    assert raters[good]["excluded"] is False and raters[good]["ab_check_failed"] == 0
    assert raters[bad]["excluded"] is True and raters[bad]["ab_check_failed"] == 2
    assert "A/B check failed x2 of 2" in raters[bad]["reasons"]
    assert "degraded anchor" in raters[bad]["reasons"]
    (row,) = res["ab"]  # only the attentive rater's two votes
    assert (row["x"], row["y"], row["y_wins"], row["x_wins"]) == ("a", "b", 2, 0)
    res = httpx.get(
        live.url + f"ll/admin/tests/{tid}/results?include_screened=true", headers=ADMIN
    ).json()
    (row,) = res["ab"]
    assert row["y_wins"] == 4 and row["cmos_n"] == 4


HOSTILE_PROMPT = "Read <b>this</b> & <img src=x onerror=window.pwned=1> aloud, please."


def test_show_text_sends_the_prompt_as_data(live):
    """``show_text`` (default on for MOS and A/B): each item carries the text its clip speaks,
    verbatim (markup included: the page sets it as text); off, or for MUSHRA, no text at all."""
    prompts = ["The birch canoe slid on the smooth planks.", HOSTILE_PROMPT]
    on = make_test(live, prompts=prompts, screening=False, headphone_check=False)
    off = make_test(live, prompts=prompts, screening=False, headphone_check=False, show_text=False)
    mu = make_test(live, kind="mushra", reference="a", items_per_rater=1, headphone_check=False)
    tests = live.state.store

    async def texts(tid: str) -> list:
        c = RaterClient(live.url, tid)
        await c.join()
        st = await c.status()
        out = []
        while not st["finished"]:
            it = st["item"]
            out.append(it.get("text"))
            await c.listen(it["assignment_id"], 0)
            for i in range(1, it["slots"]):
                await c.listen(it["assignment_id"], i)
            body = {"assignment_id": it["assignment_id"]}
            if it["kind"] == "mushra":
                body["scores"] = [50] * it["slots"]
            else:
                body["score"] = 3
            assert (await c.vote(body)).status_code == 200
            st = await c.status()
        await c.aclose()
        return out

    got, got_off, got_mu = run(together(texts(on), texts(off), texts(mu)))
    assert sorted(got) == sorted(prompts)  # each item's own prompt, markup kept as text
    assert got_off == [None, None]
    assert got_mu == [None]
    cfg = {t: tests.db["tests"].get(t)["config"] for t in (on, off, mu)}
    assert ['"show_text": true' in cfg[on], '"show_text": false' in cfg[off]] == [True, True]
    assert '"show_text": false' in cfg[mu]


def test_mushra_hidden_reference_anchor_and_post_screening(live):
    tid = make_test(live, kind="mushra", reference="a", items_per_rater=2, headphone_check=False)
    store = live.state.store

    async def rate(good: bool):
        c = RaterClient(live.url, tid)
        await c.join()
        st = await c.status()
        while not st["finished"]:
            it = st["item"]
            # b, the hidden reference, the 3.5 kHz and the 7 kHz anchors (BS.1534-3)
            assert it["slots"] == 4 and it["has_reference"]
            a = assignment_of(store, tid, st)
            r = await c.vote({"assignment_id": it["assignment_id"], "scores": [50] * 4})
            assert r.status_code == 409  # every stimulus must be played first
            for i in range(4):
                await c.listen(it["assignment_id"], i)
            scores = [
                {"reference": 100 if good else 40, "anchor": 10 if good else 95, "item": 70}[role]
                for role in a.meta["roles"]
            ]
            r = await c.vote({"assignment_id": it["assignment_id"], "scores": scores})
            assert r.status_code == 200, r.text
            st = await c.status()
        await c.aclose()
        return st["rater_id"]

    good, bad = run(together(rate(True), rate(False)))
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", headers=ADMIN).json()
    raters = {r["rater_id"]: r for r in res["raters"]}
    assert not raters[good]["excluded"]
    assert raters[bad]["excluded"] and "hidden reference < 90 on 2/2" in raters[bad]["reasons"]
    mu = {r["condition"]: r for r in res["mushra"]}
    assert mu["hidden reference"]["median"] == 100
    assert mu["low anchor (3.5 kHz)"]["median"] == mu["mid anchor (7 kHz)"]["median"] == 10
    assert mu["b"]["median"] == 70 and mu["b"]["n"] == 2
    # the hidden reference is the reference system's own take; the anchor is a degraded copy
    m = TestStoreFrame(store, tid)
    ref_take = m[m["role"] == "reference"]["take_id"].iloc[0]
    assert store.load_take(ref_take).meta["system"] == "a"
    # which anchor is which reaches the ratings (system_id), for the BS.1534-3 screening
    assert set(m[m["role"] == "anchor"]["system_id"]) == {"__anchor_low__", "__anchor_mid__"}


def TestStoreFrame(store, tid):  # noqa: N802 - small helper

    return store.answer_frame("mushra_ratings", tid)


def test_as_streamed_replays_the_recorded_stall(live):
    tid = one_item_test(
        live,
        {"name": "stall", "backend": "stall"},
        STALL_PROMPT,
    )
    store = live.state.store

    async def go():
        c, it = await first_item(live, tid)
        p = await c.listen(it["assignment_id"], 0)
        await c.aclose()
        return p

    p = run(go())
    (take_id,) = store.db.execute(
        "SELECT take_id FROM assignments WHERE test_id=?", [tid]
    ).fetchone()
    take = store.load_take(take_id)  # the page is sent an opaque stream id, not this
    rec = [ch.arrival_ms for ch in take.chunks]
    gaps = np.diff(rec)
    k = int(np.argmax(gaps))
    assert (
        gaps[k] > 1000
    )  # the stored stream has the profile's 6 s stall (less what Piper's synthesis absorbed)
    got = np.diff(p.arrivals_ms)  # blind: equal 100 ms frames, each at its chunk's arrival
    j = int(np.argmax(got))
    assert got[j] > gaps[k] - 150  # replayed ...
    at_s, seam_s = (j + 1) * 0.1, take.chunks[k + 1].offset / take.sample_rate
    assert seam_s - 0.1 <= at_s <= seam_s + 0.25  # ... at its position
    assert set(p.done) == {"type", "token", "status", "duration_s", "frames"}


def test_glitch_hunt_marks_map_to_seams_and_close_the_item(live):
    tid = one_item_test(
        live,
        {"name": "stall", "backend": "stall"},
        STALL_PROMPT,
        kind="glitch",
    )
    store = live.state.store

    async def go():
        c, it = await first_item(live, tid)
        early = await c.glitch(it["assignment_id"], 0, 100.0)
        assert early["type"] == "listen_error"  # nothing streamed to this page yet
        p = await c.listen(it["assignment_id"], 0)
        q = "SELECT take_id FROM assignments WHERE test_id=?"
        take = store.load_take(store.db.execute(q, [tid]).fetchone()[0])
        seam = take.chunks[3].offset / take.sample_rate * 1000
        saved = await c.glitch(it["assignment_id"], 0, seam + 20)
        bad = await c.glitch(it["assignment_id"], 0, 10 * p.played_ms)
        r = await c.vote({"assignment_id": it["assignment_id"]})
        await c.aclose()
        return saved, bad, r, None

    saved, bad, r, _ = run(go())
    assert saved["type"] == "listen_glitch_saved" and saved["boundary_index"] == 2
    assert bad["type"] == "listen_error" and "outside" in bad["message"]
    assert r.status_code == 200 and r.json()["finished"]
    rows = store.answer_frame("glitch_reports")
    rows = rows[rows["test_id"] == tid]
    assert len(rows) == 1 and rows["distance_ms"].iloc[0] == pytest.approx(20.0)
    ans = store.db.execute("SELECT payload FROM answers WHERE test_id=?", [tid]).fetchone()[0]
    assert '"marks": 1' in ans
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", headers=ADMIN).json()
    assert res["glitches_by_seam"]


def test_live_condition_generates_afresh_and_is_recorded(live):
    tid = one_item_test(
        live,
        {"name": "a", "backend": "piper", "condition": "live"},
        "Help the woman get back to her feet.",
    )
    store = live.state.store

    async def go():
        c, it = await first_item(live, tid)
        p = await c.listen(it["assignment_id"], 0)
        r = await c.vote({"assignment_id": it["assignment_id"], "score": 5})
        await c.aclose()
        return it, p, r

    it, p, r = run(go())
    assert r.status_code == 200 and r.json()["finished"]
    (row,) = store.answer_frame("mos_ratings", tid).to_dict(orient="records")
    ev = store.db.execute("SELECT take_id, condition FROM play_events WHERE test_id=?", [tid])
    fresh_id, cond = ev.fetchone()
    assert cond == "live" and p.take_id != fresh_id  # the page saw only a stream id
    assert row["condition"] == "live" and row["take_id"] != fresh_id  # vote keyed to stimulus
    fresh = store.load_take(fresh_id)  # the take generated for this rater was stored
    assert fresh.request.text == "Help the woman get back to her feet."
