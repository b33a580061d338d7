"""The rows one listening test's analysis reads, handed over as DataFrames.

Why a dataclass and not the store: ``evaluation`` is analysis only and never imports ``app``;
the store (:meth:`app.store.listening.TestStore.test_data`) reads these frames and the
results (:mod:`evaluation.listening.results`), the report and a notebook compute from them.
Nothing here names a kind: a kind's answers are in :attr:`TestData.tables` under the names
its folder declares (:attr:`evaluation.listening.kinds.base.TestKind.tables`), or in
:attr:`TestData.answers` for a kind with no table of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class TestData:
    """One test: its row (kind, config) and every answer, rater and check of it."""

    __test__ = False  # not a pytest class

    test_id: str
    kind: str
    config: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    """Every registered kind's answer table, this test's rows, by the table's name (the
    store's ``answer_frame``: with what the table's lookups borrow, such as an answer's
    take's system, prompt and duration)."""
    raters: pd.DataFrame
    """One row per rater of the test with the answers they gave."""
    checks: pd.DataFrame | None = None
    """Every answered check item (``role`` other than ``item``): ``rater_id``,
    ``assignment_id``, ``kind``, ``role``, ``expected``, the answer's JSON ``payload``."""
    findings: pd.DataFrame | None = None
    """Automatic findings on the test's stimuli (with the take's system)."""
    answers: pd.DataFrame | None = None
    """Every answer row of the test (``answers``: kind, JSON payload, …): what a kind without
    a table of its own computes its results from. None when not read."""
    stimuli: pd.DataFrame | None = None
    """The test's stimuli: ``take_id``, ``system_id`` (pseudo systems of the check stimuli
    included: ``__anchor__``, ``__gold__``, ``__trap__``), ``prompt_id``, ``kind``."""
    name: str = ""
    status: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        """One answer table's frame (empty when the store has none of that name)."""
        import pandas as pd

        got = self.tables.get(name)
        return got if got is not None else pd.DataFrame()


__all__ = ["TestData"]
