"""One listening test's results: the tables the admin page, the report and the export show.

Every number comes from :mod:`evaluation.stats` and :mod:`evaluation.inference` on the store's
frames, so the results page, ``listenlab report``, the export and a notebook agree. Screened
raters (headphone check, trap, check items, A/B check pairs, straight-lining, unplayed items,
BS.1534-3) are excluded unless ``include_screened`` (then every title says so); the MOS table
is also given over all raters so the effect of screening is visible.

Only the tables a test kind has are returned (``raters`` and ``methods`` always). ``methods``
states, per table, what it shows and how its intervals and tests were computed; the export
writes it as ``methods.csv``. Numbers are rounded (p-values to 4 decimals, the rest to 3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.store.listening import TestStore
from evaluation import inference, stats
from evaluation.listening.screening import TestScreening, rater_table, screen_mode

SEAM_TOLERANCE_MS = 300.0


def _round(df: pd.DataFrame) -> pd.DataFrame:
    """p-values to 4 decimals, every other float to 3 (a paper reports 2; the export keeps a
    digit more so a reader can recompute)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].round(4 if str(c).startswith("p") and "prompt" not in str(c) else 3)
    return out


SCREEN_TEXT = {
    "antiphase": "headphone screen (Woods et al. 2017 antiphase test, >= 5 of 6 correct)",
    "huggins": "headphone screen (Milne et al. 2021 Huggins pitch, >= 5 of 6 correct)",
    "both": "headphone screens (Woods et al. 2017 antiphase test and Milne et al. 2021 "
    "Huggins pitch, >= 5 of 6 correct in each)",
}


def screening_description(scr: TestScreening, kind: str, screen: str = "antiphase") -> str:
    parts = []
    if scr.require_headphones:
        parts.append(SCREEN_TEXT.get(screen, SCREEN_TEXT["antiphase"]))
    if kind == "mos":
        parts.append(scr.rules.describe())
    if kind == "ab":
        parts.append(
            f"A/B check pairs (the degraded anchor against its clean source): more than "
            f"{scr.max_ab_check_failures} not won by the clean side"
        )
    if kind == "mushra":
        m = scr.mushra
        parts.append(
            f"BS.1534-3 post-screening: hidden reference < {m.reference_min:g} or the mid "
            f"anchor > {m.anchor_max:g} on more than {m.max_share:.0%} of screens"
        )
    return "; ".join(parts)


def test_results(
    tests: TestStore,
    test_id: str,
    *,
    include_screened: bool = False,
    screening: TestScreening | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    t = tests.require_test(test_id)
    cfg = t["config"]
    kind = t["kind"]
    mode = screen_mode(cfg)
    scr = screening or TestScreening(require_headphones=mode != "none")
    store = tests.store
    mos = store.mos_frame(test_id)
    mushra = tests.mushra_frame(test_id)
    checks = tests.ab_checks_frame(test_id) if kind == "ab" else None
    raters = rater_table(tests.raters_frame(test_id), mos, mushra, scr, checks)
    excluded = set(raters.loc[raters["excluded"], "rater_id"]) if not raters.empty else set()

    def keep(df: pd.DataFrame) -> pd.DataFrame:
        return df if include_screened else df[~df["rater_id"].isin(excluded)]

    who = "every rater, screened ones included" if include_screened else "screened raters out"
    boot = inference.BOOT_METHOD.format(n_boot=n_boot)
    iv = dict(n_boot=n_boot, seed=seed)
    out: dict[str, pd.DataFrame] = {"raters": raters}
    methods: list[tuple[str, str, str]] = [
        (
            "raters",
            "Raters, their screening outcomes and reasons",
            screening_description(scr, kind, mode),
        )
    ]

    if not mos.empty:
        items = mos[mos["role"] == "item"]
        played = items[~stats._unplayed(items, scr.rules.min_played_fraction)]
        kept = keep(played)
        out["mos"] = inference.interval_table(kept, ["system_id"], scale=inference.MOS_SCALE, **iv)
        methods.append(("mos", f"MOS per system ({who})", f"mean; 95% interval: {boot}"))
        out["mos_all_raters"] = inference.interval_table(
            played, ["system_id"], scale=inference.MOS_SCALE, **iv
        )
        methods.append(
            ("mos_all_raters", "MOS per system, every rater (no screening)", f"as mos: {boot}")
        )
        out["mos_by_prompt"] = inference.interval_table(
            kept, ["system_id", "prompt_id"], scale=inference.MOS_SCALE, **iv
        ).sort_values(["system_id", "prompt_id"], ignore_index=True)
        methods.append(
            ("mos_by_prompt", f"MOS per system and prompt ({who})", f"as mos, over raters: {boot}")
        )
        if kept["condition"].nunique() > 1:
            out["mos_by_condition"] = inference.interval_table(
                kept, ["system_id", "condition"], scale=inference.MOS_SCALE, **iv
            )
            methods.append(("mos_by_condition", f"MOS per system and condition ({who})", boot))
        out["mos_pairwise"] = inference.paired_tests(kept)
        methods.append(
            ("mos_pairwise", f"MOS: every pair of systems ({who})", inference.PAIRED_METHOD)
        )

    ab = store.ab_frame(test_id)
    if not ab.empty:
        kept = keep(ab)
        out["ab"] = stats.ab_table(kept, **iv)
        methods.append(
            (
                "ab",
                f"A/B per pair: preference share of x among decisive votes, CMOS = how much "
                f"better y is, presentation order undone ({who})",
                f"95% intervals: {boot}",
            )
        )
        out["ab_pairwise"] = inference.sign_tests(stats.oriented_votes(kept))
        methods.append(
            ("ab_pairwise", f"A/B: is one side preferred? ({who})", inference.SIGN_METHOD)
        )
        out["order_bias"] = pd.DataFrame([stats.order_bias(kept)])
        methods.append(
            (
                "order_bias",
                f"Share of decisive votes won by the clip played first ({who})",
                "exact two-sided binomial test against 0.5, votes taken as independent",
            )
        )

    if not mushra.empty:
        kept = keep(mushra)
        out["mushra"] = stats.mushra_table(kept, **iv)
        methods.append(
            (
                "mushra",
                f"MUSHRA per condition ({who})",
                "median with a distribution-free order-statistic 95% interval and quartiles "
                f"(BS.1534-3); mean with 95% interval: {boot}",
            )
        )
        sys_rows = kept[kept["role"] == "item"]
        out["mushra_pairwise"] = inference.paired_tests(sys_rows)
        methods.append(
            ("mushra_pairwise", f"MUSHRA: every pair of systems ({who})", inference.PAIRED_METHOD)
        )
        out["mushra_screening"] = stats.mushra_screening(mushra, scr.mushra)
        methods.append(
            (
                "mushra_screening",
                "BS.1534-3 post-screening per rater",
                screening_description(scr, "mushra", mode),
            )
        )

    reports = store.glitch_frame()
    reports = reports[reports["test_id"] == test_id] if not reports.empty else reports
    if not reports.empty:
        for c in ("distance_ms", "boundary_index", "position_ms"):
            reports[c] = pd.to_numeric(reports[c], errors="coerce")
        kept = keep(reports)
        out["glitch_marks"] = stats.glitch_marks(kept, SEAM_TOLERANCE_MS)
        methods.append(
            (
                "glitch_marks",
                f"Glitch marks per system ({who})",
                f"counts; a mark is at a seam within {SEAM_TOLERANCE_MS:g} ms of it",
            )
        )
        seams = stats.glitches_by_seam(kept, SEAM_TOLERANCE_MS)
        if not seams.empty:
            out["glitches_by_seam"] = seams
            methods.append(("glitches_by_seam", "Seam-near marks per system and seam", "counts"))
        takes = set(reports["take_id"])
        findings = store.findings_frame()
        findings = findings[findings["take_id"].isin(takes)] if not findings.empty else findings
        out["glitch_agreement"] = pd.DataFrame([stats.agreement(kept, findings)])
        methods.append(
            (
                "glitch_agreement",
                "Rater marks vs automatic findings",
                "one-to-one matching within 300 ms, closest first",
            )
        )

    out["methods"] = pd.DataFrame(methods, columns=["table", "title", "method"])
    return {
        k: (v if k == "glitches_by_seam" else _round(v.replace([np.inf, -np.inf], np.nan)))
        for k, v in out.items()
    }


__all__ = ["screening_description", "test_results"]
