"""Machine scores of a listening test's stimuli, computed in the background with progress.

Why a job and not a step of the results: scoring loads models (about 540 MiB) and takes
seconds per clip, while the Results tab and the export must answer at once. The job scores
each stimulus of a real system (the check stimuli's pseudo systems are left out) with the
bundled tier's listening set (:data:`METRICS`: the predicted MOS of DistillMOS and DNSMOS
P.808 always; the word check's WER and CER where the take's text is known; speaker
similarity where the test has a reference: the design's reference system's take of the same
prompt, or a clip given to :func:`score_test`), and stores every score in the store's
``take_scores`` (:mod:`app.store.scores`). That table is the cache: a score already stored
for the same audio, metric version, weights and inputs is not computed again, so a job is
idempotent and resumes where a stopped one ended.

:class:`ScoringJobs` runs the jobs of one app on one worker thread (never on the event loop;
one model set in memory at a time), at most :data:`QUEUE_LIMIT` tests waiting. The admin
routes here start a job and read its progress; ``listenlab test score ID`` runs
:func:`score_test` in its own process.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request

from app.listening.answers import wire_model
from app.store.scores import StoreCache
from app.web.admin import TooManyTries, require_admin
from app.web.openapi import errors, ok
from backends.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    ListenlabError,
    NotFound,
    TooMany,
)
from evaluation.metrics.base import Audio, Item

METRICS = ("distillmos", "dnsmos", "words", "speaker")
"""The listening set: each runs where its inputs are (``words`` needs the text, ``speaker``
a reference voice)."""
QUEUE_LIMIT = 8
"""Tests waiting for the worker at most; one more is refused (429)."""

Progress = Callable[[int, int, str], None]


@dataclass
class ScoreRun:
    """What one job did: stimuli scored, scores computed and found stored, per-metric errors."""

    test_id: str
    stimuli: int = 0
    computed: int = 0
    stored_before: int = 0
    audio_s: float = 0.0
    seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def reference_takes(tests: Any, test_id: str, stimuli: Any) -> dict[str, str]:
    """take id → the take of the design's reference system for the same prompt (none when
    the design names no reference)."""
    ref = (tests.require_test(test_id).config.get("design") or {}).get("reference")
    if not ref:
        return {}
    refs = stimuli[stimuli["system_id"] == ref].drop_duplicates("prompt_id")
    by_prompt = dict(zip(refs["prompt_id"], refs["take_id"], strict=True))
    return {
        r.take_id: by_prompt[r.prompt_id]
        for r in stimuli.itertuples()
        if r.prompt_id in by_prompt and r.take_id != by_prompt[r.prompt_id]
    }


def test_items(store: Any, test_id: str, reference_voice: str | Path | None = None) -> list[Item]:
    """One :class:`Item` per stimulus of a real system: its audio, its text, its reference."""
    from app.store.listening import TestStore
    from evaluation.metrics.audio import read_file

    tests = TestStore(store)
    tests.require_test(test_id)
    st = tests.stimuli_frame(test_id)
    st = st[~st["system_id"].fillna("").astype(str).str.startswith("__")]
    st = st.drop_duplicates("take_id")
    refs = reference_takes(tests, test_id, st)
    voice = read_file(reference_voice) if reference_voice else None
    audio: dict[str, Audio] = {}

    def load(take_id: str) -> Audio:
        if take_id not in audio:
            audio[take_id] = read_file(store.audio_path(take_id))
        return audio[take_id]

    return [
        Item(
            load(r.take_id),
            text=tests.take_text(r.take_id) or None,
            reference_voice=voice or (load(refs[r.take_id]) if r.take_id in refs else None),
            name=r.take_id,
        )
        for r in st.itertuples()
    ]


def score_test(
    store: Any,
    test_id: str,
    *,
    metrics: tuple[str, ...] = METRICS,
    reference_voice: str | Path | None = None,
    progress: Progress | None = None,
) -> ScoreRun:
    """Score every stimulus of ``test_id`` and store the scores (see the module docstring)."""
    from evaluation.metrics import build, score_items

    t0 = time.perf_counter()
    items = test_items(store, test_id, reference_voice)
    run = ScoreRun(test_id, len(items), audio_s=sum(i.audio.seconds for i in items))
    results = score_items(items, build(metrics), StoreCache(store), progress)
    for r in results:
        run.computed += sum(not s.cached for s in r.scores)
        run.stored_before += sum(s.cached for s in r.scores)
        for m in r.skipped:
            run.skipped[m] = run.skipped.get(m, 0) + 1
        run.errors += [f"{r.name}: {m}: {e}" for m, e in r.errors.items()]
    run.seconds = time.perf_counter() - t0
    return run


@dataclass
class Job:
    """One test's job as the admin page sees it."""

    test_id: str
    state: str = "queued"
    """``queued``, ``running``, ``done`` or ``failed``."""
    done: int = 0
    total: int = 0
    current: str = ""
    message: str = ""
    run: dict[str, Any] | None = None
    events: list[tuple[int, int]] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("events")
        return out


class ScoringJobs:
    """The background jobs of one app: a queue and one worker thread (started on demand)."""

    def __init__(self, store: Any, metrics: tuple[str, ...] = METRICS):
        self.store = store
        self.metrics = metrics
        self.jobs: dict[str, Job] = {}
        self.waiting: queue.Queue[str] = queue.Queue()
        self.lock = threading.Lock()
        self.worker: threading.Thread | None = None

    def start(self, test_id: str) -> Job:
        """Queue ``test_id`` (a job already queued or running is returned as it is)."""
        from app.store.listening import TestStore

        TestStore(self.store).require_test(test_id)
        with self.lock:
            job = self.jobs.get(test_id)
            if job is not None and job.state in {"queued", "running"}:
                return job
            if sum(j.state == "queued" for j in self.jobs.values()) >= QUEUE_LIMIT:
                raise TooMany(f"{QUEUE_LIMIT} tests are waiting to be scored; try again later")
            job = self.jobs[test_id] = Job(test_id)
            self.waiting.put(test_id)
            if self.worker is None or not self.worker.is_alive():
                self.worker = threading.Thread(target=self.work, name="scoring", daemon=True)
                self.worker.start()
        return job

    def status(self, test_id: str) -> Job:
        job = self.jobs.get(test_id)
        if job is None:
            raise NotFound(f"no scoring job for test {test_id!r} since the app started")
        return job

    def work(self) -> None:
        while True:
            try:
                test_id = self.waiting.get(timeout=1.0)
            except queue.Empty:
                with self.lock:
                    if self.waiting.empty():
                        self.worker = None
                        return
                continue
            self.run_one(self.jobs[test_id])

    def run_one(self, job: Job) -> None:
        job.state = "running"

        def progress(done: int, total: int, name: str) -> None:
            job.done, job.total, job.current = done, total, name
            job.events.append((done, total))

        try:
            run = score_test(self.store, job.test_id, metrics=self.metrics, progress=progress)
        except ListenlabError as e:
            job.state, job.message = "failed", str(e)
            return
        except Exception as e:  # the worker must outlive one bad test
            job.state, job.message = "failed", f"{type(e).__name__}: {e}"
            return
        job.run = asdict(run)
        job.state = "done"
        job.message = (
            f"{run.stimuli} stimuli: {run.computed} scores computed, {run.stored_before} "
            f"already stored" + (f"; {len(run.errors)} errors" if run.errors else "")
        )


ScoringJob = wire_model(
    Job,
    name="ScoringJob",
    exclude=("events",),
    run=(wire_model(ScoreRun) | None, None),
)
"""``POST`` and ``GET /ll/admin/tests/{id}/score``: the job as :meth:`Job.as_dict` writes it
(``run``: what it did, once done)."""

JOBS: dict[int, ScoringJobs] = {}
"""One :class:`ScoringJobs` per store object (the routes and the admin page share it)."""


def jobs_for(store: Any) -> ScoringJobs:
    """The jobs of ``store`` (made on first use)."""
    got = JOBS.get(id(store))
    if got is None or got.store is not store:
        got = JOBS[id(store)] = ScoringJobs(store)
    return got


def jobs(request: Request) -> ScoringJobs:
    got = getattr(request.app.state, "scoring", None)
    if got is None:
        raise Conflict("machine scoring is not set up in this app")
    return got


admin_router = APIRouter(
    dependencies=[Depends(require_admin)],
    responses=errors(InvalidRequest, Forbidden, NotFound, Conflict, TooMany, TooManyTries),
)
Jobs = Depends(jobs)


@admin_router.post("/ll/admin/tests/{test_id}/score", responses=ok(ScoringJob))
async def start_scoring(test_id: str, j: ScoringJobs = Jobs) -> dict[str, Any]:
    """Start (or join) the test's scoring job; its progress is ``GET`` on the same path."""
    import asyncio

    from app.listening.flow import check_id

    check_id(test_id, "test id")
    return ScoringJob.of((await asyncio.to_thread(j.start, test_id)).as_dict())


@admin_router.get("/ll/admin/tests/{test_id}/score", responses=ok(ScoringJob))
async def scoring_status(test_id: str, j: ScoringJobs = Jobs) -> dict[str, Any]:
    return ScoringJob.of(j.status(test_id).as_dict())


__all__ = [
    "METRICS",
    "QUEUE_LIMIT",
    "Job",
    "ScoreRun",
    "ScoringJob",
    "ScoringJobs",
    "admin_router",
    "jobs_for",
    "score_test",
    "test_items",
]
