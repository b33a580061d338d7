"""Rating: the item the page gets, the stimuli it plays, the play events and the vote.

Why the server gates the vote: a vote is refused unless play events accepted by the server
cover the item (the kind says how much: MOS and glitch the whole clip; A/B >= 3 s of each
side, or all of a shorter clip; MUSHRA the same for every stimulus on the screen). A play
event counts only for a stimulus this server streamed to that rater, and never for more audio
than the wall-clock time since the server started sending it. The answer itself is the kind's
to check (:meth:`TestKind.read_vote`); it is stored with the kind's rows in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.listening.flow import Denied, NotYet, check_id, design_of
from app.listening.screening import Screening
from app.player.blind import TARGET_LUFS, CommonFormat
from app.store import Assignment, now_iso
from app.store.listening import RaterSession, TestRow
from backends.errors import InvalidRequest
from evaluation.listening.kinds import kind_of
from evaluation.listening.kinds.base import PLAYED_SHARE, VoteContext

CLOCK_SLACK_MS = 400.0


@dataclass
class Item:
    """What the page may know about an item: no system names, roles or expected answers."""

    assignment_id: str
    position: int
    kind: str
    slots: int
    labels: list[str]
    need_ms: list[float]
    """Playback per slot the server needs before it takes a vote (listen-gating)."""
    has_reference: bool = False
    text: str | None = None
    """The prompt's text, when the test shows it (``show_text``); the page sets it as text."""


@dataclass(frozen=True)
class Playing:
    """What the server plays for one slot of a rater's item (:meth:`Rating.stimulus`): never
    sent to the page, which knows the item only by its assignment and slot."""

    test: TestRow
    rater_id: str
    assignment: Assignment
    take_id: str
    slots: int
    condition: str
    system_id: str | None
    live_backend: str | None
    """The backend a *live* stimulus is generated on (its system's, from the test)."""
    format: CommonFormat
    target_lufs: float | None


def show_text(test: TestRow) -> bool:
    """Whether the vote page shows the prompt's text (tests made before the option: by type)."""
    v = test.config.get("show_text")
    return bool(v) if v is not None else kind_of(test.kind).show_text


def live_target(config: dict[str, Any]) -> float | None:
    """The loudness a *live* generation is gain-matched to: the test's target, or None (no
    gain) when the test keeps its stimuli's own levels."""
    loud = config.get("loudness") or {}
    if loud.get("normalise") is False:
        return None
    return float(loud.get("target_lufs", TARGET_LUFS))


class Rating(Screening):
    """The item, its stimuli and play events, the listen gate and the vote (a vote needs the
    headphone screen passed: :meth:`Screening.require_screened`)."""

    def item(self, t: TestRow, a: Assignment) -> Item:
        kind = kind_of(t.kind)
        takes = list(a.slots or (a.take_id,))
        n = len(takes)
        need = [round(kind.need_ms(d), 1) for d in self.tests.durations_ms(takes)]
        has_ref = "reference" in (a.meta.get("roles") or [])
        # the text the clip speaks (for check items too, so they look like any other)
        text = self.tests.take_text(takes[0]) if show_text(t) else None
        return Item(a.assignment_id, a.position, t.kind, n, kind.labels(n), need, has_ref, text)

    def stimulus(self, test_id: str, token: str, assignment_id: Any, slot: Any) -> Playing:
        """Which take (and how) to play for this rater's item slot. Raises unless it is theirs."""
        t = self.load_test(test_id)
        r = self.rater(test_id, token)
        self.require_in(r)
        check_id(assignment_id, "assignment id")
        a = self.assignment(test_id, r.rater_id, assignment_id)
        takes = list(a.slots or (a.take_id,))
        if not isinstance(slot, int) or isinstance(slot, bool) or not -1 <= slot < len(takes):
            raise InvalidRequest(f"slot must be 0..{len(takes) - 1} (or -1: the open reference)")
        if slot == -1:  # MUSHRA's open reference: the hidden reference's take, not gated
            roles = a.meta.get("roles") or []
            if "reference" not in roles:
                raise InvalidRequest("this item has no reference")
            slot = roles.index("reference")
        conds = a.meta.get("conditions") or [a.condition] * len(takes)
        systems = a.meta.get("systems") or [None] * len(takes)
        return Playing(
            test=t,
            rater_id=r.rater_id,
            assignment=a,
            take_id=takes[slot],
            slots=len(takes),
            condition=conds[slot] or "as_streamed",
            system_id=systems[slot],
            live_backend=(t.config.get("backends") or {}).get(systems[slot] or ""),
            format=self.common_format(test_id),
            target_lufs=live_target(t.config),
        )

    def common_format(self, test_id: str) -> CommonFormat:
        """The one rate and channel layout every stimulus of the test reaches raters in: the
        highest native rate of its stimuli, stereo iff any is stereo (blind on the wire)."""
        return CommonFormat.of(self.tests.stimulus_formats(test_id))

    def assignment(self, test_id: str, rater_id: str, assignment_id: str) -> Assignment:
        for a in self.store.assignments(test_id, rater_id):
            if a.assignment_id == assignment_id:
                return a
        raise Denied("this item is not one of yours")

    def play_event(
        self,
        test_id: str,
        token: str,
        assignment_id: Any,
        slot: Any,
        played_ms: Any,
        *,
        server_elapsed_ms: float | None,
        take_id: str,
        condition: str,
        duration_ms: float | None = None,
        underruns: Any = 0,
        stall_ms: Any = 0.0,
        sent_ms: float | None = None,
        budget_ms: float | None = None,
    ) -> dict[str, Any]:
        """Record how much of a streamed stimulus the page played, bounded by the server clock
        (``server_elapsed_ms`` since the stream began), by the audio sent (``sent_ms``, given
        while the stream was not sent in full: such a play never counts as complete) and, for
        a MUSHRA screen, by what is left of the screen's wall time (``budget_ms``)."""
        r = self.rater(test_id, token)
        try:
            played = float(played_ms)
            und = int(underruns or 0)
            stall = float(stall_ms or 0.0)
        except (TypeError, ValueError):
            raise InvalidRequest("played_ms, underruns and stall_ms must be numbers") from None
        if not (0 <= played < 3_600_000) or not (0 <= und < 100_000) or not (0 <= stall < 3.6e6):
            raise InvalidRequest("play event out of range")
        if server_elapsed_ms is None:
            raise Denied("no stream of this stimulus was sent to this page")
        accepted = min(played, server_elapsed_ms + CLOCK_SLACK_MS)
        if sent_ms is not None:  # stopped or cancelled before the server sent all of it
            accepted = min(accepted, sent_ms)
        if budget_ms is not None:  # a MUSHRA screen's wall time left (its slack included)
            accepted = min(accepted, budget_ms)
        complete = (
            sent_ms is None and duration_ms is not None and accepted >= PLAYED_SHARE * duration_ms
        )
        self.tests.add_play_event(
            {
                "test_id": test_id,
                "rater_id": r.rater_id,
                "assignment_id": assignment_id,
                "slot": int(slot),
                "take_id": take_id,
                "condition": condition,
                "played_ms": accepted,
                "duration_ms": duration_ms,
                "complete": int(complete),
                "server_elapsed_ms": server_elapsed_ms,
                "underruns": und,
                "stall_ms": stall,
            }
        )
        return {"played_ms": accepted}

    def gate(self, kind: str, a: Assignment, played: dict[int, float]) -> list[str]:
        """What is still missing before a vote is allowed (empty: allowed)."""
        k = kind_of(kind)
        takes = list(a.slots or (a.take_id,))
        missing = []
        for i, d in enumerate(self.tests.durations_ms(takes)):
            need = k.need_ms(d)
            if played.get(i, 0.0) + 1e-6 < need:
                label = k.slot_label(i, len(takes))
                missing.append(f"{label}: {played.get(i, 0.0) / 1000:.1f} of {need / 1000:.1f} s")
        return missing

    def store_vote(self, t: TestRow, r: RaterSession, body: Any) -> tuple[str, bool]:
        """Check one answer against the gate and the kind's rules and store it (idempotent on
        ``answer_id``; one per item): ``(answer_id, stored now)``. Raises on any problem."""
        if not isinstance(body, dict):
            raise InvalidRequest("a vote must be a JSON object")
        if not r.consent_at:
            raise Denied("consent first")
        self.require_screened(t, r)
        test_id, answer_id = t.test_id, check_id(body.get("answer_id"), "answer_id")
        a = self.assignment(
            test_id, r.rater_id, check_id(body.get("assignment_id"), "assignment id")
        )
        kind = t.kind
        missing = self.gate(kind, a, self.tests.played(test_id, r.rater_id, a.assignment_id))
        if missing:
            raise NotYet("listen first: " + "; ".join(missing))
        got = kind_of(kind).read_vote(body, self.vote_context(t, r.rater_id, a, answer_id))
        created = self.tests.answer(
            answer_id,
            test_id,
            r.rater_id,
            a.assignment_id,
            kind,
            got.payload,
            a.condition,
            got.rows,
        )
        return answer_id, created

    def vote_context(self, t: TestRow, rater_id: str, a: Assignment, answer_id: str) -> VoteContext:
        """What the test's kind checks a vote against: the item, the server's play events."""
        tid = t.test_id
        takes = tuple(a.slots or (a.take_id,))
        marks = (
            self.store.mark_count(tid, rater_id, takes[0]) if kind_of(t.kind).counts_marks else 0
        )
        return VoteContext(
            answer_id=answer_id,
            test_id=tid,
            rater_id=rater_id,
            assignment_id=a.assignment_id,
            role=a.role,
            expected=a.expected,
            condition=a.condition,
            takes=takes,
            roles=tuple(a.meta.get("roles") or ()),
            systems=tuple(a.meta.get("systems") or ()),
            prompt_id=a.meta.get("prompt_id"),
            played=self.tests.played(tid, rater_id, a.assignment_id),
            created_at=now_iso(),
            mode=design_of(t).ab_mode,
            marks=marks,
        )


__all__ = ["CLOCK_SLACK_MS", "Item", "Playing", "Rating", "live_target", "show_text"]
