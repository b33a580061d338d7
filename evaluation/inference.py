"""Intervals and tests for listening tests that account for raters and prompts.

Why a module of its own: a rating is not an independent draw. The same rater rates many items
(a lenient rater lifts all of them) and the same prompt is heard by many raters (a hard
sentence lowers every system's score on it). Intervals that treat ratings as independent
covered the true MOS 74 % of the time in a simulation with such effects (issue #18); the ones
here are checked by ``benchmarks/listening_validity.py`` against known truth.

* :func:`clustered_mean` — mean with a **two-way cluster bootstrap** interval: raters and prompts
  are resampled independently (the "pigeonhole" bootstrap of McCullagh 2000 / Owen 2007), each
  replicate is the mean over the kept rater x prompt cells, and the interval is the replicates'
  sd times a Student-t quantile with ``min(raters, prompts) - 1`` degrees of freedom. It is
  clipped to the scale and is never zero-width: with too few ratings (or no spread at all) the
  bounds are NaN and ``note`` says so.
* :func:`paired_tests` — Wilcoxon signed-rank tests between systems on per-rater mean scores
  (each rater is its own control, so lenient and harsh raters cancel), Holm-corrected, with the
  mean difference and the matched-pairs rank-biserial correlation as effect sizes.
* :func:`sign_tests` — exact two-sided sign tests (``scipy.stats.binomtest``) for A/B pairs on
  each rater's majority preference (one vote per rater, so a rater with many votes does not
  count as many independent raters), Holm-corrected.
* :func:`holm` — Holm's step-down adjustment of a family of p-values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

BOOT_METHOD = (
    "two-way cluster bootstrap over raters and prompts ({n_boot} resamples; bootstrap sd x "
    "Student-t quantile with min(raters, prompts) - 1 df), clipped to the scale"
)
TOO_FEW = "too few ratings"


@dataclass(frozen=True)
class Scale:
    """The answer scale, for clipping intervals and drawing axes from its bottom."""

    low: float
    high: float
    name: str = ""


MOS_SCALE = Scale(1.0, 5.0, "MOS (1-5 ACR)")
CMOS_SCALE = Scale(-3.0, 3.0, "CMOS (-3..+3)")
MUSHRA_SCALE = Scale(0.0, 100.0, "MUSHRA (0-100)")
SHARE_SCALE = Scale(0.0, 1.0, "preference share")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval; ``note`` explains NaN bounds."""

    n: int
    raters: int
    prompts: int
    mean: float
    low: float
    high: float
    note: str = ""


def _codes(s: pd.Series) -> tuple[np.ndarray, int]:
    codes, uniq = pd.factorize(s.astype(object).where(s.notna(), "\x00none"), sort=True)
    return codes, len(uniq)


def _boot_var(num: np.ndarray, den: np.ndarray) -> float:
    ok = den > 0
    reps = num[ok] / den[ok]
    return float(reps.var(ddof=1)) if len(reps) > 1 else 0.0


def clustered_mean(
    df: pd.DataFrame,
    value: str = "score",
    *,
    rater: str = "rater_id",
    prompt: str = "prompt_id",
    scale: Scale | None = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    min_raters: int = 3,
) -> Interval:
    """Mean of ``value`` with a two-way (raters x prompts) cluster bootstrap interval.

    Without a ``prompt`` column (or with one prompt) only raters are resampled; without a
    ``rater`` column every rating counts as its own rater (the plain bootstrap).
    """
    d = df[df[value].notna()] if len(df) else df
    v = d[value].to_numpy(dtype=float) if len(d) else np.zeros(0)
    n = len(v)
    if n == 0:
        return Interval(0, 0, 0, float("nan"), float("nan"), float("nan"), TOO_FEW)
    rc, nr = _codes(d[rater]) if rater in d else (np.arange(n), n)  # no rater: one each
    if prompt in d:
        pc, npr = _codes(d[prompt])
    else:
        pc, npr = np.zeros(n, dtype=int), 1
    mean = float(v.mean())
    if nr < min_raters or n < 3:
        return Interval(n, nr, npr, mean, float("nan"), float("nan"), TOO_FEW)
    s = np.zeros((nr, npr))
    c = np.zeros((nr, npr))
    np.add.at(s, (rc, pc), v)
    np.add.at(c, (rc, pc), 1.0)
    rng = np.random.default_rng(seed)
    # raters resampled alone, prompts resampled alone, ratings resampled alone: the two-way
    # variance is V_raters + V_prompts - V_ratings (each one-way bootstrap also carries the
    # rating-level noise once; Cameron, Gelbach & Miller 2011). The pigeonhole bootstrap
    # (both at once) counts that noise twice and was too wide (99 % at nominal 95 %).
    a = rng.multinomial(nr, np.full(nr, 1 / nr), size=n_boot).astype(float)
    rs, rn = s.sum(axis=1), c.sum(axis=1)
    var_r = _boot_var(a @ rs, a @ rn)
    if npr > 1:
        b = rng.multinomial(npr, np.full(npr, 1 / npr), size=n_boot).astype(float)
        var_p = _boot_var(b @ s.sum(axis=0), b @ c.sum(axis=0))
        var_e = float(v.var()) / n  # what resampling single ratings gives, exactly
        var = var_r + var_p - var_e
        if var <= 0:
            var = max(var_r, var_p)
    else:
        var = var_r
    sd = float(np.sqrt(max(var, 0.0)))
    if not np.isfinite(sd) or sd <= 1e-12:
        return Interval(n, nr, npr, mean, float("nan"), float("nan"), f"{TOO_FEW} (no spread)")
    df_t = max(1, min(nr, npr if npr > 1 else nr) - 1)
    half = float(stats.t.ppf(0.5 + confidence / 2, df_t)) * sd
    lo, hi = mean - half, mean + half
    if scale is not None:
        lo, hi = max(lo, scale.low), min(hi, scale.high)
    return Interval(n, nr, npr, mean, lo, hi)


def interval_table(
    df: pd.DataFrame,
    by: list[str] | tuple[str, ...],
    value: str = "score",
    *,
    scale: Scale | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    digits: int | None = None,
) -> pd.DataFrame:
    """:func:`clustered_mean` per group: by..., n, raters, prompts, mean, sd, ci_low, ci_high,
    note. Sorted by mean, best first."""
    by = list(by)
    cols = [*by, "n", "raters", "prompts", "mean", "sd", "ci_low", "ci_high", "note"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in df.groupby(by, dropna=False, sort=True):
        iv = clustered_mean(g, value, scale=scale, n_boot=n_boot, seed=seed, confidence=confidence)
        key = key if isinstance(key, tuple) else (key,)
        sd = float(g[value].std(ddof=1)) if len(g) > 1 else float("nan")
        rows.append([*key, iv.n, iv.raters, iv.prompts, iv.mean, sd, iv.low, iv.high, iv.note])
    out = pd.DataFrame(rows, columns=cols).sort_values("mean", ascending=False, ignore_index=True)
    return out.round(digits) if digits is not None else out


def holm(p: np.ndarray | list[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted in the family)."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if not m:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adj, 1.0)
    return out


PAIRED_METHOD = (
    "Wilcoxon signed-rank test on per-rater mean scores (raters who rated both systems), "
    "two-sided, Holm-corrected over all pairs; effect sizes: mean of the per-rater "
    "differences and the matched-pairs rank-biserial correlation"
)


def paired_tests(
    df: pd.DataFrame,
    value: str = "score",
    *,
    system: str = "system_id",
    unit: str = "rater_id",
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Every pair of systems (x < y): units with both, mean difference y - x of the per-unit
    means, rank-biserial r (positive: y better), p, Holm-adjusted p, significant."""
    cols = ["x", "y", "raters", "diff_y_minus_x", "rank_biserial", "p", "p_holm", "significant"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    means = df.groupby([unit, system])[value].mean().unstack(system)
    systems = sorted(means.columns, key=str)
    rows = []
    for i, x in enumerate(systems):
        for y in systems[i + 1 :]:
            d = (means[y] - means[x]).dropna().to_numpy(dtype=float)
            nz = d[d != 0]
            if len(nz) == 0:
                rows.append([x, y, len(d), float(d.mean()) if len(d) else np.nan, 0.0, np.nan])
                continue
            ranks = stats.rankdata(np.abs(nz))
            wp, wm = ranks[nz > 0].sum(), ranks[nz < 0].sum()
            p = float(stats.wilcoxon(nz).pvalue)
            rows.append([x, y, len(d), float(d.mean()), float((wp - wm) / (wp + wm)), p])
    out = pd.DataFrame(rows, columns=cols[:6])
    out["p_holm"] = holm(out["p"].to_numpy())
    out["significant"] = out["p_holm"] < alpha
    return out


SIGN_METHOD = (
    "exact two-sided sign test (scipy.stats.binomtest) on each rater's majority preference "
    "(raters with as many wins as losses for the pair left out), Holm-corrected over all "
    "pairs; effect size: the share of raters preferring x, and of decisive votes"
)


def sign_tests(oriented: pd.DataFrame, *, unit: str = "rater_id", alpha: float = 0.05):
    """Per pair (x < y) of :func:`evaluation.stats.oriented_votes`: raters preferring x and y
    (by majority of their decisive votes), exact sign-test p, Holm-adjusted p, significant."""
    cols = ["x", "y", "raters_x", "raters_y", "rater_share_x", "p", "p_holm", "significant"]
    v = oriented[oriented["winner"] != "tie"] if not oriented.empty else oriented
    if v.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (x, y), g in v.groupby(["x", "y"], sort=True):
        net = g.assign(s=np.where(g["winner"] == "x", 1, -1)).groupby(unit)["s"].sum()
        kx, ky = int((net > 0).sum()), int((net < 0).sum())
        n = kx + ky
        p = float(stats.binomtest(kx, n).pvalue) if n else np.nan
        rows.append([x, y, kx, ky, kx / n if n else np.nan, p])
    out = pd.DataFrame(rows, columns=cols[:6])
    out["p_holm"] = holm(out["p"].to_numpy())
    out["significant"] = out["p_holm"] < alpha
    return out


__all__ = [
    "BOOT_METHOD",
    "CMOS_SCALE",
    "MOS_SCALE",
    "MUSHRA_SCALE",
    "PAIRED_METHOD",
    "SHARE_SCALE",
    "SIGN_METHOD",
    "TOO_FEW",
    "Interval",
    "Scale",
    "clustered_mean",
    "holm",
    "interval_table",
    "paired_tests",
    "sign_tests",
]
