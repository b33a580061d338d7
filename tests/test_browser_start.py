"""The start rule in the browser: the JS twin decides like evaluation/playout.py, and the live
player follows it on real streams (real server, real Piper through wire profiles, Chromium).

Assertions are on what the player recorded (its chunk arrivals, its decisions), replayed through
the rule, so they hold with both cores busy: a loaded machine changes the arrivals, and the
rule's answer with them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from app.playground.ui import player_core_js
from app.server import create_app
from evaluation.playout import POLICY, simulate
from tests.support.app_util import live_server, open_playground, tmp_db
from tests.support.playout_check import (
    assert_follows_the_rule,
    behind_schedule,
    promise,
    replay,
    scheduled,
    speak_record,
)

pytestmark = pytest.mark.browser

FIXTURE = json.loads(Path(__file__).with_name("playout_timelines.json").read_text())
SHORT = "The old lighthouse keeper climbed the stairs every evening, and lit the lamp at the top."
PARA = FIXTURE["text"]  # the paragraph of the benchmark and the fixture
UNIFORM = "piper?deterministic=1&profile=custom&rate=24000&channels=1&first_frames=4&chunk_frames=4"
SCHEDULES = {
    # Qwen3-TTS's shipped schedule (80 ms, then 2 s chunks) at 2x real time
    "qwen3-2x": "piper?deterministic=1&profile=qwen3-tts",
    # uniform 320 ms chunks at 0.67x real time (slower than real time)
    "uniform320-0.67x": UNIFORM + "&pace=0.67",
    # uniform 320 ms chunks at 2x with a 1.4 s stall after chunk 6
    "stall1.4": UNIFORM + "&pace=2&stall=6:1.4",
    # uniform 320 ms chunks at 2x, each late by 0..50 ms
    "jitter50": UNIFORM + "&pace=2&jitter_ms=50&seed=5",
}

# the first-visit schedules, under labels no other test speaks on (no history)
FIRST_VISIT = {
    "first-qwen3-2x": SCHEDULES["qwen3-2x"],
    "first-qwen3-0.67x": "piper?deterministic=1&profile=qwen3-tts&pace=0.67",
    "first-uniform320-0.67x": SCHEDULES["uniform320-0.67x"],
}


@pytest.fixture(scope="module")
def server():
    app = create_app({"piper": "piper?deterministic=1", **SCHEDULES, **FIRST_VISIT}, tmp_db())
    with live_server(app) as live:
        yield live


def test_js_twin_makes_the_fixture_s_decisions(browser):
    """Every timeline of tests/playout_timelines.json, through LLPlayer.simulate in Chromium."""
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=player_core_js())
    page.add_script_tag(content=player_core_js())  # loading it twice is harmless
    assert page.evaluate("window.LLPlayer.POLICY") == pytest.approx(POLICY.to_dict())
    got = page.evaluate(
        """(cases) => cases.map((c) => LLPlayer.simulate(c.arrivals_s, c.durations_s, {
            text_chars: c.text_chars, sec_per_char: c.sec_per_char, rate_prior: c.rate_prior,
            chunk_prior: c.chunk_prior, done_s: c.done_s }))""",
        FIXTURE["cases"],
    )
    assert len(got) == len(FIXTURE["cases"]) >= 12
    for case, g in zip(FIXTURE["cases"], got, strict=True):
        exp = case["expected"]
        assert g["start_s"] == pytest.approx(exp["start_s"], abs=1e-9), case["name"]
        assert g["ideal_start_s"] == pytest.approx(exp["ideal_start_s"], abs=1e-9), case["name"]
        assert g["decisions"] == pytest.approx(exp["decisions"], abs=1e-9), case["name"]
        assert len(g["underruns"]) == len(exp["underruns"]), case["name"]
        for (p, s), (ep, es) in zip(g["underruns"], exp["underruns"], strict=True):
            assert (p, s) == pytest.approx((ep, es), abs=1e-9), case["name"]
    page.close()


def test_js_and_python_twins_agree_on_random_timelines(browser):
    """Beyond the fixture: 300 seeded random timelines (bursts, stalls, tiny and sentence-long
    chunks, with and without learnt priors), the same decisions in both twins."""
    rng = random.Random(20)
    cases = []
    for _ in range(300):
        n = rng.randint(1, 30)
        durs = [rng.choice([0.08, 0.32, 2.0, rng.uniform(0.02, 4.0)]) for _ in range(n)]
        pace = rng.choice([0.5, 0.67, 1.0, 2.0, 4.0])
        t, arr = rng.uniform(0.02, 3.0), []
        for d in durs:
            t += d / pace * rng.choice([0.0, 0.5, 1.0, 1.0, 1.0, 2.5]) + rng.uniform(0, 0.05)
            arr.append(round(t, 6))
        learnt = rng.random() < 0.5
        cases.append(
            {
                "arrivals_s": arr,
                "durations_s": [round(d, 6) for d in durs],
                "text_chars": rng.choice([0, 20, 176, 600]),
                "sec_per_char": rng.uniform(0.04, 0.09) if learnt else None,
                "rate_prior": rng.choice([None, 0.5, 0.8, 2.0, 3.0]) if learnt else None,
                "chunk_prior": rng.choice([None, 0.08, 0.32, 2.0]) if learnt else None,
            }
        )
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=player_core_js())
    got = page.evaluate(
        """(cases) => cases.map((c) => LLPlayer.simulate(c.arrivals_s, c.durations_s, {
            text_chars: c.text_chars, sec_per_char: c.sec_per_char, rate_prior: c.rate_prior,
            chunk_prior: c.chunk_prior }))""",
        cases,
    )
    for c, g in zip(cases, got, strict=True):
        exp = simulate(
            c["arrivals_s"],
            c["durations_s"],
            c["text_chars"],
            sec_per_char=c["sec_per_char"],
            rate_prior=c["rate_prior"],
            chunk_prior=c["chunk_prior"],
        )
        assert g["decisions"] == pytest.approx(exp.decisions, abs=1e-9), c
        assert len(g["underruns"]) == len(exp.underruns), c
        for got_u, exp_u in zip(g["underruns"], exp.underruns, strict=True):
            assert got_u == pytest.approx(list(exp_u), abs=1e-9), c
    assert sum(1 for g in got if g["underruns"]) > 10  # the timelines do exercise resumes
    page.close()


@pytest.mark.parametrize("backend", list(SCHEDULES))
def test_live_player_follows_the_rule(server, browser, backend):
    page = open_playground(browser, server.url)
    speak_record(page, backend, SHORT)  # a past take of this backend: the rule's learnt priors
    g = speak_record(page, backend, SHORT)
    assert g["status"] == "ok"
    learnt = g["start"]["learnt"]
    assert learnt["takes"] >= 1 and learnt["sec_per_char"] > 0
    assert_follows_the_rule(page, g)
    page.close()


@pytest.mark.parametrize("backend", list(FIRST_VISIT))
def test_live_first_visit_follows_the_rule_and_meets_the_promise(server, browser, backend):
    """A backend's first-ever take (nothing learnt): the live player decides as the rule does
    without priors, and the rule starts within the README's first-take promise (late by
    <= 50 ms + 15 % of the ideal start, <= 1 underrun) on the backend's schedule.

    The promise is about the schedule. A busy machine can send a chunk late and the rest in a
    burst (the profile's send times are absolute); a rule that sees only the past cannot know
    the burst is coming, so on such a record it may start later than the promise. The promise
    is therefore checked on the schedule itself (the profile's pace over the chunks the player
    received, from their first arrival), and on the player's own record whenever the machine
    kept to the schedule."""
    page = open_playground(browser, server.url)
    g = speak_record(page, backend, PARA)
    assert g["status"] == "ok"
    assert g["start"]["learnt"] == {
        "sec_per_char": None,
        "rate": None,
        "chunk_s": None,
        "takes": 0,
    }
    sim = assert_follows_the_rule(page, g)  # on the record, whatever the machine's load
    record = json.dumps({"arrivals": g["arrivals"], "durations": g["durations"]})
    sent = scheduled(FIRST_VISIT[backend], g["arrivals"], g["durations"])
    on_schedule = replay(g, arrivals=sent, done_s=sent[-1])
    assert len(on_schedule.underruns) <= 1, (on_schedule.to_dict(), record)
    assert on_schedule.late_by_s <= promise(on_schedule), (on_schedule.to_dict(), record)
    behind = behind_schedule(g, sent)
    if behind <= 0.03:  # the machine kept to the schedule: the record is the schedule
        assert len(sim.underruns) <= 1, (sim.to_dict(), behind, record)
        assert sim.late_by_s <= promise(sim), (sim.to_dict(), behind, record)
    page.close()


def test_slow_stream_starts_late_enough_and_close_to_the_ideal(server, browser):
    """0.67x real time: the rule waits for the predicted need (not for the first chunk) and
    starts within the issue's target of the ideal start (late by <= 50 ms + 10 % of it), on the
    backend's schedule; the live player follows the rule on its own record, and meets the
    target on it whenever the machine kept to the schedule (plus timer slack under load)."""
    page = open_playground(browser, server.url)
    speak_record(page, "uniform320-0.67x", SHORT)
    g = speak_record(page, "uniform320-0.67x", SHORT)
    assert g["status"] == "ok" and g["start"]["learnt"]["takes"] >= 1
    assert_follows_the_rule(page, g)
    sent = scheduled(SCHEDULES["uniform320-0.67x"], g["arrivals"], g["durations"])
    on_schedule = replay(g, arrivals=sent, done_s=sent[-1])
    assert on_schedule.ideal_start_s - sent[0] > 1.0  # slower than real time: well after chunk 1
    assert on_schedule.start_s >= sent[0] + 0.5, on_schedule.to_dict()
    assert len(on_schedule.underruns) <= 1, on_schedule.to_dict()
    target = 0.05 + 0.10 * on_schedule.ideal_start_s
    assert on_schedule.late_by_s <= target, on_schedule.to_dict()
    if behind_schedule(g, sent) <= 0.03:
        ideal, actual = g["idealStartMs"] / 1000, g["actualStartMs"] / 1000
        assert actual >= g["arrivals"][0] + 0.5
        assert g["underruns"]["count"] <= 1
        assert actual - ideal <= 0.05 + 0.10 * ideal + 0.5, (actual, ideal)
    page.close()
