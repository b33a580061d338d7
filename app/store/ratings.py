"""Ratings in the store: raters, tests and their playlists, MOS ratings, A/B votes, glitch
marks and the detector's findings, and the frames the statistics read them back as.

Why every write is idempotent on its client-supplied id: a rater's page re-sends what it is not
sure arrived, and one vote per rater per item is a UNIQUE constraint, so a re-sent vote returns
``Written(id, created=False)`` and a second vote under a new id raises
:class:`~app.store.records.AlreadyVoted` (the first stands), whatever the threads or processes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from app.store.records import (
    AB_CHOICES,
    GLITCH_KINDS,
    ROLES,
    TEST_KINDS,
    AbVote,
    Assignment,
    GlitchReport,
    ListeningTest,
    MosRating,
    Rater,
    Written,
    nearest_boundary,
    now_iso,
)
from app.store.schema import Table, kind_tables, order_by, quoted, report_tables, table
from app.store.sql import rows_as_dicts
from app.store.tables import Tables, ab_item_key, from_json, to_json
from backends.errors import InvalidRequest

if TYPE_CHECKING:
    import pandas as pd


def numbers(df: pd.DataFrame, t: Table) -> pd.DataFrame:
    """``t``'s frame with each declared REAL or INTEGER column (its own and what its lookups
    borrow) as numbers: an all-NULL column would otherwise stay objects."""
    import pandas as pd

    kinds = {c.name: c.type for c in t.columns}
    for lk in t.lookups:
        other = {c.name: c.type for c in table(lk.table).columns}
        kinds.update({alias: other[c] for c, alias in lk.fields})
    for c, kind in kinds.items():
        if kind in ("real", "integer") and c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


class RatingTables(Tables):
    """Raters, tests, assignments, votes, marks and findings (a mixin of
    :class:`app.store.Store`, beside :class:`app.store.takes.TakeTables`, whose takes it
    reads)."""

    def boundaries_ms(self, take_id: str) -> list[float]:
        raise NotImplementedError  # app.store.takes.TakeTables

    def system_of(self, take_id: str) -> str | None:
        raise NotImplementedError  # app.store.takes.TakeTables

    # -- raters, tests, playlists

    def add_rater(self, r: Rater) -> Written:
        row = asdict(r)
        row["meta"] = to_json(r.meta)
        return self.insert_row("raters", "rater_id", row)

    def add_test(self, t: ListeningTest) -> Written:
        """Store a test row of a registered kind. Which kinds exist is the kinds' registry's
        to say (:data:`TEST_KINDS` is that registry, a kind registered later included); the
        store keeps no list of its own, but never stores a test the app could not start over."""
        if not isinstance(t.kind, str) or t.kind not in TEST_KINDS:
            raise InvalidRequest(
                f"test kind must be one of {', '.join(TEST_KINDS)}, got {t.kind!r}"[:200]
            )
        row = asdict(t)
        row["config"] = to_json(t.config)
        return self.insert_row("tests", "test_id", row)

    def add_assignment(self, a: Assignment) -> Written:
        if a.role not in ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(ROLES)}, got {a.role!r}")
        self.require_row("takes", "take_id", a.take_id)
        if a.take_b_id:
            self.require_row("takes", "take_id", a.take_b_id)
        row = asdict(a)
        row["slots"] = None if a.slots is None else json.dumps(list(a.slots))
        row["meta"] = to_json(a.meta)
        return self.insert_row(
            "assignments",
            "assignment_id",
            row,
            unique_msg=f"rater {a.rater_id} already has an item at position {a.position} of {a.test_id}",
        )

    def assignments(self, test_id: str, rater_id: str) -> list[Assignment]:
        rows = rows_as_dicts(
            self.sql.execute(
                "SELECT * FROM assignments WHERE test_id = ? AND rater_id = ? ORDER BY position",
                [test_id, rater_id],
            )
        )
        out = []
        for r in rows:
            r["slots"] = tuple(json.loads(r["slots"])) if r.get("slots") else None
            r["meta"] = from_json(r.get("meta"), {})
            out.append(Assignment(**r))
        return out

    # -- votes and marks

    def _assignment_for(self, test_id: str, rater_id: str, take_id: str) -> dict[str, Any] | None:
        cur = self.sql.execute(
            "SELECT role, expected FROM assignments WHERE test_id=? AND rater_id=? AND take_id=? LIMIT 1",
            [test_id, rater_id, take_id],
        )
        r = cur.fetchone()
        return None if r is None else {"role": r[0], "expected": r[1]}

    def add_mos_rating(self, m: MosRating) -> Written:
        if not math.isfinite(m.score):
            raise InvalidRequest(f"score must be a finite number, got {m.score!r}")
        self.require_row("tests", "test_id", m.test_id)
        row = asdict(m)
        if m.role is None:
            a = self._assignment_for(m.test_id, m.rater_id, m.take_id)
            row["role"] = a["role"] if a else "item"
            if m.expected is None and a:
                row["expected"] = a["expected"]
        if row["role"] not in ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(ROLES)}, got {row['role']!r}")
        return self.insert_row(
            "mos_ratings",
            "rating_id",
            row,
            unique_msg=f"rater {m.rater_id} already rated take {m.take_id} in test {m.test_id}",
        )

    def add_ab_vote(self, v: AbVote) -> Written:
        if v.choice not in AB_CHOICES:
            raise InvalidRequest(f"choice must be one of {', '.join(AB_CHOICES)}, got {v.choice!r}")
        if v.take_a == v.take_b:
            raise InvalidRequest("an A/B vote needs two different takes")
        if v.cmos is not None and not -3 <= v.cmos <= 3:
            raise InvalidRequest(f"cmos must be within -3..+3, got {v.cmos}")
        self.require_row("tests", "test_id", v.test_id)
        row = asdict(v)
        row["item_key"] = ab_item_key(v.take_a, v.take_b)
        row["system_a"] = v.system_a or self.system_of(v.take_a)
        row["system_b"] = v.system_b or self.system_of(v.take_b)
        return self.insert_row(
            "ab_votes",
            "vote_id",
            row,
            unique_msg=f"rater {v.rater_id} already voted on {v.take_a} vs {v.take_b} in test {v.test_id}",
        )

    def add_glitch_report(self, g: GlitchReport) -> Written:
        """Store a rater's glitch mark; the nearest seam is computed from the take if not given.
        A hunt's marks and the Playground's (no ``test_id``) are kept in one table, the glitch
        kind's (declared in its folder: ``evaluation/listening/kinds/glitch/``)."""
        if g.kind is not None and g.kind not in GLITCH_KINDS:
            raise InvalidRequest(
                f"glitch kind must be one of {', '.join(GLITCH_KINDS)} or None, got {g.kind!r}"
            )
        if not math.isfinite(g.position_ms) or g.position_ms < 0:
            raise InvalidRequest(f"position_ms must be a finite time >= 0, got {g.position_ms!r}")
        row = asdict(g)
        if g.boundary_index is None:
            nb = nearest_boundary(self.boundaries_ms(g.take_id), g.position_ms)
            if nb is not None:
                row["boundary_index"], row["boundary_ms"], row["distance_ms"] = nb
        else:
            self.require_row("takes", "take_id", g.take_id)
        return self.insert_row("glitch_reports", "report_id", row)

    def mark_count(self, test_id: str, rater_id: str, take_id: str) -> int:
        """Glitch marks one rater stored on one stimulus of a test (a hunt's answer counts
        them; the rater flow bounds them)."""
        return int(
            self.sql.execute(
                "SELECT count(*) FROM glitch_reports WHERE test_id=? AND rater_id=? AND take_id=?",
                [test_id, rater_id, take_id],
            ).fetchone()[0]
        )

    def glitch_report(self, report_id: str) -> GlitchReport | None:
        """A stored glitch mark, with the seam the store matched it to (None: no such mark)."""
        r = self.get_row("glitch_reports", "report_id", report_id)
        return None if r is None else GlitchReport(**r)

    def add_auto_findings(
        self, take_id: str, findings: Iterable[Any], *, detector: str = "glitches"
    ) -> int:
        """Replace the automatic findings stored for ``take_id`` (re-running is idempotent).

        ``findings`` are :class:`evaluation.glitches.Finding` objects (or dicts with ``kind``,
        ``time_s``, ``boundary_index``, ``severity``, ``evidence``). Returns how many were stored.
        """
        self.require_row("takes", "take_id", take_id)
        rows = []
        for i, f in enumerate(findings):
            d = f if isinstance(f, dict) else (f.to_dict() if hasattr(f, "to_dict") else asdict(f))
            rows.append(
                (
                    f"{take_id}:{detector}:{i}",
                    take_id,
                    detector,
                    d["kind"],
                    d.get("time_s"),
                    d.get("boundary_index"),
                    d.get("severity"),
                    json.dumps(d.get("evidence", {}), sort_keys=True, default=float),
                    now_iso(),
                )
            )
        with self.immediate("findings:" + take_id) as sql:
            sql.execute(
                "DELETE FROM auto_findings WHERE take_id=? AND detector=?", [take_id, detector]
            )
            sql.executemany(
                "INSERT INTO auto_findings (finding_id, take_id, detector, kind, time_s, "
                "boundary_index, severity, evidence, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                rows,
            )
        return len(rows)

    # -- frames for the statistics

    def report_tables(self) -> tuple[str, ...]:
        """The tables ``listenlab report`` writes whole (the declaration's ``reported``)."""
        return report_tables()

    def answer_frame(self, name: str, test_id: str | None = None) -> pd.DataFrame:
        """A kind's answer table (:attr:`evaluation.listening.kinds.base.TestKind.tables`) as
        a frame: one test's rows (every test's when ``test_id`` is None, the Playground's
        marks included), in the table's order, with the columns its lookups borrow (an
        answer's take: system, prompt, duration); declared numbers are numbers, NULL is NaN."""
        t = table(name)
        if t not in kind_tables():
            raise InvalidRequest(f"{name!r} is no registered kind's answer table")
        cols, joins = ["x.*"], []
        for n, lk in enumerate(t.lookups):
            a = f"j{n}"
            on = " AND ".join(f"{a}.{quoted(b)} = x.{quoted(m)}" for m, b in lk.on)
            joins.append(f"LEFT JOIN {quoted(lk.table)} {a} ON {on}")
            cols += [f"{a}.{quoted(c)} AS {quoted(alias)}" for c, alias in lk.fields]
        where = "WHERE x.test_id = ?" if test_id is not None else ""
        df = self.read_frame(
            f"SELECT {', '.join(cols)} FROM {quoted(name)} x {' '.join(joins)} {where} "
            + order_by(name, "x"),
            [] if test_id is None else [test_id],
        )
        return numbers(df, t)

    def findings_frame(self) -> pd.DataFrame:
        return self.read_frame(
            "SELECT f.*, t.system_id FROM auto_findings f "
            "LEFT JOIN takes t ON t.take_id = f.take_id " + order_by("auto_findings", "f")
        )


__all__ = ["RatingTables"]
