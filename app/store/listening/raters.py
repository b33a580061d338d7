"""A test's raters: joining (one crowd id is one rater; the next design row, atomically),
their session's fields, the screen-out, and the headphone screen's trials with their answer
keys (which stay here, on the server).

Why its own part: who a rater is and where they are in the test is read on every request of
the rater flow; the answers they give are :mod:`app.store.listening.answers`'.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.store.listening.base import ListeningTables
from app.store.listening.rows import RaterSession, ScreenRow, row_of, token_hash
from app.store.records import UnknownItem, now_iso
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    from app.store.sql import Runner

RATER_FIELDS = frozenset(
    {
        "consent_at",
        "headphone",
        "headphone_pass",
        "completion_code",
        "finished_at",
        "seen_at",
        "screened_out_at",
        "screenout_code",
        "familiar",
        "familiarised_at",
        "questionnaire",
    }
)
"""The ``test_raters`` columns the rater flow may set (:meth:`RaterTables.update_rater`)."""


class RaterTables(ListeningTables):
    """Raters, their sessions and screens (a part of :class:`app.store.listening.TestStore`)."""

    __test__ = False  # not a pytest class

    def join(
        self,
        test_id: str,
        token: str,
        crowd_id: str | None,
        crowd_source: str | None,
        *,
        study_id: str | None = None,
        session_id: str | None = None,
        choose_row: Callable[[list[RaterSession]], int | None] | None = None,
    ) -> tuple[RaterSession, bool]:
        """The rater of ``crowd_id`` in ``test_id`` (one crowd id is one rater: the old token
        is replaced by ``token``), or a new anonymous rater with the next ``seq`` and the design
        row ``choose_row`` picks from every rater's row (None: ``seq``). Atomic (two tabs
        joining at once get one rater). Returns ``(rater, resumed)``."""
        with self.db.transaction("join:" + test_id) as db:  # one test's joins, in turn
            old = (
                db.execute(
                    "SELECT rater_id FROM test_raters WHERE test_id = ? AND crowd_id = ? "
                    "ORDER BY seq LIMIT 1",
                    [test_id, crowd_id],
                ).fetchone()
                if crowd_id
                else None
            )
            if old is not None:
                db.execute(
                    "UPDATE test_raters SET token_hash = ?, seen_at = ?, "
                    "study_id = coalesce(?, study_id), session_id = coalesce(?, session_id) "
                    "WHERE test_id = ? AND rater_id = ?",
                    [token_hash(token), time.time(), study_id, session_id, test_id, old[0]],
                )
                rater_id = str(old[0])
            else:
                rater_id = self._new_rater(
                    db,
                    test_id,
                    token,
                    crowd_id,
                    crowd_source,
                    choose_row,
                    study_id=study_id,
                    session_id=session_id,
                )
        return self.rater(test_id, rater_id), old is not None

    def _new_rater(
        self,
        db: Runner,
        test_id: str,
        token: str,
        crowd_id: str | None,
        crowd_source: str | None,
        choose_row: Callable[[list[RaterSession]], int | None] | None,
        *,
        study_id: str | None,
        session_id: str | None,
    ) -> str:
        """Insert the next rater of the test (inside :meth:`join`'s transaction)."""
        rows = [
            row_of(RaterSession, r)
            for r in self.read_rows("SELECT * FROM test_raters WHERE test_id = ?", [test_id])
        ]
        seq = max((int(r.seq) for r in rows), default=-1) + 1
        row = choose_row(rows) if choose_row is not None else None
        rater_id = uuid.uuid4().hex[:16]
        db.execute(
            "INSERT INTO raters (rater_id, meta, created_at) VALUES (?,?,?)",
            [rater_id, json.dumps({"test_id": test_id}), now_iso()],
        )
        db.execute(
            "INSERT INTO test_raters (test_id, rater_id, token_hash, seq, crowd_id, "
            "crowd_source, created_at, study_id, session_id, design_row, seen_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                test_id,
                rater_id,
                token_hash(token),
                seq,
                crowd_id,
                crowd_source,
                now_iso(),
                study_id,
                session_id,
                seq if row is None else row,
                time.time(),
            ],
        )
        return rater_id

    def rater(self, test_id: str, rater_id: str) -> RaterSession:
        rows = self.read_rows(
            "SELECT * FROM test_raters WHERE test_id = ? AND rater_id = ?", [test_id, rater_id]
        )
        if not rows:
            raise UnknownItem("no such rater in this test")
        return row_of(RaterSession, rows[0])

    def rater_for_token(self, test_id: str, token: str) -> RaterSession | None:
        rows = self.read_rows(
            "SELECT * FROM test_raters WHERE token_hash = ? AND test_id = ?",
            [token_hash(token), test_id],
        )
        return row_of(RaterSession, rows[0]) if rows else None

    def update_rater(self, test_id: str, rater_id: str, **fields: Any) -> None:
        bad = set(fields) - RATER_FIELDS
        if bad:
            raise InvalidRequest(f"cannot set {sorted(bad)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(
            f"UPDATE test_raters SET {sets} WHERE test_id = ? AND rater_id = ?",
            [*fields.values(), test_id, rater_id],
        )

    def screen_out(self, test_id: str, rater_id: str, code: str) -> None:
        """End the rater's session once (a second, racing call keeps the first code)."""
        self.db.execute(
            "UPDATE test_raters SET screened_out_at = ?, screenout_code = ? "
            "WHERE test_id = ? AND rater_id = ? AND screened_out_at IS NULL",
            [now_iso(), code, test_id, rater_id],
        )

    # -- the headphone screen (answer keys stay here)

    def add_screen(self, test_id: str, rater_id: str, trials: list[tuple[str, str, float]]) -> None:
        """Store a rater's screen trials ``(kind, key json, duration ms)`` once (a second call,
        e.g. from another tab, keeps the first)."""
        with self.db.transaction(f"screen:{test_id}:{rater_id}") as db:
            for n, (kind, key, dur) in enumerate(trials):
                db.execute(
                    "INSERT INTO screen_trials (test_id, rater_id, n, kind, key, duration_ms) "
                    "VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                    [test_id, rater_id, n, kind, key, dur],
                )

    def screen(self, test_id: str, rater_id: str) -> list[ScreenRow]:
        rows = self.read_rows(
            "SELECT * FROM screen_trials WHERE test_id = ? AND rater_id = ? ORDER BY n",
            [test_id, rater_id],
        )
        return [row_of(ScreenRow, r) for r in rows]

    def screen_fetched(self, test_id: str, rater_id: str, n: int, at: float) -> None:
        """The first time the trial's audio went out (replays keep it), and one more fetch."""
        self.db.execute(
            "UPDATE screen_trials SET fetched_at = coalesce(fetched_at, ?), fetches = fetches + 1 "
            "WHERE test_id = ? AND rater_id = ? AND n = ?",
            [at, test_id, rater_id, n],
        )

    def screen_answer(self, test_id: str, rater_id: str, n: int, answer: int) -> bool:
        """Store the answer to trial ``n`` unless it has one (the first answer stands)."""
        cur = self.db.execute(
            "UPDATE screen_trials SET answer = ?, answered_at = ? "
            "WHERE test_id = ? AND rater_id = ? AND n = ? AND answer IS NULL",
            [answer, now_iso(), test_id, rater_id, n],
        )
        return cur.rowcount == 1


__all__ = ["RATER_FIELDS", "RaterTables"]
