"""The designer's planner (#38 item 12): every planned interval is inside its kind's scale, in
its kind's units, agrees with the interval the results compute, and says when the results
would give none.

Before, an A/B test of 13 systems planned "±9.85 CMOS points" for 12 raters on a -3..+3 scale
(the symmetric t interval on about 1.5 raters per pair), and every kind but MUSHRA and A/B,
the glitch hunt included, was planned in "MOS points".
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from backends.errors import InvalidRequest
from evaluation import inference, stats
from evaluation.listening.design import Design
from evaluation.listening.planning import plan, plan_lines
from tests.support.simulate import AbModel, MosModel, ab_votes, mos_ratings

MIN_RATERS = inspect.signature(inference.clustered_mean).parameters["min_raters"].default
"""The results give a mean an interval from this many raters on."""
UNITS = {
    ("mos", "cmos"): ("MOS points", 1.0, 5.0),
    ("ab", "cmos"): ("CMOS points", -3.0, 3.0),
    ("ab", "forced"): ("share", 0.0, 1.0),
    ("mushra", "cmos"): ("MUSHRA points", 0.0, 100.0),
}


def design(kind: str, systems: int, prompts: int, items: int, mode: str = "cmos") -> Design:
    names = tuple(f"s{i}" for i in range(systems))
    return Design(
        kind,
        names,
        tuple(f"p{i:02d}" for i in range(prompts)),
        items,
        reference=names[0] if kind == "mushra" else None,
        ab_mode=mode,
        gold=True,
        partial_rows=True,
    )


@pytest.mark.parametrize(("kind", "mode"), list(UNITS))
@pytest.mark.parametrize(("systems", "prompts", "items"), [(2, 10, 10), (4, 6, 10), (13, 6, 10)])
def test_every_planned_interval_is_inside_the_scale_in_the_kinds_units(
    kind, mode, systems, prompts, items
):
    if kind == "mushra" and systems > 10:
        pytest.skip("a MUSHRA screen holds at most 10 systems")
    units, low, high = UNITS[(kind, mode)]
    d = design(kind, systems, prompts, items, mode)
    for raters in (3, 12, 30, 100):
        p = plan(d, raters)
        assert (p.scale, p.scale_low, p.scale_high) == (units, low, high)
        if p.note:  # the results would give no interval: the planner gives none either
            assert p.half_width != p.half_width and p.raters_per_mean < MIN_RATERS
            continue
        assert low < p.low < p.centre < p.high < high
        assert 0 < p.half_width < (high - low) / 2
    intervals = "\n".join(x for x in plan_lines(d) if x.startswith("With "))
    assert units in intervals and (kind == "mos" or " MOS points" not in intervals)


def test_the_ab_planner_of_many_systems_says_there_is_no_interval_yet():
    """The reproduction of #38: 13 systems, 6 prompts, 10 items, 12 raters on -3..+3."""
    d = design("ab", 13, 6, 10)
    p = plan(d, 12)
    assert p.note and p.half_width != p.half_width  # no "±9.85 CMOS points"
    assert p.raters_per_mean == pytest.approx(12 * 10 / 78, rel=1e-3)
    line = next(x for x in plan_lines(d) if x.startswith("With 12 raters"))
    assert line.startswith("With 12 raters: no interval (about 1.54 raters per pair")
    wide = plan(d, 100)  # with enough raters: an interval, inside the scale
    assert -3 < wide.low < wide.high < 3 and wide.scale == "CMOS points"


def test_a_glitch_hunt_is_planned_without_an_interval_and_an_unknown_kind_is_refused():
    d = design("glitch", 2, 4, 4)
    lines = plan_lines(d)
    assert not any("points" in x for x in lines)
    assert "No interval is planned: a Glitch hunt test reports counts, not means." in lines
    p = plan(d, 12)
    assert p.scale == "" and p.half_width != p.half_width
    with pytest.raises(InvalidRequest, match="test type must be one of"):
        plan(design("nope", 2, 4, 4), 12)


def test_the_planned_interval_is_the_one_the_results_compute():
    """Simulated studies on the planner's own model, every system at the scale's middle: the
    results' intervals (logit of the place in the scale, two-way cluster-robust) are as wide
    as planned, within 20 %, for MOS and for CMOS."""
    d = design("mos", 3, 12, 12)
    planned = plan(d, 30).half_width
    m = MosModel(system_means={"s0": 3.0, "s1": 3.0, "s2": 3.0}, bad={}, screening=False)
    got = []
    for i in range(30):
        t = inference.interval_table(
            mos_ratings(m, np.random.default_rng(i)), ["system_id"], scale=inference.MOS_SCALE
        )
        got += list((t["ci_high"] - t["ci_low"]) / 2)
    assert np.mean(got) == pytest.approx(planned, rel=0.2)

    d = design("ab", 3, 12, 12)
    ab = AbModel(system_means={"s0": 3.0, "s1": 3.0, "s2": 3.0})  # rater 0.3, prompt 0.2
    planned = plan(d, ab.raters, rater_sd=0.3, prompt_sd=0.2, noise_sd=0.6).half_width
    got = []
    for i in range(30):
        t = stats.ab_table(ab_votes(ab, np.random.default_rng(i)))
        got += list((t["cmos_high"] - t["cmos_low"]) / 2)
    assert np.mean(got) == pytest.approx(planned, rel=0.2)
