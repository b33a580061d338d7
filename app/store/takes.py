"""Takes in the store: the systems and prompts they belong to, their audio files, their chunk
timelines, and the stalls players reported while playing them.

Why the audio is a file beside the DB and not a BLOB: the DB holds only paths *relative to the
DB's folder*, so the DB and its audio folder can be copied or synced as a unit, and a take's
audio can be served, played or opened with any tool without the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from app.store.records import (
    Prompt,
    StoreError,
    System,
    TakeInfo,
    TakeTimeline,
    UnknownItem,
    Written,
    new_id,
    now_iso,
)
from app.store.schema import order_by
from app.store.sql import ConstraintFailed
from app.store.tables import Tables, from_json, to_json
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.takes import Take

AUDIO_FORMATS = ("wav", "flac")
TAKE_INFO_COLUMNS = ", ".join(TakeInfo.__dataclass_fields__)


class TakeTables(Tables):
    """Systems, prompts, takes, chunks and underruns (a mixin of :class:`app.store.Store`)."""

    root: Path
    """The DB's folder: audio paths are relative to it."""
    audio_rel: str
    """The audio folder, relative to :attr:`root`."""

    def add_system(self, s: System) -> Written:
        row = asdict(s)
        row["params"] = to_json(s.params)
        return self.insert_row("systems", "system_id", row)

    def add_prompt(self, p: Prompt) -> Written:
        return self.insert_row("prompts", "prompt_id", asdict(p))

    def audio_path(self, take_id: str) -> Path:
        r = self.get_row("takes", "take_id", take_id)
        if r is None:
            raise UnknownItem(f"no take {take_id!r} in the store")
        return self.local_audio(take_id, r["audio_path"])

    # -- where an engine keeps the audio (SQLite: files beside the DB; PostgreSQL: in the DB)

    def keep_audio(self, take: Take, rel: str, audio_format: str) -> bytes | None:
        """Write the take's audio file at ``root/rel``; the bytes when the engine also stores
        them in the database (None: the file is the only copy)."""
        from backends.audio import write_audio_file

        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_audio_file(dest, take.audio, take.sample_rate)
        return None

    def local_audio(self, take_id: str, rel: str) -> Path:
        """A local file holding the take's audio (SQLite: the file itself)."""
        return self.root / rel

    def save_take(
        self,
        take: Take,
        *,
        system_id: str | None = None,
        prompt_id: str | None = None,
        audio_format: str = "wav",
    ) -> str:
        """Store a take: audio file under the audio folder, a takes row and its chunk rows.

        Idempotent on ``take.take_id``: saving the same take again changes nothing.
        """
        if self.get_row("takes", "take_id", take.take_id) is not None:
            return take.take_id
        self.require_row("systems", "system_id", system_id)
        self.require_row("prompts", "prompt_id", prompt_id)
        if audio_format not in AUDIO_FORMATS:
            raise InvalidRequest(f"audio_format must be wav or flac, got {audio_format!r}")
        rel = f"{self.audio_rel}/{take.take_id}.{audio_format}"
        blob = self.keep_audio(take, rel, audio_format)  # first: no row without its audio
        try:
            self._insert_take(take, system_id, prompt_id, rel, blob)
        except ConstraintFailed:
            if self.get_row("takes", "take_id", take.take_id) is not None:
                return take.take_id  # saved concurrently by another writer
            raise
        return take.take_id

    def _insert_take(
        self, take: Take, system_id: str | None, prompt_id: str | None, rel: str, blob: bytes | None
    ) -> None:
        row = {
            "take_id": take.take_id,
            "system_id": system_id,
            "prompt_id": prompt_id,
            "backend": take.backend,
            "request": json.dumps(take.request.to_dict(), sort_keys=True),
            "text": take.request.text,
            "status": take.status,
            "error": take.error,
            "sample_rate": take.sample_rate,
            "channels": take.channels,
            "frames": take.frames,
            "duration_s": take.duration_s,
            "total_ms": take.total_ms,
            "ttfa_ms": take.ttfa_ms,
            "rtf": take.rtf,
            "chunk_count": len(take.chunks),
            "audio_path": rel,
            "meta": to_json(take.meta),
            "underrun_count": None,
            "underrun_stall_ms": None,
            "created_at": take.created_at,
        }
        with self.immediate("take:" + take.take_id) as sql:
            cols = ", ".join(f'"{k}"' for k in row)
            sql.execute(
                f"INSERT INTO takes ({cols}) VALUES ({', '.join('?' for _ in row)})",
                list(row.values()),
            )
            sql.executemany(
                'INSERT INTO chunks (take_id, idx, arrival_ms, "offset", frames) VALUES (?,?,?,?,?)',
                [(take.take_id, c.index, c.arrival_ms, c.offset, c.frames) for c in take.chunks],
            )
            if blob is not None:
                sql.execute(
                    "INSERT INTO take_audio (take_id, format, bytes, data) VALUES (?,?,?,?)",
                    [take.take_id, rel.rsplit(".", 1)[-1], len(blob), blob],
                )

    def load_take(self, take_id: str) -> Take:
        import soundfile as sf

        from backends.base import SpeechRequest
        from evaluation.takes import ChunkRecord, Take

        r = self.get_row("takes", "take_id", take_id)
        if r is None:
            raise UnknownItem(f"no take {take_id!r} in the store")
        audio, sr = sf.read(
            self.local_audio(take_id, r["audio_path"]), dtype="int16", always_2d=True
        )
        if sr != r["sample_rate"] or audio.shape[1] != r["channels"]:
            raise StoreError(f"take {take_id}: audio file does not match its DB row")
        chunks = [
            ChunkRecord(index=c[0], arrival_ms=c[1], offset=c[2], frames=c[3])
            for c in self.sql.execute(
                'SELECT idx, arrival_ms, "offset", frames FROM chunks WHERE take_id=? ORDER BY idx',
                [take_id],
            ).fetchall()
        ]
        return Take(
            request=SpeechRequest.from_dict(json.loads(r["request"])),
            backend=r["backend"],
            sample_rate=r["sample_rate"],
            channels=r["channels"],
            chunks=chunks,
            audio=audio,
            total_ms=r["total_ms"],
            status=r["status"],
            error=r["error"],
            take_id=r["take_id"],
            created_at=r["created_at"],
            meta=from_json(r["meta"], {}),
        )

    def take_info(self, take_id: str) -> TakeInfo | None:
        """The take's row without audio or chunks (None: no such take)."""
        cur = self.sql.execute(f"SELECT {TAKE_INFO_COLUMNS} FROM takes WHERE take_id=?", [take_id])
        r = cur.fetchone()
        if r is None:
            return None
        row = dict(zip([d[0] for d in cur.description], r, strict=True))
        row["meta"] = from_json(row["meta"], {})
        return TakeInfo(**row)

    def recent_timelines(self, system_id: str, limit: int = 30) -> list[TakeTimeline]:
        """The last ``limit`` complete takes of ``system_id`` (newest first), with their chunk
        arrivals: one query for the takes, one for all their chunks."""
        rows = self.sql.execute(
            "SELECT take_id, text, duration_s, sample_rate, request FROM takes "
            "WHERE system_id = ? AND status = 'ok' AND duration_s > 0 "
            "ORDER BY created_at DESC LIMIT ?",
            [system_id, int(limit)],
        ).fetchall()
        arrivals: dict[str, list[tuple[float, int]]] = {r[0]: [] for r in rows}
        if rows:
            marks = ",".join("?" for _ in rows)
            for take_id, arrival_ms, frames in self.sql.execute(
                f"SELECT take_id, arrival_ms, frames FROM chunks WHERE take_id IN ({marks}) "
                "ORDER BY take_id, idx",
                list(arrivals),
            ):
                arrivals[take_id].append((float(arrival_ms), int(frames)))
        return [
            TakeTimeline(
                take_id=tid,
                text=text,
                duration_s=float(dur),
                sample_rate=int(sr or 0),
                request=from_json(req, {}),
                arrivals=tuple(arrivals[tid]),
            )
            for tid, text, dur, sr, req in rows
        ]

    def take_ids(self, system_id: str | None = None) -> list[str]:
        if system_id is None:
            return [
                r[0]
                for r in self.sql.execute("SELECT take_id FROM takes ORDER BY created_at, take_id")
            ]
        return [
            r[0]
            for r in self.sql.execute(
                "SELECT take_id FROM takes WHERE system_id=? ORDER BY created_at, take_id",
                [system_id],
            )
        ]

    def system_of(self, take_id: str) -> str | None:
        r = self.sql.execute("SELECT system_id FROM takes WHERE take_id=?", [take_id]).fetchone()
        return r[0] if r else None

    def boundaries_ms(self, take_id: str) -> list[float]:
        """Seam times in ms (start of every chunk after the first), from the chunk rows."""
        r = self.get_row("takes", "take_id", take_id)
        if r is None:
            raise UnknownItem(f"no take {take_id!r} in the store")
        offs = self.sql.execute(
            'SELECT "offset" FROM chunks WHERE take_id=? ORDER BY idx', [take_id]
        ).fetchall()
        return [o[0] * 1000.0 / r["sample_rate"] for o in offs[1:]]

    def record_underruns(
        self,
        take_id: str,
        count: int,
        stall_ms: float,
        positions: Iterable[float] = (),
        *,
        report_id: str | None = None,
        rater_id: str | None = None,
        source: str = "browser",
    ) -> Written:
        """Store playback stalls reported by a player (positions in ms of audio time).

        Each report is a row of ``underruns`` (idempotent on ``report_id``); the take's
        ``underrun_count`` / ``underrun_stall_ms`` columns hold the worst report so far.
        """
        self.require_row("takes", "take_id", take_id)
        if count < 0 or stall_ms < 0:
            raise InvalidRequest("underrun count and stall_ms must be >= 0")
        row = {
            "report_id": report_id or new_id(),
            "take_id": take_id,
            "rater_id": rater_id,
            "source": source,
            "count": int(count),
            "stall_ms": float(stall_ms),
            "positions_ms": json.dumps([float(p) for p in positions]),
            "created_at": now_iso(),
        }
        w = self.insert_row("underruns", "report_id", row)
        if w.created:  # the worst report so far (CASE: both engines' "greatest of two")
            self.sql.execute(
                "UPDATE takes SET underrun_count = CASE WHEN coalesce(underrun_count, 0) > ? "
                "THEN underrun_count ELSE ? END, underrun_stall_ms = CASE WHEN "
                "coalesce(underrun_stall_ms, 0) > ? THEN underrun_stall_ms ELSE ? END "
                "WHERE take_id = ?",
                [row["count"], row["count"], row["stall_ms"], row["stall_ms"], take_id],
            )
        return w

    def takes_frame(self) -> pd.DataFrame:
        return self.read_frame(f"SELECT * FROM takes {order_by('takes')}")

    def chunks_frame(self) -> pd.DataFrame:
        return self.read_frame(f"SELECT * FROM chunks {order_by('chunks')}")

    def underruns_frame(self) -> pd.DataFrame:
        return self.read_frame(f"SELECT * FROM underruns {order_by('underruns')}")


__all__ = ["AUDIO_FORMATS", "TakeTables"]
