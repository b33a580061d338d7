"""The store: the only room that speaks SQL. One facade for the rest of the app.

Why one facade: the app imports what it stores from here (``from app.store import Store,
System, ...``) and never learns which module, or which engine, keeps it. The rooms inside:

* :mod:`app.store.schema`: every table declared once, for both engines (columns, keys,
  indexes, the version that added each, the order rows are read in), the registered test
  kinds' answer tables (declared in each kind's folder) with them; the list of tables, the
  copy, export, report and delete orders are read from it;
* :mod:`app.store.migrations`: the declaration rendered for an engine, and the migrations
  from any earlier version, the same steps on SQLite and PostgreSQL;
* :mod:`app.store.connection`: per-thread SQLite connections, the journal mode and its
  open-lock;
* :mod:`app.store.records`: the typed records and errors that cross the store's edge;
* :mod:`app.store.takes`, :mod:`app.store.ratings`, :mod:`app.store.arena`: the tables;
* :mod:`app.store.sql`: the runner every table module writes through, on either engine;
* :mod:`app.store.interface`: the engine-neutral contract; :mod:`app.store.sqlite`: SQLite's
  ``Store`` (files only); :mod:`app.store.postgres`: PostgreSQL's ``PgStore``, for replicas;
* :mod:`app.store.engines`: :func:`open_store` (the engine a path or URL names) and
  :func:`copy_store`; :mod:`app.store.copy`: the engine-neutral copy and checksums;
  :mod:`app.store.urls`: which engine a ``--db`` value names, and its secrets masked;
* :mod:`app.store.listening`: the listening-test tables, on top of a store (imported from
  there: it brings the listening room's stimuli with it).

Usage (every ``add_*`` is idempotent on the client-supplied id)::

    from app.store import open_store, System, Prompt, MosRating

    store = open_store("data/listenlab.db", journal_mode="wal")   # or "postgresql://…"
    store.add_system(System("piper-joe", backend="piper?deterministic=1", voice="joe"))
    store.add_prompt(Prompt("p1", text="Hello there."))
    take_id = store.save_take(take, system_id="piper-joe", prompt_id="p1")  # writes audio/<id>.wav
    take = store.load_take(take_id)                                          # -> evaluation.takes.Take
    store.add_mos_rating(MosRating("v1", "t1", "r1", take_id, score=4, played_ms=3100))
    store.answer_frame("mos_ratings", "t1"), store.findings_frame(), ...  # a kind's table
    store.arena.votes_frame()                                                # the arena's tables
"""

from app.store.connection import (
    JOURNAL_MODES,
    NETWORK_STORAGE,
    existing_journal_mode,
    journal_mode_for,
)
from app.store.engines import copy_store, open_store
from app.store.interface import ArenaStore, RatingStore, StoreEngine, TakeStore
from app.store.migrations import MIGRATIONS
from app.store.postgres import PgStore
from app.store.records import (
    AB_CHOICES,
    GLITCH_KINDS,
    ROLES,
    TEST_KINDS,
    AbVote,
    AlreadyVoted,
    ArenaStream,
    ArenaVote,
    Assignment,
    BattleRecord,
    BattleWindow,
    GlitchReport,
    ListeningTest,
    MosRating,
    Prompt,
    Rater,
    StoreError,
    System,
    TakeInfo,
    TakeTimeline,
    UnknownItem,
    Written,
    nearest_boundary,
    new_id,
    now_iso,
)
from app.store.schema import SCHEMA_VERSION
from app.store.sqlite import Store
from app.store.urls import is_postgres, masked

__all__ = [
    "AB_CHOICES",
    "GLITCH_KINDS",
    "JOURNAL_MODES",
    "MIGRATIONS",
    "NETWORK_STORAGE",
    "ROLES",
    "SCHEMA_VERSION",
    "TEST_KINDS",
    "AbVote",
    "AlreadyVoted",
    "ArenaStore",
    "ArenaStream",
    "ArenaVote",
    "Assignment",
    "BattleRecord",
    "BattleWindow",
    "GlitchReport",
    "ListeningTest",
    "MosRating",
    "PgStore",
    "Prompt",
    "RatingStore",
    "Rater",
    "Store",
    "StoreEngine",
    "StoreError",
    "System",
    "TakeInfo",
    "TakeStore",
    "TakeTimeline",
    "UnknownItem",
    "Written",
    "copy_store",
    "existing_journal_mode",
    "is_postgres",
    "journal_mode_for",
    "masked",
    "nearest_boundary",
    "new_id",
    "now_iso",
    "open_store",
]
