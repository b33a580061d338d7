"""What every part of the listening store shares: the store it sits on, its runner, three ways
to read rows, and a test's typed row.

Why a base: the parts (tests, raters, answers, views) are mixins of one facade,
:class:`app.store.listening.TestStore`; each reads through the same runner on either engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.store.listening.rows import TEST_COLUMNS, TestRow
from app.store.records import UnknownItem
from app.store.sql import rows_as_dicts

if TYPE_CHECKING:
    import pandas as pd

    from app.store.interface import StoreEngine
    from app.store.sql import Runner


class ListeningTables:
    """Listening-test reads and writes on top of a store (the parts' common base)."""

    __test__ = False  # not a pytest class

    def __init__(self, store: StoreEngine):
        self.store = store

    @property
    def db(self) -> Runner:
        """The store's engine-neutral runner (SQLite or PostgreSQL)."""
        return self.store.sql

    def read_rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return rows_as_dicts(self.db.execute(sql, list(params)))

    def read_frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        import pandas as pd

        cur = self.db.execute(sql, list(params))
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])

    def read_count(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.db.execute(sql, list(params)).fetchone()[0])

    def test_row(self, test_id: str) -> TestRow | None:
        r = self.db.execute(
            f"SELECT {', '.join(TEST_COLUMNS)} FROM tests WHERE test_id = ?", [test_id]
        ).fetchone()
        return None if r is None else TestRow.from_row(tuple(r))

    def require_test_row(self, test_id: str) -> TestRow:
        t = self.test_row(test_id)
        if t is None:
            raise UnknownItem(f"no test {test_id!r}")
        return t


__all__ = ["ListeningTables"]
