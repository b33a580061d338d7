"""What every request passes before a route sees it: Host and Origin checks, and body limits.

Why here, as plain ASGI middleware: the Playground (``listenlab serve``, with Gradio mounted on
it) and ``listenlab api`` both run as public servers, and a limit that a route applies after
reading the body is too late (a 200 MB JSON body is in memory by then).

* **Host** (DNS rebinding): a request whose ``Host`` is not one of the allowed names (nor an IP
  address) gets 403. Default: the bound host, ``localhost``, ``$SPACE_HOST`` (set by Hugging
  Face on a Space) and ``$LISTENLAB_ALLOWED_HOSTS`` (comma-separated); ``*`` allows any.
* **Origin** on WebSockets: a browser always sends it; it must name the page's own host (the
  request's ``Host``) or an allowed origin. No ``Origin`` (a script, not a browser) is allowed.
* **Cross-site writes**: POST/PUT/PATCH/DELETE with ``Sec-Fetch-Site: cross-site`` or with a
  foreign ``Origin`` get 403, so another site cannot make a visitor's browser delete voices.
* **Body size** per route (``Content-Length`` first, then counted while reading): 413.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

ENV_ALLOWED_HOSTS = "LISTENLAB_ALLOWED_HOSTS"
ENV_ALLOWED_ORIGINS = "LISTENLAB_ALLOWED_ORIGINS"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "testserver")
"""``testserver`` is Starlette's TestClient; a single-label name no public site can have."""
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_JSON_DEPTH = 32
"""Deepest nesting accepted in a JSON body or message (no request needs more than 3)."""

ErrorBody = Callable[[str, int], dict[str, Any]]


def simple_error(message: str, status: int) -> dict[str, Any]:
    """The Playground's error shape: ``{"error": message}``."""
    return {"error": message}


def _split_list(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def _host_only(hostport: str) -> str:
    """``Host`` header value -> lower-case host without port (IPv6 brackets removed)."""
    h = hostport.strip().lower()
    if h.startswith("["):
        return h[1 : h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def default_allowed_hosts(bound: str | None = None, extra: Iterable[str] = ()) -> list[str]:
    """Bound host + localhost + ``$SPACE_HOST`` + ``$LISTENLAB_ALLOWED_HOSTS`` + ``extra``."""
    hosts = list(LOCAL_HOSTS)
    if bound and bound not in ("0.0.0.0", "::", ""):
        hosts.append(bound)
    if os.environ.get("SPACE_HOST"):
        hosts.append(os.environ["SPACE_HOST"])
    hosts += _split_list(os.environ.get(ENV_ALLOWED_HOSTS))
    hosts += list(extra)
    return list(dict.fromkeys(_host_only(h) if h != "*" else "*" for h in hosts))


@dataclass(frozen=True)
class GuardConfig:
    """Hosts and origins a server answers, and its body limit per route."""

    allowed_hosts: Sequence[str] = field(default_factory=default_allowed_hosts)
    allowed_origins: Sequence[str] = field(
        default_factory=lambda: _split_list(os.environ.get(ENV_ALLOWED_ORIGINS))
    )
    """Extra page origins (``https://example.org``) whose pages may use the WebSockets."""
    body_limits: Sequence[tuple[str, str, int]] = ()
    """``(method or "*", path, max bytes)``; a path ending in ``/`` is a prefix, any other must
    match exactly; the first match wins."""
    default_body_limit: int = 64 * 1024
    error_body: ErrorBody = simple_error

    def host_ok(self, host_header: str | None) -> bool:
        """An allowed name, or an IP literal: DNS rebinding needs a *name* that resolves to
        us, so an address in ``Host`` (a health check, a LAN or Docker user) is no risk."""
        if "*" in self.allowed_hosts:
            return True
        if not host_header:
            return False
        host = _host_only(host_header)
        if host in self.allowed_hosts:
            return True
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return True

    def origin_ok(self, origin: str | None, host_header: str | None) -> bool:
        """Same origin as the page's host, or an allowed origin; no Origin is not a browser."""
        if origin is None:
            return True
        o = origin.strip().lower()
        if o == "null":
            return False
        parts = urlsplit(o)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
            return False
        if host_header and parts.netloc == host_header.strip().lower():
            return True
        return o.rstrip("/") in {a.lower().rstrip("/") for a in self.allowed_origins}

    def body_limit(self, method: str, path: str) -> int:
        for m, prefix, limit in self.body_limits:
            hit = path.startswith(prefix) if prefix.endswith("/") else path == prefix
            if (m == "*" or m == method) and hit:
                return limit
        return self.default_body_limit


class _TooLarge(Exception):
    pass


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


class GuardMiddleware:
    """ASGI middleware applying a :class:`GuardConfig` to every HTTP request and WebSocket."""

    def __init__(self, app: Any, config: GuardConfig):
        self.app = app
        self.config = config

    async def _reject_http(self, send, status: int, message: str) -> None:
        body = json.dumps(self.config.error_body(message, status)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _reject_ws(self, scope, receive, send, message: str) -> None:
        msg = await receive()  # websocket.connect
        if msg.get("type") != "websocket.connect":
            return
        try:  # a 403 answer to the handshake (websocket.http.response extension) ...
            if "websocket.http.response" not in scope_extensions(scope):
                raise RuntimeError
            body = json.dumps(self.config.error_body(message, 403)).encode()
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": 403,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "websocket.http.response.body", "body": body})
        except RuntimeError:  # ... or a plain refusal (the server answers 403)
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})

    async def __call__(self, scope, receive, send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        h = _headers(scope)
        host = h.get("host")
        cfg = self.config
        if not cfg.host_ok(host):
            msg = (
                f"host {host!r} is not allowed here; allowed: {', '.join(cfg.allowed_hosts)} "
                f"(add it with --allowed-hosts or ${ENV_ALLOWED_HOSTS})"
            )
            if kind == "http":
                return await self._reject_http(send, 403, msg)
            return await self._reject_ws(scope, receive, send, msg)
        if kind == "websocket":
            if not cfg.origin_ok(h.get("origin"), host):
                return await self._reject_ws(
                    scope,
                    receive,
                    send,
                    f"origin {h.get('origin')!r} may not open this WebSocket (only pages of "
                    f"this server, or --allowed-origins)",
                )
            return await self.app(scope, receive, send)
        method = scope.get("method", "GET")
        if method in UNSAFE_METHODS:
            site = h.get("sec-fetch-site", "").lower()
            if site == "cross-site" or not cfg.origin_ok(h.get("origin"), host):
                return await self._reject_http(
                    send, 403, "cross-site request refused: this action is only for this site"
                )
        limit = cfg.body_limit(method, scope.get("path", ""))
        cl = h.get("content-length")
        too_large = f"the request body is over the {limit:,} byte limit of this route"
        if cl is not None:
            try:
                if int(cl) > limit:
                    return await self._reject_http(send, 413, too_large)
            except ValueError:
                return await self._reject_http(send, 400, "bad Content-Length")
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            msg = await receive()
            if msg.get("type") == "http.request":
                received += len(msg.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return msg

        async def tracking_send(msg):
            nonlocal started
            if msg.get("type") == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject_http(send, 413, too_large)


def scope_extensions(scope: dict[str, Any]) -> dict[str, Any]:
    return scope.get("extensions") or {}


# --------------------------------------------------------------------------- CLI


def add_host_args(p: argparse.ArgumentParser) -> None:
    """``--allowed-hosts`` / ``--allowed-origins``, shared by ``serve`` and ``api``."""
    p.add_argument(
        "--allowed-hosts",
        action="append",
        default=[],
        metavar="HOSTS",
        help="comma-separated Host names to answer besides the bound host, localhost and "
        "$SPACE_HOST (also $LISTENLAB_ALLOWED_HOSTS); '*' answers any (not for public servers)",
    )
    p.add_argument(
        "--allowed-origins",
        action="append",
        default=[],
        metavar="ORIGINS",
        help="comma-separated page origins (https://example.org) whose pages may open the "
        "WebSockets, besides the server's own pages (also $LISTENLAB_ALLOWED_ORIGINS)",
    )


def hosts_from_args(args: argparse.Namespace, bound: str) -> tuple[list[str], list[str] | None]:
    extra = [h.strip() for v in args.allowed_hosts for h in v.split(",") if h.strip()]
    origins = [o.strip() for v in args.allowed_origins for o in v.split(",") if o.strip()]
    hosts = default_allowed_hosts(bound, extra)
    if bound in ("0.0.0.0", "::") and not extra and not os.environ.get("SPACE_HOST"):
        print(
            "listenlab: bound to all interfaces; answered Host names: "
            f"{', '.join(hosts)} and any IP address. Add your domain with --allowed-hosts.",
            flush=True,
        )
    if origins:
        origins += [o for o in os.environ.get(ENV_ALLOWED_ORIGINS, "").split(",") if o.strip()]
    return hosts, (origins or None)


# --------------------------------------------------------------------------- JSON


class JsonTooDeep(ValueError):
    pass


def json_depth_ok(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Iterative depth check (a recursive one would itself overflow on hostile input)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            if d > max_depth:
                return False
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            if d > max_depth:
                return False
            stack.extend((x, d + 1) for x in v)
    return True


def loads_limited(raw: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` with a clear ValueError."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep(f"JSON nested too deeply (the limit is {max_depth} levels)") from None
    if not json_depth_ok(data, max_depth):
        raise JsonTooDeep(f"JSON nested too deeply (the limit is {max_depth} levels)")
    return data


__all__ = [
    "ENV_ALLOWED_HOSTS",
    "ENV_ALLOWED_ORIGINS",
    "MAX_JSON_DEPTH",
    "add_host_args",
    "hosts_from_args",
    "GuardConfig",
    "GuardMiddleware",
    "JsonTooDeep",
    "default_allowed_hosts",
    "json_depth_ok",
    "loads_limited",
    "simple_error",
]
