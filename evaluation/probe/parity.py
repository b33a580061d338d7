"""The probe's optional fourth layer: does the stream still sound like the reference?

Why in the probe: the three layers prove a stream is whole (no replays, gaps, cross-talk); an
integrator also has the upstream samples of phase one. ``listenlab probe --reference DIR``
compares each prompt's solo streamed take with ``DIR/<prompt id>.wav`` through
:mod:`evaluation.parity` (the same measures, margins and decisions as ``listenlab parity``): a
measure shown worse than its margin is a failing finding of layer ``parity``, one not shown
within it a warning. The folder is read before the first layer runs, so a missing file fails at
once and names the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evaluation.parity.prompts import ParityPrompt
from evaluation.parity.records import clean
from evaluation.parity.sides import Side, read_folder
from evaluation.probe.records import ProbeFinding, ProbePrompt, ProbeResult
from evaluation.takes import Take


def as_parity(prompts: list[ProbePrompt], voice: str | None = None) -> list[ParityPrompt]:
    return [ParityPrompt(p.prompt_id, p.text, voice) for p in prompts]


def read_reference(folder: str | Path, prompts: list[ProbePrompt]) -> Side:
    """The reference folder's takes (every prompt's ``<id>.wav``), read before any layer."""
    return read_folder("reference", folder, as_parity(prompts))


async def parity_layer(
    result: ProbeResult,
    reference: Side,
    solo: dict[str, Take],
    margins: dict[str, float | None] | None = None,
    cache: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> None:
    """Compare the solo streamed takes with the reference; findings and ``result.parity``."""
    from evaluation.parity.run import parity

    cand = Side("candidate", result.backend, "backend")
    cand.takes = {(pid, 1): t for pid, t in solo.items()}
    prompts = as_parity(result.prompts)
    if log:
        log(f"parity layer: {len(cand.takes)} streamed take(s) against {reference.source}")
    got = await parity(reference, cand, prompts, margins=margins, cache=cache)
    for c in got.comparisons:
        if c.shown:
            continue
        level = "fail" if c.worse else "warn"
        line = next((r for r in got.reasons() if r.startswith(c.measure + ":")), None)
        result.findings.append(
            ProbeFinding(
                "parity",
                "parity",
                level,
                line or f"{c.measure}: {c.decision} (n={c.n})",
                evidence=clean(
                    {
                        "measure": c.measure,
                        "delta": c.delta,
                        "low": c.low,
                        "high": c.high,
                        "margin": c.margin,
                        "decision": c.decision,
                    }
                ),
            )
        )
    d = got.to_dict()
    result.parity = {
        k: d[k] for k in ("verdict", "reasons", "unsure", "margins", "measures", "tiers")
    }
    result.parity["reference"] = reference.source


__all__ = ["as_parity", "parity_layer", "read_reference"]
