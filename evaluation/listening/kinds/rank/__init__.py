"""Ranking: one screen per prompt with every system's take (no reference, no anchor), which the
rater puts in order from best (1) to worst (N), no ties.

Why a kind of its own: webMUSHRA's most requested page (preference "without a reference",
N systems on one screen) answers "which is best?" when a reference is missing or is not the
best (a clone, a style) and an absolute scale is not what raters can agree on. Its answer is a
permutation, so its results are mean ranks (with the two-way interval every kind uses), the
Friedman test and pairwise rank differences, and its careless rater is one who ranks by the
position on the screen rather than by the sound. The screens (``plan_items``), the
check screen (the degraded anchor among the systems: ranked last by anyone listening), the
rows (``rank_ratings``: one per clip of a rated screen), the statistics, the screening, the
texts and the export's columns are this folder's; ``page.js`` draws the ranking.

Why no ties: a forced order is what a Friedman test and implied pairwise wins read without a
tie rule, and a rater cannot give every clip "the same" to be done quickly. When systems
really are alike, raters' orders are as good as random and the mean ranks come out equal
(the simulation in ``benchmarks/listening_validity.py`` checks the tests' false alarms then).
"""

from __future__ import annotations

import itertools
import math
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
from evaluation.tablespec import Index, integer, key, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening

MAX_SYSTEMS = 8
"""The most clips one screen holds: a rater compares every clip with every other, and beyond
eight that is more than one can keep in mind (split the systems into two tests)."""
LABELS = "ABCDEFGHI"
"""Slot letters (the check screen has one clip more than the systems)."""
QUESTION = "Put the clips in order of quality: 1 is the best, the last number the worst."
INSTRUCTIONS = (
    "Play every clip (at least 3 s of each), then give each a different place, 1 for the best "
    "and the highest number for the worst: pick the place beside each clip, or move it up and "
    "down. Two clips cannot share a place; picking a place another clip holds swaps the two."
)
ENDS = {"best": "1 = best", "worst": "{n} = worst"}

RATINGS = StoredTable(
    "rank_ratings",
    9,
    (
        text("rating_id"),
        key("test_id"),
        key("rater_id"),
        key("assignment_id"),
        integer("slot", not_null=True),
        key("take_id"),
        text("system_id"),
        text("prompt_id"),
        integer("rank", not_null=True),
        integer("clips", not_null=True),
        text("created_at"),
    ),
    primary_key=("rating_id",),
    indexes=(
        Index("idx_rank_item", ("test_id", "rater_id", "assignment_id", "slot"), unique=True),
    ),
    order=("test_id", "rater_id", "assignment_id", "slot"),
    per_test=True,
    exported=True,
    reported=True,
)
"""One row per clip of a rated screen (check screens are scored by screening and kept in
``answers`` only): the ranking kind's table (schema version 9)."""


@dataclass(frozen=True)
class RankRules:
    """Who the ranking kind's screening excludes (the numbers the docs state)."""

    position_p: float = 0.001
    """Exclude a rater whose screens share one order of screen positions more often than a
    rater ranking by sound would, at this p (the clips are shuffled on every screen)."""
    min_screens: int = 3
    """Fewer screens than this are not judged by the position rule."""
    max_check_failures: int = 1
    """Check screens (the degraded anchor among the systems) not ranked last that a rater may
    have: one of the two (an honest rater with a taste for the anchor's voice over a poor
    system slips now and then; a rater who does not listen fails both)."""


RULES = RankRules()
CHECK_SCREENS = 2
"""Check screens per rater when the test screens (each with the anchor in another place)."""

COLUMNS = {
    "raw/rank_ratings.csv": {
        "rating_id": "the rating (answer id and slot)",
        "rank": "the place the rater gave the clip: 1 best .. clips worst",
        "clips": "clips on the screen (the systems)",
    },
    "results/rank.csv": {
        "screens": "screens that held the system (rated by screened raters)",
        "mean_rank": "mean rank (1 = best)",
        "ci_low": "95% two-way cluster-robust interval of the mean rank (raters and prompts), "
        "lower bound",
        "ci_high": "upper bound",
        "first_share": "share of screens where the system was ranked first",
        "last_share": "share of screens where it was ranked last",
    },
    "results/rank_pairwise.csv": {
        "screens": "screens with both systems",
        "rank_diff_y_minus_x": "mean over screens of rank(y) - rank(x): negative, y ranked better",
        "x_above_share": "share of screens where x was ranked above y (the implied pairwise win)",
        "test": "cluster t (two-way cluster-robust t test of the difference) or sign (exact "
        "sign test over raters, when every screen gives the same difference)",
    },
    "results/rank_board.csv": {
        "system": "the system",
        "rating": "Bradley-Terry rating of the implied pairwise wins (1500 + 400 log10 strength)",
        "ci_low": "95% bootstrap interval over raters, lower bound",
        "ci_high": "upper bound",
        "votes": "implied pairs with the system (each screen gives every pair of its clips)",
        "wins": "pairs won (ranked above the other)",
        "losses": "pairs lost",
        "ties": "tied pairs (none: a ranking has no ties)",
        "listed": "on the board (every system: no minimum)",
        "better_systems": "systems significantly stronger (Holm, 5%)",
        "rank": "1 + better_systems",
    },
    "results/rank_friedman.csv": {
        "blocks": "screens (each screen a block) or raters (each rater's mean ranks a block)",
        "n_blocks": "blocks in the test",
        "systems": "systems ranked",
        "chi2": "Friedman's statistic (corrected for ties among a rater's mean ranks)",
        "df": "systems - 1",
        "kendall_w": "Kendall's W = chi2 / (blocks (systems - 1)): 0 no agreement, 1 full",
    },
    "results/rank_screening.csv": {
        "screens": "ranking screens rated",
        "same_order": "share of screens in the rater's most common order of screen positions",
        "position_p": "chance of that many screens in one position order for a rater who "
        "ranks by sound (exact binomial, times the number of orders)",
        "checks": "check screens rated",
        "check_failed": "check screens where the degraded anchor was not ranked last",
        "excluded": "the ranking rules exclude the rater",
        "reasons": "why",
    },
}
"""The ranking files of the export."""


@dataclass(frozen=True)
class RankVote:
    """A ranking: the place of each clip, in the order of the clips (1 = best; a
    permutation of 1..N for the item's N clips: checked against the item, not declared)."""

    ranks: list[Annotated[int, Interval(ge=1)]]


def read_ranks(v: Any, n: int) -> list[int]:
    """The page's ``ranks`` (the place of each slot) as a permutation of ``1..n``."""
    ok = isinstance(v, list) and len(v) == n
    ok = ok and all(isinstance(r, int) and not isinstance(r, bool) for r in v)
    if not ok or sorted(v) != list(range(1, n + 1)):
        raise InvalidRequest(
            f"ranks must give each of the {n} clips a different place 1..{n} (1 = best), "
            "in the order of the clips"
        )
    return list(v)


# --------------------------------------------------------------------------- statistics


def rank_scale(n: int):
    from evaluation.inference import Scale

    return Scale(1.0, float(max(n, 2)), f"rank (1-{n})")


def rank_table(kept: pd.DataFrame) -> pd.DataFrame:
    """Per system: screens, raters, prompts, mean rank with its two-way interval (on the
    logit of its place in 1..N), the shares ranked first and last. Best (lowest) first."""
    import pandas as pd

    from evaluation import inference

    cols = ["system_id", "screens", "raters", "prompts", "mean_rank", "ci_low", "ci_high"]
    cols += ["first_share", "last_share", "se", "df", "note"]
    if kept.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for sid, g in kept.groupby("system_id", sort=True):
        n = int(g["clips"].max())
        iv = inference.clustered_mean(g, "rank", scale=rank_scale(n))
        first, last = float((g["rank"] == 1).mean()), float((g["rank"] == g["clips"]).mean())
        rows.append([sid, iv.n, iv.raters, iv.prompts, iv.mean, iv.low, iv.high, first, last])
        rows[-1] += [iv.se, iv.df, iv.note]
    return pd.DataFrame(rows, columns=cols).sort_values("mean_rank", ignore_index=True)


def screens_wide(kept: pd.DataFrame) -> pd.DataFrame:
    """One row per rated screen (``assignment_id``, ``rater_id``, ``prompt_id``), one column
    of ranks per system."""
    idx = ["assignment_id", "rater_id", "prompt_id", "system_id"]
    wide = kept.assign(prompt_id=kept["prompt_id"].fillna("")).set_index(idx)["rank"]
    return wide[~wide.index.duplicated()].unstack("system_id").reset_index()


def pair_test(d: pd.DataFrame) -> tuple[Any, float, str]:
    """``(interval of the mean of d["d"], p, test)``: the two-way cluster-robust t test; when
    the difference never varies (two systems, one always above), the exact sign test over
    raters' mean differences instead."""
    import numpy as np
    from scipy import stats

    from evaluation import inference

    iv = inference.clustered_mean(d, "d")
    if np.isfinite(iv.se) and iv.se > 0:
        return iv, float(2 * stats.t.sf(abs(iv.mean / iv.se), iv.df)), "cluster t"
    per = d.groupby("rater_id")["d"].mean()
    k, m = int((per > 0).sum()), int((per != 0).sum())
    return iv, float(stats.binomtest(k, m).pvalue) if m else float("nan"), "sign"


def rank_pairwise(kept: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Every pair x < y: the mean per-screen difference rank(y) - rank(x) with its two-way
    interval, the share of screens x was above y, p (:func:`pair_test`), Holm over pairs."""
    import numpy as np
    import pandas as pd

    from evaluation import inference

    cols = ["x", "y", "screens", "raters", "rank_diff_y_minus_x", "ci_low", "ci_high"]
    cols += ["x_above_share", "test", "p", "p_holm", "significant"]
    if kept.empty:
        return pd.DataFrame(columns=cols)
    wide = screens_wide(kept)
    systems = sorted(c for c in wide.columns if c not in ("assignment_id", "rater_id", "prompt_id"))
    rows = []
    for x, y in itertools.combinations(systems, 2):
        both = wide[wide[x].notna() & wide[y].notna()]
        d = both[["rater_id", "prompt_id"]].assign(d=both[y] - both[x])
        if d.empty:
            continue
        iv, p, test = pair_test(d)
        above = float((d["d"] > 0).mean())
        rows.append([x, y, len(d), iv.raters, iv.mean, iv.low, iv.high, above, test, p])
    out = pd.DataFrame(rows, columns=cols[:10])
    out["p_holm"] = inference.holm(out["p"].to_numpy(dtype=float))
    out["significant"] = np.nan_to_num(out["p_holm"], nan=1.0) < alpha
    return out


def friedman(blocks: np.ndarray) -> tuple[float, float, float]:
    """Friedman's chi-square over rows (blocks) of ``blocks`` (values ranked within a row,
    ties as mid-ranks with the tie correction), its p and Kendall's W. Two systems included
    (SciPy's ``friedmanchisquare`` wants three)."""
    import numpy as np
    from scipy import stats

    n, k = blocks.shape
    if n < 2 or k < 2:
        return float("nan"), float("nan"), float("nan")
    r = stats.rankdata(blocks, axis=1)
    ties = sum(
        float((c**3 - c).sum()) for c in (np.unique(row, return_counts=True)[1] for row in r)
    )
    corr = 1.0 - ties / (n * k * (k * k - 1))
    if corr <= 0:
        return 0.0, 1.0, 0.0
    q = (12.0 / (n * k * (k + 1)) * float((r.sum(axis=0) ** 2).sum()) - 3.0 * n * (k + 1)) / corr
    return q, float(stats.chi2.sf(q, k - 1)), q / (n * (k - 1))


def friedman_table(kept: pd.DataFrame) -> pd.DataFrame:
    """Friedman's test over screens (every screen a block: what papers report) and over raters
    (each rater's mean rank per system a block: a rater's screens are not independent)."""
    import pandas as pd

    cols = ["blocks", "n_blocks", "systems", "chi2", "df", "p", "kendall_w"]
    if kept.empty:
        return pd.DataFrame(columns=cols)
    wide = screens_wide(kept)
    systems = sorted(c for c in wide.columns if c not in ("assignment_id", "rater_id", "prompt_id"))
    full = wide.dropna(subset=systems)
    per_rater = full.groupby("rater_id")[systems].mean()
    rows = []
    for name, m in (("screens", full[systems]), ("raters", per_rater)):
        q, p, w = friedman(m.to_numpy(dtype=float))
        rows.append([name, len(m), len(systems), q, len(systems) - 1, p, w])
    return pd.DataFrame(rows, columns=cols)


def implied_wins(kept: pd.DataFrame) -> pd.DataFrame:
    """Each screen's N(N-1)/2 pairs as A/B votes (``system_a`` < ``system_b``, ``choice`` the
    one ranked above, ``rater_id``): what a Bradley-Terry board reads."""
    import numpy as np
    import pandas as pd

    on = ["assignment_id", "rater_id"]
    m = kept[[*on, "system_id", "rank"]].merge(kept[[*on, "system_id", "rank"]], on=on)
    m = m[m["system_id_x"] < m["system_id_y"]]
    return pd.DataFrame(
        {
            "system_a": m["system_id_x"].to_numpy(),
            "system_b": m["system_id_y"].to_numpy(),
            "choice": np.where(m["rank_x"] < m["rank_y"], "a", "b"),
            "rater_id": m["rater_id"].to_numpy(),
        }
    )


def rank_board(kept: pd.DataFrame) -> pd.DataFrame:
    """The Bradley-Terry board of the implied pairwise wins (:func:`implied_wins`), as the
    report's and the arena's (:func:`evaluation.stats.bt_leaderboard`: bootstrap over raters,
    a rater's pairs drawn together)."""
    from evaluation import stats

    return stats.bt_leaderboard(implied_wins(kept))


def position_orders(kept: pd.DataFrame) -> pd.DataFrame:
    """Per rater: item screens, the share in their most common order of screen positions
    (ranks read by slot), and how unlikely that is for a rater ranking by sound (the clips
    are shuffled per screen, so each order of positions has chance 1/N!)."""
    import numpy as np
    import pandas as pd
    from scipy import stats

    base = kept["clips"].astype("int64") + 1
    code = kept["rank"].astype("int64") * base ** kept["slot"].astype("int64")
    screens = kept.assign(code=code).groupby(["rater_id", "assignment_id"], sort=True)
    per = screens.agg(code=("code", "sum"), clips=("clips", "max")).reset_index()
    same = per.groupby(["rater_id", "code"]).size().groupby("rater_id").max()
    k = per.groupby("rater_id").size()
    n_orders = per.groupby("rater_id")["clips"].max().map(lambda n: math.factorial(int(n)))
    p = np.minimum(1.0, n_orders * stats.binom.sf(same - 1, k, 1.0 / n_orders))
    out = pd.DataFrame({"screens": k, "same_order": same / k, "position_p": p})
    return out.rename_axis("rater_id")


def check_screens(data: TestData) -> pd.DataFrame:
    """The answered check screens: rater, clips, the degraded anchor's place."""
    import json

    import pandas as pd

    c = data.checks
    if c is None or c.empty:
        return pd.DataFrame(columns=["rater_id", "clips", "anchor_rank"])
    c = c[(c["kind"] == KIND.name) & (c["role"] == "gold")]
    payload = c["payload"].map(json.loads)
    return pd.DataFrame(
        {
            "rater_id": c["rater_id"],
            "clips": payload.map(lambda p: p.get("clips")),
            "anchor_rank": payload.map(lambda p: p.get("anchor_rank")),
        }
    )


def rank_screening(data: TestData, rules: RankRules = RULES) -> pd.DataFrame:
    """Per rater (index ``rater_id``): the position rule and the check screens (see
    :class:`RankRules`), ``excluded`` and ``reasons``."""
    import pandas as pd

    cols = ["screens", "same_order", "position_p", "checks", "check_failed"]
    pos = position_orders(data.table(RATINGS.name)) if not data.table(RATINGS.name).empty else None
    chk = check_screens(data)
    failed = chk.assign(f=chk["anchor_rank"] != chk["clips"]).groupby("rater_id")["f"]
    got = pd.DataFrame({"checks": failed.size(), "check_failed": failed.sum()})
    out = got if pos is None else pos.join(got, how="outer")
    out = out.reindex(columns=cols).rename_axis("rater_id")
    out["checks"] = out["checks"].fillna(0).astype(int)
    out["check_failed"] = out["check_failed"].fillna(0).astype(int)
    reasons = []
    for _, r in out.iterrows():
        why = []
        judged = r["screens"] == r["screens"] and r["screens"] >= rules.min_screens
        if judged and r["position_p"] < rules.position_p:
            why.append(
                f"ranked by position: {r['same_order']:.0%} of {int(r['screens'])} screens "
                f"in one order of the screen's positions (p = {r['position_p']:.2g})"
            )
        if r["checks"] and r["check_failed"] > min(rules.max_check_failures, r["checks"] - 1):
            why.append(
                f"ranking check failed x{int(r['check_failed'])} of {int(r['checks'])} (the "
                "degraded anchor not ranked last)"
            )
        reasons.append("; ".join(why))
    out["reasons"] = reasons
    out["excluded"] = out["reasons"] != ""
    return out


# --------------------------------------------------------------------------- the kind


class Rank(TestKind):
    name = "rank"
    title = "Ranking"
    min_systems = 2
    max_systems = MAX_SYSTEMS
    folder = Path(__file__).parent
    partial_cycles = False
    instructions = INSTRUCTIONS
    main_table = "rank"
    pairwise_table = "rank_pairwise"
    columns = COLUMNS
    tables = (RATINGS,)
    vote = RankVote
    rater_columns = {
        "rank_same_order": "share of ranking screens in one order of screen positions",
        "rank_check_failed": "ranking check screens with the degraded anchor not ranked last",
    }
    rating_columns = {"rank": "the answer: ranking's place 1 (best) .. clips"}

    def scale(self, mode: str) -> dict[str, Any]:
        return {"question": QUESTION, "ends": ENDS}

    def too_many_systems(self, d: Design) -> str:
        return (
            f"{len(d.systems)} systems; a ranking screen holds at most {MAX_SYSTEMS} clips "
            "(a rater compares each with every other): split the systems into two tests"
        )

    def plan_model(self, d: Design, spread: Spread) -> PlanModel:
        """Ranks of N clips from the planner's MOS model: a rank's variance is a shuffled
        order's, ``(N^2 - 1) / 12``, shared out as the MOS spread is; the planned difference
        is the expected ranks' of two systems that far apart with the others between them
        (each comparison's chance from the normal difference of two clips)."""
        from statistics import NormalDist

        n = len(d.systems)
        parts = (spread.rater_sd**2, spread.prompt_sd**2, spread.noise_sd**2)
        total = sum(parts) or 1.0
        var = (n * n - 1) / 12
        sd = math.sqrt(2 * total)
        phi = NormalDist().cdf
        diff = (2 * phi(spread.difference / sd) - 1) + (n - 2) * (
            2 * phi(spread.difference / (2 * sd)) - 1
        )
        return PlanModel(
            axis=Axis(1.0, float(max(n, 2)), "ranks", "mean rank (1 = best)"),
            centre=(1 + n) / 2,
            rater_var=var * parts[0] / total,
            prompt_var=var * parts[1] / total,
            noise_var=var * parts[2] / total,
            per_item=1.0,
            difference=diff,
        )

    def balanced_items(self, d: Design) -> int:
        return min(d.items_per_rater, len(d.prompts))

    def plan_items(
        self, d: Design, prompts: list[str], unit: Callable[[int, int], int], rng: random.Random
    ) -> list[PlannedItem]:
        """One screen per prompt with every system, shuffled per screen."""
        out = []
        for p in prompts:
            slots = [Slot(s) for s in d.systems]
            rng.shuffle(slots)
            out.append(PlannedItem(0, p, tuple(slots)))
        return out

    def checks(self, d: Design) -> list[PlannedItem]:
        """With screening: :data:`CHECK_SCREENS` check screens, every system and the degraded
        anchor, which an attentive rater ranks last (its places drawn from the design's
        seed, a different one on each)."""
        if not d.screening:
            return []
        rng = random.Random(f"{d.seed}:rank-check")
        n = len(d.systems) + 1
        out = []
        for at in rng.sample(range(n), min(CHECK_SCREENS, n)):
            slots = [Slot(s) for s in d.systems]
            rng.shuffle(slots)
            slots.insert(at, Slot(ANCHOR, "anchor"))
            out.append(PlannedItem(0, None, tuple(slots), "gold", float(n)))
        return out

    def extra_stimuli(self, d: Design) -> frozenset[str]:
        return frozenset({"degraded_anchor"}) if d.screening else frozenset()

    def labels(self, n: int) -> list[str]:
        return list(LABELS[:n])

    def need_ms(self, duration_ms: float) -> float:
        return min(AB_MIN_MS, PLAYED_SHARE * duration_ms)

    def slot_label(self, i: int, n: int) -> str:
        return LABELS[i]

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        """Two of the systems on the first prompt (in turn per rater): what a screen sounds
        like before the first one counts."""
        a, b = d.systems[f.seq % len(d.systems)], d.systems[(f.seq + 1) % len(d.systems)]
        p0 = d.prompts[0]
        return [("An example clip", f.take("item", a, p0)), ("Another", f.take("item", b, p0))]

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        n = len(ctx.takes)
        ranks = read_ranks(body.get("ranks"), n)
        roles = ctx.roles or ("item",) * n
        if ctx.role != "item":  # a check screen: scored by screening, never a ranking row
            anchor = roles.index("anchor") if "anchor" in roles else None
            place = None if anchor is None else ranks[anchor]
            return Vote({"ranks": ranks, "clips": n, "anchor_rank": place})
        systems = ctx.systems or (None,) * n
        rows = [
            (
                RATINGS.name,
                {
                    "rating_id": f"{ctx.answer_id}:{i}",
                    "test_id": ctx.test_id,
                    "rater_id": ctx.rater_id,
                    "assignment_id": ctx.assignment_id,
                    "slot": i,
                    "take_id": ctx.takes[i],
                    "system_id": systems[i],
                    "prompt_id": ctx.prompt_id,
                    "rank": r,
                    "clips": n,
                    "created_at": ctx.created_at,
                },
            )
            for i, r in enumerate(ranks)
        ]
        return Vote({"ranks": ranks}, rows)

    def screening_text(self, scr: TestScreening) -> str | None:
        r = RULES
        return (
            f"ranking: screens in one order of the screen's positions (p < {r.position_p:g} "
            f"for a rater ranking by sound, >= {r.min_screens} screens), or more than "
            f"{r.max_check_failures} check screens with the degraded anchor not ranked last"
        )

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        if data.table(RATINGS.name).empty and check_screens(data).empty:
            return None
        got = rank_screening(data)
        return got.rename(
            columns={"same_order": "rank_same_order", "check_failed": "rank_check_failed"}
        )[[*self.rater_columns, "reasons"]]

    def screening_rules(self, scr: TestScreening) -> dict[str, Any]:
        return {
            "position_order_p_below": RULES.position_p,
            "position_rule_min_screens": RULES.min_screens,
            "check_screens_failed_max": RULES.max_check_failures,
        }

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        """One row per clip of every rated screen (``rank`` its place)."""
        t = data.table(RATINGS.name)
        return None if t.empty else t.assign(role="item")

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Mean ranks, every pair, Friedman's test, the ranking screening."""
        from evaluation import inference

        ranks = data.table(RATINGS.name)
        if ranks.empty:
            return []
        kept = ctx.keep(ranks)
        who = ctx.who
        return [
            ("rank", rank_table(kept), f"Mean rank per system, 1 = best ({who})", RANK_METHOD,
             inference.INTERVAL_ASSUMES),
            ("rank_pairwise", rank_pairwise(kept), f"Ranking: every pair of systems ({who})",
             PAIRWISE_METHOD, PAIRWISE_ASSUMES),
            ("rank_friedman", friedman_table(kept), f"Ranking: Friedman's test ({who})",
             FRIEDMAN_METHOD, FRIEDMAN_ASSUMES),
            ("rank_board", rank_board(kept), f"Ranking: Bradley-Terry board of the implied "
             f"pairwise wins ({who})", BOARD_METHOD, BOARD_ASSUMES),
            ("rank_screening", rank_screening(data).reset_index(), "Ranking screening per rater",
             self.screening_text(ctx.screening) or "", ""),
        ]  # fmt: skip

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        t = tables.get("rank")
        if not not_empty(t):
            return None
        n = len(t)
        axis = Axis(1.0, float(max(n, 2)), "ranks", "mean rank (1 = best)")
        return t.rename(columns={"mean_rank": "mean"}), "system_id", "mean", axis

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        """Mean ranks with intervals, Friedman's test, then every pair."""
        from evaluation.inference import format_p
        from evaluation.listening.summary import ci_line, fmt, has, section

        blocks = []
        if has(tables, "rank"):
            t = tables["rank"].rename(columns={"screens": "n"})
            rows = [
                ci_line(f"rank {x['system_id']}", x, "mean_rank", "ci_low", "ci_high")
                for _, x in t.iterrows()
            ]
            blocks.append(section(f"{titles.get('rank', 'Ranking')} (mean [95% CI])", rows))
        if has(tables, "rank_friedman"):
            rows = [
                f"- over {x['blocks']} ({int(x['n_blocks'])}): chi2 = {fmt(x['chi2'])}, "
                f"df = {int(x['df'])}, p = {format_p(x['p'])}, W = {fmt(x['kendall_w'])}"
                for _, x in tables["rank_friedman"].iterrows()
            ]
            blocks.append(section(titles.get("rank_friedman", "Friedman"), rows))
        if has(tables, "rank_pairwise"):
            rows = [
                f"- {x['x']} vs {x['y']}: rank({x['y']}) - rank({x['x']}) = "
                f"{fmt(x['rank_diff_y_minus_x'])} [{fmt(x['ci_low'])}, {fmt(x['ci_high'])}], "
                f"{x['x']} above in {fmt(x['x_above_share'])} of screens; Holm p = "
                f"{format_p(x['p_holm'])} ({'' if x['significant'] else 'not '}significant)"
                for _, x in tables["rank_pairwise"].iterrows()
            ]
            blocks.append(section(titles.get("rank_pairwise", "pairs"), rows))
        return blocks

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        from evaluation.listening.summary import has, holm_lines, mean_lines

        out = []
        if has(tables, "rank"):
            t = tables["rank"].rename(columns={"mean_rank": "mean", "screens": "n"})
            out += mean_lines(t, "mean rank", "system_id")
        if has(tables, "rank_pairwise"):
            out += holm_lines(tables["rank_pairwise"], "rank_pairwise")
        return out


RANK_METHOD = (
    "mean rank (1 = best) over the screens that held the system; 95% two-way cluster-robust "
    "interval over raters and prompts (the interval every kind's mean has), on the logit of "
    "the mean's place in 1..N"
)
PAIRWISE_METHOD = (
    "per screen, rank(y) - rank(x); its mean with the two-way cluster-robust interval, and the "
    "two-way cluster-robust t test of it (two-sided; the exact sign test over raters' mean "
    "differences when the difference never varies); Holm-corrected over all pairs; "
    "x_above_share: the implied pairwise win"
)
PAIRWISE_ASSUMES = (
    "raters and prompts are independent draws from their populations; a rater's screens, or a "
    "prompt's, may be correlated in any way"
)
BOARD_METHOD = (
    "Bradley-Terry fit (evalica, two virtual games per system) of every screen's pairs, the one "
    "ranked above winning; 1500 + 400 log10 strength; 95% percentile intervals from 200 "
    "bootstrap resamples of raters (a rater's pairs together); rank = 1 + the systems "
    "significantly stronger (Holm, 5%)"
)
BOARD_ASSUMES = (
    "raters are independent; prompts are fixed; a screen's pairs are not independent votes "
    "(the bootstrap over raters allows for that); not checked by the validity benchmark: read "
    "the mean ranks' intervals and the pairs first"
)
FRIEDMAN_METHOD = (
    "Friedman's chi-square test of equal mean ranks (df systems - 1), once with every screen "
    "a block and once with each rater's mean ranks a block (mid-ranks, tie-corrected); "
    "Kendall's W"
)
FRIEDMAN_ASSUMES = (
    "over screens: screens are independent (they are not when raters differ in taste or "
    "prompts favour a system: read it as the number papers report); over raters: raters are "
    "independent and prompts are fixed"
)

KIND = Rank()

__all__ = [
    "COLUMNS",
    "KIND",
    "MAX_SYSTEMS",
    "RATINGS",
    "RULES",
    "Rank",
    "RankRules",
    "RankVote",
    "CHECK_SCREENS",
    "check_screens",
    "friedman",
    "friedman_table",
    "implied_wins",
    "position_orders",
    "rank_board",
    "rank_pairwise",
    "rank_screening",
    "rank_table",
    "read_ranks",
]
