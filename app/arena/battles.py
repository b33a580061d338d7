"""The open arena's rules: battles, which plays count, one vote per battle, and the limits.

A *battle* is one text spoken blind by two systems (backend labels), sides ``a`` and ``b``,
each with a voice drawn from the system's voices (:mod:`app.arena.lineup`). The pair is drawn
by expected information gain under the Bradley–Terry model, with a floor share per system and
a random draw among the near-best pairs (:func:`next_pair`, on
:mod:`evaluation.arena.sampling`). The server streams each side (a stored stream per take id), accepts a *played* report for a stream
only when that stream finished and enough wall-clock time has passed for the audio to have been
heard to its end, and accepts a vote only when both sides were played. One vote per battle: a
double click or a re-send counts once. A vote on a text the voter already voted on is kept
but not counted (``uncounted = 'repeat_text'``): a text counts only on its first use per voter.
The rows are the store's (:mod:`app.store.arena`, through
``store.arena``); this module decides what may be written, and the Bradley–Terry board is
analysis (:mod:`evaluation.arena`).

Who votes (*the voter*): a battle's owner is a browser session (the visitor's one identity,
:mod:`app.web.identity`, a free cookie), so limits are not counted per owner but per
**voter**, a key that costs something: the Space's Hugging Face login where it is configured,
else the client's network address (an IPv6 /64), as the app resolves it (:mod:`app.web.guard`).
Only its keyed hash (:meth:`Arena.voter_hash`, with a random salt kept in the DB) is stored,
with every battle and vote, so the admin can drop everything a voter did later
(:meth:`Arena.drop_voter`; a dropped voter's later votes are not counted). Per voter:
``battles_per_minute`` and ``votes_per_hour`` / ``votes_per_day``. The global battle budget
keeps a *reserve*: a voter who already used its fair share of the last minute (the budget
divided by the voters active in it) may use only ``1 - newcomer_reserve`` of the budget, so a
few busy clients cannot lock new visitors out.

Every refusal is an :class:`ArenaError` and also the kind of the one error tree
(:mod:`backends.errors`) that gives it its HTTP status: ``reason`` is the word the page
branches on, ``extra`` the facts sent with it (``retry_after_s``, the battle).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from app.arena.lineup import text_key
from app.store import ArenaStore, ArenaStream, ArenaVote, BattleRecord, BattleWindow
from backends import errors
from backends.base import clean_text
from evaluation.arena.sampling import (
    PairChoice,
    SamplingRules,
    choose_pair,
    posterior,
    tally_of,
    with_pending,
)

if TYPE_CHECKING:
    import pandas as pd

SIDES = ("a", "b")
Choice = Literal["a", "b", "tie", "both_bad"]
"""``a`` / ``b`` = that side is better; ``tie`` = equally good; ``both_bad``."""
CHOICES: tuple[str, ...] = get_args(Choice)
ID_RE = re.compile(r"^[0-9a-f]{32}$")
WINDOW_S = 60.0
"""The battle limits count the last minute."""
PENDING_S = 300.0
"""Battles of the last 5 minutes without a vote are votes on their way (for the pair choice)."""
REPEAT_TEXT = "repeat_text"
"""Why a vote is kept but not counted: the voter had already voted on this text."""


class ArenaError(errors.InvalidRequest):
    """A request the arena refuses, with a message meant for the visitor (400 unless the
    subclass is also a more precise kind of the error tree)."""


class UnknownBattle(ArenaError, errors.NotFound):
    reason = "unknown_battle"


class NotYours(ArenaError, errors.Forbidden):
    reason = "not_yours"


class NotPlayed(ArenaError, errors.Conflict):
    reason = "not_played"


class StillStreaming(NotPlayed):
    """The stream's end is not recorded yet (it is written just after its last frame)."""


class AlreadyVoted(ArenaError, errors.Conflict):
    reason = "already_voted"


class RateLimited(ArenaError, errors.TooMany):
    reason = "rate_limited"


class LoginRequired(ArenaError, errors.LoginRequired):
    reason = "login_required"


class VoterDropped(ArenaError, errors.Forbidden):
    reason = "voter_dropped"


def new_id() -> str:
    return uuid.uuid4().hex


def check_id(value: Any, what: str = "battle id") -> str:
    s = str(value or "")
    if not ID_RE.match(s):
        raise UnknownBattle(f"malformed {what}")
    return s


# --------------------------------------------------------------------------- what a page sees


@dataclass(frozen=True)
class PlayedSides:
    """Whether each side was accepted as played to its end."""

    a: bool
    b: bool


@dataclass(frozen=True)
class SideSystems:
    """Each side's system, shown once the vote is in."""

    a: str
    b: str


@dataclass(frozen=True)
class BattleView:
    """What the owner's page may see of a battle (``GET /ll/arena/api/battles/{id}`` and the
    ``/ll/ws`` replies): the system names only once the vote is in, so ``systems`` is left
    out of the JSON before (:meth:`as_json`), never sent as null."""

    battle_id: str
    text: str
    language: str | None
    """The text's language (None on a battle stored before languages were)."""
    played: PlayedSides
    voted: Choice | None
    """The choice once voted, else None."""
    systems: SideSystems | None = None
    """Absent until the vote is in."""

    @classmethod
    def of(cls, bt: BattleRecord) -> BattleView:
        return cls(**view_fields(bt))

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        if d.get("systems") is None:
            d.pop("systems", None)
        return d


def view_fields(bt: BattleRecord) -> dict[str, Any]:
    """:class:`BattleView`'s fields of ``bt``."""
    return {
        "battle_id": bt.battle_id,
        "text": bt.text,
        "language": bt.language,
        "played": PlayedSides(bt.played_a_ts is not None, bt.played_b_ts is not None),
        "voted": bt.voted,
        "systems": None if bt.voted is None else SideSystems(bt.system_a, bt.system_b),
    }


@dataclass(frozen=True)
class VoteView(BattleView):
    """The answer to a vote: the battle with its systems, the choice that stands, and whether
    this request stored it (``counted``: False for a re-sent identical vote)."""

    systems: SideSystems = field()  # required here (a bare annotation would inherit None)
    choice: Choice
    counted: bool
    """True when this request stored the vote; False for a re-send of the same choice."""

    @classmethod
    def of_vote(cls, bt: BattleRecord, created: bool) -> VoteView:
        return cls(**view_fields(bt), choice=bt.voted, counted=created)


def owner_view(bt: BattleRecord) -> dict[str, Any]:
    """What the owner's page may see of a battle, as JSON (:class:`BattleView`)."""
    return BattleView.of(bt).as_json()


@dataclass(frozen=True)
class Limits:
    battles_per_minute: int = 10
    """Per voter (see the module doc: a login or a network address, not a cookie)."""
    global_battles_per_minute: int = 120
    """All visitors together: bounds what the public page can make the backends do."""
    newcomer_reserve: float = 0.25
    """Share of the global budget kept for voters under their fair share of the last minute."""
    votes_per_hour: int = 30
    """Per voter; each vote already costs listening to both sides to their end."""
    votes_per_day: int = 150
    streams_per_side: int = 3
    min_chars: int = 2
    max_chars: int = 300
    play_slack_s: float = 0.3
    """How much earlier than the audio's duration after its first chunk a play may be reported
    (network and output latency). It bounds what a scripted client gains by lying."""

    def check_battle(self, w: BattleWindow, now: float) -> None:
        """Refuse a new battle over the voter's or everyone's budget of the last minute."""
        if w.voter_dropped:
            raise VoterDropped("your votes are no longer counted on this arena")
        budget = self.global_battles_per_minute
        shared = max(1, math.floor(budget * (1.0 - self.newcomer_reserve)))
        fair = budget / (w.active_voters + (0 if w.mine else 1))
        if w.mine and w.mine >= fair:
            budget = shared  # over its fair share: only the shared part is open to it
        for count, oldest, limit, why in (
            (
                w.mine,
                w.mine_oldest_ts,
                self.battles_per_minute,
                "Slow down: at most {n} battles per minute per visitor.",
            ),
            (
                w.total,
                w.total_oldest_ts,
                budget,
                "The arena is busy (more than {n} battles in the last minute).",
            ),
        ):
            if count >= limit:
                wait = max(1, math.ceil((oldest or now) + WINDOW_S - now))
                raise RateLimited(
                    f"{why.format(n=limit)} Try again in {wait} s.", retry_after_s=wait
                )

    def check_streams(self, side: str, streamed: int) -> None:
        if streamed >= self.streams_per_side:
            raise RateLimited(
                f"side {side.upper()} was already streamed {streamed} times in this battle "
                "(use Replay to hear it again, or start a new battle)"
            )


@dataclass(frozen=True)
class Draw:
    """What a new battle may be drawn from: the systems, the pairs that may meet (a mask: both
    speak the text's language), each system's voices, and the sampling rules. For a battle
    without a text, ``prompts`` (per language) and ``spoken`` (per system) give it a prompt
    in a language both drawn systems speak."""

    systems: list[str]
    allowed: np.ndarray | None = None
    voices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rules: SamplingRules = field(default_factory=SamplingRules)
    language: str | None = None
    prompts: dict[str, list[str]] = field(default_factory=dict)
    spoken: dict[str, set[str]] = field(default_factory=dict)

    def prompt_for(self, a: str, b: str, rng: np.random.Generator) -> tuple[str, str]:
        """A prompt and its language, in a language both ``a`` and ``b`` speak."""
        both = sorted(self.spoken.get(a, set()) & self.spoken.get(b, set()) & set(self.prompts))
        if not both:
            raise ArenaError("no prompt in a language both systems speak: type a text instead")
        lang = both[int(rng.integers(len(both)))]
        texts = self.prompts[lang]
        return texts[int(rng.integers(len(texts)))], lang


def next_pair(rows: ArenaStore, draw: Draw, rng: np.random.Generator, now: float) -> PairChoice:
    """The next battle's two systems (side A first): expected information gain on the counted
    votes, with the battles of the last :data:`PENDING_S` not yet voted as votes on their way."""
    if len(draw.systems) < 2:
        raise ArenaError("the arena needs at least two systems (configure two backends)")
    tally = tally_of(rows.tally())
    post = posterior(draw.systems, tally)
    pending = {}
    for a, b, n in rows.pending_pairs(now - PENDING_S):
        key = (min(a, b), max(a, b))
        pending[key] = pending.get(key, 0) + n
    try:
        return choose_pair(with_pending(post, pending), tally, rng, draw.rules, draw.allowed)
    except ValueError as e:
        raise ArenaError(str(e)) from None


def counts_first_use(earlier: int) -> tuple[bool, str | None]:
    """A vote counts only on the voter's first vote on its text (``earlier``: votes on it)."""
    return (True, None) if earlier == 0 else (False, REPEAT_TEXT)


def text_hash(text: str) -> str:
    """The stored key of a text for the first-use rule (:func:`app.arena.lineup.text_key`)."""
    return hashlib.sha256(text_key(text).encode()).hexdigest()[:32]


def clean_battle_text(text: Any, limits: Limits) -> str:
    if not isinstance(text, str):
        raise ArenaError("the text must be a string")
    t = clean_text(text[: limits.max_chars * 4])
    if len(t) < limits.min_chars:
        raise ArenaError("type a text to speak (or draw a random prompt)")
    if len(t) > limits.max_chars:
        raise ArenaError(
            f"the text is {len(t)} characters; the arena's limit is {limits.max_chars}"
        )
    return t


def check_play(
    stream: ArenaStream | None, side: str, played_ms: Any, now: float, slack: float
) -> float:
    """The played position in ms, if a report that ``stream`` (None: never streamed to this
    side) played to its end is plausible; else the refusal the page shows."""
    S = side.upper()
    if stream is None:
        raise NotPlayed(f"side {S} was not streamed to you with that take")
    if stream.status == "streaming":
        raise StillStreaming(f"side {S} is still streaming")
    earliest, duration_s = stream.earliest_end_ts, stream.duration_s
    if stream.status != "ok" or earliest is None:
        raise NotPlayed(f"side {S}'s stream did not complete ({stream.status}); play it again")
    if stream.superseded_ts is not None and stream.superseded_ts < earliest - slack:
        raise NotPlayed(f"side {S} was interrupted before its end; play it again")
    try:
        ms = float(played_ms)
    except (TypeError, ValueError):
        raise ArenaError("played_ms must be a number") from None
    if not ms >= duration_s * 1000.0 - slack * 1000.0:
        raise NotPlayed(
            f"side {S} played {ms / 1000:.1f} s of {duration_s:.1f} s; listen to the end"
        )
    if now < earliest - slack:
        raise NotPlayed(
            f"side {S} cannot have finished playing yet "
            f"({earliest - now:.1f} s of audio still to come)"
        )
    return ms


# --------------------------------------------------------------------------- the arena


class Arena:
    """Battles and votes in a store (``store.arena``, :class:`app.store.ArenaStore`).
    Thread-safe: the store gives each thread its connection, and every check that must not
    race its write runs in the write's transaction."""

    def __init__(self, store: Any, limits: Limits | None = None):
        self.rows: ArenaStore = store.arena
        self.limits = limits or Limits()
        self._voter_key = bytes.fromhex(self.rows.voter_salt(secrets.token_hex(32)))

    # -- battles

    def new_battle(
        self,
        owner: str,
        text: str | None,
        draw: Draw | list[str],
        rng: np.random.Generator,
        *,
        text_source: str = "typed",
        now: float | None = None,
        voter: str | None = None,
        network: str | None = None,
    ) -> BattleRecord:
        """Check the rate limits, draw the pair (:func:`next_pair`) and a voice per side, store
        the battle (one transaction, so two concurrent requests cannot both slip under the
        limit). ``draw``: a :class:`Draw`, or just the systems. ``voter``: the stored voter
        hash (:meth:`voter_hash`); the owner's when not given (tests, one-user tools).
        ``text`` None: a prompt in a language both drawn systems speak (:meth:`Draw.prompt_for`)."""
        now = time.time() if now is None else now
        voter = voter or owner
        draw = draw if isinstance(draw, Draw) else Draw(list(draw))
        pc = next_pair(self.rows, draw, rng, now)
        language = draw.language
        if text is None:
            text, language = draw.prompt_for(pc.a, pc.b, rng)
            text_source = "prompt"
        va, vb = (draw.voices.get(s, ()) for s in (pc.a, pc.b))
        rec = BattleRecord(
            new_id(),
            owner,
            text,
            text_source,
            pc.a,
            pc.b,
            now,
            language=language,
            voice_a=str(va[int(rng.integers(len(va)))]) if va else None,
            voice_b=str(vb[int(rng.integers(len(vb)))]) if vb else None,
            text_key=text_hash(text),
            network=network,
            pair_why=pc.why,
        )
        self.rows.add_battle(
            rec, voter, lambda w: self.limits.check_battle(w, now), window_s=WINDOW_S
        )
        return rec

    def get(self, battle_id: Any, owner: str | None) -> BattleRecord:
        """The battle, if ``owner`` made it; another visitor's battle is refused."""
        r = self.rows.battle(check_id(battle_id))
        if r is None:
            raise UnknownBattle("no such battle (it may have been made on another server)")
        if owner is None or r.owner != owner:
            raise NotYours("this battle belongs to another visitor's session")
        return r

    # -- streams and plays

    def start_stream(
        self,
        battle: BattleRecord,
        side: str,
        take_id: str,
        ws_session: str,
        now: float | None = None,
    ) -> None:
        """Record a stream of ``side``. The player plays one stream at a time, so every earlier
        stream of this page that was not yet reported played is *superseded* now: a play
        report for it counts only if it could have ended before this moment."""
        now = time.time() if now is None else now
        if side not in SIDES:
            raise ArenaError("side must be 'a' or 'b'")
        self.rows.add_stream(
            battle.battle_id,
            side,
            take_id,
            ws_session,
            now,
            lambda n: self.limits.check_streams(side, n),
        )

    def finish_stream(
        self,
        take_id: str,
        status: str,
        duration_s: float | None = None,
        first_audio_ts: float | None = None,
    ) -> None:
        """The stream ended: ``ok`` (complete), ``error`` or ``cancelled``. For a complete one,
        the earliest moment its audio can have been heard to the end is stored."""
        earliest = (
            None
            if status != "ok" or duration_s is None or first_audio_ts is None
            else first_audio_ts + duration_s
        )
        self.rows.finish_stream(take_id, status, duration_s, earliest)

    def played(
        self,
        battle_id: Any,
        owner: str | None,
        side: Any,
        take_id: Any,
        played_ms: Any,
        now: float | None = None,
    ) -> BattleRecord:
        """The page reports that ``take_id`` (a stream of ``side``) played to its end.

        Accepted only if the server streamed that take for this battle's side, the stream was
        complete, it was not replaced before it could have ended, the reported position covers
        the audio, and its duration has elapsed since its first chunk was sent.
        """
        now = time.time() if now is None else now
        bt = self.get(battle_id, owner)
        if side not in SIDES:
            raise ArenaError("side must be 'a' or 'b'")
        tid = str(take_id or "")[:64]
        stream = self.rows.stream(tid, bt.battle_id, side)
        ms = check_play(stream, side, played_ms, now, self.limits.play_slack_s)
        self.rows.mark_played(tid, bt.battle_id, side, now, ms)
        return self.get(bt.battle_id, owner)

    # -- votes

    def vote(
        self,
        battle_id: Any,
        owner: str | None,
        choice: Any,
        now: float | None = None,
        voter: str | None = None,
    ) -> tuple[BattleRecord, bool]:
        """Store the battle's one vote; returns (battle with names, created).

        A re-sent identical vote returns ``created=False`` and changes nothing; a different
        choice after the first raises :class:`AlreadyVoted` (the first vote stands). A voter
        over ``votes_per_hour`` / ``votes_per_day`` is refused (429), a dropped voter (403).
        """
        now = time.time() if now is None else now
        if choice not in CHOICES:
            raise ArenaError(f"the vote must be one of {', '.join(CHOICES)}")
        bt = self.get(battle_id, owner)
        voter = voter or owner
        if bt.voted is None:
            self._check_voter(voter, now)  # early, for a clear refusal before the play check
        if bt.voted is None and not bt.both_played:
            missing = [
                s.upper() for s, t in (("a", bt.played_a_ts), ("b", bt.played_b_ts)) if t is None
            ]
            raise NotPlayed(
                "vote refused: listen to both sides to the end first "
                f"(not yet played: {', '.join(missing)})"
            )
        created = self.rows.add_vote(
            ArenaVote(
                battle_id=bt.battle_id,
                choice=choice,
                system_a=bt.system_a,
                system_b=bt.system_b,
                text_source=bt.text_source,
                decision_ms=(now - bt.created_ts) * 1000.0,
                voted_ts=now,
                voter=voter,
            ),
            # again inside the vote's transaction: another replica's vote may have come between
            check=None if bt.voted is not None else lambda: self._check_voter(voter, now),
            counts=counts_first_use,
        )
        bt = self.get(bt.battle_id, owner)
        if not created and bt.voted != choice:
            raise AlreadyVoted(
                f"you already voted {bt.voted!r} in this battle; one vote per battle",
                battle=owner_view(bt),
            )
        return bt, created

    def _check_voter(self, voter: str | None, now: float) -> None:
        """Refuse a dropped voter, or one over its votes per hour or per day."""
        if voter is not None and self.rows.voter_dropped(voter):
            raise VoterDropped("your votes are no longer counted on this arena")
        for span, limit, what in (
            (3600.0, self.limits.votes_per_hour, "hour"),
            (86400.0, self.limits.votes_per_day, "day"),
        ):
            n, oldest = self.rows.votes_since(voter or "", now - span)
            if n >= limit:
                wait = max(1, math.ceil((oldest or now) + span - now))
                raise RateLimited(
                    f"vote not counted: at most {limit} votes per {what} per visitor. "
                    f"Try again in {wait} s.",
                    retry_after_s=wait,
                )

    # -- voters and settings

    def setting(self, key: str) -> str | None:
        """An admin setting kept with the votes, or None when never set."""
        return self.rows.setting(key)

    def set_setting(self, key: str, value: str | None) -> None:
        """Set (or with None, clear back to the deployment's default) an admin setting."""
        self.rows.set_setting(key, value)

    def voter_hash(self, kind: str, key: str) -> str:
        """``kind:<keyed hash>`` of a voter key (``hf`` user name, ``ip`` address or /64):
        the same voter gets the same hash on this DB, and the DB never holds the address."""
        digest = hmac.new(self._voter_key, f"{kind}:{key}".encode(), hashlib.sha256).hexdigest()
        return f"{kind}:{digest[:24]}"

    def drop_voter(self, voter: str) -> int:
        """Delete every vote of ``voter`` and refuse its later battles and votes; returns the
        number of votes dropped (the board recomputes on its next read)."""
        return self.rows.drop_voter(voter)

    def voters_frame(self) -> pd.DataFrame:
        """Per voter: votes, first and last vote (what the admin looks at to drop)."""
        return self.rows.voters_frame()

    # -- results

    def votes_frame(self) -> pd.DataFrame:
        """One row per vote (see :meth:`app.store.ArenaStore.votes_frame`)."""
        return self.rows.votes_frame()

    def counted_frame(self) -> pd.DataFrame:
        """The votes the board counts: first use of their text, voter not excluded."""
        v = self.rows.votes_frame()
        return v[(v["counted"] == 1) & (v["excluded"] == 0)].reset_index(drop=True)

    def vote_count(self) -> int:
        return self.rows.vote_count()
