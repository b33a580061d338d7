"""The store's one declaration of its tables (``app/store/schema.py``), read against both
engines: it is consistent, the list of tables is written nowhere else in the store, a store
made by any earlier listenlab (SQLite versions 1..6, PostgreSQL 4..6: their schemas as the
code of the time made them, in ``tests/store_history/``) migrates with its rows to exactly
what a new store is, and the store's modules import each other one way.

Real SQLite files, a real PostgreSQL server (the throwaway cluster of
``tests/support/postgres.py``, which runs wherever ``initdb`` is found)."""

from __future__ import annotations

import ast
import math
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from app.store import (
    SCHEMA_VERSION,
    BattleRecord,
    ListeningTest,
    Store,
    StoreError,
    System,
    open_store,
)
from app.store.copy import copy_order
from app.store.listening import TestRow, TestStore
from app.store.listening.tests import delete_order
from app.store.migrations import MIGRATIONS, SQL_TYPES, changes_at
from app.store.schema import TYPES, all_tables, export_tables, per_test_tables, table
from tests.support.postgres import available, pg_cluster_fixture, pg_url_fixture  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "tests" / "store_history"
TABLES = all_tables()
NAMES = {t.name for t in TABLES}


def test_schema_version_is_eight():
    """Version 7 made PostgreSQL sort text byte by byte; SQLite has nothing to do at it.
    Version 8 is the arena's second (#42)."""
    assert SCHEMA_VERSION == 8
    assert changes_at(7, "postgresql") and not changes_at(7, "sqlite")
    assert all(changes_at(v, "sqlite") for v in range(1, 7))
    assert changes_at(8, "sqlite") and changes_at(8, "postgresql")
    assert set(MIGRATIONS) == set(range(1, SCHEMA_VERSION + 1))


@pytest.mark.parametrize("t", TABLES, ids=lambda t: t.name)
def test_each_table_is_declared_consistently(t):
    names = [c.name for c in t.columns]
    assert len(set(names)) == len(names)
    assert all(c.type in TYPES for c in t.columns)
    assert 1 <= t.since <= SCHEMA_VERSION
    sinces = [t.since_of(c) for c in t.columns]
    assert sinces == sorted(sinces), "columns are listed in the order migrations added them"
    assert sinces[0] == t.since and max(sinces) <= SCHEMA_VERSION
    assert set(t.primary_key) <= set(names)
    for i in t.indexes:
        assert set(i.columns) <= set(names) and t.since_of(i) >= t.since
        assert t.since_of(i) >= max(t.since_of(t.column(c)) for c in i.columns)
    before = {u.name for u in TABLES[: TABLES.index(t)]}
    for c in t.columns:  # a table comes after the tables it references: the copy order
        assert c.references is None or c.references[0] in before | {t.name}
    # the order is total: it holds a unique key (a per-test table is read one test at a time)
    assert t.order and set(t.order) <= set(names)
    known = set(t.order) | ({"test_id"} if t.per_test else set())
    assert any(set(k) <= known for k in t.unique_keys) or t.name == "schema_version"
    assert not t.exported or (t.per_test and "test_id" in names)
    assert not t.per_test or "test_id" in names


def test_the_orders_are_read_from_the_declaration():
    assert tuple(t.name for t in TABLES if t.study) == copy_order()
    assert set(copy_order()) == NAMES - {"take_audio", "login_failures", "schema_version"}
    assert tuple(reversed(per_test_tables())) == delete_order() and delete_order()[-1] == "tests"
    assert tuple(t.name for t in TABLES if t.exported) == export_tables()
    assert set(export_tables()) == set(per_test_tables()) - {"tests", "test_changes"}
    assert [c.name for c in table("test_raters").columns if not c.exported] == ["token_hash"]
    assert tuple(TestRow.__dataclass_fields__) == table("tests").names


def _table_lists(tree: ast.AST) -> list[tuple[int, list[str]]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elts = node.elts
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        else:
            continue
        words = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(words) >= 3 and len(words) == len(elts) and set(words) <= NAMES:
            out.append((node.lineno, words))
    return out


def test_the_list_of_tables_is_written_once():
    """No module of the store but the declaration lists three or more tables by name (the
    copy, export and delete orders, the engine-only tables used to be such lists)."""
    found = []
    for p in sorted((ROOT / "app" / "store").rglob("*.py")):
        if p.name == "schema.py" and p.parent.name == "store":
            continue
        for line, words in _table_lists(ast.parse(p.read_text(encoding="utf-8"))):
            found.append(f"{p.relative_to(ROOT)}:{line} {words}")
    assert not found, "\n".join(found)
    assert _table_lists(ast.parse("x = ('systems', 'takes', 'chunks')"))  # the check sees one


def _imports(path: Path, module: str) -> set[str]:
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            mod = node.module if not node.level else f"{pkg}.{node.module}"
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_the_store_modules_import_one_way():
    """No circle among the store's modules, lazy imports included (``Store.open`` used to
    return a PostgreSQL store: sqlite → postgres → copy → sqlite)."""
    mods = {}
    for p in (ROOT / "app" / "store").rglob("*.py"):
        rel = p.relative_to(ROOT).with_suffix("")
        mods[".".join(rel.parts).removesuffix(".__init__")] = p
    graph = {m: {i for i in _imports(p, m) if i in mods and i != m} for m, p in mods.items()}
    cycles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" → ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not cycles, "\n".join(sorted(cycles))
    assert "app.store.postgres" not in graph["app.store.sqlite"]
    assert "app.store" not in set().union(*graph.values())  # nothing inside uses the facade


def test_no_class_of_the_store_passes_400_lines():
    sizes = {}
    for p in (ROOT / "app" / "store").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                sizes[f"{p.relative_to(ROOT)}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert max(sizes.values()) <= 400, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    assert sizes["app/store/listening/__init__.py:TestStore"] < 20  # the facade, no body


def test_store_open_is_sqlite_only_and_open_store_picks(tmp_path):
    with pytest.raises(StoreError, match="open_store"):
        Store.open("postgresql://u@localhost/x")
    with open_store(tmp_path / "a.db") as s:
        assert isinstance(s, Store) and s.engine == "sqlite"


def test_postgres_tests_run_wherever_initdb_is():
    if shutil.which("initdb") or Path("/usr/lib/postgresql").is_dir():
        assert available()


# -- stores made by earlier listenlabs


def _affinity(decl: str) -> str:
    d = decl.upper()
    if "INT" in d:
        return "INTEGER"
    if any(w in d for w in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not d or "BLOB" in d:
        return "BLOB"
    return "REAL" if any(w in d for w in ("REAL", "FLOA", "DOUB")) else "NUMERIC"


def sqlite_shape(con: sqlite3.Connection) -> dict[str, dict]:
    """What a SQLite schema promises, per table: columns in order (affinity, NOT NULL,
    default, key position), indexes (named ones by name), foreign keys."""
    shape = {}
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for t in sorted(names):
        cols = [
            (r[1], _affinity(r[2]), r[3], r[4], r[5])
            for r in con.execute(f'PRAGMA table_info("{t}")')
        ]
        idx = set()
        for _, name, unique, origin, _ in con.execute(f'PRAGMA index_list("{t}")'):
            cols_of = tuple(r[2] for r in con.execute(f'PRAGMA index_info("{name}")'))
            idx.add((None if origin == "pk" else name, cols_of, unique))
        fks = {(r[3], r[2], r[4]) for r in con.execute(f'PRAGMA foreign_key_list("{t}")')}
        shape[t] = {"columns": cols, "indexes": idx, "fks": fks}
    return shape


def _old_sqlite(path: Path, version: int) -> None:
    """A file as listenlab left it at ``version``, with a few rows."""
    con = sqlite3.connect(path)
    con.executescript((HISTORY / f"sqlite_v{version}.sql").read_text())
    con.execute(f"PRAGMA user_version = {version}")
    con.execute("INSERT INTO systems (system_id, backend) VALUES ('s1', 'piper')")
    if version == 1:
        con.execute("INSERT INTO tests (test_id, kind, name) VALUES ('t1', 'mos', 'old')")
    else:
        con.execute(
            "INSERT INTO tests (test_id, kind, name, status) VALUES ('t1', 'mos', 'old', 'closed')"
        )
    con.execute("INSERT INTO raters (rater_id) VALUES ('r1')")
    con.execute(
        "INSERT INTO mos_ratings (rating_id, test_id, rater_id, take_id, score, role) "
        "VALUES ('m1', 't1', 'r1', 'k1', 4.5, 'item')"
    )
    if version >= 2:
        con.execute(
            "INSERT INTO test_raters (test_id, rater_id, token_hash, seq) "
            "VALUES ('t1', 'r1', 'h', 0)"
        )
    if version >= 4:
        con.execute("INSERT INTO arena_meta (key, value) VALUES ('setting:min_votes', '7')")
    con.commit()
    con.close()


@pytest.mark.parametrize("version", range(1, 7))
def test_an_old_sqlite_store_migrates_with_its_rows(tmp_path, version):
    """Each earlier version's file becomes what a new file is (same tables, columns in the
    same order, keys, indexes, foreign keys) and keeps its rows; version 2's data step gives
    a version-1 test its status."""
    _old_sqlite(tmp_path / "old.db", version)
    with Store.open(tmp_path / "old.db") as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.frame("systems")["system_id"].tolist() == ["s1"]
        assert s.frame("tests")["status"].tolist() == ["open" if version == 1 else "closed"]
        assert s.answer_frame("mos_ratings", "t1")["score"].tolist() == [4.5]
        if version >= 2:
            assert TestStore(s).rater("t1", "r1").seq == 0
        if version >= 4:
            assert s.arena.setting("min_votes") == "7"
        migrated = sqlite_shape(s.conn)
    with Store.open(tmp_path / "new.db") as s:
        assert sqlite_shape(s.conn) == migrated
    with Store.open(tmp_path / "old.db") as s:  # opening again changes nothing
        assert s.schema_version == SCHEMA_VERSION and sqlite_shape(s.conn) == migrated


def test_a_read_only_open_refuses_a_sqlite_file_a_migration_would_change(tmp_path):
    """SQLite has nothing to do at version 7, but version 8 adds the arena's columns:
    a version-6 file needs ``serve`` to migrate it first, as a version-5 one does."""
    _old_sqlite(tmp_path / "v6.db", 6)
    with pytest.raises(StoreError, match="schema version 6 .*start `listenlab serve`"):
        Store.open(tmp_path / "v6.db", read_only=True)
    _old_sqlite(tmp_path / "v5.db", 5)
    with pytest.raises(StoreError, match="schema version 5 .*start `listenlab serve`"):
        Store.open(tmp_path / "v5.db", read_only=True)


def test_the_bare_migrations_build_an_old_file(tmp_path):
    """``MIGRATIONS[v](db)`` (what other tests use to build an old file) makes, version by
    version, exactly the schema the code of the time made."""
    for version in range(1, 7):
        con = sqlite3.connect(tmp_path / f"bare{version}.db")
        for v in range(1, version + 1):
            MIGRATIONS[v](con)
        con.commit()
        old = sqlite3.connect(":memory:")
        old.executescript((HISTORY / f"sqlite_v{version}.sql").read_text())
        assert sqlite_shape(con) == sqlite_shape(old), version
        con.close()


def pg_shape(store) -> dict[str, dict]:
    """What a PostgreSQL schema promises, per table: columns in order (type, collation,
    nullable, default), named indexes with their columns and uniqueness, foreign keys."""
    q = store.sql.execute
    shape: dict[str, dict] = defaultdict(lambda: {"columns": [], "indexes": set(), "fks": set()})
    for t, c, typ, coll, null, dflt in q(
        "SELECT table_name, column_name, data_type, collation_name, is_nullable, "
        "column_default FROM information_schema.columns WHERE table_schema = current_schema() "
        "ORDER BY table_name, ordinal_position"
    ).fetchall():
        shape[t]["columns"].append((c, typ, coll, null, dflt))
    for t, name, definition in q(
        "SELECT tablename, indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = current_schema() AND indexname NOT LIKE '%_pkey'"
    ).fetchall():
        shape[t]["indexes"].add((name, definition.split(" USING ", 1)[1]))
    for t, c, ft, fc in q(
        "SELECT tc.table_name, kcu.column_name, ccu.table_name, ccu.column_name "
        "FROM information_schema.table_constraints tc "
        "JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name "
        "JOIN information_schema.constraint_column_usage ccu "
        "ON ccu.constraint_name = tc.constraint_name "
        "WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = current_schema()"
    ).fetchall():
        shape[t]["fks"].add((c, ft, fc))
    return dict(shape)


def _old_postgres(url: str, version: int) -> None:
    import psycopg

    stmts = [s for s in (HISTORY / f"postgresql_v{version}.sql").read_text().split(";\n")]
    with psycopg.connect(url, autocommit=True) as con:
        for s in stmts:
            body = "\n".join(ln for ln in s.splitlines() if not ln.startswith("--")).strip()
            if body:
                con.execute(body)
        con.execute("INSERT INTO schema_version (version) VALUES (%s)", [version])
        for sid in ("b", "a", "_z", "A"):
            con.execute(
                "INSERT INTO systems (system_id, backend, created_at) VALUES (%s, 'piper', 'x')",
                [sid],
            )
        con.execute(
            "INSERT INTO tests (test_id, kind, name, status) VALUES ('t1','mos','o','open')"
        )
        con.execute(  # a negative zero, which PostgreSQL kept before version 7
            "INSERT INTO arena_battles (battle_id, owner, text, text_source, system_a, system_b, "
            "created_ts, created_at, played_a_ts) VALUES ('b1','o','t','p','x','y',1,'c',"
            "'-0'::float8)"
        )


@pytest.mark.parametrize("version", [4, 5, 6])
def test_an_old_postgres_store_migrates_with_its_rows(pg_cluster, tmp_path, version):
    """Each earlier PostgreSQL store (here on a server whose databases sort text as English
    does, as managed servers' often do) becomes what a new one is: the same columns, types,
    keys and indexes, every text column sorted byte by byte, the rows kept and read back in
    the same order SQLite reads them."""
    old = pg_cluster.new_database(icu_locale="en-US")
    new = pg_cluster.new_database(icu_locale="en-US")
    try:
        _old_postgres(old, version)
        with pytest.raises(StoreError, match=f"schema version {version} .*does not migrate"):
            open_store(old, read_only=True, local_dir=tmp_path)
        with open_store(old, local_dir=tmp_path) as s:
            assert s.schema_version == SCHEMA_VERSION
            assert s.frame("systems")["system_id"].tolist() == ["A", "_z", "a", "b"]
            assert s.frame("tests")["name"].tolist() == ["o"]
            (zero,) = s.sql.execute("SELECT played_a_ts FROM arena_battles").fetchone()
            assert zero == 0.0 and math.copysign(1.0, zero) == 1.0
            migrated = pg_shape(s)
        with open_store(new, local_dir=tmp_path) as s:
            assert pg_shape(s) == migrated
        text_cols = [c for t in migrated.values() for c in t["columns"] if c[1] == "text"]
        assert text_cols and {c[2] for c in text_cols} == {"C"}
    finally:
        pg_cluster.drop_database(old)
        pg_cluster.drop_database(new)


def test_both_engines_sort_text_byte_by_byte(pg_cluster, tmp_path):
    """One study's rows come back in one order on SQLite and on a PostgreSQL database whose
    own rules sort ``a`` before ``B`` and skip ``_``: UTF-8 byte order, as SQLite's."""
    url = pg_cluster.new_database(icu_locale="en-US")
    ids = ["b", "B", "a", "_z", "A", "é", "Z", "a-1", "a_1"]
    try:
        got = []
        for target in (tmp_path / "lab.db", url):
            with open_store(target, local_dir=tmp_path) as s:
                for i in ids:
                    s.add_system(System(i, "piper", created_at="2026-01-01T00:00:00.000+00:00"))
                got.append(s.frame("systems")["system_id"].tolist())
        assert got[0] == got[1] == sorted(ids, key=lambda x: x.encode())
        import psycopg

        with psycopg.connect(url) as con:  # the server's own order differs: the test can fail
            own = [
                r[0] for r in con.execute("SELECT x FROM unnest(%s::text[]) x ORDER BY x", [ids])
            ]
        assert own != got[1]
    finally:
        pg_cluster.drop_database(url)


def test_a_negative_zero_reads_back_as_zero_on_both_engines(pg_url, tmp_path):
    """SQLite's REAL columns cannot keep the sign of a zero (they store -0.0 as the integer
    0); PostgreSQL writes -0.0 as 0.0 too, so one study reads and exports alike on both."""
    lite = sqlite3.connect(":memory:")
    lite.execute("CREATE TABLE t (x REAL)")
    lite.execute("INSERT INTO t VALUES (?)", [-0.0])
    assert math.copysign(1.0, lite.execute("SELECT x FROM t").fetchone()[0]) == 1.0  # SQLite's
    for target in (tmp_path / "lab.db", pg_url):
        with open_store(target, local_dir=tmp_path) as s:
            s.add_test(ListeningTest("t1", "mos"))
            s.arena.add_battle(BattleRecord("b1", "o", "t", "p", "x", "y", -0.0), "v", lambda w: 0)
            (ts,) = s.sql.execute("SELECT created_ts FROM arena_battles").fetchone()
            assert ts == 0.0 and math.copysign(1.0, ts) == 1.0, s.engine


def test_the_store_docs_say_what_the_declaration_does():
    """docs/statistics.md's store section names the version, every table, both engines' types
    as rendered, and the pool's numbers; docs/architecture.md points at the declaration."""
    from app.store.postgres import DEFAULT_POOL, MAX_POOL, POOL_TIMEOUT_S

    page = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    store = page.split("## Statistics", 1)[0]
    assert f"the schema is at version {SCHEMA_VERSION}." in store
    for t in TABLES:
        assert f"`{t.name}`" in store, t.name
    pg = SQL_TYPES["postgresql"]
    row = (
        f"TEXT `{pg['text'].removeprefix('TEXT ')}`, {pg['integer']} for INTEGER, "
        f"{pg['real']} for REAL, {pg['bytes']} for BLOB"
    )
    assert row in store
    assert ", ".join(SQL_TYPES["sqlite"].values()) in store
    assert f"at most {DEFAULT_POOL} (`?pool_size=N`, 1..{MAX_POOL})" in store
    assert f"waits up to {POOL_TIMEOUT_S:g} s" in store
    arch = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "`Column(..., since=N)` in `app/store/schema.py`" in arch
    assert "app/store/listening.py" not in arch + page
