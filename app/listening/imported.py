"""Your own audio as listening-test stimuli: a folder ``SYSTEM/PROMPT_ID.wav`` or a CSV manifest.

Why a separate step before a test exists: a researcher's folder is untrusted input like any
upload (a symlink to ``/etc``, a ``../`` path in the manifest, a 2 GB file, a text file named
``.wav``). :func:`scan` checks the whole set (layout, names, every file decoded through
:func:`voices.clips.decode_audio`, the decoder and limits of voice uploads) and raises one
:class:`ImportProblem` naming the file, so a bad folder creates nothing.

Layouts:

* ``DIR/SYSTEM/PROMPT_ID.wav`` (or ``.flac``); optional ``DIR/prompts.csv`` with columns
  ``prompt_id,text`` (the text raters may be shown and generated systems speak).
* ``DIR/manifest.csv`` (or a CSV file given directly) with columns ``system,prompt_id,path``
  and optionally ``text``; ``path`` is relative to the CSV's folder and must stay inside it.

A system named ``natural`` (or listed in ``natural``) holds recordings of real speech: it can be
the MUSHRA reference and the MOS gold "5".

It lives with the listening tests in ``app/`` because it builds tests (the designer calls it
before one is created); nothing here analyses them.
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.config import UPLOAD_MAX_BYTES
from backends.errors import InvalidRequest
from evaluation.listening.kinds.base import TestKind
from voices.clips import MAX_UPLOAD_BYTES, ClipError, decode_audio

SYSTEM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
PROMPT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
AUDIO_SUFFIXES = (".wav", ".flac")
MANIFEST = "manifest.csv"
PROMPTS = "prompts.csv"
NATURAL = "natural"
# One set of limits for a set of stimuli, however it arrives (a folder, a manifest, a local
# ``--stimuli FILE.zip``, the upload route): docs/deploy.md's table lists them once.
MAX_FILE_BYTES = MAX_UPLOAD_BYTES
"""Per file: the voice-upload limit (10 MB, about a minute of 44.1 kHz stereo)."""
MAX_SYSTEMS = TestKind.max_systems
"""A set holds as many systems as a MOS, A/B or glitch test takes (64)."""
MAX_PROMPTS = 200
MAX_TOTAL_BYTES = UPLOAD_MAX_BYTES
"""All the files of a set together (2 GiB; an upload's own bound is
``LISTENLAB_UPLOAD_MAX_BYTES``)."""
MAX_CSV_BYTES = 2 * 1024 * 1024
MAX_CHANNELS = 2
MIN_SECONDS = 0.5
"""BS.1770 needs at least one 400 ms block to measure loudness."""
MAX_TEXT_CHARS = 600
MAX_ZIP_MEMBERS = MAX_SYSTEMS * MAX_PROMPTS + 16
"""Every file of the largest set, plus a few (prompts.csv, a README, folders)."""
MAX_ZIP_RATIO = 100
"""A member that unpacks to over 100 times its compressed size (plus 1 MB) is a zip bomb:
audio compresses at best about 3:1 (FLAC in a zip does not shrink at all)."""
MAX_ARCHIVE_RATIO = 10
"""The whole archive may unpack to at most 10 times its own size (plus
:data:`ARCHIVE_SLACK_BYTES`): many members each just under the per-member allowance (64
members of 1 MiB of zeros in a 242 KB zip) are a bomb too."""
ARCHIVE_SLACK_BYTES = 8 * 1024**2


class ImportProblem(InvalidRequest):
    """The folder or manifest cannot be imported; the message names the file and says why."""


@dataclass(frozen=True)
class ImportedAudio:
    """One decoded stimulus: int16 ``(frames, channels)`` at its own rate."""

    audio: np.ndarray
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return self.audio.shape[0] / self.sample_rate


@dataclass(frozen=True)
class ImportedSet:
    """A checked set of stimuli: every system has one file per prompt id."""

    root: Path
    systems: tuple[str, ...]
    prompt_ids: tuple[str, ...]
    texts: dict[str, str | None]
    files: dict[tuple[str, str], Path]
    natural: tuple[str, ...]

    def load(self, system: str, prompt_id: str) -> ImportedAudio:
        """Decode one file again (the set keeps paths, not audio, so memory stays bounded)."""
        return read_audio(self.files[system, prompt_id], self.root)


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def inside(path: Path, root: Path, what: str) -> Path:
    """``path`` resolved (symlinks followed); refused unless it stays inside ``root``."""
    real = path.resolve()
    if real != root and root not in real.parents:
        raise ImportProblem(f"{what} points outside the stimuli folder ({real}); refused")
    return real


def read_audio(path: Path, root: Path) -> ImportedAudio:
    """One stimulus file through the voice-upload decoder and limits, plus a stimulus's own
    rules (WAV/FLAC only, mono or stereo, >= 0.5 s, finite, not silent)."""
    root = root.resolve()
    path = path if path.is_absolute() else root / path
    name = _rel(path, root)
    real = inside(path, root, name)
    if not real.is_file():
        raise ImportProblem(f"{name} is not a file")
    size = real.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ImportProblem(
            f"{name} is {size / 1e6:.1f} MB; a stimulus file may be at most "
            f"{MAX_FILE_BYTES // 2**20} MB"
        )
    with real.open("rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    try:
        x, sr, _fmt = decode_audio(data, name, formats=("wav", "flac"))
    except ClipError as e:
        raise ImportProblem(str(e)) from None
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[1] > MAX_CHANNELS:
        raise ImportProblem(f"{name} has {x.shape[1]} channels; a stimulus is mono or stereo")
    if not np.all(np.isfinite(x)):
        raise ImportProblem(f"{name} contains invalid (non-finite) samples")
    if x.shape[0] < MIN_SECONDS * sr:
        raise ImportProblem(
            f"{name} is {x.shape[0] / sr:.2f} s long; a stimulus must be at least {MIN_SECONDS} s"
        )
    pcm = np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)
    if not pcm.any():
        raise ImportProblem(f"{name} is silent (all samples are zero)")
    return ImportedAudio(pcm, int(sr))


def _read_csv(path: Path, root: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    name = _rel(path, root)
    real = inside(path, root, name)
    if real.stat().st_size > MAX_CSV_BYTES:
        raise ImportProblem(f"{name} is over {MAX_CSV_BYTES // 2**20} MB")
    try:
        text = real.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ImportProblem(f"cannot read {name}: {e}") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    cols = set(rows[0]) if rows else set()
    missing = [c for c in required if c not in cols]
    if missing:
        raise ImportProblem(f"{name} needs the columns {', '.join(required)}; missing {missing}")
    return [{k: (v or "").strip() for k, v in r.items() if k is not None} for r in rows]


def _check_names(system: str, prompt_id: str, where: str) -> None:
    if not SYSTEM_RE.match(system):
        raise ImportProblem(
            f"{where}: system name {system!r} must be 1-40 letters, digits, '.', '-' or '_'"
        )
    if not PROMPT_RE.match(prompt_id):
        raise ImportProblem(
            f"{where}: prompt id {prompt_id!r} must be 1-64 letters, digits, '.', '-' or '_'"
        )


def _visible(entries: list[os.DirEntry]) -> list[os.DirEntry]:
    return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


def _from_folder(root: Path) -> tuple[dict[tuple[str, str], Path], dict[str, str | None]]:
    files: dict[tuple[str, str], Path] = {}
    texts: dict[str, str | None] = {}
    with os.scandir(root) as it:
        top = _visible(list(it))
    for e in top:
        p = Path(e.path)
        if e.is_symlink():
            inside(p, root, e.name)
        if e.is_dir():
            with os.scandir(p) as sub:
                for f in _visible(list(sub)):
                    fp = Path(f.path)
                    rel = f"{e.name}/{f.name}"
                    if f.is_symlink():
                        inside(fp, root, rel)
                    if f.is_dir():
                        raise ImportProblem(
                            f"{rel} is a folder; a system folder holds PROMPT_ID.wav files"
                        )
                    stem, suffix = os.path.splitext(f.name)
                    if suffix.lower() not in AUDIO_SUFFIXES:
                        raise ImportProblem(
                            f"{rel} is not a .wav or .flac file (a system folder holds only "
                            "PROMPT_ID.wav or PROMPT_ID.flac)"
                        )
                    _check_names(e.name, stem, rel)
                    if (e.name, stem) in files:
                        raise ImportProblem(f"{rel}: prompt {stem!r} has two files in {e.name}/")
                    files[e.name, stem] = fp
        elif e.name == PROMPTS:
            for r in _read_csv(p, root, ("prompt_id", "text")):
                texts[r["prompt_id"]] = r["text"] or None
        # other top-level files (a README, notes) are not stimuli and are left alone
    return files, texts


def _from_manifest(path: Path, root: Path) -> tuple[dict[tuple[str, str], Path], dict]:
    files: dict[tuple[str, str], Path] = {}
    texts: dict[str, str | None] = {}
    name = _rel(path, root)
    for i, r in enumerate(_read_csv(path, root, ("system", "prompt_id", "path")), start=2):
        where = f"{name} line {i}"
        _check_names(r["system"], r["prompt_id"], where)
        raw = r["path"]
        if not raw:
            raise ImportProblem(f"{where}: empty path")
        p = Path(raw)
        target = p if p.is_absolute() else root / p
        inside(target, root, f"{where}: path {raw!r}")
        if Path(raw).suffix.lower() not in AUDIO_SUFFIXES:
            raise ImportProblem(f"{where}: {raw} is not a .wav or .flac file")
        key = (r["system"], r["prompt_id"])
        if key in files:
            raise ImportProblem(f"{where}: {key[0]}/{key[1]} is listed twice")
        files[key] = target
        text = r.get("text") or None
        if text is not None and texts.get(r["prompt_id"]) not in (None, text):
            raise ImportProblem(f"{where}: prompt {r['prompt_id']!r} has two different texts")
        texts[r["prompt_id"]] = text or texts.get(r["prompt_id"])
    return files, texts


def unpack_zip(
    archive: str | Path,
    dest: str | Path,
    *,
    max_members: int = MAX_ZIP_MEMBERS,
    max_total: int = MAX_TOTAL_BYTES,
) -> Path:
    """Unpack an uploaded ``.zip`` of a stimuli folder into ``dest`` (a fresh temporary folder)
    and return the folder to :func:`scan` (a single top folder in the zip is stepped into).

    Refused, naming the member: absolute or ``..`` paths, symlinks, more members than a test
    can use, a member over the per-file limit or over :data:`MAX_ZIP_RATIO` times its
    compressed size; and for the archive as a whole, more than ``max_total`` bytes or more
    than :data:`MAX_ARCHIVE_RATIO` times its own size (+ :data:`ARCHIVE_SLACK_BYTES`) once
    unpacked. The sizes the headers declare are checked before anything is written, and the
    bytes are counted again while reading (headers can lie)."""
    dest = Path(dest).resolve()
    try:
        zf = zipfile.ZipFile(archive)
        size = os.path.getsize(archive)
    except (OSError, zipfile.BadZipFile) as e:
        raise ImportProblem(f"the upload is not a readable .zip ({e})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > max_members:
            raise ImportProblem(f"the .zip has {len(infos)} entries; at most {max_members}")
        budget = min(max_total, MAX_ARCHIVE_RATIO * size + ARCHIVE_SLACK_BYTES)
        for info in infos:
            _check_member(info)
        declared = sum(i.file_size for i in infos)
        if declared > budget:
            raise ImportProblem(_too_big(declared, size, max_total))
        total = 0
        for info in infos:
            target = dest / info.filename
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            total = _extract(zf, info, target, total, budget, size, max_total)
    top = [p for p in dest.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(top) == 1 and top[0].is_dir() and not (top[0] / MANIFEST).exists():
        inner = [p for p in top[0].iterdir() if p.is_dir()]
        if inner and all(
            any(q.suffix.lower() in AUDIO_SUFFIXES for q in d.iterdir()) for d in inner
        ):
            return top[0]  # the zip holds the study folder itself
    return dest


def _check_member(info: zipfile.ZipInfo) -> None:
    """No absolute or ``..`` path, no drive, no symlink; its declared size within the limits
    (they are checked again on the bytes read: :func:`_extract`)."""
    name = info.filename
    parts = Path(name).parts
    if name.startswith(("/", "\\")) or ".." in parts or ":" in name:
        raise ImportProblem(f"{name} in the .zip points outside the folder; refused")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise ImportProblem(f"{name} in the .zip is a symlink; refused")
    _member_size(name, info.file_size, info.compress_size)


def _member_size(name: str, n: int, compressed: int) -> None:
    if n > MAX_ZIP_RATIO * compressed + 2**20:
        raise ImportProblem(
            f"{name} in the .zip unpacks to over {MAX_ZIP_RATIO} times its compressed size "
            "(a zip bomb); refused"
        )
    limit = MAX_CSV_BYTES if name.lower().endswith(".csv") else MAX_FILE_BYTES
    if n > limit:
        raise ImportProblem(f"{name} in the .zip unpacks to over {limit // 2**20} MB; refused")


def _too_big(unpacked: int, size: int, max_total: int) -> str:
    if unpacked > max_total:
        return f"the .zip unpacks to over {max_total:,} bytes; refused"
    return (
        f"the .zip ({size:,} bytes) unpacks to over {MAX_ARCHIVE_RATIO} times its size (a zip "
        "bomb); refused"
    )


def _extract(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    target: Path,
    total: int,
    budget: int,
    size: int,
    max_total: int,
) -> int:
    """One member to ``target``, counted as it is read; the archive's running total after it."""
    n = 0
    with zf.open(info) as src, target.open("wb") as out:
        while block := src.read(1 << 20):
            n += len(block)
            total += len(block)
            _member_size(info.filename, n, info.compress_size)
            if total > budget:
                raise ImportProblem(_too_big(total, size, max_total))
            out.write(block)
    return total


def scan(
    source: str | Path,
    *,
    natural: tuple[str, ...] = (),
    max_systems: int = MAX_SYSTEMS,
    max_prompts: int = MAX_PROMPTS,
    check_audio: bool = True,
    max_total: int = MAX_TOTAL_BYTES,
) -> ImportedSet:
    """Check a stimuli folder (or manifest CSV) completely; raise :class:`ImportProblem`.

    Every file is decoded once here (``check_audio``) so that a damaged file is found before
    a test is created; the audio itself is decoded again when the stimuli are stored.
    """
    src = Path(source)
    if not src.exists():
        raise ImportProblem(f"no stimuli folder or manifest at {src}")
    if src.is_file():
        if src.suffix.lower() != ".csv":
            raise ImportProblem(f"{src} is a file but not a .csv manifest")
        root = src.parent.resolve()
        files, texts = _from_manifest(src.resolve(), root)
    else:
        root = src.resolve()
        man = root / MANIFEST
        files, texts = _from_manifest(man, root) if man.is_file() else _from_folder(root)
    if not files:
        raise ImportProblem(
            f"no stimuli in {src}: expected SYSTEM/PROMPT_ID.wav (or .flac) files or a "
            f"{MANIFEST} with columns system,prompt_id,path[,text]"
        )
    systems = tuple(sorted({s for s, _ in files}))
    prompt_ids = tuple(sorted({p for _, p in files}))
    if len(systems) > max_systems:
        raise ImportProblem(f"{len(systems)} systems in {src}; at most {max_systems}")
    if len(prompt_ids) > max_prompts:
        raise ImportProblem(f"{len(prompt_ids)} prompts in {src}; at most {max_prompts}")
    for s in systems:
        if s.startswith("__"):
            raise ImportProblem(f"system name {s!r} is reserved")
        missing = [p for p in prompt_ids if (s, p) not in files]
        if missing:
            other = next(o for o in systems if (o, missing[0]) in files)
            raise ImportProblem(
                f"prompts do not match across systems: {_rel(files[other, missing[0]], root)} "
                f"has no counterpart in system {s!r} (missing {', '.join(missing[:5])}"
                + (" …" if len(missing) > 5 else "")
                + ")"
            )
    for pid, text in texts.items():
        if text and len(text) > MAX_TEXT_CHARS:
            raise ImportProblem(f"the text of prompt {pid!r} is over {MAX_TEXT_CHARS} characters")
    unknown = [n for n in natural if n not in systems]
    if unknown:
        raise ImportProblem(f"natural system(s) {unknown} are not in {src}")
    total = 0
    for (s, p), path in files.items():
        rel = _rel(path, root)
        real = inside(path, root, rel)
        if not real.is_file():
            raise ImportProblem(f"{rel} (system {s}, prompt {p}) does not exist")
        total += real.stat().st_size
        if total > max_total:
            raise ImportProblem(f"the stimuli in {src} are over {max_total:,} bytes")
    if check_audio:
        for path in files.values():
            read_audio(path, root)
    nat = tuple(s for s in systems if s == NATURAL or s in natural)
    return ImportedSet(
        root=root,
        systems=systems,
        prompt_ids=prompt_ids,
        texts={p: texts.get(p) for p in prompt_ids},
        files=files,
        natural=nat,
    )


__all__ = [
    "MAX_PROMPTS",
    "MAX_SYSTEMS",
    "MAX_TOTAL_BYTES",
    "MAX_ZIP_MEMBERS",
    "ImportProblem",
    "ImportedAudio",
    "ImportedSet",
    "NATURAL",
    "read_audio",
    "scan",
    "unpack_zip",
]
