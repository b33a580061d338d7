"""The two sides of a parity run: a folder of ``<id>.wav`` files, or a backend rendered now.

Why takes and not bare audio: a take carries its chunk timeline (TTFA, RTF, the seams the glitch
detector checks), so a side rendered from a backend is measured as it streamed. A folder's files
are untrusted input: each is read through the bounded decoder (size before reading, header before
decoding), and a missing or unreadable file fails the run before anything is rendered or scored,
naming the file. A ``<id>.take.json`` beside a file (what a parity run writes) gives its
timeline back, so a stored run can be a reference with its latencies (``--baseline``).

Layout (read and written): take 1 of prompt ``id`` is ``DIR/<id>.wav`` (or ``.flac``), take k
is ``DIR/take<k>/<id>.wav``, so a run's ``audio/candidate/`` folder is a plain folder of
``<id>.wav`` files any tool reads.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from backends.base import Backend, SpeechRequest
from backends.errors import InvalidRequest, ListenlabError, NotFound
from evaluation.parity.prompts import ParityPrompt
from evaluation.takes import ChunkRecord, Take, TakeFailed, load, record

Kind = Literal["backend", "folder"]
MAX_TAKES = 20
"""Most takes per prompt (``--takes``)."""
MAX_SIDECAR_BYTES = 2 * 1024 * 1024
AUDIO_SUFFIXES = (".wav", ".flac")
Key = tuple[str, int]
"""(prompt id, take number from 1)."""


@dataclass
class Side:
    """One side's takes and what is known about where they came from."""

    role: str
    source: str
    kind: Kind
    takes: dict[Key, Take] = field(default_factory=dict)
    errors: dict[Key, str] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    """The backend's self-report (:func:`evaluation.parity.server.self_report`); a folder's
    path and file count."""
    deterministic: bool | None = None
    seconds: float = 0.0
    load_ms: float | None = None

    def takes_of(self, prompt_id: str) -> list[Take]:
        return [t for (p, _), t in sorted(self.takes.items()) if p == prompt_id]

    @property
    def takes_per_prompt(self) -> int:
        return max((k for _, k in self.takes), default=0)


def take_path(folder: Path, prompt_id: str, k: int, suffix: str = ".wav") -> Path:
    """Where take ``k`` of a prompt lives in a side's folder (see the module docstring)."""
    return (folder if k == 1 else folder / f"take{k}") / f"{prompt_id}{suffix}"


def looks_like_folder(raw: str) -> bool:
    """A side that is a folder (it exists as one, or is written as a path and not a spec)."""
    if Path(raw).expanduser().is_dir():
        return True
    if "://" in raw or "?" in raw:
        return False
    return raw.startswith((".", "/", "~")) or "/" in raw or "\\" in raw


def read_audio_take(path: Path, prompt: ParityPrompt, backend: str) -> Take:
    """A take from one audio file (bounded decoding), with its sidecar's timeline if any."""
    from backends.audio import ALLOWED_FORMATS, decode_audio
    from evaluation.metrics.audio import MAX_FILE_BYTES

    what = str(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidRequest(
            f"{what} is {size / 2**20:.0f} MiB; at most {MAX_FILE_BYTES // 2**20} MiB"
        )
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    samples, rate, _ = decode_audio(data, what, mono=False, formats=ALLOWED_FORMATS)
    if samples.ndim == 1:
        samples = samples[:, None]
    if len(samples) == 0:
        raise InvalidRequest(f"{what} has no samples")
    if not np.all(np.isfinite(samples)):
        raise InvalidRequest(f"{what} has NaN or infinite samples")
    pcm = np.clip(np.rint(samples * 32768.0), -32768, 32767).astype(np.int16)
    chunks, total_ms = _sidecar(path, len(pcm))
    return Take(
        request=SpeechRequest(text=prompt.text, voice=prompt.voice, ref_text=prompt.ref_text),
        backend=backend,
        sample_rate=int(rate),
        channels=int(pcm.shape[1]),
        chunks=chunks or [ChunkRecord(0, 0.0, 0, len(pcm))],
        audio=pcm,
        total_ms=total_ms,
        meta={"file": what},
    )


def _sidecar(path: Path, frames: int) -> tuple[list[ChunkRecord], float]:
    """The chunk timeline of ``<id>.take.json`` when it matches the audio, else none."""
    side = path.with_name(path.stem + ".take.json")
    if not side.is_file() or side.stat().st_size > MAX_SIDECAR_BYTES:
        return [], 0.0
    try:
        d = json.loads(side.read_text(encoding="utf-8"))
        chunks = [
            ChunkRecord(int(c["index"]), float(c["arrival_ms"]), int(c["offset"]), int(c["frames"]))
            for c in d["chunks"]
        ]
        total = float(d["total_ms"])
    except (OSError, ValueError, KeyError, TypeError):
        return [], 0.0
    at = 0
    for c in chunks:  # contiguous, from 0 to the file's end, in time order
        if c.offset != at or c.frames < 0 or not np.isfinite(c.arrival_ms):
            return [], 0.0
        at += c.frames
    if at != frames or any(
        b.arrival_ms < a.arrival_ms for a, b in zip(chunks, chunks[1:], strict=False)
    ):
        return [], 0.0
    return chunks, total


def read_folder(role: str, folder: str | Path, prompts: list[ParityPrompt]) -> Side:
    """Every prompt's takes from ``folder``; a missing or unreadable file is an input error
    that names the file (nothing is half-read)."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise NotFound(f"{root}: no such folder ({role})")
    side = Side(role, str(root), "folder")
    t0 = time.monotonic()
    for p in prompts:
        k = 1
        while True:
            base = root if k == 1 else root / f"take{k}"
            if k > 1 and not base.is_dir():
                break
            found = [take_path(root, p.prompt_id, k, s) for s in AUDIO_SUFFIXES]
            path = next((f for f in found if f.is_file()), None)
            if path is None:
                if k == 1:
                    raise NotFound(
                        f"{found[0]}: no such file ({role} audio of prompt {p.prompt_id!r})"
                    )
                break
            try:
                side.takes[p.prompt_id, k] = read_audio_take(path, p, f"folder:{root}")
            except ListenlabError as e:
                raise InvalidRequest(f"{role}: {e}") from None
            k += 1
            if k > MAX_TAKES:
                break
    side.server = {"folder": str(root), "files": len(side.takes)}
    side.seconds = time.monotonic() - t0
    return side


def request_of(p: ParityPrompt, seed: int | None) -> SpeechRequest:
    """The request both sides get for one prompt (a clone prompt's clip read and checked)."""
    ref = None
    if p.ref_audio:
        from voices.clips import prepare_clip

        try:
            ref = prepare_clip(Path(p.ref_audio).read_bytes()).wav
        except ListenlabError as e:
            raise InvalidRequest(
                f"ref_audio of prompt {p.prompt_id!r} ({p.ref_audio}): {e}"
            ) from None
    return SpeechRequest(
        text=p.text, voice=p.voice, ref_audio=ref, ref_text=p.ref_text, seed=seed
    ).validated()


async def render(
    role: str,
    backend: Backend,
    prompts: list[ParityPrompt],
    takes: int,
    seed: int | None = None,
    log: Callable[[str], None] | None = None,
) -> Side:
    """Stream every prompt ``takes`` times through ``backend``, one at a time (solo, as the
    probe's streaming layer), after loading it; a failed stream is kept as an error."""
    if not 1 <= takes <= MAX_TAKES:
        raise InvalidRequest(f"--takes must be 1..{MAX_TAKES}, got {takes}")
    side = Side(role, backend.describe(), "backend")
    requests = {p.prompt_id: request_of(p, seed) for p in prompts}  # bad input before rendering
    t0 = time.monotonic()
    if await load(backend):
        side.load_ms = round((time.monotonic() - t0) * 1000, 1)
    for i, p in enumerate(prompts):
        for k in range(1, takes + 1):
            req = replace(requests[p.prompt_id], request_id=uuid.uuid4().hex)
            try:
                side.takes[p.prompt_id, k] = await record(backend, req)
            except TakeFailed as e:
                side.errors[p.prompt_id, k] = (
                    f"the stream failed after {len(e.take.chunks)} chunk(s): {e}"
                )
            except ListenlabError as e:
                side.errors[p.prompt_id, k] = str(e)
        if log:
            log(f"{role}: {i + 1}/{len(prompts)} prompts rendered")
    side.seconds = time.monotonic() - t0
    side.deterministic = _deterministic(side, prompts)
    return side


def _deterministic(side: Side, prompts: list[ParityPrompt]) -> bool | None:
    """Whether two takes of the first prompt with two takes are sample-identical (None: no
    prompt has two)."""
    for p in prompts:
        ts = side.takes_of(p.prompt_id)
        if len(ts) >= 2:
            a, b = ts[0].audio, ts[1].audio
            return a.shape == b.shape and bool(np.array_equal(a, b))
    return None


def save_side(side: Side, folder: Path) -> dict[Key, Path]:
    """Every take as ``<id>.wav`` with its ``.take.json`` timeline (see the module docstring)."""
    out = {}
    for (pid, k), take in side.takes.items():
        path = take_path(folder, pid, k)
        take.save(path)
        out[pid, k] = path
    return out


__all__ = [
    "MAX_TAKES",
    "Key",
    "Side",
    "looks_like_folder",
    "read_audio_take",
    "read_folder",
    "render",
    "request_of",
    "save_side",
    "take_path",
]
