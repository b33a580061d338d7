"""The store's schema: every table, as numbered migrations from an empty file to today.

Why one table of migrations: the schema version is ``PRAGMA user_version``, and a DB is only
as trustworthy as the path that built it. Every table the app keeps is created here, in order
(the arena's too, since version 4: it used to create its tables itself, outside the version),
so a DB at version N has exactly the tables version N promises, whoever opened it first.
:func:`migrate` applies the missing versions on a read-write open, in one transaction;
:func:`check_version` refuses, on a read-only open, a DB this listenlab would have to migrate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.store.records import StoreError

if TYPE_CHECKING:
    import sqlite_utils

SCHEMA_VERSION = 6


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


def _schema_v4(db: sqlite_utils.Database) -> None:
    """The open arena: battles, their streams and plays, one vote per battle, the voter salt
    and admin settings, dropped voters. Before this version the arena created these tables
    itself at start-up, so a version-3 DB may already have them (with or without the
    ``voter`` columns, added after the arena's first release): every statement is written to
    keep what is there."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS arena_battles (
            battle_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            text TEXT NOT NULL,
            text_source TEXT NOT NULL,
            system_a TEXT NOT NULL,
            system_b TEXT NOT NULL,
            created_ts REAL NOT NULL,
            created_at TEXT NOT NULL,
            played_a_ts REAL,
            played_b_ts REAL
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS arena_streams (
            take_id TEXT PRIMARY KEY,
            battle_id TEXT NOT NULL REFERENCES arena_battles(battle_id),
            side TEXT NOT NULL CHECK (side IN ('a', 'b')),
            ws_session TEXT NOT NULL,
            requested_ts REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'streaming',
            duration_s REAL,
            earliest_end_ts REAL,
            superseded_ts REAL,
            played_ts REAL,
            played_ms REAL
        )"""
    )
    db.execute("CREATE TABLE IF NOT EXISTS arena_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        """CREATE TABLE IF NOT EXISTS arena_dropped_voters (
            voter TEXT PRIMARY KEY,
            votes_dropped INTEGER NOT NULL,
            dropped_at TEXT NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS arena_votes (
            battle_id TEXT PRIMARY KEY REFERENCES arena_battles(battle_id),
            choice TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'both_bad')),
            system_a TEXT NOT NULL,
            system_b TEXT NOT NULL,
            text_source TEXT NOT NULL,
            decision_ms REAL,
            voted_ts REAL NOT NULL,
            created_at TEXT NOT NULL
        )"""
    )
    for table in ("arena_battles", "arena_votes"):
        cols = {r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()}
        if "voter" not in cols:
            db.execute(f"ALTER TABLE {table} ADD COLUMN voter TEXT")
    for sql in (
        "CREATE INDEX IF NOT EXISTS arena_battles_owner ON arena_battles (owner, created_ts)",
        "CREATE INDEX IF NOT EXISTS arena_battles_created ON arena_battles (created_ts)",
        "CREATE INDEX IF NOT EXISTS arena_battles_voter ON arena_battles (voter, created_ts)",
        "CREATE INDEX IF NOT EXISTS arena_streams_battle ON arena_streams (battle_id)",
        "CREATE INDEX IF NOT EXISTS arena_streams_session ON arena_streams (ws_session, status)",
        "CREATE INDEX IF NOT EXISTS arena_votes_voter ON arena_votes (voter, voted_ts)",
    ):
        db.execute(sql)


def _schema_v5(db: sqlite_utils.Database) -> None:
    """A listening test's optional rater questionnaire (listening device, headphone type,
    native language, age band: ITU-T P.808's questions), one JSON object per rater."""
    db.execute("ALTER TABLE test_raters ADD COLUMN questionnaire TEXT")


def _schema_v6(db: sqlite_utils.Database) -> None:
    """A listening test's crowd settings (completion and screen-out codes and URLs) can be
    edited while it is open; each change is kept with its time, so a study can say which
    raters saw which code."""
    for sql in (
        """CREATE TABLE test_changes (
            change_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, field TEXT NOT NULL,
            old_value TEXT, new_value TEXT, changed_at TEXT NOT NULL)""",
        "CREATE INDEX idx_test_changes_test ON test_changes (test_id, changed_at)",
    ):
        db.execute(sql)


MIGRATIONS = {
    1: _schema_v1,
    2: _schema_v2,
    3: _schema_v3,
    4: _schema_v4,
    5: _schema_v5,
    6: _schema_v6,
}
"""``{version: function(db)}``: applied in order, each in one transaction, on open."""


def version_of(db: sqlite_utils.Database) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _too_new(path: Path, version: int) -> StoreError:
    return StoreError(
        f"{path} has schema version {version}; this listenlab knows up to "
        f"{SCHEMA_VERSION}: upgrade listenlab"
    )


def check_version(db: sqlite_utils.Database, path: Path) -> None:
    """Refuse a DB that is not at :data:`SCHEMA_VERSION` (a read-only open cannot migrate)."""
    version = version_of(db)
    if version > SCHEMA_VERSION:
        raise _too_new(path, version)
    if version < SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version} (this listenlab writes "
            f"{SCHEMA_VERSION}); a read-only command does not migrate it: start "
            "`listenlab serve` on it once (or open it read-write) to upgrade it"
        )


def migrate(db: sqlite_utils.Database, path: Path) -> None:
    """Bring the DB to :data:`SCHEMA_VERSION` (one transaction; refuses a newer DB)."""
    db.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then see it done
    try:
        version = version_of(db)
        if version > SCHEMA_VERSION:
            raise _too_new(path, version)
        for v in range(version + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[v](db)
            db.execute(f"PRAGMA user_version = {v}")
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "check_version", "migrate", "version_of"]
