"""What the detector reports: findings, stalls, which checks ran, and the whole analysis."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("click", "replay", "gap", "underrun", "truncation", "duration", "crosstalk")
DETECTOR_VERSION = "glitches/3"
"""glitches/3: from audio alone, a sentence said again after other words is not a replay;
glitches/2: fewer false alarms on clean human speech (issue #39); glitches/1 before them."""


@dataclass(frozen=True)
class Finding:
    kind: str
    time_s: float
    """Where in the take's audio (seconds from its start)."""
    boundary_index: int | None
    """Nearest seam as a 0-based index into ``Take.boundaries`` (what the store keeps);
    people read :attr:`seam`."""
    severity: float
    """How far past its threshold (1.0 = just at it)."""
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def seam(self) -> int | None:
        """The seam as numbered everywhere a person reads it: seam k is the start of chunk k
        (chunks from 0, so seams from 1), i.e. ``boundary_index + 1``."""
        return None if self.boundary_index is None else self.boundary_index + 1

    def __str__(self) -> str:
        b = "-" if self.seam is None else str(self.seam)
        ev = ", ".join(f"{k}={_fmt(v)}" for k, v in self.evidence.items())
        return (
            f"{self.time_s:8.3f}s  {self.kind:<10} seam {b:>3}  severity {self.severity:5.2f}  {ev}"
        )


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


@dataclass(frozen=True)
class Stall:
    position_ms: float
    """Audio time at which playback stopped (the start of the late chunk)."""
    wall_ms: float
    """When it stopped, from the request."""
    stall_ms: float
    chunk_index: int


@dataclass(frozen=True)
class Check:
    """One check of the detector and whether it ran on this take (and why not)."""

    name: str
    ran: bool
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ran": self.ran, "why": self.why}


@dataclass(frozen=True)
class Analysis:
    findings: list[Finding]
    metrics: dict[str, Any]
    """Per-take columns (listening-tests.md §6.3): duration, chunk count, max silence, ..."""
    checks: list[Check] = field(default_factory=list)
    """Which checks ran and which were skipped (no text, no reference, no timeline)."""
