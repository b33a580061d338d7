"""The store's tables, declared once for SQLite and PostgreSQL: columns, keys, indexes, the
version that added each, and the order rows are read in.

Why one plain declaration and not SQLAlchemy Core: every query is already hand-written SQL
that both engines run through :class:`app.store.sql.Runner`, so a ``MetaData`` would serve
the DDL alone and bring a large dependency for it. A table here is a small typed record;
:mod:`app.store.migrations` renders it for each engine (TEXT / INTEGER → BIGINT / REAL →
DOUBLE PRECISION / BLOB → BYTEA; on PostgreSQL every TEXT compares byte by byte, as SQLite's
does) and derives the migrations from each part's ``since`` version. Everything that used to
repeat the list of tables reads it from here instead:

* :data:`TABLES` is in dependency order (a table after the tables it references): the order
  ``listenlab db copy`` copies in; :func:`per_test_tables` reversed is the order a test's rows are
  deleted in; :func:`export_tables` is a test's raw export, in the same order.
* each table's ``order`` is a total order (it ends in a unique key), so the same study reads
  back, and exports, in the same order on either engine (:func:`order_by`).

A new column is one :class:`Column` with ``since=`` the next version (appended: a table's
columns are listed in the order migrations added them); a new table is one :class:`Table`.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("sqlite", "postgresql")
TYPES = ("text", "integer", "real", "bytes")


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "text"
    """One of :data:`TYPES`."""
    not_null: bool = False
    default: str | None = None
    """A SQL literal (``0``, ``'streaming'``)."""
    references: tuple[str, str] | None = None
    """``(table, column)`` of a foreign key."""
    check: str | None = None
    since: int | None = None
    """The schema version that added the column (None: its table's)."""
    exported: bool = True
    """False: left out of a test's raw export (``test_raters.token_hash``)."""


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool = False
    since: int | None = None


@dataclass(frozen=True)
class Table:
    name: str
    since: int
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()
    order: tuple[str, ...] = ()
    """Columns every read of whole rows sorts by; it ends in a unique key (checked by
    ``tests/test_store_schema.py``)."""
    engines: tuple[str, ...] = ENGINES
    study: bool = True
    """Part of a study (copied by ``listenlab db copy``, checked by ``db check``); False for
    an engine's own bookkeeping."""
    per_test: bool = False
    """Its rows belong to one listening test (a ``test_id``): deleted with it."""
    exported: bool = False
    """Written to a test's raw export (``raw/<table>.csv``)."""

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def since_of(self, part: Column | Index) -> int:
        return self.since if part.since is None else part.since

    @property
    def unique_keys(self) -> tuple[tuple[str, ...], ...]:
        """The primary key and every unique index's columns."""
        keys = (self.primary_key,) if self.primary_key else ()
        return keys + tuple(i.columns for i in self.indexes if i.unique)


def text(name: str, **kw) -> Column:
    return Column(name, "text", **kw)


def integer(name: str, **kw) -> Column:
    return Column(name, "integer", **kw)


def real(name: str, **kw) -> Column:
    return Column(name, "real", **kw)


def key(name: str, **kw) -> Column:
    """A NOT NULL text column (most of the listening tables' keys)."""
    return Column(name, "text", not_null=True, **kw)


ARENA_V2 = 9
"""The arena's second version (#42): first use of a text per voter, voices, languages, the
network a battle came from, why its pair was drawn, and the admin's reversible exclusions.
(8 is left to the listening tables' branch of the same wave.)"""

TABLES: tuple[Table, ...] = (
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
    ),
    Table(
        "raters",
        1,
        (text("rater_id"), text("name"), text("meta"), text("created_at")),
        primary_key=("rater_id",),
        order=("created_at", "rater_id"),
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
    ),
    Table(
        "mos_ratings",
        1,
        (
            text("rating_id"),
            key("test_id"),
            key("rater_id"),
            key("take_id"),
            real("score", not_null=True),
            real("played_ms"),
            key("role"),
            real("expected"),
            text("created_at"),
            text("condition", since=2),
            text("assignment_id", since=2),
        ),
        primary_key=("rating_id",),
        indexes=(
            Index(
                "idx_mos_ratings_test_id_rater_id_take_id",
                ("test_id", "rater_id", "take_id"),
                unique=True,
            ),
        ),
        order=("test_id", "created_at", "rating_id"),
        per_test=True,
        exported=True,
    ),
    Table(
        "ab_votes",
        1,
        (
            text("vote_id"),
            key("test_id"),
            key("rater_id"),
            key("item_key"),
            key("take_a"),
            key("take_b"),
            text("system_a"),
            text("system_b"),
            key("choice"),
            real("cmos"),
            real("played_a_ms"),
            real("played_b_ms"),
            text("created_at"),
            text("condition", since=2),
            text("assignment_id", since=2),
        ),
        primary_key=("vote_id",),
        indexes=(
            Index(
                "idx_ab_votes_test_id_rater_id_item_key",
                ("test_id", "rater_id", "item_key"),
                unique=True,
            ),
        ),
        order=("test_id", "created_at", "vote_id"),
        per_test=True,
        exported=True,
    ),
    Table(
        "mushra_ratings",
        2,
        (
            text("rating_id"),
            key("test_id"),
            key("rater_id"),
            key("assignment_id"),
            integer("slot", not_null=True),
            key("take_id"),
            text("system_id"),
            key("role"),
            text("prompt_id"),
            real("score", not_null=True),
            text("created_at"),
        ),
        primary_key=("rating_id",),
        indexes=(
            Index("idx_mushra_item", ("test_id", "rater_id", "assignment_id", "slot"), unique=True),
        ),
        order=("test_id", "rater_id", "assignment_id", "slot"),
        per_test=True,
        exported=True,
    ),
    Table(
        "glitch_reports",  # a mark outside a test (the Playground's) has no test_id
        1,
        (
            text("report_id"),
            key("take_id"),
            key("rater_id"),
            text("test_id"),
            real("position_ms", not_null=True),
            text("kind"),
            integer("boundary_index"),
            real("boundary_ms"),
            real("distance_ms"),
            text("note"),
            text("created_at"),
        ),
        primary_key=("report_id",),
        indexes=(Index("idx_glitch_reports_take_id", ("take_id",)),),
        order=("test_id", "created_at", "report_id"),
        per_test=True,
        exported=True,
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
"""Every table, parents before the tables that reference them."""

DATA_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("UPDATE tests SET status = 'open' WHERE status IS NULL",),
}
"""Statements a version runs on the rows it finds, after its tables and columns (both
engines speak them)."""
ENGINES_ALIKE = 7
"""The version from which PostgreSQL keeps what SQLite keeps: every TEXT column compares and
sorts byte by byte (``COLLATE "C"``), whatever the server's locale, and no REAL holds a
negative zero (SQLite stores -0.0 as 0). SQLite has nothing to change at this version."""

SCHEMA_VERSION = max(
    [
        ENGINES_ALIKE,
        *DATA_MIGRATIONS,
        *(t.since for t in TABLES),
        *(t.since_of(p) for t in TABLES for p in (*t.columns, *t.indexes)),
    ]
)
"""The version this listenlab writes: the newest ``since`` above."""

BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}


def table(name: str) -> Table:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no table {name!r} is declared") from None


def tables_of(engine: str) -> tuple[Table, ...]:
    """The tables ``engine`` keeps, in dependency order."""
    return tuple(t for t in TABLES if engine in t.engines)


def study_tables() -> tuple[str, ...]:
    """The tables of a study, on both engines, parents first: ``listenlab db copy``'s order."""
    return tuple(t.name for t in TABLES if t.study)


def per_test_tables() -> tuple[str, ...]:
    """Tables whose rows belong to one test, parents first (``tests`` itself included)."""
    return tuple(t.name for t in TABLES if t.per_test)


def export_tables() -> tuple[str, ...]:
    """A test's raw export (``raw/<table>.csv``), in declaration order."""
    return tuple(t.name for t in TABLES if t.exported)


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def order_by(name: str, alias: str = "") -> str:
    """``ORDER BY`` the table's total order: NULLs first on both engines (each has its own
    default), columns qualified with ``alias`` when the query joins."""
    prefix = f"{alias}." if alias else ""
    return "ORDER BY " + ", ".join(f"{prefix}{quoted(c)} NULLS FIRST" for c in table(name).order)


__all__ = [
    "ENGINES_ALIKE",
    "DATA_MIGRATIONS",
    "ENGINES",
    "SCHEMA_VERSION",
    "TABLES",
    "TYPES",
    "Column",
    "Index",
    "Table",
    "export_tables",
    "order_by",
    "quoted",
    "study_tables",
    "table",
    "tables_of",
    "per_test_tables",
]
