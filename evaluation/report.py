"""The HTML report and CSV export of a listenlab store.

:func:`compute_tables` turns the store's frames (any :class:`ReportSource`, such as
:class:`app.store.Store`) and its listening tests' rows
(:class:`~evaluation.listening.data.TestData`, which the caller reads) into named DataFrames
(the statistics of :mod:`evaluation.stats`); :func:`write_report` renders them with matplotlib
plots embedded as PNG into one self-contained HTML file, and :func:`export_csv` writes the raw
tables and the computed ones as CSV files.

Why the caller hands the rows over: ``evaluation`` is analysis only and never imports ``app``
(where the store lives). Each test's tables, its screening among them, are
:func:`evaluation.listening.results.test_results`'s: computed once, stacked here. The
store-wide MOS table is the MOS kind's one :func:`~evaluation.listening.kinds.mos.mos_table`
over every test's ratings, and the A/B tables the A/B kind's statistics; a table named after
a kind (``mos``, ``ab``) is named by that kind (its ``main_table``).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from evaluation import marks, stats
from evaluation.listening.data import TestData
from evaluation.listening.kinds import AB, GLITCH, MOS
from evaluation.listening.kinds.base import Axis
from evaluation.listening.kinds.mos import AXIS as MOS_AXIS
from evaluation.listening.kinds.mos import mos_table

MOS_TABLE, AB_TABLE = MOS.main_table, AB.main_table
"""The store-wide tables of the MOS and A/B kinds: named as each test's own (``mos``, ``ab``)."""
MOS_BY_PROMPT = f"{MOS_TABLE}_by_prompt"


class ReportSource(Protocol):
    """The store's frames the report reads (:class:`app.store.Store` has them)."""

    path: Path

    def frame(self, table: str) -> pd.DataFrame: ...
    def mos_frame(self) -> pd.DataFrame: ...
    def ab_frame(self) -> pd.DataFrame: ...
    def glitch_frame(self) -> pd.DataFrame: ...
    def findings_frame(self) -> pd.DataFrame: ...
    def takes_frame(self) -> pd.DataFrame: ...


RAW_TABLES = (
    "systems",
    "prompts",
    "takes",
    "chunks",
    "underruns",
    "raters",
    "tests",
    "assignments",
    "mos_ratings",
    "ab_votes",
    "glitch_reports",
    "auto_findings",
    # schema v2: listening tests (test_raters is left out: it holds token hashes)
    "stimuli",
    "play_events",
    "answers",
    "mushra_ratings",
)


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
    """Only these tests' ratings and votes (empty: every test's)."""


NUMERIC = (
    "score",
    "expected",
    "played_ms",
    "cmos",  # the ab_votes column (the A/B answer), not the kind
    "position_ms",
    "boundary_index",
    "boundary_ms",
    "distance_ms",
    "duration_s",
    "chunk_count",
    "time_s",
    "severity",
    "ttfa_ms",
    "rtf",
    "underrun_count",
    "underrun_stall_ms",
)
"""Columns that are numbers, even when every value is NULL (a mark on a single-chunk take has
no seam): without this, pandas keeps an all-None column as objects and ``.abs()`` fails."""


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in NUMERIC if c in df.columns]
    if not cols:
        return df
    df = df.copy()
    for c in cols:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def compute_tables(
    store: ReportSource,
    opts: ReportOptions = ReportOptions(),
    *,
    tests: Sequence[TestData] = (),
) -> dict[str, pd.DataFrame]:
    """Every computed table of the report, by name.

    ``tests`` are the store's listening tests (``TestStore.all_test_data()``). Screening is the
    per-test rule (:func:`evaluation.listening.results.test_results`: headphone check, trap,
    check items, variance, A/B checks, BS.1534-3), so a rater excluded on a test's results page
    is excluded here too; the global ``screening`` table is those tables stacked.
    """
    listening = listening_tables(tests)
    screening = _stacked_raters(listening, tests)
    keep = _keep_screened(screening)
    mos = _only(_numeric(store.mos_frame()), opts.only)
    usable = keep(stats.played_items(mos, opts.rules)) if not mos.empty else mos
    ab = keep(_only(_numeric(store.ab_frame()), opts.only))
    reports = _numeric(store.glitch_frame())
    findings = _numeric(store.findings_frame())
    takes = _numeric(store.takes_frame())
    out: dict[str, pd.DataFrame] = {"screening": screening}
    out.update(_rating_tables(usable, ab, opts))
    listened = _glitch_assignments(store)
    out["glitch_rates"] = marks.glitch_rates(reports, takes, listened, opts.seam_tolerance_ms)
    out["glitches_by_seam"] = marks.glitches_by_seam(reports, opts.seam_tolerance_ms)
    out.update(_findings_tables(findings))
    out["agreement"] = pd.DataFrame(
        [marks.agreement(reports, findings, opts.agreement_tolerance_ms)]
    )
    out["takes"] = _takes_table(takes, findings, reports)
    out.update(listening)
    return out


def _only(df: pd.DataFrame, tests: tuple[str, ...]) -> pd.DataFrame:
    return df[df["test_id"].isin(tests)] if tests and "test_id" in df else df


def _per_test(df: pd.DataFrame, fn, pool: bool) -> pd.DataFrame:
    """``fn(df)`` over every test at once (pooled), or per test with a ``test_id`` column."""
    if pool or df.empty or "test_id" not in df:
        return fn(df)
    parts = [fn(g).assign(test_id=t) for t, g in df.groupby("test_id", dropna=False, sort=True)]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return fn(df.iloc[:0])
    out = pd.concat(parts, ignore_index=True)
    return out[["test_id", *[c for c in out.columns if c != "test_id"]]]


def _rating_tables(usable: pd.DataFrame, ab: pd.DataFrame, opts: ReportOptions):
    """MOS, A/B, first-position bias and Bradley–Terry, per test (or pooled: ``opts.pool``)."""
    by = ["system_id"] if opts.pool else ["test_id", "system_id"]
    mt = mos_table(usable, by)
    if not usable.empty:
        z = stats.mos_table(stats.add_z_scores(usable), by=by, score="z")[[*by, "mean"]]
        mt = mt.merge(z.rename(columns={"mean": "mean_z"}), on=by, how="left")
    n_tests = ab["test_id"].nunique() if "test_id" in ab and not ab.empty else 0
    return {
        MOS_TABLE: mt,
        MOS_BY_PROMPT: mos_table(usable, [*by, "prompt_id"]),
        AB_TABLE: _per_test(ab, stats.ab_table, opts.pool),
        "preference_matrix": stats.preference_matrix(ab)
        if opts.pool or n_tests <= 1
        else pd.DataFrame(),
        "order_bias": _per_test(ab, lambda v: pd.DataFrame([stats.order_bias(v)]), opts.pool),
        "leaderboard": _per_test(
            ab,
            lambda v: stats.bt_leaderboard(
                v, min_votes=opts.min_votes, n_boot=opts.n_boot, seed=opts.seed
            ),
            opts.pool,
        ),
    }


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


def _glitch_assignments(store: ReportSource) -> pd.DataFrame | None:
    """The assignments of glitch-hunt tests: the clips raters listened to for glitches."""
    assignments = store.frame("assignments")
    tests = store.frame("tests")
    hunts = set(tests.loc[tests["kind"] == GLITCH.name, "test_id"]) if not tests.empty else set()
    return assignments[assignments["test_id"].isin(hunts)] if not assignments.empty else None


def _findings_tables(findings: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Automatic findings per system and kind, and per system and seam."""
    if findings.empty:
        return {"findings_by_kind": pd.DataFrame(), "findings_by_seam": pd.DataFrame()}
    fk = findings.pivot_table(
        index="system_id", columns="kind", values="finding_id", aggfunc="count", fill_value=0
    )
    seam = findings.dropna(subset=["boundary_index"])
    by_seam = (
        seam.assign(boundary_index=seam["boundary_index"].astype(int)).pivot_table(
            index="system_id",
            columns="boundary_index",
            values="finding_id",
            aggfunc="count",
            fill_value=0,
        )
        if not seam.empty
        else pd.DataFrame()
    )
    return {"findings_by_kind": fk.reset_index(), "findings_by_seam": by_seam}


def _takes_table(takes: pd.DataFrame, findings: pd.DataFrame, reports: pd.DataFrame):
    """One row per take with its timing, underruns, findings and rater reports."""
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


# --------------------------------------------------------------------------- plots


def interval_figure(df: pd.DataFrame, label: str, value: str, axis: Axis = MOS_AXIS):
    """Points with their 95 % intervals, one row per ``label``; the axis spans the kind's whole
    scale from its bottom (a MOS axis starting at 3 makes a 0.2 gap look like a chasm). Rows
    whose interval could not be computed are drawn hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    low, high, name = axis.low, axis.high, axis.label
    m = df.iloc[::-1]
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.4 * len(m)))
    ys = m[label].astype(str).tolist()
    for i, (_, r) in enumerate(m.iterrows()):
        lo, hi, v = r.get("ci_low"), r.get("ci_high"), r[value]
        if pd.notna(lo) and pd.notna(hi):
            ax.errorbar([v], [i], xerr=[[v - lo], [hi - v]], fmt="o", capsize=4, color="C0")
        else:
            ax.plot([v], [i], "o", mfc="none", color="C0")
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlim(low, high)
    ax.set_xlabel(f"{name} (95% interval, raters x prompts; hollow: too few ratings)")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plots(t: dict[str, pd.DataFrame]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    mos = t[MOS_TABLE]
    if not mos.empty:
        if "test_id" in mos:  # per test: a system's name alone is not a row
            mos = mos.assign(system_id=mos["test_id"].astype(str) + ": " + mos["system_id"])
        out[MOS_TABLE] = _png(interval_figure(mos, "system_id", "mean", MOS_AXIS))
    pm = t["preference_matrix"]
    if not pm.empty:
        fig, ax = plt.subplots(figsize=(1.5 + 0.7 * len(pm), 1.2 + 0.6 * len(pm)))
        im = ax.imshow(pm.to_numpy(dtype=float), vmin=0, vmax=1, cmap="RdBu")
        ax.set_xticks(range(len(pm)), pm.columns, rotation=45, ha="right")
        ax.set_yticks(range(len(pm)), pm.index)
        for i in range(len(pm)):
            for j in range(len(pm)):
                v = pm.iat[i, j]
                if not np.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8)
        ax.set_title("share of decisive votes won by row vs column")
        fig.colorbar(im, ax=ax, shrink=0.8)
        out[AB_TABLE] = _png(fig)
    lb = t["leaderboard"]
    if not lb.empty and "test_id" in lb:
        lb = lb.assign(system=lb["test_id"].astype(str) + ": " + lb["system"].astype(str))
    if not lb.empty:
        fig, ax = plt.subplots(figsize=(6, 0.5 + 0.4 * len(lb)))
        m = lb.iloc[::-1]
        err = np.vstack([m["rating"] - m["ci_low"], m["ci_high"] - m["rating"]])
        for i, (_, r) in enumerate(m.iterrows()):
            ax.errorbar(
                [r["rating"]],
                [str(r["system"])],
                xerr=err[:, i : i + 1],
                fmt="o",
                capsize=4,
                color="C0" if r["listed"] else "0.6",
            )
        ax.set_xlabel("Bradley–Terry rating (95% bootstrap interval; grey = below min votes)")
        ax.grid(axis="x", alpha=0.3)
        out["leaderboard"] = _png(fig)
    gs, fs = t["glitches_by_seam"], t["findings_by_seam"]
    if not gs.empty or not fs.empty:
        from matplotlib.ticker import MaxNLocator

        fig, ax = plt.subplots(figsize=(7, 3))
        series = [(f"{sid}: rater reports", row) for sid, row in gs.iterrows()]
        series += [(f"{sid}: automatic findings", row) for sid, row in fs.iterrows()]
        width = 0.8 / max(1, len(series))
        for n, (label, row) in enumerate(series):
            x = row.index.astype(int).to_numpy() + 1 + (n - (len(series) - 1) / 2) * width
            ax.bar(x, row.to_numpy(), width=width, label=label)
        seams = sorted({int(k) + 1 for _, row in series for k in row.index})
        if len(seams) <= 30:
            ax.set_xticks(seams)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("seam (seam k: start of chunk k, chunks numbered from 0)")
        ax.set_ylabel("count")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        out["glitches"] = _png(fig)
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


def render_html(
    store: ReportSource, t: dict[str, pd.DataFrame], plots: dict[str, str], pool: bool = False
) -> str:
    def img(name: str) -> str:
        return (
            f'<img alt="{name}" src="data:image/png;base64,{plots[name]}">' if name in plots else ""
        )

    counts = {name: len(store.frame(name)) for name in RAW_TABLES}
    summary = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())
    per = (
        "POOLED ACROSS TESTS by system name (a system of the same name in two tests is one row)"
        if pool
        else "per test"
    )
    sections = [
        ("Raters (each test's screening rule)", _table(t["screening"])),
        (
            f"MOS per system, {per} (screened raters out, by each test's rule; 95% two-way "
            "cluster-robust interval over raters and prompts; mean_z = per-rater z-scores)",
            img(MOS_TABLE) + _table(t[MOS_TABLE]),
        ),
        (f"MOS per system × prompt, {per}", _table(t[MOS_BY_PROMPT])),
        (
            f"A/B preference, {per} (x vs y; share of decisive votes for x and CMOS = how much "
            "better y is, presentation order corrected, with two-way cluster-robust intervals; "
            "vote-level sign test)",
            img(AB_TABLE)
            + _table(t[AB_TABLE])
            + "<h3>First-position bias</h3>"
            + _table(t["order_bias"]),
        ),
        (
            f"Bradley–Terry leaderboard, {per} (sorted by the lower bound; 95% bootstrap over "
            "raters)",
            img("leaderboard") + _table(t["leaderboard"]),
        ),
        (
            "Glitch reports",
            img("glitches")
            + _table(t["glitch_rates"])
            + "<h3>Rater reports by seam</h3>"
            + _table(_seam_columns(t["glitches_by_seam"]), index=True),
        ),
        (
            "Automatic findings",
            _table(t["findings_by_kind"])
            + "<h3>By seam</h3>"
            + _table(_seam_columns(t["findings_by_seam"]), index=True)
            + "<h3>Agreement with rater marks</h3>"
            + _table(t["agreement"]),
        ),
        ("Takes", _table(t["takes"])),
    ]
    sections += [  # listening tests (screened raters excluded; see the raters tables)
        (f"Listening test {k[5:].replace('_', ' ', 1)}", _table(df))
        for k, df in t.items()
        if k.startswith("test_")
    ]
    body = "\n".join(f"<h2>{html.escape(h)}</h2>\n{c}" for h, c in sections)
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


POOLABLE = (MOS_TABLE, MOS_BY_PROMPT, AB_TABLE, "preference_matrix", "order_bias", "leaderboard")
"""The store-wide tables that are per test by default and pooled with ``pool``."""


def export_csv(
    store: ReportSource,
    directory: str | Path,
    tables: dict[str, pd.DataFrame] | None = None,
    *,
    tests: Sequence[TestData] = (),
    opts: ReportOptions = ReportOptions(),
) -> list[Path]:
    """Write every raw table and every computed table as ``<name>.csv``; returns the paths.
    Pooled tables (``opts.pool``) are named ``stats_pooled_<name>.csv``, so no file can be
    mistaken for a per-test one.

    Text cells starting with ``= + - @`` (or tab/CR) get a leading ``'`` so a spreadsheet shows
    them as text: rater notes, prompts and system names come from strangers.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name in RAW_TABLES:
        p = d / f"{name}.csv"
        safe_csv(store.frame(name), p)
        written.append(p)
    if tables is None:
        tables = compute_tables(store, opts, tests=tests)
    for name, df in tables.items():
        label = f"pooled_{name}" if opts.pool and name in POOLABLE else name
        p = d / f"stats_{label}.csv"
        idx = name in {"preference_matrix", "glitches_by_seam", "findings_by_seam"}
        safe_csv(df, p, index=idx)
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
    t = compute_tables(store, opts, tests=tests)
    page = render_html(store, t, _plots(t), pool=opts.pool)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    if csv_dir is not None:
        export_csv(store, csv_dir, t, opts=opts)
    return out


__all__ = [
    "RAW_TABLES",
    "ReportOptions",
    "ReportSource",
    "compute_tables",
    "export_csv",
    "interval_figure",
    "listening_tables",
    "neutralise_cell",
    "render_html",
    "safe_csv",
    "write_report",
]
