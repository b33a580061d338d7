"""Results tables in words: the lines the admin's Results tab and ``methods.md`` print.

Why one module: every kind words its own tables (:meth:`TestKind.summary`,
:meth:`TestKind.result_lines`) with these few formats, so an interval, a missing interval and
a pairwise test read the same whatever the kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def fmt(v: Any) -> str:
    """A number with two decimals; ``–`` for a missing one."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if f != f else f"{f:.2f}"


def ci_line(label: str, row: Any, value: str, low: str, high: str) -> str:
    """``- LABEL: value [low, high] n=N, raters=R`` for one row of a results table; an interval
    that could not be computed says why instead (never a zero-width or off-scale one)."""
    lo, hi = fmt(row.get(low)), fmt(row.get(high))
    ci = f"[{lo}, {hi}]" if "–" not in (lo, hi) else f"({row.get('note') or 'no interval'})"
    n = f"n={int(row['n'])}" + (f", raters={int(row['raters'])}" if "raters" in row else "")
    return f"- {label}: {fmt(row[value])} {ci} {n}"


def pair_lines(t: pd.DataFrame, what: str) -> list[str]:
    """One line per pair of a pairwise table: the effect and the Holm-adjusted p."""
    from evaluation.inference import format_p

    out = []
    for _, x in t.iterrows():
        mark = "significant" if x["significant"] else "not significant"
        if "diff_y_minus_x" in x:
            eff = f"{x['y']} - {x['x']} = {fmt(x['diff_y_minus_x'])}, r = {fmt(x['rank_biserial'])}"
        else:
            eff = (
                f"raters preferring {x['x']}: {int(x['raters_x'])}, {x['y']}: {int(x['raters_y'])}"
            )
        p = format_p(x["p_holm"])
        out.append(f"- {what} {x['x']} vs {x['y']}: {eff}; Holm p = {p} ({mark})")
    return out


def section(title: str, lines: list[str]) -> str:
    """A bold title, a blank line and the lines: one Markdown block of the Results tab."""
    return "\n".join([f"**{title}**", "", *lines])


def has(tables: dict[str, pd.DataFrame], name: str | None) -> bool:
    t = tables.get(name) if name else None
    return t is not None and not t.empty


def mean_lines(t: pd.DataFrame, label: str, col: str) -> list[str]:
    """``methods.md``: ``- LABEL x: mean [low, high], n = N`` per row of an interval table."""
    out = []
    for _, x in t.iterrows():
        iv = (
            f"[{x['ci_low']:.2f}, {x['ci_high']:.2f}]"
            if x["ci_low"] == x["ci_low"]
            else f"({x['note']})"
        )
        out.append(f"- {label} {x[col]}: {x['mean']:.2f} {iv}, n = {int(x['n'])}")
    return out


def holm_lines(t: pd.DataFrame, name: str) -> list[str]:
    """``methods.md``: ``- NAME: x vs y, Holm p = …`` per pair."""
    from evaluation.inference import format_p

    return [
        f"- {name}: {x['x']} vs {x['y']}, Holm p = {format_p(x['p_holm'])}" for _, x in t.iterrows()
    ]


__all__ = ["ci_line", "fmt", "has", "holm_lines", "mean_lines", "pair_lines", "section"]
