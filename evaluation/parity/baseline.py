"""A stored parity run as the reference (``--baseline FILE``): a CI job keeps one run and fails
the next build on a drop.

Why a stored run and not only its folder: ``parity.json`` carries the prompts (texts, voices,
clips), the margins the run used and each take's timeline beside its audio, so a later run
compares the same prompts at the same margins, and latencies as well as sound. The side read is
the stored run's candidate by default (the version that was accepted last), or its reference.
The JSON is untrusted input: its size is bounded and only the fields named here are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.errors import InvalidRequest, NotFound
from evaluation.parity.measures import parse_margins
from evaluation.parity.prompts import ParityPrompt, prompts_from_dicts
from evaluation.parity.records import FORMAT
from evaluation.parity.sides import Side, read_folder

MAX_JSON_BYTES = 256 * 1024 * 1024
SIDES = ("candidate", "reference")


@dataclass(frozen=True)
class Baseline:
    """A stored run: the side used as the reference, its prompts and margins."""

    path: Path
    side: Side
    prompts: list[ParityPrompt]
    margins: dict[str, float | None]
    run_id: str
    passed: bool | None


def read_json(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """``parity.json`` (or the folder holding it), bounded and checked for its format."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "parity.json"
    if not p.is_file():
        raise NotFound(f"{p}: no such file (a parity.json, or the folder of a parity run)")
    if p.stat().st_size > MAX_JSON_BYTES:
        raise InvalidRequest(f"{p} is larger than {MAX_JSON_BYTES // 2**20} MiB")
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidRequest(f"{p} is not a parity.json ({e})") from None
    if (
        not isinstance(d, dict)
        or d.get("format") != FORMAT
        or not isinstance(d.get("prompts"), list)
    ):
        raise InvalidRequest(f"{p} is not a parity.json of format {FORMAT}")
    return p, d


def load_baseline(
    path: str | Path, side: str = "candidate", prompts: list[ParityPrompt] | None = None
) -> Baseline:
    """The stored run's ``side`` as a reference :class:`Side` (audio from ``audio/<side>/``),
    on the stored prompts or on ``prompts`` (each must have its file in the stored run)."""
    if side not in SIDES:
        raise InvalidRequest(f"--baseline-side must be {' or '.join(SIDES)}, got {side!r}")
    p, d = read_json(path)
    if prompts is None:
        prompts = prompts_from_dicts([r for r in d["prompts"] if isinstance(r, dict)], p)
    folder = p.parent / "audio" / side
    s = read_folder("reference", folder, prompts)
    stored = d.get(side) if isinstance(d.get(side), dict) else {}
    s.source = f"baseline {p} ({side}: {stored.get('source', '?')})"
    s.server = stored.get("server") if isinstance(stored.get("server"), dict) else {}
    margins = d.get("margins") if isinstance(d.get("margins"), dict) else {}
    known = parse_margins({k: ("off" if v is None else v) for k, v in margins.items()})
    return Baseline(p, s, prompts, known, str(d.get("run_id", "")), d.get("passed"))


__all__ = ["Baseline", "MAX_JSON_BYTES", "load_baseline", "read_json"]
