"""Errors of ``listenlab api`` in vLLM-Omni's shape: the one error tree mapped to its statuses.

Why here: every listenlab error carries its HTTP status (:mod:`backends.errors`), but vLLM-Omni's
clients read OpenAI's ``{"error": {message, type, param, code}}`` with vLLM's type names, and
vLLM-Omni answers an engine failure 500 ``InternalServerError`` "Speech generation failed: …". :func:`api_error` does that
mapping once, for the HTTP routes, the SSE error event and the WebSocket session; the body is
written by :func:`backends.vllm_omni.wire.error_body`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.api.schemas import (
    VALIDATION_TYPE,
    ErrorResponse,
    validation_param,
    vllm_validation_message,
)
from backends.errors import BackendError, ListenlabError, http_status
from backends.vllm_omni.wire import error_body

log = logging.getLogger("listenlab.api")


class ApiError(Exception):
    """An error answered as vLLM-Omni's OpenAI-shaped JSON."""

    def __init__(
        self, message: str, status: int = 400, type_: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.message, self.status, self.param = message, status, param
        self.type = type_ or ("BadRequestError" if status < 500 else "InternalServerError")
        if status == 404 and type_ is None:
            self.type = "NotFoundError"


def http_error(message: str, status: int) -> ApiError:
    """What vLLM's ``http_exception_handler`` answers for an ``HTTPException``: the status's
    phrase as ``type`` and no ``param`` (vLLM-Omni raises one for a refused batch)."""
    from http import HTTPStatus

    return ApiError(message, status, HTTPStatus(status).phrase)


def validation_error(errors: list) -> ApiError:
    """A body that fails parsing or validation, in vLLM's words (``Bad Request``, ``param``)."""
    return ApiError(vllm_validation_message(errors), 400, VALIDATION_TYPE, validation_param(errors))


def api_error(exc: BaseException) -> ApiError:
    """Any exception as the answer vLLM-Omni would give.

    A remote server's own status passes through; an engine failure without one is 500, as on
    vLLM-Omni 0.30.0; every other listenlab error answers with its class's status.
    """
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BackendError):
        if exc.status and 400 <= exc.status < 600:
            return ApiError(str(exc), exc.status)
        # serving_speech.py create_speech: any other failure is "Speech generation failed"
        return ApiError(f"Speech generation failed: {exc}", 500, "InternalServerError")
    if isinstance(exc, ListenlabError):
        return ApiError(str(exc), http_status(exc))
    # Anything else is a bug or an engine fault: its text may hold internal reprs, so the
    # client gets the kind of failure and the log gets the details.
    log.error("request failed", exc_info=exc)
    return ApiError(
        f"Speech generation failed: internal error ({type(exc).__name__})",
        500,
        "InternalServerError",
    )


def declared(*statuses: int) -> dict[int | str, dict]:
    """FastAPI ``responses=`` for the statuses a route may refuse with, in vLLM-Omni's shape
    (its :class:`~app.api.schemas.ErrorResponse`, described by the status's phrase as
    vLLM-Omni's own ``/openapi.json`` does)."""
    from http import HTTPStatus

    return {s: {"model": ErrorResponse, "description": HTTPStatus(s).phrase} for s in statuses}


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(error_body(e.message, e.type, e.status, e.param), status_code=e.status)


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(api_error(exc))


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    # vLLM answers body validation errors with 400 and the OpenAI shape.
    assert isinstance(exc, RequestValidationError)
    return error_response(validation_error(list(exc.errors())))


def install_error_handlers(app: FastAPI) -> None:
    """Answer :class:`ApiError`, every listenlab error and FastAPI's validation errors in
    vLLM-Omni's shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ListenlabError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)


__all__ = [
    "ApiError",
    "api_error",
    "declared",
    "error_response",
    "http_error",
    "install_error_handlers",
    "validation_error",
]
