"""Statistics against values computed independently here (scipy formulas, hand-solved BT)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from evaluation.marks import agreement, glitch_rates, glitches_by_seam
from evaluation.stats import (
    ScreeningRules,
    ab_table,
    add_z_scores,
    bt_leaderboard,
    mos_table,
    order_bias,
    preference_matrix,
    screen_raters,
    usable_ratings,
)


def test_mos_t_interval_matches_scipy():
    rng = np.random.default_rng(1)
    a = rng.integers(1, 6, 23).astype(float)
    b = rng.integers(2, 6, 7).astype(float)
    df = pd.DataFrame({"system_id": ["a"] * 23 + ["b"] * 7, "score": np.r_[a, b], "prompt_id": "p"})
    t = mos_table(df).set_index("system_id")
    for name, v in (("a", a), ("b", b)):
        n = len(v)
        half = st.t.ppf(0.975, n - 1) * v.std(ddof=1) / math.sqrt(n)  # textbook formula
        assert t.loc[name, "n"] == n
        assert t.loc[name, "mean"] == pytest.approx(v.mean())
        assert t.loc[name, "ci_low"] == pytest.approx(v.mean() - half)
        assert t.loc[name, "ci_high"] == pytest.approx(v.mean() + half)
    tp = mos_table(df, by=("system_id", "prompt_id"))
    assert list(tp.columns[:2]) == ["system_id", "prompt_id"] and len(tp) == 2
    one = mos_table(pd.DataFrame({"system_id": ["z"], "score": [4.0]}))
    assert one.loc[0, "n"] == 1 and math.isnan(one.loc[0, "ci_low"])


def test_z_scores_per_rater():
    df = pd.DataFrame(
        {"rater_id": ["r1"] * 3 + ["r2"] * 3 + ["r3"], "score": [1, 2, 3, 4, 4, 4, 5.0]}
    )
    z = add_z_scores(df)["z"].tolist()
    assert z[:3] == pytest.approx([-1.0, 0.0, 1.0])  # mean 2, sd 1
    assert z[3:] == [0.0, 0.0, 0.0, 0.0]  # zero variance / single rating


def _ratings():
    rows = []
    # r1: good rater
    for i, s in enumerate([5, 4, 2, 3, 1]):
        rows.append(("r1", f"t{i}", float(s), "item", None, 5000.0))
    rows.append(("r1", "gold", 5.0, "gold", 5.0, 5000.0))
    rows.append(("r1", "trap", 2.0, "trap", 2.0, 5000.0))
    # r2: straight-liner
    for i in range(5):
        rows.append(("r2", f"t{i}", 3.0, "item", None, 5000.0))
    # r3: fails gold (rates an obviously bad clip 4 when 1 is expected) and the trap
    for i, s in enumerate([5, 4, 2, 3, 1]):
        rows.append(("r3", f"t{i}", float(s), "item", None, 5000.0))
    rows.append(("r3", "gold", 4.0, "gold", 1.0, 5000.0))
    rows.append(("r3", "trap", 3.0, "trap", 2.0, 5000.0))
    # r4: did not play 2 of 5 items to the end
    for i, s in enumerate([5, 4, 2, 3, 1]):
        rows.append(("r4", f"t{i}", float(s), "item", None, 1000.0 if i < 2 else 5000.0))
    df = pd.DataFrame(
        rows, columns=["rater_id", "take_id", "score", "role", "expected", "played_ms"]
    )
    df["duration_s"] = 5.0
    df["system_id"] = "s"
    return df


def test_screening_p808_rules():
    scr = screen_raters(_ratings()).set_index("rater_id")
    assert not scr.loc["r1", "excluded"]
    assert scr.loc["r2", "excluded"] and "variance" in scr.loc["r2", "reasons"]
    assert (
        scr.loc["r3", "excluded"]
        and scr.loc["r3", "gold_failed"] == 1
        and scr.loc["r3", "trap_failed"] == 1
    )
    assert scr.loc["r4", "excluded"] and scr.loc["r4", "unplayed"] == 2
    ok = usable_ratings(_ratings())
    assert set(ok["rater_id"]) == {"r1"} and set(ok["role"]) == {"item"} and len(ok) == 5
    lenient = usable_ratings(_ratings(), ScreeningRules(max_unplayed_share=0.5))
    # r4 kept but its two unplayed items dropped
    assert len(lenient[lenient["rater_id"] == "r4"]) == 3


def _votes():
    # x = "a", y = "b", presented both ways. choice and cmos are as presented (cmos: how much
    # better the second clip is); the CMOS values here are only there to check the sign flip.
    rows = [
        ("a", "b", "a", 2),  # a won (shown first)
        ("b", "a", "b", -1),  # a won (shown second)
        ("a", "b", "a", 1),
        ("b", "a", "a", 1),  # b won (shown first)
        ("a", "b", "tie", 0),
        ("b", "a", "b", -3),  # a won
        ("a", "b", "a", -2),
    ]
    return pd.DataFrame(rows, columns=["system_a", "system_b", "choice", "cmos"])


def test_ab_share_interval_sign_test_and_cmos_sign():
    t = ab_table(_votes()).iloc[0]
    assert (t["x"], t["y"]) == ("a", "b")
    assert (t["x_wins"], t["y_wins"], t["ties"], t["n"]) == (5, 1, 1, 7)
    # no rater or prompt column: every vote is its own cluster, so the share's standard error
    # is the textbook s / sqrt(n) of the 0/1 outcomes with n - 1 df, and the interval is built
    # on the logit scale: logit(p) ± t · se / (p (1 - p)), mapped back (asymmetric, inside 0-1)
    k, n = 5, 6
    p = k / n
    se = math.sqrt(p * (1 - p) / (n - 1))
    half = st.t.ppf(0.975, n - 1) * se / (p * (1 - p))
    expit = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert t["x_share"] == pytest.approx(p)
    assert t["x_share_low"] == pytest.approx(expit(math.log(p / (1 - p)) - half), rel=1e-9)
    assert t["x_share_high"] == pytest.approx(expit(math.log(p / (1 - p)) + half), rel=1e-9)
    assert 0 < t["x_share_low"] < p < t["x_share_high"] < 1
    # two-sided sign test: P(X <= 1) + P(X >= 5) for Binomial(6, 0.5)
    assert t["p_sign"] == pytest.approx(2 * (1 + 6) / 64)
    # CMOS is "how much better B is than A as presented"; for y = b it flips when b was shown first
    cm = np.array([2, 1, 1, -1, 0, 3, -2], dtype=float)
    assert t["cmos_y"] == pytest.approx(cm.mean())
    # its interval, too, is on the logit of its place in the -3..+3 scale: q = (m + 3) / 6
    q = (cm.mean() + 3) / 6
    half = st.t.ppf(0.975, 6) * st.sem(cm) / 6 / (q * (1 - q))
    want = [-3 + 6 * expit(math.log(q / (1 - q)) + h) for h in (-half, half)]
    assert (t["cmos_low"], t["cmos_high"]) == pytest.approx(want, rel=1e-9)
    ob = order_bias(_votes())
    assert ob["decisive"] == 6 and ob["first_share"] == pytest.approx(4 / 6)
    m = preference_matrix(_votes())
    assert m.loc["a", "b"] == pytest.approx(5 / 6) and m.loc["b", "a"] == pytest.approx(1 / 6)


def _bt_votes(ab=(2, 1), bc=(2, 1), ac=(4, 1)):
    rows = []
    for (x, y), (wx, wy) in ((("a", "b"), ab), (("b", "c"), bc), (("a", "c"), ac)):
        rows += [(x, y, "a")] * wx + [(x, y, "b")] * wy
    return pd.DataFrame(rows, columns=["system_a", "system_b", "choice"])


def test_bradley_terry_hand_solved():
    """a-b 2:1, b-c 2:1, a-c 4:1 is solved exactly by strengths 4 : 2 : 1 (check: a wins 6 =
    3*4/6 + 5*4/5; b wins 3 = 3*2/6 + 3*2/3; c wins 2 = 3*1/3 + 5*1/5)."""
    lb = bt_leaderboard(_bt_votes(), prior=0, n_boot=0).set_index("system")
    k = 400 / math.log(10)
    # log-strengths ln4, ln2, ln1 centred on their mean ln2
    assert lb.loc["a", "rating"] == pytest.approx(1500 + k * math.log(2), abs=1e-3)
    assert lb.loc["b", "rating"] == pytest.approx(1500, abs=1e-3)
    assert lb.loc["c", "rating"] == pytest.approx(1500 - k * math.log(2), abs=1e-3)
    assert list(lb.index) == ["a", "b", "c"]
    assert lb.loc["a", "votes"] == 8 and lb.loc["a", "wins"] == 6 and lb.loc["c", "losses"] == 6


def test_bradley_terry_bootstrap_order_and_threshold():
    big = pd.concat([_bt_votes()] * 20, ignore_index=True)
    extra = pd.DataFrame(
        [("d", "a", "a")] * 3, columns=["system_a", "system_b", "choice"]
    )  # d: 3 lucky wins
    lb = bt_leaderboard(pd.concat([big, extra]), min_votes=10, n_boot=100, seed=3)
    assert list(lb["system"]) == ["a", "b", "c", "d"]
    assert list(lb["listed"]) == [True, True, True, False] and list(lb["rank"]) == [1, 2, 3, 0]
    assert (lb["ci_low"] <= lb["rating"]).all() and (lb["rating"] <= lb["ci_high"]).all()
    # sorted by the lower bound among listed systems
    listed = lb[lb["listed"]]
    assert listed["ci_low"].is_monotonic_decreasing
    # an undefeated system stays finite thanks to the prior
    undefeated = bt_leaderboard(extra, n_boot=10)
    assert np.isfinite(undefeated["rating"]).all()
    # deterministic for a seed
    again = bt_leaderboard(pd.concat([big, extra]), min_votes=10, n_boot=100, seed=3)
    assert again["ci_low"].tolist() == lb["ci_low"].tolist()


def test_glitch_rates_and_by_seam():
    takes = pd.DataFrame(
        {
            "take_id": ["t1", "t2", "t3"],
            "system_id": ["s1", "s1", "s2"],
            "duration_s": [30.0, 30.0, 60.0],
            "chunk_count": [4, 6, 1],
        }
    )
    reports = pd.DataFrame(
        {
            "report_id": ["g1", "g2", "g3", "g4"],
            "take_id": ["t1", "t1", "t2", "t3"],
            "system_id": ["s1", "s1", "s1", "s2"],
            "distance_ms": [10.0, -900.0, 50.0, None],
            "boundary_index": [2, 0, 2, None],
        }
    )
    r = glitch_rates(reports, takes).set_index("system_id")
    assert (
        r.loc["s1", "reports"] == 3
        and r.loc["s1", "minutes"] == 1.0
        and r.loc["s1", "per_minute"] == 3.0
    )
    assert (
        r.loc["s1", "seams"] == 8
        and r.loc["s1", "at_seam"] == 2
        and r.loc["s1", "per_seam"] == 0.25
    )
    assert r.loc["s2", "per_minute"] == 1.0 and r.loc["s2", "seams"] == 0
    # listened twice (two raters) doubles the minutes
    listened = pd.DataFrame({"rater_id": ["r1", "r2"], "take_id": ["t1", "t1"]})
    r2 = glitch_rates(reports[reports["take_id"] == "t1"], takes, listened).set_index("system_id")
    assert r2.loc["s1", "minutes"] == 1.0 and r2.loc["s1", "reports"] == 2
    by = glitches_by_seam(reports)
    assert by.loc["s1", 2] == 2 and list(by.columns) == [2]


def test_agreement_precision_recall():
    reports = pd.DataFrame(
        {"take_id": ["t1", "t1", "t1", "t2"], "position_ms": [1000.0, 1200.0, 5000.0, 300.0]}
    )
    findings = pd.DataFrame({"take_id": ["t1", "t1", "t3"], "time_s": [1.1, 3.0, 1.0]})
    a = agreement(reports, findings, tolerance_ms=250)
    # one finding (1.1 s) matches one mark (1000 or 1200; one-to-one); the t3 finding is on a
    # take no rater marked, so it does not count
    assert (a["marks"], a["findings"], a["matched"]) == (4, 2, 1)
    assert a["precision"] == 0.5 and a["recall"] == 0.25


def test_share_of_all_one_side_has_no_interval_and_says_why():
    from evaluation.inference import clustered_share

    d = pd.DataFrame({"rater_id": list("abcdef"), "v": [1.0] * 6})
    iv = clustered_share(d, "v")
    assert iv.mean == 1.0 and math.isnan(iv.low) and math.isnan(iv.high)
    assert iv.note == "too few ratings (no spread)"
    d["v"] = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    iv = clustered_share(d, "v")
    assert 0 < iv.low < 5 / 6 < iv.high < 1 and iv.note == ""
