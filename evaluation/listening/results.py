"""One listening test's results: the tables the admin page, the report and the export show.

Every number comes from :mod:`evaluation.stats` and :mod:`evaluation.inference` on the test's
frames (:class:`~evaluation.listening.data.TestData`, read by the store), so the results page,
``listenlab report``, the export and a notebook agree: the report stacks these tables rather
than computing its own. Screened raters (headphone check, trap, check items, A/B check pairs,
straight-lining, unplayed items, BS.1534-3) are excluded unless ``include_screened`` (then
every title says so); the MOS table is also given over all raters so the effect of screening
is visible.

Each kind (:mod:`evaluation.listening.kinds`) makes its own tables, only when it has answers
(``raters`` and ``methods`` always). ``methods`` states, per table, what it shows, how its
intervals and tests were computed and what they assume; the export writes it as
``results/methods.csv``. Numbers are rounded: p-values (columns ``p``, ``p_*``) to three
significant digits (``3.2e-07``, never 0.0), every other float to 3 decimals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evaluation import inference
from evaluation.listening.data import TestData
from evaluation.listening.kinds import KINDS
from evaluation.listening.kinds.base import ResultContext
from evaluation.listening.screening import (
    TestScreening,
    rater_table,
    screen_mode,
    screening_description,
)


def _is_p(column: object) -> bool:
    c = str(column)
    return c == "p" or (c.startswith("p_") and c != "p_prompt")


def _round(df: pd.DataFrame) -> pd.DataFrame:
    """p-values to 3 significant digits, every other float to 3 decimals (a paper reports 2;
    the export keeps a digit more so a reader can recompute)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(inference.round_p) if _is_p(c) else out[c].round(3)
    return out


def test_raters(data: TestData, screening: TestScreening | None = None) -> pd.DataFrame:
    """One row per rater with every screening outcome, ``excluded`` and ``reasons`` (the one
    rule the results page, the export and the report use)."""
    scr = screening or TestScreening(require_headphones=screen_mode(data.config) != "none")
    outcomes = [(list(k.rater_columns), k.screen(data, scr)) for k in KINDS.values()]
    return rater_table(data.raters, outcomes, scr)


def test_results(
    data: TestData,
    *,
    include_screened: bool = False,
    screening: TestScreening | None = None,
) -> dict[str, pd.DataFrame]:
    """Every results table of one test, by name (see the module's docstring)."""
    mode = screen_mode(data.config)
    scr = screening or TestScreening(require_headphones=mode != "none")
    raters = test_raters(data, scr)
    excluded = set(raters.loc[raters["excluded"], "rater_id"]) if not raters.empty else set()

    def keep(df: pd.DataFrame) -> pd.DataFrame:
        return df if include_screened else df[~df["rater_id"].isin(excluded)]

    ctx = ResultContext(
        keep=keep,
        screening=scr,
        mode=mode,
        who="every rater, screened ones included" if include_screened else "screened raters out",
        interval=inference.INTERVAL_METHOD,
    )
    out: dict[str, pd.DataFrame] = {"raters": raters}
    methods = [
        (
            "raters",
            "Raters, their screening outcomes and reasons",
            screening_description(scr, KINDS.get(data.kind), mode),
            "",
        )
    ]
    for kind in KINDS.values():  # each kind's tables, where the test has its answers
        for name, df, title, method, assumes in kind.results(data, ctx):
            out[name] = df
            methods.append((name, title, method, assumes))
    out["methods"] = pd.DataFrame(methods, columns=["table", "title", "method", "assumes"])
    return {
        k: (v if k == "glitches_by_seam" else _round(v.replace([np.inf, -np.inf], np.nan)))
        for k, v in out.items()
    }


__all__ = ["test_raters", "test_results"]
