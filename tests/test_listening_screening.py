"""Rater screening over the real routes (uvicorn on 127.0.0.1, the real Piper voice, a real
SQLite file, scripted raters over HTTP): the screen's keys stay on the server, a pick counts
only after its audio had time to play, honest raters pass and wrong ones are screened out for
good, one crowd id is one rater, Prolific's ids are stored, dropouts' design rows are given
again until the target is met, the A/B check pairs' clean side, familiarisation.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import time
import zipfile
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from app.store.listening import TestStore
from evaluation.listening import screening
from evaluation.listening.design import (
    Design,
    RaterRow,
    check_positions,
    choose_row,
    plan,
    row_cells,
    rows,
)
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient

PW = "s3cret-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
KEY_WORDS = ("answer", "order", "noise_seed", "quiet", "antiphase_at", "key")


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


def make(live, **spec) -> str:
    """A test on the default two systems (one prompt unless ``prompts=None``: two)."""
    if spec.get("prompts", "") is None:
        spec.pop("prompts")
    else:
        spec.setdefault("prompts", ["The birch canoe slid on the smooth planks."])
    spec.setdefault("items_per_rater", 1)
    return create_test(live, ADMIN, **spec)


def keys(live, tid: str, rid: str) -> list[screening.ScreenTrial]:
    """The answer keys, read from the server-side store (what no client is sent)."""
    rows_ = live.state.store.db.execute(
        "SELECT key FROM screen_trials WHERE test_id=? AND rater_id=? ORDER BY n", [tid, rid]
    ).fetchall()
    return [screening.ScreenTrial.from_json(r[0]) for r in rows_]


def rater_row(store, tid: str, rid: str) -> dict:
    cur = store.db.execute("SELECT * FROM test_raters WHERE test_id=? AND rater_id=?", [tid, rid])
    return dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))


async def joined(live, tid: str, crowd: str | None = None) -> RaterClient:
    c = RaterClient(live.url, tid, crowd)
    await c.join()
    return c


async def finish(c: RaterClient) -> dict:
    """Listen to every item in real time and vote (MOS 4)."""
    st = await c.status()
    while not st["finished"]:
        it = st["item"]
        await c.listen(it["assignment_id"], 0)
        r = await c.vote({"assignment_id": it["assignment_id"], "score": 4})
        assert r.status_code == 200, r.text
        st = await c.status()
    return st


def test_a_bot_reading_every_page_and_json_finds_no_key(live):
    tid = make(live, screen="both", screenout_url="https://example.org/out?c={code}")

    async def go():
        c1, c2 = await joined(live, tid, "P-bot-1"), await joined(live, tid, "P-bot-2")
        st = await c1.status()
        texts = [json.dumps(st), json.dumps(await c2.status())]
        async with httpx.AsyncClient(base_url=live.url) as h:
            texts.append((await h.get(f"/ll/listen/{tid}/info")).text)
            texts.append((await h.get(f"/listen/{tid}")).text)
            for f in ("listen.js", "screen.js"):
                texts.append((await h.get(f"/ll/listening/static/{f}")).text)
        await c1.aclose(), await c2.aclose()
        return st, texts

    st, texts = asyncio.run(go())
    assert st["stage"] == "screen" and "headphone_trials" not in st
    assert st["screen"]["trials"] == 12 and st["screen"]["kinds"][:6] == ["antiphase"] * 6
    k1, k2 = keys(live, tid, st["rater_id"]), keys(live, tid, json.loads(texts[1])["rater_id"])
    assert len(k1) == 12 and [t.kind for t in k1][6:] == ["huggins"] * 6
    for t in texts[:3]:  # the JSON the page gets: no key field, no key value
        low = t.lower()
        assert not any(f'"{w}"' in low for w in KEY_WORDS), t
        assert json.dumps([x.answer for x in k1]) not in t
        assert str(k1[6].noise_seed) not in t
    # the keys are random per rater, from the server's secret source (not the rater id)
    assert k1 != k2
    # a page's scripts hold no key either: nothing in them can pick a trial
    assert "headphone_trials" not in texts[3] + texts[4] + texts[5]


def test_a_pick_counts_only_after_its_audio_had_time_to_play(live):
    tid = make(live, screen="antiphase")

    async def go():
        c = await joined(live, tid)
        rid = (await c.status())["rater_id"]
        key = keys(live, tid, rid)
        r = await c.post("screen/0", {"answer": key[0].answer})
        assert r.status_code == 409 and "was not played" in r.json()["detail"]
        got = await c.http.get(f"/ll/listen/{tid}/screen/0", headers=c._h())
        assert got.status_code == 200 and got.headers["content-type"] == "audio/wav"
        audio, rate = screening.read_wav(got.content)
        assert rate == 48_000 and audio.shape[1] == 2 and len(got.content) < 1_000_000
        r = await c.post("screen/0", {"answer": key[0].answer})  # at once: not yet played
        assert r.status_code == 409 and "time to play" in r.json()["detail"]
        # all at once: refused while any trial was not sent, and nothing is stored
        r = await c.post("headphone", {"answers": [t.answer for t in key]})
        assert r.status_code == 409
        assert (
            live.state.store.db.execute(
                "SELECT count(*) FROM screen_trials WHERE rater_id=? AND answer IS NOT NULL", [rid]
            ).fetchone()[0]
            == 0
        )
        await asyncio.sleep(len(audio) / rate + 0.05)
        r = await c.post("screen/0", {"answer": key[0].answer})
        assert r.status_code == 200 and r.json() == {"answered": 1, "trials": 6, "done": False}
        # a bad pick, an unknown trial, a token of nobody
        assert (await c.post("screen/1", {"answer": 3})).status_code == 400
        assert (await c.post("screen/6", {"answer": 0})).status_code == 400
        bad = await c.http.get(f"/ll/listen/{tid}/screen/1", headers={"X-Rater-Token": "x" * 43})
        assert bad.status_code == 403
        # replays are fine, a fetch loop is not: ten plays of a trial, then it must be answered
        codes = [
            (await c.http.get(f"/ll/listen/{tid}/screen/2", headers=c._h())).status_code
            for _ in range(11)
        ]
        assert codes == [200] * 10 + [403]
        await c.aclose()

    asyncio.run(go())


def test_honest_listener_passes_and_wrong_one_is_screened_out_for_good(live):
    tid = make(
        live,
        screen="both",
        screenout_url="https://example.org/screened?cc={code}",
        screenout_code="NOHEAD1",
    )

    async def go():
        good = await joined(live, tid, "P-good")
        res = await good.headphone(correct=True)  # picks made from the audio itself
        assert res["done"] and res["passed"] and not res["screened_out"]
        st = await good.status()
        assert st["stage"] == "item" and st["headphone"] == {
            "passed": True,
            "correct": 12,
            "trials": 12,
        }
        bad = await joined(live, tid, "P-speakers")
        res = await bad.headphone(correct=False)  # loudspeakers: picks the antiphase tone
        assert res["done"] and not res["passed"] and res["screened_out"]
        st = await bad.status()
        assert st["stage"] == "screened_out" and st["screened_out"] and st["item"] is None
        assert st["screenout_code"] == "NOHEAD1"
        assert st["redirect_url"] == "https://example.org/screened?cc=NOHEAD1"
        assert not st["finished"] and "completion_code" not in st
        # the session has ended: no vote, no stimulus, no second screen
        r = await bad.vote({"assignment_id": "a" * 24, "score": 3})
        assert r.status_code == 403 and "screened out" in r.json()["detail"]
        r = await bad.http.get(f"/ll/listen/{tid}/screen/0", headers=bad._h())
        assert r.status_code == 403
        old = bad.token
        again = await joined(live, tid, "P-speakers")  # the same crowd id: the same rater
        st2 = await again.status()
        assert st2["rater_id"] == st["rater_id"] and st2["stage"] == "screened_out"
        r = await bad.http.get(f"/ll/listen/{tid}/status", headers={"X-Rater-Token": old})
        assert r.status_code == 403  # the old token stopped working
        for c in (good, bad, again):
            await c.aclose()
        return st["rater_id"]

    out = asyncio.run(go())
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", headers=ADMIN, timeout=60).json()
    reasons = {r["rater_id"]: r["reasons"] for r in res["raters"]}
    assert "screened out: headphones (headphone check 0/6)" in reasons[out]
    assert "screened out: huggins" in reasons[out]


def test_huggins_band_is_phase_inverted_only_in_the_target_interval(live):
    tid = make(live, screen="huggins")

    async def go():
        c = await joined(live, tid)
        rid = (await c.status())["rater_id"]
        got = []
        for n in range(2):
            r = await c.http.get(f"/ll/listen/{tid}/screen/{n}", headers=c._h())
            got.append(screening.read_wav(r.content)[0])
        await c.aclose()
        return keys(live, tid, rid), got

    key, audios = asyncio.run(go())
    n, g = int(screening.NOISE_S * 48_000), int(screening.GAP_S * 48_000)
    f = np.fft.rfftfreq(n, 1 / 48_000)
    band = (f > 600 * 0.95) & (f < 600 * 1.05)
    out_band = (f > 300) & (f < 3000) & ~((f > 600 * 0.9) & (f < 600 * 1.1))
    for trial, audio in zip(key[:2], audios, strict=True):
        assert trial.kind == "huggins" and len(audio) == 3 * n + 2 * g
        for i in range(3):
            seg = audio[i * (n + g) : i * (n + g) + n]
            lf, rf = np.fft.rfft(seg[:, 0]), np.fft.rfft(seg[:, 1])
            coh = np.real(lf * np.conj(rf)) / (np.abs(lf) * np.abs(rf) + 1e-12)
            if i == trial.answer:  # inverted in the band, identical outside it
                assert np.median(coh[band]) < -0.95 and np.median(coh[out_band]) > 0.95
            else:  # diotic everywhere
                assert np.median(coh[band]) > 0.95
            # each ear alone carries no cue: the same energy in the band and around it
            for sel in (band, out_band):
                el, er = np.sum(np.abs(lf[sel]) ** 2), np.sum(np.abs(rf[sel]) ** 2)
                assert abs(el / er - 1) < 0.05
        assert screening.ideal_listener("huggins", audio, 48_000) == trial.answer


def test_crowd_id_resumes_and_prolific_ids_are_stored(live):
    tid = make(live, screen="none", items_per_rater=2, prompts=None)

    async def go():
        async with httpx.AsyncClient(base_url=live.url) as h:
            body = {
                "crowd_id": "PID-77",
                "source": "PROLIFIC_PID",
                "study_id": "STUDY-1",
                "session_id": "SESS-1",
            }
            a = (await h.post(f"/ll/listen/{tid}/join", json=body)).json()
            ta = {"X-Rater-Token": a["token"]}
            await h.post(f"/ll/listen/{tid}/consent", json={}, headers=ta)
            st = (await h.get(f"/ll/listen/{tid}/status", headers=ta)).json()
            b = await h.post(f"/ll/listen/{tid}/join", json={**body, "session_id": "SESS-2"})
            b = b.json()
            tb = {"X-Rater-Token": b["token"]}
            st2 = (await h.get(f"/ll/listen/{tid}/status", headers=tb)).json()
            old = await h.get(f"/ll/listen/{tid}/status", headers=ta)
            bad = await h.post(f"/ll/listen/{tid}/join", json={**body, "study_id": "x y"})
            other = (await h.post(f"/ll/listen/{tid}/join", json={"crowd_id": "PID-78"})).json()
        return a, b, st, st2, old, bad, other

    a, b, st, st2, old, bad, other = asyncio.run(go())
    assert not a["resumed"] and b["resumed"] and a["rater_id"] == b["rater_id"]
    assert b["token"] != a["token"] and old.status_code == 403
    assert st2["consented"] and st2["item"]["assignment_id"] == st["item"]["assignment_id"]
    assert bad.status_code == 400 and "study id" in bad.json()["detail"]
    assert other["rater_id"] != a["rater_id"]
    row = rater_row(live.state.store, tid, a["rater_id"])
    assert (row["study_id"], row["session_id"], row["crowd_id"]) == ("STUDY-1", "SESS-2", "PID-77")
    assert (
        live.state.store.db.execute(
            "SELECT count(*) FROM test_raters WHERE test_id=?", [tid]
        ).fetchone()[0]
        == 2
    )
    z = httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip", headers=ADMIN, timeout=60)
    raw = pd.read_csv(
        io.BytesIO(zipfile.ZipFile(io.BytesIO(z.content)).read("raw/test_raters.csv"))
    )
    got = raw.set_index("rater_id").loc[a["rater_id"]]
    assert (got["study_id"], got["session_id"]) == ("STUDY-1", "SESS-2")
    assert "token_hash" not in raw.columns


# ---------------------------------------------------------------- design rows (P.808 extending)


def test_choose_row_reissues_dropped_rows_until_every_cell_has_its_target():
    """Simulated joiners: a third drop out or are screened out at random; the joiners still
    fill every cell to the target, no cell gets far more than it needs, and then the test
    is full. Deterministic: the same history gives the same rows."""
    d = Design("mos", ("a", "b", "c"), tuple(f"p{i}" for i in range(6)), 3).validate()
    n = rows(d)
    assert n == 3 * 2  # the Latin square repeats every 3 rows, the 3-prompt blocks every 2
    for r in range(n):
        assert sorted(row_cells(d, r)) == sorted(row_cells(d, r + n))
    assert plan(d, 0) != plan(d, 0, order_seed=n)  # a reissued row: the rater's own order
    cells = {c for r in range(n) for c in row_cells(d, r)}
    assert len(cells) == 18
    for seed in range(5):
        rng = random.Random(seed)
        raters: list[RaterRow] = []
        history = []
        while True:
            row = choose_row(d, raters, target=3)
            if row is None:
                break
            history.append(row)
            raters.append(RaterRow(row, rng.random() > 0.33))
            assert len(raters) < 200
        count = dict.fromkeys(cells, 0)
        for r in raters:
            for c in row_cells(d, r.row) if r.usable else ():
                count[c] += 1
        assert min(count.values()) >= 3 and max(count.values()) <= 4, count
        replay: list[RaterRow] = []
        for r in raters:
            assert choose_row(d, replay, target=3) == r.row
            replay.append(r)


def test_check_items_sit_at_random_positions_per_rater():
    d = Design("mos", ("a", "b"), ("p1", "p2", "p3", "p4"), 8, gold=True).validate()
    where = {
        tuple(i for i, it in enumerate(plan(d, 0, order_seed=s)) if it.role != "item")
        for s in range(20)
    }
    assert len(where) >= 10 and all(0 not in w for w in where)
    pos = check_positions(8, 3, random.Random(1))
    assert len(pos) == 3 and all(b - a >= 2 for a, b in zip(pos, pos[1:], strict=False))


def test_dropouts_and_screen_outs_rows_are_given_again_until_the_target(live):
    tid = make(
        live,
        kind="mos",
        screen="antiphase",
        screening=False,
        prompts=None,  # 2 systems x 2 prompts, 2 items per rater: two rows of two cells
        items_per_rater=2,
        target_ratings=1,
        dropout_after_s=60,
    )
    store = live.state.store

    def cells_of(rid: str) -> set[tuple[str, str]]:
        return {(a.meta["systems"][0], a.meta["prompt_id"]) for a in store.assignments(tid, rid)}

    async def go():
        a = await joined(live, tid)  # row 0, then screened out: its row is free again
        await a.headphone(correct=False)
        b = await joined(live, tid)  # row 0 again
        c = await joined(live, tid)  # row 1, then idle for two minutes: dropped
        rc = (await c.status())["rater_id"]
        store.db.execute(
            "UPDATE test_raters SET seen_at = ? WHERE rater_id = ?", [time.time() - 120, rc]
        )
        store.db.commit()
        d = await joined(live, tid)  # row 1 again
        await b.headphone(correct=True)
        await d.headphone(correct=True)
        await asyncio.gather(finish(b), finish(d))
        async with httpx.AsyncClient(base_url=live.url) as h:
            full = await h.post(f"/ll/listen/{tid}/join", json={})
        ids = [(await x.status())["rater_id"] for x in (a, b, d)]
        for x in (a, b, c, d):
            await x.aclose()
        return [*ids[:2], rc, ids[2]], full

    (ra, rb, rc, rd), full = asyncio.run(go())
    rows_ = {r: rater_row(live.state.store, tid, r)["design_row"] for r in (ra, rb, rc, rd)}
    assert rows_ == {ra: 0, rb: 0, rc: 1, rd: 1}
    assert cells_of(ra) == cells_of(rb) and cells_of(rc) == cells_of(rd)
    assert len(cells_of(rb) | cells_of(rd)) == 4  # every system x prompt once
    assert full.status_code == 403 and "full" in full.json()["detail"]
    # the results and the export work with a screened-out and a dropped rater
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", headers=ADMIN, timeout=60)
    assert res.status_code == 200
    raters = {r["rater_id"]: r for r in res.json()["raters"]}
    assert raters[ra]["excluded"] and "screened out: headphones" in raters[ra]["reasons"]
    assert raters[rc]["finished"] is False and not raters[rd]["excluded"]
    assert sorted(r["n"] for r in res.json()["mos"]) == [2, 2]
    z = httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip", headers=ADMIN, timeout=60)
    assert (
        z.status_code == 200
        and "results/raters.csv" in zipfile.ZipFile(io.BytesIO(z.content)).namelist()
    )


# ---------------------------------------------------------------- A/B check pairs


def folder(root: Path) -> Path:
    """natural/ and modelx/ recordings of two prompts (noise bursts at 22.05 kHz, enough for
    the anchor's 3.5 kHz low-pass)."""
    rng = np.random.default_rng(0)
    for sysname, gain in (("natural", 0.2), ("modelx", 0.1)):
        (root / sysname).mkdir(parents=True)
        for pid in ("p1", "p2"):
            x = rng.standard_normal(int(22050 * 1.2)) * gain
            sf.write(root / sysname / f"{pid}.wav", x, 22050, subtype="PCM_16")
    return root


def test_ab_check_pairs_clean_side(live, tmp_path):
    store = live.state.store
    rotating = make(live, kind="ab", screen="none", items_per_rater=2, prompts=None)
    natural = create_test(
        live,
        ADMIN,
        kind="ab",
        screen="none",
        items_per_rater=2,
        systems=[],
        prompts=[],
        stimuli=str(folder(tmp_path / "stim")),
    )

    pairs: set[tuple[str, str]] = set()  # (the clean clip's system, the bad one's source's)

    def clean_sides(tid: str, n: int) -> list[set[str]]:
        stim = {s.take_id: s for s in TestStore(store).stimuli(tid)}
        out = []
        for _ in range(n):

            async def one() -> str:
                c = await joined(live, tid)
                rid = (await c.status())["rater_id"]
                await c.aclose()
                return rid

            rid = asyncio.run(one())
            sides = set()
            for a in store.assignments(tid, rid):
                if a.role == "gold":
                    roles = a.meta["roles"]
                    s = stim[a.slots[roles.index("gold")]]
                    bad = stim[a.slots[roles.index("anchor")]]
                    assert bad.kind == "anchor" and s.kind == "item"
                    assert bad.prompt_id == s.prompt_id  # one check prompt per pair
                    made_from = store.take_info(bad.source_take_id).system_id
                    pairs.add((s.system_id, made_from))
                    if s.system_id == "natural":  # the degraded copy of that very clip
                        assert bad.source_take_id == s.take_id
                    sides.add(s.system_id)
            out.append(sides)
        return out

    assert clean_sides(rotating, 3) == [{"a"}, {"b"}, {"a"}]  # each system in turn
    assert ("a", "b") in pairs  # without a natural recording, not always the same system
    assert clean_sides(natural, 2) == [{"natural"}, {"natural"}]
    # the docs say exactly this (#38 item 19: they said "the first system on the first prompt")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "listening-tests.md").read_text()
    assert "the first system on the first prompt" not in doc
    assert "the systems taking turns per rater" in doc and "made from that very clip" in doc


# ---------------------------------------------------------------- familiarisation


def test_familiarisation_is_recorded_only_after_both_ends_played(live):
    tid = make(
        live, screen="none", familiarise=True, screening=True, items_per_rater=2, prompts=None
    )

    async def go():
        c = await joined(live, tid)
        st = await c.status()
        assert st["stage"] == "familiarise" and len(st["familiar"]["clips"]) == 2
        labels = st["familiar"]["clips"]
        r = await c.post("familiar")
        assert r.status_code == 409 and "listen first" in r.json()["detail"]
        longest = 0.0
        for k in range(len(labels)):
            got = await c.http.get(f"/ll/listen/{tid}/familiar/{k}", headers=c._h())
            audio, rate = screening.read_wav(got.content)
            assert rate == 48_000 and audio.shape[1] == 2
            longest = max(longest, len(audio) / rate)
        r = await c.post("familiar")
        assert r.status_code == 409
        await asyncio.sleep(longest + 0.1)
        r = await c.post("familiar")
        assert r.status_code == 200, r.text
        st = await c.status()
        await c.aclose()
        return st, labels

    st, labels = asyncio.run(go())
    assert st["stage"] == "item" and labels[0].startswith("The low end")
    assert rater_row(live.state.store, tid, st["rater_id"])["familiarised_at"]


def test_cli_and_designer_take_the_screening_settings():
    from app.cli import build_parser
    from app.listening.cli import spec_from_args
    from app.listening.designer import TestSpec, check_spec
    from backends.errors import InvalidRequest

    args = build_parser().parse_args(
        ["test", "create", "--system", "a=piper", "--system", "b=piper", "--screen", "both"]
        + ["--screenout-url", "https://x.example/o?c={code}", "--screenout-code", "OUT1"]
        + ["--no-familiarise", "--target-ratings", "8", "--dropout-after", "900"]
    )
    spec = spec_from_args(args)
    assert (spec["screen"], spec["screenout_url"], spec["screenout_code"]) == (
        "both",
        "https://x.example/o?c={code}",
        "OUT1",
    )
    assert (spec["familiarise"], spec["target_ratings"], spec["dropout_after_s"]) == (
        False,
        8,
        900.0,
    )
    ts = TestSpec.from_dict({**spec, "prompts": ["Hi."]})
    assert (ts.screen, ts.target_ratings, ts.familiarise) == ("both", 8, False)
    for bad, msg in (
        ({"screenout_url": "http://x.example/"}, "https://"),
        ({"screen": "loud"}, "screening must be one of"),
        ({"target_ratings": 0}, None),
        ({"dropout_after_s": 0.1}, "dropout"),
    ):
        s = TestSpec.from_dict({**spec, "prompts": ["Hi."], **bad})
        if msg is None:  # 0 means "no target"
            assert s.target_ratings is None
            continue
        with pytest.raises(InvalidRequest, match=msg):
            check_spec(s)
    # a test made before the setting: the old headphone_check bool still decides
    assert screening.screen_mode({"headphone_check": True}) == "antiphase"
    assert screening.screen_mode({"headphone_check": False}) == "none"
    assert screening.screen_mode({"screening": "huggins", "headphone_check": True}) == "huggins"


def test_familiarisation_clips_per_test_kind(live):
    mu = make(live, kind="mushra", reference="a", screen="none", familiarise=True)
    ab = make(live, kind="ab", screen="none", familiarise=True, screening=False)
    tests = TestStore(live.state.store)

    async def clips(tid: str) -> tuple[list[str], list[str], list[tuple[int, int]]]:
        c = await joined(live, tid)
        st = await c.status()
        assert st["stage"] == "familiarise"
        fmt = []
        for k in range(len(st["familiar"]["clips"])):
            got = await c.http.get(f"/ll/listen/{tid}/familiar/{k}", headers=c._h())
            audio, rate = screening.read_wav(got.content)
            fmt.append((rate, audio.shape[1]))
        bad = await c.http.get(f"/ll/listen/{tid}/familiar/9", headers=c._h())
        assert bad.status_code == 400
        row = rater_row(live.state.store, tid, st["rater_id"])
        await c.aclose()
        return st["familiar"]["clips"], sorted(json.loads(row["familiar"])), fmt

    labels, fetched, fmt = asyncio.run(clips(mu))
    assert labels == [
        "The reference: the best quality here",
        "A clip of low quality: the bottom of the scale",
    ] and fetched == ["0", "1"]
    assert fmt == [(48_000, 2)] * 2  # one rate and layout, whatever the system's
    labels, _, fmt = asyncio.run(clips(ab))
    assert labels == ["Example A", "Example B"] and fmt == [(48_000, 2)] * 2
    assert {s.kind for s in tests.stimuli(mu)} >= {"item", "anchor"}


def test_a_version_2_database_gains_the_screening_columns(tmp_path):
    """An existing DB (schema 2, with a rater) is migrated on open: the new columns and the
    screen table exist, the old rater keeps its row (design row NULL: its seq, as before)."""
    import sqlite3

    import sqlite_utils

    from app.store import MIGRATIONS, SCHEMA_VERSION, Store

    path = tmp_path / "old.db"
    db = sqlite_utils.Database(sqlite3.connect(path))
    for v in (1, 2):
        MIGRATIONS[v](db)
    db.execute("PRAGMA user_version = 2")
    db.execute("INSERT INTO tests (test_id, kind, name) VALUES ('t', 'mos', 'old')")
    db.execute("INSERT INTO raters (rater_id) VALUES ('r0')")
    db.execute(
        "INSERT INTO test_raters (test_id, rater_id, token_hash, seq) VALUES ('t', 'r0', 'h', 0)"
    )
    db.conn.commit()
    db.conn.close()
    store = Store.open(path)
    assert store.schema_version == SCHEMA_VERSION  # 3 then; the arena's tables made it 4
    row = rater_row(store, "t", "r0")
    assert row["seq"] == 0 and row["design_row"] is None and row["study_id"] is None
    assert {"session_id", "screened_out_at", "familiarised_at", "seen_at"} <= set(row)
    assert store.db.execute("SELECT count(*) FROM screen_trials").fetchone()[0] == 0
    frame = TestStore(store).raters_frame("t")
    assert list(frame["rater_id"]) == ["r0"] and "study_id" in frame.columns
    store.close()
