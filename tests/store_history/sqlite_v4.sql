-- The SQLite schema as listenlab's version-4 migrations left it (sqlite_master, in order),
-- dumped from app/store/schema.py before the one declaration replaced it.
CREATE TABLE "systems" (
   "system_id" TEXT PRIMARY KEY,
   "backend" TEXT NOT NULL,
   "voice" TEXT,
   "params" TEXT,
   "label" TEXT,
   "created_at" TEXT
);
CREATE TABLE "prompts" (
   "prompt_id" TEXT PRIMARY KEY,
   "text" TEXT NOT NULL,
   "language" TEXT,
   "category" TEXT,
   "created_at" TEXT
);
CREATE TABLE "takes" (
   "take_id" TEXT PRIMARY KEY,
   "system_id" TEXT REFERENCES "systems"("system_id"),
   "prompt_id" TEXT REFERENCES "prompts"("prompt_id"),
   "backend" TEXT NOT NULL,
   "request" TEXT,
   "text" TEXT,
   "status" TEXT NOT NULL,
   "error" TEXT,
   "sample_rate" INTEGER NOT NULL,
   "channels" INTEGER NOT NULL,
   "frames" INTEGER NOT NULL,
   "duration_s" REAL,
   "total_ms" REAL,
   "ttfa_ms" REAL,
   "rtf" REAL,
   "chunk_count" INTEGER,
   "audio_path" TEXT NOT NULL,
   "meta" TEXT,
   "underrun_count" INTEGER,
   "underrun_stall_ms" REAL,
   "created_at" TEXT
);
CREATE INDEX "idx_takes_system_id"
    ON "takes" ("system_id");
CREATE TABLE "chunks" (
   "take_id" TEXT REFERENCES "takes"("take_id"),
   "idx" INTEGER,
   "arrival_ms" REAL,
   "offset" INTEGER,
   "frames" INTEGER,
   PRIMARY KEY ("take_id", "idx")
);
CREATE TABLE "underruns" (
   "report_id" TEXT PRIMARY KEY,
   "take_id" TEXT REFERENCES "takes"("take_id"),
   "rater_id" TEXT,
   "source" TEXT,
   "count" INTEGER,
   "stall_ms" REAL,
   "positions_ms" TEXT,
   "created_at" TEXT
);
CREATE TABLE "raters" (
   "rater_id" TEXT PRIMARY KEY,
   "name" TEXT,
   "meta" TEXT,
   "created_at" TEXT
);
CREATE TABLE "tests" (
   "test_id" TEXT PRIMARY KEY,
   "kind" TEXT NOT NULL,
   "name" TEXT,
   "config" TEXT,
   "created_at" TEXT
, status TEXT, updated_at TEXT);
CREATE TABLE "assignments" (
   "assignment_id" TEXT PRIMARY KEY,
   "test_id" TEXT NOT NULL REFERENCES "tests"("test_id"),
   "rater_id" TEXT NOT NULL REFERENCES "raters"("rater_id"),
   "position" INTEGER,
   "take_id" TEXT NOT NULL,
   "take_b_id" TEXT,
   "role" TEXT NOT NULL,
   "expected" REAL,
   "created_at" TEXT
, slots TEXT, condition TEXT, meta TEXT);
CREATE UNIQUE INDEX "idx_assignments_test_id_rater_id_position"
    ON "assignments" ("test_id", "rater_id", "position");
CREATE TABLE "mos_ratings" (
   "rating_id" TEXT PRIMARY KEY,
   "test_id" TEXT NOT NULL,
   "rater_id" TEXT NOT NULL,
   "take_id" TEXT NOT NULL,
   "score" REAL NOT NULL,
   "played_ms" REAL,
   "role" TEXT NOT NULL,
   "expected" REAL,
   "created_at" TEXT
, condition TEXT, assignment_id TEXT);
CREATE UNIQUE INDEX "idx_mos_ratings_test_id_rater_id_take_id"
    ON "mos_ratings" ("test_id", "rater_id", "take_id");
CREATE TABLE "ab_votes" (
   "vote_id" TEXT PRIMARY KEY,
   "test_id" TEXT NOT NULL,
   "rater_id" TEXT NOT NULL,
   "item_key" TEXT NOT NULL,
   "take_a" TEXT NOT NULL,
   "take_b" TEXT NOT NULL,
   "system_a" TEXT,
   "system_b" TEXT,
   "choice" TEXT NOT NULL,
   "cmos" REAL,
   "played_a_ms" REAL,
   "played_b_ms" REAL,
   "created_at" TEXT
, condition TEXT, assignment_id TEXT);
CREATE UNIQUE INDEX "idx_ab_votes_test_id_rater_id_item_key"
    ON "ab_votes" ("test_id", "rater_id", "item_key");
CREATE TABLE "glitch_reports" (
   "report_id" TEXT PRIMARY KEY,
   "take_id" TEXT NOT NULL,
   "rater_id" TEXT NOT NULL,
   "test_id" TEXT,
   "position_ms" REAL NOT NULL,
   "kind" TEXT,
   "boundary_index" INTEGER,
   "boundary_ms" REAL,
   "distance_ms" REAL,
   "note" TEXT,
   "created_at" TEXT
);
CREATE INDEX "idx_glitch_reports_take_id"
    ON "glitch_reports" ("take_id");
CREATE TABLE "auto_findings" (
   "finding_id" TEXT PRIMARY KEY,
   "take_id" TEXT NOT NULL,
   "detector" TEXT,
   "kind" TEXT NOT NULL,
   "time_s" REAL,
   "boundary_index" INTEGER,
   "severity" REAL,
   "evidence" TEXT,
   "created_at" TEXT
);
CREATE INDEX "idx_auto_findings_take_id"
    ON "auto_findings" ("take_id");
CREATE TABLE stimuli (
            stimulus_id TEXT PRIMARY KEY, test_id TEXT NOT NULL REFERENCES tests(test_id),
            take_id TEXT NOT NULL REFERENCES takes(take_id), source_take_id TEXT,
            system_id TEXT, prompt_id TEXT, kind TEXT NOT NULL, expected REAL,
            condition TEXT, gain_db REAL, loudness_lufs REAL, target_lufs REAL,
            meta TEXT, created_at TEXT);
CREATE UNIQUE INDEX idx_stimuli_test_take ON stimuli (test_id, take_id);
CREATE TABLE test_raters (
            test_id TEXT NOT NULL REFERENCES tests(test_id),
            rater_id TEXT NOT NULL REFERENCES raters(rater_id),
            token_hash TEXT NOT NULL, seq INTEGER NOT NULL, crowd_id TEXT, crowd_source TEXT,
            consent_at TEXT, headphone TEXT, headphone_pass INTEGER, completion_code TEXT,
            finished_at TEXT, created_at TEXT, study_id TEXT, session_id TEXT, design_row INTEGER, seen_at REAL, screened_out_at TEXT, screenout_code TEXT, familiar TEXT, familiarised_at TEXT, PRIMARY KEY (test_id, rater_id));
CREATE UNIQUE INDEX idx_test_raters_token ON test_raters (token_hash);
CREATE UNIQUE INDEX idx_test_raters_seq ON test_raters (test_id, seq);
CREATE TABLE play_events (
            event_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, rater_id TEXT NOT NULL,
            assignment_id TEXT NOT NULL, slot INTEGER NOT NULL, take_id TEXT,
            condition TEXT, played_ms REAL, duration_ms REAL, complete INTEGER,
            server_elapsed_ms REAL, underruns INTEGER, stall_ms REAL, created_at TEXT);
CREATE INDEX idx_play_events_item ON play_events (test_id, rater_id, assignment_id);
CREATE TABLE answers (
            answer_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, rater_id TEXT NOT NULL,
            assignment_id TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT, condition TEXT,
            created_at TEXT);
CREATE UNIQUE INDEX idx_answers_item ON answers (test_id, rater_id, assignment_id);
CREATE TABLE mushra_ratings (
            rating_id TEXT PRIMARY KEY, test_id TEXT NOT NULL, rater_id TEXT NOT NULL,
            assignment_id TEXT NOT NULL, slot INTEGER NOT NULL, take_id TEXT NOT NULL,
            system_id TEXT, role TEXT NOT NULL, prompt_id TEXT, score REAL NOT NULL,
            created_at TEXT);
CREATE UNIQUE INDEX idx_mushra_item ON mushra_ratings (test_id, rater_id, assignment_id, slot);
CREATE INDEX idx_test_raters_crowd ON test_raters (test_id, crowd_id);
CREATE TABLE screen_trials (
            test_id TEXT NOT NULL, rater_id TEXT NOT NULL, n INTEGER NOT NULL,
            kind TEXT NOT NULL, key TEXT NOT NULL, duration_ms REAL NOT NULL,
            fetched_at REAL, fetches INTEGER NOT NULL DEFAULT 0, answer INTEGER, answered_at TEXT,
            PRIMARY KEY (test_id, rater_id, n));
CREATE TABLE arena_battles (
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
        , voter TEXT);
CREATE TABLE arena_streams (
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
        );
CREATE TABLE arena_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE arena_dropped_voters (
            voter TEXT PRIMARY KEY,
            votes_dropped INTEGER NOT NULL,
            dropped_at TEXT NOT NULL
        );
CREATE TABLE arena_votes (
            battle_id TEXT PRIMARY KEY REFERENCES arena_battles(battle_id),
            choice TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'both_bad')),
            system_a TEXT NOT NULL,
            system_b TEXT NOT NULL,
            text_source TEXT NOT NULL,
            decision_ms REAL,
            voted_ts REAL NOT NULL,
            created_at TEXT NOT NULL
        , voter TEXT);
CREATE INDEX arena_battles_owner ON arena_battles (owner, created_ts);
CREATE INDEX arena_battles_created ON arena_battles (created_ts);
CREATE INDEX arena_battles_voter ON arena_battles (voter, created_ts);
CREATE INDEX arena_streams_battle ON arena_streams (battle_id);
CREATE INDEX arena_streams_session ON arena_streams (ws_session, status);
CREATE INDEX arena_votes_voter ON arena_votes (voter, voted_ts);
