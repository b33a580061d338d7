"""Listening tests without a server: balanced designs, loudness normalisation, the low anchor,
screening rules and the v2 store tables (one answer per item)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from app.listening.stimuli import low_anchor
from app.store import SCHEMA_VERSION, AlreadyVoted, Store
from app.store.listening import TestStore, token_hash
from evaluation import inference, stats
from evaluation.listening.design import ANCHOR, ANCHOR_LOW, ANCHOR_MID, GOLD, Design, plan
from evaluation.listening.screening import (
    TestScreening,
    new_screen,
    rater_table,
    score_screen,
)
from evaluation.loudness import measure_lufs, normalise_loudness


def test_mos_design_is_a_latin_square():
    d = Design("mos", ("a", "b", "c"), tuple(f"p{i}" for i in range(6)), 6, screening=False)
    cells = Counter()
    for r in range(6):
        items = plan(d, r)
        assert Counter(i.slots[0].system for i in items) == {"a": 2, "b": 2, "c": 2}
        assert len({i.prompt for i in items}) == 6  # no prompt twice for one rater
        cells.update((i.prompt, i.slots[0].system) for i in items)
    # 6 raters = two groups of 3: every prompt heard with every system exactly twice
    assert set(cells.values()) == {2} and len(cells) == 18
    assert [i.prompt for i in plan(d, 4)] == [i.prompt for i in plan(d, 4)]  # resumable
    assert [i.prompt for i in plan(d, 0)] != [i.prompt for i in plan(d, 1)]  # shuffled per rater


def test_mos_screening_items_are_spread_at_random_positions():
    d = Design("mos", ("a", "b"), tuple(f"p{i}" for i in range(8)), 8, gold=True)
    layouts = set()
    for r in range(12):
        items = plan(d, r)
        assert len(items) == 11
        checks = [(i.position, i.role, i.stimulus, i.expected) for i in items if i.role != "item"]
        assert sorted(c[2] for c in checks) == ["anchor", "gold", "trap"]
        assert {c[2]: c[3] for c in checks} == {"anchor": 1.0, "gold": 5.0, "trap": 2.0}
        pos = sorted(c[0] for c in checks)
        assert pos[0] > 0 and min(np.diff(pos)) >= 2  # never first, never two in a row
        layouts.add(tuple(pos))
        assert next(i for i in items if i.stimulus == "anchor").slots[0].system == ANCHOR
        # the gold "5" is the known-good clip, never a take of a system under test
        assert next(i for i in items if i.stimulus == "gold").slots[0].system == GOLD
        assert plan(d, r) == items  # resumable
    assert len(layouts) >= 6  # positions differ between raters: not learnable
    # without a natural recording or a marked clip: only the anchor gold (and the trap)
    plain = plan(Design("mos", ("a", "b"), tuple(f"p{i}" for i in range(8)), 8), 0)
    assert sorted(i.stimulus for i in plain if i.role != "item") == ["anchor", "trap"]


def test_ab_sides_are_randomised_and_balanced():
    d = Design("ab", ("x", "y"), tuple(f"p{i}" for i in range(8)), 8, screening=False)
    firsts = Counter()
    orders = set()
    for r in range(4):
        items = plan(d, r)
        assert all({s.system for s in i.slots} == {"x", "y"} for i in items)
        firsts.update(i.slots[0].system for i in items)
        orders.add(tuple(i.slots[0].system for i in items))
    assert firsts["x"] == firsts["y"] == 16
    assert len(orders) > 1


def test_ab_screening_adds_two_check_pairs_one_per_side():
    d = Design("ab", ("x", "y"), tuple(f"p{i}" for i in range(8)), 4)
    for r in range(3):
        items = plan(d, r)
        assert len(items) == 6 and [i.position for i in items] == list(range(6))
        checks = [i for i in items if i.stimulus == "ab_check"]
        assert len(checks) == 2 and all(i.role == "gold" and i.prompt is None for i in checks)
        by_side = {i.meta["clean"]: i for i in checks}
        assert [s.system for s in by_side["a"].slots] == ["x", ANCHOR]
        assert [s.system for s in by_side["b"].slots] == [ANCHOR, "x"]
        assert (by_side["a"].expected, by_side["b"].expected) == (-1.0, 1.0)
        at = sorted(items.index(i) for i in checks)
        assert at[0] > 0 and at[1] - at[0] >= 2  # never first, never back to back
    assert len(plan(Design("ab", ("x", "y"), ("p",), 1, screening=False), 0)) == 1


def test_mushra_screen_has_hidden_reference_and_both_anchors():
    d = Design("mushra", ("ref", "s1", "s2"), ("p1", "p2"), 2, reference="ref")
    items = plan(d, 0)
    assert len(items) == 2
    for it in items:
        roles = sorted(s.role for s in it.slots)
        assert roles == ["anchor", "anchor", "item", "item", "reference"]
        assert {s.system for s in it.slots if s.role == "item"} == {"s1", "s2"}
        assert {s.system for s in it.slots if s.role == "anchor"} == {ANCHOR_LOW, ANCHOR_MID}
    with pytest.raises(ValueError, match="reference"):
        Design("mushra", ("a", "b"), ("p",), 1, reference="zzz").validate()
    with pytest.raises(ValueError, match="needs a reference"):  # BS.1534-3: required
        Design("mushra", ("a", "b"), ("p",), 1).validate()


def test_loudness_normalised_to_target_with_gain_stored():
    sr = 22050
    t = np.arange(sr * 2) / sr
    quiet = (0.02 * np.sin(2 * np.pi * 300 * t) * 32767).astype(np.int16)[:, None]
    out, gain, lufs = normalise_loudness(quiet, sr, -23.0)
    assert lufs < -35 and gain > 10
    assert abs(measure_lufs(out, sr) - (-23.0)) < 0.2
    assert math.isclose(20 * np.log10(np.abs(out).max() / np.abs(quiet).max()), gain, abs_tol=0.1)
    loud = (0.99 * np.sign(np.sin(2 * np.pi * 100 * t)) * 32767).astype(np.int16)[:, None]
    out2, gain2, _ = normalise_loudness(loud, sr, -10.0)
    assert np.abs(out2).max() <= 32767 * 10 ** (-1 / 20) + 2  # capped at -1 dBFS, never clips
    silent, g0, l0 = normalise_loudness(np.zeros((sr, 1), np.int16), sr)
    assert g0 == 0.0 and not math.isfinite(l0) and not silent.any()


def test_low_anchor_is_band_limited_with_clicks_and_gap():
    """The MOS gold "1" / A/B check's bad side (not a MUSHRA anchor: those are plain low-passes,
    see tests/test_stimuli_standards.py)."""
    sr = 24000
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((sr * 2, 1)) * 3000).astype(np.int16)
    seams = [12000, 24000, 36000]
    y = low_anchor(x, sr, seams)
    clean = y[:, 0].astype(float).copy()
    for b in seams:  # leave the clicks and the gap out of the spectrum
        clean[b - 10 : b + 48 + int(0.15 * sr) + 10] = 0.0
    spec = np.abs(np.fft.rfft(clean))
    f = np.fft.rfftfreq(len(y), 1 / sr)
    assert spec[f > 5000].mean() < 0.02 * spec[(f > 500) & (f < 3000)].mean()
    peak = np.abs(y).max()
    for b in seams:
        assert np.abs(y[b : b + 5, 0]).max() >= 0.85 * peak  # a click at every seam
    gap = y[24000 + 48 : 24000 + 48 + int(0.15 * sr), 0]
    assert len(gap) == 3600 and not gap.any()


def test_headphone_check_scoring():
    plan_ = new_screen("antiphase")
    right = [t.answer for t in plan_]
    assert score_screen(plan_, right)["passed"]
    speakers = [t.order.index("antiphase") for t in plan_]
    res = score_screen(plan_, speakers)
    assert res["correct"] == 0 and not res["passed"]
    with pytest.raises(ValueError):
        score_screen(plan_, [0, 1])


def test_mushra_post_screening_and_medians():
    rows = []
    for rater, ref, anc in (("good", 100, 10), ("bad", 60, 95)):
        for item in range(4):
            rows += [
                {
                    "rater_id": rater,
                    "assignment_id": f"i{item}",
                    "role": "reference",
                    "system_id": "ref",
                    "score": ref,
                },
                {
                    "rater_id": rater,
                    "assignment_id": f"i{item}",
                    "role": "anchor",
                    "system_id": "ref",
                    "score": anc,
                },
                {
                    "rater_id": rater,
                    "assignment_id": f"i{item}",
                    "role": "item",
                    "system_id": "s1",
                    "score": 70 + item,
                },
            ]
    df = pd.DataFrame(rows)
    scr = stats.mushra_screening(df)
    bad = scr.set_index("rater_id").loc["bad"]
    assert bad["excluded"] and bad["ref_low"] == 4 and bad["anchor_high"] == 4
    assert "hidden reference < 90 on 4/4" in bad["reasons"]
    assert not scr.set_index("rater_id").loc["good", "excluded"]
    t = stats.mushra_table(df[df["rater_id"] == "good"]).set_index("condition")
    assert t.loc["s1", "median"] == 71.5 and t.loc["hidden reference", "median"] == 100
    iv = inference.clustered_median(pd.DataFrame({"score": np.arange(20.0)}))
    assert iv.low < 9.5 < iv.high and iv.low >= 0 and iv.high <= 19


def test_store_v2_answers_once(tmp_path):
    store = Store.open(tmp_path / "l.db")
    assert store.schema_version == SCHEMA_VERSION == 8  # 8: the arena's second version
    tests = TestStore(store)
    tests.create_test("t1", "mos", "T", {"design": {}}, status="open")
    r1, _ = tests.join("t1", "tok-one" * 6, "P1", "PROLIFIC_PID")
    r2, _ = tests.join("t1", "tok-two" * 6, None, None)
    assert (r1.seq, r2.seq) == (0, 1)
    assert tests.rater_for_token("t1", "tok-one" * 6).rater_id == r1.rater_id
    row = store.db.execute("SELECT token_hash FROM test_raters WHERE rater_id=?", [r1.rater_id])
    assert row.fetchone()[0] == token_hash("tok-one" * 6)  # only the hash is stored
    assert tests.answer("a1", "t1", r1.rater_id, "item1", "mos", {"score": 3}, None, [])
    assert not tests.answer("a1", "t1", r1.rater_id, "item1", "mos", {"score": 3}, None, [])
    with pytest.raises(AlreadyVoted):
        tests.answer("a2", "t1", r1.rater_id, "item1", "mos", {"score": 5}, None, [])
    assert len(tests.answers_frame("t1")) == 1
    raters = tests.raters_frame("t1")
    table = rater_table(raters, [], TestScreening())
    assert table["excluded"].all() and table["reasons"].str.contains("headphone check").all()
    store.close()


def test_fewer_prompts_than_systems_still_gives_each_rater_every_system():
    d = Design("mos", ("a", "b", "c"), ("p0", "p1"), 2, screening=False)
    for r in range(6):
        items = plan(d, r)
        assert Counter(i.slots[0].system for i in items) == {"a": 1, "b": 1, "c": 1}
    big = Design("mos", ("a", "b"), ("p0", "p1", "p2", "p3"), 8, screening=False)
    for r in range(4):  # P=4, U=2: all 8 cells once, each system 4 times
        items = plan(big, r)
        assert len({(i.prompt, i.slots[0].system) for i in items}) == 8


def test_tests_stored_before_the_standard_stimuli_keep_their_plan():
    """A design stored without ``gold`` (made before the BS.1534-3 anchors) plans as then: its
    stored stimuli (one ``__anchor__`` per screen, the first system's gold) still serve."""
    old = {"kind": "mushra", "systems": ["a", "b"], "prompts": ["p"], "items_per_rater": 1}
    d = Design.from_dict(old)
    assert d.legacy and "legacy" in d.to_dict()
    (screen,) = plan(d, 0)
    assert sorted((s.system, s.role) for s in screen.slots) == [
        (ANCHOR, "anchor"), ("a", "item"), ("b", "item"),
    ]  # fmt: skip
    mos = Design.from_dict({**old, "kind": "mos", "prompts": ["p", "q"], "items_per_rater": 2})
    golds = [i for i in plan(mos, 0) if i.stimulus == "gold"]
    assert [i.slots[0].system for i in golds] == ["a"]
    new = Design.from_dict(Design("mos", ("a", "b"), ("p",), 2).to_dict())
    assert not new.legacy and new.to_dict()["gold"] is False


def test_check_items_vary_across_raters_and_come_from_different_prompts():
    d = Design("mos", ("a", "b"), ("p1", "p2", "p3", "p4", "p5"), 4, gold=True, check_variants=4)
    seen = []
    for seq in range(4):
        checks = {it.stimulus: it.prompt for it in plan(d, seq) if it.role != "item"}
        assert len(set(checks.values())) == 3, checks  # anchor, gold, trap: three prompts
        seen.append(checks["anchor"])
    assert seen == ["p1", "p2", "p3", "p4"]  # raters in a row: another clip each
    old = Design("mos", ("a", "b"), ("p1", "p2"), 2, gold=True)  # a test made before
    assert {it.prompt for it in plan(old, 0) if it.role != "item"} == {None}
