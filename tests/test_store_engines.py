"""What only a second engine needs: the PostgreSQL schema matches SQLite's, a study moves both
ways (``listenlab db copy``) with equal counts and checksums, and what replicas share (the
balanced design's rows, the arena's voter limits, the admin's login back-off) holds when two
stores (two pools, as two replicas have) write at once. Real SQLite, real PostgreSQL."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from app.store import (
    AbVote,
    ArenaVote,
    BattleRecord,
    GlitchReport,
    ListeningTest,
    MosRating,
    PgStore,
    Prompt,
    Store,
    StoreError,
    System,
    open_store,
)
from app.store.copy import copy_order, digests
from app.store.listening import TestStore
from app.store.schema import all_tables
from app.store.urls import masked
from app.web.ratelimit import LoginThrottle
from backends.base import SpeechRequest
from backends.errors import InvalidRequest
from evaluation.takes import record
from tests.support.postgres import pg_cluster_fixture, pg_url_fixture  # noqa: F401
from tests.support.replicas import Replica, free_port

ROOT = Path(__file__).resolve().parents[1]
PG_TYPES = {
    "TEXT": "text",
    "INTEGER": "bigint",
    "REAL": "double precision",
    "FLOAT": "double precision",
}


@pytest.fixture(scope="module")
def takes(piper_det):
    async def go():
        return [
            await record(piper_det, SpeechRequest(text="One take for the copy. It has two parts.")),
            await record(piper_det, SpeechRequest(text="Another take, a little shorter.")),
        ]

    return asyncio.run(go())


def _unique_indexes_sqlite(con: sqlite3.Connection, table: str) -> set[tuple[str, ...]]:
    out = set()
    for _, name, unique, _origin, _ in con.execute(f'PRAGMA index_list("{table}")'):
        if unique:
            out.add(tuple(r[2] for r in con.execute(f'PRAGMA index_info("{name}")')))
    return out


def _unique_indexes_pg(pg: PgStore, table: str) -> set[tuple[str, ...]]:
    rows = pg.sql.execute(
        "SELECT i.indexrelid, a.attname, k.n FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indrelid "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
        "WHERE c.relname = ? AND i.indisunique ORDER BY i.indexrelid, k.n",
        [table],
    ).fetchall()
    idx: dict[int, list[str]] = {}
    for oid, col, _ in rows:
        idx.setdefault(oid, []).append(col)
    return {tuple(v) for v in idx.values()}


def test_postgres_schema_is_sqlites(tmp_path, pg_url):
    """Same tables, same columns in the same order, the mapped types, the same NOT NULLs and
    the same unique keys: what a SQLite study holds fits, and "one vote per item" is the
    same rule (both rendered from the one declaration, app/store/schema.py)."""
    lite = Store.open(tmp_path / "lab.db")
    pg = open_store(pg_url, local_dir=tmp_path)
    con = lite.conn
    lite_tables = set(lite.sql.table_names())
    pg_only = {t.name for t in all_tables() if t.engines == ("postgresql",)}
    assert pg_only == {"take_audio", "login_failures", "schema_version"}
    assert lite_tables == set(pg.sql.table_names()) - pg_only
    assert lite_tables == set(copy_order())
    for t in sorted(lite_tables):
        info = con.execute(f'PRAGMA table_info("{t}")').fetchall()
        cols = pg.sql.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
            [t],
        ).fetchall()
        assert [r[1] for r in info] == [c[0] for c in cols], t
        for (_, name, typ, notnull, _, _pk), (_, pg_type, nullable) in zip(info, cols, strict=True):
            assert PG_TYPES[typ.upper()] == pg_type, (t, name)
            if notnull:
                assert nullable == "NO", (t, name)
        assert _unique_indexes_sqlite(con, t) <= _unique_indexes_pg(pg, t), t
    lite.close()
    pg.close()


def _study(store, takes) -> None:
    """A small study on every kind of table: takes with audio, votes, a listening test's
    rater, the arena's battle and vote and settings."""
    store.add_system(System("piper", "piper?deterministic=1", voice="joe", params={"speed": 1.0}))
    store.add_prompt(Prompt("p1", "One take for the copy."))
    for t in takes:
        store.save_take(t, system_id="piper", prompt_id="p1")
    a, b = takes[0].take_id, takes[1].take_id
    store.add_test(ListeningTest("mos1", "mos", config={"n": 2}))
    store.add_test(ListeningTest("ab1", "ab"))
    store.add_mos_rating(MosRating("v1", "mos1", "r1", a, 4, played_ms=3000.5))
    store.add_mos_rating(MosRating("v2", "mos1", "r2", b, 2.5))
    store.add_ab_vote(AbVote("ab-1", "ab1", "r1", a, b, "b", cmos=2))
    store.add_glitch_report(GlitchReport("g1", a, "r1", 120.0, kind="click"))
    store.record_underruns(a, 2, 340.0, [1200.0], report_id="u1")
    store.add_auto_findings(a, [{"kind": "gap", "time_s": 1.0, "severity": 2.0}])
    TestStore(store).join("mos1", "tok-1", "crowd-1", "prolific")
    store.arena.add_battle(
        BattleRecord("bt1", "own", "Hello arena.", "prompt", "x", "y", 1000.0),
        "voter",
        lambda w: None,
    )
    store.arena.add_vote(ArenaVote("bt1", "a", "x", "y", "prompt", 1500.0, 1001.0, "voter"))
    store.arena.set_setting("min_votes", "5")


def _copy(src: str, dst: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "db", "copy", src, dst],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "LISTENLAB_DATA": str(cwd), "HOME": str(cwd)},
    )


def test_db_copy_sqlite_to_postgres_and_back(tmp_path, pg_url, takes):
    """The same study on SQLite, on PostgreSQL and on SQLite again: equal row counts and
    checksums for every table and the audio, and the takes play the same samples."""
    first = tmp_path / "first.db"
    with Store.open(first) as s:
        _study(s, takes)
    want = [(c.table, c.rows, c.digest) for c in digests(Store.open(first, read_only=True))]
    out = _copy(str(first), pg_url, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "every count and checksum matches" in out.stdout
    assert "mos_ratings" in out.stdout and "(take audio)" in out.stdout
    with open_store(pg_url, read_only=True, local_dir=tmp_path / "pg-local") as pg:
        assert [(c.table, c.rows, c.digest) for c in digests(pg)] == want
        assert np.array_equal(pg.load_take(takes[0].take_id).audio, takes[0].audio)
        assert pg.arena.setting("min_votes") == "5" and pg.arena.vote_count() == 1
    back = tmp_path / "back" / "lab.db"
    out = _copy(pg_url, str(back), tmp_path)
    assert out.returncode == 0, out.stderr
    with Store.open(back, read_only=True) as s:
        assert [(c.table, c.rows, c.digest) for c in digests(s)] == want
        assert np.array_equal(s.load_take(takes[1].take_id).audio, takes[1].audio)
        assert s.answer_frame("mos_ratings", "mos1")["score"].tolist() == [4.0, 2.5]
    # a checksum sees what a count cannot: one changed score
    with Store.open(back) as s:
        s.sql.execute("UPDATE mos_ratings SET score = 3 WHERE rating_id = 'v1'")
    with Store.open(back, read_only=True) as s:
        got = {c.table: (c.rows, c.digest) for c in digests(s)}
    w = {t: (n, d) for t, n, d in want}
    assert got["mos_ratings"][0] == w["mos_ratings"][0]
    assert got["mos_ratings"][1] != w["mos_ratings"][1]
    assert all(got[t] == w[t] for t in w if t != "mos_ratings")


def test_db_copy_refuses_a_full_destination_and_changes_nothing(tmp_path, pg_url, takes):
    src = tmp_path / "a.db"
    with Store.open(src) as s:
        _study(s, takes)
    with open_store(pg_url, local_dir=tmp_path) as pg:
        pg.add_system(System("other", "piper"))
    out = _copy(str(src), pg_url, tmp_path)
    assert out.returncode == 1
    assert "already holds rows (in systems)" in out.stderr
    with open_store(pg_url, read_only=True, local_dir=tmp_path) as pg:
        assert pg.frame("systems")["system_id"].tolist() == ["other"]
        assert pg.frame("takes").empty


def test_db_check_prints_counts_and_checksums(tmp_path, takes):
    db = tmp_path / "a.db"
    with Store.open(db) as s:
        _study(s, takes)
        want = {c.table: c for c in digests(s)}
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "db", "check", str(db)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: ln.split() for ln in out.stdout.splitlines()[2:] if ln.strip()}
    assert lines["mos_ratings"][1:] == ["2", want["mos_ratings"].digest]
    assert lines["(take"][2:] == ["2", want["(take audio)"].digest]


def test_nul_in_text_is_a_clear_error_on_postgres(tmp_path, pg_url):
    """PostgreSQL cannot keep a NUL character in text (SQLite can): a hostile name is a clear
    400-class error and nothing is stored."""
    with open_store(pg_url, local_dir=tmp_path) as pg:
        with pytest.raises(InvalidRequest, match="NUL"):
            pg.add_system(System("evil\x00", "piper"))
        assert pg.frame("systems").empty
        pg.add_system(System("fine", "piper"))  # the pool's connection is still usable
        assert pg.frame("systems")["system_id"].tolist() == ["fine"]


def test_read_only_postgres_refuses_writes(tmp_path, pg_url):
    open_store(pg_url, local_dir=tmp_path).close()
    with (
        open_store(pg_url, read_only=True, local_dir=tmp_path) as ro,
        pytest.raises(StoreError, match="opened read-only"),
    ):
        ro.add_system(System("x", "piper"))


def test_unreachable_server_and_bad_pool_size_are_clear(tmp_path):
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL"):
        PgStore.open(
            f"postgresql://nobody@/x?host={tmp_path}&connect_timeout=1",
            local_dir=tmp_path,
            connect_timeout_s=1.5,
        )
    with pytest.raises(InvalidRequest, match="pool_size"):
        open_store("postgresql://u:secret@localhost/x?pool_size=0", local_dir=tmp_path)


def _replicas(url: str, tmp_path: Path, n: int = 2) -> list[PgStore]:
    return [open_store(url, local_dir=tmp_path / f"r{i}") for i in range(n)]


def test_concurrent_joins_on_two_replicas_get_distinct_rows(tmp_path, pg_url):
    """24 raters join one test at once through two stores: every seq is distinct and the
    design rows are handed out evenly (the least used first), none twice too often."""
    a, b = _replicas(pg_url, tmp_path)
    TestStore(a).create_test("t1", "mos", "join race", {}, status="open")
    rows_used: list[int] = []
    barrier = threading.Barrier(24)
    errors: list[BaseException] = []

    def least_used(rows):
        counts = [0] * 6
        for r in rows:
            counts[r.row] += 1
        return counts.index(min(counts))

    def join(k: int) -> None:
        try:
            barrier.wait()
            store = (a, b)[k % 2]
            rater, resumed = TestStore(store).join(
                "t1", f"tok-{k}", f"crowd-{k}", "x", choose_row=least_used
            )
            assert not resumed
            rows_used.append(int(rater.design_row))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=join, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = sorted(TestStore(a).raters_frame("t1")["seq"].tolist())
    assert seqs == list(range(24))
    assert sorted(rows_used) == sorted(list(range(6)) * 4)  # every row exactly 4 times
    a.close()
    b.close()


def test_voter_limit_holds_across_replicas(tmp_path, pg_url):
    """One voter, a limit of 3 votes, 12 votes sent at once through two stores: 3 are kept."""
    a, b = _replicas(pg_url, tmp_path)
    for i in range(12):
        a.arena.add_battle(
            BattleRecord(f"b{i}", "own", "t", "prompt", "x", "y", 100.0 + i), "v", lambda w: None
        )
    barrier = threading.Barrier(12)
    kept: list[bool] = []
    refused: list[int] = []

    def vote(i: int) -> None:
        store = (a, b)[i % 2]

        def check() -> None:
            if store.arena.votes_since("v", 0.0)[0] >= 3:
                raise InvalidRequest("over the limit")

        barrier.wait()
        try:
            kept.append(
                store.arena.add_vote(
                    ArenaVote(f"b{i}", "a", "x", "y", "prompt", 1.0, 200.0, "v"), check
                )
            )
        except InvalidRequest:
            refused.append(i)

    threads = [threading.Thread(target=vote, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert a.arena.vote_count() == 3 and kept == [True] * 3 and len(refused) == 9
    a.close()
    b.close()


def test_login_backoff_is_shared_by_replicas(tmp_path, pg_url):
    """Three wrong passwords on one replica make the next try wait on the other; a success
    anywhere clears it; a stale failure is forgotten."""
    a, b = _replicas(pg_url, tmp_path)
    ta, tb = LoginThrottle(tally=a.login_failures), LoginThrottle(tally=b.login_failures)
    for i in range(3):
        ta.failed("ip:1.2.3.4", 1000.0 + i)
    assert tb.wait_s("ip:1.2.3.4", 1002.5) == pytest.approx(1.5)  # 2 s after the 3rd failure
    assert tb.failed("ip:1.2.3.4", 1003.0) == 4.0  # the 4th, counted on the other replica
    assert ta.wait_s("ip:1.2.3.4", 1004.0) == pytest.approx(3.0)
    assert tb.wait_s("ip:5.6.7.8", 1004.0) == 0.0
    ta.succeeded("ip:1.2.3.4")
    assert tb.wait_s("ip:1.2.3.4", 1004.0) == 0.0
    tb.failed("old", 0.0)
    ta.failed("new", 10_000.0)  # an hour later: the old client's row is deleted
    assert a.sql.execute("SELECT client FROM login_failures").fetchall() == [("new",)]
    a.close()
    b.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:hunter2@db.example/lab", "postgresql://u:***@db.example/lab"),
        (
            "postgresql://u@db.example/lab?password=hunter2&sslmode=verify-full",
            "postgresql://u@db.example/lab?password=***&sslmode=verify-full",
        ),
        (
            "postgres://db.example/lab?sslpassword=hunter2&passfile=/home/u/.pgpass",
            "postgres://db.example/lab?sslpassword=***&passfile=/home/u/.pgpass",
        ),
        (
            "postgresql://u:hun%40ter2@h/lab?pass%77ord=hunter2&PASSWORD=hunter2",
            "postgresql://u:***@h/lab?pass%77ord=***&PASSWORD=***",
        ),
        ("postgresql://u:hun@ter2@h/lab", "postgresql://u:***@h/lab"),
        ("postgresql://u:hunter2@[::1/lab", "postgresql://***"),
        ("data/lab.db", "data/lab.db"),
    ],
)
def test_every_form_of_a_password_is_masked(url, shown):
    """#38: the ``user:password@`` part and libpq's ``?password=`` / ``?sslpassword=``
    (``passfile`` names a file: kept)."""
    assert masked(url) == shown and "hunter" not in shown


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "LISTENLAB_DATA": str(cwd), "HOME": str(cwd)},
    )


def test_a_query_password_is_not_printed_by_serve_or_db_check(pg_cluster, pg_url, tmp_path):
    """#38 item 6: ``serve``'s start-up line and ``db check``'s error show the URL with its
    password as ``***``, in whichever place the URL carries it."""
    secret = pg_url + "&password=hunter2&sslpassword=hunter3"
    rep = Replica(secret, free_port(), tmp_path / "serve", ("joe=piper?deterministic=1",))
    try:
        rep.start().wait_up()
    finally:
        rep.kill()
    out = (rep.data / "serve.out").read_text() + (rep.data / "serve.log").read_text()
    (line,) = [ln for ln in out.splitlines() if ln.startswith("listenlab: store ")]
    assert "password=***&sslpassword=***" in line and "hunter" not in out
    empty = pg_cluster.new_database()  # no listenlab tables: a read-only command refuses it
    try:
        done = _cli("db", "check", empty + "&password=hunter2", cwd=tmp_path)
    finally:
        pg_cluster.drop_database(empty)
    assert done.returncode == 1 and "has schema version 0" in done.stderr, done.stderr
    assert "password=***" in done.stderr and "hunter" not in done.stdout + done.stderr


def test_a_negative_zero_copies_and_exports_as_zero_everywhere(pg_cluster, pg_url, tmp_path, takes):
    """A gain of -0.0 (``round(-0.00001, 4)``) written on PostgreSQL is stored as SQLite stores
    it, 0.0: the stimulus reads, exports and checksums the same on PostgreSQL, on SQLite after
    ``db copy`` and on PostgreSQL again (SQLite's REAL columns cannot keep a zero's sign)."""
    from app.store.copy import digests as checks
    from app.store.listening import Stimulus

    with open_store(pg_url, local_dir=tmp_path / "a") as pg:
        pg.add_system(System("s", "piper"))
        pg.save_take(takes[0], system_id="s")
        tests = TestStore(pg)
        tests.create_test("t1", "mos", "zero", {})
        tests.add_stimulus(Stimulus("st1", "t1", takes[0].take_id, "item", gain_db=round(-1e-5, 4)))
    lite = tmp_path / "lite" / "lab.db"
    again = pg_cluster.new_database()
    try:
        from app.store import copy_store

        copy_store(pg_url, lite, local_dir=tmp_path / "a")
        copy_store(lite, again, local_dir=tmp_path / "b")
        got = []
        for target in (pg_url, lite, again):
            with open_store(target, read_only=True, local_dir=tmp_path / "c") as s:
                (gain,) = s.sql.execute("SELECT gain_db FROM stimuli").fetchone()
                assert gain == 0.0 and math.copysign(1.0, gain) == 1.0, target
                csv = TestStore(s).export_frame("stimuli", "t1").to_csv(index=False)
                got.append((csv, [(c.table, c.rows, c.digest) for c in checks(s)]))
        assert got[0] == got[1] == got[2]
    finally:
        pg_cluster.drop_database(again)
