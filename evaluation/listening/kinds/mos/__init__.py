"""MOS (ACR, ITU-T P.800/P.808): one clip, a score 1..5, screened with a low anchor, a gold
"5" and a trap.

Why one folder: the design's check items, the page's one "Play", the question and its five
answers (``page.js`` draws them), the vote's score, the planner's MOS points, the MOS tables
(intervals per system, per prompt and condition, paired tests), their words on the Results
tab and the export's columns are one kind's business."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds.base import (
    ANCHOR,
    GOLD,
    GOLD_EXPECTED,
    ROUNDING_VAR,
    TRAP,
    TRAP_ANSWER,
    Axis,
    Familiar,
    PlanModel,
    PlannedItem,
    ResultContext,
    Slot,
    Spread,
    Table,
    TestKind,
    Vote,
    VoteContext,
    not_empty,
    require_int,
)

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.design import Design
    from evaluation.listening.screening import TestScreening

LABELS = {5: "Excellent", 4: "Good", 3: "Fair", 2: "Poor", 1: "Bad"}
QUESTION = "How good is the quality of the speech?"
AXIS = Axis(1.0, 5.0, "MOS points", "MOS")

COLUMNS = {
    "raw/mos_ratings.csv": {
        "rating_id": "the rating (the answer's id)",
        "played_ms": "playback accepted when the vote was given",
    },
    "results/mos_pairwise.csv": {
        "diff_y_minus_x": "mean over raters of (rater's mean of y - rater's mean of x)",
        "rank_biserial": "matched-pairs rank-biserial correlation (positive: y better)",
    },
    "results/mos_all_raters.csv": {},
    "results/mos_by_prompt.csv": {},
    "results/mos_by_condition.csv": {},
    "results/mos.csv": {},
}
"""The MOS files of the export (the interval tables' columns are the shared ones)."""


def mos_table(ratings: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """MOS per ``by`` (system; per test, prompt or condition too) with the two-way
    cluster-robust interval on the logit of the mean's place in 1..5: the one MOS table, the
    test's results and ``listenlab report`` both call it."""
    from evaluation import inference

    return inference.interval_table(ratings, by, scale=inference.MOS_SCALE)


class Mos(TestKind):
    name = "mos"
    title = "MOS"
    folder = Path(__file__).parent
    show_text = True
    instructions = "Listen to the whole clip, then rate its overall quality."
    main_table = "mos"
    pairwise_table = "mos_pairwise"
    columns = COLUMNS

    def scale(self, mode: str) -> dict[str, Any]:
        return {"question": QUESTION, "labels": [[v, w] for v, w in LABELS.items()]}

    def plan_model(self, d: Design, spread: Spread) -> PlanModel:
        """The MOS scale itself: the planning model's spread, plus rounding to whole scores."""
        return PlanModel(
            axis=AXIS,
            centre=3.0,
            rater_var=spread.rater_sd**2,
            prompt_var=spread.prompt_sd**2,
            noise_var=spread.noise_sd**2 + ROUNDING_VAR,
            per_item=1 / len(d.systems),
            difference=spread.difference,
        )

    def checks(self, d: Design) -> list[PlannedItem]:
        if not d.screening:
            return []
        out = [
            PlannedItem(
                0, None, (Slot(ANCHOR, "anchor"),), "gold", GOLD_EXPECTED["anchor"], "anchor"
            ),
            PlannedItem(0, None, (Slot(TRAP),), "trap", float(TRAP_ANSWER), "trap"),
        ]
        if d.gold or d.legacy:
            gold = Slot(d.systems[0] if d.legacy else GOLD)
            out.append(PlannedItem(0, None, (gold,), "gold", GOLD_EXPECTED["gold"], "gold"))
        return out

    def wants_gold(self, screening: bool) -> bool:
        return screening

    def extra_stimuli(self, d: Design) -> frozenset[str]:
        if not d.screening:
            return frozenset()
        return frozenset({"degraded_anchor", "trap", *(["gold"] if d.gold else [])})

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        """The low anchor and the best clip there is (the gold "5", else a natural recording)."""
        p0 = d.prompts[0]
        k = d.check_variants  # a variant the rater's own check items do not use, if any
        fam = d.prompts[(f.seq + 3) % k] if k > 3 else None
        best = f.take("gold", GOLD, fam) or (f.natural and f.take("item", f.natural, p0))
        turn = d.systems[f.seq % len(d.systems)]
        return [
            ("The low end of the scale (Bad)", f.take("anchor", ANCHOR, fam)),
            ("The high end of the scale (Excellent)", best)
            if best
            else ("A clip from the test", f.take("item", turn, p0)),
        ]

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        msg = "score must be an integer 1..5 (5 Excellent ... 1 Bad)"
        score = require_int(body.get("score"), min(LABELS), max(LABELS), msg)
        row = {
            "rating_id": ctx.answer_id,
            "test_id": ctx.test_id,
            "rater_id": ctx.rater_id,
            "take_id": ctx.takes[0],
            "score": float(score),
            "played_ms": ctx.played.get(0),
            "role": ctx.role,
            "expected": ctx.expected,
            "created_at": ctx.created_at,
            "condition": ctx.condition,
            "assignment_id": ctx.assignment_id,
        }
        return Vote({"score": score}, [("mos_ratings", row)])

    def screening_text(self, scr: TestScreening) -> str | None:
        return scr.rules.describe()

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """MOS per system (screened and every rater), per prompt and condition, and every pair
        of systems, over the item ratings that were played."""
        from evaluation import inference, stats

        if data.mos.empty:
            return []
        played = stats.played_items(data.mos, ctx.screening.rules)
        kept = ctx.keep(played)
        who, ci, assumes = ctx.who, ctx.interval, inference.INTERVAL_ASSUMES
        out: list[Table] = [
            (
                "mos",
                mos_table(kept, ["system_id"]),
                f"MOS per system ({who})",
                f"item ratings that were played; {ci}",
                assumes,
            ),
            (
                "mos_all_raters",
                mos_table(played, ["system_id"]),
                "MOS per system, every rater (no screening)",
                f"as mos: {ci}",
                assumes,
            ),
            (
                "mos_by_prompt",
                mos_table(kept, ["system_id", "prompt_id"]).sort_values(
                    ["system_id", "prompt_id"], ignore_index=True
                ),
                f"MOS per system and prompt ({who})",
                f"as mos, within one prompt (so over raters only): {ci}",
                "raters are independent draws; the interval is for this prompt only",
            ),
        ]
        if kept["condition"].nunique() > 1:
            out.append(
                (
                    "mos_by_condition",
                    mos_table(kept, ["system_id", "condition"]),
                    f"MOS per system and condition ({who})",
                    ci,
                    assumes,
                )
            )
        out.append(
            (
                "mos_pairwise",
                inference.paired_tests(kept),
                f"MOS: every pair of systems ({who})",
                inference.PAIRED_METHOD,
                inference.PAIRED_ASSUMES,
            )
        )
        return out

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        t = tables.get("mos")
        return (t, "system_id", "mean", AXIS) if not_empty(t) else None

    def by_prompt(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        t = tables.get("mos_by_prompt")
        return t if not_empty(t) else None

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        """MOS per system (screened, then every rater) and the pairwise tests."""
        from evaluation.listening.summary import ci_line, has, pair_lines, section

        blocks = []
        for name, title in (
            ("mos", titles.get("mos", "MOS")),
            ("mos_all_raters", "MOS (all raters)"),
        ):
            if has(tables, name):
                rows = [
                    ci_line(f"MOS {x['system_id']}", x, "mean", "ci_low", "ci_high")
                    for _, x in tables[name].iterrows()
                ]
                blocks.append(section(title, rows))
        if has(tables, "mos_pairwise"):
            t = tables["mos_pairwise"]
            blocks.append(section(titles.get("mos_pairwise", "mos_pairwise"), pair_lines(t, "MOS")))
        return blocks

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        from evaluation.listening.summary import has, holm_lines, mean_lines

        out = mean_lines(tables["mos"], "MOS", "system_id") if has(tables, "mos") else []
        if has(tables, "mos_pairwise"):
            out += holm_lines(tables["mos_pairwise"], "mos_pairwise")
        return out


KIND = Mos()

__all__ = ["AXIS", "COLUMNS", "KIND", "LABELS", "QUESTION", "Mos", "mos_table"]
