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
* **Cross-site admin requests**: any request to an admin route that a browser marks as coming
  from another site (``Sec-Fetch-Site: cross-site`` or ``same-site``) gets 403, unless it opens
  an admin *page* (a navigation, as huggingface.co's frame does): another site cannot make a
  logged-in admin's browser build ``snapshot.zip`` or ``export.zip``.
* **Framing**: every answer says which sites may show it in a frame
  (``Content-Security-Policy: frame-ancestors 'self' …``; ``X-Frame-Options: SAMEORIGIN`` when
  no other site may), so no other site can frame the admin pages and click for the admin.
* **Body size** per route (``Content-Length`` first, then counted while reading): 413.
* **Closed routes** (e.g. Gradio's upload route of an app with no upload component): 404.
* **No credentialed CORS**: a response to a foreign ``Origin`` loses its
  ``Access-Control-Allow-*`` headers (Gradio answers ``localhost`` origins with credentials).

Who the client is, and whether it came over TLS, is :mod:`app.web.proxies`; JSON and id limits
inside a body are :mod:`app.web.inputs`; rate limits are :mod:`app.web.ratelimit`.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from app.config import ENV_ALLOWED_HOSTS, ENV_ALLOWED_ORIGINS, WebSettings

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OTHER_SITE = frozenset({"cross-site", "same-site"})
"""``Sec-Fetch-Site`` values of a request another site's page made (``same-site``: another
subdomain, such as another Space on the same parent domain)."""
PAGE_DESTS = frozenset({"document", "iframe", "frame"})

ErrorBody = Callable[[str, int], dict[str, Any]]

REFUSALS = {
    400: "Bad Content-Length (the guard)",
    403: "A Host not allowed here, or a cross-site write or admin request (the guard)",
    413: "The body is over this route's byte limit (the guard)",
}
"""What the guard may answer on any route before the route runs (``/openapi.json`` declares
them on every operation, :func:`app.web.openapi.install`)."""


def simple_error(message: str, status: int) -> dict[str, Any]:
    """The Playground's error shape: ``{"error": message}``."""
    return {"error": message}


def _host_only(hostport: str) -> str:
    """``Host`` header value -> lower-case host without port (IPv6 brackets removed)."""
    h = hostport.strip().lower()
    if h.startswith("["):
        return h[1 : h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def default_allowed_hosts(
    bound: str | None = None, extra: Iterable[str] = (), settings: WebSettings | None = None
) -> list[str]:
    """Bound host + localhost + ``$SPACE_HOST`` + ``$LISTENLAB_ALLOWED_HOSTS`` + ``extra``
    (``settings``: the app's, read once; else the environment's now)."""
    web = settings if settings is not None else WebSettings.from_env()
    hosts = list(LOCAL_HOSTS)
    if bound and bound not in ("0.0.0.0", "::", ""):
        hosts.append(bound)
    if web.space_host:
        hosts.append(web.space_host)
    hosts += list(web.allowed_hosts)
    hosts += list(extra)
    return list(dict.fromkeys(_host_only(h) if h != "*" else "*" for h in hosts))


@dataclass(frozen=True)
class GuardConfig:
    """Hosts and origins a server answers, and its body limit per route."""

    allowed_hosts: Sequence[str] = field(default_factory=default_allowed_hosts)
    allowed_origins: Sequence[str] = field(
        default_factory=lambda: list(WebSettings.from_env().allowed_origins)
    )
    """Extra page origins (``https://example.org``) whose pages may use the WebSockets."""
    body_limits: Sequence[tuple[str, str, int]] = ()
    """``(method or "*", path, max bytes)``; a path ending in ``/`` is a prefix, any other must
    match exactly; the first match wins."""
    default_body_limit: int = 64 * 1024
    error_body: ErrorBody = simple_error
    closed: Sequence[tuple[str, str]] = ()
    """``(method or "*", exact path)`` answered 404 (a route no page of this server needs)."""
    frame_ancestors: Sequence[str] | None = None
    """Origins besides the page's own that may frame this server's answers; None: no header
    (``listenlab api`` serves no pages)."""
    admin_paths: Sequence[str] = ()
    """Admin routes (a path ending in ``/`` is a prefix): refused to another site's requests."""
    admin_pages: Sequence[str] = ()
    """Admin pages (exact paths) another site may still open as a page (huggingface.co frames
    the Space): only a navigation, never a fetch, an image or a download from another page."""

    def frame_headers(self) -> list[tuple[bytes, bytes]]:
        """``frame-ancestors`` (and ``X-Frame-Options`` when only this site may frame)."""
        if self.frame_ancestors is None:
            return []
        others = " ".join(self.frame_ancestors)
        csp = f"frame-ancestors 'self' {others}".strip()
        headers = [(b"content-security-policy", csp.encode("latin-1"))]
        if not self.frame_ancestors:
            headers.append((b"x-frame-options", b"SAMEORIGIN"))
        return headers

    def other_site_refused(self, path: str, h: dict[str, str]) -> bool:
        """An admin route asked from another site's page (``Sec-Fetch-Site``), other than a
        navigation to an admin page. Scripts send no ``Sec-Fetch-*`` and are not concerned."""
        if h.get("sec-fetch-site", "").lower() not in OTHER_SITE:
            return False
        if not any(path.startswith(p) if p.endswith("/") else path == p for p in self.admin_paths):
            return False
        navigation = (
            h.get("sec-fetch-mode", "").lower() == "navigate"
            and h.get("sec-fetch-dest", "").lower() in PAGE_DESTS
        )
        return not (navigation and path in self.admin_pages)

    def is_closed(self, method: str, path: str) -> bool:
        return any((m == "*" or m == method) and path == p for m, p in self.closed)

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
            scope[ABORT_KEY] = _aborter(send)
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
        if cfg.is_closed(method, scope.get("path", "")):
            return await self._reject_http(send, 404, "this route is closed on this server")
        if cfg.other_site_refused(scope.get("path", ""), h):
            return await self._reject_http(
                send, 403, "cross-site request refused: admin routes answer this site's own pages"
            )
        if cfg.frame_ancestors is not None:
            send = _with_headers(send, cfg.frame_headers())
        origin = h.get("origin")
        if origin is not None and not cfg.origin_ok(origin, host):
            send = _without_cors(send)  # no foreign page may read answers with our cookies
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


ABORT_KEY = "listenlab.abort"
"""Scope key of a callable that drops a WebSocket's connection at once (see :func:`_aborter`)."""


def _aborter(send) -> Callable[[], bool]:
    """A way to drop the TCP connection under a WebSocket, for a client that stopped reading.

    A close frame cannot reach such a client (it waits behind unread data), and the server's
    ``transport.close()`` waits for the buffer to drain, so the socket would linger. uvicorn's
    ``send`` is a method of its protocol object, which holds the asyncio transport; this is the
    one place that reaches it (False when the server is another one: then nothing is done)."""

    def abort() -> bool:
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        if transport is None or not hasattr(transport, "abort"):
            return False
        transport.abort()
        return True

    return abort


def _with_headers(send, extra: list[tuple[bytes, bytes]]):
    """``send`` adding ``extra`` response headers (replacing any of the same names)."""
    names = {k for k, _ in extra}

    async def add(msg):
        if msg.get("type") == "http.response.start":
            kept = [(k, v) for k, v in msg.get("headers", []) if k.lower() not in names]
            msg = {**msg, "headers": kept + extra}
        await send(msg)

    return add


def _without_cors(send):
    """``send`` with every ``Access-Control-Allow-*`` response header removed."""

    async def strip(msg):
        if msg.get("type") == "http.response.start":
            headers = [
                (k, v)
                for k, v in msg.get("headers", [])
                if not k.lower().startswith(b"access-control-allow-")
            ]
            msg = {**msg, "headers": headers}
        await send(msg)

    return strip


__all__ = [
    "ABORT_KEY",
    "ENV_ALLOWED_HOSTS",
    "ENV_ALLOWED_ORIGINS",
    "GuardConfig",
    "GuardMiddleware",
    "REFUSALS",
    "default_allowed_hosts",
    "simple_error",
]
