"""Parity by ear: a blind A/B CMOS test of a candidate against its reference, answered with a
non-inferiority decision (is the candidate no more than the margin worse?).

Why a kind of its own and not an A/B test: the A/B kind asks which system is better; a port or
an upgrade asks whether the candidate is *not worse*, against a stated margin in CMOS points,
and its results must say so with the interval and put the machine's verdict (``listenlab
parity``) beside the listeners'. Everything else is the A/B kind's: the pairs, sides swapped on
half the items, the check pairs (screening), the familiarisation pair, the votes (in a table of
this kind's own, ``parity_votes``, with ``ab_votes``' columns: a table belongs to one kind) and
the A/B tables, which the A/B kind computes for these votes as for any.

The test's config holds ``parity`` (set by ``listenlab parity --listening-test``): the margin,
which system is the candidate and which the reference, and the machine's verdict of the run
the pairs came from (:func:`config_block`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds.ab import CMOS, VOTES, Ab
from evaluation.listening.kinds.ab import COLUMNS as AB_COLUMNS
from evaluation.listening.kinds.base import ResultContext, Table, not_empty
from evaluation.tablespec import Index

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.kinds.base import Design

MARGIN = 0.3
"""The default margin in CMOS points (-3..+3) when a test's config names none."""
CONFIDENCE = 0.90
"""Two-sided level of the interval; its lower end is the one-sided 95 % bound (as parity's)."""
CANDIDATE, REFERENCE = "candidate", "reference"

PARITY_VOTES = dataclasses.replace(
    VOTES,
    name="parity_votes",
    since=8,
    columns=tuple(dataclasses.replace(c, since=None) for c in VOTES.columns),
    indexes=(
        Index(
            "idx_parity_votes_test_id_rater_id_item_key",
            ("test_id", "rater_id", "item_key"),
            unique=True,
        ),
    ),
)
"""One row per rated pair of a parity test: the A/B kind's columns, in this kind's own table
(schema version 8, the version that added it)."""

COLUMNS = {
    "raw/parity_votes.csv": AB_COLUMNS["raw/ab_votes.csv"],
    "results/parity.csv": {
        "candidate": "the candidate system",
        "reference": "the reference system",
        "votes": "votes of screened raters on candidate-reference pairs",
        "cmos_candidate": "mean CMOS of the candidate against the reference (positive: the "
        "candidate sounded better; presentation order undone; a tie counts 0)",
        "cmos_low": "its 90% interval (two-way over raters and prompts), lower end: the "
        "one-sided 95% bound held against -margin",
        "cmos_high": "upper end",
        "margin": "the non-inferiority margin in CMOS points",
        "decision": "pass (lower end >= -margin: non-inferior), worse (upper end < -margin: "
        "inferior), unsure (neither), too few (no interval)",
        "machine": "listenlab parity's verdict on the same pairs (PASS or FAIL)",
        "machine_reasons": "the measures that failed it",
    },
}


def config_block(run: dict[str, Any], margin: float = MARGIN) -> dict[str, Any]:
    """What a test made from a parity run (``run``: its ``parity.json``) keeps in its config."""
    return {
        "cmos_margin": float(margin),
        "candidate": CANDIDATE,
        "reference": REFERENCE,
        "machine": {
            "passed": bool(run.get("passed")),
            "reasons": [str(r) for r in run.get("reasons", [])][:50],
            "run_id": run.get("run_id"),
            "candidate": (run.get("candidate") or {}).get("source"),
            "reference": (run.get("reference") or {}).get("source"),
        },
    }


def read_block(config: dict[str, Any]) -> dict[str, Any]:
    """The test's ``parity`` block (a JSON text in the config), with the defaults."""
    raw = config.get("parity")
    try:
        block = json.loads(raw) if isinstance(raw, str) else (raw or {})
    except ValueError:
        block = {}
    block = block if isinstance(block, dict) else {}
    try:
        margin = float(block.get("cmos_margin", MARGIN))
    except (TypeError, ValueError):
        margin = MARGIN
    return {
        "cmos_margin": margin if math.isfinite(margin) and margin >= 0 else MARGIN,
        "candidate": str(block.get("candidate") or CANDIDATE),
        "reference": str(block.get("reference") or REFERENCE),
        "machine": block.get("machine") if isinstance(block.get("machine"), dict) else {},
        "named": bool(block),
    }


def decision(low: float, high: float, margin: float) -> str:
    """pass: the lower end within the margin (non-inferiority shown); worse: even the upper
    end beyond it (inferiority shown); else unsure (as :func:`evaluation.parity.compare.decide`)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "too few"
    if low >= -margin:
        return "pass"
    return "worse" if high < -margin else "unsure"


def candidate_cmos(votes: pd.DataFrame, candidate: str, reference: str) -> pd.DataFrame:
    """Each vote on a candidate-reference pair as the candidate's CMOS (B against A, undone)."""
    v = votes[
        ((votes["system_a"] == candidate) & (votes["system_b"] == reference))
        | ((votes["system_a"] == reference) & (votes["system_b"] == candidate))
    ]
    cm = v["cmos"].astype(float)
    score = cm.where(v["system_b"] == candidate, -cm)
    return v.assign(score=score)[["rater_id", "prompt_id", "score"]]


class Parity(Ab):
    name = "parity_ab"
    title = "Parity A/B (non-inferiority)"
    folder = Path(__file__).parent
    modes = (CMOS,)
    max_systems = 2
    instructions = (
        "Listen to both A and B (at least 3 s of each), then compare them. One of them is a "
        "new version: say how much better or worse B sounds than A."
    )
    main_table = "parity"
    votes = PARITY_VOTES
    tables = (PARITY_VOTES,)
    columns = COLUMNS
    shared_columns: dict[str, str] = {}

    def validate(self, d: Design) -> None:
        if d.ab_mode != CMOS:
            raise ValueError("a parity test is answered on the CMOS scale (ab_mode cmos)")

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """The A/B kind's tables of these votes, then the non-inferiority decision with its
        interval and the machine's verdict."""
        import pandas as pd

        from evaluation import inference

        votes = data.table(self.votes.name)
        if data.kind != self.name or votes.empty:
            return []
        block = read_block(data.config)
        cand, ref, margin = block["candidate"], block["reference"], block["cmos_margin"]
        systems = list((data.config.get("design") or {}).get("systems") or [])
        if not block["named"] and len(systems) == 2 and {cand, ref} != set(systems):
            ref, cand = systems  # a test made in the designer: its first system is the reference
        scores = candidate_cmos(ctx.keep(votes), cand, ref)
        iv = inference.clustered_mean(
            scores, "score", scale=inference.CMOS_SCALE, confidence=CONFIDENCE
        )
        machine = block["machine"]
        row = {
            "candidate": cand,
            "reference": ref,
            "votes": iv.n,
            "raters": iv.raters,
            "prompts": iv.prompts,
            "cmos_candidate": iv.mean,
            "cmos_low": iv.low,
            "cmos_high": iv.high,
            "margin": margin,
            "decision": decision(iv.low, iv.high, margin),
            "machine": ("PASS" if machine.get("passed") else "FAIL") if machine else "-",
            "machine_reasons": "; ".join(machine.get("reasons") or []) if machine else "",
            "note": iv.note,
        }
        return super().results(data, ctx) + [
            (
                "parity",
                pd.DataFrame([row]),
                f"Parity: is the candidate no more than {margin:g} CMOS points worse than the "
                f"reference? ({ctx.who}), beside listenlab parity's verdict",
                f"non-inferiority: the candidate passes when the lower end of the 90% interval of "
                f"its mean CMOS is at least -{margin:g} (one-sided 95%), and is worse when even "
                f"the upper end is below -{margin:g}; the interval: "
                f"{inference.INTERVAL_METHOD.replace('95%', '90%')}",
                inference.INTERVAL_ASSUMES,
            )
        ]

    def lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        """The listeners' decision with its interval, and the machine's verdict."""
        from evaluation.listening.summary import fmt

        t = tables.get("parity")
        if not not_empty(t):
            return []
        x = t.iloc[0]
        return [
            f"- listeners: candidate CMOS {fmt(x['cmos_candidate'])} "
            f"[{fmt(x['cmos_low'])}, {fmt(x['cmos_high'])}] against a margin of "
            f"-{fmt(x['margin'])}: **{x['decision']}** (n={int(x['votes'])}, "
            f"raters={int(x['raters'])})",
            f"- machine (listenlab parity): **{x['machine']}**"
            + (f" ({x['machine_reasons']})" if x["machine_reasons"] else ""),
        ]

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        """The Results tab's parity section (the A/B kind words the A/B tables itself)."""
        from evaluation.listening.summary import section

        got = self.lines(tables)
        return [section(titles.get("parity", "Parity"), got)] if got else []

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        return self.lines(tables)


KIND = Parity()

__all__ = [
    "CONFIDENCE",
    "KIND",
    "MARGIN",
    "PARITY_VOTES",
    "Parity",
    "candidate_cmos",
    "config_block",
    "decision",
    "read_block",
]
