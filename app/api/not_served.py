"""The routes vLLM-Omni's API server mounts that are not speech: a clear refusal in its shape.

Why: a client written for vLLM-Omni 0.30.0 that calls, say, ``/v1/chat/completions`` or
``/v1/audio/generate`` on ``listenlab api`` must learn that this server does not do that, in
the error shape it parses (``{"error": {message, type, param, code}}``), not FastAPI's bare
``{"detail": "Not Found"}``. Each answers 404 ``NotFoundError`` "The model does not support
<API> API", the words vLLM-Omni uses when its own model lacks that API
(``api_server.py``, e.g. ``create_audio_generate``). The list is the reference app's routes
(``tests/conformance`` reads them from it and checks each).
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
    ("/v1/realtime/sessions", ("POST",), "Realtime"),
    ("/v1/omni/sleep", ("POST",), "Sleep Mode"),
    ("/v1/omni/wakeup", ("POST",), "Sleep Mode"),
    ("/tokenize", ("POST",), "Tokenization"),
    ("/detokenize", ("POST",), "Tokenization"),
)
"""(path, methods, the API's name in the message)."""


def refusal(api: str):
    async def not_supported():
        raise ApiError(f"The model does not support {api} API", 404, "NotFoundError")

    return not_supported


for _path, _methods, _api in NOT_SERVED:
    router.add_api_route(_path, refusal(_api), methods=list(_methods), include_in_schema=False)


__all__ = ["NOT_SERVED", "router"]
