"""The voice library: cloned voices saved on the server, listed, used, renamed, deleted.

Each voice is ``<id>.wav`` + ``<id>.json`` in one folder, where ``<id>`` is a random hex id the
server made. The user's name is only metadata (sanitised, unique case-insensitively per owner),
so no name or path from a user ever reaches the filesystem.

Ownership: a voice records the ``owner`` id (see :mod:`app.web.identity`) of the session that saved
it. Only that owner or the admin may see its transcript and clip, rename or delete it; others
see it only when the admin marked it ``shared`` (then they may speak with it, by name). A voice
saved before owners existed has none: only the admin sees it until the admin shares it.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic.json_schema import SkipJsonSchema

from backends.base import Backend, Voice
from backends.errors import Forbidden, InvalidRequest, NotFound, Unsupported
from voices.clips import Clip

MAX_NAME = 48
_ID_RE = re.compile(r"^[0-9a-f]{32}$")
_NAME_BAD = re.compile(r"[^\w .\-']+", re.UNICODE)


class VoiceNotFound(NotFound):
    pass


class VoiceForbidden(Forbidden):
    """The voice exists but belongs to another session."""


def sanitize_name(name: str) -> str:
    """Letters, digits, space, ``_ . - '``; no leading dots; at most 48 characters."""
    if not isinstance(name, str):
        raise InvalidRequest("a voice name must be text")
    s = unicodedata.normalize("NFC", name)
    s = _NAME_BAD.sub(" ", s)
    s = re.sub(r"\.{2,}", " ", s)  # no ".." anywhere, even though names are never paths
    s = re.sub(r"\s+", " ", s).strip().lstrip(".").strip()
    s = s[:MAX_NAME].strip()
    if not s:
        raise InvalidRequest("the voice needs a name (letters or digits)")
    return s


Absent = SkipJsonSchema[None]
"""A key a page's answer leaves out when None (``app.web.openapi.answer``)."""


@dataclass(frozen=True, kw_only=True)
class PublicVoice:
    """A library voice as a page sees it (:meth:`SavedVoice.public`): never its owner id; its
    transcript, consent and backend names only for its owner or the admin (else absent)."""

    voice_id: str
    name: str
    ref_text: str | Absent = None
    consent: str | Absent = None
    sample_rate: int
    duration_s: float
    created_at: str
    synced: dict[str, str] | Absent = None
    """Backend label -> name under which the voice was uploaded there."""
    shared: bool
    mine: bool
    """Whether this session (or the admin) owns it: may rename, delete, read its transcript."""


@dataclass(frozen=True)
class SavedVoice:
    voice_id: str
    name: str
    ref_text: str
    consent: str
    sample_rate: int
    duration_s: float
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    synced: dict[str, str] = field(default_factory=dict)
    """Backend label -> name under which the voice was uploaded there."""
    owner: str | None = None
    """Owner id of the session (or rater) that saved it; never sent to a page."""
    shared: bool = False
    """Set by the admin: every visitor may list it and speak with it."""

    def to_dict(self) -> dict:
        return asdict(self)

    def owned_by(self, owner: str | None, admin: bool = False) -> bool:
        return admin or (owner is not None and self.owner == owner)

    def usable_by(self, owner: str | None, admin: bool = False) -> bool:
        return self.shared or self.owned_by(owner, admin)

    def public(self, owner: str | None, admin: bool = False) -> PublicVoice:
        """What a page may see: no owner id; transcript and consent only for owner/admin."""
        mine = self.owned_by(owner, admin)
        return PublicVoice(
            voice_id=self.voice_id,
            name=self.name,
            ref_text=self.ref_text if mine else None,
            consent=self.consent if mine else None,
            sample_rate=self.sample_rate,
            duration_s=self.duration_s,
            created_at=self.created_at,
            synced=dict(self.synced) if mine else None,
            shared=self.shared,
            mine=mine,
        )


_FIELDS = frozenset(SavedVoice.__dataclass_fields__)


class VoiceLibrary:
    """Folder-backed library. Thread-safe; every method re-reads the folder (no cached state)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _meta_path(self, voice_id: str) -> Path:
        if not _ID_RE.match(voice_id or ""):
            raise VoiceNotFound(f"no voice with id {voice_id!r}")
        return self.root / f"{voice_id}.json"

    def list(self) -> list[SavedVoice]:
        out = []
        for p in sorted(self.root.glob("*.json")):
            try:
                d = json.loads(p.read_text(encoding="utf-8"))
                out.append(SavedVoice(**{k: d[k] for k in d if k in _FIELDS}))
            except (ValueError, TypeError):
                continue  # a half-written or foreign file is not a voice
        return sorted(out, key=lambda v: v.name.lower())

    def get(self, voice_id: str) -> SavedVoice:
        p = self._meta_path(voice_id)
        if not p.is_file():
            raise VoiceNotFound(f"no voice with id {voice_id!r}")
        d = json.loads(p.read_text(encoding="utf-8"))
        return SavedVoice(**{k: d[k] for k in d if k in _FIELDS})

    def visible(self, owner: str | None, admin: bool = False) -> list[SavedVoice]:
        """The voices this owner may list: their own and shared ones (all of them for admin)."""
        return [v for v in self.list() if v.usable_by(owner, admin)]

    def remote_names(self, label: str, owner: str | None, admin: bool = False) -> tuple[set, set]:
        """The names this library's voices have in backend ``label``'s own voice store, split
        into (usable by this owner, everyone else's): a server-side store keeps every
        visitor's clips under one list, so the Playground must filter it."""
        mine, others = set(), set()
        for v in self.list():
            name = v.synced.get(label)
            if name:
                (mine if v.usable_by(owner, admin) else others).add(name)
        return mine, others

    def get_for(
        self, voice_id: str, owner: str | None, admin: bool = False, *, use: bool = False
    ) -> SavedVoice:
        """The voice if ``owner`` may manage it (or, with ``use``, speak with a shared one);
        :class:`VoiceForbidden` (403) otherwise. Ids are random 128-bit, so saying "not yours"
        rather than "not found" tells a prober nothing useful."""
        v = self.get(voice_id)
        if v.owned_by(owner, admin) or (use and v.shared):
            return v
        raise VoiceForbidden(
            "this voice belongs to another browser session: only its owner or the admin can "
            + ("use it" if use else "see its clip and transcript, rename or delete it")
        )

    def set_shared(self, voice_id: str, shared: bool) -> SavedVoice:
        """Admin action: make a voice usable by every visitor (or private again)."""
        with self._lock:
            v = SavedVoice(**{**self.get(voice_id).to_dict(), "shared": bool(shared)})
            self._write(v)
        return v

    def wav(self, voice_id: str) -> bytes:
        self.get(voice_id)
        return (self.root / f"{voice_id}.wav").read_bytes()

    def _check_unique(self, name: str, owner: str | None, except_id: str | None = None) -> None:
        """Unique per owner: another session's names are neither visible nor blocking."""
        for v in self.list():
            if v.owner != owner:
                continue
            if v.name.lower() == name.lower() and v.voice_id != except_id:
                raise InvalidRequest(f"a voice named {v.name!r} already exists; pick another name")

    def _write(self, v: SavedVoice) -> None:
        p = self._meta_path(v.voice_id)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(json.dumps(v.to_dict(), indent=1), encoding="utf-8")
        tmp.replace(p)

    def add(
        self,
        name: str,
        clip: Clip,
        *,
        ref_text: str,
        consent: bool | str,
        owner: str | None = None,
    ) -> SavedVoice:
        """Save a validated clip. A transcript and the speaker's consent are required."""
        if not consent:
            raise InvalidRequest(
                "tick the consent box: the speaker must agree to having their voice cloned"
            )
        ref_text = (ref_text or "").strip()
        if not ref_text:
            raise InvalidRequest("add the transcript of the clip (what is said in it)")
        name = sanitize_name(name)
        with self._lock:
            self._check_unique(name, owner)
            v = SavedVoice(
                voice_id=uuid.uuid4().hex,
                name=name,
                ref_text=ref_text[:1000],
                consent=consent if isinstance(consent, str) else "consent given in the UI",
                sample_rate=clip.sample_rate,
                duration_s=clip.duration_s,
                owner=owner,
            )
            wav = self.root / f"{v.voice_id}.wav"
            tmp = wav.with_name(f".{wav.name}.tmp")
            tmp.write_bytes(clip.wav)
            tmp.replace(wav)
            self._write(v)
        return v

    def rename(self, voice_id: str, new_name: str) -> SavedVoice:
        name = sanitize_name(new_name)
        with self._lock:
            v = self.get(voice_id)
            self._check_unique(name, v.owner, except_id=voice_id)
            v = SavedVoice(**{**v.to_dict(), "name": name, "synced": {}})
            self._write(v)
        return v

    def mark_synced(self, voice_id: str, backend_label: str, remote_name: str) -> SavedVoice:
        with self._lock:
            v = self.get(voice_id)
            v = SavedVoice(**{**v.to_dict(), "synced": {**v.synced, backend_label: remote_name}})
            self._write(v)
        return v

    def delete(self, voice_id: str) -> SavedVoice:
        with self._lock:
            v = self.get(voice_id)
            (self.root / f"{voice_id}.wav").unlink(missing_ok=True)
            self._meta_path(voice_id).unlink(missing_ok=True)
        return v


def remote_name(v: SavedVoice) -> str:
    """Name used on a server's ``/v1/audio/voices``: no ``/ \\`` or NUL, lower-case, unique."""
    base = re.sub(r"[^a-z0-9_-]+", "_", v.name.lower()).strip("_") or "voice"
    return f"ll_{base}_{v.voice_id[:6]}"


async def sync_voice(backend: Backend, label: str, lib: VoiceLibrary, voice_id: str) -> str:
    """Upload a library voice to a backend's own voice store; return the name to use there.

    Raises :class:`Unsupported` for backends without a voice library (they clone inline).
    """
    v = lib.get(voice_id)
    if not backend.capabilities.voice_library:
        raise Unsupported(f"the {label} backend has no voice library to sync to")
    if label in v.synced:
        return v.synced[label]
    name = remote_name(v)
    stored: Voice = await backend.add_voice(
        name, lib.wav(voice_id), ref_text=v.ref_text, consent=v.consent
    )
    lib.mark_synced(voice_id, label, stored.name or name)
    return stored.name or name


__all__ = [
    "PublicVoice",
    "SavedVoice",
    "VoiceForbidden",
    "VoiceLibrary",
    "VoiceNotFound",
    "remote_name",
    "sanitize_name",
    "sync_voice",
]
