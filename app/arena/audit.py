"""The admin's audit of the arena: the voting-ring flags, and exclusions with a reason that are
kept in the record and can be undone.

Why exclusion and not deletion: a flag is evidence, not proof (:mod:`evaluation.arena.rings`
says why each signal also fits some honest voter). An exclusion keeps every vote and the row
that says who excluded the voter, when and why; the board is recomputed without the voter's
votes; an undo (with its own who, when and why) restores them, and both rows stay. The
excluded voter is not told: its later votes are stored and not counted (a *shadow*
exclusion, as TTS Arena V3's flagged votes), so a ring cannot tell it was caught and move on
to fresh addresses. :meth:`app.arena.battles.Arena.drop_voter` is the other tool: it deletes
the votes and refuses the voter, for good.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.arena.battles import ArenaError, new_id
from app.store import now_iso
from app.store.arena import Exclusion
from evaluation.arena.rings import Flag, RingRules, ring_flags

if TYPE_CHECKING:
    from app.store import ArenaStore

MAX_REASON_CHARS = 500
MIN_REASON_CHARS = 3
MAX_BY_CHARS = 80


def clean_reason(value: Any, what: str = "reason") -> str:
    """The admin's reason, required: 3..500 characters of text (kept as typed, trimmed)."""
    if not isinstance(value, str) or len(value.strip()) < MIN_REASON_CHARS:
        raise ArenaError(f"give a {what} ({MIN_REASON_CHARS} to {MAX_REASON_CHARS} characters)")
    text = " ".join(value.split())
    if len(text) > MAX_REASON_CHARS:
        raise ArenaError(f"the {what} is {len(text)} characters; the limit is {MAX_REASON_CHARS}")
    return text


def admin_name(value: Any, mode: str) -> str:
    """Who acted, as recorded: the name the admin gives (default ``admin``) and how the admin
    was recognised (``password`` or ``localhost``)."""
    name = " ".join(str(value).split())[:MAX_BY_CHARS] if isinstance(value, str) else ""
    return f"{name or 'admin'} ({mode})"


@dataclass(frozen=True)
class ExclusionView:
    """An exclusion as the admin page and the JSON routes show it (the exclude and undo
    answers, and each of the audit's ``exclusions``)."""

    exclusion_id: str
    voter: str
    reason: str
    flags: list[str]
    """The ring flags the voter had when excluded (none: ``[]``)."""
    votes: int
    """The voter's votes when excluded."""
    excluded_by: str
    """The admin's name and how the admin was recognised: ``ana (localhost)``."""
    excluded_at: str
    active: bool
    """False once undone."""
    undone_by: str | None
    undone_at: str | None
    undo_reason: str | None

    @classmethod
    def of(cls, e: Exclusion) -> ExclusionView:
        return cls(
            exclusion_id=e.exclusion_id,
            voter=e.voter,
            reason=e.reason,
            flags=json.loads(e.flags) if e.flags else [],
            votes=e.votes,
            excluded_by=e.excluded_by,
            excluded_at=e.excluded_at,
            active=e.active,
            undone_by=e.undone_by,
            undone_at=e.undone_at,
            undo_reason=e.undo_reason,
        )


@dataclass(frozen=True)
class FlaggedVoter:
    """A voter some flag names: the kinds of its flags, and whether it is excluded now."""

    voter: str
    flags: list[str]
    excluded: bool


@dataclass(frozen=True)
class AuditReport:
    """``GET /ll/arena/api/audit``: the flags' rules, the flags (strongest first within each
    kind), the flagged voters (most kinds first) and every exclusion, undone ones included."""

    rules: RingRules
    flags: list[Flag]
    flagged_voters: list[FlaggedVoter]
    exclusions: list[ExclusionView]


class Audit:
    """Flags and exclusions over one arena's rows (``store.arena``)."""

    def __init__(self, rows: ArenaStore, rules: RingRules | None = None):
        self.rows = rows
        self.rules = rules or RingRules()

    def flags(self) -> list[Flag]:
        """Every flag on the counted votes (excluded voters' included, so the admin still
        sees why they were excluded)."""
        v = self.rows.audit_frame()
        return ring_flags(v[v["counted"] == 1].reset_index(drop=True), self.rules)

    def report(self) -> AuditReport:
        """The flags, each flagged voter's kinds and exclusion, and every exclusion."""
        flags = self.flags()
        exclusions = self.rows.exclusions()
        active = {e.voter for e in exclusions if e.active}
        kinds: dict[str, list[str]] = {}
        for f in flags:
            for v in f.voters:
                mine = kinds.setdefault(v, [])
                if f.kind not in mine:
                    mine.append(f.kind)
        voters = [FlaggedVoter(v, k, v in active) for v, k in kinds.items()]
        return AuditReport(
            rules=self.rules,
            flags=flags,
            flagged_voters=sorted(voters, key=lambda d: (-len(d.flags), d.voter)),
            exclusions=[ExclusionView.of(e) for e in exclusions],
        )

    def exclude(self, voter: str, reason: Any, by: str, now: float | None = None) -> Exclusion:
        """Exclude ``voter`` with a reason (recorded with the flags it has now)."""
        why = clean_reason(reason)
        kinds = sorted({f.kind for f in self.flags() if voter in f.voters})
        now = time.time() if now is None else now
        return self.rows.exclude(
            Exclusion(
                exclusion_id=new_id(),
                voter=voter,
                reason=why,
                flags=json.dumps(kinds) if kinds else None,
                votes=0,
                excluded_by=by,
                excluded_at=now_iso(),
                excluded_ts=now,
            )
        )

    def undo(self, exclusion_id: str, reason: Any, by: str) -> Exclusion:
        """Undo an exclusion (the voter's votes count again); both rows stay in the record."""
        return self.rows.undo_exclusion(
            exclusion_id, by, clean_reason(reason, "reason for the undo"), now_iso()
        )


__all__ = [
    "Audit",
    "AuditReport",
    "ExclusionView",
    "FlaggedVoter",
    "admin_name",
    "clean_reason",
]
