"""Who owns what: a browser session's owner id (a random HttpOnly cookie), or a rater token's.

Why: on a public Space strangers save clips of real people's voices. A saved voice or take
belongs to the browser session that made it; only that session (or the admin, see
:mod:`app.admin`) may list its clip and transcript, download, rename or delete it.

* The cookie ``ll_owner`` holds a random 32-byte token, set on the first page load (any HTTP
  response) and read on the WebSocket. It is ``HttpOnly``; ``SameSite=Lax`` over http, and
  ``SameSite=None; Secure; Partitioned`` over https so a Space embedded in huggingface.co's
  iframe keeps it (cross-site writes are refused by :mod:`app.guard` anyway).
* What is stored is never the token but its hash, ``owner_id = "s:" + sha256(token)[:32]``: a
  leaked voice folder or DB row does not let anyone act as its owner.
* A listening-test rater token maps to ``"r:" + sha256(token)[:32]`` with
  :func:`owner_for_rater`, so a rater can own things the same way.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import HTTPConnection

COOKIE = "ll_owner"
COOKIE_MAX_AGE_S = 180 * 24 * 3600
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{40,64}$")
_SCOPE_KEY = "ll_owner_token"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:32]


def owner_for_token(token: str) -> str:
    return "s:" + _hash(token)


def owner_for_rater(rater_token: str) -> str:
    """The owner id of a listening-test rater (their token, never stored in clear)."""
    return "r:" + _hash(rater_token)


def _cookie_token(cookie_header: str | None) -> str | None:
    if not cookie_header:
        return None
    c: SimpleCookie = SimpleCookie()
    try:
        c.load(cookie_header)
    except Exception:
        return None
    m = c.get(COOKIE)
    return m.value if m is not None and _TOKEN_RE.match(m.value) else None


@dataclass(frozen=True)
class Identity:
    owner_id: str
    """``s:<hash>`` for a browser session, ``r:<hash>`` for a rater, ``e:<random>`` for a
    client without a cookie (a script): nothing it makes can be found again by anyone else."""
    persistent: bool


def identity(conn: HTTPConnection) -> Identity:
    """The owner id of this request or WebSocket (from the cookie, or the one just issued)."""
    token = _cookie_token(conn.headers.get("cookie"))
    if token is None:
        token = conn.scope.get(_SCOPE_KEY)  # issued by the middleware on this very request
    if token is None:
        return Identity("e:" + secrets.token_hex(16), False)
    return Identity(owner_for_token(token), True)


class IdentityMiddleware:
    """Sets ``ll_owner`` on any HTTP response to a request that did not carry one."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        cookie = next((v for k, v in scope.get("headers", []) if k.lower() == b"cookie"), b"")
        if _cookie_token(cookie.decode("latin-1")) is not None:
            return await self.app(scope, receive, send)
        token = secrets.token_urlsafe(32)
        scope[_SCOPE_KEY] = token
        proto = next((v for k, v in scope.get("headers", []) if k == b"x-forwarded-proto"), b"")
        # A Space's proxy ends TLS and forwards plain http: its header says what the browser saw.
        secure = scope.get("scheme") == "https" or proto.split(b",")[0].strip() == b"https"
        attrs = f"{COOKIE}={token}; Path=/; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; " + (
            "SameSite=None; Secure; Partitioned" if secure else "SameSite=Lax"
        )

        async def with_cookie(msg):
            if msg.get("type") == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), (b"set-cookie", attrs.encode())]}
            await send(msg)

        await self.app(scope, receive, with_cookie)


__all__ = [
    "COOKIE",
    "Identity",
    "IdentityMiddleware",
    "identity",
    "owner_for_rater",
    "owner_for_token",
]
