"""Per-app and per-request state of ``listenlab api``, and its error type."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.api.limits import CONFIG_TIMEOUT, IDLE_TIMEOUT, ApiLimits
from app.web.gate import Gate
from app.web.offload import Offload, OffloadTimeout
from backends.base import Backend
from backends.errors import BackendError, InvalidRequest

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

    async def decode(self, data: bytes, what: str) -> tuple[Any, int]:
        """Decode an untrusted clip in a thread, bounded in time and in decodes at once."""
        from voices.clips import decode_mono

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


# --------------------------------------------------------------------------- the app


class ApiError(Exception):
    """An error answered as vLLM-Omni's OpenAI-shaped JSON."""

    def __init__(
        self, message: str, status: int = 400, type_: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.message, self.status, self.param = message, status, param
        self.type = type_ or ("BadRequestError" if status < 500 else "server_error")
        if status == 404 and type_ is None:
            self.type = "NotFoundError"


def _error_from(exc: BaseException) -> ApiError:
    """Map listenlab errors to the reference's statuses (generic failures are 400 there too)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InvalidRequest):
        return ApiError(str(exc), 400)
    if isinstance(exc, BackendError):
        st = exc.status if exc.status and 400 <= exc.status < 600 else 500
        return ApiError(str(exc), st)
    # Anything else is a bug or an engine fault: its text may hold internal reprs, so the
    # client gets the kind of failure and the log gets the details.
    logging.getLogger("listenlab.api").error("request failed", exc_info=exc)
    return ApiError(f"Speech generation failed: internal error ({type(exc).__name__})", 400)


class _ClientGone(Exception):
    pass


ListenlabErrorTypes = (InvalidRequest, BackendError)


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
