"""Stimuli by the standards, measured on what is stored (real Piper audio, real SQLite):
BS.1534-3 anchors (plain 3.5/7 kHz low-passes of the reference, nothing added), BS.1770
loudness per ear for mono and stereo with a true-peak ceiling, and the P.808-style trap (the
instruction is in the audio, not on the page)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pyloudnorm
import pytest
import soxr
from scipy import signal

from app.listening.service import Listening
from app.listening.stimuli import TRAP_TEXT
from app.store import Store
from backends.base import SpeechRequest
from evaluation.listening.design import ANCHOR_LOW, ANCHOR_MID
from evaluation.loudness import normalise
from tests.test_stimuli_import import GEN, make_folder, run

TOL_LU = 0.5


@pytest.fixture(scope="module")
def folder(tmp_path_factory, piper_det):
    return make_folder(tmp_path_factory.mktemp("std") / "study", piper_det)


def _create(db, folder, *extra):
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(folder), "--items-per-rater", "3",
        "--no-headphone-check", "--json", *extra,
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)["test_id"]


@pytest.fixture(scope="module")
def mushra(folder, tmp_path_factory):
    db = tmp_path_factory.mktemp("mu") / "lab.db"
    tid = _create(db, folder, "--type", "mushra", "--system", GEN)
    with Store.open(db, read_only=True) as store:
        stim = Listening(store).tests.stimuli(tid)
        takes = {s.take_id: store.load_take(s.take_id) for s in stim}
    return stim, takes


@pytest.fixture(scope="module")
def mos(folder, tmp_path_factory):
    db = tmp_path_factory.mktemp("mos") / "lab.db"
    tid = _create(db, folder, "--type", "mos", "--system", GEN)
    return db, tid


def band_energy_db(x: np.ndarray, sr: int, lo: float, hi: float) -> float:
    f, p = signal.welch(x.astype(np.float64).mean(axis=1), sr, nperseg=2048)
    return 10 * np.log10(p[(f >= lo) & (f < hi)].sum() + 1e-30)


def test_mushra_anchors_are_plain_lowpasses_of_the_reference(mushra):
    stim, takes = mushra
    ref = {s.prompt_id: s for s in stim if s.kind == "item" and s.system_id == "natural"}
    anchors = [s for s in stim if s.kind == "anchor"]
    assert len(anchors) == 2 * len(ref) == 6
    measured = {}
    for a in anchors:
        cutoff = {ANCHOR_LOW: 3500.0, ANCHOR_MID: 7000.0}[a.system_id]
        assert a.meta["anchor"] == {ANCHOR_LOW: "low", ANCHOR_MID: "mid"}[a.system_id]
        assert a.meta["lowpass_hz"] == cutoff
        r = takes[ref[a.prompt_id].take_id]
        assert a.source_take_id == r.take_id
        y = takes[a.take_id]
        sr = r.sample_rate
        assert (y.sample_rate, y.frames, y.channels) == (sr, r.frames, r.channels)
        # nothing added: sample for sample, a plain low-pass of the reference, times the gain
        sos = signal.butter(8, cutoff, btype="low", fs=sr, output="sos")
        plain = signal.sosfiltfilt(sos, r.audio.astype(np.float64) / 32768.0, axis=0)
        expect = np.clip(np.round(plain * 10 ** (a.gain_db / 20) * 32768), -32768, 32767)
        assert np.abs(y.audio.astype(np.int64) - expect.astype(np.int64)).max() <= 1
        # the band above the cutoff is gone; the band below is kept (level-matched)
        g = a.gain_db
        above = band_energy_db(y.audio, sr, cutoff * 1.2, sr / 2) - g
        above_ref = band_energy_db(r.audio, sr, cutoff * 1.2, sr / 2)
        below = band_energy_db(y.audio, sr, 100, cutoff * 0.8) - g
        below_ref = band_energy_db(r.audio, sr, 100, cutoff * 0.8)
        measured.setdefault(a.system_id, []).append(above - above_ref)
        assert above - above_ref < -40, (a.system_id, above - above_ref)
        assert abs(below - below_ref) < 0.5
    print({k: [round(v, 1) for v in vs] for k, vs in measured.items()})  # dB above the cutoff


def _ear_lufs(audio: np.ndarray, sr: int) -> list[float]:
    meter = pyloudnorm.Meter(sr)
    x = audio.astype(np.float64) / 32768.0
    return [meter.integrated_loudness(x[:, c]) for c in range(x.shape[1])]


def _true_peak(audio: np.ndarray) -> float:
    """An independent 4x true peak: FFT resampling (not the polyphase filter the code uses)."""
    x = audio.astype(np.float64) / 32768.0
    up = signal.resample(x, 4 * len(x), axis=0)
    return 20 * np.log10(np.abs(up).max())


def test_every_stimulus_is_at_the_target_per_ear_under_the_ceiling(mushra, mos):
    db, tid = mos
    with Store.open(db, read_only=True) as store:
        stim = Listening(store).tests.stimuli(tid)
        takes = {s.take_id: store.load_take(s.take_id) for s in stim}
    stim = stim + mushra[0]
    takes = {**takes, **mushra[1]}
    kinds = set()
    for s in stim:
        t = takes[s.take_id]
        ears = _ear_lufs(t.audio, t.sample_rate)
        assert all(abs(e - s.target_lufs) <= TOL_LU for e in ears), (s.kind, s.system_id, ears)
        assert _true_peak(t.audio) <= -1.0 + 0.05, (s.kind, s.system_id)
        kinds.add((s.kind, t.channels))
    # mono and stereo items, the anchors (MUSHRA and the MOS gold "1"), gold and trap: all
    assert {("item", 1), ("item", 2), ("anchor", 1), ("gold", 1), ("trap", 1)} <= kinds
    # stereo does not play quieter than mono: same speech, same level at each ear
    mono = [s for s in stim if s.kind == "item" and s.system_id == "natural"]
    stereo = [s for s in stim if s.kind == "item" and s.system_id == "modelx"]
    m = np.mean([_ear_lufs(takes[s.take_id].audio, 22050)[0] for s in mono])
    st = np.mean([np.mean(_ear_lufs(takes[s.take_id].audio, 44100)) for s in stereo])
    assert abs(m - st) < 0.3, (m, st)


def test_loudness_target_is_configurable_and_stereo_measured_per_ear(folder, tmp_path):
    tid = _create(tmp_path / "lab.db", folder, "--type", "ab", "--target-lufs", "-26")
    with Store.open(tmp_path / "lab.db", read_only=True) as store:
        stim = Listening(store).tests.stimuli(tid)
        for s in stim:
            t = store.load_take(s.take_id)
            assert s.target_lufs == -26.0
            assert all(abs(e + 26) <= TOL_LU for e in _ear_lufs(t.audio, t.sample_rate))
    # the function itself: a stereo copy of a mono signal gets the same gain (not 3 dB less),
    # and a signal that would pass the ceiling is held under it and marked limited
    sr = 22050
    t = np.arange(sr * 2) / sr
    x = (0.05 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)[:, None]
    a, b = normalise(x, sr), normalise(np.repeat(x, 2, axis=1), sr)
    assert abs(a.gain_db - b.gain_db) < 0.01 and not a.limited
    loud = normalise(x, sr, target_lufs=-3.0)
    assert loud.limited and loud.true_peak_dbtp <= -1.0 and loud.output_lufs < -3.0


def test_trap_speaks_the_instruction_and_shows_only_the_carrier_text(mos, piper_det):
    db, tid = mos
    with Store.open(db) as store:
        svc = Listening(store)
        stim = svc.tests.stimuli(tid)
        traps = [s for s in stim if s.kind == "trap"]  # check items vary across raters
        assert traps
        carriers = {}
        for t in traps:
            carrier = next(s for s in stim if s.take_id == t.source_take_id)
            assert carrier.kind == "item"  # a real stimulus carries each
            carriers[t.take_id] = store.load_take(carrier.take_id).request.text
            assert store.load_take(t.take_id).request.text == carriers[t.take_id]
        trap = traps[0]
        carrier = next(s for s in stim if s.take_id == trap.source_take_id)
        tt, ct = store.load_take(trap.take_id), store.load_take(carrier.take_id)
        assert "select" not in tt.request.text
        # the audio: the carrier's start, then the Piper instruction (found by correlation)
        spoken = asyncio.run(piper_det.synthesize(SpeechRequest(text=TRAP_TEXT)))
        ins = soxr.resample(
            spoken.samples[:, 0].astype(np.float64) / 32768, spoken.sample_rate, tt.sample_rate
        )
        y = tt.audio[:, 0].astype(np.float64)
        at = round(trap.meta["instruction_at_s"] * tt.sample_rate)
        ins = ins[: len(y) - at - 50]

        def match(lag: int) -> float:
            seg = y[at + lag : at + lag + len(ins)]
            return float(np.dot(seg, ins) / (np.linalg.norm(seg) * np.linalg.norm(ins)))

        best = max(range(-50, 50), key=match)  # instruction_at_s is rounded to 1 ms
        assert match(best) > 0.98 and abs(best) <= 25, (best, match(best))
        lead = int(trap.meta["instruction_at_s"] * tt.sample_rate * 0.5)
        c = ct.audio[:lead, 0].astype(np.float64)
        assert np.dot(y[:lead], c) / (np.linalg.norm(y[:lead]) * np.linalg.norm(c)) > 0.999
        assert trap.meta["instruction"] == TRAP_TEXT
        # a rater reaches the trap: the page gets the carrier's text, never the instruction
        tok = svc.join(tid)["token"]
        svc.consent(tid, tok)
        st = svc.status(tid, tok)
        seen = []
        while not st["finished"]:
            aid = st["item"]["assignment_id"]
            a = next(x for x in store.assignments(tid, st["rater_id"]) if x.assignment_id == aid)
            seen.append((a.role, st["item"]["text"]))
            ms = store.load_take(a.take_id).duration_s * 1000
            svc.play_event(
                tid, tok, aid, 0, ms, server_elapsed_ms=ms + 50, take_id=a.take_id,
                condition=a.condition, duration_ms=ms,
            )  # fmt: skip
            svc.vote(tid, tok, {"assignment_id": aid, "answer_id": f"v{len(seen)}", "score": 3})
            st = svc.status(tid, tok)
        shown = dict(seen)["trap"]  # this rater's trap: the text of its own carrier
        assert shown in carriers.values() and "select" not in shown.lower()
        assert not any("score two" in (text or "") for _, text in seen)
