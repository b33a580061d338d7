"""``GET /metrics``: vLLM-Omni 0.30.0's metric families, as far as they mean something here, in
Prometheus' text format.

Why these names and labels: a dashboard built for a vLLM-Omni server must work against
``listenlab api`` unchanged. So its families come with vLLM-Omni's names, label sets and buckets
(``metrics/prometheus.py``, ``metrics/modality.py``, ``metrics/definitions.py``; the HTTP families
are vLLM's ``prometheus-fastapi-instrumentator`` ones, the process and GC ones
``prometheus_client``'s): one stage, one replica (``stage="0"``, ``replica="0"``). listenlab adds
its own request counter, ``listenlab_api_requests_total{route,status}``, whose ``route`` is a
route's template (or ``unmatched``), never a client's path: every label value is a series kept
until restart.

The families vLLM-Omni has and this server does not (:data:`ABSENT`) measure what has no
counterpart here: engine stages, GPU memory, KV transfers, diffusion and images, and tokens
(a CPU voice counts none).
"""

from __future__ import annotations

import gc
import os
import platform
import resource
import threading
from collections import Counter
from dataclasses import dataclass, field

SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
"""``metrics/definitions.py`` ``SECONDS_BUCKETS``."""
RTF_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5, 2.0, 5.0, 10.0)
"""``metrics/definitions.py`` ``RTF_BUCKETS``."""
HIGHR_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0)
HIGHR_BUCKETS += (3.5, 4.0, 4.5, 5.0, 7.5, 10.0, 30.0, 60.0)
"""The instrumentator's ``http_request_duration_highr_seconds`` buckets."""
HANDLER_BUCKETS = (0.1, 0.5, 1.0)
"""The instrumentator's ``http_request_duration_seconds`` buckets."""
NOT_INSTRUMENTED = frozenset({"/metrics", "/health", "/load", "/ping", "/version", "/server_info"})
"""vLLM's ``excluded_handlers``: answers the HTTP families do not count."""

TTFA = "vllm_omni:audio_ttfp_s"
COMPLETED = "vllm_omni:speech_stream_completed_total"
ABORTED = "vllm_omni:speech_stream_aborted_total"
REQUESTS = "listenlab_api_requests_total"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

ABSENT = {
    "vllm_omni:prompt_tokens_total": "no tokenizer: a CPU voice counts no tokens",
    "vllm_omni:generation_tokens_total": "no tokenizer: a CPU voice counts no tokens",
    "vllm_omni:stage_gen_time_s": "no pipeline stages (one backend call per request)",
    "vllm_omni:stage_waiting_requests": "no stage schedulers (the queue is num_requests_waiting)",
    "vllm_omni:peak_memory_mb": "no GPU",
    "vllm_omni:kv_wait_s": "no KV cache transfers",
    "vllm_omni:stage_in_queue_s": "no diffusion scheduler",
    "vllm_omni:audio_underrun_s": "the player is the client's (listenlab probe measures it)",
    "vllm_omni:audio_continuity_ok_total": "pairs with audio_underrun_s",
    "vllm_omni:audio_skipped_requests_total": "no codec stage to drop malformed codes",
    "vllm_omni:num_inference_steps": "no diffusion",
    "vllm_omni:image_count_total": "no images",
    "vllm_omni:image_pixels": "no images",
    "vllm_omni:image_ttfp_s": "no images",
    "vllm_omni:diffusion_exec_s": "no diffusion",
    "vllm_omni:diffusion_exec_per_step_s": "no diffusion",
    "vllm_omni:diffusion_preprocess_s": "no diffusion",
    "vllm_omni:diffusion_postprocess_s": "no diffusion",
    "vllm_omni:diffusion_forward_s": "no diffusion",
    "vllm_omni:diffusion_kv_load_s": "no diffusion",
    "vllm_omni:vae_decode_s": "no VAE",
    "vllm_omni:denoise_step_latency_s": "no diffusion",
    "vllm_omni:transfer_size_bytes": "no inter-stage transfers",
    "vllm_omni:transfer_tx_s": "no inter-stage transfers",
    "vllm_omni:transfer_rx_s": "no inter-stage transfers",
    "vllm_omni:transfer_in_flight_s": "no inter-stage transfers",
}
"""vLLM-Omni 0.30.0's families this server does not export, and why (docs/api.md lists them)."""


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kw: object) -> str:
    return ",".join(f'{k}="{_label(str(v))}"' for k, v in sorted(kw.items()))


def _number(v: float) -> str:
    return repr(float(v))


@dataclass
class Hist:
    """One histogram series: cumulative bucket counts, sum and count."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        self.total += value
        self.n += 1
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        counts = self.counts or [0] * len(self.buckets)
        out = [
            f'{name}_bucket{{le="{edge}"{sep}{labels}}} {_number(c)}'
            for edge, c in zip(self.buckets, counts, strict=True)
        ]
        out.append(f'{name}_bucket{{le="+Inf"{sep}{labels}}} {_number(self.n)}')
        tail = f"{{{labels}}}" if labels else ""
        return [*out, f"{name}_count{tail} {_number(self.n)}", f"{name}_sum{tail} {self.total!r}"]


def family(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


# --------------------------------------------------------------------------- the process


def process_lines() -> list[str]:
    """``prometheus_client``'s GC, platform and process collectors, read from ``gc`` and
    ``/proc`` (nothing is kept between scrapes)."""
    out = family("python_gc_objects_collected_total", "counter", "Objects collected during gc")
    stats = gc.get_stats()
    out += [
        f'python_gc_objects_collected_total{{generation="{i}"}} {_number(s["collected"])}'
        for i, s in enumerate(stats)
    ]
    out += family(
        "python_gc_objects_uncollectable_total", "counter", "Uncollectable objects found during GC"
    )
    out += [
        f'python_gc_objects_uncollectable_total{{generation="{i}"}} {_number(s["uncollectable"])}'
        for i, s in enumerate(stats)
    ]
    out += family(
        "python_gc_collections_total", "counter", "Number of times this generation was collected"
    )
    out += [
        f'python_gc_collections_total{{generation="{i}"}} {_number(s["collections"])}'
        for i, s in enumerate(stats)
    ]
    major, minor, patch = platform.python_version_tuple()
    info = _labels(
        implementation=platform.python_implementation(),
        major=major,
        minor=minor,
        patchlevel=patch,
        version=platform.python_version(),
    )
    out += family("python_info", "gauge", "Python platform information")
    out.append(f"python_info{{{info}}} 1.0")
    return out + proc_lines()


def proc_lines() -> list[str]:
    """Memory, CPU time, start time and file descriptors of this process (Linux ``/proc``)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(float(ln.split()[1]) for ln in f if ln.startswith("btime"))
    except (OSError, StopIteration, IndexError, ValueError):
        return []  # not Linux: prometheus_client's process collector exports nothing either
    ticks = os.sysconf("SC_CLK_TCK")
    page = resource.getpagesize()
    values = {
        "process_virtual_memory_bytes": (
            "gauge",
            "Virtual memory size in bytes.",
            float(fields[20]),
        ),
        "process_resident_memory_bytes": (
            "gauge",
            "Resident memory size in bytes.",
            float(fields[21]) * page,
        ),
        "process_start_time_seconds": (
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            boot + float(fields[19]) / ticks,
        ),
        "process_cpu_seconds_total": (
            "counter",
            "Total user and system CPU time spent in seconds.",
            (float(fields[11]) + float(fields[12])) / ticks,
        ),
        "process_open_fds": (
            "gauge",
            "Number of open file descriptors.",
            len(os.listdir("/proc/self/fd")),
        ),
        "process_max_fds": (
            "gauge",
            "Maximum number of open file descriptors.",
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        ),
    }
    out: list[str] = []
    for name, (kind, help_text, value) in values.items():
        out += [*family(name, kind, help_text), f"{name} {_number(value)}"]
    return out


# --------------------------------------------------------------------------- the HTTP answers


@dataclass
class HttpFamilies:
    """vLLM's instrumentator families: every answer but the :data:`NOT_INSTRUMENTED` ones, by
    route template (``none`` for a path no route answered), method and status class."""

    requests: Counter = field(default_factory=Counter)
    duration: dict[tuple[str, str], Hist] = field(default_factory=dict)
    highr: Hist = field(default_factory=lambda: Hist(HIGHR_BUCKETS))
    request_bytes: dict[str, list[float]] = field(default_factory=dict)
    response_bytes: dict[str, list[float]] = field(default_factory=dict)

    def observe(self, handler: str, method: str, status: int, seconds: float, sizes) -> None:
        if handler in NOT_INSTRUMENTED:
            return
        self.requests[(handler, method, f"{status // 100}xx")] += 1
        self.duration.setdefault((handler, method), Hist(HANDLER_BUCKETS)).observe(seconds)
        self.highr.observe(seconds)
        for table, size in ((self.request_bytes, sizes[0]), (self.response_bytes, sizes[1])):
            entry = table.setdefault(handler, [0.0, 0.0])
            entry[0] += 1
            entry[1] += size

    def lines(self) -> list[str]:
        out = family(
            "http_requests_total",
            "counter",
            "Total number of requests by method, status and handler.",
        )
        for (handler, method, status), n in sorted(self.requests.items()):
            out.append(
                f"http_requests_total{{{_labels(handler=handler, method=method, status=status)}}} {_number(n)}"
            )
        for name, table, what in (
            ("http_request_size_bytes", self.request_bytes, "incoming requests"),
            ("http_response_size_bytes", self.response_bytes, "outgoing responses"),
        ):
            out += family(
                name,
                "summary",
                f"Content length of {what} by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
            )
            for handler, (n, total) in sorted(table.items()):
                lab = _labels(handler=handler)
                out += [
                    f"{name}_count{{{lab}}} {_number(n)}",
                    f"{name}_sum{{{lab}}} {_number(total)}",
                ]
        out += family(
            "http_request_duration_highr_seconds",
            "histogram",
            "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ",
        )
        out += self.highr.lines("http_request_duration_highr_seconds", "")
        out += family(
            "http_request_duration_seconds",
            "histogram",
            "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ",
        )
        for (handler, method), hist in sorted(self.duration.items()):
            out += hist.lines(
                "http_request_duration_seconds", _labels(handler=handler, method=method)
            )
        return out


# --------------------------------------------------------------------------- the speech requests


@dataclass
class ApiMetrics:
    """Counters of one app; updated from the event loop and the response bodies."""

    model: str
    ttfa: Hist = field(default_factory=lambda: Hist(SECONDS_BUCKETS))
    e2e: Hist = field(default_factory=lambda: Hist(SECONDS_BUCKETS))
    queue_wait: Hist = field(default_factory=lambda: Hist(SECONDS_BUCKETS))
    audio_duration: Hist = field(default_factory=lambda: Hist(SECONDS_BUCKETS))
    audio_rtf: Hist = field(default_factory=lambda: Hist(RTF_BUCKETS))
    audio_frames: int = 0
    completed: int = 0
    aborted: Counter = field(default_factory=Counter)
    finished: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)
    requests: Counter = field(default_factory=Counter)
    http: HttpFamilies = field(default_factory=HttpFamilies)
    load: tuple[int, int] = (0, 0)
    """Generations running and waiting for a slot, read from the app's gate at each scrape."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first_audio(self, seconds: float) -> None:
        with self.lock:
            self.ttfa.observe(seconds)

    def queued(self, seconds: float) -> None:
        """A request waited ``seconds`` for a generation slot (``request_queue_wait_s``)."""
        with self.lock:
            self.queue_wait.observe(seconds)

    def generated(self, seconds: float, frames: int, rate: int) -> None:
        """A generation made ``frames`` of audio at ``rate`` in ``seconds`` (arrival to end)."""
        duration = frames / rate if rate else 0.0
        with self.lock:
            self.e2e.observe(seconds)
            self.audio_frames += frames
            self.audio_duration.observe(duration)
            if duration > 0:
                self.audio_rtf.observe(seconds / duration)

    def request(self, route: str, status: int) -> None:
        with self.lock:
            self.requests[(route, status)] += 1

    def answered(self, handler: str, method: str, status: int, seconds: float, sizes) -> None:
        with self.lock:
            self.http.observe(handler, method, status, seconds, sizes)

    def stream_end(self, reason: str | None) -> None:
        """A generation ended: ``None`` completed, else why it stopped (error, closed)."""
        with self.lock:
            if reason is None:
                self.completed += 1
                self.finished["stop"] += 1
            else:
                self.aborted[reason] += 1
                self.finished["abort"] += 1
                self.failed["client_disconnect" if reason == "closed" else "stage_error"] += 1

    def render(self) -> str:
        with self.lock:
            lines = process_lines() + self.pipeline_lines() + self.audio_lines()
            lines += self.http.lines() + self.request_lines()
        return "\n".join(lines) + "\n"

    def pipeline_lines(self) -> list[str]:
        model = _labels(model_name=self.model)
        running, waiting = self.load
        out = family(
            "vllm_omni:num_requests_running",
            "gauge",
            "Number of requests currently running across all pipeline stages.",
        )
        out.append(f"vllm_omni:num_requests_running{{{model}}} {_number(running)}")
        out += family(
            "vllm_omni:num_requests_waiting", "gauge", "Number of requests waiting to be scheduled."
        )
        out.append(f"vllm_omni:num_requests_waiting{{{model}}} {_number(waiting)}")
        out += family(
            "vllm_omni:requests_success_total",
            "counter",
            "Total requests by completion reason (stop / length / abort / ...).",
        )
        for reason, n in sorted(self.finished.items()):
            out.append(
                f"vllm_omni:requests_success_total{{{_labels(finished_reason=reason, model_name=self.model)}}} {_number(n)}"
            )
        out += family(
            "vllm_omni:requests_failed_total", "counter", "Total requests by failure reason."
        )
        for reason, n in sorted(self.failed.items()):
            out.append(
                f"vllm_omni:requests_failed_total{{{_labels(model_name=self.model, reason=reason)}}} {_number(n)}"
            )
        out += family(
            "vllm_omni:e2e_request_latency_s",
            "histogram",
            "Pipeline-global end-to-end request latency in seconds (user arrival to complete response).",
        )
        out += self.e2e.lines("vllm_omni:e2e_request_latency_s", model)
        out += family(
            "vllm_omni:request_queue_wait_s",
            "histogram",
            "Per-request queue wait between submit arrival and stage submit, in seconds.",
        )
        return out + self.queue_wait.lines("vllm_omni:request_queue_wait_s", model)

    def audio_lines(self) -> list[str]:
        stage = _labels(model_name=self.model, replica="0", stage="0")
        out = family(
            TTFA, "histogram", "Time from request arrival to first audio packet/frame, in seconds."
        )
        out += self.ttfa.lines(TTFA, stage)
        out += family(
            "vllm_omni:audio_duration_s",
            "histogram",
            "Generated audio content duration in seconds (audio_frames / sample_rate).",
        )
        out += self.audio_duration.lines("vllm_omni:audio_duration_s", stage)
        out += family(
            "vllm_omni:audio_rtf",
            "histogram",
            "Audio real-time factor (stage_gen_time_s / audio_duration_s); streaming TTS requires < 1.",
        )
        out += self.audio_rtf.lines("vllm_omni:audio_rtf", stage)
        out += family(
            "vllm_omni:audio_frames_total",
            "counter",
            "Cumulative audio frame count; per-model rate (not summable across models).",
        )
        out.append(f"vllm_omni:audio_frames_total{{{stage}}} {_number(self.audio_frames)}")
        out += family(COMPLETED, "counter", "Speech audio generators that completed normally.")
        out.append(f"{COMPLETED}{{{_labels(model_name=self.model)}}} {_number(self.completed)}")
        out += family(
            ABORTED, "counter", "Speech audio generators terminated before normal completion."
        )
        for reason, n in sorted(self.aborted.items()):
            out.append(f"{ABORTED}{{{_labels(model_name=self.model, reason=reason)}}} {_number(n)}")
        return out

    def request_lines(self) -> list[str]:
        out = family(
            REQUESTS, "counter", "Requests answered by listenlab api, by route and status."
        )
        for (route, status), n in sorted(self.requests.items()):
            out.append(f"{REQUESTS}{{{_labels(route=route, status=status)}}} {_number(n)}")
        return out


__all__ = ["ABSENT", "CONTENT_TYPE", "ApiMetrics", "Hist", "HttpFamilies", "process_lines"]
