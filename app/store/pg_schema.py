"""The store's schema on PostgreSQL: the same tables, columns (in the same order) and keys as
SQLite's version 4, created in one transaction; then the versions after it, as on SQLite.

Why a baseline and not SQLite's four migrations replayed: no PostgreSQL store existed before
version 4 (issue #30), so there is nothing older to upgrade, and SQLite's early migrations are
written in its own dialect (``sqlite-utils``, ``PRAGMA``). Column types follow SQLite's
declarations: TEXT → TEXT, INTEGER → BIGINT, REAL → DOUBLE PRECISION, so every value a SQLite
store holds fits. ``tests/test_store_engines.py`` compares both engines' tables column by column,
and :data:`PG_MIGRATIONS` must name every version from :data:`PG_BASELINE` to
:data:`app.store.schema.SCHEMA_VERSION`.

Three tables exist only here, because PostgreSQL replicas share nothing but the database:
``take_audio`` (a take's encoded audio: no replica has another's disk), ``login_failures``
(the admin login's back-off, per client, across replicas) and ``schema_version``.
"""

from __future__ import annotations

PG_BASELINE = 4
"""The schema version a new PostgreSQL store is created at."""

BASELINE_TABLES = (
    """CREATE TABLE systems (
        system_id TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        voice TEXT,
        params TEXT,
        label TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE prompts (
        prompt_id TEXT PRIMARY KEY,
        "text" TEXT NOT NULL,
        language TEXT,
        category TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE takes (
        take_id TEXT PRIMARY KEY,
        system_id TEXT REFERENCES systems(system_id),
        prompt_id TEXT REFERENCES prompts(prompt_id),
        backend TEXT NOT NULL,
        request TEXT,
        "text" TEXT,
        status TEXT NOT NULL,
        error TEXT,
        sample_rate BIGINT NOT NULL,
        channels BIGINT NOT NULL,
        frames BIGINT NOT NULL,
        duration_s DOUBLE PRECISION,
        total_ms DOUBLE PRECISION,
        ttfa_ms DOUBLE PRECISION,
        rtf DOUBLE PRECISION,
        chunk_count BIGINT,
        audio_path TEXT NOT NULL,
        meta TEXT,
        underrun_count BIGINT,
        underrun_stall_ms DOUBLE PRECISION,
        created_at TEXT
    )""",
    """CREATE TABLE chunks (
        take_id TEXT REFERENCES takes(take_id),
        idx BIGINT,
        arrival_ms DOUBLE PRECISION,
        "offset" BIGINT,
        frames BIGINT,
        PRIMARY KEY (take_id, idx)
    )""",
    """CREATE TABLE underruns (
        report_id TEXT PRIMARY KEY,
        take_id TEXT REFERENCES takes(take_id),
        rater_id TEXT,
        source TEXT,
        "count" BIGINT,
        stall_ms DOUBLE PRECISION,
        positions_ms TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE raters (
        rater_id TEXT PRIMARY KEY,
        name TEXT,
        meta TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE tests (
        test_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        name TEXT,
        config TEXT,
        created_at TEXT,
        status TEXT,
        updated_at TEXT
    )""",
    """CREATE TABLE assignments (
        assignment_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL REFERENCES tests(test_id),
        rater_id TEXT NOT NULL REFERENCES raters(rater_id),
        "position" BIGINT,
        take_id TEXT NOT NULL,
        take_b_id TEXT,
        role TEXT NOT NULL,
        expected DOUBLE PRECISION,
        created_at TEXT,
        slots TEXT,
        "condition" TEXT,
        meta TEXT
    )""",
    """CREATE TABLE mos_ratings (
        rating_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        take_id TEXT NOT NULL,
        score DOUBLE PRECISION NOT NULL,
        played_ms DOUBLE PRECISION,
        role TEXT NOT NULL,
        expected DOUBLE PRECISION,
        created_at TEXT,
        "condition" TEXT,
        assignment_id TEXT
    )""",
    """CREATE TABLE ab_votes (
        vote_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        item_key TEXT NOT NULL,
        take_a TEXT NOT NULL,
        take_b TEXT NOT NULL,
        system_a TEXT,
        system_b TEXT,
        choice TEXT NOT NULL,
        cmos DOUBLE PRECISION,
        played_a_ms DOUBLE PRECISION,
        played_b_ms DOUBLE PRECISION,
        created_at TEXT,
        "condition" TEXT,
        assignment_id TEXT
    )""",
    """CREATE TABLE glitch_reports (
        report_id TEXT PRIMARY KEY,
        take_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        test_id TEXT,
        position_ms DOUBLE PRECISION NOT NULL,
        kind TEXT,
        boundary_index BIGINT,
        boundary_ms DOUBLE PRECISION,
        distance_ms DOUBLE PRECISION,
        note TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE auto_findings (
        finding_id TEXT PRIMARY KEY,
        take_id TEXT NOT NULL,
        detector TEXT,
        kind TEXT NOT NULL,
        time_s DOUBLE PRECISION,
        boundary_index BIGINT,
        severity DOUBLE PRECISION,
        evidence TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE stimuli (
        stimulus_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL REFERENCES tests(test_id),
        take_id TEXT NOT NULL REFERENCES takes(take_id),
        source_take_id TEXT,
        system_id TEXT,
        prompt_id TEXT,
        kind TEXT NOT NULL,
        expected DOUBLE PRECISION,
        "condition" TEXT,
        gain_db DOUBLE PRECISION,
        loudness_lufs DOUBLE PRECISION,
        target_lufs DOUBLE PRECISION,
        meta TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE test_raters (
        test_id TEXT NOT NULL REFERENCES tests(test_id),
        rater_id TEXT NOT NULL REFERENCES raters(rater_id),
        token_hash TEXT NOT NULL,
        seq BIGINT NOT NULL,
        crowd_id TEXT,
        crowd_source TEXT,
        consent_at TEXT,
        headphone TEXT,
        headphone_pass BIGINT,
        completion_code TEXT,
        finished_at TEXT,
        created_at TEXT,
        study_id TEXT,
        session_id TEXT,
        design_row BIGINT,
        seen_at DOUBLE PRECISION,
        screened_out_at TEXT,
        screenout_code TEXT,
        familiar TEXT,
        familiarised_at TEXT,
        PRIMARY KEY (test_id, rater_id)
    )""",
    """CREATE TABLE play_events (
        event_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        slot BIGINT NOT NULL,
        take_id TEXT,
        "condition" TEXT,
        played_ms DOUBLE PRECISION,
        duration_ms DOUBLE PRECISION,
        complete BIGINT,
        server_elapsed_ms DOUBLE PRECISION,
        underruns BIGINT,
        stall_ms DOUBLE PRECISION,
        created_at TEXT
    )""",
    """CREATE TABLE answers (
        answer_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        payload TEXT,
        "condition" TEXT,
        created_at TEXT
    )""",
    """CREATE TABLE mushra_ratings (
        rating_id TEXT PRIMARY KEY,
        test_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        slot BIGINT NOT NULL,
        take_id TEXT NOT NULL,
        system_id TEXT,
        role TEXT NOT NULL,
        prompt_id TEXT,
        score DOUBLE PRECISION NOT NULL,
        created_at TEXT
    )""",
    """CREATE TABLE screen_trials (
        test_id TEXT NOT NULL,
        rater_id TEXT NOT NULL,
        n BIGINT NOT NULL,
        kind TEXT NOT NULL,
        "key" TEXT NOT NULL,
        duration_ms DOUBLE PRECISION NOT NULL,
        fetched_at DOUBLE PRECISION,
        fetches BIGINT NOT NULL DEFAULT 0,
        answer BIGINT,
        answered_at TEXT,
        PRIMARY KEY (test_id, rater_id, n)
    )""",
    """CREATE TABLE arena_battles (
        battle_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        "text" TEXT NOT NULL,
        text_source TEXT NOT NULL,
        system_a TEXT NOT NULL,
        system_b TEXT NOT NULL,
        created_ts DOUBLE PRECISION NOT NULL,
        created_at TEXT NOT NULL,
        played_a_ts DOUBLE PRECISION,
        played_b_ts DOUBLE PRECISION,
        voter TEXT
    )""",
    """CREATE TABLE arena_streams (
        take_id TEXT PRIMARY KEY,
        battle_id TEXT NOT NULL REFERENCES arena_battles(battle_id),
        side TEXT NOT NULL CHECK (side IN ('a', 'b')),
        ws_session TEXT NOT NULL,
        requested_ts DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL DEFAULT 'streaming',
        duration_s DOUBLE PRECISION,
        earliest_end_ts DOUBLE PRECISION,
        superseded_ts DOUBLE PRECISION,
        played_ts DOUBLE PRECISION,
        played_ms DOUBLE PRECISION
    )""",
    """CREATE TABLE arena_meta (
        "key" TEXT PRIMARY KEY,
        "value" TEXT NOT NULL
    )""",
    """CREATE TABLE arena_dropped_voters (
        voter TEXT PRIMARY KEY,
        votes_dropped BIGINT NOT NULL,
        dropped_at TEXT NOT NULL
    )""",
    """CREATE TABLE arena_votes (
        battle_id TEXT PRIMARY KEY REFERENCES arena_battles(battle_id),
        choice TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'both_bad')),
        system_a TEXT NOT NULL,
        system_b TEXT NOT NULL,
        text_source TEXT NOT NULL,
        decision_ms DOUBLE PRECISION,
        voted_ts DOUBLE PRECISION NOT NULL,
        created_at TEXT NOT NULL,
        voter TEXT
    )""",
    """CREATE TABLE take_audio (
        take_id TEXT PRIMARY KEY REFERENCES takes(take_id),
        format TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        data BYTEA NOT NULL
    )""",
    """CREATE TABLE login_failures (
        client TEXT PRIMARY KEY,
        failures BIGINT NOT NULL,
        last_ts DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX login_failures_last ON login_failures (last_ts)",
)
"""Version 4's tables, in SQLite's column order, and the PostgreSQL-only ones."""

BASELINE_INDEXES = (
    "CREATE UNIQUE INDEX idx_ab_votes_test_id_rater_id_item_key ON ab_votes (test_id, rater_id, item_key)",
    "CREATE UNIQUE INDEX idx_answers_item ON answers (test_id, rater_id, assignment_id)",
    "CREATE INDEX arena_battles_created ON arena_battles (created_ts)",
    "CREATE INDEX arena_battles_owner ON arena_battles (owner, created_ts)",
    "CREATE INDEX arena_battles_voter ON arena_battles (voter, created_ts)",
    "CREATE INDEX arena_streams_battle ON arena_streams (battle_id)",
    "CREATE INDEX arena_streams_session ON arena_streams (ws_session, status)",
    "CREATE INDEX arena_votes_voter ON arena_votes (voter, voted_ts)",
    'CREATE UNIQUE INDEX idx_assignments_test_id_rater_id_position ON assignments (test_id, rater_id, "position")',
    "CREATE INDEX idx_auto_findings_take_id ON auto_findings (take_id)",
    "CREATE INDEX idx_glitch_reports_take_id ON glitch_reports (take_id)",
    "CREATE UNIQUE INDEX idx_mos_ratings_test_id_rater_id_take_id ON mos_ratings (test_id, rater_id, take_id)",
    "CREATE UNIQUE INDEX idx_mushra_item ON mushra_ratings (test_id, rater_id, assignment_id, slot)",
    "CREATE INDEX idx_play_events_item ON play_events (test_id, rater_id, assignment_id)",
    "CREATE UNIQUE INDEX idx_stimuli_test_take ON stimuli (test_id, take_id)",
    "CREATE INDEX idx_takes_system_id ON takes (system_id)",
    "CREATE INDEX idx_test_raters_crowd ON test_raters (test_id, crowd_id)",
    "CREATE UNIQUE INDEX idx_test_raters_seq ON test_raters (test_id, seq)",
    "CREATE UNIQUE INDEX idx_test_raters_token ON test_raters (token_hash)",
)
"""SQLite's indexes of version 4, with the same names and columns (unique ones unique)."""

PG_ONLY_TABLES = ("take_audio", "login_failures", "schema_version")


def baseline() -> tuple[str, ...]:
    return (*BASELINE_TABLES, *BASELINE_INDEXES)


PG_MIGRATIONS: dict[int, tuple[str, ...]] = {
    4: (),
    5: ("ALTER TABLE test_raters ADD COLUMN questionnaire TEXT",),
    6: (
        """CREATE TABLE test_changes (
            change_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, field TEXT NOT NULL,
            old_value TEXT, new_value TEXT, changed_at TEXT NOT NULL)""",
        "CREATE INDEX idx_test_changes_test ON test_changes (test_id, changed_at)",
    ),
}
"""``{version: statements}`` after the baseline (version 4 is the baseline itself). A new
SQLite migration in :mod:`app.store.schema` needs its PostgreSQL twin here."""


__all__ = [
    "BASELINE_INDEXES",
    "BASELINE_TABLES",
    "PG_BASELINE",
    "PG_MIGRATIONS",
    "PG_ONLY_TABLES",
    "baseline",
]
