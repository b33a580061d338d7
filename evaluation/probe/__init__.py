"""``listenlab probe``: vLLM-Omni's TTS validation pyramid against one backend, in one command.

vLLM-Omni asks every new speech model to pass three layers: offline inference (duration,
sample rate), streaming playback, and concurrent requests (per-request state leaks, codec
window round-robin gaps, cross-talk or truncation that only happen under load). listenlab has
every part (backends, takes, the glitch detector, the wire profiles); this module runs them as
one pass/fail check so an integrator can gate a model's CI on it::

    from evaluation.probe import probe_sync, Thresholds
    result = probe_sync("vllm-omni+http://gpu:8000?model=Qwen/Qwen3-TTS", concurrency=(1, 4, 8))
    result.passed, result.findings, result.levels[4]["ttfa_ms"]["p95"]
    from evaluation.probe.report import write_outputs
    write_outputs(result, "probe-out")   # probe.json and probe.html (the CLI adds probe.db)

Layers:

offline
    One non-streamed reference per prompt (``Backend.synthesize``): sample rate and channels
    (against the declared capabilities), duration against the text, silence, clipping.
streaming
    Each prompt streamed alone (the first one twice: two identical renderings make the backend
    *deterministic*, so later comparisons can be sample-exact). TTFA, RTF, the chunk schedule,
    what listenlab's player does on it (its start rule: first sound, ideal start, underruns;
    or a fixed prebuffer with ``--prebuffer-ms``), and the glitch detector's findings against
    the offline reference.
concurrency
    For each N > 1, N parallel streams of different prompts. Each must equal its solo rendering
    (sample-exact when deterministic; otherwise the detector compares duration, onset content
    and repeats against the solo take). TTFA/RTF p50/p95 by N, the largest gap between chunks
    by N (round-robin gaps), stalls, failures. Level N = 1 is the streaming layer.

parity (optional, ``reference=DIR``)
    Each solo streamed take against ``DIR/<prompt id>.wav`` (the upstream samples), through
    ``listenlab parity``'s measures and margins: a measure shown worse fails, one not shown
    within its margin warns (:mod:`evaluation.probe.parity`).

Every finding is ``fail`` or ``warn`` by :class:`Thresholds`; the probe passes when nothing
fails. ``--strict`` (:data:`STRICT`) also fails on warnings and on latency thresholds. Seams are
numbered as everywhere in listenlab: seam k is the start of chunk k (chunks from 0).
"""

from evaluation.probe.records import (
    FAIL_KINDS,
    LAYERS,
    PROMPTS_DIR,
    STRICT,
    ProbeFinding,
    ProbePrompt,
    ProbeResult,
    TakeRow,
    Thresholds,
    fmt_number,
    load_prompts,
)
from evaluation.probe.run import probe, probe_sync

__all__ = [
    "FAIL_KINDS",
    "LAYERS",
    "PROMPTS_DIR",
    "STRICT",
    "ProbeFinding",
    "ProbePrompt",
    "ProbeResult",
    "TakeRow",
    "Thresholds",
    "fmt_number",
    "load_prompts",
    "probe",
    "probe_sync",
]
