"""``GET /v1/models``, ``/health``, ``/ping``, ``/version``, ``/load`` and ``/metrics``: what
``listenlab api`` serves, whether it can, and how it has been doing.

Why the model card has a ``listenlab`` block: a remote listenlab (the ``vllm-omni+http``
backend) learns the capabilities, rate, channels and the served model's request rules before
its first request; OpenAI clients ignore the extra key. The other routes answer as vLLM's do
(``/ping`` is ``/health`` without a body, ``/version`` names the vLLM release whose API is
served, ``/load`` counts requests in progress).
"""

from dataclasses import asdict

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response

from app.api.checks import served_unit
from app.api.metrics import CONTENT_TYPE
from app.api.state import ApiState, api_state
from app.web.openapi import DeclaredRoute, media
from backends.vllm_omni.rules import GENERIC_RULES, SpeechRules

VLLM_VERSION = "0.30.0"
"""The vLLM (and vLLM-Omni) release whose speech API ``listenlab api`` serves."""


def rules_card(rules_of: SpeechRules) -> dict:
    """The served model's request rules, for a remote client to check against."""
    rules = asdict(rules_of)
    for key in ("sample_rates", "languages"):
        if rules[key] is not None:
            rules[key] = sorted(rules[key])
    rules["embedding_dims"] = [list(x) for x in rules["embedding_dims"]]
    return rules


router = APIRouter(route_class=DeclaredRoute)
UNHEALTHY = {503: {"description": "The backend cannot serve now (its reason, for /health)"}}


@router.get("/v1/models")
async def list_models(state: ApiState = Depends(api_state)):
    backend = state.backend
    caps = backend.capabilities
    unit = served_unit(state)
    card = {
        "id": state.served_model,
        "object": "model",
        "created": state.created,
        "owned_by": "listenlab",
        "root": backend.describe(),
        "parent": None,
        "permission": [],
    }
    if unit is not None and unit.max_model_len is not None:
        card["max_model_len"] = unit.max_model_len  # vLLM's card field: the prompt's limit
    return {
        "object": "list",
        "data": [
            card
            | {
                "listenlab": {
                    "backend": backend.describe(),
                    "streaming": caps.streaming,
                    "cloning": caps.cloning,
                    "languages": list(caps.languages),
                    "sample_rate": caps.sample_rate,
                    "channels": caps.channels,
                    "speed": caps.speed,
                    "speed_streaming": caps.speed_streaming,
                    "instructions": caps.instructions,
                    "seed": caps.seed,
                    "voice_library": caps.voice_library,
                    "rules": rules_card(unit.rules if unit is not None else GENERIC_RULES),
                    "model": unit.name if unit is not None else None,
                    "stand_in": backend.note(),
                },
            }
        ],
    }


@router.get("/health", responses=UNHEALTHY)
async def health(state: ApiState = Depends(api_state)):
    try:
        h = await state.backend.health()
    except Exception as e:
        return JSONResponse({"status": "unhealthy", "reason": str(e)}, status_code=503)
    if h.ok:
        return {"status": "healthy"}
    return JSONResponse({"status": "unhealthy", "reason": h.detail}, status_code=503)


PING = {
    "response_class": Response,
    "responses": {200: {"description": "Healthy (no body)"}, 503: {"description": "Unhealthy"}},
}


@router.get("/ping", operation_id="ping_get", **PING)
@router.post("/ping", operation_id="ping_post", **PING)
async def ping(state: ApiState = Depends(api_state)):
    """vLLM's ``/ping``: the health check without a body."""
    try:
        h = await state.backend.health()
    except Exception:
        return Response(status_code=503)
    return Response(status_code=200 if h.ok else 503)


@router.get("/version")
async def version():
    return {"version": VLLM_VERSION}


@router.get("/load")
async def load(state: ApiState = Depends(api_state)):
    return {"server_load": len(state.requests)}


@router.get("/metrics", response_class=Response, responses=media(CONTENT_TYPE))
async def metrics(state: ApiState = Depends(api_state)):
    gate = state.gate
    state.metrics.load = (gate.active, gate.queued) if gate is not None else (0, 0)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
