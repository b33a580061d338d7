"""The few SQLite moves every part of the store repeats: an idempotent insert, a row by key,
"does it exist", and a query as a DataFrame.

Why a base class: the takes, the ratings and the arena each write rows whose id comes from
the client, and a re-sent request must change nothing. Written once here, the rule is the
same for all of them (and the database, not Python, enforces it, so concurrent writers
cannot race past the check).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from app.store.records import AlreadyVoted, UnknownItem, Written
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    import pandas as pd
    import sqlite_utils


def to_json(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True)


def from_json(v: str | None, empty: Any = None) -> Any:
    return json.loads(v) if v else empty


def ab_item_key(take_a: str, take_b: str) -> str:
    """The same pair in either order is one item (so a rater cannot vote twice by swapping)."""
    a, b = sorted((take_a, take_b))
    return f"{a}|{b}"


EXISTING_KEYS = {
    "mos_ratings": ("rating_id", ("test_id", "rater_id", "take_id")),
    "ab_votes": ("vote_id", ("test_id", "rater_id", "item_key")),
    "assignments": ("assignment_id", ("test_id", "rater_id", "position")),
}
"""Per table with a "one per rater per item" key: its id column and the key's columns."""


class SQLiteTables:
    """Rows in this thread's connection (``db``, given by the subclass)."""

    @property
    def db(self) -> sqlite_utils.Database:
        raise NotImplementedError

    @contextlib.contextmanager
    def immediate(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction taken at once (``BEGIN IMMEDIATE``): what is read inside it
        cannot change before what is written inside it (a check, then its insert)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.conn.rollback()
            raise

    def read_frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        """A query's rows as a DataFrame (pandas loads on first use: the CLI lists without it)."""
        import pandas as pd

        cur = self.db.execute(sql, list(params))
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])

    def get_row(self, table: str, pk: str, value: str) -> dict[str, Any] | None:
        cur = self.db.execute(f'SELECT * FROM "{table}" WHERE "{pk}" = ?', [value])
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r, strict=True))

    def require_row(self, table: str, pk: str, value: str | None) -> None:
        """Raise :class:`UnknownItem` unless ``value`` is None or a row of ``table``."""
        if (
            value is not None
            and not self.db.execute(f'SELECT 1 FROM "{table}" WHERE "{pk}"=?', [value]).fetchone()
        ):
            raise UnknownItem(f"no {table[:-1]} {value!r} in the store")

    def insert_row(
        self, table: str, pk: str, row: dict[str, Any], unique_msg: str | None = None
    ) -> Written:
        """INSERT; a row with this pk already there means a re-send (created=False).

        A UNIQUE violation on another key (one vote per rater per item) raises AlreadyVoted.
        """
        cols = ", ".join(f'"{k}"' for k in row)
        qs = ", ".join("?" for _ in row)
        db = self.db
        try:
            db.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({qs})', list(row.values()))
            db.commit()
            return Written(row[pk], True)
        except sqlite3.IntegrityError as e:
            db.rollback()
            existing = db.execute(f'SELECT 1 FROM "{table}" WHERE "{pk}" = ?', [row[pk]]).fetchone()
            if existing:
                return Written(row[pk], False)
            if "UNIQUE" in str(e) and unique_msg:
                raise AlreadyVoted(unique_msg, self.existing_id(table, row)) from None
            if "FOREIGN KEY" in str(e):
                raise UnknownItem(f"{table}: a referenced row does not exist ({e})") from None
            raise

    def existing_id(self, table: str, row: dict[str, Any]) -> str:
        """The id of the row that holds ``row``'s "one per rater per item" key ('' if none)."""
        if table not in EXISTING_KEYS:
            return ""
        id_col, key = EXISTING_KEYS[table]
        where = " AND ".join(f"{k}=?" for k in key)
        r = self.db.execute(
            f"SELECT {id_col} FROM {table} WHERE {where}", [row[k] for k in key]
        ).fetchone()
        return r[0] if r else ""

    def frame(self, table: str) -> pd.DataFrame:
        """A whole table as a DataFrame (every table of the schema, plus ``underruns``)."""
        if table not in self.db.table_names():
            raise InvalidRequest(f"no table {table!r}; tables: {', '.join(self.db.table_names())}")
        return self.read_frame(f'SELECT * FROM "{table}"')


__all__ = ["EXISTING_KEYS", "SQLiteTables", "ab_item_key", "from_json", "to_json"]
