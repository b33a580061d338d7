"""From audio alone (no text, no reference), a deterministic voice that says a sentence again
after other words is not a replay; a stream's replay is (issue #39 item 5: 0.59 false alarms per
clean held-out minute came from "Knock knock. … Knock knock." and "Please hold the line. …").

A stream that restarts, re-sends a chunk or window, or sends a second copy re-sends the audio
up to the seam, so its source runs right up to its copy; the sentence said again has other
speech between them (``replay_max_between_s``). Each test uses real Piper takes cut to real
80 ms and Qwen3-TTS chunk schedules, and checks the old rule (the gate off) did flag the clean
take, so it can fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from backends.profile import PROFILES
from evaluation.glitches import DetectorConfig, detect
from tests.support.evaluation_util import insert_chunks, on_profile, synthesize, with_timeline

U80 = replace(PROFILES["custom"], name="u80", first_frames=(1,), chunk_frames=1)  # 80 ms chunks
QWEN = PROFILES["qwen3-tts"]
GATE = DetectorConfig().replay_max_between_s
OLD = DetectorConfig(replay_max_between_s=1e9)
"""glitches/2: any repeat, however much other speech lies between source and copy."""
SAID_AGAIN = [
    "Knock knock. Who's there? Knock knock. Who's there again?",
    "Please hold the line. Your call is important to us. Please hold the line.",
]


def bare(take):
    return replace(take, request=replace(take.request, text=""))


def replays(take, config=DetectorConfig()):
    return [f for f in detect(take, config=config) if f.kind == "replay"]


def loud_seams(t, after_s: float) -> list[int]:
    """Seams after ``after_s`` whose 10 ms before lie within 10 dB of the speech level."""
    x = t.mono()
    h = t.sample_rate // 100
    fr = x[: len(x) // h * h].reshape(-1, h)
    level = np.percentile(10 * np.log10((fr**2).mean(axis=1) + 1e-12), 95)
    return [
        k
        for k, b in enumerate(t.boundaries)
        if b >= after_s * t.sample_rate
        and b <= t.frames - 0.3 * t.sample_rate
        and 10 * np.log10(np.mean(x[b - h : b] ** 2) + 1e-12) >= level - 10
    ]


@pytest.fixture(scope="module")
def said_again(piper_det):
    takes = [with_timeline(t) for t in synthesize(piper_det, SAID_AGAIN)]
    return [bare(on_profile(t, p, 0.0)) for t in takes for p in (U80, QWEN)]


def test_a_sentence_said_again_after_other_words_is_not_a_replay(said_again):
    for t in said_again:
        assert detect(t) == [], [str(f) for f in detect(t)]
    for t in said_again[::2]:  # on 80 ms chunks the old rule called the second saying a replay
        old = replays(t, OLD)
        assert len(old) == 1, [str(f) for f in old]
        assert old[0].evidence["ncc"] > 0.99 and old[0].evidence["from_start"]
        assert old[0].evidence["between_active_s"] >= GATE, str(old[0])


@pytest.mark.parametrize("mode", ["restart", "last-0.5s"])
def test_a_replay_in_the_same_take_is_still_found(said_again, mode):
    """A restart from the start, or the last 0.5 s re-sent, at a loud seam of the same takes:
    the source runs up to the copy, so audio alone still finds it."""
    for t in said_again[::2]:  # on 80 ms chunks (Qwen3-TTS's 2 s chunks have no loud seam there)
        half = t.sample_rate // 2
        seams = loud_seams(t, 2.0)
        k = seams[0]
        if mode != "restart":  # a window of speech (not mostly a pause) is re-sent
            x = np.abs(t.mono())
            k = max(seams, key=lambda j: float(x[t.boundaries[j] - half : t.boundaries[j]].mean()))
        b = t.boundaries[k]
        src = t.audio[:b] if mode == "restart" else t.audio[b - half : b]
        r = insert_chunks(t, k, src, t.sample_rate * 80 // 1000)
        f = replays(r)
        assert [x.boundary_index for x in f] == [k], [str(x) for x in detect(r)]
        assert f[0].evidence["between_active_s"] < GATE


def test_an_old_chunk_sent_again_later_is_found_only_with_the_text(said_again):
    """The rule's blind spot, stated in docs/detector.md: a server that re-sends *older* audio
    (0.5 s that ended over a second of speech before the seam) looks, from audio alone, like a
    voice saying those words again. With the text it is still a replay."""
    for t, text in zip(said_again[::2], SAID_AGAIN, strict=True):  # on 80 ms chunks
        k = loud_seams(t, 2.5)[0]
        b = t.boundaries[k]
        sr = t.sample_rate
        r = insert_chunks(t, k, t.audio[b - 2 * sr : b - 3 * sr // 2], sr * 80 // 1000)
        assert replays(r) == [], [str(x) for x in replays(r)]
        old = replays(r, OLD)
        assert k in [x.boundary_index for x in old], [str(x) for x in old]
        with_text = replace(r, request=replace(r.request, text=text))
        assert [x.boundary_index for x in replays(with_text)] == [k]


def test_a_sentence_said_twice_in_a_row_is_still_reported_from_audio_alone(piper_det):
    """The blind spot the rule cannot close: "Three blind mice. Three blind mice." rendered by a
    deterministic voice is two identical sentences back to back, exactly what a re-sent
    sentence is. Audio alone reports it; the text excuses it."""
    text = "Three blind mice. Three blind mice. See how they run."
    (t,) = synthesize(piper_det, [text])
    p = on_profile(with_timeline(t), U80)
    f = replays(bare(p))
    assert len(f) == 1 and f[0].evidence["between_active_s"] < GATE, [str(x) for x in f]
    assert detect(p) == []
