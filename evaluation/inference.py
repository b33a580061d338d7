"""Intervals and tests for listening tests that account for raters and prompts.

Why a module of its own: a rating is not an independent draw. The same rater rates many items
(a lenient rater lifts all of them) and the same prompt is heard by many raters (a hard
sentence lowers every system's score on it). Intervals that treat ratings as independent
covered the true MOS 74 % of the time in a simulation with such effects (issue #18); the ones
here are checked by ``benchmarks/listening_validity.py`` against known truth on a grid of
rater and prompt effects (none, medium, large) and panel sizes (12, 30, 100 raters).

* :func:`clustered_mean` — the rating-weighted mean (every rating counts once) with a
  **two-way cluster-robust interval** over raters and prompts (Cameron, Gelbach & Miller 2011,
  "Robust inference with multiway clustering", J Bus Econ Stat 29:238): the variance is
  ``V_raters + V_prompts - V_cells``, the first two one-way cluster-robust variances with the
  small-sample factor ``G / (G - 1)``, the cell term from the residuals of the two-way fit
  ``score ~ rater + prompt`` with the factor ``C / (C - R - P + 1)`` (in a complete design V
  is then exactly the unbiased ANOVA estimator; CGM's cell term of raw residuals made V too
  small by about ``(s_r^2 + s_p^2) / (R P)``). The interval is ``t · sqrt(V)`` with
  Welch–Satterthwaite degrees of freedom, on the logit of the mean's place in the scale
  (:func:`logit_bounds`: inside the scale, following the skew near its ends). Never
  zero-width: with too few ratings (or no spread at all) the bounds are NaN and ``note``
  says so.
* :func:`clustered_share` — a share (the A/B preference share): the same on the 0-1 scale.
* :func:`clustered_median` — the median with Woodruff's (1952) interval: the two-way
  cluster-robust interval of the share of ratings at or below the median, mapped back through
  the empirical quantiles (so it, too, accounts for raters and prompts).
* :func:`paired_tests` — Wilcoxon signed-rank tests between systems on per-rater mean scores
  (each rater is its own control, so lenient and harsh raters cancel), Holm-corrected, with the
  mean difference and the matched-pairs rank-biserial correlation as effect sizes. Raters whose
  two means are equal are dropped before the test (Wilcoxon's own rule).
* :func:`sign_tests` — exact two-sided sign tests (``scipy.stats.binomtest``) for A/B pairs on
  each rater's majority preference (one vote per rater, so a rater with many votes does not
  count as many independent raters), Holm-corrected. Tied votes, and raters whose decisive
  votes split evenly, are left out. Prompts are taken as fixed (docs/statistics.md measures
  what a prompt-by-pair effect costs).
* :func:`holm` — Holm's step-down adjustment of a family of p-values.
* :func:`round_p` — p-values to three significant digits (``3.2e-07``, never ``0.0``).

Why an analytic variance and not a bootstrap: the earlier two-way bootstrap (raters and
prompts resampled separately, then combined as above) used the one-way variances without the
``G / (G - 1)`` factor and a t quantile with ``min(raters, prompts) - 1`` df; with no rater or
prompt effect at all its two noisy halves add up to far fewer degrees of freedom, and it
covered 0.912 at nominal 0.95. The closed form is its infinite-resample limit with the factor,
is exact to reproduce in pandas or R (``docs/statistics.md``), and needs no seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

INTERVAL_METHOD = (
    "rating-weighted mean; 95% two-way cluster-robust interval over raters and prompts "
    "(Cameron-Gelbach-Miller: V = V_raters + V_prompts - V_rater-prompt cells; the one-way "
    "terms with G/(G-1), the cell term from the residuals of score ~ rater + prompt with "
    "C/(C-R-P+1); Student t with Welch-Satterthwaite df), on the logit of the mean's place "
    "in the scale"
)
INTERVAL_ASSUMES = (
    "raters and prompts are independent draws from their populations (the interval is for a new "
    "rater on a new prompt); ratings of one rater, or of one prompt, may be correlated in any way"
)
MEDIAN_METHOD = (
    "median with Woodruff's 95% interval: the two-way cluster-robust interval of the share of "
    "ratings at or below the median, mapped back through the empirical quantiles"
)
SHARE_METHOD = (
    "logit(p) ± t · se / (p (1 - p)) mapped back, with se and df of the two-way interval; "
    "no interval for a share of exactly 0 or 1"
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
    """A point estimate with its interval; ``note`` explains NaN bounds. ``se`` and ``df`` are
    the standard error and the t degrees of freedom behind the bounds (NaN without them)."""

    n: int
    raters: int
    prompts: int
    mean: float
    low: float
    high: float
    note: str = ""
    se: float = float("nan")
    df: float = float("nan")


@dataclass(frozen=True)
class Spread:
    """The two-way cluster-robust variance of a mean and its Welch–Satterthwaite df."""

    var: float
    df: float


def _codes(s: pd.Series) -> tuple[np.ndarray, int]:
    """Integer cluster codes (a missing id is a cluster of its own kind, not dropped)."""
    codes, uniq = pd.factorize(s, use_na_sentinel=False)
    return codes, len(uniq)


def _one_way(e: np.ndarray, codes: np.ndarray, groups: int) -> tuple[float, int]:
    """Cluster-robust variance of the mean for one clustering (with ``G / (G - 1)``), and G."""
    n = len(e)
    sums = np.bincount(codes, weights=e, minlength=groups)
    g = int(np.count_nonzero(np.bincount(codes, minlength=groups)))
    if g < 2:
        return 0.0, g
    return g / (g - 1) * float(np.dot(sums, sums)) / n**2, g


def two_way_residuals(
    v: np.ndarray, raters: np.ndarray, prompts: np.ndarray, tol: float = 1e-10
) -> np.ndarray:
    """``v`` minus its least-squares fit ``mean + rater effect + prompt effect`` (alternating
    projections, which converge to the least-squares fit for any pattern of missing cells)."""
    e = np.asarray(v, dtype=float) - float(np.mean(v))
    nr, npr = int(raters.max()) + 1, int(prompts.max()) + 1
    cr = np.maximum(np.bincount(raters, minlength=nr), 1)
    cp = np.maximum(np.bincount(prompts, minlength=npr), 1)
    scale = max(float(np.abs(e).max()), 1.0)
    for _ in range(1000):
        a = np.bincount(raters, weights=e, minlength=nr) / cr
        e = e - a[raters]
        b = np.bincount(prompts, weights=e, minlength=npr) / cp
        e = e - b[prompts]
        if max(float(np.abs(a).max()), float(np.abs(b).max())) < tol * scale:
            break
    return e


def _cell_term(v: np.ndarray, raters: np.ndarray, prompts: np.ndarray, n: int, gr: int, gp: int):
    """The (rater, prompt) term: the cluster-robust variance of the two-way residuals summed
    per cell, with ``C / (C - R - P + 1)`` (the residuals' df), and that df. A design with no
    residual df (as many effects as cells) gives 0: the sum of the one-way terms, which counts
    the noise twice (conservative) rather than guessing it."""
    cells = raters.astype(np.int64) * (int(prompts.max()) + 1) + prompts
    _, cell = np.unique(cells, return_inverse=True)
    c = int(cell.max()) + 1
    dfe = c - gr - gp + 1
    if dfe < 1:
        return 0.0, 0
    sums = np.bincount(cell, weights=two_way_residuals(v, raters, prompts), minlength=c)
    return c / dfe * float(np.dot(sums, sums)) / n**2, dfe


def cluster_spread(v: np.ndarray, raters: np.ndarray, prompts: np.ndarray | None) -> Spread:
    """``V = V_raters + V_prompts - V_cells`` for the mean of ``v`` (Cameron, Gelbach & Miller
    2011, with the cell term from the two-way residuals: see the module's docstring);
    ``raters`` and ``prompts`` are integer codes (``prompts`` None: raters only). A negative
    sum falls back to the larger one-way variance (CGM's rule). The df are
    Welch–Satterthwaite's for the sum, between 1 and ``n - 1``."""
    v = np.asarray(v, dtype=float)
    n = len(v)
    e = v - v.mean()
    vr, gr = _one_way(e, raters, int(raters.max()) + 1)
    if prompts is None or int(prompts.max()) == 0:
        return Spread(vr, float(max(1, gr - 1)))
    vp, gp = _one_way(e, prompts, int(prompts.max()) + 1)
    vc, dfc = _cell_term(v, raters, prompts, n, gr, gp)
    terms = [(vr, gr - 1), (vp, gp - 1), (vc, dfc)]
    var = vr + vp - vc
    if var <= 0:  # CGM's fallback: the larger one-way variance alone
        var, g = (vr, gr) if vr >= vp else (vp, gp)
        terms = [(var, g - 1)]
    den = sum(t * t / d for t, d in terms if d > 0)
    df = var * var / den if den > 0 else 1.0
    return Spread(var, float(min(max(df, 1.0), max(n - 1, 1))))


def _clusters(d: pd.DataFrame, rater: str, prompt: str) -> tuple[np.ndarray, int, np.ndarray, int]:
    n = len(d)
    rc, nr = _codes(d[rater]) if rater in d else (np.arange(n), n)  # no rater: one each
    if prompt in d:
        pc, npr = _codes(d[prompt])
    else:
        pc, npr = np.zeros(n, dtype=int), 1
    return rc, nr, pc, npr


def clustered_mean(
    df: pd.DataFrame,
    value: str = "score",
    *,
    rater: str = "rater_id",
    prompt: str = "prompt_id",
    scale: Scale | None = None,
    confidence: float = 0.95,
    min_raters: int = 3,
) -> Interval:
    """Mean of ``value`` (every rating weighs the same) with the two-way cluster-robust
    interval (see the module's docstring).

    Without a ``prompt`` column (or with one prompt) only raters are clusters; without a
    ``rater`` column every rating is its own rater (then, with no prompts either, the
    interval is the textbook t interval ``mean ± t(n-1) · s / sqrt(n)``)."""
    d = df[df[value].notna()] if len(df) else df
    v = d[value].to_numpy(dtype=float) if len(d) else np.zeros(0)
    n = len(v)
    if n == 0:
        return Interval(0, 0, 0, float("nan"), float("nan"), float("nan"), TOO_FEW)
    rc, nr, pc, npr = _clusters(d, rater, prompt)
    mean = float(v.mean())
    if nr < min_raters or n < 3:
        return Interval(n, nr, npr, mean, float("nan"), float("nan"), TOO_FEW)
    sp = cluster_spread(v, rc, pc if npr > 1 else None)
    se = float(np.sqrt(max(sp.var, 0.0)))
    if not np.isfinite(se) or se <= 1e-12:
        return Interval(n, nr, npr, mean, float("nan"), float("nan"), f"{TOO_FEW} (no spread)")
    t = float(stats.t.ppf(0.5 + confidence / 2, sp.df))
    if scale is not None and scale.low < mean < scale.high:
        lo, hi = logit_bounds(mean, se, t, scale)
    else:
        lo, hi = mean - t * se, mean + t * se
    return Interval(n, nr, npr, mean, lo, hi, se=se, df=sp.df)


def logit_bounds(mean: float, se: float, t: float, scale: Scale) -> tuple[float, float]:
    """``mean ± t · se`` built on the logit of the mean's place in the scale (delta method)
    and mapped back: asymmetric, inside the scale. Why: a mean near an end of a bounded scale
    has a skewed sampling distribution (ratings pile up at the end), and the symmetric
    interval, clipped, missed on the far side (the MUSHRA mean covered 0.910-0.928 in 7
    cells of ``benchmarks/listening_validity.py``'s grid)."""
    width = scale.high - scale.low
    p = (mean - scale.low) / width
    half = t * se / width / (p * (1.0 - p))
    centre = float(np.log(p / (1.0 - p)))
    lo, hi = (scale.low + width / (1.0 + float(np.exp(-x))) for x in (centre - half, centre + half))
    return lo, hi


def clustered_share(
    df: pd.DataFrame,
    value: str,
    *,
    rater: str = "rater_id",
    prompt: str = "prompt_id",
    confidence: float = 0.95,
    min_raters: int = 3,
) -> Interval:
    """Share of 1s in the 0/1 column ``value``: :func:`clustered_mean` on the 0-1 scale (so
    its interval is on the logit scale, :func:`logit_bounds`). A share of exactly 0 or 1 has
    no interval (``note``)."""
    iv = clustered_mean(
        df,
        value,
        rater=rater,
        prompt=prompt,
        scale=SHARE_SCALE,
        confidence=confidence,
        min_raters=min_raters,
    )
    if iv.note or not 0.0 < iv.mean < 1.0:
        note = iv.note or f"{TOO_FEW} (every vote one way)"
        return Interval(iv.n, iv.raters, iv.prompts, iv.mean, float("nan"), float("nan"), note)
    return iv


def clustered_median(
    df: pd.DataFrame,
    value: str = "score",
    *,
    rater: str = "rater_id",
    prompt: str = "prompt_id",
    confidence: float = 0.95,
    min_raters: int = 3,
) -> Interval:
    """Median of ``value`` with Woodruff's interval: ``p = 0.5 ± t · se(p)``, where ``se(p)``
    is the two-way cluster-robust standard error of the share of ratings at or below the
    median, and the bounds are the empirical quantiles at those shares (``inverted_cdf``)."""
    d = df[df[value].notna()] if len(df) else df
    v = d[value].to_numpy(dtype=float) if len(d) else np.zeros(0)
    n = len(v)
    if n == 0:
        return Interval(0, 0, 0, float("nan"), float("nan"), float("nan"), TOO_FEW)
    med = float(np.median(v))
    rc, nr, pc, npr = _clusters(d, rater, prompt)
    if nr < min_raters or n < 3:
        return Interval(n, nr, npr, med, float("nan"), float("nan"), TOO_FEW)
    below = (v <= med).astype(float)
    sp = cluster_spread(below, rc, pc if npr > 1 else None)
    se = float(np.sqrt(max(sp.var, 0.0)))
    if not np.isfinite(se) or se <= 1e-12:
        return Interval(n, nr, npr, med, float("nan"), float("nan"), f"{TOO_FEW} (no spread)")
    half = float(stats.t.ppf(0.5 + confidence / 2, sp.df)) * se
    qs = np.clip([0.5 - half, 0.5 + half], 0.0, 1.0)
    lo, hi = np.quantile(v, qs, method="inverted_cdf")
    return Interval(n, nr, npr, med, float(min(lo, med)), float(max(hi, med)), se=se, df=sp.df)


def interval_table(
    df: pd.DataFrame,
    by: list[str] | tuple[str, ...],
    value: str = "score",
    *,
    scale: Scale | None = None,
    confidence: float = 0.95,
    digits: int | None = None,
) -> pd.DataFrame:
    """:func:`clustered_mean` per group: by..., n, raters, prompts, mean, sd, ci_low, ci_high,
    se, df, note. Sorted by mean, best first."""
    by = list(by)
    cols = [*by, "n", "raters", "prompts", "mean", "sd", "ci_low", "ci_high", "se", "df", "note"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in df.groupby(by, dropna=False, sort=True):
        iv = clustered_mean(g, value, scale=scale, confidence=confidence)
        key = key if isinstance(key, tuple) else (key,)
        sd = float(g[value].std(ddof=1)) if len(g) > 1 else float("nan")
        rows.append(
            [*key, iv.n, iv.raters, iv.prompts, iv.mean, sd, iv.low, iv.high, iv.se, iv.df, iv.note]
        )
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


def round_p(p: float, digits: int = 3) -> float:
    """A p-value to ``digits`` significant digits: 3.2e-07 stays 3.2e-07 (rounding to decimal
    places printed it as 0.0, which no paper may report)."""
    if p is None or not np.isfinite(p) or p == 0:
        return p
    return float(f"{p:.{digits}g}")


def format_p(p: float) -> str:
    """A p-value for people: four decimals (``0.0312``) down to 0.001, below that three
    significant digits in scientific notation (``3.2e-07``): never ``0.0``."""
    if p is None or not np.isfinite(p):
        return "–"
    return f"{p:.3g}" if p < 0.001 else f"{p:.4f}".rstrip("0").rstrip(".")


PAIRED_METHOD = (
    "Wilcoxon signed-rank test (scipy, exact for fewer than 50 raters without ties, else the "
    "normal approximation) on per-rater mean scores of raters who rated both systems; raters "
    "whose two means are equal are dropped first; two-sided, Holm-corrected over all pairs; "
    "effect sizes: mean of the per-rater differences and the matched-pairs rank-biserial "
    "correlation"
)
PAIRED_ASSUMES = (
    "raters are independent of each other and each rater's difference is symmetric about 0 "
    "under the null; prompts are not a random effect here (each rater's mean is over the "
    "prompts they heard)"
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
    "over their decisive votes (tied votes left out, and raters with as many wins as losses "
    "for the pair), Holm-corrected over all pairs; effect size: the share of raters preferring x"
)
SIGN_ASSUMES = (
    "raters are independent of each other; a rater's votes count once, however many they "
    "gave; prompts are not a random effect here: a preference that changes with the prompt "
    "(shared by every rater who heard that prompt) makes the test reject a true null more "
    "often than 5 %, and the share's interval, which allows for prompts, is then the one to read"
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
    "CMOS_SCALE",
    "INTERVAL_ASSUMES",
    "INTERVAL_METHOD",
    "MEDIAN_METHOD",
    "MOS_SCALE",
    "MUSHRA_SCALE",
    "PAIRED_ASSUMES",
    "PAIRED_METHOD",
    "SHARE_METHOD",
    "SHARE_SCALE",
    "SIGN_ASSUMES",
    "SIGN_METHOD",
    "TOO_FEW",
    "Interval",
    "Scale",
    "Spread",
    "cluster_spread",
    "clustered_mean",
    "clustered_median",
    "clustered_share",
    "format_p",
    "holm",
    "interval_table",
    "paired_tests",
    "round_p",
    "sign_tests",
]
