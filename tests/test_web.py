"""Web plumbing on real servers: one TLS rule for every cookie, one error shape.

The identity cookie used to believe ``X-Forwarded-Proto`` from anyone while the admin cookie
believed it from trusted proxies only; both now ask :class:`app.web.proxies.Proxies`.
"""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.web.errors import install_error_handler
from app.web.identity import IdentityMiddleware
from app.web.proxies import Proxies
from backends.errors import Conflict, NotFound, TooMany
from tests.support.remote_util import serve_app


def _page(_request):
    return PlainTextResponse("ok")


def _cookie_app(trusted: list[str]) -> Starlette:
    app = Starlette(routes=[Route("/", _page)])
    app.add_middleware(IdentityMiddleware, proxies=Proxies.parse(trusted))
    return app


def _set_cookie(url: str, **headers: str) -> str:
    r = httpx.get(url + "/", headers=headers, trust_env=False)
    assert r.status_code == 200
    return r.headers["set-cookie"]


def test_owner_cookie_is_secure_only_when_a_trusted_proxy_says_tls():
    with serve_app(_cookie_app([])) as url:  # nobody trusted: the header is a claim, ignored
        plain = _set_cookie(url)
        claimed = _set_cookie(url, **{"X-Forwarded-Proto": "https"})
    assert "SameSite=Lax" in plain and "Secure" not in plain
    assert "SameSite=Lax" in claimed and "Secure" not in claimed
    with serve_app(_cookie_app(["127.0.0.1/32"])) as url:  # the loopback peer is the proxy
        via_proxy = _set_cookie(url, **{"X-Forwarded-Proto": "https"})
        plain_proxy = _set_cookie(url, **{"X-Forwarded-Proto": "http"})
    assert "Secure" in via_proxy and "SameSite=None" in via_proxy and "Partitioned" in via_proxy
    assert "Secure" not in plain_proxy
    assert via_proxy.startswith("ll_owner=") and "HttpOnly" in via_proxy


def test_errors_answer_with_their_status_and_one_shape():
    from fastapi import FastAPI

    app = FastAPI()
    install_error_handler(app)

    @app.get("/missing")
    async def missing():
        raise NotFound("no such take")

    @app.get("/again")
    async def again():
        raise Conflict("this item is already answered")

    @app.get("/busy")
    async def busy():
        raise TooMany("slow down", retry_after_s=2.2)

    with serve_app(app) as url:
        r404 = httpx.get(url + "/missing", trust_env=False)
        r409 = httpx.get(url + "/again", trust_env=False)
        r429 = httpx.get(url + "/busy", trust_env=False)
    assert r404.status_code == 404
    assert r404.json() == {"error": "no such take", "detail": "no such take", "reason": "not_found"}
    assert r409.status_code == 409 and r409.json()["reason"] == "conflict"
    assert r429.status_code == 429 and r429.headers["retry-after"] == "3"
    assert r429.json()["retry_after_s"] == 3 and r429.json()["detail"] == "slow down"
