"""Machine scores beside one listening test's human results: ``machine`` (per system) and
``machine_agreement`` (machine against human, per system and per stimulus).

Why here and not in a kind: every kind's results get the same two tables, from the same
stored scores (:attr:`evaluation.listening.data.TestData.machine`, the store's
``take_scores`` of the test's stimuli), so the Results tab, ``listenlab test results``, the
export and the report show them wherever they show a test's tables. The human side is the
test's main scale: the mean of its kind's main table per system, and per stimulus the mean of
its kind's per-take answers (:func:`human_spec`); a kind without a score per clip (A/B, glitch
hunt, ranking, P.835) gets the machine columns without a human mean and no agreement rows.

Agreement is Spearman's and Pearson's correlation; the ``note`` says how to read it by one
rule (:func:`note`), because 3 systems can agree perfectly by chance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from evaluation.listening.data import TestData
    from evaluation.listening.kinds.base import ResultContext


@dataclass(frozen=True)
class Shown:
    """A machine column shown beside the human results: its direction and what it is."""

    column: str
    metric: str
    sign: int
    """+1: higher is better (agrees with a human scale positively); -1: lower is better."""
    label: str


SHOWN: tuple[Shown, ...] = (
    Shown("predicted_mos", "distillmos", 1, "predicted MOS (DistillMOS)"),
    Shown("dnsmos_p808", "dnsmos", 1, "DNSMOS P.808"),
    Shown("sphinx_wer", "words", -1, "word error rate (PocketSphinx word check)"),
    Shown("sphinx_cer", "words", -1, "character error rate (PocketSphinx word check)"),
    Shown("speaker_sim", "speaker", 1, "speaker similarity to the reference (GE2E)"),
)
"""The columns of :data:`evaluation.metrics` shown beside human results, in this order."""


def human_spec(kind: str) -> tuple[str, str, str] | None:
    """``(per-take answer table, main results table, scale name)`` of a kind whose answers are
    a score per clip (a table with ``take_id`` and ``score``: MOS, MUSHRA, SMOS), asked of the
    registry; None for a kind without one (A/B, glitch hunt, ranking, P.835's three scales)."""
    from evaluation.listening.kinds import KINDS

    k = KINDS.get(kind)
    for t in k.tables if k is not None else ():
        if {"take_id", "score"} <= set(t.names):
            return t.name, k.main_table, k.title
    return None


def _shown_columns() -> dict[str, str]:
    out = {}
    for s in SHOWN:
        out[s.column] = f"{s.label}: the mean over the system's scored stimuli"
        out[f"{s.column}_low"] = f"{s.column}'s 95% Student-t interval over stimuli, low end"
        out[f"{s.column}_high"] = f"{s.column}'s 95% Student-t interval over stimuli, high end"
    return out


EXPORT_COLUMNS: dict[str, dict[str, str]] = {
    "results/machine.csv": {
        "system_id": "the system",
        "n_stimuli": "the system's stimuli with a machine score",
        "human_scale": "the test's main scale (MOS, MUSHRA; empty: the kind has none per clip)",
        "human_mean": "the main results table's mean of the system (screened raters out)",
        **_shown_columns(),
    },
    "results/machine_agreement.csv": {
        "column": "the machine score",
        "level": "system (system means) or stimulus (each stimulus's mean item answer)",
        "n": "pairs with both a machine and a human value",
        "spearman": "Spearman's rank correlation of machine and human",
        "p_spearman": "its two-sided p-value",
        "pearson": "Pearson's correlation of machine and human",
        "p_pearson": "its two-sided p-value",
        "expected_sign": "+1: higher is better (agrees positively with people); -1: lower is",
        "note": "how to read it: too few to judge (n < 5), weak, moderate or strong, and a "
        "sign opposite to the expected one (docs/metrics.md)",
    },
    "results/machine_stimuli.csv": {
        "take_id": "the stimulus's take",
        "system_id": "the system",
        "prompt_id": "the prompt",
        **{s.column: f"{s.label} of this stimulus" for s in SHOWN},
        "human_mean": "the stimulus's mean item answer (screened raters out)",
        "human_n": "the answers in that mean",
    },
}
"""The export's column dictionary of the machine tables (:mod:`app.listening.columns`)."""

MIN_N = 5
"""Fewer pairs than this: the note says "too few to judge" whatever the correlation."""
WEAK = 0.5
STRONG = 0.8
"""|Spearman| below :data:`WEAK` is weak, from it to :data:`STRONG` moderate, above strong."""
CONFIDENCE = 0.95


def note(n: int, rho: float, sign: int) -> str:
    """How to read one agreement row (the rule of the module's docstring, said in full)."""
    if n < MIN_N:
        return f"too few to judge (n = {n} < {MIN_N})"
    if not np.isfinite(rho):
        return "undefined (one side does not vary)"
    wrong = rho * sign < 0
    strength = abs(rho)
    word = "weak" if strength < WEAK else "moderate" if strength < STRONG else "strong"
    rule = f"|rho| < {WEAK}" if word == "weak" else f"|rho| >= {STRONG}" if word == "strong" else ""
    out = f"{word} ({rule})" if rule else f"moderate ({WEAK} <= |rho| < {STRONG})"
    if wrong:
        out += "; opposite to the expected direction"
    return out


def wide(data: TestData) -> pd.DataFrame:
    """One row per scored stimulus of a real system (the check stimuli's pseudo systems
    ``__anchor__``… left out): ``take_id``, ``system_id``, ``prompt_id`` and each shown
    column that has a score."""
    m, st = data.machine, data.stimuli
    if m is None or m.empty or st is None or st.empty:
        return pd.DataFrame(columns=["take_id", "system_id", "prompt_id"])
    items = st[~st["system_id"].fillna("").astype(str).str.startswith("__")]
    items = items[["take_id", "system_id", "prompt_id"]].drop_duplicates("take_id")
    cols = [s.column for s in SHOWN]
    got = m[m["column"].isin(cols)]
    if got.empty:
        return pd.DataFrame(columns=["take_id", "system_id", "prompt_id"])
    piv = got.pivot_table(index="take_id", columns="column", values="value", aggfunc="first")
    piv = piv.apply(pd.to_numeric, errors="coerce")
    out = items.merge(piv, left_on="take_id", right_index=True, how="inner")
    return out[["take_id", "system_id", "prompt_id", *[c for c in cols if c in out.columns]]]


def human_per_take(data: TestData, ctx: ResultContext) -> pd.DataFrame:
    """``take_id``, ``human_mean``, ``human_n``: the kind's item answers per stimulus, over
    the raters the results keep."""
    spec = human_spec(data.kind)
    if spec is None:
        return pd.DataFrame(columns=["take_id", "human_mean", "human_n"])
    a = data.table(spec[0])
    if a.empty:
        return pd.DataFrame(columns=["take_id", "human_mean", "human_n"])
    a = ctx.keep(a[a["role"] == "item"] if "role" in a.columns else a)
    g = a.groupby("take_id")["score"]
    return pd.DataFrame({"human_mean": g.mean(), "human_n": g.size()}).reset_index()


def stimulus_table(data: TestData, ctx: ResultContext) -> pd.DataFrame:
    """The raw export's per-stimulus rows: :func:`wide` with the human mean beside it."""
    w = wide(data)
    return w.merge(human_per_take(data, ctx), on="take_id", how="left")


def system_table(per: pd.DataFrame, human: pd.DataFrame | None, scale: str) -> pd.DataFrame:
    """``machine``: per system, n stimuli, each shown column's mean with its t interval over
    stimuli, and the human mean of the main scale."""
    cols = [s.column for s in SHOWN if s.column in per.columns]
    rows = []
    for sys_id, g in per.groupby("system_id", sort=True):
        row: dict[str, object] = {"system_id": sys_id, "n_stimuli": len(g)}
        for c in cols:
            v = g[c].dropna().to_numpy(dtype=float)
            lo, hi = _t_interval(v)
            row[c] = float(v.mean()) if len(v) else np.nan
            row[f"{c}_low"], row[f"{c}_high"] = lo, hi
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out.insert(2, "human_scale", scale)
    has_means = human is not None and not human.empty and "mean" in human.columns
    means = human.set_index("system_id")["mean"] if has_means else pd.Series(dtype=float)
    out.insert(3, "human_mean", out["system_id"].map(means).astype(float))
    return out


def _t_interval(v: np.ndarray) -> tuple[float, float]:
    from evaluation.stats import t_interval

    return t_interval(v, CONFIDENCE)


def _corr(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    from scipy import stats

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return (np.nan, np.nan, np.nan, np.nan)
    s = stats.spearmanr(x, y)
    p = stats.pearsonr(x, y)
    return float(s.statistic), float(s.pvalue), float(p.statistic), float(p.pvalue)


def agreement_table(systems: pd.DataFrame, stimuli: pd.DataFrame) -> pd.DataFrame:
    """``machine_agreement``: per shown column and level (``system``, ``stimulus``) the n
    pairs with a human and a machine value, Spearman and Pearson with p, and the note."""
    rows = []
    for s in SHOWN:
        for level, df, hcol in (
            ("system", systems, "human_mean"),
            ("stimulus", stimuli, "human_mean"),
        ):
            if s.column not in df.columns or hcol not in df.columns:
                continue
            pair = df[[s.column, hcol]].apply(pd.to_numeric, errors="coerce").dropna()
            if pair.empty:
                continue
            x, y = pair[s.column].to_numpy(float), pair[hcol].to_numpy(float)
            rho, p_rho, r, p_r = _corr(x, y)
            rows.append(
                {
                    "column": s.column,
                    "level": level,
                    "n": len(pair),
                    "spearman": rho,
                    "p_spearman": p_rho,
                    "pearson": r,
                    "p_pearson": p_r,
                    "expected_sign": s.sign,
                    "note": note(len(pair), rho, s.sign),
                }
            )
    cols = ["column", "level", "n", "spearman", "p_spearman", "pearson", "p_pearson"]
    return pd.DataFrame(rows, columns=[*cols, "expected_sign", "note"])


def models(data: TestData) -> list[tuple[str, str, str]]:
    """``(metric, version, weights' SHA-256)`` of every metric whose scores the tables show."""
    m = data.machine
    if m is None or m.empty:
        return []
    shown = m[m["column"].isin([s.column for s in SHOWN])]
    got = shown[["metric", "version", "weights_sha256"]].drop_duplicates()
    return [tuple(r) for r in got.sort_values(["metric", "version"]).itertuples(index=False)]


def summary(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The Results tab's words for the machine tables: one block, or none when unscored."""
    from evaluation.listening.summary import fmt, section

    m, a = tables.get("machine"), tables.get("machine_agreement")
    if m is None or m.empty:
        return []
    shown = [s for s in SHOWN if s.column in m.columns]
    lines = []
    for _, x in m.iterrows():
        parts = [
            f"{s.column} {fmt(x[s.column])} [{fmt(x[f'{s.column}_low'])}, "
            f"{fmt(x[f'{s.column}_high'])}]"
            for s in shown
        ]
        human = f"; human {x['human_scale']} {fmt(x['human_mean'])}" if x["human_scale"] else ""
        lines.append(f"- {x['system_id']} (n={int(x['n_stimuli'])}): {', '.join(parts)}{human}")
    for _, x in (a if a is not None else pd.DataFrame()).iterrows():
        lines.append(
            f"- {x['column']} vs human per {x['level']}: Spearman {fmt(x['spearman'])}, "
            f"Pearson {fmt(x['pearson'])}, n={int(x['n'])}: {x['note']}"
        )
    return [section("Machine scores (beside the human ones; docs/metrics.md)", lines)]


def results(
    data: TestData, ctx: ResultContext, tables: dict[str, pd.DataFrame]
) -> list[tuple[str, pd.DataFrame, str, str, str]]:
    """The two tables (``(name, frame, title, method, assumes)`` as a kind gives them), none
    while the test has no stored machine scores."""
    per = stimulus_table(data, ctx)
    if per.empty:
        return []
    spec = human_spec(data.kind)
    scale = spec[2] if spec else ""
    systems = system_table(per, tables.get(spec[1]) if spec else None, scale)
    used = "; ".join(f"{m} {v} (weights SHA-256 {h})" for m, v, h in models(data))
    human = (
        f"the human mean is the {scale} table's mean ({ctx.who})"
        if spec
        else "this kind has no per-clip scale, so there is no human mean"
    )
    return [
        (
            "machine",
            systems,
            "Machine scores per system, beside the human mean",
            f"each score's mean over the system's scored stimuli with a {CONFIDENCE:.0%} "
            f"Student-t interval over stimuli; {human}. Models: {used}",
            "stimuli are independent draws of the system; the models' training data "
            "(docs/metrics.md) matches the speech",
        ),
        (
            "machine_stimuli",
            per,
            "Machine scores per stimulus, beside its human mean",
            f"each stimulus's stored scores; human_mean and human_n: its item answers ({ctx.who})",
            "",
        ),
        (
            "machine_agreement",
            agreement_table(systems, per),
            "Machine against human: rank and linear correlation",
            f"Spearman and Pearson between each score and the human mean, over systems and "
            f"over stimuli (each stimulus's mean item answer, {ctx.who}); note: n < {MIN_N} "
            f"too few to judge, |rho| < {WEAK} weak, < {STRONG} moderate, else strong, and "
            "whether the sign is the expected one",
            "pairs are independent; per stimulus, a mean of few answers is noisy, which pulls "
            "the correlation down",
        ),
    ]


__all__ = [
    "human_spec",
    "CONFIDENCE",
    "EXPORT_COLUMNS",
    "MIN_N",
    "SHOWN",
    "STRONG",
    "WEAK",
    "Shown",
    "agreement_table",
    "human_per_take",
    "models",
    "note",
    "results",
    "stimulus_table",
    "summary",
    "system_table",
    "wide",
]
