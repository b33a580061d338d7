"""The probe's outputs: ``probe.json`` and one self-contained ``probe.html`` with plots (the
takes and findings go into a listenlab store, ``probe.db``, from :mod:`app.cli.probe`).

Kept apart from :mod:`evaluation.probe.run` (which runs the layers and decides pass/fail) so the
checks and their presentation change independently, as :mod:`evaluation.report` does for the
listening-test statistics.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.probe.records import ProbeResult, fmt_number


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plots(result: ProbeResult) -> dict[str, str]:
    """Base64 PNGs: latency by N, chunk gaps by N, and the solo chunk schedules."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    ns = sorted(result.levels)
    if ns:
        fig, axes = plt.subplots(1, 3, figsize=(11, 3))
        for ax, key, title in (
            (axes[0], "ttfa_ms", "TTFA (ms)"),
            (axes[1], "rtf", "RTF (wall / audio)"),
        ):
            for q, style in (("p50", "o-"), ("p95", "s--")):
                ys = [result.levels[n][key][q] for n in ns]
                ax.plot(ns, [np.nan if y is None else y for y in ys], style, label=q)
            ax.set_title(title)
            ax.set_xlabel("concurrent streams")
            ax.set_xscale("log", base=2)
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
        axes[1].axhline(1.0, color="0.5", lw=0.8)
        gaps = [result.levels[n]["max_chunk_gap_ms"] or 0 for n in ns]
        axes[2].bar([str(n) for n in ns], gaps, color="C2")
        axes[2].set_title("largest gap between chunks (ms)")
        axes[2].set_xlabel("concurrent streams")
        out["levels"] = _png(fig)
    solo = [r for r in result.takes if r.layer in {"streaming", "concurrency"}]
    if solo:
        layers = [("streaming", 1)] + [("concurrency", n) for n in ns if n > 1]
        fig, axes = plt.subplots(
            1, len(layers), figsize=(3.6 * len(layers), 3), squeeze=False, sharey=True
        )
        for ax, (layer, n) in zip(axes[0], layers, strict=True):
            for r in (r for r in solo if r.layer == layer and r.concurrency == n):
                t = result.takes_by_id[r.take_id]
                if not t.chunks:
                    continue
                xs = [c.arrival_ms / 1000 for c in t.chunks]
                ys = [(c.offset + c.frames) / t.sample_rate for c in t.chunks]
                ax.step(xs, ys, where="post", lw=1)
            lim = min(ax.get_xlim()[1], ax.get_ylim()[1])
            ax.plot([0, lim], [0, lim], color="0.6", lw=0.7, ls=":", label="real time")
            ax.set_title(f"c={n}: audio received", fontsize=9)
            ax.set_xlabel("wall time (s)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("audio received (s)")
        axes[0][0].legend(fontsize=7, loc="upper left")
        out["schedules"] = _png(fig)
    return out


def _tr(values: Any, cls: str | None = None) -> str:
    """One table row, every cell escaped (None is an empty cell)."""
    e = html.escape
    cells = "".join(f"<td>{e('' if v is None else str(v))}</td>" for v in values)
    return (f"<tr class='{e(cls)}'>" if cls else "<tr>") + cells + "</tr>"


def _level_cells(n: int, s: dict[str, Any]) -> tuple[Any, ...]:
    return (
        n,
        s["streams"],
        s["failed"],
        fmt_number(s["ttfa_ms"]["p50"]),
        fmt_number(s["ttfa_ms"]["p95"]),
        fmt_number((s.get("start_ms") or {}).get("p50")),
        fmt_number((s.get("late_by_ms") or {}).get("p50")),
        fmt_number(s["rtf"]["p50"], 3),
        fmt_number(s["rtf"]["p95"], 3),
        fmt_number(s["max_chunk_gap_ms"]),
        fmt_number(s["stall_ms_max"]),
    )


def render_html(result: ProbeResult) -> str:
    """One self-contained page (plots inlined); every value from the backend is escaped."""
    e = html.escape
    pl = plots(result)
    verdict = "PASS" if result.passed else "FAIL"
    rows = [_tr(_level_cells(n, result.levels[n])) for n in sorted(result.levels)]
    frows = [
        _tr(
            (
                f.level,
                f.layer,
                f.concurrency,
                f.kind,
                f.prompt_id,
                None if f.time_s is None else f"{f.time_s:.2f}",
                f.seam,
                f.message,
            ),
            cls=f.level,
        )
        for f in result.findings
    ]
    cols = ("sample_rate", "channels", "duration_s", "predicted_s", "active_fraction")
    orows = [
        _tr((pid, *(o[c] for c in cols), o["clipped_fraction"]))
        for pid, o in result.offline.items()
    ]
    img = "".join(
        f'<img alt="{e(k)}" src="data:image/png;base64,{v}">' for k, v in pl.items()
    )  # base64 alphabet only
    th = ", ".join(
        f"{k}={('rule' if k == 'prebuffer_ms' else 'off') if v is None else v}"
        for k, v in result.thresholds.to_dict().items()
    )
    pd = result.to_dict()["player"]
    learnt = pd["learnt"] or {}
    player = f"{pd['simulated']} (learnt: " + ", ".join(
        f"{k} {v:.3g}" for k, v in learnt.items() if isinstance(v, float)
    )
    player += ")" if learnt else "nothing)"
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>listenlab probe: {e(result.backend)}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse;margin:.5em 0}}td,th{{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}}
.v{{font-size:1.6em;font-weight:bold;color:{"#187a2f" if result.passed else "#b3261e"}}}
tr.fail td{{color:#b3261e}}tr.warn td{{color:#8a5a00}}img{{max-width:100%}}</style></head><body>
<h1>listenlab probe</h1>
<p class="v">{verdict}</p>
<p>Backend <code>{e(result.backend)}</code>, {len(result.prompts)} prompt(s), concurrency
{e(", ".join(map(str, result.concurrency)))}, deterministic: {e(str(result.deterministic))},
load {e(fmt_number(result.load_ms))} ms, {result.seconds:.1f} s in all. Run {e(result.run_id)},
{e(result.started_at)}.</p>
<p>Thresholds: {e(th)}. Seam k is the start of chunk k (chunks numbered from 0).</p>
<p>Player simulated on every stream: {e(player)}. "First sound" is when it starts playing;
"late by" is that minus the ideal start (the earliest start that never runs dry).</p>
<h2>By concurrency</h2>
<table><tr><th>streams at once</th><th>streams</th><th>failed</th><th>TTFA p50 ms</th>
<th>TTFA p95 ms</th><th>first sound p50 ms</th><th>late by p50 ms</th><th>RTF p50</th><th>RTF p95</th><th>largest chunk gap ms</th>
<th>longest stall ms</th></tr>{"".join(rows)}</table>
{img}
<h2>Findings ({len(result.failures())} failing)</h2>
<table><tr><th>level</th><th>layer</th><th>c</th><th>kind</th><th>prompt</th><th>time s</th>
<th>seam</th><th>what</th></tr>{"".join(frows) or "<tr><td colspan=8>none</td></tr>"}</table>
{parity_section(result)}
<h2>Offline references</h2>
<table><tr><th>prompt</th><th>Hz</th><th>channels</th><th>duration s</th><th>text predicts s</th>
<th>active</th><th>clipped</th></tr>{"".join(orows)}</table>
</body></html>
"""


def parity_section(result: ProbeResult) -> str:
    """The fourth layer's verdict and measures (nothing without ``--reference``)."""
    p = result.parity
    if not p:
        return ""
    e = html.escape
    rows = [
        _tr(
            (
                m["measure"],
                fmt_number(m.get("delta"), 3),
                m.get("low"),
                m.get("high"),
                m.get("margin"),
                m["decision"],
            ),
            cls="fail" if m.get("worse") else "",
        )
        for m in p.get("measures", [])
    ]
    return (
        f"<h2>Parity against {e(str(p.get('reference')))}: {e(str(p.get('verdict')).upper())}</h2>"
        "<table><tr><th>measure</th><th>candidate - reference</th><th>90 % low</th>"
        f"<th>90 % high</th><th>margin</th><th>decision</th></tr>{''.join(rows)}</table>"
    )


def write_outputs(result: ProbeResult, out_dir: str | Path) -> dict[str, Path]:
    """``probe.json`` and ``probe.html`` (``listenlab probe -o`` adds ``probe.db``, the takes and
    findings in a listenlab store: :mod:`app.cli.probe`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "probe.json", "html": out / "probe.html"}
    tmp = out / ".probe.json.tmp"
    tmp.write_text(json.dumps(result.to_dict(), indent=1, default=float), encoding="utf-8")
    tmp.replace(paths["json"])
    tmp = out / ".probe.html.tmp"
    tmp.write_text(render_html(result), encoding="utf-8")
    tmp.replace(paths["html"])
    return paths


__all__ = ["parity_section", "plots", "render_html", "write_outputs"]
