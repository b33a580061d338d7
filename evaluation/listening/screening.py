"""Rater screening for listening tests: the headphone check and one table of every outcome.

* The headphone check is the antiphase test of Woods et al. (2017, "Headphone screening to
  facilitate web-based auditory experiments"): each trial plays three 200 Hz tones, one of them
  6 dB quieter and one in antiphase between the ears; the rater picks the quietest. Over
  loudspeakers the antiphase tone cancels and sounds quietest, so loudspeaker listeners fail.
  The server picks the trials (:func:`headphone_plan`) and scores the answers
  (:func:`score_headphone`); the browser only synthesises the tones.
* :func:`rater_table` joins the P.808-style rules of :func:`evaluation.stats.screen_raters`
  (gold, trap, variance, unplayed) with the headphone result, for A/B the check pairs (the low
  anchor against its clean source: :func:`score_ab_checks`) and, for MUSHRA, the BS.1534-3
  post-screening, giving one row per rater with ``excluded`` and the ``reasons``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pandas as pd

from evaluation import stats

HEADPHONE_TRIALS = 6
HEADPHONE_PASS = 5
"""Woods et al.: pass with at least 5 of 6 correct."""
ROLES = ("normal", "quiet", "antiphase")


@dataclass(frozen=True)
class HeadphoneTrial:
    order: tuple[str, ...]
    """The three tones in play order: ``normal``, ``quiet`` (-6 dB), ``antiphase``."""

    @property
    def answer(self) -> int:
        return self.order.index("quiet")


def headphone_plan(seed: str, trials: int = HEADPHONE_TRIALS) -> list[HeadphoneTrial]:
    rng = random.Random(f"headphones:{seed}")
    out = []
    for _ in range(trials):
        order = list(ROLES)
        rng.shuffle(order)
        out.append(HeadphoneTrial(tuple(order)))
    return out


def score_headphone(seed: str, answers: list[int]) -> dict:
    """``{correct, trials, passed, answers}`` for the rater's picks (0-based tone index)."""
    plan = headphone_plan(seed)
    if not isinstance(answers, list) or len(answers) != len(plan):
        raise ValueError(f"the headphone check needs {len(plan)} answers")
    if any(not isinstance(a, int) or isinstance(a, bool) or not 0 <= a <= 2 for a in answers):
        raise ValueError("headphone answers must be tone numbers 0, 1 or 2")
    correct = sum(a == t.answer for a, t in zip(answers, plan, strict=True))
    return {
        "correct": correct,
        "trials": len(plan),
        "passed": correct >= HEADPHONE_PASS,
        "answers": answers,
    }


@dataclass(frozen=True)
class TestScreening:
    """Which rules exclude a rater from a test's results."""

    __test__ = False

    rules: stats.ScreeningRules = stats.ScreeningRules()
    mushra: stats.MushraRules = stats.MushraRules()
    require_headphones: bool = True
    max_ab_check_failures: int = 0
    """A/B check pairs (the low anchor against its clean source) a rater may get wrong."""


def ab_check_failed(expected: float, choice: str | None) -> bool:
    """A check pair passes only if the clean side was preferred (a tie fails: the anchor is
    low-passed, clicked and cut, which no attentive listener on headphones finds equal)."""
    return choice != ("b" if expected > 0 else "a")


def score_ab_checks(checks: pd.DataFrame) -> pd.DataFrame:
    """Per rater: ``ab_checks`` answered and ``ab_check_failed`` (see :func:`ab_check_failed`)."""
    if checks is None or checks.empty:
        return pd.DataFrame(columns=["ab_checks", "ab_check_failed"]).rename_axis("rater_id")
    pairs = zip(checks["expected"], checks["choice"], strict=True)
    failed = [ab_check_failed(float(e), c) for e, c in pairs]
    d = checks.assign(_failed=failed).groupby("rater_id")["_failed"]
    return pd.DataFrame({"ab_checks": d.size(), "ab_check_failed": d.sum().astype(int)})


def _text_or_none(v: object) -> str | None:
    """A SQL text column through pandas: NULL arrives as None or NaN (a float, and truthy)."""
    return v if isinstance(v, str) and v else None


def _json_or_none(v: object) -> dict | None:
    """The stored headphone result, or None for a rater who never took the check (a dropout:
    NULL, which pandas hands over as NaN)."""
    t = _text_or_none(v)
    if t is None:
        return None
    try:
        d = json.loads(t)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def rater_table(
    raters: pd.DataFrame,
    mos: pd.DataFrame | None = None,
    mushra: pd.DataFrame | None = None,
    screening: TestScreening = TestScreening(),
    ab_checks: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per rater of a test with every screening outcome, ``excluded`` and ``reasons``.

    ``ab_checks``: :meth:`evaluation.listening.tables.TestStore.ab_checks_frame` of an A/B test."""
    cols = [
        "rater_id",
        "seq",
        "crowd_id",
        "answered",
        "finished",
        "headphones",
        "gold_failed",
        "trap_failed",
        "ab_check_failed",
        "variance",
        "unplayed",
        "ref_low",
        "anchor_high",
        "excluded",
        "reasons",
    ]
    if raters.empty:
        return pd.DataFrame(columns=cols)
    p808 = (
        stats.screen_raters(mos, screening.rules).set_index("rater_id")
        if mos is not None and not mos.empty
        else pd.DataFrame()
    )
    bs = (
        stats.mushra_screening(mushra, screening.mushra).set_index("rater_id")
        if mushra is not None and not mushra.empty
        else pd.DataFrame()
    )
    abc = score_ab_checks(ab_checks) if ab_checks is not None else None
    rows = []
    for _, r in raters.iterrows():
        rid = r["rater_id"]
        reasons: list[str] = []
        hp = _json_or_none(r.get("headphone"))
        hp_txt = "not done" if hp is None else f"{hp['correct']}/{hp['trials']}"
        if screening.require_headphones and (hp is None or not hp.get("passed")):
            reasons.append(f"headphone check {hp_txt}" + ("" if hp is None else " (failed)"))
        g = p808.loc[rid] if rid in p808.index else None
        if g is not None and g["reasons"]:
            reasons.append(str(g["reasons"]))
        m = bs.loc[rid] if rid in bs.index else None
        if m is not None and m["reasons"]:
            reasons.append(str(m["reasons"]))
        c = abc.loc[rid] if abc is not None and rid in abc.index else None
        if c is not None and int(c["ab_check_failed"]) > screening.max_ab_check_failures:
            n = int(c["ab_check_failed"])
            reasons.append(
                f"A/B check failed x{n} of {int(c['ab_checks'])} "
                "(did not prefer the clean clip over the degraded anchor)"
            )
        rows.append(
            [
                rid,
                int(r["seq"]),
                _text_or_none(r.get("crowd_id")),
                int(r.get("answered") or 0),
                _text_or_none(r.get("finished_at")) is not None,
                hp_txt,
                None if g is None else int(g["gold_failed"]),
                None if g is None else int(g["trap_failed"]),
                None if c is None else int(c["ab_check_failed"]),
                None if g is None else float(g["variance"]),
                None if g is None else int(g["unplayed"]),
                None if m is None else int(m["ref_low"]),
                None if m is None else int(m["anchor_high"]),
                bool(reasons),
                "; ".join(reasons),
            ]
        )
    return pd.DataFrame(rows, columns=cols)


__all__ = [
    "HEADPHONE_PASS",
    "HEADPHONE_TRIALS",
    "HeadphoneTrial",
    "TestScreening",
    "ab_check_failed",
    "headphone_plan",
    "rater_table",
    "score_ab_checks",
    "score_headphone",
]
