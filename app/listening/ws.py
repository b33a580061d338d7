"""``/ll/ws`` message types of the rater page, played through the one player.

* ``stimulus`` {token, test_id, rater_token, assignment_id, slot[, delivery]}: the server looks
  the take up (the page never names it) and streams it: *as streamed* replays the stored chunks
  at their recorded arrival times (every rater hears the real stream's stalls and seams),
  *whole* sends them at once, *live* generates the text afresh on the system's backend.
  ``delivery: "whole"`` (MUSHRA screens only) sends any condition at once, for the page to
  decode and switch between seamlessly.
* ``play_event`` {test_id, rater_token, assignment_id, slot, played_ms, underruns, stall_ms}:
  what the player played, capped by the time since this page's stream of that stimulus began,
  by the audio sent while it was not sent in full (then never complete) and, on a MUSHRA screen
  sent whole, by the screen's wall time since all of it was sent, summed over its slots.

Blind on the wire (:mod:`app.player.blind`): every stimulus of a test reaches the page in the
test's one :class:`~app.player.blind.CommonFormat` (its stimuli's highest rate; stereo iff
any stimulus is stereo, mono then heard in both ears) in equal 100 ms frames numbered 0, 1, 2 …
``start`` carries only the token, that format and an opaque ``stream_id`` (new for every stream,
never a take id, so the open and the hidden MUSHRA reference differ); ``done`` only status,
duration and frame count; a frame header's ms is the recorded arrival for *as streamed*, else 0;
a failed stream's error is generic (the reason is logged). The stored takes stay native.
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
A replay waits while the page's send queue is over its budget (:mod:`app.web.outbox`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from app.listening.rating import CLOCK_SLACK_MS, Playing
from app.listening.service import Listening
from app.player.blind import GENERIC_ERROR, BlindSession, CommonFormat, take_frames
from app.player.session import HEADER, Session
from app.store import GLITCH_KINDS, GlitchReport
from app.web.inputs import client_id
from app.web.ratelimit import KeyedRate
from backends.errors import InvalidRequest, ListenlabError, TooMany
from evaluation.listening.kinds import kind_of

log = logging.getLogger("listenlab.listening")

RATE_PER_S = 5.0
BURST = 30.0
MAX_PLAY_EVENTS_PER_ITEM = 60
"""Play events one rater may store for one stimulus (a replay or a seek each)."""
MAX_MARKS_PER_ITEM = 40
"""Glitch marks one rater may store for one stimulus."""


class TooFast(TooMany):
    """Over a rate or a per-item cap: nothing was stored."""


def _streams(session: Session) -> dict[tuple[str, int], dict[str, Any]]:
    return session.rooms.setdefault("listening", {})


def _err(session: Session, msg: dict[str, Any], e: Exception, kind: str) -> None:
    session.send(
        {
            "type": "listen_error",
            "for": kind,
            "assignment_id": str(msg.get("assignment_id") or "")[:64],
            "message": str(e)[:300],
        }
    )


async def replay_take(
    session: Session, token: int, take: Any, fmt: CommonFormat, rec: dict[str, Any], *, timed: bool
) -> None:
    """Send a stored take to the page blind: ``start`` (token, the test's common format, the
    stream's opaque id), equal frames of that format (at their recorded arrival times when
    ``timed``; the header's ms is that arrival, else 0), ``done`` (status, duration, frames).

    ``rec`` learns how much audio was sent and when all of it was (play credit needs both)."""
    t0 = time.monotonic()
    sid = rec["stream_id"]
    session.send(
        {
            "type": "start",
            "token": token,
            "stream_id": sid,
            "sample_rate": fmt.sample_rate,
            "channels": fmt.channels,
        }
    )
    samples = frames = 0
    try:
        for arrival_ms, out in take_frames(take, fmt):
            if timed:
                delay = t0 + arrival_ms / 1000.0 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            for i, ms, f in out:
                if not await session.outbox.wait_for_room():
                    return  # the page stopped reading: its socket is being closed
                session.send(HEADER.pack(token, i, ms if timed else 0.0) + f.tobytes())
                samples, frames = samples + len(f), frames + 1
                rec["sent_ms"] = samples / fmt.sample_rate * 1000.0
    except asyncio.CancelledError:
        session.send({"type": "cancelled", "token": token, "stream_id": sid})
        raise
    except Exception:  # a damaged take: the reason stays in the log
        log.exception("stimulus replay failed (stream %s, take %s)", sid, take.take_id)
        session.send({"type": "error", "token": token, "status": "error", "message": GENERIC_ERROR})
        return
    rec["full_at"] = time.monotonic()
    session.send(
        {
            "type": "done",
            "token": token,
            "status": "ok",
            "duration_s": samples / fmt.sample_rate,
            "frames": frames,
        }
    )


async def _live(
    session: Session, token: int, entry: Any, req: Any, info: Playing, rec: dict
) -> None:
    """A fresh generation on the system's backend, through the arena's blind filter (common
    format, gain-matched to the test's target, opaque stream id)."""
    fmt: CommonFormat = info.format
    view = BlindSession.over(
        session,
        token,
        fmt.sample_rate,
        channels=fmt.channels,
        stream_id=rec["stream_id"],
        target_lufs=info.target_lufs,
    )
    rec["view"] = view
    await view.run(token, entry, req, "stream")
    if view.completed:
        rec["full_at"] = time.monotonic()
        rec["duration_ms"] = view.sent_ms


def _sent_ms(rec: dict[str, Any]) -> float:
    view = rec.get("view")
    return view.sent_ms if view is not None else rec.get("sent_ms", 0.0)


def _screen_budget(streams: dict, rec: dict[str, Any], slot: int, now: float) -> float | None:
    """MUSHRA, sent whole: what is left of the screen's wall time since all its stimuli were
    sent in full, after the credit already given to its other slots (one plays at a time).
    None when some stimulus of the screen was not sent whole on this page."""
    aid, n = rec["assignment_id"], rec["slots"]
    recs = [streams.get((aid, i)) for i in range(n)]
    if any(r is None or not r.get("whole") or r.get("full_at") is None for r in recs):
        return None
    since = (now - max(r["full_at"] for r in recs)) * 1000.0
    used = sum(r.get("credit", 0.0) for i, r in enumerate(recs) if i != slot)
    return max(0.0, since + CLOCK_SLACK_MS - used)  # the clock slack once per screen


@dataclass
class RaterSockets:
    """What the rater page's WebSocket handlers share within one app: the service, the
    backends (the ``live`` condition) and the per-page and per-rater message buckets."""

    svc: Listening
    backends: dict[str, Any]
    rate: KeyedRate = field(default_factory=lambda: KeyedRate(RATE_PER_S, BURST))

    def spend(self, *keys: str) -> None:
        """One message's token from each bucket (page, rater), or TooFast."""
        now = time.monotonic()
        waits = [self.rate.take(k, now) for k in keys]
        if max(waits) > 0:
            raise TooFast(
                f"too many messages: at most {RATE_PER_S:g} a second (try again in "
                f"{max(waits):.1f} s); nothing was stored"
            )


async def _open(room: RaterSockets, session: Session, msg: dict[str, Any], token: int):
    """The stimulus the message asks for and its take, or None (the page was told why)."""
    svc = room.svc
    try:
        room.spend("page:" + session.session_id)
        info = await asyncio.to_thread(
            svc.stimulus,
            msg.get("test_id"),
            msg.get("rater_token"),
            msg.get("assignment_id"),
            msg.get("slot"),
        )
        whole = msg.get("delivery") == "whole"
        if whole and not kind_of(info.test.kind).whole_delivery:
            raise InvalidRequest("whole delivery is for MUSHRA screens")
    except (ListenlabError, ValueError, TypeError) as e:  # about the request, not a system
        session.send({"type": "error", "token": token, "message": str(e)[:300]})
        return None
    try:
        take = await asyncio.to_thread(svc.store.load_take, info.take_id)
    except Exception:  # the reason may name the take: it stays in the log
        log.exception("stimulus take %s could not be loaded", info.take_id)
        session.send({"type": "error", "token": token, "message": GENERIC_ERROR})
        return None
    return info, take, whole


async def stimulus(room: RaterSockets, session: Session, msg: dict[str, Any]) -> None:
    """``stimulus``: stream the take of the rater's item slot (the page never names it)."""
    token = int(msg.get("token", 0) or 0) & 0xFFFFFFFF
    opened = await _open(room, session, msg, token)
    if opened is None:
        return
    info, take, whole = opened
    a, cond = info.assignment, info.condition
    slot = int(msg["slot"])
    entry = room.backends.get(info.live_backend or "") if cond == "live" else None
    if whole:
        entry, cond = None, "whole"
    elif cond == "live" and entry is None:
        cond = "as_streamed"  # no backend: the recorded stream
    rec = {
        "t0": time.monotonic(),
        "stream_id": uuid.uuid4().hex,  # opaque: never a take id, new for every stream
        "take_id": info.take_id,
        "condition": cond,
        "whole": whole,
        "duration_ms": take.duration_s * 1000.0,
        "test_id": info.test.test_id,
        "rater_id": info.rater_id,
        "assignment_id": a.assignment_id,
        "slots": info.slots,
        "full_at": None,
        "sent_ms": 0.0,
    }
    _streams(session)[(a.assignment_id, slot)] = rec
    # shared by every rater: the Playground's reports on it are refused (play events
    # carry this rater's underruns instead)
    session.replayed.add(info.take_id)
    fmt = info.format
    if whole:  # a MUSHRA screen's stimulus: sent now, at once (the page decodes it)
        await replay_take(session, token, take, fmt, rec, timed=False)
        return
    if entry is not None:
        req = replace(take.request, request_id=uuid.uuid4().hex).validated()
        rec["take_id"] = req.request_id
        await session.begin(token, lambda t: _live(session, t, entry, req, info, rec))
    else:
        timed = cond == "as_streamed"
        await session.begin(token, lambda t: replay_take(session, t, take, fmt, rec, timed=timed))
    rec["t0"] = time.monotonic()


async def _play_budget(
    room: RaterSockets, session: Session, msg: dict[str, Any], rec: dict | None, now: float
) -> float | None:
    """Check the per-item cap; a MUSHRA screen sent whole: what is left of its wall time."""
    slot = msg.get("slot")
    if rec is None:
        return None
    n = await asyncio.to_thread(
        room.svc.tests.play_event_count,
        rec["test_id"],
        rec["rater_id"],
        msg.get("assignment_id"),
        slot,
    )
    if n >= MAX_PLAY_EVENTS_PER_ITEM:
        raise TooFast(
            f"play event not stored: {MAX_PLAY_EVENTS_PER_ITEM} are kept per stimulus and rater"
        )
    if rec["whole"] and isinstance(slot, int) and slot >= 0:
        budget = _screen_budget(_streams(session), rec, slot, now)
        if budget is None:
            raise InvalidRequest("play the screen after all of its audio has arrived")
        return budget
    return None


async def play_event(room: RaterSockets, session: Session, msg: dict[str, Any]) -> None:
    """``play_event``: how much of a stimulus the page played, capped by the server's clock."""
    slot = msg.get("slot")
    try:
        rec = _streams(session).get((str(msg.get("assignment_id") or ""), slot))
        room.spend("page:" + session.session_id, *(["rater:" + rec["rater_id"]] if rec else []))
        now = time.monotonic()
        elapsed = None if rec is None else (now - rec["t0"]) * 1000.0
        budget = await _play_budget(room, session, msg, rec, now)
        full = rec is not None and rec["full_at"] is not None
        out = await asyncio.to_thread(
            room.svc.play_event,
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
            sent_ms=None if rec is None or full else _sent_ms(rec),
            budget_ms=budget,
        )
        if budget is not None:
            rec["credit"] = max(rec.get("credit", 0.0), out["played_ms"])
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


async def listen_glitch(room: RaterSockets, session: Session, msg: dict[str, Any]) -> None:
    """``listen_glitch``: a "G" mark on the stimulus being played, stored for the rater."""
    svc = room.svc
    try:
        rec = _streams(session).get((str(msg.get("assignment_id") or ""), msg.get("slot")))
        room.spend("page:" + session.session_id, *(["rater:" + rec["rater_id"]] if rec else []))
        if rec is None:
            raise InvalidRequest("no stimulus of that item was played on this page")
        rid = client_id(msg.get("report_id")) or uuid.uuid4().hex
        r = await asyncio.to_thread(svc.rater, msg.get("test_id"), msg.get("rater_token"))
        if r.rater_id != rec["rater_id"]:
            raise InvalidRequest("not your stimulus")
        kind = msg.get("kind") or None
        if kind is not None and kind not in GLITCH_KINDS:
            raise InvalidRequest("unknown glitch kind")
        pos = float(msg.get("position_ms"))
        if not 0 <= pos <= rec["duration_ms"] + 1000:
            raise InvalidRequest("position outside the clip")
        n = await asyncio.to_thread(
            svc.store.mark_count, rec["test_id"], rec["rater_id"], rec["take_id"]
        )
        if n >= MAX_MARKS_PER_ITEM:
            raise TooFast(
                f"mark not stored: {MAX_MARKS_PER_ITEM} marks are kept per stimulus and rater"
            )
        w = await asyncio.to_thread(
            svc.store.add_glitch_report,
            GlitchReport(
                report_id=rid,
                take_id=rec["take_id"],
                rater_id=rec["rater_id"],
                position_ms=pos,
                kind=kind,
                test_id=rec["test_id"],
            ),
        )
        row = await asyncio.to_thread(svc.store.glitch_report, w.id)
        if row is None:
            raise InvalidRequest("the mark was not stored")
    except (ListenlabError, ValueError, TypeError) as e:
        _err(session, msg, e, "glitch")  # which message failed (kept: the wire's value)
        return
    session.send(
        {
            "type": "listen_glitch_saved",
            "report_id": w.id,
            "position_ms": row.position_ms,
            "boundary_index": row.boundary_index,
        }
    )


HANDLERS = {"stimulus": stimulus, "play_event": play_event, "listen_glitch": listen_glitch}
"""The ``/ll/ws`` message types of the rater page and their handlers."""


def register(state: Any, svc: Listening) -> None:
    """Add the rater page's message types to the app's ``/ll/ws`` handlers."""
    room = RaterSockets(svc, state.backends)
    for kind, handler in HANDLERS.items():
        state.ws_handlers[kind] = functools.partial(handler, room)


__all__ = [
    "HANDLERS",
    "RaterSockets",
    "listen_glitch",
    "play_event",
    "register",
    "replay_take",
    "stimulus",
]
