"""MOS (ACR, ITU-T P.800/P.808): one clip, a score 1..5, screened with a low anchor, a gold
"5" and a trap.

Why one folder: the design's check items, the page's one "Play", the question and its five
answers (``page.js`` draws them), the vote's score, the planner's MOS points, the MOS tables
(intervals per system, per prompt and condition, paired tests), their words on the Results
tab and the export's columns are one kind's business."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Interval

from evaluation.listening.kinds.base import (
    ANCHOR,
    GOLD,
    GOLD_EXPECTED,
    ROUNDING_VAR,
    TRAP,
    TRAP_ANSWER,
    Axis,
    Design,
    Familiar,
    PlanModel,
    PlannedItem,
    ReportSection,
    ReportTable,
    ResultContext,
    Slot,
    Spread,
    StoreView,
    Table,
    TestKind,
    Vote,
    VoteContext,
    not_empty,
    require_int,
    stimulus_systems,
)
from evaluation.tablespec import Index, Lookup, key, real, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening

LABELS = {5: "Excellent", 4: "Good", 3: "Fair", 2: "Poor", 1: "Bad"}
QUESTION = "How good is the quality of the speech?"


@dataclass(frozen=True)
class MosVote:
    """A MOS answer: the score, 5 Excellent … 1 Bad."""

    score: Annotated[int, Interval(ge=min(LABELS), le=max(LABELS))]


AXIS = Axis(1.0, 5.0, "MOS points", "MOS")

TAKE = Lookup(
    "takes",
    (("take_id", "take_id"),),
    (("system_id", "system_id"), ("prompt_id", "prompt_id"), ("duration_s", "duration_s")),
)
"""A rating's frame carries its take's system, prompt and duration."""
RATINGS = StoredTable(
    "mos_ratings",
    1,
    (
        text("rating_id"),
        key("test_id"),
        key("rater_id"),
        key("take_id"),
        real("score", not_null=True),
        real("played_ms"),
        key("role"),
        real("expected"),
        text("created_at"),
        text("condition", since=2),
        text("assignment_id", since=2),
    ),
    primary_key=("rating_id",),
    indexes=(
        Index(
            "idx_mos_ratings_test_id_rater_id_take_id",
            ("test_id", "rater_id", "take_id"),
            unique=True,
        ),
    ),
    order=("test_id", "created_at", "rating_id"),
    per_test=True,
    exported=True,
    reported=True,
    lookups=(TAKE,),
)
"""One row per rated clip (check items included, by ``role``): the MOS kind's table."""

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
    tables = (RATINGS,)
    vote = MosVote
    rater_columns = {
        "gold_failed": "MOS check items failed (anchor, gold)",
        "trap_failed": "MOS traps failed",
        "variance": "variance of the rater's item scores",
        "unplayed": "items played < 95%",
    }
    rating_columns = {
        "score": "the answer: MOS 1-5, MUSHRA 0-100",
        "played_ms": "MOS: playback the server accepted for the clip (the MOS table leaves out "
        "an item played less than 95% of duration_s)",
        "duration_s": "MOS: the clip's length in seconds",
    }

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
        return Vote({"score": score}, [(RATINGS.name, row)])

    def screening_text(self, scr: TestScreening) -> str | None:
        return scr.rules.describe()

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        """P.808's rules, with the check items judged against the rater's own use of the
        scale (:class:`evaluation.stats.ScreeningRules`)."""
        from evaluation import stats

        mos = data.table(RATINGS.name)
        if mos.empty:
            return None
        got = stats.screen_raters(mos, scr.rules).set_index("rater_id")
        return got[[*self.rater_columns, "reasons"]]

    def screening_rules(self, scr: TestScreening) -> dict[str, Any]:
        r = scr.rules
        return {
            "trap": "exactly the answer the clip asks for",
            "low_anchor": "fails when rated at or above the rater's own mean item score",
            "gold": "fails when rated below the rater's own low-anchor score; a gold with no "
            f"anchor beside it is judged by P.808's absolute rule (within ±{r.gold_tolerance:g} "
            "of 5)",
            "max_check_failures": r.max_gold_failures,
            "max_trap_failures": r.max_trap_failures,
            "straight_lining": f"variance of item scores < {r.min_variance:g} over >= "
            f"{r.min_items_for_variance} items",
            "unplayed": f"more than {r.max_unplayed_share:.0%} of items played < "
            f"{r.min_played_fraction:.0%} of their length (unplayed items are dropped anyway)",
        }

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        """One row per rated clip, check clips under their pseudo system (``__anchor__``,
        ``__gold__``, ``__trap__``): their takes name no system of their own."""
        mos = data.table(RATINGS.name)
        if mos.empty:
            return None
        return mos.assign(
            slot=0, system_id=stimulus_systems(data, mos["take_id"], mos["system_id"])
        )

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """MOS per system (screened and every rater), per prompt and condition, and every pair
        of systems, over the item ratings that were played."""
        from evaluation import inference, stats

        mos = data.table(RATINGS.name)
        if mos.empty:
            return []
        played = stats.played_items(mos, ctx.screening.rules)
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

    def report(self, view: StoreView) -> list[ReportSection]:
        """MOS per system (with the per-rater z-scores' mean) and per system and prompt, per
        test or pooled, over the played items of the raters each test kept."""
        from evaluation import stats
        from evaluation.plots import interval_figure

        mos = view.table(RATINGS.name)
        usable = view.keep(stats.played_items(mos, view.options.rules)) if not mos.empty else mos
        by = ["system_id"] if view.pool else ["test_id", "system_id"]
        mt = mos_table(usable, by)
        if not usable.empty:
            z = stats.mos_table(stats.add_z_scores(usable), by=by, score="z")[[*by, "mean"]]
            mt = mt.merge(z.rename(columns={"mean": "mean_z"}), on=by, how="left")
        shown = mt
        if not mt.empty and "test_id" in mt:  # per test: a system's name alone is not a row
            shown = mt.assign(system_id=mt["test_id"].astype(str) + ": " + mt["system_id"])
        figures = (
            ((self.main_table, lambda: interval_figure(shown, "system_id", "mean", AXIS)),)
            if not mt.empty
            else ()
        )
        return [
            ReportSection(
                f"MOS per system, {view.per} (screened raters out, by each test's rule; 95% "
                "two-way cluster-robust interval over raters and prompts; mean_z = per-rater "
                "z-scores)",
                (ReportTable(self.main_table, mt, poolable=True),),
                figures,
            ),
            ReportSection(
                f"MOS per system × prompt, {view.per}",
                (
                    ReportTable(
                        f"{self.main_table}_by_prompt",
                        mos_table(usable, [*by, "prompt_id"]),
                        poolable=True,
                    ),
                ),
            ),
        ]


KIND = Mos()

__all__ = ["AXIS", "COLUMNS", "KIND", "LABELS", "QUESTION", "Mos", "MosVote", "mos_table"]
