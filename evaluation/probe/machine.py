"""Machine scores per probe layer (``listenlab probe --machine-scores``): does a model sound as
good streamed alone and under load as it does non-streamed?

Why in the probe: a concurrency bug can leave every chunk on time and still damage the audio
(a codec window reset, a voice drifting under load) in a way the detector's sample checks
only see when the backend is deterministic. The predicted MOS, DNSMOS and the word check of
every take, averaged per layer and concurrency level, put a number on it beside the timing.
The scores come from :mod:`evaluation.metrics` (the bundled tier), with each model's name,
version and weights' hash in the result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evaluation.probe.records import ProbeResult

METRICS = ("distillmos", "dnsmos", "words")
COLUMNS = ("predicted_mos", "dnsmos_p808", "sphinx_wer", "sphinx_cer")
"""The columns averaged per layer (the word check only where the prompt's text is English)."""


def layer_name(layer: str, n: int) -> str:
    """``offline``, ``streaming``, ``concurrency 4``, …: one group of takes."""
    return f"{layer} {n}" if layer == "concurrency" else layer


def machine_layer(
    result: ProbeResult,
    *,
    metrics: tuple[str, ...] = METRICS,
    english: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score every complete take of ``result`` and set ``result.machine``: per layer the
    number of takes and each column's mean, min and max, and the models used. ``english``:
    give the word check the prompts' texts (PocketSphinx is an English recogniser)."""
    from evaluation.metrics import Item, build, from_samples, score_items

    say = log or (lambda _m: None)
    rows = [r for r in result.takes if r.status == "ok" and r.take_id in result.takes_by_id]
    items = []
    for r in rows:
        take = result.takes_by_id[r.take_id]
        x = take.audio.astype(np.float32).mean(axis=1) / 32768.0
        text = take.request.text if english else None
        items.append(Item(from_samples(x, take.sample_rate), text=text, name=r.take_id))
    say(f"machine scores: {len(items)} take(s), {', '.join(metrics)}")
    built = build(metrics)
    scored = score_items(items, built)
    by_layer: dict[str, list[dict[str, Any]]] = {}
    for r, s in zip(rows, scored, strict=True):
        by_layer.setdefault(layer_name(r.layer, r.concurrency), []).append(s.values())
    layers = {}
    for name, values in by_layer.items():
        summary: dict[str, Any] = {"takes": len(values)}
        for c in COLUMNS:
            v = [float(x[c]) for x in values if isinstance(x.get(c), int | float)]
            if v:
                summary[c] = {
                    "mean": round(float(np.mean(v)), 3),
                    "min": round(min(v), 3),
                    "max": round(max(v), 3),
                }
        layers[name] = summary
    models = [
        {"metric": m.info.name, "version": m.info.version, "weights_sha256": m.weights_sha256}
        for m in built
    ]
    errors = [f"{s.name}: {k}: {e}" for s in scored for k, e in s.errors.items()]
    result.machine = {"layers": layers, "models": models, "errors": errors}
    return result.machine


__all__ = ["COLUMNS", "METRICS", "layer_name", "machine_layer"]
