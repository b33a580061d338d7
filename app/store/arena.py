"""The arena's tables: battles, their streams and plays, one vote per battle, the voter salt and
admin settings, dropped voters (created by schema version 4, :mod:`app.store.schema`), and
since version 8 the first use of a text per voter, voices, languages, networks, and the
admin's reversible exclusions (:class:`ArenaAudit`: what the board counts, the ring flags'
rows, the export's rows).

Why the arena keeps its wall-clock times in the DB and not in memory: the rate limits, the play
checks and the vote all read rows, so a restart (or a second worker process) loses nothing and
no global state is kept in Python. The rules themselves (which limit, which play counts) are
the arena's (:mod:`app.arena.battles`); a check that must not race its write is passed in as a
function and run inside the write's transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.store.records import ArenaStream, ArenaVote, BattleRecord, BattleWindow, now_iso
from app.store.schema import order_by
from app.store.sql import ConstraintFailed
from app.store.tables import Tables
from backends.errors import Conflict, NotFound

if TYPE_CHECKING:
    import pandas as pd

    from app.store.sql import Runner

SETTING = "setting:"
"""Prefix of the admin's settings in ``arena_meta`` (beside the ``voter_salt``)."""
VOTER_SALT = "voter_salt"


COUNTED = (
    "v.counted = 1 AND NOT EXISTS (SELECT 1 FROM arena_exclusions e "
    "WHERE e.voter = v.voter AND e.undone_at IS NULL)"
)
"""The votes the board counts (``v``: arena_votes): first use of the text by the voter, and
the voter not excluded now."""
EXCLUDED = (
    "EXISTS (SELECT 1 FROM arena_exclusions e WHERE e.voter = v.voter AND e.undone_at IS NULL)"
)


@dataclass(frozen=True)
class Exclusion:
    """An admin's exclusion of a voter: who, when and why; undone (kept) when reversed."""

    exclusion_id: str
    voter: str
    reason: str
    flags: str | None
    """The ring flags the admin saw (JSON), if any."""
    votes: int
    """The voter's votes when excluded."""
    excluded_by: str
    excluded_at: str
    excluded_ts: float
    undone_by: str | None = None
    undone_at: str | None = None
    undo_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.undone_at is None


class AlreadyExcluded(Conflict):
    """The voter is already excluded (undo that exclusion first)."""


class UnknownExclusion(NotFound):
    """No such exclusion, or it was already undone."""


class ArenaAudit(Tables):
    """What the board counts, the admin's exclusions and the rows the flags and the export
    read (the read side of :class:`ArenaTables`)."""

    def __init__(self, runner: Runner):
        self.runner = runner

    @property
    def sql(self) -> Runner:
        return self.runner

    # -- what the board counts

    def tally(self) -> list[tuple[str, str, str, int]]:
        """Counted votes as ``(system_a, system_b, choice, n)`` (the pair choice's input)."""
        rows = self.sql.execute(
            "SELECT v.system_a, v.system_b, v.choice, count(*) FROM arena_votes v "
            f"WHERE {COUNTED} GROUP BY v.system_a, v.system_b, v.choice "
            "ORDER BY v.system_a, v.system_b, v.choice"
        ).fetchall()
        return [(a, b, c, int(n)) for a, b, c, n in rows]

    def pending_pairs(self, since_ts: float) -> list[tuple[str, str, int]]:
        """Battles made after ``since_ts`` and not voted yet, per pair: votes on their way."""
        rows = self.sql.execute(
            "SELECT b.system_a, b.system_b, count(*) FROM arena_battles b LEFT JOIN arena_votes "
            "v ON v.battle_id = b.battle_id WHERE b.created_ts > ? AND v.battle_id IS NULL "
            "GROUP BY b.system_a, b.system_b ORDER BY b.system_a, b.system_b",
            [since_ts],
        ).fetchall()
        return [(a, b, int(n)) for a, b, n in rows]

    def board_stamp(self) -> tuple[int, ...]:
        """Changes whenever what the board counts may have: votes, exclusions, undos."""
        votes = self.sql.execute("SELECT count(*) FROM arena_votes").fetchone()[0]
        made, undone = self.sql.execute(
            "SELECT count(*), count(undone_at) FROM arena_exclusions"
        ).fetchone()
        return (int(votes), int(made), int(undone))

    def vote_count(self) -> int:
        return int(self.sql.execute("SELECT count(*) FROM arena_votes").fetchone()[0])

    # -- exclusions

    def exclude(self, e: Exclusion) -> Exclusion:
        """Store an exclusion (``votes`` filled in); :class:`AlreadyExcluded` when the voter
        has an active one."""
        with self.immediate("arena:voter:" + e.voter) as db:
            if self.active_exclusion(e.voter) is not None:
                raise AlreadyExcluded(f"voter {e.voter} is already excluded")
            n = db.execute("SELECT count(*) FROM arena_votes WHERE voter=?", [e.voter])
            e = replace(e, votes=int(n.fetchone()[0]))
            db.execute(
                "INSERT INTO arena_exclusions (exclusion_id, voter, reason, flags, votes, "
                "excluded_by, excluded_at, excluded_ts) VALUES (?,?,?,?,?,?,?,?)",
                [e.exclusion_id, e.voter, e.reason, e.flags, e.votes, e.excluded_by]
                + [e.excluded_at, e.excluded_ts],
            )
        return e

    def undo_exclusion(self, exclusion_id: str, by: str, reason: str, at: str) -> Exclusion:
        """Mark an active exclusion undone (the row stays); :class:`UnknownExclusion` else."""
        with self.immediate("arena:exclusions") as db:
            n = db.execute(
                "UPDATE arena_exclusions SET undone_by=?, undone_at=?, undo_reason=? "
                "WHERE exclusion_id=? AND undone_at IS NULL",
                [by, at, reason, exclusion_id],
            ).rowcount
        e = self.exclusion(exclusion_id)
        if not n or e is None:
            raise UnknownExclusion("no active exclusion with that id (it may be undone already)")
        return e

    def exclusion(self, exclusion_id: str) -> Exclusion | None:
        r = self.sql.execute(
            f"SELECT {EXCLUSION_COLUMNS} FROM arena_exclusions WHERE exclusion_id=?",
            [exclusion_id],
        ).fetchone()
        return None if r is None else Exclusion(*r)

    def active_exclusion(self, voter: str) -> Exclusion | None:
        r = self.sql.execute(
            f"SELECT {EXCLUSION_COLUMNS} FROM arena_exclusions WHERE voter=? AND undone_at IS NULL",
            [voter],
        ).fetchone()
        return None if r is None else Exclusion(*r)

    def exclusions(self) -> list[Exclusion]:
        """Every exclusion, undone ones included, oldest first."""
        rows = self.sql.execute(
            f"SELECT {EXCLUSION_COLUMNS} FROM arena_exclusions {order_by('arena_exclusions')}"
        ).fetchall()
        return [Exclusion(*r) for r in rows]

    # -- frames

    def voters_frame(self) -> pd.DataFrame:
        """Per voter: votes, counted votes, first and last vote, and whether excluded now."""
        return self.read_frame(
            "SELECT v.voter, count(*) AS votes, "
            f"sum(CASE WHEN {COUNTED} THEN 1 ELSE 0 END) AS counted, "
            "min(v.created_at) AS first_vote, max(v.created_at) AS last_vote, "
            f"max(CASE WHEN {EXCLUDED} THEN 1 ELSE 0 END) AS excluded FROM arena_votes v "
            "GROUP BY v.voter ORDER BY votes DESC, v.voter NULLS FIRST"
        )

    def votes_frame(self) -> pd.DataFrame:
        """One row per vote: battle_id, system_a, system_b, choice (``a``/``b``/``tie``/
        ``both_bad``), text_source, decision_ms, created_at, voter (its hash), counted (0/1:
        first use of the text), uncounted (why not), excluded (0/1: the voter is excluded
        now), language, voice_a, voice_b. The board counts ``counted`` and not ``excluded``."""
        return self.read_frame(
            "SELECT v.battle_id, v.system_a, v.system_b, v.choice, v.text_source, v.decision_ms, "
            "v.created_at, v.voter, v.counted, v.uncounted, "
            f"CASE WHEN {EXCLUDED} THEN 1 ELSE 0 END AS excluded, b.language, b.voice_a, "
            "b.voice_b FROM arena_votes v JOIN arena_battles b ON b.battle_id = v.battle_id "
            f"{order_by('arena_votes', 'v')}"
        )

    def audit_frame(self) -> pd.DataFrame:
        """What the ring flags read: per vote, its systems and choice, when, the voter, the
        network and the owner (all keyed hashes), and whether it counts."""
        return self.read_frame(
            "SELECT v.battle_id, v.system_a, v.system_b, v.choice, v.voted_ts, v.voter, "
            "b.network, b.owner, v.counted, "
            f"CASE WHEN {EXCLUDED} THEN 1 ELSE 0 END AS excluded FROM arena_votes v "
            "JOIN arena_battles b ON b.battle_id = v.battle_id "
            f"{order_by('arena_votes', 'v')}"
        )

    def export_frame(self) -> pd.DataFrame:
        """One row per vote for a dataset: the text, language, systems, voices, choice, when,
        whether counted (and why not), whether the voter is excluded, the voter hash, and
        the take each side was accepted as played with (``take_a``, ``take_b``)."""
        return self.read_frame(
            "SELECT v.battle_id, b.text, b.text_source, b.language, v.system_a, v.system_b, "
            "b.voice_a, b.voice_b, v.choice, v.decision_ms, v.created_at, v.counted, "
            f"v.uncounted, CASE WHEN {EXCLUDED} THEN 1 ELSE 0 END AS excluded, v.voter, "
            f"({PLAYED.format(side='a')}) AS take_a, ({PLAYED.format(side='b')}) AS take_b "
            "FROM arena_votes v JOIN arena_battles b ON b.battle_id = v.battle_id "
            f"{order_by('arena_votes', 'v')}"
        )


EXCLUSION_COLUMNS = (
    "exclusion_id, voter, reason, flags, votes, excluded_by, excluded_at, excluded_ts, "
    "undone_by, undone_at, undo_reason"
)
PLAYED = (
    "SELECT s.take_id FROM arena_streams s WHERE s.battle_id = v.battle_id AND s.side = '{side}' "
    "AND s.played_ts IS NOT NULL ORDER BY s.played_ts, s.take_id LIMIT 1"
)
"""The first stream of a side accepted as played: the clip the voter heard."""


class ArenaTables(ArenaAudit):
    """The arena's rows in a store's database (``store.arena``), on either engine.
    Thread-safe: every call goes through the store's runner."""

    # -- battles

    def add_battle(
        self,
        battle: BattleRecord,
        voter: str,
        check: Callable[[BattleWindow], None],
        *,
        window_s: float = 60.0,
    ) -> None:
        """Store ``battle`` unless ``check`` (the rate limits) raises on the battles of the
        last ``window_s`` seconds, read in the same transaction."""
        now = battle.created_ts
        with self.immediate("arena:battles") as db:
            total, total_oldest, active, mine, mine_oldest = db.execute(
                "SELECT count(*), min(created_ts), count(DISTINCT voter), "
                "sum(CASE WHEN voter=? THEN 1 ELSE 0 END), "
                "min(CASE WHEN voter=? THEN created_ts END) FROM arena_battles WHERE created_ts>?",
                [voter, voter, now - window_s],
            ).fetchone()
            check(
                BattleWindow(
                    mine=int(mine or 0),
                    mine_oldest_ts=mine_oldest,
                    total=int(total),
                    total_oldest_ts=total_oldest,
                    active_voters=int(active),
                    voter_dropped=self.voter_dropped(voter),
                )
            )
            db.execute(
                "INSERT INTO arena_battles (battle_id, owner, text, text_source, system_a, "
                "system_b, created_ts, created_at, voter, text_key, language, voice_a, voice_b, "
                "network, pair_why) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    battle.battle_id,
                    battle.owner,
                    battle.text,
                    battle.text_source,
                    battle.system_a,
                    battle.system_b,
                    now,
                    now_iso(),
                    voter,
                    battle.text_key,
                    battle.language,
                    battle.voice_a,
                    battle.voice_b,
                    battle.network,
                    battle.pair_why,
                ],
            )

    def battle(self, battle_id: str) -> BattleRecord | None:
        r = self.sql.execute(
            "SELECT b.battle_id, owner, text, b.text_source, b.system_a, b.system_b, created_ts, "
            "played_a_ts, played_b_ts, v.choice, language, voice_a, voice_b, text_key, network, "
            "pair_why FROM arena_battles b "
            "LEFT JOIN arena_votes v ON v.battle_id = b.battle_id WHERE b.battle_id = ?",
            [battle_id],
        ).fetchone()
        return None if r is None else BattleRecord(*r)

    # -- streams and plays

    def add_stream(
        self,
        battle_id: str,
        side: str,
        take_id: str,
        ws_session: str,
        now: float,
        check: Callable[[int], None],
    ) -> None:
        """Store a stream of ``side`` unless ``check(streams of that side so far)`` raises; every
        earlier stream of the page (``ws_session``) not yet reported played is superseded now."""
        with self.immediate("arena:streams") as db:
            n = db.execute(
                "SELECT count(*) FROM arena_streams WHERE battle_id=? AND side=?",
                [battle_id, side],
            ).fetchone()[0]
            check(int(n))
            db.execute(
                "UPDATE arena_streams SET superseded_ts=? WHERE ws_session=? AND "
                "superseded_ts IS NULL AND played_ts IS NULL",
                [now, ws_session],
            )
            db.execute(
                "INSERT INTO arena_streams (take_id, battle_id, side, ws_session, requested_ts) "
                "VALUES (?,?,?,?,?)",
                [take_id, battle_id, side, ws_session, now],
            )

    def finish_stream(
        self, take_id: str, status: str, duration_s: float | None, earliest_end_ts: float | None
    ) -> None:
        self.sql.execute(
            "UPDATE arena_streams SET status=?, duration_s=?, earliest_end_ts=? WHERE take_id=?",
            [status, duration_s, earliest_end_ts, take_id],
        )

    def stream(self, take_id: str, battle_id: str, side: str) -> ArenaStream | None:
        r = self.sql.execute(
            "SELECT take_id, battle_id, side, status, duration_s, earliest_end_ts, superseded_ts "
            "FROM arena_streams WHERE take_id=? AND battle_id=? AND side=?",
            [take_id, battle_id, side],
        ).fetchone()
        return None if r is None else ArenaStream(*r)

    def mark_played(
        self, take_id: str, battle_id: str, side: str, played_ts: float, played_ms: float
    ) -> None:
        """The stream was accepted as played: the side's first accepted play stays."""
        col = "played_a_ts" if side == "a" else "played_b_ts"
        with self.immediate("arena:play:" + battle_id) as sql:
            sql.execute(
                "UPDATE arena_streams SET played_ts=?, played_ms=? WHERE take_id=?",
                [played_ts, played_ms, take_id],
            )
            sql.execute(
                f"UPDATE arena_battles SET {col}=coalesce({col}, ?) WHERE battle_id=?",
                [played_ts, battle_id],
            )

    # -- votes and voters

    def votes_since(self, voter: str, since_ts: float) -> tuple[int, float | None]:
        """How many votes ``voter`` cast after ``since_ts``, and the oldest one's time."""
        n, oldest = self.sql.execute(
            "SELECT count(*), min(voted_ts) FROM arena_votes WHERE voter=? AND voted_ts>?",
            [voter, since_ts],
        ).fetchone()
        return int(n), oldest

    def add_vote(
        self,
        v: ArenaVote,
        check: Callable[[], None] | None = None,
        counts: Callable[[int], tuple[bool, str | None]] | None = None,
    ) -> bool:
        """Store the battle's one vote; False when the battle already has one. ``check`` (the
        voter's limits) runs first inside the same transaction, under a lock per voter, so two
        votes of one voter on two replicas cannot both pass a limit that has room for one.
        ``counts(earlier)`` decides, from the voter's earlier votes on the same text read in
        that transaction, whether this one is counted (and if not, why)."""
        try:
            with self.immediate("arena:voter:" + (v.voter or "")) as sql:
                if check is not None:
                    check()
                counted, why = v.counted, v.uncounted
                if counts is not None:
                    counted, why = counts(self.earlier_votes_on_text(v.battle_id, v.voter))
                sql.execute(
                    "INSERT INTO arena_votes (battle_id, choice, system_a, system_b, "
                    "text_source, decision_ms, voted_ts, created_at, voter, counted, uncounted) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [
                        v.battle_id,
                        v.choice,
                        v.system_a,
                        v.system_b,
                        v.text_source,
                        v.decision_ms,
                        v.voted_ts,
                        v.created_at,
                        v.voter,
                        int(counted),
                        why,
                    ],
                )
            return True
        except ConstraintFailed as e:
            if e.kind == "unique":
                return False
            raise

    def earlier_votes_on_text(self, battle_id: str, voter: str | None) -> int:
        """Votes ``voter`` cast before on other battles with this battle's text (its
        ``text_key``; battles stored before version 8 have none and match nothing)."""
        if voter is None:
            return 0
        r = self.sql.execute(
            "SELECT count(*) FROM arena_votes v JOIN arena_battles b ON b.battle_id = v.battle_id "
            "WHERE v.voter = ? AND v.battle_id <> ? AND b.text_key = "
            "(SELECT text_key FROM arena_battles WHERE battle_id = ?)",
            [voter, battle_id, battle_id],
        ).fetchone()
        return int(r[0])

    def voter_dropped(self, voter: str) -> bool:
        q = "SELECT 1 FROM arena_dropped_voters WHERE voter=?"
        return self.sql.execute(q, [voter]).fetchone() is not None

    def drop_voter(self, voter: str) -> int:
        """Delete every vote of ``voter`` and remember it as dropped; returns the votes deleted."""
        with self.immediate("arena:voter:" + voter) as db:
            n = db.execute("DELETE FROM arena_votes WHERE voter=?", [voter]).rowcount
            db.execute(
                "INSERT INTO arena_dropped_voters (voter, votes_dropped, dropped_at) "
                "VALUES (?,?,?) ON CONFLICT(voter) DO UPDATE SET "
                "votes_dropped = votes_dropped + excluded.votes_dropped",
                [voter, n, now_iso()],
            )
        return int(n)

    # -- the salt and the admin's settings (``arena_meta``)

    def voter_salt(self, new_salt: str) -> str:
        """This DB's key for voter hashes: ``new_salt`` the first time, then always that one
        (kept with the votes it keys, so a restart hashes every voter the same way)."""
        q = "SELECT value FROM arena_meta WHERE key=?"
        r = self.sql.execute(q, [VOTER_SALT]).fetchall()[:1]
        if not r:
            self.sql.execute(
                "INSERT INTO arena_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                [VOTER_SALT, new_salt],
            )
            r = self.sql.execute(q, [VOTER_SALT]).fetchall()[:1]
        return str(r[0][0])

    def setting(self, key: str) -> str | None:
        r = self.sql.execute("SELECT value FROM arena_meta WHERE key=?", [SETTING + key])
        row = r.fetchone()
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str | None) -> None:
        """Set (or with None, clear) an admin setting."""
        if value is None:
            self.sql.execute("DELETE FROM arena_meta WHERE key=?", [SETTING + key])
        else:
            self.sql.execute(
                "INSERT INTO arena_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [SETTING + key, value],
            )


__all__ = [
    "COUNTED",
    "AlreadyExcluded",
    "ArenaAudit",
    "ArenaTables",
    "Exclusion",
    "UnknownExclusion",
]
