"""A study's own audio onto the server: a resumable, streamed upload of a ``.zip``, then one
import step that checks every file and moves the set into place at once.

Why its own routes and not the designer's file box: Gradio's upload keeps the whole body
behind a 2 MiB limit (the guard's, set for a prompt ``.txt``), and a study's audio is hundreds
of megabytes that a Space's proxy, a laptop's Wi-Fi or a tired admin can cut off half-way. So:

* ``POST /ll/admin/uploads`` {name, size, key?, sha256?} -> {upload_id, offset, total,
  chunk_bytes}: starts an upload (or, with the same ``key``, finds the one to resume);
* ``PUT /ll/admin/uploads/{id}`` with ``Content-Range: bytes START-END/TOTAL``: one chunk,
  streamed to disk (never held whole in memory; at most :data:`MAX_CHUNK_BYTES` per request,
  and never past the declared total); ``START`` must be the bytes the server already has (else
  409 with ``offset``), so a cut-off chunk is simply sent again from there;
* ``GET /ll/admin/uploads/{id}`` -> {offset, total, complete}: where to resume;
* ``POST /ll/admin/uploads/{id}/import`` {}: unpacks the complete zip (member count, per-file
  size, compression ratio, paths: :func:`app.listening.imported.unpack_zip`), decodes every
  file with the folder import's decoder and limits (:func:`app.listening.imported.scan`), and
  renames the checked folder to ``<data>/stimuli/{id}`` in one step. Any problem deletes the
  whole upload (zip and unpacked files) and answers 400 naming the file: nothing is left
  half-imported, and no test or row exists until a test is created from the set;
* ``DELETE /ll/admin/uploads/{id}``; ``GET /ll/admin/uploads`` lists the unfinished uploads,
  ``GET /ll/admin/stimuli`` the imported sets.

A test is then created with ``stimuli`` set to the set's ``path`` (what the designer's
"Your own audio" box holds). Everything is admin-only (:func:`app.web.admin.require_admin`).
Unfinished uploads older than :data:`STALE_AFTER_S` are removed when a new one starts.

Disk is promised, not only checked: an upload starts only if the free disk, less what the
unfinished uploads may still write (each its zip's missing bytes and its unpacked copy), holds
the new one's zip and unpacked copy plus :data:`FREE_MARGIN_BYTES`; the check and the promise
are made under one lock, so parallel starts cannot all pass on the same free space.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from app.config import ENV_UPLOAD_MAX_BYTES, UPLOAD_MAX_BYTES, upload_max_bytes
from app.listening.imported import (
    MAX_PROMPTS,
    MAX_SYSTEMS,
    MAX_ZIP_MEMBERS,
    ImportProblem,
    scan,
    unpack_zip,
)
from app.listening.routes import ADMIN, body
from app.web.admin import require_admin
from app.web.openapi import DeclaredRoute, errors, ok
from backends.errors import Conflict, InvalidRequest, NotFound

ENV_MAX_BYTES = ENV_UPLOAD_MAX_BYTES
DEFAULT_MAX_BYTES = UPLOAD_MAX_BYTES
"""2 GiB: one upload's zip, and the same bound on what it unpacks to."""
MAX_CHUNK_BYTES = 16 * 1024**2
"""One ``PUT`` carries at most 16 MiB (the guard refuses a bigger body before it is read)."""
STALE_AFTER_S = 24 * 3600.0
FREE_MARGIN_BYTES = 256 * 1024**2
"""An upload starts only if the disk keeps this much free after the zip and its unpacked copy."""
ID_RE = re.compile(r"^[a-z0-9]{8,64}$")
UPLOADS = "uploads"
SETS = "stimuli"
SET_META = ".listenlab-set.json"
WRITE_BYTES = 1024**2
LOCK = ".uploads.lock"
"""Beside the uploads folder: held while an upload's disk is checked and promised."""
max_upload_bytes = upload_max_bytes
"""``$LISTENLAB_UPLOAD_MAX_BYTES`` (read in :mod:`app.config`)."""


class UploadTooLarge(InvalidRequest):
    """The declared or sent size is over the server's limit (or the disk's room)."""

    http_status, reason = 413, "too_large"


@dataclass(frozen=True)
class UploadInfo:
    """What the client needs to send (or resume) an upload."""

    upload_id: str
    name: str
    total: int
    offset: int
    complete: bool
    chunk_bytes: int = MAX_CHUNK_BYTES
    max_bytes: int = DEFAULT_MAX_BYTES
    imported: dict[str, Any] | None = None
    """The set this ``key`` was imported as already (then nothing needs sending)."""


@dataclass(frozen=True)
class StimulusSet:
    """An imported, checked set on the server: ``path`` is what a test spec's ``stimuli`` takes."""

    set_id: str
    name: str
    path: str
    systems: list[str]
    prompts: int
    files: int
    bytes: int
    natural: list[str]


@dataclass(frozen=True)
class UploadDeleted:
    """``DELETE /ll/admin/uploads/{id}``: the upload and its files are gone."""

    upload_id: str
    deleted: Literal[True]


@dataclass(frozen=True)
class Uploads:
    """The staging and set folders under the data folder (beside ``listenlab.db``)."""

    root: Path
    max_bytes: int

    @classmethod
    def of(cls, request: Request) -> Uploads:
        """The app's uploads; the limit from its settings (read once), else the environment."""
        store = request.app.state.listenlab.store
        web = getattr(request.app.state, "web", None)
        return cls(Path(store.root), web.upload_max_bytes if web else upload_max_bytes())

    def folder(self, upload_id: str) -> Path:
        if not ID_RE.match(upload_id or ""):
            raise NotFound("no such upload")
        return self.root / UPLOADS / upload_id

    def info(self, upload_id: str) -> UploadInfo:
        d = self.folder(upload_id)
        try:
            meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise NotFound(f"no upload {upload_id} (finished, failed or expired)") from None
        size = (d / "data.zip").stat().st_size
        total = int(meta["total"])
        return UploadInfo(
            upload_id, meta["name"], total, size, size == total, max_bytes=self.max_bytes
        )

    def start(self, name: str, total: int, key: str | None, sha256: str | None) -> UploadInfo:
        """A new upload, or the unfinished one with this ``key`` (same size) to resume."""
        if total <= 0:
            raise InvalidRequest("the upload is empty")
        if total > self.max_bytes:
            raise UploadTooLarge(
                f"{name} is {total:,} bytes; an upload may be at most {self.max_bytes:,} bytes "
                f"({ENV_MAX_BYTES})"
            )
        self.sweep()
        upload_id = key or secrets.token_hex(16)
        d = self.folder(upload_id)
        done = self.set_of(upload_id)
        if done is not None:  # the same bytes were imported before: reuse the set
            return UploadInfo(upload_id, name, total, total, True, imported=asdict(done))
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / LOCK).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one promise at a time (other replicas too)
            if (d / "meta.json").is_file():
                info = self.info(upload_id)
                if info.total == total:
                    return info
                raise Conflict(
                    f"upload {upload_id} exists with another size ({info.total:,} bytes)"
                )
            self.check_room(name, total)
            d.mkdir(parents=True, exist_ok=True)
            (d / "data.zip").touch()
            meta = {"name": name[:200], "total": total, "sha256": sha256, "started": time.time()}
            (d / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        return self.info(upload_id)

    def promised(self) -> tuple[int, int]:
        """(bytes the unfinished uploads may still write, how many there are): each its zip's
        missing bytes and its unpacked copy."""
        pending = self.pending()
        return sum(2 * u.total - u.offset for u in pending), len(pending)

    def check_room(self, name: str, total: int) -> None:
        """Refuse an upload the disk cannot hold beside what is promised already."""
        free = shutil.disk_usage(self.root).free
        promised, n = self.promised()
        need = 2 * total + FREE_MARGIN_BYTES
        if free - promised < need:
            held = f", {promised:,} of them promised to {n} unfinished upload(s)" if n else ""
            raise UploadTooLarge(
                f"not enough disk: {free:,} bytes free{held}; {name} needs {2 * total:,} (the "
                f"zip and its unpacked files) plus {FREE_MARGIN_BYTES:,} spare"
            )

    def sweep(self, now: float | None = None) -> list[str]:
        """Remove unfinished uploads untouched for :data:`STALE_AFTER_S`; their ids."""
        now = time.time() if now is None else now
        gone = []
        base = self.root / UPLOADS
        for d in base.iterdir() if base.is_dir() else ():
            newest = max((p.stat().st_mtime for p in d.iterdir()), default=d.stat().st_mtime)
            if now - newest > STALE_AFTER_S:
                shutil.rmtree(d, ignore_errors=True)
                gone.append(d.name)
        return gone

    def remove(self, upload_id: str) -> None:
        d = self.folder(upload_id)
        if not d.exists():
            raise NotFound(f"no upload {upload_id}")
        shutil.rmtree(d, ignore_errors=True)

    def pending(self) -> list[UploadInfo]:
        base = self.root / UPLOADS
        out = []
        for d in sorted(base.iterdir()) if base.is_dir() else ():
            with contextlib.suppress(NotFound, OSError):
                out.append(self.info(d.name))
        return out

    def set_of(self, set_id: str) -> StimulusSet | None:
        try:
            meta = (self.root / SETS / set_id / SET_META).read_text(encoding="utf-8")
            return StimulusSet(**json.loads(meta))
        except (OSError, ValueError, TypeError):
            return None

    def sets(self) -> list[StimulusSet]:
        base = self.root / SETS
        out = []
        for d in sorted(base.iterdir()) if base.is_dir() else ():
            with contextlib.suppress(OSError, ValueError, TypeError):
                out.append(StimulusSet(**json.loads((d / SET_META).read_text(encoding="utf-8"))))
        return out


# ------------------------------------------------------------------- one chunk, streamed


def parse_range(header: str | None, total: int) -> tuple[int, int]:
    """``bytes START-END/TOTAL`` -> (start, end exclusive), checked against the upload."""
    m = re.fullmatch(r"bytes (\d{1,15})-(\d{1,15})/(\d{1,15})", (header or "").strip())
    if not m:
        raise InvalidRequest("a chunk needs Content-Range: bytes START-END/TOTAL")
    start, last, declared = (int(g) for g in m.groups())
    if declared != total:
        raise InvalidRequest(f"Content-Range total {declared:,} is not this upload's {total:,}")
    if last < start or last >= total:
        raise InvalidRequest(f"Content-Range {start}-{last} is outside 0-{total - 1}")
    if last - start + 1 > MAX_CHUNK_BYTES:
        raise UploadTooLarge(f"a chunk may be at most {MAX_CHUNK_BYTES:,} bytes")
    return start, last + 1


async def receive_chunk(request: Request, up: Uploads, upload_id: str) -> UploadInfo:
    """Append one chunk to the upload's file as it arrives (one writer at a time: a second
    concurrent ``PUT`` gets 409). Bytes past the chunk's range are refused before they are
    written; a chunk cut off half-way keeps what arrived, and the client resumes there."""
    info = up.info(upload_id)
    start, end = parse_range(request.headers.get("content-range"), info.total)
    path = up.folder(upload_id) / "data.zip"
    with path.open("r+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Conflict("another chunk of this upload is being received") from None
        have = os.fstat(f.fileno()).st_size
        if start != have:
            raise Conflict(
                f"the server has {have:,} bytes of this upload; send from there",
                offset=have,
            )
        f.seek(have)
        await _stream_into(request, f, have, end)
    return up.info(upload_id)


async def _stream_into(request: Request, f: Any, have: int, end: int) -> None:
    """Write the body at ``have`` in 1 MiB writes off the event loop; what arrived before a
    disconnect is kept (the client resumes after it), bytes past ``end`` are not."""
    pending = bytearray()
    written = have
    try:
        async for part in request.stream():
            if written + len(pending) + len(part) > end:
                pending.clear()
                f.truncate(written)
                raise InvalidRequest(
                    f"the chunk is longer than its Content-Range ({end - have:,} bytes)"
                )
            pending += part
            if len(pending) >= WRITE_BYTES:
                await asyncio.to_thread(f.write, pending)
                written += len(pending)
                pending = bytearray()
    finally:
        if pending:
            f.write(pending)
        f.flush()


# ------------------------------------------------------------------- the import step


def import_upload(up: Uploads, upload_id: str, natural: tuple[str, ...] = ()) -> StimulusSet:
    """Unpack, check every file, and move the set into ``<data>/stimuli/{id}`` in one rename.
    On any problem the whole upload is deleted and :class:`ImportProblem` names the file."""
    info = up.info(upload_id)
    if not info.complete:
        raise Conflict(
            f"the upload has {info.offset:,} of {info.total:,} bytes; send the rest first",
            offset=info.offset,
        )
    d = up.folder(upload_id)
    with (d / "meta.json").open("rb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Conflict(f"{info.name} is being imported already") from None
        try:
            return _checked_set(up, d, info, natural)
        except ImportProblem:
            shutil.rmtree(d, ignore_errors=True)
            raise
        except Exception as e:
            shutil.rmtree(d, ignore_errors=True)
            raise ImportProblem(
                f"{info.name}: the import failed ({type(e).__name__}: {e})"
            ) from None


def _checked_set(up: Uploads, d: Path, info: UploadInfo, natural: tuple[str, ...]) -> StimulusSet:
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    if meta.get("sha256"):
        digest = hashlib.sha256()
        with (d / "data.zip").open("rb") as f:
            while block := f.read(WRITE_BYTES):
                digest.update(block)
        if digest.hexdigest() != meta["sha256"]:
            raise ImportProblem(f"{info.name}: the bytes received do not match its SHA-256")
    staging = d / "unpacked"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    root = unpack_zip(d / "data.zip", staging, max_members=MAX_ZIP_MEMBERS, max_total=up.max_bytes)
    (d / "data.zip").unlink()
    checked = scan(
        root,
        natural=natural,
        max_systems=MAX_SYSTEMS,
        max_prompts=MAX_PROMPTS,
        max_total=up.max_bytes,
    )
    final = up.root / SETS / info.upload_id
    size = sum(p.stat().st_size for p in checked.files.values())
    found = StimulusSet(
        set_id=info.upload_id,
        name=info.name,
        path=str(final),
        systems=list(checked.systems),
        prompts=len(checked.prompt_ids),
        files=len(checked.files),
        bytes=size,
        natural=list(checked.natural),
    )
    (root / SET_META).write_text(json.dumps(asdict(found)), encoding="utf-8")
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        raise ImportProblem(f"a stimulus set {info.upload_id} exists already")
    os.rename(root, final)  # one step: the set is there whole, or not at all
    shutil.rmtree(d, ignore_errors=True)
    return found


# ------------------------------------------------------------------- routes

router = APIRouter(
    route_class=DeclaredRoute,
    dependencies=[Depends(require_admin)],
    responses={**ADMIN, **errors(Conflict, UploadTooLarge)},
)
"""Admin-only: the upload and import routes."""


class StartUpload(BaseModel):
    """``POST /ll/admin/uploads``: the zip's size; a key (8-64 lowercase letters or digits)
    and sha256 to resume the same file."""

    size: int = Field(description="The number of bytes of the .zip")
    name: str = "upload.zip"
    key: str | None = None
    sha256: str | None = None


class ImportUpload(BaseModel):
    """``POST /ll/admin/uploads/{id}/import``: the systems that are natural recordings."""

    natural: list[str] | str = []


CHUNK = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
    "parameters": [
        {
            "name": "Content-Range",
            "in": "header",
            "required": True,
            "schema": {"type": "string"},
            "description": "bytes START-END/TOTAL",
        }
    ],
}
"""A chunk is raw bytes at the range its header names (:func:`receive_chunk` reads them)."""


@router.post("/ll/admin/uploads", responses=ok(UploadInfo))
async def start_upload(request: Request, b: dict = body(StartUpload)) -> dict[str, Any]:
    key = b.get("key") or None
    if key is not None and not ID_RE.match(str(key)):
        raise InvalidRequest("key: 8-64 lowercase letters or digits")
    sha = b.get("sha256") or None
    if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", str(sha)):
        raise InvalidRequest("sha256: 64 lowercase hex digits")
    try:
        total = int(b.get("size"))
    except (TypeError, ValueError):
        raise InvalidRequest("size: the number of bytes of the .zip") from None
    name = str(b.get("name") or "upload.zip")
    up = Uploads.of(request)
    info = await asyncio.to_thread(up.start, name, total, key, sha)
    return asdict(info)


@router.get("/ll/admin/uploads", responses=ok(UploadInfo, "uploads"))
async def list_uploads(request: Request) -> dict[str, Any]:
    """Unfinished uploads (to resume or delete)."""
    return {"uploads": [asdict(u) for u in await asyncio.to_thread(Uploads.of(request).pending)]}


@router.get("/ll/admin/uploads/{upload_id}", responses=ok(UploadInfo))
async def upload_status(request: Request, upload_id: str) -> dict[str, Any]:
    return asdict(await asyncio.to_thread(Uploads.of(request).info, upload_id))


@router.put("/ll/admin/uploads/{upload_id}", openapi_extra=CHUNK, responses=ok(UploadInfo))
async def upload_chunk(request: Request, upload_id: str) -> dict[str, Any]:
    return asdict(await receive_chunk(request, Uploads.of(request), upload_id))


@router.delete("/ll/admin/uploads/{upload_id}", responses=ok(UploadDeleted))
async def delete_upload(request: Request, upload_id: str) -> dict[str, Any]:
    await asyncio.to_thread(Uploads.of(request).remove, upload_id)
    return asdict(UploadDeleted(upload_id, deleted=True))


@router.post("/ll/admin/uploads/{upload_id}/import", responses=ok(StimulusSet))
async def import_route(
    request: Request, upload_id: str, b: dict = body(ImportUpload, required=False)
) -> dict[str, Any]:
    natural = b.get("natural") or []
    if isinstance(natural, str):
        natural = [natural]
    if not isinstance(natural, list) or len(natural) > MAX_SYSTEMS:
        raise InvalidRequest("natural: a list of system names")
    up = Uploads.of(request)
    found = await asyncio.to_thread(import_upload, up, upload_id, tuple(str(n) for n in natural))
    return asdict(found)


@router.get("/ll/admin/stimuli", responses=ok(StimulusSet, "sets"))
async def list_sets(request: Request) -> dict[str, Any]:
    sets = await asyncio.to_thread(Uploads.of(request).sets)
    return {"sets": [asdict(s) for s in sets]}


__all__ = [
    "DEFAULT_MAX_BYTES",
    "ImportUpload",
    "StartUpload",
    "ENV_MAX_BYTES",
    "MAX_CHUNK_BYTES",
    "StimulusSet",
    "UploadDeleted",
    "UploadInfo",
    "UploadTooLarge",
    "Uploads",
    "import_upload",
    "max_upload_bytes",
    "parse_range",
    "receive_chunk",
    "router",
]
