"""As many conditions as a study has (issue #28): MOS and A/B tests with 13 and 50 systems are
created through the admin route from imported audio, rated by raters over the real HTTP and
WebSocket routes, and balanced as the designer promised; MUSHRA refuses more than BS.1534-3's
12 signals per screen with the documented message.

With fewer items per rater than systems (or A/B pairs), consecutive raters continue one cycle:
the test reads the design cells every rater was given from the store and checks them.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from app.store.listening import TestStore
from evaluation.listening.design import Design, full_balance_raters
from tests.support.app_util import listening_app, live_server
from tests.support.rater import RaterClient

SR = 16000


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


def folder(root: Path, systems: int, prompts: int) -> Path:
    """``s00/p1.wav`` … : short noise bursts (0.5 s, the shortest a stimulus may be), one per system and prompt."""
    rng = np.random.default_rng(systems)
    for i in range(systems):
        (root / f"s{i:02d}").mkdir(parents=True)
        for k in range(prompts):
            x = rng.standard_normal(int(SR * 0.5)) * 0.1
            sf.write(root / f"s{i:02d}" / f"p{k + 1}.wav", x, SR, subtype="PCM_16")
    return root


def create(live, body: dict) -> httpx.Response:
    spec = {
        "name": "many",
        "systems": [],
        "prompts": [],
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
        **body,
    }
    return httpx.post(live.url + "ll/admin/tests", json=spec, timeout=600)


async def rate_one(live, tid: str, ab: bool) -> str:
    c = RaterClient(live.url, tid, timeout=120)
    await c.join()
    st = await c.status()
    k = 0
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        for slot in (0, 1) if ab else (0,):
            await c.listen(aid, slot)
        k += 1  # varied answers: a rater giving one score throughout is screened out
        answer = {"cmos": k % 3 - 1} if ab else {"score": 1 + k % 5}
        r = await c.vote({"assignment_id": aid, **answer})
        assert r.status_code == 200, r.text
        st = await c.status()
    await c.aclose()
    return st["rater_id"]


def rate(live, tid: str, raters: int, ab: bool = False) -> list[str]:
    async def go():
        return await asyncio.gather(*(rate_one(live, tid, ab) for _ in range(raters)))

    return asyncio.run(go())


def cells(live, tid: str, rater_ids: list[str]) -> list[list[tuple]]:
    """Per rater, the (systems, prompt) cells of their rated items, from the store."""
    tests = TestStore(live.state.store)
    out = []
    for rid in rater_ids:
        rows = [a for a in live.state.store.assignments(tid, rid) if a.role == "item"]
        out.append([(tuple(sorted(a.meta["systems"])), a.meta["prompt_id"]) for a in rows])
    assert tests.require_test(tid)
    return out


@pytest.mark.parametrize(("systems", "prompts", "items"), [(13, 2, 4), (50, 2, 10)])
def test_a_mos_test_with_many_systems_is_rated_to_full_balance(
    live, tmp_path, systems, prompts, items
):
    r = create(
        live,
        {
            "kind": "mos",
            "stimuli": str(folder(tmp_path, systems, prompts)),
            "items_per_rater": items,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    tid = body["test_id"]
    design = Design.from_dict(TestStore(live.state.store).require_test(tid).config["design"])
    assert design.partial and design.balanced_items == items  # not rounded up to a cycle
    need = math.lcm(items, systems * prompts) // items
    reps = need * items // (systems * prompts)  # 13 systems: 13 raters rate each cell twice
    assert full_balance_raters(design) == need
    plan = body["design"]["plan"][0]
    assert plan["items_per_rater"] == items and plan["full_balance_raters"] == need
    report = "\n".join(body["design"]["report"])
    assert f"Items per rater: {items} rated items (fewer than the {systems} systems" in report
    assert f"at a multiple of {need} raters" in report

    ids = rate(live, tid, need)
    got = cells(live, tid, ids)
    assert all(len(c) == items for c in got)
    assert all(len({s for s, _ in c}) == items for c in got)  # no system twice for a rater
    count = Counter(x for c in got for x in c)
    assert len(count) == systems * prompts and set(count.values()) == {reps}  # all alike
    per_system = Counter(s for c in got for s, _ in c)
    assert set(per_system.values()) == {prompts * reps}
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", timeout=120).json()
    mos = {row["system_id"]: row for row in res["mos"]}
    assert len(mos) == systems and all(row["n"] == prompts * reps for row in mos.values())


def test_a_50_system_ab_test_is_created_rated_and_balanced(live, tmp_path):
    r = create(live, {"kind": "ab", "stimuli": str(folder(tmp_path, 50, 1)), "items_per_rater": 10})
    assert r.status_code == 200, r.text
    tid = r.json()["test_id"]
    design = Design.from_dict(TestStore(live.state.store).require_test(tid).config["design"])
    assert design.units == 1225 and design.balanced_items == 10
    assert full_balance_raters(design) == 245  # lcm(10, 1225 pairs x 1 prompt) / 10
    assert "at a multiple of 245 raters" in "\n".join(r.json()["design"]["report"])

    ids = rate(live, tid, 6, ab=True)
    got = cells(live, tid, ids)
    pairs = Counter(s for c in got for s, _ in c)
    assert len(pairs) == 60 and set(pairs.values()) == {1}  # 60 different pairs, none twice
    votes = live.state.store.db.execute(
        "SELECT COUNT(*) FROM ab_votes WHERE test_id=?", [tid]
    ).fetchone()[0]
    assert votes == 60
    res = httpx.get(live.url + f"ll/admin/tests/{tid}/results", timeout=120).json()
    assert sum(row["n"] for row in res["ab"]) == 60


def test_mushra_refuses_13_systems_with_bs1534_reason(live, tmp_path):
    root = folder(tmp_path, 12, 1)
    (root / "natural").mkdir()
    sf.write(root / "natural" / "p1.wav", np.random.default_rng(1).standard_normal(8000) * 0.1, SR)
    before = live.state.store.db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
    r = create(live, {"kind": "mushra", "stimuli": str(root), "items_per_rater": 1})
    assert r.status_code == 400, r.text
    assert r.json()["detail"] == (
        "13 systems would put 15 signals on each MUSHRA screen (the systems, the reference "
        "among them as the hidden reference, and the 3.5 and 7 kHz anchors); ITU-R BS.1534-3 "
        "allows at most 12 per screen, so a MUSHRA test takes at most 10 systems including the "
        "reference"
    )
    after = live.state.store.db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
    assert after == before  # nothing half-made is left


def test_more_than_64_systems_are_refused_with_the_number(live):
    systems = [{"name": f"s{i}", "backend": "piper"} for i in range(65)]
    r = create(live, {"kind": "mos", "systems": systems, "prompts": ["One."]})
    assert r.status_code == 400 and r.json()["detail"] == "systems must be a list of 1..64"
