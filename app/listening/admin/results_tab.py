"""The admin page's Results tab: the summary in words, a plot with intervals, the test kind's
tables, the raters and the methods, and the export (all, and public).

Why the kind words it: each test kind says what its tables mean (:meth:`TestKind.summary`,
its plot, its main, pairwise and per-prompt tables); this tab lays them out, with the raters
and why any were excluded, for every kind alike.
"""

from __future__ import annotations

import asyncio
import functools
import html
from typing import Any

import gradio as gr
import pandas as pd

from app.listening.admin.page import AdminPage, bind, test_choices
from app.listening.routes import export_zip, results_of
from evaluation.listening.kinds import KINDS
from evaluation.listening.summary import section

EXCLUSION_KINDS = (
    ("headphone screen", ("screened out:", "headphone check not done")),
    ("check items", ("gold failed", "trap failed", "A/B check failed")),
    ("rating pattern", ("variance", "not played")),
    ("BS.1534-3 post-screening", ("hidden reference", "anchor (")),
)
"""How the summary counts exclusions: a rater is counted under each kind of reason they have
(a failed check item is not a failed headphone screen)."""


def rater_line(r: pd.DataFrame) -> list[str]:
    """``Raters: N joined, F finished; E excluded from the tables: …`` and one line each."""
    n_ex = int(r["excluded"].sum())
    head = f"Raters: {len(r)} joined, {int(r['finished'].sum())} finished; {n_ex} excluded"
    if n_ex:
        why = r.loc[r["excluded"], "reasons"].astype(str)
        parts = [
            f"{int(why.map(lambda t, k=keys: any(x in t for x in k)).sum())} {name}"
            for name, keys in EXCLUSION_KINDS
            if why.map(lambda t, k=keys: any(x in t for x in k)).any()
        ]
        head += " (" + ", ".join(parts) + ")"
    out = [head]
    for _, x in r[r["excluded"]].iterrows():
        out.append(f"- excluded {x['crowd_id'] or x['rater_id']}: {x['reasons']}")
    return out


def empty_reason(tables: dict[str, pd.DataFrame]) -> str | None:
    """Why the test's main table is empty, and what to do (None when it is not empty)."""
    r = tables.get("raters")
    mains = [tables[k.main_table] for k in KINDS.values() if k.main_table in tables]
    if any(not t.empty for t in mains):
        return None
    if r is None or r.empty or int(r["answered"].sum()) == 0:
        return "No answers yet: the tables fill in as raters vote."
    answered = r[r["answered"] > 0]
    if bool(answered["excluded"].all()):
        return (
            f"**No results table**: every rater who answered ({len(answered)}) was excluded; "
            "the reasons are above. Tick *Include screened raters* and press *Show results* "
            "to see every rater's ratings."
        )
    return "No results table: no rated item was played far enough to count."


def summary_markdown(tables: dict[str, pd.DataFrame]) -> str:
    """Plain sections a person (and a test) can read: raters and why any were excluded, the
    kind's own sections (MOS with intervals, pairwise tests, CMOS, MUSHRA medians: each kind's
    :meth:`~evaluation.listening.kinds.base.TestKind.summary`), why a table is empty, the
    methods. Each section is its own Markdown block (a blank line apart)."""
    blocks: list[str] = []
    r = tables.get("raters")
    if r is not None and not r.empty:
        blocks.append("\n".join(rater_line(r)))
    titles = {}
    m = tables.get("methods")
    if m is not None and not m.empty:
        titles = dict(zip(m["table"], m["title"], strict=True))
    for kind in KINDS.values():  # only the test's own kind has tables
        blocks += kind.summary(tables, titles)
    why = empty_reason(tables)
    if why and r is not None and not r.empty:
        blocks.append(why)
    if m is not None and not m.empty:
        rows = [f"- {x['table']}: {x['method']}" for _, x in m.iterrows() if x["method"]]
        blocks.append(section("Methods", rows))
    return "\n\n".join(blocks) or "No answers yet."


RATER_VIEW = ["crowd_id", "rater_id", "finished", "headphones", "excluded", "reasons"]
"""The rater table's columns on the page (the export has every column): short enough that
nothing is cut off at the right."""


def results_view(tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """What the Results tab shows for one test: the summary, a plot with intervals drawn from
    the scale's bottom, and only the tables this test kind has (``None``: hide the table)."""
    from evaluation.plots import interval_figure

    def first(pick: Any) -> Any:
        """The first kind's answer that is not None (only the test's kind has tables)."""
        return next((x for x in map(pick, KINDS.values()) if x is not None), None)

    def table(name: str | None) -> pd.DataFrame | None:
        t = tables.get(name) if name else None
        return t if t is not None and not t.empty else None

    spec = first(lambda k: k.plot(tables))
    return {
        "summary": summary_markdown(tables),
        "plot": None if spec is None else interval_figure(*spec),
        "main": first(lambda k: table(k.main_table)),
        "pairwise": first(lambda k: table(k.pairwise_table)),
        "by_prompt": first(lambda k: k.by_prompt(tables)),
        "raters": _rater_view(tables.get("raters")),
        "methods": tables.get("methods"),
    }


def _rater_view(r: pd.DataFrame | None) -> pd.DataFrame | None:
    if r is None or r.empty:
        return r
    out = r[[c for c in RATER_VIEW if c in r]].copy()
    out["crowd_id"] = out["crowd_id"].fillna("")
    return out


def _shown(df: pd.DataFrame | None, label: str) -> Any:
    if df is None:
        return gr.update(value=None, visible=False)
    return gr.update(value=df, visible=True, label=label)


async def show_results(page: AdminPage, tid: str | None, inc: bool) -> tuple:
    """The Results tab for one test (and its CSV export, written beside the other exports)."""
    if not tid:
        raise gr.Error("pick a test")
    t = await asyncio.to_thread(results_of, page.svc, tid, inc)
    page.exports.mkdir(parents=True, exist_ok=True)
    f = page.exports / f"{tid}-results.zip"
    f.write_bytes(await asyncio.to_thread(export_zip, page.svc, tid))
    pub = page.exports / f"{tid}-results-public.zip"
    pub.write_bytes(await asyncio.to_thread(export_zip, page.svc, tid, True))
    v = results_view(t)
    tag = " (screened raters included)" if inc else ""
    return (
        v["summary"],
        v["plot"],
        _shown(v["main"], "Per system" + tag),
        _shown(v["pairwise"], "Pairwise tests (Holm-corrected)" + tag),
        _shown(v["by_prompt"], "Per prompt" + tag),
        v["raters"],
        methods_markdown(v["methods"]),
        [str(f), str(pub)],
    )


def methods_markdown(m: pd.DataFrame | None) -> str:
    """The methods table as a list: each table's title, method and what it assumes (the
    export keeps the table: ``results/methods.csv``)."""
    if m is None or m.empty:
        return ""
    return "\n".join(
        f"- **{html.escape(str(x['table']))}** ({html.escape(str(x['title']))}): "
        f"{html.escape(str(x['method']))}. *Assumes:* {html.escape(str(x['assumes']))}"
        for _, x in m.iterrows()
    )


def results_tab(page: AdminPage) -> Any:
    """The Results tab: summary, plot, the kind's tables, raters and methods, the export."""
    rpick = gr.Dropdown(choices=test_choices(page), label="Test", elem_id="lt-results-pick")
    incl = gr.Checkbox(label="Include screened raters", value=False)
    refresh = gr.Button("Show results", elem_id="lt-results-show")
    summary = gr.Markdown(elem_id="lt-results-summary")
    plot = gr.Plot(label="Means with 95% intervals (axis from the scale's bottom)")
    table = functools.partial(gr.Dataframe, interactive=False, wrap=True, max_height=420)
    t_main = table(label="Per system", visible=False, elem_id="lt-main")
    t_pair = table(label="Pairwise tests", visible=False, elem_id="lt-pairwise")
    t_prompt = table(label="Per prompt", visible=False, elem_id="lt-by-prompt")
    t_r = table(label="Raters and screening", elem_id="lt-raters")
    gr.Markdown("### Methods")
    t_m = gr.Markdown(elem_id="lt-methods")  # long texts: a list wraps, a table cell did not
    dl = gr.File(
        label="Export (zip): all, and public (no crowd ids or codes)",
        file_count="multiple",
        elem_id="lt-export",
    )
    refresh.click(
        bind(show_results, page),
        [rpick, incl],
        [summary, plot, t_main, t_pair, t_prompt, t_r, t_m, dl],
    )
    return rpick


__all__ = [
    "empty_reason",
    "methods_markdown",
    "rater_line",
    "results_tab",
    "results_view",
    "show_results",
    "summary_markdown",
]
