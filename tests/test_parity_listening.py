"""By ear and in a browser: a listening test made from a parity run and rated over the real
routes gives its decision beside the machine's; the report opens in Chromium with players that
play; the probe's fourth layer.

Real parts: the CPU voice renders both sides (deterministic, and through the ``qwen3-tts`` wire
profile), the metrics score them, ``listenlab parity --listening-test`` makes the test in a
SQLite file, ``listenlab serve``'s app serves it on 127.0.0.1 and scripted raters
(:class:`tests.support.rater.RaterClient`) pass the headphone screen and the familiarisation,
stream each clip over ``/ll/ws`` in real time and vote; Chromium is Debian's.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import httpx
import pytest

from app.cli import main
from app.store import open_store
from app.store.listening import TestStore
from tests.support.app_util import chromium, live_server
from tests.support.rater import RaterClient

EXTRA = ("torch", "distillmos", "resemblyzer", "silero_vad", "pyworld", "pocketsphinx", "jiwer")
MISSING = [m for m in EXTRA if importlib.util.find_spec(m) is None]
if MISSING:
    if os.environ.get("LISTENLAB_METRICS_REQUIRED"):
        pytest.fail(f"the [metrics] extra is required here; missing: {MISSING}", pytrace=False)
    pytest.skip(f"the [metrics] extra is not installed ({MISSING})", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background <b>now</b> & then.",
    "These days a chicken leg is a rare dish.",
]
CMOS_MARGIN = 1.0
ANSWERS = [0, 1, 0]
"""What the raters answer for the candidate against the reference (cycled over their items: each
of the 4 raters gives one 1 and two 0s over 3 items, so the crowd finds the candidate no worse)."""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One parity run of the CPU voice against itself through a wire profile, with its
    listening test in a fresh store."""
    root = tmp_path_factory.mktemp("parity-by-ear")
    prompts = root / "prompts.csv"
    with open(prompts, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text"])
        w.writerows([f"p{i}", t] for i, t in enumerate(TEXTS))
    db = root / "study.db"
    rc = main(
        ["parity", "--reference", "piper?deterministic=1", "--candidate",
         "piper?deterministic=1&profile=qwen3-tts", "--prompts", str(prompts), "-o",
         str(root / "out"), "--listening-test", str(db), "--cmos-margin", str(CMOS_MARGIN),
         "--items-per-rater", "3", "--quiet"]
    )  # fmt: skip
    d = json.loads((root / "out" / "parity.json").read_text(encoding="utf-8"))
    return {"root": root, "db": db, "rc": rc, "report": d}


def the_test(db: Path) -> dict:
    store = open_store(db)
    try:
        (t,) = TestStore(store).list_tests()  # a TestSummary; the config is the TestRow's
        return {**dataclasses.asdict(t), "config": TestStore(store).require_test(t.test_id).config}
    finally:
        store.close()


async def familiarise(c: RaterClient, tid: str) -> None:
    st = await c.status()
    if st["stage"] != "familiarise":
        return
    longest = 0.0
    for k in range(len(st["familiar"]["clips"])):
        got = await c.http.get(f"/ll/listen/{tid}/familiar/{k}", headers=c._h())
        got.raise_for_status()
        from evaluation.listening import screening

        audio, rate = screening.read_wav(got.content)
        longest = max(longest, len(audio) / rate)
    await asyncio.sleep(longest + 0.1)
    (await c.post("familiar")).raise_for_status()


async def rate(live, tid: str, offset: int) -> list[float]:
    """One rater: headphones, familiarisation, then every item: the check pairs for the clean
    side, the parity pairs by :data:`ANSWERS` for the candidate. Returns the candidate's CMOS."""
    store = live.state.store
    c = RaterClient(live.url, tid)
    await c.join()
    await c.headphone(correct=True)
    await familiarise(c, tid)
    st = await c.status()
    given, k = [], offset
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        a = next(x for x in store.assignments(tid, st["rater_id"]) if x.assignment_id == aid)
        await c.listen(aid, 0)
        await c.listen(aid, 1)
        first = a.meta["systems"][0]
        if a.role == "gold":  # a check pair: the clean side is where the anchor is not
            cmos = 3 if first == "__anchor__" else -3
        else:
            want = ANSWERS[k % len(ANSWERS)]
            k += 1
            given.append(float(want))
            cmos = want if a.meta["systems"][1] == "candidate" else -want
        r = await c.vote({"assignment_id": aid, "cmos": cmos})
        assert r.status_code == 200, r.text
        st = await c.status()
    await c.aclose()
    return given


@pytest.mark.slow
def test_a_listening_test_made_from_a_parity_run_gives_its_decision(run):
    from app.server import create_app

    assert run["rc"] == 0, run["report"]["reasons"]
    t = the_test(run["db"])
    assert t["kind"] == "parity_ab" and t["status"] == "open" and t["stimuli"] >= 6
    block = json.loads(t["config"]["parity"])
    assert block["cmos_margin"] == CMOS_MARGIN and block["machine"]["passed"] is True
    assert block["machine"]["run_id"] == run["report"]["run_id"]
    os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin
    app = create_app({"piper": "piper?deterministic=1"}, run["db"], mount_ui=False)
    with live_server(app) as live:

        async def crowd():
            return await asyncio.gather(*(rate(live, t["test_id"], i) for i in range(4)))

        given = sum(asyncio.run(crowd()), [])
        res = httpx.get(live.url + f"ll/admin/tests/{t['test_id']}/results", timeout=60).json()
    (row,) = res["parity"]
    assert row["votes"] == len(given) == 12 and row["raters"] == 4
    assert row["cmos_candidate"] == pytest.approx(sum(given) / len(given), abs=1e-3)
    assert row["cmos_low"] < row["cmos_candidate"] < row["cmos_high"]
    expected = "pass" if row["cmos_low"] >= -CMOS_MARGIN else "unsure"
    assert row["decision"] == expected == "pass"
    assert row["machine"] == "PASS" and row["margin"] == CMOS_MARGIN
    assert res["ab"], "the A/B tables of the same votes"
    from app.listening.admin.results_tab import summary_markdown
    from app.store import Store
    from evaluation.listening.results import test_results

    with Store.open(run["db"]) as s:
        tables = test_results(TestStore(s).test_data(t["test_id"]))
    text = summary_markdown(tables)
    assert "listeners: candidate CMOS" in text and "**pass**" in text
    assert "machine (listenlab parity): **PASS**" in text


@pytest.mark.browser
def test_the_report_opens_in_chromium_and_its_players_play(run):
    page_file = run["root"] / "out" / "parity.html"
    with chromium(["--autoplay-policy=no-user-gesture-required"]) as ctx:
        page = ctx.new_page()
        page.goto(page_file.as_uri())
        page.wait_for_function(
            "[...document.querySelectorAll('audio')].every(a => a.readyState >= 1)",
            timeout=30_000,
        )
        durations = page.evaluate(
            "[...document.querySelectorAll('audio')].map(a => [a.dataset.role, a.duration])"
        )
        assert len(durations) == 2 * len(TEXTS)
        assert all(d > 1.0 for _, d in durations), durations
        assert {r for r, _ in durations} == {"reference", "candidate"}
        assert page.evaluate("document.querySelector('audio').play().then(() => 'played')") == (
            "played"
        )
        page.wait_for_function("document.querySelector('audio').currentTime > 0.2", timeout=10_000)
        assert page.inner_text("#verdict") in {"PASS", "NOT SHOWN WORSE"}
        table = page.inner_text("#prompts")
        assert "<b>now</b> & then" in table  # the prompt's text shown as text
        assert page.evaluate("document.querySelectorAll('#prompts b').length") == 0
        assert page.evaluate("document.querySelectorAll('img').length") >= 2  # intervals, schedules


@pytest.mark.slow
def test_the_probe_runs_parity_as_its_fourth_layer(run, tmp_path):
    """The profile's takes as the reference folder: the probe of the same voice passes its
    fourth layer; of another voice (played faster, pitch up), fails it on the voice."""
    from evaluation.parity.damage import other_voice
    from evaluation.takes import Take

    ref = run["root"] / "out" / "audio" / "candidate"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    # the probe names one-prompt-per-line prompts p01, p02, ...: the reference files follow
    same, other = tmp_path / "same", tmp_path / "other"
    for i in range(len(TEXTS)):
        take = Take.load(ref / f"p{i}.wav")
        take.save(same / f"p{i + 1:02d}.wav")
        take.audio = other_voice(take.audio, take.sample_rate, 1.35)
        take.chunks = take.chunks[:1]
        take.chunks[0] = type(take.chunks[0])(0, 0.0, 0, len(take.audio))
        take.save(other / f"p{i + 1:02d}.wav")
    out = tmp_path / "probe"
    rc = main(["probe", "--backend", "piper?deterministic=1", "--concurrency", "1",
               "--prompts", str(prompts), "--reference", str(same), "-o", str(out)])  # fmt: skip
    d = json.loads((out / "probe.json").read_text(encoding="utf-8"))
    assert rc == 0 and d["parity"]["verdict"] != "fail", d["parity"]["reasons"]
    assert not [f for f in d["findings"] if f["layer"] == "parity" and f["level"] == "fail"]
    assert "Parity against" in (out / "probe.html").read_text(encoding="utf-8")
    rc = main(["probe", "--backend", "piper?deterministic=1", "--concurrency", "1",
               "--prompts", str(prompts), "--reference", str(other), "-o", str(out)])  # fmt: skip
    d = json.loads((out / "probe.json").read_text(encoding="utf-8"))
    failing = {
        f["evidence"]["measure"]
        for f in d["findings"]
        if f["layer"] == "parity" and f["level"] == "fail"
    }
    assert rc == 1 and d["parity"]["verdict"] == "fail"
    assert failing & {"speaker_sim", "f0_median"}, failing
    missing = tmp_path / "missing"
    missing.mkdir()
    rc = main(["probe", "--backend", "piper?deterministic=1", "--prompts", str(prompts),
               "--reference", str(missing)])  # fmt: skip
    assert rc == 2
