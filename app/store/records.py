"""The store's records: the typed rows that cross the store's edge, and its errors.

Why a module of their own: every engine of the store (SQLite today, PostgreSQL later, issue
#30) reads and writes these same records, and the app builds them without knowing which
engine keeps them. Nothing here touches a database.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from backends.errors import Conflict, ListenlabError, NotFound
from evaluation.listening.kinds import KINDS as TEST_KINDS  # the one registry of test kinds

ROLES = ("item", "gold", "trap", "anchor", "reference")
AB_CHOICES = ("a", "b", "tie")
GLITCH_KINDS = ("click", "gap", "repeat", "wrong_voice", "cut_off", "other")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_id() -> str:
    return uuid.uuid4().hex


class StoreError(ListenlabError):
    """The store cannot be used as asked (e.g. written by a newer listenlab)."""


class AlreadyVoted(Conflict):
    """This rater already answered this item (under another id); the first answer stands."""

    def __init__(self, message: str, existing_id: str):
        super().__init__(message)
        self.existing_id = existing_id


class UnknownItem(NotFound):
    """A referenced take / system / test does not exist in the store."""


@dataclass(frozen=True)
class Written:
    id: str
    created: bool
    """False when the id was already stored: the write was a re-send and changed nothing."""


@dataclass(frozen=True)
class System:
    """A thing under test: backend spec + voice + parameters."""

    system_id: str
    backend: str
    voice: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    text: str
    language: str | None = None
    category: str | None = None
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class Rater:
    rater_id: str
    name: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class ListeningTest:
    test_id: str
    kind: str
    """A registered kind's name (:data:`TEST_KINDS`: the kinds' registry); no default."""
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class Assignment:
    """One item of a rater's playlist. For A/B items, ``take_b_id`` is the second clip."""

    assignment_id: str
    test_id: str
    rater_id: str
    position: int
    take_id: str
    take_b_id: str | None = None
    role: str = "item"
    """``item``, ``gold`` (obvious quality, ``expected`` score) or ``trap`` ("select X")."""
    expected: float | None = None
    created_at: str = field(default_factory=now_iso)
    slots: tuple[str, ...] | None = None
    """(schema v2) Every take of a multi-stimulus item in display order (MUSHRA screens)."""
    condition: str | None = None
    """(schema v2) ``as_streamed``, ``whole`` or ``live``: how the stimulus is played."""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TakeInfo:
    """A stored take's row without its audio and chunks: what a route needs to decide about a
    take (whose it is, how it ended) without reading the audio file."""

    take_id: str
    system_id: str | None
    prompt_id: str | None
    backend: str
    text: str | None
    status: str
    error: str | None
    sample_rate: int
    channels: int
    frames: int
    duration_s: float | None
    total_ms: float | None
    ttfa_ms: float | None
    chunk_count: int | None
    meta: dict[str, Any]
    created_at: str | None


@dataclass(frozen=True)
class TakeTimeline:
    """A complete take's arrival timeline: what the start rule learns a backend's pace from
    (:func:`evaluation.playout.learn`)."""

    take_id: str
    text: str | None
    duration_s: float
    sample_rate: int
    request: dict[str, Any]
    """The take's request (``SpeechRequest.to_dict()``): its speed, voice, format."""
    arrivals: tuple[tuple[float, int], ...]
    """Per chunk, in order: ``(arrival_ms, frames)``."""


@dataclass(frozen=True)
class MosRating:
    rating_id: str
    test_id: str
    rater_id: str
    take_id: str
    score: float
    played_ms: float | None = None
    """How much of the clip the rater's player actually played (for "all played" screening)."""
    role: str | None = None
    """Filled from the rater's assignment for this take when left None (else ``item``)."""
    expected: float | None = None
    created_at: str = field(default_factory=now_iso)
    condition: str | None = None
    """(schema v2) How the clip was played: ``as_streamed``, ``whole`` or ``live``."""
    assignment_id: str | None = None


@dataclass(frozen=True)
class AbVote:
    """A pairwise vote. ``take_a`` is the clip presented first (left)."""

    vote_id: str
    test_id: str
    rater_id: str
    take_a: str
    take_b: str
    choice: str
    """``a``, ``b`` or ``tie``, as presented."""
    cmos: float | None = None
    """-3..+3: how much better B (as presented) is than A; stats re-sign it per system."""
    played_a_ms: float | None = None
    played_b_ms: float | None = None
    system_a: str | None = None
    system_b: str | None = None
    """Filled from the takes when None."""
    created_at: str = field(default_factory=now_iso)
    condition: str | None = None
    assignment_id: str | None = None


@dataclass(frozen=True)
class GlitchReport:
    """A rater's "I heard a glitch here" mark on a take."""

    report_id: str
    take_id: str
    rater_id: str
    position_ms: float
    kind: str | None = None
    """One of :data:`GLITCH_KINDS` or None (the rater did not say)."""
    test_id: str | None = None
    boundary_index: int | None = None
    """Index (into ``Take.boundaries``) of the nearest chunk seam; filled in when None."""
    boundary_ms: float | None = None
    distance_ms: float | None = None
    """``position_ms - boundary_ms`` (negative: the mark is before the seam)."""
    note: str | None = None
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class BattleRecord:
    """An arena battle, the one record the store keeps and the arena's rules
    (:mod:`app.arena.battles`) work on: one text, two systems (sides ``a`` and ``b``), when
    each side was accepted as played, and the vote's choice once voted."""

    battle_id: str
    owner: str
    text: str
    text_source: str
    """``prompt`` (a bundled prompt) or ``typed``."""
    system_a: str
    system_b: str
    created_ts: float
    played_a_ts: float | None = None
    played_b_ts: float | None = None
    voted: str | None = None
    """The choice, once voted."""
    language: str | None = None
    """The text's language (a prompt's, or the arena's default for a typed text)."""
    voice_a: str | None = None
    """The voice side A speaks with (None: the system's default voice)."""
    voice_b: str | None = None
    text_key: str | None = None
    """The text, normalised, as the first-use rule compares it (hashed with the voter key)."""
    network: str | None = None
    """A keyed hash of the client's network (IPv4 /24, IPv6 /48), for the ring flags."""
    pair_why: str | None = None
    """Why the pair was drawn: ``gain``, ``floor``, ``explore`` or ``only``."""

    def system(self, side: str) -> str:
        return self.system_a if side == "a" else self.system_b

    def voice(self, side: str) -> str | None:
        return self.voice_a if side == "a" else self.voice_b

    @property
    def both_played(self) -> bool:
        return self.played_a_ts is not None and self.played_b_ts is not None


@dataclass(frozen=True)
class BattleWindow:
    """The arena's battles of the last window (a minute), as its rate limits need them; read
    in the transaction that stores the next battle, so two requests cannot both slip in."""

    mine: int
    """Battles of this voter in the window."""
    mine_oldest_ts: float | None
    total: int
    """Battles of everyone in the window."""
    total_oldest_ts: float | None
    active_voters: int
    voter_dropped: bool
    """The admin dropped this voter: nothing it does counts any more."""


@dataclass(frozen=True)
class ArenaStream:
    """One stream of one side of a battle, as the play checks need it."""

    take_id: str
    battle_id: str
    side: str
    status: str
    """``streaming`` until it ends, then ``ok``, ``error`` or ``cancelled``."""
    duration_s: float | None
    earliest_end_ts: float | None
    """The first moment its audio can have been heard to the end (complete streams only)."""
    superseded_ts: float | None
    """When the same page asked for another stream before reporting this one played."""


@dataclass(frozen=True)
class ArenaVote:
    battle_id: str
    choice: str
    """``a``, ``b``, ``tie`` or ``both_bad``."""
    system_a: str
    system_b: str
    text_source: str
    decision_ms: float | None
    voted_ts: float
    voter: str | None
    created_at: str = field(default_factory=now_iso)
    counted: bool = True
    """False: kept but not counted on the board (``uncounted`` says why)."""
    uncounted: str | None = None
    """``repeat_text``: the voter had already voted on this text."""


def nearest_boundary(
    boundaries_ms: Sequence[float], position_ms: float
) -> tuple[int, float, float] | None:
    """``(index, boundary_ms, position_ms - boundary_ms)`` of the closest seam, or None."""
    if not len(boundaries_ms):
        return None
    i = bisect.bisect_left(boundaries_ms, position_ms)
    cands = [j for j in (i - 1, i) if 0 <= j < len(boundaries_ms)]
    j = min(cands, key=lambda k: abs(boundaries_ms[k] - position_ms))
    return j, float(boundaries_ms[j]), float(position_ms - boundaries_ms[j])


__all__ = [
    "AB_CHOICES",
    "GLITCH_KINDS",
    "ROLES",
    "TEST_KINDS",
    "AbVote",
    "AlreadyVoted",
    "ArenaStream",
    "ArenaVote",
    "Assignment",
    "BattleRecord",
    "BattleWindow",
    "GlitchReport",
    "ListeningTest",
    "MosRating",
    "Prompt",
    "Rater",
    "StoreError",
    "System",
    "TakeInfo",
    "TakeTimeline",
    "UnknownItem",
    "Written",
    "new_id",
    "now_iso",
    "nearest_boundary",
]
