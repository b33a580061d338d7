"""What parity compares: each measure's name, unit, direction, default margin and its source.

Why one table: the comparison, the ``--margin NAME=VALUE`` parser, the report's rows, the
benchmark and ``docs/parity.md`` all read it, so a margin said in the docs is the margin the
code applies (``tests/test_parity_docs.py`` reads the page against this table).

A measure has a direction. ``higher`` (predicted MOS, speaker similarity) and ``lower`` (WER,
glitches, longest pause, true peak) are one-sided: the candidate fails only when it may be worse
than the reference by more than the margin, so a better candidate never fails. ``closer``
(duration per character, pause count, loudness, pitch) has no better side: the port should
sound like the reference, so both ends of the interval must stay within the margin.

The margins were set from the same-system spread of the CPU voice (``benchmarks/parity.py``:
two independent renderings of the same prompts by the same non-deterministic voice, and the
voice through a wire profile). At them no same-system run of 5, 10 or 20 prompts failed, and
each damage of 0.3 s or more (a gap, a cut, a replay), noise at 20 dB SNR and another voice
15 % higher did (``docs/parity.md`` has the table). The speaker margin is wider than its spread
needs: GE2E hears the channel too (noise at 20 dB SNR costs about 0.07), and a clean candidate
must not fail against a slightly noisy reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from backends.errors import InvalidRequest

Direction = Literal["higher", "lower", "closer"]
Group = Literal[
    "intelligibility", "voice", "quality", "timing", "level", "pitch", "stream", "server"
]


def _minus(c: float, r: float) -> float:
    return c - r


def _percent(c: float, r: float) -> float:
    return 100.0 * (c / r - 1.0) if r > 0 else math.nan


def _semitones(c: float, r: float) -> float:
    return 12.0 * math.log2(c / r) if c > 0 and r > 0 else math.nan


@dataclass(frozen=True)
class Measure:
    """One compared number. ``value`` is per take (the column it is read from); the per-prompt
    difference is ``delta(candidate mean, reference mean)`` in ``delta_unit``."""

    name: str
    label: str
    group: Group
    direction: Direction
    margin: float | None
    """Default margin in ``delta_unit``; None: reported with its interval, decided only when a
    margin is given (``--margin NAME=VALUE``)."""
    unit: str
    """Unit of a take's value."""
    delta_unit: str
    """Unit of the difference (and of the margin)."""
    catches: str
    """What damage it is there to catch (the docs' table)."""
    delta: Callable[[float, float], float] = _minus
    delta_kind: str = "candidate - reference"
    digits: int = 3


MEASURES: tuple[Measure, ...] = (
    Measure(
        "wer",
        "word error rate",
        "intelligibility",
        "lower",
        15.0,
        "%",
        "points",
        "lost, cut or wrong words; silence",
        digits=1,
    ),
    Measure(
        "cer",
        "character error rate",
        "intelligibility",
        "lower",
        10.0,
        "%",
        "points",
        "lost, cut or wrong words",
        digits=1,
    ),
    Measure(
        "speaker_sim",
        "speaker similarity to the prompt voice",
        "voice",
        "higher",
        0.1,
        "cosine",
        "cosine",
        "another voice, a cloned voice that drifted",
    ),
    Measure(
        "speaker_between",
        "speaker similarity between the sides",
        "voice",
        "higher",
        0.1,
        "cosine",
        "cosine",
        "another voice (against the reference's own take-to-take spread)",
    ),
    Measure(
        "predicted_mos",
        "predicted MOS",
        "quality",
        "higher",
        0.35,
        "MOS",
        "MOS",
        "noise, clicks and gaps that repeat, codec damage",
    ),
    Measure(
        "ms_per_char",
        "duration per character",
        "timing",
        "closer",
        6.0,
        "ms",
        "%",
        "cut words, replays, a different speaking rate",
        _percent,
        "candidate / reference - 1",
        1,
    ),
    Measure(
        "pauses",
        "pauses of 0.2 s or more",
        "timing",
        "closer",
        0.5,
        "count",
        "count",
        "gaps, pauses where the text has none",
    ),
    Measure(
        "longest_pause_s",
        "longest pause",
        "timing",
        "lower",
        0.15,
        "s",
        "s",
        "a long gap mid-sentence",
    ),
    Measure(
        "loudness_lufs",
        "loudness (BS.1770)",
        "level",
        "closer",
        1.0,
        "LUFS",
        "LU",
        "a level change (gain, normalisation)",
        digits=2,
    ),
    Measure(
        "true_peak_dbtp",
        "true peak",
        "level",
        "lower",
        1.0,
        "dBTP",
        "dB",
        "louder peaks, clipping risk",
        digits=2,
    ),
    Measure(
        "f0_median",
        "median pitch",
        "pitch",
        "closer",
        1.5,
        "Hz",
        "semitones",
        "another voice, a pitch shift, a wrong sample rate",
        _semitones,
        "12 log2(candidate / reference)",
        2,
    ),
    Measure(
        "f0_range_st",
        "pitch range (10th-90th percentile)",
        "pitch",
        "closer",
        1.5,
        "semitones",
        "semitones",
        "a flat or exaggerated melody",
        digits=2,
    ),
    Measure(
        "glitches",
        "glitch detector findings",
        "stream",
        "lower",
        0.25,
        "per take",
        "per take",
        "replays, clicks and gaps at seams, truncation, runaway length",
    ),
    Measure(
        "ttfa_ms",
        "time to first audio",
        "server",
        "lower",
        None,
        "ms",
        "ms",
        "a slower first chunk",
        digits=0,
    ),
    Measure(
        "rtf",
        "real-time factor",
        "server",
        "lower",
        None,
        "x",
        "x",
        "slower generation",
        digits=3,
    ),
)
"""Every measure, in the report's order."""

BY_NAME: dict[str, Measure] = {m.name: m for m in MEASURES}

HUB_MARGINS = {"wer": 2.0, "cer": 1.0}
"""Default margins when Whisper (the hub tier) transcribes: its WER on clean speech is a few
points, so a 2-point loss is a real one; the bundled word check is ten times noisier."""

MEMORY = Measure(
    "memory_mib",
    "server memory (as it reports)",
    "server",
    "lower",
    None,
    "MiB",
    "%",
    "a larger footprint",
    _percent,
    "candidate / reference - 1",
    0,
)
"""One number per side (no prompts to pair): compared without an interval."""


def default_margins(hub_words: bool = False) -> dict[str, float | None]:
    """Every measure's default margin (the hub tier's for WER/CER when Whisper ran)."""
    out: dict[str, float | None] = {m.name: m.margin for m in MEASURES}
    out[MEMORY.name] = MEMORY.margin
    if hub_words:
        out.update(HUB_MARGINS)
    return out


def parse_margins(pairs: Sequence[str] | Mapping[str, object]) -> dict[str, float | None]:
    """``NAME=VALUE`` overrides (``off`` or ``none``: reported, not decided); an unknown name
    or a bad value is a usage error naming what is known."""
    known = [*BY_NAME, MEMORY.name]
    items = pairs.items() if isinstance(pairs, Mapping) else (p.partition("=")[::2] for p in pairs)
    out: dict[str, float | None] = {}
    for name, raw in items:
        name = str(name).strip().replace("-", "_")
        if name not in known:
            raise InvalidRequest(
                f"--margin wants NAME=VALUE with NAME one of {', '.join(known)}; got {name!r}"
            )
        text = str(raw).strip().lower()
        if text in {"off", "none", "null"}:
            out[name] = None
            continue
        try:
            v = float(text)
        except ValueError:
            raise InvalidRequest(f"margin {name} must be a number or 'off', got {raw!r}") from None
        if not math.isfinite(v) or v < 0:
            raise InvalidRequest(f"margin {name} must be a finite number >= 0, got {raw!r}")
        out[name] = v
    return out


__all__ = [
    "BY_NAME",
    "HUB_MARGINS",
    "MEASURES",
    "MEMORY",
    "Direction",
    "Measure",
    "default_margins",
    "parse_margins",
]
