"""``raw/ratings.csv``: every rating of one test in one long table, the table to re-run the
analysis on.

Why the kinds make the rows: what a rating is depends on the kind (a MOS score, an A/B vote
and the system it went to, a MUSHRA slider); each kind gives its rows
(:meth:`evaluation.listening.kinds.base.TestKind.ratings`) with the columns every kind shares
(:data:`SHARED`) and its own (:attr:`TestKind.rating_columns`). Here they are stacked, each
with its ``prompt_key`` and the item's timing (the store's ``item_times``).
"""

from __future__ import annotations

import pandas as pd

from evaluation.listening.data import TestData
from evaluation.listening.kinds import KINDS

SHARED = (
    "kind",
    "rater_id",
    "assignment_id",
    "slot",
    "role",
    "expected",
    "system_id",
    "prompt_id",
    "condition",
)
"""The columns every kind's rows have (a check item's ``system_id`` is its pseudo system:
``__anchor__``, ``__gold__``, ``__trap__``, …)."""
TIMES = ("first_sound_at", "answered_at", "time_on_item_ms", "time_since_previous_ms")


def columns() -> list[str]:
    """The table's columns: the shared ones, ``prompt_key``, each registered kind's own, then
    the item's timing."""
    own = [c for k in KINDS.values() for c in k.rating_columns if c not in SHARED]
    at = SHARED.index("prompt_id") + 1
    return [*SHARED[:at], "prompt_key", *SHARED[at:], *dict.fromkeys(own), *TIMES]


def ratings_table(data: TestData, times: pd.DataFrame) -> pd.DataFrame:
    """Every kind's rating rows of ``data``'s test, with ``prompt_key`` and ``times`` (per
    ``rater_id`` and ``assignment_id``: first sound, answer, and the two durations)."""
    cols = columns()
    rows = [c for c in cols if c not in TIMES]
    parts = []
    for kind in KINDS.values():
        got = kind.ratings(data)
        if got is not None and not got.empty:
            parts.append(got.assign(kind=kind.name))
    if not parts:
        return pd.DataFrame(columns=cols)
    df = pd.concat([p.reindex(columns=rows) for p in parts], ignore_index=True)
    prefix = f"{data.test_id}-"
    df["prompt_key"] = df["prompt_id"].map(
        lambda p: p[len(prefix) :] if isinstance(p, str) and p.startswith(prefix) else p
    )
    return df.merge(times, on=["rater_id", "assignment_id"], how="left").reindex(columns=cols)


__all__ = ["SHARED", "TIMES", "columns", "ratings_table"]
