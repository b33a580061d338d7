"""The listening tables' typed rows, as the store hands them out: a test (and a test's line
in the list), a rater's session, an answer, a headphone-screen trial, a setting change, a
stimulus; and how a rater's token is kept.

Why typed rows at the store's edge: the rater flow, the admin page, the export and the CLI read
these rows in many places; a dataclass says once what a row holds (a typo is an
``AttributeError`` where it is made, not a ``KeyError`` at the first request that reaches it),
where ``row["..."]`` lookups each repeat it. A row becomes a dictionary only where it leaves
as JSON (:meth:`TestRow.as_dict`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from evaluation.loudness import TARGET_LUFS

STATUSES = ("draft", "open", "closed")


@dataclass(frozen=True)
class TestRow:
    """A ``tests`` row, its config parsed (the fields are the table's columns, in order)."""

    __test__ = False  # not a pytest class

    test_id: str
    kind: str
    name: str | None
    config: dict[str, Any]
    created_at: str | None
    status: str | None
    updated_at: str | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> TestRow:
        values = dict(zip(TEST_COLUMNS, row, strict=True))
        values["config"] = json.loads(values["config"]) if values["config"] else {}
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        """The row as the callers read it (``get_test``), columns in the table's order."""
        return asdict(self)


TEST_COLUMNS = tuple(f.name for f in fields(TestRow))

R = TypeVar("R")


def row_of(cls: type[R], row: dict[str, Any]) -> R:
    """A typed row from a query's columns (the row's own fields; other columns are ignored,
    so a ``SELECT *`` keeps working after a column is added)."""
    return cls(**{f.name: row.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class TestSummary:
    """A test's line in the list (the Tests tab, ``listenlab test list``)."""

    __test__ = False  # not a pytest class

    test_id: str
    kind: str
    name: str | None
    status: str | None
    created_at: str | None
    raters: int
    answers: int
    stimuli: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RaterSession:
    """A rater's session in one test (a ``test_raters`` row without its token's hash)."""

    test_id: str
    rater_id: str
    seq: int
    crowd_id: str | None
    crowd_source: str | None
    consent_at: str | None
    headphone: str | None
    """JSON: the headphone screen's result (None: not done)."""
    headphone_pass: int | None
    completion_code: str | None
    finished_at: str | None
    created_at: str | None
    study_id: str | None
    session_id: str | None
    design_row: int | None
    seen_at: float | None
    screened_out_at: str | None
    screenout_code: str | None
    familiar: str | None
    """JSON: when each familiarisation clip was first sent (Unix seconds)."""
    familiarised_at: str | None
    questionnaire: str | None

    @property
    def headphone_result(self) -> dict[str, Any] | None:
        return json.loads(self.headphone) if self.headphone else None

    @property
    def row(self) -> int:
        """The design row the rater plays (its join order for raters before rows were kept)."""
        return int(self.seq if self.design_row is None else self.design_row)


@dataclass(frozen=True)
class AnswerRow:
    """One stored answer to one item (an ``answers`` row, its payload parsed)."""

    answer_id: str
    test_id: str
    rater_id: str
    assignment_id: str
    kind: str
    payload: dict[str, Any]
    condition: str | None
    created_at: str | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> AnswerRow:
        return row_of(cls, {**row, "payload": json.loads(row["payload"] or "{}")})


@dataclass(frozen=True)
class ScreenRow:
    """One headphone-screen trial of a rater, its answer key (server-side only) and pick."""

    test_id: str
    rater_id: str
    n: int
    kind: str
    key: str
    """JSON: the answer key (:class:`evaluation.listening.screening.ScreenTrial`)."""
    duration_ms: float
    fetched_at: float | None
    fetches: int
    answer: int | None
    answered_at: str | None


@dataclass(frozen=True)
class SettingChange:
    """A crowd setting of a test changed (the ``test_changes`` row)."""

    field: str
    old_value: str | None
    new_value: str | None
    changed_at: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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


__all__ = [
    "STATUSES",
    "TEST_COLUMNS",
    "AnswerRow",
    "RaterSession",
    "ScreenRow",
    "SettingChange",
    "Stimulus",
    "TestRow",
    "TestSummary",
    "row_of",
    "token_hash",
]
