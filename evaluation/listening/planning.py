"""Planning a study before it runs: how many raters give full balance, and what interval
and power to expect for a number of raters.

Why a planner: "ask for a multiple of the group size" did not give full balance (3 systems,
10 prompts, 10 items per rater is balanced only at 30 raters), items per rater were rounded
down without a word (10 -> 9 or 8), and nobody could tell how wide the MOS interval would be.
The numbers here come from the model the validity benchmark simulates
(``tests/support/simulate.py``: rater sd 0.5, prompt sd 0.3, noise sd 0.6 on the MOS scale,
plus the rounding to whole scores), which each kind puts on its own scale
(:meth:`~evaluation.listening.kinds.base.TestKind.plan_model`: MOS points 1..5, CMOS points
-3..+3, MUSHRA points 0..100, a forced choice's share 0..1), through the same variance the
results use (:func:`evaluation.inference.cluster_spread`'s three terms and their
Welch–Satterthwaite df) and the same interval: built on the logit of the mean's place in the
scale (:func:`evaluation.inference.logit_bounds`), around a mean in the middle of the scale,
so a planned interval is inside the scale as every result's is. Where the results would give
no interval (fewer than :data:`MIN_RATERS` raters behind one mean, as when a rater hears only
a few of many pairs) the planner says so instead of a number.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.listening.design import (
    Design,
    checks_per_rater,
    full_balance_raters,
    pairs,
)
from evaluation.listening.kinds.base import PlanModel, Spread

RATER_SD, PROMPT_SD, NOISE_SD = 0.5, 0.3, 0.6
"""The planning model on the MOS scale (1..5); each kind scales it to its own (MUSHRA 20x)."""
DIFFERENCE = 0.3
"""The difference between two systems' MOS (or 6 MUSHRA points) the power is given for."""
ALPHA = 0.05
MIN_RATERS = 3
"""The results give a mean an interval only from this many raters on
(:func:`evaluation.inference.clustered_mean`'s ``min_raters``)."""
WILCOXON_ARE = 3 / math.pi
"""Asymptotic relative efficiency of the Wilcoxon signed-rank test against the t test for
normal data: its power at n raters is about the t test's at 0.955 n."""


@dataclass(frozen=True)
class Plan:
    """What the designer shows for a design and a number of raters."""

    items_asked: int
    items_per_rater: int
    """Rated items each rater gets (the asked number rounded down to a multiple of the cycle,
    and at most one per design cell)."""
    checks_per_rater: int
    clips_per_rater: int
    """What the rater's counter counts: items and check items (they look alike)."""
    design_rows: int
    full_balance_raters: int | None
    raters: int
    half_width: float
    """Half the expected 95 % interval of one mean (one system, or one A/B pair), in
    :attr:`scale` units; NaN when the results would give no interval."""
    power: float
    """Chance that the pairwise test finds a difference of :data:`DIFFERENCE` (Holm over all
    pairs, taken as Bonferroni: a lower bound)."""
    difference: float
    scale: str
    """The unit: ``MOS points``, ``CMOS points``, ``MUSHRA points`` or ``share``."""
    scale_low: float = float("nan")
    scale_high: float = float("nan")
    centre: float = float("nan")
    """The mean the interval is planned around (the middle of the scale)."""
    low: float = float("nan")
    high: float = float("nan")
    """The planned interval around :attr:`centre`: inside the scale, as the results' are."""
    raters_per_mean: float = float("nan")
    """Raters behind one mean (fewer than all when each rater hears only some systems)."""
    note: str = ""
    """Why there is no interval, when there is none."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _t(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, max(df, 1.0)))


def _power(delta: float, sd_diff: float, raters: int, comparisons: int) -> float:
    from scipy import stats

    if raters < 2 or sd_diff <= 0:
        return float("nan")
    n = WILCOXON_ARE * raters
    z = delta / (sd_diff / math.sqrt(n))
    crit = stats.norm.isf(ALPHA / (2 * max(comparisons, 1)))
    return float(stats.norm.cdf(z - crit))


def _interval(m: PlanModel, d: Design, raters: int) -> tuple[float, float, float, str, float]:
    """``(low, high, raters behind one mean, why none, answers per rater to one mean)`` of
    the planned interval around ``m.centre``."""
    from evaluation.inference import Scale, logit_bounds

    n, units, R = d.balanced_items, d.units, max(raters, 1)
    if d.partial:  # each rater answers n of the units once: R·n/U raters behind one mean
        behind, per_rater = R * n / units, 1.0
    else:
        behind, per_rater = float(R), n * m.per_item
    N = behind * per_rater
    P_s = min(len(d.prompts), N)
    if behind < MIN_RATERS or N < MIN_RATERS:
        why = (
            f"about {behind:.3g} raters per {m.cell}; the results give an interval from "
            f"{MIN_RATERS} raters on"
        )
        return float("nan"), float("nan"), behind, why, per_rater
    terms = [(m.rater_var / behind, behind - 1), (m.prompt_var / P_s, P_s - 1)]
    terms.append((m.noise_var / N, N - 1))
    var = sum(t for t, _ in terms)
    df = var**2 / sum(t * t / g for t, g in terms if g > 0) if var > 0 else 1.0
    lo, hi = logit_bounds(m.centre, math.sqrt(var), _t(df), Scale(m.axis.low, m.axis.high))
    return lo, hi, behind, "", per_rater


def plan(
    design: Design,
    raters: int,
    *,
    rater_sd: float = RATER_SD,
    prompt_sd: float = PROMPT_SD,
    noise_sd: float = NOISE_SD,
) -> Plan:
    """The expected precision of ``design`` with ``raters`` raters who all finish."""
    d = design.validate()
    n_items, S = d.balanced_items, len(d.systems)
    checks = checks_per_rater(d)
    m = d.test_kind.plan_model(d, Spread(rater_sd, prompt_sd, noise_sd, DIFFERENCE))
    common = dict(
        items_asked=d.items_per_rater,
        items_per_rater=n_items,
        checks_per_rater=checks,
        clips_per_rater=n_items + checks,
        design_rows=_rows(d),
        full_balance_raters=full_balance_raters(d),
        raters=raters,
    )
    if m is None:
        why = f"a {d.test_kind.title} test reports counts, not means"
        nan = float("nan")
        return Plan(**common, half_width=nan, power=nan, difference=nan, scale="", note=why)
    lo, hi, behind, why, per_rater = _interval(m, d, raters)
    # a rater's difference between two systems: their leniency cancels; prompts and noise of
    # the per_rater answers of each side stay; an A/B answer is already a difference
    if m.paired:
        sd_diff = math.sqrt((m.prompt_var + m.noise_var) / max(per_rater, 1) + m.rater_var)
    else:
        sd_diff = math.sqrt(2 * (m.prompt_var + m.noise_var) / max(per_rater, 1))
    # with fewer items than systems a rater hears only some systems: the per-rater paired
    # tests then have few raters per pair (or none), so no power is promised
    comparisons = len(pairs(d.systems))
    R = max(raters, 1)
    power = _power(m.difference, sd_diff, R, comparisons) if S > 1 and not d.partial else math.nan
    return Plan(
        **common,
        half_width=round((hi - lo) / 2, 3) if hi == hi else float("nan"),
        power=round(power, 3) if power == power else power,
        difference=m.difference,
        scale=m.axis.units,
        scale_low=m.axis.low,
        scale_high=m.axis.high,
        centre=m.centre,
        low=round(lo, 3) if lo == lo else lo,
        high=round(hi, 3) if hi == hi else hi,
        raters_per_mean=round(behind, 3),
        note=why,
    )


def _rows(d: Design) -> int:
    from evaluation.listening.design import rows

    return rows(d)


def _interval_line(p: Plan) -> str:
    if p.note:
        return f"With {p.raters} raters: no interval ({p.note})."
    pw = "" if p.power != p.power else f", power {p.power:.2f} for a {p.difference:.3g} difference"
    return (
        f"With {p.raters} raters: 95% interval ±{p.half_width:.2f} {p.scale} "
        f"({p.low:.2f} to {p.high:.2f} around a mean of {p.centre:g} on "
        f"{p.scale_low:g}..{p.scale_high:g}){pw}."
    )


def plan_lines(design: Design, raters: tuple[int, ...] = (12, 30, 100)) -> list[str]:
    """The planner in words, for the designer, ``listenlab test create`` and the export."""
    first = plan(design, raters[0])
    kind = design.test_kind
    m = kind.plan_model(design, Spread(RATER_SD, PROMPT_SD, NOISE_SD, DIFFERENCE))
    cell = m.cell if m is not None else "system"
    out = [
        f"Items per rater: {first.items_per_rater} rated items"
        + (
            f" (you asked for {first.items_asked}: rounded down to a multiple of "
            f"{design.units} so every rater hears every {cell} "
            "equally often, and at most one per design cell)"
            if first.items_asked != first.items_per_rater
            else ""
        )
        + (
            f" (fewer than the {design.units} {cell}s: "
            "each rater hears some, and raters in a row continue the cycle)"
            if design.partial
            else ""
        )
        + f" + {first.checks_per_rater} check items = {first.clips_per_rater} clips per rater.",
    ]
    fb = first.full_balance_raters
    out.append(
        f"Full balance: every design cell rated equally often at a multiple of {fb} raters "
        "who finish."
        if fb
        else "No number of raters balances every cell exactly with these settings."
    )
    if m is None:
        out.append(f"No interval is planned: {first.note}.")
        return out
    out += [_interval_line(plan(design, r)) for r in raters]
    if design.partial and not m.paired:
        out.append(
            "Power is not planned: a rater hears only some systems, so the pairwise tests "
            "(on each rater's own means) compare only systems a rater heard together."
        )
    out.append(
        f"Planned with rater sd {RATER_SD:g}, prompt sd {PROMPT_SD:g} and noise sd "
        f"{NOISE_SD:g} MOS points (x20 for MUSHRA; a forced choice through the normal curve), "
        "the model the validity benchmark checks; your raters may vary more."
    )
    return out


def screening_warnings(design: Design) -> list[str]:
    """Warnings about a design's screening, the kind's own (MUSHRA: BS.1534-3's
    post-screening with too few screens)."""
    d = design.validate()
    return d.test_kind.screening_warnings(d)


__all__ = ["DIFFERENCE", "MIN_RATERS", "Plan", "plan", "plan_lines", "screening_warnings"]
