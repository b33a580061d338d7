"""The paired interval over prompts, the decision against a margin, and the planner.

Why this method: the same prompt read by both sides is a pair (a hard sentence is hard for
both), so the unit is the prompt's difference ``d_i`` (candidate minus reference, each side's
mean over its takes). The interval is Student's t on those differences
(:func:`evaluation.stats.t_interval`) at 90 %, so each of its ends is a one-sided 95 % bound.
``benchmarks/parity.py`` checks it by simulation with known truth (coverage; how often a
candidate exactly at the margin is failed, and how often one as good as the reference is) on
normal, heavy-tailed, skewed and spiky differences before a report shows it (``docs/parity.md``).

Decisions, per measure:

* ``pass``: non-inferiority shown: the interval's worse end is within the margin (``higher``:
  low >= -margin; ``lower``: high <= margin; ``closer``: both ends within +-margin);
* ``worse``: inferiority shown: even the interval's better end is beyond the margin (a
  candidate exactly at the margin is failed 5 % of the time; one that is better, never);
* ``unsure``: neither (too few prompts, or too much spread: the planner says how many would
  show parity); ``too few``: fewer than two prompts with a value on both sides;
* ``reported``: no margin (the measure is shown, not decided).

The run fails on any ``worse``; with ``--strict`` also on ``unsure`` and ``too few`` (parity
must then be shown on every decided measure: an integrator's sign-off with enough prompts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.parity.measures import Measure

CONFIDENCE = 0.90
"""Two-sided level of the interval shown; its worse end is the one-sided 95 % bound."""
POWER = 0.95
"""The planner's chance that a candidate as good as the reference passes one measure."""
MAX_PLAN = 10_000
DECISIONS = ("pass", "worse", "unsure", "reported", "too few")
SHOWN = frozenset({"pass", "reported"})
"""Decisions that need nothing more (``--strict`` passes only these)."""


@dataclass(frozen=True)
class Comparison:
    """One measure over the prompts: both sides' means, the paired difference with its
    interval, the margin and the decision."""

    measure: str
    n: int
    reference: float
    candidate: float
    delta: float
    low: float
    high: float
    sd: float
    """Standard deviation of the per-prompt differences (what the planner works from)."""
    margin: float | None
    decision: str
    prompts_needed: int | None
    """Prompts that give a candidate as good as the reference a 95 % chance to pass at this
    spread and margin (None without a margin or a spread)."""

    @property
    def shown(self) -> bool:
        """Parity shown (or nothing to decide)."""
        return self.decision in SHOWN

    @property
    def worse(self) -> bool:
        return self.decision == "worse"


def paired_interval(d: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval of the mean difference (:func:`evaluation.stats.t_interval`);
    NaN with fewer than two values, the mean itself when every difference is the same."""
    from evaluation.stats import t_interval

    return t_interval(np.asarray(d, dtype=float), confidence)


def decide(m: Measure, delta: float, low: float, high: float, margin: float | None, n: int) -> str:
    """The decision for one measure (see the module docstring)."""
    if n < 2 or not math.isfinite(low) or not math.isfinite(high):
        return "too few" if margin is not None else "reported"
    if margin is None:
        return "reported"
    if m.direction == "higher":
        ok, beyond = low >= -margin, high < -margin
    elif m.direction == "lower":
        ok, beyond = high <= margin, low > margin
    else:
        ok, beyond = -margin <= low and high <= margin, low > margin or high < -margin
    return "pass" if ok else ("worse" if beyond else "unsure")


def pass_probability(n: int, sd: float, margin: float, two_sided: bool = False) -> float:
    """Chance that a candidate exactly as good as the reference passes, with ``n`` prompts
    whose differences have standard deviation ``sd``: the non-central t (the statistic
    ``(mean + margin) / se`` with non-centrality ``margin sqrt(n) / sd``); a ``closer`` measure
    must clear both sides (two one-sided tests)."""
    from scipy import stats

    if n < 2:
        return 0.0
    if sd <= 0:
        return 1.0
    crit = stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)
    miss = float(stats.nct.cdf(crit, n - 1, margin * math.sqrt(n) / sd))
    return max(0.0, 1.0 - (2 * miss if two_sided else miss))


def prompts_needed(sd: float, margin: float | None, two_sided: bool = False) -> int | None:
    """The fewest prompts with which a candidate as good as the reference passes with
    :data:`POWER` (None: no margin, no spread, or more than 10,000)."""
    if margin is None or margin <= 0 or not math.isfinite(sd):
        return None
    if sd <= 0:
        return 2
    lo, hi = 2, 2
    while pass_probability(hi, sd, margin, two_sided) < POWER:
        lo, hi = hi, hi * 2
        if hi > MAX_PLAN:
            return None
    while lo < hi:  # the smallest n in (lo, hi] that reaches the power
        mid = (lo + hi) // 2
        if pass_probability(mid, sd, margin, two_sided) >= POWER:
            hi = mid
        else:
            lo = mid + 1
    return hi


def compare(
    m: Measure, ref: Sequence[float], cand: Sequence[float], margin: float | None
) -> tuple[Comparison, list[float]]:
    """Pair the prompts' values (each side's mean over its takes), compute the differences,
    their interval and the decision; returns the comparison and each prompt's difference
    (NaN where a side has no value)."""
    r = np.asarray(ref, dtype=float)
    c = np.asarray(cand, dtype=float)
    d = np.array(
        [
            m.delta(a, b) if np.isfinite(a) and np.isfinite(b) else np.nan
            for a, b in zip(c, r, strict=True)
        ],
        dtype=float,
    )
    ok = np.isfinite(d)
    n = int(ok.sum())
    low, high = paired_interval(d[ok]) if n >= 2 else (math.nan, math.nan)
    delta = float(d[ok].mean()) if n else math.nan
    sd = float(d[ok].std(ddof=1)) if n >= 2 else math.nan
    both = ok if n else np.ones_like(ok)  # no pair: each side's own mean, for the report
    rs, cs = r[both & np.isfinite(r)], c[both & np.isfinite(c)]
    out = Comparison(
        measure=m.name,
        n=n,
        reference=float(rs.mean()) if len(rs) else math.nan,
        candidate=float(cs.mean()) if len(cs) else math.nan,
        delta=delta,
        low=float(low),
        high=float(high),
        sd=sd,
        margin=margin,
        decision=decide(m, delta, float(low), float(high), margin, n),
        prompts_needed=prompts_needed(sd, margin, m.direction == "closer") if n >= 2 else None,
    )
    return out, [float(x) for x in d]


def loss(m: Measure, delta: float, margin: float | None) -> float:
    """How far one prompt's difference goes the wrong way, in margins (0 when it does not;
    ``closer``: either way). Sorts the report's per-prompt rows."""
    if margin is None or not math.isfinite(delta):
        return 0.0
    worse = {"higher": -delta, "lower": delta, "closer": abs(delta)}[m.direction]
    return max(0.0, worse) / margin if margin > 0 else (math.inf if worse > 0 else 0.0)


__all__ = [
    "CONFIDENCE",
    "DECISIONS",
    "SHOWN",
    "POWER",
    "Comparison",
    "compare",
    "decide",
    "loss",
    "paired_interval",
    "pass_probability",
    "prompts_needed",
]
