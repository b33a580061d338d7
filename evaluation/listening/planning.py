"""Planning a study before it runs: how many raters give full balance, and what interval
half-width and power to expect for a number of raters.

Why a planner: "ask for a multiple of the group size" did not give full balance (3 systems,
10 prompts, 10 items per rater is balanced only at 30 raters), items per rater were rounded
down without a word (10 -> 9 or 8), and nobody could tell how wide the MOS interval would be.
The numbers here come from the model the validity benchmark simulates
(``tests/support/simulate.py``: rater sd 0.5, prompt sd 0.3, noise sd 0.6 on the MOS scale,
plus the rounding to whole scores), put through the same variance the results use
(:func:`evaluation.inference.cluster_spread`'s three terms and their Welch–Satterthwaite df);
``benchmarks/listening_validity.py`` compares the planned MOS half-width with the simulated
one in every cell of its grid.
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

RATER_SD, PROMPT_SD, NOISE_SD = 0.5, 0.3, 0.6
"""The planning model on the MOS scale (1..5); MUSHRA uses 20x these (one MOS point is about
20 MUSHRA points)."""
ROUNDING_VAR = 1 / 12
"""A score rounded to a whole number adds the variance of a uniform rounding error."""
DIFFERENCE = 0.3
"""The difference between two systems' MOS (or 6 MUSHRA points) the power is given for."""
ALPHA = 0.05
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
    """Expected 95 % half-width of one system's mean (MOS points, or MUSHRA points)."""
    power: float
    """Chance that the pairwise test finds a difference of :data:`DIFFERENCE` (Holm over all
    pairs, taken as Bonferroni: a lower bound)."""
    difference: float
    scale: str

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
    kind, n_items = d.kind, d.balanced_items
    S, P = len(d.systems), len(d.prompts)
    mushra = kind == "mushra"
    k = 20.0 if mushra else 1.0
    sr, sp = rater_sd * k, prompt_sd * k
    se2 = (noise_sd * k) ** 2 + (0 if mushra else ROUNDING_VAR)
    if mushra:
        per_rater, comparisons = n_items, len(pairs(d.systems))  # every system on each screen
    elif kind == "ab":
        per_rater, comparisons = n_items / len(pairs(d.systems)), len(pairs(d.systems))
        se2 = 2 * noise_sd**2 + ROUNDING_VAR  # a CMOS answer: a difference of two ratings
    else:
        per_rater, comparisons = n_items / S, len(pairs(d.systems))
    R = max(raters, 1)
    N = R * per_rater
    P_s = min(P, N)
    terms = [(sr**2 / R, R - 1), (sp**2 / P_s, P_s - 1), (se2 / N, N - 1)]
    var = sum(t for t, _ in terms)
    df = var**2 / sum(t * t / g for t, g in terms if g > 0) if var > 0 else 1.0
    half = _t(df) * math.sqrt(var)
    # a rater's difference between two systems: their leniency cancels; prompts and noise of
    # the per_rater items of each side stay
    sd_diff = math.sqrt(2 * (sp**2 + se2) / max(per_rater, 1))
    delta = DIFFERENCE * k
    if kind == "ab":  # each A/B vote is already a difference: no second side
        sd_diff = math.sqrt((sp**2 + se2) / max(per_rater, 1) + sr**2)
    # with fewer items than systems a rater hears only some systems: the per-rater paired
    # tests then have few raters per pair (or none), so no power is promised
    power = _power(delta, sd_diff, R, comparisons) if S > 1 and not d.partial else float("nan")
    checks = checks_per_rater(d)
    return Plan(
        items_asked=d.items_per_rater,
        items_per_rater=n_items,
        checks_per_rater=checks,
        clips_per_rater=n_items + checks,
        design_rows=_rows(d),
        full_balance_raters=full_balance_raters(d),
        raters=raters,
        half_width=round(half, 3),
        power=round(power, 3) if power == power else power,
        difference=delta,
        scale="MUSHRA points" if mushra else ("CMOS points" if kind == "ab" else "MOS points"),
    )


def _rows(d: Design) -> int:
    from evaluation.listening.design import rows

    return rows(d)


def plan_lines(design: Design, raters: tuple[int, ...] = (12, 30, 100)) -> list[str]:
    """The planner in words, for the designer, ``listenlab test create`` and the export."""
    first = plan(design, raters[0])
    out = [
        f"Items per rater: {first.items_per_rater} rated items"
        + (
            f" (you asked for {first.items_asked}: rounded down to a multiple of "
            f"{design.units} so every rater hears every {'pair' if design.kind == 'ab' else 'system'} "
            "equally often, and at most one per design cell)"
            if first.items_asked != first.items_per_rater
            else ""
        )
        + (
            f" (fewer than the {design.units} {'pairs' if design.kind == 'ab' else 'systems'}: "
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
    for r in raters:
        p = plan(design, r)
        pw = (
            "" if p.power != p.power else f", power {p.power:.2f} for a {p.difference:g} difference"
        )
        out.append(f"With {r} raters: 95% interval ±{p.half_width:.2f} {p.scale}{pw}.")
    if design.partial and design.kind != "ab":
        out.append(
            "Power is not planned: a rater hears only some systems, so the pairwise tests "
            "(on each rater's own means) compare only systems a rater heard together."
        )
    out.append(
        "Planned with rater sd 0.5, prompt sd 0.3 and noise sd 0.6 MOS points (x20 for "
        "MUSHRA), the model the validity benchmark checks; your raters may vary more."
    )
    return out


def screening_warnings(design: Design, max_share: float = 0.15) -> list[str]:
    """Warnings about a design's screening: MUSHRA post-screening (BS.1534-3) excludes a
    rater whose hidden reference is below 90 (or mid anchor above 90) on more than
    ``max_share`` of their screens; with few screens one slip is already more than that."""
    d = design.validate()
    if d.kind != "mushra":
        return []
    n = d.balanced_items
    if n <= 0 or 1 / n <= max_share:
        return []
    need = math.floor(1 / max_share) + 1
    return [
        f"With {n} MUSHRA screens per rater, one hidden-reference rating below 90 is "
        f"1/{n} = {100 / n:.1f}% of the screens, over BS.1534-3's {max_share:.0%}: a single "
        f"slip excludes a careful rater. Use at least {need} screens (prompts and items per "
        "rater), or read the results with the screened raters included."
    ]


__all__ = ["DIFFERENCE", "Plan", "plan", "plan_lines", "screening_warnings"]
