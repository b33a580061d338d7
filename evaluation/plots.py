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


def png(fig) -> str:
    """The figure as base64 PNG (for a data: URL), closed after."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


__all__ = [
    "interval_figure",
    "leaderboard_figure",
    "matrix_figure",
    "png",
    "pyplot",
    "seams_figure",
]
