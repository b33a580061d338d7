"""What a rater does with an item: play events (the server's record of what was heard, for
listen-gating) and one answer per item with the rows its kind keeps in its own tables (a MOS
rating, an A/B vote, a MUSHRA screen's sliders: each kind declares its tables), written in
one transaction.

Why one transaction per answer: an item is answered exactly once even with two tabs or a
re-sent request; a re-send of the same answer id changes nothing, another answer to the same
item is refused and the first stands.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from app.store.listening.base import ListeningTables
from app.store.listening.rows import AnswerRow
from app.store.records import AlreadyVoted, now_iso
from app.store.sql import ConstraintFailed
from backends.errors import InvalidRequest
from evaluation.listening.kinds import kind_of

if TYPE_CHECKING:
    from app.store.sql import Runner


def check_rows(kind: str, typed: list[tuple[str, dict[str, Any]]]) -> None:
    """Refuse a row for a table the kind does not declare, or with a column it lacks (a kind's
    mistake, found before anything is written)."""
    own = {t.name: set(t.names) for t in kind_of(kind).tables}
    for name, row in typed:
        if name not in own:
            raise InvalidRequest(f"the {kind!r} kind declares no table {name!r}")
        extra = set(row) - own[name]
        if extra:
            raise InvalidRequest(f"{name} has no column(s) {sorted(extra)}")


class AnswerTables(ListeningTables):
    """Play events and answers (a part of :class:`app.store.listening.TestStore`)."""

    __test__ = False  # not a pytest class

    # -- play events and answers

    def add_play_event(self, row: dict[str, Any]) -> None:
        row = {"event_id": uuid.uuid4().hex, "created_at": now_iso(), **row}
        cols = ", ".join(row)
        self.db.execute(
            f"INSERT INTO play_events ({cols}) VALUES ({', '.join('?' for _ in row)})",
            list(row.values()),
        )

    def played(self, test_id: str, rater_id: str, assignment_id: str) -> dict[int, float]:
        """Per slot, the longest playback the server has accepted (ms)."""
        rows = self.db.execute(
            "SELECT slot, max(played_ms) FROM play_events WHERE test_id=? AND rater_id=? "
            "AND assignment_id=? GROUP BY slot",
            [test_id, rater_id, assignment_id],
        ).fetchall()
        return {int(s): float(p or 0.0) for s, p in rows}

    def answered(self, test_id: str, rater_id: str) -> dict[str, AnswerRow]:
        """The rater's answers by item (assignment id)."""
        rows = self.read_rows(
            "SELECT * FROM answers WHERE test_id = ? AND rater_id = ?", [test_id, rater_id]
        )
        return {r["assignment_id"]: AnswerRow.of(r) for r in rows}

    def answer(
        self,
        answer_id: str,
        test_id: str,
        rater_id: str,
        assignment_id: str,
        kind: str,
        payload: dict[str, Any],
        condition: str | None,
        typed: list[tuple[str, dict[str, Any]]],
    ) -> bool:
        """Store one answer and its typed rows in one transaction.

        Returns True when stored now, False when this ``answer_id`` was stored before (a
        re-send). Another answer for the same item raises :class:`AlreadyVoted`. ``typed``
        rows go only to the tables ``kind`` declares, with only their declared columns.
        """
        check_rows(kind, typed)
        try:
            with self.db.transaction(f"answer:{test_id}:{rater_id}") as db:
                prev = db.execute(
                    "SELECT answer_id FROM answers WHERE test_id=? AND rater_id=? "
                    "AND assignment_id=?",
                    [test_id, rater_id, assignment_id],
                ).fetchone()
                if prev is None:
                    self._insert_answer(
                        db, (answer_id, test_id, rater_id, assignment_id), kind, payload,
                        condition, typed,
                    )  # fmt: skip
        except ConstraintFailed as e:
            again = self.db.execute(
                "SELECT 1 FROM answers WHERE answer_id = ?", [answer_id]
            ).fetchone()
            if again:
                return False
            raise AlreadyVoted(f"answer not stored: {e}", "") from None
        if prev is None:
            return True
        if prev[0] == answer_id:
            return False
        raise AlreadyVoted("this item is already answered; the first answer stands", prev[0])

    @staticmethod
    def _insert_answer(
        db: Runner,
        key: tuple[str, str, str, str],
        kind: str,
        payload: dict[str, Any],
        condition: str | None,
        typed: list[tuple[str, dict[str, Any]]],
    ) -> None:
        """The answer row and its typed rows (inside :meth:`answer`'s transaction)."""
        db.execute(
            "INSERT INTO answers (answer_id, test_id, rater_id, assignment_id, kind, payload, "
            "condition, created_at) VALUES (?,?,?,?,?,?,?,?)",
            [*key, kind, json.dumps(payload, sort_keys=True), condition, now_iso()],
        )
        for table, row in typed:
            cols = ", ".join(f'"{k}"' for k in row)
            db.execute(
                f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" for _ in row)})',
                list(row.values()),
            )

    # -- counts the rater flow checks

    def play_event_count(self, test_id: str, rater_id: str, assignment_id: str, slot: Any) -> int:
        return self.read_count(
            "SELECT count(*) FROM play_events WHERE test_id=? AND rater_id=? AND "
            "assignment_id=? AND slot=?",
            [test_id, rater_id, assignment_id, slot],
        )


__all__ = ["AnswerTables", "check_rows"]
