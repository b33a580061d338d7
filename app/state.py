"""What every part of the app shares: the backends with their queues, the store, the voice
library, the detector, and where data lives.

Why a module of its own: the Playground, the player's WebSocket, the JSON routes and the
listening tests all read this state; keeping it here lets each of them import it without
importing the server that imports them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from app.config import Storage
from app.web.gate import Gate
from app.web.offload import Offload
from backends.base import Backend
from backends.errors import InvalidRequest, ListenlabError
from evaluation.takes import Take

DEFAULT_CONCURRENCY = 2
"""Streams per backend at once; more wait their turn in the backend's queue."""
DECODE_CONCURRENCY = 2
"""Uploaded clips decoded at once (each in a thread)."""
DECODE_TIMEOUT_S = 45.0
"""How long one upload's decode may take before the visitor is told to send a simpler file."""


@dataclass
class BackendEntry:
    label: str
    backend: Backend
    gate: Gate

    @property
    def spec(self) -> str:
        return self.backend.describe()


Detector = Callable[[Take], list[dict[str, Any]] | None]
WsHandler = Callable[[Any, dict[str, Any]], Awaitable[None]]
"""``async handler(session: app.player.session.Session, msg)`` for one ``/ll/ws`` message type."""


class FindingList(list):
    """The detector's findings; ``checks`` says which checks ran and which were skipped (and
    why: no text, no reference, no timeline), or is None when the detector does not say."""

    checks: list[dict[str, Any]] | None = None


def default_detector(take: Take) -> list[dict[str, Any]]:
    """The glitch detector's findings on ``take`` as JSON-ready dicts, with the checks it ran.
    Imported on first use: numpy and scipy stay out of commands that never detect."""
    from evaluation.glitches import analyze

    result = analyze(take)
    out = FindingList(
        {
            "kind": f.kind,
            "time_s": float(f.time_s),
            "boundary_index": f.boundary_index,
            "severity": float(f.severity),
            "evidence": json.loads(json.dumps(f.evidence, default=float)),
        }
        for f in result.findings
    )
    out.checks = [c.to_dict() for c in result.checks]
    return out


@dataclass
class AppState:
    """Everything the routes share. Per-page state lives in :class:`app.player.session.Session`."""

    backends: dict[str, BackendEntry]
    default: str
    store: Any  # app.store.Store
    library: Any  # voices.library.VoiceLibrary
    detector: Detector = default_detector
    examples: list[dict[str, str]] = field(default_factory=list)
    ws_handlers: dict[str, WsHandler] = field(default_factory=dict)
    """Extra ``/ll/ws`` message types (``type`` -> ``async handler(session, msg)``), registered
    by the parts of the app that need the player (listening tests, arena)."""
    storage: Storage | None = None
    """Where the store is and whether it outlives the container (``/ll/health``, admin pages)."""
    decoder: Offload = field(default_factory=lambda: Offload(DECODE_CONCURRENCY, DECODE_TIMEOUT_S))
    """Uploads are decoded off the event loop, a few at a time, each with a time limit."""

    def save_take(self, entry: BackendEntry, take: Take) -> None:
        from app.store import System

        self.store.add_system(System(entry.label, backend=entry.spec, label=entry.label))
        self.store.save_take(take, system_id=entry.label)

    def detect(self, take: Take) -> list[dict[str, Any]] | None:
        found = self.detector(take)
        if found is not None:
            with contextlib.suppress(ListenlabError):
                self.store.add_auto_findings(take.take_id, found)
        return found


def load_examples() -> list[dict[str, str]]:
    """Example texts from the bundled ``assets/prompts/*.txt`` (first line is the title)."""
    out = []
    folder = resources.files("assets") / "prompts"
    for p in sorted((f for f in folder.iterdir() if f.name.endswith(".txt")), key=lambda f: f.name):
        lines = p.read_text(encoding="utf-8").strip().splitlines()
        if len(lines) >= 2:
            out.append({"title": lines[0].strip(), "text": " ".join(lines[1:]).strip()})
    return out


def parse_backend_args(specs: Sequence[str]) -> list[tuple[str, str]]:
    """``SPEC`` or ``LABEL=SPEC`` -> [(label, spec)]; labels are unique."""
    out: list[tuple[str, str]] = []
    for s in specs:
        label, _, spec = s.partition("=") if "=" in s.split("?")[0] else ("", "", s)
        label = label.strip() or spec.split("?")[0].split("+")[0]
        base, n = label, 2
        while label in {lbl for lbl, _ in out}:
            label, n = f"{base}-{n}", n + 1
        out.append((label, spec.strip()))
    return out


def build_state(
    backends: Mapping[str, Backend | str] | Sequence[str],
    db_path: str | Path,
    *,
    voices_dir: str | Path | None = None,
    concurrency: int | Mapping[str, int] = DEFAULT_CONCURRENCY,
    default: str | None = None,
    detector: Detector | None = None,
    warm: bool = True,
    journal_mode: str | None = None,
    storage: Storage | None = None,
) -> AppState:
    """Load the backends (each with its queue), open the store and the voice library.

    ``backends`` maps a UI label to a Backend (or spec), or lists ``SPEC``/``LABEL=SPEC``.
    ``warm`` loads each voice now, so the first click does not pay for it.
    """
    from app.store import open_store
    from backends.registry import load_backend
    from voices.library import VoiceLibrary

    pairs = (
        list(backends.items()) if isinstance(backends, Mapping) else parse_backend_args(backends)
    )
    if not pairs:
        raise InvalidRequest("at least one backend is needed")
    entries: dict[str, BackendEntry] = {}
    for label, b in pairs:
        limit = (
            concurrency.get(label, DEFAULT_CONCURRENCY)
            if isinstance(concurrency, Mapping)
            else concurrency
        )
        entries[label] = BackendEntry(
            label, load_backend(b) if isinstance(b, str) else b, Gate(int(limit))
        )
    if warm:
        for e in entries.values():
            e.backend.warm_up()
    from app.config import local_data_dir
    from app.store import is_postgres

    # a postgresql:// URL stays a string (a Path would fold its "//"); its replica keeps the
    # audio it reads, its exports and its voices in the local data folder
    store = open_store(
        db_path if is_postgres(db_path) else Path(db_path),
        journal_mode=journal_mode,
        local_dir=local_data_dir(),
    )
    return AppState(
        backends=entries,
        default=default or next(iter(entries)),
        store=store,
        library=VoiceLibrary(voices_dir or store.root / "voices"),
        detector=detector or default_detector,
        examples=load_examples(),
        storage=storage or Storage(str(db_path), True, str(db_path)),
    )
