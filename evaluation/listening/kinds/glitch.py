"""Glitch hunt: one clip, the rater marks ("G") where they hear a glitch while it plays; the
answer closes the item.

Why here: the marks are stored as they are made (the WebSocket's ``listen_glitch``), so the
vote only counts them; the results place each mark at the nearest chunk seam and set the
marks against the automatic findings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds.base import ResultContext, Table, TestKind, Vote, VoteContext

if TYPE_CHECKING:
    from evaluation.listening.data import TestData

SEAM_TOLERANCE_MS = 300.0
"""A mark is at a seam when it is this close to it."""


class Glitch(TestKind):
    name = "glitch"
    title = "Glitch hunt"
    counts_marks = True

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        return Vote({"marks": int(ctx.marks)})

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Marks per system and per seam, and the marks against the automatic findings."""
        import pandas as pd

        from evaluation import stats

        reports = data.glitches
        if reports.empty:
            return []
        reports = reports.copy()
        for c in ("distance_ms", "boundary_index", "position_ms"):
            reports[c] = pd.to_numeric(reports[c], errors="coerce")
        kept = ctx.keep(reports)
        out: list[Table] = [
            (
                "glitch_marks",
                stats.glitch_marks(kept, SEAM_TOLERANCE_MS),
                f"Glitch marks per system ({ctx.who})",
                f"counts; a mark is at a seam within {SEAM_TOLERANCE_MS:g} ms of it",
                "",
            )
        ]
        seams = stats.glitches_by_seam(kept, SEAM_TOLERANCE_MS)
        if not seams.empty:  # one numbering everywhere: seam k is the start of chunk k
            seams = seams.rename(columns=lambda k: int(k) + 1).rename_axis(columns="seam")
        if not seams.empty:
            out.append(
                (
                    "glitches_by_seam",
                    seams,
                    "Seam-near marks per system and seam (seam k: the start of chunk k, "
                    "chunks numbered from 0, so seams from 1)",
                    "counts",
                    "",
                )
            )
        out.append(
            (
                "glitch_agreement",
                pd.DataFrame([stats.agreement(kept, data.findings)]),
                "Rater marks vs automatic findings",
                "one-to-one matching within 300 ms, closest first",
                "",
            )
        )
        return out


KIND = Glitch()

__all__ = ["KIND", "SEAM_TOLERANCE_MS", "Glitch"]
