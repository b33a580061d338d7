"""The declaration (:mod:`app.store.schema`) rendered for one engine, and the migrations that
bring a store of any earlier version to today's, on either engine, through its runner.

A registered kind's answer tables (declared in the kind's folder: :func:`app.store.schema.
all_tables`) follow the same steps; besides, a kind registered after a store was made (a
plug-in, the tests' toy) gets what the store lacks of its tables at the next read-write open
(:func:`reconcile`), on either engine, without moving the version.

Why derived and not written per engine: a version's migration is "the tables, columns and
indexes declared ``since`` it, then its data statements", the same for SQLite and PostgreSQL,
so a new column is one line of the declaration and there is no twin to forget. Every step
keeps what it finds (``IF NOT EXISTS``, a column added only when missing): a version-3 SQLite
file may already hold the arena's tables, which listenlabs before version 4 created beside the
schema, with or without their ``voter`` columns.

The version record is each engine's own: SQLite's ``PRAGMA user_version`` (in the file's
header, where every listenlab has kept it), PostgreSQL's ``schema_version`` table. A migration
runs in one write transaction; replicas or processes opening together take turns, and the
ones that wait find the work done. A read-only open never migrates: it refuses a store that
would change (:func:`check_version`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from app.store.records import StoreError
from app.store.schema import (
    DATA_MIGRATIONS,
    ENGINES_ALIKE,
    SCHEMA_VERSION,
    Column,
    Index,
    Table,
    kind_tables,
    newest,
    quoted,
    table,
    tables_of,
)

if TYPE_CHECKING:
    from app.store.sql import Runner

SQL_TYPES = {
    "sqlite": {"text": "TEXT", "integer": "INTEGER", "real": "REAL", "bytes": "BLOB"},
    "postgresql": {
        "text": 'TEXT COLLATE "C"',
        "integer": "BIGINT",
        "real": "DOUBLE PRECISION",
        "bytes": "BYTEA",
    },
}
"""Each declared type in each engine. PostgreSQL's TEXT compares byte by byte (``"C"``), as
SQLite's does, so ``ORDER BY`` a text column sorts alike whatever the server's locale."""


def column_sql(c: Column, engine: str, *, primary_key: bool = False) -> str:
    parts = [quoted(c.name), SQL_TYPES[engine][c.type]]
    if primary_key:
        parts.append("PRIMARY KEY")
    if c.not_null:
        parts.append("NOT NULL")
    if c.default is not None:
        parts.append(f"DEFAULT {c.default}")
    if c.check:
        parts.append(f"CHECK ({c.check})")
    if c.references:
        parts.append(f"REFERENCES {quoted(c.references[0])}({quoted(c.references[1])})")
    return " ".join(parts)


def create_table_sql(t: Table, engine: str, version: int = SCHEMA_VERSION) -> str:
    """``CREATE TABLE IF NOT EXISTS`` with the columns the table had at ``version``."""
    inline = t.primary_key[0] if len(t.primary_key) == 1 else None
    lines = [
        column_sql(c, engine, primary_key=c.name == inline)
        for c in t.columns
        if t.since_of(c) <= version
    ]
    if len(t.primary_key) > 1:
        lines.append(f"PRIMARY KEY ({', '.join(quoted(k) for k in t.primary_key)})")
    body = ",\n    ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {quoted(t.name)} (\n    {body}\n)"


def add_column_sql(t: Table, c: Column, engine: str) -> str:
    return f"ALTER TABLE {quoted(t.name)} ADD COLUMN {column_sql(c, engine)}"


def create_index_sql(t: Table, i: Index) -> str:
    cols = ", ".join(quoted(c) for c in i.columns)
    unique = "UNIQUE " if i.unique else ""
    return f"CREATE {unique}INDEX IF NOT EXISTS {quoted(i.name)} ON {quoted(t.name)} ({cols})"


def changes_at(version: int, engine: str) -> bool:
    """Whether ``version``'s migration does anything on ``engine``."""
    if DATA_MIGRATIONS.get(version) or (version == ENGINES_ALIKE and engine == "postgresql"):
        return True
    return any(
        t.since == version or any(t.since_of(p) == version for p in (*t.columns, *t.indexes))
        for t in tables_of(engine)
    )


class Migration:
    """One run from version ``have`` to ``want`` on one runner (inside its transaction):
    what each table holds is read once, then kept up to date as the steps change it."""

    def __init__(self, sql: Any, have: int, want: int):
        self.sql, self.have, self.want = sql, have, want
        self.engine: str = sql.engine
        self.existing = set(sql.table_names())
        self.columns: dict[str, set[str]] = {}
        self.indexed: set[str] = set()

    def run(self) -> None:
        for version in range(self.have + 1, self.want + 1):
            for t in tables_of(self.engine):
                if t.since <= version:
                    self.table_at(t, version)
            for stmt in DATA_MIGRATIONS.get(version, ()):
                self.sql.execute(stmt)
            if version == ENGINES_ALIKE and self.engine == "postgresql":
                self.bytewise_text()
                self.no_negative_zero()

    def table_at(self, t: Table, version: int) -> None:
        """Make ``t`` what ``version`` declares: create it, or add the columns it lacks."""
        declared = [c for c in t.columns if t.since_of(c) <= version]
        if t.name not in self.existing and t.name not in self.columns:
            self.sql.execute(create_table_sql(t, self.engine, version))
            self.columns[t.name] = {c.name for c in declared}
        else:
            if t.name not in self.columns:
                self.columns[t.name] = set(self.sql.columns(t.name))
            have = self.columns[t.name]
            for c in declared:
                if c.name not in have:
                    self.sql.execute(add_column_sql(t, c, self.engine))
                    have.add(c.name)
        for i in t.indexes:
            if t.since_of(i) <= version and i.name not in self.indexed:
                self.sql.execute(create_index_sql(t, i))
                self.indexed.add(i.name)

    def bytewise_text(self) -> None:
        """PostgreSQL stores made before :data:`ENGINES_ALIKE` sort text by the server's
        locale: each declared TEXT column is given the byte order (its indexes are rebuilt)."""
        rows = self.sql.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = 'text' "
            "AND coalesce(collation_name, '') <> 'C' ORDER BY table_name, ordinal_position"
        ).fetchall()
        declared = {t.name: t for t in tables_of(self.engine)}
        for name, col in rows:
            t = declared.get(name)
            if t is not None and col in t.names and t.column(col).type == "text":
                self.sql.execute(
                    f"ALTER TABLE {quoted(name)} ALTER COLUMN {quoted(col)} "
                    f"TYPE {SQL_TYPES['postgresql']['text']}"
                )

    def no_negative_zero(self) -> None:
        """A PostgreSQL store made before :data:`ENGINES_ALIKE` may hold -0.0 where SQLite
        would hold 0.0: each declared REAL column's negative zeros become 0.0 (one pass over
        each table)."""
        for t in tables_of(self.engine):
            cols = [quoted(c.name) for c in t.columns if c.type == "real"]
            if not cols or t.name not in self.existing:
                continue
            sets = ", ".join(f"{c} = CASE WHEN {c}::text = '-0' THEN 0 ELSE {c} END" for c in cols)
            where = " OR ".join(f"{c}::text = '-0'" for c in cols)
            self.sql.execute(f"UPDATE {quoted(t.name)} SET {sets} WHERE {where}")


def lacking(sql: Any) -> list[str]:
    """The registered kinds' answer tables (or their columns) the store does not have yet."""
    have = set(sql.table_names())
    out = []
    for t in kind_tables():
        if t.name not in have:
            out.append(t.name)
        else:
            cols = set(sql.columns(t.name))
            out += [f"{t.name}.{c}" for c in t.names if c not in cols]
    return out


def reconcile(sql: Any) -> list[str]:
    """Create what the store lacks of the registered kinds' answer tables: a table whole (its
    indexes with it), a column added; nothing is dropped (a kind unregistered leaves its rows
    where they are). Returns what was missing."""
    missing = lacking(sql)
    if missing:
        m = Migration(sql, SCHEMA_VERSION, SCHEMA_VERSION)
        for t in kind_tables():
            m.table_at(t, max(SCHEMA_VERSION, newest((t,))))
    return missing


def read_version(sql: Any) -> int:
    """The version the store is at (0: an empty database)."""
    if sql.engine == "sqlite":
        return int(sql.execute("PRAGMA user_version").fetchone()[0])
    if "schema_version" not in sql.table_names():
        return 0
    return int(sql.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0)


def write_version(sql: Any, version: int) -> None:
    if sql.engine == "sqlite":
        sql.execute(f"PRAGMA user_version = {int(version)}")
        return
    sql.execute("DELETE FROM schema_version")
    sql.execute("INSERT INTO schema_version (version) VALUES (?)", [int(version)])


def too_new(where: str, version: int) -> StoreError:
    return StoreError(
        f"{where} has schema version {version}; this listenlab knows up to "
        f"{SCHEMA_VERSION}: upgrade listenlab"
    )


def check_version(sql: Runner, where: str) -> None:
    """Refuse, on a read-only open, a store newer than this listenlab or one a migration
    would change (an older version whose later steps do nothing on this engine is read as
    it is)."""
    version = read_version(sql)
    if version > SCHEMA_VERSION:
        raise too_new(where, version)
    if any(changes_at(v, sql.engine) for v in range(version + 1, SCHEMA_VERSION + 1)):
        raise StoreError(
            f"{where} has schema version {version} (this listenlab writes "
            f"{SCHEMA_VERSION}); a read-only command does not migrate it: start "
            "`listenlab serve` on it once (or open it read-write) to upgrade it"
        )
    missing = lacking(sql)
    if missing:
        raise StoreError(
            f"{where} lacks the answer tables of a registered test kind ({', '.join(missing)}); "
            "a read-only command does not create them: start `listenlab serve` on it once "
            "(or open it read-write)"
        )


def migrate(sql: Runner, where: str) -> None:
    """Bring the store to :data:`SCHEMA_VERSION` in one transaction (refuses a newer one)."""
    with sql.transaction("listenlab:migrate") as tx:
        if tx.engine == "postgresql":
            tx.execute(create_table_sql(table("schema_version"), tx.engine))
        version = read_version(tx)
        if version > SCHEMA_VERSION:
            raise too_new(where, version)
        if version < SCHEMA_VERSION:
            Migration(tx, version, SCHEMA_VERSION).run()
            write_version(tx, SCHEMA_VERSION)
        elif (
            tx.engine == "postgresql" and not tx.execute("SELECT 1 FROM schema_version").fetchone()
        ):
            write_version(tx, SCHEMA_VERSION)
        reconcile(tx)


class BareSQLite:
    """A bare SQLite connection (``sqlite3`` or ``sqlite_utils``) as a migration's runner."""

    engine = "sqlite"

    def __init__(self, db: Any):
        self.db = db

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.db.execute(sql, list(params))

    def table_names(self) -> list[str]:
        q = "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        return [r[0] for r in self.db.execute(q).fetchall()]

    def columns(self, name: str) -> list[str]:
        return [r[1] for r in self.db.execute(f"PRAGMA table_info({quoted(name)})").fetchall()]


def apply_version(version: int, db: Any) -> None:
    """Version ``version``'s steps on a bare SQLite connection at ``version - 1`` (what a test
    uses to build a file as an older listenlab left it; the caller sets ``user_version``)."""
    Migration(BareSQLite(db), version - 1, version).run()


MIGRATIONS: dict[int, Callable[[Any], None]] = {
    v: partial(apply_version, v) for v in range(1, SCHEMA_VERSION + 1)
}
"""``{version: function(bare SQLite db)}``, derived from the declaration."""


__all__ = [
    "MIGRATIONS",
    "SQL_TYPES",
    "BareSQLite",
    "changes_at",
    "check_version",
    "column_sql",
    "create_index_sql",
    "create_table_sql",
    "lacking",
    "migrate",
    "read_version",
    "reconcile",
    "write_version",
]
