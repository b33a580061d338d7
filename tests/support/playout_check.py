"""The start rule checked on what the live player recorded: its chunk arrivals replayed through
``evaluation.playout.simulate``. A loaded machine changes the arrivals, and the rule's answer
with them, so these checks hold with both cores busy; claims about a backend's own schedule
are checked on that schedule (``scheduled``), not on wall-clock luck."""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import pytest

from backends.profile import profile_from_params
from evaluation.playout import ideal_start_s, simulate
from tests.support.app_util import speak, wait_finished


def speak_record(page, backend: str, text: str) -> dict:
    """Speak ``text`` on ``backend`` to the end; what the player recorded of the start rule,
    and ``lagMs``: the page's worst event-loop lag meanwhile (a 20 ms heartbeat's lateness),
    the latency a start decided by a timer may have on a busy machine."""
    page.evaluate(
        """() => { clearInterval(window.__llLagTimer);
        const L = window.__llLag = {max: 0, last: performance.now()};
        window.__llLagTimer = setInterval(() => { const now = performance.now();
          L.max = Math.max(L.max, now - L.last - 20); L.last = now; }, 20); }"""
    )
    speak(page, text, backend)
    wait_finished(page, 120_000)
    return {"text": text} | page.evaluate(
        """() => { const g = window.listenlab.last;
        return {status: g.status, sr: g.sr, textChars: g.textChars, start: g.start,
          arrivals: g.chunks.map((c) => c.arrivalMs / 1000), durations: g.chunks.map((c) => c.frames / g.sr),
          firstScheduledMs: g.firstScheduledMs, doneMs: g.doneMs, underruns: g.underruns,
          idealStartMs: g.idealStartMs, actualStartMs: g.actualStartMs, plans: g.plans,
          prebufferMs: g.prebufferMs, whens: g.chunks.map((c) => c.whenCtx),
          lagMs: window.__llLag.max}; }"""
    )


def replay(g: dict, arrivals: list[float] | None = None, done_s: float | None = None):
    """The rule on ``arrivals`` (default: the player's record) with the take's learnt priors."""
    learnt = g["start"]["learnt"]
    return simulate(
        g["arrivals"] if arrivals is None else arrivals,
        g["durations"],
        g["textChars"],
        sec_per_char=learnt["sec_per_char"],
        rate_prior=learnt["rate"],
        chunk_prior=learnt["chunk_s"],
        done_s=g["doneMs"] / 1000 if done_s is None else done_s,
    )


def assert_follows_the_rule(page, g: dict):
    """The live player made the rule's decisions on its own arrival record; the simulation.

    Stalls: at most one, or as many as the rule itself makes on this record (a starved server
    sends late and then in a burst; no rule that sees only the past avoids that)."""
    assert g["textChars"] == len(g["text"])
    arr, dur = g["arrivals"], g["durations"]
    # the card's ideal start is the formula on the player's own arrival record
    assert g["idealStartMs"] == pytest.approx(ideal_start_s(arr, dur) * 1000, abs=1e-6)
    sim = replay(g)
    decided = g["firstScheduledMs"] / 1000
    assert decided >= sim.decisions[0] - 0.002, (decided, sim.to_dict(), g["plans"])
    # never earlier than allowed; later only by timer/event-loop latency on a busy machine:
    # 0.5 s, or more when the page's own heartbeat saw its event loop held up longer
    slack = 0.5 + max(0.0, g.get("lagMs") or 0.0) / 1000
    assert decided <= sim.decisions[0] + slack, (decided, slack, sim.to_dict(), g["plans"])
    # the first plan that allowed the start is the one the player logged before starting
    allowed = [p for p in g["plans"] if p["at_s"] <= decided + 1e-6]
    assert allowed and allowed[-1]["start_at_s"] <= decided + 1e-6
    # every stall is accounted with its size
    u = g["underruns"]
    assert u["count"] <= max(1, len(sim.underruns)), (u, sim.to_dict())
    assert len(u["events"]) == u["count"]
    assert u["stallMs"] == pytest.approx(sum(e["stall_ms"] for e in u["events"]))
    # sample-accurate, never overlapping: on the audio clock each chunk starts exactly at the
    # previous one's end, or later after a stall (by that stall's size)
    w = g["whens"]
    gaps = [w[k] - (w[k - 1] + dur[k - 1]) for k in range(1, len(dur))]
    assert min(gaps) >= -1e-6, gaps
    assert sum(1 for x in gaps if x > 1e-6) == u["count"]
    assert sum(gaps) * 1000 == pytest.approx(u["stallMs"], abs=1.0)
    if page is not None:
        card = page.inner_text("#ll-start-note")
        assert "ideal start" in card
        assert page.inner_text("#ll-m-ideal").endswith("ms")
    return sim


def scheduled(spec: str, arrivals: list[float], durations: list[float]) -> list[float]:
    """When the wire profile of backend ``spec`` sends each chunk, counted from the first one's
    arrival: chunk k goes once the audio through chunk k is generated at the profile's pace."""
    params = dict(parse_qsl(spec.split("?", 1)[1]))
    params.pop("deterministic", None)
    p = profile_from_params(params)
    assert p.pace > 0 and not p.jitter_ms and not p.ttfa_ms
    done = np.cumsum(durations)
    return [arrivals[0] + (d - durations[0]) / p.pace for d in done]


def behind_schedule(g: dict, sent: list[float]) -> float:
    """How far (s) the record fell behind the schedule at its worst."""
    return max(a - s for a, s in zip(g["arrivals"], sent, strict=True))


def promise(sim) -> float:
    """The README's first-take promise: how late the start may be."""
    return 0.05 + 0.15 * sim.ideal_start_s
