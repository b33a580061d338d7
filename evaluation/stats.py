"""Statistics for listening tests and glitch reports (pandas + scipy; Bradley–Terry via evalica).

Every function takes the DataFrames that :class:`app.store.Store` returns (a kind's answer
table through ``answer_frame``: ``mos_ratings``, ``ab_votes``, ``glitch_reports``; and
``findings_frame``, ``takes_frame``, ``frame("assignments")``) and returns a DataFrame, so a
notebook, the report and the tests all use the same numbers.

* :func:`mos_table` — MOS per system (or system × prompt) with a Student-t 95 % interval.
* :func:`add_z_scores` — per-rater z-normalised scores (a robustness column; raw stays primary).
* :func:`screen_raters` / :func:`usable_ratings` — P.808-style screening: failed trap items,
  check items judged against the rater's own use of the scale (:class:`ScreeningRules`),
  near-zero rating variance (straight-lining), unplayed items.
* :func:`ab_table` — per system pair: preference share and CMOS with two-way cluster-robust
  intervals (raters x prompts), a vote-level sign test (ties reported separately), all with the
  sign corrected for presentation order; plus the first-position bias.
* :func:`bt_leaderboard` — Bradley–Terry ratings (evalica) with bootstrap 95 % intervals that
  resample voters (all of a voter's votes together; votes only when there is no voter
  column), sorted by the lower bound, with a minimum-votes threshold; rank = 1 + the listed
  systems significantly stronger (Holm).
* :func:`mushra_screening`, :func:`mushra_table` — BS.1534-3 post-screening (mid anchor) and
  per-condition medians (Woodruff intervals over raters and prompts), quartiles and clustered
  means.

Intervals and pairwise tests that account for raters and prompts are in
:mod:`evaluation.inference`; :func:`mos_table` (a plain t interval) stays for single-rater data
and as the "naive" comparison of the validity benchmark.

Rater glitch marks (per minute, per seam, against the findings) are :mod:`evaluation.marks`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import evalica
import numpy as np
import pandas as pd
from scipy import stats

# --------------------------------------------------------------------------- MOS


def t_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean (NaN for fewer than two values)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) < 2:
        return (float("nan"), float("nan"))
    sem = stats.sem(v)
    if sem == 0:
        return (float(v.mean()), float(v.mean()))
    lo, hi = stats.t.interval(confidence, len(v) - 1, loc=v.mean(), scale=sem)
    return float(lo), float(hi)


def mos_table(
    ratings: pd.DataFrame,
    by: tuple[str, ...] | list[str] = ("system_id",),
    score: str = "score",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Mean opinion score per group: n, mean, sd, sem, ci_low, ci_high (t interval)."""
    by = list(by)
    cols = [*by, "n", "mean", "sd", "sem", "ci_low", "ci_high"]
    if ratings.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in ratings.groupby(by, dropna=False, sort=True):
        v = g[score].astype(float).to_numpy()
        lo, hi = t_interval(v, confidence)
        key = key if isinstance(key, tuple) else (key,)
        rows.append(
            [
                *key,
                len(v),
                float(v.mean()),
                float(v.std(ddof=1)) if len(v) > 1 else float("nan"),
                float(stats.sem(v)) if len(v) > 1 else float("nan"),
                lo,
                hi,
            ]
        )
    return pd.DataFrame(rows, columns=cols).sort_values("mean", ascending=False, ignore_index=True)


def add_z_scores(
    ratings: pd.DataFrame, rater: str = "rater_id", score: str = "score"
) -> pd.DataFrame:
    """Copy with a ``z`` column: each rater's scores minus their mean over their sd.

    Raters with one rating or zero variance get z = 0 (they carry no ranking information).
    """
    out = ratings.copy()
    g = out.groupby(rater)[score]
    mean = g.transform("mean")
    sd = g.transform(lambda s: s.std(ddof=1) if len(s) > 1 else np.nan)
    out["z"] = ((out[score] - mean) / sd).where(sd > 0, 0.0).fillna(0.0)
    return out


# --------------------------------------------------------------------------- screening


@dataclass(frozen=True)
class ScreeningRules:
    """P.808-style rules (``listening-tests.md`` §3.2), with the check items judged against the
    rater's own use of the scale.

    Why relative: an honest but harsh rater gives a known-good clip a 3 and fails P.808's
    "gold within ±1 of 5"; with rater sd 0.5 and noise 0.6 that excluded several honest raters
    in 30, and many more when the "gold" was a take of a mediocre system. A rater who hears
    anything at all rates the low anchor below their own average and the gold above the anchor,
    whatever their leniency; random, inverted and straight-line raters often do not.
    """

    relative_checks: bool = True
    """The low anchor (expected <= 2) fails when rated at or above the rater's mean item score;
    the gold (expected >= 4) fails when rated below the rater's low anchor (strictly: a gold
    that is only a fair take still passes an honest rater, see the benchmark). A gold with no
    anchor beside it (or ``relative_checks=False``) is judged by P.808's absolute tolerance."""
    gold_tolerance: float = 1.0
    """Absolute check: within this of the expected score passes (P.808: ±1)."""
    max_gold_failures: int = 0
    max_trap_failures: int = 0
    """A trap ("select 2") passes only with exactly the expected answer."""
    min_variance: float = 0.1
    """Rating variance below this over ``min_items_for_variance`` items is straight-lining."""
    min_items_for_variance: int = 4
    min_played_fraction: float = 0.95
    """An item counts as played if the player played at least this share of the clip."""
    max_unplayed_share: float = 0.2
    """Raters who left more of their items unplayed than this are excluded."""

    def describe(self) -> str:
        checks = (
            "low anchor below the rater's own mean item score, gold not below the rater's anchor"
            if self.relative_checks
            else f"gold/anchor within ±{self.gold_tolerance:g} of the expected score"
        )
        return (
            f"excluded when: a trap answer is not exactly the one asked (>{self.max_trap_failures}"
            f" misses); check items failed (>{self.max_gold_failures}: {checks}); rating variance"
            f" < {self.min_variance:g} over >= {self.min_items_for_variance} items; more than"
            f" {self.max_unplayed_share:.0%} of items played < {self.min_played_fraction:.0%}"
        )


def unplayed(ratings: pd.DataFrame, frac: float) -> pd.Series:
    """Per rating: the player played less than ``frac`` of the clip (unknown counts as played)."""
    if "played_ms" not in ratings or "duration_s" not in ratings:
        return pd.Series(False, index=ratings.index)
    played = pd.to_numeric(ratings["played_ms"], errors="coerce")
    need = pd.to_numeric(ratings["duration_s"], errors="coerce") * 1000 * frac
    return played.notna() & need.notna() & (played < need)


def played_items(ratings: pd.DataFrame, rules: ScreeningRules = ScreeningRules()) -> pd.DataFrame:
    """The real items (not gold, trap or anchor) that were played: what a MOS is computed on,
    for a test's results and for the report alike (screening then drops raters)."""
    role = ratings["role"] if "role" in ratings else pd.Series("item", index=ratings.index)
    return ratings[(role == "item") & ~unplayed(ratings, rules.min_played_fraction)]


def _check_failures(
    items: pd.DataFrame, gold: pd.DataFrame, rules: ScreeningRules
) -> tuple[int, list[str]]:
    """Failed check items (see :class:`ScreeningRules`) and one reason per failure."""
    score = gold["score"].astype(float)
    expected = gold["expected"].astype(float)
    low, high = gold[expected <= 2], gold[expected >= 4]
    mean = float(items["score"].mean()) if len(items) else float("nan")
    fails: list[str] = []
    absolute = gold.index if not rules.relative_checks else []
    if rules.relative_checks:
        for _, r in low.iterrows():
            if np.isnan(mean):
                absolute = [*absolute, r.name]
            elif r["score"] >= mean:
                fails.append(f"anchor rated {r['score']:g}, not below own mean {mean:.1f}")
        floor = float(low["score"].max()) if len(low) else float("nan")
        for _, r in high.iterrows():
            if np.isnan(floor):
                absolute = [*absolute, r.name]
            elif r["score"] < floor:
                fails.append(f"gold rated {r['score']:g}, below the anchor's {floor:g}")
        rest = gold.drop(index=[*low.index, *high.index])
        absolute = [*absolute, *rest.index]
    for i in absolute:
        if abs(score[i] - expected[i]) > rules.gold_tolerance:
            fails.append(f"check item rated {score[i]:g}, expected {expected[i]:g}")
    return len(fails), fails


def screen_raters(ratings: pd.DataFrame, rules: ScreeningRules = ScreeningRules()) -> pd.DataFrame:
    """One row per rater: items, gold/trap failures, variance, unplayed items, excluded, reasons."""
    cols = [
        "rater_id",
        "items",
        "gold",
        "gold_failed",
        "trap",
        "trap_failed",
        "variance",
        "unplayed",
    ]
    if ratings.empty:
        return pd.DataFrame(columns=[*cols, "excluded", "reasons"])
    r = ratings.copy()
    if "role" not in r:
        r["role"] = "item"
    r["score"] = pd.to_numeric(r["score"], errors="coerce")
    r["expected"] = pd.to_numeric(r.get("expected"), errors="coerce")
    r["_unplayed"] = unplayed(r, rules.min_played_fraction)
    rows = []
    for rater, g in r.groupby("rater_id", sort=True):
        items = g[g["role"] == "item"]
        gold = g[g["role"] == "gold"]
        trap = g[g["role"] == "trap"]
        gold_failed, why = _check_failures(items, gold, rules)
        trap_failed = int((trap["score"] != trap["expected"]).sum())
        var = float(items["score"].var(ddof=1)) if len(items) > 1 else float("nan")
        n_unplayed = int(items["_unplayed"].sum())
        reasons = []
        if gold_failed > rules.max_gold_failures:
            reasons.append(f"gold failed x{gold_failed} ({'; '.join(why)})")
        if trap_failed > rules.max_trap_failures:
            reasons.append(f"trap failed x{trap_failed}")
        if len(items) >= rules.min_items_for_variance and var < rules.min_variance:
            reasons.append(f"variance {var:.2f} < {rules.min_variance}")
        if len(items) and n_unplayed / len(items) > rules.max_unplayed_share:
            reasons.append(f"{n_unplayed}/{len(items)} items not played")
        rows.append(
            [
                rater,
                len(items),
                len(gold),
                gold_failed,
                len(trap),
                trap_failed,
                var,
                n_unplayed,
                bool(reasons),
                "; ".join(reasons),
            ]
        )
    return pd.DataFrame(rows, columns=[*cols, "excluded", "reasons"])


def usable_ratings(ratings: pd.DataFrame, rules: ScreeningRules = ScreeningRules()) -> pd.DataFrame:
    """The ratings to analyse: real items (not gold/trap), played, from raters who passed."""
    if ratings.empty:
        return ratings
    scr = screen_raters(ratings, rules)
    keep = set(scr.loc[~scr["excluded"], "rater_id"])
    items = played_items(ratings, rules)
    return items[items["rater_id"].isin(keep)].copy()


# --------------------------------------------------------------------------- A/B and CMOS


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return (float("nan"), float("nan"))
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def oriented_votes(votes: pd.DataFrame) -> pd.DataFrame:
    """Votes re-expressed for the canonical pair ``x < y`` (system ids sorted).

    Adds ``x``, ``y``, ``winner`` (``x``/``y``/``tie``), ``cmos_y`` (how much better y is than x,
    the presentation order undone) and ``first_won`` (the clip played first won).
    """
    v = votes.copy()
    if v.empty:
        return v.assign(x=[], y=[], winner=[], cmos_y=[], first_won=[])
    a, b = v["system_a"].astype(str), v["system_b"].astype(str)
    swap = a > b
    v["x"] = np.where(swap, b, a)
    v["y"] = np.where(swap, a, b)
    ch = v["choice"]
    v["winner"] = np.select(
        [ch == "tie", (ch == "a") ^ swap],
        ["tie", "x"],
        default="y",
    )
    # cmos: the ab_votes column (the A/B answer -3..+3), not a kind
    cm = v["cmos"].astype(float) if "cmos" in v else pd.Series(np.nan, index=v.index)
    v["cmos_y"] = np.where(swap, -cm, cm)
    v["first_won"] = np.where(ch == "tie", np.nan, (ch == "a").astype(float))
    return v


def ab_table(votes: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per system pair (x < y): wins, ties, preference share of x among decisive votes and CMOS
    (how much better y is, presentation order undone; a tie counts as 0), each with the
    two-way cluster-robust interval over raters and prompts (the share's on the logit scale:
    :func:`evaluation.inference.clustered_share`; CMOS:
    :func:`evaluation.inference.clustered_mean`), and the
    vote-level two-sided sign-test p (``p_sign``; see :func:`evaluation.inference.sign_tests`
    for the rater-level test that the results page uses)."""
    from evaluation.inference import CMOS_SCALE, clustered_mean, clustered_share

    cols = [
        "x",
        "y",
        "n",
        "x_wins",
        "y_wins",
        "ties",
        "x_share",
        "x_share_low",
        "x_share_high",
        "p_sign",
        "cmos_n",
        "cmos_y",
        "cmos_low",
        "cmos_high",
        "note",
    ]
    v = oriented_votes(votes)
    if v.empty:
        return pd.DataFrame(columns=cols)
    if "prompt_id" not in v:
        v["prompt_id"] = None
    rows = []
    for (x, y), g in v.groupby(["x", "y"], sort=True):
        xw, yw = int((g["winner"] == "x").sum()), int((g["winner"] == "y").sum())
        ties = int((g["winner"] == "tie").sum())
        dec = xw + yw
        p = (
            float(stats.binomtest(xw, dec, 0.5, alternative="two-sided").pvalue)
            if dec
            else float("nan")
        )
        d = g[g["winner"] != "tie"].assign(_x=lambda f: (f["winner"] == "x").astype(float))
        share = clustered_share(d, "_x", confidence=confidence)
        cm = clustered_mean(g, "cmos_y", scale=CMOS_SCALE, confidence=confidence)
        # the note names the column it explains (``cmos_y``'s interval), not the kind
        notes = [f"{k}: {iv.note}" for k, iv in (("share", share), ("cmos", cm)) if iv.note]
        rows.append(
            [
                x,
                y,
                len(g),
                xw,
                yw,
                ties,
                xw / dec if dec else float("nan"),
                share.low,
                share.high,
                p,
                cm.n,
                cm.mean,
                cm.low,
                cm.high,
                "; ".join(notes),
            ]
        )
    return pd.DataFrame(rows, columns=cols)


def order_bias(votes: pd.DataFrame) -> dict[str, float]:
    """Share of decisive votes won by the clip played first, and its two-sided binomial p."""
    v = oriented_votes(votes)
    fw = v["first_won"].dropna() if not v.empty else pd.Series(dtype=float)
    n, k = len(fw), int(fw.sum())
    return {
        "decisive": n,
        "first_share": k / n if n else float("nan"),
        "p": float(stats.binomtest(k, n).pvalue) if n else float("nan"),
    }


def preference_matrix(votes: pd.DataFrame) -> pd.DataFrame:
    """``M[i, j]`` = share of decisive i-vs-j votes won by i (NaN where they never met)."""
    v = oriented_votes(votes)
    systems = sorted(set(v["x"]) | set(v["y"])) if not v.empty else []
    m = pd.DataFrame(np.nan, index=systems, columns=systems)
    for _, r in ab_table(votes).iterrows():
        dec = r["x_wins"] + r["y_wins"]
        if dec:
            m.loc[r["x"], r["y"]] = r["x_wins"] / dec
            m.loc[r["y"], r["x"]] = r["y_wins"] / dec
    return m


# --------------------------------------------------------------------------- Bradley–Terry


def _bt_fit(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, systems: list[str], prior: float
) -> np.ndarray:
    """log-strengths (mean 0 over ``systems``) from evalica's Bradley–Terry fit.

    ``prior`` virtual games per system, half won and half lost, against a phantom average
    opponent (TTS Arena V3's regularisation), so an undefeated system stays finite.
    """
    winners = [
        evalica.Winner.X if s == "x" else evalica.Winner.Y if s == "y" else evalica.Winner.Draw
        for s in w
    ]
    xs, ys = list(x), list(y)
    weights = [1.0] * len(xs)
    if prior > 0:
        phantom = "\x00prior"
        for s in systems:
            xs += [s, s]
            ys += [phantom, phantom]
            winners += [evalica.Winner.X, evalica.Winner.Y]
            weights += [prior / 2, prior / 2]
    index = pd.Index([*systems, "\x00prior"] if prior > 0 else systems)
    r = evalica.bradley_terry(
        xs, ys, winners, index=index, weights=weights, tolerance=1e-10, limit=10000
    )
    sc = r.scores.reindex(systems).to_numpy(dtype=float)
    ls = np.log(np.maximum(sc, 1e-300))
    return ls - ls.mean()


def bt_leaderboard(
    votes: pd.DataFrame,
    *,
    min_votes: int = 0,
    n_boot: int = 200,
    seed: int = 0,
    prior: float = 2.0,
    confidence: float = 0.95,
    scale: float = 400 / np.log(10),
    base: float = 1500.0,
    voter: str = "rater_id",
    interval: str = "percentile",
) -> pd.DataFrame:
    """Bradley–Terry ratings on an Elo-like scale (``base + scale * log-strength``), with
    bootstrap intervals (``interval``: :func:`bootstrap_bounds`), sorted by the lower bound.

    The bootstrap resamples voters (the ``voter`` column: every vote of a drawn voter comes
    along), since one voter's votes lean together; without that column it resamples votes.
    ``df.attrs["resampled"]`` says which (``voters`` or ``votes``).

    Systems with fewer than ``min_votes`` votes are still fitted (their games inform the others)
    but flagged ``listed = False`` and put at the bottom (rank 0). A listed system's ``rank`` is
    1 + the number of listed systems significantly stronger (``better_systems``), so systems
    whose intervals overlap share a rank instead of being ordered by noise.
    """
    cols = [
        "system",
        "rating",
        "ci_low",
        "ci_high",
        "votes",
        "wins",
        "losses",
        "ties",
        "listed",
        "better_systems",
        "rank",
    ]
    v = oriented_votes(votes)
    if v.empty:
        return pd.DataFrame(columns=cols)
    systems = sorted(set(v["x"]) | set(v["y"]))
    x, y, w = v["x"].to_numpy(), v["y"].to_numpy(), v["winner"].to_numpy()
    point = _bt_fit(x, y, w, systems, prior)
    draw = _resampler(v, voter, np.random.default_rng(seed))
    boots = np.empty((n_boot, len(systems)))
    for i in range(n_boot):
        idx = draw()
        boots[i] = _bt_fit(x[idx], y[idx], w[idx], systems, prior)
    lo, hi = bootstrap_bounds(point, boots, confidence, interval)
    rows = []
    for i, s in enumerate(systems):
        mine = (x == s) | (y == s)
        won = ((x == s) & (w == "x")) | ((y == s) & (w == "y"))
        tie = mine & (w == "tie")
        n = int(mine.sum())
        rows.append(
            [
                s,
                base + scale * point[i],
                base + scale * lo[i],
                base + scale * hi[i],
                n,
                int(won.sum()),
                int(n - won.sum() - tie.sum()),
                int(tie.sum()),
                n >= min_votes,
            ]
        )
    df = pd.DataFrame(rows, columns=cols[:-2])
    better = _significantly_better(point, boots, df["listed"].to_numpy(), alpha=1 - confidence)
    df["better_systems"] = better
    df = df.sort_values(
        ["listed", "ci_low", "rating"], ascending=[False, False, False], ignore_index=True
    )
    df["rank"] = np.where(df["listed"], 1 + df["better_systems"], 0)
    df.attrs["resampled"] = "voters" if _has_voters(v, voter) else "votes"
    return df


def bootstrap_bounds(
    point: np.ndarray, boots: np.ndarray, confidence: float, interval: str = "percentile"
) -> tuple[np.ndarray, np.ndarray]:
    """The interval from bootstrap resamples: ``percentile`` (their quantiles) or ``normal``
    (the point ± z × their sd: centred on the point, so a prior's pull towards the middle is
    not counted twice; the arena's, whose coverage ``benchmarks/arena_sampling.py`` checks)."""
    alpha = (1 - confidence) / 2
    if not len(boots):
        return point, point
    if interval == "normal" and len(boots) > 1:
        half = stats.norm.ppf(1 - alpha) * boots.std(axis=0, ddof=1)
        return point - half, point + half
    return tuple(np.quantile(boots, [alpha, 1 - alpha], axis=0))


def _has_voters(v: pd.DataFrame, voter: str) -> bool:
    return voter in v and bool(v[voter].notna().all())


def _resampler(v: pd.DataFrame, voter: str, rng: np.random.Generator):
    """A function drawing one bootstrap resample's row indices: whole voters (as many as there
    are, with replacement) when ``voter`` names every vote's voter, else single votes."""
    n = len(v)
    if not _has_voters(v, voter):
        return lambda: rng.integers(0, n, n)
    codes, uniq = pd.factorize(v[voter].astype(str))
    groups = [np.flatnonzero(codes == k) for k in range(len(uniq))]
    return lambda: np.concatenate([groups[k] for k in rng.integers(0, len(groups), len(groups))])


def _significantly_better(
    point: np.ndarray, boots: np.ndarray, listed: np.ndarray, alpha: float = 0.05
) -> np.ndarray:
    """Per system, how many listed systems are significantly stronger: for each pair, a Wald
    test of the log-strength difference with its bootstrap sd, Holm-corrected over all pairs
    of listed systems. Without bootstrap resamples nothing is significant (all rank 1)."""
    from evaluation.inference import holm

    idx = np.flatnonzero(listed)
    out = np.zeros(len(point), dtype=int)
    if len(boots) < 2 or len(idx) < 2:
        return out
    pairs = [(i, j) for k, i in enumerate(idx) for j in idx[k + 1 :]]
    ps = []
    for i, j in pairs:
        sd = float((boots[:, j] - boots[:, i]).std(ddof=1))
        z = abs(point[j] - point[i]) / sd if sd > 0 else (np.inf if point[j] != point[i] else 0)
        ps.append(float(2 * stats.norm.sf(z)))
    sig = holm(ps) < alpha
    for (i, j), s in zip(pairs, sig, strict=True):
        if s:
            out[i if point[j] > point[i] else j] += 1
    return out


__all__ = [
    "MushraRules",
    "ScreeningRules",
    "ab_table",
    "add_z_scores",
    "bootstrap_bounds",
    "bt_leaderboard",
    "mos_table",
    "mushra_conditions",
    "mushra_screening",
    "mushra_table",
    "order_bias",
    "oriented_votes",
    "played_items",
    "preference_matrix",
    "screen_raters",
    "t_interval",
    "unplayed",
    "usable_ratings",
    "wilson",
]


# --------------------------------------------------------------------------- MUSHRA


@dataclass(frozen=True)
class MushraRules:
    """ITU-R BS.1534-3 post-screening (``listening-tests.md`` §3.1)."""

    reference_min: float = 90.0
    """An assessor who rates the hidden reference below this ..."""
    anchor_max: float = 90.0
    """... or the (mid/low) anchor above this ..."""
    max_share: float = 0.15
    """... on more than this share of items is excluded."""


def _anchor_label(system_id: object, anchors: Mapping[str, str]) -> str:
    return anchors.get(system_id, "anchor") if isinstance(system_id, str) else "anchor"


def mushra_screening(
    ratings: pd.DataFrame,
    rules: MushraRules = MushraRules(),
    *,
    anchors: Mapping[str, str] | None = None,
    screen_on: str | None = None,
) -> pd.DataFrame:
    """One row per rater: items, hidden-reference and anchor misses, excluded, reasons.

    The anchor rule uses the anchor ``screen_on`` (BS.1534-3: the mid, 7 kHz, anchor) when the
    test has one; a test with a single anchor uses that one. ``anchors`` names each anchor's
    pseudo system in the reasons (the MUSHRA kind's :data:`MUSHRA_ANCHOR_LABELS`; statistics
    do not know a kind's pseudo systems)."""
    labels = anchors or {}
    cols = ["rater_id", "items", "ref_low", "anchor_high", "excluded", "reasons"]
    if ratings.empty:
        return pd.DataFrame(columns=cols)
    anchor_rows = ratings[ratings["role"] == "anchor"]
    if screen_on and "system_id" in ratings and (anchor_rows["system_id"] == screen_on).any():
        anchor_rows = anchor_rows[anchor_rows["system_id"] == screen_on]
    which = (
        _anchor_label(anchor_rows["system_id"].iloc[0], labels) if len(anchor_rows) else "anchor"
    )
    rows = []
    for rater, g in ratings.groupby("rater_id", sort=True):
        items = g["assignment_id"].nunique()
        ref = g[g["role"] == "reference"]
        anc = anchor_rows[anchor_rows["rater_id"] == rater]
        ref_low = int(ref.groupby("assignment_id")["score"].min().lt(rules.reference_min).sum())
        anc_high = int(anc.groupby("assignment_id")["score"].max().gt(rules.anchor_max).sum())
        reasons = []
        if len(ref) and ref_low / items > rules.max_share:
            reasons.append(f"hidden reference < {rules.reference_min:g} on {ref_low}/{items} items")
        if len(anc) and anc_high / items > rules.max_share:
            reasons.append(f"{which} > {rules.anchor_max:g} on {anc_high}/{items} items")
        rows.append([rater, items, ref_low, anc_high, bool(reasons), "; ".join(reasons)])
    return pd.DataFrame(rows, columns=cols)


def mushra_conditions(ratings: pd.DataFrame, anchors: Mapping[str, str] | None = None) -> pd.Series:
    """The condition each MUSHRA rating belongs to: a system, ``hidden reference`` or an
    anchor by its name in ``anchors`` (pseudo system -> label)."""
    labels = anchors or {}
    return pd.Series(
        np.select(
            [ratings["role"] == "reference", ratings["role"] == "anchor"],
            ["hidden reference", ratings["system_id"].map(lambda s: _anchor_label(s, labels))],
            default=ratings["system_id"].astype(str),
        ),
        index=ratings.index,
    )


def mushra_table(
    ratings: pd.DataFrame,
    by: str = "label",
    confidence: float = 0.95,
    *,
    anchors: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Per condition (system, ``hidden reference``, anchors named by ``anchors``): n, raters,
    the median with Woodruff's interval over raters and prompts and the quartiles (BS.1534-3
    asks for median and IQR), the mean with the two-way cluster-robust interval (on the logit
    of its place in 0-100)."""
    from evaluation.inference import MUSHRA_SCALE, clustered_mean, clustered_median

    cols = [
        "condition",
        "n",
        "raters",
        "median",
        "median_low",
        "median_high",
        "q1",
        "q3",
        "mean",
        "ci_low",
        "ci_high",
        "note",
    ]
    if ratings.empty:
        return pd.DataFrame(columns=cols)
    r = ratings.copy()
    if by not in r:
        r[by] = mushra_conditions(r, anchors)
    rows = []
    for key, g in r.groupby(by, sort=True):
        v = g["score"].astype(float).to_numpy()
        md = clustered_median(g, "score", confidence=confidence)
        iv = clustered_mean(g, "score", scale=MUSHRA_SCALE, confidence=confidence)
        q1, q3 = np.percentile(v, [25, 75])
        note = "; ".join(dict.fromkeys(x for x in (md.note, iv.note) if x))
        rows.append(
            [key, len(v), iv.raters, md.mean, md.low, md.high, float(q1), float(q3)]
            + [iv.mean, iv.low, iv.high, note]
        )
    return pd.DataFrame(rows, columns=cols).sort_values(
        "median", ascending=False, ignore_index=True
    )
