"""What clean human recordings have and the CPU voice lacks, made from real Piper takes, must not
look like a streaming bug (issue #39 item 5): a room-noise floor the file ends in, and
background noise that repeats itself between words (the long pause between sentences is in
``test_glitch.py::test_long_gap_without_reference``). Each test also shows the same signal *with*
a real defect is still found, and that glitches/1's settings (the old rule) flagged the clean one,
so the test can fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from backends.profile import PROFILES
from evaluation.glitches import DetectorConfig, detect
from tests.support.evaluation_util import (
    inject_gap,
    insert_chunks,
    on_profile,
    synthesize,
    with_timeline,
)

U80 = replace(PROFILES["custom"], name="u80", first_frames=(1,), chunk_frames=1)  # 80 ms chunks
OLD_TAIL = DetectorConfig(tail_floor_db=-200.0)
"""glitches/1's abrupt-end rule: the last 20 ms within 30 dB of speech level, nothing else."""
OLD_REPLAY = DetectorConfig(replay_min_level_db=-200.0, replay_min_ncc=0.97)
"""glitches/1's replay rule: any repeat with a normalised correlation of 0.97."""
TEXTS = [
    "The quick brown fox jumps over the lazy dog. Then it runs away into the forest.",
    "Please call Stella. Ask her to bring six spoons of fresh snow peas from the store.",
    "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow.",
]


def bare(take):
    return replace(take, request=replace(take.request, text=""))


def speech_level_db(x: np.ndarray, sr: int) -> float:
    """The detector's speech level: the 95th percentile of 10 ms frame levels (dBFS)."""
    h = sr // 100
    fr = x[: len(x) // h * h].reshape(-1, h)
    return float(np.percentile(10 * np.log10((fr**2).mean(axis=1) + 1e-12), 95))


def cut_mid_word(take):
    """The take silently stopped at the end of its loudest 10 ms frame between 40 % and 80 %."""
    h = take.sample_rate // 100
    x = take.mono()
    db = 10 * np.log10((x[: len(x) // h * h].reshape(-1, h) ** 2).mean(axis=1) + 1e-12)
    lo, hi = int(0.4 * len(db)), int(0.8 * len(db))
    n = (lo + int(np.argmax(db[lo:hi])) + 1) * h
    return replace(take, audio=take.audio[:n], chunks=[replace(take.chunks[0], frames=n)])


def with_room(take, rel_db: float, seed: int = 0):
    """The take with a steady room-noise floor ``rel_db`` below its speech level, as a
    microphone records (the P.835 clean references: 33-38 dB below)."""
    x = take.mono().astype(np.float64)
    rms = 10 ** ((speech_level_db(x, take.sample_rate) + rel_db) / 20)
    y = x + np.random.default_rng(seed).normal(0, rms, len(x))
    pcm = np.clip(np.round(y * 32768), -32768, 32767).astype(np.int16)[:, None]
    return replace(take, audio=pcm)


@pytest.fixture(scope="module")
def takes(piper_det):
    return [with_timeline(t) for t in synthesize(piper_det, TEXTS)]


def test_a_recording_that_ends_in_a_breath_is_not_cut(takes):
    """Room noise 35 dB below speech, then a 0.2 s breath 24 dB below it to the file's last
    sample: the last 20 ms are within 30 dB of speech level (glitches/1 called that a word cut
    off) but only 11 dB above the recording's own background, so not a cut. The same recording
    stopped mid-word is still a truncation."""
    for t in takes:
        sr = t.sample_rate
        roomy = with_room(t, -35.0, seed=1)
        x = roomy.mono().astype(np.float64)
        level = speech_level_db(x, sr)
        rng = np.random.default_rng(2)
        breath = rng.normal(0, 10 ** ((level - 24) / 20), int(0.2 * sr))
        y = np.concatenate([x, breath])
        pcm = np.clip(np.round(y * 32768), -32768, 32767).astype(np.int16)[:, None]
        ended = bare(replace(roomy, audio=pcm, chunks=[replace(roomy.chunks[0], frames=len(y))]))
        assert detect(ended) == [], [str(f) for f in detect(ended)]
        assert [f.kind for f in detect(ended, config=OLD_TAIL)] == ["truncation"]
        cut = detect(bare(cut_mid_word(ended)))
        assert [f.kind for f in cut] == ["truncation"], [str(f) for f in cut]
        assert cut[0].evidence["above_background_db"] >= 20


def test_background_noise_that_repeats_between_words_is_not_a_replay(takes):
    """A 0.25 s stretch of room noise (30 dB below speech) pasted again right after itself in a
    pause between sentences, as an editor fills a gap between two recordings (P.835's c0_f3
    has one): the samples repeat, but nobody hears a noise floor repeat. A re-sent chunk of
    speech in the same noisy take is still a replay."""
    n = 0
    for t in takes:
        sr = t.sample_rate
        paused = inject_gap(t, 0, 0.8)  # a person's pause after the first clause
        base = on_profile(with_room(paused, -30.0, seed=3), U80)
        sr = base.sample_rate
        x = base.audio[:, 0].copy()
        h = sr // 100
        db = 10 * np.log10((base.mono()[: len(x) // h * h].reshape(-1, h) ** 2).mean(axis=1))
        level = np.percentile(db, 95)
        quiet = np.flatnonzero(
            np.convolve(db < level - 25, np.ones(60), "valid") == 60
        )  # 0.6 s of noise only
        if not len(quiet):
            continue
        a = (quiet[0] + 3) * h
        seg = int(0.25 * sr)
        x[a + seg : a + 2 * seg] = x[a : a + seg]
        looped = bare(replace(base, audio=x[:, None]))
        assert detect(looped) == [], [str(f) for f in detect(looped)]
        old = [f for f in detect(looped, config=OLD_REPLAY) if f.kind == "replay"]
        assert old and all(a / sr - 0.3 <= f.time_s <= (a + 2 * seg) / sr for f in old)
        n += 1
        seams = np.asarray(base.boundaries)
        loud = [int(db[max(0, b // h - 2) : b // h].mean() >= level - 10) for b in seams]
        k = int(np.flatnonzero(np.asarray(loud) & (seams > a + 2 * seg + sr // 2))[0])
        b = base.boundaries[k]
        resent = insert_chunks(base, k, base.audio[b - sr // 2 : b], sr * 80 // 1000)
        found = [f for f in detect(bare(resent)) if f.kind == "replay"]
        assert [f.boundary_index for f in found] == [k], [str(f) for f in detect(bare(resent))]
    assert n >= 2
