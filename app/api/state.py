"""Per-app and per-request state of ``listenlab api``, and the FastAPI dependency that hands it
to the routes.

Why on ``app.state``: the routes are module-level routers (:mod:`app.api.speech`,
:mod:`app.api.voices`, :mod:`app.api.info`, :mod:`app.api.ws`), so several apps, each over its
own backend, can run in one process (the tests do); each route reads its app's
:class:`ApiState` through :func:`api_state`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection

from app.api.errors import ApiError
from app.api.limits import CONFIG_TIMEOUT, IDLE_TIMEOUT, ApiLimits
from app.web.gate import Gate
from app.web.offload import Offload, OffloadTimeout
from backends.audio import decode_mono
from backends.base import Backend

# --------------------------------------------------------------------------- per-request state


@dataclass
class RequestState:
    request_id: str
    route: str
    started: float = field(default_factory=time.monotonic)
    chunks: int = 0
    bytes_sent: int = 0


@dataclass
class ApiState:
    """Everything one app instance keeps; per-request entries are freed when they end."""

    backend: Backend
    served_model: str
    own_backend: bool = False
    config_timeout: float = CONFIG_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    requests: dict[str, RequestState] = field(default_factory=dict)
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Metadata of voices uploaded through this server (consent, created_at, size, ...)."""
    created: int = field(default_factory=lambda: int(time.time()))
    limits: ApiLimits = field(default_factory=ApiLimits)
    gate: Gate | None = None
    """FIFO concurrency limit of the backend (made with the app, from ``limits``)."""
    decoder: Offload | None = None
    voice_cache: tuple[float, list] | None = None
    """When the backend's voices were last read, and what they were (app/api/checks.py)."""
    served_model_given: bool = True
    """``--served-model-name`` was given; else a remote backend's upstream name replaces the
    default once its server has said it (the lifespan's refresh)."""
    metrics: Any = None
    """Request counters and time-to-first-audio figures for ``GET /metrics``."""

    def __post_init__(self) -> None:
        if self.gate is None:
            self.gate = Gate(self.limits.concurrency)
        if self.decoder is None:
            self.decoder = Offload(self.limits.decode_concurrency, self.limits.decode_timeout_s)

    def check_queue(self) -> None:
        """Refuse at once when the queue is full, rather than hold the client forever."""
        assert self.gate is not None
        if self.gate.queued >= self.limits.max_queue:
            raise ApiError(
                f"the server is busy: {self.gate.queued} requests are queued (limit "
                f"{self.limits.max_queue}); retry later",
                503,
            )

    def check_model(self, model: str | None) -> None:
        """A request naming another model gets vLLM-Omni's 404."""
        if model and model != self.served_model:
            raise ApiError(f"The model `{model}` does not exist.", 404, "NotFoundError", "model")

    async def decode(self, data: bytes, what: str) -> tuple[Any, int]:
        """Decode an untrusted clip in a thread, bounded in time and in decodes at once."""
        assert self.decoder is not None
        try:
            x, sr, _fmt = await self.decoder.run(decode_mono, data, what)
        except OffloadTimeout:
            raise ApiError(
                f"decoding {what} took longer than {self.limits.decode_timeout_s:.0f} s"
            ) from None
        return x, sr

    @contextlib.contextmanager
    def track(self, route: str, request_id: str | None = None):
        rid = request_id or f"speech-{uuid.uuid4().hex}"
        st = RequestState(rid, route)
        self.requests[rid] = st
        try:
            yield st
        finally:
            self.requests.pop(rid, None)


class ClientGone(Exception):
    """The client disconnected: stop generating and answer nothing more."""


class Lease:
    """A gate slot held for a response's whole life and released exactly once, by whichever
    comes first: the body's ``finally``, the response's background task, or garbage collection
    of a body that never started (a client gone before the first byte)."""

    def __init__(self, gate: Gate):
        self._cm = gate.slot()
        self._held = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def acquire(self) -> None:
        await self._cm.__aenter__()
        self._held = True
        self._loop = asyncio.get_running_loop()

    async def release(self) -> None:
        if self._held:
            self._held = False
            with contextlib.suppress(Exception):
                await self._cm.__aexit__(None, None, None)

    def release_soon(self) -> None:
        """Sync, thread-safe: for finalizers."""
        if self._held and self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.release()))


async def acquire_unless_gone(lease: Lease, is_disconnected) -> bool:
    """Wait in the FIFO queue; give the place up (False) when the client disconnects."""
    task = asyncio.ensure_future(lease.acquire())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.5)
            if done:
                task.result()
                return True
            if await is_disconnected():
                return False
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def api_state(conn: HTTPConnection) -> ApiState:
    """FastAPI dependency: the state of the app serving this request or WebSocket."""
    return conn.app.state.api
