"""MOS (ACR, ITU-T P.800/P.808): one clip, a score 1..5, screened with a low anchor, a gold
"5" and a trap.

Why here: the design's check items, the page's one "Play", the vote's score and the MOS tables
(intervals per system, per prompt and condition, paired tests) are one kind's business."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds.base import (
    ANCHOR,
    GOLD,
    GOLD_EXPECTED,
    TRAP,
    TRAP_ANSWER,
    Familiar,
    PlannedItem,
    ResultContext,
    Slot,
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


class Mos(TestKind):
    name = "mos"
    title = "MOS"
    show_text = True

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
        iv = dict(scale=inference.MOS_SCALE)
        who, ci, assumes = ctx.who, ctx.interval, inference.INTERVAL_ASSUMES
        out: list[Table] = [
            (
                "mos",
                inference.interval_table(kept, ["system_id"], **iv),
                f"MOS per system ({who})",
                f"item ratings that were played; {ci}",
                assumes,
            ),
            (
                "mos_all_raters",
                inference.interval_table(played, ["system_id"], **iv),
                "MOS per system, every rater (no screening)",
                f"as mos: {ci}",
                assumes,
            ),
            (
                "mos_by_prompt",
                inference.interval_table(kept, ["system_id", "prompt_id"], **iv).sort_values(
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
                    inference.interval_table(kept, ["system_id", "condition"], **iv),
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

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, str] | None:
        t = tables.get("mos")
        return (t, "system_id", "mean", "mos") if not_empty(t) else None


KIND = Mos()

__all__ = ["KIND", "LABELS", "Mos"]
