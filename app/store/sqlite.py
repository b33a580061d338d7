"""The SQLite store: systems, prompts, takes, listening tests, votes, glitch marks, findings.

One SQLite file (via sqlite-utils) plus an audio folder next to it. The DB only holds paths
*relative to the DB's folder*, so the pair can be copied or synced as a unit.

Public API (all writes are idempotent on the client-supplied id; a re-sent write returns the
existing row and changes nothing)::

    from app.store.core import Store, System, Prompt, Rater, ListeningTest, Assignment, \\
        MosRating, AbVote, GlitchReport, Written, AlreadyVoted

    store = Store.open("data/listenlab.db", journal_mode="wal")   # "delete" on network storage
    store.add_system(System("piper-joe", backend="piper?deterministic=1", voice="joe"))
    store.add_prompt(Prompt("p1", text="Hello there."))
    take_id = store.save_take(take, system_id="piper-joe", prompt_id="p1")  # writes audio/<id>.wav
    take = store.load_take(take_id)                                          # -> evaluation.takes.Take
    store.add_rater(Rater("r1", name="Ann"))
    store.add_test(ListeningTest("t1", kind="mos"))                          # mos | ab | cmos | glitch
    store.add_assignment(Assignment("a1", "t1", "r1", position=0, take_id=take_id,
                                    role="gold", expected=5.0))              # item | gold | trap
    store.add_mos_rating(MosRating("v1", "t1", "r1", take_id, score=4, played_ms=3100))
    store.add_ab_vote(AbVote("v2", "t1", "r1", take_a=x, take_b=y, choice="b", cmos=1))
    store.add_glitch_report(GlitchReport("g1", take_id, "r1", position_ms=1234.0))
        # nearest boundary index / boundary_ms / distance_ms are filled in from the take's chunks
    store.record_underruns(take_id, count=2, stall_ms=340.0, positions=[1200.0, 3400.0])
    store.add_auto_findings(take_id, findings)        # evaluation.glitches.Finding objects
    store.mos_frame(), store.ab_frame(), store.glitch_frame(), store.findings_frame(),
    store.takes_frame(), store.chunks_frame(), store.underruns_frame(), store.frame(table)

* Every ``add_*`` returns :class:`Written` ``(id, created)``; ``created`` is False when that id
  was already stored (a re-sent request). A *different* id for an item the rater already voted
  on raises :class:`AlreadyVoted`: one vote per rater per item is a UNIQUE constraint.
* Each thread gets its own connection (SQLite connections must not be shared across threads);
  every connection has a busy timeout, so concurrent writers wait rather than fail.
* ``journal_mode``: ``wal`` (default) is right for a local disk. On network filesystems (an HF
  Space's ``/data`` bucket, NFS, SMB) WAL's shared-memory index is not safe and has corrupted
  databases in practice ("database disk image is malformed", TTS Arena V3); use ``delete``
  there, or keep the live DB on local disk and copy it out periodically.
* The schema version is ``PRAGMA user_version``; :meth:`Store.open` creates or migrates the
  schema, and refuses a DB written by a newer listenlab.
* ``Store.open(path, read_only=True)`` (``report``, ``export``, ``analyze DB:…``) opens the file
  with a ``mode=ro`` URI: it never migrates, never sets a journal mode, never writes, so it is
  safe on a DB a running Playground is using. A read-write open changes the journal mode only
  when no other listenlab connection has the DB open (a ``<db>.lock`` file holds a shared
  ``flock`` per open store); otherwise it refuses, because switching a live DB from DELETE to
  WAL leaves the running server failing with "database is locked".
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import soundfile as sf
import sqlite_utils

from backends.audio import write_audio_file
from backends.base import SpeechRequest
from backends.errors import Conflict, InvalidRequest, ListenlabError, NotFound
from evaluation.takes import ChunkRecord, Take

SCHEMA_VERSION = 3
JOURNAL_MODES = ("wal", "delete", "truncate", "persist")
NETWORK_STORAGE = ("/data",)
"""Paths under these are network storage on HF Spaces: WAL is unsafe there (journal DELETE)."""
TEST_KINDS = ("mos", "ab", "cmos", "glitch", "mushra")
ROLES = ("item", "gold", "trap", "anchor", "reference")
AB_CHOICES = ("a", "b", "tie")
GLITCH_KINDS = ("click", "gap", "repeat", "wrong_voice", "cut_off", "other")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_id() -> str:
    return uuid.uuid4().hex


class StoreError(ListenlabError):
    """The store cannot be used as asked (e.g. written by a newer listenlab)."""


class AlreadyVoted(Conflict):
    """This rater already answered this item (under another id); the first answer stands."""

    def __init__(self, message: str, existing_id: str):
        super().__init__(message)
        self.existing_id = existing_id


class UnknownItem(NotFound):
    """A referenced take / system / test does not exist in the store."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Written:
    id: str
    created: bool
    """False when the id was already stored: the write was a re-send and changed nothing."""


@dataclass(frozen=True)
class System:
    """A thing under test: backend spec + voice + parameters."""

    system_id: str
    backend: str
    voice: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    text: str
    language: str | None = None
    category: str | None = None
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class Rater:
    rater_id: str
    name: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class ListeningTest:
    test_id: str
    kind: str = "mos"
    """``mos``, ``ab``, ``cmos`` or ``glitch``."""
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class Assignment:
    """One item of a rater's playlist. For A/B items, ``take_b_id`` is the second clip."""

    assignment_id: str
    test_id: str
    rater_id: str
    position: int
    take_id: str
    take_b_id: str | None = None
    role: str = "item"
    """``item``, ``gold`` (obvious quality, ``expected`` score) or ``trap`` ("select X")."""
    expected: float | None = None
    created_at: str = field(default_factory=now_iso)
    slots: tuple[str, ...] | None = None
    """(schema v2) Every take of a multi-stimulus item in display order (MUSHRA screens)."""
    condition: str | None = None
    """(schema v2) ``as_streamed``, ``whole`` or ``live``: how the stimulus is played."""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MosRating:
    rating_id: str
    test_id: str
    rater_id: str
    take_id: str
    score: float
    played_ms: float | None = None
    """How much of the clip the rater's player actually played (for "all played" screening)."""
    role: str | None = None
    """Filled from the rater's assignment for this take when left None (else ``item``)."""
    expected: float | None = None
    created_at: str = field(default_factory=now_iso)
    condition: str | None = None
    """(schema v2) How the clip was played: ``as_streamed``, ``whole`` or ``live``."""
    assignment_id: str | None = None


@dataclass(frozen=True)
class AbVote:
    """A pairwise vote. ``take_a`` is the clip presented first (left)."""

    vote_id: str
    test_id: str
    rater_id: str
    take_a: str
    take_b: str
    choice: str
    """``a``, ``b`` or ``tie``, as presented."""
    cmos: float | None = None
    """-3..+3: how much better B (as presented) is than A; stats re-sign it per system."""
    played_a_ms: float | None = None
    played_b_ms: float | None = None
    system_a: str | None = None
    system_b: str | None = None
    """Filled from the takes when None."""
    created_at: str = field(default_factory=now_iso)
    condition: str | None = None
    assignment_id: str | None = None


@dataclass(frozen=True)
class GlitchReport:
    """A rater's "I heard a glitch here" mark on a take."""

    report_id: str
    take_id: str
    rater_id: str
    position_ms: float
    kind: str | None = None
    """One of :data:`GLITCH_KINDS` or None (the rater did not say)."""
    test_id: str | None = None
    boundary_index: int | None = None
    """Index (into ``Take.boundaries``) of the nearest chunk seam; filled in when None."""
    boundary_ms: float | None = None
    distance_ms: float | None = None
    """``position_ms - boundary_ms`` (negative: the mark is before the seam)."""
    note: str | None = None
    created_at: str = field(default_factory=now_iso)


def nearest_boundary(
    boundaries_ms: Sequence[float], position_ms: float
) -> tuple[int, float, float] | None:
    """``(index, boundary_ms, position_ms - boundary_ms)`` of the closest seam, or None."""
    if not len(boundaries_ms):
        return None
    i = bisect.bisect_left(boundaries_ms, position_ms)
    cands = [j for j in (i - 1, i) if 0 <= j < len(boundaries_ms)]
    j = min(cands, key=lambda k: abs(boundaries_ms[k] - position_ms))
    return j, float(boundaries_ms[j]), float(position_ms - boundaries_ms[j])


# --------------------------------------------------------------------------- schema


def _schema_v1(db: sqlite_utils.Database) -> None:
    db["systems"].create(
        {
            "system_id": str,
            "backend": str,
            "voice": str,
            "params": str,
            "label": str,
            "created_at": str,
        },
        pk="system_id",
        not_null={"backend"},
    )
    db["prompts"].create(
        {"prompt_id": str, "text": str, "language": str, "category": str, "created_at": str},
        pk="prompt_id",
        not_null={"text"},
    )
    db["takes"].create(
        {
            "take_id": str,
            "system_id": str,
            "prompt_id": str,
            "backend": str,
            "request": str,
            "text": str,
            "status": str,
            "error": str,
            "sample_rate": int,
            "channels": int,
            "frames": int,
            "duration_s": float,
            "total_ms": float,
            "ttfa_ms": float,
            "rtf": float,
            "chunk_count": int,
            "audio_path": str,
            "meta": str,
            "underrun_count": int,
            "underrun_stall_ms": float,
            "created_at": str,
        },
        pk="take_id",
        not_null={"backend", "status", "sample_rate", "channels", "frames", "audio_path"},
        foreign_keys=[("system_id", "systems", "system_id"), ("prompt_id", "prompts", "prompt_id")],
    )
    db["takes"].create_index(["system_id"])
    db["chunks"].create(
        {"take_id": str, "idx": int, "arrival_ms": float, "offset": int, "frames": int},
        pk=("take_id", "idx"),
        foreign_keys=[("take_id", "takes", "take_id")],
    )
    db["underruns"].create(
        {
            "report_id": str,
            "take_id": str,
            "rater_id": str,
            "source": str,
            "count": int,
            "stall_ms": float,
            "positions_ms": str,
            "created_at": str,
        },
        pk="report_id",
        foreign_keys=[("take_id", "takes", "take_id")],
    )
    db["raters"].create(
        {"rater_id": str, "name": str, "meta": str, "created_at": str}, pk="rater_id"
    )
    db["tests"].create(
        {"test_id": str, "kind": str, "name": str, "config": str, "created_at": str},
        pk="test_id",
        not_null={"kind"},
    )
    db["assignments"].create(
        {
            "assignment_id": str,
            "test_id": str,
            "rater_id": str,
            "position": int,
            "take_id": str,
            "take_b_id": str,
            "role": str,
            "expected": float,
            "created_at": str,
        },
        pk="assignment_id",
        not_null={"test_id", "rater_id", "take_id", "role"},
        foreign_keys=[("test_id", "tests", "test_id"), ("rater_id", "raters", "rater_id")],
    )
    db["assignments"].create_index(["test_id", "rater_id", "position"], unique=True)
    db["mos_ratings"].create(
        {
            "rating_id": str,
            "test_id": str,
            "rater_id": str,
            "take_id": str,
            "score": float,
            "played_ms": float,
            "role": str,
            "expected": float,
            "created_at": str,
        },
        pk="rating_id",
        not_null={"test_id", "rater_id", "take_id", "score", "role"},
    )
    db["mos_ratings"].create_index(["test_id", "rater_id", "take_id"], unique=True)
    db["ab_votes"].create(
        {
            "vote_id": str,
            "test_id": str,
            "rater_id": str,
            "item_key": str,
            "take_a": str,
            "take_b": str,
            "system_a": str,
            "system_b": str,
            "choice": str,
            "cmos": float,
            "played_a_ms": float,
            "played_b_ms": float,
            "created_at": str,
        },
        pk="vote_id",
        not_null={"test_id", "rater_id", "item_key", "take_a", "take_b", "choice"},
    )
    db["ab_votes"].create_index(["test_id", "rater_id", "item_key"], unique=True)
    db["glitch_reports"].create(
        {
            "report_id": str,
            "take_id": str,
            "rater_id": str,
            "test_id": str,
            "position_ms": float,
            "kind": str,
            "boundary_index": int,
            "boundary_ms": float,
            "distance_ms": float,
            "note": str,
            "created_at": str,
        },
        pk="report_id",
        not_null={"take_id", "rater_id", "position_ms"},
    )
    db["glitch_reports"].create_index(["take_id"])
    db["auto_findings"].create(
        {
            "finding_id": str,
            "take_id": str,
            "detector": str,
            "kind": str,
            "time_s": float,
            "boundary_index": int,
            "severity": float,
            "evidence": str,
            "created_at": str,
        },
        pk="finding_id",
        not_null={"take_id", "kind"},
    )
    db["auto_findings"].create_index(["take_id"])


def _schema_v2(db: sqlite_utils.Database) -> None:
    """Listening tests end to end: test lifecycle, stimuli (with the loudness gain applied),
    raters' sessions (token hash, crowd id, headphone check, completion code), play events
    (server-side listen-gating), one answer per item, MUSHRA ratings. Additive only."""
    for sql in (
        "ALTER TABLE tests ADD COLUMN status TEXT",
        "ALTER TABLE tests ADD COLUMN updated_at TEXT",
        "ALTER TABLE assignments ADD COLUMN slots TEXT",
        "ALTER TABLE assignments ADD COLUMN condition TEXT",
        "ALTER TABLE assignments ADD COLUMN meta TEXT",
        "ALTER TABLE mos_ratings ADD COLUMN condition TEXT",
        "ALTER TABLE mos_ratings ADD COLUMN assignment_id TEXT",
        "ALTER TABLE ab_votes ADD COLUMN condition TEXT",
        "ALTER TABLE ab_votes ADD COLUMN assignment_id TEXT",
        """CREATE TABLE stimuli (
            stimulus_id TEXT PRIMARY KEY, test_id TEXT NOT NULL REFERENCES tests(test_id),
            take_id TEXT NOT NULL REFERENCES takes(take_id), source_take_id TEXT,
            system_id TEXT, prompt_id TEXT, kind TEXT NOT NULL, expected REAL,
            condition TEXT, gain_db REAL, loudness_lufs REAL, target_lufs REAL,
            meta TEXT, created_at TEXT)""",
        "CREATE UNIQUE INDEX idx_stimuli_test_take ON stimuli (test_id, take_id)",
        """CREATE TABLE test_raters (
            test_id TEXT NOT NULL REFERENCES tests(test_id),
            rater_id TEXT NOT NULL REFERENCES raters(rater_id),
            token_hash TEXT NOT NULL, seq INTEGER NOT NULL, crowd_id TEXT, crowd_source TEXT,
            consent_at TEXT, headphone TEXT, headphone_pass INTEGER, completion_code TEXT,
            finished_at TEXT, created_at TEXT, PRIMARY KEY (test_id, rater_id))""",
        "CREATE UNIQUE INDEX idx_test_raters_token ON test_raters (token_hash)",
        "CREATE UNIQUE INDEX idx_test_raters_seq ON test_raters (test_id, seq)",
        """CREATE TABLE play_events (
            event_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, rater_id TEXT NOT NULL,
            assignment_id TEXT NOT NULL, slot INTEGER NOT NULL, take_id TEXT,
            condition TEXT, played_ms REAL, duration_ms REAL, complete INTEGER,
            server_elapsed_ms REAL, underruns INTEGER, stall_ms REAL, created_at TEXT)""",
        "CREATE INDEX idx_play_events_item ON play_events (test_id, rater_id, assignment_id)",
        """CREATE TABLE answers (
            answer_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, rater_id TEXT NOT NULL,
            assignment_id TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT, condition TEXT,
            created_at TEXT)""",
        "CREATE UNIQUE INDEX idx_answers_item ON answers (test_id, rater_id, assignment_id)",
        """CREATE TABLE mushra_ratings (
            rating_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, rater_id TEXT NOT NULL,
            assignment_id TEXT NOT NULL, slot INTEGER NOT NULL, take_id TEXT NOT NULL,
            system_id TEXT, role TEXT NOT NULL, prompt_id TEXT, score REAL NOT NULL,
            created_at TEXT)""",
        "CREATE UNIQUE INDEX idx_mushra_item ON mushra_ratings "
        "(test_id, rater_id, assignment_id, slot)",
    ):
        db.execute(sql)
    db.execute("UPDATE tests SET status = 'open' WHERE status IS NULL")


def _schema_v3(db: sqlite_utils.Database) -> None:
    """Rater screening that a bot cannot pass: the headphone screen's trials with their answer
    keys (server-side only), Prolific's study and session ids, the screen-out, the
    familiarisation, the rater's design row (reissued after dropouts) and last activity."""
    for sql in (
        "ALTER TABLE test_raters ADD COLUMN study_id TEXT",
        "ALTER TABLE test_raters ADD COLUMN session_id TEXT",
        "ALTER TABLE test_raters ADD COLUMN design_row INTEGER",
        "ALTER TABLE test_raters ADD COLUMN seen_at REAL",
        "ALTER TABLE test_raters ADD COLUMN screened_out_at TEXT",
        "ALTER TABLE test_raters ADD COLUMN screenout_code TEXT",
        "ALTER TABLE test_raters ADD COLUMN familiar TEXT",
        "ALTER TABLE test_raters ADD COLUMN familiarised_at TEXT",
        "CREATE INDEX idx_test_raters_crowd ON test_raters (test_id, crowd_id)",
        """CREATE TABLE screen_trials (
            test_id TEXT NOT NULL, rater_id TEXT NOT NULL, n INTEGER NOT NULL,
            kind TEXT NOT NULL, key TEXT NOT NULL, duration_ms REAL NOT NULL,
            fetched_at REAL, fetches INTEGER NOT NULL DEFAULT 0, answer INTEGER, answered_at TEXT,
            PRIMARY KEY (test_id, rater_id, n))""",
    ):
        db.execute(sql)


MIGRATIONS = {1: _schema_v1, 2: _schema_v2, 3: _schema_v3}
"""``{version: function(db)}``: applied in order, each in one transaction, on open."""


# --------------------------------------------------------------------------- store


def _json(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True)


def _ab_item_key(take_a: str, take_b: str) -> str:
    """The same pair in either order is one item (so a rater cannot vote twice by swapping)."""
    a, b = sorted((take_a, take_b))
    return f"{a}|{b}"


def journal_mode_for(path: str | Path) -> str:
    """``delete`` on a Space's network volume (WAL needs shared memory the volume lacks),
    ``wal`` elsewhere."""
    p = str(Path(path).resolve())
    return "delete" if any(p == n or p.startswith(n + "/") for n in NETWORK_STORAGE) else "wal"


class Store:
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
        jm = (journal_mode or journal_mode_for(path)).lower()
        if jm not in JOURNAL_MODES:
            raise InvalidRequest(
                f"journal_mode must be one of {', '.join(JOURNAL_MODES)}, got {journal_mode!r}"
            )
        self.path = Path(path)
        self.root = self.path.parent
        self.journal_mode = jm
        self.busy_timeout_s = float(busy_timeout_s)
        self.audio_rel = audio_dir or f"{self.path.stem}_audio"
        """Audio folder, relative to the DB's folder."""
        self.read_only = read_only
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._lock_fd: int | None = None

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
        """Open (creating or migrating) the store at ``path``.

        ``journal_mode``: None picks it by path (:func:`journal_mode_for`); ``"delete"`` for
        network filesystems (see the module docstring).
        ``read_only=True`` opens an existing store without writing anything to it (not even its
        journal mode): what every command that only reads must use.
        """
        path = Path(path)
        if read_only:
            if not path.is_file():
                raise StoreError(f"no store at {path}")
            store = cls(
                path, journal_mode=journal_mode, busy_timeout_s=busy_timeout_s, read_only=True
            )
            try:
                store._check_version()
            except BaseException:
                store.close()
                raise
            return store
        path.parent.mkdir(parents=True, exist_ok=True)
        store = cls(
            path, journal_mode=journal_mode, busy_timeout_s=busy_timeout_s, audio_dir=audio_dir
        )
        try:
            store._migrate()
        except BaseException:
            store.close()  # frees its connection and the open-lock it took
            raise
        (store.root / store.audio_rel).mkdir(parents=True, exist_ok=True)
        return store

    # -- connections

    @property
    def db(self) -> sqlite_utils.Database:
        """This thread's connection (created on first use)."""
        if self._closed:
            raise StoreError("the store is closed")
        db = getattr(self._local, "db", None)
        if db is None:
            conn = self._connect_ro() if self.read_only else self._connect_rw()
            db = sqlite_utils.Database(conn)
            self._local.db = db
            with self._lock:
                self._conns.append(conn)
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
            deadline = time.monotonic() + 2.0
            while True:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
                        raise StoreError(
                            f"{self.path} is in journal mode {current} and another program has "
                            f"it open; refusing to switch it to {self.journal_mode} under a "
                            f"running server (it would fail with 'database is locked'). Open it "
                            f"with journal_mode={current!r} (--journal-mode {current}), or stop "
                            f"the other program first."
                        ) from None
                    time.sleep(0.05)
            try:
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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _check_version(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}; this listenlab knows up to "
                f"{SCHEMA_VERSION}: upgrade listenlab"
            )
        if version < SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version} (this listenlab writes "
                f"{SCHEMA_VERSION}); a read-only command does not migrate it: start "
                "`listenlab serve` on it once (or open it read-write) to upgrade it"
            )

    def _migrate(self) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then see it done
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}; this listenlab knows up to "
                    f"{SCHEMA_VERSION}: upgrade listenlab"
                )
            for v in range(version + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[v](db)
                db.execute(f"PRAGMA user_version = {v}")
            db.execute("COMMIT")
        except BaseException:
            db.rollback()
            raise

    # -- generic idempotent insert

    def _insert(
        self, table: str, pk: str, row: dict[str, Any], unique_msg: str | None = None
    ) -> Written:
        """INSERT; a row with this pk already there means a re-send (created=False).

        A UNIQUE violation on another key (one vote per rater per item) raises AlreadyVoted.
        The database enforces both, so concurrent writers cannot race past the check.
        """
        cols = ", ".join(f'"{k}"' for k in row)
        qs = ", ".join("?" for _ in row)
        db = self.db
        try:
            db.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({qs})', list(row.values()))
            db.commit()
            return Written(row[pk], True)
        except sqlite3.IntegrityError as e:
            db.rollback()
            existing = db.execute(f'SELECT 1 FROM "{table}" WHERE "{pk}" = ?', [row[pk]]).fetchone()
            if existing:
                return Written(row[pk], False)
            if "UNIQUE" in str(e) and unique_msg:
                raise AlreadyVoted(unique_msg, self._existing_for(table, row)) from None
            if "FOREIGN KEY" in str(e):
                raise UnknownItem(f"{table}: a referenced row does not exist ({e})") from None
            raise

    def _existing_for(self, table: str, row: dict[str, Any]) -> str:
        if table == "mos_ratings":
            r = self.db.execute(
                "SELECT rating_id FROM mos_ratings WHERE test_id=? AND rater_id=? AND take_id=?",
                [row["test_id"], row["rater_id"], row["take_id"]],
            ).fetchone()
        elif table == "ab_votes":
            r = self.db.execute(
                "SELECT vote_id FROM ab_votes WHERE test_id=? AND rater_id=? AND item_key=?",
                [row["test_id"], row["rater_id"], row["item_key"]],
            ).fetchone()
        elif table == "assignments":
            r = self.db.execute(
                "SELECT assignment_id FROM assignments WHERE test_id=? AND rater_id=? AND position=?",
                [row["test_id"], row["rater_id"], row["position"]],
            ).fetchone()
        else:
            r = None
        return r[0] if r else ""

    # -- systems, prompts, raters, tests

    def add_system(self, s: System) -> Written:
        row = asdict(s)
        row["params"] = _json(s.params)
        return self._insert("systems", "system_id", row)

    def add_prompt(self, p: Prompt) -> Written:
        return self._insert("prompts", "prompt_id", asdict(p))

    def add_rater(self, r: Rater) -> Written:
        row = asdict(r)
        row["meta"] = _json(r.meta)
        return self._insert("raters", "rater_id", row)

    def add_test(self, t: ListeningTest) -> Written:
        if t.kind not in TEST_KINDS:
            raise InvalidRequest(
                f"test kind must be one of {', '.join(TEST_KINDS)}, got {t.kind!r}"
            )
        row = asdict(t)
        row["config"] = _json(t.config)
        return self._insert("tests", "test_id", row)

    def add_assignment(self, a: Assignment) -> Written:
        if a.role not in ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(ROLES)}, got {a.role!r}")
        self._require("takes", "take_id", a.take_id)
        if a.take_b_id:
            self._require("takes", "take_id", a.take_b_id)
        row = asdict(a)
        row["slots"] = None if a.slots is None else json.dumps(list(a.slots))
        row["meta"] = _json(a.meta)
        return self._insert(
            "assignments",
            "assignment_id",
            row,
            unique_msg=f"rater {a.rater_id} already has an item at position {a.position} of {a.test_id}",
        )

    def get_system(self, system_id: str) -> System | None:
        r = self._row("systems", "system_id", system_id)
        if r is None:
            return None
        r["params"] = json.loads(r["params"]) if r["params"] else {}
        return System(**r)

    def get_prompt(self, prompt_id: str) -> Prompt | None:
        r = self._row("prompts", "prompt_id", prompt_id)
        return None if r is None else Prompt(**r)

    def assignments(self, test_id: str, rater_id: str) -> list[Assignment]:
        rows = self.db["assignments"].rows_where(
            "test_id = ? AND rater_id = ?", [test_id, rater_id], order_by="position"
        )
        out = []
        for r in rows:
            r["slots"] = tuple(json.loads(r["slots"])) if r.get("slots") else None
            r["meta"] = json.loads(r["meta"]) if r.get("meta") else {}
            out.append(Assignment(**r))
        return out

    def _row(self, table: str, pk: str, value: str) -> dict[str, Any] | None:
        cur = self.db.execute(f'SELECT * FROM "{table}" WHERE "{pk}" = ?', [value])
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r, strict=True))

    def _require(self, table: str, pk: str, value: str | None) -> None:
        if (
            value is not None
            and not self.db.execute(f'SELECT 1 FROM "{table}" WHERE "{pk}"=?', [value]).fetchone()
        ):
            raise UnknownItem(f"no {table[:-1]} {value!r} in the store")

    # -- takes

    def audio_path(self, take_id: str) -> Path:
        r = self._row("takes", "take_id", take_id)
        if r is None:
            raise UnknownItem(f"no take {take_id!r} in the store")
        return self.root / r["audio_path"]

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
        if self._row("takes", "take_id", take.take_id) is not None:
            return take.take_id
        self._require("systems", "system_id", system_id)
        self._require("prompts", "prompt_id", prompt_id)
        if audio_format not in {"wav", "flac"}:
            raise InvalidRequest(f"audio_format must be wav or flac, got {audio_format!r}")
        rel = f"{self.audio_rel}/{take.take_id}.{audio_format}"
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_audio_file(dest, take.audio, take.sample_rate)  # first: no row without its file
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
            "meta": _json(take.meta),
            "underrun_count": None,
            "underrun_stall_ms": None,
            "created_at": take.created_at,
        }
        db = self.db
        try:
            with db.atomic():
                cols = ", ".join(f'"{k}"' for k in row)
                db.execute(
                    f"INSERT INTO takes ({cols}) VALUES ({', '.join('?' for _ in row)})",
                    list(row.values()),
                )
                db.conn.executemany(
                    'INSERT INTO chunks (take_id, idx, arrival_ms, "offset", frames) VALUES (?,?,?,?,?)',
                    [
                        (take.take_id, c.index, c.arrival_ms, c.offset, c.frames)
                        for c in take.chunks
                    ],
                )
        except sqlite3.IntegrityError:
            if self._row("takes", "take_id", take.take_id) is not None:
                return take.take_id  # saved concurrently by another writer
            raise
        return take.take_id

    def load_take(self, take_id: str) -> Take:
        r = self._row("takes", "take_id", take_id)
        if r is None:
            raise UnknownItem(f"no take {take_id!r} in the store")
        audio, sr = sf.read(self.root / r["audio_path"], dtype="int16", always_2d=True)
        if sr != r["sample_rate"] or audio.shape[1] != r["channels"]:
            raise StoreError(f"take {take_id}: audio file does not match its DB row")
        chunks = [
            ChunkRecord(index=c[0], arrival_ms=c[1], offset=c[2], frames=c[3])
            for c in self.db.execute(
                'SELECT idx, arrival_ms, "offset", frames FROM chunks WHERE take_id=? ORDER BY idx',
                [take_id],
            ).fetchall()
        ]
        meta = json.loads(r["meta"]) if r["meta"] else {}
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
            meta=meta,
        )

    def take_ids(self, system_id: str | None = None) -> list[str]:
        if system_id is None:
            return [
                r[0]
                for r in self.db.execute("SELECT take_id FROM takes ORDER BY created_at, take_id")
            ]
        return [
            r[0]
            for r in self.db.execute(
                "SELECT take_id FROM takes WHERE system_id=? ORDER BY created_at, take_id",
                [system_id],
            )
        ]

    def boundaries_ms(self, take_id: str) -> list[float]:
        """Seam times in ms (start of every chunk after the first), from the chunk rows."""
        r = self._row("takes", "take_id", take_id)
        if r is None:
            raise UnknownItem(f"no take {take_id!r} in the store")
        offs = self.db.execute(
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
        self._require("takes", "take_id", take_id)
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
        w = self._insert("underruns", "report_id", row)
        if w.created:
            self.db.execute(
                "UPDATE takes SET underrun_count = max(coalesce(underrun_count, 0), ?), "
                "underrun_stall_ms = max(coalesce(underrun_stall_ms, 0), ?) WHERE take_id = ?",
                [row["count"], row["stall_ms"], take_id],
            )
            self.db.commit()
        return w

    # -- votes and marks

    def _assignment_for(self, test_id: str, rater_id: str, take_id: str) -> dict[str, Any] | None:
        cur = self.db.execute(
            "SELECT role, expected FROM assignments WHERE test_id=? AND rater_id=? AND take_id=? LIMIT 1",
            [test_id, rater_id, take_id],
        )
        r = cur.fetchone()
        return None if r is None else {"role": r[0], "expected": r[1]}

    def add_mos_rating(self, m: MosRating) -> Written:
        if not np.isfinite(m.score):
            raise InvalidRequest(f"score must be a finite number, got {m.score!r}")
        self._require("tests", "test_id", m.test_id)
        row = asdict(m)
        if m.role is None:
            a = self._assignment_for(m.test_id, m.rater_id, m.take_id)
            row["role"] = a["role"] if a else "item"
            if m.expected is None and a:
                row["expected"] = a["expected"]
        if row["role"] not in ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(ROLES)}, got {row['role']!r}")
        return self._insert(
            "mos_ratings",
            "rating_id",
            row,
            unique_msg=f"rater {m.rater_id} already rated take {m.take_id} in test {m.test_id}",
        )

    def _system_of(self, take_id: str) -> str | None:
        r = self.db.execute("SELECT system_id FROM takes WHERE take_id=?", [take_id]).fetchone()
        return r[0] if r else None

    def add_ab_vote(self, v: AbVote) -> Written:
        if v.choice not in AB_CHOICES:
            raise InvalidRequest(f"choice must be one of {', '.join(AB_CHOICES)}, got {v.choice!r}")
        if v.take_a == v.take_b:
            raise InvalidRequest("an A/B vote needs two different takes")
        if v.cmos is not None and not -3 <= v.cmos <= 3:
            raise InvalidRequest(f"cmos must be within -3..+3, got {v.cmos}")
        self._require("tests", "test_id", v.test_id)
        row = asdict(v)
        row["item_key"] = _ab_item_key(v.take_a, v.take_b)
        row["system_a"] = v.system_a or self._system_of(v.take_a)
        row["system_b"] = v.system_b or self._system_of(v.take_b)
        return self._insert(
            "ab_votes",
            "vote_id",
            row,
            unique_msg=f"rater {v.rater_id} already voted on {v.take_a} vs {v.take_b} in test {v.test_id}",
        )

    def add_glitch_report(self, g: GlitchReport) -> Written:
        """Store a rater's glitch mark; the nearest seam is computed from the take if not given."""
        if g.kind is not None and g.kind not in GLITCH_KINDS:
            raise InvalidRequest(
                f"glitch kind must be one of {', '.join(GLITCH_KINDS)} or None, got {g.kind!r}"
            )
        if not np.isfinite(g.position_ms) or g.position_ms < 0:
            raise InvalidRequest(f"position_ms must be a finite time >= 0, got {g.position_ms!r}")
        row = asdict(g)
        if g.boundary_index is None:
            nb = nearest_boundary(self.boundaries_ms(g.take_id), g.position_ms)
            if nb is not None:
                row["boundary_index"], row["boundary_ms"], row["distance_ms"] = nb
        else:
            self._require("takes", "take_id", g.take_id)
        return self._insert("glitch_reports", "report_id", row)

    def add_auto_findings(
        self, take_id: str, findings: Iterable[Any], *, detector: str = "glitches"
    ) -> int:
        """Replace the automatic findings stored for ``take_id`` (re-running is idempotent).

        ``findings`` are :class:`evaluation.glitches.Finding` objects (or dicts with ``kind``,
        ``time_s``, ``boundary_index``, ``severity``, ``evidence``). Returns how many were stored.
        """
        self._require("takes", "take_id", take_id)
        rows = []
        for i, f in enumerate(findings):
            d = f if isinstance(f, dict) else (f.to_dict() if hasattr(f, "to_dict") else asdict(f))
            rows.append(
                (
                    f"{take_id}:{detector}:{i}",
                    take_id,
                    detector,
                    d["kind"],
                    d.get("time_s"),
                    d.get("boundary_index"),
                    d.get("severity"),
                    json.dumps(d.get("evidence", {}), sort_keys=True, default=float),
                    now_iso(),
                )
            )
        db = self.db
        with db.atomic():
            db.execute(
                "DELETE FROM auto_findings WHERE take_id=? AND detector=?", [take_id, detector]
            )
            db.conn.executemany("INSERT INTO auto_findings VALUES (?,?,?,?,?,?,?,?,?)", rows)
        return len(rows)

    # -- frames for the statistics

    def frame(self, table: str) -> pd.DataFrame:
        """A whole table as a DataFrame (every table of the schema, plus ``underruns``)."""
        if table not in self.db.table_names():
            raise InvalidRequest(f"no table {table!r}; tables: {', '.join(self.db.table_names())}")
        return self._query(f'SELECT * FROM "{table}"')

    def _query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        cur = self.db.execute(sql, list(params))
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])

    def mos_frame(self, test_id: str | None = None) -> pd.DataFrame:
        """MOS ratings joined with take info: rating_id, test_id, rater_id, take_id, score,
        played_ms, role, expected, system_id, prompt_id, duration_s."""
        sql = (
            "SELECT m.*, t.system_id, t.prompt_id, t.duration_s FROM mos_ratings m "
            "LEFT JOIN takes t ON t.take_id = m.take_id"
        )
        return self._query(
            sql + (" WHERE m.test_id = ?" if test_id else ""), [test_id] if test_id else []
        )

    def ab_frame(self, test_id: str | None = None) -> pd.DataFrame:
        """A/B votes with prompt_id and clip durations of both takes."""
        sql = (
            "SELECT v.*, ta.prompt_id AS prompt_id, ta.duration_s AS duration_a_s, "
            "tb.duration_s AS duration_b_s FROM ab_votes v "
            "LEFT JOIN takes ta ON ta.take_id = v.take_a LEFT JOIN takes tb ON tb.take_id = v.take_b"
        )
        return self._query(
            sql + (" WHERE v.test_id = ?" if test_id else ""), [test_id] if test_id else []
        )

    def glitch_frame(self) -> pd.DataFrame:
        """Rater glitch reports with the take's system and duration."""
        return self._query(
            "SELECT g.*, t.system_id, t.duration_s, t.chunk_count FROM glitch_reports g "
            "LEFT JOIN takes t ON t.take_id = g.take_id"
        )

    def findings_frame(self) -> pd.DataFrame:
        return self._query(
            "SELECT f.*, t.system_id FROM auto_findings f LEFT JOIN takes t ON t.take_id = f.take_id"
        )

    def takes_frame(self) -> pd.DataFrame:
        return self._query("SELECT * FROM takes ORDER BY created_at, take_id")

    def chunks_frame(self) -> pd.DataFrame:
        return self._query("SELECT * FROM chunks ORDER BY take_id, idx")

    def underruns_frame(self) -> pd.DataFrame:
        return self._query("SELECT * FROM underruns ORDER BY created_at")


__all__ = [
    "AB_CHOICES",
    "GLITCH_KINDS",
    "JOURNAL_MODES",
    "SCHEMA_VERSION",
    "AbVote",
    "AlreadyVoted",
    "Assignment",
    "GlitchReport",
    "ListeningTest",
    "MosRating",
    "Prompt",
    "Rater",
    "Store",
    "StoreError",
    "System",
    "UnknownItem",
    "Written",
    "nearest_boundary",
]
