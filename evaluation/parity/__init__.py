"""``listenlab parity``: prove that a port sounds like its reference, and that a new version
sounds no worse, prompt by prompt, with an interval and a decision per measure.

vLLM-Omni's guide for adding a TTS model asks for reference samples in its first phase and,
later, audio "matching reference quality"; ``listenlab probe`` proves a stream is whole, this
proves it still sounds like the model. Either side is a backend spec (rendered now) or a folder
of ``<id>.wav`` files (the upstream samples saved in phase one)::

    from evaluation.parity import parity_sync, read_prompts
    result = parity_sync("samples/upstream", "vllm-omni+http://gpu:8000", "prompts.csv", takes=3)
    result.passed, result.reasons(), result.comparison("predicted_mos")
    from evaluation.parity.report import write_outputs
    write_outputs(result, "parity-out")   # parity.json, parity.html, parity.md, audio/

Rooms: the measures and their default margins (:mod:`.measures`), the prompts CSV
(:mod:`.prompts`), the two sides (:mod:`.sides`), a server's self-report (:mod:`.server`), the
measuring (:mod:`.score`), the paired interval, decision and planner (:mod:`.compare`), the
simulation that checks them (:mod:`.simulate`), the records (:mod:`.records`), the run
(:mod:`.run`), a stored run as the reference (:mod:`.baseline`) and the outputs
(:mod:`.report`).
"""

from evaluation.parity.compare import CONFIDENCE, Comparison, prompts_needed
from evaluation.parity.measures import MEASURES, Measure, default_margins, parse_margins
from evaluation.parity.prompts import ParityPrompt, read_prompts
from evaluation.parity.records import ParityResult
from evaluation.parity.run import parity, parity_sync

__all__ = [
    "CONFIDENCE",
    "MEASURES",
    "Comparison",
    "Measure",
    "ParityPrompt",
    "ParityResult",
    "default_margins",
    "parity",
    "parity_sync",
    "parse_margins",
    "prompts_needed",
    "read_prompts",
]
