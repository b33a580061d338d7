"""``listenlab api``: serve vLLM-Omni's speech API over any listenlab backend.

Field names, event names, the streaming WAV header and the error shapes follow vLLM-Omni
(``shared/reference/vllm-omni-speech-api.md`` §2-§5), so any vLLM-Omni or OpenAI client can use
the CPU voice, and the remote backend can be tested end to end over real sockets here.

Routes: ``POST /v1/audio/speech`` (whole file, SSE, raw pcm/wav stream), ``WS
/v1/audio/speech/stream``, ``GET/POST/DELETE /v1/audio/voices``, ``GET /v1/models``,
``GET /health``. A client that goes away cancels generation: the backend stream is closed.

Modules: :mod:`~app.api.server` (the app: state, guard, error handlers, routers),
:mod:`~app.api.speech` (``POST /v1/audio/speech``), :mod:`~app.api.ws` (the WebSocket session),
:mod:`~app.api.voices` and :mod:`~app.api.info` (voices, models, health), :mod:`~app.api.state`
(per-app state and its dependency), :mod:`~app.api.errors` (vLLM-Omni's error shape),
:mod:`~app.api.clips` (reference clips), :mod:`~app.api.output` (the PCM sent),
:mod:`~app.api.schemas` (request bodies), :mod:`~app.api.limits` (every limit) and
:mod:`~app.api.cli` (``listenlab api``). The bytes on the wire are written with
:mod:`backends.vllm_omni.wire` and a body becomes a ``SpeechRequest`` through
:func:`backends.vllm_omni.request.speech_request`, the modules the remote backend reads with.
FastAPI and pydantic are imported only when the app is built, so other commands start fast.
"""

from __future__ import annotations

from typing import Any

from app.api.cli import add_cli

_LAZY = {
    "create_api_app": "app.api.server",
    "ApiState": "app.api.state",
    "ApiError": "app.api.errors",
    "SpeechBody": "app.api.schemas",
    "SessionConfig": "app.api.schemas",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'app.api' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


__all__ = ["add_cli", *_LAZY]
