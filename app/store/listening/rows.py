"""The listening tables' own typed rows: a test, a stimulus, and how a rater's token is kept.

Why typed rows: the store reads a test's row in several places (its copy, its settings, its
results); a dataclass says once what the row holds, where ``row["..."]`` lookups each repeat
it. The callers in ``app/listening/`` still get the dictionaries they use
(:meth:`TestRow.as_dict`); typed rows for them come later.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

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


__all__ = ["STATUSES", "TEST_COLUMNS", "Stimulus", "TestRow", "token_hash"]
