"""A test's rows as the results, the export and the rater flow read them: frames in a total
order (the same rows in the same order on either engine and after ``listenlab db copy``), the
analysis' :class:`evaluation.listening.data.TestData`, and what the rater flow reads of takes.

Why its own part: everything here only reads, and everything the export writes comes through
here, so "the same study exports the same bytes" is kept in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.store.listening.base import ListeningTables
from app.store.schema import export_tables, kind_tables, order_by, table
from backends.errors import InvalidRequest
from evaluation.listening.data import TestData

if TYPE_CHECKING:
    import pandas as pd


class TestViews(ListeningTables):
    """Frames and reads (a part of :class:`app.store.listening.TestStore`)."""

    __test__ = False  # not a pytest class

    def raters_frame(self, test_id: str) -> pd.DataFrame:
        return self.read_frame(
            "SELECT test_id, rater_id, seq, design_row, crowd_id, crowd_source, study_id, "
            "session_id, consent_at, headphone, headphone_pass, screened_out_at, "
            "screenout_code, familiarised_at, completion_code, finished_at, created_at, seen_at, "
            "questionnaire, "
            "(SELECT count(*) FROM answers a WHERE a.test_id = r.test_id "
            "AND a.rater_id = r.rater_id) AS answered "
            f"FROM test_raters r WHERE test_id = ? {order_by('test_raters')}",
            [test_id],
        )

    # -- frames

    def checks_frame(self, test_id: str) -> pd.DataFrame:
        """Every answered check item of the test (its assignment's role is not ``item``): the
        rater, the item, its kind, role and ``expected`` answer, and the answer's JSON
        ``payload``, which the test's kind scores (:meth:`TestKind.screen`)."""
        return self.read_frame(
            "SELECT ans.rater_id, ans.assignment_id, ans.kind, a.role, a.expected, ans.payload "
            "FROM answers ans JOIN assignments a ON a.assignment_id = ans.assignment_id "
            "AND a.test_id = ans.test_id WHERE ans.test_id = ? AND a.role <> 'item' "
            + order_by("answers", "ans"),
            [test_id],
        )

    def item_times(self, test_id: str) -> pd.DataFrame:
        """Per answered item: when its first sound went out (``first_sound_at``: the server
        began streaming its first stimulus), ``answered_at``, ``time_on_item_ms`` (first sound
        to answer) and ``time_since_previous_ms`` (the rater's previous answer, or consent, to
        this one: it includes the headphone screen for the first item)."""
        import pandas as pd

        def ts(s: pd.Series) -> pd.Series:
            return pd.to_datetime(s, errors="coerce", utc=True, format="ISO8601")

        ans = self.read_frame(
            "SELECT a.rater_id, a.assignment_id, a.created_at AS answered_at, "
            "coalesce(r.consent_at, r.created_at) AS started_at FROM answers a "
            "LEFT JOIN test_raters r ON r.test_id = a.test_id AND r.rater_id = a.rater_id "
            "WHERE a.test_id = ? ORDER BY a.rater_id, a.created_at NULLS FIRST, a.answer_id",
            [test_id],
        )
        plays = self.read_frame(
            "SELECT rater_id, assignment_id, created_at, server_elapsed_ms FROM play_events "
            f"WHERE test_id = ? {order_by('play_events')}",
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
        return self.read_frame(
            f"SELECT * FROM answers WHERE test_id = ? {order_by('answers')}", [test_id]
        )

    def export_frame(self, name: str, test_id: str) -> pd.DataFrame:
        """Every raw row of one of the export's tables (:func:`app.store.schema.export_tables`,
        a registered kind's included) for the test, in the table's total order, with its
        exported columns (rater tokens' hashes are not)."""
        if name not in export_tables():
            raise InvalidRequest(f"no test table {name!r}")
        cols = ", ".join(f'"{c.name}"' for c in table(name).columns if c.exported)
        return self.read_frame(
            f'SELECT {cols} FROM "{name}" WHERE test_id = ? {order_by(name)}', [test_id]
        )

    def stimuli_frame(self, test_id: str) -> pd.DataFrame:
        """The test's stimuli as the analysis reads them: take, system (pseudo systems
        included), prompt and kind."""
        return self.read_frame(
            "SELECT take_id, system_id, prompt_id, kind FROM stimuli WHERE test_id = ? "
            + order_by("stimuli"),
            [test_id],
        )

    def findings_frame(self, take_ids: Sequence[str]) -> pd.DataFrame:
        """Automatic findings on these takes, with the take's system."""
        found = self.store.findings_frame()
        return found[found["take_id"].isin(set(take_ids))] if not found.empty else found

    # -- the analysis' view (evaluation never reads the store itself)

    def test_data(self, test_id: str) -> TestData:
        """Every row one test's results are computed from (:mod:`evaluation.listening.results`):
        every registered kind's answer table, the raters, the check items, the answers."""
        t = self.require_test_row(test_id)
        stimuli = self.stimuli_frame(test_id)
        return TestData(
            test_id=test_id,
            kind=t.kind,
            config=t.config,
            tables={k.name: self.store.answer_frame(k.name, test_id) for k in kind_tables()},
            raters=self.raters_frame(test_id),
            checks=self.checks_frame(test_id),
            findings=self.findings_frame(stimuli["take_id"]),
            answers=self.answers_frame(test_id),
            stimuli=stimuli,
            name=t.name or "",
            status=t.status or "",
        )

    def all_test_data(self) -> list[TestData]:
        """:meth:`test_data` of every test, newest first (the report's listening part)."""
        ids = self.db.execute(
            "SELECT test_id FROM tests ORDER BY created_at DESC NULLS LAST, test_id DESC"
        ).fetchall()
        return [self.test_data(r[0]) for r in ids]

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
            "ON s.take_id = t.take_id WHERE s.test_id = ? ORDER BY t.sample_rate, t.channels",
            [test_id],
        ).fetchall()
        return [(int(r or 0), int(c or 1)) for r, c in rows]


__all__ = ["TestViews"]
