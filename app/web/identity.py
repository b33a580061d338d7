"""Who owns what: a browser session's owner id (a random HttpOnly cookie), or a rater token's.

Why: on a public Space strangers save clips of real people's voices. A saved voice or take
belongs to the browser session that made it; only that session (or the admin, see
:mod:`app.web.admin`) may list its clip and transcript, download, rename or delete it.

* The cookie ``ll_owner`` holds a random 32-byte token, set on the first page load (any HTTP
  response) and read on the WebSocket. It is ``HttpOnly``; ``SameSite=Lax`` over http, and
  ``SameSite=None; Secure; Partitioned`` over https so a Space embedded in huggingface.co's
  iframe keeps it (cross-site writes are refused by :mod:`app.web.guard` anyway).
* What is stored is never the token but its hash, ``owner_id = "s:" + sha256(token)[:32]``: a
  leaked voice folder or DB row does not let anyone act as its owner.
* A listening-test rater token maps to ``"r:" + sha256(token)[:32]`` with
  :func:`owner_for_rater`, so a rater can own things the same way.
* On a Space with Hugging Face login (``hf_oauth: true``: ``$OAUTH_CLIENT_ID`` is set), the
  visitor's HF user name is read from Gradio's signed ``session`` cookie (:func:`hf_user`), the
  identity that costs something (an account) that the arena counts votes by.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import HTTPConnection

from app.config import WebSettings
from app.web.proxies import Proxies

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


HF_SESSION_COOKIE = "session"
HF_SESSION_MAX_AGE_S = 14 * 24 * 3600
"""Starlette's SessionMiddleware defaults, as Gradio's ``attach_oauth`` uses them."""


def hf_login_configured(settings: WebSettings | None = None) -> bool:
    """The Space has Hugging Face login (OAuth) enabled (``settings``: the app's, read once;
    else the environment's now)."""
    web = settings if settings is not None else WebSettings.from_env()
    return bool(web.hf_client_id)


def hf_user(conn: HTTPConnection, settings: WebSettings | None = None) -> str | None:
    """The Hugging Face user name of this request's Gradio login session, or None.

    Gradio (``gradio.oauth.attach_oauth``) keeps ``oauth_info`` in Starlette's session cookie,
    signed with ``sha256($OAUTH_CLIENT_SECRET + "-v4")``; the signature is checked here with the
    same key (itsdangerous, installed with ``gradio[oauth]``), so a forged cookie is no login.
    """
    web = settings if settings is not None else WebSettings.from_env()
    raw = conn.cookies.get(HF_SESSION_COOKIE)
    if not raw or not hf_login_configured(web):
        return None
    try:
        import itsdangerous
    except ImportError:  # gradio[oauth] not installed: there is no login to read
        return None
    secret = hashlib.sha256((web.hf_client_secret + "-v4").encode()).hexdigest()
    try:
        data = itsdangerous.TimestampSigner(secret).unsign(raw, max_age=HF_SESSION_MAX_AGE_S)
        info = json.loads(base64.b64decode(data)).get("oauth_info") or {}
        if float(info.get("expires_at") or 0) and float(info["expires_at"]) < time.time():
            return None  # the login expired (Gradio drops it the same way)
        name = (info.get("userinfo") or {}).get("preferred_username")
    except (itsdangerous.BadSignature, ValueError, AttributeError, TypeError):
        return None
    return name if isinstance(name, str) and 0 < len(name) <= 96 else None


class IdentityMiddleware:
    """Sets ``ll_owner`` on any HTTP response to a request that did not carry one.

    The cookie is ``Secure`` (and ``SameSite=None; Partitioned``, for a Space framed by
    huggingface.co) when the browser's request came over TLS, by the one rule of
    :class:`app.web.proxies.Proxies`: a Space's proxy ends TLS and says so in
    ``X-Forwarded-Proto``, which is believed from a trusted proxy only.
    """

    def __init__(self, app: Any, proxies: Proxies | None = None):
        self.app = app
        self.proxies = proxies if proxies is not None else Proxies.from_env()

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        cookie = next((v for k, v in scope.get("headers", []) if k.lower() == b"cookie"), b"")
        if _cookie_token(cookie.decode("latin-1")) is not None:
            return await self.app(scope, receive, send)
        token = secrets.token_urlsafe(32)
        scope[_SCOPE_KEY] = token
        secure = self.proxies.is_tls(scope)
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
    "hf_login_configured",
    "hf_user",
    "IdentityMiddleware",
    "identity",
    "owner_for_rater",
    "owner_for_token",
]
