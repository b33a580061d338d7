"""A reliability score per rater: how well the rater agrees with the rest of the panel, how
many check items they passed, and how long they spent on an item against how long it plays.

Why beside the screening rules: the rules (:mod:`evaluation.listening.screening`) exclude a
rater who fails a check outright; a careless rater who passes the few checks still gives
answers that do not follow the stimuli. Agreement with the leave-one-out panel mean catches
them (Podonos and reseval replace raters on such a score), and a researcher reads it beside
the exclusions. Nothing here excludes anyone: the score is reported, not applied.

Definitions (``docs/listening-tests.md`` "Rater reliability" states the same):

* ``agreement``: Pearson's r between the rater's item scores and, for each of the same
  stimuli (system or pair, prompt, slot), the mean score of *every other* rater of it; over
  the rater's stimuli that at least one other rater scored, given from :data:`MIN_SHARED` of
  them on (NaN with fewer). A rater whose scores do not vary, or whose stimuli all have the
  same panel mean, has agreement 0 (they carry no information on the differences).
* ``checks_passed``: the share of the rater's check items passed (1 - failures / checks),
  NaN for a rater with no check items.
* ``time_ratio``: the median over the rater's items of the time on the item (first sound to
  answer) divided by the clip's played length; NaN where the times are unknown.
* ``reliability`` = max(agreement, 0) x checks_passed (a missing part counts as 1; NaN when
  agreement is NaN): 0 to 1, higher is better.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from evaluation.listening.data import TestData

MIN_SHARED = 3
"""Stimuli a rater must share with the panel before an agreement is given."""
SCORE_COLUMN = "score"
"""A rating row's answer when the rows name no kind (each kind's rows: the first numeric of
its own rating columns, :func:`scores`)."""
NOT_ANSWERS = frozenset({"played_ms", "duration_s"})
"""Rating columns that are numbers but not the answer."""
CELL_COLUMNS = ("kind", "system_id", "system_a", "system_b", "prompt_id", "slot")
"""What makes two ratings the same stimulus (those of them a rating row has)."""
FAILURE_COLUMNS = ("gold_failed", "trap_failed", "ab_check_failed")
"""The rater table's counts of failed check items (MOS, A/B; a MUSHRA test's reference and
anchors sit on its item screens, so its raters answer no check item)."""
COLUMNS = ("agreement", "shared", "checks_passed", "time_ratio", "reliability")
"""The columns :func:`rater_reliability` adds to the rater table."""


def _cells(items: pd.DataFrame) -> pd.Series:
    cols = [c for c in CELL_COLUMNS if c in items.columns]
    keys = zip(*(items[c].tolist() for c in cols), strict=True)
    return pd.Series(["|".join(map(str, k)) for k in keys], index=items.index, dtype=object)


def item_scores(ratings: pd.DataFrame) -> pd.DataFrame:
    """``rater_id``, ``cell``, ``score`` of every rated item (check items left out): the
    rows of ``raw/ratings.csv`` (:func:`evaluation.listening.ratings.ratings_table`)."""
    out = pd.DataFrame(columns=["rater_id", "cell", "score"])
    if ratings is None or ratings.empty:
        return out
    r = ratings[ratings["role"].fillna("item") == "item"] if "role" in ratings else ratings
    got = pd.DataFrame({"rater_id": r["rater_id"], "cell": _cells(r), "score": scores(r)})
    return got.dropna(subset=["score"]).reset_index(drop=True)


def scores(r: pd.DataFrame) -> pd.Series:
    """Each rating row's answer as a number: for a kind's rows the first of its rating
    columns that holds numbers (MOS and MUSHRA: the score; A/B: the CMOS answer), else the
    ``score`` column."""
    from evaluation.listening.kinds import KINDS

    out = pd.Series(np.nan, index=r.index)
    if "kind" not in r:
        return pd.to_numeric(r.get(SCORE_COLUMN, out), errors="coerce")
    for kind in KINDS.values():
        mine = r["kind"] == kind.name
        for c in kind.rating_columns:
            if c in NOT_ANSWERS or c not in r or not mine.any():
                continue
            v = pd.to_numeric(r.loc[mine, c], errors="coerce")
            if v.notna().any():
                out.loc[mine] = v
                break
    return out


def agreement(scores: pd.DataFrame) -> pd.DataFrame:
    """Per rater: ``agreement`` (r with the leave-one-out panel mean) and ``shared`` (the
    stimuli it was computed over). ``scores``: :func:`item_scores`."""
    if scores.empty:
        return pd.DataFrame(columns=["agreement", "shared"]).rename_axis("rater_id")
    s = scores.groupby(["rater_id", "cell"], as_index=False)["score"].mean()
    tot = s.groupby("cell")["score"].agg(["sum", "count"])
    s = s.join(tot, on="cell")
    s = s[s["count"] >= 2].assign(loo=lambda d: (d["sum"] - d["score"]) / (d["count"] - 1))
    rows = {}
    for rater, g in s.groupby("rater_id"):
        rows[rater] = (_r(g["score"].to_numpy(), g["loo"].to_numpy()), len(g))
    got = pd.DataFrame.from_dict(rows, orient="index", columns=["agreement", "shared"])
    missing = sorted(set(scores["rater_id"]) - set(got.index))
    if missing:
        got = pd.concat([got, pd.DataFrame({"agreement": np.nan, "shared": 0}, index=missing)])
    return got.rename_axis("rater_id")


def _r(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < MIN_SHARED:
        return math.nan
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def time_ratio(ratings: pd.DataFrame) -> pd.Series:
    """Per rater: median of time on item / the clip's played length (the ratings rows'
    ``time_on_item_ms`` and ``played_ms``, else ``duration_s``)."""
    if ratings is None or ratings.empty or "time_on_item_ms" not in ratings:
        return pd.Series(dtype=float)
    r = ratings[ratings["role"].fillna("item") == "item"] if "role" in ratings else ratings
    t = pd.to_numeric(r["time_on_item_ms"], errors="coerce")
    length = pd.Series(np.nan, index=r.index)
    if "played_ms" in r:
        length = pd.to_numeric(r["played_ms"], errors="coerce")
    if "duration_s" in r:
        length = length.fillna(pd.to_numeric(r["duration_s"], errors="coerce") * 1000.0)
    ratio = (t / length.where(length > 0)).replace([np.inf, -np.inf], np.nan)
    return ratio.groupby(r["rater_id"]).median()


def checks_passed(raters: pd.DataFrame, checks: pd.DataFrame | None) -> pd.Series:
    """Per rater: 1 - failed check items / check items answered (NaN: none answered)."""
    if raters.empty:
        return pd.Series(dtype=float)
    failed = sum(
        (
            pd.to_numeric(raters[c], errors="coerce").fillna(0)
            for c in FAILURE_COLUMNS
            if c in raters
        ),
        start=pd.Series(0.0, index=raters.index),
    )
    failed.index = raters["rater_id"]
    n = (
        checks.groupby("rater_id")["assignment_id"].nunique()
        if checks is not None and not checks.empty
        else pd.Series(dtype=float)
    )
    n = n.reindex(failed.index).astype(float)
    return (1.0 - failed / n.where(n > 0)).clip(lower=0.0)


def rater_reliability(
    raters: pd.DataFrame, ratings: pd.DataFrame, checks: pd.DataFrame | None = None
) -> pd.DataFrame:
    """:data:`COLUMNS` per rater of ``raters`` (the rater table), index ``rater_id``."""
    ids = pd.Index(raters["rater_id"] if not raters.empty else [], name="rater_id")
    ag = agreement(item_scores(ratings)).reindex(ids)
    out = pd.DataFrame(index=ids)
    out["agreement"] = ag["agreement"]
    out["shared"] = ag["shared"].fillna(0).astype(int)
    out["checks_passed"] = checks_passed(raters, checks).reindex(ids)
    out["time_ratio"] = time_ratio(ratings).reindex(ids)
    out["reliability"] = out["agreement"].clip(lower=0.0) * out["checks_passed"].fillna(1.0)
    return out


def with_reliability(table: pd.DataFrame, data: TestData) -> pd.DataFrame:
    """The rater table (:func:`evaluation.listening.screening.rater_table`) with
    :data:`COLUMNS` after its own: every kind's rating rows of the test, its check items and
    ``data.extra["item_times"]`` (the store's, when it read them)."""
    from evaluation.listening.ratings import ratings_table

    if table.empty:
        return table.reindex(columns=[*table.columns, *COLUMNS])
    times = data.extra.get("item_times")
    if times is None or times.empty:
        times = pd.DataFrame(columns=["rater_id", "assignment_id"])
    rel = rater_reliability(table, ratings_table(data, times), data.checks)
    return table.join(rel, on="rater_id")


def auc(good: list[float] | np.ndarray, bad: list[float] | np.ndarray) -> float:
    """The chance that a good rater's score is above a bad one's (ties count half): the
    area under the ROC curve of the score as a good/bad classifier."""
    g = np.asarray(good, dtype=float)
    b = np.asarray(bad, dtype=float)
    g, b = g[~np.isnan(g)], b[~np.isnan(b)]
    if not len(g) or not len(b):
        return math.nan
    diff = g[:, None] - b[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


__all__ = [
    "COLUMNS",
    "FAILURE_COLUMNS",
    "MIN_SHARED",
    "agreement",
    "auc",
    "checks_passed",
    "item_scores",
    "rater_reliability",
    "scores",
    "time_ratio",
    "with_reliability",
]
