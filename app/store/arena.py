"""The arena's tables: battles, their streams and plays, one vote per battle, the voter salt and
admin settings, dropped voters (created by schema version 4, :mod:`app.store.schema`).

Why the arena keeps its wall-clock times in the DB and not in memory: the rate limits, the play
checks and the vote all read rows, so a restart (or a second worker process) loses nothing and
no global state is kept in Python. The rules themselves (which limit, which play counts) are
the arena's (:mod:`app.arena.battles`); a check that must not race its write is passed in as a
function and run inside the write's transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from app.store.records import ArenaStream, ArenaVote, BattleRecord, BattleWindow, now_iso
from app.store.schema import order_by
from app.store.sql import ConstraintFailed
from app.store.tables import Tables

if TYPE_CHECKING:
    import pandas as pd

    from app.store.sql import Runner

SETTING = "setting:"
"""Prefix of the admin's settings in ``arena_meta`` (beside the ``voter_salt``)."""
VOTER_SALT = "voter_salt"


class ArenaTables(Tables):
    """The arena's rows in a store's database (``store.arena``), on either engine.
    Thread-safe: every call goes through the store's runner."""

    def __init__(self, runner: Runner):
        self.runner = runner

    @property
    def sql(self) -> Runner:
        return self.runner

    # -- battles

    def pair_votes(self) -> dict[tuple[str, str], int]:
        """Votes per pair of systems, the pair sorted (either side order is one pair)."""
        out: dict[tuple[str, str], int] = {}
        for a, b, n in self.sql.execute(
            "SELECT system_a, system_b, count(*) FROM arena_votes GROUP BY system_a, system_b"
        ).fetchall():
            x, y = sorted((a, b))
            out[(x, y)] = out.get((x, y), 0) + n
        return out

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
                "system_b, created_ts, created_at, voter) VALUES (?,?,?,?,?,?,?,?,?)",
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
                ],
            )

    def battle(self, battle_id: str) -> BattleRecord | None:
        r = self.sql.execute(
            "SELECT b.battle_id, owner, text, b.text_source, b.system_a, b.system_b, created_ts, "
            "played_a_ts, played_b_ts, v.choice FROM arena_battles b "
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

    def add_vote(self, v: ArenaVote, check: Callable[[], None] | None = None) -> bool:
        """Store the battle's one vote; False when the battle already has one. ``check`` (the
        voter's limits) runs first inside the same transaction, under a lock per voter, so two
        votes of one voter on two replicas cannot both pass a limit that has room for one."""
        try:
            with self.immediate("arena:voter:" + (v.voter or "")) as sql:
                if check is not None:
                    check()
                sql.execute(
                    "INSERT INTO arena_votes (battle_id, choice, system_a, system_b, "
                    "text_source, decision_ms, voted_ts, created_at, voter) "
                    "VALUES (?,?,?,?,?,?,?,?,?)",
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
                    ],
                )
            return True
        except ConstraintFailed as e:
            if e.kind == "unique":
                return False
            raise

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

    # -- results

    def voters_frame(self) -> pd.DataFrame:
        """Per voter: votes, first and last vote (what the admin looks at to drop one)."""
        return self.read_frame(
            "SELECT voter, count(*) AS votes, min(created_at) AS first_vote, "
            "max(created_at) AS last_vote FROM arena_votes GROUP BY voter "
            "ORDER BY votes DESC, voter NULLS FIRST"
        )

    def votes_frame(self) -> pd.DataFrame:
        """One row per vote: battle_id, system_a, system_b, choice (``a``/``b``/``tie``/
        ``both_bad``), text_source, decision_ms, created_at, voter (its hash)."""
        return self.read_frame(
            "SELECT battle_id, system_a, system_b, choice, text_source, decision_ms, created_at, "
            f"voter FROM arena_votes {order_by('arena_votes')}"
        )

    def vote_count(self) -> int:
        return int(self.sql.execute("SELECT count(*) FROM arena_votes").fetchone()[0])


__all__ = ["ArenaTables"]
