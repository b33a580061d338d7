"""The arena's ``/ll/ws`` message types, played through the one player.

A visitor's page never learns which systems it hears until it has voted: it asks for a battle
(``arena_new``), then for a *side* (``arena_speak`` {battle_id, side}); the server picks the
backend and streams it through the one player with :meth:`Session.run`, seen through
:class:`app.player.blind.BlindSession`: every side arrives at one common rate, mono, and no
message names a system, a rate or a chunk schedule until the vote is recorded. The vote unlocks
on the server: each side must have been reported played (``arena_played``) and the report must
be plausible for what the server streamed (:meth:`app.arena.battles.Arena.played`).

Messages (page -> server; replies come back as JSON on the same socket):

* ``arena_new`` {text, language?, req} or {random: true, req} -> ``arena_battle``
  {battle_id, text, language, req} (``random``: the server draws a prompt after the pair, in a
  language both systems speak)
* ``arena_speak`` {token, battle_id, side} -> the player's stream for ``token``, made blind
* ``arena_played`` {battle_id, side, take_id, played_ms} -> ``arena_played`` {played, ready}
* ``arena_vote`` {battle_id, choice} -> ``arena_voted`` {choice, counted, systems}
* any refusal -> ``arena_error`` {message, reason, battle_id}
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

from app.arena.battles import SIDES, ArenaError, StillStreaming, owner_view
from app.arena.lineup import backend_language
from app.arena.service import ArenaService, owner_of
from app.player.blind import BlindSession
from app.player.messages import CLONE_PREFIX, clone_request
from backends.base import SpeechRequest
from backends.errors import ListenlabError

log = logging.getLogger("listenlab.arena")

STILL_STREAMING_RETRIES = 30
"""A play report that races the stream's last DB write waits up to 3 s (0.1 s steps)."""


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


async def arena_new(svc: ArenaService, session: Any, msg: dict[str, Any]) -> None:
    try:
        d = await svc.new_battle(
            owner_of(session.ws),
            msg.get("text"),
            svc.voter(session.ws),
            network=svc.network(session.ws),
            language=msg.get("language"),
            random=msg.get("random") is True,
        )
    except ArenaError as e:
        refuse(session, e, msg)
        return
    req = msg.get("req")
    session.send({"type": "arena_battle", **d, "req": req if isinstance(req, int) else None})


async def arena_played(svc: ArenaService, session: Any, msg: dict[str, Any]) -> None:
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
                bt = await asyncio.to_thread(svc.arena.played, *args)
                break
            except StillStreaming:
                # the page sent ``done`` on; its row is written just after: wait for it
                await asyncio.sleep(0.1)
        else:
            bt = await asyncio.to_thread(svc.arena.played, *args)
    except ArenaError as e:
        refuse(session, e, msg)
        return
    d = owner_view(bt)
    session.send({"type": "arena_played", **d, "side": msg["side"], "ready": bt.both_played})


async def arena_vote(svc: ArenaService, session: Any, msg: dict[str, Any]) -> None:
    try:
        d = await svc.vote(
            owner_of(session.ws),
            msg.get("battle_id"),
            msg.get("choice"),
            svc.voter(session.ws),
        )
    except ArenaError as e:
        refuse(session, e, msg)
        return
    session.send({"type": "arena_voted", **d})


async def arena_speak(svc: ArenaService, session: Any, msg: dict[str, Any]) -> None:
    try:
        token = int(msg.get("token", 0)) & 0xFFFFFFFF
    except (TypeError, ValueError):
        token = 0
    side = msg.get("side")
    try:
        if side not in SIDES:
            raise ArenaError("side must be 'a' or 'b'")
        bt = await asyncio.to_thread(svc.arena.get, msg.get("battle_id"), owner_of(session.ws))
        entry = svc.state.backends.get(bt.system(side))
        if entry is None:
            raise ArenaError("that system is no longer configured on this server")
        req = await side_request(svc, entry, bt, side)
        await asyncio.to_thread(
            svc.arena.start_stream, bt, side, req.request_id, session.session_id
        )
    except ArenaError as e:
        # the player is waiting for this token: end it with the reason
        session.send({"type": "error", "token": token, "message": str(e), "partial": False})
        refuse(session, e, msg)
        return
    rate = svc.stream_rate()
    await session.begin(
        token, lambda t: stream_side(svc, BlindSession.over(session, t, rate), t, entry, req)
    )


class VoiceResolver:
    """What :func:`app.player.messages.clone_request` reads of a session, for the arena's own
    voices: the deployer configured them, so they are resolved with the admin's rights."""

    def __init__(self, state: Any):
        self.state = state
        self.session_id = "arena"
        self.owner = None
        self.admin = True

    def send(self, obj: Any) -> None:  # pragma: no cover - clone_request sends nothing
        pass


async def side_request(svc: ArenaService, entry: Any, bt: Any, side: str) -> SpeechRequest:
    """The side's request: the battle's text, the side's voice (a library voice ``lib:<id>``
    becomes a clone of it) and the text's language in the backend's own name for it
    (:func:`backend_language`) where the backend takes one."""
    caps = entry.backend.capabilities
    voice = bt.voice(side)
    req = SpeechRequest(
        text=bt.text,
        voice=voice,
        language=backend_language(bt.language, tuple(caps.languages)),
    ).validated()
    if voice and voice.startswith(CLONE_PREFIX):
        try:
            req = await clone_request(VoiceResolver(svc.state), entry, req)
        except ListenlabError as e:  # logged with its reason; the page learns nothing of it
            log.warning("arena: voice %s of %s: %s", voice, entry.label, e)
            raise ArenaError("this side could not be generated") from None
    return req


async def stream_side(
    svc: ArenaService, session: Any, token: int, entry: Any, req: SpeechRequest
) -> None:
    """One side's stream through :meth:`Session.run`; then record how it ended.

    The earliest moment the audio can have been heard to its end is the request time plus
    the take's time to first audio plus its duration: a lower bound (queueing only delays
    the real first chunk), so an honest player is never refused.
    """
    t_req = time.time()
    status = "cancelled"
    try:
        await session.run(token, entry, req, "stream")
        info = await asyncio.to_thread(svc.state.store.take_info, req.request_id)
        if info is None:
            status = "error"
        else:
            status = info.status
            first = t_req + float(info.ttfa_ms or 0.0) / 1000.0
            await asyncio.to_thread(
                svc.arena.finish_stream,
                req.request_id,
                status,
                float(info.duration_s or 0.0),
                first,
            )
            return
    finally:
        if status != "ok":  # the stream's own error propagates; this one is only logged
            try:
                await asyncio.to_thread(svc.arena.finish_stream, req.request_id, status)
            except Exception:
                log.exception("arena: could not mark stream %s %s", req.request_id, status)


HANDLERS = {
    "arena_new": arena_new,
    "arena_speak": arena_speak,
    "arena_played": arena_played,
    "arena_vote": arena_vote,
}
"""Message type -> handler ``(service, session, message)``."""


def register(state: Any, svc: ArenaService) -> None:
    """Add the arena's message types to the app's ``/ll/ws`` handlers."""
    for kind, handler in HANDLERS.items():
        state.ws_handlers[kind] = functools.partial(handler, svc)


__all__ = [
    "HANDLERS",
    "STILL_STREAMING_RETRIES",
    "arena_new",
    "arena_played",
    "arena_speak",
    "arena_vote",
    "refuse",
    "register",
    "side_request",
    "stream_side",
]
