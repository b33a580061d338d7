"""One way to run SQL on either engine: a statement, a write transaction, a broken constraint.

Why a runner and not each engine's driver in every table module: the tables
(:mod:`app.store.takes`, :mod:`app.store.ratings`, :mod:`app.store.arena`,
:mod:`app.store.listening`) are written once, in the SQL both SQLite and PostgreSQL speak, with
``?`` placeholders. The runner of each engine (:class:`app.store.connection.SQLiteRunner`,
:class:`app.store.postgres.PgRunner`) gives them the same three things:

* ``execute(sql, params)``: one statement; outside a transaction a write is committed at once;
* ``transaction(lock)``: one write transaction in which what is read cannot change before what
  is written (a check, then its insert). SQLite takes its one write lock (``BEGIN IMMEDIATE``);
  PostgreSQL takes an advisory lock named ``lock``, so only writers of the same thing (one
  test's joins, the arena's battles) wait for each other, on every replica;
* :class:`ConstraintFailed` for a broken UNIQUE / FOREIGN KEY / NOT NULL / CHECK constraint,
  whatever the driver calls it, so "a re-sent vote changes nothing" is one rule.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

CONSTRAINTS = ("unique", "foreign_key", "not_null", "check", "other")


class ConstraintFailed(Exception):
    """A write broke a constraint; ``kind`` is one of :data:`CONSTRAINTS`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Cursor(Protocol):
    """What a statement gives back (sqlite3's cursor, or PostgreSQL's rows read at once)."""

    description: Any
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Runner(Protocol):
    """One engine's way to run the store's SQL (see the module doc)."""

    engine: str
    """``sqlite`` or ``postgresql``."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def transaction(self, lock: str = "store") -> contextlib.AbstractContextManager[Runner]: ...

    def table_names(self) -> list[str]: ...

    def columns(self, table: str) -> list[str]: ...


class Rows:
    """A statement's rows, read whole (PostgreSQL's connection goes back to the pool at once)."""

    def __init__(self, rows: list[tuple[Any, ...]], description: Any, rowcount: int):
        self.rows = rows
        self.description = description
        self.rowcount = rowcount
        self._next = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._next >= len(self.rows):
            return None
        self._next += 1
        return self.rows[self._next - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        out, self._next = self.rows[self._next :], len(self.rows)
        return out

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


def rows_as_dicts(cur: Cursor) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


__all__ = ["CONSTRAINTS", "ConstraintFailed", "Cursor", "Rows", "Runner", "rows_as_dicts"]
