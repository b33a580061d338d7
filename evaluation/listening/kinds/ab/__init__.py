"""A/B (paired comparison, with its CMOS mode): two clips of one prompt, answered on the CMOS
scale -3..+3 (B against A) or as a forced choice, screened with two check pairs.

Why one folder: the pairs the design cycles through, the sides' balance, the check pairs (the
degraded anchor against its clean source, once on each side), the "A"/"B" labels, the
question and its answers (``page.js`` draws them), the vote's ``cmos``/``choice``, the
planner's CMOS points (or share), the per-pair tables, their words and the export's columns
are one kind's business."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from annotated_types import Interval

from backends.errors import InvalidRequest
from evaluation.listening.kinds.base import (
    AB_MIN_MS,
    ANCHOR,
    PLAYED_SHARE,
    ROUNDING_VAR,
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
    pairs,
    require_int,
)
from evaluation.tablespec import Index, Lookup, key, real, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening

MODES = ("cmos", "forced")
"""``cmos``: -3..+3, B against A; ``forced``: A or B. The first is the default (every stored
design carries it as ``ab_mode``, whatever its kind)."""
CMOS, FORCED = MODES
SIDES = "ABCDEFGH"
CMOS_LABELS = [
    [-3, "A much better"],
    [-2, "A better"],
    [-1, "A slightly better"],
    [0, "About the same"],
    [1, "B slightly better"],
    [2, "B better"],
    [3, "B much better"],
]
CMOS_QUESTION = "Compare the quality of B with the quality of A."
FORCED_LABELS = [["a", "A is better"], ["b", "B is better"]]
FORCED_QUESTION = "Which clip has the better quality?"
CMOS_RANGE = (CMOS_LABELS[0][0], CMOS_LABELS[-1][0])
"""The CMOS answers' ends: -3 (A much better) .. +3 (B much better)."""
CHOICES = tuple(v for v, _ in FORCED_LABELS)
"""A forced choice's answers: ``a`` or ``b``."""
CMOS_AXIS = Axis(-3.0, 3.0, "CMOS points", "CMOS")


@dataclass(frozen=True)
class AbVote:
    """An A/B answer, by the test's mode: ``cmos`` (how much better B is than A), or in the
    forced mode ``choice``; the other is not read."""

    cmos: Annotated[int, Interval(ge=CMOS_RANGE[0], le=CMOS_RANGE[1])] | None = None
    choice: Literal[CHOICES] | None = None  # type: ignore[valid-type]


SHARE_AXIS = Axis(0.0, 1.0, "share", "preference share")

VOTES = StoredTable(
    "ab_votes",
    1,
    (
        text("vote_id"),
        key("test_id"),
        key("rater_id"),
        key("item_key"),
        key("take_a"),
        key("take_b"),
        text("system_a"),
        text("system_b"),
        key("choice"),
        real("cmos"),
        real("played_a_ms"),
        real("played_b_ms"),
        text("created_at"),
        text("condition", since=2),
        text("assignment_id", since=2),
    ),
    primary_key=("vote_id",),
    indexes=(
        Index(
            "idx_ab_votes_test_id_rater_id_item_key",
            ("test_id", "rater_id", "item_key"),
            unique=True,
        ),
    ),
    order=("test_id", "created_at", "vote_id"),
    per_test=True,
    exported=True,
    reported=True,
    lookups=(
        Lookup(
            "takes",
            (("take_a", "take_id"),),
            (("prompt_id", "prompt_id"), ("duration_s", "duration_a_s")),
        ),
        Lookup("takes", (("take_b", "take_id"),), (("duration_s", "duration_b_s"),)),
    ),
)
"""One row per rated pair (check pairs are scored by screening and kept in ``answers`` only):
the A/B kind's table; its frame carries the prompt and both clips' durations."""

COLUMNS = {
    "raw/ab_votes.csv": {
        "vote_id": "the vote (the answer's id)",
        "item_key": "the two takes, sorted and joined with |",
        "take_a": "side A's take (played first)",
        "take_b": "side B's take",
        "system_a": "side A's system",
        "system_b": "side B's system",
        "played_a_ms": "playback of A accepted",
        "played_b_ms": "playback of B accepted",
    },
    "results/ab.csv": {
        "n": "votes",
        "x_wins": "votes for x",
        "y_wins": "votes for y",
        "ties": "tied votes",
        "x_share": "share of decisive votes won by x",
        "x_share_low": "its 95% interval, lower bound",
        "x_share_high": "upper bound",
        "p_sign": "sign test on decisive votes, votes taken as independent",
        "cmos_n": "votes in the CMOS mean",
        "cmos_y": "mean CMOS: how much better y is than x (ties count 0)",
        "cmos_low": "its 95% interval, lower bound",
        "cmos_high": "upper bound",
    },
    "results/ab_pairwise.csv": {
        "raters_x": "raters whose decisive votes mostly went to x",
        "raters_y": "to y",
        "rater_share_x": "raters_x / (raters_x + raters_y)",
    },
    "results/order_bias.csv": {
        "decisive": "decisive votes",
        "first_share": "share won by the clip played first",
    },
}
"""The A/B files of the export."""


def check_failed(expected: float, choice: str | None) -> bool:
    """A check pair passes only if the clean side was preferred (a tie fails: the anchor is
    low-passed, clicked and cut, which no attentive listener on headphones finds equal)."""
    return choice != ("b" if expected > 0 else "a")


def score_checks(checks: pd.DataFrame) -> pd.DataFrame:
    """Per rater (index ``rater_id``): ``ab_checks`` answered and ``ab_check_failed`` (see
    :func:`check_failed`), from the answered check pairs (``expected``, ``choice``)."""
    import pandas as pd

    if checks is None or checks.empty:
        return pd.DataFrame(columns=["ab_checks", "ab_check_failed"]).rename_axis("rater_id")
    pairs = zip(checks["expected"], checks["choice"], strict=True)
    failed = [check_failed(float(e), c) for e, c in pairs]
    d = checks.assign(_failed=failed).groupby("rater_id")["_failed"]
    return pd.DataFrame({"ab_checks": d.size(), "ab_check_failed": d.sum().astype(int)})


def checks(system: str) -> list[PlannedItem]:
    """A/B screening pairs: the low anchor against the clean take it was made from (``system``
    on the first prompt), once with the clean side as A and once as B, so a rater who always
    picks one side fails one of them. ``expected`` is the clean side's sign on the CMOS scale
    (-1: A, +1: B)."""
    clean, anchor = Slot(system, "gold"), Slot(ANCHOR, "anchor")
    return [
        PlannedItem(0, None, (clean, anchor), "gold", -1.0, "ab_check", {"clean": "a"}),
        PlannedItem(0, None, (anchor, clean), "gold", 1.0, "ab_check", {"clean": "b"}),
    ]


class Ab(TestKind):
    name = "ab"
    title = "A/B"
    folder = Path(__file__).parent
    modes = MODES
    min_systems = 2
    show_text = True
    paired = True
    instructions = "Listen to both A and B (at least 3 s of each), then compare them."
    main_table = "ab"
    pairwise_table = "ab_pairwise"
    columns = COLUMNS
    votes: StoredTable = VOTES
    """The table this kind's votes go to (a kind built on this one keeps its own)."""
    tables = (VOTES,)
    vote = AbVote
    rater_columns = {"ab_check_failed": "A/B check pairs failed"}
    rating_columns = {
        "system_a": "A/B: side A's system",
        "system_b": "A/B: side B's system",
        "choice": "A/B: a, b or tie (as presented: a was played first / shown left)",
        "cmos": "A/B CMOS answer -3..+3: how much better B is than A, as presented",
    }
    shared_columns = {
        "choice": "A/B: a, b or tie (as presented: a was played first / shown left)",
        "cmos": "A/B CMOS answer -3..+3: how much better B is than A, as presented",
    }

    def scale(self, mode: str) -> dict[str, Any]:
        if mode == FORCED:
            return {"question": FORCED_QUESTION, "labels": FORCED_LABELS}
        return {"question": CMOS_QUESTION, "labels": CMOS_LABELS}

    def plan_model(self, d: Design, spread: Spread) -> PlanModel:
        """One pair's mean CMOS (each answer a difference of two ratings, rounded), or in the
        forced mode its preference share: the sign of that difference, so near a share of 0.5
        a rater's or a prompt's shift of one point moves the share by phi(0) / sd of the
        difference (the delta method), and each vote adds a Bernoulli variance of 0.25."""
        per_item = 1 / len(pairs(d.systems))
        noise_var = 2 * spread.noise_sd**2
        if d.ab_mode == FORCED:
            g = 1 / math.sqrt(2 * math.pi * noise_var)
            return PlanModel(
                axis=SHARE_AXIS,
                centre=0.5,
                rater_var=(g * spread.rater_sd) ** 2,
                prompt_var=(g * spread.prompt_sd) ** 2,
                noise_var=0.25,
                per_item=per_item,
                difference=g * spread.difference,
                cell="pair",
                paired=True,
            )
        return PlanModel(
            axis=CMOS_AXIS,
            centre=0.0,
            rater_var=spread.rater_sd**2,
            prompt_var=spread.prompt_sd**2,
            noise_var=noise_var + ROUNDING_VAR,
            per_item=per_item,
            difference=spread.difference,
            cell="pair",
            paired=True,
        )

    def units(self, d: Design) -> int:
        return len(pairs(d.systems))

    def plan_items(
        self, d: Design, prompts: list[str], unit: Callable[[int, int], int], rng: random.Random
    ) -> list[PlannedItem]:
        """Every pair in turn, half of the items with the sides swapped (shuffled)."""
        ps = pairs(d.systems)
        n = len(prompts)
        swaps = [k % 2 == 1 for k in range(n)]
        rng.shuffle(swaps)
        out = []
        for k in range(n):
            a, b = ps[unit(k, len(ps))]
            if swaps[k]:
                a, b = b, a
            out.append(PlannedItem(0, prompts[k], (Slot(a), Slot(b)), meta={"swapped": swaps[k]}))
        return out

    def checks(self, d: Design) -> list[PlannedItem]:
        return checks(d.systems[0]) if d.screening else []

    def extra_stimuli(self, d: Design) -> frozenset[str]:
        return frozenset({"degraded_anchor", "check_clean"}) if d.screening else frozenset()

    def labels(self, n: int) -> list[str]:
        return ["A", "B"]

    def need_ms(self, duration_ms: float) -> float:
        return min(AB_MIN_MS, PLAYED_SHARE * duration_ms)

    def slot_label(self, i: int, n: int) -> str:
        return "the clip" if n == 1 else SIDES[i]

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        """One pair (the pairs in turn per rater)."""
        ps = pairs(d.systems)
        a, b = ps[f.seq % len(ps)]
        p0 = d.prompts[0]
        return [("Example A", f.take("item", a, p0)), ("Example B", f.take("item", b, p0))]

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        if ctx.mode == FORCED:
            choice = body.get("choice")
            if choice not in CHOICES:
                raise InvalidRequest("choice must be 'a' or 'b'")
            cmos = None
        else:
            lo, hi = CMOS_RANGE
            cmos = require_int(body.get("cmos"), lo, hi, "cmos must be an integer -3..+3 (B vs A)")
            choice = "b" if cmos > 0 else "a" if cmos < 0 else "tie"
        payload = {"choice": choice, "cmos": cmos}
        if ctx.role != "item":  # a check pair: scored by screening, never an A/B vote
            return Vote(payload)
        takes, systems = ctx.takes, ctx.systems or (None, None)
        row = {
            "vote_id": ctx.answer_id,
            "test_id": ctx.test_id,
            "rater_id": ctx.rater_id,
            "item_key": "|".join(sorted(takes[:2])),
            "take_a": takes[0],
            "take_b": takes[1],
            "system_a": systems[0],
            "system_b": systems[1],
            "choice": choice,
            "cmos": None if cmos is None else float(cmos),
            "played_a_ms": ctx.played.get(0),
            "played_b_ms": ctx.played.get(1),
            "created_at": ctx.created_at,
            "condition": ctx.condition,
            "assignment_id": ctx.assignment_id,
        }
        return Vote(payload, [(self.votes.name, row)])

    def screening_text(self, scr: TestScreening) -> str | None:
        return (
            f"A/B check pairs (the degraded anchor against its clean source): more than "
            f"{scr.max_ab_check_failures} not won by the clean side"
        )

    def check_pairs(self, data: TestData) -> pd.DataFrame:
        """The answered check pairs of the test: rater, which side was clean (``expected``:
        -1 A, +1 B) and the answer's ``choice`` and ``cmos``."""
        import json

        import pandas as pd

        c = data.checks
        if c is None or c.empty:
            return pd.DataFrame(columns=["rater_id", "assignment_id", "expected", "choice", "cmos"])
        c = c[(c["kind"] == self.name) & (c["role"] == "gold")]
        payload = c["payload"].map(json.loads)
        return c[["rater_id", "assignment_id", "expected"]].assign(
            choice=payload.map(lambda p: p.get("choice")),
            cmos=payload.map(lambda p: p.get("cmos")),
        )

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        """More than ``max_ab_check_failures`` check pairs not won by the clean side."""
        pairs = self.check_pairs(data)
        if pairs.empty:
            return None
        got = score_checks(pairs)
        over = got["ab_check_failed"] > scr.max_ab_check_failures
        got["reasons"] = [
            f"A/B check failed x{int(f)} of {int(n)} (did not prefer the clean clip over the "
            "degraded anchor)"
            if o
            else ""
            for f, n, o in zip(got["ab_check_failed"], got["ab_checks"], over, strict=True)
        ]
        return got[["ab_check_failed", "reasons"]]

    def screening_rules(self, scr: TestScreening) -> dict[str, Any]:
        return {"check_pairs_failed_max": scr.max_ab_check_failures}

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        """One row per vote, its ``system_id`` the system it went to (``tie`` otherwise)."""
        ab = data.table(self.votes.name)
        if ab.empty:
            return None
        won = ab["choice"].map({"a": 0, "b": 1})
        sid = ab["system_a"].where(won == 0, ab["system_b"]).where(won.notna(), "tie")
        return ab.assign(slot=0, role="item", system_id=sid)

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Per pair: preference share and CMOS, the sign tests and the first-position bias."""
        import pandas as pd

        from evaluation import inference, stats

        votes = data.table(self.votes.name)
        if votes.empty:
            return []
        kept = ctx.keep(votes)
        who = ctx.who
        return [
            (
                "ab",
                stats.ab_table(kept),
                f"A/B per pair: preference share of x among decisive votes, CMOS = how much "
                f"better y is, presentation order undone ({who})",
                f"share of x among decisive votes (ties left out) and CMOS (ties count 0): "
                f"{ctx.interval}; the share's interval is built on the logit scale "
                f"({inference.SHARE_METHOD}); p_sign: exact two-sided sign test on decisive votes, taken "
                "as independent",
                f"{inference.INTERVAL_ASSUMES}; p_sign alone assumes independent votes",
            ),
            (
                "ab_pairwise",
                inference.sign_tests(stats.oriented_votes(kept)),
                f"A/B: is one side preferred? ({who})",
                inference.SIGN_METHOD,
                inference.SIGN_ASSUMES,
            ),
            (
                "order_bias",
                pd.DataFrame([stats.order_bias(kept)]),
                f"Share of decisive votes won by the clip played first ({who})",
                "exact two-sided binomial test against 0.5",
                "votes are independent (they are not: read it as a description)",
            ),
        ]

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        t = tables.get("ab")
        if not not_empty(t):
            return None
        ab = t.assign(pair=lambda d: d["y"] + " vs " + d["x"])
        return (
            ab.rename(columns={"cmos_low": "ci_low", "cmos_high": "ci_high"}),
            "pair",
            "cmos_y",
            CMOS_AXIS,
        )

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        """Per pair: the share and the CMOS with their intervals, then the raters' sign tests."""
        from evaluation.listening.summary import fmt, has, pair_lines, section

        if not has(tables, "ab"):
            return []
        rows = [
            f"- {x['x']} vs {x['y']}: n={int(x['n'])}, {x['x']} preferred "
            f"{fmt(x['x_share'])} [{fmt(x['x_share_low'])}, {fmt(x['x_share_high'])}], "
            f"CMOS {x['y']} vs {x['x']}: {fmt(x['cmos_y'])} "
            f"[{fmt(x['cmos_low'])}, {fmt(x['cmos_high'])}]"
            + (f" ({x['note']})" if x.get("note") else "")
            for _, x in tables["ab"].iterrows()
        ]
        if has(tables, "ab_pairwise"):
            rows += pair_lines(tables["ab_pairwise"], "A/B")
        return [section(titles.get("ab", "A/B"), rows)]

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        from evaluation.listening.summary import has, holm_lines

        return (
            holm_lines(tables["ab_pairwise"], "ab_pairwise") if has(tables, "ab_pairwise") else []
        )

    def report(self, view: StoreView) -> list[ReportSection]:
        """Per pair (per test, or pooled): the preference share and CMOS, the first-position
        bias, the preference matrix (pooled or one test) and the Bradley–Terry board."""
        import pandas as pd

        from evaluation import plots, stats

        o = view.options
        ab = view.keep(view.table(self.votes.name))
        tests = ab["test_id"].nunique() if "test_id" in ab and not ab.empty else 0
        matrix = stats.preference_matrix(ab) if view.pool or tests <= 1 else pd.DataFrame()
        board = view.per_test(
            ab,
            lambda v: stats.bt_leaderboard(v, min_votes=o.min_votes, n_boot=o.n_boot, seed=o.seed),
        )
        return [
            ReportSection(
                f"A/B preference, {view.per} (x vs y; share of decisive votes for x and CMOS = "
                "how much better y is, presentation order corrected, with two-way "
                "cluster-robust intervals; vote-level sign test)",
                (
                    ReportTable(self.main_table, view.per_test(ab, stats.ab_table), poolable=True),
                    ReportTable(
                        "preference_matrix", matrix, "Preference matrix", poolable=True, index=True
                    ),
                    ReportTable(
                        "order_bias",
                        view.per_test(ab, lambda v: pd.DataFrame([stats.order_bias(v)])),
                        "First-position bias",
                        poolable=True,
                    ),
                ),
                ((self.main_table, lambda: plots.matrix_figure(matrix)),)
                if not matrix.empty
                else (),
            ),
            ReportSection(
                f"Bradley–Terry leaderboard, {view.per} (sorted by the lower bound; 95% "
                "bootstrap over raters)",
                (ReportTable("leaderboard", board, poolable=True),),
                (("leaderboard", lambda: plots.leaderboard_figure(board)),)
                if not board.empty
                else (),
            ),
        ]


KIND = Ab()

__all__ = [
    "CHOICES",
    "CMOS",
    "CMOS_LABELS",
    "CMOS_RANGE",
    "AbVote",
    "COLUMNS",
    "FORCED",
    "FORCED_LABELS",
    "KIND",
    "MODES",
    "VOTES",
    "Ab",
    "check_failed",
    "checks",
    "score_checks",
]
