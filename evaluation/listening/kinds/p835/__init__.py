"""ITU-T P.835: one clip, three ratings in the standard order: the speech signal (SIG), the
background (BAK), then the overall quality (OVRL), each on its own five-point scale; for
speech enhancement and noisy or codec conditions.

Why one folder: the three questions and their anchors in P.835's words (``page.js`` draws
them in order: BAK opens when SIG is answered, OVRL when BAK is), the vote's three scores in
one row of this kind's own table, the screening (the MOS kind's check items, judged on OVRL),
the intervals and the pairwise tests per scale, their words and the export's columns are one
kind's business.

The wording is ITU-T P.835 (11/2003) §7's: "Attending ONLY to the SPEECH SIGNAL, select the
category which best describes the sample you just heard. The SPEECH SIGNAL in this sample
was" 5 Not distorted … 1 Very distorted; "Attending ONLY to the BACKGROUND, …" 5 Not
noticeable … 1 Very intrusive; "Select the category which best describes the sample you just
heard for purposes of everyday speech communication. The OVERALL SPEECH SAMPLE was" 5
Excellent … 1 Bad (the recommendation's text is not in the reference notes: these are its
words as widely quoted, not checked against the PDF here). The procedure is the P.808
toolkit's one-audio P.835 variant (microsoft/P.808
``src/P808Template/P835_template_one_audio.html``): one player and the three questions, the
rater asked to play the sample again for each rating; here one full play is required and
replays are allowed, in P.835's order (the toolkit may swap SIG and BAK).
"""

from __future__ import annotations

from dataclasses import make_dataclass
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
    Spread,
    Table,
    TestKind,
    Vote,
    VoteContext,
    not_empty,
    require_int,
)
from evaluation.listening.kinds.mos import KIND as MOS
from evaluation.tablespec import Index, Lookup, key, real, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening

SCALES: tuple[dict[str, Any], ...] = (
    {
        "key": "sig",
        "name": "SIG",
        "title": "Speech signal",
        "question": "Attending ONLY to the SPEECH SIGNAL, select the category which best "
        "describes the sample you just heard. The SPEECH SIGNAL in this sample was",
        "labels": [
            [5, "Not distorted"],
            [4, "Slightly distorted"],
            [3, "Somewhat distorted"],
            [2, "Fairly distorted"],
            [1, "Very distorted"],
        ],
    },
    {
        "key": "bak",
        "name": "BAK",
        "title": "Background",
        "question": "Attending ONLY to the BACKGROUND, select the category which best "
        "describes the sample you just heard. The BACKGROUND in this sample was",
        "labels": [
            [5, "Not noticeable"],
            [4, "Slightly noticeable"],
            [3, "Noticeable but not intrusive"],
            [2, "Somewhat intrusive"],
            [1, "Very intrusive"],
        ],
    },
    {
        "key": "ovrl",
        "name": "OVRL",
        "title": "Overall quality",
        "question": "Select the category which best describes the sample you just heard for "
        "purposes of everyday speech communication. The OVERALL SPEECH SAMPLE was",
        "labels": [[5, "Excellent"], [4, "Good"], [3, "Fair"], [2, "Poor"], [1, "Bad"]],
    },
)
"""The three scales in P.835's order (SIG, BAK, OVRL), as the page shows them."""
ORDER = tuple(s["key"] for s in SCALES)


def scale_ends(s: dict[str, Any]) -> tuple[int, int]:
    """A scale's lowest and highest answer (1 and 5)."""
    return min(v for v, _ in s["labels"]), max(v for v, _ in s["labels"])


P835Vote = make_dataclass(
    "P835Vote",
    [
        (s["key"], Annotated[int, Interval(ge=scale_ends(s)[0], le=scale_ends(s)[1])])
        for s in SCALES
    ],
    frozen=True,
)
P835Vote.__doc__ = "A P.835 answer: one score per scale (SIG, BAK, OVRL), each 1..5."
NAMES = {s["key"]: s["name"] for s in SCALES}
QUESTION = "Rate the speech signal, then the background, then the overall quality."
INSTRUCTIONS = (
    "Play the sample to the end, then give three ratings in order: attend only to the speech "
    "signal and rate how distorted it sounds; attend only to the background and rate how "
    "noticeable or intrusive it is; then rate the overall quality of the sample for everyday "
    "speech communication. You may play the sample again before each rating."
)
AXIS = Axis(1.0, 5.0, "P.835 points", "P.835 (1-5)")

TAKE = Lookup(
    "takes",
    (("take_id", "take_id"),),
    (("system_id", "system_id"), ("prompt_id", "prompt_id"), ("duration_s", "duration_s")),
)
RATINGS = StoredTable(
    "p835_ratings",
    9,
    (
        text("rating_id"),
        key("test_id"),
        key("rater_id"),
        key("assignment_id"),
        key("take_id"),
        real("sig", not_null=True),
        real("bak", not_null=True),
        real("ovrl", not_null=True),
        real("played_ms"),
        key("role"),
        real("expected"),
        text("condition"),
        text("created_at"),
    ),
    primary_key=("rating_id",),
    indexes=(Index("idx_p835_item", ("test_id", "rater_id", "assignment_id"), unique=True),),
    order=("test_id", "created_at", "rating_id"),
    per_test=True,
    exported=True,
    reported=True,
    lookups=(TAKE,),
)
"""One row per rated clip: its three scores (check items included, by ``role``)."""

SCALE_COLUMN = {"scale": "P.835 scale: SIG (speech signal), BAK (background), OVRL (overall)"}
COLUMNS = {
    "raw/p835_ratings.csv": {
        "rating_id": "the rating (the answer's id)",
        "sig": "P.835 SIG: the speech signal, 5 Not distorted … 1 Very distorted",
        "bak": "P.835 BAK: the background, 5 Not noticeable … 1 Very intrusive",
        "ovrl": "P.835 OVRL: the overall quality, 5 Excellent … 1 Bad",
        "played_ms": "playback accepted when the vote was given",
    },
    "results/p835.csv": SCALE_COLUMN,
    "results/p835_all_raters.csv": SCALE_COLUMN,
    "results/p835_by_prompt.csv": SCALE_COLUMN,
    "results/p835_pairwise.csv": {
        **SCALE_COLUMN,
        "diff_y_minus_x": "mean over raters of (rater's mean of y - rater's mean of x)",
        "rank_biserial": "matched-pairs rank-biserial correlation (positive: y better)",
    },
}


def long_scores(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (rating, scale): ``scale`` (SIG, BAK, OVRL) and ``score``."""
    import pandas as pd

    keep = [c for c in df.columns if c not in ORDER]
    parts = [df[keep].assign(scale=NAMES[k], score=df[k].astype(float)) for k in ORDER]
    return pd.concat(parts, ignore_index=True)


def scale_table(long: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per scale (in P.835's order) and ``by``: the MOS kind's two-way cluster-robust interval
    on the logit of the mean's place in 1..5."""
    import pandas as pd

    from evaluation import inference

    t = inference.interval_table(long, ["scale", *by], scale=inference.MOS_SCALE)
    rank = {n: i for i, n in enumerate(NAMES.values())}
    t = t.assign(_o=t["scale"].map(rank)).sort_values(["_o", "mean"], ascending=[True, False])
    return pd.DataFrame(t.drop(columns="_o")).reset_index(drop=True)


def scale_pairs(long: pd.DataFrame) -> pd.DataFrame:
    """Every pair of systems per scale (Wilcoxon over raters; Holm within each scale)."""
    import pandas as pd

    from evaluation import inference

    parts = [
        inference.paired_tests(long[long["scale"] == n]).assign(scale=n)
        for n in NAMES.values()
        if (long["scale"] == n).any()
    ]
    if not parts:
        return inference.paired_tests(long).assign(scale=[])
    out = pd.concat(parts, ignore_index=True)
    return out[["scale", *[c for c in out.columns if c != "scale"]]]


class P835(TestKind):
    name = "p835"
    title = "P.835"
    folder = Path(__file__).parent
    show_text = False
    instructions = INSTRUCTIONS
    main_table = "p835"
    pairwise_table = "p835_pairwise"
    columns = COLUMNS
    tables = (RATINGS,)
    vote = P835Vote
    rater_columns = {
        "p835_check_failed": "P.835 check items failed on OVRL (anchor, gold)",
        "p835_trap_failed": "P.835 traps failed (OVRL not the answer asked for)",
        "variance": "variance of the rater's item scores",
        "unplayed": "items played < 95%",
    }
    rating_columns = {
        "sig": "P.835: the speech-signal rating 1-5 (score is OVRL)",
        "bak": "P.835: the background rating 1-5 (score is OVRL)",
    }

    def scale(self, mode: str) -> dict[str, Any]:
        return {"question": QUESTION, "scales": [dict(s) for s in SCALES]}

    def plan_model(self, d: Design, spread: Spread) -> PlanModel:
        """Each scale is a MOS-like 1..5 mean: the MOS kind's model, per scale."""
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
        """The MOS kind's check items (low anchor, trap, gold when there is one)."""
        return MOS.checks(d)

    def wants_gold(self, screening: bool) -> bool:
        return screening

    def extra_stimuli(self, d: Design) -> frozenset[str]:
        return MOS.extra_stimuli(d)

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        return MOS.familiar(d, f)

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        got = {}
        for s in SCALES:
            low, high = scale_ends(s)
            msg = f"{s['key']} ({s['name']}, {s['title'].lower()}) must be an integer 1..5"
            got[s["key"]] = require_int(body.get(s["key"]), low, high, msg)
        row = {
            "rating_id": ctx.answer_id,
            "test_id": ctx.test_id,
            "rater_id": ctx.rater_id,
            "assignment_id": ctx.assignment_id,
            "take_id": ctx.takes[0],
            **{k: float(v) for k, v in got.items()},
            "played_ms": ctx.played.get(0),
            "role": ctx.role,
            "expected": ctx.expected,
            "condition": ctx.condition,
            "created_at": ctx.created_at,
        }
        return Vote(got, [(RATINGS.name, row)])

    def screening_text(self, scr: TestScreening) -> str | None:
        return "P.835, on the OVRL answers: " + scr.rules.describe()

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        """P.808's rules on the OVRL answers (the trap's spoken "select 2" is asked of OVRL)."""
        from evaluation import stats

        df = data.table(RATINGS.name)
        if df.empty:
            return None
        got = stats.screen_raters(df.assign(score=df["ovrl"]), scr.rules).set_index("rater_id")
        got = got.rename(
            columns={"gold_failed": "p835_check_failed", "trap_failed": "p835_trap_failed"}
        )
        return got[[*self.rater_columns, "reasons"]]

    def screening_rules(self, scr: TestScreening) -> dict[str, Any]:
        return {"scale": "OVRL", **(MOS.screening_rules(scr) or {})}

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        df = data.table(RATINGS.name)
        if df.empty:
            return None
        return df.assign(slot=0, score=df["ovrl"])

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Per scale and system (screened and every rater), per prompt, and every pair of
        systems per scale, over the clips that were played."""
        from evaluation import inference, stats

        df = data.table(RATINGS.name)
        if df.empty:
            return []
        played = stats.played_items(df, ctx.screening.rules)
        kept = long_scores(ctx.keep(played))
        every = long_scores(played)
        who, ci, assumes = ctx.who, ctx.interval, inference.INTERVAL_ASSUMES
        holm = f"{inference.PAIRED_METHOD}; Holm within each scale"
        return [
            ("p835", scale_table(kept, ["system_id"]), f"P.835 per scale and system ({who})",
             f"SIG, BAK and OVRL of the clips that were played; {ci}", assumes),
            ("p835_all_raters", scale_table(every, ["system_id"]),
             "P.835 per scale and system, every rater (no screening)", f"as p835: {ci}", assumes),
            ("p835_by_prompt", scale_table(kept, ["system_id", "prompt_id"]),
             f"P.835 per scale, system and prompt ({who})",
             f"as p835, within one prompt (so over raters only): {ci}",
             "raters are independent draws; the interval is for this prompt only"),
            ("p835_pairwise", scale_pairs(kept), f"P.835: every pair of systems per scale ({who})",
             holm, inference.PAIRED_ASSUMES),
        ]  # fmt: skip

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        t = tables.get("p835")
        if not not_empty(t):
            return None
        t = t.assign(label=t["scale"] + " " + t["system_id"].astype(str))
        return (t, "label", "mean", AXIS)

    def by_prompt(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        t = tables.get("p835_by_prompt")
        return t if not_empty(t) else None

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        from evaluation.listening.summary import ci_line, has, pair_lines, section

        blocks = []
        for name in ("p835", "p835_all_raters"):
            if has(tables, name):
                rows = [
                    ci_line(f"{x['scale']} {x['system_id']}", x, "mean", "ci_low", "ci_high")
                    for _, x in tables[name].iterrows()
                ]
                blocks.append(section(titles.get(name, name), rows))
        if has(tables, "p835_pairwise"):
            t = tables["p835_pairwise"]
            lines = []
            for n in NAMES.values():
                part = t[t["scale"] == n]
                lines += pair_lines(part, n) if len(part) else []
            blocks.append(section(titles.get("p835_pairwise", "p835_pairwise"), lines))
        return blocks

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        from evaluation.listening.summary import has, holm_lines, mean_lines

        out: list[str] = []
        if has(tables, "p835"):
            t = tables["p835"]
            for n in NAMES.values():
                out += mean_lines(t[t["scale"] == n], f"P.835 {n}", "system_id")
        if has(tables, "p835_pairwise"):
            t = tables["p835_pairwise"]
            for n in NAMES.values():
                out += holm_lines(t[t["scale"] == n], f"p835_pairwise {n}")
        return out


KIND = P835()

__all__ = [
    "AXIS",
    "COLUMNS",
    "KIND",
    "ORDER",
    "QUESTION",
    "RATINGS",
    "SCALES",
    "P835",
    "P835Vote",
    "scale_ends",
]
