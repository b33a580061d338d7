"""Glitch hunt: one clip, the rater marks ("G") where they hear a glitch while it plays; the
answer closes the item.

Why one folder: the marks are stored as they are made (the WebSocket's ``listen_glitch``;
``page.js`` sends one per "G"), so the vote only counts them; the results place each mark at
the nearest chunk seam and set the marks against the automatic findings; the export numbers
the seams as everywhere else. A hunt counts marks: the planner gives it no interval."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds.base import (
    Design,
    PlanModel,
    ReportSection,
    ReportTable,
    ResultContext,
    Spread,
    StoreView,
    Table,
    TestKind,
    Vote,
    VoteContext,
    not_empty,
)
from evaluation.tablespec import Index, Lookup, integer, key, real, text
from evaluation.tablespec import Table as StoredTable

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData

SEAM_TOLERANCE_MS = 300.0
"""A mark is at a seam when it is this close to it."""

MARKS = StoredTable(
    "glitch_reports",
    1,
    (
        text("report_id"),
        key("take_id"),
        key("rater_id"),
        text("test_id"),
        real("position_ms", not_null=True),
        text("kind"),
        integer("boundary_index"),
        real("boundary_ms"),
        real("distance_ms"),
        text("note"),
        text("created_at"),
    ),
    primary_key=("report_id",),
    indexes=(Index("idx_glitch_reports_take_id", ("take_id",)),),
    order=("test_id", "created_at", "report_id"),
    per_test=True,
    exported=True,
    reported=True,
    lookups=(
        Lookup(
            "takes",
            (("take_id", "take_id"),),
            (
                ("system_id", "system_id"),
                ("duration_s", "duration_s"),
                ("chunk_count", "chunk_count"),
            ),
        ),
    ),
)
"""One row per mark ("G"), stored as it is made: the glitch hunt's table. The Playground's
marks are kept here too, with no ``test_id`` (:meth:`app.store.Store.add_glitch_report`)."""

COLUMNS = {
    "raw/glitch_reports.csv": {
        "report_id": "the mark",
        "position_ms": "where in the stimulus the rater pressed G",
        "boundary_index": "the nearest chunk boundary, 0-based (the store's numbering)",
        "seam": "the nearest seam, numbered as everywhere else: seam k is the start of chunk k "
        "(chunks from 0, so seams from 1); boundary_index + 1",
        "boundary_ms": "where that seam is",
        "distance_ms": "position_ms - boundary_ms",
        "note": "free text (not used by the rater page)",
    },
    "results/glitch_marks.csv": {
        "marks": "glitch marks",
        "at_seam": f"marks within {SEAM_TOLERANCE_MS:g} ms of a seam",
        "no_seam": "marks on a take with no seam (one chunk)",
    },
    "results/glitches_by_seam.csv": {"system_id": "rows: systems; columns: seam 1, 2, … (counts)"},
    "results/glitch_agreement.csv": {
        "marks": "rater marks",
        "findings": "automatic findings on the marked takes",
        "matched": "pairs within the tolerance, one to one",
        "precision": "matched / findings",
        "recall": "matched / marks",
        "tolerance_ms": "matching tolerance",
    },
}
"""The glitch hunt's files of the export."""


@dataclass(frozen=True)
class GlitchVote:
    """A glitch hunt's "Done, next clip": no field of its own (the marks, sent over the
    WebSocket as the clip plays, are the answer)."""


class Glitch(TestKind):
    name = "glitch"
    title = "Glitch hunt"
    folder = Path(__file__).parent
    counts_marks = True
    instructions = (
        "Listen to the whole clip and press G at every glitch you hear (click, gap, repeat…)."
    )
    main_table = "glitch_marks"
    columns = COLUMNS
    tables = (MARKS,)
    vote = GlitchVote
    marks_table = MARKS.name

    def scale(self, mode: str) -> dict[str, Any]:
        return {"question": "Press G (or the Glitch button) at every glitch.", "labels": []}

    def plan_model(self, d: Design, spread: Spread) -> PlanModel | None:
        return None  # counts of marks: no mean, no interval to plan

    def by_prompt(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        t = tables.get("glitches_by_seam")
        return t.reset_index() if not_empty(t) else None

    def export_raw(self, table: str, df: pd.DataFrame) -> pd.DataFrame:
        """``glitch_reports`` gets ``seam`` beside ``boundary_index`` (one seam numbering
        everywhere: seam = index + 1)."""
        if table == "glitch_reports":
            df = df.copy()
            df.insert(df.columns.get_loc("boundary_index") + 1, "seam", df["boundary_index"] + 1)
        return df

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        return Vote({"marks": int(ctx.marks)})

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """Marks per system and per seam, and the marks against the automatic findings."""
        import pandas as pd

        from evaluation import marks

        reports = data.table(MARKS.name)
        if reports.empty:
            return []
        reports = reports.copy()
        for c in ("distance_ms", "boundary_index", "position_ms"):
            reports[c] = pd.to_numeric(reports[c], errors="coerce")
        kept = ctx.keep(reports)
        out: list[Table] = [
            (
                "glitch_marks",
                marks.glitch_marks(kept, SEAM_TOLERANCE_MS),
                f"Glitch marks per system ({ctx.who})",
                f"counts; a mark is at a seam within {SEAM_TOLERANCE_MS:g} ms of it",
                "",
            )
        ]
        seams = marks.glitches_by_seam(kept, SEAM_TOLERANCE_MS)
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
                pd.DataFrame([marks.agreement(kept, data.findings)]),
                "Rater marks vs automatic findings",
                "one-to-one matching within 300 ms, closest first",
                "",
            )
        )
        return out

    def report(self, view: StoreView) -> list[ReportSection]:
        """Every mark of the store (the Playground's too): per system, per seam, and against
        the detector's findings; per system the rate over the clips hunts gave raters."""
        import pandas as pd

        from evaluation import marks, plots

        o = view.options
        reports = view.table(MARKS.name)
        a, t = view.assignments, view.tests
        hunts = set(t.loc[t["kind"] == self.name, "test_id"]) if not t.empty else set()
        listened = a[a["test_id"].isin(hunts)] if not a.empty else None
        seams = marks.glitches_by_seam(reports, o.seam_tolerance_ms)
        found = marks.findings_by_seam(view.findings)
        figures = (
            (("glitches", lambda: plots.seams_figure(seams, found)),)
            if not seams.empty or not found.empty
            else ()
        )
        return [
            ReportSection(
                "Glitch reports",
                (
                    ReportTable(
                        "glitch_rates",
                        marks.glitch_rates(reports, view.takes, listened, o.seam_tolerance_ms),
                    ),
                    ReportTable(
                        "glitches_by_seam", seams, "Rater reports by seam", index=True, seams=True
                    ),
                    ReportTable(
                        "agreement",
                        pd.DataFrame(
                            [marks.agreement(reports, view.findings, o.agreement_tolerance_ms)]
                        ),
                        "Agreement with the automatic findings",
                    ),
                ),
                figures,
            )
        ]


KIND = Glitch()

__all__ = ["COLUMNS", "KIND", "SEAM_TOLERANCE_MS", "Glitch", "GlitchVote"]
