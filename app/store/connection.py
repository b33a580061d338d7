"""SQLite connections: one per thread, the journal mode, and the open-lock that guards it.

Why a module of its own: how a process shares one SQLite file is the subtle part of the store
and has nothing to do with what the tables hold.

* Each thread gets its own connection (SQLite connections must not be shared across threads);
  every connection has a busy timeout, so concurrent writers wait rather than fail.
* ``journal_mode``: ``wal`` (default) is right for a local disk. On network filesystems (an HF
  Space's ``/data`` bucket, NFS, SMB) WAL's shared-memory index is not safe and has corrupted
  databases in practice ("database disk image is malformed", TTS Arena V3); use ``delete``
  there, or keep the live DB on local disk and copy it out periodically.
* A read-only open uses a ``mode=ro`` URI: it never sets a journal mode and never writes, so it
  is safe on a DB a running Playground is using. A read-write open changes the journal mode
  only when no other listenlab connection has the DB open (a ``<db>.lock`` file holds a shared
  ``flock`` per open store); otherwise it refuses, because switching a live DB from DELETE to
  WAL leaves the running server failing with "database is locked".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.store.records import StoreError
from app.store.sql import ConstraintFailed
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    import sqlite_utils

JOURNAL_MODES = ("wal", "delete", "truncate", "persist")
NETWORK_STORAGE = ("/data",)
"""Paths under these are network storage on HF Spaces: WAL is unsafe there (journal DELETE)."""


def journal_mode_for(path: str | Path) -> str:
    """``delete`` on a Space's network volume (WAL needs shared memory the volume lacks),
    ``wal`` elsewhere."""
    p = str(Path(path).resolve())
    return "delete" if any(p == n or p.startswith(n + "/") for n in NETWORK_STORAGE) else "wal"


def existing_journal_mode(path: str | Path) -> str:
    """The journal mode the DB file already has (read with ``mode=ro``), so a command that
    writes to a DB someone else made never switches it."""
    con = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return str(con.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    finally:
        con.close()


class Connections:
    """Per-thread connections to one SQLite file (see the module doc)."""

    def __init__(
        self,
        path: Path,
        *,
        journal_mode: str | None = None,
        busy_timeout_s: float = 30.0,
        read_only: bool = False,
    ):
        jm = (journal_mode or journal_mode_for(path)).lower()
        if jm not in JOURNAL_MODES:
            raise InvalidRequest(
                f"journal_mode must be one of {', '.join(JOURNAL_MODES)}, got {journal_mode!r}"
            )
        self.path = Path(path)
        self.journal_mode = jm
        self.busy_timeout_s = float(busy_timeout_s)
        self.read_only = read_only
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._lock_fd: int | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (created on first use)."""
        if self._closed:
            raise StoreError("the store is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect_ro() if self.read_only else self._connect_rw()
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    @property
    def db(self) -> sqlite_utils.Database:
        """This thread's connection wrapped by sqlite-utils (tables by name, upserts). Made on
        first use: sqlite-utils loads pandas, which a command that only lists rows need not."""
        db = getattr(self._local, "db", None)
        if db is None or self._closed:
            import sqlite_utils

            db = sqlite_utils.Database(self.conn)
            self._local.db = db
        return db

    def _connect_ro(self) -> sqlite3.Connection:
        """``mode=ro``: SQLite itself refuses every write, and no PRAGMA changes the file."""
        uri = self.path.resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_s, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        conn.execute("PRAGMA query_only = 1")
        self.journal_mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        return conn

    def _connect_rw(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self._hold_open_lock()
            current = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if current != self.journal_mode:
                self._change_journal_mode(conn, current)
            conn.execute(
                "PRAGMA synchronous = " + ("NORMAL" if self.journal_mode == "wal" else "FULL")
            )
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _hold_open_lock(self) -> None:
        """A shared flock held while this store is open: others see "someone has it open"."""
        with self._lock:
            if self._lock_fd is None:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(fd, fcntl.LOCK_SH)
                self._lock_fd = fd

    def _change_journal_mode(self, conn: sqlite3.Connection, current: str) -> None:
        """Change the mode only with exclusive use of the DB; refuse while others have it open."""
        assert self._lock_fd is not None
        probe = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)  # our own shared lock must not block us
            try:
                self._wait_for_exclusive(probe, current)
                current = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
                if current != self.journal_mode:  # another opener may have set it meanwhile
                    mode = conn.execute(f"PRAGMA journal_mode = {self.journal_mode}").fetchone()[0]
                    if str(mode).lower() != self.journal_mode:
                        raise StoreError(
                            f"{self.path}: could not set journal_mode={self.journal_mode} "
                            f"(got {mode})"
                        )
            finally:
                fcntl.flock(probe, fcntl.LOCK_UN)  # before re-taking ours: flocks of two
                fcntl.flock(self._lock_fd, fcntl.LOCK_SH)  # descriptors conflict in-process
        finally:
            os.close(probe)

    def _wait_for_exclusive(self, probe: int, current: str) -> None:
        """Take the open-lock exclusively within 2 s, or refuse: someone else has the DB open."""
        deadline = time.monotonic() + 2.0
        while True:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{self.path} is in journal mode {current} and another program has "
                        f"it open; refusing to switch it to {self.journal_mode} under a "
                        f"running server (it would fail with 'database is locked'). Open it "
                        f"with journal_mode={current!r} (--journal-mode {current}), or stop "
                        f"the other program first."
                    ) from None
                time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            for c in self._conns:
                with contextlib.suppress(sqlite3.ProgrammingError):  # closed elsewhere already
                    c.close()
            self._conns.clear()
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the shared flock
                self._lock_fd = None
        self._closed = True


def constraint_of(e: sqlite3.IntegrityError) -> ConstraintFailed:
    """SQLite's message says which constraint ("UNIQUE constraint failed: ...")."""
    msg = str(e)
    for word, kind in (
        ("UNIQUE", "unique"),
        ("PRIMARY KEY", "unique"),
        ("FOREIGN KEY", "foreign_key"),
        ("NOT NULL", "not_null"),
        ("CHECK", "check"),
    ):
        if word in msg:
            return ConstraintFailed(kind, msg)
    return ConstraintFailed("other", msg)


class SQLiteRunner:
    """The store's SQL on this thread's SQLite connection (:class:`app.store.sql.Runner`)."""

    engine = "sqlite"

    def __init__(self, conns: Connections):
        self.conns = conns
        self._local = threading.local()

    def _in_tx(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        conn = self.conns.conn
        try:
            cur = conn.execute(sql, list(params))
        except sqlite3.IntegrityError as e:
            if not self._in_tx() and conn.in_transaction:
                conn.rollback()
            raise constraint_of(e) from None
        if not self._in_tx() and conn.in_transaction:
            conn.commit()  # a write outside a transaction is committed at once
        return cur

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.transaction():
            try:
                self.conns.conn.executemany(sql, [list(r) for r in rows])
            except sqlite3.IntegrityError as e:
                raise constraint_of(e) from None

    @contextlib.contextmanager
    def transaction(self, lock: str = "store") -> Iterator[SQLiteRunner]:
        """``BEGIN IMMEDIATE``: SQLite has one writer at a time, so ``lock`` needs no name."""
        if self._in_tx():  # nested: part of the outer transaction
            self._local.depth += 1
            try:
                yield self
            finally:
                self._local.depth -= 1
            return
        conn = self.conns.conn
        if conn.in_transaction:
            conn.commit()  # a write left open by sqlite-utils (tests, scripts) is kept
        conn.execute("BEGIN IMMEDIATE")
        self._local.depth = 1
        try:
            yield self
            conn.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise
        finally:
            self._local.depth = 0

    def table_names(self) -> list[str]:
        return [
            r[0]
            for r in self.conns.conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]

    def columns(self, table: str) -> list[str]:
        return [r[1] for r in self.conns.conn.execute(f'PRAGMA table_info("{table}")')]


__all__ = [
    "JOURNAL_MODES",
    "NETWORK_STORAGE",
    "Connections",
    "SQLiteRunner",
    "constraint_of",
    "existing_journal_mode",
    "journal_mode_for",
]
