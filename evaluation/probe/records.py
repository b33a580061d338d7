"""The probe's records: its thresholds, prompts, findings, per-take rows and result.

Why apart from the run (:mod:`evaluation.probe.run`): the CLI, the report and the tests read
and build these without running a backend, and the layers change without touching them.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from backends.errors import InvalidRequest
from evaluation.takes import Take

PROMPTS_DIR = Path(str(resources.files("assets") / "prompts"))
"""Bundled prompts (the ``assets`` package, so found from any working directory)."""

LAYERS = ("offline", "streaming", "concurrency", "parity")
"""The three layers, and the optional fourth (``--reference DIR``: :mod:`evaluation.probe.parity`)."""


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """What fails the probe. Every field can be set with ``--threshold NAME=VALUE``."""

    prebuffer_ms: float | None = None
    """The simulated player: ``None`` (``rule``) is listenlab's player with its start rule
    (``evaluation.playout``); a number is a simple player that starts once this much audio is
    in, as a naive client would."""
    max_stall_ms: float = 500.0
    """A stream whose simulated playback stalls longer than this at once fails (underrun)."""
    max_start_ms: float = math.inf
    """p95 time from the request to the first sound in listenlab's player (its start rule
    waits until the stream will not run dry, so a slow backend starts late rather than
    stalling)."""
    max_ttfa_ms: float = math.inf
    """p95 time to first audio, per layer and concurrency level."""
    max_rtf: float = math.inf
    """p95 real-time factor (wall time to the end of the stream over audio duration)."""
    max_chunk_gap_ms: float = math.inf
    """Largest gap between two chunks' arrivals in any stream."""
    max_clipped: float = 0.001
    """Fraction of samples at full scale that counts as clipping."""
    min_active: float = 0.2
    """Fraction of the audio that must be above the silence threshold."""
    warnings_fail: bool = False
    """Whether ``warn`` findings (clicks, natural-looking gaps, short stalls) fail too."""

    @classmethod
    def from_pairs(cls, pairs: Sequence[str], base: Thresholds | None = None) -> Thresholds:
        base = base or cls()
        known = {f.name: f for f in fields(cls)}
        over: dict[str, Any] = {}
        for kv in pairs:
            name, sep, raw = kv.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise InvalidRequest(
                    f"--threshold wants NAME=VALUE with NAME one of {', '.join(known)}; got {kv!r}"
                )
            raw = raw.strip().lower()
            if name == "warnings_fail":
                over[name] = raw in {"1", "true", "yes", "on"}
            elif name == "prebuffer_ms" and raw in {"rule", "none", ""}:
                over[name] = None
            else:
                try:
                    over[name] = float("inf" if raw in {"inf", "none", "off"} else raw)
                except ValueError:
                    raise InvalidRequest(
                        f"threshold {name} must be a number, got {raw!r}"
                    ) from None
                if over[name] != over[name] or over[name] < 0:
                    raise InvalidRequest(f"threshold {name} must be >= 0, got {raw!r}")
        return replace(base, **over)

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if v == math.inf else v) for k, v in asdict(self).items()}


STRICT = Thresholds(
    max_stall_ms=20.0,
    max_ttfa_ms=1500.0,
    max_start_ms=2000.0,
    max_rtf=0.8,
    max_chunk_gap_ms=2500.0,
    warnings_fail=True,
)
"""``--strict``: any stall, p95 TTFA > 1.5 s, p95 first sound > 2 s, p95 RTF > 0.8, a 2.5 s gap,
or any warning fails."""

CROSSTALK_SURE = 1.25
"""Cross-talk severity (times the detector's threshold) that fails without sample evidence."""

FAIL_KINDS = frozenset(
    {
        "error",
        "format",
        "silence",
        "clipping",
        "replay",
        "truncation",
        "duration",
        "crosstalk",
        "isolation",
        "ttfa",
        "start",
        "rtf",
        "chunk_gap",
    }
)
"""Finding kinds that always fail; ``underrun`` fails above ``max_stall_ms``; others warn."""


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ProbePrompt:
    prompt_id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class ProbeFinding:
    layer: str
    kind: str
    level: str
    """``fail`` or ``warn``."""
    message: str
    prompt_id: str | None = None
    concurrency: int | None = None
    take_id: str | None = None
    time_s: float | None = None
    seam: int | None = None
    """Seam k is the start of chunk k (chunks numbered from 0), as in the Playground."""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        where = f"{self.layer}" + (f" c={self.concurrency}" if self.concurrency else "")
        at = "" if self.time_s is None else f" at {self.time_s:.2f} s"
        seam = "" if self.seam is None else f" (seam {self.seam})"
        return f"{self.level.upper():4} {where:<14} {self.kind:<10} {self.prompt_id or '-'}{at}{seam}: {self.message}"


@dataclass
class TakeRow:
    """One take's numbers, as the JSON lists them."""

    take_id: str
    layer: str
    prompt_id: str
    concurrency: int
    status: str
    ttfa_ms: float | None
    rtf: float | None
    duration_s: float
    chunks: int
    max_gap_ms: float
    stall_ms: float
    sample_rate: int
    channels: int
    start_ms: float | None = None
    """First sound in listenlab's player (its start rule), from the request."""
    ideal_start_ms: float | None = None
    """The earliest start that never runs dry on this schedule."""
    identical_to_solo: bool | None = None
    schedule: list[tuple[float, int]] = field(default_factory=list)
    """Per chunk: arrival (ms from the request) and frames, as the stream delivered them."""


@dataclass
class ProbeResult:
    backend: str
    started_at: str
    prompts: list[ProbePrompt]
    thresholds: Thresholds
    concurrency: list[int]
    deterministic: bool | None = None
    load_ms: float | None = None
    takes: list[TakeRow] = field(default_factory=list)
    findings: list[ProbeFinding] = field(default_factory=list)
    levels: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per concurrency level: TTFA/RTF p50/p95, largest chunk gap, stalls, failures."""
    offline: dict[str, dict[str, Any]] = field(default_factory=dict)
    learnt: dict[str, Any] = field(default_factory=dict)
    """The simulated player's priors (seconds per character, rate), as last learnt."""
    seconds: float = 0.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    takes_by_id: dict[str, Take] = field(default_factory=dict, repr=False)
    """Every take recorded, by id (the rows in ``takes`` are their summaries)."""
    parity: dict[str, Any] = field(default_factory=dict)
    """The fourth layer's verdict and measures (empty without ``--reference``)."""

    @property
    def passed(self) -> bool:
        return not any(f.level == "fail" for f in self.findings)

    def failures(self) -> list[ProbeFinding]:
        return [f for f in self.findings if f.level == "fail"]

    def kinds(self, layer: str | None = None, level: str | None = "fail") -> set[str]:
        return {
            f.kind
            for f in self.findings
            if (layer is None or f.layer == layer) and (level is None or f.level == level)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": 1,
            "run_id": self.run_id,
            "backend": self.backend,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 2),
            "passed": self.passed,
            "deterministic": self.deterministic,
            "load_ms": self.load_ms,
            "thresholds": self.thresholds.to_dict(),
            "concurrency": self.concurrency,
            "prompts": [asdict(p) for p in self.prompts],
            "offline": self.offline,
            "player": {
                "simulated": "start rule"
                if self.thresholds.prebuffer_ms is None
                else f"{self.thresholds.prebuffer_ms:g} ms prebuffer",
                "learnt": self.learnt,
            },
            "levels": {str(k): v for k, v in self.levels.items()},
            "takes": [asdict(t) for t in self.takes],
            "findings": [asdict(f) for f in self.findings],
            "parity": self.parity or None,
            "seam_numbering": "seam k is the start of chunk k (chunks numbered from 0)",
        }


# --------------------------------------------------------------------------- prompts


def load_prompts(path: str | Path | None = None) -> list[ProbePrompt]:
    """Prompts from a folder of ``.txt`` files (first line the title, as ``assets/prompts``),
    a ``.json`` list of strings or ``{"id", "text"}`` objects, or a text file with one prompt
    per line (``#`` comments and blank lines skipped). Default: the bundled prompts."""
    p = Path(path) if path else PROMPTS_DIR
    out: list[ProbePrompt] = []
    if p.is_dir():
        for f in sorted(p.glob("*.txt")):
            lines = f.read_text(encoding="utf-8").strip().splitlines()
            if len(lines) >= 2:
                text = " ".join(x.strip() for x in lines[1:]).strip()
                out.append(ProbePrompt(f.stem, text, lines[0].strip()))
    elif p.is_file():
        if p.stat().st_size > 1_000_000:
            raise InvalidRequest(f"{p}: prompt file larger than 1 MB")
        raw = p.read_text(encoding="utf-8")
        if p.suffix.lower() == ".json":
            try:
                items = json.loads(raw)
            except json.JSONDecodeError as e:
                raise InvalidRequest(f"{p}: not valid JSON ({e})") from None
            if not isinstance(items, list):
                raise InvalidRequest(f"{p}: expected a JSON list of prompts")
            for i, it in enumerate(items, 1):
                if isinstance(it, str):
                    out.append(ProbePrompt(f"p{i:02d}", it))
                elif isinstance(it, dict) and isinstance(it.get("text"), str):
                    out.append(ProbePrompt(str(it.get("id") or f"p{i:02d}"), it["text"]))
                else:
                    raise InvalidRequest(f"{p}: item {i} is neither a string nor {{id, text}}")
        else:
            lines = [x.strip() for x in raw.splitlines()]
            texts = [x for x in lines if x and not x.startswith("#")]
            out = [ProbePrompt(f"p{i:02d}", t) for i, t in enumerate(texts, 1)]
    else:
        raise InvalidRequest(f"no prompts at {p} (give a folder of .txt, a .json or a .txt file)")
    out = [q for q in out if q.text.strip()]
    if not out:
        raise InvalidRequest(f"{p}: no prompts found")
    ids = [q.prompt_id for q in out]
    if len(set(ids)) != len(ids):
        raise InvalidRequest(f"{p}: prompt ids are not unique")
    return out


def fmt_number(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:.{digits}f}"
