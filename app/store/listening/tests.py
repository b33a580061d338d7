"""A listening test's life: created, opened and closed, copied, its crowd settings changed (each
change kept), deleted with everything rated in it; and its stimuli.

Why its own part: the test row and its stimuli are what the designer writes and every other
part reads; the raters, the answers and the views come after.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from typing import Any

from app.store.listening.base import ListeningTables
from app.store.listening.rows import (
    STATUSES,
    SettingChange,
    Stimulus,
    TestRow,
    TestSummary,
    row_of,
)
from app.store.records import ListeningTest, now_iso
from app.store.schema import order_by, per_test_tables
from backends.errors import InvalidRequest


def delete_order() -> tuple[str, ...]:
    """Every table holding a test's rows (a registered kind's answer tables included),
    children before the rows they reference."""
    return tuple(reversed(per_test_tables()))


class TestTables(ListeningTables):
    """Tests and their stimuli (a part of :class:`app.store.listening.TestStore`)."""

    __test__ = False  # not a pytest class

    def create_test(
        self, test_id: str, kind: str, name: str, config: dict[str, Any], status: str = "draft"
    ) -> None:
        self.store.add_test(ListeningTest(test_id, kind=kind, name=name, config=config))
        self.set_status(test_id, status)

    def get_test(self, test_id: str) -> TestRow | None:
        return self.test_row(test_id)

    def require_test(self, test_id: str) -> TestRow:
        return self.require_test_row(test_id)

    def list_tests(self) -> list[TestSummary]:
        """Every test, newest first, with its counts of raters, answers and stimuli."""
        rows = self.read_rows(
            "SELECT t.test_id, t.kind, t.name, t.status, t.created_at, "
            "(SELECT count(*) FROM test_raters r WHERE r.test_id = t.test_id) AS raters, "
            "(SELECT count(*) FROM answers a WHERE a.test_id = t.test_id) AS answers, "
            "(SELECT count(*) FROM stimuli s WHERE s.test_id = t.test_id) AS stimuli "
            "FROM tests t ORDER BY t.created_at DESC NULLS LAST, t.test_id DESC"
        )
        return [row_of(TestSummary, r) for r in rows]

    def set_status(self, test_id: str, status: str) -> None:
        if status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}")
        self.require_test_row(test_id)
        self.db.execute(
            "UPDATE tests SET status = ?, updated_at = ? WHERE test_id = ?",
            [status, now_iso(), test_id],
        )

    def duplicate(self, test_id: str, new_id: str, name: str | None = None) -> None:
        """A new draft test with the same config and stimuli (same takes), no raters."""
        t = self.require_test_row(test_id)
        self.create_test(new_id, t.kind, name or f"{t.name} (copy)", t.config)
        for s in self.stimuli(test_id):
            self.add_stimulus(
                Stimulus(**{**asdict(s), "stimulus_id": uuid.uuid4().hex, "test_id": new_id})
            )

    def change_settings(self, test_id: str, changes: dict[str, str | None]) -> list[str]:
        """Set config fields of a test (open or not) and record each real change with its
        time in ``test_changes``; returns the fields that changed. The caller checks values."""
        cfg = dict(self.require_test_row(test_id).config)
        at = now_iso()
        changed = [k for k, v in changes.items() if (cfg.get(k) or None) != (v or None)]
        if not changed:
            return []
        with self.db.transaction("test:" + test_id) as db:  # the changes and the config at once
            for k in changed:
                db.execute(
                    "INSERT INTO test_changes (change_id, test_id, field, old_value, new_value, "
                    "changed_at) VALUES (?, ?, ?, ?, ?, ?)",
                    [uuid.uuid4().hex, test_id, k, cfg.get(k) or None, changes[k] or None, at],
                )
                cfg[k] = changes[k] or None
            db.execute(
                "UPDATE tests SET config = ?, updated_at = ? WHERE test_id = ?",
                [json.dumps(cfg), at, test_id],
            )
        return changed

    def changes(self, test_id: str) -> list[SettingChange]:
        """The recorded setting changes of a test, oldest first (one save: by field name)."""
        rows = self.read_rows(
            "SELECT field, old_value, new_value, changed_at FROM test_changes "
            f"WHERE test_id = ? {order_by('test_changes')}",
            [test_id],
        )
        return [row_of(SettingChange, r) for r in rows]

    def delete(self, test_id: str) -> None:
        """Remove a test and everything rated in it (export first: the designer does). Takes
        stay. The tables are the declaration's (:func:`delete_order`)."""
        self.require_test_row(test_id)
        with self.db.transaction("test:" + test_id) as db:
            for table in delete_order():
                db.execute(f'DELETE FROM "{table}" WHERE test_id = ?', [test_id])

    # -- stimuli

    def add_stimulus(self, s: Stimulus) -> None:
        row = asdict(s)
        row["meta"] = json.dumps(s.meta, sort_keys=True)
        row["created_at"] = now_iso()
        cols = ", ".join(row)
        self.db.execute(
            f"INSERT INTO stimuli ({cols}) VALUES ({', '.join('?' for _ in row)})",
            list(row.values()),
        )

    def stimuli(self, test_id: str) -> list[Stimulus]:
        out = []
        for r in self.read_rows(
            f"SELECT * FROM stimuli WHERE test_id = ? {order_by('stimuli')}", [test_id]
        ):
            r.pop("created_at", None)
            r["meta"] = json.loads(r["meta"]) if r["meta"] else {}
            out.append(Stimulus(**r))
        return out


__all__ = ["TestTables", "delete_order"]
