"""The player's start rule, in Python: when to start playing a stream, and when to resume.

This is the twin of ``plan`` / ``simulate`` in ``app/player/static/player-core.js`` (the browser
player). Both must give the same decisions on the same arrival timeline; a JSON fixture of
timelines (``tests/playout_timelines.json``) is checked against both.

The rule. Playing from audio position ``pos`` at time ``T`` never runs dry iff every chunk
``k`` at or after ``pos`` arrives before its deadline ``T + (offset_k - pos)``, so the earliest
safe start is ``max_k (arrival_k - (offset_k - pos))`` -- the *ideal start* when ``pos = 0``.
Before the stream ends, the chunks still to come are predicted:

* the generation rate ``r`` (seconds of audio per second) is measured online from all arrivals
  so far, ``(received - first burst + prior * tau) / (last arrival - first arrival + tau)``
  (the first burst: the chunks that arrived within ``min_span_s`` of the first; the prior is the
  rate learnt from past takes with tau = 0.5 s, or 0 with tau = 0.1 s without one, so a rate
  measured over a short span is pulled toward what is known, never inflated by jitter), and at
  most the same measure taken after the second burst (a first chunk held back, then a catch-up
  burst, must not look like a fast server; a slow start -- a cold voice, a queue -- is not held
  against the stream); while only one gap is known, which cannot tell the two apart, at most
  the average rate since the request, unless that gap agrees with the learnt rate (no faster
  than ``agree`` = 1.5 x it); with nothing learnt, up to real time at least
  (``first_gap_trust``: a cold voice's slow first chunk must not cost a chunk interval on a
  first visit; the price, a first chunk held back and a catch-up burst on a stream slower than
  real time, is one stall). Before a second arrival time exists, a rate learnt from
  past takes of the same backend is used, capped by what the first chunk shows; with neither,
  the first burst's audio over ``first arrival + first_shrink_s`` (1 s): a voice that sends
  a sentence at a time is trusted from its first chunk, while a short first chunk gives a low
  rate, so the rule waits for the next one;
* the audio still to come is the text's length times the seconds per character learnt from
  past takes of that backend (default 0.058 s/char), at least one more chunk (without a text:
  as much again as arrived so far); once more audio arrived than the text was worth, the rest
  is taken as ``text_overrun`` (20 %) of what arrived, so a voice slower than the estimate
  stalls once, not chunk by chunk;
* future chunks are as large as the largest seen so far, or as much audio as arrives in the
  longest gap seen (so bursts count as one big chunk).

Because predicted arrivals grow linearly with the offset, the maximum over predicted chunks is
at the first or the last of them, so the rule is O(chunks). It starts at
``max(observed term, predicted term + margin)``, where the stated safety margin is
``margin_s`` (60 ms) with the rate taken ``rate_margin`` (2 %) slower and the remaining audio
``text_margin`` (2 %) longer than estimated. It re-plans after every chunk, and after running dry
it resumes by the same rule from the position where the audio ran out (one stall sized to the
remaining need, not one per chunk). A chunk that arrives less than ``late_tol_s`` before its
deadline also counts as running dry: the player never schedules audio in the past, so a late
chunk is an underrun with its size, never an overlap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

INF = math.inf


@dataclass(frozen=True)
class Policy:
    """The rule's constants (the same numbers are in ``player-core.js``'s ``POLICY``)."""

    margin_s: float = 0.06
    rate_margin: float = 0.02
    text_margin: float = 0.02
    min_span_s: float = 0.05
    """Chunks within this time of the first are one burst; a rate needs a later arrival."""
    rate_pseudo_s: float = 0.5
    """Weight of the learnt rate, as seconds of observation at that rate."""
    rate_cap: float = 1.0
    """The measured rate is at most this times the average rate since the request."""
    first_gap_trust: float = 1.0
    """Without a learnt rate, one gap's measured rate is trusted up to this (x real time),
    whatever the average since the request (a freshly started voice's first chunk is slow)."""
    agree: float = 1.5
    """A first gap at most this times the learnt rate agrees with it (is not a catch-up)."""
    rate_shrink_s: float = 0.0
    """Without a learnt rate, a rate of 0 observed for this long (shrinks short-span rates). Off:
    at 0.1 s it took ~2 % off a first visit's rate over a whole take, 0.2-0.4 s of lateness at
    0.67x, and a short span is already bounded (``rate_cap``, ``first_gap_trust``)."""
    first_shrink_s: float = 1.0
    """Before a second arrival, without a learnt rate: the rate is the audio that arrived over
    (the time since the request + this)."""
    default_sec_per_char: float = 0.058
    """Prior for the utterance length when no past take of the backend is known (~17 chars/s:
    the CPU voice speaks 0.056 s/char, the bundled human reference clip 0.059). A slower voice
    then starts on time and stalls once (see ``text_overrun``); a prior on the slow side made
    every first take of a faster voice start seconds late."""
    text_overrun: float = 0.2
    """Once more audio than the text estimate arrived, the rest is planned as this fraction of
    what arrived (one stall sized to it, not one per chunk)."""
    lead_s: float = 0.02
    """Scheduling lead: audio starts this long after the decision."""
    late_tol_s: float = 0.005
    """A chunk that arrives less than this before its deadline is too late to schedule."""

    def to_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


POLICY = Policy()


@dataclass(frozen=True)
class Plan:
    """One decision: start (or resume) at ``start_at_s``; ``INF`` means wait for more audio."""

    start_at_s: float
    rate: float | None
    chunk_s: float
    remaining_s: float
    reason: str


@dataclass
class PlayoutResult:
    """What a player following the rule does on one arrival timeline (seconds since request)."""

    start_s: float | None
    """When the first sound is scheduled (decision + lead); None if nothing ever played."""
    ideal_start_s: float | None
    underruns: list[tuple[float, float]] = field(default_factory=list)
    """(audio position where it ran dry, stall seconds), in order."""
    decisions: list[float] = field(default_factory=list)
    """Decision times (first start, then each resume)."""

    @property
    def late_by_s(self) -> float | None:
        if self.start_s is None or self.ideal_start_s is None:
            return None
        return self.start_s - self.ideal_start_s

    @property
    def stall_s(self) -> float:
        return sum(s for _, s in self.underruns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_s": self.start_s,
            "ideal_start_s": self.ideal_start_s,
            "late_by_s": self.late_by_s,
            "underruns": [list(u) for u in self.underruns],
            "stall_s": self.stall_s,
            "decisions": list(self.decisions),
        }


def ideal_start_s(arrivals_s: Sequence[float], durations_s: Sequence[float]) -> float | None:
    """The earliest start that never runs dry: ``max_k (arrival_k - audio before k)``."""
    best, before = -INF, 0.0
    for a, d in zip(arrivals_s, durations_s, strict=True):
        best = max(best, a - before)
        before += d
    return best if arrivals_s else None


def generation_rate(
    arrivals_s: Sequence[float],
    durations_s: Sequence[float],
    received: float,
    rate_prior: float | None,
    policy: Policy = POLICY,
    chunk_prior: float | None = None,
) -> tuple[float, str]:
    """Audio seconds per second the stream delivers, as :func:`plan` relies on it (its margin
    taken off), and how it was found: ``measured``, ``learnt`` or ``first burst``."""
    n = len(arrivals_s)
    a_last = arrivals_s[n - 1]
    # the generation rate, measured online: the audio that arrived after the first burst (the
    # chunks within min_span_s of the first) over the time since the first chunk
    first_burst, k2 = 0.0, n
    for k in range(n):
        if arrivals_s[k] - arrivals_s[0] < policy.min_span_s:
            first_burst += durations_s[k]
        elif k2 == n:
            k2 = k  # the first chunk of the second burst
    second_burst = 0.0
    for k in range(k2, n):
        if arrivals_s[k] - arrivals_s[k2] < policy.min_span_s:
            second_burst += durations_s[k]
    span = a_last - arrivals_s[0]
    if span >= policy.min_span_s:
        # the learnt rate counts as rate_pseudo_s seconds of evidence (without one, a rate of 0
        # does: a rate measured over a short span is noisy, so it is shrunk, never inflated)
        prior = rate_prior or 0.0
        tau = policy.rate_pseudo_s if rate_prior else policy.rate_shrink_s
        rate = (received - first_burst + prior * tau) / (span + tau)
        span2 = a_last - arrivals_s[k2]
        if span2 >= policy.min_span_s:
            # a late first chunk followed by a catch-up burst looks fast: once a third burst is
            # here, the rate after the second one bounds it (the first gap is where a catch-up
            # shows; a slow start -- a cold voice, a queue -- is not held against the stream).
            # A bound needs no shrinking toward 0: without a learnt rate it is the plain measure
            tau2 = tau if rate_prior else 0.0
            rate = min(
                rate, (received - first_burst - second_burst + prior * tau2) / (span2 + tau2)
            )
        elif not (rate_prior and received - first_burst <= policy.agree * rate_prior * span):
            # one gap only: it cannot tell a catch-up from a fast stream after a slow start, so
            # never trust more than rate_cap x the average rate since the request -- unless the
            # gap agrees with the learnt rate (no faster than agree x it): then it is the stream.
            # With nothing learnt, a gap is trusted up to first_gap_trust (real time): a cold
            # first chunk before a fast stream then costs no chunk interval
            cap = policy.rate_cap * received / max(a_last, 1e-3)
            rate = min(rate, cap if rate_prior else max(cap, policy.first_gap_trust))
        how = "measured"
    elif rate_prior:
        rate = rate_prior if chunk_prior else min(rate_prior, received / max(a_last, 1e-3))
        how = "learnt"
    else:
        # one burst and nothing learnt. One chunk: the stream goes on at its average rate since
        # the request (a server that generates as it goes cannot have been slower), so a first
        # chunk that came faster than real time starts at once and a short one (Qwen3's 80 ms)
        # waits for the next. Several chunks at once were held back somewhere (a proxy, a
        # catch-up), so their average says little: taken as if first_shrink_s more had passed
        rate = received / (a_last + (policy.first_shrink_s if n > 1 else 0.0))
        how = "first burst"
    rate = max(rate, 1e-3) / (1.0 + policy.rate_margin)
    return rate, how


def plan(
    arrivals_s: Sequence[float],
    durations_s: Sequence[float],
    *,
    pos_s: float = 0.0,
    done: bool = False,
    text_chars: int = 0,
    sec_per_char: float | None = None,
    rate_prior: float | None = None,
    chunk_prior: float | None = None,
    policy: Policy = POLICY,
) -> Plan:
    """When to start playing from audio position ``pos_s``, given the chunks that arrived."""
    n = len(arrivals_s)
    received = 0.0
    for d in durations_s:
        received += d
    if n == 0 or received - pos_s <= 1e-9:
        return Plan(INF, None, 0.0, 0.0, "nothing buffered")
    a_last = arrivals_s[n - 1]
    if done:
        return Plan(a_last, None, 0.0, 0.0, "all audio is here")
    # observed: chunks at or after pos (the one at pos included)
    obs, off = -INF, 0.0
    for k in range(n):
        if off >= pos_s - 1e-9:
            obs = max(obs, arrivals_s[k] - (off - pos_s))
        off += durations_s[k]
    rate, how = generation_rate(arrivals_s, durations_s, received, rate_prior, policy, chunk_prior)
    # the size of the chunks to come (a burst counts as one chunk)
    chunk = durations_s[0]
    if n >= 2:
        chunk = 0.0
        for k in range(1, n):
            chunk = max(chunk, durations_s[k], rate * (arrivals_s[k] - arrivals_s[k - 1]))
    chunk = max(chunk, chunk_prior or 0.0)
    # the audio still to come, from the text
    spc = sec_per_char or policy.default_sec_per_char
    # without a text, assume as much audio again as arrived so far (each stall doubles the buffer)
    total = text_chars * spc * (1.0 + policy.text_margin) if text_chars > 0 else 2.0 * received
    remaining = max(total - received, chunk)
    if text_chars > 0 and received > total:
        # more audio than the text was worth: the voice is slower than assumed (on a first take,
        # the default), so plan for text_overrun x as much again instead of one chunk at a time
        remaining = max(chunk, policy.text_overrun * received)
    # the chunks to come: `full` whole chunks from `received` on, then the rest (a stream cut
    # in fixed sizes ends on a partial chunk). Predicted chunk j arrives at a_last + (its end -
    # received) / rate; its term is linear in j over the whole chunks, so the maximum is at the
    # first or the last whole chunk or at the rest. A total overestimated (the text margin)
    # never moves a term earlier, so the start stays safe whenever the total is not short
    full = max(0, math.ceil(remaining / chunk - 1e-9) - 1)
    pred = a_last + remaining / rate - (received + full * chunk - pos_s)
    if full:
        t_first = a_last + chunk / rate - (received - pos_s)
        t_full = a_last + full * chunk / rate - (received + (full - 1) * chunk - pos_s)
        pred = max(pred, t_first, t_full)
    pred += policy.margin_s
    return Plan(max(obs, pred), rate, chunk, remaining, how)


def simulate(
    arrivals_s: Sequence[float],
    chunk_durations_s: Sequence[float],
    text_chars: int = 0,
    *,
    sec_per_char: float | None = None,
    rate_prior: float | None = None,
    chunk_prior: float | None = None,
    done_s: float | None = None,
    policy: Policy = POLICY,
) -> PlayoutResult:
    """Play one arrival timeline with the rule: start, underruns (position, stall), ideal start.

    ``arrivals_s`` are when each chunk reached the player (seconds since the request, sorted),
    ``chunk_durations_s`` their audio lengths; the end of the stream is known at ``done_s``
    (default: the last arrival). This is what the browser player does, minus the audio clock.
    """
    arr = [float(a) for a in arrivals_s]
    dur = [float(d) for d in chunk_durations_s]
    if len(arr) != len(dur):
        raise ValueError("arrivals and durations differ in length")
    if any(b < a for a, b in zip(arr, arr[1:], strict=False)):
        raise ValueError("arrivals must be sorted")
    n = len(arr)
    res = PlayoutResult(None, ideal_start_s(arr, dur))
    if n == 0:
        return res
    end = arr[-1] if done_s is None else max(float(done_s), arr[-1])
    events = sorted(set(arr + [end]))
    offsets = []
    off = 0.0
    for d in dur:
        offsets.append(off)
        off += d

    def decide(t_from: float, pos: float) -> float:
        cand = [t_from] + [e for e in events if e > t_from]
        for i, t in enumerate(cand):
            k = sum(1 for a in arr if a <= t)
            p = plan(
                arr[:k],
                dur[:k],
                pos_s=pos,
                done=t >= end,
                text_chars=text_chars,
                sec_per_char=sec_per_char,
                rate_prior=rate_prior,
                chunk_prior=chunk_prior,
                policy=policy,
            )
            s = max(t, p.start_at_s)
            nxt = cand[i + 1] if i + 1 < len(cand) else INF
            if s < nxt:
                return s
        raise AssertionError("the rule never started although all audio arrived")

    s = decide(0.0, 0.0)
    res.decisions.append(s)
    seg = s + policy.lead_s
    res.start_s = seg
    pos, k = 0.0, 0
    while True:
        k = _play(arr, offsets, seg, pos, k, policy)
        if k >= n:
            return res
        # ran dry at chunk k's deadline: resume by the same rule from there
        dry = seg + (offsets[k] - pos)
        pos = offsets[k]
        s = decide(dry, pos)
        res.decisions.append(s)
        res.underruns.append((pos, s + policy.lead_s - dry))
        seg = s + policy.lead_s


def _play(
    arr: list[float], offsets: list[float], seg: float, pos: float, k: int, policy: Policy
) -> int:
    """Index of the first chunk that misses its deadline playing from ``pos`` at ``seg``."""
    while k < len(arr):
        deadline = seg + (offsets[k] - pos)
        if offsets[k] > pos + 1e-9 and arr[k] > deadline - policy.late_tol_s:
            return k
        k += 1
    return len(arr)


# --------------------------------------------------------------------------- learnt per backend


@dataclass(frozen=True)
class Learnt:
    """What past takes of one backend (system) say: seconds of audio per character of text, the
    generation rate (audio seconds per second after the first chunk) and the size of the chunks
    after the first (each take's largest). None when unknown."""

    sec_per_char: float | None
    rate: float | None
    takes: int
    chunk_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sec_per_char": self.sec_per_char,
            "rate": self.rate,
            "chunk_s": self.chunk_s,
            "takes": self.takes,
        }


def learn(store: Any, system_id: str, *, limit: int = 30) -> Learnt:
    """Medians over the last ``limit`` complete streamed takes of ``system_id`` in ``store``
    (anything with the store's ``recent_timelines``: analysis never runs SQL itself).

    Why medians: one take with a long pause or a loaded server should not move the estimate.
    Takes at another speed than 1 are skipped (their seconds per character differ).
    """
    rows = [
        t
        for t in store.recent_timelines(system_id, limit=int(limit))
        if t.request.get("speed", 1.0) == 1.0
    ]
    return _summarise([(t.text or "", t.duration_s, list(t.arrivals), t.sample_rate) for t in rows])


def learn_from_takes(takes: Sequence[Any]) -> Learnt:
    """:func:`learn` on takes in hand (``evaluation.takes.Take``) rather than in a store."""
    return _summarise(
        [
            (
                t.request.text or "",
                t.duration_s,
                [(c.arrival_ms, c.frames) for c in t.chunks],
                t.sample_rate,
            )
            for t in takes
            if t.status == "ok" and t.duration_s and float(t.request.speed or 1.0) == 1.0
        ]
    )


def _summarise(takes: list[tuple[str, float, list[tuple[float, int]], int]]) -> Learnt:
    """Medians of seconds per character, generation rate and chunk size over
    ``(text, duration_s, [(arrival_ms, frames)], sample_rate)`` per take."""
    spc: list[float] = []
    rates: list[float] = []
    sizes: list[float] = []
    for text, duration_s, chunks, sr in takes:
        if len(text) >= 8:
            spc.append(duration_s / len(text))
        if len(chunks) < 2 or not sr:
            continue
        # the largest chunk after the first: what the next chunk may hold (80 ms, then 2 s)
        sizes.append(max(f for _, f in chunks[1:]) / sr)
        span = (chunks[-1][0] - chunks[0][0]) / 1000.0
        if span >= POLICY.min_span_s:
            # audio seconds per second after the first chunk
            rates.append(sum(f for _, f in chunks[1:]) / sr / span)
    return Learnt(
        statistics.median(spc) if spc else None,
        statistics.median(rates) if rates else None,
        len(takes),
        statistics.median(sizes) if sizes else None,
    )
