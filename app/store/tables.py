"""The few moves every part of the store repeats: an idempotent insert, a row by key,
"does it exist", and a query as a DataFrame.

Why a base class: the takes, the ratings and the arena each write rows whose id comes from
the client, and a re-sent request must change nothing. Written once here, the rule is the
same for all of them (and the database, not Python, enforces it, so concurrent writers
cannot race past the check).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.store.records import AlreadyVoted, UnknownItem, Written
from app.store.schema import all_tables, is_declared, order_by
from app.store.sql import ConstraintFailed
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    import pandas as pd

    from app.store.sql import Runner


def to_json(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True)


def from_json(v: str | None, empty: Any = None) -> Any:
    return json.loads(v) if v else empty


def ab_item_key(take_a: str, take_b: str) -> str:
    """The same pair in either order is one item (so a rater cannot vote twice by swapping)."""
    a, b = sorted((take_a, take_b))
    return f"{a}|{b}"


def existing_keys() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Per table with an id and a second unique key (one vote per rater per item): the id
    column and the key's columns, from the declaration (a registered kind's tables included)."""
    return {
        t.name: (t.primary_key[0], t.unique_keys[1])
        for t in all_tables()
        if len(t.primary_key) == 1 and len(t.unique_keys) > 1
    }


class Tables:
    """Rows through the engine's runner (``sql``, given by the subclass)."""

    @property
    def sql(self) -> Runner:
        raise NotImplementedError

    def immediate(self, lock: str = "store") -> contextlib.AbstractContextManager[Runner]:
        """One write transaction taken at once: what is read inside it cannot change before
        what is written inside it (a check, then its insert). ``lock`` names what it guards:
        on PostgreSQL only writers of the same name wait for each other."""
        return self.sql.transaction(lock)

    def read_frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        """A query's rows as a DataFrame (pandas loads on first use: the CLI lists without it)."""
        import pandas as pd

        cur = self.sql.execute(sql, list(params))
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])

    def get_row(self, table: str, pk: str, value: str) -> dict[str, Any] | None:
        cur = self.sql.execute(f'SELECT * FROM "{table}" WHERE "{pk}" = ?', [value])
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r, strict=True))

    def require_row(self, table: str, pk: str, value: str | None) -> None:
        """Raise :class:`UnknownItem` unless ``value`` is None or a row of ``table``."""
        if (
            value is not None
            and not self.sql.execute(f'SELECT 1 FROM "{table}" WHERE "{pk}"=?', [value]).fetchone()
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
        try:
            self.sql.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({qs})', list(row.values()))
            return Written(row[pk], True)
        except ConstraintFailed as e:
            existing = self.sql.execute(
                f'SELECT 1 FROM "{table}" WHERE "{pk}" = ?', [row[pk]]
            ).fetchone()
            if existing:
                return Written(row[pk], False)
            if e.kind == "unique" and unique_msg:
                raise AlreadyVoted(unique_msg, self.existing_id(table, row)) from None
            if e.kind == "foreign_key":
                raise UnknownItem(f"{table}: a referenced row does not exist ({e})") from None
            raise

    def existing_id(self, table: str, row: dict[str, Any]) -> str:
        """The id of the row that holds ``row``'s "one per rater per item" key ('' if none)."""
        keys = existing_keys()
        if table not in keys:
            return ""
        id_col, key = keys[table]
        where = " AND ".join(f"{k}=?" for k in key)
        r = self.sql.execute(
            f"SELECT {id_col} FROM {table} WHERE {where}", [row[k] for k in key]
        ).fetchone()
        return r[0] if r else ""

    def frame(self, table: str) -> pd.DataFrame:
        """A whole table as a DataFrame, in the table's declared order (the same rows in the
        same order on either engine)."""
        names = self.sql.table_names()
        if table not in names:
            raise InvalidRequest(f"no table {table!r}; tables: {', '.join(names)}")
        order = order_by(table) if is_declared(table) else ""
        return self.read_frame(f'SELECT * FROM "{table}" {order}')


__all__ = ["Tables", "ab_item_key", "existing_keys", "from_json", "to_json"]
