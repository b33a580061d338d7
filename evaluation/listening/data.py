"""The rows one listening test's analysis reads, handed over as DataFrames.

Why a dataclass and not the store: ``evaluation`` is analysis only and never imports ``app``;
the store (:meth:`app.store.listening.TestStore.test_data`) reads these frames and the
results (:mod:`evaluation.listening.results`), the report and a notebook compute from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class TestData:
    """One test: its row (kind, config) and every rating, vote, rater and mark of it."""

    __test__ = False  # not a pytest class

    test_id: str
    kind: str
    config: dict[str, Any]
    mos: pd.DataFrame
    """MOS ratings with the take's system, prompt and duration (``Store.mos_frame``)."""
    ab: pd.DataFrame
    """A/B votes with the prompt and both clips' durations (``Store.ab_frame``)."""
    mushra: pd.DataFrame
    raters: pd.DataFrame
    """One row per rater of the test with the answers they gave."""
    ab_checks: pd.DataFrame | None
    """The answered A/B check pairs (``expected``, ``choice``, ``cmos``; empty for the other
    kinds); None when not read."""
    glitches: pd.DataFrame
    """The test's glitch marks with the take's system, duration and chunk count."""
    findings: pd.DataFrame
    """Automatic findings on the takes the glitch marks are on."""
    answers: pd.DataFrame | None = None
    """Every answer row of the test (``answers``: kind, JSON payload, …): what a kind without
    a table of its own computes its results from. None when not read."""
    name: str = ""
    status: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


__all__ = ["TestData"]
