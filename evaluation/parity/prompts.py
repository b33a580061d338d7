"""The prompts of a parity run: a CSV of ``id,text`` with optional ``voice``, ``ref_audio`` and
``ref_text`` (clone prompts).

Why its own reader: the file comes from an integrator's phase one (the upstream samples saved
with their texts and voices) and is untrusted input like any other: its size is bounded before
it is read, every id must be a plain file stem (it names ``<id>.wav``), a text must fit a
request, and a ``ref_audio`` path is resolved against the CSV's folder and must name a file
that exists, checked before anything is rendered or scored.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from backends.base import MAX_TEXT_CHARS, clean_text
from backends.errors import InvalidRequest, NotFound

MAX_CSV_BYTES = 4 * 1024 * 1024
"""Largest prompts CSV read."""
MAX_PROMPTS = 2000
"""Most prompts in one run (each is rendered and scored on both sides)."""
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""A prompt id names a file (``<id>.wav``): letters, digits, ``_ . -``, at most 64."""
COLUMNS = ("id", "text", "voice", "ref_audio", "ref_text")


@dataclass(frozen=True)
class ParityPrompt:
    """One prompt: what both sides say, and the voice they say it in."""

    prompt_id: str
    text: str
    voice: str | None = None
    """A named voice of the backend (sent as the request's ``voice``)."""
    ref_audio: str | None = None
    """A clone prompt's reference clip (absolute path); also the voice speaker similarity is
    measured against."""
    ref_text: str | None = None

    @property
    def voice_key(self) -> str:
        """Prompts that share a voice (the speaker-similarity centroid is per voice)."""
        return self.ref_audio or self.voice or ""

    def to_dict(self) -> dict[str, str | None]:
        return {
            "id": self.prompt_id,
            "text": self.text,
            "voice": self.voice,
            "ref_audio": self.ref_audio,
            "ref_text": self.ref_text,
        }


def _row(r: dict[str, str | None], line: int, where: Path) -> ParityPrompt:
    pid = (r.get("id") or "").strip()
    if not ID_RE.match(pid):
        raise InvalidRequest(
            f"{where} line {line}: id {pid!r} must be 1-64 letters, digits, '_', '.' or '-' "
            "(it names the file <id>.wav)"
        )
    text = clean_text(r.get("text") or "")
    if not text:
        raise InvalidRequest(f"{where} line {line}: prompt {pid!r} has no text")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidRequest(
            f"{where} line {line}: prompt {pid!r} is {len(text)} characters; at most "
            f"{MAX_TEXT_CHARS}"
        )
    ref = (r.get("ref_audio") or "").strip() or None
    if ref is not None:
        p = Path(ref) if Path(ref).is_absolute() else where.parent / ref
        if not p.is_file():
            raise NotFound(f"{p}: no such file (ref_audio of prompt {pid!r}, {where} line {line})")
        ref = str(p.resolve())
    return ParityPrompt(
        pid,
        text,
        (r.get("voice") or "").strip() or None,
        ref,
        clean_text(r.get("ref_text") or "") or None,
    )


def read_prompts(path: str | Path) -> list[ParityPrompt]:
    """The prompts of ``path`` (header row required: ``id,text`` and any of ``voice``,
    ``ref_audio``, ``ref_text``); every problem names the file and the line."""
    p = Path(path)
    if not p.is_file():
        raise NotFound(f"{p}: no such prompts file")
    if p.stat().st_size > MAX_CSV_BYTES:
        raise InvalidRequest(f"{p} is larger than {MAX_CSV_BYTES // 2**20} MiB")
    try:
        reader = csv.DictReader(io.StringIO(p.read_text(encoding="utf-8-sig")))
        rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as e:
        raise InvalidRequest(f"{p} is not a UTF-8 CSV file ({e})") from None
    head = [h.strip() for h in reader.fieldnames or []]
    if not {"id", "text"} <= set(head):
        raise InvalidRequest(f"{p} needs a header row with the columns id,text")
    unknown = [h for h in head if h and h not in COLUMNS]
    if unknown:
        raise InvalidRequest(
            f"{p}: unknown column(s) {', '.join(unknown)}; known: {', '.join(COLUMNS)}"
        )
    if len(rows) > MAX_PROMPTS:
        raise InvalidRequest(f"{p} has {len(rows)} prompts; at most {MAX_PROMPTS}")
    out = [
        _row({(k or "").strip(): v for k, v in r.items()}, i + 2, p)
        for i, r in enumerate(rows)
        if any((v or "").strip() for v in r.values() if isinstance(v, str))
    ]
    if not out:
        raise InvalidRequest(f"{p}: no prompts")
    seen: set[str] = set()
    for q in out:
        if q.prompt_id in seen:
            raise InvalidRequest(f"{p}: prompt id {q.prompt_id!r} appears twice")
        seen.add(q.prompt_id)
    return out


def prompts_from_dicts(rows: list[dict[str, str | None]], where: Path) -> list[ParityPrompt]:
    """Prompts stored in a ``parity.json`` (``--baseline``), checked like a CSV's rows."""
    return [_row(r, i + 1, where) for i, r in enumerate(rows)]


__all__ = [
    "COLUMNS",
    "ID_RE",
    "MAX_CSV_BYTES",
    "MAX_PROMPTS",
    "ParityPrompt",
    "prompts_from_dicts",
    "read_prompts",
]
