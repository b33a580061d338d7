"""The PostgreSQL store: every table on one server, so several ``listenlab serve`` replicas
share one study.

Why PostgreSQL beside SQLite: a Space without paid storage loses a SQLite file on every
restart, and one process is one point of failure. ``--db postgresql://…`` (or
``LISTENLAB_DB``) puts the same tables (:mod:`app.store.schema`) on a server that outlives
the app and that several replicas write at once. What differs from SQLite, and where:

* Connections come from a pool (``psycopg_pool``, :data:`DEFAULT_POOL` per replica, or the
  URL's ``pool_size=``); a statement borrows one for its own time, a transaction for its own.
* A write transaction takes an advisory lock named by what it guards (``join:<test>``,
  ``arena:battles``, ``arena:voter:<hash>``…): writers of the same thing wait for each other
  on every replica, others do not (SQLite instead has one writer at a time).
* Takes' audio is stored in the database (``take_audio``), not beside it: no replica can read
  another's disk. Each replica keeps a local copy of what it has read (:meth:`local_audio`),
  in ``<local dir>/pg_audio/`` (takes never change once stored).
* The admin login's back-off is a table (:class:`LoginFailures`), so a guesser who moves to
  another replica meets the same delay.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.store.arena import ArenaTables
from app.store.migrations import check_version, migrate, read_version
from app.store.ratings import RatingTables
from app.store.records import StoreError
from app.store.sql import ConstraintFailed, Rows
from app.store.takes import AUDIO_FORMATS, TakeTables
from app.store.urls import is_postgres, masked
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    from evaluation.takes import Take

DEFAULT_POOL = 10
"""Connections one replica opens at most (``?pool_size=N`` in the URL changes it)."""
MAX_POOL = 100
POOL_TIMEOUT_S = 30.0
"""How long a request waits for a free connection before it fails (503-like StoreError)."""
MAX_TAKE_AUDIO_BYTES = 512 * 1024 * 1024
"""A stored take's audio larger than this is refused on read (the DB is not trusted blindly)."""
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
"""A stored file name this replica writes as it is (anything else: ``audio.<format>``)."""
OWN_URL_PARAMS = ("pool_size",)
"""URL query parameters that are listenlab's, not libpq's (removed before connecting)."""


def split_url(url: str) -> tuple[str, int]:
    """``(libpq URL, pool size)``: listenlab's own parameters are taken out of the query."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    pool = DEFAULT_POOL
    for k, v in query:
        if k == "pool_size":
            if not v.isdigit() or not 1 <= int(v) <= MAX_POOL:
                raise InvalidRequest(f"pool_size must be a whole number 1..{MAX_POOL}, got {v!r}")
            pool = int(v)
    rest = [(k, v) for k, v in query if k not in OWN_URL_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(rest))), pool


@lru_cache(maxsize=512)
def to_pg(sql: str) -> str:
    """The store's ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a lock's name (same on every replica)."""
    return int.from_bytes(
        hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True
    )


def constraint_of(e: Exception) -> ConstraintFailed:
    from psycopg import errors

    for cls, kind in (
        (errors.UniqueViolation, "unique"),
        (errors.ForeignKeyViolation, "foreign_key"),
        (errors.NotNullViolation, "not_null"),
        (errors.CheckViolation, "check"),
    ):
        if isinstance(e, cls):
            return ConstraintFailed(kind, str(e).splitlines()[0])
    return ConstraintFailed("other", str(e).splitlines()[0])


def bound(params: Sequence[Any]) -> list[Any]:
    """A statement's values, a negative zero written as 0.0: SQLite's REAL columns cannot keep
    the sign of a zero (it stores 0.0 and -0.0 as the integer 0), so neither engine keeps it
    and one study reads, exports and copies the same on both."""
    return [0.0 if isinstance(v, float) and v == 0.0 else v for v in params]


def _configure(read_only: bool):
    """Each new connection: booleans stored as 0/1 (the columns are SQLite's INTEGERs), and
    read-only sessions for read-only stores."""

    def configure(conn: psycopg.Connection) -> None:
        from psycopg.adapt import Dumper
        from psycopg.pq import Format

        class BoolAsInt(Dumper):
            format = Format.TEXT
            oid = conn.adapters.types["int8"].oid

            def dump(self, obj: bool) -> bytes:
                return b"1" if obj else b"0"

        conn.adapters.register_dumper(bool, BoolAsInt)
        if read_only:
            conn.execute("SET default_transaction_read_only = on")

    return configure


class PgRunner:
    """The store's SQL on a PostgreSQL pool (:class:`app.store.sql.Runner`)."""

    engine = "postgresql"

    def __init__(self, url: str, *, pool_size: int = DEFAULT_POOL, read_only: bool = False):
        from psycopg_pool import ConnectionPool

        self.pool: psycopg_pool.ConnectionPool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            timeout=POOL_TIMEOUT_S,
            kwargs={"autocommit": True, "prepare_threshold": None},  # safe behind PgBouncer
            configure=_configure(read_only),
            check=ConnectionPool.check_connection,
            open=False,
            name="listenlab",
        )
        self._local = threading.local()

    def open(self, timeout_s: float = POOL_TIMEOUT_S) -> None:
        import psycopg_pool

        try:
            self.pool.open(wait=True, timeout=timeout_s)
        except psycopg_pool.PoolTimeout as e:
            self.pool.close()
            raise StoreError(f"cannot connect to PostgreSQL: {e}") from None

    def _run(self, conn: psycopg.Connection, sql: str, params: Sequence[Any]) -> Rows:
        import psycopg

        try:
            cur = conn.execute(to_pg(sql), bound(params))
        except psycopg.errors.IntegrityError as e:
            raise constraint_of(e) from None
        except psycopg.errors.ReadOnlySqlTransaction:
            raise StoreError("this store was opened read-only: nothing was written") from None
        except psycopg.DataError as e:
            if "0x00" in str(e) or "NUL" in str(e):
                raise InvalidRequest("text may not contain NUL (\\x00) characters") from None
            raise InvalidRequest(
                f"a value the database cannot store: {str(e).splitlines()[0]}"
            ) from None
        desc = [(c.name,) for c in cur.description] if cur.description else None
        return Rows(cur.fetchall() if desc else [], desc, cur.rowcount)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        import psycopg_pool

        tx = getattr(self._local, "conn", None)
        if tx is not None:
            yield tx
            return
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg_pool.PoolTimeout as e:
            raise StoreError(f"no free database connection: {e}") from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        with self._conn() as conn:
            return self._run(conn, sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        import psycopg

        if not rows:
            return
        with self._conn() as conn:
            try:
                with conn.cursor() as cur:
                    cur.executemany(to_pg(sql), [bound(r) for r in rows])
            except psycopg.errors.IntegrityError as e:
                raise constraint_of(e) from None

    @contextlib.contextmanager
    def transaction(self, lock: str = "store") -> Iterator[PgRunner]:
        """One transaction on one connection, holding the advisory lock ``lock`` until it
        commits (nested calls join the outer transaction)."""
        if getattr(self._local, "conn", None) is not None:
            yield self
            return
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(lock)])
            self._local.conn = conn
            try:
                yield self
            finally:
                self._local.conn = None

    @contextlib.contextmanager
    def one_snapshot(self) -> Iterator[PgRunner]:
        """Every read of this thread in one read-only REPEATABLE READ transaction: one
        consistent view of the database, taking no lock writers wait for."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._local.conn = conn
            try:
                yield self
            finally:
                self._local.conn = None

    def table_names(self) -> list[str]:
        return [
            r[0]
            for r in self.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() ORDER BY table_name"
            )
        ]

    def columns(self, table: str) -> list[str]:
        return [
            r[0]
            for r in self.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = ? ORDER BY ordinal_position",
                [table],
            )
        ]

    def close(self) -> None:
        self.pool.close()


class LoginFailures:
    """Wrong admin passwords per client, shared by every replica
    (:class:`app.web.ratelimit.FailureTally`)."""

    def __init__(self, runner: PgRunner):
        self.sql = runner

    def failures(self, key: str) -> tuple[int, float]:
        r = self.sql.execute(
            "SELECT failures, last_ts FROM login_failures WHERE client = ?", [key]
        ).fetchone()
        return (0, 0.0) if r is None else (int(r[0]), float(r[1]))

    def add_failure(self, key: str, now: float, forget_s: float) -> int:
        """One more failure (counting from 1 again after ``forget_s`` of quiet); old clients
        are forgotten here too, so the table cannot grow without bound."""
        with self.sql.transaction("login:" + key) as sql:
            sql.execute("DELETE FROM login_failures WHERE last_ts < ?", [now - forget_s])
            r = sql.execute(
                "INSERT INTO login_failures (client, failures, last_ts) VALUES (?, 1, ?) "
                "ON CONFLICT (client) DO UPDATE SET failures = login_failures.failures + 1, "
                "last_ts = excluded.last_ts RETURNING failures",
                [key, now],
            ).fetchone()
        return int(r[0])

    def clear_failures(self, key: str) -> None:
        self.sql.execute("DELETE FROM login_failures WHERE client = ?", [key])


class PgStore(TakeTables, RatingTables):
    """A listenlab store on PostgreSQL. Create with :meth:`open`; safe to share across threads
    and to open from several processes (replicas) at once."""

    engine = "postgresql"
    journal_mode = "postgresql"
    """(SQLite's journal mode has no meaning here; kept so banners read the same.)"""

    def __init__(self, url: str, *, local_dir: Path, read_only: bool, pool_size: int):
        self.url = url
        self.location = masked(url)
        self.runner = PgRunner(url, pool_size=pool_size, read_only=read_only)
        self.read_only = read_only
        self.root = Path(local_dir)
        """Local folder of this replica: audio read from the DB, exports, voices."""
        self.audio_rel = "pg_audio"
        self.path = Path(urlsplit(url).path.lstrip("/") or "postgres")
        """The database's name (what reports print as the store's name)."""
        self.arena = ArenaTables(self.runner)
        self.login_failures = LoginFailures(self.runner)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        read_only: bool = False,
        local_dir: str | Path | None = None,
        connect_timeout_s: float = POOL_TIMEOUT_S,
    ) -> PgStore:
        """Connect, and create or migrate the schema (unless ``read_only``: then refuse a
        database that is not at this listenlab's version)."""
        libpq_url, pool = split_url(url)
        store = cls(
            libpq_url, local_dir=Path(local_dir or "data"), read_only=read_only, pool_size=pool
        )
        store.location = masked(url)
        try:
            store.runner.open(connect_timeout_s)
            if read_only:
                store.check_version()
            else:
                store.migrate()
                store.root.mkdir(parents=True, exist_ok=True)
        except BaseException:
            store.close()
            raise
        return store

    @property
    def sql(self) -> PgRunner:
        return self.runner

    # -- schema (app.store.migrations: the same declaration and steps as SQLite's)

    @property
    def schema_version(self) -> int:
        return read_version(self.sql)

    def check_version(self) -> None:
        check_version(self.sql, self.location)

    def migrate(self) -> None:
        """Bring the database to this listenlab's version in one transaction; replicas
        starting together take turns (an advisory lock), so exactly one creates the tables."""
        migrate(self.sql, self.location)

    # -- audio: in the database, with a local copy per replica

    def keep_audio(self, take: Take, rel: str, audio_format: str) -> bytes | None:
        from backends.audio import write_audio_file

        dest = self.cache_file(take.take_id, rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_audio_file(dest, take.audio, take.sample_rate)
        return dest.read_bytes()

    def cache_file(self, take_id: str, rel: str) -> Path:
        """The local copy: a folder named by a hash of the take id (an id is never a path),
        holding a file of the row's name (as SQLite's file is called: exports show it)."""
        fmt = rel.rsplit(".", 1)[-1] if "." in rel else ""
        if fmt not in AUDIO_FORMATS:
            raise StoreError(f"take {take_id!r}: stored audio format {fmt!r} is unknown")
        name = PurePosixPath(rel).name
        if not SAFE_NAME.fullmatch(name) or not name.endswith("." + fmt):
            name = f"audio.{fmt}"
        folder = hashlib.sha256(take_id.encode()).hexdigest()[:40]
        return self.root / self.audio_rel / folder / name

    def local_audio(self, take_id: str, rel: str) -> Path:
        """This replica's copy of the take's audio, fetched from the database the first time."""
        fmt = rel.rsplit(".", 1)[-1] if "." in rel else ""
        dest = self.cache_file(take_id, rel)
        if dest.is_file():
            return dest
        r = self.sql.execute(
            "SELECT format, bytes FROM take_audio WHERE take_id = ?", [take_id]
        ).fetchone()
        if r is None:
            raise StoreError(f"take {take_id!r}: its audio is not in the database")
        if r[0] != fmt or not 0 < int(r[1]) <= MAX_TAKE_AUDIO_BYTES:
            raise StoreError(f"take {take_id!r}: stored audio does not match its row")
        (data,) = self.sql.execute(
            "SELECT data FROM take_audio WHERE take_id = ?", [take_id]
        ).fetchone()
        if len(data) != int(r[1]):
            raise StoreError(f"take {take_id!r}: stored audio is truncated")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(bytes(data))
        tmp.replace(dest)  # atomic: a concurrent reader sees the whole file or none
        return dest

    def audio_bytes(self, take_id: str) -> tuple[str, bytes] | None:
        """The stored ``(format, bytes)`` of a take's audio (``listenlab db copy``)."""
        r = self.sql.execute(
            "SELECT format, data FROM take_audio WHERE take_id = ?", [take_id]
        ).fetchone()
        return None if r is None else (str(r[0]), bytes(r[1]))

    def snapshot(self, dest: str | Path) -> list[tuple[Path, str]]:
        """The study as a SQLite file at ``dest`` (``listenlab db copy``'s rows and audio),
        read in one REPEATABLE READ transaction, so raters voting meanwhile do not tear it."""
        from app.store.copy import copy_rows
        from app.store.sqlite import Store  # the snapshot is a SQLite file, whatever the source

        dest = Path(dest)
        with self.runner.one_snapshot(), Store.open(dest) as out:
            copy_rows(self, out)  # each take's audio lands at its row's path beside ``dest``
        audio = sorted(
            p for p in dest.parent.rglob("*") if p.is_file() and not p.name.startswith(dest.name)
        )
        return [(dest, dest.name), *((p, p.relative_to(dest.parent).as_posix()) for p in audio)]

    # -- life cycle

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "DEFAULT_POOL",
    "LoginFailures",
    "PgRunner",
    "PgStore",
    "is_postgres",
    "lock_key",
    "masked",
    "split_url",
    "to_pg",
]
