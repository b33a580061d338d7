"""The admin page (``/admin/tests``, Gradio): design a test, manage tests, read the results.

Admin-only as a whole: the middleware in :func:`app.listening.mount` refuses every request
under ``/admin/`` (page, API, queue) that :mod:`app.admin` does not accept.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pandas as pd

from app.admin import AdminPolicy
from app.listening.designer import SystemSpec, TestSpec, create_test, parse_prompts
from app.listening.routes import export_zip
from app.listening.service import SHOW_TEXT_KINDS, Listening
from backends.base import ListenlabError
from evaluation.listening.results import test_results

SYSTEM_COLS = ["name", "backend", "voice", "params", "condition"]


def _params(s: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in str(s or "").replace(",", "&").split("&"):
        if "=" in part:
            k, _, v = part.partition("=")
            out[k.strip()] = v.strip()
    return out


def _fmt(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if f != f else f"{f:.2f}"


def _ci_line(label: str, row: Any, value: str, low: str, high: str) -> str:
    """``- LABEL: value [low, high] n=N, raters=R`` for one row of a results table; an interval
    that could not be computed says why instead (never a zero-width or off-scale one)."""
    lo, hi = _fmt(row.get(low)), _fmt(row.get(high))
    ci = f"[{lo}, {hi}]" if "–" not in (lo, hi) else f"({row.get('note') or 'no interval'})"
    n = f"n={int(row['n'])}" + (f", raters={int(row['raters'])}" if "raters" in row else "")
    return f"- {label}: {_fmt(row[value])} {ci} {n}"


def _pair_lines(t: pd.DataFrame, what: str) -> list[str]:
    out = []
    for _, x in t.iterrows():
        mark = "significant" if x["significant"] else "not significant"
        if "diff_y_minus_x" in x:
            eff = (
                f"{x['y']} - {x['x']} = {_fmt(x['diff_y_minus_x'])}, r = {_fmt(x['rank_biserial'])}"
            )
        else:
            eff = (
                f"raters preferring {x['x']}: {int(x['raters_x'])}, {x['y']}: {int(x['raters_y'])}"
            )
        out.append(f"- {what} {x['x']} vs {x['y']}: {eff}; Holm p = {_fmt(x['p_holm'])} ({mark})")
    return out


def summary_markdown(tables: dict[str, pd.DataFrame]) -> str:
    """Plain lines a person (and a test) can read: MOS with intervals, pairwise tests, CMOS,
    MUSHRA medians, raters and exclusions, and the methods."""
    lines = []
    r = tables.get("raters")
    if r is not None and not r.empty:
        n_ex = int(r["excluded"].sum())
        n_fin = int(r["finished"].sum())
        lines.append(f"Raters: {len(r)} ({n_fin} finished, {n_ex} screened out)")
        for _, x in r[r["excluded"]].iterrows():
            lines.append(f"- excluded {x['crowd_id'] or x['rater_id']}: {x['reasons']}")
    titles = {}
    m = tables.get("methods")
    if m is not None and not m.empty:
        titles = dict(zip(m["table"], m["title"], strict=True))
    for name, title in (
        ("mos", titles.get("mos", "MOS")),
        ("mos_all_raters", "MOS (all raters)"),
    ):
        t = tables.get(name)
        if t is not None and not t.empty:
            lines.append(f"**{title}**")
            for _, x in t.iterrows():
                lines.append(_ci_line(f"MOS {x['system_id']}", x, "mean", "ci_low", "ci_high"))
    for name, what in (("mos_pairwise", "MOS"), ("mushra_pairwise", "MUSHRA")):
        t = tables.get(name)
        if t is not None and not t.empty:
            lines.append(f"**{titles.get(name, name)}**")
            lines += _pair_lines(t, what)
    t = tables.get("ab")
    if t is not None and not t.empty:
        lines.append(f"**{titles.get('ab', 'A/B')}**")
        for _, x in t.iterrows():
            lines.append(
                f"- {x['x']} vs {x['y']}: n={int(x['n'])}, {x['x']} preferred "
                f"{_fmt(x['x_share'])} [{_fmt(x['x_share_low'])}, {_fmt(x['x_share_high'])}], "
                f"CMOS {x['y']} vs {x['x']}: {_fmt(x['cmos_y'])} "
                f"[{_fmt(x['cmos_low'])}, {_fmt(x['cmos_high'])}]"
                + (f" ({x['note']})" if x.get("note") else "")
            )
    t = tables.get("ab_pairwise")
    if t is not None and not t.empty:
        lines += _pair_lines(t, "A/B")
    t = tables.get("mushra")
    if t is not None and not t.empty:
        lines.append(f"**{titles.get('mushra', 'MUSHRA')}** (median [95% CI])")
        for _, x in t.iterrows():
            lines.append(
                _ci_line(f"MUSHRA {x['condition']}", x, "median", "median_low", "median_high")
            )
    if m is not None and not m.empty:
        lines.append("**Methods**")
        lines += [f"- {x['table']}: {x['method']}" for _, x in m.iterrows() if x["method"]]
    return "\n".join(lines) or "No answers yet."


def results_view(tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """What the Results tab shows for one test: the summary, a plot with intervals drawn from
    the scale's bottom, and only the tables this test kind has (``None``: hide the table)."""
    from evaluation.report import interval_figure

    def get(*names: str) -> pd.DataFrame | None:
        for n in names:
            t = tables.get(n)
            if t is not None and not t.empty:
                return t
        return None

    fig = None
    if get("mos") is not None:
        fig = interval_figure(tables["mos"], "system_id", "mean", scale="mos")
    elif get("mushra") is not None:
        fig = interval_figure(tables["mushra"], "condition", "mean", scale="mushra")
    elif get("ab") is not None:
        ab = tables["ab"].assign(pair=lambda d: d["y"] + " vs " + d["x"])
        fig = interval_figure(
            ab.rename(columns={"cmos_low": "ci_low", "cmos_high": "ci_high"}),
            "pair",
            "cmos_y",
            scale="cmos",
        )
    return {
        "summary": summary_markdown(tables),
        "plot": fig,
        "main": get("mos", "ab", "mushra", "glitch_marks"),
        "pairwise": get("mos_pairwise", "ab_pairwise", "mushra_pairwise"),
        "by_prompt": get("mos_by_prompt")
        if get("mos_by_prompt") is not None
        else (
            None if get("glitches_by_seam") is None else tables["glitches_by_seam"].reset_index()
        ),
        "raters": tables.get("raters"),
        "methods": tables.get("methods"),
    }


def build_admin(state: Any, svc: Listening):
    import gradio as gr

    tests = svc.tests
    exports = Path(state.store.root) / "exports"
    note = AdminPolicy.from_env().describe()
    labels = list(state.backends)
    first = labels[0]
    default_systems = pd.DataFrame(
        [[first, first, "", "seed=1", "as_streamed"]]
        + (
            [[labels[1], labels[1], "", "seed=1", "as_streamed"]]
            if len(labels) > 1
            else [[f"{first}-qwen-wire", "piper?profile=qwen3-tts", "", "seed=1", "as_streamed"]]
        ),
        columns=SYSTEM_COLS,
    )

    def choices():
        return [
            (f"{t['name']} ({t['test_id']}, {t['kind']}, {t['status']})", t["test_id"])
            for t in tests.list_tests()
        ]

    def listing():
        rows = tests.list_tests()
        return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["test_id", "name"])

    with gr.Blocks(title="listenlab listening tests", analytics_enabled=False) as demo:
        gr.Markdown(f"## listenlab listening tests (admin)\n{note}")
        with gr.Tab("Design"):
            name = gr.Textbox(label="Test name", value="CPU voice: two wire profiles")
            with gr.Row():
                kind = gr.Radio(["mos", "ab", "mushra", "glitch"], value="mos", label="Type")
                ab_mode = gr.Radio(["cmos", "forced"], value="cmos", label="A/B answer")
            systems = gr.Dataframe(
                value=default_systems,
                headers=SYSTEM_COLS,
                column_count=(5, "fixed"),
                interactive=True,
                label="Systems (backend: a configured label or a spec; params: seed=1&speed=1; "
                "condition: as_streamed | whole | live)",
            )
            reference = gr.Textbox(label="Reference system (MUSHRA hidden reference; optional)")
            with gr.Row():
                source = gr.Radio(
                    ["Harvard sentences (bundled)", "Pasted", "Uploaded file"],
                    value="Harvard sentences (bundled)",
                    label="Prompts",
                )
                n_prompts = gr.Number(value=10, precision=0, label="How many Harvard sentences")
            pasted = gr.Textbox(lines=4, label="Pasted prompts (one per line)")
            upload = gr.File(label="Prompt file (.txt, one per line)", file_types=[".txt"])
            with gr.Row():
                items = gr.Number(value=10, precision=0, label="Items per rater")
                screening = gr.Checkbox(
                    value=True,
                    label="Screening items (anchor, gold, trap)",
                    info="MOS: all three; A/B: the anchor against its clean source, once per side",
                )
                headphones = gr.Checkbox(value=True, label="Headphone check")
                show_text = gr.Checkbox(value=True, label="Show the prompt text to raters")
            # on by default for MOS and A/B (as the JSON route), off for MUSHRA and glitch hunts
            kind.change(lambda k: gr.update(value=k in SHOW_TEXT_KINDS), kind, show_text)
            consent = gr.Textbox(lines=2, label="Consent text (empty: the default)")
            with gr.Row():
                code = gr.Textbox(label="Completion code (empty: one per rater)")
                redirect = gr.Textbox(
                    label="Redirect URL when done (https://…, {code} is replaced)"
                )
            go = gr.Button("Generate the stimuli and open the test", variant="primary")
            made = gr.Markdown()

            async def generate(
                nm,
                kd,
                abm,
                sysdf,
                ref,
                src,
                n,
                txt,
                up,
                it,
                scr,
                hp,
                shw,
                cons,
                cc,
                rd,
                progress=gr.Progress(),
            ):
                try:
                    if src.startswith("Harvard"):
                        prompts: Any = {"source": "harvard", "n": int(n or 10)}
                    elif src == "Pasted":
                        prompts = parse_prompts(txt or "")
                    else:
                        if not up:
                            raise gr.Error("upload a .txt file of prompts")
                        p = Path(up if isinstance(up, str) else up.name)
                        if p.stat().st_size > 200_000:
                            raise gr.Error("the prompt file is over 200 kB")
                        prompts = parse_prompts(p.read_text(encoding="utf-8", errors="replace"))
                    rows = [r for r in sysdf.fillna("").values.tolist() if str(r[0]).strip()]
                    spec = TestSpec.from_dict(
                        {
                            "name": nm,
                            "kind": kd,
                            "ab_mode": abm,
                            "systems": [
                                {
                                    "name": str(r[0]).strip(),
                                    "backend": str(r[1]).strip(),
                                    "voice": str(r[2]).strip() or None,
                                    "params": _params(r[3]),
                                    "condition": str(r[4]).strip() or "as_streamed",
                                }
                                for r in rows
                            ],
                            "prompts": prompts,
                            "items_per_rater": int(it or 10),
                            "reference": (ref or "").strip() or None,
                            "screening": scr,
                            "headphone_check": hp,
                            "show_text": shw,
                            "consent": cons or None,
                            "completion_code": cc or None,
                            "redirect_url": rd or None,
                        }
                    )
                    _ = SystemSpec  # (the spec type the rows become)
                    tid = await create_test(state, spec, lambda f, m: progress(f, desc=m))
                except ListenlabError as e:
                    raise gr.Error(str(e)) from None
                return f"Test **{tid}** is open. Raters: `/listen/{tid}` (add `?PROLIFIC_PID=…`)."

            go.click(
                generate,
                [
                    name,
                    kind,
                    ab_mode,
                    systems,
                    reference,
                    source,
                    n_prompts,
                    pasted,
                    upload,
                    items,
                    screening,
                    headphones,
                    show_text,
                    consent,
                    code,
                    redirect,
                ],
                made,
            )

        with gr.Tab("Tests"):
            table = gr.Dataframe(value=listing, interactive=False, label="Tests")
            pick = gr.Dropdown(choices=choices(), label="Test")
            with gr.Row():
                b_open = gr.Button("Open")
                b_close = gr.Button("Close")
                b_dup = gr.Button("Duplicate")
            confirm = gr.Checkbox(label="Yes, delete this test (an export zip is kept)")
            b_del = gr.Button("Delete", variant="stop")
            manage_out = gr.Markdown()
            kept = gr.File(label="Export kept")

            def act(tid, what, sure=False):
                if not tid:
                    raise gr.Error("pick a test")
                out_file = None
                if what in {"open", "closed"}:
                    tests.set_status(tid, what)
                    msg = f"{tid} is {what}."
                elif what == "dup":
                    new = f"{tid[:8]}{int(time.time()) % 10000:04d}"
                    tests.duplicate(tid, new)
                    msg = f"duplicated as {new} (draft: open it to take raters)."
                else:
                    if not sure:
                        raise gr.Error("tick the confirmation box to delete")
                    exports.mkdir(parents=True, exist_ok=True)
                    out_file = exports / f"{tid}-{int(time.time())}.zip"
                    out_file.write_bytes(export_zip(svc, tid))
                    tests.delete(tid)
                    msg = f"deleted {tid}; its export is kept at {out_file}."
                return (
                    msg,
                    listing(),
                    gr.update(choices=choices()),
                    (str(out_file) if out_file else None),
                )

            outs = [manage_out, table, pick, kept]
            b_open.click(lambda t: act(t, "open"), pick, outs)
            b_close.click(lambda t: act(t, "closed"), pick, outs)
            b_dup.click(lambda t: act(t, "dup"), pick, outs)
            b_del.click(lambda t, s: act(t, "del", s), [pick, confirm], outs)

        with gr.Tab("Results"):
            rpick = gr.Dropdown(choices=choices(), label="Test", elem_id="lt-results-pick")
            incl = gr.Checkbox(label="Include screened raters", value=False)
            refresh = gr.Button("Show results", elem_id="lt-results-show")
            summary = gr.Markdown(elem_id="lt-results-summary")
            plot = gr.Plot(label="Means with 95% intervals (axis from the scale's bottom)")
            t_main = gr.Dataframe(label="Per system", interactive=False, visible=False)
            t_pair = gr.Dataframe(label="Pairwise tests", interactive=False, visible=False)
            t_prompt = gr.Dataframe(label="Per prompt", interactive=False, visible=False)
            t_r = gr.Dataframe(label="Raters and screening", interactive=False, elem_id="lt-raters")
            t_m = gr.Dataframe(label="Methods", interactive=False, elem_id="lt-methods")
            dl = gr.File(label="CSV export (zip)")

            async def show(tid, inc):
                if not tid:
                    raise gr.Error("pick a test")
                t = await asyncio.to_thread(test_results, tests, tid, include_screened=inc)
                exports.mkdir(parents=True, exist_ok=True)
                f = exports / f"{tid}-results.zip"
                f.write_bytes(await asyncio.to_thread(export_zip, svc, tid))
                v = results_view(t)
                tag = " (screened raters included)" if inc else ""

                def table(df, label):
                    if df is None:
                        return gr.update(value=None, visible=False)
                    return gr.update(value=df, visible=True, label=label + tag)

                return (
                    v["summary"],
                    v["plot"],
                    table(v["main"], "Per system"),
                    table(v["pairwise"], "Pairwise tests (Holm-corrected)"),
                    table(v["by_prompt"], "Per prompt"),
                    v["raters"],
                    v["methods"],
                    str(f),
                )

            refresh.click(
                show, [rpick, incl], [summary, plot, t_main, t_pair, t_prompt, t_r, t_m, dl]
            )

        def reload_choices():
            c = choices()
            latest = c[0][1] if c else None  # newest first
            return gr.update(choices=c), gr.update(choices=c, value=latest), listing()

        demo.load(reload_choices, None, [pick, rpick, table])
    return demo


__all__ = ["build_admin", "results_view", "summary_markdown"]
