"""A parity run: both sides read or rendered, measured the same way, compared prompt by prompt.

Why this order: every folder is read and every request checked before any backend renders, so
a missing file or a bad prompt fails in a second, not after minutes of rendering; the two sides
are measured together (one model load) and then each measure is compared on its own.
"""

from __future__ import annotations

import asyncio
import math
import platform
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from backends.base import Backend
from backends.errors import InvalidRequest
from backends.registry import load_backend
from evaluation.metrics import HubConfig
from evaluation.parity.compare import CONFIDENCE, Comparison, compare, decide, loss
from evaluation.parity.measures import MEASURES, MEMORY, default_margins
from evaluation.parity.prompts import ParityPrompt, read_prompts
from evaluation.parity.records import ParityResult, PromptRow, SideSummary, take_key
from evaluation.parity.score import measure_sides
from evaluation.parity.server import self_report
from evaluation.parity.sides import Key, Side, looks_like_folder, read_folder, render

Log = Callable[[str], None]

METHOD = {
    "unit": "the prompt: each side's mean over its takes, then candidate minus reference",
    "interval": (
        "Student's t interval of the mean per-prompt difference at 90 % (its worse end is the "
        "one-sided 95 % bound; a 'closer' measure: two one-sided tests at 5 %)"
    ),
    "decision": (
        "pass: the interval's worse end within the margin (parity shown); worse: even its "
        "better end beyond the margin (shown worse); unsure: neither; reported: no margin. "
        "The run fails on a measure shown worse (--strict: on any not shown within)"
    ),
    "checked_by": "benchmarks/parity.py (simulation with known truth; docs/parity.md)",
}


def versions(metric_versions: dict[str, Any]) -> dict[str, Any]:
    """listenlab's, the metrics' (with their weights' hashes), the detector's and Python's."""
    from importlib.metadata import PackageNotFoundError, version

    from evaluation.glitches import DETECTOR_VERSION

    try:
        own = version("listenlab")
    except PackageNotFoundError:
        own = None
    return {
        "listenlab": own,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "detector": DETECTOR_VERSION,
        "metrics": metric_versions,
    }


async def _open_backend(
    role: str, be: Backend, prompts: list[ParityPrompt], takes: int, seed: int | None, log: Log
) -> Side:
    try:
        side = await render(role, be, prompts, takes, seed, log)
        side.server = await self_report(be)
        return side
    finally:
        await be.aclose()


async def open_sides(
    reference: str | Side,
    candidate: str | Side,
    prompts: list[ParityPrompt],
    takes: int,
    seed: int | None,
    log: Log,
) -> tuple[Side, Side]:
    """Folders read (and backends built) first, then the backends rendered one after the other
    (the reference first), so both never compete for the machine."""
    sides: dict[str, Side | Backend] = {}
    for role, raw in (("reference", reference), ("candidate", candidate)):
        if isinstance(raw, Side):
            sides[role] = raw
        elif looks_like_folder(raw):
            sides[role] = read_folder(role, raw, prompts)
            log(f"{role}: {len(sides[role].takes)} file(s) from {raw}")
        else:
            sides[role] = load_backend(raw)
    out = []
    for role in ("reference", "candidate"):
        s = sides[role]
        if isinstance(s, Backend):
            log(f"{role}: rendering {len(prompts)} prompt(s) x {takes} on {s.describe()}")
            s = await _open_backend(role, s, prompts, takes, seed, log)
        out.append(s)
    return out[0], out[1]


Grouped = dict[tuple[str, str], list[dict[str, Any]]]


def group(values: dict[tuple[str, Key], dict[str, Any]]) -> Grouped:
    """Take values by (role, prompt id)."""
    out: Grouped = {}
    for (role, (pid, _)), v in sorted(values.items()):
        out.setdefault((role, pid), []).append(v)
    return out


def per_prompt(grouped: Grouped, role: str, pid: str, name: str) -> float:
    """A side's mean of one measure over its takes of a prompt (NaN without a value)."""
    vs = [float(v[name]) for v in grouped.get((role, pid), []) if v.get(name) is not None]
    vs = [x for x in vs if math.isfinite(x)]
    return float(np.mean(vs)) if vs else math.nan


def compare_all(
    prompts: list[ParityPrompt],
    values: dict[tuple[str, Key], dict[str, Any]],
    margins: dict[str, float | None],
) -> tuple[list[Comparison], list[PromptRow]]:
    """Every measure compared over the prompts, and each prompt's row (worst loss first)."""
    ids = [p.prompt_id for p in prompts]
    grouped = group(values)
    comps: list[Comparison] = []
    table: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for m in MEASURES:
        ref = [per_prompt(grouped, "reference", i, m.name) for i in ids]
        cand = [per_prompt(grouped, "candidate", i, m.name) for i in ids]
        c, d = compare(m, ref, cand, margins.get(m.name))
        comps.append(c)
        table[m.name] = (ref, cand, d)
    rows = []
    for j, p in enumerate(prompts):
        losses = {
            m.name: loss(m, table[m.name][2][j], margins.get(m.name))
            for m in MEASURES
            if comps[MEASURES.index(m)].decision != "reported"
        }
        worst = max(losses, key=lambda k: losses[k], default=None)
        top = losses.get(worst, 0.0) if worst else 0.0
        rows.append(
            PromptRow(
                p.prompt_id,
                p.text,
                {k: v[0][j] for k, v in table.items()},
                {k: v[1][j] for k, v in table.items()},
                {k: v[2][j] for k, v in table.items()},
                top,
                worst if top > 0 else None,
            )
        )
    rows.sort(key=lambda r: -r.loss)
    return comps, rows


def memory_comparison(ref: Side, cand: Side, margin: float | None) -> dict[str, Any]:
    """The servers' own memory figures: one number per side, compared without an interval."""
    r, c = ref.server.get("memory_mib"), cand.server.get("memory_mib")
    out: dict[str, Any] = {"reference_mib": r, "candidate_mib": c, "margin": margin}
    if r is None or c is None:
        out["decision"] = "reported"
        out["note"] = "not reported by both servers (a vLLM-Omni server's /metrics)"
        return out
    delta = MEMORY.delta(float(c), float(r))
    out["delta"] = delta
    out["decision"] = decide(MEMORY, delta, delta, delta, margin, 2)
    return out


def effective_margins(
    given: dict[str, float | None] | None, hub_words: bool, values: dict[tuple[str, Key], dict]
) -> tuple[dict[str, float | None], list[str]]:
    """The defaults (the hub tier's WER margins when Whisper ran) with the user's overrides;
    ``speaker_between`` is reported only without a second, different reference take."""
    margins = default_margins(hub_words)
    margins.update(given or {})
    notes = []
    has_baseline = any(
        v.get("speaker_between") is not None for (r, _), v in values.items() if r == "reference"
    )
    if not has_baseline and margins.get("speaker_between") is not None:
        margins["speaker_between"] = None
        notes.append(
            "speaker_between is reported, not decided: the reference has no second, different "
            "take of a prompt to measure its own take-to-take similarity (use --takes 2 or more "
            "on a non-deterministic reference)"
        )
    return margins, notes


async def parity(
    reference: str | Side,
    candidate: str | Side,
    prompts: Sequence[ParityPrompt] | str | Path,
    *,
    takes: int = 1,
    margins: dict[str, float | None] | None = None,
    hub: HubConfig | None = None,
    cache: str | Path | None = None,
    seed: int | None = None,
    strict: bool = False,
    log: Log | None = None,
) -> ParityResult:
    """Compare ``candidate`` with ``reference`` (each a backend spec, a folder or a
    :class:`Side`) on ``prompts`` (a list or an ``id,text`` CSV); see :mod:`evaluation.parity`."""
    say = log or (lambda _m: None)
    plist = list(prompts) if isinstance(prompts, list | tuple) else read_prompts(prompts)
    if not plist:
        raise InvalidRequest("no prompts")
    t0 = time.monotonic()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    ref, cand = await open_sides(reference, candidate, plist, takes, seed, say)
    say(f"measuring {len(ref.takes) + len(cand.takes)} take(s)")
    values, tiers, metric_versions = await asyncio.to_thread(
        measure_sides, plist, ref, cand, hub=hub, cache=cache
    )
    used, notes = effective_margins(margins, tiers.hub_words, values)
    comps, rows = compare_all(plist, values, used)
    return ParityResult(
        started_at=started,
        prompts=plist,
        reference=SideSummary.of(ref),
        candidate=SideSummary.of(cand),
        margins=used,
        comparisons=comps,
        rows=rows,
        takes={take_key(r, k): v for (r, k), v in values.items()},
        memory=memory_comparison(ref, cand, used.get(MEMORY.name)),
        tiers={"words": tiers.words, "speaker": tiers.speaker, "notes": tiers.notes + notes},
        versions=versions(metric_versions),
        method={
            **METHOD,
            "confidence": CONFIDENCE,
            "measures": {m.name: m.label for m in MEASURES},
        },
        seconds=time.monotonic() - t0,
        sides={"reference": ref, "candidate": cand},
        strict=strict,
    )


def parity_sync(*args: Any, **kw: Any) -> ParityResult:
    """:func:`parity` for synchronous callers."""
    return asyncio.run(parity(*args, **kw))


__all__ = [
    "METHOD",
    "compare_all",
    "group",
    "effective_margins",
    "memory_comparison",
    "open_sides",
    "parity",
    "parity_sync",
    "per_prompt",
    "versions",
]
