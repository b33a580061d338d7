"""The listening-test tables of the store (schema v2): tests' lifecycle, stimuli, raters'
sessions, play events, one answer per item, MUSHRA ratings.

Why a module beside the core store: the store keeps takes, votes and marks for every part of
the app; this is what only listening tests need, and every SQL statement the rater flow, its
WebSocket handlers, the export and the CLI run is here (none outside the store). It uses the
store's per-thread connections and writes each answer and its typed rows (MOS rating, A/B
vote, MUSHRA ratings) in one transaction, so an item is answered exactly once even with two
tabs or a re-sent request. :meth:`TestStore.test_data` hands a test's rows to the analysis
(:class:`evaluation.listening.data.TestData`) as DataFrames.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from app.store import AlreadyVoted, ListeningTest, UnknownItem, now_iso
from app.store.sql import ConstraintFailed, rows_as_dicts
from backends.errors import InvalidRequest
from evaluation.listening.data import TestData
from evaluation.loudness import TARGET_LUFS

if TYPE_CHECKING:
    import pandas as pd

    from app.store.interface import StoreEngine
    from app.store.sql import Runner

STATUSES = ("draft", "open", "closed")
EXPORT_TABLES = (
    "stimuli",
    "test_raters",
    "assignments",
    "answers",
    "play_events",
    "mos_ratings",
    "ab_votes",
    "mushra_ratings",
    "glitch_reports",
    "screen_trials",
)
"""Every table with a ``test_id``: what a test's export holds and what deleting it removes."""


@dataclass(frozen=True)
class Stimulus:
    """One stored stimulus of a test: a take and how it is played (the ``stimuli`` row)."""

    stimulus_id: str
    test_id: str
    take_id: str
    kind: str
    """``item``, ``anchor``, ``gold`` or ``trap``."""
    system_id: str | None = None
    """A system under test, or a pseudo system: ``__anchor__`` (MOS gold "1" / A/B check),
    ``__anchor_low__`` / ``__anchor_mid__`` (MUSHRA), ``__gold__``, ``__trap__``."""
    prompt_id: str | None = None
    expected: float | None = None
    condition: str = "as_streamed"
    gain_db: float = 0.0
    loudness_lufs: float | None = None
    """Before normalisation (see ``meta['output_lufs']`` for after)."""
    target_lufs: float = TARGET_LUFS
    source_take_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    """Loudness (``output_lufs``, ``ear_lufs``, ``true_peak_dbtp``, ``ceiling_dbtp``,
    ``limited``), ``origin`` (generated / imported / natural / admin_gold), and for anchors
    ``anchor`` (``low`` 3.5 kHz, ``mid`` 7 kHz, ``degraded``) with ``lowpass_hz``."""


def token_hash(token: str) -> str:
    """Rater tokens are stored only as their SHA-256 (a DB leak does not hand out sessions)."""
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class TestStore:
    """Listening-test reads and writes on top of a :class:`~app.store.Store`."""

    __test__ = False  # not a pytest class

    def __init__(self, store: StoreEngine):
        self.store = store

    @property
    def db(self) -> Runner:
        """The store's engine-neutral runner (SQLite or PostgreSQL)."""
        return self.store.sql

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return rows_as_dicts(self.db.execute(sql, list(params)))

    def _frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        import pandas as pd

        cur = self.db.execute(sql, list(params))
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])

    def _count(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.db.execute(sql, list(params)).fetchone()[0])

    # -- tests

    def create_test(
        self, test_id: str, kind: str, name: str, config: dict[str, Any], status: str = "draft"
    ) -> None:
        self.store.add_test(ListeningTest(test_id, kind=kind, name=name, config=config))
        self.set_status(test_id, status)

    def get_test(self, test_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM tests WHERE test_id = ?", [test_id])
        if not rows:
            return None
        r = rows[0]
        r["config"] = json.loads(r["config"]) if r["config"] else {}
        return r

    def require_test(self, test_id: str) -> dict[str, Any]:
        t = self.get_test(test_id)
        if t is None:
            raise UnknownItem(f"no test {test_id!r}")
        return t

    def list_tests(self) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT t.test_id, t.kind, t.name, t.status, t.created_at, "
            "(SELECT count(*) FROM test_raters r WHERE r.test_id = t.test_id) AS raters, "
            "(SELECT count(*) FROM answers a WHERE a.test_id = t.test_id) AS answers, "
            "(SELECT count(*) FROM stimuli s WHERE s.test_id = t.test_id) AS stimuli "
            "FROM tests t ORDER BY t.created_at DESC"
        )
        return rows

    def set_status(self, test_id: str, status: str) -> None:
        if status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}")
        self.require_test(test_id)
        self.db.execute(
            "UPDATE tests SET status = ?, updated_at = ? WHERE test_id = ?",
            [status, now_iso(), test_id],
        )

    def duplicate(self, test_id: str, new_id: str, name: str | None = None) -> None:
        """A new draft test with the same config and stimuli (same takes), no raters."""
        t = self.require_test(test_id)
        self.create_test(new_id, t["kind"], name or f"{t['name']} (copy)", t["config"])
        for s in self.stimuli(test_id):
            self.add_stimulus(
                Stimulus(**{**asdict(s), "stimulus_id": uuid.uuid4().hex, "test_id": new_id})
            )

    def change_settings(self, test_id: str, changes: dict[str, str | None]) -> list[str]:
        """Set config fields of a test (open or not) and record each real change with its
        time in ``test_changes``; returns the fields that changed. The caller checks values."""
        t = self.require_test(test_id)
        cfg = dict(t["config"])
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

    def changes(self, test_id: str) -> list[dict[str, Any]]:
        """The recorded setting changes of a test, oldest first (one save: by field name)."""
        return self._rows(
            "SELECT field, old_value, new_value, changed_at FROM test_changes "
            "WHERE test_id = ? ORDER BY changed_at, field",
            [test_id],
        )

    def delete(self, test_id: str) -> None:
        """Remove a test and everything rated in it (export first: the designer does). Takes stay."""
        self.require_test(test_id)
        with self.db.transaction("test:" + test_id) as db:
            for table in (
                "mushra_ratings",
                "answers",
                "play_events",
                "mos_ratings",
                "ab_votes",
                "glitch_reports",
                "assignments",
                "screen_trials",
                "test_raters",
                "test_changes",
                "stimuli",
                "tests",
            ):  # children first
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
        for r in self._rows(
            "SELECT * FROM stimuli WHERE test_id = ? ORDER BY created_at, stimulus_id", [test_id]
        ):
            r.pop("created_at", None)
            r["meta"] = json.loads(r["meta"]) if r["meta"] else {}
            out.append(Stimulus(**r))
        return out

    # -- raters

    def join(
        self,
        test_id: str,
        token: str,
        crowd_id: str | None,
        crowd_source: str | None,
        *,
        study_id: str | None = None,
        session_id: str | None = None,
        choose_row: Callable[[list[dict[str, Any]]], int | None] | None = None,
    ) -> tuple[dict[str, Any], bool]:
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
        choose_row: Callable[[list[dict[str, Any]]], int | None] | None,
        *,
        study_id: str | None,
        session_id: str | None,
    ) -> str:
        """Insert the next rater of the test (inside :meth:`join`'s transaction)."""
        rows = self._rows(
            "SELECT rater_id, seq, design_row, finished_at, screened_out_at, seen_at, "
            "headphone_pass FROM test_raters WHERE test_id = ?",
            [test_id],
        )
        seq = max((int(r["seq"]) for r in rows), default=-1) + 1
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

    def rater(self, test_id: str, rater_id: str) -> dict[str, Any]:
        rows = self._rows(
            "SELECT * FROM test_raters WHERE test_id = ? AND rater_id = ?", [test_id, rater_id]
        )
        if not rows:
            raise UnknownItem("no such rater in this test")
        return rows[0]

    def rater_for_token(self, test_id: str, token: str) -> dict[str, Any] | None:
        rows = self._rows(
            "SELECT * FROM test_raters WHERE token_hash = ? AND test_id = ?",
            [token_hash(token), test_id],
        )
        return rows[0] if rows else None

    def update_rater(self, test_id: str, rater_id: str, **fields: Any) -> None:
        allowed = {
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
        bad = set(fields) - allowed
        if bad:
            raise InvalidRequest(f"cannot set {sorted(bad)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(
            f"UPDATE test_raters SET {sets} WHERE test_id = ? AND rater_id = ?",
            [*fields.values(), test_id, rater_id],
        )

    def raters_frame(self, test_id: str) -> pd.DataFrame:
        return self._frame(
            "SELECT test_id, rater_id, seq, design_row, crowd_id, crowd_source, study_id, "
            "session_id, consent_at, headphone, headphone_pass, screened_out_at, "
            "screenout_code, familiarised_at, completion_code, finished_at, created_at, seen_at, "
            "questionnaire, "
            "(SELECT count(*) FROM answers a WHERE a.test_id = r.test_id "
            "AND a.rater_id = r.rater_id) AS answered "
            "FROM test_raters r WHERE test_id = ? ORDER BY seq",
            [test_id],
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

    def screen(self, test_id: str, rater_id: str) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM screen_trials WHERE test_id = ? AND rater_id = ? ORDER BY n",
            [test_id, rater_id],
        )

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

    def answered(self, test_id: str, rater_id: str) -> dict[str, dict[str, Any]]:
        return {
            r["assignment_id"]: r
            for r in self._rows(
                "SELECT * FROM answers WHERE test_id = ? AND rater_id = ?", [test_id, rater_id]
            )
        }

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
        re-send). Another answer for the same item raises :class:`AlreadyVoted`.
        """
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

    # -- frames

    def mushra_frame(self, test_id: str) -> pd.DataFrame:
        return self._frame(
            "SELECT * FROM mushra_ratings WHERE test_id = ? ORDER BY rater_id, assignment_id, slot",
            [test_id],
        )

    def ab_checks_frame(self, test_id: str) -> pd.DataFrame:
        """The answered A/B check pairs (anchor vs its clean source): rater, which side was
        clean (``expected``: -1 A, +1 B) and the answer's ``choice`` and ``cmos``."""
        import pandas as pd

        df = self._frame(
            "SELECT ans.rater_id, ans.assignment_id, a.expected, ans.payload "
            "FROM answers ans JOIN assignments a ON a.assignment_id = ans.assignment_id "
            "AND a.test_id = ans.test_id "
            "WHERE ans.test_id = ? AND ans.kind = 'ab' AND a.role = 'gold' "
            "ORDER BY ans.created_at",
            [test_id],
        )
        if df.empty:
            return pd.DataFrame(columns=["rater_id", "assignment_id", "expected", "choice", "cmos"])
        payload = df.pop("payload").map(json.loads)
        df["choice"] = payload.map(lambda p: p.get("choice"))
        df["cmos"] = payload.map(lambda p: p.get("cmos"))
        return df

    def ratings_frame(self, test_id: str) -> pd.DataFrame:
        """Every rating of the test in one long table, for the export: one row per MOS score,
        A/B vote and MUSHRA slot, each with its ``system_id`` (A/B: the system the vote went
        to, ``tie`` otherwise, and both sides), prompt (``prompt_id`` and the test's own
        ``prompt_key``), role, when the item's first sound went out (``first_sound_at``: the
        server began streaming its first stimulus), ``answered_at``, ``time_on_item_ms``
        (first sound to answer) and ``time_since_previous_ms`` (the rater's previous answer,
        or consent, to this one: it includes the headphone screen for the first item)."""
        import pandas as pd

        cols = [
            "kind",
            "rater_id",
            "assignment_id",
            "slot",
            "role",
            "expected",
            "system_id",
            "system_a",
            "system_b",
            "prompt_id",
            "score",
            "choice",
            "cmos",
            "condition",
            "played_ms",
            "duration_s",
        ]
        times = ["first_sound_at", "answered_at", "time_on_item_ms", "time_since_previous_ms"]
        parts = []
        mos = self.store.mos_frame(test_id)
        if not mos.empty:
            parts.append(mos.assign(kind="mos", slot=0))
        ab = self.store.ab_frame(test_id)
        if not ab.empty:
            won = ab["choice"].map({"a": 0, "b": 1})
            sid = ab["system_a"].where(won == 0, ab["system_b"]).where(won.notna(), "tie")
            parts.append(ab.assign(kind="ab", slot=0, role="item", system_id=sid))
        mu = self.mushra_frame(test_id)
        if not mu.empty:
            parts.append(mu.assign(kind="mushra"))
        if not parts:
            return pd.DataFrame(columns=[*cols, "prompt_key", *times])
        df = pd.concat([p.reindex(columns=cols) for p in parts], ignore_index=True)
        prefix = f"{test_id}-"
        df.insert(
            cols.index("prompt_id") + 1,
            "prompt_key",
            df["prompt_id"].map(
                lambda p: p[len(prefix) :] if isinstance(p, str) and p.startswith(prefix) else p
            ),
        )
        return df.merge(self._item_times(test_id), on=["rater_id", "assignment_id"], how="left")

    def _item_times(self, test_id: str) -> pd.DataFrame:
        """Per answered item: first sound, answer time, and the two durations (ms)."""
        import pandas as pd

        def ts(s: pd.Series) -> pd.Series:
            return pd.to_datetime(s, errors="coerce", utc=True, format="ISO8601")

        ans = self._frame(
            "SELECT a.rater_id, a.assignment_id, a.created_at AS answered_at, "
            "coalesce(r.consent_at, r.created_at) AS started_at FROM answers a "
            "LEFT JOIN test_raters r ON r.test_id = a.test_id AND r.rater_id = a.rater_id "
            "WHERE a.test_id = ? ORDER BY a.rater_id, a.created_at",
            [test_id],
        )
        plays = self._frame(
            "SELECT rater_id, assignment_id, created_at, server_elapsed_ms FROM play_events "
            "WHERE test_id = ?",
            [test_id],
        )
        answered = ts(ans["answered_at"])
        prev = answered.groupby(ans["rater_id"]).shift(1).fillna(ts(ans["started_at"]))
        ans["time_since_previous_ms"] = ((answered - prev).dt.total_seconds() * 1000).round(0)
        if plays.empty:
            ans["first_sound_at"] = pd.Series(pd.NaT, index=ans.index, dtype="datetime64[ns, UTC]")
        else:  # a stream began server_elapsed_ms before its play event was stored
            began = ts(plays["created_at"]) - pd.to_timedelta(
                pd.to_numeric(plays["server_elapsed_ms"], errors="coerce").fillna(0), unit="ms"
            )
            first = began.groupby([plays["rater_id"], plays["assignment_id"]]).min()
            ans["first_sound_at"] = [
                first.get((r, a), pd.NaT)
                for r, a in zip(ans["rater_id"], ans["assignment_id"], strict=True)
            ]
            ans["first_sound_at"] = pd.to_datetime(ans["first_sound_at"], utc=True)
        ans["time_on_item_ms"] = (
            (answered - ans["first_sound_at"]).dt.total_seconds() * 1000
        ).round(0)
        ans["first_sound_at"] = ans["first_sound_at"].map(
            lambda t: t.isoformat() if isinstance(t, pd.Timestamp) else None
        )
        return ans[["rater_id", "assignment_id", "first_sound_at", "answered_at"]].assign(
            time_on_item_ms=ans["time_on_item_ms"],
            time_since_previous_ms=ans["time_since_previous_ms"],
        )

    def prompt_texts(self, test_id: str) -> dict[str, str]:
        """``{prompt_id: text}`` of the test's prompts (ids start with the test id)."""
        rows = self.db.execute(
            "SELECT prompt_id, text FROM prompts WHERE prompt_id LIKE ?", [f"{test_id}-%"]
        ).fetchall()
        return {str(p): str(t or "") for p, t in rows}

    def answers_frame(self, test_id: str) -> pd.DataFrame:
        return self._frame("SELECT * FROM answers WHERE test_id = ? ORDER BY created_at", [test_id])

    def export_frame(self, table: str, test_id: str) -> pd.DataFrame:
        """Every raw row of one of :data:`EXPORT_TABLES` for the test (rater tokens' hashes
        left out)."""
        if table not in EXPORT_TABLES:
            raise InvalidRequest(f"no test table {table!r}")
        df = self._frame(f'SELECT * FROM "{table}" WHERE test_id = ?', [test_id])
        return df.drop(columns=["token_hash"]) if table == "test_raters" else df

    def glitch_frame(self, test_id: str) -> pd.DataFrame:
        """The test's glitch marks with the take's system, duration and chunk count."""
        return self._frame(
            "SELECT g.*, t.system_id, t.duration_s, t.chunk_count FROM glitch_reports g "
            "LEFT JOIN takes t ON t.take_id = g.take_id WHERE g.test_id = ?",
            [test_id],
        )

    def findings_frame(self, take_ids: Sequence[str]) -> pd.DataFrame:
        """Automatic findings on these takes, with the take's system."""
        found = self.store.findings_frame()
        return found[found["take_id"].isin(set(take_ids))] if not found.empty else found

    # -- the analysis' view (evaluation never reads the store itself)

    def test_data(self, test_id: str) -> TestData:
        """Every row one test's results are computed from (:mod:`evaluation.listening.results`)."""
        t = self.require_test(test_id)
        glitches = self.glitch_frame(test_id)
        return TestData(
            test_id=test_id,
            kind=t["kind"],
            config=t["config"],
            mos=self.store.mos_frame(test_id),
            ab=self.store.ab_frame(test_id),
            mushra=self.mushra_frame(test_id),
            raters=self.raters_frame(test_id),
            ab_checks=self.ab_checks_frame(test_id),
            glitches=glitches,
            findings=self.findings_frame(glitches["take_id"]) if not glitches.empty else glitches,
            answers=self.answers_frame(test_id),
            name=t["name"],
            status=t["status"],
        )

    def all_test_data(self) -> list[TestData]:
        """:meth:`test_data` of every test, newest first (the report's listening part)."""
        return [self.test_data(t["test_id"]) for t in self.list_tests()]

    # -- what the rater flow reads of the takes

    def take_text(self, take_id: str) -> str | None:
        row = self.db.execute("SELECT text FROM takes WHERE take_id = ?", [take_id]).fetchone()
        return None if row is None else row[0]

    def durations_ms(self, take_ids: Sequence[str]) -> list[float]:
        """Each take's duration in ms (0 for a take that is not stored)."""
        out = []
        for tid in take_ids:
            row = self.db.execute(
                "SELECT duration_s FROM takes WHERE take_id = ?", [tid]
            ).fetchone()
            out.append(float(row[0]) * 1000.0 if row else 0.0)
        return out

    def stimulus_formats(self, test_id: str) -> list[tuple[int, int]]:
        """The distinct ``(sample rate, channels)`` of the test's stimuli's takes."""
        rows = self.db.execute(
            "SELECT DISTINCT t.sample_rate, t.channels FROM takes t JOIN stimuli s "
            "ON s.take_id = t.take_id WHERE s.test_id = ?",
            [test_id],
        ).fetchall()
        return [(int(r or 0), int(c or 1)) for r, c in rows]

    def play_event_count(self, test_id: str, rater_id: str, assignment_id: str, slot: Any) -> int:
        return self._count(
            "SELECT count(*) FROM play_events WHERE test_id=? AND rater_id=? AND "
            "assignment_id=? AND slot=?",
            [test_id, rater_id, assignment_id, slot],
        )

    def mark_count(self, test_id: str, rater_id: str, take_id: str) -> int:
        """Glitch marks one rater stored on one stimulus of the test."""
        return self._count(
            "SELECT count(*) FROM glitch_reports WHERE test_id=? AND rater_id=? AND take_id=?",
            [test_id, rater_id, take_id],
        )

    def glitch_report(self, report_id: str) -> dict[str, Any]:
        rows = self._rows("SELECT * FROM glitch_reports WHERE report_id = ?", [report_id])
        if not rows:
            raise UnknownItem(f"no glitch report {report_id!r}")
        return rows[0]


__all__ = ["EXPORT_TABLES", "STATUSES", "Stimulus", "TestStore", "token_hash"]
