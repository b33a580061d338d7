"""Which metrics exist, which run by default, and ``--metrics`` lists to metric objects.

Why a registry: the CLI, the benchmark and a future background job name metrics by string;
the default set is chosen here once. The default is every bundled metric whose needs the
items meet, except the word check's inputs decide it: it runs when texts are given, and the
speaker similarity when a reference voice is; the hub tier runs only when named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from backends.errors import InvalidRequest
from evaluation.metrics.base import Metric, MetricInfo
from evaluation.metrics.distillmos import DistillMos
from evaluation.metrics.dnsmos import DnsmosP808, DnsmosP835
from evaluation.metrics.hub import HUB_METRICS, HubConfig
from evaluation.metrics.pauses import Pauses, Vad
from evaluation.metrics.pitch import Pitch
from evaluation.metrics.speaker import SpeakerSim
from evaluation.metrics.words import WordCheck

BUNDLED: dict[str, type[Metric]] = {
    m.info.name: m
    for m in (DistillMos, DnsmosP808, DnsmosP835, Pauses, Pitch, SpeakerSim, WordCheck)
}
ALL_INFO: dict[str, MetricInfo] = {
    **{k: v.info for k, v in BUNDLED.items()},
    **{k: v.info for k, v in HUB_METRICS.items()},
}
DEFAULT = ("distillmos", "dnsmos", "pauses", "pitch")
"""Run on every file unless ``--metrics`` says otherwise (no text or reference needed)."""
DEFAULT_IF = {"text": "words", "reference_voice": "speaker"}
"""Added to the default set when the items carry that input."""


def default_names(needs_met: Iterable[str]) -> list[str]:
    met = set(needs_met)
    return [*DEFAULT, *(name for need, name in DEFAULT_IF.items() if need in met)]


def parse(spec: str | Iterable[str] | None, needs_met: Iterable[str] = ()) -> list[str]:
    """Metric names from ``"distillmos,speaker"`` (or a list); ``None``/``"default"`` gives the
    default set. Unknown names fail with the list of known ones."""
    if spec is None:
        return default_names(needs_met)
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    out: list[str] = []
    for n in filter(None, names):
        if n == "default":
            out += [d for d in default_names(needs_met) if d not in out]
        elif n not in ALL_INFO:
            raise InvalidRequest(f"unknown metric {n!r}; known: {', '.join(ALL_INFO)}")
        elif n not in out:
            out.append(n)
    if not out:
        raise InvalidRequest(f"no metric named; known: {', '.join(ALL_INFO)}")
    return out


def build(names: Iterable[str], hub: HubConfig | None = None) -> list[Metric]:
    """Metric objects for ``names`` (parsed already); VAD is shared by pauses and speaker."""
    vad = Vad()
    makers: dict[str, Callable[[], Metric]] = {
        "pauses": lambda: Pauses(vad),
        "speaker": lambda: SpeakerSim(vad),
    }
    out = []
    for n in names:
        if n in HUB_METRICS:
            out.append(HUB_METRICS[n](hub or HubConfig()))
        else:
            out.append(makers.get(n, BUNDLED[n])())
    return out


__all__ = ["ALL_INFO", "BUNDLED", "DEFAULT", "DEFAULT_IF", "build", "default_names", "parse"]
