"""The Playground page's JSON API: backends and what they can do, the voice library, a take's
audio and its machine scores, and the health check.

Every answer depends on who asks: a visitor sees and changes only the voices and takes their
browser session made (:mod:`app.web.identity`), the admin sees all (:mod:`app.web.admin`).
State comes from ``request.app.state.listenlab`` (:class:`app.state.AppState`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import FileResponse
from pydantic import BaseModel

from app.state import AppState, BackendEntry
from app.web.admin import TooManyTries, require_admin
from app.web.admin import policy as admin_policy
from app.web.identity import identity
from app.web.offload import OffloadTimeout
from app.web.openapi import DeclaredRoute, JsonBody, answer, errors, media, ok
from app.web.take_scores import TakeJob, scorer_for
from app.web.visibility import for_visitor
from backends.base import Capabilities, Voice
from backends.errors import Conflict, Forbidden, InvalidRequest, NotFound, TooMany
from backends.profile import unit_profile
from voices.clips import MAX_SECONDS, MAX_UPLOAD_BYTES, MIN_SECONDS, ClipError, prepare_clip
from voices.library import PublicVoice, VoiceLibrary

router = APIRouter(route_class=DeclaredRoute)


class Rename(BaseModel):
    """``POST /ll/api/voices/{id}/rename``: the new name (the library checks it)."""

    name: str = ""


class Share(BaseModel):
    """``POST /ll/api/voices/{id}/share``: listed for every visitor, or no longer."""

    shared: bool = True


MINE = errors(NotFound, Forbidden)
"""A voice or take that does not exist, or is another session's."""


# -- the answers (each route writes its answer from one of these; /openapi.json declares it)


@dataclass(frozen=True)
class StorageNote:
    """Whether the data survives a restart; where it is only for the admin
    (:meth:`app.config.Storage.public`)."""

    persistent: bool
    note: str


@dataclass(frozen=True)
class HealthAnswer:
    """``GET /ll/health``: the app is up, its systems' labels, and whether its data persists."""

    status: Literal["ok"]
    backends: list[str]
    storage: StorageNote


@dataclass(frozen=True)
class SystemModel:
    """The vLLM-Omni model a system runs or stands in for (:func:`model_json`)."""

    name: str
    title: str
    sample_rate: int
    channels: int
    schedule: str
    """The chunk schedule in words: ``24 kHz mono, 80 ms then 2 s chunks``."""
    stand_in: str | None
    """What a stand-in does not do (None: it is the model itself)."""


@dataclass(frozen=True)
class SystemInfo:
    """One system (backend) as the page needs it (:func:`backend_json`)."""

    label: str
    spec: str
    capabilities: Capabilities
    model: SystemModel | None
    voices: list[Voice]
    voice_error: str | None
    can_clone: bool
    clone_note: str | None
    queued: int
    active: int
    limit: int


@dataclass(frozen=True)
class Example:
    """A bundled example text (``assets/prompts/*.txt``)."""

    title: str
    text: str


@dataclass(frozen=True)
class ClipLimits:
    """What a reference clip may be (:mod:`voices.clips`)."""

    min_s: float
    max_s: float
    max_bytes: int


@dataclass(frozen=True)
class PlaygroundConfig:
    """``GET /ll/api/config``: everything the Playground page starts from."""

    default: str
    backends: list[SystemInfo]
    examples: list[Example]
    library: list[PublicVoice]
    limits: ClipLimits


@dataclass(frozen=True)
class VoiceAnswer:
    """A library voice after a rename or share."""

    voice: PublicVoice


@dataclass(frozen=True)
class ClipReport:
    """What was done to an uploaded clip (:class:`voices.clips.Clip`)."""

    duration_s: float
    trimmed_s: float
    sample_rate: int
    source_format: str


@dataclass(frozen=True)
class VoiceAdded:
    """``POST /ll/api/voices``: the saved voice and what was done to its clip."""

    voice: PublicVoice
    clip: ClipReport


@dataclass(frozen=True)
class VoiceList:
    """``GET /ll/api/voices``: the library voices this session may see."""

    voices: list[PublicVoice]


@dataclass(frozen=True)
class VoiceDeleted:
    """``DELETE /ll/api/voices/{id}``: the id of the voice deleted."""

    deleted: str


def _state(request: Request) -> AppState:
    return request.app.state.listenlab


def _who(request: Request) -> tuple[str, bool]:
    """(owner id, is admin) of this request."""
    return identity(request).owner_id, admin_policy(request).is_admin(request)


def visible_voices(
    entry: BackendEntry, voices: list[Voice], library: VoiceLibrary, owner: str, admin: bool
) -> list[Voice]:
    """A backend's voices as this visitor may see them. Built-in voices are for everyone; a
    voice uploaded to the backend's own store (a vLLM-Omni server keeps every visitor's clips
    in one list) only for the visitor whose library voice it is (or a shared one), and for the
    admin. Its transcript goes with it."""
    if admin:
        return voices
    mine, _others = library.remote_names(entry.label, owner, admin)
    return [v for v in voices if v.kind != "uploaded" or v.name in mine]


def model_json(backend) -> SystemModel | None:
    """The vLLM-Omni model a system runs or stands in for: its name, rate and channels, its
    chunk schedule in words, and what a stand-in does not do (None: no model's)."""
    unit = backend.unit
    profile = getattr(backend, "profile", None)
    if profile is None and unit is not None and unit.schedule is not None:
        profile = unit_profile(unit)
    if profile is None:
        return None
    return SystemModel(
        name=unit.name if unit is not None else profile.name,
        title=unit.title if unit is not None else profile.model,
        sample_rate=profile.sample_rate,
        channels=profile.channels,
        schedule=profile.summary(),
        stand_in=backend.note(),
    )


async def backend_json(
    entry: BackendEntry, library: VoiceLibrary, owner: str, admin: bool
) -> SystemInfo:
    """One backend as the page needs it: capabilities, the voices this visitor may see,
    whether it clones, its queue. A visitor sees a remote engine's spec and errors without
    its server's address (:func:`for_visitor`)."""
    with contextlib.suppress(Exception):  # remote engines learn their capabilities from the server
        await asyncio.wait_for(entry.backend.refresh(), 5.0)
    caps = entry.backend.capabilities
    try:
        voices = await asyncio.wait_for(entry.backend.voices(), 5.0)
        voice_error = None
    except Exception as e:  # a remote server being down must not break the page
        voices, voice_error = [], for_visitor(str(e), entry.spec, admin)
    can_clone = caps.cloning or caps.voice_library
    return SystemInfo(
        label=entry.label,
        spec=for_visitor(entry.spec, entry.spec, admin),
        capabilities=caps,
        model=model_json(entry.backend),
        voices=[
            v
            for v in visible_voices(entry, voices, library, owner, admin)
            if v.name.lower() != "default"
        ],
        voice_error=voice_error,
        can_clone=can_clone,
        clone_note=None
        if can_clone
        else f"cloning is unavailable on {entry.label}: this backend cannot clone voices",
        queued=entry.gate.queued,
        active=entry.gate.active,
        limit=entry.gate.limit,
    )


@router.get("/ll/health", responses=ok(HealthAnswer))
async def health(request: Request) -> dict[str, Any]:
    state = _state(request)
    _owner, admin = _who(request)
    kept = state.storage.public(admin) if state.storage else {"persistent": True, "note": ""}
    return answer(HealthAnswer("ok", list(state.backends), StorageNote(**kept)))


@router.get("/ll/api/config", responses=ok(PlaygroundConfig))
async def config(request: Request) -> dict[str, Any]:
    state = _state(request)
    owner, admin = _who(request)
    systems = await asyncio.gather(
        *(backend_json(e, state.library, owner, admin) for e in state.backends.values())
    )
    return answer(
        PlaygroundConfig(
            default=state.default,
            backends=list(systems),
            examples=[Example(**e) for e in state.examples],
            library=[v.public(owner, admin) for v in state.library.visible(owner, admin)],
            limits=ClipLimits(MIN_SECONDS, MAX_SECONDS, MAX_UPLOAD_BYTES),
        )
    )


@router.get("/ll/api/takes/{take_id}.wav", responses={**media("audio/wav"), **MINE})
async def take_wav(take_id: str, request: Request):
    """A take's audio: for the session that made it, or the admin."""
    store = _state(request).store
    if not take_id.isalnum():
        raise NotFound("no such take")
    info = await asyncio.to_thread(store.take_info, take_id)
    if info is None:
        raise NotFound("no such take")
    owner, admin = _who(request)
    if not admin and info.meta.get("owner") != owner:
        raise Forbidden("this take belongs to another session")
    path = store.audio_path(take_id)
    return FileResponse(path, media_type="audio/wav", filename=f"{take_id}.wav")


@router.get(
    "/ll/api/takes/{take_id}/scores",
    responses={**ok(TakeJob), **MINE, **errors(Conflict, TooMany)},
)
async def take_scores(take_id: str, request: Request) -> dict[str, Any]:
    """A take's machine scores (docs/metrics.md): stored ones at once; else the take is queued
    (one job per take, :data:`app.web.take_scores.QUEUE_LIMIT` waiting) and the page asks
    again. Only for the session that made the take, or the admin."""
    store = _state(request).store
    if not take_id.isalnum():
        raise NotFound("no such take")
    info = await asyncio.to_thread(store.take_info, take_id)
    if info is None:
        raise NotFound("no such take")
    owner, admin = _who(request)
    if not admin and info.meta.get("owner") != owner:
        raise Forbidden("this take belongs to another session")
    if info.status != "ok" or not info.frames:
        raise Conflict("only a complete take is scored")
    job = await asyncio.to_thread(scorer_for(store).request, take_id)
    return answer(job)


# -- voice library


@router.get("/ll/api/voices", responses=ok(VoiceList))
async def list_voices(request: Request) -> dict[str, Any]:
    owner, admin = _who(request)
    lib = _state(request).library
    return answer(VoiceList([v.public(owner, admin) for v in lib.visible(owner, admin)]))


@router.post("/ll/api/voices", responses={**ok(VoiceAdded), **errors(InvalidRequest)})
async def add_voice(
    request: Request,
    file: UploadFile = File(...),
    name: str = Form(""),
    ref_text: str = Form(""),
    consent: str = Form(""),
) -> dict[str, Any]:
    state = _state(request)
    data = await file.read(MAX_UPLOAD_BYTES + 1)
    await file.close()
    if len(data) > MAX_UPLOAD_BYTES:
        raise ClipError(f"the clip is over the {MAX_UPLOAD_BYTES // 2**20} MB limit")
    try:
        clip = await state.decoder.run(prepare_clip, data, file.filename)
    except OffloadTimeout:
        raise ClipError(
            f"decoding the clip took longer than {state.decoder.timeout_s:.0f} s; "
            "send a simpler file"
        ) from None
    owner, admin = _who(request)
    v = state.library.add(
        name or Path(file.filename or "voice").stem,
        clip,
        ref_text=ref_text,
        consent=consent.lower() in {"1", "true", "yes", "on"},
        owner=owner,
    )
    report = ClipReport(clip.duration_s, clip.trimmed_s, clip.sample_rate, clip.source_format)
    return answer(VoiceAdded(v.public(owner, admin), report))


@router.post(
    "/ll/api/voices/{voice_id}/rename",
    responses={**ok(VoiceAnswer), **errors(InvalidRequest), **MINE},
)
async def rename_voice(
    voice_id: str, request: Request, body: Rename = Depends(JsonBody(Rename, required=False))
) -> dict[str, Any]:
    owner, admin = _who(request)
    lib = _state(request).library
    lib.get_for(voice_id, owner, admin)
    v = lib.rename(voice_id, body.name)
    return answer(VoiceAnswer(v.public(owner, admin)))


@router.post(
    "/ll/api/voices/{voice_id}/share",
    dependencies=[Depends(require_admin)],  # runs before the body is read
    responses={**ok(VoiceAnswer), **errors(InvalidRequest, NotFound, Forbidden, TooManyTries)},
)
async def share_voice(
    voice_id: str, request: Request, body: Share = Depends(JsonBody(Share, required=False))
) -> dict[str, Any]:
    """Admin only: a shared voice is listed for, and usable by, every visitor."""
    v = _state(request).library.set_shared(voice_id, body.shared)
    return answer(VoiceAnswer(v.public(None, True)))


@router.delete("/ll/api/voices/{voice_id}", responses={**ok(VoiceDeleted), **MINE})
async def delete_voice(voice_id: str, request: Request) -> dict[str, Any]:
    state = _state(request)
    owner, admin = _who(request)
    state.library.get_for(voice_id, owner, admin)
    v = state.library.delete(voice_id)
    for label, remote in v.synced.items():
        e = state.backends.get(label)
        if e is not None:
            with contextlib.suppress(Exception):
                await e.backend.delete_voice(remote)
    return answer(VoiceDeleted(v.voice_id))


@router.get("/ll/api/voices/{voice_id}.wav", responses={**media("audio/wav"), **MINE})
async def voice_wav(voice_id: str, request: Request):
    owner, admin = _who(request)
    lib = _state(request).library
    lib.get_for(voice_id, owner, admin)
    return FileResponse(lib.root / f"{voice_id}.wav", media_type="audio/wav")


__all__ = ["backend_json", "router"]
