"""MUSHRA (ITU-R BS.1534-3): one screen per prompt with every system, the hidden reference and
two anchors (the reference low-passed at 3.5 and 7 kHz), each scored 0..100.

Why one folder: the screen's shuffled stimuli, the open reference, the numbered sliders and
the five bands (``page.js``: the screen fetched whole over the page's one socket and switched
seamlessly), the whole delivery, the planner's MUSHRA points, the post-screening, the
per-condition tables, their words and the export's columns are one kind's business."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Interval

from backends.errors import InvalidRequest
from evaluation.listening.kinds.base import (
    AB_MIN_MS,
    ANCHOR,
    ANCHOR_LOW,
    MUSHRA_ANCHOR_LABELS,
    MUSHRA_ANCHORS,
    MUSHRA_SCREEN_ANCHOR,
    PLAYED_SHARE,
    Axis,
    Design,
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
)
from evaluation.tablespec import Index, integer, key, real, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening

MUSHRA_MAX_SIGNALS = 12
"""ITU-R BS.1534-3 (p.8): at most 12 signals on one screen, the hidden reference and the
anchors included."""
INSTRUCTIONS = (
    "Press Play, then switch between the Reference and the numbered clips while it plays "
    "(they stay in step; Loop repeats the part between the two times). Rate each clip "
    "from 0 (Bad) to 100 (Excellent) against the reference; one of them is the reference "
    "itself. Move every slider before you submit."
)
BANDS = [
    [80, 100, "Excellent"],
    [60, 80, "Good"],
    [40, 60, "Fair"],
    [20, 40, "Poor"],
    [0, 20, "Bad"],
]
QUESTION = "Rate each clip from 0 to 100 against the reference."
PER_MOS_POINT = 20.0
"""The planner's model on this scale: one MOS point is about 20 MUSHRA points."""
AXIS = Axis(0.0, 100.0, "MUSHRA points", "MUSHRA score")


@dataclass(frozen=True)
class MushraVote:
    """A MUSHRA screen's answer: one score 0..100 per clip, in the order of the clips (as
    many as the item has: checked against the item, not declared here)."""

    scores: list[Annotated[float, Interval(ge=AXIS.low, le=AXIS.high)]]


RATINGS = StoredTable(
    "mushra_ratings",
    2,
    (
        text("rating_id"),
        key("test_id"),
        key("rater_id"),
        key("assignment_id"),
        integer("slot", not_null=True),
        key("take_id"),
        text("system_id"),
        key("role"),
        text("prompt_id"),
        real("score", not_null=True),
        text("created_at"),
    ),
    primary_key=("rating_id",),
    indexes=(
        Index("idx_mushra_item", ("test_id", "rater_id", "assignment_id", "slot"), unique=True),
    ),
    order=("test_id", "rater_id", "assignment_id", "slot"),
    per_test=True,
    exported=True,
    reported=True,
)
"""One row per slider of a rated screen: the MUSHRA kind's table."""

COLUMNS = {
    "raw/mushra_ratings.csv": {"rating_id": "the rating (answer id and slot)"},
    "results/mushra.csv": {
        "condition": "a system, hidden reference, or an anchor by its cutoff",
        "median": "median score",
        "median_low": "Woodruff 95% interval of the median, lower bound",
        "median_high": "upper bound",
        "q1": "first quartile",
        "q3": "third quartile",
    },
    "results/mushra_screening.csv": {
        "items": "MUSHRA screens rated",
        "ref_low": "screens with the hidden reference < 90",
        "anchor_high": "screens with the mid anchor > 90",
        "excluded": "BS.1534-3 post-screening excludes the rater",
        "reasons": "why",
    },
    "results/mushra_pairwise.csv": {
        "diff_y_minus_x": "mean over raters of (rater's mean of y - rater's mean of x)",
        "rank_biserial": "matched-pairs rank-biserial correlation (positive: y better)",
    },
}
"""The MUSHRA files of the export."""


class Mushra(TestKind):
    name = "mushra"
    title = "MUSHRA"
    min_systems = 2
    max_systems = MUSHRA_MAX_SIGNALS - len(MUSHRA_ANCHORS)
    """10: with the hidden reference (one of the systems) and the two anchors, a screen holds
    at most BS.1534-3's 12 signals."""
    folder = Path(__file__).parent
    needs_reference = True
    partial_cycles = False
    whole_delivery = True
    instructions = INSTRUCTIONS
    main_table = "mushra"
    pairwise_table = "mushra_pairwise"
    columns = COLUMNS
    tables = (RATINGS,)
    vote = MushraVote
    rater_columns = {
        "ref_low": "MUSHRA screens with the hidden reference < 90",
        "anchor_high": "MUSHRA screens with the mid anchor > 90",
    }
    rating_columns = {"score": "the answer: MOS 1-5, MUSHRA 0-100"}

    def scale(self, mode: str) -> dict[str, Any]:
        return {"question": QUESTION, "bands": BANDS}

    def plan_model(self, d: Design, spread: Spread) -> PlanModel:
        """The MOS model times :data:`PER_MOS_POINT`; sliders are not rounded to a few
        values, and every screen holds every system once."""
        k = PER_MOS_POINT
        return PlanModel(
            axis=AXIS,
            centre=50.0,
            rater_var=(k * spread.rater_sd) ** 2,
            prompt_var=(k * spread.prompt_sd) ** 2,
            noise_var=(k * spread.noise_sd) ** 2,
            per_item=1.0,
            difference=k * spread.difference,
        )

    def too_many_systems(self, d: Design) -> str:
        n = len(d.systems)
        return (
            f"{n} systems would put {n + len(MUSHRA_ANCHORS)} signals on each MUSHRA screen (the "
            f"systems, the reference among them as the hidden reference, and the 3.5 and 7 kHz "
            f"anchors); ITU-R BS.1534-3 allows at most {MUSHRA_MAX_SIGNALS} per screen, so a "
            f"MUSHRA test takes at most {self.max_systems} systems including the reference"
        )

    def validate(self, d: Design) -> None:
        if d.reference is None and not d.legacy:
            raise ValueError(
                "a MUSHRA test needs a reference system (BS.1534-3): import a `natural` "
                "system or name one as the reference"
            )

    def extra_stimuli(self, d: Design) -> frozenset[str]:
        return frozenset({"lowpass_anchors"})

    def balanced_items(self, d: Design) -> int:
        return min(d.items_per_rater, len(d.prompts))

    def plan_items(
        self, d: Design, prompts: list[str], unit: Callable[[int, int], int], rng: random.Random
    ) -> list[PlannedItem]:
        """One screen per prompt: every system, the hidden reference, the anchors, shuffled."""
        out = []
        for p in prompts:
            slots = [Slot(s) for s in d.systems if s != d.reference]
            if d.reference:
                slots.append(Slot(d.reference, "reference"))
            anchors = [ANCHOR] if d.legacy else list(MUSHRA_ANCHORS)
            slots += [Slot(a, "anchor") for a in anchors]
            rng.shuffle(slots)
            out.append(PlannedItem(0, p, tuple(slots)))
        return out

    def labels(self, n: int) -> list[str]:
        return [str(i + 1) for i in range(n)]

    def need_ms(self, duration_ms: float) -> float:
        return min(AB_MIN_MS, PLAYED_SHARE * duration_ms)

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        """The reference and the low anchor."""
        p0 = d.prompts[0]
        low = f.take("anchor", ANCHOR_LOW, p0) or f.take("anchor", ANCHOR, p0)
        return [
            ("The reference: the best quality here", f.take("item", d.reference, p0)),
            ("A clip of low quality: the bottom of the scale", low),
        ]

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        scores = body.get("scores")
        n = len(ctx.takes)
        if not isinstance(scores, list) or len(scores) != n:
            raise InvalidRequest(f"scores must be a list of {n} numbers 0..100")
        roles = ctx.roles or ("item",) * n
        systems = ctx.systems or (None,) * n
        rows = []
        for i, sc in enumerate(scores):
            ok = isinstance(sc, int | float) and not isinstance(sc, bool)
            if not ok or not AXIS.low <= sc <= AXIS.high:
                raise InvalidRequest("every MUSHRA score must be a number 0..100")
            row = {
                "rating_id": f"{ctx.answer_id}:{i}",
                "test_id": ctx.test_id,
                "rater_id": ctx.rater_id,
                "assignment_id": ctx.assignment_id,
                "slot": i,
                "take_id": ctx.takes[i],
                "system_id": systems[i],
                "role": roles[i],
                "prompt_id": ctx.prompt_id,
                "score": float(sc),
                "created_at": ctx.created_at,
            }
            rows.append((RATINGS.name, row))
        return Vote({"scores": scores}, rows)

    def screening_warnings(self, d: Design, max_share: float = 0.15) -> list[str]:
        """BS.1534-3 post-screening excludes a rater whose hidden reference is below 90 (or
        mid anchor above 90) on more than ``max_share`` of their screens; with few screens one
        slip is already more than that."""
        import math

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

    def screening_text(self, scr: TestScreening) -> str | None:
        m = scr.mushra
        return (
            f"BS.1534-3 post-screening: hidden reference < {m.reference_min:g} or the mid "
            f"anchor > {m.anchor_max:g} on more than {m.max_share:.0%} of screens"
        )

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        """BS.1534-3's post-screening (hidden reference and mid anchor)."""
        from evaluation import stats

        mushra = data.table(RATINGS.name)
        if mushra.empty:
            return None
        got = stats.mushra_screening(
            mushra, scr.mushra, anchors=MUSHRA_ANCHOR_LABELS, screen_on=MUSHRA_SCREEN_ANCHOR
        ).set_index("rater_id")
        return got[[*self.rater_columns, "reasons"]]

    def screening_rules(self, scr: TestScreening) -> dict[str, Any]:
        m = scr.mushra
        return {
            "hidden_reference_below": m.reference_min,
            "mid_anchor_above": m.anchor_max,
            "on_more_than_share_of_screens": m.max_share,
        }

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        """One row per slider of every rated screen."""
        mushra = data.table(RATINGS.name)
        return None if mushra.empty else mushra

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Per condition (median and clustered mean), every pair of systems, the screening."""
        from evaluation import inference, stats
        from evaluation.listening.screening import screening_description

        mushra = data.table(RATINGS.name)
        if mushra.empty:
            return []
        kept = ctx.keep(mushra)
        who = ctx.who
        return [
            (
                "mushra",
                stats.mushra_table(kept, anchors=MUSHRA_ANCHOR_LABELS),
                f"MUSHRA per condition ({who})",
                f"{inference.MEDIAN_METHOD}, and quartiles (BS.1534-3); mean: {ctx.interval}",
                inference.INTERVAL_ASSUMES,
            ),
            (
                "mushra_pairwise",
                inference.paired_tests(kept[kept["role"] == "item"]),
                f"MUSHRA: every pair of systems ({who})",
                inference.PAIRED_METHOD,
                inference.PAIRED_ASSUMES,
            ),
            (
                "mushra_screening",
                stats.mushra_screening(
                    mushra,
                    ctx.screening.mushra,
                    anchors=MUSHRA_ANCHOR_LABELS,
                    screen_on=MUSHRA_SCREEN_ANCHOR,
                ),
                "BS.1534-3 post-screening per rater",
                screening_description(ctx.screening, self, ctx.mode),
                "",
            ),
        ]

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        t = tables.get("mushra")
        return (t, "condition", "mean", AXIS) if not_empty(t) else None

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        """The pairwise tests, then the median per condition with its interval."""
        from evaluation.listening.summary import ci_line, has, pair_lines, section

        blocks = []
        if has(tables, "mushra_pairwise"):
            lines = pair_lines(tables["mushra_pairwise"], "MUSHRA")
            blocks.append(section(titles.get("mushra_pairwise", "mushra_pairwise"), lines))
        if has(tables, "mushra"):
            rows = [
                ci_line(f"MUSHRA {x['condition']}", x, "median", "median_low", "median_high")
                for _, x in tables["mushra"].iterrows()
            ]
            title = f"{titles.get('mushra', 'MUSHRA')} (median [95% CI])"
            blocks.append(section(title, rows))
        return blocks

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        from evaluation.listening.summary import has, holm_lines, mean_lines

        out = mean_lines(tables["mushra"], "MUSHRA", "condition") if has(tables, "mushra") else []
        if has(tables, "mushra_pairwise"):
            out += holm_lines(tables["mushra_pairwise"], "mushra_pairwise")
        return out


KIND = Mushra()

__all__ = ["BANDS", "COLUMNS", "KIND", "MUSHRA_MAX_SIGNALS", "RATINGS", "Mushra", "MushraVote"]
