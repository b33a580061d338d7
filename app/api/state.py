"""Per-app and per-request state of ``listenlab api``, and its error type."""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.api.limits import CONFIG_TIMEOUT, IDLE_TIMEOUT
from backends.base import (
    Backend,
    BackendError,
    InvalidRequest,
)

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
    return ApiError(f"Speech generation failed: {exc}", 400)


class _ClientGone(Exception):
    pass


ListenlabErrorTypes = (InvalidRequest, BackendError)
