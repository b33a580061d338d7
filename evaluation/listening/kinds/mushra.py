"""MUSHRA (ITU-R BS.1534-3): one screen per prompt with every system, the hidden reference and
two anchors (the reference low-passed at 3.5 and 7 kHz), each scored 0..100.

Why here: the screen's shuffled stimuli, the open reference, the numbered sliders, the whole
delivery the page switches between, the post-screening and the per-condition tables are one
kind's business."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backends.errors import InvalidRequest
from evaluation.listening.kinds.base import (
    AB_MIN_MS,
    ANCHOR,
    ANCHOR_LOW,
    MUSHRA_ANCHORS,
    PLAYED_SHARE,
    Familiar,
    PlannedItem,
    ResultContext,
    Slot,
    Table,
    TestKind,
    Vote,
    VoteContext,
    not_empty,
)

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.design import Design
    from evaluation.listening.screening import TestScreening

MUSHRA_MAX_SIGNALS = 12
"""ITU-R BS.1534-3 (p.8): at most 12 signals on one screen, the hidden reference and the
anchors included."""


class Mushra(TestKind):
    name = "mushra"
    title = "MUSHRA"
    min_systems = 2
    max_systems = MUSHRA_MAX_SIGNALS - len(MUSHRA_ANCHORS)
    """10: with the hidden reference (one of the systems) and the two anchors, a screen holds
    at most BS.1534-3's 12 signals."""
    needs_reference = True
    partial_cycles = False
    whole_delivery = True

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
            if not isinstance(sc, int | float) or isinstance(sc, bool) or not 0 <= sc <= 100:
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
            rows.append(("mushra_ratings", row))
        return Vote({"scores": scores}, rows)

    def screening_text(self, scr: TestScreening) -> str | None:
        m = scr.mushra
        return (
            f"BS.1534-3 post-screening: hidden reference < {m.reference_min:g} or the mid "
            f"anchor > {m.anchor_max:g} on more than {m.max_share:.0%} of screens"
        )

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Per condition (median and clustered mean), every pair of systems, the screening."""
        from evaluation import inference, stats
        from evaluation.listening.screening import screening_description

        if data.mushra.empty:
            return []
        kept = ctx.keep(data.mushra)
        who = ctx.who
        return [
            (
                "mushra",
                stats.mushra_table(kept),
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
                stats.mushra_screening(data.mushra, ctx.screening.mushra),
                "BS.1534-3 post-screening per rater",
                screening_description(ctx.screening, self, ctx.mode),
                "",
            ),
        ]

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, str] | None:
        t = tables.get("mushra")
        return (t, "condition", "mean", "mushra") if not_empty(t) else None


KIND = Mushra()

__all__ = ["KIND", "MUSHRA_MAX_SIGNALS", "Mushra"]
