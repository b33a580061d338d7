"""The Results tab's HTML: the pairwise matrix as a table and the test's figures as images.

Why HTML of our own: a matrix of 13 systems is 78 pairs, which a list cannot show at a
glance and a plot cannot make searchable; a table with each cell's effect, its stars and a
tooltip (the Holm-adjusted p) can, and it scrolls sideways on a phone. Every name that reaches
the page (systems, prompts, raters, titles) goes through :func:`html.escape` here: this is
the only place the tab writes markup (Gradio's tables show text).
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

from evaluation.plots import stars

if TYPE_CHECKING:
    from app.listening.figures import Figure, Matrix

SCROLL = "overflow-x:auto;max-width:100%"
NAME_CELL = (
    "position:sticky;left:0;background:var(--background-fill-primary,#fff);text-align:left;"
    "white-space:nowrap;max-width:9em;overflow:hidden;text-overflow:ellipsis;padding:2px 6px"
)
"""A row's name stays in view while the matrix scrolls sideways; a long name is cut with an
ellipsis (the cell's title holds all of it)."""
CELL = "padding:2px 6px;white-space:nowrap;border:1px solid rgba(128,128,128,.25)"
HEAD = "padding:2px 6px;max-width:7em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap"
"""Wide content scrolls inside its box (a phone shows the matrix's left columns first)."""
PAGE_FIGURES = ("by_prompt", "by_rater", "machine")
"""The figures the tab shows as images below the matrix (the forest plot has its own box)."""


def esc(value: object) -> str:
    """Text for the page: escaped, quotes included (attribute values too)."""
    return html.escape(str(value), quote=True)


def cell_colour(effect: float, scale: float) -> str:
    """Blue for the row ahead, red for the row behind, paler the nearer to zero."""
    share = max(-1.0, min(1.0, effect / scale)) if scale else 0.0
    alpha = round(0.12 + 0.5 * abs(share), 2)
    return f"rgba(33,102,172,{alpha})" if share >= 0 else f"rgba(178,24,43,{alpha})"


NO_TEST = "no test (no rater's scores differ between the two)"
"""A cell's title when its pair has no p: every rater who heard both gave them the same mean
(or none heard both), so the paired test has nothing to rank (``paired_tests``)."""


def matrix_html(m: Matrix) -> str:
    """The pairwise matrix: rows and columns best first, each cell the row's effect over the
    column with its stars; the cell's title gives the pair and its Holm-adjusted p."""
    import numpy as np

    vals = m.effect.to_numpy(dtype=float)
    scale = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
    names = [str(n) for n in m.effect.index]
    head = "".join(f'<th scope="col" title="{esc(n)}" style="{HEAD}">{esc(n)}</th>' for n in names)
    rows = []
    for i, r in enumerate(names):
        cells = []
        for j, c in enumerate(names):
            v, p = vals[i, j], m.p_holm.iat[i, j]
            if i == j or np.isnan(v):
                cells.append(f'<td class="ll-diag" style="{CELL}"></td>')
                continue
            tip = f"{r} vs {c}: {v:+.2f}, " + (f"Holm p = {p:.3g}" if p == p else NO_TEST)
            cells.append(
                f'<td title="{esc(tip)}" style="{CELL};background:{cell_colour(v, scale)}">'
                f"{v:+.2f}{stars(p)}</td>"
            )
        rows.append(
            f'<tr><th scope="row" title="{esc(r)}" style="{NAME_CELL}">{esc(r)}</th>'
            f"{''.join(cells)}</tr>"
        )
    return (
        f'<div class="ll-matrix" style="{SCROLL}"><table id="lt-matrix-table" '
        'style="border-collapse:collapse;font-size:12px;text-align:center">'
        f'<caption style="text-align:left">Every pair: {esc(m.what)}; * Holm p &lt; .05, '
        "** &lt; .01, *** &lt; .001 (hover a cell for its p)</caption>"
        f'<thead><tr><th style="{NAME_CELL}"></th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def figure_html(f: Figure, png: bytes) -> str:
    """One figure as an image that fits the page's width, with its title as caption."""
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure class="ll-figure" id="lt-fig-{esc(f.name)}" style="margin:0 0 1em 0">'
        f'<img src="data:image/png;base64,{data}" alt="{esc(f.title)}" '
        'style="max-width:100%;height:auto">'
        f"<figcaption>{esc(f.title)}</figcaption></figure>"
    )


def results_html(m: Matrix | None, figures: list[Figure]) -> str:
    """The matrix (when the test has pairs), then the per-prompt, per-rater and machine
    figures."""
    from evaluation.plots import figure_bytes

    parts = [matrix_html(m)] if m is not None else []
    for f in figures:
        if f.name in PAGE_FIGURES:
            parts.append(figure_html(f, figure_bytes(f.draw(), "png")))
    return "\n".join(parts)


__all__ = ["cell_colour", "esc", "figure_html", "matrix_html", "results_html"]
