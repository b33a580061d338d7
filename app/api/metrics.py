"""``GET /metrics``: request and time-to-first-audio figures in Prometheus' text format.

Why these names: a dashboard built for vLLM-Omni 0.30.0 reads ``vllm_omni:audio_ttfp_s`` (a
histogram of seconds from arrival to the first audio, ``metrics/modality.py``, buckets of
``metrics/definitions.py`` ``SECONDS_BUCKETS``) and the ``speech_stream_completed`` /
``speech_stream_aborted`` counters, labelled by model; ``listenlab api`` keeps the same names
(one stage, one replica: ``stage="0"``, ``replica="0"``) and adds its own request counter,
``listenlab_api_requests_total{route,status}``, whose ``route`` is a route's template (or
``unmatched``), never a client's path: every label value is a series kept until restart.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
TTFA = "vllm_omni:audio_ttfp_s"
COMPLETED = "vllm_omni:speech_stream_completed_total"
ABORTED = "vllm_omni:speech_stream_aborted_total"
REQUESTS = "listenlab_api_requests_total"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class ApiMetrics:
    """Counters of one app; updated from the event loop and the response bodies."""

    model: str
    ttfa_counts: list[int] = field(default_factory=lambda: [0] * len(SECONDS_BUCKETS))
    ttfa_sum: float = 0.0
    ttfa_n: int = 0
    completed: int = 0
    aborted: Counter = field(default_factory=Counter)
    requests: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first_audio(self, seconds: float) -> None:
        with self.lock:
            self.ttfa_sum += seconds
            self.ttfa_n += 1
            for i, edge in enumerate(SECONDS_BUCKETS):
                if seconds <= edge:
                    self.ttfa_counts[i] += 1

    def request(self, route: str, status: int) -> None:
        with self.lock:
            self.requests[(route, status)] += 1

    def stream_end(self, reason: str | None) -> None:
        """A generation ended: ``None`` completed, else why it stopped (error, closed)."""
        with self.lock:
            if reason is None:
                self.completed += 1
            else:
                self.aborted[reason] += 1

    def render(self) -> str:
        m = _label(self.model)
        stage = f'model_name="{m}",replica="0",stage="0"'
        with self.lock:
            lines = [
                f"# HELP {TTFA} Time from request arrival to first audio packet/frame, in seconds.",
                f"# TYPE {TTFA} histogram",
            ]
            for edge, n in zip(SECONDS_BUCKETS, self.ttfa_counts, strict=True):
                lines.append(f'{TTFA}_bucket{{le="{edge}",{stage}}} {float(n)}')
            lines += [
                f'{TTFA}_bucket{{le="+Inf",{stage}}} {float(self.ttfa_n)}',
                f"{TTFA}_count{{{stage}}} {float(self.ttfa_n)}",
                f"{TTFA}_sum{{{stage}}} {self.ttfa_sum}",
                f"# HELP {COMPLETED} Speech audio generators that completed normally.",
                f"# TYPE {COMPLETED} counter",
                f'{COMPLETED}{{model_name="{m}"}} {float(self.completed)}',
                f"# HELP {ABORTED} Speech audio generators terminated before normal completion.",
                f"# TYPE {ABORTED} counter",
            ]
            for reason, n in sorted(self.aborted.items()):
                lines.append(f'{ABORTED}{{model_name="{m}",reason="{_label(reason)}"}} {float(n)}')
            lines += [
                f"# HELP {REQUESTS} Requests answered by listenlab api, by route and status.",
                f"# TYPE {REQUESTS} counter",
            ]
            for (route, status), n in sorted(self.requests.items()):
                lines.append(f'{REQUESTS}{{route="{_label(route)}",status="{status}"}} {float(n)}')
        return "\n".join(lines) + "\n"


__all__ = ["CONTENT_TYPE", "SECONDS_BUCKETS", "ApiMetrics"]
