"""Machine scores of single takes, one worker thread per store, a bounded queue.

Why here: the Playground shows a visitor's take's scores after it ends and the arena board
shows a predicted MOS per system from its battles' takes; both need the same small service,
off the event loop, with one job per take and a limit on what waits (a visitor who speaks
fast must not queue hours of model time). Scores go to the store's ``take_scores``
(:class:`app.store.scores.StoreCache`), so a take is never scored twice and the results,
the board and the page read the same rows.

A take is scored with :data:`METRICS`: the predicted MOS (DistillMOS) and DNSMOS P.808 on
every take, and the word check (WER/CER against the take's text) when the take has a text
and its language is English or unset (PocketSphinx is an English recogniser).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from app.store.scores import StoreCache, scores_of
from backends.errors import ListenlabError, TooMany
from evaluation.metrics.base import Value

METRICS = ("distillmos", "dnsmos", "words")
QUEUE_LIMIT = 16
"""Takes waiting for the worker at most; one more is refused (429 on the Playground)."""
KEPT = 1000
"""Finished jobs remembered in memory (their scores stay in the store)."""
ENGLISH = {"", "en", "english", "auto", "en-us", "en_us"}


@dataclass
class TakeJob:
    """One take's scoring, as a page polls it (``GET /ll/api/takes/{id}/scores`` answers
    with its fields)."""

    take_id: str
    state: Literal["queued", "running", "done", "failed", "not_queued"] = "queued"
    """``not_queued``: the queue was full (only when the caller asked not to be refused)."""
    scores: dict[str, Value] = field(default_factory=dict)
    """Each metric's columns (``predicted_mos``, ``sphinx_wer``, …): docs/metrics.md."""
    models: list[dict[str, str]] = field(default_factory=list)
    """Per metric: ``metric``, ``version`` and ``weights_sha256`` of what scored it."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Metric -> why it did not run on this take."""
    message: str = ""


def take_item(store: Any, take_id: str) -> Any:
    """The take as an :class:`evaluation.metrics.Item`: its audio, and its text when the word
    check can read it (English or no language given)."""
    import json

    from evaluation.metrics import Item, read_file

    row = store.get_row("takes", "take_id", take_id) or {}
    request = json.loads(row.get("request") or "{}")
    language = str(request.get("language") or "") if isinstance(request, dict) else ""
    text = row.get("text") if language.lower() in ENGLISH else None
    return Item(read_file(store.audio_path(take_id)), text=text or None, name=take_id)


def stored(store: Any, take_id: str) -> TakeJob | None:
    """A job made of the scores already stored for the take (None: no predicted MOS yet)."""
    rows = scores_of(store).of_takes([take_id])
    if not any(r.metric == METRICS[0] for r in rows):
        return None
    job = TakeJob(take_id, "done")
    for r in sorted(rows, key=lambda r: r.created_at):
        job.scores.update(r.values)
        job.models = [m for m in job.models if m["metric"] != r.metric]
        job.models.append(
            {"metric": r.metric, "version": r.version, "weights_sha256": r.weights_sha256}
        )
    return job


class TakeScorer:
    """Scores takes of one store on one worker thread (started on demand)."""

    def __init__(self, store: Any, metrics: tuple[str, ...] = METRICS):
        self.store = store
        self.metrics = metrics
        self.jobs: dict[str, TakeJob] = {}
        self.waiting: queue.Queue[str] = queue.Queue()
        self.lock = threading.Lock()
        self.worker: threading.Thread | None = None
        self.built: list[Any] | None = None

    def request(self, take_id: str, *, refuse_when_full: bool = True) -> TakeJob:
        """The take's job: stored scores, the job in hand, or a new one queued. A full queue
        raises :class:`TooMany` (or, with ``refuse_when_full=False``, gives a job whose state
        is ``not_queued``)."""
        with self.lock:
            job = self.jobs.get(take_id)
            if job is not None and job.state != "failed":
                return job
        done = stored(self.store, take_id)
        with self.lock:
            if done is not None:
                self.remember(done)
                return done
            if take_id in self.jobs and self.jobs[take_id].state in {"queued", "running"}:
                return self.jobs[take_id]
            if sum(j.state == "queued" for j in self.jobs.values()) >= QUEUE_LIMIT:
                if refuse_when_full:
                    raise TooMany(
                        f"{QUEUE_LIMIT} takes are waiting to be scored; try again in a minute"
                    )
                return TakeJob(take_id, "not_queued", message="the scoring queue is full")
            job = TakeJob(take_id)
            self.remember(job)
            self.waiting.put(take_id)
            if self.worker is None or not self.worker.is_alive():
                self.worker = threading.Thread(target=self.work, name="take-scores", daemon=True)
                self.worker.start()
            return job

    def remember(self, job: TakeJob) -> None:
        self.jobs[job.take_id] = job
        if len(self.jobs) > KEPT:  # forget the oldest finished jobs first
            for k in [k for k, j in self.jobs.items() if j.state in {"done", "failed"}]:
                if len(self.jobs) <= KEPT:
                    break
                del self.jobs[k]

    def work(self) -> None:
        while True:
            try:
                take_id = self.waiting.get(timeout=1.0)
            except queue.Empty:
                with self.lock:
                    if self.waiting.empty():
                        self.worker = None
                        return
                continue
            self.run_one(self.jobs[take_id])

    def run_one(self, job: TakeJob) -> None:
        from evaluation.metrics import build, score_items

        job.state = "running"
        try:
            if self.built is None:  # the models load once per app, on the first take
                self.built = build(self.metrics)
            (r,) = score_items(
                [take_item(self.store, job.take_id)], self.built, StoreCache(self.store)
            )
        except ListenlabError as e:
            job.state, job.message = "failed", str(e)
            return
        except Exception as e:  # the worker must outlive one bad take
            job.state, job.message = "failed", f"{type(e).__name__}: {e}"
            return
        job.scores = r.values()
        job.models = [
            {"metric": s.metric, "version": s.version, "weights_sha256": s.weights_sha256}
            for s in r.scores
        ]
        job.skipped = dict(r.skipped)
        job.message = "; ".join(f"{m}: {e}" for m, e in r.errors.items())
        job.state = "done"


def available() -> bool:
    """Are the bundled metrics' packages installed (``pip install 'listenlab[metrics]'``)?"""
    import importlib.util

    return all(
        importlib.util.find_spec(m) is not None for m in ("torch", "distillmos", "speechmos")
    )


SCORERS: dict[int, TakeScorer] = {}


def scorer_for(store: Any) -> TakeScorer:
    """The take scorer of ``store`` (made on first use; the Playground and the arena share it)."""
    got = SCORERS.get(id(store))
    if got is None or got.store is not store:
        got = SCORERS[id(store)] = TakeScorer(store)
    return got


__all__ = [
    "KEPT",
    "METRICS",
    "QUEUE_LIMIT",
    "TakeJob",
    "TakeScorer",
    "available",
    "scorer_for",
    "take_item",
]
