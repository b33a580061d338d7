"""A speech request over HTTP: ``POST /v1/audio/speech``, streamed or as one whole file.

Why the body is read by its *response* ``Content-Type``: ``stream: true`` means SSE on new
servers and raw PCM on old ones, so the request always says ``stream_format`` and the answer is
parsed as what it says it is (:mod:`.sse`, :mod:`.raw`), or as a whole file from a server that
ignored the streaming flags. Generic server failures come back as 400 ``"Speech generation
failed: …"``: every non-2xx becomes :class:`~backends.errors.BackendError` with the server's
message and ``status``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from backends.base import Audio, AudioChunk
from backends.errors import BackendError, StreamTimeout
from backends.vllm_omni.remote.framing import Clock, Reader
from backends.vllm_omni.remote.raw import decode_file, parse_raw, parse_whole_file
from backends.vllm_omni.remote.server import RemoteServer
from backends.vllm_omni.remote.sse import parse_sse
from backends.vllm_omni.wire import body_kind, error_message, usage_from_headers

SPEECH = "/v1/audio/speech"


async def stream_http(
    server: RemoteServer, body: dict[str, Any], request_id: str
) -> AsyncIterator[AudioChunk]:
    """POST a streaming request and yield its audio as it comes (see the module docstring)."""
    import httpx

    clock = Clock(server.options)
    client = server.http()
    req = client.build_request(
        "POST",
        server.url(SPEECH),
        json=body,
        headers={
            "Accept": "text/event-stream, audio/*, application/json",
            "X-Request-Id": request_id,
        },
    )
    try:
        resp = await clock.wait(client.send(req, stream=True), "the response headers")
    except httpx.ConnectTimeout:
        raise StreamTimeout(
            f"could not connect to {server.base_url} within {server.options.connect_timeout} s "
            "(connect_timeout)"
        ) from None
    except httpx.HTTPError as e:
        raise BackendError(f"cannot reach {server.base_url}: {e!r}") from None
    try:
        if resp.status_code >= 400:
            content = await clock.wait(resp.aread(), "the error body")
            raise BackendError(error_message(content, resp.status_code), status=resp.status_code)
        ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        reader = Reader(resp.aiter_bytes(), clock)
        kind = body_kind(ctype)
        server.record_usage(request_id, usage_from_headers(resp.headers))
        if kind == "sse":
            gen = parse_sse(reader, server, request_id)
        elif kind in ("wav", "pcm"):
            gen = parse_raw(reader, server, wav=kind == "wav")
        elif kind == "file":
            gen = parse_whole_file(reader, ctype)
        else:
            content = await clock.wait(resp.aread(), "the body")
            raise BackendError(
                f"unexpected {resp.status_code} response of type {ctype or 'unknown'}: "
                + error_message(content),
                status=resp.status_code,
            )
        try:
            async for chunk in gen:
                yield chunk
                clock.got_audio()
        finally:
            await gen.aclose()
    finally:
        await resp.aclose()  # before the body is read to the end this closes the socket


async def whole_file(server: RemoteServer, body: dict[str, Any], request_id: str) -> Audio:
    """POST a non-streaming request and decode the file it answers with."""
    import httpx

    o = server.options
    timeout = httpx.Timeout(
        o.first_audio_timeout + 600.0, connect=o.connect_timeout, pool=o.connect_timeout
    )
    try:
        r = await server.http().post(
            server.url(SPEECH),
            json=body,
            headers={"Accept": "audio/*, application/json", "X-Request-Id": request_id},
            timeout=timeout,
        )
    except httpx.TimeoutException as e:
        raise StreamTimeout(f"{server.base_url} did not return the file in time ({e!r})") from None
    except httpx.HTTPError as e:
        raise BackendError(f"cannot reach {server.base_url}: {e!r}") from None
    if r.status_code >= 400:
        raise BackendError(error_message(r.content, r.status_code), status=r.status_code)
    ctype = r.headers.get("content-type", "").split(";")[0].strip().lower()
    if not ctype.startswith("audio/"):
        raise BackendError(
            f"unexpected {r.status_code} response of type {ctype or 'unknown'}: "
            + error_message(r.content),
            status=r.status_code,
        )
    server.record_usage(request_id, usage_from_headers(r.headers))
    x, sr = decode_file(r.content, f"{ctype} body")
    if not len(x):
        raise BackendError("the server returned an empty audio file")
    server.check_rate(sr)
    return Audio(x, sr)


__all__ = ["SPEECH", "stream_http", "whole_file"]
