"""The SQLite store: one file (via sqlite-utils) plus an audio folder next to it.

Why SQLite: a Hugging Face Space or a laptop runs listenlab as one process with one disk, and
a single file that can be copied (with its audio folder) is the whole lab. :class:`Store`
implements :class:`app.store.interface.StoreEngine` from three parts: the connections
(:mod:`app.store.connection`), the tables (:mod:`app.store.takes`, :mod:`app.store.ratings`,
``store.arena`` = :mod:`app.store.arena`) and the schema (declared in :mod:`app.store.schema`,
migrated by :mod:`app.store.migrations`), which :meth:`Store.open` creates or migrates,
refusing a DB written by a newer listenlab. ``Store.open`` opens SQLite files only: a ``--db``
value that may be either engine goes through :func:`app.store.open_store`.

``Store.open(path, read_only=True)`` (``report``, ``export``, ``analyze DB:…``) opens the file
with a ``mode=ro`` URI: it never migrates, never sets a journal mode, never writes, so it is
safe on a DB a running Playground is using (see :mod:`app.store.connection`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from app.store.arena import ArenaTables
from app.store.connection import Connections, SQLiteRunner
from app.store.migrations import check_version, migrate, read_version
from app.store.ratings import RatingTables
from app.store.records import StoreError
from app.store.takes import TakeTables
from app.store.urls import is_postgres

if TYPE_CHECKING:
    import sqlite_utils


class Store(TakeTables, RatingTables):
    """A listenlab SQLite store. Create with :meth:`open`; safe to share across threads."""

    def __init__(
        self,
        path: Path,
        *,
        journal_mode: str | None = None,
        busy_timeout_s: float = 30.0,
        audio_dir: str | None = None,
        read_only: bool = False,
    ):
        self.conns = Connections(
            Path(path),
            journal_mode=journal_mode,
            busy_timeout_s=busy_timeout_s,
            read_only=read_only,
        )
        self.path = self.conns.path
        self.root = self.path.parent
        self.audio_rel = audio_dir or f"{self.path.stem}_audio"
        """Audio folder, relative to the DB's folder."""
        self.read_only = read_only
        self.runner = SQLiteRunner(self.conns)
        self.arena = ArenaTables(self.runner)
        self.location = str(self.path.resolve())
        """Where the store is, for people (the banner, ``listenlab db``)."""

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        journal_mode: str | None = None,
        busy_timeout_s: float = 30.0,
        audio_dir: str | None = None,
        read_only: bool = False,
    ) -> Store:
        """Open (creating or migrating) the SQLite store at ``path``.

        ``journal_mode``: None picks it by path (:func:`app.store.journal_mode_for`);
        ``"delete"`` for network filesystems (see :mod:`app.store.connection`).
        ``read_only=True`` opens an existing store without writing anything to it (not even its
        journal mode): what every command that only reads must use.
        """
        if is_postgres(path):
            raise StoreError(
                "a postgresql:// URL is not a SQLite file: open it with app.store.open_store"
            )
        path = Path(path)
        if read_only:
            if not path.is_file():
                raise StoreError(f"no store at {path}")
            store = cls(
                path, journal_mode=journal_mode, busy_timeout_s=busy_timeout_s, read_only=True
            )
            try:
                check_version(store.sql, str(store.path))
            except BaseException:
                store.close()
                raise
            return store
        path.parent.mkdir(parents=True, exist_ok=True)
        store = cls(
            path, journal_mode=journal_mode, busy_timeout_s=busy_timeout_s, audio_dir=audio_dir
        )
        try:
            migrate(store.sql, str(store.path))
        except BaseException:
            store.close()  # frees its connection and the open-lock it took
            raise
        (store.root / store.audio_rel).mkdir(parents=True, exist_ok=True)
        return store

    engine = "sqlite"

    @property
    def sql(self) -> SQLiteRunner:
        """The engine-neutral runner every table module writes through."""
        return self.runner

    @property
    def db(self) -> sqlite_utils.Database:
        """This thread's connection, wrapped by sqlite-utils (created on first use)."""
        return self.conns.db

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's plain sqlite3 connection (what read-only listings use)."""
        return self.conns.conn

    @property
    def journal_mode(self) -> str:
        return self.conns.journal_mode

    @property
    def lock_path(self) -> Path:
        return self.conns.lock_path

    @property
    def schema_version(self) -> int:
        return read_version(self.sql)

    def snapshot(self, dest: str | Path) -> list[tuple[Path, str]]:
        """A consistent copy of the database at ``dest`` while the server keeps writing
        (SQLite's online backup: pages copied under the database's own locks), and the takes'
        audio files where they are (a take's file is written before its row)."""
        dest = Path(dest)
        out = sqlite3.connect(dest)
        try:
            self.conn.backup(out)
        finally:
            out.close()
        folder = self.root / self.audio_rel
        audio = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        return [(dest, dest.name), *((p, p.relative_to(self.root).as_posix()) for p in audio)]

    def close(self) -> None:
        self.conns.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Store"]
