"""Clustered intervals, pairwise tests and Holm against values computed independently here
(the two-way cluster-robust variance written out with loops, scipy's t and Wilcoxon); the
rater-relative screening rules on hand-made raters; the arena's shared ranks; p-values that
never print as 0."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from evaluation.inference import (
    MOS_SCALE,
    TOO_FEW,
    clustered_mean,
    clustered_median,
    format_p,
    holm,
    interval_table,
    paired_tests,
    round_p,
    sign_tests,
)
from evaluation.listening.kinds.base import MUSHRA_ANCHOR_LABELS, MUSHRA_SCREEN_ANCHOR
from evaluation.stats import (
    bt_leaderboard,
    mushra_screening,
    mushra_table,
    oriented_votes,
    screen_raters,
)
from tests.support.simulate import MosModel, expected_rating, mos_ratings


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3*0.01, max(0.03, 2*0.02), max(0.04, 1*0.04); NaN left out
    assert holm([0.04, 0.01, np.nan, 0.02]) == pytest.approx(
        [0.04, 0.03, np.nan, 0.04], nan_ok=True
    )
    assert holm([0.5, 0.9]).tolist() == [1.0, 1.0]  # capped at 1
    assert holm([]).size == 0


def _grid(values: np.ndarray) -> pd.DataFrame:
    """Every rater rates every prompt once: ``values[r, p]``."""
    r, p = np.indices(values.shape)
    return pd.DataFrame(
        {"rater_id": r.ravel(), "prompt_id": p.ravel(), "score": values.ravel().astype(float)}
    )


def _cgm_by_hand(df: pd.DataFrame) -> tuple[float, float]:
    """The two-way variance of the mean and Satterthwaite's df, written out (what
    docs/statistics.md tells a reader to compute): one-way terms with plain group sums, the
    cell term from the residuals of a least-squares fit with a dummy per rater and prompt."""
    v = df["score"].to_numpy(dtype=float)
    n, m = len(v), v.mean()
    terms = []
    for key in ("rater_id", "prompt_id"):
        sums = (df.assign(e=v - m).groupby(key)["e"].sum() ** 2).to_numpy()
        g = len(sums)
        terms.append((g / (g - 1) * sums.sum() / n**2, g - 1))
    x = pd.get_dummies(df[["rater_id", "prompt_id"]].astype(str), dtype=float).to_numpy()
    fit, *_ = np.linalg.lstsq(x, v, rcond=None)
    resid = df.assign(e=v - x @ fit).groupby(["rater_id", "prompt_id"])["e"].sum().to_numpy()
    c = len(resid)
    dfe = c - terms[0][1] - terms[1][1] - 1
    (vr, dr), (vp, dp) = terms
    vc = c / dfe * (resid**2).sum() / n**2
    var = vr + vp - vc
    df_ = var**2 / sum(t**2 / d for t, d in ((vr, dr), (vp, dp), (vc, dfe)))
    return var, df_


def test_rater_effects_only_give_the_rater_means_interval():
    rng = np.random.default_rng(0)
    rater = rng.normal(0, 1, 12)
    df = _grid(3 + rater[:, None] + np.zeros((12, 5)))  # prompts add nothing, no noise
    iv = clustered_mean(df)
    # no residual and no prompt term: V is the rater means' s^2 / 12, with their 11 df
    lo, hi = st.t.interval(0.95, 11, rater.mean() + 3, st.sem(rater))
    assert iv.mean == pytest.approx(3 + rater.mean())
    assert (iv.low, iv.high) == pytest.approx((lo, hi), rel=1e-9)
    assert (iv.se, iv.df) == pytest.approx((st.sem(rater), 11), rel=1e-9)
    assert (iv.raters, iv.prompts, iv.n, iv.note) == (12, 5, 60, "")


def test_two_way_interval_equals_the_closed_form_written_out():
    rng = np.random.default_rng(4)
    df = _grid(
        3 + rng.normal(0, 0.5, (9, 1)) + rng.normal(0, 0.4, (1, 7)) + rng.normal(0, 0.6, (9, 7))
    )
    df = df.sample(frac=0.8, random_state=1)  # unbalanced: some cells missing
    var, dof = _cgm_by_hand(df)
    iv = clustered_mean(df)
    assert (iv.se**2, iv.df) == pytest.approx((var, dof), rel=1e-7)
    half = st.t.ppf(0.975, dof) * math.sqrt(var)
    assert (iv.low, iv.high) == pytest.approx((iv.mean - half, iv.mean + half), rel=1e-7)


def test_balanced_two_way_variance_is_the_anova_estimator():
    """Every rater rates every prompt once: V is exactly (MS_raters + MS_prompts - MS_resid)
    / (R P), the unbiased moment estimator of var(mean) = s_r^2/R + s_p^2/P + s_e^2/(R P)."""
    rng = np.random.default_rng(9)
    y = 60 + rng.normal(0, 10, (11, 1)) + rng.normal(0, 6, (1, 8)) + rng.normal(0, 12, (11, 8))
    R, P = y.shape
    g = y.mean()
    ms_r = P * ((y.mean(1) - g) ** 2).sum() / (R - 1)
    ms_p = R * ((y.mean(0) - g) ** 2).sum() / (P - 1)
    res = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + g
    ms_e = (res**2).sum() / ((R - 1) * (P - 1))
    iv = clustered_mean(_grid(y))
    assert iv.se**2 == pytest.approx((ms_r + ms_p - ms_e) / (R * P), rel=1e-9)


def test_without_clusters_it_is_the_textbook_t_interval():
    v = np.array([2.0, 3, 3, 4, 5, 1, 4, 4])
    iv = clustered_mean(pd.DataFrame({"score": v}))
    lo, hi = st.t.interval(0.95, len(v) - 1, v.mean(), st.sem(v))
    assert (iv.low, iv.high, iv.df) == pytest.approx((lo, hi, len(v) - 1), rel=1e-9)


def test_prompt_effects_widen_the_interval_and_independent_ones_do_not():
    rng = np.random.default_rng(1)
    prompt = rng.normal(0, 0.8, 6)
    df = _grid(3 + prompt[None, :] + rng.normal(0, 0.3, (30, 6)))
    two_way = clustered_mean(df)
    iid = st.t.interval(0.95, len(df) - 1, df["score"].mean(), st.sem(df["score"]))
    assert two_way.high - two_way.low > 2 * (iid[1] - iid[0])  # 180 ratings, but 6 prompts
    assert two_way.df < 6  # the prompts' 5 df, not the ratings' 179
    no_prompt = clustered_mean(df.drop(columns="prompt_id"))
    assert no_prompt.high - no_prompt.low < two_way.high - two_way.low


def test_woodruff_median_interval_over_raters_and_prompts():
    v = np.arange(20.0)  # one rating per rater: the share below the median has se 0.5/sqrt(20)
    iv = clustered_median(pd.DataFrame({"rater_id": range(20), "score": v}))
    se = math.sqrt(20 / 19 * 20 * 0.25 / 400)  # every (1[v <= 9.5] - 0.5)^2 is 0.25
    half = st.t.ppf(0.975, 19) * se
    want = np.quantile(v, [0.5 - half, 0.5 + half], method="inverted_cdf")
    assert iv.mean == 9.5 and (iv.low, iv.high) == tuple(want)
    assert iv.se == pytest.approx(se)
    rng = np.random.default_rng(2)
    rater = rng.normal(0, 15, 10)
    df = _grid(60 + rater[:, None] + rng.normal(0, 5, (10, 8)))
    clustered = clustered_median(df)
    iid = clustered_median(df.drop(columns=["rater_id", "prompt_id"]))
    assert clustered.high - clustered.low > 1.5 * (iid.high - iid.low)  # raters lean together


def test_interval_clipped_never_zero_width_and_too_few():
    top = _grid(np.full((6, 4), 5.0))
    top.loc[0, "score"] = 4.0
    iv = clustered_mean(top, scale=MOS_SCALE)
    # on the logit of (mean - 1) / 4: asymmetric, longer away from the end, inside the scale
    p = (iv.mean - 1) / 4
    half = st.t.ppf(0.975, iv.df) * iv.se / 4 / (p * (1 - p))
    want = [1 + 4 / (1 + math.exp(-(math.log(p / (1 - p)) + h))) for h in (-half, half)]
    assert (iv.low, iv.high) == pytest.approx(want, rel=1e-12)
    assert iv.low < iv.mean < iv.high < 5.0 and iv.mean - iv.low > iv.high - iv.mean
    plain = clustered_mean(top)  # no scale: the symmetric interval, past the scale's end
    assert plain.high > 5.0 and plain.high - plain.mean == pytest.approx(plain.mean - plain.low)
    flat = clustered_mean(_grid(np.full((6, 4), 3.0)))
    assert math.isnan(flat.low) and flat.note == f"{TOO_FEW} (no spread)"
    two = clustered_mean(_grid(np.array([[1.0, 5.0], [2.0, 4.0]])))
    assert math.isnan(two.high) and two.note == TOO_FEW and two.mean == 3.0
    empty = clustered_mean(_grid(np.zeros((0, 0))))
    assert empty.n == 0 and empty.note == TOO_FEW
    t = interval_table(
        pd.concat([top.assign(system_id="a"), _grid(np.full((2, 2), 2.0)).assign(system_id="b")]),
        ["system_id"],
    )
    assert t["system_id"].tolist() == ["a", "b"] and t.loc[1, "note"] == TOO_FEW


def test_paired_wilcoxon_on_rater_means():
    rows = []
    diffs = [0.5, 1.0, 1.5, -0.25, 2.0, 0.75, 1.25]
    for r, d in enumerate(diffs):
        for k in range(2):  # two ratings per system: the test uses each rater's mean
            rows += [(f"r{r}", "a", 3.0 + k), (f"r{r}", "b", 3.0 + k + d)]
    rows += [("lonely", "a", 1.0)]  # rated only one system: not a pair
    df = pd.DataFrame(rows, columns=["rater_id", "system_id", "score"])
    (row,) = paired_tests(df).to_dict("records")
    assert (row["x"], row["y"], row["raters"]) == ("a", "b", 7)
    assert row["diff_y_minus_x"] == pytest.approx(np.mean(diffs))
    assert row["p"] == pytest.approx(st.wilcoxon(diffs).pvalue)
    # ranks of |d|: 0.25 -> 1 is the only negative one, of a total 28
    assert row["rank_biserial"] == pytest.approx((27 - 1) / 28)
    assert row["p_holm"] == row["p"] and row["significant"] == (row["p"] < 0.05)


def test_sign_test_counts_each_rater_once():
    rows = []
    for r in range(9):  # 8 raters prefer b (by 3 votes to 1), one prefers a
        for k in range(4):
            b_wins = (k < 3) if r < 8 else (k == 0)
            rows.append((f"r{r}", "a", "b", "b" if b_wins else "a"))
    rows.append(("r9", "a", "b", "tie"))  # a tie only: no majority, left out
    v = oriented_votes(pd.DataFrame(rows, columns=["rater_id", "system_a", "system_b", "choice"]))
    (row,) = sign_tests(v).to_dict("records")
    assert (row["raters_x"], row["raters_y"]) == (1, 8)
    assert row["p"] == pytest.approx(st.binomtest(1, 9).pvalue)  # not binomtest(10, 36)


def _rater(rid, items, anchor=None, gold=None, trap=2.0):
    rows = [(rid, "item", np.nan, float(s)) for s in items]
    if anchor is not None:
        rows.append((rid, "gold", 1.0, float(anchor)))
    if gold is not None:
        rows.append((rid, "gold", 5.0, float(gold)))
    rows.append((rid, "trap", 2.0, trap))
    return rows


def test_screening_is_relative_to_the_raters_own_scale():
    rows = (
        _rater("harsh", [1, 2, 2, 3, 1, 2], anchor=1, gold=3)  # P.808's ±1 would fail the gold
        + _rater("lenient", [4, 5, 4, 5, 3, 5], anchor=2, gold=5)
        + _rater("inverted", [4, 3, 5, 2, 4, 3], anchor=5, gold=1)
        + _rater("random", [1, 5, 3, 2, 4, 5], anchor=4, gold=2, trap=4)
        + _rater("fair_gold", [3, 4, 3, 4, 2, 3], anchor=2, gold=2)  # gold a mediocre take
        + _rater("anchor_only", [3, 4, 3, 4, 2, 3], anchor=4)  # no gold: only the anchor
    )
    df = pd.DataFrame(rows, columns=["rater_id", "role", "expected", "score"])
    scr = screen_raters(df).set_index("rater_id")
    assert not scr.loc["harsh", "excluded"] and not scr.loc["lenient", "excluded"]
    assert not scr.loc["fair_gold", "excluded"]  # equal to the anchor is not below it
    inv = scr.loc["inverted"]
    assert inv["excluded"] and inv["gold_failed"] == 2
    assert "anchor rated 5, not below own mean 3.5" in inv["reasons"]
    assert "gold rated 1, below the anchor's 5" in inv["reasons"]
    rnd = scr.loc["random"]
    assert rnd["excluded"] and "trap failed x1" in rnd["reasons"]
    assert "anchor rated 4" in rnd["reasons"] and rnd["gold_failed"] == 2
    assert scr.loc["anchor_only", "excluded"] and scr.loc["anchor_only", "gold_failed"] == 1


def test_simulated_honest_raters_are_kept_and_bad_ones_caught():
    """A small version of the benchmark: 10 simulated tests of 30 honest raters and 8 bad."""
    model = MosModel()
    honest_out, bad_in = 0, 0
    for seed in range(10):
        d = mos_ratings(model, np.random.default_rng(seed), seed % 2)
        scr = screen_raters(d).set_index("rater_id")
        kinds = d.groupby("rater_id")["kind"].first()
        honest_out += int(scr.loc[kinds.index[kinds == "honest"], "excluded"].sum())
        bad_in += int((~scr.loc[kinds.index[kinds != "honest"], "excluded"]).sum())
    assert honest_out <= 3  # of 300 honest raters (the benchmark: about 0.1 in 30)
    assert bad_in <= 8  # of 80 bad raters
    assert expected_rating(3.0, 0.84) == pytest.approx(3.0)
    assert expected_rating(4.0, 0.84) < 4.0  # clipping at 5 pulls it down


def test_arena_ranks_are_shared_until_told_apart():
    rows = []
    for _ in range(60):  # p and q: 50/50 between them; both beat w 9 times in 10
        rows += [("p", "q", "a"), ("p", "q", "b")]
    for s in ("p", "q"):
        rows += [(s, "w", "a")] * 54 + [(s, "w", "b")] * 6
    votes = pd.DataFrame(rows, columns=["system_a", "system_b", "choice"])
    lb = bt_leaderboard(votes, n_boot=200, seed=1).set_index("system")
    assert lb.loc["p", "rank"] == lb.loc["q", "rank"] == 1
    assert lb.loc["w", "rank"] == 3 and lb.loc["w", "better_systems"] == 2


def test_mushra_screens_on_the_mid_anchor_and_labels_both():
    rows = []
    for rater, low, mid in (("ok", 95, 40), ("deaf_to_7k", 20, 95)):
        for k in range(4):
            a = f"{rater}{k}"
            rows += [
                (rater, a, "reference", "ref", 100.0),
                (rater, a, "anchor", "__anchor_low__", float(low)),
                (rater, a, "anchor", "__anchor_mid__", float(mid)),
                (rater, a, "item", "s1", 60.0 + k),
            ]
    df = pd.DataFrame(rows, columns=["rater_id", "assignment_id", "role", "system_id", "score"])
    # the statistic knows no kind's pseudo systems: the MUSHRA kind names its anchors
    scr = mushra_screening(
        df, anchors=MUSHRA_ANCHOR_LABELS, screen_on=MUSHRA_SCREEN_ANCHOR
    ).set_index("rater_id")
    # a low anchor rated 95 is odd but not BS.1534-3's rule; the mid anchor above 90 is
    assert not scr.loc["ok", "excluded"]
    assert scr.loc["deaf_to_7k", "excluded"] and scr.loc["deaf_to_7k", "anchor_high"] == 4
    assert "mid anchor (7 kHz) > 90 on 4/4 items" in scr.loc["deaf_to_7k", "reasons"]
    t = mushra_table(df[df["rater_id"] == "ok"], anchors=MUSHRA_ANCHOR_LABELS).set_index(
        "condition"
    )
    assert set(t.index) == {"hidden reference", "low anchor (3.5 kHz)", "mid anchor (7 kHz)", "s1"}
    plain = mushra_table(df[df["rater_id"] == "ok"]).set_index("condition")
    assert set(plain.index) == {"hidden reference", "anchor", "s1"}
    assert (t.loc["s1", "q1"], t.loc["s1", "median"], t.loc["s1", "q3"]) == (60.75, 61.5, 62.25)
    assert t.loc["s1", "note"] == TOO_FEW  # one rater: no interval over raters


def test_bradley_terry_resamples_voters_not_votes():
    """Ten voters, each with 20 votes all one way (five for a, five for b): the votes lean
    together, so the voter bootstrap must be far wider than a vote bootstrap."""
    rows = []
    for r in range(10):
        rows += [(f"v{r}", "a", "b", "a" if r < 5 else "b")] * 20
    votes = pd.DataFrame(rows, columns=["rater_id", "system_a", "system_b", "choice"])
    by_voter = bt_leaderboard(votes, n_boot=300, seed=0).set_index("system")
    by_vote = bt_leaderboard(votes.drop(columns="rater_id"), n_boot=300, seed=0)
    by_vote = by_vote.set_index("system")
    assert by_voter.attrs["resampled"] == "voters" and by_vote.attrs["resampled"] == "votes"
    width = lambda t: t.loc["a", "ci_high"] - t.loc["a", "ci_low"]  # noqa: E731
    assert width(by_voter) > 2.5 * width(by_vote)


def test_p_values_keep_their_size():
    assert round_p(3.2345e-07) == 3.23e-07 and round_p(0.04567) == 0.0457
    assert format_p(3.2345e-07) == "3.23e-07" and format_p(0.0312) == "0.0312"
    assert format_p(float("nan")) == "–" and round_p(0.0) == 0.0
