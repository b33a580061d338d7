"""The arena's pair choice (evaluation/arena/sampling.py): the Bradley–Terry posterior against
evalica's fit, the expected information gain against a brute-force expected KL divergence, and
the safeguards (exploration, the floor, the draw among the near-best, side order)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evaluation.arena.sampling import (
    Posterior,
    SamplingRules,
    all_pairs,
    choose_pair,
    count_weighted_pair,
    information_gain,
    pair_totals,
    posterior,
    tally_of,
    with_pending,
)
from evaluation.stats import bt_leaderboard

SYSTEMS = ["s0", "s1", "s2", "s3"]
THETA = np.array([1.0, 0.3, 0.0, -1.3])


def simulated(n_votes: int, seed: int = 0) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_votes):
        i, j = rng.choice(4, 2, replace=False)
        p = 1 / (1 + np.exp(-(THETA[i] - THETA[j])))
        rows.append((SYSTEMS[i], SYSTEMS[j], "a" if rng.random() < p else "b"))
    return rows


def test_the_posterior_mean_follows_the_board_and_its_spread_shrinks_with_votes():
    rows = simulated(2000)
    post = posterior(SYSTEMS, tally_of(rows))
    board = bt_leaderboard(
        pd.DataFrame(rows, columns=["system_a", "system_b", "choice"]), n_boot=0
    ).set_index("system")
    fit = (board.loc[SYSTEMS, "rating"].to_numpy() - 1500) * np.log(10) / 400
    assert np.allclose(post.mean - post.mean.mean(), fit, atol=0.03)  # two weak priors agree
    assert np.allclose(post.mean - post.mean.mean(), THETA - THETA.mean(), atol=0.15)
    few = posterior(SYSTEMS, tally_of(rows[:40]))

    def spread(p):  # the variance of each difference from s0 (the prior alone sets the level)
        return np.array([p.cov[0, 0] + p.cov[k, k] - 2 * p.cov[0, k] for k in (1, 2, 3)])

    assert np.all(spread(post) < spread(few) / 10)
    empty = posterior(SYSTEMS, {})
    assert np.allclose(empty.mean, 0) and np.allclose(empty.cov, np.eye(4))  # the prior
    # votes given as counts are the same votes
    counted = tally_of([("s0", "s1", "a", 3), ("s1", "s0", "tie", 2)])
    assert counted == tally_of([("s0", "s1", "a")] * 3 + [("s1", "s0", "both_bad")] * 2)
    assert counted == {("s0", "s1"): (3.0, 0.0, 2.0)}


def expected_kl(post: Posterior, i: int, j: int, draws: int = 200_000) -> float:
    """The expected information of one vote by brute force: E_y KL(p(d | y) || p(d)) with
    the posterior of the pair's difference on a grid (what ASAP maximises)."""
    m = post.mean[i] - post.mean[j]
    v = post.cov[i, i] + post.cov[j, j] - 2 * post.cov[i, j]
    d = np.linspace(m - 8 * np.sqrt(v), m + 8 * np.sqrt(v), draws)
    prior = np.exp(-((d - m) ** 2) / (2 * v))
    prior /= prior.sum()
    p = 1 / (1 + np.exp(-d))
    out = 0.0
    for like in (p, 1 - p):
        py = float((prior * like).sum())
        postd = prior * like / py
        keep = postd > 0
        out += py * float((postd[keep] * np.log(postd[keep] / prior[keep])).sum())
    return out


def test_the_gain_is_the_expected_kl_divergence_and_prefers_close_uncertain_pairs():
    post = posterior(SYSTEMS, tally_of(simulated(60, seed=3)))
    i, j = all_pairs(4)
    gain = information_gain(post, i, j)
    brute = [expected_kl(post, a, b) for a, b in zip(i, j, strict=True)]
    assert np.allclose(gain, brute, rtol=1e-3)
    # a close pair with a wide posterior teaches more than a settled one
    wide = Posterior(("a", "b", "c"), np.array([0.0, 0.1, 3.0]), np.eye(3))
    g = information_gain(wide, np.array([0, 0]), np.array([1, 2]))
    assert g[0] > 2 * g[1]
    tight = Posterior(("a", "b", "c"), np.array([0.0, 0.1, 3.0]), np.eye(3) / 100)
    assert information_gain(tight, np.array([0]), np.array([1]))[0] < g[0] / 5


def test_pending_battles_lower_the_gain_of_their_pair():
    post = posterior(SYSTEMS, tally_of(simulated(100)))
    i, j = np.array([1, 0]), np.array([2, 3])
    before = information_gain(post, i, j)
    after = information_gain(with_pending(post, {("s1", "s2"): 20}), i, j)
    assert after[0] < 0.7 * before[0] and after[1] == pytest.approx(before[1], rel=0.1)
    assert with_pending(post, {}) is post and with_pending(post, {("x", "y"): 5}) is post


def test_the_choice_is_random_among_the_near_best_with_a_floor_and_exploration():
    rows = simulated(400)
    tally = tally_of(rows)
    post = posterior(SYSTEMS, tally)
    rng = np.random.default_rng(5)
    rules = SamplingRules(explore=0.0, floor_share=0.0, near_best=0.9, min_candidates=3)
    picks = [choose_pair(post, tally, rng, rules) for _ in range(2000)]
    pairs = {frozenset((c.a, c.b)) for c in picks}
    assert len(pairs) >= 3  # never one predictable pair
    i, j = all_pairs(4)
    gain = information_gain(post, i, j)
    best = {
        frozenset((SYSTEMS[a], SYSTEMS[b]))
        for a, b, g in zip(i, j, gain, strict=True)
        if g >= 0.9 * gain.max()
    }
    top3 = {frozenset((SYSTEMS[i[k]], SYSTEMS[j[k]])) for k in np.argsort(-gain)[:3]}
    assert pairs <= best | top3
    assert abs(np.mean([c.a == min(c.a, c.b) for c in picks]) - 0.5) < 0.05
    # exploration: every pair, about its share
    explore = [choose_pair(post, tally, rng, SamplingRules(explore=1.0)) for _ in range(1200)]
    assert {c.why for c in explore} == {"explore"}
    assert len({frozenset((c.a, c.b)) for c in explore}) == 6
    # the floor: s3 left out of 400 votes is in the next battle
    starved = tally_of([r for r in rows if "s3" not in r[:2]])
    post2 = posterior(SYSTEMS, starved)
    c = choose_pair(post2, starved, rng, SamplingRules(explore=0.0))
    assert c.why == "floor" and "s3" in (c.a, c.b)


def test_the_baseline_weights_pairs_by_their_votes():
    rng = np.random.default_rng(1)
    totals = pair_totals(tally_of([("s0", "s1", "a")] * 200))
    picks = [count_weighted_pair(SYSTEMS, totals, rng) for _ in range(3000)]
    share = sum({c.a, c.b} == {"s0", "s1"} for c in picks) / 3000
    assert share < 0.01  # 1/205 against 1/5 for each of the five other pairs
    with pytest.raises(ValueError, match="no two systems"):
        count_weighted_pair(["s0"], {}, rng)
