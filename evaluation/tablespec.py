"""A table declared as plain data: its columns, keys, indexes, the version that added each, the
order its rows are read in, and the columns its frame borrows from another table.

Why here, below the app: a listening-test kind (``evaluation/listening/kinds/<kind>/``)
declares the table its answers are kept in, and ``evaluation`` never imports ``app``. The store
(:mod:`app.store.schema`) declares its own tables with these same types and renders every
table, its own and each registered kind's, for SQLite and PostgreSQL
(:mod:`app.store.migrations`); the SQL stays in ``app/store/``. Nothing here touches a
database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ENGINES = ("sqlite", "postgresql")
TYPES = ("text", "integer", "real", "bytes")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
"""A table's or a column's name: lower-case letters, digits and ``_`` (quoted anyway)."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "text"
    """One of :data:`TYPES`."""
    not_null: bool = False
    default: str | None = None
    """A SQL literal (``0``, ``'streaming'``)."""
    references: tuple[str, str] | None = None
    """``(table, column)`` of a foreign key."""
    check: str | None = None
    since: int | None = None
    """The schema version that added the column (None: its table's)."""
    exported: bool = True
    """False: left out of a test's raw export (``test_raters.token_hash``)."""


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool = False
    since: int | None = None


@dataclass(frozen=True)
class Lookup:
    """Columns a table's frame carries from a row of another table (an answer's take: its
    system, prompt and duration), which the store reads with a ``LEFT JOIN``."""

    table: str
    on: tuple[tuple[str, str], ...]
    """``(this table's column, that table's column)`` pairs the rows are matched on."""
    fields: tuple[tuple[str, str], ...]
    """``(that table's column, its name in the frame)``."""


@dataclass(frozen=True)
class Table:
    name: str
    since: int
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()
    order: tuple[str, ...] = ()
    """Columns every read of whole rows sorts by; it ends in a unique key (checked by
    ``tests/test_store_schema.py``)."""
    engines: tuple[str, ...] = ENGINES
    study: bool = True
    """Part of a study (copied by ``listenlab db copy``, checked by ``db check``); False for
    an engine's own bookkeeping."""
    per_test: bool = False
    """Its rows belong to one listening test (a ``test_id``): deleted with it."""
    exported: bool = False
    """Written to a test's raw export (``raw/<table>.csv``)."""
    reported: bool = False
    """Written whole to ``listenlab report``'s CSVs (``<table>.csv``) and counted on its page."""
    lookups: tuple[Lookup, ...] = ()
    """What the table's frame (``answer_frame``) borrows from other tables."""

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def since_of(self, part: Column | Index) -> int:
        return self.since if part.since is None else part.since

    @property
    def unique_keys(self) -> tuple[tuple[str, ...], ...]:
        """The primary key and every unique index's columns."""
        keys = (self.primary_key,) if self.primary_key else ()
        return keys + tuple(i.columns for i in self.indexes if i.unique)

    @property
    def frame_columns(self) -> tuple[str, ...]:
        """The columns of the table's frame: its own, then what its lookups borrow."""
        return self.names + tuple(alias for lk in self.lookups for _, alias in lk.fields)


def text(name: str, **kw) -> Column:
    return Column(name, "text", **kw)


def integer(name: str, **kw) -> Column:
    return Column(name, "integer", **kw)


def real(name: str, **kw) -> Column:
    return Column(name, "real", **kw)


def key(name: str, **kw) -> Column:
    """A NOT NULL text column (most of the listening tables' keys)."""
    return Column(name, "text", not_null=True, **kw)


def answer_table_problems(t: Table) -> list[str]:
    """Why ``t`` cannot be a test kind's answer table (empty: it can). Such a table holds one
    test's rows (``test_id``, ``per_test``) in a total order, on both engines, and every name
    in it is plain."""
    out = []
    names = t.names
    if not NAME_RE.match(t.name):
        out.append(f"table name {t.name!r} (lower-case letters, digits and _)")
    bad = [n for n in names if not NAME_RE.match(n)]
    if bad or len(set(names)) != len(names):
        out.append(f"{t.name}: column names must be plain and distinct ({bad or list(names)})")
    if any(c.type not in TYPES for c in t.columns):
        out.append(f"{t.name}: a column type outside {', '.join(TYPES)}")
    if "test_id" not in names or not t.per_test:
        out.append(f"{t.name}: a test_id column and per_test=True (deleted with its test)")
    if not t.order or not set(t.order) <= set(names):
        out.append(f"{t.name}: an order of its own columns (ending in a unique key)")
    if set(t.engines) != set(ENGINES):
        out.append(f"{t.name}: kept on both engines")
    for i in t.indexes:
        if not set(i.columns) <= set(names):
            out.append(f"{t.name}: index {i.name} names a column the table lacks")
    return out


__all__ = [
    "ENGINES",
    "NAME_RE",
    "TYPES",
    "Column",
    "Index",
    "Lookup",
    "Table",
    "answer_table_problems",
    "integer",
    "key",
    "real",
    "text",
]
