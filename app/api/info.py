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

from app.api.answers import (
    Healthy,
    ListenlabCard,
    ModelCard,
    ModelList,
    ServerLoad,
    Unhealthy,
    Version,
    dump,
)
from app.api.checks import served_unit
from app.api.metrics import CONTENT_TYPE
from app.api.state import ApiState, api_state
from app.web.openapi import DeclaredRoute, media, ok
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
UNHEALTHY = {503: {"model": Unhealthy, "description": "The backend cannot serve now (its reason)"}}


def listenlab_card(state: ApiState) -> ListenlabCard:
    """The card's ``listenlab`` block: the backend's capabilities and the served rules."""
    backend = state.backend
    caps = backend.capabilities
    unit = served_unit(state)
    return ListenlabCard(
        backend=backend.describe(),
        streaming=caps.streaming,
        cloning=caps.cloning,
        languages=list(caps.languages),
        sample_rate=caps.sample_rate,
        channels=caps.channels,
        speed=caps.speed,
        speed_streaming=caps.speed_streaming,
        instructions=caps.instructions,
        seed=caps.seed,
        voice_library=caps.voice_library,
        rules=rules_card(unit.rules if unit is not None else GENERIC_RULES),
        model=unit.name if unit is not None else None,
        stand_in=backend.note(),
    )


@router.get("/v1/models", response_class=JSONResponse, responses=ok(ModelList))
async def list_models(state: ApiState = Depends(api_state)) -> JSONResponse:
    unit = served_unit(state)
    card = ModelCard(
        id=state.served_model,
        object="model",
        created=state.created,
        owned_by="listenlab",
        root=state.backend.describe(),
        parent=None,
        permission=[],
        listenlab=listenlab_card(state),
    )
    if unit is not None and unit.max_model_len is not None:
        card.max_model_len = unit.max_model_len  # vLLM's card field: the prompt's limit
    return JSONResponse(dump(ModelList(object="list", data=[card])))


@router.get("/health", response_class=JSONResponse, responses={**ok(Healthy), **UNHEALTHY})
async def health(state: ApiState = Depends(api_state)) -> JSONResponse:
    try:
        h = await state.backend.health()
    except Exception as e:
        return JSONResponse(dump(Unhealthy(status="unhealthy", reason=str(e))), status_code=503)
    if h.ok:
        return JSONResponse(dump(Healthy(status="healthy")))
    return JSONResponse(dump(Unhealthy(status="unhealthy", reason=h.detail)), status_code=503)


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


@router.get("/version", response_class=JSONResponse, responses=ok(Version))
async def version() -> JSONResponse:
    return JSONResponse(dump(Version(version=VLLM_VERSION)))


@router.get("/load", response_class=JSONResponse, responses=ok(ServerLoad))
async def load(state: ApiState = Depends(api_state)) -> JSONResponse:
    return JSONResponse(dump(ServerLoad(server_load=len(state.requests))))


@router.get("/metrics", response_class=Response, responses=media(CONTENT_TYPE))
async def metrics(state: ApiState = Depends(api_state)):
    gate = state.gate
    state.metrics.load = (gate.active, gate.queued) if gate is not None else (0, 0)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
