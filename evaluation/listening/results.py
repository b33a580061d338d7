"""One listening test's results: the tables the admin page, the report and the export show.

Every number comes from :mod:`evaluation.stats` and :mod:`evaluation.inference` on the test's
frames (:class:`~evaluation.listening.data.TestData`, read by the store), so the results page,
``listenlab report``, the export and a notebook agree: the report stacks these tables rather
than computing its own. Screened raters (headphone check, trap, check items, A/B check pairs,
straight-lining, unplayed items, BS.1534-3) are excluded unless ``include_screened`` (then
every title says so); the MOS table is also given over all raters so the effect of screening
is visible.

Each kind (:mod:`evaluation.listening.kinds`) makes its own tables, only when it has answers
(``raters`` and ``methods`` always). ``methods`` states, per table, what it shows and how its
intervals and tests were computed; the export writes it as ``methods.csv``. Numbers are rounded
(p-values to 4 decimals, the rest to 3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evaluation import inference
from evaluation.listening.data import TestData
from evaluation.listening.kinds import KINDS
from evaluation.listening.kinds.base import ResultContext
from evaluation.listening.kinds.glitch import SEAM_TOLERANCE_MS
from evaluation.listening.screening import (
    TestScreening,
    rater_table,
    screen_mode,
    screening_description,
)


def _round(df: pd.DataFrame) -> pd.DataFrame:
    """p-values to 4 decimals, every other float to 3 (a paper reports 2; the export keeps a
    digit more so a reader can recompute)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].round(4 if str(c).startswith("p") and "prompt" not in str(c) else 3)
    return out


def test_raters(data: TestData, screening: TestScreening | None = None) -> pd.DataFrame:
    """One row per rater with every screening outcome, ``excluded`` and ``reasons`` (the one
    rule the results page, the export and the report use)."""
    scr = screening or TestScreening(require_headphones=screen_mode(data.config) != "none")
    return rater_table(data.raters, data.mos, data.mushra, scr, data.ab_checks)


def test_results(
    data: TestData,
    *,
    include_screened: bool = False,
    screening: TestScreening | None = None,
    n_boot: int = 1000,
    seed: int = 0,
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
        boot=inference.BOOT_METHOD.format(n_boot=n_boot),
        n_boot=n_boot,
        seed=seed,
    )
    out: dict[str, pd.DataFrame] = {"raters": raters}
    methods = [
        (
            "raters",
            "Raters, their screening outcomes and reasons",
            screening_description(scr, KINDS.get(data.kind), mode),
        )
    ]
    for kind in KINDS.values():  # each kind's tables, where the test has its answers
        for name, df, title, method in kind.results(data, ctx):
            out[name] = df
            methods.append((name, title, method))
    out["methods"] = pd.DataFrame(methods, columns=["table", "title", "method"])
    return {
        k: (v if k == "glitches_by_seam" else _round(v.replace([np.inf, -np.inf], np.nan)))
        for k, v in out.items()
    }


__all__ = ["SEAM_TOLERANCE_MS", "test_raters", "test_results"]
