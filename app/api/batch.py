"""``POST /v1/audio/speech/batch``: several utterances in one request, each a whole file.

Why it follows ``create_speech_batch`` of vLLM-Omni 0.30.0 step for step: its clients (the
batch example, the ``items`` form) read per-item results, so the limits and messages must be the
same. The batch's fields are defaults that each item may override; more than
:data:`MAX_ITEMS` items is refused whole (vLLM raises an ``HTTPException``: 400 ``Bad
Request``); a wrong model is the usual 404; each item is then checked by the served model's
rules and generated on its own, and a failed item is ``{"index", "status": "error", "error"}``
beside the others' base64 audio.

Why listenlab adds its own bounds (a public server; vLLM-Omni has none of them): one 47 KB
batch could ask for hours of 192 kHz audio. So, before any work, a batch's total characters
(``ApiLimits.batch_chars``) and the samples its text would make (``ApiLimits.batch_samples``)
are bounded, and the samples are counted again while they are made. Its items wait in the same
FIFO queue as single requests, at most ``--concurrency`` of them at once (a batch is never more
than that many requests in the queue), and a client that goes away cancels what is left.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from app.api.checks import rule_context
from app.api.clips import ref_audio_wav
from app.api.errors import ApiError, api_error, http_error
from app.api.limits import BATCH_SECONDS_PER_CHAR
from app.api.schemas import (
    BatchSpeechRequest,
    BatchSpeechResponse,
    SpeechBatchItemResult,
    SpeechBody,
    merge_batch_item,
)
from app.api.speech import SPEECH_ERRORS, VllmJson, backend_request, collect_file
from app.api.state import ApiState, Lease, api_state
from app.web.openapi import DeclaredRoute
from backends.vllm_omni import wire
from backends.vllm_omni.rules import RequestView, adapter_error, default_voice, sample_rate_error

router = APIRouter(route_class=DeclaredRoute)

MAX_ITEMS = 32
"""``tts_batch_max_items`` (the engine's, default 32)."""
DISCONNECT_POLL_S = 0.25
"""How often a running batch asks whether its client is still there."""


@dataclass
class SampleBudget:
    """The samples a batch may still produce, shared by its items while they generate."""

    limit: int
    used: float = 0.0

    def spend(self, body: SpeechBody, frames: int, rate: int) -> None:
        """Count ``frames`` at the model's ``rate`` as output samples (after rate and speed)."""
        self.used += frames * (body.sample_rate or rate) / rate / (body.speed or 1.0)
        if self.used > self.limit:
            raise ApiError(over_samples(self.limit))


def over_samples(limit: int) -> str:
    return (
        f"Batch audio exceeds the maximum of {limit:,} samples (all items together, at their "
        "output rates and speeds); send fewer or shorter items."
    )


def estimated_samples(body: SpeechBody, model_rate: int) -> int:
    """The output samples ``body`` is taken to make before it runs (:data:`BATCH_SECONDS_PER_CHAR`)."""
    seconds = len(body.input) * BATCH_SECONDS_PER_CHAR / (body.speed or 1.0)
    return int(seconds * (body.sample_rate or model_rate))


def check_batch_size(bodies: list[SpeechBody], state: ApiState) -> None:
    """Refuse a batch whose text, or the audio it would make, is over the server's bounds."""
    chars = sum(len(b.input) for b in bodies)
    if chars > state.limits.batch_chars:
        raise http_error(
            f"Batch input totals {chars:,} characters, exceeding the maximum of "
            f"{state.limits.batch_chars:,}.",
            400,
        )
    rate = state.backend.capabilities.sample_rate
    if sum(estimated_samples(b, rate) for b in bodies) > state.limits.batch_samples:
        raise http_error(over_samples(state.limits.batch_samples), 400)


async def run_item(state: ApiState, index: int, body: SpeechBody, budget: SampleBudget) -> dict:
    """One item: the model's checks (``_validate_tts_request``), then a whole file."""
    ctx = await rule_context(state)
    view = RequestView.of(body)
    default_voice(view, ctx)
    err = sample_rate_error(ctx.rules, body.sample_rate) or adapter_error(view, ctx)
    if err:
        return {"index": index, "status": "error", "error": err}
    lease = Lease(state.gate)
    try:
        if budget.used >= budget.limit:
            raise ApiError(over_samples(budget.limit))
        rid = f"speech-{uuid.uuid4().hex}"
        ref = await ref_audio_wav(state, view.ref_audio)
        req = backend_request(body, view, ref, rid, state)
        state.check_queue()  # the same queue limit as a single request
        await lease.acquire()
        data = await collect_file(
            state, body, req, on_audio=lambda frames, rate: budget.spend(body, frames, rate)
        )
    except Exception as e:
        return {"index": index, "status": "error", "error": api_error(e).message}
    finally:
        await lease.release()
    return {
        "index": index,
        "status": "success",
        "audio_data": base64.b64encode(data).decode("ascii"),
        "media_type": wire.CONTENT_TYPES[body.response_format],
        "usage": wire.NO_USAGE,
    }


async def run_batch(state: ApiState, bodies: list[SpeechBody]) -> list[dict]:
    """Every item, in order, at most ``concurrency`` at once: each of them waits in the
    backend's FIFO queue like a single request, so a batch never holds more than that many
    places in it and requests that came after it are served between its items."""
    assert state.gate is not None
    budget = SampleBudget(state.limits.batch_samples)
    results: list[dict | None] = [None] * len(bodies)
    todo = iter(enumerate(bodies))

    async def worker() -> None:
        for i, body in todo:
            results[i] = await run_item(state, i, body, budget)

    workers = min(state.gate.limit, len(bodies))
    await asyncio.gather(*(worker() for _ in range(workers)))
    return [r for r in results if r is not None]


async def until_gone(task: asyncio.Future, is_disconnected) -> bool:
    """Wait for ``task``; cancel it and return False as soon as the client disconnects."""
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return True
            if await is_disconnected():
                return False
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@router.post(
    "/v1/audio/speech/batch",
    responses={200: {"model": BatchSpeechResponse}, **SPEECH_ERRORS},
)
async def create_speech_batch(
    http: Request,
    state: ApiState = Depends(api_state),
    batch: BatchSpeechRequest = Depends(VllmJson(BatchSpeechRequest)),
):
    if len(batch.items) > MAX_ITEMS:
        raise http_error(
            f"Batch contains {len(batch.items)} items, exceeding the maximum of {MAX_ITEMS}.", 400
        )
    state.check_model(batch.model)
    bodies = []
    for item in batch.items:
        try:
            bodies.append(merge_batch_item(batch, item))
        except ValueError as e:
            raise ApiError(str(e), 500, "Internal Server Error") from None
    check_batch_size(bodies, state)
    state.check_queue()
    task = asyncio.ensure_future(run_batch(state, bodies))
    if not await until_gone(task, http.is_disconnected):
        return Response(status_code=499)
    results = [SpeechBatchItemResult.model_validate(r) for r in task.result()]
    ok = sum(1 for r in results if r.status == "success")
    answer = BatchSpeechResponse(
        id=f"speech-batch-{uuid.uuid4().hex[:16]}",  # vLLM's random_uuid(): 16 hex
        results=results,
        total=len(results),
        succeeded=ok,
        failed=len(results) - ok,
    )
    return JSONResponse(answer.model_dump(exclude_none=True))


__all__ = ["MAX_ITEMS", "router"]
