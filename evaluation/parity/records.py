"""A parity run's records: each side, each measure's comparison, each prompt's row, the verdict.

Why plain data apart from the run: the report, the CLI, the probe's fourth layer, the listening
test made from a run and ``--baseline`` (a stored ``parity.json`` read back) all read these
without running anything.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from evaluation.parity.compare import Comparison
from evaluation.parity.measures import BY_NAME, MEASURES
from evaluation.parity.prompts import ParityPrompt
from evaluation.parity.sides import Key, Side

FORMAT = 1
"""``parity.json``'s format number."""


def clean(v: Any) -> Any:
    """JSON-safe: NaN and infinities become None, numpy scalars plain numbers."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [clean(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@dataclass
class PromptRow:
    """One prompt: each side's mean per measure, the differences, and the worst loss."""

    prompt_id: str
    text: str
    reference: dict[str, float | None]
    candidate: dict[str, float | None]
    delta: dict[str, float | None]
    loss: float
    """The largest loss over the decided measures, in margins (0: no measure went the wrong
    way); the report sorts by it."""
    worst: str | None
    """The measure of that loss."""


@dataclass
class SideSummary:
    """What the report says about one side."""

    role: str
    source: str
    kind: str
    takes_per_prompt: int
    deterministic: bool | None
    errors: dict[str, str]
    server: dict[str, Any]
    seconds: float
    load_ms: float | None

    @classmethod
    def of(cls, side: Side) -> SideSummary:
        return cls(
            side.role,
            side.source,
            side.kind,
            side.takes_per_prompt,
            side.deterministic,
            {f"{p}#{k}": e for (p, k), e in side.errors.items()},
            side.server,
            round(side.seconds, 2),
            side.load_ms,
        )


@dataclass
class ParityResult:
    """Everything a parity run found (see :mod:`evaluation.parity`)."""

    started_at: str
    prompts: list[ParityPrompt]
    reference: SideSummary
    candidate: SideSummary
    margins: dict[str, float | None]
    comparisons: list[Comparison]
    rows: list[PromptRow]
    takes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per take (``role/prompt/k``): every measure and detail (transcript, findings)."""
    memory: dict[str, Any] = field(default_factory=dict)
    tiers: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    sides: dict[str, Side] = field(default_factory=dict, repr=False)
    """The two sides with their takes (audio, timelines), for the report and the test."""

    strict: bool = False
    """Fail unless parity is shown on every decided measure (not only on a measure shown
    worse)."""

    @property
    def failures(self) -> list[Comparison]:
        """The measures that fail the run: shown worse (and, when strict, not shown within)."""
        return [c for c in self.comparisons if c.worse or (self.strict and not c.shown)]

    @property
    def unsure(self) -> list[Comparison]:
        """Decided measures neither shown within nor shown beyond their margin."""
        return [c for c in self.comparisons if not c.shown and not c.worse]

    @property
    def render_errors(self) -> bool:
        return bool(self.reference.errors or self.candidate.errors)

    @property
    def verdict(self) -> str:
        """``pass`` (parity shown on every decided measure), ``fail`` (a measure shown worse,
        a render failed, or strict and not shown) or ``not shown worse``."""
        mem_worse = self.memory.get("decision") == "worse"
        if self.failures or mem_worse or self.render_errors:
            return "fail"
        return "not shown worse" if self.unsure else "pass"

    @property
    def passed(self) -> bool:
        """Exit 0: nothing is shown worse (strict: parity is shown on every measure)."""
        return self.verdict != "fail"

    def comparison(self, name: str) -> Comparison:
        return next(c for c in self.comparisons if c.measure == name)

    def reasons(self) -> list[str]:
        """One line per thing that fails the run."""
        out = [f"{c.measure}: {c.decision}" + _interval(c) for c in self.failures]
        if self.memory.get("decision") not in (None, "pass", "reported"):
            out.append(f"memory_mib: {self.memory['decision']}")
        for s in (self.reference, self.candidate):
            out += [f"{s.role} {k}: {e}" for k, e in s.errors.items()]
        return out

    def to_dict(self) -> dict[str, Any]:
        return clean(
            {
                "format": FORMAT,
                "run_id": self.run_id,
                "started_at": self.started_at,
                "seconds": round(self.seconds, 2),
                "passed": self.passed,
                "verdict": self.verdict,
                "strict": self.strict,
                "reasons": self.reasons(),
                "unsure": [c.measure for c in self.unsure],
                "reference": asdict(self.reference),
                "candidate": asdict(self.candidate),
                "prompts": [p.to_dict() for p in self.prompts],
                "margins": self.margins,
                "measures": [
                    {**asdict(c), "shown": c.shown, "worse": c.worse, **_about(c.measure)}
                    for c in self.comparisons
                ],
                "memory": self.memory,
                "prompt_rows": [asdict(r) for r in self.rows],
                "takes": self.takes,
                "tiers": self.tiers,
                "versions": self.versions,
                "method": self.method,
            }
        )


def _about(name: str) -> dict[str, Any]:
    m = BY_NAME[name]
    return {
        "label": m.label,
        "direction": m.direction,
        "unit": m.unit,
        "delta_unit": m.delta_unit,
        "delta_kind": m.delta_kind,
    }


def _interval(c: Comparison) -> str:
    m = BY_NAME[c.measure]
    if not math.isfinite(c.delta):
        return ""
    d = m.digits
    return (
        f" ({c.delta:+.{d}f} {m.delta_unit}, 90% [{c.low:+.{d}f}, {c.high:+.{d}f}], "
        f"margin {c.margin:g}, n={c.n})"
        if c.margin is not None and math.isfinite(c.low)
        else f" ({c.delta:+.{d}f} {m.delta_unit}, n={c.n})"
    )


def take_key(role: str, key: Key) -> str:
    return f"{role}/{key[0]}/{key[1]}"


ORDER = [m.name for m in MEASURES]

__all__ = ["FORMAT", "ORDER", "ParityResult", "PromptRow", "SideSummary", "clean", "take_key"]
