"""What the Playground's socket makes of a page's messages before and after a generation: a
``speak`` turned into a checked request (its voice, a library clone), the ``start`` and ``done``
messages, and the glitch and underrun reports stored for a take.

Why apart from :mod:`app.player.session`: the session owns the socket and the one running
generation; these are the rules for what a page may ask and what it is told, which change on
their own (a new request field, a new report).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from backends.base import SpeechRequest
from backends.errors import InvalidRequest, ListenlabError, UnknownVoice, Unsupported

if TYPE_CHECKING:
    from app.state import BackendEntry
    from evaluation.takes import Take

CLONE_PREFIX = "lib:"


class Session(Protocol):
    """What these rules read of a page's session (:class:`app.player.session.Session`)."""

    state: Any
    session_id: str
    owner: str | None
    admin: bool

    def send(self, obj: dict[str, Any] | bytes) -> None: ...


class CloneUnavailable(Unsupported):
    """The chosen backend cannot use a library voice (the page offers another backend)."""


def speak_request(entry: BackendEntry, msg: dict[str, Any]) -> tuple[SpeechRequest, str]:
    """The validated request and mode (``stream`` or ``whole``) of a ``speak`` message."""
    caps = entry.backend.capabilities
    mode = "whole" if msg.get("mode") == "whole" else "stream"
    seed = msg.get("seed")
    speed = float(msg.get("speed") or 1.0)
    if speed != 1.0 and not caps.speed:
        raise InvalidRequest(f"the {entry.label} backend has no speed control")
    if speed != 1.0 and mode == "stream" and not caps.speed_streaming:
        raise InvalidRequest(
            "speed applies only to non-streaming output on this backend (as in vLLM-Omni); "
            "untick streaming or set speed to 1"
        )
    req = SpeechRequest(
        text=str(msg.get("text") or ""),
        voice=(str(msg["voice"]) if msg.get("voice") else None),
        language=(str(msg["language"]) if msg.get("language") and caps.languages else None),
        instructions=(
            str(msg["instructions"]) if msg.get("instructions") and caps.instructions else None
        ),
        speed=speed,
        seed=(int(seed) if seed not in (None, "") and caps.seed else None),
    )
    return req.validated(), mode


def check_voice(session: Session, entry: BackendEntry, req: SpeechRequest) -> None:
    """A voice named directly must not be another visitor's clip in the backend's own
    store: it is refused as unknown, as if it were not there."""
    if session.admin or not req.voice or req.voice.startswith(CLONE_PREFIX):
        return
    _mine, others = session.state.library.remote_names(entry.label, session.owner, session.admin)
    if req.voice in others:
        raise UnknownVoice(f"unknown voice {req.voice!r}")


async def clone_request(session: Session, entry: BackendEntry, req: SpeechRequest) -> SpeechRequest:
    """Resolve a library voice (``lib:<id>``) for this backend, or say it cannot clone."""
    from dataclasses import replace

    from voices.library import sync_voice

    vid = req.voice[len(CLONE_PREFIX) :]
    lib = session.state.library
    v = lib.get_for(vid, session.owner, session.admin, use=True)  # own, shared, or admin
    caps = entry.backend.capabilities
    if caps.voice_library:
        name = await sync_voice(entry.backend, entry.label, lib, vid)
        return replace(req, voice=name)
    if caps.cloning:
        return replace(req, voice=None, ref_audio=lib.wav(vid), ref_text=v.ref_text)
    raise CloneUnavailable(
        f"cloning is unavailable on the {entry.label} backend: it cannot clone voices. "
        "Pick a backend that supports cloning (e.g. a vLLM-Omni Base model)."
    )


def start_message(
    req: SpeechRequest,
    sr: int,
    ch: int,
    token: int,
    learnt: dict | None = None,
    first: Any = None,
) -> dict[str, Any]:
    """``learnt``: the start rule's priors for this backend (``evaluation.playout.learn``);
    ``assumed``: set when the rate/channels were not read from the stream (and from what),
    taken from the first chunk's ``assumed_format`` (e.g. the remote backend's,
    ``backends/vllm_omni/remote/server.py``)."""
    return {
        "type": "start",
        "token": token,
        "take_id": req.request_id,
        "sample_rate": sr,
        "channels": ch,
        "text_chars": len(req.text),
        "learnt": learnt,
        "assumed": getattr(first, "assumed_format", None),
    }


def take_summary(take: Take | None) -> dict[str, Any]:
    """What ``done`` (or a failed stream's ``error``) tells the page of its take."""
    if take is None:
        return {}
    sr = take.sample_rate or 1
    return {
        "take_id": take.take_id,
        "ttfa_ms": take.ttfa_ms,
        "rtf": take.rtf,
        "total_ms": take.total_ms,
        "chunks": len(take.chunks),
        "frames": take.frames,
        "duration_s": take.duration_s,
        "boundaries_ms": [b * 1000.0 / sr for b in take.boundaries],
        "arrivals_ms": [c.arrival_ms for c in take.chunks],
    }


async def write_report(session: Session, msg: dict[str, Any]) -> None:
    """Store one glitch mark or underrun report of a take this page made, and answer it."""
    from app.web.inputs import client_id

    store = session.state.store
    take_id = msg["take_id"]
    try:
        if msg["type"] == "glitch":
            from app.store import GlitchReport

            kind = msg.get("kind") or None
            w = await asyncio.to_thread(
                store.add_glitch_report,
                GlitchReport(
                    report_id=client_id(msg.get("report_id")) or uuid.uuid4().hex,
                    take_id=take_id,
                    rater_id=f"playground:{session.session_id}",
                    position_ms=float(msg.get("position_ms", 0.0)),
                    kind=kind,
                    note=(str(msg.get("note"))[:500] if msg.get("note") else None),
                ),
            )
            row = store.glitch_report(w.id)
            session.send(
                {
                    "type": "glitch_saved",
                    "take_id": take_id,
                    "report_id": w.id,
                    "position_ms": row.position_ms,
                    "boundary_index": row.boundary_index,
                    "boundary_ms": row.boundary_ms,
                    "distance_ms": row.distance_ms,
                    "kind": row.kind,
                }
            )
        else:
            positions = [float(p) for p in msg.get("positions_ms") or []][:1000]
            await asyncio.to_thread(
                store.record_underruns,
                take_id,
                count=int(msg.get("count", 0)),
                stall_ms=float(msg.get("stall_ms", 0.0)),
                positions=positions,
                report_id=client_id(msg.get("report_id")) or uuid.uuid4().hex,
                rater_id=f"playground:{session.session_id}",
            )
            session.send({"type": "underruns_saved", "take_id": take_id})
    except (ListenlabError, ValueError, TypeError, KeyError) as e:
        session.send(
            {"type": "report_error", "take_id": take_id, "message": f"report not saved: {e}"}
        )
