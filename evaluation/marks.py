"""Rater glitch marks: per minute of audio and per chunk seam, per system, and against the
automatic findings (the detector's).

Why a module of its own: these count marks (a glitch hunt's answers, and the Playground's
reports) and the detector's findings, they estimate no mean; the report and the glitch-hunt
kind read them from here.
A mark on a one-chunk take has no seam.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def glitch_rates(
    reports: pd.DataFrame,
    takes: pd.DataFrame,
    listened: pd.DataFrame | None = None,
    seam_tolerance_ms: float = 300.0,
) -> pd.DataFrame:
    """Per system: reports, minutes of audio listened, reports per minute, seams listened,
    reports within ``seam_tolerance_ms`` of a seam, and those per seam.

    ``listened`` has one row per (rater_id, take_id) that was played for glitch marking (e.g.
    the glitch-test assignments); without it every take counts as listened to once.
    """
    cols = ["system_id", "reports", "minutes", "per_minute", "seams", "at_seam", "per_seam"]
    if takes.empty:
        return pd.DataFrame(columns=cols)
    t = takes.set_index("take_id")
    if listened is None or listened.empty:
        lst = pd.DataFrame({"take_id": t.index})
    else:
        lst = listened[["take_id"]]
    lst = lst.join(t[["system_id", "duration_s", "chunk_count"]], on="take_id")
    agg = lst.groupby("system_id").agg(
        minutes=("duration_s", lambda s: s.sum() / 60), chunks=("chunk_count", "sum")
    )
    agg["seams"] = (
        lst.assign(seams=(lst["chunk_count"] - 1).clip(lower=0)).groupby("system_id")["seams"].sum()
    )
    r = reports.copy()
    if "system_id" not in r and not r.empty:
        r = r.join(t[["system_id"]], on="take_id")
    counts = r.groupby("system_id").size() if not r.empty else pd.Series(dtype=int)
    near = r[r["distance_ms"].abs() <= seam_tolerance_ms] if not r.empty else r
    at = near.groupby("system_id").size() if not near.empty else pd.Series(dtype=int)
    out = agg.assign(
        reports=counts.reindex(agg.index).fillna(0).astype(int),
        at_seam=at.reindex(agg.index).fillna(0).astype(int),
    )
    out["per_minute"] = out["reports"] / out["minutes"].replace(0, np.nan)
    out["per_seam"] = out["at_seam"] / out["seams"].replace(0, np.nan)
    return out.reset_index()[cols]


def glitches_by_seam(reports: pd.DataFrame, seam_tolerance_ms: float = 300.0) -> pd.DataFrame:
    """Counts of seam-near reports per system × boundary index (rows: systems).

    A mark on a one-chunk take has no seam (``boundary_index`` and ``distance_ms`` NULL): it is
    left out here and counted by :func:`glitch_marks`."""
    if reports.empty:
        return pd.DataFrame()
    dist = pd.to_numeric(reports["distance_ms"], errors="coerce")
    bidx = pd.to_numeric(reports["boundary_index"], errors="coerce")
    near = reports[(dist.abs() <= seam_tolerance_ms) & bidx.notna()]
    if near.empty:
        return pd.DataFrame()
    return (
        near.assign(boundary_index=bidx[near.index].astype(int))
        .pivot_table(
            index="system_id",
            columns="boundary_index",
            values="report_id",
            aggfunc="count",
            fill_value=0,
        )
        .sort_index(axis=1)
    )


def glitch_marks(reports: pd.DataFrame, seam_tolerance_ms: float = 300.0) -> pd.DataFrame:
    """Per system: marks, raters who marked, marks within ``seam_tolerance_ms`` of a seam, and
    marks on takes with no seam at all."""
    cols = ["system_id", "marks", "raters", "at_seam", "no_seam"]
    if reports.empty:
        return pd.DataFrame(columns=cols)
    dist = pd.to_numeric(reports["distance_ms"], errors="coerce")
    r = reports.assign(_at=dist.abs() <= seam_tolerance_ms, _none=dist.isna())
    g = r.groupby("system_id", dropna=False)
    out = pd.DataFrame(
        {
            "marks": g.size(),
            "raters": g["rater_id"].nunique(),
            "at_seam": g["_at"].sum().astype(int),
            "no_seam": g["_none"].sum().astype(int),
        }
    )
    return out.reset_index()[cols]


def agreement(
    reports: pd.DataFrame, findings: pd.DataFrame, tolerance_ms: float = 300.0
) -> dict[str, float]:
    """Rater glitch marks vs automatic findings on the takes raters marked.

    Each finding matches at most one mark (and vice versa) within ``tolerance_ms``, closest
    first. precision = matched findings / findings; recall = matched marks / marks.
    """
    marks = (
        reports[["take_id", "position_ms"]]
        if not reports.empty
        else pd.DataFrame(columns=["take_id", "position_ms"])
    )
    takes = set(marks["take_id"])
    f = findings[findings["take_id"].isin(takes)] if not findings.empty else findings
    matched = 0
    for tid in takes:
        m = np.sort(marks.loc[marks["take_id"] == tid, "position_ms"].to_numpy(dtype=float))
        a = (
            np.sort(f.loc[f["take_id"] == tid, "time_s"].to_numpy(dtype=float) * 1000)
            if len(f)
            else np.zeros(0)
        )
        if not len(m) or not len(a):
            continue
        d = np.abs(m[:, None] - a[None, :])
        pairs = sorted(zip(*np.nonzero(d <= tolerance_ms), strict=True), key=lambda ij: d[ij])
        used_m, used_a = set(), set()
        for i, j in pairs:
            if i not in used_m and j not in used_a:
                used_m.add(i)
                used_a.add(j)
        matched += len(used_m)
    nm, nf = len(marks), len(f)
    return {
        "marks": nm,
        "findings": nf,
        "matched": matched,
        "precision": matched / nf if nf else float("nan"),
        "recall": matched / nm if nm else float("nan"),
        "tolerance_ms": tolerance_ms,
    }


def findings_by_kind(findings: pd.DataFrame) -> pd.DataFrame:
    """The detector's findings per system (rows) and finding kind (columns)."""
    if findings.empty:
        return pd.DataFrame()
    fk = findings.pivot_table(
        index="system_id", columns="kind", values="finding_id", aggfunc="count", fill_value=0
    )
    return fk.reset_index()


def findings_by_seam(findings: pd.DataFrame) -> pd.DataFrame:
    """The detector's seam findings per system (rows) and boundary index (columns)."""
    seam = findings.dropna(subset=["boundary_index"]) if not findings.empty else findings
    if seam.empty:
        return pd.DataFrame()
    return seam.assign(boundary_index=seam["boundary_index"].astype(int)).pivot_table(
        index="system_id",
        columns="boundary_index",
        values="finding_id",
        aggfunc="count",
        fill_value=0,
    )


__all__ = [
    "agreement",
    "findings_by_kind",
    "findings_by_seam",
    "glitch_marks",
    "glitch_rates",
    "glitches_by_seam",
]
