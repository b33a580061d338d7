"""The routes vLLM-Omni's API server mounts that are not speech: a clear refusal in its shape.

Why: a client written for vLLM-Omni 0.30.0 that calls, say, ``/v1/chat/completions`` or
``/v1/audio/generate`` on ``listenlab api`` must learn that this server does not do that, in
the error shape it parses (``{"error": {message, type, param, code}}``), not FastAPI's bare
``{"detail": "Not Found"}``. Each answers 404 ``NotFoundError`` "The model does not support
<API> API", the words vLLM-Omni uses when its own model lacks that API
(``api_server.py``, e.g. ``create_audio_generate``), without validating the body of a
request listenlab does not serve (vLLM-Omni validates first: docs/api.md lists it). The RL
rollout session routes answer what vLLM-Omni answers for a model without rollout serving (501).
The list is the reference app's routes (``tests/conformance/test_dropin.py`` reads them from it
and checks each).
"""

from __future__ import annotations

from fastapi import APIRouter

from app.api.errors import ApiError

router = APIRouter()

NOT_SERVED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/v1/audio/generate", ("POST",), "Audio Generate"),
    ("/v1/chat/completions", ("POST",), "Chat Completions"),
    ("/v1/chat/completions/batch", ("POST",), "Chat Completions"),
    ("/v1/images/generations", ("POST",), "Image Generation"),
    ("/v1/images/edits", ("POST",), "Image Edit"),
    ("/v1/videos", ("GET", "POST"), "Video Generation"),
    ("/v1/videos/sync", ("POST",), "Video Generation"),
    ("/v1/videos/{video_id}", ("GET", "DELETE"), "Video Generation"),
    ("/v1/videos/{video_id}/content", ("GET",), "Video Generation"),
    ("/v1/omni/sleep", ("POST",), "Sleep Mode"),
    ("/v1/omni/wakeup", ("POST",), "Sleep Mode"),
    ("/tokenize", ("POST",), "Tokenization"),
    ("/detokenize", ("POST",), "Tokenization"),
    ("/invocations", ("POST",), "Invocations"),
)
"""(path, methods, the API's name in the message)."""

RL_ROLLOUT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/v1/realtime/sessions", ("POST",)),
    ("/v1/realtime/sessions/{session_id}/step", ("POST",)),
    ("/v1/realtime/sessions/{session_id}/reset", ("POST",)),
    ("/v1/realtime/sessions/{session_id}/close", ("POST",)),
    ("/v1/realtime/sessions/{session_id}/status", ("GET",)),
)
"""The RL rollout session routes: vLLM-Omni itself answers them 501 for a model without
rollout serving (``api_server.py`` ``_rl_rollout_serving``), in these words."""
RL_MESSAGE = "RL rollout serving not available for this model."


def refusal(api: str):
    async def not_supported():
        raise ApiError(f"The model does not support {api} API", 404, "NotFoundError")

    return not_supported


async def no_rollout():
    raise ApiError(RL_MESSAGE, 501, "Not Implemented")


for _path, _methods, _api in NOT_SERVED:
    router.add_api_route(_path, refusal(_api), methods=list(_methods), include_in_schema=False)
for _path, _methods in RL_ROLLOUT:
    router.add_api_route(_path, no_rollout, methods=list(_methods), include_in_schema=False)


__all__ = ["NOT_SERVED", "RL_MESSAGE", "RL_ROLLOUT", "router"]
