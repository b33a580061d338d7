"""The open arena's server side: ``/ll/ws`` handlers, JSON routes, and the page mount.

A visitor's page never learns which systems it hears until it has voted: it asks for a battle
(``arena_new``), then for a *side* (``arena_speak`` {battle_id, side}); the server picks the
backend and streams it through the one player with :meth:`Session.run`, seen through
:class:`app.player.blind.BlindSession`: every side arrives at one common rate, mono, and no
message names a system, a rate or a chunk schedule until the vote is recorded. The vote unlocks on the
server, not only in the page: each side must have been reported played (``arena_played``) and
the report must be plausible for what the server streamed (:meth:`app.arena.battles.Arena.played`).

Who owns a battle: the visitor's one identity (:func:`app.web.identity.identity`, the
``ll_owner`` cookie the Playground's voices and takes belong to). The WebSocket handshake
carries it, so the same owner is seen on ``/ll/ws`` and on the HTTP routes; the DB keeps only
its hash. A client without the cookie (a script) owns no battle.

Who is counted (the *voter*, :meth:`ArenaService.voter`): a cookie is free, so limits and the
stored voter hash use the Space's Hugging Face login where it is configured (then voting needs
it, as on TTS Arena), else the client's address as :class:`app.web.proxies.Proxies` resolves it
(``X-Forwarded-For`` only from a trusted proxy; an IPv6 /64 counts as one).

WebSocket messages (page -> server; replies come back as JSON on the same socket):

* ``arena_new`` {text, req} -> ``arena_battle`` {battle_id, text, req}
* ``arena_speak`` {token, battle_id, side} -> the player's stream for ``token``, made blind
* ``arena_played`` {battle_id, side, take_id, played_ms} -> ``arena_played`` {played, ready}
* ``arena_vote`` {battle_id, choice} -> ``arena_voted`` {choice, counted, systems}
* any refusal -> ``arena_error`` {message, reason, battle_id}

HTTP (:data:`router`; refusals answered by :func:`app.web.errors.error_response`):
``POST /ll/arena/session``, ``GET /ll/arena/api/prompt``, ``GET /ll/arena/api/leaderboard``,
``GET /ll/arena/api/battles/{id}``, ``POST /ll/arena/api/battles/{id}/vote`` {choice},
``GET /ll/arena/api/votes.csv``, ``GET /ll/arena/api/voters``,
``POST /ll/arena/api/voters/{voter}/drop``, ``GET``/``POST /ll/arena/api/settings`` (the
listing threshold, kept in the DB) and the page ``/admin/arena`` (admin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.requests import HTTPConnection

from app.arena.battles import (
    SIDES,
    Arena,
    ArenaError,
    Limits,
    LoginRequired,
    NotYours,
    StillStreaming,
    clean_battle_text,
)
from app.player.blind import BlindSession, common_rate
from app.web.admin import require_admin
from app.web.identity import COOKIE, hf_login_configured, hf_user, identity, owner_for_token
from app.web.proxies import Proxies
from backends.base import SpeechRequest
from evaluation.arena import leaderboard

if TYPE_CHECKING:
    from app.state import AppState

log = logging.getLogger("listenlab.arena")

PROMPT_FILES = ("harvard/harvard.txt", "arena-prompts.txt")
PATH = "/arena"
VOTER_RE = re.compile(r"^(ip|hf):[0-9a-f]{24}$")
MAX_MIN_VOTES = 100_000
STILL_STREAMING_RETRIES = 30
"""A play report that races the stream's last DB write waits up to 3 s (0.1 s steps)."""


def _env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


@dataclass
class ArenaConfig:
    """Knobs a deployer may set (``LISTENLAB_ARENA_*`` environment variables)."""

    limits: Limits = field(
        default_factory=lambda: Limits(
            battles_per_minute=max(1, _env_int("LISTENLAB_ARENA_BATTLES_PER_MIN", 10)),
            global_battles_per_minute=max(1, _env_int("LISTENLAB_ARENA_GLOBAL_PER_MIN", 120)),
            votes_per_hour=max(1, _env_int("LISTENLAB_ARENA_VOTES_PER_HOUR", 30)),
            votes_per_day=max(1, _env_int("LISTENLAB_ARENA_VOTES_PER_DAY", 150)),
        )
    )
    min_votes: int = field(default_factory=lambda: _env_int("LISTENLAB_ARENA_MIN_VOTES", 20))
    """Systems with fewer votes are listed apart, as preliminary."""
    n_boot: int = 200
    """Bootstrap resamples for the board's intervals."""


def load_prompts() -> list[str]:
    """The random prompts: the listening tests' Harvard set (``assets/harvard/harvard.txt``)
    when it is there, else the arena's own copy of lists 1-3 (``assets/arena-prompts.txt``)."""
    folder = resources.files("assets")
    for name in PROMPT_FILES:
        p = folder.joinpath(*name.split("/"))
        if p.is_file():
            lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
            return [ln for ln in lines if ln and not ln.startswith("#")]
    return []


def owner_of(conn: HTTPConnection) -> str | None:
    """The battle owner of this request or WebSocket: the visitor's one identity, or None for
    a client without the identity cookie (its battles could never be found again)."""
    who = identity(conn)
    return who.owner_id if who.persistent else None


class ArenaService:
    """The arena bound to one app: its DB access, config, prompts and board cache."""

    def __init__(
        self,
        state: AppState,
        config: ArenaConfig | None = None,
        seed: int | None = None,
        proxies: Proxies | None = None,
    ):
        self.state = state
        self.config = config or ArenaConfig()
        self.arena = Arena(state.store, self.config.limits)
        self.rng = np.random.default_rng(seed)
        self.prompts = load_prompts() or [
            s for e in state.examples for s in [e["text"]] if len(s) <= self.config.limits.max_chars
        ]
        self._board: tuple[tuple[int, int, int], dict[str, Any]] | None = None
        self._board_lock = threading.Lock()
        self._rate: tuple[tuple[str, ...], int] | None = None
        self.proxies = proxies if proxies is not None else Proxies.from_env()
        """Whose ``X-Forwarded-For`` is believed: the app's one rule (tests set a local proxy)."""

    @property
    def systems(self) -> list[str]:
        return list(self.state.backends)

    def set_limits(self, **kw: Any) -> None:
        """Change limits at run time (tests, or an admin tuning a live Space)."""
        self.config.limits = replace(self.config.limits, **kw)
        self.arena.limits = self.config.limits

    # -- shared by the WebSocket and HTTP routes

    def voter(self, conn: HTTPConnection) -> str:
        """The stored voter hash of this request or WebSocket (see the module doc)."""
        if hf_login_configured():
            user = hf_user(conn)
            if user is None:
                raise LoginRequired("log in with Hugging Face to battle and vote on this arena")
            return self.arena.voter_hash("hf", user.lower())
        return self.arena.voter_hash("ip", self.proxies.client_key(conn.scope))

    def min_votes(self) -> int:
        """Votes a system needs to be listed: the admin's setting, else the deployment's
        default (``LISTENLAB_ARENA_MIN_VOTES``)."""
        v = self.arena.setting("min_votes")
        return self.config.min_votes if v is None else int(v)

    def set_min_votes(self, value: Any) -> int | None:
        """The admin's listing threshold (None: back to the default); returns what is stored."""
        if value is None or value == "":
            self.arena.set_setting("min_votes", None)
            return None
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ArenaError("min_votes must be a whole number 0..100000")
        try:
            n = int(value)
        except ValueError:
            raise ArenaError("min_votes must be a whole number 0..100000") from None
        if not 0 <= n <= MAX_MIN_VOTES:
            raise ArenaError("min_votes must be a whole number 0..100000")
        self.arena.set_setting("min_votes", str(n))
        return n

    def board_data(self) -> dict[str, Any]:
        """The leaderboard (cached until the next vote: the bootstrap is the costly part)."""
        with self._board_lock:  # concurrent viewers wait for one fit instead of each running it
            min_votes = self.min_votes()
            key = (self.arena.vote_count(), min_votes, self.config.n_boot)
            cached = self._board
            if cached is not None and cached[0] == key:
                return cached[1]
            data = leaderboard(
                self.arena.votes_frame(),
                min_votes=min_votes,
                n_boot=self.config.n_boot,
            )
            data["systems_configured"] = self.systems
            self._board = (key, data)
            return data

    async def board(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.board_data)

    def random_prompt(self) -> str:
        if not self.prompts:
            raise ArenaError("no bundled prompts: type a text instead")
        return self.prompts[int(self.rng.integers(len(self.prompts)))]

    async def new_battle(self, owner: str | None, text: Any, voter: str) -> dict[str, Any]:
        if owner is None:
            raise NotYours("no arena session: reload the page (cookies must be allowed)")
        t = clean_battle_text(text, self.config.limits)
        source = "prompt" if t in self.prompts else "typed"
        bt = await asyncio.to_thread(
            self.arena.new_battle,
            owner,
            t,
            self.systems,
            # a Generator of its own: self.rng is used only on the event loop (not thread-safe)
            np.random.default_rng(int(self.rng.integers(2**63))),
            text_source=source,
            voter=voter,
        )
        return bt.public()

    async def vote(
        self, owner: str | None, battle_id: Any, choice: Any, voter: str
    ) -> dict[str, Any]:
        bt, created = await asyncio.to_thread(
            lambda: self.arena.vote(battle_id, owner, choice, voter=voter)
        )
        return {**bt.public(), "choice": bt.voted, "counted": created}

    # -- /ll/ws handlers

    def handlers(self) -> dict[str, Any]:
        return {
            "arena_new": self.ws_new,
            "arena_speak": self.ws_speak,
            "arena_played": self.ws_played,
            "arena_vote": self.ws_vote,
        }

    @staticmethod
    def refuse(session: Any, e: ArenaError, msg: dict[str, Any]) -> None:
        """Answer a refused message on the socket: ``arena_error`` with the reason and facts."""
        bid = msg.get("battle_id")
        session.send(
            {
                "type": "arena_error",
                "message": str(e),
                "reason": e.reason,
                "battle_id": bid if isinstance(bid, str) and len(bid) <= 64 else None,
                "side": msg.get("side") if msg.get("side") in SIDES else None,
                **{k: v for k, v in e.extra.items() if k != "battle"},
                **({"battle": e.extra["battle"]} if "battle" in e.extra else {}),
            }
        )

    async def ws_new(self, session: Any, msg: dict[str, Any]) -> None:
        try:
            d = await self.new_battle(owner_of(session.ws), msg.get("text"), self.voter(session.ws))
        except ArenaError as e:
            self.refuse(session, e, msg)
            return
        req = msg.get("req")
        session.send({"type": "arena_battle", **d, "req": req if isinstance(req, int) else None})

    async def ws_played(self, session: Any, msg: dict[str, Any]) -> None:
        args = (
            msg.get("battle_id"),
            owner_of(session.ws),
            msg.get("side"),
            msg.get("take_id"),
            msg.get("played_ms"),
        )
        try:
            for _ in range(STILL_STREAMING_RETRIES):
                try:
                    bt = await asyncio.to_thread(self.arena.played, *args)
                    break
                except StillStreaming:
                    # the page sent ``done`` on; its row is written just after: wait for it
                    await asyncio.sleep(0.1)
            else:
                bt = await asyncio.to_thread(self.arena.played, *args)
        except ArenaError as e:
            self.refuse(session, e, msg)
            return
        d = bt.public()
        session.send({"type": "arena_played", **d, "side": msg["side"], "ready": bt.both_played})

    async def ws_vote(self, session: Any, msg: dict[str, Any]) -> None:
        try:
            d = await self.vote(
                owner_of(session.ws),
                msg.get("battle_id"),
                msg.get("choice"),
                self.voter(session.ws),
            )
        except ArenaError as e:
            self.refuse(session, e, msg)
            return
        session.send({"type": "arena_voted", **d})

    async def ws_speak(self, session: Any, msg: dict[str, Any]) -> None:
        try:
            token = int(msg.get("token", 0)) & 0xFFFFFFFF
        except (TypeError, ValueError):
            token = 0
        side = msg.get("side")
        try:
            if side not in SIDES:
                raise ArenaError("side must be 'a' or 'b'")
            bt = await asyncio.to_thread(self.arena.get, msg.get("battle_id"), owner_of(session.ws))
            entry = self.state.backends.get(bt.system(side))
            if entry is None:
                raise ArenaError("that system is no longer configured on this server")
            req = SpeechRequest(text=bt.text).validated()
            await asyncio.to_thread(
                self.arena.start_stream, bt, side, req.request_id, session.session_id
            )
        except ArenaError as e:
            # the player is waiting for this token: end it with the reason
            session.send({"type": "error", "token": token, "message": str(e), "partial": False})
            self.refuse(session, e, msg)
            return
        rate = self.stream_rate()
        await session.begin(
            token, lambda t: self.stream_side(BlindSession.over(session, t, rate), t, entry, req)
        )

    def stream_rate(self) -> int:
        """The one rate every side is streamed at (:func:`app.player.blind.common_rate` of
        the configured systems; cached until the set of systems changes)."""
        key = tuple(self.systems)
        if self._rate is None or self._rate[0] != key:
            rates = []
            for e in list(self.state.backends.values()):
                with contextlib.suppress(Exception):  # a remote backend may not know its rate
                    rates.append(e.backend.capabilities.sample_rate)
            self._rate = (key, common_rate(rates))
        return self._rate[1]

    async def stream_side(self, session: Any, token: int, entry: Any, req: SpeechRequest) -> None:
        """One side's stream through :meth:`Session.run`; then record how it ended.

        The earliest moment the audio can have been heard to its end is the request time plus
        the take's time to first audio plus its duration: a lower bound (queueing only delays
        the real first chunk), so an honest player is never refused.
        """
        t_req = time.time()
        status = "cancelled"
        try:
            await session.run(token, entry, req, "stream")
            info = await asyncio.to_thread(self.state.store.take_info, req.request_id)
            if info is None:
                status = "error"
            else:
                status = info.status
                first = t_req + float(info.ttfa_ms or 0.0) / 1000.0
                await asyncio.to_thread(
                    self.arena.finish_stream,
                    req.request_id,
                    status,
                    float(info.duration_s or 0.0),
                    first,
                )
                return
        finally:
            if status != "ok":  # the stream's own error propagates; this one is only logged
                try:
                    await asyncio.to_thread(self.arena.finish_stream, req.request_id, status)
                except Exception:
                    log.exception("arena: could not mark stream %s %s", req.request_id, status)


# --------------------------------------------------------------------------- routes


def arena_service(request: Request) -> ArenaService:
    """FastAPI dependency: the app's arena (set by :func:`install`)."""
    return request.app.state.arena


Service = Annotated[ArenaService, Depends(arena_service)]
router = APIRouter()
admin = APIRouter(dependencies=[Depends(require_admin)])


async def json_body(request: Request) -> Any:
    """The request's JSON, or None when it is not JSON."""
    try:
        return await request.json()
    except ValueError:
        return None


@router.post("/ll/arena/session")
async def arena_session(request: Request, svc: Service) -> dict[str, Any]:
    """The page's first call: how the arena is set up. The identity cookie comes with this
    answer (as with any other) when the visitor has none yet."""
    cookie = request.cookies.get(COOKIE)
    fresh = cookie is None or owner_of(request) != owner_for_token(cookie)
    return {
        "systems": len(svc.systems),
        "ready": len(svc.systems) >= 2,
        "max_chars": svc.config.limits.max_chars,
        "battles_per_minute": svc.config.limits.battles_per_minute,
        "new_session": fresh,
    }


@router.get("/ll/arena/api/prompt")
async def arena_prompt(svc: Service) -> dict[str, Any]:
    return {"text": svc.random_prompt()}


@router.get("/ll/arena/api/leaderboard")
async def arena_leaderboard(svc: Service) -> dict[str, Any]:
    return await svc.board()


@router.get("/ll/arena/api/battles/{battle_id}")
async def arena_battle(battle_id: str, request: Request, svc: Service) -> dict[str, Any]:
    bt = await asyncio.to_thread(svc.arena.get, battle_id, owner_of(request))
    return bt.public()


@router.post("/ll/arena/api/battles/{battle_id}/vote")
async def arena_vote(battle_id: str, request: Request, svc: Service) -> dict[str, Any]:
    payload = await json_body(request)
    if not isinstance(payload, dict):
        raise ArenaError('send JSON {"choice": "a"|"b"|"tie"|"both_bad"}')
    return await svc.vote(owner_of(request), battle_id, payload.get("choice"), svc.voter(request))


@admin.get("/ll/arena/api/voters")
async def arena_voters(svc: Service) -> dict[str, Any]:
    """Votes per voter hash, most first: what the admin looks at before dropping one."""
    df = await asyncio.to_thread(svc.arena.voters_frame)
    return {"voters": df.to_dict(orient="records")}


@admin.post("/ll/arena/api/voters/{voter}/drop")
async def arena_drop_voter(voter: str, svc: Service) -> dict[str, Any]:
    """Delete every vote of a voter and refuse its later ones; the board recomputes."""
    if not VOTER_RE.match(voter):
        raise ArenaError("a voter is 'ip:' or 'hf:' and 24 hex digits")
    n = await asyncio.to_thread(svc.arena.drop_voter, voter)
    return {"voter": voter, "votes_dropped": n}


@admin.get("/ll/arena/api/settings")
async def arena_settings(svc: Service) -> dict[str, Any]:
    """The admin's knobs: the listing threshold (and the deployment's default)."""
    return {
        "min_votes": await asyncio.to_thread(svc.min_votes),
        "default_min_votes": svc.config.min_votes,
    }


@admin.post("/ll/arena/api/settings")
async def arena_set_settings(request: Request, svc: Service) -> dict[str, Any]:
    """Set the listing threshold (``{"min_votes": N}``; null: back to the default). It is
    kept in the DB, so it survives a restart; the board recomputes on its next read."""
    body = await json_body(request)
    if not isinstance(body, dict) or "min_votes" not in body:
        raise ArenaError('send {"min_votes": N} (or null for the default)')
    await asyncio.to_thread(svc.set_min_votes, body["min_votes"])
    return await arena_settings(svc)


@admin.get("/ll/arena/api/votes.csv")
async def arena_votes_csv(svc: Service) -> PlainTextResponse:
    from evaluation.report import safe_csv

    df = await asyncio.to_thread(svc.arena.votes_frame)
    return PlainTextResponse(safe_csv(df), media_type="text/csv")


def install(app: FastAPI, state: AppState, *, mount_ui: bool = True) -> ArenaService:
    """Put the arena on the app: its service in ``app.state.arena``, its WebSocket handlers,
    its routers, and its page at ``/arena`` (call before the Playground is mounted at ``/``)."""
    from app.arena.admin_page import router as admin_page

    svc = ArenaService(state, proxies=getattr(app.state, "proxies", None))
    app.state.arena = svc
    state.ws_handlers.update(svc.handlers())
    app.include_router(router)
    app.include_router(admin)
    app.include_router(admin_page)
    if mount_ui:
        import gradio as gr

        from app.arena.page import ARENA_CSS, build_arena_ui

        gr.mount_gradio_app(app, build_arena_ui(svc), path=PATH, css=ARENA_CSS)
    return svc
