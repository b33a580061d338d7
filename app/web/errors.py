"""Errors as HTTP answers: any :class:`backends.errors.ListenlabError` becomes one JSON shape.

Why one handler: the Playground's JSON routes, the listening tests and the arena used to map
errors to statuses in their own ways (one by matching class names as strings). The status now
lives on the error class (:mod:`backends.errors`); this module only writes it out. The body
carries the message under both ``error`` (the Playground's and the arena's pages read it) and
``detail`` (FastAPI's key, which the rater page reads), plus ``reason`` and the error's
``extra`` facts. ``listenlab api`` answers in vLLM-Omni's shape instead (:mod:`app.api`).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from backends.errors import ListenlabError

log = logging.getLogger("listenlab.app")


class ErrorBody(BaseModel, extra="allow"):
    """What ``listenlab serve`` answers for any refusal: the message under ``error`` (the
    Playground and the arena read it) and ``detail`` (the rater page reads it), a word to
    branch on, and the error's facts (``retry_after_s``, a battle's state). A refusal of the
    guard (:mod:`app.web.guard`) carries only ``error``. ``/openapi.json`` declares it."""

    error: str
    detail: str | None = None
    reason: str | None = None


def error_body(exc: ListenlabError) -> dict[str, Any]:
    message = str(exc)
    body = {"error": message, "detail": message, "reason": exc.reason, **exc.extra}
    return ErrorBody.model_validate(body).model_dump()


def error_response(exc: ListenlabError) -> JSONResponse:
    headers = {}
    retry = exc.extra.get("retry_after_s")
    if retry is not None:
        headers["Retry-After"] = str(retry)
    if exc.http_status >= 500:
        log.warning("%s: %s", type(exc).__name__, exc)
    return JSONResponse(error_body(exc), status_code=exc.http_status, headers=headers)


async def _handle(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ListenlabError)
    return error_response(exc)


async def _handle_http(_request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (a malformed multipart form, an unknown path, a wrong method)
    in the same :class:`ErrorBody` shape as the app's, ``detail`` the message as before."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    body = ErrorBody(error=message, detail=message).model_dump()
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def install_error_handler(app: FastAPI) -> None:
    """Answer every :class:`ListenlabError` a route raises with :func:`error_response`, and
    Starlette's HTTP refusals in the same shape (``/openapi.json`` declares one shape)."""
    app.add_exception_handler(ListenlabError, _handle)
    app.add_exception_handler(StarletteHTTPException, _handle_http)


__all__ = ["ErrorBody", "error_body", "error_response", "install_error_handler"]
