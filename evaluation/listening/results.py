"""One listening test's results: the tables the admin page, the report and the export show.

Every number comes from :mod:`evaluation.stats` on the store's frames, so the results page,
``listenlab report`` and a notebook agree. Screened raters (headphone check, gold, trap, A/B
check pairs, straight-lining, unplayed items, BS.1534-3) are excluded unless
``include_screened``; the MOS table is given both ways so the effect of screening is visible.
"""

from __future__ import annotations

import pandas as pd

from evaluation import stats
from evaluation.listening.screening import TestScreening, rater_table
from evaluation.listening.tables import TestStore


def test_results(
    tests: TestStore,
    test_id: str,
    *,
    include_screened: bool = False,
    screening: TestScreening | None = None,
) -> dict[str, pd.DataFrame]:
    t = tests.require_test(test_id)
    cfg = t["config"]
    scr = screening or TestScreening(require_headphones=bool(cfg.get("headphone_check", True)))
    store = tests.store
    mos = store.mos_frame(test_id)
    mushra = tests.mushra_frame(test_id)
    checks = tests.ab_checks_frame(test_id) if t["kind"] == "ab" else None
    raters = rater_table(tests.raters_frame(test_id), mos, mushra, scr, checks)
    excluded = set(raters.loc[raters["excluded"], "rater_id"]) if not raters.empty else set()
    keep = (lambda df: df) if include_screened else (lambda df: df[~df["rater_id"].isin(excluded)])
    out: dict[str, pd.DataFrame] = {"raters": raters}
    if not mos.empty:
        items = mos[mos["role"] == "item"]
        played = stats.usable_ratings(items, stats.ScreeningRules(max_unplayed_share=1.0))
        out["mos"] = stats.mos_table(keep(played))
        out["mos_all_raters"] = stats.mos_table(played)
        out["mos_by_condition"] = stats.mos_table(keep(played), by=("system_id", "condition"))
    ab = store.ab_frame(test_id)
    if not ab.empty:
        out["ab"] = stats.ab_table(keep(ab))
        out["order_bias"] = pd.DataFrame([stats.order_bias(keep(ab))])
    if not mushra.empty:
        out["mushra"] = stats.mushra_table(keep(mushra))
        out["mushra_screening"] = stats.mushra_screening(mushra, scr.mushra)
    reports = store.glitch_frame()
    reports = reports[reports["test_id"] == test_id] if not reports.empty else reports
    if not reports.empty:
        out["glitches_by_seam"] = stats.glitches_by_seam(keep(reports))
        takes = set(reports["take_id"])
        findings = store.findings_frame()
        findings = findings[findings["take_id"].isin(takes)] if not findings.empty else findings
        out["glitch_agreement"] = pd.DataFrame([stats.agreement(keep(reports), findings)])
    return out


__all__ = ["test_results"]
