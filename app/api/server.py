"""The ``listenlab api`` app: its state, guard, error handlers and routers, and nothing else.

Why it only wires: each area's routes are module-level routers (:mod:`app.api.speech`,
:mod:`app.api.voices`, :mod:`app.api.info`, :mod:`app.api.ws`) that read the app's
:class:`~app.api.state.ApiState` from ``request.app.state``, so an app is this function's few
lines and the routes can be read (and tested) on their own.
"""

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from fastapi import FastAPI

from app.api import batch, info, not_served, speech, voices, ws
from app.api.errors import install_error_handlers
from app.api.limits import CONFIG_TIMEOUT, IDLE_TIMEOUT, ApiLimits
from app.api.metrics import ApiMetrics
from app.api.schemas import ErrorResponse
from app.api.state import ApiState
from app.web.guard import REFUSALS, GuardConfig, GuardMiddleware, default_allowed_hosts
from app.web.openapi import install as install_openapi
from backends.base import Backend
from backends.vllm_omni.wire import error_body


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI):
    """Learn the backend's capabilities at start; close the backend at the end if owned."""
    state: ApiState = app.state.api
    # A remote backend learns its capabilities (cloning, rate) from its server's model card,
    # and the upstream model's name, served by default (a client sends that name).
    with contextlib.suppress(Exception):
        await asyncio.wait_for(state.backend.health(), 5)
    upstream = getattr(state.backend, "upstream_model", None)
    if not state.served_model_given and upstream:
        state.served_model = upstream
        state.metrics.model = upstream
    announce = getattr(app.state, "announce", None)
    if announce is not None:  # the startup line, once the served name is known
        announce(state)
    try:
        yield
    finally:
        if state.own_backend:
            await state.backend.aclose()


UNMATCHED = "unmatched"
"""The one ``route`` label of every request no route answered (a made-up path, a refused
``Host``): made-up URLs must not add series."""


def route_label(scope) -> str:
    """The template of the route that answered (``/v1/audio/voices/{name}``: FastAPI leaves it
    in the scope), never the raw path: each label value is a series ``GET /metrics`` keeps."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


class CountRequests:
    """Counts each HTTP answer by route template and status, and times it and its sizes (the
    instrumentator's families), for ``GET /metrics`` (pure ASGI, so streaming bodies pass
    through untouched)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state: ApiState = scope["app"].state.api
        # the request's arrival, for the time to first audio (``request.state.arrival``)
        t0 = scope.setdefault("state", {})["arrival"] = time.monotonic()
        answer = {"status": 500, "size": 0}

        async def counted(message):
            if message["type"] == "http.response.start":
                state.metrics.request(route_label(scope), message["status"])
                answer["status"] = message["status"]
                headers = dict(message.get("headers") or [])
                answer["size"] = int(headers.get(b"content-length", b"0") or 0)
            await send(message)

        try:
            return await self.app(scope, receive, counted)
        finally:
            headers = dict(scope.get("headers") or [])
            sizes = (int(headers.get(b"content-length", b"0") or 0), answer["size"])
            handler = route_label(scope)
            state.metrics.answered(
                "none" if handler == UNMATCHED else handler,
                scope.get("method", "GET"),
                answer["status"],
                time.monotonic() - t0,
                sizes,
            )


def guard_config(
    limits: ApiLimits, allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str] | None
) -> GuardConfig:
    """Hosts, origins and body limits (:mod:`app.web.guard`); refusals in vLLM-Omni's shape."""
    return GuardConfig(
        allowed_hosts=list(allowed_hosts) if allowed_hosts else default_allowed_hosts(),
        body_limits=[
            ("POST", "/v1/audio/speech", limits.speech_body_bytes),
            ("POST", "/v1/audio/voices", limits.upload_body_bytes),
            ("POST", "/v1/audio/speech/batch", limits.batch_body_bytes),
        ],
        default_body_limit=limits.other_body_bytes,
        error_body=lambda msg, status: error_body(msg, "BadRequestError", status),
        **({"allowed_origins": list(allowed_origins)} if allowed_origins is not None else {}),
    )


def create_api_app(
    backend: Backend,
    *,
    served_model: str | None = None,
    own_backend: bool = False,
    config_timeout: float = CONFIG_TIMEOUT,
    idle_timeout: float = IDLE_TIMEOUT,
    limits: ApiLimits | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    announce: Callable[[ApiState], None] | None = None,
) -> FastAPI:
    """A FastAPI app speaking vLLM-Omni's speech API over ``backend``.

    ``own_backend`` closes the backend when the app shuts down (the CLI owns its backend;
    tests and other apps that mount this one usually do not). ``limits``: see
    :class:`~app.api.limits.ApiLimits`; hosts and origins: see :mod:`app.web.guard`.
    ``announce`` is called once at start-up, when the served model's name is known (a remote
    backend's upstream name is learnt then).
    """
    default = getattr(backend, "upstream_model", None) or backend.name
    state = ApiState(
        backend,
        served_model or default,
        own_backend=own_backend,
        config_timeout=config_timeout,
        idle_timeout=idle_timeout,
        limits=limits or ApiLimits(),
        served_model_given=bool(served_model),
    )
    state.metrics = ApiMetrics(state.served_model)
    app = FastAPI(title="listenlab speech API (vLLM-Omni compatible)", lifespan=lifespan)
    app.state.api = state
    app.state.announce = announce
    guard = guard_config(state.limits, allowed_hosts, allowed_origins)
    app.state.guard = guard
    app.add_middleware(GuardMiddleware, config=guard)
    install_error_handlers(app)
    app.include_router(not_served.router)
    app.add_middleware(CountRequests)
    for router in (batch.router, speech.router, voices.router, info.router, ws.router):
        app.include_router(router)
    install_openapi(app, guard=REFUSALS, model=ErrorResponse)  # bodies, refusals: one shape
    return app


__all__ = ["create_api_app"]
