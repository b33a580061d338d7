"""The store's tables, declared once for SQLite and PostgreSQL: columns, keys, indexes, the
version that added each, and the order rows are read in; and with them every registered test
kind's answer tables, which each kind declares in its own folder.

Why one plain declaration and not SQLAlchemy Core: every query is already hand-written SQL
that both engines run through :class:`app.store.sql.Runner`, so a ``MetaData`` would serve
the DDL alone and bring a large dependency for it. A table is a small typed record
(:class:`evaluation.tablespec.Table`, below the app so a kind can declare one);
:mod:`app.store.migrations` renders it for each engine (TEXT / INTEGER → BIGINT / REAL →
DOUBLE PRECISION / BLOB → BYTEA; on PostgreSQL every TEXT compares byte by byte, as SQLite's
does) and derives the migrations from each part's ``since`` version. Everything that used to
repeat the list of tables reads it from here instead:

* :func:`all_tables` is in dependency order (a table after the tables it references): the
  store's own tables (:data:`STORE_TABLES`) with the registered kinds' answer tables after
  ``answers``. It is the order ``listenlab db copy`` copies in; :func:`per_test_tables`
  reversed is the order a test's rows are deleted in; :func:`export_tables` is a test's raw
  export, in the same order; :func:`report_tables` is ``listenlab report``'s raw CSVs.
* each table's ``order`` is a total order (it ends in a unique key), so the same study reads
  back, and exports, in the same order on either engine (:func:`order_by`).

A new column is one :class:`Column` with ``since=`` the next version (appended: a table's
columns are listed in the order migrations added them), in this file or, for a kind's answer
table, in the kind's folder; a new table is one :class:`Table`. A kind registered later (a
plug-in, the tests' toy) brings its tables with it: the store creates what a store lacks of
them when it opens read-write (:func:`app.store.migrations.reconcile`).
"""

from __future__ import annotations

from evaluation.listening.kinds import BUILT_IN, KindError, answer_tables
from evaluation.tablespec import (
    ENGINES,
    TYPES,
    Column,
    Index,
    Lookup,
    Table,
    integer,
    key,
    real,
    text,
)

ARENA_V2 = 8
"""The arena's second version (#42): first use of a text per voter, voices, languages, the
network a battle came from, why its pair was drawn, and the admin's reversible exclusions."""

STORE_TABLES: tuple[Table, ...] = (
    Table(
        "systems",
        1,
        (
            text("system_id"),
            key("backend"),
            text("voice"),
            text("params"),
            text("label"),
            text("created_at"),
        ),
        primary_key=("system_id",),
        order=("created_at", "system_id"),
        reported=True,
    ),
    Table(
        "prompts",
        1,
        (
            text("prompt_id"),
            key("text"),
            text("language"),
            text("category"),
            text("created_at"),
        ),
        primary_key=("prompt_id",),
        order=("created_at", "prompt_id"),
        reported=True,
    ),
    Table(
        "takes",
        1,
        (
            text("take_id"),
            text("system_id", references=("systems", "system_id")),
            text("prompt_id", references=("prompts", "prompt_id")),
            key("backend"),
            text("request"),
            text("text"),
            key("status"),
            text("error"),
            integer("sample_rate", not_null=True),
            integer("channels", not_null=True),
            integer("frames", not_null=True),
            real("duration_s"),
            real("total_ms"),
            real("ttfa_ms"),
            real("rtf"),
            integer("chunk_count"),
            key("audio_path"),
            text("meta"),
            integer("underrun_count"),
            real("underrun_stall_ms"),
            text("created_at"),
        ),
        primary_key=("take_id",),
        indexes=(Index("idx_takes_system_id", ("system_id",)),),
        order=("created_at", "take_id"),
        reported=True,
    ),
    Table(
        "chunks",
        1,
        (
            text("take_id", references=("takes", "take_id")),
            integer("idx"),
            real("arrival_ms"),
            integer("offset"),
            integer("frames"),
        ),
        primary_key=("take_id", "idx"),
        order=("take_id", "idx"),
        reported=True,
    ),
    Table(
        "underruns",
        1,
        (
            text("report_id"),
            text("take_id", references=("takes", "take_id")),
            text("rater_id"),
            text("source"),
            integer("count"),
            real("stall_ms"),
            text("positions_ms"),
            text("created_at"),
        ),
        primary_key=("report_id",),
        order=("created_at", "report_id"),
        reported=True,
    ),
    Table(
        "take_audio",  # PostgreSQL replicas share no disk: a take's encoded audio
        4,
        (
            text("take_id", references=("takes", "take_id")),
            key("format"),
            integer("bytes", not_null=True),
            Column("data", "bytes", not_null=True),
        ),
        primary_key=("take_id",),
        order=("take_id",),
        engines=("postgresql",),
        study=False,
    ),
    Table(
        "auto_findings",
        1,
        (
            text("finding_id"),
            key("take_id"),
            text("detector"),
            key("kind"),
            real("time_s"),
            integer("boundary_index"),
            real("severity"),
            text("evidence"),
            text("created_at"),
        ),
        primary_key=("finding_id",),
        indexes=(Index("idx_auto_findings_take_id", ("take_id",)),),
        order=("take_id", "detector", "time_s", "finding_id"),
        reported=True,
    ),
    Table(
        "raters",
        1,
        (text("rater_id"), text("name"), text("meta"), text("created_at")),
        primary_key=("rater_id",),
        order=("created_at", "rater_id"),
        reported=True,
    ),
    Table(
        "tests",
        1,
        (
            text("test_id"),
            key("kind"),
            text("name"),
            text("config"),
            text("created_at"),
            text("status", since=2),
            text("updated_at", since=2),
        ),
        primary_key=("test_id",),
        order=("created_at", "test_id"),
        per_test=True,
        reported=True,
    ),
    Table(
        "assignments",
        1,
        (
            text("assignment_id"),
            key("test_id", references=("tests", "test_id")),
            key("rater_id", references=("raters", "rater_id")),
            integer("position"),
            key("take_id"),
            text("take_b_id"),
            key("role"),
            real("expected"),
            text("created_at"),
            text("slots", since=2),
            text("condition", since=2),
            text("meta", since=2),
        ),
        primary_key=("assignment_id",),
        indexes=(
            Index(
                "idx_assignments_test_id_rater_id_position",
                ("test_id", "rater_id", "position"),
                unique=True,
            ),
        ),
        order=("test_id", "rater_id", "position", "assignment_id"),
        per_test=True,
        exported=True,
        reported=True,
    ),
    Table(
        "stimuli",
        2,
        (
            text("stimulus_id"),
            key("test_id", references=("tests", "test_id")),
            key("take_id", references=("takes", "take_id")),
            text("source_take_id"),
            text("system_id"),
            text("prompt_id"),
            key("kind"),
            real("expected"),
            text("condition"),
            real("gain_db"),
            real("loudness_lufs"),
            real("target_lufs"),
            text("meta"),
            text("created_at"),
        ),
        primary_key=("stimulus_id",),
        indexes=(Index("idx_stimuli_test_take", ("test_id", "take_id"), unique=True),),
        order=("test_id", "created_at", "stimulus_id"),
        per_test=True,
        exported=True,
        reported=True,
    ),
    Table(
        "test_raters",
        2,
        (
            key("test_id", references=("tests", "test_id")),
            key("rater_id", references=("raters", "rater_id")),
            key("token_hash", exported=False),
            integer("seq", not_null=True),
            text("crowd_id"),
            text("crowd_source"),
            text("consent_at"),
            text("headphone"),
            integer("headphone_pass"),
            text("completion_code"),
            text("finished_at"),
            text("created_at"),
            text("study_id", since=3),
            text("session_id", since=3),
            integer("design_row", since=3),
            real("seen_at", since=3),
            text("screened_out_at", since=3),
            text("screenout_code", since=3),
            text("familiar", since=3),
            text("familiarised_at", since=3),
            text("questionnaire", since=5),
        ),
        primary_key=("test_id", "rater_id"),
        indexes=(
            Index("idx_test_raters_token", ("token_hash",), unique=True),
            Index("idx_test_raters_seq", ("test_id", "seq"), unique=True),
            Index("idx_test_raters_crowd", ("test_id", "crowd_id"), since=3),
        ),
        order=("test_id", "seq"),
        per_test=True,
        exported=True,
    ),
    Table(
        "test_changes",  # exported in study.json's setting_changes, not as a raw table
        6,
        (
            text("change_id"),
            key("test_id"),
            key("field"),
            text("old_value"),
            text("new_value"),
            key("changed_at"),
        ),
        primary_key=("change_id",),
        indexes=(Index("idx_test_changes_test", ("test_id", "changed_at")),),
        order=("test_id", "changed_at", "field", "change_id"),
        per_test=True,
    ),
    Table(
        "screen_trials",
        3,
        (
            key("test_id"),
            key("rater_id"),
            integer("n", not_null=True),
            key("kind"),
            key("key"),
            real("duration_ms", not_null=True),
            real("fetched_at"),
            integer("fetches", not_null=True, default="0"),
            integer("answer"),
            text("answered_at"),
        ),
        primary_key=("test_id", "rater_id", "n"),
        order=("test_id", "rater_id", "n"),
        per_test=True,
        exported=True,
    ),
    Table(
        "play_events",
        2,
        (
            text("event_id"),
            key("test_id"),
            key("rater_id"),
            key("assignment_id"),
            integer("slot", not_null=True),
            text("take_id"),
            text("condition"),
            real("played_ms"),
            real("duration_ms"),
            integer("complete"),
            real("server_elapsed_ms"),
            integer("underruns"),
            real("stall_ms"),
            text("created_at"),
        ),
        primary_key=("event_id",),
        indexes=(Index("idx_play_events_item", ("test_id", "rater_id", "assignment_id")),),
        order=("test_id", "created_at", "event_id"),
        per_test=True,
        exported=True,
        reported=True,
    ),
    Table(
        "answers",
        2,
        (
            text("answer_id"),
            key("test_id"),
            key("rater_id"),
            key("assignment_id"),
            key("kind"),
            text("payload"),
            text("condition"),
            text("created_at"),
        ),
        primary_key=("answer_id",),
        indexes=(Index("idx_answers_item", ("test_id", "rater_id", "assignment_id"), unique=True),),
        order=("test_id", "created_at", "answer_id"),
        per_test=True,
        exported=True,
        reported=True,
    ),
    Table(
        "arena_battles",
        4,
        (
            text("battle_id"),
            key("owner"),
            key("text"),
            key("text_source"),
            key("system_a"),
            key("system_b"),
            real("created_ts", not_null=True),
            key("created_at"),
            real("played_a_ts"),
            real("played_b_ts"),
            text("voter"),
            text("text_key", since=ARENA_V2),
            text("language", since=ARENA_V2),
            text("voice_a", since=ARENA_V2),
            text("voice_b", since=ARENA_V2),
            text("network", since=ARENA_V2),
            text("pair_why", since=ARENA_V2),
        ),
        primary_key=("battle_id",),
        indexes=(
            Index("arena_battles_owner", ("owner", "created_ts")),
            Index("arena_battles_created", ("created_ts",)),
            Index("arena_battles_voter", ("voter", "created_ts")),
            Index("arena_battles_text", ("voter", "text_key"), since=ARENA_V2),
        ),
        order=("created_ts", "battle_id"),
    ),
    Table(
        "arena_streams",
        4,
        (
            text("take_id"),
            key("battle_id", references=("arena_battles", "battle_id")),
            key("side", check="side IN ('a', 'b')"),
            key("ws_session"),
            real("requested_ts", not_null=True),
            key("status", default="'streaming'"),
            real("duration_s"),
            real("earliest_end_ts"),
            real("superseded_ts"),
            real("played_ts"),
            real("played_ms"),
        ),
        primary_key=("take_id",),
        indexes=(
            Index("arena_streams_battle", ("battle_id",)),
            Index("arena_streams_session", ("ws_session", "status")),
        ),
        order=("requested_ts", "take_id"),
    ),
    Table(
        "arena_votes",
        4,
        (
            text("battle_id", references=("arena_battles", "battle_id")),
            key("choice", check="choice IN ('a', 'b', 'tie', 'both_bad')"),
            key("system_a"),
            key("system_b"),
            key("text_source"),
            real("decision_ms"),
            real("voted_ts", not_null=True),
            key("created_at"),
            text("voter"),
            integer("counted", not_null=True, default="1", since=ARENA_V2),
            text("uncounted", since=ARENA_V2),
        ),
        primary_key=("battle_id",),
        indexes=(Index("arena_votes_voter", ("voter", "voted_ts")),),
        order=("voted_ts", "battle_id"),
    ),
    Table(
        "arena_meta",
        4,
        (text("key"), key("value")),
        primary_key=("key",),
        order=("key",),
    ),
    Table(
        "arena_dropped_voters",
        4,
        (text("voter"), integer("votes_dropped", not_null=True), key("dropped_at")),
        primary_key=("voter",),
        order=("voter",),
    ),
    Table(
        "arena_exclusions",  # the admin's reversible exclusions of voters, with who, when, why
        ARENA_V2,
        (
            text("exclusion_id"),
            key("voter"),
            key("reason"),
            text("flags"),
            integer("votes", not_null=True),
            key("excluded_by"),
            key("excluded_at"),
            real("excluded_ts", not_null=True),
            text("undone_by"),
            text("undone_at"),
            text("undo_reason"),
        ),
        primary_key=("exclusion_id",),
        indexes=(Index("arena_exclusions_voter", ("voter", "excluded_ts")),),
        order=("excluded_ts", "exclusion_id"),
    ),
    Table(
        "login_failures",  # the admin login's back-off, shared by PostgreSQL replicas
        4,
        (key("client"), integer("failures", not_null=True), real("last_ts", not_null=True)),
        primary_key=("client",),
        indexes=(Index("login_failures_last", ("last_ts",)),),
        order=("client",),
        engines=("postgresql",),
        study=False,
    ),
    Table(
        "schema_version",  # PostgreSQL's version record (SQLite's is PRAGMA user_version)
        4,
        (integer("version", not_null=True),),
        order=("version",),
        engines=("postgresql",),
        study=False,
    ),
)
"""The store's own tables, parents before the tables that reference them (the kinds' answer
tables are inserted after ``answers``: :func:`all_tables`)."""
KINDS_AFTER = "answers"

DATA_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("UPDATE tests SET status = 'open' WHERE status IS NULL",),
}
"""Statements a version runs on the rows it finds, after its tables and columns (both
engines speak them)."""
ENGINES_ALIKE = 7
"""The version from which PostgreSQL keeps what SQLite keeps: every TEXT column compares and
sorts byte by byte (``COLLATE "C"``), whatever the server's locale, and no REAL holds a
negative zero (SQLite stores -0.0 as 0). SQLite has nothing to change at this version."""


def newest(tables: tuple[Table, ...]) -> int:
    return max(
        [
            *(t.since for t in tables),
            *(t.since_of(p) for t in tables for p in (*t.columns, *t.indexes)),
        ]
    )


SCHEMA_VERSION = max(
    ENGINES_ALIKE,
    *DATA_MIGRATIONS,
    newest(STORE_TABLES),
    newest(tuple(t for k in BUILT_IN for t in k.tables)),
)
"""The version this listenlab writes: the newest ``since`` of its own tables and of the
built-in kinds' (a kind registered later is created whole when missing, whatever its
``since``: it does not move the version)."""

_cache: dict[tuple, tuple[Table, ...]] = {}


def all_tables() -> tuple[Table, ...]:
    """Every table, the registered kinds' included, parents first (see the module's doc)."""
    kinds = answer_tables()
    ident = tuple((k, id(t)) for k, t in kinds)
    got = _cache.get(ident)
    if got is None:
        got = _cache[ident] = merged(kinds)
    return got


def merged(kinds: list[tuple[str, Table]]) -> tuple[Table, ...]:
    own = {t.name for t in STORE_TABLES}
    at = [t.name for t in STORE_TABLES].index(KINDS_AFTER) + 1
    before = {t.name for t in STORE_TABLES[:at]}
    for kind, t in kinds:
        if t.name in own:
            raise KindError(f"the {kind!r} kind's table {t.name!r} is a table of the store")
        for c in t.columns:
            if c.references and c.references[0] not in before | {t.name}:
                raise KindError(
                    f"the {kind!r} kind's table {t.name!r} references {c.references[0]!r}, "
                    f"which is not one of the store's tables up to {KINDS_AFTER!r}"
                )
    _cache.clear()  # one registry at a time: a kind unregistered leaves no stale list
    return STORE_TABLES[:at] + tuple(t for _, t in kinds) + STORE_TABLES[at:]


def kind_tables() -> tuple[Table, ...]:
    """The registered kinds' answer tables, in the registry's order."""
    return tuple(t for _, t in answer_tables())


def table(name: str) -> Table:
    for t in all_tables():
        if t.name == name:
            return t
    raise KeyError(f"no table {name!r} is declared")


def is_declared(name: str) -> bool:
    return any(t.name == name for t in all_tables())


def tables_of(engine: str) -> tuple[Table, ...]:
    """The tables ``engine`` keeps, in dependency order."""
    return tuple(t for t in all_tables() if engine in t.engines)


def study_tables() -> tuple[str, ...]:
    """The tables of a study, on both engines, parents first: ``listenlab db copy``'s order."""
    return tuple(t.name for t in all_tables() if t.study)


def per_test_tables() -> tuple[str, ...]:
    """Tables whose rows belong to one test, parents first (``tests`` itself included)."""
    return tuple(t.name for t in all_tables() if t.per_test)


def export_tables() -> tuple[str, ...]:
    """A test's raw export (``raw/<table>.csv``), in declaration order."""
    return tuple(t.name for t in all_tables() if t.exported)


def report_tables() -> tuple[str, ...]:
    """``listenlab report``'s raw tables (``<table>.csv``), in declaration order (never
    ``test_raters``' token hashes or ``screen_trials``' answer keys)."""
    return tuple(t.name for t in all_tables() if t.reported)


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def order_by(name: str, alias: str = "") -> str:
    """``ORDER BY`` the table's total order: NULLs first on both engines (each has its own
    default), columns qualified with ``alias`` when the query joins."""
    prefix = f"{alias}." if alias else ""
    return "ORDER BY " + ", ".join(f"{prefix}{quoted(c)} NULLS FIRST" for c in table(name).order)


__all__ = [
    "DATA_MIGRATIONS",
    "ENGINES",
    "ENGINES_ALIKE",
    "KINDS_AFTER",
    "SCHEMA_VERSION",
    "STORE_TABLES",
    "TYPES",
    "Column",
    "Index",
    "Lookup",
    "Table",
    "all_tables",
    "export_tables",
    "integer",
    "is_declared",
    "key",
    "kind_tables",
    "order_by",
    "per_test_tables",
    "quoted",
    "real",
    "report_tables",
    "study_tables",
    "table",
    "tables_of",
    "text",
]
