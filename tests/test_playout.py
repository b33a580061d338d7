"""The start rule's Python twin (evaluation/playout.py) on recorded and hand-made timelines.

``tests/playout_timelines.json`` holds arrival timelines (the wire profiles' schedules, two
recorded from the real Piper voice, and hand-made bursty / slow-start / stalling / jittery ones)
with the decisions the rule must make. The same file is replayed through the JavaScript twin in
Chromium (tests/test_browser_start.py), so both players decide alike.

Regenerate (after a deliberate change of the rule): ``.venv/bin/python -m tests.test_playout``
(``--rerecord`` records the two real-voice timelines again).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path

import pytest

from evaluation.playout import (
    POLICY,
    Learnt,
    Policy,
    ideal_start_s,
    learn,
    learn_from_takes,
    plan,
    simulate,
)

FIXTURE = Path(__file__).with_name("playout_timelines.json")


def load() -> dict:
    return json.loads(FIXTURE.read_text())


def run_case(case: dict, policy: Policy = POLICY):
    return simulate(
        case["arrivals_s"],
        case["durations_s"],
        case.get("text_chars", 0),
        sec_per_char=case.get("sec_per_char"),
        rate_prior=case.get("rate_prior"),
        chunk_prior=case.get("chunk_prior"),
        done_s=case.get("done_s"),
        policy=policy,
    )


CASES = load()["cases"]


# --------------------------------------------------------------------------- the fixture


def test_fixture_policy_is_the_rule_s_policy():
    assert load()["policy"] == POLICY.to_dict()


def test_the_docs_state_the_rule_s_numbers():
    """docs/playground.md's start-rule section quotes the policy's numbers (a change of a
    constant without the docs fails here)."""
    docs = (FIXTURE.parent.parent / "docs/playground.md").read_text()
    section = docs[docs.index("## The start rule") : docs.index("## Metrics card")]
    p = POLICY
    for text in (
        f"{p.margin_s * 1000:.0f} ms on the predicted part",
        f"rate taken {p.rate_margin * 100:.0f} % slower",
        f"text {p.text_margin * 100:.0f} % longer",
        f"chunks within {p.min_span_s * 1000:.0f} ms of the first",
        f"worth {p.rate_pseudo_s} s of observation",
        f"≤ {p.agree}× it",
        f"(its arrival + {p.first_shrink_s:.0f} s)",
        f"default {p.default_sec_per_char} s/char",
        f"{p.text_overrun * 100:.0f} % of what",
    ):
        assert text in " ".join(section.split()), text
    assert p.rate_cap == p.first_gap_trust == 1.0 and "never below real time" in section
    assert p.rate_shrink_s == 0.0  # the docs describe no shrink of a measured rate


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_decisions_match_the_fixture(case):
    got = run_case(case).to_dict()
    exp = case["expected"]
    assert got["start_s"] == pytest.approx(exp["start_s"], abs=1e-9)
    assert got["ideal_start_s"] == pytest.approx(exp["ideal_start_s"], abs=1e-9)
    assert got["decisions"] == pytest.approx(exp["decisions"], abs=1e-9)
    assert len(got["underruns"]) == len(exp["underruns"])
    for (p, s), (ep, es) in zip(got["underruns"], exp["underruns"], strict=True):
        assert p == pytest.approx(ep, abs=1e-9) and s == pytest.approx(es, abs=1e-9)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["kind"] == "predictable"], ids=lambda c: c["name"]
)
def test_predictable_schedules_start_near_the_ideal_without_underruns(case):
    """Paced schedules with a good text estimate: the issue's targets, exactly."""
    r = run_case(case)
    assert r.underruns == [], r.underruns
    assert r.start_s >= r.ideal_start_s
    assert r.late_by_s <= 0.05 + 0.10 * r.ideal_start_s, r.to_dict()


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["kind"] == "first-take"], ids=lambda c: c["name"]
)
def test_first_take_without_a_learnt_rate_is_safe_and_a_little_later(case):
    """No past take: a rate measured over a short span is shrunk, so the start is a bit later
    (within 50 ms + 15 % of the ideal start instead of 10 %), never early."""
    r = run_case(case)
    assert r.underruns == [], r.underruns
    assert r.start_s >= r.ideal_start_s
    assert r.late_by_s <= 0.05 + 0.15 * r.ideal_start_s, r.to_dict()


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["kind"] == "first-take-fast-first-chunk"],
    ids=lambda c: c["name"],
)
def test_a_first_chunk_far_faster_than_the_stream_costs_one_stall(case):
    """Nothing learnt, 320 ms at 150 ms (2x so far) from a 0.67x server: the rule cannot tell
    it from a 2x stream, starts on it and stalls once, sized to the rest (not chunk by chunk);
    waiting for a second chunk instead would cost every 2x first visit a chunk interval."""
    r = run_case(case)
    assert r.start_s < 0.2 < r.ideal_start_s
    assert len(r.underruns) == 1, r.to_dict()
    assert r.underruns[0][0] == pytest.approx(0.32)
    assert r.stall_s <= case["max_stall_s"], r.to_dict()
    # the rule before issue 32 (a lone chunk over its arrival + first_shrink_s) waited instead
    assert plan(case["arrivals_s"][:1], case["durations_s"][:1], text_chars=176).rate < 2.2


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["kind"] == "first-visit"], ids=lambda c: c["name"]
)
def test_first_visit_meets_the_promise(case):
    """A freshly started server: no learnt rate, no learnt length. The README's first-take
    promise: late by <= 50 ms + 15 % of the ideal start, at most one underrun."""
    assert case["sec_per_char"] is None and case.get("rate_prior") is None
    r = run_case(case)
    assert len(r.underruns) <= 1, r.to_dict()
    assert r.late_by_s <= 0.05 + 0.15 * r.ideal_start_s, r.to_dict()


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["kind"] == "first-visit-slower-voice"],
    ids=lambda c: c["name"],
)
def test_first_visit_of_a_voice_slower_than_the_default_stalls_once(case):
    """The default length estimate is too short for a 0.07 s/char voice: it starts before the
    ideal start and stalls once, sized to the rest (text_overrun), never chunk by chunk."""
    r = run_case(case)
    assert r.start_s < r.ideal_start_s
    assert len(r.underruns) == 1, r.to_dict()
    assert r.stall_s <= case["max_stall_s"], r.to_dict()
    # without text_overrun, small chunks stall one by one (2 s chunks: the last one only)
    chunkwise = run_case(case, Policy(text_overrun=0.0))
    assert len(chunkwise.underruns) >= 1
    if max(case["durations_s"]) < 0.5:
        assert len(chunkwise.underruns) > 1, chunkwise.to_dict()


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["kind"] == "no-text"], ids=lambda c: c["name"]
)
def test_without_a_text_each_stall_doubles_the_buffer(case):
    """No length estimate (a page that sends no text): stalls grow the buffer geometrically."""
    r = run_case(case)
    total = sum(case["durations_s"])
    first = case["durations_s"][0]
    assert 1 <= len(r.underruns) <= 1 + int(total / first).bit_length(), r.to_dict()
    assert r.underruns == sorted(r.underruns)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "hard"], ids=lambda c: c["name"])
def test_hard_schedules_stall_at_most_once(case):
    """Bursts, stalls, rate changes, a wrong text estimate: at most one stall, sized to need."""
    r = run_case(case)
    assert len(r.underruns) <= 1, r.to_dict()
    limit = case.get("max_stall_s")
    if limit is not None:
        assert r.stall_s <= limit, r.to_dict()
    # a stall is never counted chunk by chunk: the one resume covers the rest of the stream
    assert r.start_s is not None and r.start_s >= r.decisions[0]


def test_fixture_covers_the_issue_schedules():
    names = {c["name"] for c in CASES}
    for need in (
        "qwen3-2x",
        "qwen3-0.67x",
        "uniform320-0.67x",
        "uniform320-0.67x-remote-ttfa150",
        "jitter50-2x",
        "stall1.4-2x",
        "bursty",
        "slow-start-then-fast",
        "fast-then-stalling",
        "jittery-1x",
        "recorded-piper",
        "recorded-qwen3-2x",
        "qwen3-2x-first-visit",
        "qwen3-0.67x-first-visit",
        "uniform320-0.67x-first-visit",
        "qwen3-0.67x-first-visit-cold",
        "uniform320-0.67x-first-visit-cold",
    ):
        assert need in names


# ------------------------------------------ the uniform 0.67x row (issue #38, item 20)

ROW_38 = (
    "uniform320-0.67x-first-visit",
    "uniform320-0.67x-first-visit-cold",
    "uniform320-0.67x-later",
    "uniform320-0.67x-later-cold",
)


def promise_s(r, first: bool) -> float:
    """The README's promise: late by at most 50 ms + 15 % (first visit) or 10 % of the ideal."""
    return 0.05 + (0.15 if first else 0.10) * r.ideal_start_s


@pytest.mark.parametrize("name", ROW_38)
def test_the_uniform_0_67x_row_keeps_its_promise_with_margin(name):
    """The benchmark's schedule replayed (the CPU voice's paragraph, 9.93 s, in 320 ms chunks
    at 0.67x; first visit and later takes, idle and with a 1 s first sentence): no stall, and
    at most 0.6 of the promise (issue #38 measured 736 ms of 662 and 966 of 974 live)."""
    case = next(c for c in CASES if c["name"] == name)
    r = run_case(case)
    assert r.underruns == []
    assert 0 < r.late_by_s <= 0.6 * promise_s(r, "first-visit" in name), r.to_dict()


def _uniform_paragraph(total: float, ttfa: float = 0.05) -> tuple[list[float], list[float]]:
    """The paragraph spoken in ``total`` seconds, in 320 ms chunks at 0.67x real time."""
    u = _uniform(total, 0.32)
    return _paced(u, 0.67, ttfa), u


def _first_visit_band(step: float = 0.01) -> list[tuple[float, float, int]]:
    """(voice length, late / promise, underruns) of a first visit, voice by voice."""
    out = []
    for i in range(int(round(3.5 / step)) + 1):
        total = round(8.5 + i * step, 6)
        r = simulate(*_uniform_paragraph(total), len(PARA))
        out.append((total, r.late_by_s / promise_s(r, True), len(r.underruns)))
    return out


def test_no_rule_keeps_the_first_visit_promise_for_a_wider_band_of_voices():
    """A first visit knows no voice's speed. Two voices whose paragraph lasts D1 < D2 send the
    same arrivals until the shorter one ends (~D1/0.67 s, after both ideal starts), so any rule
    starts both at the same moment T. No stall for D2 needs T >= ideal(D2); the promise for D1
    needs T <= ideal(D1) + 50 ms + 15 % of it. So no rule keeps the promise without a stall for
    a voice longer than the D2 where ideal(D2) = 1.15 ideal(D1) + 50 ms. This rule's band of
    voices served without a stall and on time reaches exactly that bound: it is as wide as any
    rule's can be; only where it sits is a choice (the default 0.058 s/char)."""
    band = _first_visit_band()
    ok = [t for t, ratio, n in band if ratio <= 1 and n == 0]
    lo, hi = min(ok), max(ok)
    assert ok == [t for t, _, _ in band if lo <= t <= hi]  # one band, no holes
    assert (lo, hi) == (pytest.approx(9.26), pytest.approx(10.85))
    docs = " ".join((FIXTURE.parent.parent / "docs/playground.md").read_text().split())
    chars = len(PARA)
    assert f"band is {lo:.2f}–{hi:.2f} s for the paragraph" in docs
    assert f"({lo / chars:.4f}–{hi / chars:.4f} s/char)" in docs
    assert all(ratio > 1 and n == 0 for t, ratio, n in band if t < lo)  # faster: late
    assert all(n == 1 for t, _, n in band if t > hi)  # slower: one stall
    # the bound any rule has, from the ideal starts alone
    ideal_lo = ideal_start_s(*_uniform_paragraph(lo))
    bound = max(
        t for t, _, _ in band if ideal_start_s(*_uniform_paragraph(t)) <= 1.15 * ideal_lo + 0.05
    )
    assert hi == pytest.approx(bound, abs=0.011)
    # the CPU voice (9.93 s) is inside, well clear of the fast edge
    cpu = next(ratio for t, ratio, _ in band if t == pytest.approx(PIPER_PARA_S))
    assert cpu <= 0.6 and PIPER_PARA_S / lo >= 1.07


def test_later_takes_keep_the_promise_when_the_length_is_learnt_within_a_few_percent():
    """A later take learns the voice's seconds per character from past takes; on other texts
    it is off by a few percent. On this schedule a learnt length up to 4 % long keeps the 10 %
    promise, 5 % short still plays without a stall; longer costs the promise, shorter one stall
    (the same band argument as the first visit's, with 10 %)."""
    arr, dur = _uniform_paragraph(PIPER_PARA_S)
    chars = len(PARA)

    def later(factor: float):
        spc = PIPER_PARA_S / chars * factor
        return simulate(arr, dur, chars, sec_per_char=spc, rate_prior=0.67, chunk_prior=0.32)

    exact = later(1.0)
    assert exact.underruns == [] and exact.late_by_s / promise_s(exact, False) < 0.5
    for f in (0.95, 0.97, 1.0, 1.02, 1.04):
        r = later(f)
        assert r.underruns == [] and r.late_by_s <= promise_s(r, False), (f, r.to_dict())
    assert later(1.05).late_by_s > promise_s(later(1.05), False)
    assert len(later(0.94).underruns) == 1


# --------------------------------------------------------------------------- the rule itself


def test_ideal_start_formula():
    # chunk 1 arrives 1.0 s after 0.5 s of audio: playback may start at 0.5 s at the earliest
    assert ideal_start_s([0.1, 1.0, 1.2], [0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert ideal_start_s([], []) is None


def test_a_first_chunk_counts_at_its_average_rate_since_the_request():
    """Nothing learnt, one chunk: the stream is taken to go on at its average rate since the
    request (a server that generates as it goes was at least that fast). 320 ms after 0.25 s
    (a 2x stream on an idle machine) starts at once; after 0.5 s (a 0.67x stream's first
    chunk is due at 0.48 s) it waits; Qwen3's 80 ms first chunk waits for the 2 s one."""
    fast = plan([0.25], [0.32], text_chars=176)
    assert fast.reason == "first burst"
    assert fast.rate == pytest.approx(0.32 / 0.25 / (1 + POLICY.rate_margin))
    assert fast.start_at_s == pytest.approx(0.25)
    slow = plan([0.5], [0.32], text_chars=176)
    assert slow.rate == pytest.approx(0.64 / (1 + POLICY.rate_margin))
    assert slow.start_at_s > 5.0
    assert plan([0.25], [0.08], text_chars=176).start_at_s > 10.0


def test_a_first_burst_of_several_chunks_is_not_taken_as_a_rate():
    """Three chunks at once were held back somewhere (a proxy, a catch-up): their average since
    the request is taken as if first_shrink_s (1 s) more had passed, so the rule waits."""
    p = plan([0.2, 0.2, 0.21], [0.32] * 3, text_chars=176)
    assert p.reason == "first burst"
    assert p.rate == pytest.approx(0.96 / 1.21 / (1 + POLICY.rate_margin))
    assert p.start_at_s > 2.0


def test_a_learnt_rate_and_chunk_size_are_trusted_on_the_first_chunk():
    """A later take of a 2x backend whose first chunk took 1.4 s (a loaded voice): the learnt
    rate and chunk size say the next 320 ms chunk comes 160 ms later, so it starts at once.
    Without the learnt chunk size (a caller that knows only the rate) the first chunk's own
    average bounds the learnt rate, as before; on Qwen3's 80 ms chunk the learnt 2 s chunk
    makes it wait for the 2 s chunk."""
    u = plan([1.4], [0.32], text_chars=176, sec_per_char=0.0564, rate_prior=2.0, chunk_prior=0.32)
    assert u.reason == "learnt" and u.start_at_s == pytest.approx(1.4)
    blind = plan([1.4], [0.32], text_chars=176, sec_per_char=0.0564, rate_prior=2.0)
    assert blind.rate == pytest.approx(0.32 / 1.4 / (1 + POLICY.rate_margin))
    assert blind.start_at_s > 10.0
    q = plan([1.4], [0.08], text_chars=176, sec_per_char=0.0564, rate_prior=2.0, chunk_prior=2.0)
    # the 2 s chunk is due 1 s later at 2x; the start waits for it (with the safety margin)
    assert q.start_at_s == pytest.approx(1.4 + 2.0 / q.rate - 0.08 + POLICY.margin_s)
    assert 2.3 < q.start_at_s < 2.5


def test_one_long_fast_chunk_is_trusted_on_a_first_visit():
    """A voice that sends a sentence at a time: 3.7 s of audio after 0.9 s is > 1x even with
    first_shrink_s, so playback starts on it instead of waiting ~1 s for the next sentence."""
    p = plan([0.9], [3.7], text_chars=176)
    assert p.rate > 1.0 and p.start_at_s == pytest.approx(0.9)


def test_a_first_gap_is_trusted_when_it_agrees_with_the_learnt_rate():
    """1.5 s to the first chunk, then 2 s of audio 1 s later: with a learnt 2x it is the
    stream; with a learnt 0.8x it looks like a catch-up and the average since the request
    bounds the rate; with nothing learnt it is trusted up to real time (first_gap_trust)."""
    arr, dur = [1.54, 2.54], [0.08, 2.0]
    agrees = plan(arr, dur, text_chars=176, sec_per_char=0.058, rate_prior=2.0)
    doubts = plan(arr, dur, text_chars=176, sec_per_char=0.058, rate_prior=0.8)
    blind = plan(arr, dur, text_chars=176, sec_per_char=0.058)
    assert agrees.rate > 1.5 and agrees.start_at_s <= 2.54  # start on its arrival
    assert doubts.rate == pytest.approx(2.08 / 2.54 / 1.02)
    assert blind.rate == pytest.approx(1.0 / 1.02)


def test_done_starts_at_once_and_nothing_buffered_waits():
    assert plan([0.2, 0.4], [1.0, 1.0], done=True).start_at_s == pytest.approx(0.4)
    assert plan([0.2], [1.0], pos_s=1.0).start_at_s == float("inf")


def test_first_chunk_that_looks_fast_is_capped_by_the_learnt_rate():
    """The issue's remote case: 320 ms after 150 ms looks 2x, the backend is 0.67x."""
    fast_looking = plan([0.15], [0.32], text_chars=200, sec_per_char=0.07, rate_prior=0.67)
    assert fast_looking.rate < 0.67
    assert fast_looking.start_at_s > 5.0  # (14 s - 0.32 s) * (1/0.67 - 1) ~ 6.9 s


def test_faster_than_real_time_starts_on_arrival():
    p = plan([0.1, 0.2, 0.3], [0.5, 0.5, 0.5], text_chars=100, sec_per_char=0.07)
    assert p.start_at_s == pytest.approx(0.1)  # the observed chunks bind, not the prediction


def test_slower_stream_needs_more_buffer_for_longer_text():
    short = plan([0.5, 1.0], [0.32, 0.32], text_chars=50, sec_per_char=0.07)
    long = plan([0.5, 1.0], [0.32, 0.32], text_chars=500, sec_per_char=0.07)
    assert long.start_at_s > short.start_at_s + 10


def test_a_61ms_late_chunk_is_an_underrun_with_its_size_not_an_overlap():
    # a steady 2x stream whose fourth chunk is 61 ms past its deadline
    arr = [0.1, 0.3, 0.5, 0.12 + 1.5 + 0.061, 1.7]
    dur = [0.5, 0.5, 0.5, 0.5, 0.5]
    r = simulate(arr, dur, 36, sec_per_char=2.5 / 36, rate_prior=2.5)
    assert r.start_s == pytest.approx(0.12)
    assert len(r.underruns) == 1
    pos, stall = r.underruns[0]
    assert pos == pytest.approx(1.5)
    # the stall runs from the deadline the chunk missed to the resume (decided by the rule)
    assert stall == pytest.approx(r.decisions[1] + POLICY.lead_s - (r.start_s + 1.5), abs=1e-9)
    assert stall >= 0.061 + POLICY.lead_s - 1e-9


def test_simulate_rejects_bad_input():
    with pytest.raises(ValueError):
        simulate([0.1, 0.2], [0.5])
    with pytest.raises(ValueError):
        simulate([0.3, 0.2], [0.5, 0.5])
    assert simulate([], []).start_s is None


# --------------------------------------------------------------------------- the detector's player


def _timeline_take(arrivals_s, durations_s, text, sr=1000):
    """A take whose chunks (silent audio; the detector's underrun check reads the timeline)
    arrive at the given times."""
    import numpy as np

    from backends.base import SpeechRequest
    from evaluation.takes import ChunkRecord, Take

    chunks, off = [], 0
    for i, (a, d) in enumerate(zip(arrivals_s, durations_s, strict=True)):
        chunks.append(ChunkRecord(i, a * 1000, off, int(round(d * sr))))
        off += int(round(d * sr))
    return Take(
        request=SpeechRequest(text=text),
        backend="test",
        sample_rate=sr,
        channels=1,
        chunks=chunks,
        audio=np.zeros((off, 1), np.int16),
        total_ms=arrivals_s[-1] * 1000,
    )


def test_detector_and_probe_underruns_are_the_start_rule_s():
    """``analyze``'s underrun finding and metrics come from this rule (the player a listener of
    the Playground has), not from a fixed prebuffer; ``prebuffer_ms`` still selects one."""
    from evaluation.glitches import DetectorConfig, analyze, simulate_playback

    # 0.5 s chunks at 5x real time, then the server stalls 3 s before chunk 6
    arr = [0.1 + 0.1 * i for i in range(6)] + [3.6 + 0.1 * i for i in range(6)]
    dur = [0.5] * 12
    text = "x" * 103  # 12 x 0.5 s of audio at the default 0.058 s per character
    take = _timeline_take(arr, dur, text)
    exp = simulate(arr, dur, len(text), done_s=arr[-1])
    assert len(exp.underruns) == 1 and exp.underruns[0][0] == pytest.approx(3.0)
    a = analyze(take)
    under = [f for f in a.findings if f.kind == "underrun"]
    assert len(under) == 1 and under[0].seam == 6  # seam 6: chunk 6 starts there (boundary 5)
    assert under[0].time_s == pytest.approx(3.0)
    assert under[0].evidence["stall_ms"] == pytest.approx(exp.underruns[0][1] * 1000)
    assert under[0].evidence["player"] == "listenlab's player (start rule)"
    assert a.metrics["start_ms"] == pytest.approx(exp.start_s * 1000)
    assert a.metrics["ideal_start_ms"] == pytest.approx(ideal_start_s(arr, dur) * 1000)
    assert a.metrics["stall_ms"] == pytest.approx(exp.stall_s * 1000)
    # the server was 3 s late; 3 s of audio had been buffered at 5x, so at least ~0.5 s of stall
    assert a.metrics["stall_ms"] >= 500
    # a fixed 200 ms prebuffer player on the same timeline, by hand: starts at 0.1 s, chunk 6
    # is due at 0.1 + 3.0 = 3.1 s and arrives at 3.6 s: one 0.5 s stall
    st = simulate_playback(take, 200.0)
    assert [(s.chunk_index, round(s.stall_ms, 6)) for s in st] == [(6, 500.0)]
    b = analyze(take, config=DetectorConfig.from_dict({"prebuffer_ms": "200"}))
    assert [round(f.evidence["stall_ms"], 6) for f in b.findings if f.kind == "underrun"] == [500]
    assert DetectorConfig.from_dict({"prebuffer_ms": "rule"}).prebuffer_ms is None


# --------------------------------------------------------------------------- learnt priors


def test_learn_from_stored_takes_of_one_backend(tmp_path):
    """Real Piper takes in a real SQLite store: seconds per character and rate per system."""
    from app.store import Store, System
    from backends.base import SpeechRequest
    from backends.registry import load_backend
    from evaluation.takes import record

    backend = load_backend(
        "piper?deterministic=1&profile=custom&rate=22050&chunk_frames=1"
        "&first_frames=1&frame_hz=2&pace=3"
    )
    store = Store.open(tmp_path / "ll.db")
    assert learn(store, "p") == Learnt(None, None, 0)
    store.add_system(System("p", backend="piper", label="p"))
    texts = [
        "The quick brown fox jumps over the lazy dog, and then it runs away.",
        "Please call Stella and ask her to bring these things with her from the store.",
        "When the sunlight strikes raindrops in the air, they act as a prism.",
    ]

    async def go():
        return [await record(backend, SpeechRequest(text=t)) for t in texts]

    takes = asyncio.run(go())
    for t in takes:
        store.save_take(t, system_id="p")
    got = learn(store, "p")
    spc = sorted(t.duration_s / len(t.request.text) for t in takes)[1]
    assert got.takes == 3
    assert got.sec_per_char == pytest.approx(spc)
    rates = sorted(
        (t.frames - t.chunks[0].frames)
        / t.sample_rate
        / ((t.chunks[-1].arrival_ms - t.chunks[0].arrival_ms) / 1000)
        for t in takes
    )
    assert got.rate == pytest.approx(rates[1])
    assert got.rate > 0  # (about 3x unless the machine is too busy for Piper to keep up)
    # the same medians from the takes in hand (the probe learns this way)
    assert learn_from_takes(takes) == got
    assert learn(store, "other").takes == 0
    asyncio.run(backend.aclose())


# --------------------------------------------------------------------------- regenerating


def _paced(
    sizes: list[float],
    pace: float,
    ttfa: float = 0.0,
    jitter: float = 0.0,
    seed=0,
    stall_after: int | None = None,
    stall_s: float = 0.0,
) -> list[float]:
    rng = random.Random(seed)
    out, produced = [], 0.0
    for i, d in enumerate(sizes):
        produced += d
        t = ttfa + produced / pace + (stall_s if stall_after is not None and i > stall_after else 0)
        if jitter:
            t += rng.uniform(0, jitter)
        out.append(max(t, out[-1] if out else 0.0))
    return out


def _qwen_sizes(total: float) -> list[float]:
    sizes, left = [0.08], total - 0.08
    while left > 1e-9:
        sizes.append(min(2.0, left))
        left -= sizes[-1]
    return sizes


def _uniform(total: float, d: float) -> list[float]:
    n = int(total / d)
    return [d] * n + ([round(total - n * d, 6)] if total - n * d > 1e-6 else [])


def _profile_sizes(total: float, first: list[float], steady: float) -> list[float]:
    """Chunk sizes of a wire profile: its first chunks, then steady ones, the last the rest."""
    sizes, left = [], total
    for d in first:
        sizes.append(min(d, left))
        left -= sizes[-1]
    return sizes + (_uniform(left, steady) if left > 1e-6 else [])


FISH = ([4 * 2048 / 44100] * 6, 25 * 2048 / 44100)
"""Fish Speech's profile: six 4-frame chunks, then 25 frames, at 44100/2048 frames/s."""
COSY = ([0.6, 1.2], 2.4)
"""CosyVoice3's profile: 15, 30, then 60 tokens at 25 tokens/s."""


def _record(spec: str, texts: list[str]) -> list[tuple[list[float], list[float]]]:
    from backends.base import SpeechRequest
    from backends.registry import load_backend
    from evaluation.takes import record

    b = load_backend(spec)
    b.warm_up()

    async def go():
        await record(b, SpeechRequest(text="Warm up."))
        out = [await record(b, SpeechRequest(text=t)) for t in texts]
        await b.aclose()
        return out

    return [
        (
            [round(c.arrival_ms / 1000, 6) for c in t.chunks],
            [c.frames / t.sample_rate for c in t.chunks],
        )
        for t in asyncio.run(go())
    ]


PRIOR_TEXT = (
    "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow. "
    "The rainbow is a division of white light into many beautiful colors."
)
PARA = (
    "The old lighthouse keeper climbed the spiral stairs every evening. At the top, he wiped "
    "the salt from the great lens, lit the lamp, and watched the beam sweep across the water."
)


PIPER_PARA_S = 9.93
"""Seconds the CPU voice (en_US lessac) takes for PARA (0.0564 s per character)."""


def build(rerecord: bool = False) -> dict:
    chars = len(PARA)
    total = 12.0  # seconds of audio for PARA (about what the CPU voice says)
    spc = total / chars
    cases = []

    def add(name, kind, arr, dur, *, spc_factor=1.0, text=True, learnt=True, **extra):
        case = {
            "name": name,
            "kind": kind,
            "arrivals_s": [round(a, 6) for a in arr],
            "durations_s": [round(d, 6) for d in dur],
            "text_chars": chars if text else 0,
            # absent on a first visit: no past take of the backend, so no length estimate
            "sec_per_char": round(spc * spc_factor, 9) if learnt else None,
        }
        if extra.get("rate_prior") and len(dur) > 1:
            # what the app learns with the rate: the largest chunk after the first
            extra.setdefault("chunk_prior", round(max(dur[1:]), 6))
        case.update(extra)
        cases.append(case)

    q = _qwen_sizes(total)
    u = _uniform(total, 0.32)
    # rate_prior: the rate learnt from past takes of the backend (absent on a first take)
    add("qwen3-2x", "predictable", _paced(q, 2.0, 0.05), q, rate_prior=2.0)
    add("qwen3-2x-first-take", "first-take", _paced(q, 2.0, 0.05), q)
    add("qwen3-0.67x", "predictable", _paced(q, 0.67, 0.05), q, rate_prior=0.67)
    add("uniform320-0.67x", "predictable", _paced(u, 0.67, 0.05), u, rate_prior=0.67)
    add("uniform320-0.67x-first-take", "first-take", _paced(u, 0.67, 0.05), u)
    remote = [0.15] + [0.15 + a for a in _paced(u[1:], 0.67)]
    add("uniform320-0.67x-remote-ttfa150", "predictable", remote, u, rate_prior=0.67)
    # the price of trusting a lone first chunk's average rate (issue 32: a 2x stream starts on
    # its first chunk): a server whose first chunk comes far faster than its steady rate
    add(
        "uniform320-0.67x-remote-ttfa150-first-take",
        "first-take-fast-first-chunk",
        remote,
        u,
        max_stall_s=6.5,
    )
    add("jitter50-2x", "hard", _paced(u, 2.0, 0.05, jitter=0.05, seed=7), u, rate_prior=2.0)
    add(
        "stall1.4-2x",
        "hard",
        _paced(u, 2.0, 0.05, stall_after=12, stall_s=1.4),
        u,
        rate_prior=2.0,
        max_stall_s=1.4 + 0.3,
    )
    # a first chunk held back (a slow voice under load), then a burst catching up the schedule
    late = [max(a, 2.4) for a in _paced(q, 0.67, 0.05)]
    add("qwen3-0.67x-late-first-chunk", "hard", late, q, rate_prior=0.8)
    late = [max(a, 1.5) for a in _paced(u, 0.67, 0.05)]
    add("uniform320-0.67x-catch-up-burst", "hard", late, u, rate_prior=0.8)
    # hand-made
    bursty = [0.2 + 1.2 * (i // 3) for i in range(len(u))]  # 3 x 320 ms every 1.2 s (0.8x)
    add("bursty", "hard", bursty, u)
    slow_fast = _paced(u[:8], 0.5, 0.1)
    slow_fast += [slow_fast[-1] + a for a in _paced(u[8:], 3.0)]
    add("slow-start-then-fast", "hard", slow_fast, u, rate_prior=0.5)
    fs = _paced(u[:10], 2.5, 0.05)
    fs += [fs[-1] + 3.0 + a for a in _paced(u[10:], 2.5)]
    add("fast-then-stalling", "hard", fs, u, rate_prior=2.5, max_stall_s=3.0 + 0.3)
    add("jittery-1x", "hard", _paced(u, 1.05, 0.05, jitter=0.12, seed=3), u)
    add(
        "qwen3-0.67x-text-underestimated",
        "hard",
        _paced(q, 0.67, 0.05),
        q,
        spc_factor=0.9,
        rate_prior=0.67,
        max_stall_s=1.0,
    )
    add(
        "qwen3-0.67x-text-overestimated",
        "hard",
        _paced(q, 0.67, 0.05),
        q,
        spc_factor=1.1,
        rate_prior=0.67,
    )
    add("uniform320-0.67x-no-text", "no-text", _paced(u, 0.67, 0.05), u, text=False)
    add("single-chunk", "predictable", [0.4], [3.0])
    add(
        "late-by-61ms",
        "hard",
        [0.1, 0.3, 0.5, 1.681, 1.7],
        [0.5] * 5,
        rate_prior=2.5,
        max_stall_s=0.1,
    )
    # a later take whose first chunk came late (a loaded voice's first sentence): the first
    # gap agrees with the learnt rate, so it is trusted (no wait for a third chunk)
    add("qwen3-2x-slow-first-chunk", "predictable", _paced(q, 2.0, 1.5), q, rate_prior=2.0)
    # the same on uniform chunks, jittered and stalling (a loaded voice's first sentence took
    # 1 s): the learnt rate and chunk size are trusted on the first chunk
    add(
        "jitter50-2x-slow-first-chunk",
        "predictable",
        _paced(u, 2.0, 1.0, jitter=0.05, seed=7),
        u,
        rate_prior=2.0,
    )
    add(
        "stall1.4-2x-slow-first-chunk",
        "predictable",
        _paced(u, 2.0, 1.0, stall_after=12, stall_s=1.4),
        u,
        rate_prior=2.0,
    )
    for tag, (first, steady) in (("fish", FISH), ("cosyvoice3", COSY)):
        sizes = _profile_sizes(total, first, steady)
        add(f"{tag}-0.67x", "predictable", _paced(sizes, 0.67, 0.05), sizes, rate_prior=0.67)
    # first visits (a freshly started server: no past take, so neither a learnt rate nor a
    # learnt length); the CPU voice says PARA in PIPER_PARA_S, a slower voice at 0.07 s/char
    qp, up = _qwen_sizes(PIPER_PARA_S), _uniform(PIPER_PARA_S, 0.32)
    for ttfa, tag in ((0.05, ""), (1.0, "-cold")):  # cold: the voice's first sentence is slow
        add(f"qwen3-2x-first-visit{tag}", "first-visit", _paced(qp, 2.0, ttfa), qp, learnt=False)
        add(
            f"qwen3-0.67x-first-visit{tag}", "first-visit", _paced(qp, 0.67, ttfa), qp, learnt=False
        )
        add(
            f"uniform320-0.67x-first-visit{tag}",
            "first-visit",
            _paced(up, 0.67, ttfa),
            up,
            learnt=False,
        )
    # later takes of the benchmark's uniform 0.67x row (issue #38, item 20): the CPU voice's
    # real length, learnt exactly from the first visit, on an idle machine and a cold one
    for ttfa, tag in ((0.05, ""), (1.0, "-cold")):
        add(
            f"uniform320-0.67x-later{tag}",
            "predictable",
            _paced(up, 0.67, ttfa),
            up,
            spc_factor=PIPER_PARA_S / total,
            rate_prior=0.67,
        )
    # 3 s in a queue, or a voice whose first sentence took 1.2 s, before a 2x stream: one gap
    # is trusted up to real time (first_gap_trust), so no wait for a third chunk
    add("qwen3-2x-first-visit-queued-3s", "first-visit", _paced(qp, 2.0, 3.05), qp, learnt=False)
    add("qwen3-2x-first-visit-cold-1.2s", "first-visit", _paced(qp, 2.0, 1.2), qp, learnt=False)
    for tag, (first, steady) in (("fish", FISH), ("cosyvoice3", COSY)):
        sizes = _profile_sizes(PIPER_PARA_S, first, steady)
        for ttfa, cold in ((0.05, ""), (1.0, "-cold")):
            add(
                f"{tag}-0.67x-first-visit{cold}",
                "first-visit",
                _paced(sizes, 0.67, ttfa),
                sizes,
                learnt=False,
            )
    # the price: a first chunk held back, then a catch-up burst, on a 0.67x stream with
    # nothing learnt looks like real time after one gap; it starts early and stalls once
    add(
        "qwen3-0.67x-first-visit-catch-up-burst",
        "hard",
        [max(a, 2.4) for a in _paced(qp, 0.67, 0.05)],
        qp,
        learnt=False,
        max_stall_s=4.5,
    )
    # without a rate, the rule waits for a second chunk (one chunk interval late at most)
    add(
        "jitter50-2x-first-visit",
        "hard",
        _paced(up, 2.0, 0.05, jitter=0.05, seed=7),
        up,
        learnt=False,
    )
    add(
        "stall1.4-2x-first-visit",
        "hard",
        _paced(up, 2.0, 0.05, stall_after=12, stall_s=1.4),
        up,
        learnt=False,
        max_stall_s=1.4 + 0.3,
    )
    slow = chars * 0.07  # a voice slower than the default estimate: on time, then one stall
    qs, us = _qwen_sizes(slow), _uniform(slow, 0.32)
    add(
        "qwen3-0.67x-first-visit-slower-voice",
        "first-visit-slower-voice",
        _paced(qs, 0.67, 0.05),
        qs,
        learnt=False,
        max_stall_s=1.5,
    )
    add(
        "uniform320-0.67x-first-visit-slower-voice",
        "first-visit-slower-voice",
        _paced(us, 0.67, 0.05),
        us,
        learnt=False,
        max_stall_s=2.0,
    )
    # recorded from the real CPU voice (plain, and through the Qwen3-TTS wire profile at 2x);
    # the rate prior is learnt from an earlier take of the same backend, as the app does
    # (kept from the fixture unless ``--rerecord``: a recording depends on the machine's load)
    kept = {} if rerecord or not FIXTURE.exists() else {c["name"]: c for c in load()["cases"]}
    for name, spec in (
        ("recorded-piper", "piper?deterministic=1"),
        ("recorded-qwen3-2x", "piper?deterministic=1&profile=qwen3-tts"),
    ):
        if name in kept:
            old = {k: v for k, v in kept[name].items() if k != "expected"}
            # recorded before the chunk size was learnt: the same voice's largest later chunk
            old.setdefault("chunk_prior", round(max(old["durations_s"][1:]), 6))
            cases.append(old)
            continue
        (pa, pd), (arr, dur) = _record(spec, [PRIOR_TEXT, PARA])
        prior = (sum(pd) - pd[0]) / (pa[-1] - pa[0]) if len(pa) > 1 else None
        add(
            name,
            "predictable",
            arr,
            dur,
            spc_factor=sum(dur) / total,
            rate_prior=round(prior, 6) if prior else None,
            chunk_prior=round(max(pd[1:]), 6) if len(pd) > 1 else None,
        )
    # the CPU voice without a profile sends a sentence at a time: on a first visit its first
    # sentence, long and fast, is trusted as the rate (the recording above, nothing learnt)
    piper = next(c for c in cases if c["name"] == "recorded-piper")
    add(
        "recorded-piper-first-visit",
        "first-visit",
        piper["arrivals_s"],
        piper["durations_s"],
        learnt=False,
    )
    for c in cases:
        c["expected"] = run_case(c).to_dict()
    return {"policy": POLICY.to_dict(), "text": PARA, "cases": cases}


if __name__ == "__main__":
    data = build(rerecord="--rerecord" in sys.argv)
    FIXTURE.write_text(json.dumps(data, indent=1) + "\n")
    for c in data["cases"]:
        e = c["expected"]
        print(
            f"{c['name']:36s} ideal {e['ideal_start_s']:6.2f} start {e['start_s']:6.2f} "
            f"late {e['late_by_s']:+.2f} underruns {len(e['underruns'])} stall {e['stall_s']:.2f}"
        )
    sys.exit(0)
