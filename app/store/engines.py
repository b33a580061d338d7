"""One way to open a store, whichever engine the ``--db`` value names, and to move a study from
one store to another.

Why here and not in either engine: choosing SQLite or PostgreSQL from a path or a URL is the
one place that knows both. Keeping it out of the engines keeps their imports one way
(``engines`` → ``sqlite`` and ``postgres``; ``postgres`` → ``sqlite`` for its snapshot file;
``copy`` → neither), where ``Store.open`` used to return a PostgreSQL store and close a
circle copy ↔ postgres ↔ sqlite.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.store.copy import TableCheck, copy_rows, digests
from app.store.postgres import POOL_TIMEOUT_S, PgStore
from app.store.records import StoreError
from app.store.sqlite import Store
from app.store.urls import is_postgres

if TYPE_CHECKING:
    from app.store.interface import StoreEngine


def open_store(
    target: str | Path,
    *,
    read_only: bool = False,
    local_dir: str | Path | None = None,
    journal_mode: str | None = None,
    busy_timeout_s: float = 30.0,
    audio_dir: str | None = None,
    connect_timeout_s: float = POOL_TIMEOUT_S,
) -> StoreEngine:
    """The store at ``target``: :class:`app.store.postgres.PgStore` for a ``postgresql://``
    URL (``local_dir`` is this process's folder for the audio it reads back), else SQLite's
    :class:`app.store.sqlite.Store` for a file path (``journal_mode``, ``busy_timeout_s`` and
    ``audio_dir`` are SQLite's; it keeps audio beside the file). Created or migrated unless
    ``read_only``, which opens an existing store and writes nothing to it."""
    if is_postgres(target):
        return PgStore.open(
            str(target),
            read_only=read_only,
            local_dir=local_dir,
            connect_timeout_s=connect_timeout_s,
        )
    return Store.open(
        Path(target),
        journal_mode=journal_mode,
        busy_timeout_s=busy_timeout_s,
        audio_dir=audio_dir,
        read_only=read_only,
    )


def copy_store(
    source: str | Path, dest: str | Path, *, local_dir: Path | None = None
) -> list[tuple[TableCheck, TableCheck]]:
    """Copy ``source`` into the new or empty ``dest`` and read both back: per table (and the
    audio), the source's and the destination's rows and checksum. Raises :class:`StoreError`
    when any differ."""
    with open_store(source, read_only=True, local_dir=local_dir) as src:
        with open_store(dest, local_dir=local_dir) as dst:
            copy_rows(src, dst)
        before = digests(src)
    with open_store(dest, read_only=True, local_dir=local_dir) as dst:
        after = {c.table: c for c in digests(dst)}
    pairs = [(b, after.get(b.table, TableCheck(b.table, 0, ""))) for b in before]
    bad = [b.table for b, a in pairs if (b.rows, b.digest) != (a.rows, a.digest)]
    if bad:
        raise StoreError(f"the copy differs from its source in: {', '.join(bad)}")
    return pairs


__all__ = ["copy_store", "open_store"]
