"""The one error tree: every error listenlab raises on purpose, each with its HTTP status.

Why one tree with the status on the class: the Playground's JSON routes, the listening tests'
routes, the arena and ``listenlab api`` all answer errors over HTTP. When each of them keeps
its own table of "this exception is a 404", the tables drift apart (one matched class names as
strings). Here a class says once what it means; :mod:`app.web.errors` turns any of them into a
response, and ``listenlab api`` into vLLM-Omni's error shape.

* ``InvalidRequest`` (400) and its kinds: :class:`NotFound` (404), :class:`Forbidden` (403),
  :class:`LoginRequired` (401), :class:`Conflict` (409), :class:`TooMany` (429, with
  ``retry_after_s``). The caller can fix these; nothing was generated or stored.
* ``BackendError`` (502): the engine or a remote server failed. ``upstream_status`` is what
  that server answered, if it answered.

``reason`` is a short machine-readable word a page can branch on (``"rate_limited"``);
``extra`` holds JSON-safe facts sent with the message (``retry_after_s``, a battle's state).
"""

from __future__ import annotations

from typing import Any, ClassVar


class ListenlabError(Exception):
    """Base class of every error listenlab raises on purpose."""

    http_status: ClassVar[int] = 500
    reason: ClassVar[str] = "error"

    def __init__(self, message: str = "", **extra: Any):
        super().__init__(message)
        self.extra: dict[str, Any] = extra


class InvalidRequest(ListenlabError, ValueError):
    """The caller asked for something that cannot be done. Nothing was generated."""

    http_status, reason = 400, "invalid"


class NotFound(InvalidRequest):
    """The thing named (a voice, a take, a test item, a battle) does not exist here."""

    http_status, reason = 404, "not_found"


class Forbidden(InvalidRequest):
    """It exists, but belongs to someone else (or this caller may not do this)."""

    http_status, reason = 403, "forbidden"


class LoginRequired(InvalidRequest):
    """Only a signed-in visitor may do this."""

    http_status, reason = 401, "login_required"


class Conflict(InvalidRequest):
    """Not now: the thing's state does not allow it (already answered, not played yet)."""

    http_status, reason = 409, "conflict"


class NotPersistent(Conflict):
    """Not while the data would be lost: opening a test for raters on a store that does not
    outlive the container needs an explicit confirmation."""

    reason = "not_persistent"


class TooMany(InvalidRequest):
    """Too many requests from this client; ``retry_after_s`` says when to come back."""

    http_status, reason = 429, "rate_limited"

    def __init__(self, message: str, retry_after_s: float | None = None, **extra: Any):
        if retry_after_s is not None:
            extra["retry_after_s"] = max(1, int(retry_after_s + 0.999))
        super().__init__(message, **extra)

    @property
    def retry_after_s(self) -> int | None:
        return self.extra.get("retry_after_s")


class EmptyText(InvalidRequest):
    pass


class TextTooLong(InvalidRequest):
    pass


class UnknownVoice(InvalidRequest):
    pass


class SpeedOutOfRange(InvalidRequest):
    pass


class UnknownBackend(InvalidRequest):
    pass


class Unsupported(InvalidRequest):
    """The backend cannot do this (e.g. cloning on a voice that cannot clone)."""


class BackendError(ListenlabError, RuntimeError):
    """The engine or server failed while generating.

    ``status`` is the HTTP status a remote server answered with (if any) and ``partial`` says
    whether some audio had already been delivered; that audio must be treated as a failed take.
    """

    http_status, reason = 502, "backend_failed"

    def __init__(self, message: str, *, status: int | None = None, partial: bool = False):
        super().__init__(message)
        self.message = message
        self.status = status
        self.partial = partial


class StreamTimeout(BackendError):
    reason = "timeout"


class ModelUnavailable(BackendError):
    """Weights are not on this machine; listenlab never downloads them at run time."""

    reason = "model_unavailable"


def http_status(exc: BaseException) -> int:
    """The HTTP status an error answers with (500 for anything not raised on purpose)."""
    return exc.http_status if isinstance(exc, ListenlabError) else 500


__all__ = [
    "BackendError",
    "Conflict",
    "EmptyText",
    "Forbidden",
    "InvalidRequest",
    "ListenlabError",
    "LoginRequired",
    "ModelUnavailable",
    "NotFound",
    "NotPersistent",
    "SpeedOutOfRange",
    "StreamTimeout",
    "TextTooLong",
    "TooMany",
    "UnknownBackend",
    "UnknownVoice",
    "Unsupported",
    "http_status",
]
