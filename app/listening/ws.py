"""``/ll/ws`` message types of the rater page, played through the one player.

* ``stimulus`` {token, test_id, rater_token, assignment_id, slot}: the server looks the take up
  (the page never names it) and streams it: *as streamed* replays the stored chunks at their
  recorded arrival times (every rater hears the real stream's stalls and seams), *whole* sends
  them at once, *live* generates the text afresh on the system's backend.
* ``play_event`` {test_id, rater_token, assignment_id, slot, played_ms, underruns, stall_ms}:
  what the player played, capped by the time since this page's stream of that stimulus began.
* ``listen_glitch`` {test_id, rater_token, assignment_id, slot, position_ms, kind, report_id}:
  a "G" mark on the stimulus being played, stored with the rater and the test.

Per-page state (which stimulus streams started when) lives on the player's Session and dies
with the socket.

Limits (a human clicks, replays and marks a few times a second at most): every message of these
three types costs one token of a per-page and a per-rater bucket (:data:`RATE_PER_S`, burst
:data:`BURST`); a rater stores at most :data:`MAX_PLAY_EVENTS_PER_ITEM` play events and
:data:`MAX_MARKS_PER_ITEM` glitch marks per stimulus. A stimulus is a take shared by every
rater: the page may not report on it with the Playground's ``underruns``/``glitch`` messages
(:attr:`Session.replayed`), only with these, which are stored under the rater and the test.
A replay waits while the page's send queue is over its budget (:mod:`app.outbox`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import replace
from typing import Any

from app.guard import KeyedRate, client_id
from app.listening.service import Listening
from app.stream_routes import HEADER, Session
from backends.base import InvalidRequest, ListenlabError
from evaluation.store import GLITCH_KINDS, GlitchReport

log = logging.getLogger("listenlab.listening")

RATE_PER_S = 5.0
BURST = 30.0
MAX_PLAY_EVENTS_PER_ITEM = 60
"""Play events one rater may store for one stimulus (a replay or a seek each)."""
MAX_MARKS_PER_ITEM = 40
"""Glitch marks one rater may store for one stimulus."""


class TooFast(InvalidRequest):
    """Over a rate or a per-item cap: nothing was stored."""


def _streams(session: Session) -> dict[tuple[str, int], dict[str, Any]]:
    return session.__dict__.setdefault("_listening_streams", {})


def _err(session: Session, msg: dict[str, Any], e: Exception, kind: str) -> None:
    session.send(
        {
            "type": "listen_error",
            "for": kind,
            "assignment_id": str(msg.get("assignment_id") or "")[:64],
            "message": str(e)[:300],
        }
    )


async def replay_take(session: Session, token: int, take: Any, *, timed: bool, extra: dict) -> None:
    """Send a stored take to the player: start, one frame per chunk (at its recorded arrival
    time when ``timed``), done. The frame header carries the recorded arrival ms."""
    t0 = time.monotonic()
    session.send(
        {
            "type": "start",
            "token": token,
            "take_id": take.take_id,
            "sample_rate": take.sample_rate,
            "channels": take.channels,
            "text_chars": len(take.request.text),
            **extra,
        }
    )
    try:
        for c in take.chunks:
            if not await session.outbox.wait_for_room():
                return  # the page stopped reading: its socket is being closed
            if timed:
                delay = t0 + c.arrival_ms / 1000.0 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            pcm = take.audio[c.offset : c.offset + c.frames]
            session.send(HEADER.pack(token, c.index, c.arrival_ms) + pcm.astype("<i2").tobytes())
    except asyncio.CancelledError:
        session.send({"type": "cancelled", "token": token, "take_id": take.take_id})
        raise
    session.send(
        {"type": "done", "token": token, "status": "ok", **Session._summary(take), **extra}
    )


def register(state: Any, svc: Listening) -> None:
    store = state.store
    rate = KeyedRate(RATE_PER_S, BURST)  # this app's raters and pages (not module state)

    def spend(*keys: str) -> None:
        """One message's token from each bucket (page, rater), or TooFast."""
        now = time.monotonic()
        waits = [rate.take(k, now) for k in keys]
        if max(waits) > 0:
            raise TooFast(
                f"too many messages: at most {RATE_PER_S:g} a second (try again in "
                f"{max(waits):.1f} s); nothing was stored"
            )

    def count(sql: str, args: list[Any]) -> int:
        return int(store.db.execute(sql, args).fetchone()[0])

    async def stimulus(session: Session, msg: dict[str, Any]) -> None:
        token = int(msg.get("token", 0) or 0) & 0xFFFFFFFF
        try:
            spend("page:" + session.session_id)
            info = await asyncio.to_thread(
                svc.stimulus,
                msg.get("test_id"),
                msg.get("rater_token"),
                msg.get("assignment_id"),
                msg.get("slot"),
            )
        except (ListenlabError, ValueError, TypeError) as e:
            session.send({"type": "error", "token": token, "message": str(e)[:300]})
            return
        a, cond, take_id = info["assignment"], info["condition"], info["take_id"]
        key = (a.assignment_id, int(msg["slot"]))
        take = await asyncio.to_thread(store.load_take, take_id)
        extra = {"condition": cond}
        entry = state.backends.get(info["live_backend"] or "") if cond == "live" else None
        streams = _streams(session)
        rec = {
            "t0": time.monotonic(),
            "take_id": take_id,
            "condition": cond,
            "duration_ms": take.duration_s * 1000.0,
            "test_id": info["test"]["test_id"],
            "rater_id": info["rater_id"],
        }
        streams[key] = rec
        # shared by every rater: the Playground's reports on it are refused (play events
        # carry this rater's underruns instead)
        session.replayed.add(take_id)
        if entry is not None:
            req = replace(take.request, request_id=uuid.uuid4().hex).validated()
            rec["take_id"] = req.request_id
            await session.begin(token, lambda t: session.run(t, entry, req, "stream"))
        else:
            if cond == "live":
                rec["condition"] = extra["condition"] = "as_streamed"  # no backend: recorded
            timed = rec["condition"] == "as_streamed"
            await session.begin(
                token, lambda t: replay_take(session, t, take, timed=timed, extra=extra)
            )
        rec["t0"] = time.monotonic()

    async def play_event(session: Session, msg: dict[str, Any]) -> None:
        try:
            slot = msg.get("slot")
            rec = _streams(session).get((str(msg.get("assignment_id") or ""), slot))
            spend("page:" + session.session_id, *(["rater:" + rec["rater_id"]] if rec else []))
            elapsed = None if rec is None else (time.monotonic() - rec["t0"]) * 1000.0
            if rec is not None:
                n = await asyncio.to_thread(
                    count,
                    "SELECT count(*) FROM play_events WHERE test_id=? AND rater_id=? AND "
                    "assignment_id=? AND slot=?",
                    [rec["test_id"], rec["rater_id"], msg.get("assignment_id"), slot],
                )
                if n >= MAX_PLAY_EVENTS_PER_ITEM:
                    raise TooFast(
                        f"play event not stored: {MAX_PLAY_EVENTS_PER_ITEM} are kept per "
                        "stimulus and rater"
                    )
            out = await asyncio.to_thread(
                svc.play_event,
                msg.get("test_id"),
                msg.get("rater_token"),
                msg.get("assignment_id"),
                slot,
                msg.get("played_ms"),
                server_elapsed_ms=elapsed,
                take_id=rec["take_id"] if rec else "",
                condition=rec["condition"] if rec else "",
                duration_ms=rec["duration_ms"] if rec else None,
                underruns=msg.get("underruns", 0),
                stall_ms=msg.get("stall_ms", 0.0),
            )
        except (ListenlabError, ValueError, TypeError) as e:
            _err(session, msg, e, "play_event")
            return
        session.send(
            {
                "type": "play_saved",
                "assignment_id": msg.get("assignment_id"),
                "slot": slot,
                "played_ms": out["played_ms"],
            }
        )

    async def listen_glitch(session: Session, msg: dict[str, Any]) -> None:
        try:
            rec = _streams(session).get((str(msg.get("assignment_id") or ""), msg.get("slot")))
            spend("page:" + session.session_id, *(["rater:" + rec["rater_id"]] if rec else []))
            if rec is None:
                raise InvalidRequest("no stimulus of that item was played on this page")
            rid = client_id(msg.get("report_id")) or uuid.uuid4().hex
            r = await asyncio.to_thread(svc._rater, msg.get("test_id"), msg.get("rater_token"))
            if r["rater_id"] != rec["rater_id"]:
                raise InvalidRequest("not your stimulus")
            kind = msg.get("kind") or None
            if kind is not None and kind not in GLITCH_KINDS:
                raise InvalidRequest("unknown glitch kind")
            pos = float(msg.get("position_ms"))
            if not 0 <= pos <= rec["duration_ms"] + 1000:
                raise InvalidRequest("position outside the clip")
            n = await asyncio.to_thread(
                count,
                "SELECT count(*) FROM glitch_reports WHERE take_id=? AND rater_id=? AND test_id=?",
                [rec["take_id"], rec["rater_id"], rec["test_id"]],
            )
            if n >= MAX_MARKS_PER_ITEM:
                raise TooFast(
                    f"mark not stored: {MAX_MARKS_PER_ITEM} marks are kept per stimulus and rater"
                )
            w = await asyncio.to_thread(
                store.add_glitch_report,
                GlitchReport(
                    report_id=rid,
                    take_id=rec["take_id"],
                    rater_id=rec["rater_id"],
                    position_ms=pos,
                    kind=kind,
                    test_id=rec["test_id"],
                ),
            )
            row = store.db["glitch_reports"].get(w.id)
        except (ListenlabError, ValueError, TypeError) as e:
            _err(session, msg, e, "glitch")
            return
        session.send(
            {
                "type": "listen_glitch_saved",
                "report_id": w.id,
                "position_ms": row["position_ms"],
                "boundary_index": row["boundary_index"],
            }
        )

    state.ws_handlers["stimulus"] = stimulus
    state.ws_handlers["play_event"] = play_event
    state.ws_handlers["listen_glitch"] = listen_glitch


__all__ = ["register", "replay_take"]
