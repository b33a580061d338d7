"""The arena's HTTP routes: module-level routers that read the app's arena from
``request.app.state.arena`` (put there by :func:`app.arena.install`).

A refusal is an :class:`app.arena.battles.ArenaError`, answered by the one JSON error handler
(:func:`app.web.errors.error_response`) with their class's HTTP status. A JSON body is parsed
with the app's bounded parser (:func:`app.web.inputs.loads_limited`): nesting deeper than
:data:`app.web.inputs.MAX_JSON_DEPTH` is a 400 with that reason, never a 500.

Public (:data:`router`): ``POST /ll/arena/session``, ``GET /ll/arena/api/prompt``,
``GET /ll/arena/api/leaderboard``, ``GET /ll/arena/api/battles/{id}``,
``POST /ll/arena/api/battles/{id}/vote`` {choice}. Admin only (:data:`admin`):
``GET /ll/arena/api/votes.csv``, ``GET /ll/arena/api/voters``,
``POST /ll/arena/api/voters/{voter}/drop``, ``GET``/``POST /ll/arena/api/settings`` (the
listing threshold, kept in the DB), ``GET /ll/arena/api/audit`` (the ring flags and every
exclusion), ``POST /ll/arena/api/voters/{voter}/exclude`` {reason, by} and
``POST /ll/arena/api/exclusions/{id}/undo`` {reason, by}.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, Field

from app.arena.audit import (
    MAX_REASON_CHARS,
    MIN_REASON_CHARS,
    AuditReport,
    ExclusionView,
    admin_name,
)
from app.arena.battles import (
    CHOICES,
    ID_RE,
    AlreadyVoted,
    ArenaError,
    BattleView,
    LoginRequired,
    NotPlayed,
    NotYours,
    RateLimited,
    UnknownBattle,
    VoterDropped,
    VoteView,
)
from app.arena.lineup import Prompt
from app.arena.service import MAX_MIN_VOTES, ArenaBoard, ArenaService, owner_of
from app.web.admin import TooManyTries, policy, require_admin
from app.web.identity import COOKIE, owner_for_token
from app.web.inputs import JsonTooDeep, loads_limited
from app.web.openapi import DeclaredRoute, JsonBody, errors, media, ok
from backends.errors import Conflict, Forbidden, NotFound

VOTER_RE = re.compile(r"^(ip|hf):[0-9a-f]{24}$")


def arena_service(request: Request) -> ArenaService:
    """FastAPI dependency: the app's arena (set by :func:`app.arena.install`)."""
    return request.app.state.arena


Service = Annotated[ArenaService, Depends(arena_service)]
router = APIRouter(route_class=DeclaredRoute)
admin = APIRouter(
    route_class=DeclaredRoute,
    dependencies=[Depends(require_admin)],
    responses=errors(ArenaError, Forbidden, NotFound, Conflict, TooManyTries),
)
BATTLE = errors(UnknownBattle, NotYours)
VOTE = errors(ArenaError, UnknownBattle, NotYours, VoterDropped, NotPlayed, AlreadyVoted)
VOTE |= errors(RateLimited, LoginRequired)


async def json_body(request: Request) -> Any:
    """The request's JSON, or None when it is not JSON; too deep a nesting is refused (400)."""
    raw = await request.body()
    try:
        return loads_limited(raw)
    except JsonTooDeep as e:
        raise ArenaError(str(e)) from None
    except ValueError:  # not JSON (UnicodeDecodeError is one too)
        return None


class ArenaJson(JsonBody):
    """An arena body: ``model`` declared in ``/openapi.json``; the JSON object as sent goes
    to the service, which checks its fields with the visitor's messages. Not an object (or
    not JSON, or without a ``needs`` key): ``hint``, a 400 that says what to send."""

    def __init__(self, model: Any, hint: str, needs: str | None = None):
        super().__init__(model)
        self.hint, self.needs = hint, needs

    async def __call__(self, request: Request) -> dict[str, Any]:
        body = await json_body(request)
        if not isinstance(body, dict) or (self.needs is not None and self.needs not in body):
            raise ArenaError(self.hint)
        return body


class Vote(BaseModel):
    """``POST /ll/arena/api/battles/{id}/vote``: which side was better."""

    choice: Literal[CHOICES]  # type: ignore[valid-type]


class Reason(BaseModel):
    """An exclusion or its undo: why (kept, trimmed) and who (default ``admin``)."""

    reason: str = Field(min_length=MIN_REASON_CHARS, max_length=MAX_REASON_CHARS)
    by: str | None = None


class Settings(BaseModel):
    """``POST /ll/arena/api/settings``: the listing threshold; null: the default."""

    min_votes: int | None = Field(ge=0, le=MAX_MIN_VOTES)


VoteBody = Depends(ArenaJson(Vote, 'send JSON {"choice": "a"|"b"|"tie"|"both_bad"}'))
ReasonBody = Depends(ArenaJson(Reason, 'send {"reason": "why", "by": "your name"}'))
SettingsBody = Depends(
    ArenaJson(Settings, 'send {"min_votes": N} (or null for the default)', "min_votes")
)


@dataclass(frozen=True)
class ArenaSession:
    """``POST /ll/arena/session``: how the arena is set up, for the page's first call."""

    systems: int
    """How many systems are configured."""
    ready: bool
    """At least two systems: battles can be made."""
    max_chars: int
    """The longest text a battle takes."""
    battles_per_minute: int
    """New battles a voter may start per minute."""
    new_session: bool
    """True when this answer sets a new identity cookie (the visitor had none, or a bad one)."""


@dataclass(frozen=True)
class ArenaVoter:
    """One voter of ``GET /ll/arena/api/voters`` (a row of the store's voters frame)."""

    voter: str | None
    """``ip:`` or ``hf:`` and a keyed hash; None for votes stored without one."""
    votes: int
    counted: int
    """Votes the board counts (first use of a text, voter not excluded)."""
    first_vote: str
    last_vote: str
    excluded: int
    """1 when the voter is excluded now, else 0."""

    @classmethod
    def of(cls, row: dict[str, Any]) -> ArenaVoter:
        return cls(
            voter=row["voter"],
            votes=int(row["votes"]),
            counted=int(row["counted"]),
            first_vote=str(row["first_vote"]),
            last_vote=str(row["last_vote"]),
            excluded=int(row["excluded"]),
        )


@dataclass(frozen=True)
class DroppedVoter:
    """``POST /ll/arena/api/voters/{voter}/drop``: whose votes were deleted, and how many."""

    voter: str
    votes_dropped: int


@dataclass(frozen=True)
class ListingThreshold:
    """``GET``/``POST /ll/arena/api/settings``: the votes a system needs to be listed (the
    admin's setting, else the deployment's default) and that default."""

    min_votes: int
    default_min_votes: int
    """``LISTENLAB_ARENA_MIN_VOTES``."""


@router.post("/ll/arena/session", response_model=None, responses=ok(ArenaSession))
async def arena_session(request: Request, svc: Service) -> dict[str, Any]:
    """The page's first call: how the arena is set up. The identity cookie comes with this
    answer (as with any other) when the visitor has none yet."""
    cookie = request.cookies.get(COOKIE)
    fresh = cookie is None or owner_of(request) != owner_for_token(cookie)
    return asdict(
        ArenaSession(
            systems=len(svc.systems),
            ready=len(svc.systems) >= 2,
            max_chars=svc.config.limits.max_chars,
            battles_per_minute=svc.config.limits.battles_per_minute,
            new_session=fresh,
        )
    )


@router.get("/ll/arena/api/prompt", response_model=None, responses=ok(Prompt))
async def arena_prompt(svc: Service) -> dict[str, Any]:
    """A prompt for the text box, in a language at least two systems speak."""
    return asdict(svc.random_prompt())


@router.get("/ll/arena/api/leaderboard", response_model=None, responses=ok(ArenaBoard))
async def arena_leaderboard(svc: Service) -> dict[str, Any]:
    return await svc.board()


@router.get(
    "/ll/arena/api/battles/{battle_id}",
    response_model=None,
    responses={**ok(BattleView), **BATTLE},
)
async def arena_battle(battle_id: str, request: Request, svc: Service) -> dict[str, Any]:
    bt = await asyncio.to_thread(svc.arena.get, battle_id, owner_of(request))
    return BattleView.of(bt).as_json()


@router.post(
    "/ll/arena/api/battles/{battle_id}/vote",
    response_model=None,
    responses={**ok(VoteView), **VOTE},
)
async def arena_vote(
    battle_id: str, request: Request, svc: Service, payload: dict = VoteBody
) -> dict[str, Any]:
    return await svc.vote(owner_of(request), battle_id, payload.get("choice"), svc.voter(request))


@admin.get("/ll/arena/api/voters", response_model=None, responses=ok(ArenaVoter, "voters"))
async def arena_voters(svc: Service) -> dict[str, Any]:
    """Votes per voter hash, most first: what the admin looks at before dropping one."""
    df = await asyncio.to_thread(svc.arena.voters_frame)
    return {"voters": [asdict(ArenaVoter.of(r)) for r in df.to_dict(orient="records")]}


@admin.post("/ll/arena/api/voters/{voter}/drop", response_model=None, responses=ok(DroppedVoter))
async def arena_drop_voter(voter: str, svc: Service) -> dict[str, Any]:
    """Delete every vote of a voter and refuse its later ones; the board recomputes."""
    n = await asyncio.to_thread(svc.arena.drop_voter, check_voter(voter))
    return asdict(DroppedVoter(voter, n))


def check_voter(voter: str) -> str:
    if not VOTER_RE.match(voter):
        raise ArenaError("a voter is 'ip:' or 'hf:' and 24 hex digits")
    return voter


@admin.get("/ll/arena/api/audit", response_model=None, responses=ok(AuditReport))
async def arena_audit(svc: Service) -> dict[str, Any]:
    """The voting-ring flags (with their rules) and every exclusion, undone ones included."""
    return asdict(await asyncio.to_thread(svc.audit.report))


@admin.post(
    "/ll/arena/api/voters/{voter}/exclude", response_model=None, responses=ok(ExclusionView)
)
async def arena_exclude(
    voter: str, request: Request, svc: Service, body: dict = ReasonBody
) -> dict[str, Any]:
    """Exclude a voter with a reason (``{"reason": ..., "by": name}``): its votes are kept
    and no longer counted; the board recomputes. A second exclusion of the same voter: 409."""
    by = admin_name(body.get("by"), policy(request).mode)
    e = await asyncio.to_thread(svc.audit.exclude, check_voter(voter), body.get("reason"), by)
    return asdict(ExclusionView.of(e))


@admin.post(
    "/ll/arena/api/exclusions/{exclusion_id}/undo",
    response_model=None,
    responses=ok(ExclusionView),
)
async def arena_undo(
    exclusion_id: str, request: Request, svc: Service, body: dict = ReasonBody
) -> dict[str, Any]:
    """Undo an exclusion (``{"reason": ..., "by": name}``): the votes count again; the
    exclusion's row stays, with the undo's who, when and why."""
    by = admin_name(body.get("by"), policy(request).mode)
    if not ID_RE.match(exclusion_id):
        raise ArenaError("an exclusion id is 32 hex digits")
    e = await asyncio.to_thread(svc.audit.undo, exclusion_id, body.get("reason"), by)
    return asdict(ExclusionView.of(e))


async def threshold(svc: ArenaService) -> dict[str, Any]:
    """The listing threshold as both settings routes answer it."""
    now = await asyncio.to_thread(svc.min_votes)
    return asdict(ListingThreshold(min_votes=now, default_min_votes=svc.config.min_votes))


@admin.get("/ll/arena/api/settings", response_model=None, responses=ok(ListingThreshold))
async def arena_settings(svc: Service) -> dict[str, Any]:
    """The admin's knobs: the listing threshold (and the deployment's default)."""
    return await threshold(svc)


@admin.post("/ll/arena/api/settings", response_model=None, responses=ok(ListingThreshold))
async def arena_set_settings(svc: Service, body: dict = SettingsBody) -> dict[str, Any]:
    """Set the listing threshold (``{"min_votes": N}``; null: back to the default). It is
    kept in the DB, so it survives a restart; the board recomputes on its next read."""
    await asyncio.to_thread(svc.set_min_votes, body["min_votes"])
    return await threshold(svc)


@admin.get("/ll/arena/api/votes.csv", response_class=Response, responses=media("text/csv"))
async def arena_votes_csv(svc: Service) -> PlainTextResponse:
    from evaluation.report import safe_csv

    df = await asyncio.to_thread(svc.arena.votes_frame)
    return PlainTextResponse(safe_csv(df), media_type="text/csv")


__all__ = [
    "VOTER_RE",
    "ArenaJson",
    "ArenaSession",
    "ArenaVoter",
    "DroppedVoter",
    "ListingThreshold",
    "Reason",
    "Settings",
    "Vote",
    "admin",
    "arena_service",
    "check_voter",
    "json_body",
    "router",
]
