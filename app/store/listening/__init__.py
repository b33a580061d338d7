"""The listening-test tables of the store: tests' lifecycle, stimuli, raters' sessions, play
events, one answer per item, MUSHRA ratings, and the frames the results and the export read.

Why a package beside the core store: the store keeps takes, votes and marks for every part of
the app; this is what only listening tests need, and every SQL statement the rater flow, its
WebSocket handlers, the export and the CLI run is here (none outside the store). One facade,
:class:`TestStore`, made of four parts along the seams of a test:

* :mod:`app.store.listening.tests`: a test's life (created, opened, copied, its settings
  changed, deleted) and its stimuli;
* :mod:`app.store.listening.raters`: who joins, their session, the headphone screen;
* :mod:`app.store.listening.answers`: play events and one answer per item with the rows the
  test's kind keeps in its own tables, in one transaction, so an item is answered exactly once
  even with two tabs or a re-send;
* :mod:`app.store.listening.views`: the frames, in a total order, and
  :meth:`TestStore.test_data`, which hands a test's rows to the analysis
  (:class:`evaluation.listening.data.TestData`).
"""

from __future__ import annotations

from app.store.listening.answers import AnswerTables
from app.store.listening.raters import RaterTables
from app.store.listening.rows import (
    STATUSES,
    AnswerRow,
    RaterSession,
    ScreenRow,
    SettingChange,
    Stimulus,
    TestRow,
    TestSummary,
    token_hash,
)
from app.store.listening.tests import TestTables
from app.store.listening.views import TestViews


class TestStore(TestTables, RaterTables, AnswerTables, TestViews):
    """Listening-test reads and writes on top of a store (SQLite's or PostgreSQL's)."""

    __test__ = False  # not a pytest class


__all__ = [
    "STATUSES",
    "AnswerRow",
    "RaterSession",
    "ScreenRow",
    "SettingChange",
    "Stimulus",
    "TestRow",
    "TestStore",
    "TestSummary",
    "token_hash",
]
