"""The open arena's data: battles, their streams and plays, votes, and the Bradley–Terry board.

A *battle* is one text spoken blind by two systems (backend labels), sides ``a`` and ``b``. The
server streams each side (an ``arena_streams`` row per stream, keyed by the take id), accepts a
*played* report for a stream only when that stream finished and enough wall-clock time has
passed for the audio to have been heard to its end, and accepts a vote only when both sides
were played. One vote per battle: ``arena_votes`` is keyed by the battle id, so a double click
or a re-send counts once. Everything is in the store's SQLite file (tables created here,
idempotently, beside the store's own schema; ``PRAGMA user_version`` is not touched).

The board (:func:`leaderboard`) reuses :func:`evaluation.stats.bt_leaderboard`: a tie and
"both bad" are both *draws* in the Bradley–Terry fit (as LMSYS's Chatbot Arena counts
"tie (bothbad)"), and "both bad" is also counted per system.

Who votes (*the voter*): a battle's owner is a browser session (a free cookie), so limits are
not counted per owner but per **voter**, a key that costs something: the Space's Hugging Face
login where it is configured, else the client's network address (an IPv6 /64), as the app
resolves it (:mod:`app.web.guard`). Only its keyed hash (:func:`Arena.voter_hash`, with a random
salt kept in the DB) is stored, with every battle and vote, so the admin can drop everything a
voter did later (:meth:`Arena.drop_voter`; a dropped voter's later votes are not counted).
Per voter: ``battles_per_minute`` and ``votes_per_hour`` / ``votes_per_day``. The global battle
budget keeps a *reserve*: a voter who already used its fair share of the last minute (the budget
divided by the voters active in it) may use only ``1 - newcomer_reserve`` of the budget, so a
few busy clients cannot lock new visitors out.

Why wall-clock time in the DB and not in memory: the rate limit, the play checks and the vote
all read rows, so a restart (or a second worker process) loses nothing and no global state
is kept in Python.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import sqlite_utils

from backends.base import clean_text
from backends.errors import InvalidRequest

SIDES = ("a", "b")
CHOICES = ("a", "b", "tie", "both_bad")
"""``a`` / ``b`` = that side is better; ``tie`` = equally good; ``both_bad``."""
ID_RE = re.compile(r"^[0-9a-f]{32}$")
PAIR_SMOOTHING = 5.0
"""Pair weight = 1 / (PAIR_SMOOTHING + votes on that pair): under-voted pairs come up more."""


class ArenaError(InvalidRequest):
    """A request the arena refuses, with a message meant for the visitor.

    ``code`` is the HTTP status the JSON route answers with.
    """

    code = 400
    reason = "invalid"

    def __init__(self, message: str, **extra: Any):
        super().__init__(message)
        self.extra = extra


class UnknownBattle(ArenaError):
    code, reason = 404, "unknown_battle"


class NotYours(ArenaError):
    code, reason = 403, "not_yours"


class NotPlayed(ArenaError):
    code, reason = 409, "not_played"


class StillStreaming(NotPlayed):
    """The stream's end is not recorded yet (it is written just after its last frame)."""


class AlreadyVoted(ArenaError):
    code, reason = 409, "already_voted"


class RateLimited(ArenaError):
    code, reason = 429, "rate_limited"


class LoginRequired(ArenaError):
    code, reason = 401, "login_required"


class VoterDropped(ArenaError):
    code, reason = 403, "voter_dropped"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def owner_key(cookie: str | None) -> str | None:
    """The stored owner of a battle: a hash of the visitor's session cookie (never the cookie
    itself, so a copy of the DB cannot be used to vote as someone else), or None if the cookie
    is missing or malformed."""
    if not cookie or not ID_RE.match(cookie):
        return None
    return hashlib.sha256(b"listenlab-arena:" + cookie.encode()).hexdigest()[:32]


def new_id() -> str:
    return uuid.uuid4().hex


def check_id(value: Any, what: str = "battle id") -> str:
    s = str(value or "")
    if not ID_RE.match(s):
        raise UnknownBattle(f"malformed {what}")
    return s


# --------------------------------------------------------------------------- schema


def ensure_tables(db: sqlite_utils.Database) -> None:
    """Create the arena's tables and indexes if they are missing (safe to call at every start)."""
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
        "CREATE INDEX IF NOT EXISTS arena_battles_owner ON arena_battles (owner, created_ts)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS arena_battles_created ON arena_battles (created_ts)")
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
    db.execute("CREATE INDEX IF NOT EXISTS arena_streams_battle ON arena_streams (battle_id)")
    db.execute(
        "CREATE INDEX IF NOT EXISTS arena_streams_session ON arena_streams (ws_session, status)"
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS arena_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"""
    )
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
    for table in ("arena_battles", "arena_votes"):  # added after the first release: migrate
        cols = {r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()}
        if "voter" not in cols:
            db.execute(f"ALTER TABLE {table} ADD COLUMN voter TEXT")
    db.execute(
        "CREATE INDEX IF NOT EXISTS arena_battles_voter ON arena_battles (voter, created_ts)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS arena_votes_voter ON arena_votes (voter, voted_ts)")
    db.conn.commit()


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Battle:
    battle_id: str
    owner: str
    text: str
    text_source: str
    system_a: str
    system_b: str
    created_ts: float
    played_a_ts: float | None
    played_b_ts: float | None
    voted: str | None = None
    """The choice, once voted."""

    def system(self, side: str) -> str:
        return self.system_a if side == "a" else self.system_b

    @property
    def both_played(self) -> bool:
        return self.played_a_ts is not None and self.played_b_ts is not None

    def public(self) -> dict[str, Any]:
        """What the owner's page may see: the names only once the vote is in."""
        d: dict[str, Any] = {
            "battle_id": self.battle_id,
            "text": self.text,
            "played": {"a": self.played_a_ts is not None, "b": self.played_b_ts is not None},
            "voted": self.voted,
        }
        if self.voted is not None:
            d["systems"] = {"a": self.system_a, "b": self.system_b}
        return d


@dataclass(frozen=True)
class Limits:
    battles_per_minute: int = 10
    """Per voter (see the module doc: a login or a network address, not a cookie)."""
    global_battles_per_minute: int = 120
    """All visitors together: bounds what the public page can make the backends do."""
    newcomer_reserve: float = 0.25
    """Share of the global budget kept for voters under their fair share of the last minute."""
    votes_per_hour: int = 30
    """Per voter; each vote already costs listening to both sides to their end."""
    votes_per_day: int = 150
    streams_per_side: int = 3
    min_chars: int = 2
    max_chars: int = 300
    play_slack_s: float = 0.3
    """How much earlier than the audio's duration after its first chunk a play may be reported
    (network and output latency). It bounds what a scripted client gains by lying."""


def pick_pair(
    systems: list[str], pair_votes: dict[tuple[str, str], int], rng: np.random.Generator
) -> tuple[str, str]:
    """Two distinct systems, weighted ``1 / (PAIR_SMOOTHING + votes on the pair)``, in a random
    order (so neither system is always side A)."""
    if len(systems) < 2:
        raise ArenaError("the arena needs at least two systems (configure two backends)")
    pairs = [(x, y) for i, x in enumerate(systems) for y in systems[i + 1 :]]
    w = np.array(
        [1.0 / (PAIR_SMOOTHING + pair_votes.get(tuple(sorted(p)), 0)) for p in pairs], dtype=float
    )
    x, y = pairs[int(rng.choice(len(pairs), p=w / w.sum()))]
    return (x, y) if rng.random() < 0.5 else (y, x)


def clean_battle_text(text: Any, limits: Limits) -> str:
    if not isinstance(text, str):
        raise ArenaError("the text must be a string")
    t = clean_text(text[: limits.max_chars * 4])
    if len(t) < limits.min_chars:
        raise ArenaError("type a text to speak (or draw a random prompt)")
    if len(t) > limits.max_chars:
        raise ArenaError(
            f"the text is {len(t)} characters; the arena's limit is {limits.max_chars}"
        )
    return t


# --------------------------------------------------------------------------- the arena


class Arena:
    """Battles and votes in a store's database. Thread-safe: every call uses ``store.db`` (one
    connection per thread) and the writes that must not race run in one transaction."""

    def __init__(self, store: Any, limits: Limits | None = None):
        self.store = store
        self.limits = limits or Limits()
        ensure_tables(store.db)
        self._voter_key = self._salt()

    @property
    def db(self) -> sqlite_utils.Database:
        return self.store.db

    # -- battles

    def pair_votes(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for a, b, n in self.db.execute(
            "SELECT system_a, system_b, count(*) FROM arena_votes GROUP BY system_a, system_b"
        ).fetchall():
            key = tuple(sorted((a, b)))
            out[key] = out.get(key, 0) + n  # type: ignore[index]
        return out

    def new_battle(
        self,
        owner: str,
        text: str,
        systems: list[str],
        rng: np.random.Generator,
        *,
        text_source: str = "typed",
        now: float | None = None,
        voter: str | None = None,
    ) -> Battle:
        """Check the rate limits, pick the pair, store the battle (one transaction, so two
        concurrent requests cannot both slip under the limit). ``voter``: the stored voter
        hash (:meth:`voter_hash`); the owner's when not given (tests, one-user tools)."""
        now = time.time() if now is None else now
        voter = voter or owner
        lim = self.limits
        a, b = pick_pair(systems, self.pair_votes(), rng)
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._refuse_dropped(voter)
            mine, active = db.execute(
                "SELECT sum(voter=?), count(DISTINCT voter) FROM arena_battles WHERE created_ts>?",
                [voter, now - 60.0],
            ).fetchone()
            mine = int(mine or 0)
            budget = lim.global_battles_per_minute
            shared = max(1, math.floor(budget * (1.0 - lim.newcomer_reserve)))
            fair = budget / (int(active) + (0 if mine else 1))
            if mine and mine >= fair:
                budget = shared  # over its fair share: only the shared part is open to it
            for where, args, limit, why in (
                (
                    "voter=? AND created_ts>?",
                    [voter, now - 60.0],
                    lim.battles_per_minute,
                    "Slow down: at most {n} battles per minute per visitor.",
                ),
                (
                    "created_ts>?",
                    [now - 60.0],
                    budget,
                    "The arena is busy (more than {n} battles in the last minute).",
                ),
            ):
                count, oldest = db.execute(
                    f"SELECT count(*), min(created_ts) FROM arena_battles WHERE {where}", args
                ).fetchone()
                if count >= limit:
                    wait = max(1, math.ceil(oldest + 60.0 - now))
                    raise RateLimited(
                        f"{why.format(n=limit)} Try again in {wait} s.", retry_after_s=wait
                    )
            bt = Battle(new_id(), owner, text, text_source, a, b, now, None, None)
            db.execute(
                "INSERT INTO arena_battles (battle_id, owner, text, text_source, system_a, "
                "system_b, created_ts, created_at, voter) VALUES (?,?,?,?,?,?,?,?,?)",
                [bt.battle_id, owner, text, text_source, a, b, now, now_iso(), voter],
            )
            db.execute("COMMIT")
        except BaseException:
            db.conn.rollback()
            raise
        return bt

    def get(self, battle_id: Any, owner: str | None) -> Battle:
        """The battle, if ``owner`` made it; another visitor's battle is refused."""
        bid = check_id(battle_id)
        r = self.db.execute(
            "SELECT b.battle_id, owner, text, b.text_source, b.system_a, b.system_b, created_ts, "
            "played_a_ts, played_b_ts, v.choice FROM arena_battles b "
            "LEFT JOIN arena_votes v ON v.battle_id = b.battle_id WHERE b.battle_id = ?",
            [bid],
        ).fetchone()
        if r is None:
            raise UnknownBattle("no such battle (it may have been made on another server)")
        if owner is None or r[1] != owner:
            raise NotYours("this battle belongs to another visitor's session")
        return Battle(*r)

    # -- streams and plays

    def start_stream(
        self, battle: Battle, side: str, take_id: str, ws_session: str, now: float | None = None
    ) -> None:
        """Record a stream of ``side``. The player plays one stream at a time, so every earlier
        stream of this page that was not yet reported played is *superseded* now: a play
        report for it counts only if it could have ended before this moment."""
        now = time.time() if now is None else now
        if side not in SIDES:
            raise ArenaError("side must be 'a' or 'b'")
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            n = db.execute(
                "SELECT count(*) FROM arena_streams WHERE battle_id=? AND side=?",
                [battle.battle_id, side],
            ).fetchone()[0]
            if n >= self.limits.streams_per_side:
                raise RateLimited(
                    f"side {side.upper()} was already streamed {n} times in this battle "
                    "(use Replay to hear it again, or start a new battle)"
                )
            db.execute(
                "UPDATE arena_streams SET superseded_ts=? WHERE ws_session=? AND "
                "superseded_ts IS NULL AND played_ts IS NULL",
                [now, ws_session],
            )
            db.execute(
                "INSERT INTO arena_streams (take_id, battle_id, side, ws_session, requested_ts) "
                "VALUES (?,?,?,?,?)",
                [take_id, battle.battle_id, side, ws_session, now],
            )
            db.execute("COMMIT")
        except BaseException:
            db.conn.rollback()
            raise

    def finish_stream(
        self,
        take_id: str,
        status: str,
        duration_s: float | None = None,
        first_audio_ts: float | None = None,
    ) -> None:
        """The stream ended: ``ok`` (complete), ``error`` or ``cancelled``. For a complete one,
        the earliest moment its audio can have been heard to the end is stored."""
        earliest = (
            None
            if status != "ok" or duration_s is None or first_audio_ts is None
            else first_audio_ts + duration_s
        )
        self.db.execute(
            "UPDATE arena_streams SET status=?, duration_s=?, earliest_end_ts=? WHERE take_id=?",
            [status, duration_s, earliest, take_id],
        )
        self.db.conn.commit()

    def played(
        self,
        battle_id: Any,
        owner: str | None,
        side: Any,
        take_id: Any,
        played_ms: Any,
        now: float | None = None,
    ) -> Battle:
        """The page reports that ``take_id`` (a stream of ``side``) played to its end.

        Accepted only if the server streamed that take for this battle's side, the stream was
        complete, it was not replaced before it could have ended, the reported position covers
        the audio, and its duration has elapsed since its first chunk was sent.
        """
        now = time.time() if now is None else now
        bt = self.get(battle_id, owner)
        if side not in SIDES:
            raise ArenaError("side must be 'a' or 'b'")
        tid = str(take_id or "")[:64]
        r = self.db.execute(
            "SELECT status, duration_s, earliest_end_ts, superseded_ts FROM arena_streams "
            "WHERE take_id=? AND battle_id=? AND side=?",
            [tid, bt.battle_id, side],
        ).fetchone()
        S = side.upper()
        if r is None:
            raise NotPlayed(f"side {S} was not streamed to you with that take")
        status, duration_s, earliest, superseded = r
        if status == "streaming":
            raise StillStreaming(f"side {S} is still streaming")
        if status != "ok" or earliest is None:
            raise NotPlayed(f"side {S}'s stream did not complete ({status}); play it again")
        slack = self.limits.play_slack_s
        if superseded is not None and superseded < earliest - slack:
            raise NotPlayed(f"side {S} was interrupted before its end; play it again")
        try:
            ms = float(played_ms)
        except (TypeError, ValueError):
            raise ArenaError("played_ms must be a number") from None
        if not ms >= duration_s * 1000.0 - slack * 1000.0:
            raise NotPlayed(
                f"side {S} played {ms / 1000:.1f} s of {duration_s:.1f} s; listen to the end"
            )
        if now < earliest - slack:
            raise NotPlayed(
                f"side {S} cannot have finished playing yet "
                f"({earliest - now:.1f} s of audio still to come)"
            )
        col = "played_a_ts" if side == "a" else "played_b_ts"
        self.db.execute(
            "UPDATE arena_streams SET played_ts=?, played_ms=? WHERE take_id=?", [now, ms, tid]
        )
        self.db.execute(
            f"UPDATE arena_battles SET {col}=coalesce({col}, ?) WHERE battle_id=?",
            [now, bt.battle_id],
        )
        self.db.conn.commit()
        return self.get(bt.battle_id, owner)

    # -- votes

    def vote(
        self,
        battle_id: Any,
        owner: str | None,
        choice: Any,
        now: float | None = None,
        voter: str | None = None,
    ) -> tuple[Battle, bool]:
        """Store the battle's one vote; returns (battle with names, created).

        A re-sent identical vote returns ``created=False`` and changes nothing; a different
        choice after the first raises :class:`AlreadyVoted` (the first vote stands). A voter
        over ``votes_per_hour`` / ``votes_per_day`` is refused (429), a dropped voter (403).
        """
        now = time.time() if now is None else now
        if choice not in CHOICES:
            raise ArenaError(f"the vote must be one of {', '.join(CHOICES)}")
        bt = self.get(battle_id, owner)
        voter = voter or owner
        if bt.voted is None:
            self._refuse_dropped(voter)
            for span, limit, what in (
                (3600.0, self.limits.votes_per_hour, "hour"),
                (86400.0, self.limits.votes_per_day, "day"),
            ):
                n, oldest = self.db.execute(
                    "SELECT count(*), min(voted_ts) FROM arena_votes WHERE voter=? AND voted_ts>?",
                    [voter, now - span],
                ).fetchone()
                if n >= limit:
                    wait = max(1, math.ceil(oldest + span - now))
                    raise RateLimited(
                        f"vote not counted: at most {limit} votes per {what} per visitor. "
                        f"Try again in {wait} s.",
                        retry_after_s=wait,
                    )
        if bt.voted is None and not bt.both_played:
            missing = [
                s.upper() for s, t in (("a", bt.played_a_ts), ("b", bt.played_b_ts)) if t is None
            ]
            raise NotPlayed(
                "vote refused: listen to both sides to the end first "
                f"(not yet played: {', '.join(missing)})"
            )
        db = self.db
        try:
            db.execute(
                "INSERT INTO arena_votes (battle_id, choice, system_a, system_b, text_source, "
                "decision_ms, voted_ts, created_at, voter) VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    bt.battle_id,
                    choice,
                    bt.system_a,
                    bt.system_b,
                    bt.text_source,
                    (now - bt.created_ts) * 1000.0,
                    now,
                    now_iso(),
                    voter,
                ],
            )
            db.conn.commit()
            created = True
        except sqlite3.IntegrityError:
            db.conn.rollback()
            created = False
        bt = self.get(bt.battle_id, owner)
        if not created and bt.voted != choice:
            raise AlreadyVoted(
                f"you already voted {bt.voted!r} in this battle; one vote per battle",
                battle=bt.public(),
            )
        return bt, created

    # -- voters

    def _salt(self) -> bytes:
        """This DB's random key for voter hashes (made once, kept with the votes it keys)."""
        q = "SELECT value FROM arena_meta WHERE key='voter_salt'"
        r = self.db.execute(q).fetchall()[:1]
        if not r:
            self.db.execute(
                "INSERT OR IGNORE INTO arena_meta (key, value) VALUES ('voter_salt', ?)",
                [secrets.token_hex(32)],
            )
            self.db.conn.commit()
            r = self.db.execute(q).fetchall()[:1]
        return bytes.fromhex(r[0][0])

    def setting(self, key: str) -> str | None:
        """An admin setting kept with the votes (``arena_meta``), or None when never set."""
        r = self.db.execute("SELECT value FROM arena_meta WHERE key=?", ["setting:" + key])
        row = r.fetchone()
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str | None) -> None:
        """Set (or with None, clear back to the deployment's default) an admin setting."""
        if value is None:
            self.db.execute("DELETE FROM arena_meta WHERE key=?", ["setting:" + key])
        else:
            self.db.execute(
                "INSERT INTO arena_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                ["setting:" + key, value],
            )
        self.db.conn.commit()

    def voter_hash(self, kind: str, key: str) -> str:
        """``kind:<keyed hash>`` of a voter key (``hf`` user name, ``ip`` address or /64):
        the same voter gets the same hash on this DB, and the DB never holds the address."""
        digest = hmac.new(self._voter_key, f"{kind}:{key}".encode(), hashlib.sha256).hexdigest()
        return f"{kind}:{digest[:24]}"

    def _refuse_dropped(self, voter: str) -> None:
        r = self.db.execute("SELECT 1 FROM arena_dropped_voters WHERE voter=?", [voter]).fetchone()
        if r is not None:
            raise VoterDropped("your votes are no longer counted on this arena")

    def drop_voter(self, voter: str) -> int:
        """Delete every vote of ``voter`` and refuse its later battles and votes; returns the
        number of votes dropped (the board recomputes on its next read)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            n = db.execute("DELETE FROM arena_votes WHERE voter=?", [voter]).rowcount
            db.execute(
                "INSERT INTO arena_dropped_voters (voter, votes_dropped, dropped_at) "
                "VALUES (?,?,?) ON CONFLICT(voter) DO UPDATE SET "
                "votes_dropped = votes_dropped + excluded.votes_dropped",
                [voter, n, now_iso()],
            )
            db.execute("COMMIT")
        except BaseException:
            db.conn.rollback()
            raise
        return int(n)

    def voters_frame(self) -> pd.DataFrame:
        """Per voter: votes, battles, first and last vote (what the admin looks at to drop)."""
        return pd.read_sql_query(
            "SELECT voter, count(*) AS votes, min(created_at) AS first_vote, "
            "max(created_at) AS last_vote FROM arena_votes GROUP BY voter ORDER BY votes DESC",
            self.db.conn,
        )

    # -- results

    def votes_frame(self) -> pd.DataFrame:
        """One row per vote: battle_id, system_a, system_b, choice (``a``/``b``/``tie``/
        ``both_bad``), text_source, decision_ms, created_at, voter (its hash)."""
        return pd.read_sql_query(
            "SELECT battle_id, system_a, system_b, choice, text_source, decision_ms, created_at, "
            "voter FROM arena_votes ORDER BY voted_ts",
            self.db.conn,
        )

    def vote_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM arena_votes").fetchone()[0])


@dataclass(frozen=True)
class BoardRow:
    """One system on the board (JSON: ``asdict``). ``rank`` is None while not ``listed``."""

    rank: int | None
    system: str
    rating: float
    ci_low: float
    ci_high: float
    votes: int
    wins: int
    losses: int
    ties: int
    """Ties proper: 'both bad' votes are counted apart (both are draws in the fit)."""
    both_bad: int
    listed: bool


BOARD_COLUMNS = [f.name for f in fields(BoardRow) if f.name != "listed"]
"""The board's table columns, in order (``listed`` decides which table a row goes to)."""


def leaderboard(
    votes: pd.DataFrame, *, min_votes: int = 20, n_boot: int = 200, seed: int = 0
) -> dict[str, Any]:
    """The board as JSON-safe data: ``listed`` (at least ``min_votes`` votes, sorted by the
    95 % interval's lower bound) and ``preliminary`` (fewer votes, fitted with the rest)."""
    from evaluation.stats import bt_leaderboard

    v = votes.copy()
    both_bad: dict[str, int] = {}
    if not v.empty:
        for _, r in v[v["choice"] == "both_bad"].iterrows():
            for s in (r["system_a"], r["system_b"]):
                both_bad[s] = both_bad.get(s, 0) + 1
        v["choice"] = v["choice"].replace({"both_bad": "tie"})
    df = bt_leaderboard(v, min_votes=min_votes, n_boot=n_boot, seed=seed)
    rows = []
    for r in df.to_dict("records"):
        bb = both_bad.get(str(r["system"]), 0)
        row = BoardRow(
            rank=int(r["rank"]) if r["listed"] else None,
            system=str(r["system"]),
            rating=round(float(r["rating"]), 1),
            ci_low=round(float(r["ci_low"]), 1),
            ci_high=round(float(r["ci_high"]), 1),
            votes=int(r["votes"]),
            wins=int(r["wins"]),
            losses=int(r["losses"]),
            ties=int(r["ties"]) - bb,
            both_bad=bb,
            listed=bool(r["listed"]),
        )
        rows.append(asdict(row))
    return {
        "method": "Bradley-Terry (evalica), Elo-like scale 1500 + 400*log10(strength); "
        f"95% percentile bootstrap over votes ({n_boot} resamples); sorted by the lower bound",
        "rank": "1 + the number of listed systems significantly stronger (Wald test of each "
        "pair's difference with its bootstrap sd, Holm-corrected over all listed pairs, 5%); "
        "systems not told apart share a rank",
        "listing": f"listed from {int(min_votes)} votes (set by the admin at /admin/arena; "
        "default LISTENLAB_ARENA_MIN_VOTES); fewer: preliminary",
        "ties": "a tie and 'both bad' are draws (half a win each) in the fit",
        "min_votes": int(min_votes),
        "total_votes": len(votes),
        "listed": [r for r in rows if r["listed"]],
        "preliminary": [r for r in rows if not r["listed"]],
    }
