"""``GET /v1/models`` and ``GET /health``: what ``listenlab api`` serves, and whether it can.

Why the model card has a ``listenlab`` block: a remote listenlab (the ``vllm-omni+http``
backend) learns the capabilities, rate and channels before its first request; OpenAI clients
ignore the extra key.
"""

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from app.api.state import ApiState, api_state

router = APIRouter()


@router.get("/v1/models")
async def list_models(state: ApiState = Depends(api_state)):
    backend = state.backend
    caps = backend.capabilities
    return {
        "object": "list",
        "data": [
            {
                "id": state.served_model,
                "object": "model",
                "created": state.created,
                "owned_by": "listenlab",
                "root": backend.describe(),
                "parent": None,
                "permission": [],
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
                },
            }
        ],
    }


@router.get("/health")
async def health(state: ApiState = Depends(api_state)):
    try:
        h = await state.backend.health()
    except Exception as e:
        return JSONResponse({"status": "unhealthy", "reason": str(e)}, status_code=503)
    if h.ok:
        return {"status": "healthy"}
    return JSONResponse({"status": "unhealthy", "reason": h.detail}, status_code=503)
