"""The same-origin WebSocket that feeds the browser player raw PCM, one frame per chunk.

Wire protocol (``/ll/ws``), per generation token chosen by the page:

* page -> server JSON: ``speak`` {token, backend, text, voice, language, instructions, seed,
  speed, mode: stream|whole}, ``stop`` {token}, ``underruns`` {take_id, count, stall_ms,
  positions_ms, browser}, ``glitch`` {report_id, take_id, position_ms, kind}.
* server -> page JSON: ``queued`` {position}, ``generating``, ``start`` {sample_rate,
  channels, take_id}, ``done`` {ttfa_ms, rtf, ...}, ``error`` {message, partial},
  ``cancelled``, ``findings``, ``glitch_saved``, ``underruns_saved``; ``report_error``
  {take_id, message} for a report that could not be stored (it carries no generation token,
  so it can never end a playing stream).
* server -> page binary: a 12-byte little-endian header ``<u32 token, u32 chunk index,
  f32 server arrival ms>`` then the chunk's int16 interleaved PCM.

Every message carries the token, so the page drops whatever belongs to a stopped generation.
Everything a session owns (its task, queued reports, the send queue) lives on the
:class:`Session` object and is freed when the socket closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from app.player.messages import (
    CLONE_PREFIX,
    CloneUnavailable,
    check_voice,
    clone_request,
    speak_request,
    start_message,
    take_summary,
    write_report,
)
from app.web.outbox import CLOSE_CODE, CLOSE_REASON, Outbox
from backends.base import Backend, SpeechRequest
from backends.errors import InvalidRequest, ListenlabError
from evaluation.takes import ChunkRecord, Recorder, Take, TakeFailed

if TYPE_CHECKING:
    from app.state import AppState, BackendEntry

log = logging.getLogger("listenlab.app")

HEADER = struct.Struct("<IIf")
"""token, chunk index, server arrival ms since the request started."""
MAX_MESSAGE_CHARS = 64_000
MAX_PENDING_REPORTS = 500
"""Reports held for one take while it is still generating (a page sends a handful)."""


@dataclass
class Generation:
    token: int
    task: asyncio.Task
    take_id: str | None = None


@dataclass
class Session:
    """One browser page: its socket, its running generation and its unsaved reports."""

    ws: WebSocket
    state: AppState
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    outbox: Outbox = field(default_factory=Outbox)
    """Byte-budgeted (:mod:`app.web.outbox`): a page that does not read is slowed, then closed."""
    current: Generation | None = None
    saved: set[str] = field(default_factory=set)
    pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Reports (glitch, underruns) for takes of this session that are not saved yet."""
    mine: set[str] = field(default_factory=set)
    """Take ids generated in this session: reports for other takes are refused."""
    replayed: set[str] = field(default_factory=set)
    """Stored takes this page was sent but did not make (listening-test stimuli)."""
    owner: str | None = None
    """Owner id of the browser session (``app.web.identity``): its takes and library voices."""
    admin: bool = False
    rooms: dict[str, Any] = field(default_factory=dict)
    """What another room keeps for this page, by room (the listening room's blind streams),
    so no room writes into this object's attributes."""
    _cancelled: Take | None = None
    """The partial take of the generation being cancelled (one generation runs at a time)."""

    def send(self, obj: dict[str, Any] | bytes) -> None:
        self.outbox.put_nowait(obj)

    async def writer(self) -> None:
        while True:
            m = await self.outbox.get()
            if m is None:
                return
            if isinstance(m, bytes):
                await self.ws.send_bytes(m)
            else:
                await self.ws.send_text(m)  # serialised when queued (its size is counted)

    # -- page messages

    async def handle(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "speak":
            await self.begin(int(msg.get("token", 0)) & 0xFFFFFFFF, lambda t: self.generate(t, msg))
        elif kind == "stop":
            tok = msg.get("token")
            if self.current and (tok is None or int(tok) == self.current.token):
                await self.stop()
        elif kind in {"glitch", "underruns"}:
            take_id = str(msg.get("take_id") or "")[:64]
            if take_id not in self.mine:
                # a take this page only replayed (a listening-test stimulus) is shared by every
                # rater: its metrics are not theirs to write (raters report with play events)
                why = "shared take: not yours to report on" if take_id in self.replayed else ""
                self.send(
                    {"type": "report_error", "take_id": take_id, "message": why or "unknown take"}
                )
                return
            if take_id in self.saved:
                await write_report(self, msg)
            else:
                waiting = self.pending.setdefault(take_id, [])
                if len(waiting) >= MAX_PENDING_REPORTS:  # memory per session stays bounded
                    self.send(
                        {
                            "type": "report_error",
                            "take_id": take_id,
                            "message": f"report not stored: over {MAX_PENDING_REPORTS} reports "
                            "before the take was saved",
                        }
                    )
                    return
                waiting.append(msg)
        elif kind == "ping":
            self.send({"type": "pong", "t": msg.get("t")})
        elif kind in self.state.ws_handlers:
            await self.state.ws_handlers[kind](self, msg)
        else:
            self.send({"type": "error", "message": f"unknown message type {kind!r}"})

    async def begin(self, token: int, work: Callable[[int], Awaitable[None]]) -> None:
        """Run ``work(token)`` as this page's one generation; the previous one stops first.

        The Playground's ``speak`` uses it, and so can a handler in ``AppState.ws_handlers``
        (e.g. a listening-test stimulus that the server picks, so the page never names it).
        """
        await self.stop()
        self.current = Generation(token, asyncio.create_task(work(token)))

    async def stop(self) -> None:
        """Cancel the running generation: the backend stream is closed, the take kept."""
        g, self.current = self.current, None
        if g and not g.task.done():
            g.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await g.task

    # -- generation

    async def generate(self, token: int, msg: dict[str, Any]) -> None:
        state = self.state
        label = str(msg.get("backend") or state.default)
        entry = state.backends.get(label)
        if entry is None:
            self.send({"type": "error", "token": token, "message": f"unknown backend {label!r}"})
            return
        try:
            req, mode = speak_request(entry, msg)
            check_voice(self, entry, req)
            if req.voice and req.voice.startswith(CLONE_PREFIX):
                req = await clone_request(self, entry, req)
        except CloneUnavailable as e:
            self.send({"type": "error", "token": token, "message": str(e), "clone": "unavailable"})
            return
        except (InvalidRequest, ValueError, TypeError) as e:
            self.send({"type": "error", "token": token, "message": str(e), "partial": False})
            return
        except ListenlabError as e:
            self.send({"type": "error", "token": token, "message": str(e), "partial": False})
            return
        await self.run(token, entry, req, mode)

    async def run(self, token: int, entry: BackendEntry, req: SpeechRequest, mode: str) -> None:
        """Queue for ``entry``, stream (or fetch whole) ``req`` to the page, save the take.

        The page learns only the take id, never the backend: handlers for blind tests call this
        with a system the server chose. A Stop (this task cancelled) is always answered with
        ``cancelled``, wherever it lands: in the queue, during the stream, or between the last
        frame and ``done`` (the take is then saved whole, with the marks sent for it).
        """
        self._cancelled = None
        self.mine.add(req.request_id)
        if self.current and self.current.token == token:
            self.current.take_id = req.request_id
        cancelled = {"type": "cancelled", "token": token, "take_id": req.request_id}
        try:
            outcome = await self._generate(token, entry, req, mode)
        except asyncio.CancelledError:
            take = self._cancelled
            if take is not None and take.chunks:
                await self._save_whatever(entry, take)
            self.send(cancelled)
            raise
        if outcome is None:  # refused or failed: the page has its error already
            return
        take, status_msg = outcome
        if take is not None and take.chunks:
            try:
                await self._save_whatever(entry, take)
            except asyncio.CancelledError:
                self.send(cancelled)  # a Stop after the last frame: saved, and answered
                raise
        for m in self.pending.pop(req.request_id, []):  # no audio, so nothing to attach them to
            self.send(
                {
                    "type": "error",
                    "take_id": req.request_id,
                    "message": f"{m['type']} report not stored: the take has no audio",
                }
            )
        status_msg.update(take_summary(take))
        self.send(status_msg)
        if take is not None and take.chunks:
            asyncio.create_task(self._findings(take, token))

    async def _generate(
        self, token: int, entry: BackendEntry, req: SpeechRequest, mode: str
    ) -> tuple[Take | None, dict[str, Any]] | None:
        """The take and the status to send once it is saved; None when the page was already
        told why there is none. A Stop propagates (:meth:`run` answers it)."""

        def queued(pos: int) -> None:
            self.send({"type": "queued", "token": token, "position": pos})

        learnt = await self._learnt(entry.label)
        async with entry.gate.slot(queued):
            self.send({"type": "generating", "token": token, "take_id": req.request_id})
            try:
                if mode == "whole":
                    take = await self._whole(entry.backend, req, token, learnt)
                else:
                    take = await self._stream(entry.backend, req, token, learnt)
                return take, {"type": "done", "token": token, "status": "ok"}
            except TakeFailed as e:
                return e.take, {
                    "type": "error",
                    "token": token,
                    "status": "error",
                    "message": f"the stream failed: {e}",
                    "partial": bool(e.take.chunks),
                }
            except InvalidRequest as e:
                self.send({"type": "error", "token": token, "message": str(e), "partial": False})
                return None
            except Exception as e:  # engine bug: never present it as success (a Stop passes)
                log.exception("generation failed")
                msg = f"backend error: {e}"
                self.send({"type": "error", "token": token, "message": msg, "partial": False})
                return None

    async def _save_whatever(self, entry: BackendEntry, take: Take) -> None:
        """:meth:`_save` to the end even if a Stop lands meanwhile (a take cut in its save
        would lose its row and the marks waiting for it); the Stop is re-raised after."""
        task = asyncio.ensure_future(self._save(entry, take))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await task
            raise

    async def _learnt(self, label: str) -> dict[str, Any] | None:
        """Chars -> seconds and generation rate learnt from this backend's past takes."""
        from evaluation.playout import learn

        try:
            return (await asyncio.to_thread(learn, self.state.store, label)).to_dict()
        except Exception:  # a start rule without history is still a start rule
            log.exception("learning from past takes failed")
            return None

    async def _stream(
        self, backend: Backend, req: SpeechRequest, token: int, learnt: dict | None = None
    ) -> Take:
        rec = Recorder(backend, req)
        self._cancelled = None
        n = 0
        try:
            async for c in rec:
                if n == 0:
                    self.send(start_message(req, c.sample_rate, c.channels, token, learnt, c))
                head = HEADER.pack(token, n, (c.arrived - rec.t0) * 1000.0)
                self.send(head + c.pcm.astype("<i2", copy=False).tobytes())
                n += 1
        except asyncio.CancelledError:
            self._cancelled = rec.take
            raise
        assert rec.take is not None
        return rec.take

    async def _whole(
        self, backend: Backend, req: SpeechRequest, token: int, learnt: dict | None = None
    ) -> Take:
        """Non-streaming: one request for the whole file (speed is a post-hoc stretch there)."""
        t0 = time.monotonic()
        audio = await backend.synthesize(req)
        ms = (time.monotonic() - t0) * 1000.0
        pcm = np.ascontiguousarray(audio.samples, dtype=np.int16)
        take = Take(
            request=req,
            backend=backend.describe(),
            sample_rate=audio.sample_rate,
            channels=audio.channels,
            chunks=[ChunkRecord(0, ms, 0, pcm.shape[0])],
            audio=pcm,
            total_ms=ms,
            take_id=req.request_id,
            meta={"mode": "whole"},
        )
        self.send(start_message(req, audio.sample_rate, audio.channels, token, learnt, audio))
        self.send(HEADER.pack(token, 0, ms) + pcm.astype("<i2").tobytes())
        return take

    async def _save(self, entry: BackendEntry, take: Take) -> None:
        take.meta.setdefault("session", self.session_id)
        if self.owner:
            take.meta.setdefault("owner", self.owner)
        take.meta.setdefault("backend_label", entry.label)
        try:
            await asyncio.to_thread(self.state.save_take, entry, take)
        except Exception as e:  # the stream itself was fine; say the take was not kept
            log.exception("saving take failed")
            self.send(
                {"type": "report_error", "take_id": take.take_id, "message": f"take not saved: {e}"}
            )
            return
        self.saved.add(take.take_id)
        for m in self.pending.pop(take.take_id, []):
            await write_report(self, m)

    async def _findings(self, take: Take, token: int) -> None:
        try:
            found = await asyncio.to_thread(self.state.detect, take)
        except Exception as e:
            log.exception("glitch detector failed")
            self.send(
                {
                    "type": "findings",
                    "token": token,
                    "take_id": take.take_id,
                    "available": False,
                    "note": f"detector failed: {e}",
                    "findings": [],
                }
            )
            return
        if found is None:
            self.send(
                {
                    "type": "findings",
                    "token": token,
                    "take_id": take.take_id,
                    "available": False,
                    "note": "no automatic detector installed",
                    "findings": [],
                }
            )
            return
        self.send(
            {
                "type": "findings",
                "token": token,
                "take_id": take.take_id,
                "available": True,
                "findings": found,
                "checks": getattr(found, "checks", None),
            }
        )


def _field_error(e: Exception) -> str:
    """A user-level reason for a bad field (never a repr of an internal object)."""
    if isinstance(e, KeyError):
        return f"missing field {e.args[0]!r}"
    text = str(e)
    if "invalid literal for int" in text or "int()" in text:
        return "token must be an integer"
    if "could not convert" in text or "float()" in text:
        return "a numeric field is not a number"
    return text[:200] or type(e).__name__


def new_session(ws: WebSocket, state: AppState) -> Session:
    """The page's session: its owner, whether it is the admin, its outbox's stall time (from
    the app's settings, read once)."""
    from app.web.admin import policy as admin_policy
    from app.web.identity import identity

    web = getattr(ws.app.state, "web", None)
    return Session(
        ws,
        state,
        outbox=Outbox(stall_s=web.ws_stall_s) if web is not None else Outbox(),
        owner=identity(ws).owner_id,
        admin=admin_policy(ws).is_admin(ws),
    )


async def serve_session(ws: WebSocket, state: AppState) -> None:
    """One page's socket. A malformed message gets an ``error`` (no token, so it never ends a
    playing stream) and the socket stays open: binary frames, bad JSON, too deep or too big
    messages, wrong field types."""
    from app.web.inputs import loads_limited

    await ws.accept()
    session = new_session(ws, state)
    writer = asyncio.create_task(session.writer())
    closing: list[asyncio.Task] = []

    async def drop() -> None:
        """The page stopped reading: end its generation, send a close (1008) and drop the
        connection (the close frame waits behind unread data the client will never read)."""
        from app.web.guard import ABORT_KEY

        await session.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(CLOSE_CODE, CLOSE_REASON), 2.0)
        abort = ws.scope.get(ABORT_KEY)
        if abort is not None:
            abort()

    session.outbox.on_overflow = lambda: closing.append(asyncio.ensure_future(drop()))
    session.send({"type": "hello", "session": session.session_id})
    try:
        while True:
            # over the send budget: take no more requests until the page reads (or drop it)
            if not await session.outbox.wait_for_room():
                if not closing:
                    closing.append(asyncio.ensure_future(drop()))
                break
            frame = await ws.receive()
            if frame["type"] == "websocket.disconnect":
                break
            raw = frame.get("text")
            if raw is None:
                session.send(
                    {"type": "error", "message": "binary frames are not accepted: send JSON text"}
                )
                continue
            if len(raw) > MAX_MESSAGE_CHARS:
                session.send(
                    {
                        "type": "error",
                        "message": f"message too large ({len(raw)} characters; the limit is "
                        f"{MAX_MESSAGE_CHARS})",
                    }
                )
                continue
            try:
                msg = loads_limited(raw)
                if not isinstance(msg, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                session.send({"type": "error", "message": f"messages must be JSON objects ({e})"})
                continue
            try:
                await session.handle(msg)
            except (ValueError, TypeError, KeyError, OverflowError) as e:
                kind = str(msg.get("type"))[:40]
                session.send(
                    {"type": "error", "message": f"malformed {kind!r} message: {_field_error(e)}"}
                )
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        await session.stop()  # closing the page stops its generation on the backend
        for t in closing:
            with contextlib.suppress(Exception):
                await t
        session.outbox.put_nowait(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 1.0)
        writer.cancel()


router = APIRouter()


@router.websocket("/ll/ws")
async def player_socket(websocket: WebSocket) -> None:
    """The player's socket for every page of ``listenlab serve`` (Playground, arena, raters)."""
    await serve_session(websocket, websocket.app.state.listenlab)
