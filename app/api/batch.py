"""``POST /v1/audio/speech/batch``: several utterances in one request, each a whole file.

Why it follows ``create_speech_batch`` of vLLM-Omni 0.30.0 step for step: its clients (the
batch example, the ``items`` form) read per-item results, so the limits and messages must be the
same. The batch's fields are defaults that each item may override; more than
:data:`MAX_ITEMS` items is refused whole (vLLM raises an ``HTTPException``: 400 ``Bad
Request``); a wrong model is the usual 404; each item is then checked by the served model's
rules and generated on its own (through the same queue as every other request), and a failed
item is ``{"index", "status": "error", "error"}`` beside the others' base64 audio.
"""

from __future__ import annotations

import asyncio
import base64
import uuid

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from app.api.checks import rule_context
from app.api.clips import ref_audio_wav
from app.api.errors import ApiError, api_error, http_error
from app.api.schemas import BatchSpeechRequest, SpeechBody, merge_batch_item
from app.api.speech import backend_request, collect_file, parse_body
from app.api.state import ApiState, Lease, api_state
from backends.vllm_omni import wire
from backends.vllm_omni.rules import RequestView, adapter_error, default_voice, sample_rate_error

router = APIRouter()

MAX_ITEMS = 32
"""``tts_batch_max_items`` (the engine's, default 32)."""


async def run_item(state: ApiState, index: int, body: SpeechBody) -> dict:
    """One item: the model's checks (``_validate_tts_request``), then a whole file."""
    ctx = await rule_context(state)
    view = RequestView.of(body)
    default_voice(view, ctx)
    err = sample_rate_error(ctx.rules, body.sample_rate) or adapter_error(view, ctx)
    if err:
        return {"index": index, "status": "error", "error": err}
    lease = Lease(state.gate)
    try:
        rid = f"speech-{uuid.uuid4().hex}"
        ref = await ref_audio_wav(state, view.ref_audio)
        req = backend_request(body, view, ref, rid, state)
        await lease.acquire()
        data = await collect_file(state, body, req)
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


@router.post("/v1/audio/speech/batch")
async def create_speech_batch(http: Request, state: ApiState = Depends(api_state)):
    batch: BatchSpeechRequest = await parse_body(
        http, state.limits.json_depth, schema=BatchSpeechRequest
    )
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
    results = await asyncio.gather(*(run_item(state, i, b) for i, b in enumerate(bodies)))
    ok = sum(1 for r in results if r["status"] == "success")
    return JSONResponse(
        {
            "id": f"speech-batch-{uuid.uuid4().hex[:16]}",  # vLLM's random_uuid(): 16 hex
            "results": list(results),
            "total": len(results),
            "succeeded": ok,
            "failed": len(results) - ok,
        }
    )


__all__ = ["MAX_ITEMS", "router"]
