"""The report's and the Results tab's figures: matplotlib, drawn off-screen, as PNG.

Why a module of its own: the test kinds draw their store-wide figures for ``listenlab
report`` (:meth:`evaluation.listening.kinds.base.TestKind.report`) and the Results tab draws a
test's main table, and neither may import the report (it imports the kinds). Each function
makes one figure from a results table; matplotlib loads on the first figure.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pandas as pd


def pyplot():
    """matplotlib's pyplot on the off-screen backend (a server has no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def interval_figure(df: pd.DataFrame, label: str, value: str, axis: Any):
    """Points with their 95 % intervals, one row per ``label``; the axis (a kind's
    :class:`~evaluation.listening.kinds.base.Axis`: its ends and its label) spans the kind's
    whole scale from its bottom (a MOS axis starting at 3 makes a 0.2 gap look like a chasm).
    Rows whose interval could not be computed are drawn hollow."""
    plt = pyplot()
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


def matrix_figure(pm: pd.DataFrame):
    """A preference matrix: the share of decisive votes the row's system won against the
    column's."""
    plt = pyplot()
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
    return fig


def leaderboard_figure(lb: pd.DataFrame):
    """A Bradley–Terry board: each system's rating with its bootstrap interval (grey: below
    the minimum votes)."""
    plt = pyplot()
    if "test_id" in lb:
        lb = lb.assign(system=lb["test_id"].astype(str) + ": " + lb["system"].astype(str))
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
    return fig


def seams_figure(marks: pd.DataFrame, findings: pd.DataFrame):
    """Rater marks and the detector's findings per system and seam (rows: systems; columns:
    boundary index k, drawn as seam k+1)."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3))
    series = [(f"{sid}: rater reports", row) for sid, row in marks.iterrows()]
    series += [(f"{sid}: automatic findings", row) for sid, row in findings.iterrows()]
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
    return fig


def figure(size: tuple[float, float]):
    """A figure of its own (not pyplot's): the Results tab and the export draw from worker
    threads, and pyplot's list of open figures is shared by every thread."""
    pyplot()  # the Agg backend, chosen once
    from matplotlib.figure import Figure

    return Figure(figsize=size)


LABEL_CHARS = 24
"""A figure's tick labels are cut to this many characters (an ellipsis says so); the CSV
beside each figure keeps every name whole."""


def cut(label: object) -> str:
    """A name as a tick label: at most :data:`LABEL_CHARS` characters."""
    text = str(label)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def forest_figure(df: pd.DataFrame, label: str, value: str, axis: Any):
    """A forest plot: one row per ``label``, best first, each point with its 95 % interval
    and its number written at the right; the axis spans the kind's whole scale (as
    :func:`interval_figure`), a dotted line marks the mean of the rows."""
    m = df.sort_values(value, ascending=True, kind="stable")
    fig = figure((9, 0.8 + 0.35 * len(m)))
    ax = fig.subplots()
    for i, (_, r) in enumerate(m.iterrows()):
        lo, hi, v = r.get("ci_low"), r.get("ci_high"), r[value]
        if pd.notna(lo) and pd.notna(hi):
            ax.errorbar([v], [i], xerr=[[v - lo], [hi - v]], fmt="s", capsize=3, color="C0")
            words = f"{v:.2f} [{lo:.2f}, {hi:.2f}]"
        else:
            ax.plot([v], [i], "s", mfc="none", color="C0")
            words = f"{v:.2f} (no interval)"
        ax.annotate(words, (1.01, i), xycoords=("axes fraction", "data"), va="center", fontsize=8)
    ax.axvline(float(m[value].mean()), ls=":", color="0.5", lw=1)
    ax.set_yticks(range(len(m)), [cut(x) for x in m[label]])
    ax.set_ylim(-0.7, len(m) - 0.3)
    ax.set_xlim(axis.low, axis.high)
    ax.set_xlabel(f"{axis.label} (95% interval; hollow: no interval; dotted: mean of rows)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout(rect=(0, 0, 0.84, 1))  # room at the right for the numbers
    return fig


def pairwise_figure(effect: pd.DataFrame, p_holm: pd.DataFrame, what: str):
    """The pairwise comparisons as a matrix: each cell the row's effect over the column
    (``what`` says which), coloured by sign and size, starred where the Holm-adjusted p is
    below 0.05 (``*``), 0.01 (``**``) or 0.001 (``***``)."""
    n = len(effect)
    vals = effect.to_numpy(dtype=float)
    lim = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
    fig = figure((2.0 + 0.62 * n, 1.6 + 0.55 * n))
    ax = fig.subplots()
    im = ax.imshow(vals, vmin=-lim or -1, vmax=lim or 1, cmap="RdBu")
    ax.set_xticks(range(n), [cut(c) for c in effect.columns], rotation=45, ha="right")
    ax.set_yticks(range(n), [cut(i) for i in effect.index])
    for i in range(n):
        for j in range(n):
            v, p = vals[i, j], p_holm.iat[i, j]
            if np.isnan(v):
                continue
            ax.text(j, i, f"{v:+.2f}{stars(p)}", ha="center", va="center", fontsize=7)
    ax.set_title(f"{what}; * Holm p < .05, ** < .01, *** < .001", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def stars(p: Any) -> str:
    """``***``, ``**``, ``*`` or nothing for a Holm-adjusted p."""
    try:
        f = float(p)
    except (TypeError, ValueError):
        return ""
    return "***" if f < 0.001 else "**" if f < 0.01 else "*" if f < 0.05 else ""


def heatmap_figure(grid: pd.DataFrame, what: str, axis: Any):
    """A grid of means (rows: systems; columns: prompts or raters), coloured on the kind's
    scale, each cell's number written in it (empty: no rating)."""
    rows, cols = grid.shape
    vals = grid.to_numpy(dtype=float)
    fig = figure((2.5 + 0.45 * cols, 1.0 + 0.35 * rows))
    ax = fig.subplots()
    im = ax.imshow(vals, vmin=axis.low, vmax=axis.high, cmap="viridis", aspect="auto")
    ax.set_xticks(range(cols), [cut(c) for c in grid.columns], rotation=60, ha="right")
    ax.set_yticks(range(rows), [cut(i) for i in grid.index])
    if rows * cols <= 400:
        for i in range(rows):
            for j in range(cols):
                if not np.isnan(vals[i, j]):
                    light = vals[i, j] < (axis.low + axis.high) / 2
                    ax.text(
                        j,
                        i,
                        f"{vals[i, j]:.1f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if light else "black",
                    )
    ax.set_title(what, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8, label=axis.label)
    return fig


def machine_figure(df: pd.DataFrame, system: str, human: str, metrics: list[str]):
    """Machine scores against the human mean, one panel per metric, one point per system
    (labelled), so a reader sees where a metric and the listeners disagree."""
    k = max(1, len(metrics))
    fig = figure((3.6 * k, 3.4))
    axes = fig.subplots(1, k, squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=False):
        ok = df[[human, metric]].apply(pd.to_numeric, errors="coerce").notna().all(axis=1)
        d = df[ok]
        ax.plot(d[metric].astype(float), d[human].astype(float), "o", color="C0")
        for _, r in d.iterrows():
            ax.annotate(
                cut(r[system]),
                (float(r[metric]), float(r[human])),
                fontsize=6,
                xytext=(3, 2),
                textcoords="offset points",
            )
        ax.set_xlabel(str(metric))
        ax.set_ylabel(f"human ({human})")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def figure_bytes(fig, fmt: str) -> bytes:
    """The figure as ``png`` (150 dpi) or ``svg`` bytes, closed after; no date or software
    stamp, so the same numbers give the same file."""
    plt = pyplot()
    buf = io.BytesIO()
    meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    with plt.rc_context({"svg.hashsalt": "listenlab"}):  # stable ids in the SVG
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight", metadata=meta)
    plt.close(fig)  # a pyplot figure (a figure of its own is simply dropped)
    return buf.getvalue()


def png(fig) -> str:
    """The figure as base64 PNG (for a data: URL), closed after."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


__all__ = [
    "LABEL_CHARS",
    "cut",
    "figure",
    "figure_bytes",
    "forest_figure",
    "heatmap_figure",
    "interval_figure",
    "leaderboard_figure",
    "machine_figure",
    "matrix_figure",
    "pairwise_figure",
    "png",
    "pyplot",
    "seams_figure",
    "stars",
]
