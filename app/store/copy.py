"""Move a study between engines: every table and every take's audio, SQLite ↔ PostgreSQL,
checked by row counts and checksums (``listenlab db copy FROM TO``).

Why checksums and not only counts: a copy that kept the rows but changed a score, a time or
an audio file would still count right. Each table's checksum is a SHA-256 over its rows in a
canonical form (numbers as numbers whichever engine stored them, order-free), and the audio's
over every take's id and the SHA-256 of its bytes, so the same study gives the same digests
on either engine (:func:`digests`). The copy is one transaction on the destination: a failure
leaves it as empty as it was. This module knows neither engine: opening the two stores is
:func:`app.store.engines.copy_store`'s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from app.store.records import StoreError
from app.store.schema import all_tables, order_by
from app.store.schema import study_tables as declared_study_tables

AUDIO = "(take audio)"
"""The name the audio's line has in a digest table."""
MAX_AUDIO_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class TableCheck:
    table: str
    rows: int
    digest: str


def study_tables(store: Any) -> list[str]:
    """The store's tables that make a study (without either engine's own bookkeeping)."""
    order = copy_order()
    have = set(store.sql.table_names()) - {t.name for t in all_tables() if not t.study}
    unknown = sorted(have - set(order))
    if unknown:
        raise StoreError(f"tables this listenlab does not know how to copy: {unknown}")
    return [t for t in order if t in have]


def copy_order() -> tuple[str, ...]:
    """Every table of a study, parents before the rows that reference them (the declaration's
    order, :func:`app.store.schema.all_tables`: a registered kind's tables included)."""
    return declared_study_tables()


def canonical(v: Any) -> Any:
    """One form per value whichever engine stored it (SQLite may keep 4.0 as 4, and keeps no
    negative zero: -0.0 is 0)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return hashlib.sha256(bytes(v)).hexdigest()
    return v


def table_check(store: Any, table: str, columns: list[str]) -> TableCheck:
    cols = ", ".join(f'"{c}"' for c in columns)
    lines = sorted(
        json.dumps([canonical(v) for v in r], default=str)
        for r in store.sql.execute(f'SELECT {cols} FROM "{table}"')
    )
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode() + b"\n")
    return TableCheck(table, len(lines), h.hexdigest())


def take_audio(store: Any, take_id: str, rel: str) -> bytes:
    """A take's stored audio bytes, from either engine (bounded: the store is not trusted)."""
    if store.engine == "postgresql":
        got = store.audio_bytes(take_id)
        if got is None:
            raise StoreError(f"take {take_id!r}: no audio in {store.location}")
        return got[1]
    path = safe_audio_path(store.root, rel)
    if not path.is_file():
        raise StoreError(f"take {take_id!r}: its audio file {path} is missing")
    if path.stat().st_size > MAX_AUDIO_BYTES:
        raise StoreError(f"take {take_id!r}: its audio file is larger than {MAX_AUDIO_BYTES}")
    return path.read_bytes()


def safe_audio_path(root: Path, rel: str) -> Path:
    """``root/rel`` for a relative path inside ``root`` (a row is never allowed to point out)."""
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise StoreError(f"audio path {rel!r} is not inside the store's folder")
    return root.joinpath(*p.parts)


def audio_check(store: Any) -> TableCheck:
    h = hashlib.sha256()
    rows = store.sql.execute("SELECT take_id, audio_path FROM takes ORDER BY take_id").fetchall()
    for take_id, rel in rows:
        digest = hashlib.sha256(take_audio(store, take_id, rel)).hexdigest()
        h.update(f"{take_id} {digest}\n".encode())
    return TableCheck(AUDIO, len(rows), h.hexdigest())


def digests(store: Any) -> list[TableCheck]:
    """Rows and checksum of every study table, then of the takes' audio."""
    out = [table_check(store, t, store.sql.columns(t)) for t in study_tables(store)]
    return [*out, audio_check(store)]


def copy_rows(src: Any, dst: Any) -> None:
    """Every study row and take's audio from ``src`` into the empty ``dst``, in one transaction
    on ``dst``."""
    tables = study_tables(src)
    missing = [t for t in tables if t not in set(dst.sql.table_names())]
    if missing:
        raise StoreError(f"the destination lacks tables {missing}: is it an older listenlab's?")
    full = [
        t for t in study_tables(dst) if dst.sql.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()
    ]
    if full:
        raise StoreError(
            f"the destination {dst.location} already holds rows (in {', '.join(full)}); "
            "copy into a new, empty store"
        )
    with dst.sql.transaction("listenlab:copy") as sql:
        for t in tables:
            cols = src.sql.columns(t)
            if set(cols) != set(dst.sql.columns(t)):
                raise StoreError(f"table {t}: the two stores' columns differ")
            names = ", ".join(f'"{c}"' for c in cols)
            rows = src.sql.execute(f'SELECT {names} FROM "{t}" {order_by(t)}').fetchall()
            if rows:
                marks = ", ".join("?" for _ in cols)
                sql.executemany(f'INSERT INTO "{t}" ({names}) VALUES ({marks})', rows)
        for take_id, rel in src.sql.execute(
            "SELECT take_id, audio_path FROM takes ORDER BY take_id"
        ).fetchall():
            put_audio(dst, take_id, rel, take_audio(src, take_id, rel))


def put_audio(dst: Any, take_id: str, rel: str, data: bytes) -> None:
    fmt = rel.rsplit(".", 1)[-1] if "." in rel else ""
    if dst.engine == "postgresql":
        dst.sql.execute(
            "INSERT INTO take_audio (take_id, format, bytes, data) VALUES (?,?,?,?)",
            [take_id, fmt, len(data), data],
        )
        return
    path = safe_audio_path(dst.root, rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.copy.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


__all__ = [
    "AUDIO",
    "copy_order",
    "TableCheck",
    "copy_rows",
    "digests",
    "safe_audio_path",
    "study_tables",
]
