"""SMOS (similarity MOS): the reference voice and a voice under test on one screen, rated 1..5
for how similar the voice is to the reference; what every voice-cloning paper reports beside
the speaker-embedding SIM.

Why one folder: the screen's two clips (the reference first, then the voice; both must be
played, as a MOS clip is), the reference system (``--reference``, else the imported
``natural`` recordings: a clone study's natural recording is its reference), the hidden
reference check (the reference's own take shown as the voice: expected 5), the question and
its five answers (``page.js``), the similarity means with the MOS kind's interval, the pairs
with Holm, their words and the export's columns are one kind's business.

The wording: the question is the one SMOS studies ask ("How similar is this voice to the
reference voice?"); the five answers are a unipolar similarity scale laid out as P.808's ACR
template lays out its five (a number above a word, 5 at the left). The reference notes
(``listening-tests.md``) name SMOS pages (aalto-speech/Gradio_MOS_template) but quote no
labels, so the labels are this kind's choice, said as such in the docs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Interval

from evaluation.listening.kinds.base import (
    ROUNDING_VAR,
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
    require_int,
)
from evaluation.tablespec import Index, Lookup, key, real, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening

QUESTION = "How similar is this voice to the reference voice?"
LABELS = {
    5: "Extremely similar",
    4: "Very similar",
    3: "Moderately similar",
    2: "Slightly similar",
    1: "Not at all similar",
}


@dataclass(frozen=True)
class SmosVote:
    """An SMOS answer: how similar the voice is to the reference, 5 Extremely … 1 Not at all."""

    score: Annotated[int, Interval(ge=min(LABELS), le=max(LABELS))]


INSTRUCTIONS = (
    "Play the reference voice and the voice to rate (both to the end), then rate how similar "
    "the voice is to the reference voice: the speaker, not the words or the audio quality."
)
AXIS = Axis(1.0, 5.0, "SMOS points", "SMOS")
HIDDEN_REFERENCE = "hidden_reference"
"""The check item's ``meta.check``: the reference's own take shown as the voice."""
HIDDEN_EXPECTED = 5.0
"""What the hidden reference should get (the same voice); P.808's absolute rule passes it at
4 or 5 (within ±1, ``stats.ScreeningRules.gold_tolerance``)."""

TAKE = Lookup(
    "takes",
    (("take_id", "take_id"),),
    (("system_id", "system_id"), ("prompt_id", "prompt_id"), ("duration_s", "duration_s")),
)
"""A rating's frame carries the rated take's system, prompt and duration."""
RATINGS = StoredTable(
    "smos_ratings",
    9,
    (
        text("rating_id"),
        key("test_id"),
        key("rater_id"),
        key("assignment_id"),
        key("take_id"),
        text("reference_take_id"),
        real("score", not_null=True),
        real("played_ms"),
        real("reference_played_ms"),
        key("role"),
        real("expected"),
        text("condition"),
        text("created_at"),
    ),
    primary_key=("rating_id",),
    indexes=(Index("idx_smos_item", ("test_id", "rater_id", "assignment_id"), unique=True),),
    order=("test_id", "created_at", "rating_id"),
    per_test=True,
    exported=True,
    reported=True,
    lookups=(TAKE,),
)
"""One row per rated screen (the hidden reference check included, by ``role``)."""

COLUMNS = {
    "raw/smos_ratings.csv": {
        "rating_id": "the rating (the answer's id)",
        "take_id": "SMOS: the voice rated (its system and prompt are the take's)",
        "reference_take_id": "SMOS: the reference clip shown beside it",
        "played_ms": "playback of the voice the server accepted when the vote was given",
        "reference_played_ms": "SMOS: playback of the reference the server accepted",
    },
    "results/smos.csv": {},
    "results/smos_all_raters.csv": {},
    "results/smos_by_prompt.csv": {},
    "results/smos_hidden_reference.csv": {},
    "results/smos_pairwise.csv": {
        "diff_y_minus_x": "mean over raters of (rater's mean of y - rater's mean of x)",
        "rank_biserial": "matched-pairs rank-biserial correlation (positive: y better)",
    },
}
"""The SMOS files of the export (the interval tables' columns are the shared ones)."""


def rated(d: Design) -> list[str]:
    """The systems rated against the reference (every system but the reference)."""
    return [s for s in d.systems if s != d.reference]


def smos_table(ratings: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """SMOS per ``by`` with the MOS kind's two-way cluster-robust interval (raters and
    prompts) on the logit of the mean's place in 1..5."""
    from evaluation import inference

    return inference.interval_table(ratings, by, scale=inference.MOS_SCALE)


class Smos(TestKind):
    name = "smos"
    title = "SMOS"
    folder = Path(__file__).parent
    min_systems = 2
    """The reference and at least one voice rated against it."""
    needs_reference = True
    show_text = False
    instructions = INSTRUCTIONS
    main_table = "smos"
    pairwise_table = "smos_pairwise"
    columns = COLUMNS
    tables = (RATINGS,)
    vote = SmosVote
    rater_columns = {
        "hidden_ref_failed": "SMOS hidden references (the reference's own take as the voice) "
        "rated below 4",
        "variance": "variance of the rater's item scores",
        "unplayed": "items played < 95%",
    }

    def scale(self, mode: str) -> dict[str, Any]:
        return {"question": QUESTION, "labels": [[v, w] for v, w in LABELS.items()]}

    def validate(self, d: Design) -> None:
        if d.reference is None:
            raise ValueError(
                "an SMOS test needs a reference voice: import a `natural` system (the "
                "recordings of the voice being cloned) or name a system as the reference"
            )

    def units(self, d: Design) -> int:
        return len(rated(d))

    def plan_items(
        self, d: Design, prompts: list[str], unit: Callable[[int, int], int], rng: random.Random
    ) -> list[PlannedItem]:
        """One screen per item: the reference's take of the prompt, then a rated system's."""
        ref, systems = str(d.reference), rated(d)
        return [
            PlannedItem(
                0,
                p,
                (Slot(ref, "reference"), Slot(systems[unit(k, len(systems))])),
            )
            for k, p in enumerate(prompts)
        ]

    def checks(self, d: Design) -> list[PlannedItem]:
        """With screening: one hidden reference (the reference's take as the voice too)."""
        if not d.screening or d.reference is None:
            return []
        ref = str(d.reference)
        return [
            PlannedItem(
                0,
                None,
                (Slot(ref, "reference"), Slot(ref)),
                "gold",
                HIDDEN_EXPECTED,
                "item",
                {"check": HIDDEN_REFERENCE},
            )
        ]

    def plan_model(self, d: Design, spread: Spread) -> PlanModel:
        """The MOS model on the 1..5 similarity scale: one rated system per screen."""
        return PlanModel(
            axis=AXIS,
            centre=3.0,
            rater_var=spread.rater_sd**2,
            prompt_var=spread.prompt_sd**2,
            noise_var=spread.noise_sd**2 + ROUNDING_VAR,
            per_item=1 / max(1, len(rated(d))),
            difference=spread.difference,
        )

    def labels(self, n: int) -> list[str]:
        return ["reference voice", "voice to rate"][:n] if n == 2 else ["Play"] * n

    def slot_label(self, i: int, n: int) -> str:
        return ("the reference voice", "the voice to rate")[i] if n == 2 else "the clip"

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        """The reference voice, and a voice rated against it."""
        p0, systems = d.prompts[0], rated(d)
        turn = systems[f.seq % len(systems)] if systems else d.systems[0]
        return [
            ("The reference voice", f.take("item", d.reference, p0)),
            ("A voice you will compare with it", f.take("item", turn, p0)),
        ]

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        msg = "score must be an integer 1..5 (5 Extremely similar ... 1 Not at all similar)"
        score = require_int(body.get("score"), min(LABELS), max(LABELS), msg)
        voice = 1 if len(ctx.takes) > 1 else 0
        row = {
            "rating_id": ctx.answer_id,
            "test_id": ctx.test_id,
            "rater_id": ctx.rater_id,
            "assignment_id": ctx.assignment_id,
            "take_id": ctx.takes[voice],
            "reference_take_id": ctx.takes[0] if voice else None,
            "score": float(score),
            "played_ms": ctx.played.get(voice),
            "reference_played_ms": ctx.played.get(0) if voice else None,
            "role": ctx.role,
            "expected": ctx.expected,
            "condition": ctx.condition,
            "created_at": ctx.created_at,
        }
        return Vote({"score": score}, [(RATINGS.name, row)])

    def screening_text(self, scr: TestScreening) -> str | None:
        r = scr.rules
        return (
            f"SMOS: a rater is excluded when the hidden reference (the reference's own take as "
            f"the voice) is rated below {HIDDEN_EXPECTED - r.gold_tolerance:g}, when the item "
            f"scores' variance is < {r.min_variance:g} over >= {r.min_items_for_variance} items, "
            f"or when more than {r.max_unplayed_share:.0%} of items were played < "
            f"{r.min_played_fraction:.0%}"
        )

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        """P.808's rules with the hidden reference as the gold (no anchor beside it: judged by
        the absolute rule, within ±1 of 5)."""
        from evaluation import stats

        df = data.table(RATINGS.name)
        if df.empty:
            return None
        got = stats.screen_raters(df, scr.rules).set_index("rater_id")
        got = got.rename(columns={"gold_failed": "hidden_ref_failed"})
        return got[[*self.rater_columns, "reasons"]]

    def screening_rules(self, scr: TestScreening) -> dict[str, Any]:
        r = scr.rules
        return {
            "hidden_reference": f"the reference's own take as the voice, expected "
            f"{HIDDEN_EXPECTED:g}; fails below {HIDDEN_EXPECTED - r.gold_tolerance:g}",
            "max_check_failures": r.max_gold_failures,
            "straight_lining": f"variance of item scores < {r.min_variance:g} over >= "
            f"{r.min_items_for_variance} items",
            "unplayed": f"more than {r.max_unplayed_share:.0%} of items played < "
            f"{r.min_played_fraction:.0%} of their length",
        }

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        df = data.table(RATINGS.name)
        if df.empty:
            return None
        return df.assign(slot=1)

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """SMOS per system (screened and every rater), per prompt, the hidden references and
        every pair of rated systems, over the screens whose voice was played."""
        from evaluation import inference, stats

        df = data.table(RATINGS.name)
        if df.empty:
            return []
        played = stats.played_items(df, ctx.screening.rules)
        kept = ctx.keep(played)
        who, ci, assumes = ctx.who, ctx.interval, inference.INTERVAL_ASSUMES
        hidden = df[df["role"] == "gold"]
        return [
            ("smos", smos_table(kept, ["system_id"]), f"SMOS per system ({who})",
             f"voices rated against the reference, played; {ci}", assumes),
            ("smos_all_raters", smos_table(played, ["system_id"]),
             "SMOS per system, every rater (no screening)", f"as smos: {ci}", assumes),
            ("smos_by_prompt",
             smos_table(kept, ["system_id", "prompt_id"]).sort_values(
                 ["system_id", "prompt_id"], ignore_index=True),
             f"SMOS per system and prompt ({who})",
             f"as smos, within one prompt (so over raters only): {ci}",
             "raters are independent draws; the interval is for this prompt only"),
            ("smos_hidden_reference", smos_table(hidden, ["system_id"]),
             "SMOS of the hidden reference (the reference against itself; every rater)",
             f"a check, not a result: expected {HIDDEN_EXPECTED:g}; {ci}", assumes),
            ("smos_pairwise", inference.paired_tests(kept), f"SMOS: every pair of systems ({who})",
             inference.PAIRED_METHOD, inference.PAIRED_ASSUMES),
        ]  # fmt: skip

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        t = tables.get("smos")
        return (t, "system_id", "mean", AXIS) if not_empty(t) else None

    def by_prompt(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        t = tables.get("smos_by_prompt")
        return t if not_empty(t) else None

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        from evaluation.listening.summary import ci_line, has, pair_lines, section

        blocks = []
        for name in ("smos", "smos_all_raters", "smos_hidden_reference"):
            if has(tables, name):
                rows = [
                    ci_line(f"SMOS {x['system_id']}", x, "mean", "ci_low", "ci_high")
                    for _, x in tables[name].iterrows()
                ]
                blocks.append(section(titles.get(name, name), rows))
        if has(tables, "smos_pairwise"):
            t = tables["smos_pairwise"]
            blocks.append(
                section(titles.get("smos_pairwise", "smos_pairwise"), pair_lines(t, "SMOS"))
            )
        return blocks

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        from evaluation.listening.summary import has, holm_lines, mean_lines

        out = mean_lines(tables["smos"], "SMOS", "system_id") if has(tables, "smos") else []
        if has(tables, "smos_pairwise"):
            out += holm_lines(tables["smos_pairwise"], "smos_pairwise")
        return out


KIND = Smos()

__all__ = [
    "AXIS",
    "COLUMNS",
    "HIDDEN_EXPECTED",
    "KIND",
    "LABELS",
    "QUESTION",
    "RATINGS",
    "Smos",
    "SmosVote",
]
