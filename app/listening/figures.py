"""A test's figures, each with the numbers it was drawn from: the forest plot of every
system's score, the pairwise matrix, the per-prompt and per-rater grids, machine against
human scores.

Why one module: the admin's Results tab shows these figures and the export writes them
(``figures/<name>.png``, ``.svg`` and ``.csv``), so a paper's figure and the page cannot
differ; the CSV beside each is the frame it was drawn from, so a reader can redraw it. The
figures come from the results tables (:func:`evaluation.listening.results.test_results`) and
``raw/ratings.csv``'s rows (:func:`evaluation.listening.ratings.ratings_table`); nothing here
computes a statistic of its own beyond a mean per cell. The machine scores' tables
(``machine``: one row per system, its metric columns and the human mean; and
``machine_agreement``) are drawn when a test's results have them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds import KINDS

if TYPE_CHECKING:
    import pandas as pd

FIGURE_FORMATS = ("png", "svg")
"""The formats each figure is written in (PNG at 150 dpi for a page, SVG for a paper)."""
MIN_PAIR_SYSTEMS = 2
FIGURE_COLUMNS = {
    "figures/forest.csv": {
        "row": "the system (A/B: the pair, `y vs x`; MUSHRA: the condition)",
        "value": "its score: MOS, MUSHRA score or CMOS of y over x",
    },
    "figures/pairwise.csv": {
        "row": "the matrix's row: the system whose effect the cell gives",
        "column": "the matrix's column: the system it is compared with",
        "effect": "MOS, MUSHRA: mean over raters of (row - column); A/B: share of raters "
        "preferring the row - 0.5",
    },
    "figures/by_prompt.csv": {},
    "figures/by_rater.csv": {"excluded": "the rater is left out of the results tables"},
}
"""The figures' CSVs in the export's column dictionary (shared meanings apply; the machine
figure's CSV has the columns of ``results/machine.csv``)."""


@dataclass(frozen=True)
class Figure:
    """One figure of a test: its file name, what it shows, the frame it was drawn from, and
    the function that draws it (matplotlib, only when asked)."""

    name: str
    title: str
    numbers: pd.DataFrame
    draw: Callable[[], Any]
    source: str = ""
    """The results table the numbers come from (empty: the ratings)."""


@dataclass(frozen=True)
class Matrix:
    """The pairwise comparisons as square frames (rows and columns: systems): the row's
    effect over the column, and the Holm-adjusted p of the pair."""

    effect: pd.DataFrame
    p_holm: pd.DataFrame
    what: str
    """What a cell's number is (``mean of row - column``, ``share of raters preferring row``)."""


def kind_of(tables: dict[str, pd.DataFrame]):
    """The kind whose main table is in ``tables`` (only the test's own kind has tables)."""
    return next((k for k in KINDS.values() if k.main_table in tables), None)


def pairwise_matrix(pw: pd.DataFrame) -> Matrix | None:
    """A pairwise table (``x``, ``y``, ``p_holm`` and ``diff_y_minus_x`` or
    ``rater_share_x``) as a matrix; None when it has neither effect."""
    import numpy as np
    import pandas as pd

    if "diff_y_minus_x" in pw:
        eff, what = pw["diff_y_minus_x"].astype(float), "mean of row - column (per rater)"
        back = -eff
    elif "rater_share_x" in pw:
        eff, what = pw["rater_share_x"].astype(float) - 0.5, "share of raters preferring row - 0.5"
        back = -eff
    else:
        return None
    names = sorted(set(pw["x"].astype(str)) | set(pw["y"].astype(str)))
    e = pd.DataFrame(np.nan, index=names, columns=names)
    p = e.copy()
    for (_, r), fwd, rev in zip(pw.iterrows(), eff, back, strict=True):
        x, y = str(r["x"]), str(r["y"])
        if "diff_y_minus_x" in pw:  # the row's effect over the column: y over x is fwd
            e.at[y, x], e.at[x, y] = fwd, rev
        else:  # share preferring x: the row x over the column y is fwd
            e.at[x, y], e.at[y, x] = fwd, rev
        p.at[x, y] = p.at[y, x] = r["p_holm"]
    return Matrix(e, p, what)


def rank_order(matrix: Matrix, order: list[str]) -> Matrix:
    """The matrix with rows and columns in ``order`` (best first), unknown names last."""
    names = [n for n in order if n in matrix.effect.index]
    names += [n for n in matrix.effect.index if n not in names]
    return Matrix(matrix.effect.loc[names, names], matrix.p_holm.loc[names, names], matrix.what)


def item_scores(ratings: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rated items' scores (``raw/ratings.csv``'s item rows with a ``score``)."""
    if ratings is None or ratings.empty or "score" not in ratings:
        return None
    r = ratings[(ratings["role"] == "item") & ratings["score"].notna()]
    return r if not r.empty else None


def rater_grid(ratings: pd.DataFrame, raters: pd.DataFrame | None) -> pd.DataFrame:
    """Per rater and system: the rater's mean item score, the count, whether the rater is
    excluded (long form: the per-rater figure's numbers)."""
    g = ratings.groupby(["rater_id", "system_id"], sort=True)["score"]
    out = g.agg(["mean", "count"]).reset_index().rename(columns={"count": "n"})
    out["mean"] = out["mean"].round(3)
    ex = set()
    if raters is not None and not raters.empty:
        ex = set(raters.loc[raters["excluded"].astype(bool), "rater_id"])
    out["excluded"] = out["rater_id"].isin(ex)
    return out


def rater_view(ratings: pd.DataFrame | None, raters: pd.DataFrame | None) -> pd.DataFrame | None:
    """One row per rater: ratings given, their mean, and the Pearson correlation of the
    rater's per-system means with the panel's (kept raters' means; raters with three or more
    systems), with the exclusion and its reasons."""
    import numpy as np
    import pandas as pd

    r = item_scores(ratings)
    if r is None:
        return None
    grid = rater_grid(r, raters)
    kept = grid[~grid["excluded"]]
    panel = (kept if not kept.empty else grid).groupby("system_id")["mean"].mean()
    rows = []
    for rid, g in grid.groupby("rater_id", sort=True):
        mine = g.set_index("system_id")["mean"]
        both = pd.concat([mine, panel], axis=1, join="inner").dropna()
        agree = np.nan
        if len(both) >= 3 and both.iloc[:, 0].std() > 0 and both.iloc[:, 1].std() > 0:
            agree = float(np.corrcoef(both.iloc[:, 0], both.iloc[:, 1])[0, 1])
        rows.append(
            (
                rid,
                int(g["n"].sum()),
                len(g),
                float(np.average(g["mean"], weights=g["n"])),
                agree,
                bool(g["excluded"].iloc[0]),
            )
        )
    out = pd.DataFrame(
        rows, columns=["rater_id", "ratings", "systems", "mean", "panel_r", "excluded"]
    ).round(3)
    if raters is not None and not raters.empty and "reasons" in raters:
        why = dict(zip(raters["rater_id"], raters["reasons"].fillna(""), strict=True))
        out["reasons"] = out["rater_id"].map(why).fillna("")
    return out


def machine_columns(m: pd.DataFrame) -> tuple[str, str, list[str]] | None:
    """The ``machine`` table's system column, human mean column and the shown scores it has
    (:data:`evaluation.listening.machine.SHOWN`, in that order; their ``_low``/``_high``
    bounds are not metrics), or None when it has no human mean to draw against."""
    from evaluation.listening.machine import SHOWN

    if "system_id" not in m or "human_mean" not in m or not m["human_mean"].notna().any():
        return None
    metrics = [s.column for s in SHOWN if s.column in m and m[s.column].notna().any()]
    return ("system_id", "human_mean", metrics) if metrics else None


def forest(tables: dict[str, pd.DataFrame]) -> Figure | None:
    """Each system's score with its interval (the kind's own plot: its table, label, value
    and axis), best first."""
    from evaluation.plots import forest_figure

    spec = next((x for x in (k.plot(tables) for k in KINDS.values()) if x is not None), None)
    if spec is None:
        return None
    df, label, value, axis = spec
    keep = [c for c in (label, value, "ci_low", "ci_high", "n", "raters", "note") if c in df]
    nums = df[keep].rename(columns={label: "row", value: "value"})
    nums = nums.sort_values("value", ascending=False, kind="stable", ignore_index=True)
    kind = kind_of(tables)
    return Figure(
        "forest",
        f"{axis.label} per system with its 95% interval",
        nums,
        lambda: forest_figure(nums, "row", "value", axis),
        kind.main_table if kind else "",
    )


def matrix_of(tables: dict[str, pd.DataFrame]) -> Matrix | None:
    """The test's pairwise matrix, rows in the forest plot's order (best first)."""
    kind = kind_of(tables)
    pw = tables.get(kind.pairwise_table) if kind and kind.pairwise_table else None
    if pw is None or pw.empty:
        return None
    m = pairwise_matrix(pw)
    if m is None or len(m.effect) < MIN_PAIR_SYSTEMS:
        return None
    f = forest(tables)
    if f is not None:
        m = rank_order(m, [str(s) for s in f.numbers["row"]])
    return m


def pairwise(tables: dict[str, pd.DataFrame]) -> Figure | None:
    from evaluation.plots import pairwise_figure

    m = matrix_of(tables)
    if m is None:
        return None
    kind = kind_of(tables)
    return Figure(
        "pairwise",
        f"Every pair of systems: {m.what}, Holm-adjusted significance",
        matrix_long(m),
        lambda: pairwise_figure(m.effect, m.p_holm, m.what),
        kind.pairwise_table or "",
    )


def matrix_long(m: Matrix) -> pd.DataFrame:
    """The matrix's cells as rows: ``row``, ``column``, ``effect``, ``p_holm``,
    ``significant`` (the pairwise figure's numbers; both orders of each pair)."""
    import pandas as pd

    rows = []
    for r in m.effect.index:
        for c in m.effect.columns:
            e = m.effect.at[r, c]
            if r != c and pd.notna(e):
                p = m.p_holm.at[r, c]
                rows.append((r, c, round(float(e), 3), p, bool(pd.notna(p) and p < 0.05)))
    return pd.DataFrame(rows, columns=["row", "column", "effect", "p_holm", "significant"])


def by_prompt(tables: dict[str, pd.DataFrame]) -> Figure | None:
    """The per-prompt means (a kind's by-prompt table with a ``mean`` per system and prompt)
    as a grid."""
    from evaluation.plots import heatmap_figure

    kind = kind_of(tables)
    t = kind.by_prompt(tables) if kind else None
    spec = kind.plot(tables) if kind else None
    if t is None or spec is None or not {"system_id", "prompt_id", "mean"} <= set(t.columns):
        return None
    nums = t[[c for c in ("system_id", "prompt_id", "mean", "n") if c in t]].reset_index(drop=True)
    keys = nums.assign(prompt=short_names(nums["prompt_id"].astype(str)))
    grid = keys.pivot_table(index="system_id", columns="prompt", values="mean", sort=True)
    axis = spec[3]
    return Figure(
        "by_prompt",
        f"{axis.label} per system and prompt",
        nums,
        lambda: heatmap_figure(grid, f"{axis.label} per system (rows) and prompt", axis),
    )


def short_names(ids: pd.Series) -> pd.Series:
    """Prompt ids without the test id they all start with (``c7256b0615cd-p1`` -> ``p1``)."""
    first = ids.iloc[0] if len(ids) else ""
    head = first.split("-", 1)[0] + "-" if "-" in first else ""
    return ids.str.removeprefix(head) if head and ids.str.startswith(head).all() else ids


def by_rater(tables: dict[str, pd.DataFrame], ratings: pd.DataFrame | None) -> Figure | None:
    """Each rater's mean per system (every rater; the excluded ones named so)."""
    from evaluation.plots import heatmap_figure

    kind = kind_of(tables)
    spec = kind.plot(tables) if kind else None
    r = item_scores(ratings)
    if spec is None or r is None:
        return None
    nums = rater_grid(r, tables.get("raters"))
    shown = nums.assign(
        rater=nums["rater_id"].astype(str) + nums["excluded"].map({True: " (excl.)", False: ""})
    )
    grid = shown.pivot_table(index="system_id", columns="rater", values="mean", sort=True)
    axis = spec[3]
    return Figure(
        "by_rater",
        f"Each rater's mean {axis.label} per system",
        nums,
        lambda: heatmap_figure(grid, f"each rater's mean {axis.label} (columns: raters)", axis),
    )


def machine(tables: dict[str, pd.DataFrame]) -> Figure | None:
    """Machine scores against the human mean per system (when the results have ``machine``)."""
    from evaluation.plots import machine_figure

    m = tables.get("machine")
    cols = machine_columns(m) if m is not None and not m.empty else None
    if cols is None or not cols[2]:
        return None
    system, human, metrics = cols
    return Figure(
        "machine",
        "Machine scores against the human mean, per system",
        m,
        lambda: machine_figure(m, system, human, metrics),
    )


def test_figures(
    tables: dict[str, pd.DataFrame], ratings: pd.DataFrame | None = None
) -> list[Figure]:
    """Every figure this test's results have, in the Results tab's order."""
    figs = [forest(tables), pairwise(tables), by_prompt(tables), by_rater(tables, ratings)]
    figs.append(machine(tables))
    return [f for f in figs if f is not None]


test_figures.__test__ = False  # not a pytest function


def figure_files(figures: list[Figure]) -> dict[str, bytes]:
    """``figures/<name>.png``, ``.svg`` and ``.csv`` of each figure (the export's files)."""
    from evaluation.plots import figure_bytes
    from evaluation.report import safe_csv

    out: dict[str, bytes] = {}
    for f in figures:
        out[f"figures/{f.name}.csv"] = safe_csv(f.numbers).encode()
        for fmt in FIGURE_FORMATS:
            out[f"figures/{f.name}.{fmt}"] = figure_bytes(f.draw(), fmt)
    return out


__all__ = [
    "FIGURE_COLUMNS",
    "FIGURE_FORMATS",
    "Figure",
    "Matrix",
    "figure_files",
    "item_scores",
    "machine_columns",
    "matrix_of",
    "pairwise_matrix",
    "rater_view",
    "test_figures",
]
