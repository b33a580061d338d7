"""The rater reliability score (issue #42): agreement with the leave-one-out panel mean,
check items passed, time on item. A simulation with known good and bad raters (fixed seeds)
shows the score separates them, also careless raters who pass every check item (whom the
screening rules keep)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evaluation import stats
from evaluation.listening.reliability import (
    MIN_SHARED,
    agreement,
    auc,
    item_scores,
    rater_reliability,
    time_ratio,
)
from tests.support.simulate import MosModel, mos_ratings


def simulated(seed: int, careless: int = 6) -> tuple[pd.DataFrame, pd.Series]:
    """30 honest raters, 12 of the simulator's bad ones, and ``careless`` raters who answer
    every check item right and every item at random."""
    m = MosModel(honest=30, bad={"random": 3 + careless, "straight": 3, "inverted": 2, "middle": 4})
    df = mos_ratings(m, np.random.default_rng(seed)).rename(columns={"kind": "truth"})
    random_ids = sorted(df.loc[df["truth"] == "random", "rater_id"].unique())
    for rid in random_ids[:careless]:  # they pass the checks, they do not listen
        mine = df["rater_id"] == rid
        df.loc[mine, "truth"] = "careless"
        df.loc[mine & (df["prompt_id"] == "anchor"), "score"] = 1.0
        df.loc[mine & (df["prompt_id"] == "gold"), "score"] = 5.0
        df.loc[mine & (df["role"] == "trap"), "score"] = df["expected"]
    df["assignment_id"] = df["rater_id"] + ":" + df["prompt_id"]
    return df, df.groupby("rater_id")["truth"].first()


def scored(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    rules = stats.screen_raters(df)
    return rules, rater_reliability(rules, df.drop(columns="truth"), df[df["role"] != "item"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_score_separates_good_from_bad_raters(seed):
    df, truth = simulated(seed)
    rules, rel = scored(df)
    good, bad = rel[truth == "honest"], rel[truth != "honest"]
    a = auc(good["reliability"], bad["reliability"])
    assert a >= 0.93, (seed, a)
    # the docs' "Rater reliability" states the AUCs this simulation measures
    doc = (Path(__file__).resolve().parents[1] / "docs" / "listening-tests.md").read_text()
    doc = " ".join(doc[doc.index("### Rater reliability") :].split())
    careless_auc = auc(good["reliability"], rel.loc[truth == "careless", "reliability"])
    assert f"{a:.3f}" in doc and f"{careless_auc:.3f}" in doc, (a, careless_auc)
    # the careless raters pass every rule, the score still ranks them below honest raters
    careless = truth[truth == "careless"].index
    kept = ~rules.set_index("rater_id").loc[careless, "excluded"]
    assert kept.all()
    assert auc(good["reliability"], rel.loc[careless, "reliability"]) >= 0.9
    assert rel.loc[careless, "checks_passed"].eq(1.0).all()
    # straight-liners and inverted raters score 0 (no information / the wrong way round)
    flat = truth[truth.isin(["straight", "inverted"])].index
    assert rel.loc[flat, "reliability"].eq(0.0).all()
    assert rel.loc[truth == "honest", "agreement"].median() > 0.35


def test_agreement_is_the_leave_one_out_correlation():
    # three raters on four stimuli: c copies a's scores, b reverses them
    rows = []
    for rid, scores in {"a": [1, 2, 3, 4], "b": [4, 3, 2, 1], "c": [1, 2, 3, 4]}.items():
        rows += [
            {"rater_id": rid, "cell": f"s{k}", "score": float(v)} for k, v in enumerate(scores)
        ]
    got = agreement(pd.DataFrame(rows))
    # a's panel: mean of b and c = 2.5 everywhere -> no variation: agreement 0
    assert got.loc["a", "agreement"] == 0.0 and got.loc["a", "shared"] == 4
    assert got.loc["b", "agreement"] == pytest.approx(-1.0)  # against a and c (identical)
    # fewer shared stimuli than MIN_SHARED: no agreement
    few = pd.DataFrame(rows[: MIN_SHARED - 1] + rows[4 : 4 + MIN_SHARED - 1])
    assert agreement(few)["agreement"].isna().all()


def test_checks_and_time_ratio():
    ratings = pd.DataFrame(
        {
            "rater_id": ["a", "a", "a", "b"],
            "role": ["item", "item", "gold", "item"],
            "system_id": ["x", "y", "__gold__", "x"],
            "prompt_id": ["p", "p", "g", "p"],
            "score": [3.0, 4.0, 5.0, 2.0],
            "played_ms": [2000.0, 4000.0, 2000.0, 2000.0],
            "time_on_item_ms": [3000.0, 4000.0, 9000.0, 8000.0],
        }
    )
    assert item_scores(ratings)["rater_id"].tolist() == ["a", "a", "b"]  # the gold left out
    tr = time_ratio(ratings)
    assert tr["a"] == pytest.approx(1.25) and tr["b"] == pytest.approx(4.0)  # median(1.5, 1.0)
    raters = pd.DataFrame({"rater_id": ["a", "b"], "gold_failed": [1, 0], "trap_failed": [0, 0]})
    checks = pd.DataFrame({"rater_id": ["a", "a"], "assignment_id": ["g1", "g2"]})
    rel = rater_reliability(raters, ratings, checks)
    assert rel.loc["a", "checks_passed"] == 0.5 and np.isnan(rel.loc["b", "checks_passed"])
    assert auc([1.0, 2.0], [0.0, 2.0]) == 0.625
