"""The HTML report and CSV export of a listenlab store.

:func:`compute_report` turns the store's frames (any :class:`ReportSource`, such as
:class:`app.store.Store`) and its listening tests' rows
(:class:`~evaluation.listening.data.TestData`, which the caller reads) into sections of named
DataFrames; :func:`write_report` renders them with matplotlib plots embedded as PNG into one
self-contained HTML file, and :func:`export_csv` writes the raw tables and the computed ones as
CSV files.

Why the caller hands the rows over: ``evaluation`` is analysis only and never imports ``app``
(where the store lives). Each test's tables, its screening among them, are
:func:`evaluation.listening.results.test_results`'s: computed once, stacked here. The
store-wide tables of a kind (MOS per system, the A/B tables and the Bradley–Terry board, the
glitch marks) are that kind's (:meth:`~evaluation.listening.kinds.base.TestKind.report`): the
report asks every registered kind for its sections, over its own answer tables, and adds what
belongs to no kind (the raters' screening, the detector's findings, the takes). Which raw
tables it writes is the store's declaration (``report_tables``).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pandas as pd

from evaluation import marks, stats
from evaluation.listening.data import TestData
from evaluation.listening.kinds import KINDS
from evaluation.listening.kinds.base import ReportSection, ReportTable, StoreView
from evaluation.plots import png


class ReportSource(Protocol):
    """The store's frames the report reads (:class:`app.store.Store` has them)."""

    path: Path

    def frame(self, table: str) -> pd.DataFrame: ...
    def answer_frame(self, name: str, test_id: str | None = None) -> pd.DataFrame: ...
    def findings_frame(self) -> pd.DataFrame: ...
    def takes_frame(self) -> pd.DataFrame: ...
    def report_tables(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class ReportOptions:
    min_votes: int = 0
    """Bradley–Terry: systems with fewer votes are listed as preliminary."""
    n_boot: int = 200
    seed: int = 0
    seam_tolerance_ms: float = 300.0
    agreement_tolerance_ms: float = 300.0
    rules: stats.ScreeningRules = field(default_factory=stats.ScreeningRules)
    pool: bool = False
    """Pool ratings across tests by system name (labelled "pooled across tests"); by default
    every store-wide table is per test (``test_id`` column), since a system called
    ``natural`` in three tests is three systems heard in three contexts."""
    only: tuple[str, ...] = ()
    """Only these tests' answers (empty: every test's, and the Playground's marks)."""


NUMERIC = (
    "boundary_index",
    "duration_s",
    "chunk_count",
    "time_s",
    "severity",
    "ttfa_ms",
    "rtf",
    "underrun_count",
    "underrun_stall_ms",
)
"""The takes' and findings' columns that are numbers, even when every value is NULL (a
finding with no seam): without this, pandas keeps an all-None column as objects. A kind's
answer tables come typed from the store (their declared REAL and INTEGER columns)."""


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in NUMERIC if c in df.columns]
    if not cols:
        return df
    df = df.copy()
    for c in cols:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


@dataclass(frozen=True)
class Report:
    """The report's sections in page order, and every table of them by name."""

    sections: list[ReportSection]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {t.name: t.frame for s in self.sections for t in s.tables}

    def table(self, name: str) -> ReportTable | None:
        return next((t for s in self.sections for t in s.tables if t.name == name), None)


def compute_report(
    store: ReportSource,
    opts: ReportOptions = ReportOptions(),
    *,
    tests: Sequence[TestData] = (),
) -> Report:
    """Every section of the report (see the module's docstring).

    ``tests`` are the store's listening tests (``TestStore.all_test_data()``). Screening is the
    per-test rule (:func:`evaluation.listening.results.test_results`: headphone check, trap,
    check items, variance, A/B checks, BS.1534-3), so a rater excluded on a test's results page
    is excluded here too; the global ``screening`` table is those tables stacked.
    """
    listening = listening_tables(tests)
    screening = _stacked_raters(listening, tests)
    findings = _numeric(store.findings_frame())
    takes = _numeric(store.takes_frame())
    view = StoreView(
        tables={
            t.name: _only(store.answer_frame(t.name), opts.only)
            for k in KINDS.values()
            for t in k.tables
        },
        keep=_keep_screened(screening),
        pool=opts.pool,
        per="POOLED ACROSS TESTS by system name (a system of the same name in two tests is one row)"
        if opts.pool
        else "per test",
        options=opts,
        takes=takes,
        findings=findings,
        tests=store.frame("tests"),
        assignments=store.frame("assignments"),
    )
    sections = [
        ReportSection("Raters (each test's screening rule)", (ReportTable("screening", screening),))
    ]
    for kind in KINDS.values():
        sections += kind.report(view)
    sections += [
        ReportSection(
            "Automatic findings",
            (
                ReportTable("findings_by_kind", marks.findings_by_kind(findings)),
                ReportTable(
                    "findings_by_seam",
                    marks.findings_by_seam(findings),
                    "By seam",
                    index=True,
                    seams=True,
                ),
            ),
        ),
        ReportSection("Takes", (ReportTable("takes", _takes_table(takes, findings, view)),)),
    ]
    sections += [  # listening tests (screened raters excluded; see the raters tables)
        ReportSection(
            f"Listening test {k[5:].replace('_', ' ', 1)}",
            (ReportTable(k, df, index=k.endswith("_glitches_by_seam")),),
        )
        for k, df in listening.items()
    ]
    return Report(sections)


def compute_tables(
    store: ReportSource,
    opts: ReportOptions = ReportOptions(),
    *,
    tests: Sequence[TestData] = (),
) -> dict[str, pd.DataFrame]:
    """Every computed table of the report, by name (:func:`compute_report`'s)."""
    return compute_report(store, opts, tests=tests).tables


def _only(df: pd.DataFrame, tests: tuple[str, ...]) -> pd.DataFrame:
    return df[df["test_id"].isin(tests)] if tests and "test_id" in df else df


def _stacked_raters(listening: dict[str, pd.DataFrame], tests: Sequence[TestData]):
    """Every test's rater table (its screening outcomes) with the test's id, stacked."""
    screened = [
        listening[f"test_{t.test_id}_raters"].assign(test_id=t.test_id)
        for t in tests
        if not listening.get(f"test_{t.test_id}_raters", pd.DataFrame()).empty
    ]
    return pd.concat(screened, ignore_index=True) if screened else pd.DataFrame()


def _keep_screened(screening: pd.DataFrame):
    """A filter that drops the rows of raters their test screened out."""
    excluded = (
        set(
            zip(
                screening.loc[screening["excluded"], "test_id"],
                screening.loc[screening["excluded"], "rater_id"],
                strict=True,
            )
        )
        if not screening.empty
        else set()
    )

    def keep(df: pd.DataFrame) -> pd.DataFrame:
        if df.empty or not excluded:
            return df
        pairs = pd.Series(list(zip(df["test_id"], df["rater_id"], strict=True)), index=df.index)
        return df[~pairs.isin(excluded)]

    return keep


def _takes_table(takes: pd.DataFrame, findings: pd.DataFrame, view: StoreView):
    """One row per take with its timing, underruns, findings and the marks raters put on it
    (the tables of the kinds that keep per-take marks)."""
    if takes.empty:
        return pd.DataFrame()
    cols = [
        "take_id",
        "system_id",
        "prompt_id",
        "status",
        "duration_s",
        "chunk_count",
        "ttfa_ms",
        "rtf",
    ]
    cols += ["underrun_count", "underrun_stall_ms"]
    t = takes[cols].copy()
    nf = findings.groupby("take_id").size() if not findings.empty else pd.Series(dtype=int)
    t["auto_findings"] = t["take_id"].map(nf).fillna(0).astype(int)
    marked = [view.table(k.marks_table) for k in KINDS.values() if k.marks_table]
    reports = pd.concat([m for m in marked if not m.empty] or [pd.DataFrame(columns=["take_id"])])
    nr = reports.groupby("take_id").size() if not reports.empty else pd.Series(dtype=int)
    t["glitch_reports"] = t["take_id"].map(nr).fillna(0).astype(int)
    return t


def listening_tables(tests: Sequence[TestData]) -> dict[str, pd.DataFrame]:
    """Per listening test (schema v2): its results tables, named ``test_<id>_<table>``."""
    from evaluation.listening.results import test_results

    out: dict[str, pd.DataFrame] = {}
    for t in tests:
        for name, df in test_results(t).items():
            out[f"test_{t.test_id}_{name}"] = df
    return out


# --------------------------------------------------------------------------- HTML


def _table(df: pd.DataFrame, index: bool = False) -> str:
    if df is None or df.empty:
        return "<p><em>no data</em></p>"
    return df.to_html(
        index=index, float_format=lambda v: f"{v:.3f}", na_rep="–", border=0, classes="t"
    )


def _seam_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Columns are the DB's boundary_index k; the page shows seam k+1 (start of chunk k+1), as
    the Playground, the probe and ``listenlab analyze`` do."""
    if df is None or df.empty:
        return df
    out = df.rename(columns=lambda k: f"seam {int(k) + 1}")
    out.columns.name = None
    return out


def _section_html(s: ReportSection) -> str:
    figures = "".join(
        f'<img alt="{html.escape(name)}" src="data:image/png;base64,{png(draw())}">'
        for name, draw in s.figures
    )
    parts = []
    for t in s.tables:
        head = f"<h3>{html.escape(t.heading)}</h3>" if t.heading else ""
        parts.append(head + _table(_seam_columns(t.frame) if t.seams else t.frame, t.index))
    return f"<h2>{html.escape(s.title)}</h2>\n{figures}{''.join(parts)}"


def render_html(store: ReportSource, report: Report) -> str:
    counts = {name: len(store.frame(name)) for name in store.report_tables()}
    summary = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())
    body = "\n".join(_section_html(s) for s in report.sections)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>listenlab report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 1100px; }}
table.t {{ border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }}
table.t th, table.t td {{ padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; }}
img {{ display: block; margin: 0.5em 0; max-width: 100%; }}
</style></head><body>
<h1>listenlab report</h1>
<p>{html.escape(str(store.path.name))}: {html.escape(summary)}.</p>
{body}
</body></html>
"""


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A spreadsheet runs a cell starting with one of these as a formula (OWASP CSV injection)."""


def neutralise_cell(v: object) -> object:
    """Prefix ``'`` to a text cell a spreadsheet would evaluate; numbers stay numbers."""
    if not isinstance(v, str) or not v.startswith(FORMULA_START):
        return v
    try:
        float(v)
        return v  # "-2.5" is a number, not a formula
    except ValueError:
        return "'" + v


def safe_csv(df: pd.DataFrame, path: str | Path | None = None, *, index: bool = False) -> str:
    """The one way the app writes a CSV: every text cell through :func:`neutralise_cell`.

    Returns the CSV text (also written to ``path`` when given). The report's CSVs, a listening
    test's ``export.zip`` and the arena's ``votes.csv`` all come through here: rater- and
    visitor-supplied strings (report ids, notes, prompts) reach a spreadsheet as text.
    """
    text = _safe_frame(df, index).to_csv(index=index)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _safe_frame(df: pd.DataFrame, index: bool) -> pd.DataFrame:
    df = df.copy()
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]):  # object or pandas' str dtype
            df[c] = df[c].map(neutralise_cell).astype(object)
    df.columns = [neutralise_cell(c) for c in df.columns]
    if index and not pd.api.types.is_numeric_dtype(df.index):
        df.index = df.index.map(neutralise_cell)
    return df


def export_csv(
    store: ReportSource,
    directory: str | Path,
    report: Report | None = None,
    *,
    tests: Sequence[TestData] = (),
    opts: ReportOptions = ReportOptions(),
) -> list[Path]:
    """Write every raw table (the store's ``report_tables``) and every computed table as
    ``<name>.csv``; returns the paths. Pooled tables (``opts.pool``) are named
    ``stats_pooled_<name>.csv``, so no file can be mistaken for a per-test one.

    Text cells starting with ``= + - @`` (or tab/CR) get a leading ``'`` so a spreadsheet shows
    them as text: rater notes, prompts and system names come from strangers.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name in store.report_tables():
        p = d / f"{name}.csv"
        safe_csv(store.frame(name), p)
        written.append(p)
    if report is None:
        report = compute_report(store, opts, tests=tests)
    for s in report.sections:
        for t in s.tables:
            label = f"pooled_{t.name}" if opts.pool and t.poolable else t.name
            p = d / f"stats_{label}.csv"
            safe_csv(t.frame, p, index=t.index)
            written.append(p)
    return written


def write_report(
    store: ReportSource,
    out: str | Path,
    csv_dir: str | Path | None = None,
    opts: ReportOptions = ReportOptions(),
    *,
    tests: Sequence[TestData] = (),
) -> Path:
    """Write the HTML report (and the CSVs, into ``csv_dir`` when given); ``tests`` are the
    store's listening tests (``TestStore.all_test_data()``)."""
    report = compute_report(store, opts, tests=tests)
    page = render_html(store, report)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    if csv_dir is not None:
        export_csv(store, csv_dir, report, opts=opts)
    return out


__all__ = [
    "Report",
    "ReportOptions",
    "ReportSource",
    "compute_report",
    "compute_tables",
    "export_csv",
    "listening_tables",
    "neutralise_cell",
    "render_html",
    "safe_csv",
    "write_report",
]
